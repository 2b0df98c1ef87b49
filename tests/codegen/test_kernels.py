"""Compiled kernels against the IR interpreter, primitive by primitive.

Each graph below covers many primitives at once (one Numba compile per graph
and dtype): elementwise arithmetic with broadcasting, elementwise math, reductions
over each axis, shape ops, matmul in every rank, the softmax family, gather/scatter,
and a primitive that falls back to NumPy. float64 must match tightly, float32 to a
float32 tolerance.

A kernel's compile time grows faster than its size (LLVM on one long function):
in one process at load ~4, the former reductions graph compiled in 16.4 s, its
four parts below (sum/mean, max/min, argmax/argmin, normalizers) in 2.8 + 3.4 +
1.7 + 3.8 s; the former elementwise graph in 7.7 s, its halves (elementwise, math)
in 1.8 + 2.7 s. So the graphs are kept at the size of those parts.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from codegen_helpers import GraphMaker, assert_matches_interpreter

from tracegrad.codegen import _generate, build_kernel, ir_hash


def _rand(rng, shape, dtype, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(dtype)


def elementwise_graph(dtype):
    gm = GraphMaker("elementwise")
    x = gm.input((3, 4), dtype, "x")
    y = gm.input((4,), dtype, "y")  # broadcasts along rows
    p = gm.input((3, 1), dtype, "p")  # broadcasts along columns
    zero = gm.const(0.0, dtype)
    outs = [gm.op(name, x, y) for name in ("add", "sub", "mul", "div", "maximum", "minimum")]
    outs += [gm.op(name, x) for name in ("neg", "relu", "abs", "sign")]
    cmp = [gm.op(name, x, p) for name in ("gt", "lt", "ge", "le", "eq", "ne")]
    outs += cmp
    outs += [
        gm.op("logical_and", cmp[0], cmp[5]),
        gm.op("logical_or", cmp[1], cmp[4]),
        gm.op("logical_not", cmp[2]),
        gm.op("isfinite", gm.op("div", x, zero)),
    ]
    outs += [
        gm.op("where", cmp[0], x, y),
        gm.op("clip", x, lo=-0.5, hi=0.75),
        gm.op("clip", x, lo=None, hi=0.25),
        gm.op("astype", x, dtype="float64" if dtype == "float32" else "float32"),
        gm.op("astype", cmp[0], dtype=dtype),
        gm.op("full_like", x, value=3.5),
    ]
    return gm.output(*outs)


def math_graph(dtype):
    gm = GraphMaker("math")
    x = gm.input((3, 4), dtype, "x")
    y = gm.input((4,), dtype, "y")  # broadcasts along rows
    p = gm.input((3, 1), dtype, "p")  # broadcasts along columns
    two = gm.const(2.0, dtype)
    half = gm.const(0.5, dtype)
    outs = [gm.op(name, x) for name in ("exp", "sin", "cos", "tanh", "sigmoid")]
    ap = gm.op("add", gm.op("abs", x), half)  # positive
    outs += [
        gm.op("log", ap),
        gm.op("sqrt", ap),
        gm.op("pow", ap, p),
        gm.op("pow", x, two),
        gm.op("pow", ap, half),
    ]
    # a chain that fuses into one loop, with a broadcast operand in the middle
    chain = gm.op("mul", gm.op("tanh", gm.op("add", x, y)), gm.op("exp", gm.op("neg", p)))
    outs.append(gm.op("sum", chain, axis=None, keepdims=False))
    return gm.output(*outs)


def _reductions(names):
    """A graph of the `names` reductions over every axis choice (one graph per pair:
    see the module doc)."""

    def make(dtype):
        gm = GraphMaker("reductions_" + "_".join(names))
        x = gm.input((3, 4, 5), dtype, "x")
        outs = []
        for name in names:
            if name.startswith("arg"):
                outs += [
                    gm.op(name, x, axis=None, keepdims=False),
                    gm.op(name, x, axis=1, keepdims=False),
                    gm.op(name, x, axis=2, keepdims=True),
                ]
                continue
            for axis in (None, 0, 1, 2, (0, 2), (1, 2)):
                outs.append(gm.op(name, x, axis=axis, keepdims=False))
            outs.append(gm.op(name, x, axis=1, keepdims=True))
        # (an elementwise op: build_kernel fuses a graph that has one, and reductions
        # are emitted as members of fused groups; without it they would run in NumPy)
        outs.append(gm.op("sum", gm.op("exp", x), axis=(0, 1), keepdims=True))
        return gm.output(*outs)

    make.__name__ = f"reductions_{'_'.join(names)}_graph"
    return make


sum_mean_graph = _reductions(("sum", "mean"))
max_min_graph = _reductions(("max", "min"))
arg_reductions_graph = _reductions(("argmax", "argmin"))


def normalizers_graph(dtype):
    gm = GraphMaker("normalizers")
    x = gm.input((3, 4, 5), dtype, "x")
    outs = [
        gm.op("var", x, axis=None, keepdims=False),
        gm.op("var", x, axis=2, keepdims=True),
        gm.op("var", x, axis=(1, 2), keepdims=False, ddof=1),
    ]
    outs += [
        gm.op("logsumexp", x, axis=2, keepdims=False),
        gm.op("logsumexp", x, axis=None, keepdims=True),
        gm.op("softmax", x, axis=2),  # short last-axis rows: one flat exp loop
        gm.op("softmax", x, axis=0),
        gm.op("log_softmax", x, axis=1),
        gm.op("log_softmax", x, axis=2),
    ]
    return gm.output(*outs)


def structure_graph(dtype):
    gm = GraphMaker("structure")
    a = gm.input((3, 4), dtype, "a")
    b = gm.input((4, 5), dtype, "b")
    v = gm.input((4,), dtype, "v")
    batch = gm.input((2, 3, 4), dtype, "batch")
    idx = gm.input((3, 2), "int64", "idx")
    outs = [
        gm.op("matmul", a, b),
        gm.op("matmul", a, v),
        gm.op("matmul", v, b),
        gm.op("matmul", v, v),
        gm.op("matmul", batch, b),
        gm.op("matmul", gm.op("transpose", b, axes=(1, 0)), gm.op("transpose", a, axes=(1, 0))),
        gm.op("matmul", batch, gm.op("transpose", batch, axes=(0, 2, 1))),
    ]
    t = gm.op("transpose", batch, axes=(2, 0, 1))
    outs += [
        t,
        gm.op("exp", t),
        gm.op("reshape", t, shape=(8, 3)),
        gm.op("broadcast_to", v, shape=(2, 3, 4)),
        gm.op("concatenate", a, gm.op("neg", a), axis=0),
        gm.op("concatenate", gm.op("exp", a), gm.op("reshape", v, shape=(1, 4)), axis=0),
        gm.op("getitem", batch, spec=(1, ("slice", 0, 3, 2), None, ("slice", 3, None, -1))),
        gm.op(
            "index_add_zeros",
            gm.op("getitem", a, spec=(("slice", 1, 3, 1), 2)),
            spec=(("slice", 1, 3, 1), 2),
            shape=(3, 4),
        ),
        gm.op("take_along_axis", a, idx, axis=1),
        gm.op(
            "put_along_axis_add",
            gm.op("take_along_axis", a, idx, axis=1),
            idx,
            axis=1,
            shape=(3, 4),
        ),
        a,
        a,
    ]  # an input returned twice: two fresh copies
    return gm.output(*outs)


def _inputs(graph, rng):
    arrays = []
    for n in graph.inputs:
        if np.issubdtype(n.dtype, np.integer):
            arrays.append(rng.integers(-4, 4, n.shape).astype(n.dtype))  # negative wraps
        else:
            arrays.append(_rand(rng, n.shape, n.dtype))
    return arrays


@functools.cache
def compiled(make, dtype):
    """(graph, kernel), compiled once per run and shared by the tests of this file."""
    graph = make(dtype)
    return graph, build_kernel(graph)


@pytest.mark.parametrize(
    "make",
    [
        elementwise_graph,
        math_graph,
        sum_mean_graph,
        max_min_graph,
        arg_reductions_graph,
        normalizers_graph,
        structure_graph,
    ],
    ids=["elementwise", "math", "sum-mean", "max-min", "argmax-argmin", "normalizers", "structure"],
)
def test_kernel_matches_interpreter(make, dtype, rng):
    graph, kernel = compiled(make, dtype)
    arrays = _inputs(graph, rng)
    with np.errstate(all="ignore"):
        assert_matches_interpreter(kernel, graph, arrays, dtype)
    assert not kernel.fallback_ids, "every primitive here has code generation"


def test_normalizers_with_nan_and_inf_rows_match_the_interpreter(dtype, rng):
    """The softmax family's row peak skips NaN (so it vectorizes): a NaN, an inf or a
    row of -inf must still give NumPy's NaN, inf and values, position by position."""
    graph, kernel = compiled(normalizers_graph, dtype)
    (x,) = _inputs(graph, rng)
    x[0, 0, :] = -np.inf  # a whole row of -inf
    x[0, 1, 0] = np.nan  # NaN first in its row (the peak starts at -inf)
    x[0, 2, 3] = np.nan  # NaN later in its row
    x[1, 2, 1] = np.inf
    x[1, 3, :2] = (np.inf, np.nan)
    x[2, 3, 4] = -np.inf
    with np.errstate(all="ignore"):
        assert_matches_interpreter(kernel, graph, [x], dtype)


