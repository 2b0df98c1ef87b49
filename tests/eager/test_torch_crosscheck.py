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
    (
        out
        * M.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(np.float32))
    ).sum().backward()
    return (
        out.detach().numpy(),
        name,
        [None if l.grad is None else l.grad.numpy() for l in leaves],
    )


@pytest.mark.parametrize("op_id,fn,shapes,domain", OPS, ids=[o[0] for o in OPS])
def test_matches_torch(op_id, fn, shapes, domain):
    arrays = make_inputs(shapes, domain, dtype=np.float32)
    ours = _run(tg, fn, arrays)
    theirs = _run(torch, fn, arrays)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1] == theirs[1].split("::")[-1], (ours[1], theirs[1])
    for g_ours, g_theirs in zip(ours[2], theirs[2], strict=True):
        np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-4, atol=1e-5)


def _error(fn):
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return None


def _freed(M):
    x = M.tensor([2.0], requires_grad=True)
    y = x.exp()
    y.backward()
    y.backward()


def _version(M):
    x = M.tensor([2.0], requires_grad=True)
    y = x.exp()
    y += 1
    y.backward()


def _version_leaf(M):
    x = M.tensor([2.0], requires_grad=True)
    w = M.tensor([1.0, 2.0])
    y = (x * w).sum()
    w.mul_(2)
    y.backward()


def _version_rebased(M):
    x = M.tensor([2.0], requires_grad=True)
    a = x * 3
    y = a * a
    a.add_(1)
    y.backward()


def _inference(M):
    x = M.tensor([1.0], requires_grad=True)
    with M.inference_mode():
        t = M.ones(1)
    (t * x).sum().backward()


def _inference_inplace(M):
    with M.inference_mode():
        t = M.ones(1)
    t.add_(1)


def _unused(M):
    x = M.tensor([1.0], requires_grad=True)
    M.autograd.grad((x * 2).sum(), [x, M.ones(1, requires_grad=True)])


def _mismatch(M):
    (M.ones(2, requires_grad=True) * 2).backward(M.ones(3))


ERRORS = {
    "freed": _freed,
    "version": _version,
    "version_leaf": _version_leaf,
    "version_rebased": _version_rebased,
    "inference_save": _inference,
    "inference_inplace": _inference_inplace,
    "autograd_grad_unused": _unused,
    "grad_shape_mismatch": _mismatch,
    "implicit_non_scalar": lambda M: (M.ones(2, requires_grad=True) * 2).backward(),
    "no_grad_fn": lambda M: M.ones(2).sum().backward(),
    "leaf_inplace": lambda M: M.ones(1, requires_grad=True).add_(1),
    "leaf_setitem": lambda M: M.ones(2, requires_grad=True).__setitem__(0, 1.0),
    "leaf_view_inplace": lambda M: (
        M.ones(2, requires_grad=True)[0:1].add_(1)
        if M is torch
        else M.ones(2, requires_grad=True).view(2).add_(1)
    ),
    "int_requires_grad": lambda M: M.tensor([1, 2], requires_grad=True),
    "int_requires_grad_": lambda M: M.tensor([1, 2]).requires_grad_(),
    "numpy_requires_grad": lambda M: M.ones(1, requires_grad=True).numpy(),
    "nonleaf_requires_grad": lambda M: (M.ones(1, requires_grad=True) * 2).requires_grad_(False),
    "item_many": lambda M: M.ones(2).item(),
    "len_0d": lambda M: len(M.tensor(1.0)),
    "int_plus_float_inplace": lambda M: M.ones(2, dtype=M.int64).add_(1.5),
}


@pytest.mark.parametrize("case", list(ERRORS), ids=list(ERRORS))
def test_error_text_matches_torch(case):
    ours = _error(lambda: ERRORS[case](tg))
    theirs = _error(lambda: ERRORS[case](torch))
    assert theirs is not None and ours is not None
    # PyTorch's text verbatim; tracegrad may add one line naming the op and the user's line
    first, *rest = ours[1].split("\n")
    assert first == theirs[1]
    assert len(rest) <= 1 and all(r.startswith("  (") for r in rest)
    assert ours[0] == theirs[0] or (ours[0], theirs[0]) in {("RuntimeError", "RuntimeError")}
