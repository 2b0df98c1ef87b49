"""Reverse mode of `scan` saves the step's costly values (loops/primitives.py).

The forward scan stacks the per-step values the backward step reads that are
costly to recompute (matmul and transcendental outputs...), and the backward
scan reads them instead of re-running the forward; `scan(..., remat=True)`
keeps the carries-only recompute. Gradients must be exact either way: checked
against float64 central differences, against jax.grad of the same lax.scan,
between the two policies, and against the eager mode (a Python loop).
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_helpers import numeric_grad

import tracegrad as tg
import tracegrad.eager as torch

# The LSTM functions use the default backend (the interpreter in the default run, Numba
# in CI's second pass: that checks the generated loops); the other cases check
# semantics and always run on the interpreter (their Numba compiles cost ~200 s).
INTERP = dict(backend="interpret")
STEPS, BATCH, N_IN, H = 5, 3, 4, 2


def lstm_loss(Wx, Wh, b, xs, h0, remat=False):
    """perf/workloads_models.py's LSTM cell: z = x Wx + h Wh + b, gates i, f, g, o."""

    def cell(carry, x):
        h, c = carry
        z = x @ Wx + h @ Wh + b
        i, f, o = tg.sigmoid(z[:, :H]), tg.sigmoid(z[:, H : 2 * H]), tg.sigmoid(z[:, 3 * H :])
        c = f * c + i * tg.tanh(z[:, 2 * H : 3 * H])
        return (o * tg.tanh(c), c), tg.sum(c)

    (h, c), cs = tg.scan(cell, (h0, h0 + 0.5), xs, remat=remat)
    return tg.sum(h * h) + tg.sum(cs * cs) + tg.sum(c)


def jax_lstm_loss(Wx, Wh, b, xs, h0):
    import jax
    import jax.numpy as jnp

    def cell(carry, x):
        h, c = carry
        z = x @ Wx + h @ Wh + b
        i, f, o = (
            jax.nn.sigmoid(z[:, :H]),
            jax.nn.sigmoid(z[:, H : 2 * H]),
            jax.nn.sigmoid(z[:, 3 * H :]),
        )
        c = f * c + i * jnp.tanh(z[:, 2 * H : 3 * H])
        return (o * jnp.tanh(c), c), jnp.sum(c)

    (h, c), cs = jax.lax.scan(cell, (h0, h0 + 0.5), xs)
    return jnp.sum(h * h) + jnp.sum(cs * cs) + jnp.sum(c)


@pytest.fixture(scope="module")
def lstm_args():
    rng = np.random.default_rng(21)
    return [
        0.6 * rng.standard_normal((N_IN, 4 * H)),
        0.6 * rng.standard_normal((H, 4 * H)),
        0.3 * rng.standard_normal(4 * H),
        rng.standard_normal((STEPS, BATCH, N_IN)),
        0.5 * rng.standard_normal((BATCH, H)),
    ]


# one compiled function per policy, shared by the tests (module level)
LSTM_GRAD = tg.value_and_grad(lstm_loss, argnums=(0, 1, 2, 3, 4))
LSTM_GRAD_REMAT = tg.value_and_grad(lambda *a: lstm_loss(*a, remat=True), argnums=(0, 1, 2, 3, 4))


def test_lstm_gradients_match_finite_differences(lstm_args):
    value, grads = LSTM_GRAD(*lstm_args)
    assert float(value) == pytest.approx(float(lstm_loss(*lstm_args)), rel=1e-12)
    for k in range(5):
        np.testing.assert_allclose(
            grads[k], numeric_grad(lstm_loss, list(lstm_args), k), rtol=1e-6, atol=1e-8
        )


def test_lstm_gradients_equal_with_and_without_saving(lstm_args):
    _, saved = LSTM_GRAD(*lstm_args)
    _, recomputed = LSTM_GRAD_REMAT(*lstm_args)
    for a, b in zip(saved, recomputed, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


def test_lstm_gradients_match_jax(lstm_args):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    theirs = jax.grad(jax_lstm_loss, argnums=(0, 1, 2, 3, 4))(*lstm_args)
    _, ours = LSTM_GRAD(*lstm_args)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-11, atol=1e-12)