def test_outputs_are_fresh_arrays(rng):
    graph, kernel = compiled(structure_graph, "float64")
    arrays = _inputs(graph, rng)
    outs = kernel(*arrays)
    a = arrays[0]
    assert not np.shares_memory(outs[-1], a) and not np.shares_memory(outs[-2], a)
    assert not np.shares_memory(outs[-1], outs[-2])
    outs2 = kernel(*arrays)
    assert all(not np.shares_memory(o1, o2) for o1, o2 in zip(outs, outs2, strict=True))


def test_source_is_readable_and_commented():
    # generation only for the float32 graphs (their kernels compile in the Numba pass);
    # the float64 kernel, compiled for the test above, holds exactly the generated text
    for make in (elementwise_graph, math_graph):
        graph = make("float32")
        src = _generate(graph, f"kernel_{ir_hash(graph)}").source
        assert "# %" in src and " = mul %" in src
        depth = max_paren_depth(src)
        assert depth < 100
    graph64, kernel = compiled(elementwise_graph, "float64")
    assert kernel.source == _generate(graph64, f"kernel_{ir_hash(graph64)}").source
    assert kernel.source_path is None or kernel.source_path.endswith(".py")


def max_paren_depth(text):
    depth = best = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        best = max(best, depth)
    return best


def test_advanced_indexing_gather_and_scatter(dtype, rng):
    gm = GraphMaker("advanced_index")
    x = gm.input((5, 4, 3), dtype, "x")
    i = gm.input((2, 3), "int64", "i")
    j = gm.input((3,), "int64", "j")
    specs = [
        (("array", 0), ("slice", 0, 4, 1), ("slice", 0, 3, 1)),  # x[i]
        (("slice", 1, 5, 2), ("array", 1), ("slice", 2, None, -1)),  # x[1::2, j, ::-1]
        (("array", 0), ("slice", 0, 4, 1), ("array", 1)),  # non-adjacent: block first
        (2, ("array", 1), None, ("slice", 0, 3, 1)),  # int counts as advanced
    ]
    outs = []
    for spec in specs:
        arrays = [n for k, n in enumerate((i, j)) if ("array", k) in spec]
        renum = tuple(
            ("array", arrays.index((i, j)[e[1]])) if isinstance(e, tuple) and e[0] == "array" else e
            for e in spec
        )
        # computed operands (neg, abs: cheap to compile; exp and sin took 2.5x the
        # compile time and are covered by the elementwise graph)
        picked = gm.op("getitem", gm.op("neg", x), *arrays, spec=renum)
        outs.append(picked)
        outs.append(
            gm.op("index_add_zeros", gm.op("abs", picked), *arrays, spec=renum, shape=(5, 4, 3))
        )
    graph = gm.output(*outs)
    kernel = build_kernel(graph)
    assert not kernel.fallback_ids
    xs = _rand(rng, (5, 4, 3), dtype)
    ii = np.array([[0, 4, -1], [2, 2, 1]])  # repeats accumulate in the scatter
    jj = np.array([2, -3, 1])
    assert_matches_interpreter(kernel, graph, [xs, ii, jj], dtype)


