"""The disk cache as an attacker or a broken disk would treat it (issue 11).

Each test names the attack; each failed on the code before issue 11 (the
closing note lists what happened then). Most run the public API in fresh
processes on a private cache directory, with one tiny kernel so Numba compiles
stay short. We run as root here, and root ignores permission bits: no test
relies on a permission check to stop root; ownership tests that need chown
skip without root.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import pickle
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import index
from tracegrad.runtime import cache

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The child prints: OK <module path> <value> <kind of kernel> <CacheWarnings>
CHILD = r"""
import sys, warnings
PRELUDE
import numpy as np, tracegrad as tg
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    f = tg.value_and_grad(lambda x: tg.sum(tg.sin(x) * x * 1.25))
    x = np.linspace(-1.0, 1.0, 7)
    value, grad = f(x)
    kernel = f.lower(x).kernel
assert np.allclose(grad * 0.8, np.sin(x) + x * np.cos(x), rtol=1e-12, atol=1e-12), grad
from numba.core.dispatcher import Dispatcher
kind = "numba" if isinstance(getattr(kernel.entry, "raw_entry", kernel.entry), Dispatcher) else "fallback"
n_cache = sum(w.category.__name__ == "CacheWarning" for w in caught)
for w in caught:
    print("WARNING", w.category.__name__, str(w.message)[:300], file=sys.stderr)
print("OK", kernel.source_path, repr(float(value)), kind, n_cache)
"""


def run_child(
    cache_dir,
    prelude: str = "",
    env_extra: dict | None = None,
    cwd=None,
    timeout: float = 240,
    drop_env=(),
):
    env = dict(
        os.environ,
        TRACEGRAD_LOG="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    if cache_dir is not None:
        env["TRACEGRAD_CACHE_DIR"] = str(cache_dir)
    env.update(env_extra or {})
    for k in drop_env:
        env.pop(k, None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.replace("PRELUDE", prelude)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK"), proc.stdout + proc.stderr
    _, path, value, kind, n_cache = proc.stdout.split()
    expected = np.sum(np.sin(np.linspace(-1, 1, 7)) * np.linspace(-1, 1, 7) * 1.25)
    assert np.isclose(float(value), expected, rtol=1e-12)
    return dict(path=path, kind=kind, cache_warnings=int(n_cache), log=proc.stderr)


def numba_files(cache_dir: pathlib.Path):
    """Every file Numba's cache of our kernels could read, whatever the layout."""
    return [
        p
        for p in cache_dir.rglob("*")
        if p.is_file() and (p.suffix in (".nbi", ".nbc") or p.name.endswith(".idx.json"))
    ]


def stock_numba_names(module: pathlib.Path):
    """Where Numba's own cache would look for this module's functions."""
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    lines = module.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("@njit"):
            m = re.match(r"def (\w+)\(", lines[i + 1])
            if m:
                base = f"{module.stem}.{m.group(1)}-{i + 1}.{tag}"
                yield f"{base}.nbi"
                yield f"{base}.1.nbc"


