"""Ops the PyTorch-style model programs call (examples/gpt_tiny.py, char_mlp.py; issue 26's
list): roll, multinomial, rsqrt, log1p, expm1, floor, unflatten, and gradient clipping as
tensor ops. Values, gradients, node names and error texts against PyTorch."""

import numpy as np
import pytest

import tracegrad.eager as torch


@pytest.fixture
def rt():
    return pytest.importorskip("torch")


CASES = {
    "roll dim": lambda L, x: x.roll(1, 0),
    "roll negative": lambda L, x: L.roll(x, -5, 1),
    "roll two dims": lambda L, x: x.roll((1, -3), (0, 1)),
    "roll flattened": lambda L, x: x.roll(5),
    "roll by the size": lambda L, x: x.roll(4, 1),
    "rsqrt": lambda L, x: (x + 1).rsqrt(),
    "log1p": lambda L, x: L.log1p(x),
    "expm1": lambda L, x: x.expm1(),
    "floor": lambda L, x: (x * 0.7).floor(),
    "unflatten": lambda L, x: x.unflatten(1, (2, -1)),
    "movedim": lambda L, x: L.movedim(x, 0, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_values_grads_and_names_match_pytorch(case, rt):
    data = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    weights = np.linspace(-1, 1, 12, dtype=np.float32)
    results = []
    for L in (torch, rt):
        x = L.tensor(data, requires_grad=True)
        y = CASES[case](L, x)
        w = L.tensor(weights[: y.numel()].reshape(tuple(y.shape)))
        (y * w).sum().backward()
        results.append((y.grad_fn.name(), y.detach().numpy(), x.grad.numpy()))
    (name, value, grad), (name_rt, value_rt, grad_rt) = results
    assert name == name_rt
    np.testing.assert_allclose(value, value_rt, rtol=1e-6)
    np.testing.assert_allclose(grad, grad_rt, rtol=1e-6, atol=1e-7)


def test_roll_errors_match_pytorch(rt):
    for L in (torch, rt):
        x = L.ones(2, 3)
        with pytest.raises(
            RuntimeError, match="shifts and dimensions must align. shifts: 2, dims:1"
        ):
            x.roll((1, 2), 0)
        with pytest.raises(
            RuntimeError, match="shifts and dimensions must align. shifts: 2, dims:0"
        ):
            x.roll((1, 2))


def test_multinomial_draws_from_the_distribution():
    torch.manual_seed(0)
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.0, 0.0, 2.0]])
    draws = torch.multinomial(probs, 4000, replacement=True)
    assert draws.dtype == torch.int64 and draws.shape == (2, 4000)
    freq = np.bincount(draws[0].numpy(), minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.03)
    assert (draws[1] == 2).all()
    assert probs[0].multinomial(1).shape == (1,)
    # without replacement: every category once; those of probability 0 only after the others
    no_repeat = torch.multinomial(torch.tensor([0.0, 1.0, 0.0, 3.0]), 4)
    assert sorted(no_repeat.tolist()) == [0, 1, 2, 3]
    assert set(no_repeat[:2].tolist()) == {1, 3}
    # generator= gives a reproducible stream
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert (
        torch.multinomial(probs, 3, generator=g1).tolist()
        == torch.multinomial(probs, 3, generator=g2).tolist()
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ([0.0, 1.0, 0.0], 4),
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement",
        ),
        (([0.0, -1.0, 0.0], 1), "probability tensor contains either `inf`, `nan` or element < 0"),
        (([0.0, 0.0, 0.0], 1), "invalid multinomial distribution (sum of probabilities <= 0)"),
        (([[[1.0]]], 1), "prob_dist must be 1 or 2 dim"),
    ],
)
def test_multinomial_errors_match_pytorch(args, message, rt):
    for L in (torch, rt):
        with pytest.raises(RuntimeError) as info:
            L.multinomial(L.tensor(args[0]), args[1])
        assert str(info.value).startswith(message)


def test_clip_grad_norm_is_tensor_ops(rt):
    """clip_grad_norm_ computes with tensor ops under no_grad (what a captured training
    step can record) and gives PyTorch's norm and clipped gradients."""
    grads = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([3.0, -4.0], np.float32)]
    out = []
    for L in (torch, rt):
        params = [L.zeros(*g.shape, requires_grad=True) for g in grads]
        for p, g in zip(params, grads, strict=True):
            p.grad = L.tensor(g)
        total = L.nn.utils.clip_grad_norm_(params, 1.0)
        assert isinstance(total, L.Tensor) and total.grad_fn is None
        out.append([total.numpy()] + [p.grad.numpy() for p in params])
    for ours, theirs in zip(*out, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
