"""Layout methods against PyTorch's semantics: contiguous, is_contiguous, stride,
storage_offset, view against reshape, t, transpose, permute, movedim, expand, flatten.

Most cases are ported from PyTorch's test/test_view_ops.py (TestViewOps, TestOldViewOps)
with their assertions; each runs under tracegrad.eager and, where it is installed, under
real torch too, so the port itself is checked. `is_view_of` is PyTorch's test helper:
`_base` is the root tensor whose memory the view shares.
"""

import numpy as np
import pytest

import tracegrad.eager as tg


@pytest.fixture(params=["tracegrad", "torch"])
def torch(request):
    if request.param == "torch":
        return pytest.importorskip("torch")
    return tg


def is_view_of(base, other) -> bool:
    return other is not base and other._base is base


def assert_equal(a, b):
    np.testing.assert_array_equal(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()))


# ------------------------------------------------------------- contiguous


def test_contiguous_self(torch):  # test_view_ops.py: test_contiguous_self
    t = torch.ones(5, 5)
    s = t.contiguous()
    assert s is t


def test_contiguous_nonview(torch):  # test_contiguous_nonview
    t = torch.ones(5, 5)
    nv = t.t().contiguous()
    assert not is_view_of(t, nv)
    nv[0, 0] = 0
    assert t[0, 0] != nv[0, 0]


def test_contiguous_copy_is_c_ordered(torch):
    x = torch.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for y in (
        x.transpose(1, 2),
        x.permute(2, 0, 1),
        x[:, :, ::2],
        x[:, :1].expand(2, 5, 4),
        x.t() if x.ndim <= 2 else x.mT,
    ):
        assert not y.is_contiguous()
        c = y.contiguous()
        assert c.is_contiguous() and c.shape == y.shape
        expected, stride = 1, []
        for size in reversed(tuple(c.shape)):
            stride.insert(0, expected)
            expected *= size
        assert c.stride() == tuple(stride)
        assert_equal(c, y)
        assert c._version == 0 and y._version == 0  # its own memory and version counter


def test_contiguous_is_differentiable(torch):
    """The copy records PyTorch's CloneBackward0 node; gradients flow to the base."""
    x = torch.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    y = x.t().contiguous()
    assert y.grad_fn.name() == "CloneBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "TBackward0"
    assert x.contiguous().grad_fn is None  # already contiguous: x itself, a leaf
    weights = torch.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    (y * weights).sum().backward()
    assert_equal(x.grad, weights.t())


