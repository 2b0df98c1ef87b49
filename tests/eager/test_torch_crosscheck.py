"""Cross-check against real PyTorch (skipped where torch is not installed):
values, gradients and grad_fn names of every op in the op table, in float32."""
from __future__ import annotations

import numpy as np
import pytest

from eager_op_table import OPS, make_inputs

import tracegrad.eager as tg

torch = pytest.importorskip("torch")


def _run(M, fn, arrays):
    leaves = [M.tensor(a, requires_grad=True) for a in arrays]
    out = fn(M, *leaves)
    name = out.grad_fn.name() if out.grad_fn is not None else None
    (out * M.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(np.float32))).sum().backward()
    return (out.detach().numpy(), name,
            [None if l.grad is None else l.grad.numpy() for l in leaves])


@pytest.mark.parametrize("op_id,fn,shapes,domain", OPS, ids=[o[0] for o in OPS])
def test_matches_torch(op_id, fn, shapes, domain):
    arrays = make_inputs(shapes, domain, dtype=np.float32)
    ours = _run(tg, fn, arrays)
    theirs = _run(torch, fn, arrays)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1] == theirs[1].split("::")[-1], (ours[1], theirs[1])
    for g_ours, g_theirs in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-4, atol=1e-5)