def test_numpy_fallback_for_a_node_without_codegen(rng, monkeypatch):
    from tracegrad.codegen import structured

    monkeypatch.delitem(structured.STRUCTURED, "getitem")  # pretend gathers have no codegen
    gm = GraphMaker("fallback")
    x = gm.input((5, 3), "float64", "x")
    i = gm.input((4,), "int64", "i")
    picked = gm.op("getitem", gm.op("exp", x), i, spec=(("array", 0), ("slice", 0, 3, 1)))
    graph = gm.output(gm.op("sum", gm.op("mul", picked, picked), axis=0, keepdims=False))
    kernel = build_kernel(graph)
    assert kernel.fallback_ids  # the gather runs in NumPy, the rest in Numba
    xs = rng.standard_normal((5, 3))
    idx = np.array([0, 4, 4, -1])
    assert_matches_interpreter(kernel, graph, [xs, idx], "float64")


def test_index_errors_name_the_users_line(rng):
    gm = GraphMaker("gather")
    a = gm.input((2, 3), "float64", "a")
    idx = gm.input((2, 1), "int64", "idx")
    graph = gm.output(gm.op("take_along_axis", a, idx, axis=1, source="model.py:42"))
    kernel = build_kernel(graph)
    ok = kernel(np.ones((2, 3)), np.array([[2], [-3]]))[0]
    np.testing.assert_array_equal(ok, [[1.0], [1.0]])
    # The kernel detects it; the Kernel wrapper re-runs the graph in the interpreter so
    # the user gets tracegrad's OutOfRangeError (an IndexError) with op, axis and shapes.
    with pytest.raises(IndexError, match="take_along_axis.*out of range"):
        kernel(np.ones((2, 3)), np.array([[3], [0]]))


