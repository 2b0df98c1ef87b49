"""The vendored programs under torch.compile (tracegrad.compile's capture of a PyTorch-
style training step): the captured graph, run by the NumPy interpreter in the default run,
gives the same losses and parameters as eager tracegrad for a few optimizer steps."""

import copy

import numpy as np
import pytest

from tests.programs.pytorch._load import load_program


def _nanogpt(m):
    cfg = m.GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8, dropout=0.0)
    model = m.GPT(cfg)
    return model, lambda: model.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu"), 11, (3, 8)


def _makemore_transformer(m):
    cfg = m.ModelConfig(vocab_size=7, block_size=5, n_layer=1, n_head=2, n_embd=8)
    model = m.Transformer(cfg)
    return model, lambda: m.torch.optim.AdamW(model.parameters(), lr=1e-2), 7, (3, 5)


def _makemore_mlp(m):
    cfg = m.ModelConfig(vocab_size=7, block_size=5, n_embd=8, n_embd2=12)
    model = m.MLP(cfg)
    return model, lambda: m.torch.optim.AdamW(model.parameters(), lr=1e-2), 7, (3, 5)


PROGRAMS = {
    "nanogpt": ("nanogpt_model", _nanogpt),
    "makemore Transformer": ("makemore", _makemore_transformer),
    "makemore MLP": ("makemore", _makemore_mlp),
}


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_compiled_training_steps_match_eager(case, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_BACKEND", "interpret")
    name, build = PROGRAMS[case]
    m = load_program(name, "tracegrad")
    torch = m.torch
    torch.manual_seed(0)
    model, make_opt, vocab, shape = build(m)
    start = copy.deepcopy(model.state_dict())
    rng = np.random.default_rng(0)
    batches = [
        (torch.tensor(rng.integers(0, vocab, shape)), torch.tensor(rng.integers(0, vocab, shape)))
        for _ in range(4)
    ]

    def run(compiled: bool):
        model.load_state_dict(start)
        opt = make_opt()

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            loss.backward()
            opt.step()
            return loss

        fn = torch.compile(step) if compiled else step
        losses = [fn(x, y).item() for x, y in batches]
        if compiled:  # one trace: the later steps ran the captured graph
            info = fn.cache_info()
            assert info.traces == 1 and info.hits >= 3, info
        return losses, {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}

    losses, params = run(False)
    losses_c, params_c = run(True)
    np.testing.assert_allclose(losses_c, losses, rtol=1e-5)
    for k, p in params.items():
        np.testing.assert_allclose(params_c[k], p, rtol=1e-4, atol=1e-5, err_msg=k)
