"""Issue 10, compiled mode: no silent wrong answers.

Each test names a case that gave a wrong value without any error before the
fix (the old value is in the docstring). Values are checked against hand
derivations and finite differences, and against JAX / PyTorch where installed.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from compile_helpers import numeric_grad

import tracegrad as tg
import tracegrad.eager as teager
from tracegrad.ops.core import DTypeError, ShapeError

INTERP = dict(backend="interpret")


# ------------------------------------------------------------------ composition


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_grad_of_grad_of_numpy_ufunc(backend):
    """Was cos(1) = 0.540: the outer grad copied the inner one's state over its own."""
    d2 = tg.grad(tg.grad(np.sin, backend=backend), backend=backend)
    assert float(d2(1.0)) == pytest.approx(-math.sin(1.0), rel=1e-12)
    d3 = tg.grad(tg.grad(tg.grad(np.sin, **INTERP), **INTERP), **INTERP)
    assert float(d3(1.0)) == pytest.approx(-math.cos(1.0), rel=1e-12)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_grad_of_compiled_function(backend):
    """Was 9.0 (the value x*x, not its derivative)."""
    f = tg.grad(tg.compile(lambda x: x * x, backend=backend), backend=backend)
    assert float(f(3.0)) == 6.0


def test_value_and_grad_of_compiled_function_returns_the_pair():
    """Was 5.0 alone (compile's result, no gradient)."""
    f = lambda x: tg.sum(x * x)
    value, g = tg.value_and_grad(tg.compile(f, **INTERP), **INTERP)(np.arange(3.0))
    assert float(value) == 5.0
    np.testing.assert_array_equal(g, [0.0, 2.0, 4.0])


def test_hessian_of_compiled_function_is_a_matrix():
    """Was the gradient [0, 3, 12] (shape (3,)) instead of diag(6x)."""
    h = tg.hessian(tg.compile(lambda x: tg.sum(x**3), **INTERP), **INTERP)(np.arange(3.0))
    np.testing.assert_allclose(h, np.diag(6 * np.arange(3.0)))


def test_grad_of_jacobian_and_compile_of_grad():
    x = np.array([0.5, -1.0, 2.0])
    g = tg.grad(lambda x: tg.sum(tg.jacobian(lambda y: y**3, **INTERP)(x)), **INTERP)(x)
    np.testing.assert_allclose(g, 6 * x)
    cg = tg.compile(tg.grad(lambda x: tg.sum(x**3), **INTERP), **INTERP)(x)
    np.testing.assert_allclose(cg, 3 * x**2)


def test_compiled_wrapper_keeps_its_own_state():
    inner = tg.grad(lambda x: tg.sum(x**2), **INTERP)
    outer = tg.compile(inner, **INTERP)
    assert outer.mode == "compile" and inner.mode == "grad"
    assert outer.__name__ == inner.__name__ and outer.__wrapped__ is inner


def test_composition_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x = np.array([0.3, -0.7, 1.1])
    ours = tg.hessian(tg.compile(lambda x: tg.sum(tg.sin(x) * x**2), **INTERP), **INTERP)(x)
    theirs = jax.hessian(jax.jit(lambda x: jnp.sum(jnp.sin(x) * x**2)))(x)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)
    assert float(tg.grad(tg.grad(np.sin, **INTERP), **INTERP)(1.0)) == pytest.approx(
        float(jax.grad(jax.grad(jnp.sin))(1.0)), rel=1e-12
    )


# ---------------------------------------------------- closures and globals

W_GLOBAL = np.ones(3)


def _loss_reading_global(x):
    return tg.sum(W_GLOBAL * x)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_closure_array_changed_in_place_is_seen(backend):
    """Was frozen at the first call: [1, 1, 1] after W *= 2."""
    W = np.ones(3)
    g = tg.grad(lambda x: tg.sum(W * x), backend=backend)
    np.testing.assert_array_equal(g(np.ones(3)), [1, 1, 1])
    W *= 2
    np.testing.assert_array_equal(g(np.ones(3)), [2, 2, 2])
    W -= 0.5 * np.array([1.0, 2.0, 3.0])  # a training step
    np.testing.assert_array_equal(g(np.ones(3)), [1.5, 1.0, 0.5])
    assert g.cache_info().traces == 1  # read as an input, not retraced


