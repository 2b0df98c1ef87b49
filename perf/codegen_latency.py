"""Compile latency of tracegrad's code generator, cold and from the disk cache.

For each workload it runs two fresh Python processes on an empty cache dir:
  1. cold: import tracegrad, then the first value_and_grad call (trace, AD,
     passes, codegen, Numba compile) -- wall and CPU seconds;
  2. warm: the same in a new process that finds the on-disk cache (no Numba
     compile): time from `import tracegrad` finished to the first result.
CPU seconds are shown too: on a busy machine they are the steadier number.

    python perf/codegen_latency.py [workload ...] [--dtype float64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

CHILD = r"""
import json, os, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t0, c0 = time.perf_counter(), cpu()
import tracegrad as tg
t1, c1 = time.perf_counter(), cpu()
sys.path.insert(0, os.path.join(sys.argv[1], "perf"))
from workloads import make_workload
w = make_workload(sys.argv[2], sys.argv[3])
f = tg.value_and_grad(w.tracegrad_fn, argnums=tuple(range(len(w.params))))
t2, c2 = time.perf_counter(), cpu()
value, grads = f(*w.params, *w.data)
t3, c3 = time.perf_counter(), cpu()
print(json.dumps({"import": t1 - t0, "first_call": t3 - t2, "first_call_cpu": c3 - c2,
                  "after_import": t3 - t1}))
"""


def run(workload: str, dtype: str, cache: str) -> dict:
    env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=cache,
        TRACEGRAD_PARALLEL="0",
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD, ROOT, workload, dtype],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "workloads",
        nargs="*",
        default=[
            "seed_scalar",
            "mlp_small_b16",
            "mlp_mnist_b128",
            "elementwise_1M",
            "tanh_chain_d50",
        ],
    )
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    print(
        f"| workload ({args.dtype}) | cold first call s (cpu) | cached: first result after "
        "import, s (cpu) |"
    )
    print("|---|---|---|")
    for name in args.workloads:
        with tempfile.TemporaryDirectory(prefix="tg-latency-") as cache:
            cold = run(name, args.dtype, cache)
            warm = run(name, args.dtype, cache)
        print(
            f"| {name} | {cold['first_call']:.2f} ({cold['first_call_cpu']:.2f}) | "
            f"{warm['after_import']:.3f} ({warm['first_call_cpu']:.3f}) |"
        )


if __name__ == "__main__":
    main()
