"""Importing Numba for the kernels, without the SciPy import it does not need.

The first kernel a process compiles makes Numba import its whole library of
implementations ("refresh" of the target context; Numba's stock disk cache
refreshes for a load too, tracegrad's verified one does not: numba_cache.py).
One of them, `numba.np.arraymath`, probes at import time whether a BLAS is
available for `np.dot` by importing `scipy.linalg.cython_blas`, which imports
all of `scipy.linalg` (and, through it, `numpy.f2py`): ~0.1-0.17 s, for a BLAS
the generated kernels never use (`intrinsics.tg_gemm` calls the OpenBLAS NumPy
already loaded).

`import_numba()` imports Numba and arranges that `numba.np.arraymath` is
imported at Numba's first refresh (its first compile) with a placeholder
module standing in for `scipy.linalg.cython_blas` during that one import, when
the real one is installed (its extension file exists), and removes the
placeholder right after. Numba then records the same answer (BLAS available)
as it would have, and the real `scipy.linalg.cython_blas` is imported the
first time Numba compiles something that needs it (its `np.dot` /
`np.linalg` implementations call `ensure_blas()` again at compile time; the
C helpers look the BLAS functions up lazily). Without SciPy installed, or
with `scipy.linalg` already imported, nothing is substituted.

The placeholder is in `sys.modules` only for the duration of
`import numba.np.arraymath`, under a lock, and only if nobody else imported
the real module first. Set TRACEGRAD_NUMBA_SCIPY_PROBE=1 to let Numba import
SciPy as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
import types

_LOCK = threading.Lock()
_READY = False
_BLAS_MODULE = "scipy.linalg.cython_blas"


def import_numba() -> None:
    """Import numba and the implementation modules a cached kernel load needs."""
    global _READY
    if _READY:
        return
    with _LOCK:
        if _READY:
            return
        import numba  # noqa: F401

        if "numba.np.arraymath" not in sys.modules:
            _arraymath_at_first_refresh()
        _fork_safe_numba()
        _streams_left_alone()
        from tracegrad.runtime.numba_warnings import leave_filters_alone

        leave_filters_alone()
        _READY = True


class _NoColorShell:
    """Stands in for numba.core.errors.ColorShell: builds nothing, rebinds nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_detail) -> None:
        return None


def _streams_left_alone() -> None:
    """Numba builds each error message (most are raised and caught inside its own type
    inference, so every compile makes many) inside colorama's init()/deinit(), which
    rebind sys.stdout and sys.stderr and put back the streams of the moment init ran.
    From tracegrad's background compile thread that races with the main thread: a
    stream the user swapped meanwhile (contextlib.redirect_stdout, doctest, a
    notebook's capture) was replaced by the old one, and their output went astray.
    The messages are strings that nobody writes there, so the shell is not needed."""
    from numba.core import errors

    if hasattr(errors, "ColorShell"):
        errors.ColorShell = _NoColorShell


_FORK_HOOKED = False


def _fork_safe_numba() -> None:
    """fork() while another thread compiles (the background parallel build) must not
    leave the child with Numba's compiler lock held by a thread that does not exist
    there, nor with LLVM half way through a compile: before a fork, wait for the
    compile in flight by taking Numba's (re-entrant) compiler lock, and give it back
    on both sides afterwards. tracegrad itself holds none of its locks across a
    Numba compile, and resets its locks in the child (cache.py, compiler's build lock
    below)."""
    global _FORK_HOOKED
    if _FORK_HOOKED or not hasattr(os, "register_at_fork"):
        return
    try:
        from numba.core.compiler_lock import global_compiler_lock

        lock = global_compiler_lock._lock
        acquire, release = lock.acquire, lock.release
    except (ImportError, AttributeError):
        return
    held = threading.local()

    def before():
        held.ok = acquire()

    def after():
        if getattr(held, "ok", False):
            held.ok = False
            release()

    os.register_at_fork(before=before, after_in_parent=after, after_in_child=after)
    _FORK_HOOKED = True


_ARRAYMATH_LOCK = threading.Lock()


def _arraymath_at_first_refresh() -> None:
    """Import `numba.np.arraymath` (through `_import_arraymath`) only when Numba first
    refreshes its CPU target context, that is when it first compiles something: the
    refresh imports every implementation module, arraymath among them. A process
    that only loads cached kernels never refreshes (`numba_cache` rebuilds them with
    the runtime's symbols alone) and so skips arraymath's ~0.1 s import too. Numba
    itself imports arraymath nowhere else before a refresh, and every refresh of
    the CPU context runs CPUContext.load_additional_registries first."""
    try:
        from numba.core import cpu

        original = cpu.CPUContext.load_additional_registries
    except (ImportError, AttributeError):  # another Numba: at once, as before
        _import_arraymath()
        return
    if getattr(original, "_tracegrad_arraymath", False):
        return

    def load_additional_registries(self, _original=original):
        if "numba.np.arraymath" not in sys.modules:
            with _ARRAYMATH_LOCK:
                if "numba.np.arraymath" not in sys.modules:
                    _import_arraymath()
        return _original(self)

    load_additional_registries._tracegrad_arraymath = True  # type: ignore[attr-defined]
    load_additional_registries.__wrapped__ = original  # type: ignore[attr-defined]
    cpu.CPUContext.load_additional_registries = load_additional_registries  # type: ignore[method-assign]


def _import_arraymath() -> None:
    placeholder = None
    from tracegrad.config import numba_scipy_probe

    if (
        not numba_scipy_probe()
        and _BLAS_MODULE not in sys.modules
        and "scipy.linalg" not in sys.modules
        and _scipy_blas_installed()
    ):
        placeholder = types.ModuleType(
            _BLAS_MODULE, "tracegrad placeholder: see tracegrad/runtime/numba_loader.py"
        )
        sys.modules[_BLAS_MODULE] = placeholder
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if placeholder is not None and sys.modules.get(_BLAS_MODULE) is placeholder:
            del sys.modules[_BLAS_MODULE]


def _scipy_blas_installed() -> bool:
    """Whether scipy/linalg/cython_blas.<extension> exists (without importing scipy)."""
    try:
        spec = importlib.util.find_spec("scipy")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    for root in spec.submodule_search_locations:
        linalg = os.path.join(root, "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if os.path.exists(os.path.join(linalg, "cython_blas" + suffix)):
                return True
    return False


def _reset_lock_in_child() -> None:
    """After fork only the forking thread exists: a lock another thread held would
    stay held forever in the child."""
    global _LOCK, _ARRAYMATH_LOCK
    _LOCK = threading.Lock()
    _ARRAYMATH_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)
