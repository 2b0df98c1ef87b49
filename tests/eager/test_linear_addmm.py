"""nn.Linear records one AddmmBackward0 node, as PyTorch does; saved values carry PyTorch's names.

The addmm primitive (bias + mat1 @ mat2) is one row of the rule table, so it is
also checked here through the compiled pipeline: interpreter and Numba kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.ops import table as T


def names(node):
    return [None if n is None else n.name() for n, _ in node.next_functions]


def test_linear_is_one_addmm_node_with_pytorchs_inputs_and_saved_names():
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3, requires_grad=True)
    y = layer(x)
    assert y.grad_fn.name() == "AddmmBackward0"
    # (bias, input, weight.T): PyTorch's addmm(bias, input, weight.t()) operand order
    assert names(y.grad_fn) == ["torch::autograd::AccumulateGrad"] * 2 + ["TBackward0"]
    assert [label for label, _, _ in y.grad_fn.saved_tensors_info] == ["mat1", "mat2"]
    np.testing.assert_array_equal(y.grad_fn._saved_mat1.detach().numpy(), x.detach().numpy())
    assert tuple(y.grad_fn._saved_mat2.shape) == (3, 2)
    # an input that needs no grad shows up as (None, 0)
    z = layer(torch.randn(4, 3))
    assert names(z.grad_fn)[1] is None


def test_linear_gradients_match_hand_derived_values():
    layer = torch.nn.Linear(3, 2).double()
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    g = np.arange(10.0).reshape(5, 2)
    layer(x).backward(torch.tensor(g))
    w = layer.weight.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-12)
    np.testing.assert_allclose(layer.weight.grad.numpy(), g.T @ x.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(layer.bias.grad.numpy(), g.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("bias_shape", [(2,), (4, 2), (4, 1), ()])
def test_addmm_gradcheck_with_broadcast_bias(bias_shape):
    rng = np.random.default_rng(0)
    bias = torch.tensor(rng.standard_normal(bias_shape), requires_grad=True)
    mat1 = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    mat2 = torch.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert torch.addmm(bias, mat1, mat2).grad_fn.name() == "AddmmBackward0"
    assert tg.gradcheck(torch.addmm, (bias, mat1, mat2))
    # second order: the vjp rules are themselves differentiable tensor ops
    assert tg.gradcheck(
        lambda b, m1, m2: torch.autograd.grad(
            (torch.addmm(b, m1, m2) ** 2).sum(), (m1,), create_graph=True
        )[0],
        (bias, mat1, mat2),
    )


def test_addmm_beta_alpha_and_shape_errors():
    b, m1, m2 = torch.ones(2, 2), torch.ones(2, 3), torch.ones(3, 2)
    np.testing.assert_array_equal(
        torch.addmm(b, m1, m2, beta=2, alpha=0.5).numpy(), np.full((2, 2), 3.5)
    )
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x2\)"
    ):
        torch.addmm(b, m1, b)
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 2x2\)"
    ):
        torch.nn.functional.linear(torch.ones(4, 3), torch.ones(2, 2), torch.ones(2))


def test_linear_without_bias_or_with_batched_input_still_matches_numpy():
    w = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 4, 3, dtype=torch.float64)
    out = torch.nn.functional.linear(x, w, b)
    np.testing.assert_allclose(
        out.detach().numpy(), x.numpy() @ w.detach().numpy().T + b.detach().numpy(), rtol=1e-12
    )
    assert tg.gradcheck(lambda w, b: torch.nn.functional.linear(x, w, b), (w, b))
    assert torch.nn.functional.linear(x[0], w).grad_fn.name() == "MmBackward0"


def test_saved_value_attributes_follow_pytorch_and_are_freed_after_backward():
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    z = x * y
    np.testing.assert_array_equal(z.grad_fn._saved_self.detach().numpy(), x.detach().numpy())
    np.testing.assert_array_equal(z.grad_fn._saved_other.detach().numpy(), y.detach().numpy())
    e = x.exp()
    np.testing.assert_array_equal(e.grad_fn._saved_result.detach().numpy(), e.detach().numpy())
    with pytest.raises(AttributeError, match="_saved_mat2"):
        z.grad_fn._saved_mat2  # noqa: B018 - reading the attribute is what raises
    z.sum().backward()
    with pytest.raises(
        RuntimeError, match="directly access saved tensors after they have already been freed"
    ):
        z.grad_fn._saved_self  # noqa: B018 - reading the attribute is what raises


@pytest.mark.numba
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias_shape", [(5,), (3, 5), (3, 1)])
def test_addmm_primitive_compiled_numba_equals_interpreter_and_eager(dtype, bias_shape):
    rng = np.random.default_rng(1)
    bias = rng.standard_normal(bias_shape).astype(dtype)
    mat1 = rng.standard_normal((3, 4)).astype(dtype)
    mat2 = rng.standard_normal((4, 5)).astype(dtype)
    weights = rng.uniform(0.5, 1.5, (3, 5)).astype(dtype)

    def f(b, m1, m2):
        return tg.sum(T.addmm(b, m1, m2) * weights)

    results = {
        backend: tg.value_and_grad(f, argnums=(0, 1, 2), backend=backend)(bias, mat1, mat2)
        for backend in ("interpret", "numba")
    }
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(results["numba"][0], results["interpret"][0], rtol=tol)
    for got, want in zip(results["numba"][1], results["interpret"][1], strict=True):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    b, m1, m2 = (torch.tensor(a, requires_grad=True) for a in (bias, mat1, mat2))
    (torch.addmm(b, m1, m2) * torch.tensor(weights)).sum().backward()
    for t, want in zip((b, m1, m2), results["interpret"][1], strict=True):
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=tol, atol=tol)
    lowered = tg.value_and_grad(f, argnums=(0, 1, 2)).lower(bias, mat1, mat2)
    assert "tg_gemm(" in lowered.kernel.source and "addmm" in lowered.kernel.source


def test_linear_matches_pytorch():
    real = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    w, b, x = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal((4, 3))
    ours = [torch.tensor(a, requires_grad=True) for a in (w, b, x)]
    theirs = [real.tensor(a, requires_grad=True) for a in (w, b, x)]
    out_ours = torch.nn.functional.linear(ours[2], ours[0], ours[1])
    out_theirs = real.nn.functional.linear(theirs[2], theirs[0], theirs[1])
    assert out_ours.grad_fn.name() == out_theirs.grad_fn.name()
    assert [n.split("::")[-1] if n else n for n in names(out_ours.grad_fn)] == [
        type(n).__name__ if n else None for n, _ in out_theirs.grad_fn.next_functions
    ]
    (out_ours**2).sum().backward()
    (out_theirs**2).sum().backward()
    for a, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)
