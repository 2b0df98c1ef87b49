"""Shared helpers for the compiled-mode tests: float64 central differences."""

from __future__ import annotations

import numpy as np


def numeric_grad(f, args, argnum: int, eps: float = 1e-6) -> np.ndarray:
    """d f(*args) / d args[argnum] by float64 central differences (f returns a scalar)."""
    args = [np.array(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    x = args[argnum]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        hi = float(np.asarray(f(*args)))
        x[i] = old - eps
        lo = float(np.asarray(f(*args)))
        x[i] = old
        grad[i] = (hi - lo) / (2 * eps)
    return grad


def assert_close(actual, expected, rtol=1e-6, atol=1e-8, what=""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def assert_memory_flat(
    step, warmup: int, window: int, windows: int = 3, limit_bytes: int = 8 * 1024
) -> None:
    """Run `step` `warmup` times, then in `windows` windows of `window` steps; a leak
    grows memory in every window, while allocator caches (NumPy's small-buffer
    cache, free lists) fill once. So the smallest window's growth must be tiny."""
    import tracemalloc

    tracemalloc.start()
    try:
        for _ in range(warmup):
            step()
        growth = []
        for _ in range(windows):
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(window):
                step()
            growth.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    assert min(growth) < limit_bytes, f"memory grew by {growth} bytes per {window} steps"
