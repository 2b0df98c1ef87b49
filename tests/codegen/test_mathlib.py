"""Accuracy of tracegrad.runtime.mathlib, through compiled kernels.

Reference: the correctly rounded value (NumPy in float64, or in float64 then
rounded to float32). float32 results (computed natively in float32) must be
within 2 ulp of it, float64 within 1e-14 relative. Dense grids plus edges: 0, -0,
tiny and subnormal, huge, +-inf, nan; sin/cos also beyond their fast range.
"""

from __future__ import annotations

import numpy as np
import pytest
from codegen_helpers import GraphMaker

from tracegrad.codegen import build_kernel

FUNCTIONS = ["exp", "log", "tanh", "sigmoid", "sin", "cos"]
N = 100_000
EDGES = [
    0.0,
    -0.0,
    1e-45,
    -1e-45,
    5e-324,
    1e-300,
    1e-30,
    1e-9,
    1e-5,
    0.5,
    0.6249,
    0.625,
    1.0,
    -1.0,
    20.0,
    -20.0,
    40.0,
    88.7,
    89.0,
    -103.0,
    -104.0,
    709.7,
    710.0,
    -745.0,
    -746.0,
    1e5,
    999_999.0,
    3e38,
    -3e38,
    1e300,
    np.inf,
    -np.inf,
    np.nan,
]


def reference(name, x):
    x64 = x.astype(np.float64)
    if name == "sigmoid":
        r = np.exp(-np.logaddexp(0.0, -x64))
    else:
        r = getattr(np, name)(x64)
    return r.astype(x.dtype)


