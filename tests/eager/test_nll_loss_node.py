"""cross_entropy is log_softmax + one NllLossBackward0 node, as in PyTorch.

nll_loss is one row of the rule table, so it is also run through the compiled
pipeline here: interpreter, Numba kernel, and its range check.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.ops import table as T


def test_cross_entropy_graph_is_nll_loss_over_log_softmax():
    logits = torch.randn(4, 3, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 2, 1, 2]))
    assert loss.grad_fn.name() == "NllLossBackward0"
    ((inner, _),) = loss.grad_fn.next_functions
    assert inner.name() == "LogSoftmaxBackward0"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_gradcheck_and_hand_values(reduction):
    rng = np.random.default_rng(0)
    logp = torch.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    target = torch.tensor([0, 2, 2, 1, 0])
    f = lambda lp: torch.nn.functional.nll_loss(lp, target, reduction=reduction)
    assert tg.gradcheck(f, (logp,))
    out = f(logp)
    out.backward(torch.ones_like(out))
    expected = np.zeros((5, 3))
    expected[np.arange(5), target.numpy()] = -1.0 / 5 if reduction == "mean" else -1.0
    np.testing.assert_allclose(logp.grad.numpy(), expected, rtol=1e-12)


def test_cross_entropy_second_order_gradcheck():
    logits = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([3, 0, 1])
    assert tg.gradcheck(
        lambda z: (
            torch.autograd.grad(
                torch.nn.functional.cross_entropy(z, target), (z,), create_graph=True
            )[0]
            .pow(2)
            .sum()
        ),
        (logits,),
    )


def test_out_of_range_target_gets_pytorchs_message():
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        torch.nn.functional.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_compiled_numba_equals_interpreter_and_eager(dtype, reduction):
    rng = np.random.default_rng(1)
    logp = rng.standard_normal((6, 4)).astype(dtype)
    target = rng.integers(0, 4, 6)
    w = 1.0 if reduction != "none" else rng.uniform(0.5, 1.5, 6).astype(dtype)

    def f(lp, t):
        return tg.sum(T.nll_loss(lp, t, reduction=reduction) * w)

    got = {b: tg.value_and_grad(f, backend=b)(logp, target) for b in ("interpret", "numba")}
    tol = 1e-5 if dtype == "float32" else 1e-12
    for part in (0, 1):
        np.testing.assert_allclose(got["numba"][part], got["interpret"][part], rtol=tol, atol=tol)
    assert got["numba"][1].dtype == np.dtype(dtype)
    lp = torch.tensor(logp, requires_grad=True)
    (
        torch.nn.functional.nll_loss(lp, torch.tensor(target), reduction=reduction)
        * torch.tensor(np.asarray(w, dtype=dtype))
    ).sum().backward()
    np.testing.assert_allclose(lp.grad.numpy(), got["interpret"][1], rtol=tol, atol=tol)


def test_nll_loss_compiled_out_of_range_target_names_the_op():
    f = tg.value_and_grad(lambda lp, t: T.nll_loss(lp, t, reduction="mean"))
    logp = np.zeros((2, 3))
    f(logp, np.array([0, 1]))
    with pytest.raises(IndexError, match="nll_loss.*out of range"):
        f(logp, np.array([0, 7]))


def test_cross_entropy_matches_pytorch():
    real = pytest.importorskip("torch")
    data = np.random.default_rng(2).standard_normal((4, 5))
    target = np.array([1, 4, 0, 1])
    ours = torch.tensor(data, requires_grad=True)
    theirs = real.tensor(data, requires_grad=True)
    a = torch.nn.functional.cross_entropy(ours, torch.tensor(target))
    b = real.nn.functional.cross_entropy(theirs, real.tensor(target))
    assert a.grad_fn.name() == b.grad_fn.name()
    assert a.grad_fn.next_functions[0][0].name() == b.grad_fn.next_functions[0][0].name()
    a.backward()
    b.backward()
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)
