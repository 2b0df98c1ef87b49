"""`compile`/`jit` with JAX's `static_argnums` / `static_argnames`, and the dot
family's `precision` / `preferred_element_type` (issue 26).

A static argument reaches the function as the Python value itself, its value is
part of the cache key (each new value traces once), and an unhashable value is a
ValueError, as in `jax.jit`. Compared against jax.jit where installed.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tracegrad as tg

INTERP = dict(backend="interpret")


def power_or_identity(x, n):
    if n > 1:  # Python control flow on the static value
        return x**n
    return x


def test_static_argnums_control_flow_and_retrace_per_value():
    f = tg.jit(power_or_identity, static_argnums=1, **INTERP)
    x = np.array([2.0, 3.0])
    np.testing.assert_array_equal(f(x, 3), x**3)
    np.testing.assert_array_equal(f(x, 1), x)
    np.testing.assert_array_equal(f(x, 3), x**3)
    assert f.cache_info().traces == 2  # one per static value
    assert f.cache_info().hits == 1


def test_static_value_types_are_distinct_keys():
    seen = []

    def f(x, n):
        seen.append(type(n))
        return x * n

    g = tg.compile(f, static_argnums=(1,), **INTERP)
    x = np.ones(2)
    g(x, 2)
    g(x, 2.0)
    g(x, True)
    assert seen == [int, float, bool]  # 2 == 2.0 == True, still three traces


def test_static_argnames_and_inferred_names():
    @functools.partial(tg.jit, static_argnames=("shape",), **INTERP)
    def reshape_twice(x, shape):
        return tg.reshape(x, shape) * 2.0

    x = np.arange(6.0)
    np.testing.assert_array_equal(reshape_twice(x, shape=(2, 3)), 2 * x.reshape(2, 3))
    # static_argnames also covers the parameter passed by position (JAX infers it)
    np.testing.assert_array_equal(reshape_twice(x, (3, 2)), 2 * x.reshape(3, 2))
    # and static_argnums covers the parameter passed by keyword
    f = tg.jit(power_or_identity, static_argnums=1, **INTERP)
    np.testing.assert_array_equal(f(np.array([2.0]), n=3), [8.0])
    assert f.static_argnames == ("n",)


def test_decorator_forms():
    @tg.jit(static_argnums=(1,), **INTERP)
    def scale(x, k):
        return x * k

    @functools.partial(tg.compile, static_argnums=1, **INTERP)
    def take(x, i):
        return x[i]

    np.testing.assert_array_equal(scale(np.ones(2), 3), [3.0, 3.0])
    np.testing.assert_array_equal(take(np.arange(4.0), 2), 2.0)


def test_unhashable_static_argument_is_a_clear_value_error():
    f = tg.jit(power_or_identity, static_argnums=1, **INTERP)
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        f(np.ones(2), np.array(3))
    with pytest.raises(ValueError, match="unhashable type: 'list'"):
        f(np.ones(2), [1, 2])


def test_static_argnums_out_of_range_for_the_signature():
    with pytest.raises(ValueError, match="static_argnums=\\(2,\\), but only accepts 2"):
        tg.jit(power_or_identity, static_argnums=2)


def test_static_with_grad_and_implicit_inputs():
    W = np.ones(2)
    f = tg.jit(lambda x, k: tg.sum(x * W) ** k, static_argnums=1, **INTERP)
    x = np.array([1.0, 2.0])
    assert float(f(x, 2)) == 9.0
    W *= 2  # a closed-over array is still read on every call
    assert float(f(x, 2)) == 36.0
    g = tg.grad(lambda x: f(x, 3), **INTERP)(x)
    np.testing.assert_allclose(g, 3 * 6.0**2 * W)


def test_donate_argnums_is_accepted():
    f = tg.jit(lambda x: x + 1.0, donate_argnums=0, **INTERP)
    np.testing.assert_array_equal(f(np.zeros(2)), [1.0, 1.0])


def test_same_function_shares_one_compiled_per_value():
    def f(x, n):
        return x * n

    a = tg.jit(f, static_argnums=1, **INTERP)
    b = tg.jit(f, static_argnums=1, **INTERP)
    assert a is b  # jit inside a loop does not retrace


def test_matches_jax_jit_static_argnums():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def mlp(params, x, depth, act):
        for _ in range(depth):
            x = act(x @ params)
        return x

    params = np.random.default_rng(0).normal(size=(3, 3))
    x = np.random.default_rng(1).normal(size=(2, 3))
    ours = tg.jit(mlp, static_argnums=(2, 3), **INTERP)
    theirs = jax.jit(mlp, static_argnums=(2, 3))
    for depth in (1, 3):
        np.testing.assert_allclose(
            ours(params, x, depth, tg.tanh), theirs(params, x, depth, jnp.tanh), rtol=1e-12
        )


@pytest.mark.parametrize("name", ["dot", "matmul", "inner", "vdot", "tensordot"])
def test_precision_is_accepted_and_ignored(name):
    a = np.random.default_rng(0).normal(size=(3, 3))
    b = np.random.default_rng(1).normal(size=(3, 3))
    op = getattr(tg, name)
    expected = op(a, b)
    for precision in ("highest", "default", ("high", "high"), None):
        np.testing.assert_array_equal(op(a, b, precision=precision), expected)
    compiled = tg.jit(lambda a, b: op(a, b, precision="highest"), **INTERP)
    np.testing.assert_allclose(compiled(a, b), expected, rtol=1e-14)
    with pytest.raises(ValueError, match=f"{name}: precision must be"):
        op(a, b, precision="hihg")


def test_precision_matches_jax_and_preferred_element_type():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(3.0)
    p = jax.lax.Precision.HIGHEST
    np.testing.assert_allclose(tg.dot(a, b, precision=p), jnp.dot(a, b, precision=p))
    np.testing.assert_allclose(
        tg.einsum("ij,j->i", a, b, precision="highest"), jnp.einsum("ij,j->i", a, b)
    )
    ints = np.arange(6).reshape(2, 3)
    ours = tg.matmul(ints, np.arange(3), preferred_element_type=np.float64)
    theirs = jnp.matmul(ints, jnp.arange(3), preferred_element_type=jnp.float64)
    assert ours.dtype == theirs.dtype == np.float64
    np.testing.assert_array_equal(ours, theirs)


# ------------------------------------------- JAX's tests/api_test.py (JitTest), ported
def test_jit_static_args():
    """JAX's test_jit_static_args, its NumPy-array parametrization (with Python ints,
    tracegrad keeps x, y, z static too, so each new value traces: its own rule for
    Python scalars, see compile's docstring)."""
    one, two, three = (np.asarray(v, np.int32) for v in (1, 2, 3))
    side = []

    def f(x, y, z, flag=False, flag2=False):
        del flag2  # unused
        assert flag
        side.append(None)
        return 100 * x + 10 * y + z

    f1 = tg.jit(f, static_argnums=(3, 4), **INTERP)
    assert f1(one, two, three, True, False) == 123
    assert len(side) == 1
    assert f1(one, two, three, True, False) == 123
    assert len(side) == 1  # Obvious cache hit.
    assert f1(two, one, three, True, False) == 213
    assert len(side) == 1  # Should cache hit because same signature.
    assert f1(two, one, three, True, True) == 213
    assert len(side) == 2

    side[:] = []
    f2 = tg.jit(f, static_argnums=(0, 2, 3, 4), **INTERP)
    assert f2(1, two, 3, True, False) == 123
    assert len(side) == 1
    assert f2(1, three, 3, True, False) == 133
    assert len(side) == 1
    assert f2(2, two, 3, True, False) == 223
    assert len(side) == 2
    assert f2(2, np.asarray(4, np.int32), 3, True, False) == 243
    assert len(side) == 2
    assert f2(2, np.asarray(4, np.int32), 3, True, True) == 243
    assert len(side) == 3


