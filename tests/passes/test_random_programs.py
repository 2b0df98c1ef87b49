"""Hypothesis: optimize() keeps the results of random small programs, and
their joint forward+backward graphs, and always returns a valid graph."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from passes_helpers import assert_same_results, snapshot

import tracegrad as tg
from tracegrad.ir import verify
from tracegrad.passes import cse, dce, fold, optimize_with_stats, simplify

SCALARS = [0.0, 1.0, -1.0, 2.0, 0.5]
SHAPES = [(2, 3), (3,), (1, 3), (2, 1), ()]


def fits(a, b):
    try:
        np.broadcast_shapes(np.shape(a), np.shape(b))
        return True
    except ValueError:
        return False


FLOAT_KINDS = ["unary", "scalar", "binary", "shape", "reduce", "pow"]
INT_KINDS = ["int_unary", "int_scalar", "int_binary", "shape", "int_reduce"]


def step(draw, pool, kinds=FLOAT_KINDS):
    """Apply one random op to values of the pool; return the new value."""
    x = draw(st.sampled_from(pool))
    shape = np.shape(x)
    kind = draw(st.sampled_from(kinds))
    if kind == "int_unary":
        return -x
    if kind == "int_scalar":
        c = draw(st.sampled_from([0, 1, -1, 2]))
        return draw(
            st.sampled_from(
                [
                    lambda: x * c,
                    lambda: c * x,
                    lambda: x + c,
                    lambda: x - c,
                    lambda: c - x,
                    lambda: x - x,
                ]
            )
        )()
    if kind == "int_binary":
        y = draw(st.sampled_from([y for y in pool if fits(x, y)]))
        return draw(st.sampled_from([tg.add, tg.subtract, tg.multiply]))(x, y)
    if kind == "int_reduce":
        if len(shape) == 0:
            return tg.sum(x)
        if draw(st.booleans()):
            x = tg.broadcast_to(x, (3,) + tuple(shape))
        return tg.sum(x, axis=draw(st.sampled_from([None, 0])), keepdims=draw(st.booleans()))
    if kind == "unary":
        fn = draw(
            st.sampled_from(
                [tg.negative, tg.tanh, tg.sin, tg.relu, tg.abs, lambda v: tg.exp(tg.tanh(v))]
            )
        )
        return fn(x)
    if kind == "scalar":
        c = draw(st.sampled_from(SCALARS))
        op = draw(st.sampled_from(["x*c", "c*x", "x+c", "c+x", "x-c", "c-x", "x/c"]))
        if op == "x/c" and c == 0.0:
            c = 2.0
        return {
            "x*c": lambda: x * c,
            "c*x": lambda: c * x,
            "x+c": lambda: x + c,
            "c+x": lambda: c + x,
            "x-c": lambda: x - c,
            "c-x": lambda: c - x,
            "x/c": lambda: x / c,
        }[op]()
    if kind == "binary":
        partners = [y for y in pool if fits(x, y)]
        y = draw(st.sampled_from(partners))
        fn = draw(
            st.sampled_from(
                [
                    tg.add,
                    tg.subtract,
                    tg.multiply,
                    tg.maximum,
                    lambda a, b: tg.where(tg.greater(a, b), a, b),
                ]
            )
        )
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


def draw_program(data, kinds=FLOAT_KINDS):
    """A random two-input program, drawn op by op while it is traced."""
    draw = data.draw
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(2)]
    n_steps = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**16))

    def fn(a, b):
        pool = [a, b]
        for _ in range(n_steps):
            pool.append(step(draw, pool, kinds))
        return tg.sum(pool[-1]) + tg.sum(pool[-2] * pool[-2])

    return fn, shapes, seed


def example_args(shapes, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-9, 10, s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def check_optimize(graph, args, rtol=1e-9, atol=1e-9):
    before = snapshot(graph)
    optimized, stats = optimize_with_stats(graph)
    assert stats.reached_fixpoint
    verify(optimized)
    assert snapshot(graph) == before
    assert_same_results(graph, optimized, *args, rtol=rtol, atol=atol)
    again, stats2 = optimize_with_stats(optimized)
    assert sum(stats2.changes.values()) == 0  # optimize is idempotent


def check_each_pass(graph, args, rtol=1e-9, atol=1e-9):
    """Every pass alone keeps the graph valid and its results (two rounds)."""
    current = graph
    for _ in range(2):
        for run in (fold, simplify, cse, dce):
            before = snapshot(current)
            result = run(current)
            assert snapshot(current) == before
            assert_same_results(current, result, *args, rtol=rtol, atol=atol)  # verifies too
            current = result


@settings(deadline=None)
@given(st.data())
def test_optimize_preserves_random_programs(data):
    fn, shapes, seed = draw_program(data)
    args = example_args(shapes, seed)
    graph = tg.trace(fn, *args)
    check_optimize(graph, args)
    check_each_pass(graph, args)


@settings(deadline=None)
@given(st.data())
def test_optimize_preserves_random_float32_programs(data):
    fn, shapes, seed = draw_program(data)
    args = example_args(shapes, seed, np.float32)
    check_optimize(tg.trace(fn, *args), args, rtol=1e-4, atol=1e-5)


@settings(deadline=None)
@given(st.data())
def test_optimize_is_exact_on_random_integer_programs(data):
    fn, shapes, seed = draw_program(data, INT_KINDS)
    args = example_args(shapes, seed, np.int64)
    check_optimize(tg.trace(fn, *args), args)  # integers compare exactly


@settings(deadline=None)
@given(st.data())
def test_optimize_preserves_random_joint_graphs(data):
    from tracegrad.autodiff import vjp_graph

    fn, shapes, seed = draw_program(data)
    args = example_args(shapes, seed)
    joint = vjp_graph(tg.trace(fn, *args), wrt=[0, 1], seed_ones=True)
    check_optimize(joint, args)
