"""The cache index (codegen/index.py): a traced graph found in the index loads
its module without autodiff, passes or code generation; misses say why;
corrupt, poisoned or stale entries are rebuilt; the key follows the traced graph."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import index
from tracegrad.compiler import CompiledFunction
from tracegrad.tracing import trace_flat

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory):
    # One directory for the module: each distinct kernel pays Numba's compile once.
    return tmp_path_factory.mktemp("tg-index")


@pytest.fixture
def cache_env(shared_dir, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(shared_dir))
    return shared_dir


def loss(x, w):
    return tg.sum(tg.tanh(x * w) ** 2)


def expected(x, w):
    t = np.tanh(x * w)
    g = 2 * t * (1 - t**2)
    return np.sum(t**2), g * w, g * x


X = np.array([0.5, -1.0, 2.0])
W = np.array([1.5, 0.25, -0.5])


def entries(d):
    return sorted(p for p in Path(d).glob("tgi_*.json"))


def key_of(fn, *args, mode="value_and_grad", wrt=(0, 1)):
    traced = trace_flat(fn, args)
    return index.graph_key(traced.graph, mode=mode, wrt=wrt, optimize=True, has_aux=False)


def run_vg(caplog):
    # a new CompiledFunction each time (tg.value_and_grad(loss) would return the
    # shared one for the same function): what a new process would build
    f = CompiledFunction(loss, "value_and_grad", argnums=(0, 1))
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        value, (gx, gw) = f(X, W)
    v, ex, ew = expected(X, W)
    np.testing.assert_allclose(value, v, rtol=1e-12)
    np.testing.assert_allclose(gx, ex, rtol=1e-12)
    np.testing.assert_allclose(gw, ew, rtol=1e-12)
    return f


def test_miss_is_logged_then_hit_skips_the_pipeline(cache_env, caplog):
    for p in entries(cache_env):
        p.unlink()
    first = run_vg(caplog)
    assert "index miss (no entry)" in caplog.text
    assert len(entries(cache_env)) == 1
    caplog.clear()
    second = run_vg(caplog)
    assert "index hit" in caplog.text
    timings = second.lower(X, W).timings
    assert "autodiff" not in timings and "passes" not in timings
    assert "index" in second.lower(X, W).kernel.timings
    a, b = first.lower(X, W), second.lower(X, W)
    assert a.source == b.source and a.source_path == b.source_path
    # the graphs the hit skipped are rebuilt on demand, identical
    assert str(a.joint) == str(b.joint) and str(a.optimized) == str(b.optimized)


def test_key_follows_the_traced_graph():
    k = key_of(loss, X, W)
    assert k == key_of(loss, X.copy(), W.copy())  # deterministic
    assert k != key_of(loss, X[:2], W[:2])  # shapes
    assert k != key_of(loss, X.astype(np.float32), W.astype(np.float32))  # dtypes
    assert k != key_of(lambda x, w: tg.sum(tg.tanh(x * w) ** 3), X, W)  # a constant
    assert k != key_of(lambda x, w: tg.sum(tg.sin(x * w) ** 2), X, W)  # an op
    assert k != key_of(loss, X, W, wrt=(0,))  # what is differentiated
    assert k != key_of(loss, X, W, mode="grad")
    big = np.arange(100.0)
    big2 = big.copy()
    big2[57] = -1.0  # a const the printer abridges still changes the key
    assert key_of(lambda x: tg.sum(x * big), big) != key_of(lambda x: tg.sum(x * big2), big)


def test_poisoned_entry_is_rebuilt(cache_env, caplog):
    run_vg(caplog)
    (path,) = [p for p in entries(cache_env) if p.name == f"tgi_{key_of(loss, X, W)}.json"]
    data = json.loads(path.read_text())
    data["payload"]["module"] = "tg_" + "0" * 32  # pointed elsewhere, checksum not updated
    path.write_text(json.dumps(data))
    caplog.clear()
    run_vg(caplog)
    assert "corrupt" in caplog.text and "index hit" not in caplog.text
    assert json.loads(path.read_text())["payload"]["module"] != "tg_" + "0" * 32
    caplog.clear()
    run_vg(caplog)
    assert "index hit" in caplog.text


def test_stale_entry_is_rebuilt(cache_env, caplog):
    run_vg(caplog)
    key = key_of(loss, X, W)
    payload, why = index.read_entry(cache_env, key)
    assert payload is not None, why
    good = payload["module"]
    stale = dict(payload)
    stale.pop("format")
    stale["module"] = "tg_" + "f" * 32  # a module that is gone (e.g. another Numba version)
    index.write_entry(cache_env, key, stale)
    caplog.clear()
    run_vg(caplog)
    assert "fails its hash check" in caplog.text or "unreadable" in caplog.text
    assert index.read_entry(cache_env, key)[0]["module"] == good


def test_truncated_entry_is_rebuilt(cache_env, caplog):
    run_vg(caplog)
    path = cache_env / f"tgi_{key_of(loss, X, W)}.json"
    path.write_text(path.read_text()[:20])
    caplog.clear()
    run_vg(caplog)
    assert "corrupt" in caplog.text
    assert index.read_entry(cache_env, key_of(loss, X, W))[0] is not None


def test_errors_on_an_index_hit_use_the_rebuilt_graph(cache_env, caplog):
    def nll(logits, labels):
        return -tg.sum(tg.take_along_axis(tg.log_softmax(logits, axis=-1), labels[:, None], axis=1))

    logits = np.zeros((2, 3))
    ok = np.array([0, 2])
    CompiledFunction(nll, "value_and_grad")(logits, ok)
    f = CompiledFunction(nll, "value_and_grad")  # a fresh one, as a new process builds
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        value, g = f(logits, ok)
    assert "index hit" in caplog.text
    np.testing.assert_allclose(value, 2 * np.log(3.0))
    with pytest.raises(tg.TracegradError, match="out of range|out of bounds"):
        f(logits, np.array([0, 3]))


def test_check_finite_on_an_index_hit(cache_env):
    def f(x):
        return tg.sum(tg.log(x))

    tg.value_and_grad(f, check_finite=True)(np.array([1.0, 2.0]))
    g = tg.value_and_grad(f, check_finite=True)
    g(np.array([1.0, 2.0]))
    with pytest.raises(tg.TracegradError, match="NaN.*log"):
        g(np.array([-1.0, 2.0]))


CHILD = r"""
import sys
import numpy as np
import tracegrad as tg
assert "numba" not in sys.modules
f = tg.value_and_grad(lambda x: tg.sum(tg.tanh(x) * x))
value, grad = f(np.linspace(-1.0, 1.0, 5))
x = np.linspace(-1.0, 1.0, 5)
assert abs(value - np.sum(np.tanh(x) * x)) < 1e-12
print("SCIPY_LINALG", "scipy.linalg" in sys.modules)
"""


def test_second_process_loads_from_the_index(tmp_path):
    env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=str(tmp_path),
        TRACEGRAD_LOG="1",
        PYTHONPATH=os.pathsep.join(
            [str(HERE.parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        ),
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300
        )
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "index miss (no entry)" in runs[0].stderr and "numba compile" in runs[0].stderr
    assert "index hit" in runs[1].stderr and "numba cache load" in runs[1].stderr
    assert "numba compile" not in runs[1].stderr and "autodiff" not in runs[1].stderr
    if "scipy" in sys.modules or os.path.isdir(
        os.path.join(os.path.dirname(np.__file__), os.pardir, "scipy")
    ):
        assert "SCIPY_LINALG False" in runs[1].stdout  # see runtime/numba_loader.py


def test_parallel_variant_after_an_index_hit(monkeypatch, caplog):
    # The session's cache dir (tests/conftest.py): the parallel compile is paid once per run.
    from tracegrad.codegen.emit import PARALLEL_MIN_ELEMENTS

    monkeypatch.setenv("TRACEGRAD_PARALLEL", "sync")
    x = np.linspace(-1.0, 1.0, PARALLEL_MIN_ELEMENTS)

    def f(x):
        return tg.sum(tg.exp(-x) * x)

    first = CompiledFunction(f, "value_and_grad")
    v1, g1 = first(x)
    second = CompiledFunction(f, "value_and_grad")  # fresh, as in a new process
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        v2, g2 = second(x)
    assert "index hit" in caplog.text
    kernel = second.lower(x).kernel
    assert kernel.wait_parallel() and "prange(" in kernel.parallel_source
    np.testing.assert_allclose(v2, np.sum(np.exp(-x) * x), rtol=1e-10)
    np.testing.assert_allclose(g2, np.exp(-x) * (1 - x), rtol=1e-10)
    np.testing.assert_array_equal(g1, g2)


def test_world_writable_dir_gets_no_index(tmp_path, monkeypatch, caplog):
    from tracegrad.runtime import cache

    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    monkeypatch.setattr(cache, "_WARNED", set())
    with pytest.warns(cache.CacheWarning, match="writable by group or others"):
        run_vg(caplog)
        run_vg(caplog)
    assert not list(d.iterdir())  # neither modules nor index entries


def test_read_only_dir_warns_once_and_gets_no_index(tmp_path, monkeypatch, caplog):
    from tracegrad.runtime import cache

    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    monkeypatch.setattr(cache, "_WARNED", set())
    real_access = os.access
    # root ignores mode bits, so make the check see what a normal user would
    monkeypatch.setattr(
        cache.os, "access", lambda p, mode: False if Path(p) == d else real_access(p, mode)
    )
    with pytest.warns(cache.CacheWarning, match="not writable") as record:
        run_vg(caplog)
        run_vg(caplog)
    assert len([w for w in record if issubclass(w.category, cache.CacheWarning)]) == 1
    assert not list(d.iterdir())


def test_no_index_without_readable_pipeline_source(monkeypatch):
    # .pyc-only installs: a code change could not be detected, so no key at all
    monkeypatch.setattr(index, "_PIPELINE_HASH", "")
    assert key_of(loss, X, W) is None
    monkeypatch.setattr(index, "_PIPELINE_HASH", None)
    monkeypatch.setattr(index, "_PIPELINE_PARTS", ("no_such_part",))
    assert key_of(loss, X, W) is None