def test_global_array_rebound_is_seen():
    """Was frozen: the old global's values after `W_GLOBAL = new array`."""
    global W_GLOBAL
    old = W_GLOBAL
    try:
        g = tg.grad(_loss_reading_global, **INTERP)
        np.testing.assert_array_equal(g(np.ones(3)), [1, 1, 1])
        W_GLOBAL = np.full(3, 5.0)
        np.testing.assert_array_equal(g(np.ones(3)), [5, 5, 5])
        W_GLOBAL = np.arange(4.0)  # a new shape retraces
        np.testing.assert_array_equal(g(np.ones(4)), np.arange(4.0))
        assert g.cache_info().traces == 2
    finally:
        W_GLOBAL = old


def test_closure_rebinding_and_numpy_views_are_traced():
    """`W.T` and `W[0]` are computed by NumPy on the closed-over array; they must
    follow W too (W is swapped for its tracer while tracing)."""
    W = np.arange(6.0).reshape(2, 3)

    def f(x):
        return tg.sum((x @ W.T) * W[0, 0:2])

    g = tg.grad(f, **INTERP)
    x = np.array([1.0, -1.0, 2.0])
    np.testing.assert_allclose(g(x), numeric_grad(f, [x], 0))
    W[:] = np.array([[1.0, 0.5, -2.0], [3.0, 1.0, 0.0]])
    np.testing.assert_allclose(g(x), numeric_grad(f, [x], 0))
    W = np.ones((2, 3))  # rebinding the closure cell
    np.testing.assert_allclose(g(x), numeric_grad(f, [x], 0))
    np.testing.assert_array_equal(W, np.ones((2, 3)))  # restored after tracing


def test_closure_scalar_is_a_static_value_that_retraces():
    """Was frozen: the first value of a closed-over Python float."""
    scale = 2.0
    f = tg.compile(lambda x: x * scale, **INTERP)
    np.testing.assert_array_equal(f(np.ones(2)), [2, 2])
    scale = 3.0
    np.testing.assert_array_equal(f(np.ones(2)), [3, 3])


def test_parameters_in_a_dict_and_on_self():
    params = {"w": np.ones(2), "b": np.zeros(2)}
    f = tg.compile(lambda x: x * params["w"] + params["b"], **INTERP)
    np.testing.assert_array_equal(f(np.ones(2)), [1, 1])
    params["w"] *= 3
    params["b"] = np.full(2, 0.5)
    np.testing.assert_array_equal(f(np.ones(2)), [3.5, 3.5])

    class Model:
        def __init__(self):
            self.W = np.eye(2)

        @tg.compile
        def forward(self, x):
            return x @ self.W

        def loss(self, x):
            return tg.sum(x @ self.W)

    m = Model()
    np.testing.assert_array_equal(m.forward(np.ones(2)), [1, 1])
    m.W = 2 * np.eye(2)
    np.testing.assert_array_equal(m.forward(np.ones(2)), [2, 2])
    g = tg.grad(m.loss, **INTERP)
    np.testing.assert_array_equal(g(np.ones(2)), [2, 2])
    m.W[0, 0] = 7.0
    np.testing.assert_array_equal(g(np.ones(2)), [7, 2])


def test_helper_function_reading_a_global_and_nested_transforms():
    W = np.array([1.0, 2.0])

    def helper(x):
        return tg.sin(W * x)

    g2 = tg.grad(tg.grad(lambda x: tg.sum(helper(x)), **INTERP), **INTERP)
    x = 0.5
    # d^2/dx^2 sum(sin(W x)) = -sum(W^2 sin(W x))
    assert float(g2(x)) == pytest.approx(-np.sum(W**2 * np.sin(W * x)), rel=1e-12)
    W *= 2
    assert float(g2(x)) == pytest.approx(-np.sum(W**2 * np.sin(W * x)), rel=1e-12)
    J = tg.jacobian(helper, **INTERP)
    np.testing.assert_allclose(J(np.ones(2)), np.diag(W * np.cos(W)))


def test_closed_over_array_is_never_differentiated_or_mutated():
    W = np.array([1.0, 2.0])
    before = W.copy()
    value, g = tg.value_and_grad(lambda x: tg.sum(W * x * x), **INTERP)(np.ones(2))
    np.testing.assert_array_equal(g, 2 * W)
    np.testing.assert_array_equal(W, before)


