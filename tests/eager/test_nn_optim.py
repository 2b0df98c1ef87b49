"""nn, optim and checkpointing: training works, matches PyTorch, memory stays flat."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import tracegrad.eager as torch
import tracegrad.eager.nn.functional as F
from tracegrad.eager import nn


def make_mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))


def test_module_api():
    model = make_mlp()
    assert len(model) == 5 and isinstance(model[0], nn.Linear) and isinstance(model[-1], nn.Linear)
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear", "Tanh", "Linear"]
    assert len(model[:2]) == 2
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert model.training and not model.eval().training and not model[0].training
    assert model.train().training
    lin = nn.Linear(3, 2, bias=False)
    assert lin.bias is None and lin.weight.shape == (2, 3) and lin.weight.requires_grad
    assert len(list(lin.parameters())) == 1
    bound = 1 / np.sqrt(3)
    assert np.all(np.abs(lin.weight.detach().numpy()) <= bound)
    assert repr(nn.Linear(2, 3)) == "Linear(in_features=2, out_features=3, bias=True)"
    assert repr(lin.weight).startswith("Parameter containing:\ntensor([[")


def test_linear_graph_names():
    lin = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    assert lin(x).grad_fn.name() == "AddmmBackward0"
    assert nn.Linear(3, 2, bias=False)(x).grad_fn.name() == "MmBackward0"
    assert F.mse_loss(lin(x), torch.zeros(4, 2)).grad_fn.name() == "MseLossBackward0"
    assert F.cross_entropy(lin(x), torch.tensor([0, 1, 1, 0])).grad_fn.name() == "NllLossBackward0"


def test_zero_grad_sets_none_by_default():
    model = make_mlp()
    model(torch.randn(2, 3)).sum().backward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert all(p.grad is not None for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model(torch.randn(2, 3)).sum().backward()
    model.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in model.parameters())


@pytest.mark.parametrize(
    "opt_name,kwargs",
    [
        ("SGD", dict(lr=0.5)),
        ("SGD", dict(lr=0.05, momentum=0.9)),
        ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
        ("Adam", dict(lr=0.01)),
        ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.001)),
    ],
)
def test_training_reduces_loss(opt_name, kwargs):
    model = make_mlp()
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((16, 3)).astype(np.float32))
    target = torch.tensor(rng.integers(0, 2, 16))
    opt = getattr(torch.optim, opt_name)(model.parameters(), **kwargs)
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.7 * first


def test_losses_stable_for_huge_logits():
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4]], requires_grad=True)
    loss = F.cross_entropy(logits, torch.tensor([0, 2]))
    loss.backward()
    assert np.isfinite(loss.item()) and abs(loss.item() - np.log(2) / 2) < 1e-5
    assert np.all(np.isfinite(logits.grad.numpy()))
    for fn in (
        lambda t: F.softmax(t, dim=1),
        lambda t: F.log_softmax(t, dim=1),
        lambda t: torch.logsumexp(t, dim=1),
        lambda t: torch.sigmoid(t),
    ):
        t = torch.tensor([[1e4, -1e4], [-1e4, 1e4]], requires_grad=True)
        out = fn(t)
        out.sum().backward()
        assert np.all(np.isfinite(out.detach().numpy())) and np.all(np.isfinite(t.grad.numpy()))
    x = torch.tensor([1e4, -1e4], requires_grad=True)
    F.mse_loss(x, torch.zeros(2)).backward()
    assert x.grad.tolist() == [1e4, -1e4]


def test_checkpoint_gives_same_gradients():
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(8)])
    x = torch.randn(3, 4, requires_grad=True)
    model(x).pow(2).sum().backward()
    expected = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
    for run in (
        lambda: torch.checkpoint_sequential(model, 4, x),
        lambda: torch.checkpoint(model, x),
        lambda: torch.utils.checkpoint.checkpoint(lambda t: model(t), x),
    ):
        model.zero_grad()
        x.grad = None
        out = run()
        assert out.grad_fn.name() in ("CheckpointFunctionBackward", "TanhBackward0")
        out.pow(2).sum().backward()
        got = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _peak_saved_bytes(n_layers: int, segments: int | None) -> int:
    torch.manual_seed(0)
    layers = nn.Sequential(*[nn.Tanh() for _ in range(n_layers)])
    x = torch.randn(64, 256, requires_grad=True)
    gc.collect()
    tracemalloc.start()
    out = layers(x) if segments is None else torch.checkpoint_sequential(layers, segments, x)
    _, peak = tracemalloc.get_traced_memory()
    out.sum().backward()
    tracemalloc.stop()
    return peak


def test_checkpoint_sequential_saves_sqrt_n_activations():
    n = 36
    plain = _peak_saved_bytes(n, None)
    ckpt = _peak_saved_bytes(n, 6)
    activation = 64 * 256 * 4
    assert plain > (n - 2) * activation  # every tanh output kept
    assert ckpt < 2 * 6 * activation + activation  # ~ segments boundaries + one segment


@pytest.mark.slow  # the same check as reliability's 10,000-step cross-entropy + Adam loop
def test_training_loop_memory_is_flat():
    """10,000 steps under tracemalloc: no graph survives its backward. Tracing
    starts before the first step, so the allocator's bounded pools are filled by
    traced blocks in the first steps; after that the traced total must not move
    (one leaked 48-byte object per step would add ~380 KB)."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(2000):
            step()
        first, _ = tracemalloc.get_traced_memory()
        for _ in range(8000):
            step()
        second, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert second - first < 10_000, (first, second)


def test_same_training_trajectory_as_torch():
    torch_ = pytest.importorskip("torch")
    ours = make_mlp(seed=1)
    theirs = torch_.nn.Sequential(
        torch_.nn.Linear(3, 8),
        torch_.nn.ReLU(),
        torch_.nn.Linear(8, 8),
        torch_.nn.Tanh(),
        torch_.nn.Linear(8, 2),
    )
    with torch_.no_grad():
        for p_t, p_o in zip(theirs.parameters(), ours.parameters(), strict=True):
            p_t.copy_(torch_.from_numpy(p_o.detach().numpy().copy()))
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((10, 3)).astype(np.float32)
    ys = rng.integers(0, 2, 10)
    opt_o = torch.optim.Adam(ours.parameters(), lr=0.01, betas=(0.85, 0.995))
    opt_t = torch_.optim.Adam(theirs.parameters(), lr=0.01, betas=(0.85, 0.995))
    for _ in range(20):
        for model, opt, M in ((ours, opt_o, torch), (theirs, opt_t, torch_)):
            opt.zero_grad()
            loss = M.nn.functional.cross_entropy(model(M.tensor(xs)), M.tensor(ys))
            loss.backward()
            opt.step()
    for p_o, p_t in zip(ours.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p_o.detach().numpy(), p_t.detach().numpy(), rtol=1e-4, atol=1e-5)
