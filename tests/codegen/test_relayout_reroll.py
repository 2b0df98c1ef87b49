"""A deep tanh chain's backward stays folded into a loop when its g @ W.T products
get the transposed-copy relayout (structured.nt_relayout_choice).

The copy used to be an inline loop nest in the kernel body; `reroll` folds only
runs of single-line calls, so those loops broke every backward layer's run and
tanh_chain_d50's kernel grew from 258 to 833 source lines (~0.3 s more codegen,
more Numba compile). The copy is now a call to one shared function.

Generation only (the interpreter backend lowers the graph; `_generate` writes the
source): nothing is compiled here. Numerics of the relayout are checked by
test_gemm_fusion.py's compiled kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import _generate
from tracegrad.codegen.structured import nt_relayout_choice

BATCH, WIDTH = 32, 64  # g @ W.T is (32, 64) @ (64, 64).T: a relayout product


def _chain_source(depth: int, dtype: str = "float32") -> str:
    rng = np.random.default_rng(0)
    weights = [
        (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(dtype) for _ in range(depth)
    ]
    x = rng.standard_normal((BATCH, WIDTH)).astype(dtype)

    def chain(*args):
        h = args[-1]
        for w in args[:-1]:
            h = tg.tanh(h @ w)
        return tg.sum(h)

    f = tg.value_and_grad(chain, argnums=tuple(range(depth)), backend="interpret")
    return _generate(f.lower(*weights, x).optimized, "kernel_chain").source


def test_the_chain_really_takes_the_relayout_path():
    assert nt_relayout_choice(BATCH, WIDTH, WIDTH) is not None


@pytest.fixture(scope="module")
def sources(skylakex_blas):
    return {depth: _chain_source(depth) for depth in (12, 24)}


def test_no_copy_where_blas_runs_a_small_nt_product_as_fast(monkeypatch):
    """OpenBLAS's Haswell kernels (AVX2 machines, AMD's Zen) take as long for A @ B.T as
    for A @ B: the copy would only add its time. Unknown kernels keep the copy."""
    from tracegrad.codegen import structured
    from tracegrad.ops import blas_threads

    for names, slow in (
        (["Haswell"], False),
        (["Zen"], False),
        (["SkylakeX"], True),
        (["SapphireRapids", "Haswell"], True),
        ([], True),
    ):
        monkeypatch.setattr(blas_threads, "core_names", lambda names=names: names)
        monkeypatch.setattr(structured, "_small_nt_slow", [])
        assert structured.small_nt_is_slow() is slow, names
    monkeypatch.setattr(structured, "_small_nt_slow", [False])
    source = _chain_source(12)
    assert "copied transposed" not in source and "tg_gemm(0, 1," in source


def test_deep_chain_backward_with_relayout_is_rolled(sources):
    source = sources[24]
    assert "copied transposed" in source
    # every layer's copy is one call to a shared function, inside the folded loop
    assert source.count("copied transposed") == 1
    assert source.count("for rep in range(") >= 2  # the forward's run and the backward's


def test_source_grows_only_by_the_per_argument_lines(sources):
    """Twice the layers adds only what every weight needs whatever the kernel does:
    its input's flat view and its gradient's output view, two lines. The unrolled
    backward took ~16 lines more per layer (comments, the 3-line copy, two GEMMs
    and a fused-loop call)."""
    shallow, deep = (len(sources[d].splitlines()) for d in (12, 24))
    added_layers = 24 - 12
    assert deep - shallow <= 2 * added_layers, (shallow, deep)
