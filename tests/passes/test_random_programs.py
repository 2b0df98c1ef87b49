"""Hypothesis: optimize() keeps the results of random small programs, and
their joint forward+backward graphs, and always returns a valid graph."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracegrad as tg
from tracegrad.ir import interpret, verify
from tracegrad.passes import optimize_with_stats
from passes_helpers import assert_same_results, random_inputs, snapshot

SCALARS = [0.0, 1.0, -1.0, 2.0, 0.5]
SHAPES = [(2, 3), (3,), (1, 3), (2, 1), ()]


def fits(a, b):
    try:
        np.broadcast_shapes(np.shape(a), np.shape(b))
        return True
    except ValueError:
        return False


def step(draw, pool):
    """Apply one random op to values of the pool; return the new value."""
    x = draw(st.sampled_from(pool))
    shape = np.shape(x)
    kind = draw(st.sampled_from(["unary", "scalar", "binary", "shape", "reduce", "pow"]))
    if kind == "unary":
        fn = draw(st.sampled_from([tg.negative, tg.tanh, tg.sin, tg.relu, tg.abs,
                                   lambda v: tg.exp(tg.tanh(v))]))
        return fn(x)
    if kind == "scalar":
        c = draw(st.sampled_from(SCALARS))
        op = draw(st.sampled_from(["x*c", "c*x", "x+c", "c+x", "x-c", "c-x", "x/c"]))
        if op == "x/c" and c == 0.0:
            c = 2.0
        return {"x*c": lambda: x * c, "c*x": lambda: c * x, "x+c": lambda: x + c,
                "c+x": lambda: c + x, "x-c": lambda: x - c, "c-x": lambda: c - x,
                "x/c": lambda: x / c}[op]()
    if kind == "binary":
        partners = [y for y in pool if fits(x, y)]
        y = draw(st.sampled_from(partners))
        fn = draw(st.sampled_from([tg.add, tg.subtract, tg.multiply, tg.maximum,
                                   lambda a, b: tg.where(tg.greater(a, b), a, b)]))
        return fn(x, y)
    if kind == "pow":
        return x ** draw(st.sampled_from([0, 1, 2, 3]))
    if kind == "shape":
        choice = draw(st.sampled_from(["transpose", "reshape", "broadcast", "reshape_back"]))
        if choice == "transpose":
            return tg.transpose(tg.transpose(x)) if draw(st.booleans()) else tg.transpose(x)
        if choice == "broadcast":
            return tg.broadcast_to(x, (4,) + tuple(shape))
        if choice == "reshape":
            return tg.reshape(x, (int(np.prod(shape, dtype=int)),))
        return tg.reshape(tg.reshape(x, (-1,)), shape)
    # reduce
    fn = draw(st.sampled_from([tg.sum, tg.mean, tg.max]))
    if len(shape) == 0:
        return fn(x)
    axis = draw(st.sampled_from([None, 0, len(shape) - 1]))
    keepdims = draw(st.booleans())
    if draw(st.booleans()):  # reduce over a broadcast: the sum-of-broadcast rules
        x = tg.broadcast_to(x, (3,) + tuple(shape))
        axis = 0 if axis is None else axis + 1
    return fn(x, axis=axis, keepdims=keepdims)


def draw_program(data):
    """A random two-input program, drawn op by op while it is traced."""
    draw = data.draw
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(2)]
    n_steps = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**16))

    def fn(a, b):
        pool = [a, b]
        for _ in range(n_steps):
            pool.append(step(draw, pool))
        return tg.sum(pool[-1]) + tg.sum(pool[-2] * pool[-2])

    return fn, shapes, seed


def example_args(shapes, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def check_optimize(graph, args):
    before = snapshot(graph)
    optimized, stats = optimize_with_stats(graph)
    assert stats.reached_fixpoint
    verify(optimized)
    assert snapshot(graph) == before
    assert_same_results(graph, optimized, *args, rtol=1e-9, atol=1e-9)
    again, stats2 = optimize_with_stats(optimized)
    assert sum(stats2.changes.values()) == 0  # optimize is idempotent


@settings(deadline=None)
@given(st.data())
def test_optimize_preserves_random_programs(data):
    fn, shapes, seed = draw_program(data)
    args = example_args(shapes, seed)
    graph = tg.trace(fn, *args)
    check_optimize(graph, args)


@settings(deadline=None)
@given(st.data())
def test_optimize_preserves_random_joint_graphs(data):
    from tracegrad.autodiff import vjp_graph
    fn, shapes, seed = draw_program(data)
    args = example_args(shapes, seed)
    joint = vjp_graph(tg.trace(fn, *args), wrt=[0, 1], seed_ones=True)
    check_optimize(joint, args)
