"""Random programs (hypothesis): compositions of smooth ops with broadcasting.

Every value stays broadcast-compatible with one base shape (reductions keep
their dims), so any two values can meet in a binary op. For each program the
compiled value equals NumPy's, gradients equal float64 central differences,
and eager gradients equal compiled ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_helpers import assert_close, numeric_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad as tg

UNARY = {
    "tanh": tg.tanh,
    "sin": tg.sin,
    "sigmoid": tg.sigmoid,
    "exp_tanh": lambda v: tg.exp(tg.tanh(v)),
    "log1p_sq": lambda v: tg.log(v * v + 1.0),
    "sqrt1p_sq": lambda v: tg.sqrt(v * v + 1.0),
    "neg": lambda v: -v,
    "square": lambda v: v**2,
    "scale": lambda v: v * 0.5 + 0.25,
    "softmax": lambda v: tg.softmax(v, axis=-1) if np.ndim(v) else v,
    "cos_np": np.cos,  # NumPy spelling: captured while tracing
}
# Eager tensors follow PyTorch, not NumPy's protocol: they use the tracegrad spelling.
EAGER_SPELLING = {"cos_np": tg.cos, "np_sum": lambda v, axis: tg.sum(v, axis=axis, keepdims=True)}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1.0),
    "maximum_smooth": lambda a, b: tg.maximum(a, b + 10.0),  # never a tie
    "where": lambda a, b: tg.where(a > 1e3, b, a * b),
}
REDUCE = {
    "sum": lambda v, axis: tg.sum(v, axis=axis, keepdims=True),
    "mean": lambda v, axis: tg.mean(v, axis=axis, keepdims=True),
    "logsumexp": lambda v, axis: tg.logsumexp(v, axis=axis, keepdims=True),
    "np_sum": lambda v, axis: np.sum(v, axis=axis, keepdims=True),
}


@st.composite
def programs(draw):
    rank = draw(st.integers(0, 3))
    base = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        drop = draw(st.integers(0, rank))
        dims = [d if draw(st.booleans()) else 1 for d in base[drop:]]
        shapes.append(tuple(dims))
    steps = []
    n_values = n_inputs
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce"]))
        a = draw(st.integers(0, n_values - 1))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), a))
        elif kind == "binary":
            steps.append(
                (
                    "binary",
                    draw(st.sampled_from(sorted(BINARY))),
                    a,
                    draw(st.integers(0, n_values - 1)),
                )
            )
        else:
            steps.append(
                (
                    "reduce",
                    draw(st.sampled_from(sorted(REDUCE))),
                    a,
                    draw(st.integers(0, rank - 1)) if rank else None,
                )
            )
        n_values += 1
    seed = draw(st.integers(0, 2**16))
    return shapes, steps, seed


def run_program(steps, inputs, weights, eager=False):
    values = list(inputs)
    for step in steps:
        kind, name, a = step[:3]
        table = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE}[kind]
        op = EAGER_SPELLING.get(name, table[name]) if eager else table[name]
        if kind == "unary":
            values.append(op(values[a]))
        elif kind == "binary":
            values.append(op(values[a], values[step[3]]))
        else:
            axis = step[3]
            if axis is not None and axis >= len(np.shape(values[a])):
                axis = None
            values.append(op(values[a], axis))
    total = 0.0
    for v, w in zip(values[len(inputs) :], weights, strict=True):
        total = total + tg.sum(v * w)
    return total


def make_case(shapes, steps, seed, dtype=np.float64, eager=False):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-1.5, 1.5, s).astype(dtype) for s in shapes]
    weights = [float(w) for w in rng.uniform(0.5, 1.5, len(steps))]
    return inputs, (lambda *xs: run_program(steps, xs, weights, eager))


@given(programs())
def test_random_program_gradients(program):
    shapes, steps, seed = program
    inputs, f = make_case(shapes, steps, seed)
    argnums = tuple(range(len(inputs)))
    value, grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*inputs)
    assert_close(value, f(*inputs), rtol=1e-12, atol=1e-12, what="value")
    for k, g in enumerate(grads):
        assert g.shape == inputs[k].shape and g.dtype == np.float64
        assert_close(g, numeric_grad(f, inputs, k), rtol=1e-5, atol=1e-6, what=f"grad {k}")
    import tracegrad.eager as eager

    tensors = [eager.tensor(x, requires_grad=True) for x in inputs]
    out = make_case(shapes, steps, seed, eager=True)[1](*tensors)
    out.backward()
    for g, t in zip(grads, tensors, strict=True):
        ref = t.grad.numpy() if t.grad is not None else np.zeros_like(g)
        assert_close(g, ref, rtol=1e-10, atol=1e-12, what="eager vs compiled")


@given(programs())
def test_random_program_float32(program):
    shapes, steps, seed = program
    inputs32, f = make_case(shapes, steps, seed, np.float32)
    argnums = tuple(range(len(inputs32)))
    value, grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*inputs32)
    value64, grads64 = tg.value_and_grad(f, argnums=argnums, backend="interpret")(
        *[x.astype(np.float64) for x in inputs32]
    )
    assert value.dtype == np.float32
    assert_close(value, value64, rtol=1e-4, atol=1e-4, what="value")
    for g, g64 in zip(grads, grads64, strict=True):
        assert g.dtype == np.float32
        assert_close(g, g64, rtol=1e-3, atol=1e-4, what="grad")


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(programs(), st.sampled_from([np.float64, np.float32]))
def test_random_program_kernels_equal_interpreter(program, dtype):
    """Random programs through generated Numba kernels (slow: a compile per program)."""
    shapes, steps, seed = program
    inputs, f = make_case(shapes, steps, seed, dtype)
    argnums = tuple(range(len(inputs)))
    value, grads = tg.value_and_grad(f, argnums=argnums)(*inputs)
    ref_value, ref_grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*inputs)
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    assert value.dtype == ref_value.dtype
    assert_close(value, ref_value, **tol, what="value")
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == r.dtype
        assert_close(g, r, **tol, what="grad")
