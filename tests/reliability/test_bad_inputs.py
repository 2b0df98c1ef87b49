"""Every bad input gets a clear error, in both modes: one table row per input.

Each row is one line holding a lambda. The test asserts that the error
  - is tracegrad's own type (compiled mode) or PyTorch's type (eager mode;
    checked against real PyTorch when it is installed),
  - names the op and the shapes or dtypes involved,
  - and points at THIS file and the row's line (the user's line).
tests/README.md lists the same table in prose.

Eager rows are `lambda M: ...` and run with M = tracegrad.eager (and with
M = torch for the class comparison). Compiled rows trace with the NumPy
interpreter backend: every error here happens while tracing, before any
kernel is built; the few that need a kernel (index arrays that are data) run
through Numba too.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as E
from tracegrad.ops.core import ArgumentError, OutOfRangeError, TracegradError

HERE = os.path.basename(__file__)
I = dict(backend="interpret")
x23, x34, x3, x4 = np.ones((2, 3)), np.ones((3, 4)), np.ones(3), np.ones(4)
i3 = np.arange(3)


def vg(fn, **kw):
    return tg.value_and_grad(fn, **{**I, **kw})


def cc(fn, **kw):
    return tg.compile(fn, **{**I, **kw})


def F(M):  # nn.functional of either library
    return __import__(M.__name__ + ".nn.functional", fromlist=["_"])


def nn(M):
    return __import__(M.__name__ + ".nn", fromlist=["_"])


def rg(M, *shape):  # a float leaf that requires grad
    return M.ones(*shape, requires_grad=True)


def _backward(t):
    t.backward()


class Row(NamedTuple):
    id: str
    thunk: Callable
    cls: type  # eager: PyTorch's class; compiled: a TracegradError subclass
    fragments: tuple  # must all appear in the message (op, shapes, dtypes)


# ---------------------------------------------------------------- eager rows
EAGER = [
    # shape mismatches
    Row(
        "matmul inner dims", lambda M: M.ones(2, 3) @ M.ones(2, 3), RuntimeError, ("matmul", "2,3")
    ),
    Row(
        "mm inner dims", lambda M: M.mm(M.ones(2, 3), M.ones(2, 3)), RuntimeError, ("2x3 and 2x3",)
    ),
    Row(
        "Linear in_features", lambda M: nn(M).Linear(3, 2)(M.ones(4, 5)), RuntimeError, ("4,5", "3")
    ),
    Row("broadcast add", lambda M: M.ones(3) + M.ones(4), RuntimeError, ("add", "[3]", "[4]")),
    Row(
        "broadcast mul 2-d",
        lambda M: M.ones(2, 3) * M.ones(3, 2),
        RuntimeError,
        ("mul", "2,3", "3,2"),
    ),
    Row(
        "broadcast where",
        lambda M: M.where(M.ones(2) > 0, M.ones(3), M.ones(2)),
        RuntimeError,
        ("where", "[3]"),
    ),
    Row(
        "mse_loss shapes",
        lambda M: F(M).mse_loss(rg(M, 2, 3), M.ones(3, 2)),
        RuntimeError,
        ("2,3", "3,2"),
    ),
    Row(
        "expand",
        lambda M: M.ones(3).expand(2, 4),
        RuntimeError,
        ("Target sizes: [2, 4]", "Tensor sizes: [3]"),
    ),
    Row(
        "reshape size",
        lambda M: M.ones(2, 3).reshape(4, 2),
        RuntimeError,
        ("reshape", "[4, 2]", "6"),
    ),
    Row("view size", lambda M: M.ones(2, 3).view(5), RuntimeError, ("view", "[5]", "6")),
    Row(
        "reshape two -1",
        lambda M: M.ones(6).reshape(-1, -1),
        RuntimeError,
        ("reshape", "one dimension"),
    ),
    Row(
        "cat sizes",
        lambda M: M.cat([M.ones(2, 3), M.ones(3, 4)], dim=0),
        RuntimeError,
        ("cat", "2,3", "3,4"),
    ),
    Row(
        "cat 0-d",
        lambda M: M.cat([M.tensor(1.0), M.tensor(2.0)]),
        RuntimeError,
        ("zero-dimensional",),
    ),
    Row(
        "stack sizes",
        lambda M: M.stack([M.ones(2), M.ones(3)]),
        RuntimeError,
        ("stack", "[2]", "[3]"),
    ),
    Row(
        "sum dim range",
        lambda M: M.ones(2, 3).sum(dim=5),
        IndexError,
        ("sum", "Dimension out of range", "5"),
    ),
    Row(
        "softmax dim range",
        lambda M: M.ones(2, 3).softmax(dim=2),
        IndexError,
        ("softmax", "Dimension out of range"),
    ),
    Row(
        "transpose dim range",
        lambda M: M.ones(2, 3).transpose(0, 2),
        IndexError,
        ("transpose", "Dimension out of range"),
    ),
    Row(
        "permute repeated",
        lambda M: M.ones(2, 3).permute(0, 0),
        RuntimeError,
        ("permute", "(0, 0)"),
    ),
    Row("index int range", lambda M: M.ones(2, 3)[5], IndexError, ("index 5", "size 2")),
    Row("index negative range", lambda M: M.ones(2, 3)[-3], IndexError, ("index -3", "size 2")),
    Row(
        "index array range",
        lambda M: M.ones(2, 3)[M.tensor([0, 7])],
        IndexError,
        ("index 7", "size 2"),
    ),
    Row("too many indices", lambda M: M.ones(2, 3)[0, 0, 0], IndexError, ("too many indices",)),
    Row(
        "mask shape",
        lambda M: M.ones(2, 3)[M.tensor([True, False, True])],
        IndexError,
        ("mask", "3", "2"),
    ),
    Row(
        "cross_entropy target range",
        lambda M: F(M).cross_entropy(rg(M, 2, 3), M.tensor([0, 5])),
        IndexError,
        ("Target 5",),
    ),
    Row(
        "cross_entropy batch",
        lambda M: F(M).cross_entropy(rg(M, 2, 3), M.tensor([0, 1, 2])),
        ValueError,
        ("2", "3"),
    ),
    # dtypes
    Row("index float array", lambda M: M.ones(2, 3)[M.tensor([0.0])], IndexError, ("float",)),
    Row(
        "where float condition",
        lambda M: M.where(M.ones(2), M.ones(2), M.zeros(2)),
        RuntimeError,
        ("where", "bool", "float"),
    ),
    Row("sub bools", lambda M: M.tensor([True]) - M.tensor([False]), RuntimeError, ("bool",)),
    Row("neg bool", lambda M: -M.tensor([True]), RuntimeError, ("bool",)),
    Row("mean of int", lambda M: M.tensor([1, 2]).mean(), RuntimeError, ("mean", "Long")),
    Row(
        "int @ float",
        lambda M: M.ones(2, 3, dtype=M.int64) @ M.ones(3, 2),
        RuntimeError,
        ("dtype",),
    ),
    Row(
        "softmax of int",
        lambda M: M.tensor([1, 2]).softmax(dim=0),
        NotImplementedError,
        ("softmax", "Long"),
    ),
    Row(
        "requires_grad int tensor()",
        lambda M: M.tensor([1, 2], requires_grad=True),
        RuntimeError,
        ("Only Tensors of floating point", "int64"),
    ),
    Row(
        "requires_grad bool tensor()",
        lambda M: M.tensor([True], requires_grad=True),
        RuntimeError,
        ("Only Tensors of floating point", "bool"),
    ),
    Row(
        "requires_grad_() on int",
        lambda M: M.tensor([1, 2]).requires_grad_(),
        RuntimeError,
        ("only Tensors of floating point", "int64"),
    ),
    Row(
        "ones int requires_grad",
        lambda M: M.ones(2, dtype=M.int64, requires_grad=True),
        RuntimeError,
        ("Only Tensors of floating point", "int64"),
    ),
    # ragged lists, None, strings
    Row("ragged list", lambda M: M.tensor([[1.0, 2.0], [3.0]]), ValueError, ("tensor", "2")),
    Row("ragged deep list", lambda M: M.tensor([[[1.0], [2.0]], [[3.0]]]), ValueError, ("tensor",)),
    Row("tensor(None)", lambda M: M.tensor(None), RuntimeError, ("NoneType",)),
    Row("tensor(str)", lambda M: M.tensor("abc"), TypeError, ("str",)),
    Row("exp(None)", lambda M: M.exp(None), TypeError, ("exp", "NoneType")),
    Row("tensor + None", lambda M: M.ones(1) + None, TypeError, ("NoneType",)),
    Row("tensor * str", lambda M: M.ones(1) * "a", TypeError, ("str",)),
    Row("matmul with None", lambda M: M.matmul(M.ones(2), None), TypeError, ("matmul", "NoneType")),
    # non-scalar outputs
    Row(
        "backward of a vector",
        lambda M: _backward(rg(M, 2) * 2),
        RuntimeError,
        ("only for scalar outputs", "2"),
    ),
    Row(
        "autograd.grad of a vector",
        lambda M: (lambda x: M.autograd.grad(x * 2, [x]))(rg(M, 2)),
        RuntimeError,
        ("only for scalar outputs", "2"),
    ),
]

# Rows whose PyTorch original cannot be written the same way (tracegrad-only API).
EAGER_ONLY = [
    Row(
        "take_along_axis index range",
        lambda M: tg.take_along_axis(M.ones(2, 3), M.tensor([[0], [5]]), axis=1),
        RuntimeError,
        ("take_along_axis", "index 5", "size 3"),
    ),
    Row(
        "take_along_axis ndim",
        lambda M: tg.take_along_axis(M.ones(2, 3), M.tensor([0, 1]), axis=1),
        RuntimeError,
        ("take_along_axis", "f32[2,3]", "i64[2]"),
    ),
    Row(
        "tg.concatenate sizes",
        lambda M: tg.concatenate([M.ones(2, 3), M.ones(3, 4)], axis=0),
        RuntimeError,
        ("concatenate", "f32[2,3]", "f32[3,4]"),
    ),
    Row("tg.exp(str)", lambda M: tg.exp("abc"), TypeError, ("exp", "str")),
]


def _raise(thunk, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            thunk(*args)
        except Exception as exc:
            return exc
    raise AssertionError("no error was raised")


def _assert_names_everything(row: Row, exc: BaseException):
    text = str(exc)
    missing = [f for f in row.fragments if f not in text]
    assert not missing, f"{row.id}: message lacks {missing}: {type(exc).__name__}: {text}"
    line = row.thunk.__code__.co_firstlineno
    assert f"{HERE}:{line}" in text, f"{row.id}: message does not point at {HERE}:{line}: {text}"


@pytest.mark.parametrize("row", EAGER + EAGER_ONLY, ids=lambda r: r.id)
def test_eager_bad_input(row):
    exc = _raise(row.thunk, E)
    assert isinstance(exc, row.cls), f"{row.id}: {type(exc).__mro__} is not a {row.cls}"
    _assert_names_everything(row, exc)


@pytest.mark.parametrize("row", EAGER, ids=lambda r: r.id)
def test_eager_error_class_is_pytorchs(row):
    torch = pytest.importorskip("torch")
    theirs = _raise(row.thunk, torch)
    ours = _raise(row.thunk, E)
    assert isinstance(ours, type(theirs)), (
        f"{row.id}: PyTorch raises {type(theirs).__name__}({theirs}), tracegrad.eager "
        f"{type(ours).__name__}({ours})"
    )


# ------------------------------------------------------------- compiled rows
COMPILED = [
    # shape mismatches
    Row(
        "matmul inner dims",
        lambda: vg(lambda a, b: tg.sum(a @ b))(x23, x23),
        tg.ShapeError,
        ("matmul", "f64[2,3]"),
    ),
    Row(
        "matmul batch dims",
        lambda: vg(lambda a: tg.sum(tg.matmul(a, np.ones((2, 3, 3)))))(np.ones((3, 2, 3))),
        tg.ShapeError,
        ("matmul", "f64[3,2,3]", "f64[2,3,3]"),
    ),
    Row(
        "matmul 0-d",
        lambda: vg(lambda a: tg.sum(tg.matmul(a, a)))(np.array(2.0)),
        tg.ShapeError,
        ("matmul", "f64[]"),
    ),
    Row(
        "broadcast add",
        lambda: vg(lambda a, b: tg.sum(a + b))(x3, x4),
        tg.ShapeError,
        ("add", "f64[3]", "f64[4]"),
    ),
    Row(
        "broadcast where",
        lambda: vg(lambda a: tg.sum(tg.where(a > 0, a, x4)))(x3),
        tg.ShapeError,
        ("where", "f64[3]", "f64[4]"),
    ),
    Row(
        "broadcast_to",
        lambda: vg(lambda a: tg.sum(tg.broadcast_to(a, (2, 4))))(x3),
        tg.ShapeError,
        ("broadcast_to", "(2, 4)", "f64[3]"),
    ),
    Row(
        "reshape size",
        lambda: vg(lambda a: tg.sum(tg.reshape(a, (4, 2))))(x23),
        tg.ShapeError,
        ("reshape", "(4, 2)", "f64[2,3]"),
    ),
    Row(
        "reshape method",
        lambda: vg(lambda a: tg.sum(a.reshape(5)))(x23),
        tg.ShapeError,
        ("reshape", "5", "f64[2,3]"),
    ),
    Row(
        "concatenate sizes",
        lambda: vg(lambda a, b: tg.sum(tg.concatenate([a, b])))(x23, x34),
        tg.ShapeError,
        ("concatenate", "f64[2,3]", "f64[3,4]"),
    ),
    Row(
        "concatenate 0-d",
        lambda: vg(lambda a: tg.sum(tg.concatenate([a, a])))(np.array(1.0)),
        tg.ShapeError,
        ("concatenate", "f64[]"),
    ),
    Row(
        "stack shapes",
        lambda: vg(lambda a, b: tg.sum(tg.stack([a, b])))(x3, x4),
        tg.ShapeError,
        ("stack", "(3,)", "(4,)"),
    ),
    Row(
        "sum axis range",
        lambda: vg(lambda a: tg.sum(a, axis=5))(x23),
        tg.ShapeError,
        ("sum", "5", "f64[2,3]"),
    ),
    Row(
        "softmax axis range",
        lambda: vg(lambda a: tg.sum(tg.softmax(a, axis=2)))(x23),
        tg.ShapeError,
        ("softmax", "2", "f64[2,3]"),
    ),
    Row(
        "transpose axes",
        lambda: vg(lambda a: tg.sum(tg.transpose(a, (0, 0))))(x23),
        tg.ShapeError,
        ("transpose", "(0, 0)", "f64[2,3]"),
    ),
    Row(
        "squeeze size-3 axis",
        lambda: vg(lambda a: tg.sum(tg.squeeze(a, 1)))(x23),
        tg.ShapeError,
        ("squeeze", "(2, 3)"),
    ),
    Row(
        "index int range",
        lambda: vg(lambda a: tg.sum(a[5]))(x23),
        tg.ShapeError,
        ("getitem", "5", "size 2"),
    ),
    Row(
        "index constant array range",
        lambda: vg(lambda a: tg.sum(a[np.array([0, 7])]))(x23),
        tg.ShapeError,
        ("getitem", "7", "size 2"),
    ),
    Row(
        "too many indices",
        lambda: vg(lambda a: tg.sum(a[0, 0, 0]))(x23),
        tg.ShapeError,
        ("getitem", "too many indices", "2"),
    ),
    Row(
        "traced bool mask",
        lambda: vg(lambda a: tg.sum(a[a > 0]))(x23),
        TracegradError,
        ("getitem", "mask", "(2, 3)", "where"),
    ),
    Row(
        "take_along_axis ndim",
        lambda: vg(lambda a: tg.sum(tg.take_along_axis(a, i3[:2], axis=1)))(x23),
        tg.ShapeError,
        ("take_along_axis", "f64[2,3]", "i64[2]"),
    ),
    Row(
        "index array data out of range",
        lambda: vg(lambda a, i: tg.sum(a[i]))(x23, np.array([0, 7])),
        OutOfRangeError,
        ("getitem", "index 7", "size 2", "f64[2,3]"),
    ),
    Row(
        "take_along_axis data out of range",
        lambda: vg(lambda a, i: tg.sum(tg.take_along_axis(a, i, axis=1)))(
            x23, np.array([[0], [5]])
        ),
        OutOfRangeError,
        ("take_along_axis", "index 5", "size 3"),
    ),
    # dtypes
    Row(
        "grad wrt int array",
        lambda: vg(lambda a: tg.sum(a * 2.0))(i3),
        tg.DTypeError,
        ("int64", "'a'"),
    ),
    Row(
        "grad wrt bool array",
        lambda: vg(lambda a: tg.sum(a * 2.0))(i3 > 0),
        tg.DTypeError,
        ("bool", "'a'"),
    ),
    Row(  # complex arrays are supported (issue 26); a complex output needs holomorphic
        "grad of complex output",
        lambda: vg(lambda a: tg.sum(tg.tanh(a)))(x3 + 0j),
        tg.DTypeError,
        ("complex128", "holomorphic=True"),
    ),
    Row(
        "holomorphic grad wrt real array",
        lambda: tg.value_and_grad(lambda a: tg.sum(a * 1j), holomorphic=True)(x3),
        tg.DTypeError,
        ("holomorphic=True requires inputs with complex dtype", "float64"),
    ),
    Row(
        "compile of object array",
        lambda: cc(lambda a: a * 2)(np.array([1.0, None])),
        tg.DTypeError,
        ("'a'", "object"),
    ),
    Row(
        "masked array",
        lambda: vg(lambda a: tg.sum(a))(np.ma.array(x3, mask=[0, 1, 0])),
        tg.DTypeError,
        ("'a'", "masked array"),
    ),
    Row(
        "rank 33 array",
        lambda: cc(lambda a: a * 2)(np.ones((1,) * 33)),
        tg.ShapeError,
        ("'a'", "33 dimensions"),
    ),
    Row(
        "grad wrt object array",
        lambda: vg(lambda a: tg.sum(a))(np.array([1.0, None])),
        tg.DTypeError,
        ("object", "'a'"),
    ),
    Row(
        "exp of int", lambda: cc(lambda a: tg.exp(a))(i3), tg.DTypeError, ("exp", "int64", "i64[3]")
    ),
    Row("log of bool", lambda: cc(lambda a: tg.log(a))(i3 > 0), tg.DTypeError, ("log", "bool")),
    Row(
        "softmax of int",
        lambda: cc(lambda a: tg.softmax(a))(i3),
        tg.DTypeError,
        ("softmax", "int64"),
    ),
    Row("sub of bools", lambda: cc(lambda a: a - a)(i3 > 0), tg.DTypeError, ("sub", "bool")),
    Row("matmul of bools", lambda: cc(lambda a: a @ a)(i3 > 0), tg.DTypeError, ("matmul", "bool")),
    Row(
        "where float condition",
        lambda: cc(lambda a: tg.where(a, a, a))(x3),
        tg.DTypeError,
        ("where", "bool", "float64"),
    ),
    Row(
        "index float array",
        lambda: cc(lambda a, i: a[i])(x3, np.array([0.0])),
        tg.DTypeError,
        ("getitem", "float64"),
    ),
    Row(
        "integer output for grad",
        lambda: vg(lambda a: tg.sum(a > 0))(x3),
        tg.DTypeError,
        ("real-valued outputs", "int64"),
    ),
    # ragged lists, None, strings
    Row(
        # (a list argument is a pytree, as in JAX: `a * 2` would repeat it; the array
        # made of it is where raggedness is an error)
        "ragged list argument",
        lambda: cc(lambda a: tg.exp(a))([[1.0, 2.0], [3.0]]),
        tg.ShapeError,
        ("list", "inhomogeneous"),
    ),
    Row(
        "ragged list to tg.exp",
        lambda: tg.exp([[1.0, 2.0], [3.0]]),
        tg.ShapeError,
        ("list", "inhomogeneous"),
    ),
    Row(
        "None differentiated",
        lambda: vg(lambda a: tg.sum(a))(None),
        TracegradError,
        ("'a'", "NoneType"),
    ),
    Row(
        "str differentiated", lambda: vg(lambda a: tg.sum(a))("abc"), TracegradError, ("'a'", "str")
    ),
    Row(
        "None used as an array",
        lambda: cc(lambda a, b: a * b)(x3, None),
        ArgumentError,
        ("mul", "NoneType"),
    ),
    Row(
        "str used as an array",
        lambda: cc(lambda a, b: tg.exp(b) + a)(x3, "s"),
        ArgumentError,
        ("exp", "str"),
    ),
    Row("tg.exp(None) on NumPy", lambda: tg.exp(None), ArgumentError, ("exp", "NoneType")),
    # argnums
    Row(
        "argnums out of range",
        lambda: vg(lambda a: tg.sum(a), argnums=1)(x3),
        TracegradError,
        ("argnums=1", "1 positional"),
    ),
    Row(
        "argnums negative range",
        lambda: vg(lambda a: tg.sum(a), argnums=-2)(x3),
        TracegradError,
        ("argnums=-2",),
    ),
    Row(
        "argnums not an int",
        lambda: tg.value_and_grad(lambda a: tg.sum(a), argnums="a"),
        TracegradError,
        ("argnums", "'a'"),
    ),
    Row(
        "argnums empty",
        lambda: tg.value_and_grad(lambda a: tg.sum(a), argnums=()),
        TracegradError,
        ("argnums", "()"),
    ),
    Row(
        "argnums at a static string",
        lambda: vg(lambda a, s: tg.sum(a), argnums=1)(x3, "s"),
        TracegradError,
        ("'s'", "str"),
    ),
    # non-scalar outputs, structure
    Row(
        "grad of a vector",
        lambda: tg.grad(lambda a: a * 2, **I)(x3),
        TracegradError,
        ("scalar", "(3,)", "f64[3]"),
    ),
    Row(
        "value_and_grad of a matrix",
        lambda: vg(lambda a: a * 2)(x23),
        TracegradError,
        ("scalar", "(2, 3)"),
    ),
    Row(
        "grad of a tuple",
        lambda: vg(lambda a: (tg.sum(a), tg.sum(a)))(x3),
        TracegradError,
        ("scalar", "(*, *)"),
    ),
    Row(
        "has_aux not a pair",
        lambda: vg(lambda a: tg.sum(a), has_aux=True)(x3),
        TracegradError,
        ("has_aux", "pair"),
    ),
    # data-dependent Python control flow
    Row(
        "if on a traced value",
        lambda: cc(lambda a: a if tg.sum(a) > 0 else -a)(x3),
        TracegradError,
        ("bool", "where"),
    ),
    Row(
        "float() of a traced value",
        lambda: cc(lambda a: a * float(tg.sum(a)))(x3),
        TracegradError,
        ("float", "where"),
    ),
    Row(
        "unsupported NumPy function",  # (np.linalg.eig is supported since issue 26)
        lambda: cc(lambda a: np.linalg.cond(a))(np.eye(2)),
        TracegradError,
        ("cond",),
    ),
]


@pytest.mark.parametrize("row", COMPILED, ids=lambda r: r.id)
def test_compiled_bad_input(row):
    exc = _raise(row.thunk)
    assert isinstance(exc, row.cls), f"{row.id}: {type(exc).__mro__} is not a {row.cls}"
    assert isinstance(exc, TracegradError), f"{row.id}: {type(exc).__name__} is not tracegrad's"
    _assert_names_everything(row, exc)


# Runtime errors (index arrays are data) through Numba kernels, and a few
# trace-time rows with the Numba backend (the error comes before any kernel).
NUMBA = [
    Row(
        "getitem data out of range",
        lambda: tg.value_and_grad(lambda a, i: tg.sum(a[i]))(x23, np.array([0, -3])),
        OutOfRangeError,
        ("getitem", "index -3", "size 2"),
    ),
    Row(
        "take_along_axis data out of range",
        lambda: tg.value_and_grad(lambda a, i: tg.sum(tg.take_along_axis(a, i, axis=1)))(
            x23, np.array([[0], [7]])
        ),
        OutOfRangeError,
        ("take_along_axis", "index 7", "size 3"),
    ),
    Row(
        "matmul inner dims",
        lambda: tg.value_and_grad(lambda a, b: tg.sum(a @ b))(x23, x23),
        tg.ShapeError,
        ("matmul", "f64[2,3]"),
    ),
    Row(
        "grad wrt int array",
        lambda: tg.grad(lambda a: tg.sum(a * 2.0))(i3),
        tg.DTypeError,
        ("int64", "'a'"),
    ),
]


@pytest.mark.parametrize("row", NUMBA, ids=lambda r: r.id)
def test_numba_bad_input(row):
    exc = _raise(row.thunk)
    assert isinstance(exc, row.cls), f"{row.id}: {type(exc).__mro__} is not a {row.cls}"
    _assert_names_everything(row, exc)


def test_kernel_keeps_working_after_an_out_of_range_call():
    """A bad call must not poison the compiled function."""
    f = tg.value_and_grad(lambda a, i: tg.sum(tg.take_along_axis(a, i, axis=1)))
    good = np.array([[2], [0]])
    value, grad = f(x23 * 3.0, good)
    with pytest.raises(OutOfRangeError):
        f(x23 * 3.0, np.array([[3], [0]]))
    value2, grad2 = f(x23 * 3.0, good)
    assert value2 == value == 6.0
    np.testing.assert_array_equal(grad2, [[0, 0, 1], [1, 0, 0]])


# ----------------------------------------- unusual but valid inputs: no Numba noise
UNUSUAL = {
    "empty array": (lambda a: tg.sum(tg.tanh(a) * 2.0), np.ones((0, 3))),
    "size-1 dims": (lambda a: tg.sum(tg.tanh(a) * 2.0), np.full((1, 1, 3), 0.5)),
    "0-d array": (lambda a: tg.sum(tg.tanh(a) * 2.0), np.array(0.5)),
    "float16": (lambda a: tg.sum(tg.tanh(a) * 2.0), np.full(3, 0.5, np.float16)),
}


@pytest.mark.parametrize("name", sorted(UNUSUAL))
def test_unusual_valid_inputs_compile_without_numba_errors_or_fallbacks(name):
    """Numba typing errors must never reach the user, not even as a fallback warning."""
    fn, x = UNUSUAL[name]
    reference = tg.value_and_grad(fn, backend="interpret")(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        value, grad = tg.value_and_grad(fn)(x)
    assert np.asarray(value).dtype == np.asarray(reference[0]).dtype
    np.testing.assert_allclose(value, reference[0], rtol=1e-3)
    np.testing.assert_allclose(grad, reference[1], rtol=1e-3)


@pytest.mark.parametrize(
    "dtypes", [("int64", "int64"), ("bool", "int64"), ("uint8", "uint8"), ("int32", "float32")]
)
def test_forward_kernels_on_integer_and_bool_arrays_match_numpy(dtypes):
    f = tg.compile(lambda a, b: a * b + 1)
    a = np.array([0, 1, 2]).astype(dtypes[0])
    b = np.array([3, 4, 5]).astype(dtypes[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = f(a, b)
    expected = a * b + 1
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_readme_lists_every_bad_input_row():
    """tests/README.md's table of bad inputs names exactly the rows of this file."""
    import re

    with open(os.path.join(os.path.dirname(__file__), os.pardir, "README.md")) as f:
        readme = f.read()
    listed = set(re.findall(r"`(test_\w+_bad_input\[[^\]]+\])`", readme))
    rows = {f"test_eager_bad_input[{r.id}]" for r in EAGER + EAGER_ONLY}
    rows |= {f"test_compiled_bad_input[{r.id}]" for r in COMPILED}
    rows |= {f"test_numba_bad_input[{r.id}]" for r in NUMBA}
    assert listed == rows, (sorted(rows - listed), sorted(listed - rows))