class Payload:
    """A pickle that writes a marker file when unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


# ---------------------------------------------------------------- Numba's pickles


def test_rewritten_numba_pickles_are_never_unpickled(tmp_path):
    d = tmp_path / "cache"
    first = run_child(d)
    assert first["kind"] == "numba"
    module = pathlib.Path(first["path"])
    marker = tmp_path / "pwned"
    evil = pickle.dumps(Payload(marker))
    targets = set(numba_files(d))
    for name in stock_numba_names(module):  # and where stock Numba would look
        targets.add(d / "__pycache__" / name)
    assert targets
    for p in targets:
        p.parent.mkdir(mode=0o700, exist_ok=True)
        p.write_bytes(evil)
    second = run_child(d)
    assert not marker.exists(), "a cache pickle tracegrad did not verify was unpickled"
    assert second["kind"] == "numba"
    third = run_child(d)  # the rewritten files were replaced by good ones
    assert not marker.exists()
    assert "numba cache load" in third["log"], third["log"]


@pytest.mark.numba_pass
def test_truncated_or_corrupt_numba_files_are_recompiled_once(tmp_path):
    d = tmp_path / "cache"
    run_child(d)
    files = [p for p in numba_files(d) if p.suffix == ".nbc"]
    assert files
    for p in files:
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    second = run_child(d)
    assert second["kind"] == "numba", second["log"]  # not the interpreter fallback
    assert "numba compile" in second["log"]
    third = run_child(d)
    assert third["kind"] == "numba" and "numba cache load" in third["log"], third["log"]
    for p in numba_files(d):  # garbage instead of an index
        if p.suffix == ".nbi" or p.name.endswith(".idx.json"):
            p.write_bytes(b"\x80\x04garbage")
    fourth = run_child(d)
    assert fourth["kind"] == "numba", fourth["log"]
    assert "numba cache load" in run_child(d)["log"]


# ---------------------------------------------------------------- the directory


def test_symlinked_cache_dir_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    out = run_child(link)
    assert out["kind"] == "numba" and out["path"] == "None"
    assert out["cache_warnings"] == 1 and "symbolic link" in out["log"], out["log"]
    assert not list(real.iterdir())


def test_cache_dir_is_resolved_once_a_flipped_symlink_is_not_followed(tmp_path, monkeypatch):
    # an attacker who can rename entries of the parent swaps the path for a
    # symlink to their directory after tracegrad started using it
    ours = tmp_path / "cache"
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(ours))
    x = np.linspace(0.0, 1.0, 3)
    tg.value_and_grad(lambda x: tg.sum(x * 3.25))(x)
    moved = tmp_path / "moved"
    ours.rename(moved)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    ours.symlink_to(theirs)
    value, grad = tg.value_and_grad(lambda x: tg.sum(x * 4.75))(x)
    np.testing.assert_allclose(grad, np.full(3, 4.75))
    assert not list(theirs.iterdir()), "tracegrad followed the flipped symlink"
    assert len(list(moved.glob("tg_*.py"))) == 2


def test_relative_cache_dir_is_pinned_at_first_use(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    rel = f"rel-cache-{tmp_path.name}"  # unique: the pin lasts for the process
    monkeypatch.chdir(first)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", rel)
    x = np.linspace(0.0, 1.0, 3)
    tg.value_and_grad(lambda x: tg.sum(x * 5.25))(x)
    monkeypatch.chdir(second)
    tg.value_and_grad(lambda x: tg.sum(x * 6.75))(x)
    assert len(list((first / rel).glob("tg_*.py"))) == 2
    assert not (second / rel).exists()


def test_permissions_do_not_depend_on_the_umask(tmp_path):
    d = tmp_path / "new" / "cache"  # tracegrad creates it and its parent
    run_child(d, prelude="import os; os.umask(0)")
    seen = []
    for p in [d.parent, d, *d.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        seen.append((p.name, oct(mode)))
        assert mode == (0o700 if p.is_dir() else 0o600), seen
    assert any(p.suffix == ".nbc" for p in d.rglob("*"))  # Numba's files were checked too


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs root to make a directory of another user",
)
def test_symlink_to_another_users_dir_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    link = tmp_path / "shared-tmp-name"
    link.symlink_to(theirs)
    out = run_child(link)
    assert out["path"] == "None" and out["cache_warnings"] == 1
    assert not list(theirs.iterdir())


def test_no_home_and_no_passwd_entry_uses_a_private_temp_dir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    prelude = "import pwd\ndef _missing(uid): raise KeyError(uid)\npwd.getpwuid = _missing"
    out = run_child(
        None,
        prelude=prelude,
        cwd=work,
        env_extra={"TMPDIR": str(tmp)},
        drop_env=("HOME", "XDG_CACHE_HOME", "TRACEGRAD_CACHE_DIR"),
    )
    assert not (work / "~").exists() and not list(work.iterdir())
    private = tmp / f"tracegrad-{os.getuid()}"
    assert out["path"] == str(private / pathlib.Path(out["path"]).name)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


# ---------------------------------------------------------------- files that are not files


@pytest.mark.numba_pass
def test_fifo_or_directory_in_place_of_cache_files_is_skipped_not_opened(tmp_path):
    d = tmp_path / "cache"
    first = run_child(d)
    module = pathlib.Path(first["path"])
    targets = [module, *d.glob("tgi_*.json"), *numba_files(d)]
    for p in targets:
        p.unlink()
        os.mkfifo(p)  # opening it to read blocks until someone writes
    try:
        second = run_child(d, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("tracegrad opened a FIFO in the cache and hung")
    assert second["kind"] == "numba"
    assert module.is_file() and cache.content_hash(module.read_bytes()) == module.stem[3:]
    module.unlink()
    module.mkdir()  # a directory where the module goes
    (module / "x").write_text("")
    third = run_child(d, timeout=60)
    assert third["kind"] == "numba", third["log"]


# ---------------------------------------------------------------- a full disk

ENOSPC_PRELUDE = r"""
import errno, os
_real_write = os.write
def _full(fd, data):
    if fd > 2 and os.fstat(fd).st_size + len(data) > LIMIT:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _real_write(fd, data)
os.write = _full
import builtins, io
_real_open = builtins.open
class _Full(io.BufferedWriter):
    def write(self, data):
        if self.tell() + len(data) > LIMIT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)
def _open(file, mode="r", *args, **kwargs):
    f = _real_open(file, mode, *args, **kwargs)
    if "w" in mode and "b" in mode and isinstance(f, io.BufferedWriter):
        raw = f.detach()
        return _Full(raw)
    return f
