"""Code that JAX / HIPS autograd users already have, which tracegrad's compiled mode
did not run when issue 13 closed: pytree Jacobians and Hessians of non-scalar
outputs, reductions of `np.array([...traced...])`, a str argument's TypeError,
custom_vjp with constants and Python floats, np.append and np.pad's other modes.

Cases marked "JAX:" are ported from JAX's tests/api_test.py with their assertions.
Everything runs on the interpreter backend: the point is semantics, not codegen.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg

I = {"backend": "interpret"}
rng = np.random.RandomState(0)


def assert_tree_close(a, b, rtol=1e-10, atol=1e-12, check_dtype=False):
    """JAX's assertAllClose over pytrees: the same structure, close leaves."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and sorted(a) == sorted(b), (a, b)
        for k in b:
            assert_tree_close(a[k], b[k], rtol, atol, check_dtype)
    elif isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), (a, b)
        for x, y in zip(a, b, strict=True):
            assert_tree_close(x, y, rtol, atol, check_dtype)
    else:
        if check_dtype:
            assert np.asarray(a).dtype == np.asarray(b).dtype, (a, b)
        np.testing.assert_allclose(
            np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol
        )


def numeric_jacobian(f, x, eps=1e-6):
    """Central differences of an array function of one float64 array."""
    x = np.asarray(x, np.float64)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(f(x)) + x.shape)


# ----------------------------------------------- 1. pytree Jacobians, non-scalar Hessians
JACOBIANS = [
    pytest.param(tg.jacfwd, id="jacfwd"),
    pytest.param(tg.jacrev, id="jacrev"),
    pytest.param(tg.jacobian, id="jacobian"),
]


def _tuple_dict_fn(x, y):
    return {"prod": np.sin(x)[:, None] * y, "sums": (np.sum(x * x), np.tanh(y))}


