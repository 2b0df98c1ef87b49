"""torch.tensor / torch.as_tensor dtype inference (issue 26): PyTorch's infer_scalar_type.
Python float -> float32, int -> int64, bool -> bool; a NumPy scalar or array, or a tensor,
keeps its dtype; a sequence promotes its elements' types, a float beating any integer.

The first test ports test_tensor_factory_type_inference and test_as_tensor of PyTorch's
test/test_tensor_creation_ops.py (default dtype float32) with their assertions and runs
under both libraries; the table below is checked against real torch where installed and
against hand-written dtypes always."""

import numpy as np
import pytest

import tracegrad.eager as tg


@pytest.fixture(params=["tracegrad", "torch"])
def torch(request):
    if request.param == "torch":
        return pytest.importorskip("torch")
    return tg


def test_tensor_factory_type_inference(torch):  # test_tensor_creation_ops.py
    default_dtype = torch.float32
    assert default_dtype is torch.tensor(()).dtype
    assert default_dtype is torch.tensor(5.0).dtype
    assert torch.int64 is torch.tensor(5).dtype
    assert torch.bool is torch.tensor(True).dtype
    assert torch.int32 is torch.tensor(5, dtype=torch.int32).dtype
    assert default_dtype is torch.tensor(((7, 5), (9, 5.0))).dtype
    assert default_dtype is torch.tensor(((5.0, 5), (3, 5))).dtype
    assert torch.int64 is torch.tensor(((5, 3), (3, 5))).dtype
    assert torch.float64 is torch.tensor(np.array(())).dtype
    assert torch.float64 is torch.tensor(np.array(5.0)).dtype
    assert torch.int64 is torch.tensor(np.array(5)).dtype
    assert torch.uint8 is torch.tensor(np.array(3, dtype=np.uint8)).dtype
    assert default_dtype is torch.tensor(((7, np.array(5)), (np.array(9), 5.0))).dtype
    assert torch.float64 is torch.tensor(((7, 5), (9, np.array(5.0)))).dtype
    assert torch.int64 is torch.tensor(((5, np.array(3)), (np.array(3), 5))).dtype


def test_as_tensor(torch):  # test_tensor_creation_ops.py: test_as_tensor (CPU parts)
    x = [[0, 1], [2, 3]]
    assert torch.equal(torch.tensor(x), torch.as_tensor(x))
    assert torch.equal(
        torch.tensor(x, dtype=torch.float32), torch.as_tensor(x, dtype=torch.float32)
    )
    y = torch.tensor(x)
    assert y is torch.as_tensor(y)
    assert y is not torch.as_tensor(y, dtype=torch.float32)
    for dtype in [np.float64, np.int64, np.int8, np.uint8]:  # doesn't copy
        n = np.random.rand(5, 6).astype(dtype)
        n_astensor = torch.as_tensor(n)
        assert torch.equal(torch.tensor(n), n_astensor)
        n_astensor[0][0] = 25.7
        assert torch.equal(torch.tensor(n), n_astensor)
    n = np.random.rand(5, 6).astype(np.float32)  # changing dtype causes a copy
    n_astensor = torch.as_tensor(n, dtype=torch.float64)
    assert torch.equal(torch.tensor(n, dtype=torch.float64), n_astensor)
    n_astensor[0][1] = 250.8
    assert not torch.equal(torch.tensor(n, dtype=torch.float64), n_astensor)


# data -> the dtype PyTorch infers (checked against torch 2.13 by the test below)
CASES = {
    "python float": (2.5, "float32"),
    "python int": (3, "int64"),
    "python bool": (True, "bool"),
    "np.float64 scalar": (np.float64(2.5), "float64"),
    "np.float32 scalar": (np.float32(2.5), "float32"),
    "np.float16 scalar": (np.float16(1.5), "float16"),
    "np.int32 scalar": (np.int32(3), "int32"),
    "np.int16 scalar": (np.int16(3), "int16"),
    "np.int8 scalar": (np.int8(3), "int8"),
    "np.uint8 scalar": (np.uint8(3), "uint8"),
    "np.bool_ scalar": (np.bool_(True), "bool"),
    "list of ints": ([1, 2], "int64"),
    "ints and a float": ([1.0, 2], "float32"),
    "bools": ([True, False], "bool"),
    "bool and int": ([True, 2], "int64"),
    "bool and float": ([True, 2.5], "float32"),
    "np.float64 scalars": ([np.float64(1.0), np.float64(2.0)], "float64"),
    "np.float64 and int": ([np.float64(1.0), 2], "float64"),
    "np.float64 and bool": ([np.float64(1.0), True], "float64"),
    "np.int32 scalars": ([np.int32(1), np.int32(2)], "int32"),
    "np.int32 and int": ([np.int32(1), 2], "int64"),
    "np.int32 and bool": ([np.int32(1), True], "int32"),
    "np.float32 and float": ([np.float32(1), 2.0], "float32"),
    "np.float16 and np.float64": ([np.float16(1), np.float64(2)], "float64"),
    "np.uint8 and np.int8": ([np.uint8(1), np.int8(2)], "int16"),
    "nested mixed": ([[1, 2.0], [3, 4]], "float32"),
    "empty list": ([], "float32"),
    "nested empty": ([[]], "float32"),
    "tuple": ((1, 2.0), "float32"),
    "float64 array": (np.array([1.0]), "float64"),
    "int32 array": (np.array([1], np.int32), "int32"),
    "0-d float64 array": (np.array(2.5), "float64"),
    "list of float64 arrays": ([np.array([1.0]), np.array([2.0])], "float64"),
    "list of float32 arrays and int": ([np.array([1.0], np.float32), [2]], "float32"),
}


@pytest.mark.parametrize("fn", ["tensor", "as_tensor"])
@pytest.mark.parametrize("case", list(CASES))
def test_inferred_dtype(case, fn):
    data, want = CASES[case]
    t = getattr(tg, fn)(data)
    assert str(t.dtype) == f"torch.{want}"
    np.testing.assert_array_equal(t.numpy(), np.asarray(data, dtype=want))


@pytest.mark.parametrize("case", list(CASES))
def test_inferred_dtype_matches_pytorch(case):
    rt = pytest.importorskip("torch")
    data, want = CASES[case]
    assert str(rt.tensor(data).dtype) == f"torch.{want}"
    assert str(rt.as_tensor(data).dtype) == f"torch.{want}"


def test_list_of_tensors_keeps_their_dtype(torch):
    ts = [torch.tensor(1.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64)]
    assert torch.tensor(ts).dtype is torch.float64
    ts = [torch.tensor(1, dtype=torch.int32), torch.tensor(2, dtype=torch.int32)]
    assert torch.tensor(ts).dtype is torch.int32
    assert torch.tensor(np.float64(2.5), requires_grad=True).dtype is torch.float64
    assert torch.tensor(np.float64(2.5), dtype=torch.float32).dtype is torch.float32
