"""torch.set_default_dtype / get_default_dtype (issue 26): with float64 as the default,
Python floats, float factories, new layers' parameters, torch.Tensor(...) and the repr
follow it as in PyTorch; float32 comes back after."""

import numpy as np
import pytest

import tracegrad.eager as tg

CASES = {
    "tensor of floats": lambda L: L.tensor([1.5, 2.0]),
    "tensor of ints": lambda L: L.tensor([1, 2]),
    "empty list": lambda L: L.tensor([]),
    "zeros": lambda L: L.zeros(2),
    "ones int": lambda L: L.ones(2, dtype=L.int64),
    "rand": lambda L: L.rand(2) * 0 + 0.0,
    "randn": lambda L: L.randn(2) * 0 + 0.0,
    "full float": lambda L: L.full((2,), 1.5),
    "full int": lambda L: L.full((2,), 3),
    "arange float": lambda L: L.arange(0.0, 1.0, 0.5),
    "arange int": lambda L: L.arange(3),
    "linspace": lambda L: L.linspace(0, 1, 3),
    "eye": lambda L: L.eye(2),
    "int times float": lambda L: L.tensor([1, 2]) * 2.5,
    "int true divide": lambda L: L.tensor([1, 2]) / 2,
    "Tensor constructor": lambda L: L.Tensor([1, 2]),
    "float32 stays": lambda L: L.tensor([1.0], dtype=L.float32) * 2.5,
    "Linear weight": lambda L: L.nn.Linear(2, 3).weight.detach() * 0 + 0.0,
    "LayerNorm weight": lambda L: L.nn.LayerNorm(2).weight.detach(),
    "Embedding weight": lambda L: L.nn.Embedding(2, 2).weight.detach() * 0 + 0.0,
    "GRUCell weight": lambda L: L.nn.GRUCell(2, 2).weight_ih.detach() * 0 + 0.0,
}


@pytest.fixture
def float64_default():
    tg.set_default_dtype(tg.float64)
    try:
        yield
    finally:
        tg.set_default_dtype(tg.float32)


@pytest.mark.parametrize("case", list(CASES))
def test_float64_default_matches_pytorch(case, float64_default):
    rt = pytest.importorskip("torch")
    rt.set_default_dtype(rt.float64)
    try:
        theirs = CASES[case](rt)
        want = (str(theirs.dtype), repr(theirs))
    finally:
        rt.set_default_dtype(rt.float32)
    ours = CASES[case](tg)
    assert (str(ours.dtype), repr(ours)) == want


def test_by_hand(float64_default):
    assert tg.get_default_dtype() == tg.float64
    assert tg.tensor([1.5]).dtype == tg.float64 and repr(tg.tensor([1.5])) == "tensor([1.5000])"
    assert repr(tg.tensor([1.5], dtype=tg.float32)) == "tensor([1.5000], dtype=torch.float32)"
    assert tg.nn.Linear(2, 2).weight.dtype == tg.float64
    np.testing.assert_array_equal(tg.zeros(2).numpy(), np.zeros(2, np.float64))
    with pytest.raises(TypeError, match="only floating-point types"):
        tg.set_default_dtype(tg.int64)


def test_restored_after():
    assert tg.get_default_dtype() == tg.float32 and tg.tensor([1.5]).dtype == tg.float32