def test_attention_heads_reassembled(torch):
    """The line of every multi-head attention, y.transpose(1, 2).contiguous().view(B, T, C):
    values and gradients equal reshape's."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)  # (B, nh, T, hs)
    grads = []
    for assemble in (
        lambda y: y.transpose(1, 2).contiguous().view(2, 3, 20),
        lambda y: y.transpose(1, 2).reshape(2, 3, 20),
    ):
        y = torch.tensor(data, requires_grad=True)
        out = assemble(y)
        assert out.shape == (2, 3, 20)
        (out * torch.tensor(np.arange(120, dtype=np.float32).reshape(2, 3, 20))).sum().backward()
        grads.append((out.detach().numpy().copy(), y.grad.numpy().copy()))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])
    np.testing.assert_array_equal(grads[0][0], data.transpose(0, 2, 1, 3).reshape(2, 3, 20))


# ------------------------------------------------------------ view and reshape

VIEW_MESSAGE = (
    "view size is not compatible with input tensor's size and stride (at least one "
    "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
)


def test_view_of_transposed_raises_pytorchs_error(torch):
    y = torch.ones(2, 4, 3, 5).transpose(1, 2)
    with pytest.raises(RuntimeError) as info:
        y.view(2, 3, 20)
    assert str(info.value).startswith(VIEW_MESSAGE)
    assert y.reshape(2, 3, 20).shape == (2, 3, 20)


def test_view(torch):  # TestOldViewOps.test_view
    tensor = torch.rand(15)
    template = torch.rand(3, 5)
    empty = torch.empty(0)
    target = template.size()
    assert tensor.view_as(template).size() == target
    assert tensor.view(3, 5).size() == target
    assert tensor.view(-1, 5).size() == target
    assert tensor.view(3, -1).size() == target
    assert empty.view(0).shape == (0,)
    assert empty.view(0, 3, 0, 1).size() == (0, 3, 0, 1)
    assert empty.view(-1).size() == (0,)
    assert empty.view(10, 3, -1).size() == (10, 3, 0)
    for shape in ((-1, 0), (3, 0, -1, 0)):
        with pytest.raises(
            RuntimeError, match="because the unspecified dimension size -1 can be any value"
        ):
            empty.view(*shape)
    for shape in ((15, 0), (7, -1), (15, -1, -1)):
        with pytest.raises(RuntimeError):
            tensor.view(*shape)

    # not contiguous in every dimension, but only contiguous dimensions are touched
    data = np.random.default_rng(0).random((4, 2, 5, 1, 6, 2, 9, 3)).astype(np.float32)
    tensor = torch.tensor(data).transpose(-1, 2).transpose(-2, 3)
    assert tensor.stride() == (3240, 1620, 1, 3, 54, 27, 324, 324)
    contig_tensor = tensor.clone()
    for view_size in (
        [8, 1, 3, 3, 3, 4, 1, 3, 5],
        [2, 4, 3, 1, 9, 2, 2, 3, 5, 1],
        [1, 1, 2, 1, 4, 3, 1, 1, 9, 1, 2, 1, 2, 3, 1, 5, 1, 1],
    ):
        assert_equal(tensor.view(*view_size), contig_tensor.view(*view_size))
    # invalid views: crossing [4, 2], [3]; [6, 2], [1, 5]; [9], [6, 2]
    for view_size in ([-1], [24, 9, 6, 2, 1, 5], [8, 3, 9, 6, 10], [8, 3, 54, 2, 1, 5]):
        with pytest.raises(RuntimeError, match="Use .reshape"):
            tensor.view(*view_size)

    # view with stride 0 dims: all dims are contiguous
    tensor = torch.empty(1, 1).expand(3, 4)
    contig_tensor = tensor.clone()
    for view_size in ([-1], [1, -1, 1], [-1, 1], [6, 2, 1], [1, 6, 2, 1]):
        assert_equal(tensor.view(*view_size), contig_tensor.view(*view_size))


def test_view_and_reshape_views(torch):  # test_view_view, test_reshape_view, ..._as_view
    for make in (
        lambda t: t.view(25),
        lambda t: torch.reshape(t, (25,)),
        lambda t: t.view_as(torch.empty(25)),
        lambda t: t.reshape_as(torch.empty(25)),
    ):
        t = torch.ones(5, 5)
        v = make(t)
        assert is_view_of(t, v)
        v[6] = 0
        assert t[1, 1] == v[6]


def test_reshape_nonview(torch):  # test_reshape_nonview
    t = torch.ones(5, 5)
    nv = torch.reshape(t.t(), (25,))
    assert not is_view_of(t, nv)
    nv[6] = 0
    assert t[1, 1] != nv[6]


def test_reshape(torch):  # TestOldViewOps.test_reshape (data_ptr as shared memory)
    x = torch.randn(3, 3)
    assert np.shares_memory(x.numpy(), x.reshape(-1).numpy())
    assert np.shares_memory(x.numpy(), x.reshape(1, 9, 1).numpy())
    with pytest.raises(RuntimeError):
        x.reshape(-1, -1)
    y = torch.randn(4, 4, 4)[:, 0, :]
    assert not np.shares_memory(y.numpy(), y.reshape(-1).numpy())
    assert_equal(y.contiguous().view(-1), y.reshape(-1))
    assert np.shares_memory(y.numpy(), y.reshape(2, 2, 4).numpy())
    s = torch.randn(())
    assert s.reshape(-1).shape == (1,)
    with pytest.raises(RuntimeError):
        s.reshape(2)
    empty = torch.tensor([])
    assert empty.reshape([0, 1]).shape == (0, 1)
    assert empty.reshape([1, -1]).shape == (1, 0)
    with pytest.raises(RuntimeError):
        empty.reshape(1)
    with pytest.raises(RuntimeError, match="because the unspecified dimension size -1"):
        torch.randn(0, 6).reshape(0, -1)


# ------------------------------------------------------ transposes and permutes


@pytest.mark.parametrize(
    "op", ["t", "T", "mT", "transpose", "swapdims", "swapaxes", "permute", "movedim", "moveaxis"]
)
def test_transposed_views(torch, op):  # test_t_view, test_T_view, test_transpose_view, ...
    make = {
        "t": lambda t: t.t(),
        "T": lambda t: t.T,
        "mT": lambda t: t.mT,
        "transpose": lambda t: torch.transpose(t, 0, 1),
        "swapdims": lambda t: torch.swapdims(t, 0, 1),
        "swapaxes": lambda t: torch.swapaxes(t, 0, 1),
        "permute": lambda t: t.permute(1, 0),
        "movedim": lambda t: torch.movedim(t, (0, 1), (1, 0)),
        "moveaxis": lambda t: torch.moveaxis(t, 0, 1),
    }[op]
    t = torch.ones(5, 5)
    v = make(t)
    assert is_view_of(t, v)
    assert not v.is_contiguous() and v.stride() == (1, 5)
    v[0, 1] = 0
    assert t[1, 0] == v[0, 1]


def test_t(torch):  # TestOldViewOps.test_t
    x = torch.randn(())
    assert_equal(x, x.t())
    x = torch.arange(4)
    assert_equal(x, x.t())
    x = torch.rand((2, 2))
    assert_equal(x.t(), x.transpose(0, 1))
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2 dimensions, but self is 3D"):
        torch.rand((2, 2, 2)).t()


@pytest.mark.filterwarnings("ignore:The use of `x.T` on tensors of dimension other than 2")
def test_T_and_movedim(torch):  # TestOldViewOps.test_T; test_movedim_view
    a = torch.randn(2, 3, 4)
    assert_equal(a.T, a.permute(2, 1, 0))
    b = torch.randn(10)
    assert_equal(b, b.T)
    x = torch.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert tuple(x.movedim(0, 2).shape) == (3, 4, 2)
    assert tuple(x.movedim((0, 2), (2, 0)).shape) == (4, 3, 2)
    np.testing.assert_array_equal(x.movedim(-1, 0).numpy(), np.moveaxis(x.numpy(), -1, 0))
    np.testing.assert_array_equal(
        x.movedim((0, 1), (-1, 0)).numpy(), np.moveaxis(x.numpy(), (0, 1), (-1, 0))
    )


def test_transpose_invalid(torch):  # test_transpose_invalid
    x = torch.rand(5, 6, 7, 8)
    for fn in (torch.swapdims, torch.swapaxes, torch.transpose):
        with pytest.raises(IndexError, match="Dimension out of range"):
            fn(x, 5, 0)
        with pytest.raises(IndexError, match="Dimension out of range"):
            fn(x, 0, 5)


# ------------------------------------------------------------------ expand


def test_expand_view(torch):  # test_expand_view, test_expand_as_view
    for make in (lambda t: t.expand(5, 5), lambda t: t.expand_as(torch.empty(5, 5))):
        t = torch.ones((5, 1))
        v = make(t)
        assert is_view_of(t, v)
        assert v.stride() == (1, 0) and not v.is_contiguous()


def test_expand(torch):  # TestOldViewOps.test_expand
    tensor = torch.rand(1, 8, 1)
    tensor2 = torch.rand(5)
    template = torch.rand(4, 8, 5)
    target = template.size()
    for t in (tensor, tensor2):
        assert t.expand_as(template).size() == target
        assert t.expand(4, 8, 5).size() == target
        assert t.expand(target).size() == target
    # double expand
    assert_equal(tensor2.expand(1, 5).expand(2, 2, 5), tensor2.repeat(2, 2, 1))
    # non-contiguous
    noncontig = torch.randn(5, 2, 1, 3)[:, 0]
    assert not noncontig.is_contiguous()
    assert_equal(noncontig.expand(2, 5, 4, 3), noncontig.contiguous().repeat(2, 1, 4, 1))
    # compatible with unsqueeze (PyTorch also gives the new size-1 dims the same strides;
    # tracegrad's stride() of a new size-1 dim is 0 -- it does not affect layout)
    assert_equal(tensor2.expand(1, 1, 5), tensor2.unsqueeze(0).unsqueeze(1))
    # -1 as target size
    assert_equal(tensor.expand(4, -1, 5), tensor.expand(4, 8, 5))
    with pytest.raises(
        RuntimeError,
        match=r"The expanded size of the tensor \(-1\) isn't "
        r"allowed in a leading, non-existing dimension 0",
    ):
        tensor2.expand(-1, -1)
    assert torch.zeros(0).expand((0,)).shape == (0,)


def test_expand_errors(torch):  # test_broadcast_to's error text
    with pytest.raises(
        RuntimeError,
        match=r"The expanded size of the tensor \(7\) must match "
        r"the existing size \(8\) at non-singleton "
        r"dimension 1.  Target sizes: \[4, 7, 5\].  Tensor "
        r"sizes: \[1, 8, 1\]",
    ):
        torch.rand(1, 8, 1).expand(4, 7, 5)
    with pytest.raises(
        RuntimeError,
        match=r"The expanded size of the tensor \(\d\) must match "
        r"the existing size \(\d\)",
    ):
        torch.broadcast_to(torch.rand(3, 2), (4, 3, 1))


# ----------------------------------------------------------- flatten, narrow


def test_flatten_view(torch):  # test_flatten_view (the cases without as_strided)
    t = torch.ones(1, 2, 3, 4)
    v = t.flatten()
    assert is_view_of(t, v)
    v[0] = 0
    assert t[0, 0, 0, 0] == v[0]
    t = torch.ones(1, 2, 3, 4).transpose(2, 3)
    v = t.flatten(0, 1)
    assert v._base is t._base  # views of the same base
    v[0, 0, 0] = 0
    assert t[0, 0, 0, 0] == 0


def test_flatten_nonview(torch):  # test_flatten_nonview
    for t, nv in (
        (torch.ones(2, 3, 2, 3).transpose(2, 3), lambda t: t.flatten(1, 3)),
        (torch.ones(2, 2).T, lambda t: t.flatten()),
    ):
        out = nv(t)
        assert out._base is None
        out.view(-1)[0] = 0
        assert t.reshape(-1)[0] == 1
    t = torch.ones(2, 2)
    assert t.flatten(1, 1) is t


def test_narrow_view_and_storage_offset(torch):  # test_narrow_view, storage_offset
    t = torch.ones((5, 5))
    v = torch.narrow(t, 1, 2, 2)
    assert is_view_of(t, v)
    assert v.storage_offset() == 2 and v.stride() == (5, 1) and not v.is_contiguous()
    v[0, 0] = 0
    assert t[0, 2] == v[0, 0]
    x = torch.ones(3, 4)
    assert x.storage_offset() == 0
    assert x[1:].storage_offset() == 4
    assert x.t()[1:].storage_offset() == 1
    assert x[1:, 2:].storage_offset() == 6


# ------------------------------------------------- strides and contiguity, case by case


LAYOUT_CASES = {
    "t": lambda L, x: x[0].t(),
    "transpose": lambda L, x: x.transpose(0, 2),
    "permute": lambda L, x: x.permute(2, 0, 1),
    "mT": lambda L, x: x.mT,
    "expand": lambda L, x: x[:, :1, :].expand(2, 5, 4),
    "expand new dim": lambda L, x: x.expand(3, 2, 3, 4),
    "unsqueeze": lambda L, x: x.unsqueeze(1),
    "unsqueeze last": lambda L, x: x.unsqueeze(-1),
    "unsqueeze transposed": lambda L, x: x.transpose(0, 1).unsqueeze(1),
    "squeeze": lambda L, x: x[:, :1].squeeze(1),
    "narrow": lambda L, x: x.narrow(2, 1, 2),
    "step slice": lambda L, x: x[:, ::2],
    "select": lambda L, x: x[:, 1],
    "view": lambda L, x: x.view(6, 4),
    "view of transposed": lambda L, x: x.transpose(0, 1).view(3, 2, 2, 2),
    "reshape of transposed": lambda L, x: x.transpose(1, 2).reshape(2, 12),
    "contiguous": lambda L, x: x.transpose(1, 2).contiguous(),
    "contiguous of expand": lambda L, x: x[:, :1, :].expand(2, 5, 4).contiguous(),
    "clone keeps the layout": lambda L, x: x.transpose(1, 2).clone(),
    "add keeps the layout": lambda L, x: x.transpose(1, 2) + 1,
    "double keeps the layout": lambda L, x: x.transpose(1, 2).double(),
    "flatten of transposed": lambda L, x: x.transpose(0, 1).flatten(),
    "split": lambda L, x: x.split(2, dim=2)[1],
    "unbind": lambda L, x: x.unbind(2)[0],
    "diagonal": lambda L, x: x[0, :3, :3].diagonal(),
    "matmul": lambda L, x: x @ x.mT,
    "movedim": lambda L, x: x.movedim(0, 2),
    "empty": lambda L, x: x[:, :0],
    "size-1 dims": lambda L, x: x[:, :1, :1],
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_shape_stride_contiguity_match_pytorch(case):
    """stride(), is_contiguous() and values of each layout op equal PyTorch's."""
    rt = pytest.importorskip("torch")
    got = []
    for L in (tg, rt):
        x = L.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
        y = LAYOUT_CASES[case](L, x)
        got.append((tuple(y.shape), y.stride(), y.is_contiguous(), y.numpy().tolist()))
    assert got[0] == got[1]


