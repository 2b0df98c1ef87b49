"""BLAS threads that follow the idle CPUs, so GEMMs do not collapse on a busy machine.

OpenBLAS splits a GEMM over its threads and waits at a barrier for all of them.
When every core is busy with other processes, one of those threads is often
descheduled, and the GEMM waits for a whole scheduler time slice: on the shared
2-core machine (load 8) the spiral-MLP training step of `examples/train_mlp.py`
took a median 16 ms compiled and 24 ms eager with OpenBLAS's default 2 threads,
against 0.19 ms and 0.77 ms with one; a 512x512 float64 GEMM took 49 ms with
2 threads and 15 ms with one.

`follow_load()` is called before tracegrad runs a GEMM (the eager matmul impl and
every compiled kernel call). It sets each loaded OpenBLAS (NumPy's, and SciPy's
that Numba's BLAS calls use) to the threads that are idle now: the same count
the eager ufunc split uses (`parallel.threads_now`, runnable tasks from
/proc/loadavg, re-read at most every 50 ms), never more than the library
started with. A setting costs about 0.4 us and is made only when the count
changes.

It changes the process's BLAS thread count, which NumPy code outside tracegrad
sees too. It does nothing when the user chose a count (OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS, MKL/other BLAS), or when TRACEGRAD_BLAS_FOLLOW_LOAD=0.

    >>> from tracegrad.ops import blas_threads
    >>> blas_threads.follow_load() in (None, *range(1, 1025))
    True
"""
from __future__ import annotations

import ctypes
import os
import threading

from tracegrad.ops.parallel import threads_now

_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")
_GETTERS = ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
            "scipy_openblas_get_num_threads", "openblas_get_num_threads64_")

_libraries: list[tuple[str, object, int]] | None = None  # (path, setter, threads at start)
_current = [0]          # the count last set (0: not set yet)
_enabled: list = []     # [bool] once decided: the switch and the user's own setting
_lock = threading.Lock()


def _user_chose_threads() -> bool:
    return any(os.environ.get(v, "").strip() for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))


def _loaded_openblas_paths() -> list[str]:
    """OpenBLAS shared libraries already mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


def _find_libraries() -> list[tuple[str, object, int]]:
    found = []
    for path in _loaded_openblas_paths():
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, no new copy
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is None or getter is None:
            continue
        setter.argtypes, setter.restype = (ctypes.c_int,), None
        getter.argtypes, getter.restype = (), ctypes.c_int
        found.append((path, setter, max(1, int(getter()))))
    return found


def _refresh_libraries() -> list:
    """Libraries are looked up again when a new one may have been loaded (SciPy's is
    loaded by Numba's first BLAS call, after NumPy's)."""
    global _libraries
    known = {p for p, _, _ in _libraries or ()}
    if _libraries is None or set(_loaded_openblas_paths()) - known:
        with _lock:
            new = [lib for lib in _find_libraries() if lib[0] not in known]
            for _, setter, _start in new:
                if _current[0]:
                    setter(min(_current[0], _start))
            _libraries = (_libraries or []) + new
    return _libraries


def follow_load() -> int | None:
    """Set the BLAS libraries' threads to the idle CPUs; returns the count in effect
    (None: left alone, because the user chose it or no OpenBLAS is loaded)."""
    if not _enabled:
        from tracegrad.config import blas_follow_load
        _enabled.append(blas_follow_load() and not _user_chose_threads())
    if not _enabled[0]:
        return None
    libraries = _libraries if _libraries else _refresh_libraries()
    if not libraries:
        return None
    wanted = threads_now()
    if wanted != _current[0]:
        with _lock:
            for _, setter, start in libraries:
                setter(min(wanted, start))
            _current[0] = wanted
    return wanted


def following_load(blas_fn):
    """`blas_fn` (np.matmul, ...) that first sets BLAS's threads to the idle CPUs."""
    def call(*args, **kwargs):
        follow_load()
        return blas_fn(*args, **kwargs)
    call.__name__ = call.__qualname__ = getattr(blas_fn, "__name__", "blas_call")
    return call


def reset() -> None:
    """Forget the decisions (tests change the environment)."""
    global _libraries
    _enabled.clear()
    _libraries = None
    _current[0] = 0


def note_new_library() -> None:
    """Call after something may have loaded another BLAS (a first compiled kernel)."""
    if _libraries is not None:
        _refresh_libraries()
