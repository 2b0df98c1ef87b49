"""PyTorch's examples/word_language_model/model.py (vendored, only its imports changed) under
tracegrad.eager: RNNModel with LSTM, GRU with tied weights, RNN_TANH and RNN_RELU, and
TransformerModel (a subclass of nn.Transformer) give real PyTorch's log-probabilities,
hidden states, gradients and training steps from the same weights. The steps are the loop
of the example's main.py (not vendored: it parses arguments and reads a corpus at import):
detached hidden state, NLLLoss, clip_grad_norm_, then p.data.add_(p.grad, alpha=-lr)."""

import numpy as np
import pytest

from tests.programs.pytorch._load import (
    assert_close,
    assert_same_grads,
    assert_same_params,
    load_pair,
    same_weights,
)

NTOKEN, BPTT, BSZ = 13, 4, 3
KINDS = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU", "Transformer"]


def build(mods, kind: str, dropout: float = 0.0):
    models = {}
    for b, m in mods.items():
        m.torch.manual_seed(0)
        if kind == "Transformer":  # ntoken, ninp, nhead, nhid, nlayers
            models[b] = m.TransformerModel(NTOKEN, 8, 2, 16, 2, dropout)
        else:  # GRU with tied weights (nhid == ninp)
            models[b] = m.RNNModel(kind, NTOKEN, 8, 8, 2, dropout, tie_weights=kind == "GRU")
    same_weights(models)
    return models


def repackage_hidden(torch, h):  # main.py's
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(torch, v) for v in h)


def run(m, model, kind, source, steps, lr=20.0, clip=0.25):
    """main.py's train() over `steps` bptt chunks of `source`: the losses."""
    torch = m.torch
    criterion = torch.nn.NLLLoss()
    source = torch.tensor(source)
    if kind != "Transformer":
        hidden = model.init_hidden(BSZ)
    losses = []
    for i in range(0, steps * BPTT, BPTT):
        data, targets = source[i : i + BPTT], source[i + 1 : i + 1 + BPTT].view(-1)
        model.zero_grad()
        if kind == "Transformer":
            output = model(data).view(-1, NTOKEN)
        else:
            hidden = repackage_hidden(torch, hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", KINDS)
def test_model_matches_pytorch(kind):
    mods = load_pair("word_language_model")
    models = build(mods, kind)
    if kind == "GRU":
        assert models["tracegrad"].decoder.weight is models["tracegrad"].encoder.weight
    for b in mods:  # nn.Transformer's layers have their own dropout 0.1: eval mode
        models[b].train(kind != "Transformer")
    source = np.random.default_rng(0).integers(0, NTOKEN, (3 * BPTT + 1, BSZ))
    x = source[:BPTT]
    out = {}
    for b, m in mods.items():
        if kind == "Transformer":
            out[b] = (models[b](m.torch.tensor(x)),)
        else:
            out[b] = models[b](m.torch.tensor(x), models[b].init_hidden(BSZ))
        target = m.torch.tensor(source[1 : BPTT + 1].ravel())
        m.F.nll_loss(out[b][0].reshape(-1, NTOKEN), target).backward()
    assert_close(out["tracegrad"][0], out["torch"][0])
    if kind != "Transformer":  # the final hidden state (LSTM: (h, c))
        ours, theirs = (out[b][1] if kind == "LSTM" else (out[b][1],) for b in mods)
        for h, h_rt in zip(ours, theirs, strict=True):
            assert_close(h, h_rt)
    assert_same_grads(models)
    losses = {b: run(m, models[b], kind, source, 3) for b, m in mods.items()}
    np.testing.assert_allclose(losses["tracegrad"], losses["torch"], rtol=1e-5)
    assert_same_params(models)


def test_transformer_model_structure():
    """TransformerModel subclasses nn.Transformer: an encoder of nlayers (its decoder
    attribute is replaced by a Linear); its causal mask log(tril(ones)) is
    nn.Transformer's generate_square_subsequent_mask."""
    mods = load_pair("word_language_model")
    models = build(mods, "Transformer")
    ours = models["tracegrad"]
    assert isinstance(ours, mods["tracegrad"].nn.Transformer)
    assert len(ours.encoder.layers) == 2 and isinstance(ours.decoder, mods["tracegrad"].nn.Linear)
    mask = ours._generate_square_subsequent_mask(4)
    ref = mods["tracegrad"].nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(mask.numpy(), ref.numpy())
    np.testing.assert_array_equal(
        ref.numpy(), mods["torch"].nn.Transformer.generate_square_subsequent_mask(4).numpy()
    )