@pytest.mark.parametrize("jacfun", JACOBIANS)
def test_pytree_output_jacobian_matches_finite_differences(jacfun):
    """Output structure outside, argument structure inside; each leaf
    `out.shape + arg.shape`, every block equal to central differences."""
    x, y = rng.randn(3), rng.randn(2)
    jac = jacfun(_tuple_dict_fn, argnums=(0, 1), **I)(x, y)
    assert sorted(jac) == ["prod", "sums"] and isinstance(jac["sums"], tuple)
    blocks = {
        "prod": lambda v: v["prod"],
        "s0": lambda v: v["sums"][0],
        "s1": lambda v: v["sums"][1],
    }
    got = {"prod": jac["prod"], "s0": jac["sums"][0], "s1": jac["sums"][1]}
    for name, pick in blocks.items():
        d_x, d_y = got[name]
        of_x = lambda v, pick=pick: pick(_tuple_dict_fn(v, y))
        of_y = lambda v, pick=pick: pick(_tuple_dict_fn(x, v))
        np.testing.assert_allclose(d_x, numeric_jacobian(of_x, x), rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(d_y, numeric_jacobian(of_y, y), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("jacfun", JACOBIANS)
def test_pytree_argument_and_output_jacobian(jacfun):
    """A dict argument of two leaves and a tuple output: jac[i][key]."""
    params = {"w": rng.randn(2, 3), "b": rng.randn(2)}
    v = rng.randn(3)

    def f(p):
        h = p["w"] @ v + p["b"]
        return h**2, np.sum(np.exp(h))

    jac = jacfun(f, **I)(params)
    assert isinstance(jac, tuple) and len(jac) == 2
    assert jac[0]["w"].shape == (2, 2, 3) and jac[0]["b"].shape == (2, 2)
    assert jac[1]["w"].shape == (2, 3) and jac[1]["b"].shape == (2,)
    for i in range(2):
        for key in ("w", "b"):

            def one(leaf, i=i, key=key):
                return f({**params, key: leaf})[i]

            np.testing.assert_allclose(
                jac[i][key], numeric_jacobian(one, params[key]), rtol=1e-7, atol=1e-8
            )


def test_jacfwd_and_jacrev_agree_with_jax_on_pytrees():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    x, y = rng.randn(3), rng.randn(2)

    def f(x, y, np=np):
        return {"prod": np.sin(x)[:, None] * y, "sums": (np.sum(x * x), np.tanh(y))}

    for ours, theirs in ((tg.jacfwd, jax.jacfwd), (tg.jacrev, jax.jacrev)):
        expected = jax.jit(theirs(lambda a, b: f(a, b, np=jnp), argnums=(0, 1)))(x, y)
        got = ours(f, argnums=(0, 1), **I)(x, y)
        assert_tree_close(got, jax.tree_util.tree_map(np.asarray, expected))


def test_hessian_of_vector_output_matches_finite_differences():
    x = rng.randn(3)
    f = lambda x: np.sin(x) * np.sum(x**2)
    hess = tg.hessian(f, **I)(x)
    assert hess.shape == (3, 3, 3)
    grad_fd = lambda v: numeric_jacobian(f, v, eps=1e-5)
    np.testing.assert_allclose(hess, numeric_jacobian(grad_fd, x, eps=1e-4), rtol=1e-5, atol=1e-6)
    # second derivatives are symmetric in the two argument axes
    np.testing.assert_allclose(hess, hess.transpose(0, 2, 1), rtol=1e-12, atol=1e-12)


def test_hessian_of_pytree_output_and_argument_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    a, b = rng.randn(2), np.array(0.7)

    def f(p, np=np):
        x, s = p
        return {"v": np.exp(x) * s, "scalar": np.sum(x**3) * s**2}

    expected = jax.jit(jax.hessian(lambda p: f(p, np=jnp)))((a, b))
    got = tg.hessian(f, **I)((a, b))
    assert_tree_close(got, jax.tree_util.tree_map(np.asarray, expected))


def test_hessian_of_dict_params_and_vmapped_pytree_jacobian_match_jax():
    """The autodiff cookbook's shapes: a Hessian over a dict of parameters (dict of
    dicts) and vmap of a jacfwd with tuple/dict outputs."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    params = {"W": rng.randn(2, 3), "b": rng.randn(2)}
    x = rng.randn(3)

    def loss(p, x, np=np):
        return np.sum(np.tanh(p["W"] @ x + p["b"]) ** 2)

    expected = jax.jit(jax.hessian(lambda p, x: loss(p, x, np=jnp)))(params, x)
    assert_tree_close(
        tg.hessian(loss, **I)(params, x), jax.tree_util.tree_map(np.asarray, expected)
    )

    def g(x, np=np):
        return np.sin(x), {"s": np.sum(x**3)}

    xs = rng.randn(2, 4)
    expected = jax.jit(jax.vmap(jax.jacfwd(lambda x: g(x, np=jnp))))(xs)
    assert_tree_close(tg.vmap(tg.jacfwd(g, **I))(xs), jax.tree_util.tree_map(np.asarray, expected))


def test_hessian_aux():
    """JAX: test_hessian_aux."""
    A = rng.randn(4, 4)
    x = rng.randn(4)
    f = lambda x: (np.dot(x, np.dot(A, x)), x)
    h, aux = tg.hessian(f, has_aux=True, **I)(x)
    assert np.allclose(h, A + A.T)
    assert np.allclose(aux, x)


def test_hessian_aux_of_vector_output():
    x = rng.randn(3)
    h, aux = tg.hessian(lambda x: (x**3, {"x": x}), has_aux=True, **I)(x)
    np.testing.assert_allclose(h, np.einsum("ij,jk->ijk", np.eye(3), np.diag(6 * x)))
    np.testing.assert_allclose(aux["x"], x)


def test_issue1372():
    """JAX: every composition of jacrev and jacfwd, diagonal and off-diagonal blocks."""

    def quad(x):
        return np.dot(x, x)

    def f(x, u):
        return quad(x) + quad(u)

    x, u = np.ones(5), np.ones(2)
    rev = lambda g, a: tg.jacrev(g, a, **I)
    fwd = lambda g, a: tg.jacfwd(g, a, **I)
    shapes = {(0, 0): (5, 5), (1, 1): (2, 2), (1, 0): (2, 5), (0, 1): (5, 2)}
    for outer in (rev, fwd):
        for inner in (rev, fwd):
            for (a, b), shape in shapes.items():
                block = outer(inner(f, a), b)(x, u)
                assert block.shape == shape
                np.testing.assert_allclose(block, 2 * np.eye(*shape) if a == b else 0.0)


@pytest.mark.parametrize("jacfun", [tg.jacfwd, tg.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_and_aux_basic(jacfun):
    """JAX: test_jacfwd_and_aux_basic / test_jacrev_and_aux_basic."""
    jac, aux = jacfun(lambda x: (x**3, [x**2]), has_aux=True, **I)(3.0)
    assert_tree_close(jac, jacfun(lambda x: x**3, **I)(3.0))
    assert_tree_close(aux, [9.0])


@pytest.mark.parametrize("jacfun", [tg.jacfwd, tg.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_and_aux_nested(jacfun):
    """JAX: test_jacfwd_and_aux_nested / test_jacrev_and_aux_nested."""

    def f(x):
        _, aux = jacfun(lambda x: (x**3, [x**3]), has_aux=True, **I)(x)
        return aux[0] * np.sin(x)

    f2 = lambda x: x**3 * np.sin(x)
    expected = jacfun(f2, **I)(4.0)
    assert jacfun(f, **I)(4.0) == expected
    assert tg.compile(jacfun(f, **I), **I)(4.0) == expected
    assert tg.compile(jacfun(tg.compile(f, **I), **I), **I)(4.0) == expected


@pytest.mark.parametrize(
    "jacfun,desired_dtypes",
    [
        (tg.jacfwd, (("float32", "float32"), ("float64", "float64"), ("float64", "float64"))),
        (tg.jacrev, (("float32", "float64"), ("float32", "float64"), ("float32", "float64"))),
    ],
    ids=["jacfwd", "jacrev"],
)
def test_heterogeneous_jacobian(jacfun, desired_dtypes):
    """JAX: test_heterogeneous_jacfwd / jacrev (float32 and float64 here, for float16
    and float32): jacfwd's blocks take the output's dtype, jacrev's the input's."""
    a = (np.array([2.0], np.float32), np.array([3.0], np.float64))

    def f(tup):
        x, y = tup
        return x, y, x + y

    actual = jacfun(f, **I)(a)
    values = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
    for row, dtypes, vals in zip(actual, desired_dtypes, values, strict=True):
        for block, dtype, val in zip(row, dtypes, vals, strict=True):
            assert block.dtype == np.dtype(dtype) and block.shape == (1, 1)
            assert block[0, 0] == val


# --------------------------------------- 2. reductions of np.array([...traced...])
def _stacked(x):
    """An object array of traced values, as autograd/JAX users build one."""
    return np.array([[x[0], 2 * x[1]], [np.sin(x[2]), x[0] * x[2]]])


OBJECT_ARRAY_CASES = {
    "max": lambda x: np.max(_stacked(x)),
    "min": lambda x: np.min(_stacked(x)),
    "amax_axis0": lambda x: np.sum(np.amax(_stacked(x), axis=0) * np.array([1.0, 3.0])),
    "amin_axis1_keepdims": lambda x: np.sum(
        np.amin(_stacked(x), axis=1, keepdims=True) * np.array([[1.0], [-2.0]])
    ),
    "mean": lambda x: np.mean(_stacked(x)) ** 2,
    "var": lambda x: np.var(_stacked(x)),
    "std_ddof1_axis0": lambda x: np.sum(np.std(_stacked(x), axis=0, ddof=1)),
    "max_with_constant": lambda x: np.max(np.array([x[0], 0.25, x[1] * x[2]])),
    "argmax_index": lambda x: x[np.argmax(np.array([x[0], x[1], -x[2]]))] ** 2,
    "argmin_index": lambda x: x[np.argmin(np.array([x[0], x[1], -x[2]]))] ** 2,
    "max_of_list": lambda x: np.max([x[0] * x[1], np.cos(x[2]), 0.1]),
    "mean_of_tuple": lambda x: np.mean((x[0], x[1] ** 2)),
    "argmax_of_list_index": lambda x: x[np.argmax([x[1], x[2]])] * x[0],
}


@pytest.mark.parametrize("name", sorted(OBJECT_ARRAY_CASES))
def test_reduction_of_object_array_of_tracers(name):
    """np.max & co. of np.array([...traced...]) were reduced by NumPy with Python
    comparisons (bool() of a traced comparison raised); now the traced ops: value
    and gradient vs NumPy on the concrete values and central differences."""
    f = OBJECT_ARRAY_CASES[name]
    x = np.array([0.7, -0.4, 1.3])  # no ties: every max/min is differentiable here
    value, grad = tg.value_and_grad(f, **I)(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)
    np.testing.assert_allclose(grad, numeric_jacobian(f, x), rtol=1e-6, atol=1e-8)


def test_object_array_reductions_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    x = np.array([0.7, -0.4, 1.3])

    def f(x, np=np):
        a = np.array([[x[0], 2 * x[1]], [np.sin(x[2]), x[0] * x[2]]])
        return np.max(a) + np.sum(np.min(a, axis=0)) + np.mean(a)

    np.testing.assert_allclose(
        tg.grad(f, **I)(x), jax.jit(jax.grad(lambda v: f(v, np=jnp)))(x), rtol=1e-12
    )


def test_argsort_and_any_of_object_array():
    x = np.array([0.7, -0.4, 1.3])
    order = tg.compile(lambda x: np.argsort(np.array([x[2], x[0], x[1]])), **I)(x)
    np.testing.assert_array_equal(order, [2, 1, 0])
    pick = lambda x: np.where(np.any(np.array([x[0] > 1.0, x[2] > 1.0])), x[0], x[1])
    np.testing.assert_allclose(tg.grad(pick, **I)(x), [1.0, 0.0, 0.0])


def test_object_array_routing_leaves_numpy_alone():
    """Only object arrays of traced values are rerouted: NumPy's public functions stay
    its own objects (Numba types np.max by identity) and plain calls are unchanged."""
    from numpy._core import fromnumeric

    public = {name: getattr(np, name) for name in ("max", "min", "argmax", "mean", "var")}
    tg.grad(OBJECT_ARRAY_CASES["max"], **I)(np.array([0.7, -0.4, 1.3]))  # routing is on
    assert all(getattr(np, name) is f for name, f in public.items())
    assert fromnumeric._wrapreduction.__module__ == "tracegrad.ops.core"
    assert np.max(np.array([1, 3, 2], dtype=object)) == 3  # Python objects: NumPy's path
    assert np.argmax(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=1).tolist() == [1, 0]
    assert np.mean([1, 2]) == 1.5 and np.std([1.0, 3.0]) == 1.0


@pytest.mark.slow
def test_numba_still_compiles_numpy_reductions_after_routing():
    numba = pytest.importorskip("numba")
    tg.grad(OBJECT_ARRAY_CASES["max"], **I)(np.array([0.7, -0.4, 1.3]))

    @numba.njit
    def stats(v):
        return np.max(v) + np.argmin(v) + np.mean(v) + np.std(v) + np.argsort(v)[0]

    v = np.array([3.0, 1.0, 2.0])
    assert stats(v) == 3.0 + 1 + 2.0 + np.std(v) + 1


def test_builtin_max_of_tracers_still_explains():
    """Python's max() over traced values compares them with bool(), which a static
    graph cannot answer (JAX raises too): the error names the fix."""
    with pytest.raises(tg.TracingError, match="bool"):
        tg.grad(lambda x: max([x[0], x[1]]), **I)(np.array([1.0, 2.0]))


# ------------------------------------------------- 3. a str argument is a TypeError
@pytest.mark.parametrize("transform", [tg.grad, tg.value_and_grad], ids=["grad", "vag"])
def test_str_argument_to_differentiate_is_a_type_error(transform):
    """JAX: test_bad_input ("Argument 'foo' of type <class 'str'> is not a valid JAX
    type", a TypeError); tracegrad's error is both CompileError and TypeError and
    names the argument, its position and what is accepted."""

    def f(x, scale):
        return x * scale

    with pytest.raises(TypeError) as info:
        transform(f, argnums=1, **I)(1.0, "foo")
    assert isinstance(info.value, tg.compiler.CompileError)
    message = str(info.value)
    for part in ("'scale'", "position 1", "'foo'", "<class 'str'>", "floating-point array"):
        assert part in message, (part, message)


def test_str_argument_outside_argnums_is_static():
    """A str that is not differentiated stays a static argument (part of the cache key)."""
    f = tg.grad(lambda x, act: np.tanh(x) if act == "tanh" else np.sin(x), **I)
    assert f(0.5, "tanh") == pytest.approx(1 - np.tanh(0.5) ** 2)
    assert f(0.5, "sin") == pytest.approx(np.cos(0.5))


# ------------------------------------ 4. custom_vjp: closed-over constants, Python floats
SCALE = np.array([1.0, 2.0, 3.0])


def _make_scaled_sin():
    """A custom_vjp whose function, fwd and bwd all read the module constant SCALE;
    the rule's derivative is deliberately twice the true one, so using it shows."""

    @tg.custom_vjp
    def scaled_sin(x):
        return np.sum(SCALE * np.sin(x))

    def fwd(x):
        return scaled_sin(x), np.cos(x)

    def bwd(cos_x, g):
        return (2.0 * g * SCALE * cos_x,)

    scaled_sin.defvjp(fwd, bwd)
    return scaled_sin


SCALED_SIN = _make_scaled_sin()


def test_custom_vjp_reads_closed_over_constant():
    """Was CustomRuleError 'closes over a traced value': a closure/global array is an
    implicit input of the outer graph; the rule now reads it as an extra operand."""
    x = np.array([0.1, -0.7, 1.2])
    value, grad = tg.value_and_grad(SCALED_SIN, **I)(x)
    np.testing.assert_allclose(value, np.sum(SCALE * np.sin(x)), rtol=1e-14)
    np.testing.assert_allclose(grad, 2.0 * SCALE * np.cos(x), rtol=1e-14)


def test_custom_vjp_closed_over_constant_is_read_on_every_call():
    global SCALE
    x = np.array([0.1, -0.7, 1.2])
    grad = tg.grad(SCALED_SIN, **I)
    saved = SCALE.copy()
    try:
        SCALE *= 3.0  # in place: the next call sees it, no retrace
        np.testing.assert_allclose(grad(x), 6.0 * saved * np.cos(x), rtol=1e-14)
        SCALE = np.array([5.0, 0.0, -1.0])  # rebound
        np.testing.assert_allclose(grad(x), 2.0 * SCALE * np.cos(x), rtol=1e-14)
    finally:
        SCALE = saved


def test_custom_vjp_closed_over_constant_through_other_transforms():
    """jvp (bwd transposed), jacfwd, vmap of grad and hessian with the closure."""
    x = np.array([0.1, -0.7, 1.2])
    rule = 2.0 * SCALE * np.cos(x)
    t = np.array([1.0, 0.5, -2.0])
    np.testing.assert_allclose(tg.jvp(SCALED_SIN, (x,), (t,), **I)[1], rule @ t, rtol=1e-13)
    np.testing.assert_allclose(tg.jacfwd(SCALED_SIN, **I)(x), rule, rtol=1e-13)
    batch = np.stack([x, 2 * x])
    np.testing.assert_allclose(
        tg.vmap(tg.grad(SCALED_SIN, **I))(batch), 2.0 * SCALE * np.cos(batch), rtol=1e-13
    )
    # the rule's own derivative (bwd is written in traced ops): -2 SCALE sin(x)
    np.testing.assert_allclose(
        tg.hessian(SCALED_SIN, **I)(x), np.diag(-2.0 * SCALE * np.sin(x)), rtol=1e-13, atol=1e-15
    )


def test_custom_vjp_closing_over_a_differentiated_value_still_raises():
    """A closed-over *traced* value (an argument of the outer function) would get no
    cotangent from the rule: refused, as JAX requires."""

    def outer(y):
        @tg.custom_vjp
        def h(x):
            return x * y

        h.defvjp(lambda x: (h(x), None), lambda _, g: (g * y,))
        return h(2.0)

    with pytest.raises(tg.custom.CustomRuleError, match="closes over a traced value"):
        tg.grad(outer, **I)(3.0)


def test_custom_rules_with_python_float_arguments():
    """JAX: test_custom_vjp_jit / test_custom_jvp_jit with x = 3.0 (a tuple of Python
    floats was taken for one array leaf: 'one cotangent per argument (0)')."""

    @tg.custom_vjp
    def f(x, y):
        return np.sin(x) * y

    f.defvjp(
        lambda x, y: (f(x, y), (np.cos(x), x, y)),
        lambda res, g: (3.0 * res[0] * res[2] * g, np.sin(res[1]) * g),
    )
    x, y = 3.0, 0.5
    assert_tree_close(tg.compile(f, **I)(x, y), np.sin(x) * y)
    assert_tree_close(tg.compile(tg.compile(f, **I), **I)(x, y), np.sin(x) * y)
    assert_tree_close(
        tg.grad(tg.compile(f, **I), argnums=(0, 1), **I)(x, y), (3.0 * np.cos(x) * y, np.sin(x))
    )
    assert_tree_close(tg.compile(tg.grad(f, **I), **I)(x, y), 3.0 * np.cos(x) * y)


def _make_scaled_sin_jvp():
    """SCALED_SIN's twin as a custom_jvp; the rule computes `2.0 * SCALE` first, a
    value of the outer trace that the rule captures (not SCALE itself)."""

    @tg.custom_jvp
    def scaled_sin(x):
        return np.sum(SCALE * np.sin(x))

    @scaled_sin.defjvp
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled_sin(x), np.sum(2.0 * SCALE * np.cos(x) * t)

    return scaled_sin


SCALED_SIN_JVP = _make_scaled_sin_jvp()


def test_custom_jvp_reads_closed_over_constant():
    """Was CustomRuleError 'closes over a traced value'; grad transposes the rule."""
    global SCALE
    x, t = np.array([0.1, -0.7, 1.2]), np.array([1.0, -1.0, 0.5])
    f = SCALED_SIN_JVP
    np.testing.assert_allclose(tg.grad(f, **I)(x), 2.0 * SCALE * np.cos(x), rtol=1e-14)
    value, tangent = tg.jvp(f, (x,), (t,), **I)
    np.testing.assert_allclose(value, np.sum(SCALE * np.sin(x)), rtol=1e-14)
    np.testing.assert_allclose(tangent, np.sum(2.0 * SCALE * np.cos(x) * t), rtol=1e-14)
    np.testing.assert_allclose(tg.jacfwd(f, **I)(x), 2.0 * SCALE * np.cos(x), rtol=1e-14)
    saved = SCALE
    try:
        SCALE = np.array([-1.0, 4.0, 0.5])  # rebound: seen by the next call
        np.testing.assert_allclose(tg.grad(f, **I)(x), 2.0 * SCALE * np.cos(x), rtol=1e-14)
    finally:
        SCALE = saved


def test_custom_vjp_rule_reads_a_value_computed_from_constants():
    """bwd multiplies by `(2 * SCALE)`, recorded in the outer trace: matched by value on
    the second trace, so it converges and the rule is used."""

    @tg.custom_vjp
    def f(x):
        return np.sum(SCALE * x**2)

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * (2 * SCALE) * x * 10.0,))
    x = np.array([0.3, 0.2, -1.0])
    np.testing.assert_allclose(tg.grad(f, **I)(x), 20.0 * SCALE * x, rtol=1e-14)
    np.testing.assert_allclose(
        tg.grad(lambda x: f(x) * np.sum(SCALE), **I)(x),
        20.0 * SCALE * x * np.sum(SCALE),
        rtol=1e-14,
    )


@pytest.mark.slow
def test_custom_vjp_closed_over_constant_numba():
    """The extra operand of the custom_vjp_call node through Numba codegen."""
    x = np.array([0.1, -0.7, 1.2])
    value, grad = tg.value_and_grad(SCALED_SIN, backend="numba")(x)
    np.testing.assert_allclose(value, np.sum(SCALE * np.sin(x)), rtol=1e-14)
    np.testing.assert_allclose(grad, 2.0 * SCALE * np.cos(x), rtol=1e-14)


# ------------------------------------------------- 5. np.append, np.pad's other modes
PAD_MODES = [
    ("edge", {}),
    ("wrap", {}),
    ("reflect", {}),
    ("symmetric", {}),
    ("constant", {}),
    ("constant", {"constant_values": -1.5}),
    ("maximum", {}),
    ("minimum", {"stat_length": 2}),
    ("mean", {"stat_length": ((1, 2), (2, 1))}),
    ("median", {}),
    ("linear_ramp", {}),
    ("linear_ramp", {"end_values": (3.0, -1.0)}),
]
PAD_WIDTHS = [1, (2, 3), ((0, 4), (1, 0)), 5]


@pytest.mark.parametrize(
    "mode,options", PAD_MODES, ids=[f"{m}-{sorted(o)}" if o else m for m, o in PAD_MODES]
)
def test_pad_modes_match_numpy_and_finite_differences(mode, options):
    """np.pad of a traced array in each mode: values equal NumPy's (widths beyond the
    axis length included), gradients equal central differences."""
    x = rng.randn(3, 2)
    weights = {}
    for width in PAD_WIDTHS:
        expected = np.pad(x, width, mode=mode, **options)
        got = tg.compile(lambda x, width=width: np.pad(x, width, mode=mode, **options), **I)(x)
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)
        weights[width] = rng.randn(*expected.shape)
    for width in PAD_WIDTHS:

        def loss(x, width=width):
            return np.sum(np.sin(np.pad(x, width, mode=mode, **options)) * weights[width])

        np.testing.assert_allclose(
            tg.grad(loss, **I)(x), numeric_jacobian(loss, x), rtol=1e-6, atol=1e-8
        )


