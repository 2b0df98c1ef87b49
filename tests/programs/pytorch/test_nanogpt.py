"""nanoGPT's model.py (vendored, only its imports changed) under tracegrad.eager gives real
PyTorch's logits, loss, gradients and AdamW steps from the same weights, with and without
bias; its generate() with temperature and top-k samples from PyTorch's distribution."""

import numpy as np
import pytest

from tests.programs.pytorch._load import (
    assert_close,
    assert_same_grads,
    assert_same_params,
    load_pair,
    same_weights,
)

V, T = 11, 8


def build(mods, bias: bool, dropout: float = 0.0):
    models = {}
    for b, m in mods.items():
        m.torch.manual_seed(0)
        cfg = m.GPTConfig(
            block_size=T, vocab_size=V, n_layer=2, n_head=2, n_embd=8, dropout=dropout, bias=bias
        )
        models[b] = m.GPT(cfg)
    same_weights(models)
    return models


def batch(seed: int, b: int = 3):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (b, T)), rng.integers(0, V, (b, T))


@pytest.mark.parametrize("bias", [True, False])
def test_logits_loss_grads_and_adamw_steps_match_pytorch(bias):
    mods = load_pair("nanogpt_model")
    models = build(mods, bias)
    assert models["tracegrad"].get_num_params() == models["torch"].get_num_params()
    # one forward/backward: logits, loss and every parameter's gradient
    x, y = batch(0)
    out = {b: models[b](m.torch.tensor(x), m.torch.tensor(y)) for b, m in mods.items()}
    assert_close(out["tracegrad"][0], out["torch"][0])
    assert_close(out["tracegrad"][1], out["torch"][1])
    for b in mods:
        out[b][1].backward()
    assert_same_grads(models)
    # the model's own configure_optimizers (AdamW, decayed / non-decayed groups), 3 steps
    opts = {b: models[b].configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu") for b in mods}
    assert [len(g["params"]) for g in opts["tracegrad"].param_groups] == [
        len(g["params"]) for g in opts["torch"].param_groups
    ]
    losses = {b: [] for b in mods}
    for step in range(3):
        x, y = batch(step + 1)
        for b, m in mods.items():
            opts[b].zero_grad(set_to_none=True)
            _, loss = models[b](m.torch.tensor(x), m.torch.tensor(y))
            loss.backward()
            opts[b].step()
            losses[b].append(loss.item())
    np.testing.assert_allclose(losses["tracegrad"], losses["torch"], rtol=1e-5)
    assert_same_params(models)
    # inference: targets=None gives only the last position's logits
    for b in mods:
        models[b].eval()
    x, _ = batch(9)
    out = {b: models[b](m.torch.tensor(x))[0] for b, m in mods.items()}
    assert tuple(out["tracegrad"].shape) == (3, 1, V)
    assert_close(out["tracegrad"], out["torch"])


def test_crop_block_size_and_greedy_generate_match_pytorch():
    mods = load_pair("nanogpt_model")
    models = build(mods, bias=True)
    x, _ = batch(4)
    for b in mods:
        models[b].eval()
        models[b].crop_block_size(6)
    assert tuple(models["tracegrad"].transformer.wpe.weight.shape) == (6, 8)
    # top_k=1 is greedy decoding: the same tokens, past the block size (idx is cropped)
    out = {
        b: models[b].generate(m.torch.tensor(x[:, :4]), 5, temperature=0.7, top_k=1)
        for b, m in mods.items()
    }
    np.testing.assert_array_equal(out["tracegrad"].numpy(), out["torch"].numpy())


def test_generate_samples_from_pytorchs_top_k_distribution():
    """generate(temperature=0.5, top_k=3): every sampled token is among PyTorch's 3 most
    likely, and over 3000 rows the first token's frequencies match PyTorch's
    softmax(top-3 logits / 0.5) (within 5 standard errors)."""
    mods = load_pair("nanogpt_model")
    models = build(mods, bias=False)
    for b in mods:
        models[b].eval()
    prefix = batch(5, b=1)[0][:, :3]
    tg, rt = mods["tracegrad"].torch, mods["torch"].torch
    tg.manual_seed(0)
    n = 3000
    out = models["tracegrad"].generate(tg.tensor(np.repeat(prefix, n, 0)), 2, 0.5, top_k=3)
    assert tuple(out.shape) == (n, 5) and out.dtype == tg.int64
    np.testing.assert_array_equal(out.numpy()[:, :3], np.repeat(prefix, n, 0))
    with rt.no_grad():
        logits = models["torch"](rt.tensor(prefix))[0][0, -1].numpy() / 0.5
    top = np.argsort(-logits)[:3]
    p = np.zeros(V)
    p[top] = np.exp(logits[top] - logits[top].max())
    p /= p.sum()
    first = out.numpy()[:, 3]
    assert set(first.tolist()) <= set(top.tolist())
    freq = np.bincount(first, minlength=V) / n
    np.testing.assert_array_less(np.abs(freq - p), 5 * np.sqrt(p * (1 - p) / n) + 1e-9)
    # the second token: among PyTorch's top 3 for its own prefix
    with rt.no_grad():
        nxt = models["torch"](rt.tensor(out.numpy()[:50, :4]))[0][:, -1].numpy()
    top2 = np.argsort(-nxt, axis=1)[:, :3]
    assert all(t in row for t, row in zip(out.numpy()[:50, 4], top2, strict=True))


def test_dropout_trains_and_eval_is_deterministic():
    """With dropout the two libraries draw different masks (NumPy's generator), so only
    the properties are compared: training-mode losses differ between calls, eval-mode ones
    do not and equal PyTorch's."""
    mods = load_pair("nanogpt_model")
    models = build(mods, bias=True, dropout=0.2)
    tg = mods["tracegrad"].torch
    x, y = batch(6)
    a = models["tracegrad"](tg.tensor(x), tg.tensor(y))[1].item()
    b = models["tracegrad"](tg.tensor(x), tg.tensor(y))[1].item()
    assert a != b
    for k in mods:
        models[k].eval()
    out = {k: models[k](m.torch.tensor(x), m.torch.tensor(y))[1] for k, m in mods.items()}
    assert_close(out["tracegrad"], out["torch"])
