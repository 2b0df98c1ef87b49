"""Version counters, in-place ops (errors and history rebase) and grad modes."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad.eager as torch
from tracegrad.eager.gradcheck import gradcheck

HINT = (
    "Hint: enable anomaly detection to find the operation that failed to compute its "
    "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
)


# ----------------------------------------------------------- version counters


def test_pow_then_inplace_add_works_like_pytorch():
    # PowBackward0 saves x, not y, so this is fine in PyTorch (the seed says otherwise)
    x = torch.tensor([2.0], requires_grad=True)
    y = x**2
    y += 1
    assert y.grad_fn.name() == "AddBackward0"
    y.backward()
    assert x.grad.tolist() == [4.0]


def test_exp_then_inplace_errors_with_pytorch_text():
    x = torch.tensor([2.0], requires_grad=True)
    y = x.exp()
    y += 1
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert str(info.value) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [1]], which is output 0 of Exp, is at version 1; "
        "expected version 0 instead. " + HINT
    )


@pytest.mark.parametrize("op", ["sigmoid", "tanh", "relu", "sqrt"])
def test_ops_saving_their_output_detect_modification(op):
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    y = getattr(x, op)()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        y.sum().backward()


def test_modified_leaf_message_has_no_owner():
    x = torch.tensor([2.0], requires_grad=True)
    w = torch.tensor([1.0])
    y = x * w  # saves w to differentiate x
    w.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert str(info.value) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [1]] is at version 1; expected version 0 instead. " + HINT
    )


def test_mul_does_not_save_what_it_does_not_need():
    x = torch.tensor([2.0, 3.0], requires_grad=True)
    w = torch.tensor([1.0, 1.0])
    y = x * 1
    z = y * w  # y needs no grad-for-w, so y is not saved (PyTorch's policy)
    y.mul_(2)
    z.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_version_counter_shared_by_detach_and_views():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    d = y.detach()
    d.zero_()
    assert y.tolist() == [0.0, 0.0] and y._version == 1
    with pytest.raises(RuntimeError, match="which is output 0 of Exp"):
        y.sum().backward()
    a = torch.zeros(2, 3)
    v = a.view(6)
    v.add_(1)
    assert a._version == 1 and a.sum().item() == 6.0


def test_leaf_inplace_errors():
    x = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match="^a leaf Variable that requires grad is being used in an in-place operation.$",
    ):
        x.add_(1)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
        x += 1
    with pytest.raises(
        RuntimeError,
        match="^a view of a leaf Variable that requires grad is being "
        "used in an in-place operation.$",
    ):
        x[0] = 2.0
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable"):
        x.view(1).mul_(2)
    with torch.no_grad():
        x.add_(1)  # optimizer-style update is fine
    assert x.tolist() == [2.0] and x._version == 1


def test_inplace_rebases_history_with_correct_gradients():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)

    def f(t):
        y = t * 2
        y.add_(1)
        y.mul_(t)  # saves the pre-update y (PyTorch's original self)
        y -= 3
        y /= t + 1
        y.clamp_(-10, 10)
        return y

    y = f(x)
    assert y.grad_fn.name() == "ClampBackward1"
    assert y.grad_fn.next_functions[0][0].name() == "DivBackward0"
    assert gradcheck(f, (x,))


def test_inplace_fill_zero_copy():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.zero_()
    assert y.grad_fn.name() == "ZeroBackward0" and y.requires_grad
    z = x * 1
    z.copy_(torch.tensor([5.0, 6.0]))
    assert z.grad_fn.name() == "CopyBackwards" and z.tolist() == [5.0, 6.0]
    (y.sum() + z.sum()).backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_setitem_on_intermediate():
    x = torch.tensor([2.0, 3.0], requires_grad=True)
    y = x * 1
    y[0] = 5.0
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert repr(y.grad_fn).startswith("<CopySlices object at")
    assert [None if n is None else n.name() for n, _ in y.grad_fn.next_functions] == [
        "MulBackward0",
        None,
    ]
    (y * x).sum().backward()
    assert x.grad.tolist() == [5.0, 6.0]  # d/dx0 (5 * x0) = 5; d/dx1 (x1 * x1) = 6


def test_setitem_value_gets_gradient():
    x = torch.zeros(3, 2, dtype=torch.float64)
    v = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)

    def f(val):
        y = x.clone()
        y[1] = val * val
        return y * torch.arange(6.0, dtype=torch.float64).reshape(3, 2)

    assert gradcheck(f, (v,))


def test_inplace_dtype_and_shape_errors():
    i = torch.ones(2, dtype=torch.int64)
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        i += 1.5
    f = torch.ones(2)
    with pytest.raises(
        RuntimeError,
        match=r"output with shape \[2\] doesn't match the broadcast "
        r"shape \[2, 2\]",
    ):
        f += torch.ones(2, 2)


# ------------------------------------------------------------------ grad modes


def test_no_grad_context_and_decorator():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not torch.is_grad_enabled()
        y = x * 2
    assert torch.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None

    @torch.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad


def test_bare_decorators():
    x = torch.ones(2, requires_grad=True)

    @torch.no_grad
    def f(t):
        return t * 2

    @torch.inference_mode
    def g(t):
        return t * 2

    @torch.enable_grad
    def h(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad and f.__name__ == "f"
    with torch.no_grad():
        assert h(x).requires_grad


def test_enable_grad_inside_no_grad():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and not z.requires_grad

    @torch.enable_grad()
    def f(t):
        return t * 2

    with torch.no_grad():
        assert f(x).requires_grad


def test_set_grad_enabled_as_function_context_and_decorator():
    x = torch.ones(2, requires_grad=True)
    torch.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad

    @torch.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert torch.is_grad_enabled()
    assert not f(x).requires_grad


def test_inference_mode_tensors_cannot_be_saved():
    x = torch.tensor([1.0], requires_grad=True)
    with torch.inference_mode():
        t = torch.ones(1)
        assert not (x * 2).requires_grad
    (t + x).sum().backward()  # add saves nothing: allowed, as in PyTorch
    with pytest.raises(
        RuntimeError,
        match=r"^Inference tensors cannot be saved for backward\. "
        r"Please do not use Tensors created in inference mode",
    ):
        t * x
    with pytest.raises(
        RuntimeError,
        match="Inplace update to inference tensor outside InferenceMode is not allowed",
    ):
        t.add_(1)
    (t.clone() * x).sum().backward()  # the documented workaround

    @torch.inference_mode()
    def f(a):
        return a * 2

    assert not f(x).requires_grad


def test_requires_grad_flags():
    x = torch.tensor([1.0])
    x.requires_grad_()
    assert x.requires_grad and x.is_leaf
    y = x * 2
    with pytest.raises(
        RuntimeError, match="you can only change requires_grad flags of leaf variables"
    ):
        y.requires_grad_(False)
    y.detach_()
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(
        RuntimeError,
        match="^Only Tensors of floating point and complex dtype can "
        "require gradients\n.*int64 tensor",
    ):
        torch.tensor([1, 2], requires_grad=True)
    with pytest.raises(
        RuntimeError, match="only Tensors of floating point dtype can require gradients"
    ):
        torch.tensor([1, 2]).requires_grad_()


# ------------------------------------------------------- views and in-place


def _view_cases(M):
    """Each returns the loss; gradients w.r.t. x and w are compared."""

    def inplace_on_view(x, w):
        y = x * 2
        v = y.view(6)
        v.mul_(w)
        return (y * y).sum()

    def base_modified_after_view(x, w):
        y = x * 2
        v = y.view(3, 2)
        y.mul_(w.view(2, 3))
        return (v * v).sum()

    def transpose_view_add(x, w):
        y = x * 3  # (with x.exp() this fails in PyTorch too: exp saved y)
        t = y.t()
        t.add_(w.view(3, 2))
        return (y * x).sum()

    def setitem_on_view(x, w):
        y = x * 1.5
        v = y.reshape(6)
        v[1:3] = w[:2] * 4
        return (y**2).sum()

    def view_of_view(x, w):
        y = x + 0
        v = y.view(6).view(3, 2)
        v.sub_(w.reshape(3, 2) ** 2)
        return (y.sin() * v.view(2, 3)).sum()

    return [
        inplace_on_view,
        base_modified_after_view,
        transpose_view_add,
        setitem_on_view,
        view_of_view,
    ]


@pytest.mark.parametrize("k", range(5))
def test_inplace_on_views_gradcheck(k):
    fn = _view_cases(torch)[k]
    x = torch.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=torch.float64, requires_grad=True)
    w = torch.tensor(np.linspace(0.5, 2, 6), dtype=torch.float64, requires_grad=True)
    assert gradcheck(fn, (x, w))


@pytest.mark.parametrize("k", range(5))
def test_inplace_on_views_matches_torch(k):
    real = pytest.importorskip("torch")
    grads = []
    for M in (torch, real):
        x = M.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        w = M.tensor(np.linspace(0.5, 2, 6).astype(np.float32), requires_grad=True)
        loss = _view_cases(M)[k](x, w)
        loss.backward()
        grads.append((loss.item(), x.grad.numpy(), w.grad.numpy()))
    (l1, gx1, gw1), (l2, gx2, gw2) = grads
    assert abs(l1 - l2) < 1e-4 * max(1, abs(l2))
    np.testing.assert_allclose(gx1, gx2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw1, gw2, rtol=1e-5, atol=1e-6)


def test_inplace_on_view_rebases_base_as_copyslices():
    x = torch.ones(2, 3, requires_grad=True)
    y = x * 2
    v = y.view(6)
    v.add_(1)
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert repr(y.grad_fn).startswith("<CopySlices object at")
    assert y._version == v._version == 1