builtins.open = _open
"""


@pytest.mark.numba_pass
@pytest.mark.parametrize("limit", [16 << 10, 64])
def test_disk_full_still_gives_a_compiled_kernel_with_one_warning(tmp_path, limit):
    # 16 kB: the module fits but Numba's compiled code does not; 64 bytes: nothing fits
    d = tmp_path / "cache"
    out = run_child(d, prelude=ENOSPC_PRELUDE.replace("LIMIT", str(limit)))
    assert out["kind"] == "numba", out["log"]  # compiled in memory, not the interpreter
    assert out["cache_warnings"] == 1, out["log"]
    assert "No space left" in out["log"]
    assert not list(d.rglob(".tmp-*")) and not [p for p in d.rglob("*") if ".tmp." in p.name]
    again = run_child(d)  # with space again: a normal cache
    assert again["kind"] == "numba" and again["cache_warnings"] == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mount needs root")
def test_tiny_tmpfs_still_gives_a_compiled_kernel_with_one_warning(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=12k,mode=0700", "tmpfs", str(mnt)],
            capture_output=True,
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = run_child(mnt / "cache")
        assert out["kind"] == "numba", out["log"]
        assert out["cache_warnings"] == 1 and "No space left" in out["log"], out["log"]
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# ---------------------------------------------------------------- index entries


def _forge(d: pathlib.Path, key: str, **changes) -> None:
    """Rewrite entry `key` with `changes`, with a valid checksum (what someone who
    read index.py could write)."""
    path = d / f"tgi_{key}.json"
    payload = json.loads(path.read_text())["payload"]
    payload.update(changes)
    path.write_text(json.dumps({"payload": payload, "check": index._checksum(key, payload)}))


def _key(fn, *args):
    from tracegrad.tracing import trace_flat

    return index.graph_key(
        trace_flat(fn, args).graph, mode="value_and_grad", wrt=(0,), optimize=True, has_aux=False
    )


def f_index(x):
    return tg.sum(tg.tanh(x) * 2.5)


def g_index(x, y):
    return tg.sum(x * y * 0.5)


@pytest.fixture(scope="module")
def index_cache(tmp_path_factory):
    """One cache holding f's and g's kernels and index entries, built once for every
    attack below (two compiles, not two per attack); each attack restores f's entry."""
    d = tmp_path_factory.mktemp("index_attacks") / "cache"
    x = np.linspace(-0.5, 1.0, 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEGRAD_CACHE_DIR", str(d))
        tg.clear_caches()
        tg.value_and_grad(f_index)(x)
        tg.value_and_grad(g_index)(x, x)
    key_f = _key(f_index, x)
    return d, key_f, (d / f"tgi_{key_f}.json").read_bytes()


@pytest.mark.parametrize(
    "attack",
    ["njit", "intrinsic", "numba_import", "other_functions_module", "other_graphs_payload"],
)
def test_index_entry_naming_anything_but_its_kernel_is_rebuilt_not_run(
    attack, index_cache, monkeypatch, caplog
):
    d, key_f, good_entry = index_cache
    (d / f"tgi_{key_f}.json").write_bytes(good_entry)  # whatever an earlier attack left
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(d))
    x = np.linspace(-0.5, 1.0, 4)
    tg.clear_caches()  # each attack starts like a new process (no in-memory kernels)
    key_g = _key(g_index, x, x)
    assert _key(f_index, x) == key_f
    good = json.loads((d / f"tgi_{key_f}.json").read_text())["payload"]
    other = json.loads((d / f"tgi_{key_g}.json").read_text())["payload"]
    if attack == "njit":
        _forge(d, key_f, entry="njit")
    elif attack == "intrinsic":
        _forge(d, key_f, entry="tg_flat")
    elif attack == "numba_import":  # `from numba import prange`: callable, not a kernel
        _forge(d, key_f, entry="prange")
    elif attack == "other_functions_module":  # g's kernel, under f's key and types
        _forge(d, key_f, module=other["module"], entry=other["entry"])
    else:  # g's whole payload, re-checksummed under f's key
        payload = dict(other, in_types=good["in_types"])
        (d / f"tgi_{key_f}.json").write_text(
            json.dumps({"payload": payload, "check": index._checksum(key_f, payload)})
        )
    tg.clear_caches()
    with caplog.at_level(logging.INFO, logger="tracegrad"):
        value, grad = tg.value_and_grad(f_index)(x)
    np.testing.assert_allclose(value, np.sum(np.tanh(x) * 2.5), rtol=1e-12)
    np.testing.assert_allclose(grad, 2.5 * (1 - np.tanh(x) ** 2), rtol=1e-12)
    assert "index miss" in caplog.text and "index hit" not in caplog.text, caplog.text
    rebuilt = json.loads((d / f"tgi_{key_f}.json").read_text())["payload"]
    assert (rebuilt["module"], rebuilt["entry"]) == (good["module"], good["entry"])
