"""One function written with tracegrad ops, run on arrays, eager tensors and tracers."""

import numpy as np
from opkit import grad, numeric_grad, value

import tracegrad as tg

TARGETS = np.array([[0], [1], [2]])


def model(x, w):
    h = tg.relu(tg.matmul(x, w))
    z = tg.concatenate([h, tg.expand_dims(tg.max(h, axis=1), 1)], axis=1)
    logp = tg.log_softmax(z, axis=1)
    loss = -tg.mean(tg.take_along_axis(logp, TARGETS, axis=1))
    return loss + tg.var(x[:, 1:]) + tg.sum(tg.stack([x[0], x[1]]) ** 2) + tg.sum(tg.sigmoid(w))


def test_numpy_eager_and_compiled_agree():
    import tracegrad.eager as torch

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    expected = model(x, w)
    assert np.shape(expected) == ()  # `+` on 0-d ndarrays is NumPy's own: a NumPy scalar

    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    out = model(tx, tw)
    out.backward()

    value_, (gx, gw) = tg.value_and_grad(model, argnums=(0, 1))(x, w)

    reference = grad(model, (0, 1))(x, w)
    np.testing.assert_allclose(value(reference[0]), numeric_grad(model, [x, w], 0), rtol=1e-6)
    for got in (out.item(), value_):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    for got_x, got_w in ((tx.grad.numpy(), tw.grad.numpy()), (gx, gw)):
        np.testing.assert_allclose(got_x, value(reference[0]), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_w, value(reference[1]), rtol=1e-10, atol=1e-12)
