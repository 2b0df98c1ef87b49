"""Tracing: graphs recorded from Python, NumPy capture, and the errors a static graph raises."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ir import format_graph, interpret, verify
from tracegrad.tracing import Tracer, TracingError

X = np.linspace(-1, 1, 12).reshape(3, 4)
W = np.linspace(0.5, 1.5, 8).reshape(4, 2)


def test_trace_golden_text():
    def f(x, w):
        return tg.sum(tg.tanh(x @ w) * 2.0)

    g = tg.trace(f, np.ones((3, 4), np.float32), np.ones((4, 2), np.float32))
    assert (
        format_graph(g)
        == """\
graph f(%0: f32[3,4] x, %1: f32[4,2] w) -> (%6) {
  %2 = matmul %0, %1 : f32[3,2]
  %3 = tanh %2 : f32[3,2]
  %4 = const 2.0 : f32[]
  %5 = mul %3, %4 : f32[3,2]
  %6 = sum[axis=None, keepdims=False] %5 : f32[]
  return %6
}"""
    )


def test_nodes_record_the_users_line():
    g = tg.trace(lambda x: tg.exp(x), X)
    assert g.nodes[-1].source.endswith(
        f"test_tracing.py:{test_nodes_record_the_users_line.__code__.co_firstlineno + 1}"
    )


def test_python_scalars_are_weakly_typed():
    g = tg.trace(lambda x: x * 2 + 0.5, np.ones(3, np.float32))
    consts = [n for n in g.nodes if n.op == "const"]
    assert [c.dtype for c in consts] == [np.float32, np.float32]
    assert g.outputs[0].dtype == np.float32


def test_ndarray_closures_become_consts_copied_at_trace_time():
    bias = np.array([1.0, 2.0, 3.0])
    g = tg.trace(lambda x: x + bias + bias, np.zeros(3))
    consts = [n for n in g.nodes if n.op == "const"]
    assert len(consts) == 1  # the same array is one node
    bias[0] = 100.0  # the graph keeps the value it saw
    np.testing.assert_array_equal(interpret(g, np.zeros(3))[0], [2.0, 4.0, 6.0])


NUMPY_PROGRAMS = {
    "ufuncs": lambda x, w: np.tanh(x) + np.exp(x) * np.sin(x) - np.cos(x) / np.sqrt(np.abs(x) + 1),
    "more_ufuncs": lambda x, w: np.log(np.square(x) + 1) + np.negative(x) ** 2 + np.power(x, 2),
    "dot": lambda x, w: np.dot(x, w),
    "matmul": lambda x, w: np.matmul(x, w),
    "sum_axis": lambda x, w: np.sum(x, axis=1),
    "sum_keep": lambda x, w: np.sum(x, axis=0, keepdims=True),
    "mean": lambda x, w: np.mean(x) + np.mean(x, axis=1),
    "max_min": lambda x, w: np.max(x, axis=1) + np.min(x, axis=1) + np.amax(x),
    "maximum": lambda x, w: np.maximum(x, 0.0) + np.minimum(x, 0.25),
    "where": lambda x, w: np.where(x > 0, x, 0.1 * x),
    "concatenate": lambda x, w: np.concatenate([x, x * 2], axis=1),
    "stack": lambda x, w: np.stack([x, x], axis=0),
    "reshape": lambda x, w: np.reshape(x, (4, 3)) + x.reshape(4, 3) + x.reshape((4, 3)),
    "transpose": lambda x, w: np.transpose(x) + x.T + x.transpose(1, 0),
    "swapaxes": lambda x, w: np.swapaxes(x, 0, 1) + x.swapaxes(-1, 0) + np.moveaxis(x, 0, -1),
    "moveaxis_3d": lambda x, w: np.moveaxis(x[None], [0, 1], [2, 0]).sum(axis=1),
    "methods": lambda x, w: x.sum() + x.mean(axis=0) + x.max(axis=1, keepdims=True).sum(),
    "clip": lambda x, w: np.clip(x, -0.5, 0.5),
    "expand_squeeze": lambda x, w: np.squeeze(np.expand_dims(x, 0), 0),
    "broadcast_to": lambda x, w: np.broadcast_to(x[0], (3, 4)),
    "like": lambda x, w: np.zeros_like(x) + np.ones_like(x) * x,
    "astype": lambda x, w: x.astype(np.float32).astype(np.float64),
    "indexing": lambda x, w: x[:, ::2] * x[0, 1] + x[..., None][:, :2, 0],
    "comparisons": lambda x, w: np.where((x >= 0) & (x < 0.5), x, -x) + (x == x),
}


@pytest.mark.parametrize("name", list(NUMPY_PROGRAMS))
def test_numpy_calls_are_captured(name):
    fn = NUMPY_PROGRAMS[name]
    g = verify(tg.trace(fn, X, W))
    expected = fn(X, W)
    (out,) = interpret(g, X, W)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert all(n.op != "const" or n.size <= 16 for n in g.nodes)  # nothing precomputed


def test_static_shape_queries_are_plain_python():
    seen = {}

    def f(x):
        seen["shape"], seen["ndim"], seen["size"] = np.shape(x), np.ndim(x), np.size(x)
        seen["len"], seen["dtype"] = len(x), x.dtype
        return x.reshape(x.shape[1], -1) if x.ndim == 2 else x

    g = tg.trace(f, X)
    assert seen == {"shape": (3, 4), "ndim": 2, "size": 12, "len": 3, "dtype": np.float64}
    assert g.outputs[0].shape == (4, 3)


@pytest.mark.parametrize(
    "fn, name",
    [
        (lambda x: np.linalg.cond(x[:, :3]), "numpy.linalg.cond"),  # (eig: issue 26)
        (lambda x: np.searchsorted(x.ravel(), 0.5), "numpy.searchsorted"),
        (lambda x: np.unique(x), "numpy.unique"),
        (lambda x: np.add.reduce(x), "numpy.add.reduce"),
        (lambda x: np.spacing(x), "numpy.spacing"),
        (lambda x: np.exp(x, out=np.empty(x.shape)), "numpy.exp"),
    ],
)
def test_unsupported_numpy_function_names_it(fn, name):
    with pytest.raises(TracingError, match=name.replace(".", r"\.")):
        tg.trace(fn, X)


def _line_of(fn, offset):
    return f"test_tracing.py:{fn.__code__.co_firstlineno + offset}"


def test_if_on_traced_value_raises_with_line_and_hint():
    def f(x):
        if tg.sum(x) > 0:
            return x
        return -x

    with pytest.raises(TracingError) as info:
        tg.trace(f, X)
    text = str(info.value)
    assert _line_of(f, 1) in text
    assert "tracegrad.where" in text and "static graph cannot depend on data" in text
    assert "bool()" in text


@pytest.mark.parametrize(
    "convert, what",
    [
        (float, "float()"),
        (int, "int()"),
        (bool, "bool()"),
        (complex, "complex()"),
        (lambda v: v.item(), ".item()"),
        (lambda v: v.tolist(), ".tolist()"),
        (lambda v: np.asarray(np.broadcast_to(v, (300,) + v.shape)), "a NumPy array"),
        (lambda v: [0, 1][v], "an index"),
        (lambda v: range(v), "an index"),
    ],
)
def test_concrete_conversions_raise(convert, what):
    with pytest.raises(TracingError, match=what.replace("(", r"\(").replace(")", r"\)")) as info:
        tg.trace(lambda x: convert(tg.sum(x)), X)
    assert "tracegrad.where" in str(info.value)
    assert "test_tracing.py" in str(info.value)


def test_while_and_boolean_operators_raise():
    def f(x):
        while tg.max(x) < 10:
            x = x * 2
        return x

    with pytest.raises(TracingError, match="test_tracing.py"):
        tg.trace(f, X)
    with pytest.raises(TracingError):
        tg.trace(lambda x: (x > 0) and x, X)


def test_tracing_error_is_a_tracegrad_error():
    assert issubclass(TracingError, tg.TracegradError)
    assert tg.TracingError is TracingError


def test_where_is_the_fix():
    f = lambda x: tg.where(x > 0, x, 0.0)
    (out,) = interpret(tg.trace(f, X), X)
    np.testing.assert_array_equal(out, np.maximum(X, 0))


def test_pytree_arguments_and_outputs():
    def f(params, xs, scale):
        return {"y": xs[0] @ params["w"] * scale, "z": (xs[1] + 1.0,)}

    params = {"w": W}
    g = tg.trace(f, params, [X, X[0]], 3.0)
    assert [n.attrs["name"] for n in g.inputs] == ["params_w", "xs_0", "xs_1"]
    assert len(g.outputs) == 2
    y, z = interpret(g, W, X, X[0])
    np.testing.assert_allclose(y, X @ W * 3.0)
    np.testing.assert_allclose(z, X[0] + 1.0)


def test_constant_outputs_become_const_nodes():
    g = tg.trace(lambda x: (x, 2.0, np.ones(2)), X)
    assert [n.op for n in g.outputs] == ["input", "const", "const"]


def test_unhashable_static_argument_is_rejected():
    with pytest.raises(TypeError, match="set"):  # an ArgumentError; JAX raises TypeError too
        tg.trace(lambda x, s: x, X, {1, 2})


def test_tracer_repr_and_static_attributes():
    seen = []
    tg.trace(lambda x: seen.append((repr(x), x.shape, x.ndim, x.size, x.dtype)) or x, X)
    r, shape, ndim, size, dtype = seen[0]
    assert r == "Tracer(f64[3,4], %0 = input)"
    assert (shape, ndim, size, dtype) == ((3, 4), 2, 12, np.float64)


def test_a_tracer_that_escaped_its_trace_is_an_error():
    holder = []
    tg.trace(lambda x: holder.append(x) or x, X)
    with pytest.raises(TracingError, match="escaped from a trace that has finished") as info:
        tg.trace(lambda y: y + holder[0], X)
    assert "test_tracing.py" in str(info.value)


def test_tracers_are_registered_above_eager():
    from tracegrad.ops.core import _KINDS

    assert _KINDS[Tracer][0] == 20
