"""Does tracegrad's fast math vectorize? 1M float32 values, one core.

For tanh, exp and sin it times:
  - numpy's ufunc (SIMD),
  - a naive njit loop calling np.<fn> (scalar libm: does not vectorize),
  - an njit loop calling tracegrad.runtime.mathlib's helper (tg_<fn>_f32),
and the fused expression `tanh(x)*sin(x) + exp(-x*x)` the same three ways
plus tracegrad's generated kernel for `sum(...)` of it (whatever it picks:
parallel over both cores at this size).

Then the full `elementwise_1M` workload (value and gradient through
`tracegrad.value_and_grad`), serial and parallel, interleaved with the
hand-written NumPy forward+backward in the same run (medians).

    python perf/mathlib_bench.py          # prints a table (ms per 1M values)
    python perf/mathlib_bench.py --vg     # only the value_and_grad comparison
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

N = 1_000_000


def best_ms(fn, number=20, repeat=7) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


def build_module():
    """Naive and mathlib loops, compiled from one real .py file."""
    from tracegrad.runtime import mathlib

    names = mathlib.helpers_used(["tg_tanh_f32(x)", "tg_exp_f32(x)", "tg_sin_f32(x)"])
    helpers = "\n\n".join(
        f"@njit(fastmath=HELPER_FM, error_model='numpy', inline='always')\n{mathlib.FUNCTIONS[n][0]}"
        for n in names
    )
    src = f"""
import numpy as np
from numba import njit
from tracegrad.runtime.intrinsics import {", ".join(mathlib.intrinsics_used([mathlib.FUNCTIONS[n][0] for n in names]))}
FM = {{'nsz', 'arcp', 'contract', 'afn', 'reassoc'}}
HELPER_FM = {mathlib.HELPER_FASTMATH!r}

{helpers}

@njit(fastmath=FM, error_model="numpy")
def naive_tanh(x, out):
    for i in range(x.size):
        out[i] = np.tanh(x[i])

@njit(fastmath=FM, error_model="numpy")
def naive_exp(x, out):
    for i in range(x.size):
        out[i] = np.exp(x[i])

@njit(fastmath=FM, error_model="numpy")
def naive_sin(x, out):
    for i in range(x.size):
        out[i] = np.sin(x[i])

