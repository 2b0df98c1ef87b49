"""The weight gradient of a batched product x @ W (x (..., m, k), W (k, n)) is one GEMM
over the stacked rows of x and g, not a batched product summed over the batch: checked
against central differences, eager mode and PyTorch, and in the joint graph's ops."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as teager

SHAPES = [((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (4, 2)), ((3, 4), (4, 5))]


def loss(x, w):
    return tg.sum(tg.tanh(x @ w) * np.arange(1.0, 1.0 + w.shape[1]))


def central(f, args, k, h=1e-6):
    out = np.zeros_like(args[k])
    for i in np.ndindex(out.shape):
        plus, minus = [a.copy() for a in args], [a.copy() for a in args]
        plus[k][i] += h
        minus[k][i] -= h
        out[i] = (f(*plus) - f(*minus)) / (2 * h)
    return out


@pytest.mark.parametrize("xs, ws", SHAPES)
def test_batched_weight_gradient_matches_central_differences_and_eager(xs, ws):
    rng = np.random.default_rng(len(xs))
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    value, (gx, gw) = tg.value_and_grad(loss, argnums=(0, 1), backend="interpret")(x, w)
    f = tg.compile(loss, backend="interpret")
    np.testing.assert_allclose(gw, central(f, [x, w], 1), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gx, central(f, [x, w], 0), rtol=1e-7, atol=1e-9)
    tx, tw = (teager.tensor(a, requires_grad=True) for a in (x, w))
    (teager.tanh(tx @ tw) * teager.tensor(np.arange(1.0, 1.0 + ws[1]))).sum().backward()
    np.testing.assert_allclose(tw.grad.numpy(), gw, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tx.grad.numpy(), gx, rtol=1e-12, atol=1e-14)


def test_batched_weight_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    _, (gx, gw) = tg.value_and_grad(loss, argnums=(0, 1), backend="interpret")(x, w)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    (torch.tanh(tx @ tw) * torch.arange(1.0, 6.0, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(tw.grad.numpy(), gw, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tx.grad.numpy(), gx, rtol=1e-12, atol=1e-14)


def test_the_joint_graph_has_one_stacked_product_and_no_batch_sum():
    x, w = np.ones((8, 6, 4)), np.ones((4, 5))
    joint = tg.value_and_grad(loss, argnums=1, backend="interpret").lower(x, w).joint
    products = [n for n in joint.nodes if n.op == "matmul"]
    assert sorted(tuple(n.shape) for n in products) == [(4, 5), (8, 6, 5)], products
    assert not any(n.op == "sum" and tuple(n.shape) == (4, 5) for n in joint.nodes)


def test_stacked_weight_gradient_under_vmap_and_second_order():
    """The stacked-rows rule composed: vmap of grad equals a loop of grads, and a
    Hessian-vector product through it equals central differences of the gradient."""
    rng = np.random.default_rng(9)
    xs, w, v = (
        rng.standard_normal((3, 2, 3, 4)),
        rng.standard_normal((4, 5)),
        rng.standard_normal((4, 5)),
    )
    grad_w = tg.grad(loss, argnums=1, backend="interpret")
    batched = tg.vmap(grad_w, in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(
        batched, np.stack([grad_w(x, w) for x in xs]), rtol=1e-13, atol=1e-14
    )
    hvp = tg.grad(lambda w: tg.sum(grad_w(xs[0], w) * v), backend="interpret")(w)
    h = 1e-5
    central = (grad_w(xs[0], w + h * v) - grad_w(xs[0], w - h * v)) / (2 * h)
    np.testing.assert_allclose(hvp, central, rtol=1e-6, atol=1e-8)
