"""The compiled front end: JAX's conventions, errors, caching and retracing.

Most tests use backend="interpret" (no Numba compile); tests/compile/
test_compile_numba.py runs a representative set through generated kernels.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings

import numpy as np
import pytest
from compile_helpers import assert_close, assert_memory_flat, numeric_grad

import tracegrad as tg
from tracegrad.compiler import CompileError, NonFiniteError

I = dict(backend="interpret")


# ------------------------------------------------------------ the seed's examples


def test_seed_example_z_equals_xy_plus_x_squared():
    f = lambda x, y: tg.sum(x * y + x**2)
    value, (gx, gy) = tg.value_and_grad(f, argnums=(0, 1), **I)(np.array([2.0]), np.array([3.0]))
    assert float(value) == 10.0
    np.testing.assert_array_equal(gx, [7.0])  # y + 2x
    np.testing.assert_array_equal(gy, [2.0])  # x


def test_seed_example_linear_layer():
    x = np.array([[1.0, 2.0]])
    W = np.array([[0.5, -0.3], [0.2, 0.4]])
    b = np.array([[0.1, -0.2]])
    loss = lambda x, W, b: tg.sum(tg.matmul(x, W) + b)
    value, (gx, gW, gb) = tg.value_and_grad(loss, argnums=(0, 1, 2), **I)(x, W, b)
    assert_close(value, np.sum(x @ W + b))
    np.testing.assert_allclose(gW, [[1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_allclose(gx, [[0.2, 0.6]])
    np.testing.assert_allclose(gb, [[1.0, 1.0]])


def test_seed_example_square_and_cube():
    assert float(tg.grad(lambda x: tg.sum(x**2), **I)(np.array([2.0]))[0]) == 4.0
    assert float(tg.grad(lambda x: tg.sum(x**3), **I)(np.array([3.0]))[0]) == 27.0


# ---------------------------------------------------------------- JAX conventions


def test_value_and_grad_int_argnums_returns_one_array():
    value, g = tg.value_and_grad(lambda x, y: tg.sum(x * y), argnums=1, **I)(
        np.ones(3), np.arange(3.0)
    )
    assert isinstance(g, np.ndarray) and g.shape == (3,)
    assert np.ndim(value) == 0


def test_value_and_grad_tuple_argnums_returns_tuple():
    _, grads = tg.value_and_grad(lambda x, y: tg.sum(x * y), argnums=(1,), **I)(
        np.ones(3), np.arange(3.0)
    )
    assert isinstance(grads, tuple) and len(grads) == 1


def test_grad_returns_only_gradients():
    g = tg.grad(lambda x, y: tg.sum(x * y), argnums=(0, 1), **I)(np.ones(2), np.full(2, 3.0))
    assert isinstance(g, tuple)
    np.testing.assert_array_equal(g[0], [3.0, 3.0])


def test_has_aux_layout():
    def f(x):
        return tg.sum(x**2), {"doubled": x * 2, "n": 3}

    (value, aux), g = tg.value_and_grad(f, has_aux=True, **I)(np.array([1.0, 2.0]))
    assert float(value) == 5.0
    np.testing.assert_array_equal(aux["doubled"], [2.0, 4.0])
    assert aux["n"] == 3
    np.testing.assert_array_equal(g, [2.0, 4.0])
    g2, aux2 = tg.grad(f, has_aux=True, **I)(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g2, [2.0, 4.0])


def test_has_aux_needs_a_pair():
    with pytest.raises(CompileError, match="has_aux=True"):
        tg.value_and_grad(lambda x: tg.sum(x), has_aux=True, **I)(np.ones(2))


def test_dtypes_follow_the_inputs():
    f = lambda x, y: tg.sum(tg.tanh(x) * y)
    x32 = np.linspace(-1, 1, 4, dtype=np.float32)
    value, (gx, gy) = tg.value_and_grad(f, argnums=(0, 1), **I)(x32, np.ones(4, np.float64))
    assert value.dtype == np.float64  # f32 * f64 promotes
    assert gx.dtype == np.float32 and gy.dtype == np.float64
    value, gx = tg.value_and_grad(f, **I)(x32, np.ones(4, np.float32))
    assert value.dtype == np.float32 and gx.dtype == np.float32


def test_pytree_arguments_and_gradients():
    def loss(params, x):
        return tg.sum(tg.tanh(x @ params["W"] + params["b"]))

    params = {"W": np.full((3, 2), 0.1), "b": np.zeros(2)}
    x = np.arange(6.0).reshape(2, 3) / 6
    value, grads = tg.value_and_grad(loss, **I)(params, x)
    assert set(grads) == {"W", "b"}
    flat = lambda W, b: float(loss({"W": W, "b": b}, x))
    assert_close(grads["W"], numeric_grad(flat, [params["W"], params["b"]], 0), rtol=1e-6)
    assert_close(grads["b"], numeric_grad(flat, [params["W"], params["b"]], 1), rtol=1e-6)


def test_tuple_and_list_arguments_and_outputs():
    f = tg.compile(lambda xs: [xs[0] + xs[1], (xs[0] * 2,)], **I)
    out = f((np.ones(2), np.arange(2.0)))
    assert isinstance(out, list) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[0], [1.0, 2.0])


def test_python_float_argnum_is_differentiated():
    g = tg.grad(lambda x, y: tg.sum(y * x * x), **I)(3.0, np.ones(2))
    assert float(g) == 12.0


def test_jax_agrees():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5])
    ours = tg.value_and_grad(lambda x, y: tg.sum(tg.tanh(x) * y**2), argnums=(0, 1), **I)(x, y)
    theirs = jax.value_and_grad(lambda x, y: jnp.sum(jnp.tanh(x) * y**2), argnums=(0, 1))(x, y)
    assert_close(ours[0], theirs[0])
    for a, b in zip(ours[1], theirs[1], strict=True):
        assert_close(a, np.asarray(b))
    assert isinstance(ours[1], tuple) and isinstance(theirs[1], tuple)


# ------------------------------------------------------------------------ errors


def test_non_scalar_output_error():
    with pytest.raises(CompileError, match=r"scalar-output.*shape: \(3,\)"):
        tg.grad(lambda x: x * 2, **I)(np.ones(3))


def test_integer_output_error():
    with pytest.raises(tg.DTypeError, match="real-valued outputs"):
        tg.grad(lambda x: tg.argmax(x), **I)(np.ones(3))


def test_integer_input_error_names_the_argument():
    with pytest.raises(tg.DTypeError, match="'x'.*int64"):
        tg.grad(lambda x: tg.sum(x), **I)(np.arange(3))


@pytest.mark.parametrize("argnums", [2, (0, 5), -3])
def test_argnums_out_of_range(argnums):
    with pytest.raises(CompileError, match="argnums=.* is out of range.*2 positional"):
        tg.value_and_grad(lambda x, y: tg.sum(x * y), argnums=argnums, **I)(np.ones(2), np.ones(2))


@pytest.mark.parametrize("argnums", ["x", 1.0, None, True])
def test_argnums_of_wrong_type(argnums):
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        tg.grad(lambda x: tg.sum(x), argnums=argnums)


def test_negative_argnums_count_from_the_end():
    g = tg.grad(lambda x, y: tg.sum(x * y), argnums=-1, **I)(np.full(2, 3.0), np.ones(2))
    np.testing.assert_array_equal(g, [3.0, 3.0])


@pytest.mark.parametrize("bad", [None, "abc"])
def test_none_or_string_where_an_array_is_expected(bad):
    with pytest.raises(CompileError, match="where an array is expected") as info:
        tg.grad(lambda x: tg.sum(x), **I)(bad)
    assert "test_compile_api.py" in str(info.value)


def test_none_used_as_array_in_compiled_function():
    with pytest.raises(TypeError, match="expected an array, got NoneType") as info:
        tg.compile(lambda x, y: x + y, **I)(np.ones(2), None)
    assert "test_compile_api.py" in str(info.value)


def test_shape_error_names_the_op_and_user_line():
    with pytest.raises(tg.ShapeError, match="matmul") as info:
        tg.compile(lambda a, b: a @ b, **I)(np.ones((2, 3)), np.ones((2, 3)))
    assert "test_compile_api.py" in str(info.value)


def test_bad_backend():
    with pytest.raises(ValueError, match="backend"):
        tg.compile(lambda x: x, backend="cuda")


# ----------------------------------------------------------- caching and retrace


def test_each_signature_traced_once_and_hits_counted():
    calls = []

    def f(x):
        calls.append(1)
        return tg.sum(x * x)

    vg = tg.value_and_grad(f, **I)
    for _ in range(3):
        vg(np.ones(3))
    assert vg.cache_info() == (1, 2)
    assert vg.cache_info().traces == 1 and vg.cache_info().hits == 2
    vg(np.ones(4))  # new shape: retrace
    vg(np.ones(3, np.float32))  # new dtype: retrace
    vg(np.ones(3))  # back to the first: hit
    assert vg.cache_info() == (3, 3)
    assert len(calls) == 3


def test_static_python_scalars_are_part_of_the_key():
    f = tg.compile(lambda x, n: x * n, **I)
    np.testing.assert_array_equal(f(np.ones(2), 2), [2.0, 2.0])
    np.testing.assert_array_equal(f(np.ones(2), 3), [3.0, 3.0])
    np.testing.assert_array_equal(f(np.ones(2), 2), [2.0, 2.0])
    assert f.cache_info() == (2, 1)
    f(np.ones(2), 2.0)  # 2.0 is not 2: a different static value
    assert f.cache_info().traces == 3


def test_static_scalar_drives_python_control_flow():
    def f(x, n_layers):
        for _ in range(n_layers):
            x = tg.tanh(x)
        return x

    f = tg.compile(f, **I)
    np.testing.assert_allclose(f(np.ones(2), 2), np.tanh(np.tanh(np.ones(2))))
    assert len([n for n in f.lower(np.ones(2), 3).traced.nodes if n.op == "tanh"]) == 3


def test_more_than_eight_signatures_warns_once_naming_the_argument():
    f = tg.compile(lambda x, n: x * n, **I)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(12):
            f(np.ones(2), n)
    messages = [str(w.message) for w in caught if "traced for" in str(w.message)]
    assert len(messages) == 1
    assert "argument 'n'" in messages[0] and "9 different signatures" in messages[0]


def test_changing_shape_warning_names_the_argument():
    f = tg.compile(lambda w, x: w * x, **I)
    with pytest.warns(RuntimeWarning, match="argument 'x' keeps changing"):
        for n in range(1, 11):
            f(np.ones(1), np.ones(n))


def test_non_contiguous_and_negative_stride_inputs():
    f = tg.value_and_grad(lambda x: tg.sum(x * tg.exp(x)), **I)
    base = np.linspace(-1, 1, 12).reshape(3, 4)
    for view in (base.T, base[:, ::-1], base[::2], np.asfortranarray(base)):
        before = view.copy()
        value, g = f(np.asarray(view))
        assert_close(value, np.sum(view * np.exp(view)))
        assert_close(g, np.exp(view) * (1 + view))
        np.testing.assert_array_equal(view, before)  # never mutated
        # and again from the fast path
        value2, g2 = f(np.asarray(view))
        assert_close(g2, g)


def test_read_only_inputs():
    x = np.linspace(0, 1, 5)
    x.setflags(write=False)
    g = tg.grad(lambda x: tg.sum(x**2), **I)
    np.testing.assert_allclose(g(x), 2 * x)
    np.testing.assert_allclose(g(x), 2 * x)


def test_lists_are_pytrees_not_arrays():
    """A list or tuple is a structure at the boundary, as in JAX (issue 26): its
    numbers are static leaves (a new value retraces), its arrays traced leaves."""
    f = tg.compile(lambda x: x * 2, **I)
    out = f([1.0, 2.0])  # list repetition, as jax.jit(lambda x: x * 2)([1., 2.])
    assert isinstance(out, list) and len(out) == 4
    np.testing.assert_array_equal(np.array(out), [1.0, 2.0, 1.0, 2.0])
    g = tg.compile(lambda x: np.asarray(x) * 2, **I)
    np.testing.assert_array_equal(g([1.0, 2.0]), [2.0, 4.0])
    np.testing.assert_array_equal(g([[1.0], [2.0]]), [[2.0], [4.0]])
    assert g.cache_info().traces == 2
    np.testing.assert_array_equal(g([1.0, 2.0]), [2.0, 4.0])
    assert g.cache_info().traces == 2
    reshape = tg.compile(lambda x, shape: tg.reshape(x, shape), **I)
    assert reshape(np.arange(6.0), (2, 3)).shape == (2, 3)  # a static shape tuple


def test_threads_trace_each_signature_once():
    traced = []
    lock = threading.Lock()

    def f(x):
        with lock:
            traced.append(x.shape)
        return tg.sum(tg.tanh(x) ** 2)

    vg = tg.value_and_grad(f, **I)
    shapes = [(3,), (4,), (3,), (4,)] * 5
    results, errors = {}, []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for j, s in enumerate(shapes[k::4] * 3):
                x = np.linspace(-1, 1, s[0])
                results[(k, j)] = (x, vg(x))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(traced) == [(3,), (4,)]
    for x, (value, g) in results.values():
        assert_close(value, np.sum(np.tanh(x) ** 2))
        assert_close(g, 2 * np.tanh(x) * (1 - np.tanh(x) ** 2))


# -------------------------------------------------------------------- grad of grad


def test_grad_of_grad():
    f = lambda x: tg.sum(tg.sin(x) * x**3)
    d1 = tg.grad(f, **I)
    d2 = tg.grad(lambda x: tg.sum(d1(x)), **I)
    d3 = tg.grad(lambda x: tg.sum(d2(x)), **I)
    x = np.array([0.3, 1.2, -0.7])
    s, c = np.sin(x), np.cos(x)
    assert_close(d1(x), c * x**3 + 3 * x**2 * s)
    assert_close(d2(x), -s * x**3 + 6 * x**2 * c + 6 * x * s)
    assert_close(d3(x), -c * x**3 - 3 * x**2 * s + 12 * x * c - 6 * x**2 * s + 6 * s + 6 * x * c)


def test_hessian_vector_product_of_two_argument_function():
    f = lambda x, y: tg.sum(tg.exp(x * y))
    gx = tg.grad(f, argnums=0, **I)
    hxy = tg.grad(lambda x, y: tg.sum(gx(x, y)), argnums=1, **I)
    x, y = np.array([0.5, -0.2]), np.array([1.0, 2.0])
    # d/dy sum_i exp(x_i y_i) y_i = exp(xy) (1 + x y)
    assert_close(hxy(x, y), np.exp(x * y) * (1 + x * y))


def test_compile_of_grad_and_grad_of_compile():
    f = tg.compile(lambda x: tg.tanh(x) * 3.0, **I)
    g = tg.grad(lambda x: tg.sum(f(x)), **I)
    x = np.array([0.1, -0.4])
    assert_close(g(x), 3 * (1 - np.tanh(x) ** 2))
    cg = tg.compile(tg.grad(lambda x: tg.sum(x**3), **I), **I)
    assert_close(cg(x), 3 * x**2)


# ------------------------------------------------------------------- inspection


def test_lower_exposes_every_stage():
    lowered = tg.value_and_grad(lambda x: tg.sum(tg.tanh(x)), **I).lower(np.ones(3))
    assert "tanh" in str(lowered.traced) and "# bwd" not in str(lowered.traced)
    assert "# bwd" in str(lowered.joint)
    assert str(lowered.optimized).startswith("graph ")
    assert lowered.source is None and lowered.source_path is None  # the interpreter
    lowered_c = tg.compile(lambda x: x + 1.0, **I).lower(np.ones(2))
    assert lowered_c.joint is lowered_c.traced


def test_lower_does_not_count_as_a_call():
    f = tg.compile(lambda x: x + 1.0, **I)
    f.lower(np.ones(2))
    f.lower(np.ones(2))
    assert f.cache_info() == (1, 0)


def test_check_finite_names_the_output_and_the_first_bad_node():
    f = tg.value_and_grad(lambda x: tg.sum(tg.sqrt(x)), check_finite=True, **I)
    f(np.array([1.0, 4.0]))
    with pytest.raises(NonFiniteError, match=r"gradient for 'x' contains Inf.*sqrt") as info:
        f(np.array([0.0, 4.0]))
    assert "test_compile_api.py" in str(info.value)
    with pytest.raises(NonFiniteError, match="value contains NaN"):
        f(np.array([-1.0, 4.0]))


def test_logging_reports_stages_and_misses(caplog):
    f = tg.value_and_grad(lambda x: tg.sum(x * x), **I)
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        f(np.ones(2))
        f(np.ones(3))
    text = caplog.text
    assert "cache miss (first call)" in text
    assert "trace" in text and "autodiff" in text
    assert "x: f64[2] -> f64[3]" in text


def test_method_decorator():
    class Model:
        scale = 2.0

        @tg.compile(backend="interpret")
        def forward(self, x):
            return x * self.scale

    # `self` is a static argument (hashable object), part of the cache key
    np.testing.assert_array_equal(Model().forward(np.ones(2)), [2.0, 2.0])


def test_import_does_not_import_numba():
    import subprocess

    code = (
        "import sys, numpy as np, tracegrad as tg; "
        "tg.value_and_grad(lambda x: tg.sum(x*x), backend='interpret')(np.ones(2)); "
        "tg.trace(lambda x: x, np.ones(1)); "
        "print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_big_endian_inputs():
    x = np.linspace(-1, 1, 4).astype(">f8")
    g = tg.grad(lambda x: tg.sum(x**2), **I)
    np.testing.assert_allclose(g(x), 2 * x.astype(np.float64))
    assert g(x).dtype == np.float64


def test_ragged_list_is_a_clear_error():
    # a list argument is a pytree (of static numbers here); an op making it an array
    # names the problem and the user's line
    with pytest.raises(tg.ShapeError, match="cannot make an array") as info:
        tg.compile(lambda x: tg.exp(x) * 2, **I)([[1.0, 2.0], [3.0]])
    assert "test_compile_api.py" in str(info.value)


def test_where_trap_and_the_safe_idiom():
    # The untaken branch still differentiates: sqrt'(x) at x < 0 is NaN, and 0 * NaN = NaN.
    safe = lambda x: tg.sum(tg.where(x > 0, tg.sqrt(tg.where(x > 0, x, 1.0)), 0.0))
    g = tg.grad(safe, **I)(np.array([-1.0, 4.0]))
    np.testing.assert_allclose(g, [0.0, 0.25])


def test_tracegrad_log_env_prints_stage_times():
    import subprocess

    code = (
        "import numpy as np, tracegrad as tg; "
        "f = tg.value_and_grad(lambda x: tg.sum(x*x), backend='interpret'); "
        "f(np.ones(2)); f(np.ones(3))"
    )
    env = dict(__import__("os").environ, TRACEGRAD_LOG="1")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "cache miss (first call)" in out.stderr
    assert "trace" in out.stderr and "autodiff" in out.stderr and "passes" in out.stderr
    assert "x: f64[2] -> f64[3]" in out.stderr


def test_memory_stays_flat_over_many_compiled_steps():
    f = tg.value_and_grad(lambda w, x: tg.sum(tg.tanh(x @ w) ** 2), **I)
    w, x = np.full((3, 2), 0.1), np.ones((4, 3))
    assert_memory_flat(lambda: f(w, x), warmup=500, window=1000)


def test_calls_make_no_reference_cycles():
    import gc

    f = tg.value_and_grad(lambda p, x: tg.sum(tg.tanh(x @ p["w"]) ** 2), **I)
    params, x = {"w": np.full((3, 2), 0.1)}, np.ones((4, 3))
    g = tg.grad(lambda x: tg.sum(x * x), **I)
    f(params, x), g(x)
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            f(params, x)  # pytree path
            g(x)  # plain-array path
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_inner_grad_closing_over_an_outer_traced_value():
    # d/dy [ d/dx sum(x^2 y^3) ] = d/dy [2 x y^3] summed over x = sum(6 x y^2)
    x0 = np.array([1.0, 2.0])

    def outer(y):
        inner = tg.grad(lambda x: tg.sum(x * x * y**3), **I)
        return tg.sum(inner(x0))

    y = np.array([0.5, 1.5])
    assert_close(tg.grad(outer, **I)(y), 6 * x0 * y**2)


def test_compiled_function_closing_over_outer_tracer_inlines():
    def outer(y):
        scaled = tg.compile(lambda x: x * y, **I)
        return tg.sum(scaled(y) * 2.0)

    y = np.array([1.0, 3.0])
    assert_close(tg.grad(outer, **I)(y), 4 * y)


def test_concrete_call_closing_over_outer_tracer_inlines():
    def outer(y):
        scaled = tg.compile(lambda x: x * y, **I)
        return tg.sum(scaled(np.full(2, 3.0)))

    assert_close(tg.grad(outer, **I)(np.ones(2)), [3.0, 3.0])


def test_argnums_order_is_kept():
    f = lambda x, y: tg.sum(x * y * y)
    x, y = np.ones(2), np.full(2, 3.0)
    _, (gy, gx) = tg.value_and_grad(f, argnums=(1, 0), **I)(x, y)
    np.testing.assert_array_equal(gy, [6.0, 6.0])
    np.testing.assert_array_equal(gx, [9.0, 9.0])
    g0, g0_again = tg.grad(f, argnums=(0, 0), **I)(x, y)
    np.testing.assert_array_equal(g0, g0_again)
    tree_grads = tg.grad(lambda p, q: tg.sum(p["a"] * q[0]), argnums=(1, 0), **I)({"a": x}, [y])
    assert isinstance(tree_grads[0], list) and isinstance(tree_grads[1], dict)
    np.testing.assert_array_equal(tree_grads[0][0], x)
    np.testing.assert_array_equal(tree_grads[1]["a"], y)


def test_jax_conventions_for_argnums_order_and_aux():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    x, y = np.array([0.5, -1.0]), np.array([1.5, 0.25])

    def ours_f(x, y):
        return tg.sum(tg.sin(x) * y**3), {"x2": x * 2}

    def jax_f(x, y):
        return jnp.sum(jnp.sin(x) * y**3), {"x2": x * 2}

    (v1, aux1), g1 = tg.value_and_grad(ours_f, argnums=(1, 0), has_aux=True, **I)(x, y)
    (v2, aux2), g2 = jax.value_and_grad(jax_f, argnums=(1, 0), has_aux=True)(x, y)
    assert_close(v1, v2)
    assert_close(aux1["x2"], np.asarray(aux2["x2"]))
    assert len(g1) == len(g2) == 2
    for a, b in zip(g1, g2, strict=True):
        assert_close(a, np.asarray(b))
    ga, auxa = tg.grad(ours_f, has_aux=True, **I)(x, y)
    gb, auxb = jax.grad(jax_f, has_aux=True)(x, y)
    assert_close(ga, np.asarray(gb))


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda a, b: a + b.T, "add"),
        (lambda a, b: a @ b, "matmul"),
        (lambda a, b: tg.reshape(a, (7,)), "reshape"),
        (lambda a, b: tg.concatenate([a, b.T], axis=0), "concatenate"),
        (lambda a, b: a[5], "getitem|index"),
        (lambda a, b: tg.exp(tg.argmax(a)), "exp"),
    ],
)
def test_traced_errors_name_the_op_and_the_users_line(fn, op):
    with pytest.raises(tg.TracegradError, match=op) as info:
        tg.compile(fn, **I)(np.ones((2, 3)), np.ones((2, 3)))
    assert f"test_compile_api.py:{fn.__code__.co_firstlineno}" in str(info.value)


def test_outputs_never_alias_inputs():
    x = np.arange(6.0)
    for f in (lambda x: x, lambda x: tg.reshape(x, (2, 3)), lambda x: x[1:]):
        out = tg.compile(f, **I)(x)
        assert not np.shares_memory(out, x)