def test_noncontiguous_and_readonly_inputs(rng):
    gm = GraphMaker("layout")
    x = gm.input((3, 4), "float64", "x")
    graph = gm.output(gm.op("mul", x, x))
    kernel = build_kernel(graph)
    base = rng.standard_normal((4, 3))
    view = base.T  # not C-contiguous
    ro = np.ascontiguousarray(view)
    ro.setflags(write=False)
    for arr in (view, ro, view[::-1, ::-1][::-1, ::-1]):
        np.testing.assert_allclose(kernel(arr)[0], arr * arr)


# Numba's parallel compile takes seconds: in the default run,
# tests/compile/test_cache_index.py::test_parallel_variant_after_an_index_hit builds the
# parallel variant of the same loop (sum(exp(-x) * x) at PARALLEL_MIN_ELEMENTS) and
# checks its prange and results
@pytest.mark.numba_pass
def test_big_loops_get_a_parallel_variant(monkeypatch, rng):
    from tracegrad.codegen.emit import PARALLEL_MIN_ELEMENTS

    monkeypatch.setenv("TRACEGRAD_PARALLEL", "sync")
    gm = GraphMaker("parallel")
    n = PARALLEL_MIN_ELEMENTS
    x = gm.input((n,), "float64", "x")
    y = gm.op("mul", gm.op("exp", gm.op("neg", x)), x)
    graph = gm.output(y, gm.op("sum", y, axis=None, keepdims=False))
    kernel = build_kernel(graph)
    assert kernel.parallel_source is not None and "prange(" in kernel.parallel_source
    assert "prange(" not in kernel.source.split("_FASTMATH = ")[1]
    assert_matches_interpreter(kernel, graph, [rng.standard_normal(n)], "float64")
