"""Tensor API: constructors, dtypes, conversion, repr, indexing, errors."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad
import tracegrad.eager as torch


def repr_cases(M):
    return [
        M.tensor([7.0]),
        M.tensor([2.0], requires_grad=True),
        M.tensor([0.5, 0.3]),
        M.tensor([[1.0, 2.5], [100.0, -3.0]]),
        M.tensor([1e-5, 1.0]),
        M.tensor([1e9, 1.0]),
        M.tensor(7.0),
        M.tensor([1.0, 2.0], dtype=M.float64),
        M.tensor([1, 2]),
        M.tensor([True, False]),
        M.tensor([]),
        M.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
        M.tensor([-0.0, 1.0]),
        M.arange(12.0).reshape(3, 4) * 1.5,
        M.zeros(0, 3),
        M.tensor([[1, -20], [300, 4]]),
        M.tensor(3),
        M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True),
        M.arange(2000.0),
        M.arange(30.0) * 1.1,
        M.tensor(np.arange(24.0).reshape(2, 3, 4) / 7),
        M.tensor([1e-8, 1e8]),
        M.tensor(2.5, requires_grad=True) * 2,
        M.ones(3, dtype=M.int32),
        M.tensor([[1e10]]),
        M.tensor(np.linspace(-1, 1, 1200).reshape(40, 30).astype(np.float32)),
        M.tensor([123456.789, 0.001]),
        M.tensor([1.0, 2.0], requires_grad=True).sum(),
        M.tensor([0.1, 0.25], dtype=M.float64),
        M.zeros(2, 0, dtype=M.int64),
        M.tensor([float("nan")]),
        M.tensor([3.0, float("nan")]),
    ]


def test_repr_exact_strings():
    assert repr(torch.tensor([7.0])) == "tensor([7.])"
    assert repr(torch.tensor([2.0], requires_grad=True)) == "tensor([2.], requires_grad=True)"
    x = torch.tensor([3.0], requires_grad=True)
    assert repr(x * 9) == "tensor([27.], grad_fn=<MulBackward0>)"
    assert repr(torch.tensor([0.5, 0.3])) == "tensor([0.5000, 0.3000])"
    assert repr(torch.tensor([[1.0, 2.5], [100.0, -3.0]])) == (
        "tensor([[  1.0000,   2.5000],\n        [100.0000,  -3.0000]])"
    )
    assert (
        repr(torch.tensor([1.0, 2.0], dtype=torch.float64))
        == "tensor([1., 2.], dtype=torch.float64)"
    )
    assert repr(torch.tensor(7.0)) == "tensor(7.)"
    assert str(torch.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    assert repr(torch.tensor([1.0, 2.0], requires_grad=True).max(0)) == (
        "torch.return_types.max(\nvalues=tensor(2., grad_fn=<MaxBackward0>),\nindices=tensor(1))"
    )


def test_repr_matches_torch():
    real = pytest.importorskip("torch")
    for ours, theirs in zip(repr_cases(torch), repr_cases(real), strict=True):
        assert repr(ours) == repr(theirs)


def test_constructors_and_dtypes():
    assert torch.tensor([1.0, 2.0]).dtype is torch.float32
    assert torch.tensor(np.array([1.0, 2.0])).dtype is torch.float64  # float64 stays
    assert torch.tensor([1, 2]).dtype is torch.int64
    assert torch.tensor([True]).dtype is torch.bool
    assert repr(torch.float32) == "torch.float32" and repr(torch.float64) == "torch.float64"
    assert repr(torch.int64) == "torch.int64" and repr(torch.bool) == "torch.bool"
    assert torch.float is torch.float32 and torch.double is torch.float64
    assert torch.tensor([1, 2], dtype=torch.float64).dtype is torch.float64
    assert torch.zeros(2, 3).shape == (2, 3) and torch.zeros((2, 3)).tolist() == [[0.0] * 3] * 2
    assert torch.ones(2, dtype=torch.int64).tolist() == [1, 1]
    assert torch.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert torch.empty(3).shape == (3,)
    assert torch.arange(4).tolist() == [0, 1, 2, 3] and torch.arange(4).dtype is torch.int64
    assert torch.arange(0, 1, 0.25).dtype is torch.float32
    torch.manual_seed(3)
    a = torch.rand(2, 2)
    torch.manual_seed(3)
    assert torch.rand(2, 2).tolist() == a.tolist()
    assert 0 <= a.min().item() and a.max().item() < 1
    assert torch.randn(3, 4).shape == (3, 4)
    assert torch.zeros_like(a).tolist() == [[0.0, 0.0]] * 2
    assert torch.ones_like(torch.ones(2, dtype=torch.int64)).dtype is torch.int64
    x = torch.randn(2, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None


def test_from_numpy_shares_memory_and_numpy_error():
    arr = np.zeros(3, np.float32)
    t = torch.from_numpy(arr)
    arr[0] = 5
    assert t.tolist() == [5.0, 0.0, 0.0]
    t.add_(1)
    assert arr.tolist() == [6.0, 1.0, 1.0]
    assert t.numpy() is arr
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"^Can't call numpy\(\) on Tensor that requires grad. "
        r"Use tensor.detach\(\).numpy\(\) instead.$",
    ):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0, 1.0]


def test_python_conversions_and_sizes():
    t = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and repr(t.shape) == "torch.Size([2, 3])"
    assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-1) == 3
    assert t.dim() == 2 and t.ndim == 2 and t.numel() == 6 and len(t) == 2
    assert [row.tolist() for row in t] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert t.T.shape == (3, 2) and t.T.tolist()[0] == [1.0, 4.0]
    assert t[1, 2].item() == 6.0 and isinstance(t.sum().item(), float)
    assert isinstance(torch.tensor([1, 2]).tolist()[0], int)
    assert float(torch.tensor(2.5)) == 2.5 and int(torch.tensor(3)) == 3
    with pytest.raises(
        RuntimeError, match="a Tensor with 6 elements cannot be converted to Scalar"
    ):
        t.item()
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(torch.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(torch.tensor(1.0))


def test_detach_clone_and_grad_assignment():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and np.shares_memory(d.numpy(), y._data)
    c = y.clone()
    assert c.grad_fn.name() == "CloneBackward0" and not np.shares_memory(c._data, y._data)
    c.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    x.grad = None
    assert x.grad is None
    x.grad = torch.zeros(2)
    with pytest.raises(RuntimeError, match="assigned grad has data of a different size"):
        x.grad = torch.zeros(3)


def test_comparisons_return_bool_tensors():
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for r in (a > 2, a < 2, a >= 2, a <= 2, a == 2, a != 2, torch.gt(a, 1), a.lt(3)):
        assert r.dtype is torch.bool and not r.requires_grad and r.grad_fn is None
    assert (a > 2).tolist() == [False, False, True]
    assert ((a > 1) & (a < 3)).tolist() == [False, True, False]


def test_function_and_method_forms_agree():
    x = torch.randn(3, 4)
    pairs = [
        (torch.exp(x), x.exp()),
        (torch.sum(x, dim=1), x.sum(dim=1)),
        (torch.reshape(x, (4, 3)), x.reshape(4, 3)),
        (torch.transpose(x, 0, 1), x.transpose(0, 1)),
        (torch.permute(x, (1, 0)), x.permute(1, 0)),
        (torch.matmul(x, x.T), x.matmul(x.T)),
        (torch.neg(x), x.neg()),
        (torch.max(x), x.max()),
        (torch.mean(x, 0, True), x.mean(0, True)),
        (torch.clamp(x, min=0), x.clamp(min=0)),
        (torch.softmax(x, 1), x.softmax(1)),
    ]
    for a, b in pairs:
        assert a.tolist() == b.tolist()
    values, indices = torch.max(x, dim=1)
    assert values.tolist() == x.max(dim=1).values.tolist()
    assert indices.dtype is torch.int64 and indices.tolist() == np.argmax(x.numpy(), 1).tolist()
    assert torch.min(x, 1).indices.tolist() == np.argmin(x.numpy(), 1).tolist()


def test_indexing_forms():
    a = torch.arange(12.0).reshape(3, 4)
    assert a[1].tolist() == [4.0, 5.0, 6.0, 7.0]
    assert a[:, 1].tolist() == [1.0, 5.0, 9.0]
    assert a[None].shape == (1, 3, 4)
    assert a[torch.tensor([2, 0])][:, 0].tolist() == [8.0, 0.0]
    assert a[a > 9].tolist() == [10.0, 11.0]
    assert a[[0, 1], [1, 2]].tolist() == [1.0, 6.0]
    a[0] = 0.0
    assert a[0].tolist() == [0.0] * 4


ERROR_CASES = [
    # (description, thunk, exception classes, text fragment)
    (
        "matmul shapes",
        lambda: torch.ones(2, 3) @ torch.ones(2, 3),
        (RuntimeError, tracegrad.ShapeError),
        "matmul",
    ),
    (
        "mm shapes",
        lambda: torch.mm(torch.ones(2, 3), torch.ones(2, 3)),
        (RuntimeError,),
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)",
    ),
    (
        "broadcast",
        lambda: torch.ones(2, 3) + torch.ones(2, 4),
        (RuntimeError, tracegrad.ShapeError),
        "add: shapes cannot be broadcast together",
    ),
    (
        "reshape",
        lambda: torch.ones(2, 3).reshape(4),
        (RuntimeError,),
        "shape '[4]' is invalid for input of size 6",
    ),
    (
        "view of transposed",
        lambda: torch.ones(3, 4).T.view(12),
        (RuntimeError,),
        "Use .reshape(...) instead.",
    ),
    (
        "cat",
        lambda: torch.cat([torch.ones(2, 3), torch.ones(3, 2)]),
        (RuntimeError,),
        "Sizes of tensors must match except in dimension 0",
    ),
    (
        "stack",
        lambda: torch.stack([torch.ones(2), torch.ones(3)]),
        (RuntimeError,),
        "stack expects each tensor to be equal size",
    ),
    (
        "index out of range",
        lambda: torch.ones(3)[5],
        (IndexError,),
        "index 5 is out of range for axis 0 with size 3",
    ),
    ("too many indices", lambda: torch.ones(3)[0, 1], (IndexError,), "too many indices"),
    ("dim out of range", lambda: torch.ones(2).sum(dim=3), (IndexError,), "Dimension out of range"),
    (
        "ragged list",
        lambda: torch.tensor([[1.0, 2.0], [3.0]]),
        (ValueError, tracegrad.ShapeError),
        "ragged",
    ),
    (
        "None data",
        lambda: torch.tensor(None),
        (RuntimeError, TypeError),
        "Could not infer dtype of NoneType",
    ),
    ("string data", lambda: torch.tensor("abc"), (TypeError,), "new(): invalid data type 'str'"),
    (
        "None operand",
        lambda: torch.ones(2) + None,
        (TypeError,),
        "add: expected an array, got NoneType",
    ),
    (
        "string operand",
        lambda: torch.ones(2) * "a",
        (TypeError,),
        "mul: expected an array, got str",
    ),
    (
        "int requires grad",
        lambda: torch.zeros(2, dtype=torch.int64, requires_grad=True),
        (RuntimeError,),
        "Only Tensors of floating point and complex dtype can require gradients",
    ),
    (
        "expand",
        lambda: torch.ones(2, 3).expand(4, 3),
        (RuntimeError,),
        "The expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0.  Target sizes: [4, 3].  Tensor sizes: [2, 3]",
    ),
]


@pytest.mark.parametrize(
    "desc,thunk,classes,fragment", ERROR_CASES, ids=[c[0] for c in ERROR_CASES]
)
def test_errors_name_op_and_user_line(desc, thunk, classes, fragment):
    with pytest.raises(classes) as info:
        thunk()
    text = str(info.value)
    assert fragment in text
    if isinstance(info.value, tracegrad.TracegradError):
        assert "test_tensor_api.py:" in text  # the user's file and line


def test_where_trap_and_safe_idiom():
    x = torch.tensor([-1.0, 4.0], requires_grad=True)
    torch.where(x > 0, torch.sqrt(x), 0.0).sum().backward()
    assert np.isnan(x.grad[0].item())  # the untaken branch's NaN leaks (as in PyTorch)
    x.grad = None
    safe = torch.where(x > 0, x, 1.0)  # make the untaken branch harmless first
    torch.where(x > 0, torch.sqrt(safe), 0.0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.25]
