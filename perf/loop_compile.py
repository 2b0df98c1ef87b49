"""Compile time against loop length: `tg.scan` vs a plain Python loop (issue 12).

Each case runs in a fresh process with an empty kernel cache and reports the
time to the first value-and-gradient result (Numba's import included), the
peak memory of the process, and the generated source's length:

    python perf/loop_compile.py                   # 10, 100, 500, 1000 steps -> perf/loops.md
    python perf/loop_compile.py --steps 10,100    # a quicker subset

The loop is the issue's `h = tanh(h * w + b)` on 64 float32 values, loss sum(h).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np, tracegrad as tg
form, n = sys.argv[1], int(sys.argv[2])
if form == "unrolled, no reroll":
    import tracegrad.passes.loops
    tracegrad.passes.loops.MIN_STEPS = 10 ** 9

def unrolled(h, w, b):
    for _ in range(n):
        h = tg.tanh(h * w + b)
    return tg.sum(h)

def scanned(h, w, b):
    h, _ = tg.scan(lambda h, _: (tg.tanh(h * w + b), None), h, None, length=n)
    return tg.sum(h)

h = np.ones(64, np.float32); w = np.full(64, 0.5, np.float32); b = np.full(64, 0.1, np.float32)
f = tg.value_and_grad(scanned if form == "scan" else unrolled, argnums=(0, 1, 2))
value, grads = f(h, w, b)
first = time.perf_counter() - t0
lowered = f.lower(h, w, b)
ref = h.astype(np.float64)
for _ in range(n):
    ref = np.tanh(ref * w + b)
print(json.dumps({"form": form, "steps": n, "first_s": first,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "source_lines": len(lowered.source.splitlines()),
                  "graph_nodes": len(lowered.optimized.nodes),
                  "value_error": abs(float(value) - float(ref.sum()))}))
"""


def measure(form: str, steps: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(
            os.environ,
            TRACEGRAD_CACHE_DIR=cache,
            PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, form, str(steps)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"form": form, "steps": steps, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"form": form, "steps": steps, "error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    lines = [
        "| form | steps | first result (s) | peak memory (MB) | generated lines | "
        "optimized graph nodes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['form']} | {r['steps']} | {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['form']} | {r['steps']} | {r['first_s']:.2f} | {r['peak_mb']:.0f} | "
            f"{r['source_lines']} | {r['graph_nodes']} |"
        )
    return "\n".join(lines)


def _plot(rows: list[dict], path: pathlib.Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for form in ("scan", "unrolled", "unrolled, no reroll"):
        pts = [(r["steps"], r["first_s"]) for r in rows if r["form"] == form and "error" not in r]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=form)
    ax.set_xscale("log")
    ax.set_xlabel("loop steps")
    ax.set_ylabel("time to first result (s), fresh process")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", default="10,100,500,1000")
    p.add_argument(
        "--no-reroll-steps",
        default="10,100,500",
        help="lengths to also run unrolled with rerolling switched off",
    )
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--out", default=str(ROOT / "perf" / "loops.md"))
    args = p.parse_args()
    rows = []
    no_reroll = {int(s) for s in args.no_reroll_steps.split(",") if s}
    for n in [int(s) for s in args.steps.split(",")]:
        for form in ("scan", "unrolled", "unrolled, no reroll"):
            if form == "unrolled, no reroll" and n not in no_reroll:
                continue
            r = measure(form, n, args.timeout)
            rows.append(r)
            print(json.dumps(r), flush=True)
    plot = _plot(rows, pathlib.Path(args.out).with_name("loop_compile.png"))
    text = (
        "# Compile time against loop length\n\n"
        "Made by `python perf/loop_compile.py`: each row is a fresh process with an empty "
        "kernel cache, timed from before `import tracegrad` to the first value-and-gradient "
        "result of `h = tanh(h * w + b)` (64 float32 values, loss sum(h)), written as "
        "`tg.scan` or as a plain Python loop (which tracegrad rerolls into a scan when "
        "it finds 16 or more identical steps; the last form switches that off).\n\n"
        + table(rows)
        + "\n"
        + (f"\n![compile time against loop length]({plot.name})\n" if plot else "")
    )
    pathlib.Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
