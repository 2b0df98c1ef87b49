"""A batched product read only through a transpose that keeps each matrix's rows
(multi-head attention's (batch, head, t, d) -> (batch, t, head, d) before the heads
merge) is written by its GEMMs straight into the transposed order
(structured._layout_for_transpose): the reshape after it needs no copy.

The source check generates only; the numerics run one small Numba kernel against
the interpreter (float64) and against NumPy by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import _generate

B, H, T, D = 2, 3, 5, 4


def heads_merged(q, k, v, w):
    a = tg.softmax(q @ tg.swapaxes(k, -1, -2), axis=-1)  # (B, H, T, T)
    o = tg.reshape(tg.transpose(a @ v, (0, 2, 1, 3)), (B, T, H * D))
    y = o @ w
    return tg.sum(y * y), o


def _inputs(dtype="float64"):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, T, D)).astype(dtype) for _ in range(3))
    w = rng.standard_normal((H * D, 3)).astype(dtype)
    return q, k, v, w


def test_the_merged_heads_are_not_copied():
    f = tg.value_and_grad(heads_merged, argnums=(0, 1, 2, 3), has_aux=True, backend="interpret")
    source = _generate(f.lower(*_inputs()).optimized, "kernel_heads").source
    # a @ v (B, H, T, D) is written with leading dimension H * D at offset b*T*H*D + h*D
    assert f"{H * D})" in source and "0.0, ws_float64" in source
    merged = [
        line
        for line in source.split("\n")
        if "materialize" in line and f"[{B},{T},{H},{D}]" in line
    ]
    assert merged == [], merged


@pytest.fixture(scope="module")
def compiled():
    return tg.value_and_grad(heads_merged, argnums=(0, 1, 2, 3), has_aux=True, backend="numba")


def test_compiled_matches_the_interpreter(compiled):
    args = _inputs()
    ref = tg.value_and_grad(heads_merged, argnums=(0, 1, 2, 3), has_aux=True, backend="interpret")
    (value, merged), grads = compiled(*args)
    (value_ref, merged_ref), grads_ref = ref(*args)
    np.testing.assert_allclose(value, value_ref, rtol=1e-12)
    np.testing.assert_allclose(merged, merged_ref, rtol=1e-12, atol=1e-14)
    for g, r in zip(grads, grads_ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


def test_compiled_merged_heads_match_numpy(compiled):
    q, k, v, w = _inputs()
    s = q @ k.swapaxes(-1, -2)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)
    (value, merged), grads = compiled(q, k, v, w)
    np.testing.assert_allclose(merged, o, rtol=1e-12)
    np.testing.assert_allclose(value, np.sum((o @ w) ** 2), rtol=1e-12)
    np.testing.assert_allclose(
        grads[3], 2 * o.reshape(-1, H * D).T @ (o @ w).reshape(-1, 3), rtol=1e-10
    )


def test_gradients_match_finite_differences():
    args = _inputs()

    def loss(q, k, v, w):
        return heads_merged(q, k, v, w)[0]

    assert tg.gradcheck(loss, args)
