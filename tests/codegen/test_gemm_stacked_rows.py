"""A batched x @ W whose batch elements' rows follow one another in memory (and W is
shared) is one GEMM with M = batch * m (codegen/structured.py, _stacked_rows); a batch
that is not laid out so keeps its loop. Attention heads, views whose rows are longer
than the matrix, are read in place with that leading dimension. Values and gradients
equal the interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg


def products(a, big, w, y3, q, k):
    qh = np.transpose(q.reshape(2, 5, 3, 4), (0, 2, 1, 3))  # (batch, head, t, d) views
    kh = np.transpose(k.reshape(2, 5, 3, 4), (0, 2, 3, 1))  # (batch, head, d, t)
    return (
        tg.sum(tg.tanh(qh @ kh))
        + tg.sum(tg.tanh(a @ w))  # contiguous: stacked
        + tg.sum(tg.tanh(big[:, :, :4] @ w))  # rows 6 apart, read in place: stacked
        + tg.sum(tg.tanh(big[::2, :, 1:5] @ w))  # every other batch element
        + tg.sum(tg.tanh(np.swapaxes(a, 2, 3) @ w[:3]))  # transposed x: a loop
        + tg.sum(tg.tanh(a @ y3))
    )  # a batch of W's: a loop


def inputs(dtype):
    rng = np.random.default_rng(3)
    return (
        rng.standard_normal((2, 2, 3, 4)).astype(dtype),
        rng.standard_normal((4, 3, 6)).astype(dtype),
        rng.standard_normal((4, 5)).astype(dtype),
        rng.standard_normal((2, 2, 4, 5)).astype(dtype),
        rng.standard_normal((2, 5, 12)).astype(dtype),
        rng.standard_normal((2, 5, 12)).astype(dtype),
    )


@pytest.fixture(scope="module")
def compiled():
    return tg.value_and_grad(products, argnums=(0, 1, 2, 3, 4, 5), backend="numba")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_stacked_and_looped_products_equal_the_interpreter(compiled, dtype):
    args = inputs(dtype)
    value, grads = compiled(*args)
    ref_value, ref_grads = tg.value_and_grad(
        products, argnums=(0, 1, 2, 3, 4, 5), backend="interpret"
    )(*args)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(value, ref_value, rtol=rtol)
    for g, r in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol)


def test_only_the_stacked_layouts_lose_their_batch_loop(compiled):
    source = compiled.lower(*inputs("float64")).source
    stacked = [line for line in source.splitlines() if "tg_gemm(0, 0, 12, 5, 4," in line]
    assert len(stacked) >= 2, source  # a (2, 2, 3) batch of rows: M = 12
    assert "for b0 in range(" in source  # the strided, transposed and batched-W products
    heads = [line for line in source.splitlines() if "tg_gemm(0, 1, 5, 5, 4," in line]
    assert heads and all(", 12, " in line for line in heads), source  # ld 12, in place
