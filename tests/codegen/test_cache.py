"""The on-disk kernel cache: names, atomic writes, hits across processes,
corruption, unsafe and read-only directories, concurrent compiles, and the
verified Numba cache of kernels (user functions keep Numba's own). The attacks
of issue 11 are in tests/reliability/test_cache_security.py."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tracegrad.codegen import build_kernel
from tracegrad.runtime import cache

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "cache_child.py")


def run_child(cache_dir, check=True):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(HERE.parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        ),
    )
    proc = subprocess.run(
        [sys.executable, CHILD, str(cache_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("OK"), proc.stdout + proc.stderr
    return proc


def probe_graph(scale=1.0):
    sys.path.insert(0, str(HERE))
    from codegen_helpers import GraphMaker

    gm = GraphMaker("cache_probe_inproc")
    x = gm.input((4,), "float64", "x")
    return gm.output(gm.op("mul", x, gm.const(scale, "float64")))


def test_file_named_by_content_hash_in_private_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    k = build_kernel(probe_graph(2.0))
    path = Path(k.source_path)
    assert path.parent == d and path.name.startswith("tg_") and path.suffix == ".py"
    assert cache.content_hash(path.read_bytes()) == path.stem[3:]
    assert path.read_text() == k.source
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert not [p for p in d.iterdir() if p.name.startswith(".tmp-")]  # temp file renamed away
    np.testing.assert_array_equal(k(np.arange(4.0))[0], 2.0 * np.arange(4.0))


def test_file_is_never_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    source = build_kernel(probe_graph(3.0)).source
    path = Path(cache.default_cache_dir()) / f"{cache.module_name_for(source)}.py"
    before = path.stat()
    cache._write_once(path, source.encode())  # a racing writer loses, leaving the file as is
    after = path.stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


@pytest.fixture(scope="module")
def first_child_run(tmp_path_factory):
    """(cache dir, process) of one child run into an empty cache: a file miss and a
    Numba compile. Shared (a child process costs seconds); tests that change the
    directory work on a copy of it."""
    d = tmp_path_factory.mktemp("cache")
    return d, run_child(d)


def test_second_process_hits_both_caches(first_child_run):
    d, first = first_child_run
    assert "miss (new file)" in first.stderr and "numba compile" in first.stderr
    second = run_child(d)
    assert "file hit" in second.stderr, second.stderr
    assert "numba cache load" in second.stderr, second.stderr


def test_corrupt_file_is_detected_and_rebuilt(first_child_run, tmp_path):
    d, first = first_child_run
    assert "miss (new file)" in first.stderr
    copy = tmp_path / "cache"
    shutil.copytree(d, copy)  # (keeps the 0o700 mode)
    path = copy / Path(first.stdout.split()[1]).name
    assert path.is_file()
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # truncated
    second = run_child(copy)
    assert "corrupt" in second.stderr
    assert path.read_bytes() == good


def test_world_writable_dir_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    with pytest.warns(cache.CacheWarning, match="writable by group or others"):
        assert cache.cache_dir() is None
    k = build_kernel(probe_graph(4.0))  # still works, from memory
    assert k.source_path is None
    assert not list(d.glob("tg_*.py"))
    np.testing.assert_array_equal(k(np.ones(4))[0], np.full(4, 4.0))


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs root to give the directory to another user",
)
def test_dir_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    with pytest.warns(cache.CacheWarning, match="owned by uid 65534"):
        assert cache.cache_dir() is None


def test_read_only_dir_warns_once_and_works(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    real_access = os.access
    # root ignores mode bits, so make the check see what a normal user would
    monkeypatch.setattr(
        cache.os, "access", lambda p, mode: False if Path(p) == d else real_access(p, mode)
    )
    with pytest.warns(cache.CacheWarning, match="not writable") as record:
        k1 = build_kernel(probe_graph(5.0))
        k2 = build_kernel(probe_graph(6.0))
    assert len([w for w in record if issubclass(w.category, cache.CacheWarning)]) == 1
    assert k1.source_path is None and k2.source_path is None
    np.testing.assert_array_equal(k2(np.ones(4))[0], np.full(4, 6.0))


def test_two_processes_compiling_at_once(tmp_path):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(HERE.parents[1])] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
        ),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, CHILD, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.startswith("OK")
    files = list(tmp_path.glob("tg_*.py"))
    assert len(files) == 1
    assert cache.content_hash(files[0].read_bytes()) == files[0].stem[3:]
    assert not list(tmp_path.glob(".tmp-*"))


def test_kernels_get_the_verified_numba_cache_and_user_functions_keep_numbas(tmp_path, monkeypatch):
    import importlib.util

    from tracegrad.runtime import numba_cache

    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    k = build_kernel(probe_graph(7.0))
    assert isinstance(k.entry._cache, numba_cache.VerifiedFunctionCache)
    assert list((tmp_path / "cache" / "numba").glob("*.nbc"))
    assert not (tmp_path / "cache" / "__pycache__").exists()
    user = tmp_path / "user_mod_for_cache_test.py"
    user.write_text("from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x + 1\n")
    spec = importlib.util.spec_from_file_location("user_mod_for_cache_test", user)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.f(1) == 2
    assert type(mod.f._cache).__name__ == "FunctionCache"  # Numba's own, untouched
    assert list((tmp_path / "__pycache__").glob("user_mod_for_cache_test.f-*.nbi"))


def test_without_the_verified_hook_kernels_are_not_cached_by_numba(tmp_path, monkeypatch):
    from tracegrad.runtime import numba_cache

    monkeypatch.setattr(numba_cache, "_INSTALLED", False)  # e.g. another Numba's internals
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    k = build_kernel(probe_graph(8.5))
    np.testing.assert_array_equal(k(np.ones(4))[0], np.full(4, 8.5))
    assert Path(k.source_path).is_file()
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_deleting_its_kernels_releases_a_generated_module(tmp_path, monkeypatch):
    import gc

    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    k1 = build_kernel(probe_graph(9.25))
    k2 = build_kernel(probe_graph(9.25))  # the same module, a second user
    name = k1.module.__name__
    assert k2.module is k1.module and name in sys.modules
    del k1
    gc.collect()
    assert name in sys.modules  # k2 still uses it
    del k2
    gc.collect()
    assert name not in sys.modules
    k3 = build_kernel(probe_graph(9.25))  # needed again: run again from the verified file
    np.testing.assert_array_equal(k3(np.ones(4))[0], np.full(4, 9.25))
    assert k3.module.__name__ == name and name in sys.modules


def test_the_kernel_names_follow_the_intrinsics_source(monkeypatch):
    """Kernels import runtime/intrinsics.py, which Numba compiles into their cached
    machine code: another intrinsics source (a later commit) names every kernel anew."""
    from tracegrad.runtime import cache

    before = cache.content_hash(b"kernel source")
    monkeypatch.setattr(cache, "_intrinsics_hash", lambda: "another intrinsics source")
    assert cache.content_hash(b"kernel source") != before


def test_every_runtime_module_a_kernel_imports_is_in_its_name_and_index_key(monkeypatch):
    """The emitted kernels import runtime modules whose code Numba compiles into the
    cached machine code (intrinsics.py, lapack.py): a change to any of them must give
    new module names and new index keys, or a warm cache keeps the old code."""
    import pathlib
    import re

    from tracegrad.codegen import index
    from tracegrad.runtime import cache

    codegen_dir = pathlib.Path(index.__file__).parent
    imported = set()
    for path in codegen_dir.glob("*.py"):
        imported |= set(re.findall(r'"from tracegrad\.runtime\.(\w+) import', path.read_text()))
    assert {"intrinsics", "lapack"} <= imported
    for module in imported:
        assert f"runtime/{module}.py" in index._PIPELINE_PARTS
        name = f"{module}.py"
        real = pathlib.Path.read_bytes
        before = cache._intrinsics_hash.__wrapped__()
        monkeypatch.setattr(
            pathlib.Path,
            "read_bytes",
            lambda self, real=real, name=name: real(self) + (b"#" if self.name == name else b""),
        )
        assert cache._intrinsics_hash.__wrapped__() != before, module
        monkeypatch.undo()