def test_static_args_equality():
    class A:
        def __hash__(self):
            return 1

        def __eq__(self, other):
            return isinstance(other, A)

    side = []

    def f(x, static_arg):
        del static_arg
        side.append(None)
        return x * 100

    f1 = tg.jit(f, static_argnums=(1,), **INTERP)
    assert f1(np.float64(1), A()) == 100
    assert len(side) == 1
    assert f1(np.float64(1), A()) == 100
    assert len(side) == 1


def test_jit_argnums_overflow_error():
    def f(a, b, c): ...

    def g(a, /, b, *, c): ...

    def h(a, *args): ...

    def i(): ...

    tg.jit(f, static_argnums=(0, 1))
    tg.jit(g, static_argnums=(0, 1))
    tg.jit(f, static_argnums=(0, 1, -3))
    for fn, nums in ((f, (0, 1, 3)), (f, (0, 1, -4)), (g, (0, 1, 3)), (g, (0, 1, -3))):
        with pytest.raises(ValueError):
            tg.jit(fn, static_argnums=nums)
    tg.jit(h, static_argnums=(0, 999))
    tg.jit(h, static_argnums=(0, -999))
    tg.jit(i, static_argnums=())
    tg.jit(i)


def test_jit_argnames_validation():
    def f(a, b, c): ...

    def g(a, b, **kwargs): ...

    def h(a, /, b, c, *args, **kwargs): ...

    tg.jit(f, static_argnames=("b", "c"))
    with pytest.raises(ValueError):
        tg.jit(f, static_argnames=("b", "c", "not_defined"))
    tg.jit(g, static_argnames=("a", "b", "not_defined"))
    tg.jit(h, static_argnames=("b", "c"))
    tg.jit(h, static_argnames=("b", "c", "not_defined"))
    with pytest.raises(ValueError):  # positional only
        tg.jit(h, static_argnames=("a", "c"))
    with pytest.raises(ValueError):  # var positional
        tg.jit(h, static_argnames=("args", "c"))


def test_jit_donate_static_argnums():
    """JAX's test_jit_donate_static_argnums (donation is accepted and ignored: the
    inputs stay usable, as on a backend without donation)."""
    jit_fun = tg.jit(
        lambda a, b, c, d: ((a + b + c), (a + b + d)),
        static_argnums=(0, 1),
        donate_argnums=(2, 3),
        **INTERP,
    )
    c, d = np.array([2.0, 2.0]), np.array([1.0, 1.0, 1.0, 1.0])
    e, f = jit_fun(1, 2, c, d)
    np.testing.assert_allclose(e, [5.0, 5.0])
    np.testing.assert_allclose(f, [4.0, 4.0, 4.0, 4.0])


def test_static_argnum_on_method():
    class A:
        @functools.partial(tg.jit, static_argnums=(0,), **INTERP)
        def my_func_jit(self, x):
            return x + 2

    assert A().my_func_jit(np.float64(3)) == 5
