"""One function, two kinds of graph: eager (dynamic) against compiled (static).

`mlp_loss` below is written once, with tracegrad ops. The same code
  - runs on eager tensors: every call records a fresh backward graph, which
    `loss.backward()` walks and then frees (PyTorch's dynamic graph);
  - is traced once into IR, differentiated into one joint forward+backward
    graph, optimized and compiled to a Numba kernel (a static graph).

Run:  python examples/eager_vs_traced.py [--quick] [--out examples/out]
It prints both graphs' sizes, both modes' gradients, the IR at each stage, the
generated kernel and a timing table, and writes both graphs as DOT (and SVG
when Graphviz's `dot` is installed) into the output folder.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

import tracegrad as tg
import tracegrad.eager as eager
from tracegrad.viz import eager_graph, find_dot, ir_graph

PARAM_NAMES = ("w1", "b1", "w2", "b2")


def mlp_loss(w1, b1, w2, b2, x, y):
    """Mean squared error of a one-hidden-layer tanh network."""
    hidden = tg.tanh(x @ w1 + b1)
    prediction = hidden @ w2 + b2
    return tg.mean((prediction - y) ** 2)


def make_problem(batch: int, n_in: int, n_hidden: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return {
        "w1": (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(f32),
        "b1": np.zeros(n_hidden, f32),
        "w2": (rng.standard_normal((n_hidden, 1)) / np.sqrt(n_hidden)).astype(f32),
        "b2": np.zeros(1, f32),
        "x": rng.standard_normal((batch, n_in)).astype(f32),
        "y": rng.standard_normal((batch, 1)).astype(f32),
    }


# ------------------------------------------------------------------ eager
def eager_step(arrays: dict[str, np.ndarray], loss_fn=mlp_loss):
    """One eager call: a new graph is recorded, walked by backward, then freed."""
    params = {k: eager.tensor(arrays[k], requires_grad=True) for k in PARAM_NAMES}
    loss = loss_fn(*params.values(), eager.tensor(arrays["x"]), eager.tensor(arrays["y"]))
    return loss, params


def count_backward_nodes(tensor) -> int:
    """grad_fn nodes behind `tensor` (AccumulateGrad leaves included), walked iteratively."""
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(child for child, _ in node.next_functions)
    return len(seen)


# ------------------------------------------------------------------ output
def heading(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}")


def median_seconds(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def write_drawing(drawing, out_dir: pathlib.Path, stem: str, svg: bool) -> list[str]:
    written = [drawing.render(out_dir / f"{stem}.dot")]
    if svg:
        written.append(drawing.render(out_dir / f"{stem}.svg"))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing calls")
    parser.add_argument(
        "--out",
        default=str(pathlib.Path(__file__).parent / "out"),
        help="folder for the DOT/SVG drawings (default: examples/out)",
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument(
        "--show-ir", action="store_true", help="print the traced, joint and optimized IR graphs"
    )
    parser.add_argument(
        "--show-source", action="store_true", help="print the generated Numba kernel source"
    )
    args = parser.parse_args(argv)
    calls = 20 if args.quick else 300

    arrays = make_problem(args.batch, n_in=8, n_hidden=args.hidden)
    inputs = [arrays[k] for k in (*PARAM_NAMES, "x", "y")]
    print(__doc__.split("\n\n")[0])
    print(f"\nproblem: batch {args.batch}, layers 8 -> {args.hidden} -> 1, float32")

    # --- eager: a dynamic graph, rebuilt on every call -----------------------
    heading("Eager mode: the graph is recorded while the function runs")
    loss, params = eager_step(arrays)
    n_nodes = count_backward_nodes(loss)
    loss_again, _ = eager_step(arrays)
    print(f"loss = {loss}")
    print(
        f"backward graph: {n_nodes} nodes (grad_fn + AccumulateGrad), rooted at "
        f"{loss.grad_fn.name()}"
    )
    fresh = "new objects" if loss_again.grad_fn is not loss.grad_fn else "the SAME objects (?)"
    print(
        f"a second call records the graph again: {count_backward_nodes(loss_again)} nodes, "
        f"{fresh}; backward() then frees its saved tensors"
    )
    eager_drawing = eager_graph(loss, params=params)
    loss.backward()
    eager_grads = [params[k].grad.numpy() for k in PARAM_NAMES]

    # --- compiled: a static graph, traced once -------------------------------
    heading("Compiled mode: traced once per input signature into a static graph")
    value_and_grad = tg.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))
    start = time.perf_counter()
    value, compiled_grads = value_and_grad(*inputs)
    first_call = time.perf_counter() - start
    tiered = value_and_grad.tier_info().interpreted_calls > 0
    lowered = value_and_grad.lower(*inputs)  # (waits for the kernel)
    from_disk = "autodiff" not in lowered.timings  # the cache index skipped the pipeline
    how = (
        "trace + autodiff, then the NumPy interpreter while the kernel builds"
        if tiered
        else ("loaded from the disk cache" if from_disk else "trace + autodiff + compile")
    )
    print(f"loss = {float(value):.6f}   (first call, {how}: {fmt_time(first_call).strip()})")
    for stage in ("traced", "joint", "optimized"):
        print(f"{stage:>9} graph: {len(getattr(lowered, stage).nodes):3d} nodes")
    calls_before = _cache_info(value_and_grad)
    for _ in range(5):
        value_and_grad(*inputs)
    print(f"5 more calls with the same shapes: {_describe_cache(calls_before, value_and_grad)}")
    print(
        f"So: eager records {n_nodes} backward nodes on every call and frees them after "
        f"backward;\ncompiled traced the forward once, differentiated it into one joint "
        f"graph and runs its kernel on every call."
    )

    # --- both: a compiled function called on eager tensors --------------------
    compiled_loss = tg.compile(mlp_loss)
    mixed_loss, mixed_params = eager_step(arrays, compiled_loss)
    print(
        f"Both at once: tracegrad.compile(mlp_loss) on eager tensors gives one "
        f"{mixed_loss.grad_fn.name()} node ({count_backward_nodes(mixed_loss)} nodes with the "
        f"leaves)."
    )
    mixed_drawing = eager_graph(mixed_loss, params=mixed_params)

    heading("Gradients from both modes")
    worst = 0.0
    for name, ge, gc in zip(PARAM_NAMES, eager_grads, compiled_grads, strict=True):
        diff = float(np.max(np.abs(ge - np.asarray(gc))))
        worst = max(worst, diff)
        if args.show_ir:
            print(f"d loss / d {name}  ({ge.dtype}, shape {ge.shape})")
            print(f"  eager     {_preview(ge)}")
            print(f"  compiled  {_preview(gc)}   max |diff| = {diff:.2e}")
    print(f"max |eager - compiled| over all gradients: {worst:.2e} (float32)")
    mixed_loss.backward()
    mixed_diff = max(
        float(np.max(np.abs(mixed_params[k].grad.numpy() - g)))
        for k, g in zip(PARAM_NAMES, eager_grads, strict=True)
    )
    print(
        f"max |eager - compile(mlp_loss) on eager tensors|: {mixed_diff:.2e} "
        f"(.grad filled by CompiledFunctionBackward)"
    )

    if args.show_ir:
        heading("IR before AD (traced forward graph)")
        print(lowered.traced)
        heading("IR after AD (joint forward + backward graph)")
        print(lowered.joint)
        heading("IR after optimization (simplified, fused)")
        print(lowered.optimized)
    if args.show_source:
        heading(f"Generated kernel source ({lowered.source_path})")
        print(lowered.source)

    heading(f"Timing: median over {calls} calls (value and gradients of all 4 parameters)")

    def eager_call():
        loss, _ = eager_step(arrays)
        loss.backward()

    t_eager = median_seconds(eager_call, calls)
    t_compiled = median_seconds(lambda: value_and_grad(*inputs), calls)
    print(f"{'mode':<10}{'first call':>14}{'median per call':>18}")
    print(f"{'eager':<10}{'-':>14}{fmt_time(t_eager):>18}")
    print(f"{'compiled':<10}{fmt_time(first_call):>14}{fmt_time(t_compiled):>18}")
    print(
        f"compiled is {t_eager / t_compiled:.1f}x faster per call; the first call pays "
        f"for tracing and compiling (and is cached on disk for the next process)"
    )

    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stage in ("traced", "joint", "optimized"):
        (out_dir / f"ir_{stage}.txt").write_text(str(getattr(lowered, stage)) + "\n")
    (out_dir / "kernel.py").write_text(lowered.source or "")
    svg = find_dot() is not None
    written = write_drawing(eager_drawing, out_dir, "eager_backward_graph", svg)
    written += write_drawing(mixed_drawing, out_dir, "eager_graph_of_compiled_function", svg)
    for stage in ("traced", "joint", "optimized"):
        graph = getattr(lowered, stage)
        names = ["loss"] if stage == "traced" else ["loss"] + [f"grad {k}" for k in PARAM_NAMES]
        drawing = ir_graph(graph, output_names=names)
        written += write_drawing(drawing, out_dir, f"ir_{stage}", svg)
    print(
        f"\nwrote {len(written)} drawings, the IR of each stage (ir_*.txt) and the kernel "
        f"(kernel.py) to {out_dir}\n(--show-ir and --show-source print them here)"
    )
    if not svg:
        print(
            "(Graphviz's `dot` is not installed, so the drawings are DOT files: "
            "apt-get install graphviz to get SVGs)"
        )


def _preview(values, n: int = 4) -> str:
    flat = np.asarray(values).ravel()
    head = ", ".join(f"{v:+.5f}" for v in flat[:n])
    return f"[{head}{', ...' if flat.size > n else ''}]"


def _cache_info(fn):
    info = getattr(fn, "cache_info", None)
    return info() if info is not None else None


def _describe_cache(before, fn) -> str:
    after = _cache_info(fn)
    if before is None or after is None:
        return "no cache statistics available"
    return (
        f"traces {before.traces} -> {after.traces}, cache hits {before.hits} -> {after.hits} "
        f"(no retracing: the static graph is reused)"
    )


if __name__ == "__main__":
    main()
