"""Gradient checkpointing: trade recomputation for memory in a deep chain.

A chain of N layers, h = tanh(h * w_i + b_i) (scalar w_i, b_i), keeps one activation per layer
for the backward pass, so its saved memory grows like N. With
`checkpoint_sequential(layers, segments=sqrt(N), h)` only the input of each
segment is kept; during backward each segment's forward is run again, so at
most about sqrt(N) + N/sqrt(N) = 2 sqrt(N) activations are alive at once.
The price is roughly one extra forward pass.

For each N the script measures, with tracemalloc, the peak memory allocated
during forward + backward (above what existed before), and the time, with and
without checkpointing, and checks that the gradients are identical.

Run:  python examples/checkpointing.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import tracemalloc

import numpy as np

import tracegrad as tg
import tracegrad.eager as eager


def make_layers(depth: int, width: int, seed: int = 0):
    """`depth` layers with one scalar weight and bias each (leaf tensors).

    Scalar parameters keep their gradients tiny, so the memory measured is the
    activations the graph saves, which is what checkpointing changes.
    """
    rng = np.random.default_rng(seed)
    weights = [
        eager.tensor(rng.uniform(0.8, 1.2, 1).astype(np.float32), requires_grad=True)
        for _ in range(depth)
    ]
    biases = [
        eager.tensor(rng.uniform(-0.1, 0.1, 1).astype(np.float32), requires_grad=True)
        for _ in range(depth)
    ]
    layers = [_layer(w, b) for w, b in zip(weights, biases, strict=True)]
    return layers, weights + biases


def _layer(w, b):
    def layer(h):
        return tg.tanh(h * w + b)

    return layer


def run_plain(layers, h):
    for layer in layers:
        h = layer(h)
    return tg.sum(h)


def run_checkpoint_sequential(layers, h, segments: int):
    return tg.sum(eager.checkpoint_sequential(layers, segments, h))


def run_checkpoint_blocks(layers, h, block: int):
    """The same with `checkpoint(fn, *args)` around each block of layers."""
    for start in range(0, len(layers), block):
        chunk = layers[start : start + block]
        h = eager.checkpoint(lambda x, chunk=chunk: _apply(chunk, x), h)
    return tg.sum(h)


def _apply(chunk, h):
    for layer in chunk:
        h = layer(h)
    return h


def minor_page_faults() -> int:
    """Fresh memory pages this process has touched so far (0 where unsupported)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(forward, params, x: np.ndarray, repeats: int):
    """Peak bytes allocated during forward + backward, median seconds, median
    page faults per run, and the grads."""
    times, faults = [], []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        faults_before = minor_page_faults()
        start = time.perf_counter()
        forward(eager.tensor(x, requires_grad=True)).backward()
        times.append(time.perf_counter() - start)
        faults.append(minor_page_faults() - faults_before)
    for p in params:
        p.grad = None
    inputs = eager.tensor(x, requires_grad=True)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    forward(inputs).backward()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    grads = [p.grad.numpy().copy() for p in params]
    return peak, statistics.median(times), statistics.median(faults), grads


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small depths and width")
    parser.add_argument(
        "--width",
        type=int,
        default=None,
        help="activation size per layer (default 32768 floats = 128 KiB)",
    )
    args = parser.parse_args(argv)
    depths = [16, 64] if args.quick else [16, 64, 144, 256]
    width = args.width or (4096 if args.quick else 32768)
    repeats = 3 if args.quick else 5
    activation = width * 4
    x = np.random.default_rng(1).standard_normal(width).astype(np.float32)
    print(__doc__.split("\n\nFor each")[0])
    print(
        f"\nactivation size: {width} float32 = {activation / 1024:.0f} KiB; "
        f"times are medians of {repeats} forward+backward runs"
    )

    header = (
        f"{'N':>5} {'segments':>8} | {'peak, plain':>12} {'peak, ckpt':>11} "
        f"{'(activations)':>14} {'2*sqrt(N)':>9} | {'time plain':>10} {'time ckpt':>10} "
        f"{'ratio':>6} | {'max grad diff':>13}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    results = []
    for depth in depths:
        layers, params = make_layers(depth, width)
        segments = max(1, round(math.sqrt(depth)))
        peak_plain, t_plain, faults_plain, g_plain = measure(
            lambda h, layers=layers: run_plain(layers, h), params, x, repeats
        )
        peak_ckpt, t_ckpt, faults_ckpt, g_ckpt = measure(
            lambda h, layers=layers, segments=segments: run_checkpoint_sequential(
                layers, h, segments
            ),
            params,
            x,
            repeats,
        )
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(g_plain, g_ckpt, strict=True))
        results.append((depth, peak_plain, peak_ckpt, t_ckpt / t_plain, faults_plain, faults_ckpt))
        print(
            f"{depth:>5} {segments:>8} | {_mib(peak_plain):>12} {_mib(peak_ckpt):>11} "
            f"{peak_plain / activation:>6.0f} -> {peak_ckpt / activation:<5.0f} "
            f"{2 * math.sqrt(depth):>9.0f} | {t_plain * 1e3:>8.1f}ms {t_ckpt * 1e3:>8.1f}ms "
            f"{t_ckpt / t_plain:>5.2f}x | {diff:>13.1e}"
        )

    depth = depths[-1]
    layers, params = make_layers(depth, width)
    block = max(1, round(math.sqrt(depth)))
    peak_blocks, t_blocks, _, g_blocks = measure(
        lambda h: run_checkpoint_blocks(layers, h, block), params, x, repeats
    )
    *_, g_plain = measure(lambda h: run_plain(layers, h), params, x, 1)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(g_plain, g_blocks, strict=True))
    print(
        f"\ncheckpoint(fn, h) around blocks of {block} layers, N = {depth}: peak "
        f"{_mib(peak_blocks)} ({peak_blocks / activation:.0f} activations), "
        f"{t_blocks * 1e3:.1f} ms, max grad diff {diff:.1e}"
    )
    summarize(results)


def summarize(results) -> None:
    """What the table shows, in numbers: growth rates of memory, and the time cost."""
    (n0, plain0, ckpt0, *_), (n1, plain1, ckpt1, _, faults_plain, faults_ckpt) = (
        results[0],
        results[-1],
    )
    growth = n1 / n0
    ratios = [r[3] for r in results]
    print(
        f"\nFrom N = {n0} to N = {n1} ({growth:.0f}x deeper): plain peak memory grew "
        f"{plain1 / plain0:.1f}x (linear: {growth:.0f}x), checkpointed grew "
        f"{ckpt1 / ckpt0:.1f}x (sqrt: {np.sqrt(growth):.0f}x). Gradients are identical."
    )
    print(
        f"Time with checkpointing was {min(ratios):.2f}x-{max(ratios):.2f}x of plain. "
        "Recomputing costs about one extra forward pass."
    )
    if faults_plain or faults_ckpt:  # (none when the allocator reuses freed blocks)
        print(
            f"Memory costs time too: at N = {n1} one plain forward+backward touched "
            f"{faults_plain:.0f} fresh memory pages (page faults), the checkpointed one "
            f"{faults_ckpt:.0f}."
        )


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


if __name__ == "__main__":
    main()