def test_closure_design_is_documented():
    assert "closure" in tg.compile.__doc__ and "global" in tg.compile.__doc__
    import tracegrad.implicit as implicit

    assert "in-place" in implicit.__doc__


# ------------------------------------------- eager parameters in a closure


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_compile_closing_over_eager_parameter_gives_it_grad(backend):
    """Was: the tensor became a frozen constant and w.grad stayed None."""
    w = teager.tensor([1.0, 2.0], requires_grad=True)
    f = tg.compile(lambda x: (x * w).sum(), backend=backend)
    x = teager.tensor([3.0, 4.0])
    out = f(x)
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    with teager.no_grad():
        w.mul_(2)  # an optimizer step
    w.grad = None
    out = f(x)
    assert float(out.item()) == 3.0 * 2 + 4.0 * 4
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    # also when called on plain arrays: the result still carries w's graph
    out = f(np.array([1.0, 1.0], np.float32))
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 5.0])


def test_compile_closing_over_eager_parameter_matches_torch():
    torch = pytest.importorskip("torch")
    w_np = np.array([0.5, -1.5, 2.0], np.float32)
    x_np = np.array([1.0, 2.0, 3.0], np.float32)
    w = teager.tensor(w_np, requires_grad=True)
    tg.compile(lambda x: (tg.tanh(x * w) ** 2).sum(), **INTERP)(teager.tensor(x_np)).backward()
    tw = torch.tensor(w_np, requires_grad=True)
    (torch.tanh(torch.tensor(x_np) * tw) ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-6)


# ------------------------------------------------ static scalars in the key


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_negative_zero_is_its_own_static_key(backend):
    """Was [0.] for x * -0.0: -0.0 hit the entry traced for 0.0."""
    f = tg.compile(lambda x, s: x * s, backend=backend)
    assert not np.signbit(f(np.ones(1), 0.0))[0]
    assert np.signbit(f(np.ones(1), -0.0))[0]
    assert not np.signbit(f(np.ones(1), 0.0))[0]
    g = tg.compile(lambda x, s: x * s, backend=backend)
    assert np.signbit(g(np.ones(1), -0.0))[0]
    assert not np.signbit(g(np.ones(1), 0.0))[0]


def test_static_nan_is_traced_once():
    """Was traced on every call (NaN != NaN)."""
    f = tg.compile(lambda x, s: x + s, **INTERP)
    for _ in range(5):
        assert np.isnan(f(np.ones(1), float("nan"))[0])
    assert f.cache_info().traces == 1
    h = tg.compile(lambda x, s: x + s, **INTERP)
    for _ in range(3):
        h({"a": np.ones(1)}["a"], float("nan"))
        h([np.ones(1)][0], s=float("nan"))
    assert h.cache_info().traces == 2  # positional and keyword: two signatures


# ------------------------------------------------------------- relu(-1) = +0


def test_relu_of_negative_is_positive_zero_in_a_kernel():
    """Was -0.0 (x * 0 for x < 0)."""
    x = np.array([-1.0, -np.inf, -0.0, 0.0, np.nan, 2.0])
    for dtype in (np.float32, np.float64):
        out = tg.compile(lambda x: tg.relu(x))(x.astype(dtype))
        ref = np.maximum(x.astype(dtype), 0)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))
    ints = np.array([-3, 0, 4], np.int32)
    out = tg.compile(lambda x: tg.relu(x))(ints)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [0, 0, 4])


# ------------------------------------------------------- inputs we refuse


@pytest.mark.parametrize("mode", ["compile", "grad"])
def test_masked_array_is_refused_not_unmasked(mode):
    """Was [2., 4.]: the mask was dropped."""
    x = np.ma.array([1.0, 2.0], mask=[0, 1])
    f = (
        tg.compile(lambda x: x * 2, **INTERP)
        if mode == "compile"
        else tg.grad(lambda x: tg.sum(x * 2), **INTERP)
    )
    with pytest.raises(DTypeError, match=r"argument 'x' is a masked array") as info:
        f(x)
    assert __file__ in str(info.value)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("dtype", [object, complex, "U3"])
