"""Long chains of transcendental ops keep their compile time bounded.

Each in-place expansion of a math helper costs Numba/LLVM time (~0.3 s per sin);
a 30-sin chain took 18 s to compile before the budget. Past the budget the
kernel calls shared noinline helpers instead, and must still be correct.
"""

import numpy as np

import tracegrad as tg
from tracegrad.codegen import _generate, ir_hash
from tracegrad.runtime import mathlib

# just past the budget: each sin is two expansion sites (sin forward, cos in its
# vjp), so this chain is the shortest that must switch to the shared helpers
# (compile time grows with the chain: 13 sins compile in half the time of 30)
CHAIN = mathlib.EXPANSION_BUDGET // 2 + 1


def sin_chain(x):
    for _ in range(CHAIN):
        x = tg.sin(x)
    return tg.sum(x)


def test_long_sin_chain_uses_outlined_helpers_and_stays_correct():
    x = np.linspace(0.1, 1.0, 7)
    vg = tg.value_and_grad(sin_chain)
    source = vg.lower(x).source
    assert mathlib.expanded_sites(source) <= mathlib.EXPANSION_BUDGET
    assert "inline='never'" in source
    value, grad = vg(x)
    ref_value, ref_grad = tg.value_and_grad(sin_chain, backend="interpret")(x)
    np.testing.assert_allclose(value, ref_value, rtol=1e-13)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12)


def test_short_chains_still_expand_inline():
    # generation only (the interpreter backend lowers, `_generate` writes the source
    # build_kernel would compile): the decision to expand is made there
    f = lambda x: tg.sum(tg.tanh(x) * tg.sin(x) + tg.exp(-(x**2)))
    graph = tg.value_and_grad(f, backend="interpret").lower(np.ones(5, np.float32)).optimized
    source = _generate(graph, f"kernel_{ir_hash(graph)}").source
    assert 0 < mathlib.expanded_sites(source) <= mathlib.EXPANSION_BUDGET
    assert "inline='never'" not in source
