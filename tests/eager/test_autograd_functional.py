"""torch.autograd.functional for eager tensors: jacobian, hessian, vjp, jvp."""

from __future__ import annotations

import numpy as np
import pytest
from tracegrad.eager.autograd.functional import hessian, jacobian, jvp, vjp

import tracegrad.eager as torch


def f_pair(a, b):
    return a @ b, (a * a).sum() * b


def test_jacobian_hand_values_and_shapes():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    j = jacobian(lambda x: torch.sin(x) * x[0], x)
    xn = np.array([1.0, 2.0, 3.0])
    want = np.diag(np.cos(xn) * xn[0])
    want[:, 0] += np.sin(xn)
    np.testing.assert_allclose(j.numpy(), want, rtol=1e-12)
    a, b = torch.ones(2, 3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    (ja, jb), (ka, kb) = jacobian(f_pair, (a, b))
    assert (
        ja.shape == (2, 2, 3)
        and jb.shape == (2, 3)
        and ka.shape == (3, 2, 3)
        and kb.shape == (3, 3)
    )
    assert not j.requires_grad and x.grad is None  # inputs untouched


def test_hessian_of_a_quadratic_form_is_the_symmetrized_matrix():
    m = torch.tensor([[1.0, 2.0], [0.0, 3.0]], dtype=torch.float64)
    h = hessian(lambda x: x @ m @ x, torch.tensor([0.3, -0.7], dtype=torch.float64))
    np.testing.assert_allclose(h.numpy(), (m + m.T).numpy(), rtol=1e-12)


def test_vjp_and_jvp_agree_with_the_jacobian():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    fn = lambda x: torch.tanh(x) * x.sum()
    j = jacobian(fn, x).numpy()
    v = torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64)
    out, g = vjp(fn, x, v)
    np.testing.assert_allclose(g.numpy(), v.numpy() @ j, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), fn(x).numpy())
    _, jv = jvp(fn, x, v)
    np.testing.assert_allclose(jv.numpy(), j @ v.numpy(), rtol=1e-12)


def test_create_graph_lets_the_jacobian_be_differentiated():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    j = jacobian(lambda x: x**3, x, create_graph=True)
    assert j.requires_grad
    j.sum().backward()  # d/dx sum(diag(3 x^2)) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_strict_mode_and_bad_inputs():
    x = torch.tensor([1.0, 2.0])
    np.testing.assert_array_equal(jacobian(lambda x: torch.ones(2), x).numpy(), np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="independent of input 0"):
        jacobian(lambda x: torch.ones(2), x, strict=True)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        jacobian(lambda x: x, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="single element"):
        hessian(lambda x: x * 2, x)


def test_matches_pytorch():
    real = pytest.importorskip("torch")
    from torch.autograd import functional as RF

    data = np.random.default_rng(0).standard_normal((2, 3))
    b = np.random.default_rng(1).standard_normal(3)
    ours = jacobian(f_pair, (torch.tensor(data), torch.tensor(b)))
    theirs = RF.jacobian(f_pair, (real.tensor(data), real.tensor(b)))
    for o_row, t_row in zip(ours, theirs, strict=True):
        for o, t in zip(o_row, t_row, strict=True):
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)
    hs = hessian(lambda a: (a.exp() * a).sum(), torch.tensor(b))
    ht = RF.hessian(lambda a: (a.exp() * a).sum(), real.tensor(b))
    np.testing.assert_allclose(hs.numpy(), ht.numpy(), rtol=1e-12)
