"""PyTorch's examples/mnist/main.py (vendored, only its imports changed) under
tracegrad.eager: its Net gives real PyTorch's log-probabilities and gradients from the same
weights, and its own train() (Adadelta, StepLR, DataLoader) and test() functions give the
same losses, parameters and printed report on synthetic 28x28 batches."""

import re
import types

import numpy as np

from tests.programs.pytorch._load import (
    assert_close,
    assert_same_grads,
    assert_same_params,
    load_pair,
    same_weights,
)

NUMBER = r"\d+\.?\d*"


def build(mods):
    models = {}
    for b, m in mods.items():
        m.torch.manual_seed(0)
        models[b] = m.Net()
        # train() calls model.train(): with dropout on, each library would draw its own
        # masks, so the comparison runs with p = 0 (dropout itself: tests/eager)
        models[b].dropout1.p = models[b].dropout2.p = 0.0
    same_weights(models)
    return models


def data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
    return x, rng.integers(0, 10, n)


def test_net_matches_pytorch():
    mods = load_pair("mnist_main")
    models = build(mods)
    x, y = data(2, 0)
    out = {}
    for b, m in mods.items():
        out[b] = models[b](m.torch.tensor(x))
        m.F.nll_loss(out[b], m.torch.tensor(y)).backward()
    assert tuple(out["tracegrad"].shape) == (2, 10)
    assert_close(out["tracegrad"], out["torch"], rtol=1e-5, atol=1e-5)
    assert_same_grads(models, rtol=1e-4, atol=1e-6)


def test_train_and_test_functions_match_pytorch(capsys):
    mods = load_pair("mnist_main")
    models = build(mods)
    x, y = data(4, 1)
    xt, yt = data(3, 2)
    printed = {}
    for b, m in mods.items():
        torch = m.torch
        ds = torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y))
        loader = torch.utils.data.DataLoader(ds, batch_size=2)
        test_loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.tensor(xt), torch.tensor(yt)), batch_size=2
        )
        optimizer = m.optim.Adadelta(models[b].parameters(), lr=1.0)
        scheduler = m.StepLR(optimizer, step_size=1, gamma=0.7)
        args = types.SimpleNamespace(log_interval=1, dry_run=False)
        device = torch.device("cpu")
        capsys.readouterr()
        for epoch in (1, 2):
            m.train(args, models[b], device, loader, optimizer, epoch)
            m.test(models[b], device, test_loader)
            scheduler.step()
        printed[b] = capsys.readouterr().out
        assert optimizer.param_groups[0]["lr"] == 1.0 * 0.7**2
    assert "Train Epoch: 2 [2/4 (50%)]" in printed["tracegrad"]
    # the same report: the same text, and numbers equal to float32 rounding
    words = {b: re.split(NUMBER, text) for b, text in printed.items()}
    assert words["tracegrad"] == words["torch"]
    nums = {b: [float(v) for v in re.findall(NUMBER, text)] for b, text in printed.items()}
    assert len(nums["tracegrad"]) == 2 * (2 * 5 + 4)  # 2 epochs: 2 train lines, 1 test line
    np.testing.assert_allclose(nums["tracegrad"], nums["torch"], rtol=1e-5)
    assert_same_params(models)
