"""Property tests (the hypothesis profile sets the count: "ci" runs 100 programs per
test, `--hypothesis-profile=thorough` thousands): random eager programs (compositions of ops, random broadcastable
shapes) have gradients equal to float64 finite differences, in float32 match float64,
and higher-order gradients agree with finite differences of first-order ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad.eager as torch
from tracegrad.eager.gradcheck import gradcheck

# (name, fn, unused flag); every fn keeps its input's shape and its values bounded
# (|out| <= ~3 for any input), so finite differences stay accurate however deep
UNARY = [
    ("exp", lambda t: torch.tanh(t).exp(), False),
    ("tanh", torch.tanh, False),
    ("sigmoid", torch.sigmoid, False),
    ("sin", torch.sin, False),
    ("cos", torch.cos, False),
    ("square", lambda t: t * torch.tanh(t) * 0.5, False),
    ("log", lambda t: torch.log(t * t + 1.0) * 0.5, False),
    ("sqrt", lambda t: torch.sqrt(torch.tanh(t) ** 2 + 0.5), False),
    ("neg", torch.neg, False),
    ("softmax", lambda t: torch.softmax(t, dim=-1), False),
    ("log_softmax", lambda t: torch.log_softmax(torch.tanh(t), dim=-1), False),
    ("scale", lambda t: torch.tanh(2.0 * t - 1.0), False),
    ("rdiv", lambda t: 1.0 / (t * t + 1.0), False),
    ("pow", lambda t: (torch.tanh(t) ** 2 + 0.5) ** 1.5, False),
]
BINARY = [
    ("add", lambda a, b: torch.tanh(a + b)),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * torch.tanh(b)),
    ("div", lambda a, b: a / (b * b + 1.0)),
    ("max", torch.maximum),
    ("min", torch.minimum),
    ("where", lambda a, b: torch.where(a > b, a * 2.0, b)),
]
REDUCE = [
    ("sum", lambda t: t.sum()),
    ("mean", lambda t: t.mean()),
    ("sum_last", lambda t: t.sum(dim=-1).sum()),
    ("logsumexp", lambda t: torch.logsumexp(t, dim=-1).sum()),
    ("var", lambda t: t.var(dim=0, unbiased=False).sum() if t.shape[0] > 1 else t.sum()),
    ("max", lambda t: t.amax(dim=-1).sum()),
]


@st.composite
def programs(draw):
    rows = draw(st.integers(1, 3))
    cols = draw(st.integers(1, 4))
    # broadcastable second operand: full, row vector, column, or scalar-like
    other_shape = draw(st.sampled_from([(rows, cols), (cols,), (rows, 1), (1, 1)]))
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=4))
    reduce_i = draw(st.integers(0, len(REDUCE) - 1))
    seed = draw(st.integers(0, 2**16))
    return (rows, cols), other_shape, steps, reduce_i, seed


def build(steps, reduce_i):
    def f(a, b):
        h = a
        for binary, k in steps:
            if binary:
                h = BINARY[k % len(BINARY)][1](h, b)
            else:
                h = UNARY[k % len(UNARY)][1](h)
        return REDUCE[reduce_i][1](h)

    return f


def inputs(shape, other_shape, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    # away from ties (max/min/where kinks): spread values on a coarse grid plus jitter
    a = rng.permutation(np.arange(int(np.prod(shape)))).reshape(shape) * 0.37 - 1.0
    b = rng.standard_normal(other_shape) * 0.5 + 0.013
    return (
        torch.tensor((a + rng.uniform(-0.05, 0.05, shape)).astype(dtype), requires_grad=True),
        torch.tensor(b.astype(dtype), requires_grad=True),
    )


@settings(deadline=None)
@given(programs())
def test_random_programs_match_finite_differences(program):
    shape, other_shape, steps, reduce_i, seed = program
    f = build(steps, reduce_i)
    assert gradcheck(f, inputs(shape, other_shape, seed), atol=1e-5, rtol=1e-3)


@settings(deadline=None)
@given(programs())
def test_float32_gradients_track_float64(program):
    shape, other_shape, steps, reduce_i, seed = program
    f = build(steps, reduce_i)
    grads = []
    for dt in (np.float32, np.float64):
        a, b = inputs(shape, other_shape, seed, dt)
        f(a, b).backward()
        assert a.grad.dtype == a.dtype
        gb = b.grad.numpy() if b.grad is not None else np.zeros(b.shape)  # b may be unused
        grads.append((a.grad.numpy().astype(np.float64), gb.astype(np.float64)))
    for g32, g64 in zip(*grads, strict=True):
        np.testing.assert_allclose(g32, g64, rtol=2e-3, atol=2e-3)


@settings(deadline=None)
@given(programs())
def test_second_order_matches_finite_differences(program):
    shape, other_shape, steps, reduce_i, seed = program
    f = build(steps, reduce_i)

    def grad_of_f(a, b):
        ga, gb = torch.autograd.grad(f(a, b), [a, b], create_graph=True, allow_unused=True)
        return (ga * ga).sum() + (gb.sum() if gb is not None else 0.0)

    assert gradcheck(grad_of_f, inputs(shape, other_shape, seed), atol=1e-4, rtol=1e-3)
