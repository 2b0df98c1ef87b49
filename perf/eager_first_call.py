"""Eager mode's first float64 sin on 1M values, in fresh processes (issue 14).

    python perf/eager_first_call.py          # a table; --json for machine-readable output

Issue 14's target: eager mode never stalls for a compile it chose on its own; the
first `torch.sin` of 1M float64 values in a fresh process with an empty kernel cache
takes at most 2x NumPy's own `np.sin` in a fresh process. Each row is the median of
`--runs` new Python processes, each timing only its first call (inputs are built
before the clock starts; imports are not timed):
  - NumPy: `np.sin(x)`;
  - tracegrad eager, empty cache: `torch.sin(t)` with a new empty TRACEGRAD_CACHE_DIR;
  - tracegrad eager, warm cache: the same with a cache a previous process filled
    (after its kernels were built).
The ratio column divides by NumPy's median in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
import numpy as np
x = np.random.default_rng(0).standard_normal(1_000_000)
if sys.argv[1] == "numpy":
    t0 = time.perf_counter(); y = np.sin(x); dt = time.perf_counter() - t0
else:
    import tracegrad.eager as torch
    t = torch.tensor(x)
    t0 = time.perf_counter(); y = torch.sin(t).numpy(); dt = time.perf_counter() - t0
    assert np.allclose(y, np.sin(x), rtol=0, atol=1e-14)
    if sys.argv[1] == "fill":  # wait for the background kernels, so the cache is filled
        from tracegrad.runtime import eager_math
        eager_math.kernel("sin", wait=True)
print(dt)
"""


def first_call(kind: str, cache_dir: str) -> float:
    env = {**os.environ, "TRACEGRAD_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind], env=env, check=True, capture_output=True, text=True
    ).stdout
    return float(out.split()[-1])


def measure(runs: int) -> dict:
    rows: dict[str, list[float]] = {"numpy": [], "empty cache": [], "warm cache": []}
    for _ in range(runs):  # interleaved, so drift in the machine's load hits every row
        rows["numpy"].append(first_call("numpy", tempfile.mkdtemp()))
        with tempfile.TemporaryDirectory() as cache:
            rows["empty cache"].append(first_call("fill", cache))
            rows["warm cache"].append(first_call("eager", cache))
    return {k: statistics.median(v) for k, v in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.runs)
    result["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result))
        return
    base = result["numpy"]
    print(
        f"first float64 sin of 1M values, median of {args.runs} fresh processes "
        f"(load {result['load']:.2f})"
    )
    for name in ("numpy", "empty cache", "warm cache"):
        label = name if name == "numpy" else f"tracegrad eager, {name}"
        print(f"  {label:30s} {result[name] * 1e3:8.2f} ms  {result[name] / base:5.2f}x NumPy")


if __name__ == "__main__":
    main()
