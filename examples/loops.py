"""Loops: a Python loop unrolls into a static graph; `tracegrad.scan` does not.

1. A dynamic graph (eager mode) records one node per operation as the loop
   runs: a 100-step RNN leaves 100 steps of nodes behind, however it is written.
2. A static graph traced from a plain Python loop is unrolled the same way: the
   graph, the generated kernel and the compile time grow with the trip count.
3. `tg.scan` traces the step once into a sub-graph held by one `scan` node: the
   graph and the generated source stay the same size for 10 or 1,000 steps,
   and its gradient (one reversed scan over the step's VJP) equals eager's.
4. `tg.cond` branches on data inside a static graph, and only the taken branch
   runs and is differentiated (no `where`/`sqrt` NaN trap).

Drawings of both IR graphs (DOT, and SVG where Graphviz is installed) go to
examples/out/ (or --out).

Run:  python examples/loops.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

import tracegrad as tg
import tracegrad.eager as eager
from tracegrad.viz import ir_graph


def heading(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}")


def rnn_unrolled(h, W, U, xs):
    for t in range(xs.shape[0]):
        h = tg.tanh(h @ W + xs[t] @ U)
    return tg.sum(h * h)


def rnn_scan(h, W, U, xs):
    def step(h, x):
        return tg.tanh(h @ W + x @ U), None

    h, _ = tg.scan(step, h, xs)
    return tg.sum(h * h)


def eager_nodes(loss) -> int:
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(n for n, _ in node.next_functions)
    return len(seen)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    B, H = 4, 8
    W = (0.3 * rng.standard_normal((H, H))).astype(np.float32)
    U = (0.3 * rng.standard_normal((H, H))).astype(np.float32)
    h0 = np.zeros((B, H), np.float32)
    lengths = (5, 20) if args.quick else (10, 100)

    heading("1. Eager mode: the dynamic graph grows with the loop")
    for n in lengths:
        xs = rng.standard_normal((n, B, H)).astype(np.float32)
        params = [eager.tensor(W, requires_grad=True), eager.tensor(U, requires_grad=True)]
        loss = rnn_scan(eager.tensor(h0), params[0], params[1], eager.tensor(xs))
        print(f"  {n:5d} steps: {eager_nodes(loss):5d} backward nodes recorded")

    heading("2-3. Static graphs: unrolled Python loop vs tg.scan")
    print(
        f"  {'steps':>5}  {'unrolled nodes':>14} {'kernel lines':>12}   "
        f"{'scan nodes':>10} {'kernel lines':>12}"
    )
    grads = {}
    for n in lengths:
        xs = rng.standard_normal((n, B, H)).astype(np.float32)
        row = [f"  {n:5d}"]
        for name, fn in (("unrolled", rnn_unrolled), ("scan", rnn_scan)):
            f = tg.value_and_grad(fn, argnums=(1, 2))
            t0 = time.perf_counter()
            value, g = f(h0, W, U, xs)
            first = time.perf_counter() - t0
            lowered = f.lower(h0, W, U, xs)
            grads[name, n] = (value, g)
            row.append(
                f"{len(lowered.optimized.nodes):>14} {len(lowered.source.splitlines()):>12}"
                f" ({first:5.2f} s)"
            )
            if n == lengths[-1]:
                drawing = ir_graph(lowered.optimized)
                path = out_dir / f"loops_{name}_joint.dot"
                path.write_text(drawing.to_dot())
                try:
                    drawing.render(str(path.with_suffix(".svg")))
                except Exception:  # Graphviz not installed: the DOT file is there
                    pass
        print("  ".join(row))
    n = lengths[-1]
    (vu, gu), (vs, gs) = grads["unrolled", n], grads["scan", n]
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(gu, gs, strict=True))
    print(f"\n  value unrolled {float(vu):.6f}, scan {float(vs):.6f}")
    print(f"  max |unrolled - scan| over gradients: {diff:.2e}")
    xs = rng.standard_normal((n, B, H)).astype(np.float32)
    tW, tU = eager.tensor(W, requires_grad=True), eager.tensor(U, requires_grad=True)
    rnn_scan(eager.tensor(h0), tW, tU, eager.tensor(xs)).backward()
    _, (cW, cU) = tg.value_and_grad(rnn_scan, argnums=(1, 2))(h0, W, U, xs)
    diff_eager = max(
        float(np.max(np.abs(cW - tW.grad.numpy()))), float(np.max(np.abs(cU - tU.grad.numpy())))
    )
    print(f"  max |scan compiled - eager| over gradients: {diff_eager:.2e}")
    print(f"  drawings: {out_dir}/loops_unrolled_joint.dot, {out_dir}/loops_scan_joint.dot")

    heading("4. tg.cond: a data-dependent branch in a static graph")

    def f(x):
        return tg.cond(x > 0, tg.sqrt, lambda x: x * 0.0, x)

    def naive(x):
        return tg.where(x > 0, tg.sqrt(x), x * 0.0)

    for x in (4.0, -4.0):
        print(
            f"  x = {x:5.1f}: cond gradient {float(tg.grad(f)(x)):.4f}, "
            f"naive where gradient {float(tg.grad(naive)(x)):.4f}"
        )
    print("\nThe traced scan body (printed nested, as a jaxpr is):")
    print(tg.value_and_grad(rnn_scan, argnums=(1, 2)).lower(h0, W, U, xs[:3]).traced)


if __name__ == "__main__":
    main()