# ------------------------------------------------ unflatten, unfold, adjoint, channels_last


def test_unflatten(torch):  # test_torch.py: test_unflatten (with its assertions)
    def eq(a, b):
        assert tuple(a.shape) == tuple(b.shape)
        assert_equal(a, b)

    eq(torch.tensor([]).unflatten(0, (0, 1)), torch.empty(0, 1))
    eq(torch.tensor([1]).unflatten(0, (1, 1)), torch.tensor([[1]]))
    eq(torch.tensor([1, 2, 3, 4]).unflatten(0, (2, 2)), torch.tensor([[1, 2], [3, 4]]))
    eq(torch.tensor([1, 2, 3, 4]).unflatten(0, [2, 2]), torch.tensor([[1, 2], [3, 4]]))
    eq(torch.tensor([1, 2, 3, 4]).unflatten(0, torch.Size([2, 2])), torch.tensor([[1, 2], [3, 4]]))
    eq(torch.ones(2, 10).unflatten(1, (5, 2)), torch.ones(2, 5, 2))
    eq(torch.tensor([1, 2, 3, 4]).unflatten(0, (-1, 2)), torch.tensor([[1, 2], [3, 4]]))
    eq(torch.ones(2, 10).unflatten(1, (5, -1)), torch.ones(2, 5, 2))
    eq(torch.ones(2, 10).unflatten(1, (-1,)), torch.ones(2, 10))
    eq(torch.ones(2, 3 * 4 * 5 * 6).unflatten(1, (3, 4, -1, 6)), torch.ones(2, 3, 4, 5, 6))
    eq(torch.ones(2, 0, 2).unflatten(1, (3, -1, 4, 5)), torch.ones(2, 3, 0, 4, 5, 2))
    with pytest.raises(RuntimeError, match=r"Provided sizes \[2, 2\] don't multiply up to the size of dim 0 \(1\)"):  # fmt: skip
        torch.tensor([1]).unflatten(0, [2, 2])
    # (torch 2.13 wraps this IndexError in "RuntimeError: unflatten got an unexpected error")
    with pytest.raises((IndexError, RuntimeError), match=r"Dimension specified as 0 but tensor has no dimensions"):  # fmt: skip
        torch.tensor(1).unflatten(0, [0])
    with pytest.raises(RuntimeError, match=r"only one dimension can be inferred"):
        torch.randn(5, 10).unflatten(1, (-1, -1))
    with pytest.raises(RuntimeError, match=r"Provided sizes \[-1, 4\] don't multiply up to the size of dim 1 \(10\)"):  # fmt: skip
        torch.randn(5, 10).unflatten(1, (-1, 4))
    with pytest.raises(RuntimeError, match=r"the unspecified dimension size -1 can be any value and is ambiguous"):  # fmt: skip
        torch.randn(2, 0).unflatten(1, (2, -1, 0))


