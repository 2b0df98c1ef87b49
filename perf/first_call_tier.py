"""The interpreter tier against the kernel it stands in for, on every perf/ workload.

    python perf/first_call_tier.py                 # float32, a table
    python perf/first_call_tier.py --dtype float64 --json

For each workload's value-and-grad: the optimized graph's interpreter cost estimate
(`tracegrad.compiler.interpreter_cost`, what the first-call tier decides on), the
NumPy interpreter's time per call on that graph (the first call's result on the tier)
and the Numba kernel's (cache hit or compile, not timed), both medians in the same
process, and their ratio. Absolute times need an idle machine; the ratio is the
number to read on a busy one.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _per_call(call, budget: float = 0.5, most: int = 20) -> float:
    call()  # warm-up (first-use imports, BLAS threads)
    times = []
    start = time.perf_counter()
    while len(times) < most and (len(times) < 3 or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(names, dtype: str = "float32", log=print) -> list[dict]:
    import tracegrad as tg
    from perf.workloads import make_workload
    from tracegrad.compiler import interpreter_cost

    rows = []
    for name in names:
        w = make_workload(name, dtype)
        args = [p.copy() for p in w.params] + [d.copy() for d in w.data]
        argnums = tuple(range(len(w.params)))
        row = {"workload": name, "dtype": dtype}
        try:
            interp = tg.value_and_grad(w.tracegrad_fn, argnums=argnums, backend="interpret")
            lowered = interp.lower(*args)
            row["cost"] = interpreter_cost(lowered.optimized)
            row["nodes"] = len(lowered.optimized.nodes)
            kernel = tg.value_and_grad(w.tracegrad_fn, argnums=argnums, backend="numba")
            kernel.lower(*args)  # the kernel, not its interpreter tier
            # twice each, alternating, so load changes hit both alike
            for key, fn in (("interpreter_s", interp), ("kernel_s", kernel)) * 2:
                t = _per_call(functools.partial(fn, *args))
                row[key] = min(row.get(key, t), t)
            row["ratio"] = row["interpreter_s"] / row["kernel_s"]
        except Exception as exc:  # a workload missing here (gp without scipy...)
            row["status"] = f"{type(exc).__name__}: {exc}"[:200]
        log(row)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    import argparse

    from perf.workloads import WORKLOAD_NAMES

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--workloads", default="", help="comma list (default: every workload)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n] or list(WORKLOAD_NAMES)
    rows = measure(names, args.dtype, log=lambda r: None if args.json else print(r, flush=True))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"\n{'workload':22s} {'cost':>8s} {'interpreter':>12s} {'kernel':>10s} {'ratio':>7s}")
    for r in rows:
        if "ratio" not in r:
            print(f"{r['workload']:22s} {r.get('status', '')}")
            continue
        print(
            f"{r['workload']:22s} {r['cost']:8.0f} {r['interpreter_s'] * 1e3:9.2f} ms "
            f"{r['kernel_s'] * 1e3:7.2f} ms {r['ratio']:6.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