def grids(dtype, rng, big_trig):
    def grid(lo, hi):
        g = np.concatenate(
            [
                rng.uniform(lo, hi, N // 2),
                np.sign(rng.standard_normal(N // 2)) * np.exp(rng.uniform(-60, np.log(hi), N // 2)),
            ]
        )
        g[: len(EDGES)] = EDGES
        return g.astype(dtype)

    out = {
        "exp": grid(-800, 800),
        "log": np.abs(grid(1e-30, 1e30)),
        "tanh": grid(-30, 30),
        "sigmoid": grid(-800, 800),
        "sin": grid(-2e4, 2e4),
        "cos": grid(-2e4, 2e4),
    }
    out["log"][: len(EDGES)] = np.array(EDGES, dtype)  # negative, zero, inf, nan too
    if not big_trig:  # keep sin/cos inside the fast range: no libm re-run
        for name in ("sin", "cos"):
            g = out[name]
            g[~(np.abs(g) < 1e6)] = 0.25
    return out


# Kernels of two functions each: a kernel's compile time grows faster than its size
# (all six functions in one kernel: 3.4 s in float32; three kernels of two: 2.4 s)
PAIRS = [FUNCTIONS[k : k + 2] for k in range(0, len(FUNCTIONS), 2)]


@pytest.fixture(scope="module")
def kernels():
    """dtype -> run(*arrays): the FUNCTIONS of the arrays, in that order."""
    built = {}
    for dtype in ("float32", "float64"):
        parts = []
        for names in PAIRS:
            gm = GraphMaker(f"mathlib_{dtype}_{'_'.join(names)}")
            xs = [gm.input((N,), dtype, f"x_{name}") for name in names]
            kernel = build_kernel(
                gm.output(*[gm.op(name, x) for name, x in zip(names, xs, strict=True)])
            )
            assert not kernel.fallback_ids, "mathlib's code, not NumPy's, is under test"
            parts.append(kernel)

        def run(*arrays, _parts=tuple(parts)):
            outs, k = [], 0
            for kernel, names in zip(_parts, PAIRS, strict=True):
                outs += kernel(*arrays[k : k + len(names)])
                k += len(names)
            return tuple(outs)

        built[dtype] = run
    return built


def errors(name, x, got):
    want = reference(name, x)
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{name}: NaN placement differs"
    ok = ~np.isnan(want)
    g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
    same = g == w
    if x.dtype == np.float32:
        err = np.abs(g - w) / np.spacing(np.abs(want[ok])).astype(np.float64)
    else:
        err = np.abs(g - w) / np.maximum(np.abs(w), np.finfo(np.float64).tiny)
    err[same] = 0.0
    return err


@pytest.mark.parametrize("big_trig", [False, True], ids=["fast-range", "with-huge-args"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_accuracy(kernels, dtype, big_trig):
    rng = np.random.default_rng(1)
    xs = grids(np.dtype(dtype), rng, big_trig)
    with np.errstate(all="ignore"):
        outs = kernels[dtype](*[xs[name] for name in FUNCTIONS])
    bound = 2.0 if dtype == "float32" else 1e-14
    for name, got in zip(FUNCTIONS, outs, strict=True):
        err = errors(name, xs[name], got)
        worst = int(np.argmax(err))
        assert err.max() <= bound, (
            f"{name} {dtype}: error {err.max():.3g} at "
            f"x={xs[name][~np.isnan(reference(name, xs[name]))][worst]!r}"
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signed_zero_and_specials(kernels, dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    arrays = [np.resize(x, N).astype(dtype) for _ in FUNCTIONS]
    outs = kernels[dtype](*arrays)
    got = {name: out[:5] for name, out in zip(FUNCTIONS, outs, strict=True)}
    for name in ("tanh", "sin"):  # odd functions keep the sign of zero
        assert np.signbit(got[name][1]) and not np.signbit(got[name][0])
    np.testing.assert_array_equal(got["exp"], [1, 1, np.inf, 0, np.nan])
    np.testing.assert_array_equal(got["log"][[0, 1, 2]], [-np.inf, -np.inf, np.inf])
    assert np.isnan(got["log"][3]) and np.isnan(got["log"][4])
    np.testing.assert_array_equal(got["tanh"][2:4], [1, -1])
    np.testing.assert_array_equal(got["sigmoid"], [0.5, 0.5, 1, 0, np.nan])
    assert np.isnan(got["sin"][2:]).all() and np.isnan(got["cos"][2:]).all()


def test_helpers_vectorize(tmp_path, monkeypatch):
    """The fused loop has no call left: every helper is inlined (so LLVM can
    vectorize it). Checked on the LLVM IR of a small float32 kernel, compiled
    afresh (a kernel loaded from Numba's cache has no IR to inspect)."""
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    gm = GraphMaker("inline_check")
    x = gm.input((64,), "float32", "x")
    graph = gm.output(gm.op("add", gm.op("tanh", x), gm.op("exp", gm.op("sigmoid", x))))
    kernel = build_kernel(graph)
    dispatcher = kernel.module.__dict__[
        next(k for k in kernel.module.__dict__ if k.startswith("kernel_"))
    ]
    ir = dispatcher.inspect_llvm(dispatcher.signatures[0])
    # float32 math runs in float32 lanes (not widened to float64)
    assert "x float>" in ir, "the float32 loop did not vectorize in float32"


@pytest.mark.numba_pass
def test_parallel_variant_with_sin_and_cos(monkeypatch, tmp_path):
    """sin and cos in one prange loop share one range-guard update (a prange
    reduction variable may be updated only once per iteration), and an
    argument beyond the fast range still takes the libm re-run."""
    from tracegrad.codegen.emit import PARALLEL_MIN_ELEMENTS

    monkeypatch.setenv("TRACEGRAD_PARALLEL", "sync")
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    n = PARALLEL_MIN_ELEMENTS
    gm = GraphMaker("trig_parallel")
    x = gm.input((n,), "float32", "x")
    y = gm.input((n,), "float32", "y")
    s = gm.op("add", gm.op("mul", gm.op("sin", x), gm.op("cos", x)), gm.op("sin", y))
    graph = gm.output(s, gm.op("sum", s, axis=None, keepdims=False))
    kernel = build_kernel(graph)
    assert kernel.parallel_source is not None and "prange(" in kernel.parallel_source
    rng = np.random.default_rng(3)
    xv = rng.uniform(-10, 10, n).astype(np.float32)
    yv = rng.uniform(-10, 10, n).astype(np.float32)
    yv[7] = 3e7  # beyond the fast range
    x64, y64 = xv.astype(np.float64), yv.astype(np.float64)
    want = np.sin(x64) * np.cos(x64) + np.sin(y64)
    got, total = kernel(xv, yv)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(total, want.sum(), rtol=1e-5)
