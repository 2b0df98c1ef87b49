"""Large float64 sin/cos in the NumPy impls run codegen's vectorized kernels (NumPy's
are scalar libm loops, ~8x slower), with NumPy's own results wherever the kernel's
range ends (huge, inf, nan) and NumPy's warnings."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tracegrad.eager as torch
from tracegrad.ops import parallel
from tracegrad.ops import table as T
from tracegrad.runtime import eager_math

N = parallel.MIN_PARALLEL + 1001  # above the threshold, not a round number


@pytest.fixture(autouse=True, scope="module")
def kernels_loaded():
    """Eager math loads its kernels in the background; these tests check the kernels."""
    eager_math.kernel("sin", wait=True)


@pytest.fixture
def x():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(N) * np.logspace(-300, 5, N)  # tiny to large, both signs
    return v


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_kernel_matches_numpy_to_a_few_ulp(x, name):
    got = getattr(T, name).impl(x)
    want = getattr(np, name)(x)
    assert eager_math.kernel(name, wait=True) is not None, "the kernel did not load"
    assert got.dtype == np.float64 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=2e-16)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan, 3e7])
def test_arguments_beyond_the_range_give_numpys_results_and_warnings(x, bad):
    x[17] = bad
    with warnings.catch_warnings(record=True) as got_warnings:
        warnings.simplefilter("always")
        got = T.sin.impl(x)
    with warnings.catch_warnings(record=True) as want_warnings:
        warnings.simplefilter("always")
        want = np.sin(x)
    np.testing.assert_array_equal(got, want)
    assert [str(w.message) for w in got_warnings] == [str(w.message) for w in want_warnings]


def test_strided_and_float32_inputs_take_numpy(x):
    np.testing.assert_array_equal(T.sin.impl(x[::2]), np.sin(x[::2]))
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(T.cos.impl(x32), np.cos(x32))


def test_eager_sin_gradient_uses_the_fast_cos(x):
    t = torch.tensor(x[:N], requires_grad=True)
    torch.sin(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.cos(x), rtol=4e-16, atol=2e-16)


def test_switch_off_and_no_numba_at_import():
    code = (
        "import sys, numpy as np, tracegrad.eager as torch\n"
        "from tracegrad.ops import table as T\n"
        "assert 'numba' not in sys.modules\n"
        "x = np.linspace(-3, 3, 300000)\n"
        "assert (T.sin.impl(x) == np.sin(x)).all()\n"
        "assert 'numba' not in sys.modules\n"
    )
    env = dict(os.environ, TRACEGRAD_EAGER_NUMBA="0")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_vjps_match_the_table_op_formulas(dtype):
    rng = np.random.default_rng(1)
    g = rng.standard_normal(N).astype(dtype)
    x = (rng.standard_normal(N) * 3).astype(dtype)
    y = np.tanh(x)
    fused_tanh = parallel.fused_vjp("tanh_backward", g, y)
    fused_sin = parallel.fused_vjp("sin_backward", g, x)
    assert fused_tanh is not None and fused_sin is not None
    tol = dict(rtol=4e-7, atol=4e-7) if dtype == "float32" else dict(rtol=4e-16, atol=4e-16)
    np.testing.assert_allclose(fused_tanh, g * (1 - y * y), **tol)
    np.testing.assert_allclose(fused_sin, g * np.cos(x), **tol)
    assert fused_tanh.dtype == np.dtype(dtype)
    # the rules themselves, through eager backward
    t = torch.tensor(x, requires_grad=True)
    (torch.tanh(t) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), g * (1 - y * y), **tol)


def test_fused_vjps_fall_back_where_they_do_not_apply():
    g = np.ones(N)
    assert parallel.fused_vjp("tanh_backward", g[:100], g[:100]) is None  # small
    assert parallel.fused_vjp("tanh_backward", g, g.astype(np.float32)) is None  # mixed
    assert parallel.fused_vjp("tanh_backward", g[::2], g[::2]) is None  # strided
    x = np.linspace(-1, 1, N)
    x[3] = 5e7  # beyond the fast cos range: the rule computes g * cos(x) with NumPy
    assert parallel.fused_vjp("sin_backward", g, x) is None
    np.testing.assert_array_equal(T.sin.vjps[0](g, None, x), np.cos(x))


def test_first_large_sin_does_not_wait_for_the_kernels(monkeypatch, x):
    """Issue 14: eager mode never stalls for a compile it chose on its own. While the
    loader is (held) busy, the call runs NumPy's sin and returns."""
    import threading

    release = threading.Event()
    monkeypatch.setattr(eager_math, "_KERNELS", {})
    monkeypatch.setattr(eager_math, "_LOADED", threading.Event())
    monkeypatch.setattr(eager_math, "_loader", None)
    real_load = eager_math._load

    def slow_load():
        release.wait(30)
        real_load()

    monkeypatch.setattr(eager_math, "_load", slow_load)
    try:
        got = T.sin.impl(x)  # returns although the loader has not finished
        assert eager_math._loader is not None  # ...which that call started, after NumPy's answer
        assert not eager_math._LOADED.is_set()
        np.testing.assert_array_equal(got, np.sin(x))
    finally:
        release.set()
    assert eager_math.kernel("sin", wait=True) is not None
