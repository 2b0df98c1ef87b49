"""The eager graph and backward engine: structure, accumulation, retain_graph,
hooks, retain_grad, higher order, autograd.grad, deep graphs, memory release."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracegrad.eager as torch
from tracegrad.eager.graph import FREED_MESSAGE


def names(fn):
    return [None if n is None else n.name() for n, _ in fn.next_functions]


# ---------------------------------------------------------------- seed example


def test_seed_example_values_and_graph():
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    z = x * y + x**2
    assert repr(z) == "tensor([10.], grad_fn=<AddBackward0>)"
    assert names(z.grad_fn) == ["MulBackward0", "PowBackward0"]
    mul, powb = [n for n, _ in z.grad_fn.next_functions]
    assert names(mul) == ["torch::autograd::AccumulateGrad"] * 2
    assert mul.next_functions[0][0].variable is x and mul.next_functions[1][0].variable is y
    assert powb.next_functions[0][0] is mul.next_functions[0][0]  # one AccumulateGrad per leaf
    z.backward()
    assert repr(x.grad) == "tensor([7.])"  # y + 2x = 7 (the seed's comment says 8)
    assert repr(y.grad) == "tensor([2.])"


def test_python_scalars_show_as_none_edges():
    x = torch.tensor([1.0], requires_grad=True)
    y = x * 2
    z = y + 3
    assert repr(y.grad_fn).startswith("<MulBackward0 object at 0x")
    assert z.grad_fn.next_functions[0][0] is y.grad_fn
    assert z.grad_fn.next_functions[1] == (None, 0)
    assert names((2 * x).grad_fn) == ["torch::autograd::AccumulateGrad", None]
    assert names((1 - x).grad_fn) == ["torch::autograd::AccumulateGrad"]  # RsubBackward1
    assert (1 - x).grad_fn.name() == "RsubBackward1"
    assert names((x**2).grad_fn) == ["torch::autograd::AccumulateGrad"]
    assert names((x.detach() * x).grad_fn) == [None, "torch::autograd::AccumulateGrad"]
    assert x.is_leaf and not y.is_leaf and x.grad_fn is None


def test_saved_tensors_info_and_metadata():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    assert y.grad_fn.saved_tensors_info == [("result", (2,), "float32")]
    z = x * torch.tensor([3.0, 4.0])
    assert z.grad_fn.saved_tensors_info == [("other", (2,), "float32")]
    assert (x + 1).grad_fn.saved_tensors_info == []
    z.grad_fn.metadata["tag"] = 1
    assert z.grad_fn.metadata == {"tag": 1}


# ------------------------------------------------------- accumulation & freeing


def test_accumulation_and_zero():
    x = torch.tensor([2.0], requires_grad=True)
    (x**2).backward()
    (x**2).backward()
    assert x.grad.tolist() == [8.0]
    x.grad.zero_()
    assert x.grad.tolist() == [0.0]
    x.grad = None
    (x * 3).backward()
    assert x.grad.tolist() == [3.0]


def test_second_backward_errors_with_pytorch_text():
    x = torch.tensor([2.0], requires_grad=True)
    y = x**2
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert str(info.value) == FREED_MESSAGE
    assert str(info.value).startswith("Trying to backward through the graph a second time")


def test_retain_graph_allows_second_backward():
    x = torch.tensor([2.0], requires_grad=True)
    y = x**2
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [8.0]


def test_nodes_that_save_nothing_can_run_twice():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_implicit_gradient_only_for_scalars():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x**2
    with pytest.raises(
        RuntimeError,
        match="^grad can be implicitly created only for scalar outputs\n"
        r"  \(backward of f32\[2\] at .*test_autograd.py:\d+\)$",
    ):
        y.backward()
    y.backward(torch.ones_like(y))
    assert x.grad.tolist() == [2.0, 4.0]


def test_gradient_shape_mismatch():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"Mismatch in shape: grad_output\[0\] has a shape of "
        r"torch.Size\(\[3\]\) and output\[0\] has a shape of "
        r"torch.Size\(\[2\]\).",
    ):
        (x * 2).backward(torch.ones(3))


def test_backward_on_tensor_without_grad():
    with pytest.raises(
        RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"
    ):
        torch.ones(2).sum().backward()


def test_gradient_reaches_inputs_in_their_own_shape():
    a = torch.ones(3, 1, requires_grad=True)
    b = torch.ones(4, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.tolist() == [[4.0]] * 3
    assert b.grad.tolist() == [3.0] * 4


# ----------------------------------------------------------------- hooks


def test_hooks_on_leaf_and_intermediate_and_remove():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    h1 = x.register_hook(lambda g: g * 10)
    y = x * 3
    h2 = y.register_hook(lambda g: seen.append(g.tolist()))
    y.sum().backward()
    assert seen == [[1.0, 1.0]]
    assert x.grad.tolist() == [30.0, 30.0]
    h1.remove()
    h2.remove()
    x.grad = None
    y = x * 3
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and seen == [[1.0, 1.0]]


def test_retain_grad():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    z = (y * y).sum()
    z.backward()
    assert y.retains_grad
    assert y.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]
    w = x * 2
    w.sum().backward()
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf"):
        assert w.grad is None  # not retained (PyTorch warns, as here)


def test_retain_grad_does_not_keep_tensor_alive():
    x = torch.tensor([1.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------ higher order


def test_higher_order_gradients():
    x = torch.tensor([3.0], requires_grad=True)
    y = x**3
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert g.tolist() == [27.0] and g.grad_fn is not None
    (g2,) = torch.autograd.grad(g, x, create_graph=True)
    assert g2.tolist() == [18.0]
    (g3,) = torch.autograd.grad(g2, x)
    assert g3.tolist() == [6.0]


def test_backward_create_graph_then_backward_through_grad():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    y = (x.tanh() * x.exp()).sum()
    y.backward(create_graph=True)
    first = x.grad
    assert first.requires_grad and first.grad_fn is not None
    x.grad = None
    first.sum().backward()
    xd = x.detach().numpy().astype(np.float64)
    t, e = np.tanh(xd), np.exp(xd)
    # d/dx [ (1 - t^2) e + t e ] = (-2 t (1 - t^2)) e + (1 - t^2) e + (1 - t^2) e + t e
    expected = -2 * t * (1 - t**2) * e + 2 * (1 - t**2) * e + t * e
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_autograd_grad_does_not_touch_dot_grad_and_allow_unused():
    x = torch.tensor([1.0], requires_grad=True)
    unused = torch.tensor([1.0], requires_grad=True)
    y = (x * 2).sum()
    (g, none) = torch.autograd.grad(y, [x, unused], allow_unused=True, retain_graph=True)
    assert g.tolist() == [2.0] and none is None and x.grad is None
    with pytest.raises(
        RuntimeError,
        match=r"The differentiated Tensor at index 1 appears to not "
        r"have been used in the graph. Set allow_unused=True",
    ):
        torch.autograd.grad(y, [x, unused])


def test_autograd_grad_wrt_intermediate_and_grad_outputs():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = h**2
    (gh,) = torch.autograd.grad(y, h, grad_outputs=torch.tensor([1.0, 0.5]))
    assert gh.tolist() == [6.0, 6.0]


def test_backward_inputs_restricts_accumulation():
    x = torch.tensor([1.0], requires_grad=True)
    w = torch.tensor([2.0], requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert w.grad.tolist() == [1.0] and x.grad is None


def test_deep_graph_has_no_recursion_limit():
    x = torch.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001**10_000], rtol=1e-3)
    del y  # freeing a 10,000-node chain must not overflow the stack either
    gc.collect()


def test_saved_tensors_released_after_backward():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()  # MulBackward0 saves h
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is not None  # kept by the graph
    y.backward()
    gc.collect()
    assert ref() is None  # released by backward


def test_saved_tensors_kept_with_retain_graph():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    ref = weakref.ref(h)
    del h
    y.backward(retain_graph=True)
    gc.collect()
    assert ref() is not None
    del y
    gc.collect()
    assert ref() is None


def test_no_reference_cycles_through_grad_fn():
    gc.collect()
    gc.disable()
    try:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).tanh().sum()
        node_ref = weakref.ref(y.grad_fn)
        del y
        assert node_ref() is None  # freed by reference counting alone
    finally:
        gc.enable()


# -------------------------------------------------------------- anomaly mode


def test_detect_anomaly_names_node_and_forward_line():
    x = torch.tensor([0.0], requires_grad=True)
    with torch.detect_anomaly():
        y = torch.sqrt(x)  # forward line the error must show
        with pytest.raises(RuntimeError) as info:
            y.backward()
    text = str(info.value)
    assert "Function 'SqrtBackward0' returned inf values in its 0th output." in text
    assert "y = torch.sqrt(x)  # forward line the error must show" in text
    assert "test_autograd.py" in text


def test_anomaly_nan():
    x = torch.tensor([-1.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        y = torch.sqrt(x)
        with pytest.raises(RuntimeError, match="returned nan values"):
            y.backward()


def test_no_traceback_captured_outside_anomaly_mode():
    x = torch.tensor([1.0], requires_grad=True)
    assert (x * 2).grad_fn.trace is None
