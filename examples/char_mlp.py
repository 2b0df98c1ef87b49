"""A character-level MLP language model written the PyTorch way (makemore's MLP,
after Bengio et al. 2003): the last 3 characters' embeddings, concatenated by
`.view(B, -1)`, a tanh hidden layer and a linear layer to the next character's
logits; cross-entropy, SGD with momentum. The model code is plain PyTorch; only
the import lines choose the library.

It trains 20 steps on made-up names (examples/_common.py) from initial weights drawn
with NumPy, so `--torch` starts from the same weights and prints the same losses
(tests/examples/test_model_examples.py checks that), then samples a few names.

Run:  python examples/char_mlp.py [--torch] [--compile] [--steps N] [--seed S]
"""

from __future__ import annotations

from _common import (
    compiled,
    context_dataset,
    default_init,
    library_name,
    load_weights,
    made_up_names,
    minibatches,
    numpy_weights,
    parse_args,
    train,
    use_torch,
)

if use_torch():
    import torch
    import torch.nn as nn
    from torch.nn import functional as F
else:
    import tracegrad.eager as torch
    import tracegrad.eager.nn as nn
    from tracegrad.eager.nn import functional as F

VOCAB = 27  # '.' (start and end of a name) and a-z
BLOCK_SIZE = 3  # characters of context


class CharMLP(nn.Module):
    def __init__(self, vocab_size=VOCAB, block_size=BLOCK_SIZE, n_embd=10, n_hidden=64):
        super().__init__()
        self.block_size = block_size
        self.emb = nn.Embedding(vocab_size, n_embd)
        self.fc1 = nn.Linear(block_size * n_embd, n_hidden)
        self.fc2 = nn.Linear(n_hidden, vocab_size)

    def forward(self, idx, targets=None):
        B = idx.shape[0]
        emb = self.emb(idx)  # (B, block_size, n_embd)
        h = torch.tanh(self.fc1(emb.view(B, -1)))  # (B, n_hidden)
        logits = self.fc2(h)  # (B, vocab_size)
        loss = None if targets is None else F.cross_entropy(logits, targets)
        return logits, loss

    @torch.no_grad()
    def sample(self, n: int, generator=None) -> list:
        """n names drawn character by character from the model's distribution."""
        names = []
        for _ in range(n):
            context, out = [0] * self.block_size, []
            while len(out) < 20:
                logits, _ = self(torch.tensor([context]))
                probs = F.softmax(logits, dim=1)
                ix = torch.multinomial(probs, num_samples=1, generator=generator).item()
                if ix == 0:
                    break
                context = context[1:] + [ix]
                out.append("abcdefghijklmnopqrstuvwxyz"[ix - 1])
            names.append("".join(out))
        return names


def char_mlp_init(name, shape, rng):
    """The embedding table N(0, 1) (nn.Embedding's default); Linear as PyTorch's default."""
    if name.startswith("emb."):
        return rng.normal(0.0, 1.0, shape)
    return default_init(name, shape, rng)


def build(seed: int = 0):
    """The model (NumPy initial weights from `seed`) and its SGD with momentum."""
    model = CharMLP()
    load_weights(torch, model, numpy_weights(model, seed, char_mlp_init))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, optimizer


def make_train_step(model, opt):
    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        logits, loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    return train_step


def batches(steps: int, seed: int = 0, batch_size: int = 32):
    x, y = context_dataset(made_up_names(500, seed), BLOCK_SIZE)
    return minibatches(x, y, steps, batch_size, seed + 1)


def main() -> None:
    args = parse_args(__doc__)
    model, opt = build(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{library_name(torch)}: character MLP with {n_params} parameters")
    train_step = compiled(torch, make_train_step(model, opt), args.compile)
    losses = train(torch, train_step, batches(args.steps, args.seed))
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
    generator = torch.Generator().manual_seed(args.seed)
    print("samples:", " ".join(model.sample(5, generator)))


if __name__ == "__main__":
    main()
