"""Numerical stability at extreme logits, tie-breaking of gradients, and the `where` trap."""

import numpy as np
import pytest
from opkit import grad, value

import tracegrad as tg
from tracegrad.ops import table as T

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0), 0*inf are the point

DTYPES = ["float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_at_plus_minus_1e4(dtype):
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4]], dtype)
    out = tg.softmax(x, axis=1)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-7)
    ct = T.softmax.vjps[0](np.ones_like(x), out, x, axis=1)
    assert np.all(np.isfinite(ct))


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax_at_plus_minus_1e4(dtype):
    x = np.array([1e4, 0.0, -1e4], dtype)
    out = tg.log_softmax(x)
    np.testing.assert_allclose(out, [0.0, -1e4, -2e4], rtol=1e-6)
    g = value(
        grad(lambda v: tg.sum(tg.multiply(tg.log_softmax(v), np.array([1.0, 2.0, 3.0], dtype))))(x)
    )
    # d/dx sum(w * log_softmax(x)) = w - softmax(x) * sum(w)
    np.testing.assert_allclose(g, [1 - 6, 2, 3], atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_logsumexp_at_plus_minus_1e4(dtype):
    for v in (1e4, -1e4):
        x = np.array([v, v], dtype)
        out = tg.logsumexp(x)
        np.testing.assert_allclose(out, v + np.log(2), rtol=1e-6)
        # PyTorch's rule exp(x - out): out = 1e4 + log 2 rounds to f32's ulp at 1e4 (~1e-3)
        tol = 1e-3 if dtype == "float32" else 1e-9
        np.testing.assert_allclose(value(grad(tg.logsumexp)(x)), [0.5, 0.5], rtol=tol)


def test_logsumexp_of_all_minus_inf_is_minus_inf():
    out = tg.logsumexp(np.array([[-np.inf, -np.inf], [0.0, 0.0]]), axis=1)
    assert out[0] == -np.inf and np.isclose(out[1], np.log(2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_at_plus_minus_1e4(dtype):
    x = np.array([-1e4, -50.0, 0.0, 50.0, 1e4], dtype)
    out = tg.sigmoid(x)
    assert out.dtype == dtype and np.all(np.isfinite(out))
    expected = np.array([0.0, np.exp(-50.0) / (1 + np.exp(-50.0)), 0.5, 1.0, 1.0])
    np.testing.assert_allclose(out, expected.astype(dtype), rtol=1e-6, atol=0)
    assert np.all(np.isfinite(value(grad(lambda v: tg.sum(tg.sigmoid(v)))(x))))


def test_maximum_splits_gradient_on_ties():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])
    gx, gy = (value(g) for g in grad(lambda a, b: tg.sum(tg.maximum(a, b)), (0, 1))(x, y))
    np.testing.assert_allclose(gx, [0.5, 0, 1])
    np.testing.assert_allclose(gy, [0.5, 1, 0])
    gx, gy = (value(g) for g in grad(lambda a, b: tg.sum(tg.minimum(a, b)), (0, 1))(x, y))
    np.testing.assert_allclose(gx, [0.5, 1, 0])
    np.testing.assert_allclose(gy, [0.5, 0, 1])


def test_max_reduction_spreads_gradient_among_ties():
    x = np.array([[3.0, 1.0, 3.0], [0.0, 2.0, 1.0]])
    np.testing.assert_allclose(value(grad(tg.max)(x)), [[0.5, 0, 0.5], [0, 0, 0]])
    g = value(grad(lambda v: tg.sum(tg.max(v, axis=1)))(x))
    np.testing.assert_allclose(g, [[0.5, 0, 0.5], [0, 1, 0]])
    g = value(grad(lambda v: tg.sum(tg.min(v, axis=0)))(np.array([[1.0, 2.0], [1.0, 0.0]])))
    np.testing.assert_allclose(g, [[0.5, 0], [0.5, 1]])


def test_ties_agree_with_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[3.0, 1.0, 3.0], [0.0, 2.0, 1.0]])
    y = np.array([[3.0, 0.0, 4.0], [0.0, 2.0, 2.0]])
    tx, ty = (torch.tensor(a, requires_grad=True) for a in (x, y))
    (torch.maximum(tx, ty).sum() + tx.max() + torch.clamp(tx, 1.0, 2.0).sum()).backward()
    ours = grad(
        lambda a, b: tg.sum(tg.maximum(a, b)) + tg.max(a) + tg.sum(tg.clip(a, 1.0, 2.0)), (0, 1)
    )(x, y)
    np.testing.assert_allclose(value(ours[0]), tx.grad.numpy())
    np.testing.assert_allclose(value(ours[1]), ty.grad.numpy())


def test_relu_and_abs_gradients_at_zero_match_torch():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(value(grad(lambda v: tg.sum(tg.relu(v)))(x)), [0, 0, 1])
    np.testing.assert_allclose(value(grad(lambda v: tg.sum(tg.abs(v)))(x)), [-1, 0, 1])


def test_pow_exponent_gradient_at_zero_base_is_zero():
    """PyTorch: d/dy 0**y is 0 for y >= 0 (not nan from log 0)."""
    x, y = np.array([0.0, 2.0]), np.array([2.0, 3.0])
    gy = value(grad(lambda a, b: tg.sum(tg.power(a, b)), 1)(x, y))
    np.testing.assert_allclose(gy, [0.0, 8 * np.log(2)])
    gy = value(grad(lambda b: tg.sum(tg.power(0.0, b)))(np.array([2.0])))
    np.testing.assert_allclose(gy, [0.0])


def test_where_trap_and_safe_idiom():
    x = np.array([-1.0, 0.0, 4.0])
    unsafe = value(grad(lambda v: tg.sum(tg.where(v > 0, tg.sqrt(v), 0.0)))(x))
    assert np.isnan(unsafe[0])  # the documented trap: 0 * inf from the untaken branch
    safe = value(grad(lambda v: tg.sum(tg.where(v > 0, tg.sqrt(tg.where(v > 0, v, 1.0)), 0.0)))(x))
    np.testing.assert_allclose(safe, [0.0, 0.0, 0.25])


def test_weak_scalars_keep_float32():
    x = np.ones(3, np.float32)
    for out in (
        x + 2.0,
        tg.add(x, 2.0),
        tg.power(x, 2),
        tg.multiply(2.5, x),
        tg.clip(x, 0.0, 1.0),
        tg.where(x > 0, x, 0.0),
        tg.maximum(x, 0.0),
        tg.divide(1.0, x),
    ):
        assert np.asarray(out).dtype == np.float32
    gx = value(grad(lambda v: tg.sum(tg.tanh(v) * 3.0))(x))
    assert gx.dtype == np.float32
