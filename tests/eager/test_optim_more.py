"""Issue 26's added optimizers (Adamax, NAdam, RAdam) give PyTorch's parameters step by
step (its _single_tensor formulas), in float64 to 1e-15 and float32 to float32 rounding;
the first steps by hand without torch."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(0)
W0 = R.standard_normal((3, 4))
GRADS = [R.standard_normal((3, 4)) for _ in range(8)]  # 8 steps: RAdam passes rho_t > 5

CASES = [
    ("Adamax", {}),
    ("Adamax", {"weight_decay": 0.1, "betas": (0.8, 0.99)}),
    ("NAdam", {}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "momentum_decay": 0.01}),
    ("RAdam", {}),
    ("RAdam", {"weight_decay": 0.1}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True}),
]


def _run(L, name, kw, dt):
    w = L.tensor(W0.astype(dt), requires_grad=True)
    opt = getattr(L.optim, name)([w], lr=0.05, **kw)
    out = []
    for g in GRADS:
        w.grad = L.tensor(g.astype(dt))
        opt.step()
        out.append(w.detach().numpy().astype(np.float64).copy())
    return np.array(out)


@pytest.mark.parametrize("dt", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_pytorch(name, kw, dt):
    rt = pytest.importorskip("torch")
    ours, theirs = _run(tg, name, kw, dt), _run(rt, name, kw, dt)
    atol = 1e-15 if dt == "float64" else 3e-7
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)


def test_first_steps_by_hand():
    # Adamax: m = 0.1 g, u = |g| + eps, step 1: p -= lr / 0.1 * m / u = lr * sign(g)
    w = tg.tensor([1.0, -2.0], dtype=tg.float64, requires_grad=True)
    opt = tg.optim.Adamax([w], lr=0.1)
    w.grad = tg.tensor([0.5, -3.0], dtype=tg.float64)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.9, -1.9], rtol=1e-7)
    # RAdam: rho_t <= 5 for the first steps: p -= lr * m / (1 - beta1^t) = lr * g at t = 1
    w = tg.tensor([1.0], dtype=tg.float64, requires_grad=True)
    opt = tg.optim.RAdam([w], lr=0.1)
    w.grad = tg.tensor([2.0], dtype=tg.float64)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8], rtol=1e-12)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tg.optim.NAdam([w], lr=-1.0)
