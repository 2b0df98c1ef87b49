"""Every eager op's gradient agrees with float64 finite differences (incl. broadcasting)."""

from __future__ import annotations

import numpy as np
import pytest
from eager_op_table import OPS, make_inputs

import tracegrad
import tracegrad.eager as torch
from tracegrad.eager.gradcheck import GradcheckError, gradcheck


@pytest.mark.parametrize("op_id,fn,shapes,domain", OPS, ids=[o[0] for o in OPS])
def test_gradcheck_float64(op_id, fn, shapes, domain):
    inputs = [torch.tensor(a, requires_grad=True) for a in make_inputs(shapes, domain)]
    assert all(t.dtype == torch.float64 for t in inputs)
    assert gradcheck(lambda *xs: fn(torch, *xs), inputs)


@pytest.mark.parametrize("op_id,fn,shapes,domain", OPS[:30], ids=[o[0] for o in OPS[:30]])
def test_float32_gradients_match_float64(op_id, fn, shapes, domain):
    arrays = make_inputs(shapes, domain)
    grads = {}
    for dt in (np.float32, np.float64):
        leaves = [torch.tensor(a.astype(dt), requires_grad=True) for a in arrays]
        out = fn(torch, *leaves)
        assert out.dtype == (torch.float32 if dt == np.float32 else torch.float64)
        out.sum().backward()
        grads[dt] = [l.grad for l in leaves]
        for l in leaves:
            assert l.grad.dtype == l.dtype and l.grad.shape == l.shape
    for g32, g64 in zip(grads[np.float32], grads[np.float64], strict=True):
        np.testing.assert_allclose(g32.numpy(), g64.numpy(), rtol=2e-4, atol=1e-5)


def test_gradcheck_reports_mismatching_entries():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(
        GradcheckError, match=r"output 0\[0\] wrt input 0\[0\]: analytical 1, numerical 2"
    ):
        gradcheck(lambda t: t.detach() * t, (x,))


def test_gradcheck_is_exported_lazily_and_works_on_arrays():
    a = np.array([0.3, -1.2, 2.0])
    assert tracegrad.gradcheck(lambda t: (t * t).sum(), (a,))


def test_gradcheck_multiple_outputs_and_non_differentiable_inputs():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([2, 0])
    assert gradcheck(lambda t, i: (t[i], t.exp()), (x, idx))


def test_second_order_gradcheck():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)

    def first_grad(t):
        (g,) = torch.autograd.grad((t.tanh() ** 2).sum(), [t], create_graph=True)
        return g

    assert gradcheck(first_grad, (x,))


def test_gradcheck_on_non_contiguous_inputs():
    # regression: perturbing a reshape(-1) copy of an F-ordered input left the function unchanged
    a = np.asfortranarray(np.random.default_rng(1).standard_normal((2, 3, 4)))
    assert gradcheck(lambda t: (t.exp() * t).sum(), (a,))
    assert gradcheck(lambda t: (t.exp() * t).sum(), (a.transpose(2, 0, 1),))
    assert torch.tensor(a).numpy().flags.c_contiguous
