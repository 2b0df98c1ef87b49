"""A tiny GPT written the PyTorch way, following nanoGPT's model.py (and minGPT's).

Token and position embeddings, causal self-attention (`masked_fill` of a registered
`tril` buffer, softmax, `y.transpose(1, 2).contiguous().view(B, T, C)`), a GELU MLP,
LayerNorm, residual blocks, weight tying (lm_head.weight is wte.weight), AdamW with
nanoGPT's weight-decay groups, cross-entropy and gradient clipping. The model code is
plain PyTorch; only the import lines choose the library.

It trains 20 steps on a made-up character corpus (examples/_common.py) from initial
weights drawn with NumPy, so `--torch` starts from the same weights and prints the
same losses (tests/examples/test_model_examples.py checks that).

Run:  python examples/gpt_tiny.py [--torch] [--compile] [--steps N] [--seed S]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from _common import (
    CHARS,
    char_corpus,
    compiled,
    library_name,
    lm_batches,
    load_weights,
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


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 65
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        # causal mask: attention only to the left in the input sequence
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size)).view(
                1, 1, config.block_size, config.block_size
            ),
        )

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        # query, key, values for all heads in batch; the head becomes a batch dimension
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        # causal self-attention: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying: the token embedding and the output projection are one tensor
        self.transformer.wte.weight = self.lm_head.weight
        # (nanoGPT's own initialization is gpt_init below, drawn with NumPy so that both
        # libraries start from the same weights)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of length {t} > block size"
        pos = torch.arange(0, t, dtype=torch.long)  # shape (t)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        else:  # inference: only the last position's logits
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Continue each sequence of idx (b, t) by max_new_tokens sampled tokens."""
        for _ in range(max_new_tokens):
            # crop the context to the last block_size tokens
            idx_cond = (
                idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size :]
            )
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:  # only the top_k most likely tokens can be drawn
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        # matrices (matmul weights, embeddings) decay; biases and LayerNorm weights do not
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


def gpt_init(config):
    """nanoGPT's _init_weights as a `numpy_weights` rule: matrices and embeddings
    N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 n_layer)), biases 0,
    LayerNorm weights 1."""

    def init(name, shape, rng):
        if name.endswith("bias"):
            return np.zeros(shape)
        if len(shape) == 1:
            return np.ones(shape)
        std = 0.02 / math.sqrt(2 * config.n_layer) if name.endswith("c_proj.weight") else 0.02
        return rng.normal(0.0, std, shape)

    return init


def build(seed: int = 0, config: GPTConfig | None = None):
    """The model (NumPy initial weights from `seed`) and its AdamW."""
    config = config or GPTConfig()
    model = GPT(config)
    load_weights(torch, model, numpy_weights(model, seed, gpt_init(config)))
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-2, betas=(0.9, 0.95))
    return model, optimizer


def make_train_step(model, opt):
    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        logits, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return train_step


def batches(steps: int, seed: int = 0, batch_size: int = 8, config: GPTConfig | None = None):
    config = config or GPTConfig()
    data = char_corpus(20_000, seed)
    return lm_batches(data, steps, batch_size, config.block_size, seed + 1)


def main() -> None:
    args = parse_args(__doc__)
    model, opt = build(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{library_name(torch)}: GPT with {n_params} parameters, {GPTConfig()}")
    train_step = compiled(torch, make_train_step(model, opt), args.compile)
    losses = train(torch, train_step, batches(args.steps, args.seed))
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
    torch.manual_seed(args.seed)
    start = torch.zeros((1, 1), dtype=torch.long)  # CHARS[0], a newline
    sample = model.generate(start, 60, temperature=0.8, top_k=10)[0].tolist()
    print("sample:", repr("".join(CHARS[i] for i in sample[1:])))


if __name__ == "__main__":
    main()