@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_object_complex_string_dtypes_are_refused(dtype, backend):
    """Was AttributeError ('int' object has no attribute 'item') for object and a
    TypeError from float() for complex, from inside the pipeline. Complex arrays are
    supported since issue 26: only grad of a complex output is refused (JAX's error)."""
    x = np.array([1, 2], dtype=dtype)
    if dtype is complex:
        np.testing.assert_array_equal(tg.compile(lambda x: x * 2, backend=backend)(x), x * 2)
        with pytest.raises(DTypeError, match=r"requires real-valued outputs.*complex128"):
            tg.grad(lambda x: tg.sum(x * 2), backend=backend)(x)
        return
    with pytest.raises(DTypeError, match=r"argument 'x' has dtype"):
        tg.compile(lambda x: x * 2, backend=backend)(x)


def test_rank_above_32_is_refused():
    """Was RuntimeError 'this function only supports up to 32 dimensions' from
    inside NumPy, with no argument name."""
    x = np.ones((1,) * 33)
    with pytest.raises(ShapeError, match=r"argument 'x' has 33 dimensions"):
        tg.compile(lambda x: x * 2, **INTERP)(x)
    np.testing.assert_array_equal(
        tg.compile(lambda x: tg.sum(x * 2), **INTERP)(np.ones((1,) * 32)), 2.0
    )


def test_generator_function_is_refused():
    """Was: compile returned an unrun generator object."""

    def gen(x):
        yield x * 2

    for make in (tg.compile, tg.grad, tg.value_and_grad):
        with pytest.raises(TypeError, match="generator function"):
            make(gen)
    with pytest.raises(tg.TracingError, match="returned a generator"):
        tg.compile(lambda x: (v for v in (x,)), **INTERP)(np.ones(2))


def test_other_threads_read_real_values_while_a_trace_has_swapped_a_global():
    """While thread A traces g (with the shared global swapped for its tracer),
    thread B's compiled f, closing over the same global, must still compute with
    the real array."""
    import threading

    shared = {"W": np.arange(3.0)}
    W = shared["W"]
    f = tg.compile(lambda x: x * shared["W"], **INTERP)
    np.testing.assert_array_equal(f(np.ones(3)), W)
    inside, release = threading.Event(), threading.Event()

    def slow(x):
        y = x + shared["W"]
        inside.set()
        release.wait(10)
        return y

    g = tg.compile(slow, **INTERP)
    t = threading.Thread(target=g, args=(np.ones(3),))
    t.start()
    try:
        assert inside.wait(10)
        assert isinstance(shared["W"], tg.tracing.Tracer)  # swapped in while tracing
        results = [f(np.ones(3)) for _ in range(3)]
    finally:
        release.set()
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, W)
    assert shared["W"] is W


def test_compiled_cat_of_many_operands_has_a_linear_backward():
    """Reverse mode calls a variadic primitive's one-pass `batch` rule (the per-operand
    rule for each of n operands builds n slices of n-operand offsets)."""
    from tracegrad.autodiff import vjp_graph

    sizes = []
    for n in (100, 200):
        graph = tg.trace(lambda *xs: tg.sum(tg.concatenate(xs) ** 2), *[np.ones(2)] * n)
        joint = vjp_graph(graph, wrt=list(range(n)), seed_ones=True)
        sizes.append(len(joint.nodes))
    assert sizes[1] < 2.2 * sizes[0]
    xs = [np.full(2, float(k)) for k in range(50)]
    grads = tg.grad(lambda *xs: tg.sum(tg.stack(xs) ** 2), argnums=tuple(range(50)), **INTERP)(*xs)
    for k, g in enumerate(grads):
        np.testing.assert_array_equal(g, 2 * xs[k])


# ------------------------------------------------- issue 11: memory of compiled functions


def _generated_modules() -> int:
    return sum(1 for name in sys.modules if name.startswith("tg_"))


