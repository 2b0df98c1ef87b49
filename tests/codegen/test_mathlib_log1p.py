"""tg_log1p (runtime/mathlib.py) through a compiled kernel: within 2 ulp of the correctly
rounded value in float32 and 1e-14 relative in float64, on dense grids near 0 and far
from it, and exact at the edges (-1, 0, -0, subnormals, huge, +-inf, nan, below -1)."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_helpers import GraphMaker

from tracegrad.codegen import build_kernel

N = 50_000
EDGES = [
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    1e-45,
    -1e-45,
    1e-300,
    1e-30,
    1e-17,
    -1e-17,
    1e-9,
    1e-5,
    -0.5,
    -1.0,
    -1.5,
    -np.inf,
    0.41421356,
    1.0,
    3e38,
    1e300,
    1.7e308,
    np.inf,
    np.nan,
]


def grid(dtype, rng):
    g = np.concatenate(
        [
            rng.uniform(-1.0, 10.0, N // 2),
            np.sign(rng.standard_normal(N // 2)) * np.exp(rng.uniform(-80, 0, N // 2)),
            np.exp(rng.uniform(0, 80, N // 4)),
        ]
    )
    g[: len(EDGES)] = EDGES
    with np.errstate(over="ignore"):
        return g.astype(dtype)


@pytest.fixture(scope="module")
def log1p_kernels():
    kernels = {}
    for dtype in ("float32", "float64"):
        gm = GraphMaker(f"log1p_{dtype}")
        kernel = build_kernel(gm.output(gm.op("log1p", gm.input((N + N // 4,), dtype, "x"))))
        assert "np.log1p" not in kernel.source  # the inline helper, not a libm call
        kernels[dtype] = kernel
    return kernels


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log1p_matches_the_correctly_rounded_value(log1p_kernels, dtype):
    x = grid(dtype, np.random.default_rng(7))
    (got,) = log1p_kernels[dtype](x)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.log1p(x.astype(np.float64)).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    same_special = ~np.isfinite(want) | (want == 0)
    # nan below -1 and at nan, -inf at -1, +inf at +inf, and +-0 with its sign kept
    np.testing.assert_array_equal(got[same_special], want[same_special])
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))
    finite = ~same_special
    if dtype == "float32":
        ulps = np.abs(
            got[finite].view(np.int32).astype(np.int64)
            - want[finite].view(np.int32).astype(np.int64)
        )
        assert ulps.max() <= 2, x[finite][np.argmax(ulps)]
    else:
        rel = np.abs(got[finite] - want[finite]) / np.abs(want[finite])
        assert rel.max() <= 1e-14, x[finite][np.argmax(rel)]
