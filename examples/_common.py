"""What the PyTorch-style examples share (gpt_tiny.py, char_mlp.py, cnn_classifier.py).

Each example is written as a PyTorch user writes it and runs under
`import tracegrad.eager as torch` by default or under real PyTorch with `--torch`.
This module holds the pieces around the model code, so that they are written once:

- choosing the library (`use_torch`) and loading an example for one library in a
  test (`load_example`);
- the same initial weights in both libraries: `numpy_weights` draws one NumPy array
  per state_dict entry from a seed, `load_weights` copies them into a model;
- the synthetic data sets (a character corpus for the GPT, made-up names for the
  character MLP), deterministic from a NumPy seed;
- the training loop around an example's `train_step(x, y)` (`train`), optionally
  through `torch.compile` (`compiled`), and the command line (`parse_args`).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import pathlib
import sys

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parent
_FORCED: list = []  # the backend a test asked for while it loads an example


# ------------------------------------------------------------------ the library


def use_torch() -> bool:
    """True when the example should import real PyTorch: `--torch` on the command line,
    or a test loading it through `load_example(name, "torch")`."""
    if _FORCED:
        return _FORCED[-1] == "torch"
    return "--torch" in sys.argv[1:]


def load_example(name: str, backend: str):
    """examples/<name>.py as a fresh module whose imports pick `backend` ("torch" or
    "tracegrad"); the two can live side by side in one process."""
    assert backend in ("torch", "tracegrad"), backend
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_{backend}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    _FORCED.append(backend)
    try:
        spec.loader.exec_module(module)
    finally:
        _FORCED.pop()
    return module


# ---------------------------------------------------------- the same weights


def default_init(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """PyTorch's default scale, drawn with NumPy: weights of Linear/Conv uniform in
    +-1/sqrt(fan_in) (as PyTorch's), biases zero (PyTorch draws them in the same range),
    1-d weights (norm layers) one."""
    if name.endswith("bias"):
        return np.zeros(shape)
    if len(shape) == 1:
        return np.ones(shape)
    bound = 1.0 / math.sqrt(int(np.prod(shape[1:])))
    return rng.uniform(-bound, bound, shape)


def numpy_weights(model, seed: int, init=default_init) -> dict:
    """One float32 NumPy array per state_dict entry: parameters from `init(name, shape,
    rng)`, buffers as the model holds them. Tied parameters (one tensor under two names,
    GPT's lm_head.weight and wte.weight) get one array."""
    rng = np.random.default_rng(seed)
    arrays, by_tensor = {}, {}
    params = {id(p) for p in model.parameters()}
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) not in by_tensor:
            if id(t) in params:
                by_tensor[id(t)] = np.asarray(init(name, tuple(t.shape), rng), np.float32)
            else:
                by_tensor[id(t)] = t.detach().numpy().copy()
        arrays[name] = by_tensor[id(t)]
    return arrays


def load_weights(torch, model, arrays: dict) -> None:
    """model.load_state_dict from NumPy arrays (either library)."""
    model.load_state_dict({k: torch.tensor(v) for k, v in arrays.items()})


# ----------------------------------------------------------------- data sets

# tiny-shakespeare's 65 characters, the vocabulary of nanoGPT's character model
CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def char_corpus(n_chars: int, seed: int) -> np.ndarray:
    """Made-up text (a few hundred words in sentences) encoded as indices into CHARS."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, rng.integers(1, 8))) for _ in range(300)]
    out, size = [], 0
    while size < n_chars:
        sentence = " ".join(words[i] for i in rng.integers(0, len(words), rng.integers(3, 10)))
        sentence = sentence[0].upper() + sentence[1:] + rng.choice([". ", "! ", "?\n", ";\n"])
        out.append(sentence)
        size += len(sentence)
    text = "".join(out)[:n_chars]
    lookup = {c: i for i, c in enumerate(CHARS)}
    return np.array([lookup[c] for c in text], dtype=np.int64)


def lm_batches(data: np.ndarray, steps: int, batch: int, block: int, seed: int) -> list:
    """nanoGPT's get_batch: `steps` pairs (x, y) of int64 (batch, block), y = x shifted by one."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        ix = rng.integers(0, len(data) - block, batch)
        x = np.stack([data[i : i + block] for i in ix])
        y = np.stack([data[i + 1 : i + 1 + block] for i in ix])
        out.append((x, y))
    return out


def made_up_names(n: int, seed: int) -> list:
    """makemore's names.txt stand-in: lower-case names built from syllables."""
    rng = np.random.default_rng(seed)
    syllables = [
        "an",
        "na",
        "el",
        "li",
        "ma",
        "ri",
        "so",
        "ja",
        "ke",
        "ty",
        "lo",
        "ra",
        "mi",
        "da",
        "zo",
        "be",
        "th",
        "ia",
        "on",
        "ev",
        "ch",
        "ar",
        "yn",
        "us",
    ]
    return [
        "".join(rng.choice(syllables, rng.integers(1, 4))) + rng.choice(["", "a", "n", "e"])
        for _ in range(n)
    ]


def context_dataset(words: list, block: int) -> tuple:
    """makemore's build_dataset: each character of each word ('.' ends it) with the
    `block` characters before it (index 0, '.', pads the start). X (N, block), Y (N,)."""
    stoi = {c: i + 1 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    stoi["."] = 0
    xs, ys = [], []
    for w in words:
        context = [0] * block
        for ch in w + ".":
            ix = stoi[ch]
            xs.append(context)
            ys.append(ix)
            context = context[1:] + [ix]
    return np.array(xs, dtype=np.int64), np.array(ys, dtype=np.int64)


def minibatches(x: np.ndarray, y: np.ndarray, steps: int, batch: int, seed: int) -> list:
    """`steps` random minibatches (x[ix], y[ix]), as makemore draws them."""
    rng = np.random.default_rng(seed)
    return [(x[ix], y[ix]) for ix in (rng.integers(0, len(x), batch) for _ in range(steps))]


# -------------------------------------------------------------- training loop


def compiled(torch, train_step, enabled: bool):
    """`torch.compile(train_step)` when asked (under tracegrad.eager, tracegrad.compile:
    the whole step, backward and optimizer included, captured into one graph)."""
    return torch.compile(train_step) if enabled else train_step


def train(torch, train_step, batches: list, log: bool = True) -> list:
    """Call train_step on each (x, y) batch; returns the losses as Python floats."""
    losses = []
    for step, (x, y) in enumerate(batches):
        loss = train_step(torch.tensor(x), torch.tensor(y))
        losses.append(loss.item())
        if log:
            print(f"step {step:3d}  loss {losses[-1]:.6f}")
    return losses


def parse_args(doc: str, steps: int = 20) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.strip().split("\n")[0])
    parser.add_argument("--torch", action="store_true", help="run under real PyTorch")
    parser.add_argument("--compile", action="store_true", help="wrap train_step with torch.compile")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def library_name(torch) -> str:
    return "torch" if torch.__name__ == "torch" else "tracegrad.eager"
