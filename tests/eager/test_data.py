"""Issue 13: torch.utils.data (TensorDataset, DataLoader) and the top level (device, cuda,
Generator, Variable, save/load) under `import tracegrad.eager as torch`."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

import tracegrad.eager as torch
from tracegrad.eager import nn
from tracegrad.eager.utils.data import (
    DataLoader,
    Dataset,
    TensorDataset,
    default_collate,
    random_split,
)


def make_ds(n=10):
    return TensorDataset(torch.arange(n * 2.0).reshape(n, 2), torch.arange(n))


def test_import_path_and_batches():
    assert torch.utils.data.DataLoader is DataLoader
    ds = make_ds()
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [6.0, 7.0] and y.item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert isinstance(batches[0], list) and batches[0][0].shape == (4, 2)
    assert batches[0][0].dtype == torch.float32 and batches[0][1].dtype == torch.int64
    assert len(DataLoader(ds, batch_size=4)) == 3
    dl = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dl) == 2 and [b[1].tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(torch.zeros(3), torch.zeros(4))


def test_shuffle_is_a_permutation_and_seeded():
    ds = make_ds(23)
    torch.manual_seed(5)
    first = [y.tolist() for _, y in DataLoader(ds, batch_size=5, shuffle=True)]
    torch.manual_seed(5)
    again = [y.tolist() for _, y in DataLoader(ds, batch_size=5, shuffle=True)]
    assert first == again
    flat = sum(first, [])
    assert sorted(flat) == list(range(23)) and flat != list(range(23))
    assert [len(b) for b in first] == [5, 5, 5, 5, 3]
    # each epoch reshuffles; a Generator fixes the order independently of the global seed
    dl = DataLoader(ds, batch_size=23, shuffle=True)
    assert next(iter(dl))[1].tolist() != next(iter(dl))[1].tolist()
    g = torch.Generator().manual_seed(0)
    a = next(iter(DataLoader(ds, batch_size=23, shuffle=True, generator=g)))[1].tolist()
    g.manual_seed(0)
    torch.manual_seed(123)
    b = next(iter(DataLoader(ds, batch_size=23, shuffle=True, generator=g)))[1].tolist()
    assert a == b
    # x and y stay paired after shuffling
    for x, y in DataLoader(ds, batch_size=4, shuffle=True, drop_last=True):
        np.testing.assert_array_equal(x.numpy()[:, 0], 2 * y.numpy())


def test_default_collate_rules_match_torch():
    rt = pytest.importorskip("torch")
    samples = [
        (1.5, 2, np.ones(2, np.float32), {"a": 1}),
        (2.5, 3, np.zeros(2, np.float32), {"a": 2}),
    ]
    ours, theirs = default_collate(samples), rt.utils.data.default_collate(samples)
    assert type(ours) is type(theirs) is list
    for a, b in zip(ours[:3], theirs[:3], strict=True):
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ours[3]["a"].tolist() == theirs[3]["a"].tolist()


def test_dataloader_batches_match_torch_unshuffled():
    rt = pytest.importorskip("torch")
    x = np.random.default_rng(0).normal(size=(11, 3)).astype(np.float32)
    y = np.arange(11)
    ours = DataLoader(TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=3)
    theirs = rt.utils.data.DataLoader(
        rt.utils.data.TensorDataset(rt.tensor(x), rt.tensor(y)), batch_size=3
    )
    assert len(ours) == len(theirs)
    for (a, b), (c, d) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        np.testing.assert_array_equal(b.numpy(), d.numpy())


def test_custom_dataset_random_split_and_grad_path():
    class Squares(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return torch.tensor([float(i)]), i * i

    batches = list(DataLoader(Squares(), batch_size=4))
    assert batches[0][0].shape == (4, 1) and batches[0][1].tolist() == [0, 1, 4, 9]
    parts = random_split(make_ds(10), [0.7, 0.3], generator=torch.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [7, 3]
    seen = sorted(int(p[i][1].item()) for p in parts for i in range(len(p)))
    assert seen == list(range(10))
    # a dataset of tensors that require grad: the batch is a stack, gradients flow back
    w = torch.ones(4, 2, requires_grad=True)
    (xb,) = next(iter(DataLoader(TensorDataset(w * 3), batch_size=2)))
    assert xb.grad_fn.name() == "StackBackward0"
    xb.sum().backward()
    assert w.grad.tolist() == [[3, 3], [3, 3], [0, 0], [0, 0]]


def test_device_cuda_variable():
    assert repr(torch.device("cpu")) == "device(type='cpu')" and str(torch.device("cpu")) == "cpu"
    assert torch.device("cpu").type == "cpu" and torch.device("cpu:0").index == 0
    assert repr(torch.device("cuda", 1)) == "device(type='cuda', index=1)"
    assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
    assert torch.accelerator.is_available() is False  # the PyTorch quickstart's device test
    assert torch.accelerator.current_accelerator() is None
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(2, 3, device=dev).to(dev)
    model = nn.Linear(3, 1).to(dev)
    assert model(x).shape == (2, 1)
    for factory in (
        lambda d: torch.zeros(2, device=d),
        lambda d: torch.rand(2, device=d),
        lambda d: torch.eye(2, device=d),
        lambda d: torch.arange(2, device=d),
    ):
        factory("cpu")
        with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
            factory("cuda")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        torch.device("gpu")
    y = torch.ones(2, requires_grad=True) * 2
    v = torch.autograd.Variable(y)
    assert v.grad_fn is None and not v.requires_grad and v.is_leaf
    assert torch.autograd.Variable(y, requires_grad=True).requires_grad
    assert isinstance(y, torch.autograd.Variable) and torch.Variable is torch.autograd.Variable
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got float"):
        torch.autograd.Variable(3.0)


def test_device_matches_torch():
    rt = pytest.importorskip("torch")
    for spec in ["cpu", "cpu:0", "cuda", "cuda:1", "meta"]:
        assert repr(torch.device(spec)) == repr(rt.device(spec))
        assert str(torch.device(spec)) == str(rt.device(spec))
    with pytest.raises(RuntimeError) as ours:
        torch.device("gpu")
    with pytest.raises(RuntimeError) as theirs:
        rt.device("gpu")
    assert str(ours.value) == str(theirs.value)


def test_manual_seed_repeats_everything_random():
    def draw():
        torch.manual_seed(7)
        model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout(0.5))
        return [
            model[0].weight.detach().numpy().copy(),
            torch.randn(3).numpy(),
            model(torch.ones(1, 1, 4, 4)).detach().numpy(),
        ]

    for a, b in zip(draw(), draw(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_save_load_state_dicts(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 1, 4, 4)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "epoch": 3,
            "lr": 0.5,
            "name": "cnn",
            "shape": (1, 2),
            "big": 2**70,
            "nan": float("nan"),
        },
        path,
    )
    loaded = torch.load(path, weights_only=True)
    assert loaded["epoch"] == 3 and loaded["name"] == "cnn" and loaded["shape"] == (1, 2)
    assert loaded["big"] == 2**70 and math.isnan(loaded["nan"]) and loaded["lr"] == 0.5
    assert list(loaded["model"]) == list(model.state_dict())
    for k, v in model.state_dict().items():
        assert loaded["model"][k].dtype == v.dtype
        np.testing.assert_array_equal(loaded["model"][k].numpy(), v.numpy())
    torch.manual_seed(1)
    fresh = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    fresh.load_state_dict(loaded["model"])
    x = torch.randn(2, 1, 4, 4)
    model.eval(), fresh.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), fresh(x).detach().numpy())
    opt2 = torch.optim.Adam(fresh.parameters(), lr=0.01)
    opt2.load_state_dict(loaded["opt"])
    assert opt2.state_dict()["state"][0]["step"] == 1
    # file objects work too
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    assert list(torch.load(buf)) == list(model.state_dict())
    # PyTorch's layout: one pickle naming only weights-only globals, raw storages
    import pickletools
    import zipfile

    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert "archive/data.pkl" in names and "archive/byteorder" in names
        globals_named = {
            arg
            for op, arg, _ in pickletools.genops(zf.read("archive/data.pkl"))
            if op.name == "GLOBAL"
        }
    assert globals_named <= {
        "collections OrderedDict",
        "torch._utils _rebuild_tensor_v2",
        "torch._utils _rebuild_parameter",
        "torch FloatStorage",
        "torch LongStorage",
    }
    # what PyTorch's weights-only reader would refuse goes to the JSON + .npy layout
    torch.save(
        {"device": torch.device("cpu"), "arr": np.arange(3), "ids": {1, 2}}, tmp_path / "other.pt"
    )
    other = torch.load(tmp_path / "other.pt")
    assert repr(other["device"]) == "device(type='cpu')" and other["ids"] == {1, 2}
    np.testing.assert_array_equal(other["arr"], np.arange(3))
    with zipfile.ZipFile(tmp_path / "other.pt") as zf:
        assert all(n == "structure.json" or n.endswith(".npy") for n in zf.namelist())
    with pytest.raises(TypeError, match="torch.save \\(tracegrad\\) stores tensors"):
        torch.save({"f": lambda: 0}, tmp_path / "bad.pt")


def test_load_refuses_other_files(tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(RuntimeError, match="not a file written by tracegrad.eager.save"):
        torch.load(bad)
    # a PyTorch-format zip whose pickle names os.system: refused before anything runs
    import pickle
    import zipfile

    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned",))

    evil = tmp_path / "evil.pt"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("evil/data.pkl", pickle.dumps({"w": Evil()}))
        zf.writestr("evil/byteorder", "little")
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL posix.system"):
        torch.load(evil)
    # a tensor record whose strides reach past its storage: refused, not read out of bounds
    from tracegrad.eager import compat

    storage = np.zeros(4, np.float32)
    with pytest.raises(RuntimeError, match="does not fit its storage"):
        compat._rebuild_tensor_v2(storage, 0, (2, 3), (3, 1))
    with pytest.raises(RuntimeError, match="does not fit its storage"):
        compat._rebuild_tensor_v2(storage, 4, (), ())
    assert compat._rebuild_tensor_v2(storage, 1, (3,), (1,)).shape == (3,)
    assert compat._rebuild_tensor_v2(storage, 9, (0, 5), (5, 1)).shape == (0, 5)


def test_pytorch_reads_our_checkpoints(tmp_path):
    """torch.save here, torch.load(weights_only=True) in real PyTorch: same tensors, dtypes,
    Parameters, containers and numbers; the model predicts the same."""
    rt = pytest.importorskip("torch")
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    ours(torch.randn(4, 1, 4, 4))
    payload = {
        "model": ours.state_dict(),
        "epoch": 7,
        "lr": 1e-3,
        "big": -(2**70),
        "names": ["a", "b"],
        "shape": (2, 3),
        "nan": float("nan"),
        "param": nn.Parameter(torch.ones(2)),
        "half": torch.ones(2, dtype=torch.float16),
        "flag": torch.tensor([True, False]),
        "empty": torch.zeros(0, 3),
        "leaf": torch.tensor(2.0, requires_grad=True),
        "t": torch.arange(6).reshape(2, 3).T,
    }
    path = tmp_path / "ours.pt"
    torch.save(payload, path)
    loaded = rt.load(path, weights_only=True)
    assert type(loaded["model"]).__name__ == "OrderedDict"
    assert loaded["epoch"] == 7 and loaded["big"] == -(2**70) and loaded["shape"] == (2, 3)
    assert loaded["names"] == ["a", "b"] and math.isnan(loaded["nan"]) and loaded["lr"] == 1e-3
    assert isinstance(loaded["param"], rt.nn.Parameter) and loaded["leaf"].requires_grad
    for key in ("half", "flag", "empty", "t"):
        assert str(loaded[key].dtype) == str(payload[key].dtype)
        np.testing.assert_array_equal(loaded[key].numpy(), payload[key].numpy())
    theirs = rt.nn.Sequential(
        rt.nn.Conv2d(1, 2, 3), rt.nn.BatchNorm2d(2), rt.nn.Flatten(), rt.nn.Linear(8, 3)
    )
    theirs.load_state_dict(loaded["model"])
    ours.eval(), theirs.eval()
    x = np.random.default_rng(1).normal(size=(2, 1, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(
        ours(torch.tensor(x)).detach().numpy(),
        theirs(rt.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_load_reads_pytorch_checkpoints(tmp_path):
    """A state dict saved by real PyTorch loads into the same model here (restricted
    unpickler: only tensors, OrderedDict, Parameters)."""
    rt = pytest.importorskip("torch")

    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(1, 2, 3), lib.nn.BatchNorm2d(2), lib.nn.Flatten(), lib.nn.Linear(8, 3)
        )

    theirs = build(rt)
    theirs(rt.randn(4, 1, 4, 4))  # moves the BatchNorm running statistics
    extra = {
        "strided": rt.arange(12.0).reshape(3, 4).t(),
        "offset": rt.arange(10)[3:7],
        "param": rt.nn.Parameter(rt.ones(2)),
        "half": rt.ones(2, dtype=rt.float16),
        "flag": rt.tensor(True),
        "epoch": 7,
    }
    path = tmp_path / "real.pt"
    rt.save({"model": theirs.state_dict(), **extra}, path)
    loaded = torch.load(path, weights_only=True)
    ours = build(torch)
    ours.load_state_dict(loaded["model"])
    theirs.eval(), ours.eval()
    x = np.random.default_rng(0).normal(size=(2, 1, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(
        ours(torch.tensor(x)).detach().numpy(),
        theirs(rt.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    for key in ("strided", "offset", "half", "flag"):
        np.testing.assert_array_equal(loaded[key].numpy(), extra[key].numpy())
        assert str(loaded[key].dtype) == str(extra[key].dtype)
    assert isinstance(loaded["param"], torch.nn.Parameter) and loaded["param"].requires_grad
    assert loaded["epoch"] == 7


@pytest.mark.parametrize(
    "name",
    [
        "tracegrad.eager.compat",
        "tracegrad.eager.utils.data",
        "tracegrad.eager.nn.utils",
        "tracegrad.eager.nn.init",
        "tracegrad.eager.optim.lr_scheduler",
    ],
)
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
