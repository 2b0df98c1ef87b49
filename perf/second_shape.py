"""A second shape of a compiled function (issue 14): time to its first result, and
until its kernel is in use, in fresh processes.

    python perf/second_shape.py            # prints a table; --json for machine-readable output

The function is value_and_grad of the 32-64-64-10 MLP (float32, ReLU, softmax
cross-entropy on integer labels); the first shape has batch 16, the second batch 32.
Each row is a new Python process:
  - "cold, tiered": an empty TRACEGRAD_CACHE_DIR, TRACEGRAD_TIERED unset (its
    default "shapes"): the first shape compiles before returning, the second runs on
    the NumPy interpreter while its kernel is built in the background;
  - "cold, TRACEGRAD_TIERED=0": the same, but the second shape waits for its kernel
    (what every new shape cost before tiering);
  - "warm, tiered": the cache filled by the first row, so both shapes load their
    kernels from disk (no tiering is needed).
For each shape: the first call's time ("first result"), then the process keeps
calling the second shape in a loop (as a training loop would) and records when a call
is first answered by the kernel ("kernel in use", from the start of the first call),
and the median time per call on each tier ("per call"). The kernel's per-call time
must be the same with and without tiering.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import tracegrad as tg
t_import = time.perf_counter() - t0

def loss(w1, b1, w2, b2, w3, b3, x, t):
    h = tg.maximum(x @ w1 + b1, 0.0)
    h = tg.maximum(h @ w2 + b2, 0.0)
    logp = tg.log_softmax(h @ w3 + b3, axis=1)
    return -tg.mean(tg.take_along_axis(logp, t, axis=1))

rng = np.random.default_rng(0)
sizes = (32, 64, 64, 10)
params = []
for a, b in zip(sizes[:-1], sizes[1:]):
    params += [(rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32),
               (rng.standard_normal(b) * 0.1).astype(np.float32)]

def batch(n):
    return (rng.standard_normal((n, 32)).astype(np.float32),
            rng.integers(0, 10, size=(n, 1)))

f = tg.value_and_grad(loss, argnums=tuple(range(6)))

def per_call(args, n=200):
    times = []
    for _ in range(n):
        t = time.perf_counter(); f(*params, *args); times.append(time.perf_counter() - t)
    return float(np.median(times))

out = {"import": t_import}
a = batch(16)
t = time.perf_counter(); f(*params, *a); out["first_shape_first_result"] = time.perf_counter() - t
out["first_shape_stages"] = dict(f.lower(*params, *a).timings)
b = batch(32)
start = time.perf_counter()
f(*params, *b)
out["second_shape_first_result"] = time.perf_counter() - start
out["second_shape_tiered"] = f.tier_info().interpreted_calls > 0
tier_times = []
while True:   # a training loop: call until the kernel answers
    before = f.tier_info().interpreted_calls
    t = time.perf_counter(); f(*params, *b); took = time.perf_counter() - t
    if f.tier_info().interpreted_calls == before:
        out["second_shape_kernel_in_use"] = time.perf_counter() - start
        break
    tier_times.append(took)
    if time.perf_counter() - start > 300:
        raise SystemExit("the kernel never arrived")
out["interpreter_calls_meanwhile"] = len(tier_times)
out["interpreter_per_call"] = float(np.median(tier_times)) if tier_times else None
out["second_shape_stages"] = dict(f.lower(*params, *b).timings)
out["kernel_per_call_second_shape"] = per_call(b)
out["kernel_per_call_first_shape"] = per_call(a)
print("RESULT " + json.dumps(out))
"""


def run_case(cache_dir: str, tiered: str | None) -> dict:
    env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=cache_dir,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    env.pop("TRACEGRAD_TIERED", None)
    if tiered is not None:
        env["TRACEGRAD_TIERED"] = tiered
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"child failed:\n{proc.stdout}\n{proc.stderr}")


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tiered_dir, tempfile.TemporaryDirectory() as plain_dir:
        rows.append(("cold, tiered", run_case(tiered_dir, None)))
        rows.append(("cold, TRACEGRAD_TIERED=0", run_case(plain_dir, "0")))
        rows.append(("warm, tiered", run_case(tiered_dir, None)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if "--json" in sys.argv:
        print(json.dumps({"load": load, "rows": dict(rows)}, indent=1))
        return
    ms = lambda v: "-" if v is None else f"{1e3 * v:.1f} ms"  # noqa: E731
    us = lambda v: "-" if v is None else f"{1e6 * v:.1f} µs"  # noqa: E731
    print(f"32-64-64-10 MLP value_and_grad, float32; batch 16, then 32 (load average {load:.1f})")
    print(
        "| case | 1st shape: first result | 2nd shape: first result | 2nd: kernel in use "
        "| 2nd: interpreter per call | kernel per call (2nd / 1st shape) |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        print(
            f"| {name} | {ms(r['first_shape_first_result'])} | "
            f"{ms(r['second_shape_first_result'])}"
            f"{' (interpreter)' if r['second_shape_tiered'] else ''} | "
            f"{ms(r['second_shape_kernel_in_use'])} | {us(r['interpreter_per_call'])} | "
            f"{us(r['kernel_per_call_second_shape'])} / {us(r['kernel_per_call_first_shape'])} |"
        )
    cold = dict(rows)["cold, tiered"]
    print(
        "\nsecond shape, cold, stages:",
        {k: round(1e3 * v, 1) for k, v in cold["second_shape_stages"].items()},
    )


if __name__ == "__main__":
    main()