def test_retrace_storm_keeps_a_bounded_number_of_kernels(monkeypatch):
    import warnings

    from tracegrad import compiler

    monkeypatch.setattr(compiler, "MAX_ENTRIES", 4)
    f = tg.value_and_grad(lambda x: tg.sum(tg.tanh(x) * x * 3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the retrace warning
        for n in range(1, 11):
            value, g = f(np.linspace(-1, 1, n))
            np.testing.assert_allclose(
                value, np.sum(np.tanh(np.linspace(-1, 1, n)) * np.linspace(-1, 1, n) * 3.0)
            )
    assert len(f.entries) == 4
    value, g = f(np.linspace(-1, 1, 2))  # an evicted shape: traced again, still right
    np.testing.assert_allclose(
        value, np.sum(np.tanh(np.linspace(-1, 1, 2)) * np.linspace(-1, 1, 2) * 3.0)
    )


def test_clear_caches_drops_kernels_and_generated_modules():
    import gc

    f = tg.value_and_grad(lambda x: tg.sum(tg.sin(x) * x * 5.0))
    for n in (3, 4, 5):
        f(np.ones(n))
    assert len(f.entries) == 3
    before = _generated_modules()
    tg.clear_caches()
    gc.collect()
    assert len(f.entries) == 0 and f.cache_info().traces == 0
    assert _generated_modules() < before
    value, g = f(np.ones(3))  # works again (loaded from the disk cache)
    np.testing.assert_allclose(g, np.sin(1.0) * 5 + np.cos(1.0) * 5)


def _activation(x):
    return tg.tanh(x)


def test_rebinding_a_helper_function_retraces():
    """A global helper the function calls is keyed by identity: rebinding it is seen."""
    global _activation
    original = _activation
    try:
        f = tg.grad(lambda x: tg.sum(_activation(x)), **INTERP)
        np.testing.assert_allclose(f(np.zeros(2)), [1.0, 1.0])

        def _activation(x):
            return tg.sin(x) * 2.0

        np.testing.assert_allclose(f(np.zeros(2)), [2.0, 2.0])
        assert f.cache_info().traces == 2
    finally:
        _activation = original


# ------------------------------------------- issue 14: tg.grad made inside a loop


def test_grad_made_inside_a_loop_is_traced_once_and_sees_new_data():
    X = np.ones((4, 3))
    w = np.array([0.5, -1.0, 2.0])
    made = []
    for step in range(20):
        X[:] = step  # the closed-over data changes every step
        g = tg.grad(lambda w: tg.sum((X @ w) ** 2), **INTERP)
        made.append(g)
        np.testing.assert_allclose(g(w), 2 * X.T @ (X @ w))
    assert all(m is made[0] for m in made)  # one shared CompiledFunction
    assert made[0].cache_info().traces == 1


def test_functions_with_different_closures_are_not_shared():
    def make(scale_array):
        return tg.grad(lambda x: tg.sum(x * scale_array), **INTERP)

    a, b = make(np.full(2, 2.0)), make(np.full(2, 3.0))
    assert a is not b
    np.testing.assert_array_equal(a(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(b(np.ones(2)), [3.0, 3.0])


def test_unrecognisable_callables_made_repeatedly_warn_once(monkeypatch):
    import functools

    from tracegrad import compiler

    monkeypatch.setattr(compiler, "_UNKEYED_WARN_AFTER", 5)
    monkeypatch.setitem(compiler._unkeyed, "count", 0)
    monkeypatch.setitem(compiler._unkeyed, "warned", False)

    def loss(x, k):
        return tg.sum(x * k)

    with pytest.warns(RuntimeWarning, match="cannot be matched to earlier ones") as record:
        for _ in range(8):
            tg.grad(functools.partial(loss, k=2.0), **INTERP)
    assert sum("cannot be matched" in str(w.message) for w in record) == 1


def test_kernel_finalizer_never_waits_for_a_lock_this_thread_holds():
    """A Kernel can die inside garbage collection while this thread holds the cache
    lock (an allocation under it): its module release must be left for later, not
    deadlock (it once hung tests/compile after tg.clear_caches())."""
    from tracegrad import codegen
    from tracegrad.runtime import cache

    # backend="numba": the kernel module must exist whatever this worker ran before (on the
    # default run's interpreter the test found only earlier tests' modules, or none: it
    # failed in a fresh clone whose worker had loaded no kernel yet)
    f = tg.value_and_grad(lambda x: tg.sum(tg.cos(x) * x * 7.0), backend="numba")
    f(np.ones(3))
    names = [n for n in codegen._MODULE_USERS]
    assert names
    with cache._LOCK:  # held, as _import holds it while allocating
        tg.compiler._SHARED.clear()
        f.cache_clear()
        del f
        import gc

        gc.collect()  # the finalizers run here and must return
    codegen.release_pending_modules()
    assert not codegen._PENDING_RELEASES