def test_lstm_gradients_match_eager_mode(lstm_args):
    tensors = [torch.tensor(a, requires_grad=True) for a in lstm_args]
    lstm_loss(*tensors).backward()
    _, ours = LSTM_GRAD(*lstm_args)
    for t, g in zip(tensors, ours, strict=True):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-11, atol=1e-12)


def _backward_body(lowered):
    (scan,) = [n for n in lowered.optimized.nodes if n.op == "scan" and n.attrs["reverse"]]
    return scan.attrs["body"]


def test_backward_step_reads_the_gates_instead_of_recomputing_them(lstm_args):
    lowered = LSTM_GRAD.lower(*lstm_args)
    ops = [n.op for n in _backward_body(lowered).nodes]
    # the gradients dz Wh^T, dz Wx^T, x^T dz, h^T dz; no forward GEMM
    assert ops.count("matmul") == 4
    assert "sigmoid" not in ops and "tanh" not in ops
    remat_ops = [n.op for n in _backward_body(LSTM_GRAD_REMAT.lower(*lstm_args)).nodes]
    assert remat_ops.count("matmul") == 6  # x Wx and h Wh recomputed
    assert remat_ops.count("sigmoid") == 3 and remat_ops.count("tanh") == 2


def test_weight_gradients_summed_after_the_loop_are_exact(lstm_args, monkeypatch):
    """The optional hoisting (loops/primitives.py `_MAX_STACKED_ELEMENTS`, off by
    default): x^T dz and h^T dz as one GEMM each over the stacked steps."""
    from tracegrad.loops import primitives

    monkeypatch.setattr(primitives, "_MAX_STACKED_ELEMENTS", 1 << 24)
    primitives._scan_backward_parts.cache_clear()
    try:
        hoisted = tg.value_and_grad(lambda *a: lstm_loss(*a), argnums=(0, 1, 2, 3, 4), **INTERP)
        lowered = hoisted.lower(*lstm_args)
        assert [n.op for n in _backward_body(lowered).nodes].count("matmul") == 2
        outer = [n for n in lowered.optimized.nodes if n.op == "matmul"]
        assert sorted(n.inputs[1].shape for n in outer) == [(STEPS * BATCH, 4 * H)] * 2
        _, grads = hoisted(*lstm_args)
    finally:
        primitives._scan_backward_parts.cache_clear()
    _, expected = LSTM_GRAD(*lstm_args)
    for a, b in zip(grads, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_saved_values_are_in_the_residual_memory(lstm_args):
    per_value = BATCH * H * 8
    saved = LSTM_GRAD.lower(*lstm_args).scan_residual_bytes
    recomputed = LSTM_GRAD_REMAT.lower(*lstm_args).scan_residual_bytes
    assert recomputed == STEPS * 2 * per_value  # the carries h, c
    assert saved == STEPS * (2 + 5) * per_value  # + i, f, o, tanh(g), tanh(c')


# --------------------------------------------- other scan shapes, against JAX


def _cases():
    """(name, tracegrad loss, jax loss builder, args): scans whose saved values take
    each path (a saved per-step output, reverse, length without xs, nested scans,
    loop-invariant costly values, one node returned twice)."""
    rng = np.random.default_rng(7)
    w, x0, xs = (
        0.7 * rng.standard_normal((3, 3)),
        rng.standard_normal(3),
        rng.standard_normal((4, 3)),
    )

    def saved_y(np_, scan, w, x0, xs):
        def step(h, x):
            y = np_.tanh(h @ w + x)  # saved, and it is the per-step output
            return h * 0.5 + y, y

        h, ys = scan(step, x0, xs)
        return np_.sum(h * h) + np_.sum(ys * ys * ys)

    def reverse(np_, scan, w, x0, xs):
        def step(c, x):
            e = np_.exp(0.3 * c * x)
            return c * e + np_.sin(x @ w), c @ w

        c, ys = scan(step, x0, xs, reverse=True)
        return np_.sum(c) + np_.sum(ys * ys)

    def length_only(np_, scan, w, x0, xs):
        def step(carry, _):
            a, b = carry["a"], carry["b"]
            return {"a": np_.tanh(a @ w) + b, "b": np_.log(1.0 + b * b)}, None

        out, _ = scan(step, {"a": x0, "b": xs[0]}, None, length=5)
        return np_.sum(out["a"] ** 2) + np_.sum(out["b"])

    def nested(np_, scan, w, x0, xs):
        def outer(h, x):
            def inner(g, _):
                return np_.sin(g @ w) + x, None

            g, _ = scan(inner, h, None, length=3)
            return np_.tanh(g) * h, np_.sum(g)

        h, ys = scan(outer, x0, xs)
        return np_.sum(h) + np_.sum(ys * ys)

    def invariant(np_, scan, w, x0, xs):
        def step(h, x):
            return np_.tanh(h @ np_.exp(w) + x), None  # exp(w): the same every step

        h, _ = scan(step, x0, xs)
        return np_.sum(h * h)

    def twice(np_, scan, w, x0, xs):
        def step(c, x):
            y = np_.sin(c * x) @ w
            return y, y

        c, ys = scan(step, x0, xs)
        return np_.sum(c) + np_.sum(ys * x0)

    return [
        (f.__name__, f, (w, x0, xs))
        for f in (saved_y, reverse, length_only, nested, invariant, twice)
    ]


CASES = _cases()


class _TG:
    tanh, exp, sin, log, sum = tg.tanh, tg.exp, tg.sin, tg.log, tg.sum


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_scan_gradients_match_jax_and_finite_differences(name, fn, args):
    def ours(*a):
        return fn(_TG, tg.scan, *a)

    grads = tg.grad(ours, argnums=(0, 1, 2), **INTERP)(*args)
    for k in range(3):
        np.testing.assert_allclose(
            grads[k], numeric_grad(ours, list(args), k), rtol=1e-6, atol=1e-8
        )
    remat = tg.grad(
        lambda *a: fn(_TG, lambda *s, **kw: tg.scan(*s, remat=True, **kw), *a),
        argnums=(0, 1, 2),
        **INTERP,
    )(*args)
    for a, b in zip(grads, remat, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    theirs = jax.grad(lambda *a: fn(jnp, jax.lax.scan, *a), argnums=(0, 1, 2))(*args)
    for a, b in zip(grads, theirs, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-11, atol=1e-12)


def test_a_value_the_same_every_step_is_not_saved_per_step():
    _, fn, args = CASES[[c[0] for c in CASES].index("invariant")]
    lowered = tg.value_and_grad(lambda *a: fn(_TG, tg.scan, *a), argnums=(0,), **INTERP).lower(
        *args
    )
    steps, width = args[2].shape
    # the carry and tanh's output per step; exp(w) (3x3) is recomputed, not stacked
    assert lowered.scan_residual_bytes == steps * 2 * width * 8


def test_second_derivatives_through_saved_values():
    """grad of grad: the backward scan's own reverse mode differentiates through the
    saved values (they are outputs of the forward scan, a function of the inputs)."""
    xs = np.array([0.3, -0.8, 1.1, 0.4])

    def f(a):
        def step(c, x):
            return tg.tanh(c * a + x) + tg.exp(0.2 * c), None

        c, _ = tg.scan(step, a, xs)
        return c * c

    d1 = tg.grad(f, **INTERP)
    d2 = tg.grad(d1, **INTERP)
    eps = 1e-5
    for a in (0.4, -0.9):
        fd = (float(d1(a + eps)) - float(d1(a - eps))) / (2 * eps)
        assert float(d2(a)) == pytest.approx(fd, rel=1e-6)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def fj(a):
        c, _ = jax.lax.scan(lambda c, x: (jnp.tanh(c * a + x) + jnp.exp(0.2 * c), None), a, xs)
        return c * c

    assert float(d2(0.4)) == pytest.approx(float(jax.grad(jax.grad(fj))(0.4)), rel=1e-11)


def test_a_branch_returning_one_value_twice_gets_both_cotangents():
    """autodiff.vjp_graph summed nothing: a sub-graph output node returned twice kept
    only one seed (cond, call; scan builds its own seeds, see `twice` above)."""

    def f(x):
        def branch(x):
            y = x * 3.0
            return y, y

        a, b = tg.cond(x > 0, branch, branch, x)
        return a + 2 * b

    assert float(tg.grad(f, **INTERP)(1.0)) == pytest.approx(9.0, rel=1e-15)
    jax = pytest.importorskip("jax")

    def fj(x):
        a, b = jax.lax.cond(x > 0, lambda x: (x * 3.0, x * 3.0), lambda x: (x * 3.0, x * 3.0), x)
        return a + 2 * b

    assert float(jax.grad(fj)(1.0)) == pytest.approx(9.0)
