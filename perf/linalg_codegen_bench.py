"""Linalg code generation: LAPACK inside the kernel, NumPy between segments, or Numba's np.linalg?

A 256x256 Cholesky and a solve with the factor (two triangular solves, as a GP
likelihood does), float64, one BLAS thread:

  numpy     plain NumPy/SciPy calls (np.linalg.cholesky, scipy solve_triangular)
  emitted   tracegrad's compiled kernel now: potrf and trsm of NumPy's OpenBLAS
            called inside the one njit function (codegen/linalg_emit.py)
  fallback  the same graph with those emitters off (tracegrad before them): the
            NumPy/SciPy impl runs from a Python driver between njit segments
  native    (--native only: ~30 s of compile) Numba's own np.linalg.cholesky and
            np.linalg.solve inside a hand-written njit function; Numba has no
            triangular solve, so it solves with the matrix, not the factor

Prints the time per call (median of interleaved rounds) and the first call
(trace + codegen + Numba compile, fresh kernel cache) of each.
Run: python perf/linalg_codegen_bench.py [--native]

Measured 2026-12-03 08:02 UTC on the shared 2-core machine, load 5.2-5.4 (busy:
wall times are ~2x an idle machine's), two runs:

  per call    numpy 2.2-2.5 ms   emitted 1.8-2.0 ms   fallback 3.1-3.8 ms
  first call  emitted 1.5 s      fallback 0.54-0.65 s  (Numba warmed up before both)

The emitted kernel compiles ~0.9 s longer here than the fallback, whose only njit
code is the sum: loops and LAPACK calls cost Numba time. On the GP likelihood
(perf/gp_nll_workload.py), where the fallback cut the kernel into 6 segments, the
one emitted kernel compiles faster (3.5 s CPU against 4.2-4.7 s).

Before the emitters (an older version of this script: cholesky + np.linalg.solve,
load 8.5-9.9):

  per call    numpy 4.9-5.9 ms   fallback 5.9-7.2 ms   native 4.1-4.9 ms
  first call  numpy 0.01 s       fallback 0.8-2.1 s    native 26-28 s

So LAPACK is called from the kernel through symbols bound by name
(runtime/lapack.py), never through Numba's np.linalg (26-28 s of compile).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-linalg-bench-"))
os.environ.setdefault("TRACEGRAD_TIERED", "0")  # the first call waits for the real kernel
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


def _cho_solve(a, b):
    """The factor's sum and a solve with it; NumPy-style, traces under tracegrad."""
    import tracegrad as tg

    low = np.linalg.cholesky(a)
    z = tg.linalg.solve_triangular(low, b, lower=True)
    return np.sum(low), tg.linalg.solve_triangular(low, z, lower=True, trans=1)


def main(n: int = 256, native: bool = False) -> dict:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    b = rng.standard_normal((n, 1))

    import scipy.linalg as sla

    import tracegrad as tg
    from tracegrad.runtime import lapack

    def numpy_version(a, b):
        low = np.linalg.cholesky(a)
        z = sla.solve_triangular(low, b, lower=True, check_finite=False)
        return np.sum(low), sla.solve_triangular(low, z, lower=True, trans=1, check_finite=False)

    emitted = tg.compile(_cho_solve)

    def cho_solve_fallback(a, b):
        return _cho_solve(a, b)

    fallback = tg.compile(cho_solve_fallback)
    fns = {"numpy": numpy_version, "emitted": emitted, "fallback": fallback}
    tg.compile(lambda x: np.sum(x * 2.0))(a)  # Numba's one-time warm-up, paid by neither
    results = {
        "numpy first call s": _first_call_s(numpy_version, a, b),
        "emitted first call s": _first_call_s(emitted, a, b),
    }
    saved, lapack.AVAILABLE = lapack.AVAILABLE, False
    try:
        results["fallback first call s"] = _first_call_s(fallback, a, b)
    finally:
        lapack.AVAILABLE = saved
    assert "tg_potrf(" in emitted.lower(a, b).source
    assert "tg_potrf(" not in fallback.lower(a, b).source

    if native:
        from numba import njit

        @njit(cache=False, nogil=True)
        def native_fn(a, b):
            low = np.linalg.cholesky(a)
            return np.sum(low), np.linalg.solve(a, b)

        results["native first call s"] = _first_call_s(native_fn, a, b)
        fns["native"] = native_fn

    results.update(_times_ms(fns, (a, b)))
    ref = numpy_version(a, b)
    for name, fn in fns.items():
        got = fn(a, b)
        assert np.allclose(got[0], ref[0]) and np.allclose(got[1], ref[1]), name
    return results


if __name__ == "__main__":
    for key, value in main(native="--native" in sys.argv).items():
        print(f"{key:24s} {value:8.3f}")
