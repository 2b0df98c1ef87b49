"""Basic indexing (ints, slices, None) returns a view, as in PyTorch.

The view shares memory and the version counter with its base, an in-place
change of the view writes into the base, and when recorded the base's history
is rebased through a CopySlices node with correct gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch


def test_in_place_change_of_an_indexed_view_writes_into_the_base():
    x = torch.zeros(3, 2)
    x[0].add_(1)
    x[:, 1].mul_(5).add_(2)
    np.testing.assert_array_equal(x.numpy(), [[1, 7], [0, 2], [0, 2]])
    row = x[2]
    x.fill_(4)  # and a change of the base shows through the view
    np.testing.assert_array_equal(row.numpy(), [4, 4])
    assert np.shares_memory(row.numpy(), x.numpy())


def test_views_share_the_version_counter():
    x = torch.arange(6.0).reshape(2, 3)
    v = x[1, ::2]
    v.zero_()
    assert x._counter is v._counter and x._version == v._version == 1


def test_scalar_index_is_a_zero_dim_view():
    x = torch.arange(4.0)
    s = x[2]
    assert s.shape == torch.Size([]) and s.item() == 2.0
    s.add_(10)
    assert x[2].item() == 12.0


def test_advanced_indexing_still_copies():
    x = torch.zeros(4)
    x[torch.tensor([0, 2])].add_(1)
    x[x >= 0].add_(1)
    np.testing.assert_array_equal(x.numpy(), np.zeros(4))


def test_recorded_in_place_on_a_slice_rebases_history_with_copyslices():
    y = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = y.clone()
    z[1:].mul_(y[1:])  # z = [y0, y1^2, y2^2]
    assert z.grad_fn.name() == "torch::autograd::CopySlices"
    np.testing.assert_array_equal(z.detach().numpy(), [1.0, 4.0, 9.0])
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 4.0, 6.0])


def test_nested_views_gradcheck():
    def f(a):
        b = a * 1.0
        b[0][1:].mul_(3.0)  # a view of a view
        b[:, 0].mul_(b[:, 2].clone())  # another view (the factor cloned: mul_ saves it)
        return (b * b).sum()

    a = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert tg.gradcheck(f, (a,))


def test_modifying_a_saved_value_through_a_view_is_caught():
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    y[0].add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_in_place_on_a_view_of_a_leaf_is_refused():
    leaf = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        leaf[0].add_(1)
    with torch.no_grad():
        leaf[0].add_(1)  # allowed without recording, and it writes through
    assert leaf.tolist() == [2.0, 1.0, 1.0]


def test_views_match_pytorch():
    real = pytest.importorskip("torch")

    def program(lib, a):
        b = a * 2
        b[1:, 0].mul_(b[:-1, 1].clone())
        b[0].add_(1)
        return (b**2).sum()

    data = np.random.default_rng(0).standard_normal((3, 2))
    ours = torch.tensor(data, requires_grad=True)
    theirs = real.tensor(data, requires_grad=True)
    program(torch, ours).backward()
    program(real, theirs).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)


def test_a_view_saved_by_an_in_place_op_on_its_own_base_fails_as_in_pytorch():
    a = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    b = a * 1.0
    b[:, 0].mul_(b[:, 2])  # mul_ saves b[:, 2], which the same mul_ then modifies
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (b * b).sum().backward()


def test_version_is_an_int_as_in_pytorch():
    x = torch.zeros(3)
    assert x._version == 0 and isinstance(x._version, int)
    x.add_(1)
    x[0] = 5.0
    x[1].mul_(2)
    assert x._version == 3
