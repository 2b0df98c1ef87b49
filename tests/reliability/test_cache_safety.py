"""Cache safety through the public API, in fresh processes.

tests/codegen/test_cache.py already checks (on build_kernel): content-hash
names, never rewriting, private 0700 directory, refusing group/world-writable
or foreign directories, read-only directory with one warning, a truncated file
rebuilt, and two processes compiling one kernel at once.

Added here: a cache file whose content was replaced by an attacker is never
executed (only rebuilt); leftovers of a writer that crashed mid-write do not
matter; and two processes calling `tg.value_and_grad` on the same function
at once, in an empty cache, both get correct results and leave one module.
The attacks of issue 11 (Numba's pickles, symlinks, umask, FIFOs, a full disk,
forged index entries) are in test_cache_security.py; fork in test_fork.py.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = """
import sys, numpy as np, tracegrad as tg
f = lambda x: tg.sum(tg.sin(x) * x * 1.25)
x = np.linspace(-1.0, 1.0, 7)
value, grad = tg.value_and_grad(f)(x)
expected = np.sin(x) + x * np.cos(x)
assert np.allclose(grad * 0.8, expected, rtol=1e-12, atol=1e-12), grad
print("OK", tg.value_and_grad(f).lower(x).source_path, repr(float(value)))
"""


def run_child(cache_dir: pathlib.Path, wait: bool = True):
    env = dict(
        os.environ,
        TRACEGRAD_CACHE_DIR=str(cache_dir),
        TRACEGRAD_LOG="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out.startswith("OK"), out
    return out, err


def test_poisoned_cache_file_is_never_executed_only_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    out, _ = run_child(cache)
    module = pathlib.Path(out.split()[1])
    good = module.read_bytes()
    sentinel = tmp_path / "pwned"
    # same name, attacker's content: it would run at import time
    module.write_bytes(f"open({str(sentinel)!r}, 'w').write('pwned')\n".encode() + good)
    out2, err2 = run_child(cache)
    assert not sentinel.exists(), "tracegrad imported a cache file whose hash did not match"
    assert "corrupt" in err2
    assert module.read_bytes() == good
    assert out2.split()[2] == out.split()[2]  # same value


def test_leftovers_of_a_crashed_writer_are_harmless(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / ".tmp-deadbeef.py").write_text("raise SystemExit('half-written')\n")
    stray = cache / ("tg_" + "0" * 32 + ".py")  # a module name no kernel has
    stray.write_text("raise SystemExit('not ours')\n")
    run_child(cache)
    assert [p for p in cache.glob("tg_*.py") if p != stray]


def test_two_processes_calling_value_and_grad_at_once_in_an_empty_cache(tmp_path):
    cache = tmp_path / "cache"
    procs = [run_child(cache, wait=False) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert out.startswith("OK")
    values = {out.split()[2] for out, _ in results}
    assert len(values) == 1
    x = np.linspace(-1.0, 1.0, 7)
    assert np.isclose(float(values.pop()), np.sum(np.sin(x) * x * 1.25), rtol=1e-12)
    from tracegrad.runtime.cache import content_hash

    modules = list(cache.glob("tg_*.py"))
    assert modules and not list(cache.glob(".tmp-*"))
    for module in modules:  # no torn file: every module's content matches its name
        assert f"tg_{content_hash(module.read_bytes())}" == module.stem
