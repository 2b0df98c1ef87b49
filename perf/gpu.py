"""tracegrad on an NVIDIA GPU (issue 24): check, then time against jax.jit, PyTorch
eager and torch.compile in the same run, and write a markdown table.

    python3 perf/gpu.py                       # on the GPU machine: checks, then the table
    python3 perf/gpu.py --skip-checks --repeats 50 --out perf/gpu_table.md
    NUMBA_ENABLE_CUDASIM=1 python perf/gpu.py --smoke   # no GPU: the simulator, tiny sizes

1. Checks: tests/cuda (every primitive the CUDA backend supports: values and
   gradients against the CPU path) run in a subprocess on the real GPU
   (TRACEGRAD_CUDA_TESTS=gpu; under --smoke, in the simulator).
2. Timing: float32 value and gradient of every input, median microseconds per call
   with a device synchronisation at the end of each call, and the first call's
   time (tracing + compiling, cold) for tracegrad and jax.jit. Workloads (issue 24):
   mlp_mnist_b128, mlp_b4096, elementwise 1M and 64M, tanh_chain_d50, attention.
   Cross-entropy and softmax are written with max/exp/sum/log (what the CUDA
   backend supports), the same formula in every system.

Under --smoke the sizes are tiny, baselines run wherever torch/jax put them, and
the numbers mean nothing: it only exercises the script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------ workloads


def workloads(smoke: bool) -> dict:
    """name -> (builder(xp) -> loss function, inputs (float32 arrays), description).
    `xp` is the array namespace the loss uses (tracegrad, jax.numpy or torch)."""
    rng = np.random.default_rng(0)

    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def onehot(n, k):
        y = np.zeros((n, k), np.float32)
        y[np.arange(n), rng.integers(0, k, n)] = 1.0
        return y

    def mlp(sizes, batch):
        params = [
            f32(a, b, scale=1 / np.sqrt(a)) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        ]
        return params + [f32(batch, sizes[0]), onehot(batch, sizes[-1])]

    def mlp_loss(ops):
        def loss(*args):
            *ws, x, y = args
            h = x
            for w in ws[:-1]:
                h = ops.relu(h @ w)
            return ops.xent(h @ ws[-1], y)

        return loss

    def elementwise_loss(ops):
        return lambda x: ops.sum(ops.tanh(x) * ops.sin(x) + ops.exp(-x * x))

    def chain_loss(ops):
        def loss(w, h):
            for _ in range(50):
                h = ops.tanh(h @ w)
            return ops.sum(h * h)

        return loss

    def attention_loss(ops):
        def loss(q, k, v):
            scores = ops.matmul(q, ops.swap(k)) * (1.0 / np.sqrt(q.shape[-1]))
            return ops.sum(ops.matmul(ops.softmax(scores), v) ** 2)

        return loss

    if smoke:  # the simulator runs each GPU thread as a Python thread: tiny shapes
        return {
            "mlp_mnist_b128": (mlp_loss, mlp((12, 8, 8, 4), 4), "784-256-256-10 (smoke: 12-8-8-4)"),
            "mlp_b4096": (mlp_loss, mlp((16, 8, 8, 4), 8), "1024-1024-1024-10 (smoke: 16-8-8-4)"),
            "elementwise_1M": (elementwise_loss, [f32(64)], "1M values (smoke: 64)"),
            "elementwise_64M": (elementwise_loss, [f32(512)], "64M values (smoke: 512)"),
            "tanh_chain_d50": (
                chain_loss,
                [f32(4, 4, scale=0.5), f32(2, 4)],
                "50 layers (smoke: 4x4)",
            ),
            "attention": (
                attention_loss,
                [f32(1, 4, 4, scale=0.3) for _ in range(3)],
                "(smoke: 1x4x4)",
            ),
        }
    return {
        "mlp_mnist_b128": (
            mlp_loss,
            mlp((784, 256, 256, 10), 128),
            "784-256-256-10, ReLU, cross-entropy",
        ),
        "mlp_b4096": (mlp_loss, mlp((1024, 1024, 1024, 10), 4096), "1024-1024-1024-10"),
        "elementwise_1M": (elementwise_loss, [f32(1 << 20)], "sum(tanh x sin x + exp(-x^2))"),
        "elementwise_64M": (elementwise_loss, [f32(1 << 26)], "the same, 64M values"),
        "tanh_chain_d50": (
            chain_loss,
            [f32(64, 64, scale=1 / 8), f32(32, 64)],
            "batch 32, 50 tanh(h @ W) of 64x64",
        ),
        "attention": (
            attention_loss,
            [f32(8, 512, 64, scale=0.3) for _ in range(3)],
            "batch 8, length 512, width 64",
        ),
    }


class _TG:
    def __init__(self):
        import tracegrad as tg

        self.tg = tg

    def relu(self, x):
        return self.tg.maximum(x, 0.0)

    def xent(self, logits, y):
        tg = self.tg
        z = logits - tg.max(logits, axis=1, keepdims=True)
        lse = tg.log(tg.sum(tg.exp(z), axis=1, keepdims=True))
        return -tg.sum(y * (z - lse)) / logits.shape[0]

    def softmax(self, s):
        tg = self.tg
        e = tg.exp(s - tg.max(s, axis=-1, keepdims=True))
        return e / tg.sum(e, axis=-1, keepdims=True)

    def swap(self, k):
        return self.tg.swapaxes(k, -1, -2)

    def __getattr__(self, name):
        return getattr(self.tg, name)


class _JAX(_TG):
    def __init__(self):
        import jax.numpy as jnp

        self.tg = jnp


class _Torch:
    def __init__(self):
        import torch

        self.t = torch

    def relu(self, x):
        return self.t.relu(x)

    def xent(self, logits, y):
        t = self.t
        z = logits - logits.max(dim=1, keepdim=True).values
        lse = t.log(t.exp(z).sum(dim=1, keepdim=True))
        return -(y * (z - lse)).sum() / logits.shape[0]

    def softmax(self, s):
        e = self.t.exp(s - s.max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)

    def swap(self, k):
        return k.transpose(-1, -2)

    def matmul(self, a, b):
        return a @ b

    def sum(self, x):
        return x.sum()

    def __getattr__(self, name):
        return getattr(self.t, name)


# ------------------------------------------------------------------ systems


def time_calls(call, sync, repeats: int) -> tuple[float, float]:
    """(first call seconds, median seconds per later call), each ending in `sync`."""
    t0 = time.perf_counter()
    sync(call())
    first = time.perf_counter() - t0
    sync(call())  # (one more warm-up)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sync(call())
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def run_tracegrad(build, inputs, repeats):
    import tracegrad as tg
    from tracegrad.placement import load_cuda

    cuda = load_cuda()
    loss = build(_TG())
    f = tg.value_and_grad(loss, argnums=tuple(range(len(inputs))))
    dev = [tg.device_put(x) for x in inputs]
    return time_calls(lambda: f(*dev), lambda out: cuda.synchronize(), repeats), f(*dev)


def run_jax(build, inputs, repeats):
    import jax

    loss = build(_JAX())
    f = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(inputs)))))
    dev = [jax.device_put(x) for x in inputs]
    return time_calls(lambda: f(*dev), jax.block_until_ready, repeats), None


def run_torch(build, inputs, repeats, compiled: bool):
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    loss = build(_Torch())
    if compiled:
        loss = torch.compile(loss)
    xs = [torch.tensor(x, device=device, requires_grad=True) for x in inputs]

    def call():
        for x in xs:
            x.grad = None
        value = loss(*xs)
        value.backward()
        return value

    def sync(_):
        if device == "cuda":
            torch.cuda.synchronize()

    return time_calls(call, sync, repeats), None


SYSTEMS = {
    "tracegrad": run_tracegrad,
    "jax.jit": run_jax,
    "PyTorch eager": lambda b, i, r: run_torch(b, i, r, False),
    "torch.compile": lambda b, i, r: run_torch(b, i, r, True),
}


def check_against_cpu(build, inputs, gpu_result) -> float:
    """Largest relative difference between the GPU's value/grads and the CPU path's."""
    import tracegrad as tg

    loss = build(_TG())
    cpu = tg.value_and_grad(loss, argnums=tuple(range(len(inputs))), backend="interpret")(*inputs)
    worst = 0.0
    for g, c in zip([gpu_result[0], *gpu_result[1]], [cpu[0], *cpu[1]], strict=True):
        g, c = np.asarray(g, np.float64), np.asarray(c, np.float64)
        worst = max(worst, float(np.max(np.abs(g - c)) / (np.max(np.abs(c)) + 1e-30)))
    return worst


# ------------------------------------------------------------------ main


def run_checks(smoke: bool) -> int:
    env = dict(os.environ)
    if not smoke:
        env["TRACEGRAD_CUDA_TESTS"] = "gpu"
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    print("== checks: tests/cuda (every supported primitive, GPU vs CPU path)", flush=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/cuda"]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the CUDA simulator)")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--out", default=str(ROOT / "perf" / "gpu_table.md"))
    args = ap.parse_args()
    if args.smoke:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    repeats = args.repeats or (2 if args.smoke else 30)
    status = 0 if args.skip_checks else run_checks(args.smoke)

    table = workloads(args.smoke)
    names = args.workloads.split(",") if args.workloads else list(table)
    systems = args.systems.split(",")
    rows = []
    for name in names:
        build, inputs, what = table[name]
        row = {"workload": f"`{name}` ({what})"}
        for system in systems:
            try:
                (first, median), result = SYSTEMS[system](build, inputs, repeats)
            except Exception as exc:  # a missing library, or an op the backend lacks
                row[system] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                print(f"{name:18s} {system:14s} FAILED {type(exc).__name__}: {exc}", flush=True)
                continue
            row[system] = f"{median * 1e6:.0f}"
            row[f"{system} first"] = f"{first * 1e3:.0f} ms"
            if system == "tracegrad":
                row["launches"] = str(_launches(build, inputs))
                err = check_against_cpu(build, inputs, result)
                row["max rel. diff vs CPU"] = f"{err:.1e}"
                if err > 1e-3:
                    status = 1
            print(
                f"{name:18s} {system:14s} {median * 1e6:10.1f} us  first {first * 1e3:8.1f} ms",
                flush=True,
            )
        rows.append(row)
    cols = [
        "workload",
        *systems,
        "tracegrad first",
        "jax.jit first",
        "launches",
        "max rel. diff vs CPU",
    ]
    device = _device_name()
    lines = [
        f"GPU: {device}. float32 value and gradient of every input; median us per call "
        f"({repeats} calls, each synchronised); 'first': the first call, cold.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(r.get(c, "") for c in cols) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return status


def _launches(build, inputs) -> int:
    """Kernel launches (GEMMs included) per call of the workload's compiled function."""
    import tracegrad as tg

    f = tg.value_and_grad(build(_TG()), argnums=tuple(range(len(inputs))))
    f(*[tg.device_put(x) for x in inputs])
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    return sum(1 + len(u.after) for u in entry.lowered.kernel.plan.units)


def _device_name() -> str:
    try:
        from tracegrad.placement import is_simulated, load_cuda

        if is_simulated():
            return "Numba's CUDA simulator (smoke run: numbers mean nothing)"
        return str(load_cuda().get_current_device().name)
    except Exception as exc:
        return f"unknown ({exc})"


if __name__ == "__main__":
    sys.exit(main())
