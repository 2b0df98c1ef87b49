"""One PyTorch-style program, both graphs: eager (dynamic) and tracegrad.compile (static).

The model, the loss, `loss.backward()` and the optimizer step are written the PyTorch
way under `import tracegrad.eager as torch`. Run eagerly, every step records a fresh
grad_fn graph that backward walks and frees. Under `torch.compile(train_step)` the
same code is traced once into one static graph -- forward, backward and the AdamW
update -- compiled to a Numba kernel, and each later step only runs that kernel.

Run:  python examples/pytorch_style_compiled.py [--quick] [--out examples/out]
It prints both graphs' sizes, the losses of both runs step by step, the time per
step, and writes both graphs as DOT (and SVG where Graphviz is installed).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

import tracegrad.eager as torch
from tracegrad.viz import eager_graph, find_dot, ir_graph

nn = torch.nn
F = torch.nn.functional


class MLP(nn.Module):
    def __init__(self, n_in: int = 32, n_hidden: int = 64, n_out: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.norm = nn.LayerNorm(n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def make_step(model, opt):
    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return train_step


def build(seed: int = 0):
    torch.manual_seed(seed)
    model = MLP()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def batches(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [
        (
            torch.tensor(rng.standard_normal((64, 32)).astype(np.float32)),
            torch.tensor(rng.integers(0, 10, 64)),
        )
        for _ in range(n)
    ]


def time_steps(step, data, repeats: int) -> float:
    times = []
    for k in range(repeats):
        x, y = data[k % len(data)]
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def write(drawing, out: pathlib.Path, name: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.dot").write_text(drawing.to_dot())
    if find_dot():
        drawing.render(str(out / f"{name}.svg"))
        return f"{name}.dot/.svg"
    return f"{name}.dot"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = parser.parse_args()
    steps, repeats = (5, 20) if args.quick else (20, 200)
    data = batches(steps)
    out = pathlib.Path(args.out)

    eager_model, eager_opt = build()
    compiled_model, compiled_opt = build()
    eager_step = make_step(eager_model, eager_opt)
    compiled_step = torch.compile(make_step(compiled_model, compiled_opt))

    # The dynamic graph: recorded by one forward, walked and freed by backward.
    x, y = data[0]
    loss = F.cross_entropy(eager_model(x), y)
    drawing = eager_graph(loss, dict(eager_model.named_parameters()))
    print(
        f"eager: every step records a new backward graph ({len(drawing.nodes)} nodes here), "
        f"wrote {write(drawing, out, 'pytorch_style_eager_graph')}"
    )

    # The static graph: traced once; forward, backward and the AdamW update in one graph.
    t0 = time.perf_counter()
    lowered = compiled_step.lower(x, y)
    graph = lowered.traced
    print(
        f"compiled: one static graph, traced and compiled in {time.perf_counter() - t0:.2f} s: "
        f"{len(graph.inputs)} inputs (batch, parameters, AdamW state), {len(graph.nodes)} "
        f"nodes, {len(lowered.optimized.nodes)} after optimization; wrote "
        f"{write(ir_graph(graph), out, 'pytorch_style_static_graph')}"
    )

    diffs = []
    for k, (x, y) in enumerate(data):
        le, lc = float(eager_step(x, y)), float(compiled_step(x, y))
        diffs.append(abs(le - lc) / abs(le))
        print(f"step {k:2d}  eager loss {le:.6f}  compiled loss {lc:.6f}")
    params = max(
        float(np.max(np.abs(p.detach().numpy() - q.detach().numpy())))
        for p, q in zip(eager_model.parameters(), compiled_model.parameters(), strict=True)
    )
    print(f"max relative loss difference: {max(diffs):.2e}")
    print(f"max |eager - compiled| over all parameters after {steps} steps: {params:.2e}")
    print(f"traces: {compiled_step.cache_info().traces} ({'; '.join(compiled_step.trace_reasons)})")

    eager_time = time_steps(eager_step, data, repeats)
    compiled_time = time_steps(compiled_step, data, repeats)
    print(
        f"Timing: median per training step: eager {eager_time * 1e6:.0f} us, compiled "
        f"{compiled_time * 1e6:.0f} us ({eager_time / compiled_time:.1f}x faster)"
    )


if __name__ == "__main__":
    main()
