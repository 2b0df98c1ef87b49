"""Linalg code generation: Numba's native np.linalg, or NumPy between njit segments?

A 256x256 Cholesky plus a solve (the GP likelihood's core), float64, one core:

  numpy       plain NumPy/SciPy calls (the floor)
  fallback    tracegrad's compiled kernel: cholesky/solve run their NumPy/LAPACK impl
              from the kernel's Python driver, between njit segments (what tracegrad does)
  native      what emitting Numba's own np.linalg.cholesky/np.linalg.solve inside the
              njit kernel would give (hand-written njit function, same work)

Prints the time per call (median of interleaved rounds) and the first-call (compile) time of each.
Run: python perf/linalg_codegen_bench.py

Measured 2026-12-03 on the shared 2-core machine at load 8.5-9.9 (noisy; three runs,
OPENBLAS_NUM_THREADS=1, fresh caches, TRACEGRAD_TIERED=0):

  per call    numpy 4.9-5.9 ms   fallback 5.9-7.2 ms   native 4.1-4.9 ms
  first call  numpy 0.01 s       fallback 0.8-2.1 s    native 26-28 s

Native LAPACK inside njit is 15-30% faster per call than the fallback here (the
fallback pays cholesky's (A + A^T)/2 and a Python call per node), but its first call
costs 26-28 s of Numba compile (and a SciPy import) against 1-2 s, and Numba has no
triangular solve at all (a GP likelihood would still run those in NumPy). So the
linalg primitives run their NumPy impl between njit segments.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))


def _times_ms(fns: dict, args, rounds: int = 15, calls: int = 20) -> dict:
    """Median (over rounds) of the mean time per call; the variants take turns, so a
    busy shared machine slows them alike."""
    per = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(*args)
            per[name].append((time.perf_counter() - t0) / calls)
    return {f"{name} ms": 1e3 * statistics.median(ts) for name, ts in per.items()}


def _first_call_s(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main(n: int = 256) -> dict:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    b = rng.standard_normal((n, 1))

    def numpy_version(a, b):
        low = np.linalg.cholesky(a)
        return np.sum(low), np.linalg.solve(a, b)

    import tracegrad as tg

    def traced(a, b):
        low = np.linalg.cholesky(a)
        return np.sum(low), np.linalg.solve(a, b)

    compiled = tg.compile(traced)

    from numba import njit

    @njit(cache=False, nogil=True)
    def native(a, b):
        low = np.linalg.cholesky(a)
        return np.sum(low), np.linalg.solve(a, b)

    results = {"numpy first call s": _first_call_s(numpy_version, a, b),
               "fallback first call s": _first_call_s(compiled, a, b),
               "native first call s": _first_call_s(native, a, b)}
    results.update(_times_ms({"numpy": numpy_version, "fallback": compiled, "native": native},
                             (a, b)))
    ref = numpy_version(a, b)
    for fn in (compiled, native):
        got = fn(a, b)
        assert np.allclose(got[0], ref[0]) and np.allclose(got[1], ref[1])
    return results


if __name__ == "__main__":
    for key, value in main().items():
        print(f"{key:24s} {value:8.3f}")