def test_unfold_scalars(torch):  # test_view_ops.py: TestOldViewOps.test_unfold_scalars
    x = torch.tensor(0.5)
    assert tuple(x.unfold(0, 0, 1).shape) == (0,)
    assert tuple(x.unfold(0, 0, 2).shape) == (0,)
    assert x.unfold(0, 1, 1).tolist() == [0.5]


def test_unfold_values_and_gradient(torch):
    """Windows along a dim as a new last dim; overlapping windows add their gradients
    (a view in both: test_unfold_is_a_view)."""
    x = torch.arange(6.0, requires_grad=True)
    w = x.unfold(0, 3, 2)  # [[0, 1, 2], [2, 3, 4]]
    assert w.tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0]]
    w.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 1.0, 1.0, 0.0]
    y = torch.arange(24.0).view(2, 3, 4).unfold(2, 2, 1)
    assert tuple(y.shape) == (2, 3, 3, 2)
    assert y[1, 2, 1].tolist() == [21.0, 22.0]


def test_unfold_is_a_view(torch):
    """A view of its base, as in PyTorch: same strides, base changes show through,
    writes into non-overlapping windows reach the base, and a later in-place change of
    the base takes part in the view's gradient (its history is remade)."""
    x = torch.arange(6.0)
    w = x.unfold(0, 3, 2)
    assert is_view_of(x, w) and w.stride() == (2, 1) and not w.is_contiguous()
    x[2] = 20.0
    assert w.tolist() == [[0.0, 1.0, 20.0], [20.0, 3.0, 4.0]]
    y = torch.arange(6.0)
    y.unfold(0, 2, 2).mul_(10)
    assert y.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    leaf = torch.arange(6.0, requires_grad=True)
    z = leaf.clone()
    v = z.unfold(0, 2, 1)
    z.mul_(2)  # after the view was made
    assert v.tolist()[1] == [2.0, 4.0]
    (v * torch.arange(10.0).view(5, 2)).sum().backward()
    assert leaf.grad.tolist() == [0.0, 6.0, 14.0, 22.0, 30.0, 18.0]