def test_pad_unsupported_options_name_the_supported_ones():
    with pytest.raises(NotImplementedError, match="edge, wrap, reflect, symmetric"):
        tg.grad(lambda x: np.sum(np.pad(x, 1, mode="reflect", reflect_type="odd")), **I)(np.ones(3))


def test_append_matches_numpy_and_jax():
    x, y = rng.randn(2, 3), rng.randn(1, 3)
    for axis in (None, 0):
        np.testing.assert_array_equal(
            tg.compile(lambda x, y, axis=axis: np.append(x, y, axis=axis), **I)(x, y),
            np.append(x, y, axis=axis),
        )
    weights = rng.randn(9)

    def loss(x, y, np=np):
        return np.sum(np.append(x**2, np.sin(y)) * weights)

    gx, gy = tg.grad(loss, argnums=(0, 1), **I)(x, y)
    np.testing.assert_allclose(gx, numeric_jacobian(lambda v: loss(v, y), x), rtol=1e-7)
    np.testing.assert_allclose(gy, numeric_jacobian(lambda v: loss(x, v), y), rtol=1e-7)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    jx, jy = jax.jit(jax.grad(lambda a, b: loss(a, b, np=jnp), argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(gx, jx, rtol=1e-13)
    np.testing.assert_allclose(gy, jy, rtol=1e-13)


def test_transforms_take_a_list_argument_next_to_a_float():
    """autograd's test_simple_append_list: (list, float) arguments were flattened as one
    ragged array leaf by jvp/vjp ('cannot make an array from tuple')."""
    out, t = tg.jvp(np.append, ([1.0, 2.0, 3.0], 4.0), ([0.5, 0.0, 1.0], 2.0), **I)
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(t, [0.5, 0.0, 1.0, 2.0])
    _, pullback = tg.vjp(np.append, [1.0, 2.0, 3.0], 4.0, **I)
    ct_list, ct_float = pullback(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(ct_list, [1.0, 2.0, 3.0])
    assert ct_float == 4.0


# ------------------------------- custom rules: JAX's tests/custom_api_test.py cases
def test_custom_jvp_kwargs():
    """JAX issue 1938: keyword arguments and defaults reach the rule by position."""

    @tg.custom_jvp
    def my_fun(x, y, c=1.0):
        return c * (x + y)

    def my_jvp(primals, tangents):
        x, y, c = primals
        _, _, t_c = tangents
        return my_fun(x, y, c), t_c

    my_fun.defjvp(my_jvp)
    f = lambda x, y: np.sum(np.square(my_fun(x, y, c=2.0)))
    assert f(10.0, 5.0) == 900.0
    out, tangent = tg.jvp(f, (10.0, 5.0), (1.0, 1.0), **I)
    assert out == 900.0 and tangent == 0.0  # the rule's tangent is c's: a constant


def test_custom_vjp_kwargs():
    @tg.custom_vjp
    def my_fun(x, y, c=1.0):
        return c * (x + y)

    my_fun.defvjp(lambda x, y, c=1.0: (my_fun(x, y, c), None), lambda _, g: (g, 3 * g, g))
    f = lambda x, y: np.sum(np.square(my_fun(x, y, c=2.0)))
    assert f(10.0, 5.0) == 900.0
    # d/dx of (f's primal)^2 through the rule: 2 * my_fun * (g, 3 g)
    assert_tree_close(tg.grad(f, argnums=(0, 1), **I)(10.0, 5.0), (60.0, 180.0))
    assert_tree_close(tg.grad(lambda x: my_fun(x, 1.0), **I)(2.0), 1.0)  # default c


def test_custom_jvp_vmap_and_jit():
    """JAX: test_vmap / test_jit (custom_jvp under vmap, jvp and compile, nested)."""

    @tg.custom_jvp
    def f(x):
        assert np.ndim(x) == 0
        return np.sin(x)

    def f_jvp(primals, tangents):
        (x,), (g,) = primals, tangents
        assert np.ndim(x) == np.ndim(g) == 0
        return f(x), 2 * np.cos(x) * g

    f.defjvp(f_jvp)
    x, xx = np.arange(3.0), np.arange(6.0).reshape(2, 3)
    assert_tree_close(tg.vmap(f)(x), np.sin(x))
    assert_tree_close(tg.vmap(tg.vmap(f))(xx), np.sin(xx))
    expected = (np.sin(x), 2 * np.cos(x) * x)
    assert_tree_close(tg.vmap(lambda x: tg.jvp(f, (x,), (x,), **I))(x), expected)
    assert_tree_close(tg.jvp(tg.vmap(f), (x,), (x,), **I), expected)
    assert_tree_close(
        tg.compile(lambda x: tg.jvp(f, (x,), (x,), **I), **I)(3.0), (np.sin(3.0), 6 * np.cos(3.0))
    )
    assert_tree_close(
        tg.jvp(tg.compile(f, **I), (3.0,), (3.0,), **I), (np.sin(3.0), 6 * np.cos(3.0))
    )


def test_custom_jvp_rule_errors_are_type_errors():
    """JAX: test_primal_tangent_aval_disagreement_error_message and
    test_jvp_rule_doesnt_return_pair_error_message (TypeError with the rule's name)."""

    @tg.custom_jvp
    def f(x):
        return x**2

    @f.defjvp
    def wrong_shape(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), np.reshape(t, (1,))

    with pytest.raises(TypeError, match=r"shapes: got \(1,\) for an output of shape \(\)"):
        tg.jvp(f, (np.float32(2.0),), (np.float32(1.0),), **I)

    @tg.custom_jvp
    def g(x):
        return x**2

    @g.defjvp
    def not_a_pair(primals, tangents):
        return tangents[0]

    for run in (lambda: tg.jvp(g, (2.0,), (1.0,), **I), lambda: tg.grad(g, **I)(2.0)):
        with pytest.raises(TypeError, match="must return a pair"):
            run()


def test_custom_vjp_clip_gradient():
    """JAX issue 2784 (test_clip_gradient): bwd clips g to residual bounds, one of
    them traced (np.clip with array bounds was refused)."""

    @tg.custom_vjp
    def _clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (None, None, np.clip(g, lo, hi))

    _clip_gradient.defvjp(fwd, bwd)

    def clip_gradient(x):
        return _clip_gradient(-0.1, x + 0.1, x)

    assert_tree_close(tg.grad(clip_gradient, **I)(0.1), 0.2)


def test_clip_with_array_bounds_matches_numpy_and_finite_differences():
    x = np.array([-2.0, 0.5, 3.0, 0.2])
    lo, hi = np.array([0.0, 1.0, -1.0, 0.0]), 2.0
    np.testing.assert_array_equal(
        tg.compile(lambda x, lo: np.clip(x, lo, hi), **I)(x, lo), np.clip(x, lo, hi)
    )
    w = np.array([1.0, -2.0, 3.0, 0.5])
    loss = lambda x, lo: np.sum(np.clip(np.sin(x), lo * 0.5, hi) * w)
    gx, glo = tg.grad(loss, argnums=(0, 1), **I)(x, lo)
    np.testing.assert_allclose(gx, numeric_jacobian(lambda v: loss(v, lo), x), atol=1e-8)
    np.testing.assert_allclose(glo, numeric_jacobian(lambda v: loss(x, v), lo), atol=1e-8)


def test_custom_vjp_bwd_structure_errors_are_type_errors():
    """JAX: test_vjp_bwd_returns_non_tuple_error, ..._inconsistent_pytree_structures."""

    @tg.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (x, None), lambda _, g: 2.0 * g)
    with pytest.raises(TypeError, match="must return a tuple .* got a Tracer"):
        tg.grad(f, **I)(3.0)
    f.defvjp(lambda x: (x, None), lambda _, g: (g, g))
    with pytest.raises(
        TypeError,
        match=r"one cotangent per differentiable argument \(1\), "
        "got a tuple of length 2",
    ):
        tg.grad(f, **I)(2.0)


def test_custom_vjp_vmap_and_scan():
    """JAX: CustomVJPTest.test_vmap (vmap/grad nestings) and test_initial_style (a
    custom_vjp inside a scan, grad and grad of grad)."""

    @tg.custom_vjp
    def f(x):
        assert np.ndim(x) == 0
        return np.sin(x)

    def f_fwd(x):
        assert np.ndim(x) == 0
        return f(x), np.cos(x)

    f.defvjp(f_fwd, lambda cos_x, g: (2 * cos_x * g,))
    x, xx = np.arange(3.0), np.arange(6.0).reshape(2, 3)
    assert_tree_close(tg.vmap(tg.grad(f, **I))(x), 2 * np.cos(x))
    assert_tree_close(tg.vmap(tg.value_and_grad(f, **I))(x), (np.sin(x), 2 * np.cos(x)))
    assert_tree_close(tg.vmap(tg.vmap(tg.grad(f, **I)))(xx), 2 * np.cos(xx))
    assert_tree_close(tg.grad(lambda x: np.sum(tg.vmap(f)(x)), **I)(x), 2 * np.cos(x))
    assert_tree_close(tg.vmap(tg.grad(lambda x: np.sum(tg.vmap(f)(x)), **I))(xx), 2 * np.cos(xx))

    def foo(x):
        out, _ = tg.scan(lambda c, _: (f(c), None), x, None, length=1)
        return out

    assert_tree_close(tg.grad(foo, **I)(3.0), 2 * np.cos(3.0))
    assert_tree_close(tg.grad(tg.grad(foo, **I), **I)(3.0), -2 * np.sin(3.0))


@pytest.mark.parametrize(
    "transform", [tg.jacfwd, tg.jacrev, tg.hessian], ids=["jacfwd", "jacrev", "hessian"]
)
def test_jacobians_reject_str_arguments_and_bad_argnums(transform):
    """A str argument was static and came back unchanged (jacrev(f)("foo") == "foo"),
    an out-of-range argnums crashed with IndexError: TypeErrors as in JAX."""

    def f(x):
        return x

    with pytest.raises(TypeError, match="'foo' of type <class 'str'>"):
        transform(f, **I)("foo")
    with pytest.raises(TypeError, match="'bar'"):
        transform(f, **I)({"w": np.ones(2), "name": "bar"})
    with pytest.raises(TypeError, match="argnums=2 needs at least 3 positional arguments"):
        transform(f, argnums=2, **I)(np.ones(2))


def test_vjp_jvp_linearize_reject_str_primals():
    """They came back as static values (tg.vjp(f, "foo")[0] == "foo")."""
    f = lambda x: x
    with pytest.raises(TypeError, match="vjp: primal 0 holds 'foo'"):
        tg.vjp(f, "foo", **I)
    with pytest.raises(TypeError, match="jvp: primal 0 holds 'foo'"):
        tg.jvp(f, ("foo",), ("bar",), **I)
    with pytest.raises(TypeError, match="linearize: primal 1 holds 'foo'"):
        tg.linearize(lambda x, y: x, np.ones(2), {"a": "foo"}, **I)


@pytest.mark.slow
def test_pad_modes_and_append_numba():
    """The gathers, statistic blocks and ramps of np.pad and np.append through Numba
    codegen: one kernel, value and gradient equal to the interpreter's."""

    def loss(x):
        padded = (
            np.pad(x, (2, 3), mode="reflect")
            + np.pad(x, (2, 3), mode="mean")
            + np.pad(x, (2, 3), mode="linear_ramp", end_values=1.0)
        )
        return np.sum(np.sin(np.append(padded, x**2)))

    x = rng.randn(3, 2)
    value, grad = tg.value_and_grad(loss, backend="numba")(x)
    expected_value, expected_grad = tg.value_and_grad(loss, **I)(x)
    np.testing.assert_allclose(value, expected_value, rtol=1e-13)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad, numeric_jacobian(loss, x), rtol=1e-6, atol=1e-8)


def test_errors_raised_inside_numpy_wrappers_point_at_the_user_line():
    """np.max(obj, initial=...) and ndarray.max() of an object array of tracers fail
    inside NumPy's Python code; the error names this file, not fromnumeric.py."""
    x = np.array([1.0, 2.0])
    with pytest.raises(tg.TracingError, match="initial") as info:
        tg.grad(lambda x: np.max(np.array([x[0], x[1]]), initial=0.0), **I)(x)
    assert "test_peer_gaps.py" in str(info.value) and "fromnumeric" not in str(info.value)
    with pytest.raises(tg.TracingError, match="bool") as info:  # the method: NumPy's C loop
        tg.grad(lambda x: np.array([x[0], x[1]]).max(), **I)(x)
    assert "test_peer_gaps.py" in str(info.value)
