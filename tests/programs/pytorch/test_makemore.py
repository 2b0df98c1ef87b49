"""makemore.py (Karpathy's character-level language models, vendored with only its imports
changed) under tracegrad.eager: each of its models (the MLP language model, Bigram, the
RNN and GRU cells, BoW, the Transformer) gives real PyTorch's logits, loss, gradients and
AdamW steps from the same weights; its generate() and evaluate() and CharDataset run."""

import types

import numpy as np
import pytest

from tests.programs.pytorch._load import (
    assert_close,
    assert_same_grads,
    assert_same_params,
    load_pair,
    same_weights,
)

V, T = 7, 5
MODELS = ["MLP", "Bigram", "RNN-rnn", "RNN-gru", "BoW", "Transformer"]


def build(mods, name: str):
    models = {}
    for b, m in mods.items():
        m.torch.manual_seed(0)
        cfg = m.ModelConfig(vocab_size=V, block_size=T, n_layer=2, n_head=2, n_embd=8, n_embd2=12)
        cls, _, cell = name.partition("-")
        models[b] = m.RNN(cfg, cell_type=cell) if cell else getattr(m, cls)(cfg)
    same_weights(models)
    return models


def batch(seed: int):
    rng = np.random.default_rng(seed)  # -1 targets are ignored (makemore's padding)
    return rng.integers(0, V, (3, T)), rng.integers(-1, V, (3, T))


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_pytorch(name):
    mods = load_pair("makemore")
    models = build(mods, name)
    x, y = batch(0)
    out = {b: models[b](m.torch.tensor(x), m.torch.tensor(y)) for b, m in mods.items()}
    assert_close(out["tracegrad"][0], out["torch"][0])
    assert_close(out["tracegrad"][1], out["torch"][1])
    for b in mods:
        out[b][1].backward()
    assert_same_grads(models)
    # makemore's optimizer line, 3 steps
    opts = {
        b: m.torch.optim.AdamW(
            models[b].parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8
        )
        for b, m in mods.items()
    }
    losses = {b: [] for b in mods}
    for step in range(3):
        x, y = batch(step + 1)
        for b, m in mods.items():
            _, loss = models[b](m.torch.tensor(x), m.torch.tensor(y))
            models[b].zero_grad(set_to_none=True)
            loss.backward()
            opts[b].step()
            losses[b].append(loss.item())
    np.testing.assert_allclose(losses["tracegrad"], losses["torch"], rtol=1e-5)
    assert_same_params(models)


def test_generate_evaluate_and_dataset():
    """makemore's generate (greedy: equal tokens; sampled with top_k: among PyTorch's top k),
    evaluate (its DataLoader over CharDataset, under inference_mode) equal to PyTorch's."""
    mods = load_pair("makemore")
    models = build(mods, "Transformer")
    start = np.zeros((4, 1), dtype=np.int64)
    greedy = {
        b: m.generate(models[b], m.torch.tensor(start), T - 1, do_sample=False)
        for b, m in mods.items()
    }
    np.testing.assert_array_equal(greedy["tracegrad"].numpy(), greedy["torch"].numpy())
    tg, rt = mods["tracegrad"], mods["torch"]
    tg.torch.manual_seed(1)
    sampled = tg.generate(models["tracegrad"], tg.torch.tensor(start), T - 1, 0.8, True, 2)
    assert sampled.dtype == tg.torch.int64 and tuple(sampled.shape) == (4, T)
    with rt.torch.no_grad():
        for t in range(1, T):
            logits = models["torch"](rt.torch.tensor(sampled.numpy()[:, :t]))[0][:, -1]
            top2 = np.argsort(-logits.numpy(), axis=1)[:, :2]
            assert all(s in row for s, row in zip(sampled.numpy()[:, t], top2, strict=True))
    words = ["emma", "olivia", "ava", "isabella", "sophia"]
    chars = sorted(set("".join(words)))
    means = {}
    for b, m in mods.items():
        m.args = types.SimpleNamespace(device="cpu")  # evaluate reads the script's args
        ds = m.CharDataset(words, chars, max(len(w) for w in words))
        assert ds.get_vocab_size() == len(chars) + 1 and ds.get_output_length() == 9
        x, y = ds[1]
        assert x.dtype == m.torch.int64 and x.tolist()[:4] == [0, *ds.encode("oli").tolist()]
        assert ds.decode(ds.encode("ava").tolist()) == "ava"
        m.torch.manual_seed(0)
        cfg = m.ModelConfig(vocab_size=ds.get_vocab_size(), block_size=9, n_embd=8, n_embd2=8)
        models[b] = m.MLP(cfg)
    same_weights(models)
    for b, m in mods.items():
        ds = m.CharDataset(words, chars, max(len(w) for w in words))
        means[b] = m.evaluate(models[b], ds, batch_size=len(words))
        assert models[b].training  # evaluate puts the model back in training mode
    np.testing.assert_allclose(means["tracegrad"], means["torch"], rtol=1e-6)


def test_create_datasets_and_infinite_loader(tmp_path):
    """makemore's create_datasets (a names file, a random split) and its InfiniteDataLoader
    (RandomSampler with replacement and num_samples=1e10, drawn lazily) feed its own
    training step under tracegrad.eager: the loss falls over a few AdamW steps."""
    m = load_pair("makemore")["tracegrad"]
    names = tmp_path / "names.txt"
    words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper"] * 3
    names.write_text("\n".join(words) + "\n")
    m.torch.manual_seed(0)
    train, test = m.create_datasets(str(names))
    assert len(train) + len(test) == len(words) and len(test) == 2
    loader = m.InfiniteDataLoader(train, batch_size=8, pin_memory=False, num_workers=0)
    cfg = m.ModelConfig(vocab_size=train.get_vocab_size(), block_size=train.get_output_length(),
                        n_embd=8, n_embd2=16)  # fmt: skip
    model = m.MLP(cfg)
    opt = m.torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.99))
    losses = []
    for _ in range(15):
        x, y = loader.next()
        assert tuple(x.shape) == (8, train.get_output_length()) and x.dtype == m.torch.int64
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-3:]) < losses[0]
