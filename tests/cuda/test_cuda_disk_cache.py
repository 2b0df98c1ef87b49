"""CUDA kernels and their launch configuration in the disk cache (codegen/cuda/disk.py):
a second process loads the plan and the kernels' verified modules instead of running
autodiff, the passes, the planner and the code generator again; whatever fails its
checks is rebuilt, never run. In Numba's CUDA simulator, like every test here."""

import json
import os

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen.cuda import disk, runtime

W = np.linspace(-1.0, 1.0, 12, dtype="float32").reshape(3, 4)
X = np.linspace(0.0, 1.0, 15, dtype="float32").reshape(5, 3)
Y = np.array([0, 1, 2, 3, 0])


CHILD = """
import os, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np, tracegrad as tg
from tracegrad.codegen.cuda import runtime
from tracegrad.ops.core import OutOfRangeError

def loss(w, x, y):
    return tg.cross_entropy(tg.tanh(x @ w), y)

w = np.linspace(-1.0, 1.0, 12, dtype="float32").reshape(3, 4)
x = np.linspace(0.0, 1.0, 15, dtype="float32").reshape(5, 3)
f = tg.value_and_grad(loss)
v, g = f(tg.device_put(w), tg.device_put(x), tg.device_put(np.array([0, 1, 2, 3, 0])))
want_v, want_g = tg.value_and_grad(loss, backend="interpret")(w, x, np.array([0, 1, 2, 3, 0]))
np.testing.assert_allclose(np.asarray(v), want_v, rtol=1e-5)
np.testing.assert_allclose(np.asarray(g), want_g, rtol=1e-5, atol=1e-6)
stats = dict(runtime.STATS)
assert stats["planned"] == 0 and stats["plans_loaded"] == 1, stats
assert stats["file_hits"] == stats["compiled"] == int(sys.argv[1]), stats
timings = next(iter(f.entries.by_signature.values())).lowered.timings
assert "autodiff" not in timings and "passes" not in timings, timings
try:  # the error path rebuilds the graph it needs for its message
    f(tg.device_put(w), tg.device_put(x), tg.device_put(np.array([0, 1, 7, 3, 0])))
except OutOfRangeError as exc:
    assert "index 7 is out of range" in str(exc), exc
else:
    raise AssertionError("no error")
print("OK")
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh disk cache, and no kernel compiled in memory (each is written there)."""
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    tg.clear_caches()  # (compiled functions of equal code share their entries)
    yield tmp_path / "cache"
    tg.clear_caches()


def _kernel(f):
    return next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda").lowered.kernel


def _build():
    def loss(w, x, y):  # a new function each time: nothing of it is compiled in memory
        return tg.cross_entropy(tg.tanh(x @ w), y)

    f = tg.value_and_grad(loss)
    v, g = f(tg.device_put(W), tg.device_put(X), tg.device_put(Y))
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    return (np.asarray(v), np.asarray(g)), entry.lowered.kernel


def _records(directory):
    return sorted(p for p in os.listdir(directory) if p.startswith("tgp_"))


def test_a_second_process_loads_the_plan_and_kernels_instead_of_regenerating(cache_dir, run_script):
    planned, compiled = runtime.STATS["planned"], runtime.STATS["compiled"]
    _build()
    assert runtime.STATS["planned"] == planned + 1
    assert len(_records(cache_dir)) == 1
    n_kernels = runtime.STATS["compiled"] - compiled  # each one's module is in the cache
    assert n_kernels > 0
    assert "OK" in run_script(CHILD, str(n_kernels), cache_dir=cache_dir)


def test_a_record_that_fails_its_hash_check_is_rebuilt_not_run(cache_dir):
    want, _ = _build()
    (name,) = _records(cache_dir)
    path = cache_dir / name
    record = json.loads(path.read_text())
    record["units"][0]["source"] += "    x = 1\n"  # an edit: no longer its name's hash
    path.write_text(json.dumps(record, sort_keys=True))
    key = next(iter(_index_keys()))
    plan, why = disk.read(key, [(W.shape, W.dtype), (X.shape, X.dtype), (Y.shape, Y.dtype)])
    assert plan is None and "fails its hash check" in why
    tg.clear_caches()
    planned = runtime.STATS["planned"]
    got, _ = _build()  # the full path again: planned, recorded anew
    assert runtime.STATS["planned"] == planned + 1
    assert json.loads(path.read_text()) != record  # the record is whole again
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