def test_unfold_write_into_a_view_under_autograd(torch):
    leaf = torch.arange(6.0, requires_grad=True)
    z = leaf.clone()
    z.unfold(0, 3, 3).mul_(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert z.tolist() == [0.0, 2.0, 6.0, 12.0, 20.0, 30.0]
    z.sum().backward()
    assert leaf.grad.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_as_strided_is_a_view(torch):
    leaf = torch.arange(6.0, requires_grad=True)
    z = leaf.clone()
    v = z.as_strided((2, 2), (1, 2), 1)  # [[1, 3], [2, 4]]
    assert v.tolist() == [[1.0, 3.0], [2.0, 4.0]] and v.stride() == (1, 2)
    v.mul_(3)
    assert z.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0, 5.0]
    v.sum().backward()
    assert leaf.grad.tolist() == [0.0, 3.0, 3.0, 3.0, 3.0, 0.0]
    r = torch.arange(4.0, requires_grad=True)
    r.as_strided((3, 2), (1, 1)).sum().backward()  # repeated elements add up
    assert r.grad.tolist() == [1.0, 2.0, 2.0, 1.0]


def test_adjoint_mH_H(torch):
    x = torch.arange(24.0).view(2, 3, 4)
    assert torch.equal(x.mH, x.transpose(-2, -1)) and torch.equal(x.adjoint(), x.mT)
    m = x[0]
    assert torch.equal(m.H, m.t())
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        _ = x.H


