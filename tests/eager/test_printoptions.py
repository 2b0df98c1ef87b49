"""torch.set_printoptions (issue 26): precision, threshold/edgeitems, linewidth, profiles
and sci_mode change the repr exactly as PyTorch's; the default comes back after."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(4)
DATA = {
    "floats": R.standard_normal((3, 5)),
    "long": np.arange(30, dtype=np.float64) / 7,
    "wide": R.standard_normal(12) * 100,
    "ints": np.arange(12).reshape(3, 4),
}
OPTIONS = [
    {"precision": 2},
    {"precision": 6},
    {"threshold": 10, "edgeitems": 2},
    {"linewidth": 40},
    {"profile": "short"},
    {"profile": "full"},
    {"sci_mode": True},
    {"sci_mode": False, "precision": 3},
]


@pytest.mark.parametrize("opts", OPTIONS, ids=[str(o) for o in OPTIONS])
def test_reprs_match_pytorch(opts):
    rt = pytest.importorskip("torch")
    got = {}
    for L in (tg, rt):
        L.set_printoptions(**opts)
        try:
            got[L.__name__] = [repr(L.tensor(v)) for v in DATA.values()]
        finally:
            L.set_printoptions(profile="default", sci_mode=None)
    assert got["tracegrad.eager"] == got["torch"]


def test_default_restored():
    tg.set_printoptions(precision=1)
    tg.set_printoptions(profile="default")
    assert repr(tg.tensor([1.23456])) == "tensor([1.2346])"
