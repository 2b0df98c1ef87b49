"""compile(fn) called with eager tensors: one CompiledFunctionBackward node per call (multi-output calls: one per output, sharing one backward run)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch

I = dict(backend="interpret")


def test_seed_example_fills_grads_like_eager():
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    z = tg.compile(lambda x, y: x * y + x**2, **I)(x, y)
    assert isinstance(z, torch.Tensor) and z.requires_grad
    assert z.grad_fn.name() == "CompiledFunctionBackward"
    assert [type(n).__name__ for n, _ in z.grad_fn.next_functions] == ["AccumulateGrad"] * 2
    z.backward()
    assert x.grad.tolist() == [7.0] and y.grad.tolist() == [2.0]


def test_compiled_piece_inside_an_eager_graph():
    W = torch.tensor([[0.5, -0.3], [0.2, 0.4]], requires_grad=True)
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    hidden = x * 2.0  # eager op before
    layer = tg.compile(lambda h, W: tg.tanh(h @ W), **I)
    out = layer(hidden, W)
    assert out.grad_fn.next_functions[0][0].name() == "MulBackward0"
    loss = (out * out).sum()  # eager ops after
    loss.backward()
    # the same computation fully eager
    W2 = torch.tensor([[0.5, -0.3], [0.2, 0.4]], requires_grad=True)
    x2 = torch.tensor([[1.0, 2.0]], requires_grad=True)
    out2 = torch.tanh((x2 * 2.0) @ W2)
    (out2 * out2).sum().backward()
    np.testing.assert_allclose(W.grad.numpy(), W2.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6)


def test_only_inputs_that_require_grad_get_edges_and_grads():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    c = torch.tensor([3.0, 4.0])
    f = tg.compile(lambda x, c: tg.sum(x * c), **I)
    out = f(x, c)
    assert len(out.grad_fn.next_functions) == 1
    out.backward()
    assert x.grad.tolist() == [3.0, 4.0] and c.grad is None


def test_gradient_signature_is_part_of_the_cache_key():
    f = tg.compile(lambda x, y: tg.sum(x * y), **I)
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    f(a, b)
    f(a, b.detach())
    f(a.detach(), b)
    f(a, b)
    assert f.cache_info() == (3, 1)


def test_tensors_without_grad_give_tensors_without_grad_fn():
    f = tg.compile(lambda x: x * 2.0, **I)
    out = f(torch.tensor([1.0, 2.0]))
    assert isinstance(out, torch.Tensor) and out.grad_fn is None and not out.requires_grad
    with torch.no_grad():
        out = f(torch.tensor([1.0], requires_grad=True))
    assert out.grad_fn is None


def test_multiple_outputs_each_get_a_node():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    f = tg.compile(lambda x: (tg.sin(x), tg.cos(x), tg.argmax(x)), **I)
    s, c, i = f(x)
    assert s.grad_fn.name() == c.grad_fn.name() == "CompiledFunctionBackward"
    assert i.grad_fn is None and i.dtype == torch.int64
    (s.sum() + 2 * c.sum()).backward()
    np.testing.assert_allclose(
        x.grad.numpy(), np.cos([0.5, -1.0]) - 2 * np.sin([0.5, -1.0]), rtol=1e-6
    )


def test_double_backward_through_a_compiled_node():
    x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    y = tg.compile(lambda x: tg.tanh(x) * x, **I)(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    g.sum().backward()
    t = np.tanh([0.5, 1.5])
    xn = np.array([0.5, 1.5])
    np.testing.assert_allclose(g.detach().numpy(), t + xn * (1 - t**2))
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - t**2) - 2 * xn * t * (1 - t**2))


def test_second_backward_without_retain_graph_raises():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = tg.compile(lambda x: tg.sum(x**3), **I)(x)
    out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_retain_graph_allows_a_second_backward():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = tg.compile(lambda x: tg.sum(x**3), **I)(x)
    out.backward(retain_graph=True)
    out.backward()
    assert x.grad.tolist() == [6.0, 24.0]


def test_inplace_change_of_an_input_is_detected():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    out = tg.compile(lambda h: tg.sum(tg.exp(h)), **I)(h)
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_saved_values_are_released_after_backward():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = tg.compile(lambda x: tg.sum(tg.exp(x) * x), **I)(x)
    node = out.grad_fn
    # intermediates the kernel computed (an input's own buffer lives on with the input)
    computed = [
        weakref.ref(a) for a in node.saved_arrays if not np.shares_memory(a, x.detach().numpy())
    ]
    assert computed
    out.backward()
    gc.collect()
    assert node.saved_arrays is None
    assert all(ref() is None for ref in computed)


def test_graph_is_freed_with_its_output():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = tg.compile(lambda x: tg.sum(tg.exp(x)), **I)(x)
    node = weakref.ref(out.grad_fn)
    del out
    assert node() is None  # no reference cycles: freed by reference counting


def test_float32_tensors_stay_float32():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = tg.compile(lambda x: tg.sum(x * x), **I)(x)
    assert out.dtype == torch.float32
    out.backward()
    assert x.grad.dtype == torch.float32


def test_training_steps_make_no_reference_cycles():
    W = torch.tensor(np.full((3, 2), 0.1), requires_grad=True)
    x = torch.tensor(np.ones((4, 3)))
    step = tg.compile(lambda x, W: tg.sum(tg.tanh(x @ W) ** 2), **I)
    step(x, W).backward()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(50):
            step(x, W).backward()
            W.grad = None
        gc.collect()
        # (only this loop's objects: a background kernel build in another thread
        # may leave cycles of its own meanwhile)
        ours = [
            o
            for o in gc.garbage
            if type(o).__module__.startswith("tracegrad") or isinstance(o, np.ndarray)
        ]
        assert ours == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _count_backward_runs(monkeypatch):
    """Count calls of compiled backward kernels (one per run of the backward graph)."""
    from tracegrad.capture.entry import CapturedEntry

    runs = []
    original = CapturedEntry.run

    def counting_run(self, leaves):
        entry = self.aot
        if entry is not None and not getattr(entry.backward, "_counted", False):
            kernel = entry.backward

            def backward(*arrays):
                runs.append(1)
                return kernel(*arrays)

            backward._counted = True
            entry.backward = backward
        return original(self, leaves)

    monkeypatch.setattr(CapturedEntry, "run", counting_run)
    return runs


def test_multiple_outputs_share_one_backward_run(monkeypatch):
    runs = _count_backward_runs(monkeypatch)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    f = tg.compile(lambda x: (tg.sin(x), tg.cos(x) * 3.0, tg.sum(x * x)), **I)
    s, c, q = f(x)
    shared = s.grad_fn.next_functions[0][0]
    assert c.grad_fn.next_functions[0][0] is shared and q.grad_fn.next_functions[0][0] is shared
    assert shared.name() == "CompiledFunctionBackward (shared by 3 outputs)"
    (s.sum() + 2 * c.sum() - q).backward()
    assert len(runs) == 1
    xn = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xn) - 6 * np.sin(xn) - 2 * xn, rtol=1e-12)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        s.sum().backward()


def test_multiple_outputs_partly_used_and_double_backward():
    x = torch.tensor([0.3, 1.2], dtype=torch.float64, requires_grad=True)
    f = tg.compile(lambda x: (tg.tanh(x) * x, tg.exp(x)), **I)
    a, b = f(x)
    (ga,) = torch.autograd.grad(a.sum(), x, create_graph=True)  # b's slot stays zero
    t, xn = np.tanh([0.3, 1.2]), np.array([0.3, 1.2])
    np.testing.assert_allclose(ga.detach().numpy(), t + xn * (1 - t**2), rtol=1e-12)
    ga.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - t**2) - 2 * xn * t * (1 - t**2), rtol=1e-12)
    x.grad = None
    a, b = f(x)
    assert tg.gradcheck(
        lambda x: sum(o.sum() * w for o, w in zip(f(x), (1.5, -0.5), strict=True)), (x,)
    )


def test_multiple_outputs_of_mixed_dtypes_keep_one_node_each():
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    f = tg.compile(lambda x: (tg.sin(x), tg.astype(x, "float32") * 2.0), **I)
    s, d = f(x)
    assert s.grad_fn is not d.grad_fn and s.grad_fn.name() == d.grad_fn.name()
    (s.sum() + d.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos([0.5, 1.0]) + 2.0, rtol=1e-6)