_KEYS: list = []


def _index_keys():
    return _KEYS


@pytest.fixture(autouse=True)
def _record_keys(monkeypatch):
    """Remember the index keys plans are written under (for the tests above)."""
    _KEYS.clear()
    write = disk.write

    def spy(index_key, *args, **kwargs):
        _KEYS.append(index_key)
        return write(index_key, *args, **kwargs)

    monkeypatch.setattr(disk, "write", spy)


def test_plans_round_trip_and_reject_what_disk_py_never_writes(cache_dir):
    _, kernel = _build()
    record = disk.record_of(kernel.plan)
    plan = disk.plan_of(json.loads(json.dumps(record)))
    assert [(u.kind, u.name, u.source, u.args, u.launch, u.after) for u in plan.units] == [
        (u.kind, u.name, u.source, u.args, u.launch, [tuple(a) for a in u.after])
        for u in kernel.plan.units
    ]
    assert plan.outputs == kernel.plan.outputs
    gemm = next(u for u in kernel.plan.units if u.kind == "gemm")
    again = next(u for u in plan.units if u.kind == "gemm")
    assert all(np.array_equal(gemm.gemm[k], again.gemm[k]) for k in gemm.gemm)

    def bad(edit):
        rec = json.loads(json.dumps(record))
        edit(rec)
        with pytest.raises(disk.BadRecord):
            disk.plan_of(rec)

    bad(lambda r: r.update(format=99))
    bad(lambda r: r["units"][0].update(kind="scan"))
    bad(lambda r: r["units"][0].update(name="k(); import os"))
    k = next(i for i, u in enumerate(record["units"]) if u["kind"] != "gemm")
    bad(lambda r: r["units"][k]["args"].append("nowhere"))
    bad(lambda r: r["units"][k].update(launch=[0, 8]))
    bad(lambda r: r["units"][k].update(source=""))
    bad(lambda r: r["buffers"][0].update(dtype="object"))
    bad(lambda r: r["outputs"][0].update(literal="__import__('os')", buf=None))
    bad(lambda r: r.pop("units"))


def test_constants_are_in_the_record_and_loop_bodies_get_none(cache_dir):
    # (an array made inside the function is a constant; a closure's array is an input)
    def fn(z):
        return tg.sum(z * np.arange(20, dtype="float32").reshape(5, 4) ** 2)

    z = np.linspace(-1.0, 1.0, 20, dtype="float32").reshape(5, 4)
    want = tg.value_and_grad(fn, backend="interpret")(z)
    f = tg.value_and_grad(fn)
    f(tg.device_put(z))
    assert any(b.kind == "const" for b in _kernel(f).plan.buffers.values())
    assert len(_records(cache_dir)) == 1
    tg.clear_caches()
    planned, loaded = runtime.STATS["planned"], runtime.STATS["plans_loaded"]
    f = tg.value_and_grad(fn)
    got = f(tg.device_put(z))  # from the record: constants included
    assert (runtime.STATS["planned"], runtime.STATS["plans_loaded"]) == (planned, loaded + 1)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)

    def g(c):
        return tg.sum(tg.fori_loop(0, 3, lambda i, c: tg.tanh(c), c))

    g = tg.value_and_grad(g)
    g(tg.device_put(np.ones(3, "float32")))
    assert any(u.kind == "scan" for u in _kernel(g).plan.units)
    assert disk.record_of(_kernel(g).plan) is None
    assert len(_records(cache_dir)) == 1
    # a constant of the wrong size, or not base64, is refused
    record = disk.record_of(_kernel(f).plan)
    const = next(b for b in record["buffers"] if b["kind"] == "const")
    for value in (const["value"][:-8], "not base64!"):
        const_bad = json.loads(json.dumps(record))
        next(b for b in const_bad["buffers"] if b["kind"] == "const")["value"] = value
        with pytest.raises(disk.BadRecord):
            disk.plan_of(const_bad)
