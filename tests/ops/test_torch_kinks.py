"""At kinks (ties, zeros, clip bounds) any subgradient is 'correct'; PyTorch's choice wins."""

import numpy as np
import pytest
from opkit import grad, value

import tracegrad as tg

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:var.*degrees of freedom:UserWarning"),
]

X = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
Y = np.array([-2.0, 0.0, 0.0, 3.0, 1.0])

KINKS = [  # (label, tracegrad fn, torch fn) of (x, y)
    ("relu", lambda x, y: tg.relu(x), lambda x, y: torch.relu(x)),
    ("abs", lambda x, y: tg.abs(x), lambda x, y: x.abs()),
    ("sign", lambda x, y: tg.sign(x), lambda x, y: x.sign()),
    ("clip", lambda x, y: tg.clip(x, -1.0, 1.0), lambda x, y: x.clamp(-1.0, 1.0)),
    ("clip_lo", lambda x, y: tg.clip(x, 0.0, None), lambda x, y: x.clamp(min=0.0)),
    ("maximum", lambda x, y: tg.maximum(x, y), lambda x, y: torch.maximum(x, y)),
    ("minimum", lambda x, y: tg.minimum(x, y), lambda x, y: torch.minimum(x, y)),
    ("max_all", lambda x, y: tg.max(tg.abs(x)), lambda x, y: x.abs().max()),
    ("min_all", lambda x, y: tg.min(tg.abs(y)), lambda x, y: y.abs().min()),
    ("square_at_0", lambda x, y: x**2, lambda x, y: x**2),
    ("sqrt_at_0", lambda x, y: tg.sqrt(tg.abs(x)), lambda x, y: x.abs().sqrt()),
    ("pow_tensor_at_0", lambda x, y: tg.abs(x) ** tg.abs(y), lambda x, y: x.abs() ** y.abs()),
    ("rpow", lambda x, y: 2.0**x, lambda x, y: 2.0**x),
    ("zero_pow", lambda x, y: 0.0 ** tg.abs(y), lambda x, y: 0.0 ** y.abs()),
    ("where", lambda x, y: tg.where(x > 0, x, y), lambda x, y: torch.where(x > 0, x, y)),
    ("div_at_0", lambda x, y: x / y, lambda x, y: x / y),
    ("log_at_0", lambda x, y: tg.log(tg.abs(x)), lambda x, y: x.abs().log()),
    ("var_single", lambda x, y: tg.var(x[:1], ddof=1), lambda x, y: x[:1].var()),
]


@pytest.mark.parametrize("label, ours, theirs", KINKS, ids=[k[0] for k in KINKS])
def test_gradient_at_kinks_matches_torch(label, ours, theirs):
    w = np.linspace(0.5, 1.5, 5)
    tx, ty = (torch.tensor(a, requires_grad=True) for a in (X, Y))
    out = theirs(tx, ty)
    (out * torch.tensor(w[: out.numel()]).reshape(out.shape)).sum().backward()
    expected = [t.grad.numpy() if t.grad is not None else np.zeros(5) for t in (tx, ty)]
    got = grad(
        lambda x, y: tg.sum(
            ours(x, y) * w[: int(np.prod(np.shape(out)))].reshape(tuple(out.shape))
        ),
        (0, 1),
    )(X, Y)
    np.testing.assert_allclose(value(ours(X, Y)), out.detach().numpy(), equal_nan=True)
    for mine, theirs_grad in zip(got, expected, strict=True):
        np.testing.assert_allclose(value(mine), theirs_grad, equal_nan=True, err_msg=label)
