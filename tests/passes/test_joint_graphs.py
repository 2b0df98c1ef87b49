"""optimize() on the joint forward+backward graphs of the real workloads."""

import numpy as np
import pytest
from passes_helpers import assert_same_results, ops

import tracegrad as tg
import tracegrad.autodiff as autodiff
from tracegrad.ir import verify
from tracegrad.passes import optimize_with_stats


def mlp_loss(w1, b1, w2, b2, x, y):
    h = tg.relu(x @ w1 + b1)
    logits = h @ w2 + b2
    logp = logits - tg.logsumexp(logits, axis=1, keepdims=True)
    return -tg.mean(tg.sum(logp * y, axis=1))


def tanh_chain(x):
    for _ in range(4):
        x = tg.tanh(x) * 0.5 + x
    return tg.sum(x * x)


def joint_of(fn, args, wrt):
    return autodiff.vjp_graph(tg.trace(fn, *args), wrt=wrt, seed_ones=True)


@pytest.fixture
def mlp_args():
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    labels = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0]]
    return [f32(8, 16), f32(16), f32(16, 4), f32(4), f32(5, 8), labels]


def test_mlp_joint_graph(mlp_args):
    joint = joint_of(mlp_loss, mlp_args, wrt=[0, 1, 2, 3])
    opt, stats = optimize_with_stats(joint)
    assert stats.reached_fixpoint
    verify(opt)
    assert_same_results(joint, opt, *mlp_args, rtol=1e-5, atol=1e-6)
    assert len(opt.nodes) <= len(joint.nodes) - 6
    # the seed's reshape/broadcast and the mean's division fold into one scalar
    assert "div" not in ops(opt)
    # logsumexp's backward recomputed `logits - lse`: shared now
    assert ops(opt).count("sub") == 1
    # reshapes to the same shape and reshape(sum) -> sum(keepdims) are gone
    assert "reshape" not in ops(opt)
    assert all(n.op != "broadcast_to" for n in opt.nodes)
    assert [o.id for o in opt.outputs[:1]] == [joint.outputs[0].id]


def test_tanh_chain_joint_graph():
    x = np.linspace(-2, 2, 64).astype(np.float32)
    joint = joint_of(tanh_chain, [x], wrt=[0])
    opt, stats = optimize_with_stats(joint)
    verify(opt)
    assert_same_results(joint, opt, x)
    # d/dx sum(x*x) seeded with broadcast ones: mul(ones, x) twice -> x + x
    assert "broadcast_to" not in ops(opt) and "reshape" not in ops(opt)
    consts = [float(n.attrs["value"]) for n in opt.nodes if n.op == "const"]
    assert sorted(consts) == [0.5, 1.0]  # one node per distinct constant
    assert len(opt.nodes) <= len(joint.nodes) - 3
