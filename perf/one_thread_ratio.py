"""tracegrad compiled vs jax.jit on ONE thread each, CPU time per call, in one process.

On a shared, busy machine wall-clock ratios between systems are mostly noise. CPU
time of single-threaded runs, alternated in one process, is far less sensitive to
other processes (perf/gemm_profile.md). Run it with one BLAS / XLA thread, pinned:

    OPENBLAS_NUM_THREADS=1 \
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
    taskset -c 1 python perf/one_thread_ratio.py lstm_scan_t20,mlp_mnist_b128 [--off]

`--off` turns off the issue-14 GEMM call-site changes (the concatenate rewrite of
tiled scatters, the small A @ B.T re-layout) to measure what they bring.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def cpu_median(fn, budget: float = 1.5) -> float:
    """Median CPU seconds of fn() over about `budget` seconds (at least 5 calls)."""
    times, end = [], time.perf_counter() + budget
    while time.perf_counter() < end or len(times) < 5:
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", help="comma-separated names from perf/workloads.py")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--off", action="store_true", help="GEMM call-site changes off")
    opts = parser.parse_args()

    import jax
    import jax.numpy as jnp

    import tracegrad as tg
    from perf.workloads import make_workload
    from tracegrad.codegen import index, structured
    from tracegrad.passes import fuse

    index.pipeline_hash = lambda: ""  # no kernel index: generate with the switches below
    if opts.off:
        structured.NT_RELAYOUT_MAX_MNK = 0
        fuse.concat_tiled_scatters = lambda graph: graph
    jax.config.update("jax_enable_x64", True)
    for name in opts.workloads.split(","):
        for dtype in opts.dtypes.split(","):
            w = make_workload(name, dtype)
            argnums = tuple(range(len(w.params)))
            args = list(w.params) + list(w.data)
            f = tg.value_and_grad(w.tracegrad_fn, argnums=argnums)
            f(*args)
            jf = jax.jit(jax.value_and_grad(w.jax_fn, argnums=argnums))
            peer = w.peer_data(w.data) if w.peer_data else w.data
            jargs = [jnp.asarray(a) for a in list(w.params) + list(peer)]
            jax.block_until_ready(jf(*jargs))
            ours, theirs = [], []
            for _ in range(3):  # alternate, so a burst of load hits both
                ours.append(cpu_median(lambda f=f, args=args: f(*args)))
                theirs.append(
                    cpu_median(lambda jf=jf, jargs=jargs: jax.block_until_ready(jf(*jargs)))
                )
            t, j = np.median(ours), np.median(theirs)
            print(
                f"{'off' if opts.off else 'on':3s} {name:16s} {dtype}  tracegrad {t * 1e3:8.3f} ms"
                f"  jax {j * 1e3:8.3f} ms  ratio {t / j:5.2f}",
                flush=True,
            )
    with open("/proc/loadavg") as fh:
        print("load:", fh.read().strip())


if __name__ == "__main__":
    main()