@njit(fastmath=FM, error_model="numpy")
def naive_fused(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = np.tanh(v) * np.sin(v) + np.exp(-v * v)

@njit(fastmath=FM, error_model="numpy")
def fast_tanh(x, out):
    for i in range(x.size):
        out[i] = tg_tanh_f32(x[i])

@njit(fastmath=FM, error_model="numpy")
def fast_exp(x, out):
    for i in range(x.size):
        out[i] = tg_exp_f32(x[i])

@njit(fastmath=FM, error_model="numpy")
def fast_sin(x, out):
    for i in range(x.size):
        out[i] = tg_sin_f32(x[i])

@njit(fastmath=FM, error_model="numpy")
def fast_fused(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = tg_tanh_f32(v) * tg_sin_f32(v) + tg_exp_f32(-v * v)
"""
    d = tempfile.mkdtemp(prefix="tg-mathbench-")
    path = os.path.join(d, "tg_mathlib_bench.py")
    with open(path, "w") as f:
        f.write(src)
    sys.path.insert(0, d)
    import tg_mathlib_bench

    return tg_mathlib_bench


def tracegrad_kernel():
    from tracegrad.codegen import build_kernel
    from tracegrad.ir.graph import Graph
    from tracegrad.ops.core import Aval

    f32 = np.dtype(np.float32)
    g = Graph(name="mathlib_bench")
    x = g.add_input(Aval((N,), f32), "x")
    t = g.new_node("tanh", (x,), {}, x.aval)
    s = g.new_node("sin", (x,), {}, x.aval)
    ts = g.new_node("mul", (t, s), {}, x.aval)
    xx = g.new_node("mul", (x, x), {}, x.aval)
    nx = g.new_node("neg", (xx,), {}, x.aval)
    e = g.new_node("exp", (nx,), {}, x.aval)
    y = g.new_node("add", (ts, e), {}, x.aval)
    g.outputs = [g.new_node("sum", (y,), {"axis": None, "keepdims": False}, Aval((), f32))]
    return build_kernel(g)


def median_ms(fns: dict, rounds: int = 15, number: int = 5) -> dict:
    """Median ms per call of each fn, timed in interleaved rounds (fair under load)."""
    times = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[k].append((time.perf_counter() - t0) / number * 1e3)
    return {k: float(np.median(v)) for k, v in times.items()}


def value_and_grad_rows(dtype: str = "float32") -> dict:
    """elementwise_1M value+gradient: tracegrad serial / parallel vs NumPy."""
    import tracegrad as tg

    x = np.random.default_rng(0).standard_normal(N).astype(dtype)

    def f(x):
        return tg.sum(tg.tanh(x) * tg.sin(x) + tg.exp(-(x**2)))

    def numpy_vg():
        t, s, e = np.tanh(x), np.sin(x), np.exp(-x * x)
        return (t * s + e).sum(), (1 - t * t) * s + t * np.cos(x) - 2 * x * e

    os.environ["TRACEGRAD_PARALLEL"] = "0"
    serial = tg.value_and_grad(f)
    serial(x)
    os.environ["TRACEGRAD_PARALLEL"] = "sync"
    par = tg.value_and_grad(lambda x: f(x) * 1.0)  # a distinct function: its own kernels
    par(x)
    ref_v, ref_g = numpy_vg()
    v, g = serial(x)
    err = float(np.max(np.abs(g - ref_g)))
    return {
        **median_ms(
            {
                "numpy": numpy_vg,
                "tracegrad serial": lambda: serial(x),
                "tracegrad parallel": lambda: par(x),
            }
        ),
        "max |grad - numpy|": err,
    }


def print_value_and_grad() -> None:
    rows = value_and_grad_rows()
    print(
        "\nelementwise_1M float32 value_and_grad, median ms (interleaved): "
        + ", ".join(f"{k} {v:.3f}" if "|" not in k else f"{k} {v:.2g}" for k, v in rows.items())
    )


def main() -> None:
    if "--vg" in sys.argv:
        print_value_and_grad()
        return
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, N).astype(np.float32)
    out = np.empty_like(x)
    m = build_module()
    rows = []
    for fn in ("tanh", "exp", "sin"):
        ufunc = getattr(np, fn)
        rows.append(
            (
                fn,
                best_ms(lambda: ufunc(x, out=out)),  # noqa: B023 - best_ms runs it in this iteration
                best_ms(lambda: getattr(m, f"naive_{fn}")(x, out), number=5),  # noqa: B023 - best_ms runs it in this iteration
                best_ms(lambda: getattr(m, f"fast_{fn}")(x, out)),  # noqa: B023 - best_ms runs it in this iteration
            )
        )
        ref = ufunc(x.astype(np.float64)).astype(np.float32)
        getattr(m, f"fast_{fn}")(x, out)
        ulps = np.max(np.abs(out.astype(np.float64) - ref) / np.spacing(np.abs(ref)))
        rows[-1] += (ulps,)

    def numpy_fused():
        return np.tanh(x) * np.sin(x) + np.exp(-x * x)

    rows.append(
        (
            "tanh*sin+exp fused",
            best_ms(numpy_fused),
            best_ms(lambda: m.naive_fused(x, out), number=5),
            best_ms(lambda: m.fast_fused(x, out)),
            float("nan"),
        )
    )
    os.environ["TRACEGRAD_PARALLEL"] = "0"
    t0 = time.perf_counter()
    k = tracegrad_kernel()
    compile_s = time.perf_counter() - t0
    kernel_ms = best_ms(lambda: k.entry(x))
    os.environ["TRACEGRAD_PARALLEL"] = "sync"  # build the prange variant before timing
    kp = tracegrad_kernel()
    parallel_ms = best_ms(lambda: kp.entry(x)) if kp.parallel_source else float("nan")
    numpy_sum_ms = best_ms(lambda: np.sum(numpy_fused()))

    print(f"float32, {N:,} values, ms per call (best of 7); one core unless noted\n")
    print(
        f"| {'function':<20} | {'numpy ufunc':>11} | {'naive njit loop':>15} | "
        f"{'mathlib loop':>12} | {'max ulp':>7} |"
    )
    print(f"|{'-' * 22}|{'-' * 13}|{'-' * 17}|{'-' * 14}|{'-' * 9}|")
    for name, a, b, c, u in rows:
        print(f"| {name:<20} | {a:>11.3f} | {b:>15.3f} | {c:>12.3f} | {u:>7.2f} |")
    print(
        f"\nsum(tanh(x)*sin(x) + exp(-x*x)): numpy {numpy_sum_ms:.3f} ms, tracegrad kernel "
        f"{kernel_ms:.3f} ms serial (built in {compile_s:.2f} s), {parallel_ms:.3f} ms with "
        "prange on all cores"
    )
    print_value_and_grad()


if __name__ == "__main__":
    main()
