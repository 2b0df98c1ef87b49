"""Structured control flow (issue 12): scan, fori_loop, while_loop, cond.

Gradients are checked against float64 central differences, against the eager
mode (the same function run as a Python loop on eager tensors), and against
JAX where installed, in float32 and float64, with pytree carries and reverse.
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_helpers import numeric_grad

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.ir.verify import verify

INTERP = dict(backend="interpret")


def rnn_loss(h0, W, xs):
    def step(h, x):
        h = tg.tanh(h @ W + x)
        return h, tg.sum(h * h)

    h, ys = tg.scan(step, h0, xs)
    return tg.sum(h) + tg.sum(ys)


def pytree_loss(params, xs):
    def step(carry, x):
        a, b = carry["a"], carry["b"]
        a2 = tg.sin(a * params["w"] + x[0])
        b2 = b * tg.cos(x[1]) + a2
        return {"a": a2, "b": b2}, (a2 * b2, tg.sum(a2))

    carry, (p, s) = tg.scan(
        step, {"a": params["a0"], "b": params["b0"]}, (xs[:, 0], xs[:, 1]), reverse=True
    )
    return tg.sum(carry["a"]) + tg.sum(carry["b"] ** 2) + tg.sum(p) + tg.sum(s)


@pytest.fixture
def rnn_args(rng):
    return (rng.standard_normal(4), 0.5 * rng.standard_normal((4, 4)), rng.standard_normal((6, 4)))


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_scan_rnn_gradients_match_finite_differences(rnn_args, backend):
    f = tg.value_and_grad(rnn_loss, argnums=(0, 1, 2), backend=backend)
    value, grads = f(*rnn_args)
    assert float(value) == pytest.approx(float(rnn_loss(*rnn_args)), rel=1e-12)
    for k in range(3):
        np.testing.assert_allclose(
            grads[k], numeric_grad(rnn_loss, list(rnn_args), k), rtol=1e-6, atol=1e-8
        )


def test_scan_graph_is_one_node_whatever_the_length(rng):
    sizes = []
    for n in (3, 300):
        xs = rng.standard_normal((n, 4))
        lowered = tg.value_and_grad(rnn_loss, **INTERP).lower(np.zeros(4), np.eye(4), xs)
        sizes.append((len(lowered.traced.nodes), len(lowered.optimized.nodes)))
        assert sum(n.op == "scan" for n in lowered.traced.nodes) == 1
        verify(lowered.traced)
        verify(lowered.optimized)
    assert sizes[0] == sizes[1]


def test_scan_with_pytrees_and_reverse(rng):
    params = {
        "w": rng.standard_normal(3),
        "a0": rng.standard_normal(3),
        "b0": rng.standard_normal(3),
    }
    xs = rng.standard_normal((5, 2, 3))
    value, g = tg.value_and_grad(pytree_loss, **INTERP)(params, xs)
    assert float(value) == pytest.approx(float(pytree_loss(params, xs)), rel=1e-12)
    for key in params:

        def f(v, key=key):
            return pytree_loss({**params, key: v}, xs)

        np.testing.assert_allclose(g[key], numeric_grad(f, [params[key]], 0), rtol=1e-6, atol=1e-8)
    gx = tg.grad(pytree_loss, argnums=1, **INTERP)(params, xs)
    np.testing.assert_allclose(gx, numeric_grad(pytree_loss, [params, xs], 1), rtol=1e-6, atol=1e-8)


def test_scan_runs_eagerly_and_records_every_step(rnn_args):
    """The same function on eager tensors is a Python loop: a dynamic graph."""
    h0, W, xs = (torch.tensor(a, requires_grad=True) for a in rnn_args)
    loss = rnn_loss(h0, W, xs)
    loss.backward()
    compiled = tg.grad(rnn_loss, argnums=(0, 1, 2), **INTERP)(*rnn_args)
    for t, g in zip((h0, W, xs), compiled, strict=True):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-10)
    # plain NumPy: also a Python loop
    assert float(rnn_loss(*rnn_args)) == pytest.approx(float(loss.item()), rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scan_matches_jax(rnn_args, dtype):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def jax_loss(h0, W, xs):
        def step(h, x):
            h = jnp.tanh(h @ W + x)
            return h, jnp.sum(h * h)

        h, ys = jax.lax.scan(step, h0, xs)
        return jnp.sum(h) + jnp.sum(ys)

    args = [a.astype(dtype) for a in rnn_args]
    ours = tg.grad(rnn_loss, argnums=(0, 1, 2), **INTERP)(*args)
    theirs = jax.grad(jax_loss, argnums=(0, 1, 2))(*args)
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=rtol)


def test_scan_xs_none_length_and_no_ys():
    def f(x):
        c, ys = tg.scan(lambda c, _: (c * x, None), np.float64(1.0), None, length=4)
        assert ys is None
        return c

    assert float(tg.compile(f, **INTERP)(2.0)) == 16.0
    assert float(tg.grad(f, **INTERP)(2.0)) == pytest.approx(4 * 2.0**3)


def test_scan_carry_type_mismatch_is_a_clear_error():
    with pytest.raises(tg.loops.ControlFlowError, match="carry input and carry output"):
        tg.compile(lambda x: tg.scan(lambda c, x: (c.astype(np.float32), x), x[0], x), **INTERP)(
            np.ones(3)
        )
    with pytest.raises(tg.loops.ControlFlowError, match="different leading axis"):
        tg.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))


def test_fori_loop_static_bounds_is_differentiable():
    def f(x):
        return tg.fori_loop(0, 5, lambda i, v: v * x + i, np.float64(1.0))

    # v_{k+1} = v_k x + k: p(x) = x^5 + x^3 + 2 x^2 + 3 x + 4
    x = 1.3
    assert float(tg.compile(f, **INTERP)(x)) == pytest.approx(x**5 + x**3 + 2 * x**2 + 3 * x + 4)
    assert float(f(x)) == pytest.approx(x**5 + x**3 + 2 * x**2 + 3 * x + 4)
    assert float(tg.grad(f, **INTERP)(x)) == pytest.approx(5 * x**4 + 3 * x**2 + 4 * x + 3)


def test_while_loop_forward_and_its_gradient_error():
    def f(x):
        return tg.while_loop(lambda v: tg.sum(v) < 100.0, lambda v: v * x, np.ones(2))

    np.testing.assert_allclose(tg.compile(f, **INTERP)(3.0), [81.0, 81.0])
    np.testing.assert_allclose(f(3.0), [81.0, 81.0])
    with pytest.raises(
        Exception, match="Reverse-mode differentiation does not work for tracegrad.while_loop"
    ):
        tg.grad(lambda x: tg.sum(f(x)), **INTERP)(3.0)


def test_fori_loop_with_traced_bound_is_a_while_loop():
    f = tg.compile(lambda n, x: tg.fori_loop(0, n, lambda i, v: v + i * x, 0.0 * x), **INTERP)
    np.testing.assert_allclose(f(np.array(4), np.ones(2)), [6.0, 6.0])
    np.testing.assert_allclose(f(np.array(2), np.ones(2)), [1.0, 1.0])
    assert f.cache_info().traces == 1


def test_cond_takes_one_branch_and_its_gradient():
    """where(x > 0, sqrt(x), 0) gives a NaN gradient at x < 0; cond does not."""
    f = lambda x: tg.cond(x > 0, lambda x: tg.sqrt(x), lambda x: x * 0.0, x)
    g = tg.grad(f, **INTERP)
    assert float(g(4.0)) == 0.25
    assert float(g(-4.0)) == 0.0
    assert float(tg.compile(f, **INTERP)(9.0)) == 3.0
    assert float(f(9.0)) == 3.0  # concrete predicate: a plain Python if


def test_cond_with_closures_in_each_branch_and_pytree_operands(rng):
    w = rng.standard_normal(3)

    def f(x, v):
        return tg.cond(
            tg.sum(x) > 0,
            lambda a, b: tg.sum(tg.sin(a * v) * b["k"]),
            lambda a, b: tg.sum(a**2 * v * v),
            x,
            {"k": w},
        )

    for x in (np.abs(w), -np.abs(w)):
        v = np.array([0.3, -0.2, 0.5])
        gx, gv = tg.grad(f, argnums=(0, 1), **INTERP)(x, v)
        np.testing.assert_allclose(gx, numeric_grad(f, [x, v], 0), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(gv, numeric_grad(f, [x, v], 1), rtol=1e-6, atol=1e-9)


def test_cond_branches_must_agree():
    with pytest.raises(tg.loops.ControlFlowError, match="identical types"):
        tg.compile(lambda x: tg.cond(x[0] > 0, lambda x: x, lambda x: x[:2], x), **INTERP)(
            np.ones(3)
        )


def test_loops_inside_grad_of_grad():
    def f(x):
        c, _ = tg.scan(lambda c, _: (tg.sin(c) * x, None), x, None, length=3)
        return c

    d2 = tg.grad(tg.grad(f, **INTERP), **INTERP)
    eps = 1e-4
    d1 = tg.grad(f, **INTERP)
    fd = (float(d1(0.7 + eps)) - float(d1(0.7 - eps))) / (2 * eps)
    assert float(d2(0.7)) == pytest.approx(fd, rel=1e-6)


def test_printer_nests_the_body():
    text = str(
        tg.value_and_grad(rnn_loss, **INTERP).lower(np.zeros(2), np.eye(2), np.ones((3, 2))).traced
    )
    assert "scan[body=scan_body_step#" in text
    assert "\n    body = graph scan_body_step(" in text
    assert "      %3 = matmul %0, %1" in text or "matmul" in text


def test_scan_with_mixed_dtype_carry_differentiates_the_float_part():
    def f(x):
        (v, k), ks = tg.scan(
            lambda c, _: ((c[0] * x + c[1].astype(np.float32), c[1] + 1), c[1]),
            (np.float32(1.0) * x, np.int32(0)),
            None,
            length=3,
        )
        assert k.dtype == np.int32 and ks.dtype == np.int32
        return v

    x = np.float32(1.5)
    # v1 = x*x + 0, v2 = v1*x + 1, v3 = v2*x + 2 = x^4 + x + 2
    assert float(tg.compile(f, **INTERP)(x)) == pytest.approx(x**4 + x + 2, rel=1e-6)
    assert float(tg.grad(f, **INTERP)(x)) == pytest.approx(4 * x**3 + 1, rel=1e-6)


def test_reverse_mode_runs_the_forward_loop_once(rnn_args):
    """The residual-keeping forward scan replaces the original one (passes/loops.py)."""
    lowered = tg.value_and_grad(rnn_loss, argnums=(0, 1, 2), **INTERP).lower(*rnn_args)
    scans = [n for n in lowered.optimized.nodes if n.op == "scan"]
    assert len(scans) == 2  # forward with residuals, and the reversed backward scan
    assert sorted(n.attrs["reverse"] for n in scans) == [False, True]
    value, grads = tg.value_and_grad(rnn_loss, argnums=(0, 1, 2), **INTERP)(*rnn_args)
    assert float(value) == pytest.approx(float(rnn_loss(*rnn_args)), rel=1e-12)


@pytest.mark.numba
def test_numba_scan_kernel_source_does_not_grow_with_length(rng):
    sources = []
    for n in (5, 50):
        xs = rng.standard_normal((n, 4))
        lowered = tg.value_and_grad(rnn_loss).lower(np.zeros(4), 0.3 * np.eye(4), xs)
        sources.append(len(lowered.source.splitlines()))
        value, g = tg.value_and_grad(rnn_loss)(np.zeros(4), 0.3 * np.eye(4), xs)
        ref, gref = tg.value_and_grad(rnn_loss, **INTERP)(np.zeros(4), 0.3 * np.eye(4), xs)
        assert float(value) == pytest.approx(float(ref), rel=1e-12)
        np.testing.assert_allclose(g, gref, rtol=1e-12)
    assert sources[0] == sources[1]


# ------------------------------------------------ unrolled Python loops, rerolled

from tracegrad.ir.interpret import interpret  # noqa: E402
from tracegrad.passes import loops as reroll_pass  # noqa: E402


def unrolled_two_state(h, c, w, b, n=40):
    outs = []
    for _t in range(n):
        h, c = tg.tanh(h * w + c), c * 0.9 + tg.sin(h) * b
        outs.append(tg.sum(h * c))
    return tg.sum(h) + tg.sum(c**2) + outs[3] + outs[-1] + sum(outs[::7])


def test_unrolled_python_loop_becomes_one_scan(rng):
    args = [rng.standard_normal(5) * 0.5 for _ in range(4)]
    f = tg.value_and_grad(unrolled_two_state, argnums=(0, 1, 2, 3), **INTERP)
    lowered = f.lower(*args)
    assert [n.op for n in lowered.traced.nodes].count("scan") == 1
    assert len(lowered.traced.nodes) < 60  # 40 steps of ~8 nodes each, rerolled
    value, grads = f(*args)
    assert float(value) == pytest.approx(float(unrolled_two_state(*args)), rel=1e-12)
    for k in range(4):
        np.testing.assert_allclose(
            grads[k], numeric_grad(unrolled_two_state, list(args), k), rtol=1e-6, atol=1e-8
        )


def test_rerolled_gradients_equal_the_unrolled_graph(rng, monkeypatch):
    args = [rng.standard_normal(5) * 0.5 for _ in range(4)]
    rerolled = tg.value_and_grad(unrolled_two_state, argnums=(0, 1, 2, 3), **INTERP)(*args)
    monkeypatch.setattr(reroll_pass, "MIN_STEPS", 10**9)
    tg.clear_caches()  # the shared CompiledFunction already holds the rerolled trace
    plain = tg.value_and_grad(unrolled_two_state, argnums=(0, 1, 2, 3), **INTERP)
    assert "scan" not in [n.op for n in plain.lower(*args).traced.nodes]
    value, grads = plain(*args)
    assert float(value) == pytest.approx(float(rerolled[0]), rel=1e-12)
    for a, b in zip(grads, rerolled[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def test_chain_with_a_different_weight_per_step_stays_unrolled(rng):
    Ws = [rng.standard_normal((3, 3)) for _ in range(30)]

    def f(h):
        for W in Ws:
            h = tg.tanh(h @ W)
        return tg.sum(h)

    traced = tg.compile(f, **INTERP).lower(np.ones(3)).traced
    assert "scan" not in [n.op for n in traced.nodes]


def test_rerolled_numba_kernel_matches_interpreter(rng):
    args = [rng.standard_normal(5).astype(np.float32) * 0.5 for _ in range(4)]
    v1, g1 = tg.value_and_grad(unrolled_two_state, argnums=(0, 2))(*args)
    v2, g2 = tg.value_and_grad(unrolled_two_state, argnums=(0, 2), **INTERP)(*args)
    assert float(v1) == pytest.approx(float(v2), rel=1e-5)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


OPS = ("add", "mul", "sub", "tanh", "sin", "exp_neg")


def _random_step(seed: int):
    """A random step function of two carries and two loop invariants."""
    r = np.random.default_rng(seed)
    prog = [
        (OPS[r.integers(len(OPS))], int(r.integers(0, 4)), int(r.integers(0, 4)))
        for _ in range(int(r.integers(2, 6)))
    ]

    def step(h, c, u, v):
        vals = [h, c, u, v]
        for op, i, j in prog:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            vals.append(
                {
                    "add": lambda a, b: a + b,
                    "mul": lambda a, b: a * b * 0.5,
                    "sub": lambda a, b: a - b,
                    "tanh": lambda a, b: tg.tanh(a),
                    "sin": lambda a, b: tg.sin(a),
                    "exp_neg": lambda a, b: tg.exp(-a * a),
                }[op](a, b)
            )
        return tg.tanh(vals[-1]), 0.5 * c + 0.1 * vals[-2]

    return step


@pytest.mark.parametrize("seed", range(12))
def test_random_periodic_programs_reroll_exactly(seed, rng):
    step = _random_step(seed)
    n = 20 + seed

    def f(h, c, u, v):
        total = 0.0
        for t in range(n):
            h, c = step(h, c, u, v)
            if t % 5 == 0:
                total = total + tg.sum(h)
        return total + tg.sum(c * h)

    args = [rng.standard_normal(3) * 0.5 for _ in range(4)]
    graph = tg.trace(f, *args)
    rerolled = reroll_pass.reroll_loops(graph, min_steps=3)
    assert [n.op for n in rerolled.nodes].count("scan") >= 1
    verify(rerolled)
    assert float(interpret(rerolled, *args)[0]) == pytest.approx(
        float(interpret(graph, *args)[0]), rel=1e-12, abs=1e-12
    )
    g = tg.grad(f, argnums=(0, 1, 2, 3), **INTERP)(*args)
    for k in range(4):
        np.testing.assert_allclose(g[k], numeric_grad(f, list(args), k), rtol=1e-5, atol=1e-7)


def test_scan_residual_memory_is_reported(rnn_args):
    h0, W, xs = rnn_args
    lowered = tg.value_and_grad(rnn_loss, **INTERP).lower(h0, W, xs)
    # per step: the starting carry h and the saved tanh output (h*h's VJP reads it; the
    # matmul under it is not recomputed, so it needs no saving); f64
    assert lowered.scan_residual_bytes == xs.shape[0] * 2 * h0.size * 8
    forward_only = tg.compile(rnn_loss, **INTERP).lower(h0, W, xs)
    assert forward_only.scan_residual_bytes == 0


def test_compiled_scan_on_eager_tensors_fills_grad(rng):
    """tg.compile on eager tensors: one CompiledFunctionBackward whose backward
    kernel holds the reversed scan."""

    def rnn(h0, W, xs):
        h, ys = tg.scan(lambda h, x: (tg.tanh(h @ W + x), tg.sum(h)), h0, xs)
        return tg.sum(h) + tg.sum(ys)

    args = [rng.standard_normal(4), 0.3 * rng.standard_normal((4, 4)), rng.standard_normal((6, 4))]
    tensors = [torch.tensor(a, requires_grad=True) for a in args]
    out = tg.compile(rnn)(*tensors)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    out.backward()
    ref = tg.grad(rnn, argnums=(0, 1, 2), **INTERP)(*args)
    for t, r in zip(tensors, ref, strict=True):
        np.testing.assert_allclose(t.grad.numpy(), r, rtol=1e-12, atol=1e-14)


def test_passes_run_inside_loop_bodies():
    def f(h, xs):
        h, _ = tg.scan(lambda h, x: (tg.tanh(h * 1.0 + x * x + 0.0), None), h, xs)
        return tg.sum(h)

    lowered = tg.value_and_grad(f, **INTERP).lower(np.zeros(3), np.ones((4, 3)))
    for node in lowered.optimized.nodes:
        if node.op == "scan":
            assert not any(
                n.op == "mul"
                and any(i.op == "const" and np.all(i.attrs["value"] == 1.0) for i in n.inputs)
                for n in node.attrs["body"].nodes
            )  # h * 1.0 simplified away
    value, g = tg.value_and_grad(f, **INTERP)(np.zeros(3), np.ones((4, 3)))
    assert float(value) == pytest.approx(float(f(np.zeros(3), np.ones((4, 3)))), rel=1e-12)


def test_verifier_checks_loop_bodies(rnn_args):
    from tracegrad.ir.verify import VerifyError, find_problems

    lowered = tg.value_and_grad(rnn_loss, **INTERP).lower(*rnn_args)
    verify(lowered.optimized)
    scan = next(n for n in lowered.traced.nodes if n.op == "scan")
    body = scan.attrs["body"]
    broken = next(n for n in body.nodes if n.op == "tanh")
    broken.shape = (99,)  # a malformed body
    try:
        problems = find_problems(lowered.traced)
        assert any("body" in p and "tanh" in p for p in problems), problems
        with pytest.raises(VerifyError):
            verify(lowered.traced)
    finally:
        broken.shape = body.nodes[body.nodes.index(broken) - 1].shape