def test_channels_last(torch):
    x = torch.arange(24.0).view(1, 2, 3, 4)
    assert x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    y = x.contiguous(memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert y.stride() == (24, 1, 8, 2) and torch.equal(y, x)
    assert y.contiguous().stride() == (24, 12, 4, 1)
    assert x.contiguous(memory_format=torch.contiguous_format) is x


def test_inplace_layout_methods(torch):
    """unsqueeze_/squeeze_/t_/transpose_/swapdims_ change a tensor's shape in place: its
    values, history (PyTorch's in-place nodes) and version, and the gradient through them."""
    x = torch.arange(6.0, requires_grad=True)
    y = (x * 2).view(2, 3)
    assert y.unsqueeze_(0) is y and tuple(y.shape) == (1, 2, 3)
    assert y.grad_fn.name() == "UnsqueezeBackward1"
    y.squeeze_(0)
    assert tuple(y.shape) == (2, 3) and y.grad_fn.name() == "SqueezeBackward4"
    y.t_()
    assert tuple(y.shape) == (3, 2) and y.grad_fn.name() == "TBackward1"
    y.transpose_(0, 1)
    assert y.grad_fn.name() == "TransposeBackward1"
    y.swapdims_(0, 1)
    (y * torch.arange(6.0).view(3, 2)).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0, 8.0, 2.0, 6.0, 10.0]
    z = torch.ones(3, 1)
    z.squeeze_()
    assert tuple(z.shape) == (3,) and z._version == 1
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.unsqueeze_(0)
