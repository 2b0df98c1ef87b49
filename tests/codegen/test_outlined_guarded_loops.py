"""sin/cos loops (guarded: a libm re-run for arguments beyond the fast range) are
outlined and shared like any other fused loop, so a traced chain of many sin layers
compiles one loop function instead of one copy per layer (50 layers of sin(h @ W),
64x64: first call 20 s -> 4.3 s).
"""

from __future__ import annotations

import re

import numpy as np

import tracegrad as tg

# deep enough that inlined copies (2 * LAYERS - 2) would far outnumber the shared
# functions (at most 4), shallow enough to compile in ~half the time of 12 layers
LAYERS = 8


def _chain(n):
    def f(ws, h):
        for w in ws:
            h = tg.sin(h @ w)
        return tg.sum(tg.cos(h))

    return f


def test_guarded_loops_are_shared_and_their_fallback_still_runs():
    # identity weights keep the matmuls exact; the first layer's arguments are beyond the
    # fast range (3e7), so the shared function's libm re-run runs, forward (sin) and
    # backward (cos)
    ws = [np.eye(6) for _ in range(LAYERS)]
    h = np.random.default_rng(0).standard_normal((4, 6))
    h[1, 2] = 3e7
    f = _chain(LAYERS)
    vg = tg.value_and_grad(f, argnums=(0, 1))
    lowered = vg.lower(ws, h)
    source = lowered.kernel.source
    shared = re.findall(r"^def (\w+_loop\d+)\(", source, flags=re.M)
    guarded = [
        name
        for name in shared
        if "redo the loop with libm" in source.split(f"def {name}(")[1].split("\ndef ")[0]
    ]
    assert guarded, "the sin loops were not outlined"
    # LAYERS x (sin forward + cos in its vjp) guarded loops (inlined before: 22 copies
    # at 12 layers, 2 * LAYERS - 2), now a few shared functions whose calls the
    # reroll pass folds into loops
    assert source.count("redo the loop with libm") <= 4 < 2 * LAYERS - 2
    value, grads = vg(ws, h)
    want_value, want_grads = tg.value_and_grad(f, argnums=(0, 1), backend="interpret")(ws, h)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    for got, want in zip(grads[0] + [grads[1]], want_grads[0] + [want_grads[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
