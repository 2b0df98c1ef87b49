"""BLAS threads for tracegrad's own GEMMs: at most the thread limit and the idle CPUs,
for the duration of the call only.

OpenBLAS splits a GEMM over its threads and waits at a barrier for all of them.
When every core is busy with other processes, one of those threads is often
descheduled, and the GEMM waits for a whole scheduler time slice: on the shared
2-core machine (load 8) the spiral-MLP training step of `examples/train_mlp.py`
took a median 16 ms compiled and 24 ms eager with OpenBLAS's default 2 threads,
against 0.19 ms and 0.77 ms with one; a 512x512 float64 GEMM took 49 ms with
2 threads and 15 ms with one.

`limited(fn, cap)` / `enter(cap)` + `leave()` wrap a call tracegrad makes (the eager matmul
and addmm impls, every compiled kernel that calls BLAS, scan drivers): before it,
each loaded OpenBLAS (NumPy's, and SciPy's that Numba's BLAS calls use) whose
count is above `parallel.threads_now()` (the thread limit of runtime/threads.py,
less the CPUs other processes keep busy; /proc/loadavg, re-read at most every
50 ms) is lowered to it; after it, the count the library had is put back. So
NumPy code outside tracegrad always sees the count the user (or the library)
chose: tracegrad never raises a count and never leaves one changed. When nothing
needs lowering (the usual case on an idle machine) no call is made; a setting
costs about 0.4 us.

A compiled kernel also passes `cap`, the threads its largest BLAS call is worth
(codegen/kernel.py's blas_thread_cap: one per 2^22 multiply-adds), which applies
where another runtime's thread pool shares the process (JAX, PyTorch, TensorFlow
imported) and a thread that is not tracegrad's ran in the last second
(ops/parallel.py `foreign_threads_busy`: a runtime imported and left idle costs
nothing). The two pools then take turns waiting at each other's barriers, and
OpenBLAS's workers spin ~0.1 s after each call on the cores the other pool needs:
PyTorch eager's attention (2^21 multiply-adds a GEMM) beside tracegrad's went from
3.5-4.2 ms to 1.8-1.9 ms with one BLAS thread, tracegrad's own time unchanged.
Bigger calls keep their threads: the GP kernel's order-256 solves (2^23) are 15-25%
faster with a second thread alone. Beside jax.jit's Cholesky, whose OpenBLAS (SciPy's,
not NumPy's) spins after each call, that kernel gets one thread because the spinning
thread counts as load (ops/parallel.py `_own_threads_running`), not because of `cap`.

`follow_load()`, which older call sites call before a LAPACK call they make
themselves (ops/linalg.py), no longer changes anything: it cannot put the count
back after a call it does not wrap. It returns the count tracegrad would use.

Nothing is set when TRACEGRAD_BLAS_FOLLOW_LOAD=0.

    >>> from tracegrad.ops import blas_threads
    >>> blas_threads.follow_load() in (None, *range(1, 1025))
    True
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

from tracegrad.ops.parallel import foreign_threads_busy, threads_now
from tracegrad.runtime import threads as _threads_module

# OpenBLAS splits a GEMM over its threads from M*N*K = 65536 * 4 on (its
# GEMM_MULTITHREAD_THRESHOLD); below that it runs on the calling thread.
BLAS_THREADED_MNK = 65536 * 4

_SETTERS = (
    "openblas_set_num_threads",
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
)
_GETTERS = (
    "openblas_get_num_threads",
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads64_",
)

_libraries: list[tuple[str, object, object]] | None = None  # (path, setter, getter)
_enabled: list = []  # [bool] once decided: TRACEGRAD_BLAS_FOLLOW_LOAD
_ceiling = [0]  # the largest count a library had when it was found
_lock = threading.Lock()


def _loaded_openblas_paths() -> list[str]:
    """OpenBLAS shared libraries already mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


def _symbol(lib, names: tuple[str, ...]):
    """The first of `names` the library exports (each OpenBLAS build spells its API
    with its own prefix and suffix), or None."""
    return next((getattr(lib, n) for n in names if hasattr(lib, n)), None)


def _find_libraries() -> list[tuple[str, object, object]]:
    found = []
    for path in _loaded_openblas_paths():
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, no new copy
        except OSError:
            continue
        setter, getter = _symbol(lib, _SETTERS), _symbol(lib, _GETTERS)
        if setter is None or getter is None:
            continue
        setter.argtypes, setter.restype = (ctypes.c_int,), None
        getter.argtypes, getter.restype = (), ctypes.c_int
        found.append((path, setter, getter))
    return found


def _refresh_libraries() -> list:
    """Libraries are looked up again when a new one may have been loaded (SciPy's is
    loaded by Numba's first BLAS call, after NumPy's)."""
    global _libraries
    known = {p for p, _, _ in _libraries or ()}
    if _libraries is None or set(_loaded_openblas_paths()) - known:
        with _lock:
            new = [lib for lib in _find_libraries() if lib[0] not in known]
            _libraries = (_libraries or []) + new
            for _, _, getter in new:  # above this nothing is ever lowered: no call needed
                _ceiling[0] = max(_ceiling[0], int(getter()))
    return _libraries


def _is_enabled() -> bool:
    if not _enabled:
        from tracegrad.config import blas_follow_load

        _enabled.append(blas_follow_load())
    return _enabled[0]


# Array runtimes that bring their own thread pool into the process (XLA's, PyTorch's
# OpenMP / intra-op pool, TensorFlow's).
NEIGHBOUR_RUNTIMES = ("jax", "torch", "tensorflow")
_neighbours_seen = [False]


def neighbour_pools() -> bool:
    """Whether another array runtime with its own thread pool is loaded in this
    process (once seen, always: a module is never really unloaded)."""
    if not _neighbours_seen[0]:
        _neighbours_seen[0] = any(name in sys.modules for name in NEIGHBOUR_RUNTIMES)
    return _neighbours_seen[0]


def enter(cap: int | None = None) -> list | None:
    """Lower each OpenBLAS above the count tracegrad may use now to that count, and,
    when another runtime's pool shares the process and one of its threads ran in the
    last second, above `cap` (the count the call's size is worth) too; returns what
    `leave` needs to put the counts back (None: nothing was changed)."""
    if not _is_enabled():
        return None
    libraries = _libraries if _libraries else _refresh_libraries()
    if not libraries:
        return None
    wanted = threads_now()
    if cap is not None and cap < wanted and neighbour_pools() and foreign_threads_busy():
        wanted = cap
    if wanted >= _ceiling[0]:  # the usual case: the counts the libraries started with fit
        return None
    saved = None
    for _, setter, getter in libraries:
        have = getter()
        if have > wanted:
            setter(wanted)
            if saved is None:
                saved = []
            saved.append((setter, have))
    return saved


def leave(saved: list | None) -> None:
    """Put back the counts `enter` changed."""
    if saved:
        for setter, have in saved:
            setter(have)


def limited(blas_fn, cap: int | None = None):
    """`blas_fn` (np.matmul, a kernel entry, ...) run with BLAS's threads at most the
    count tracegrad may use now (and at most `cap`), and the library's own count put
    back after."""

    def call(*args, **kwargs):
        saved = enter(cap)
        if saved is None:
            return blas_fn(*args, **kwargs)
        try:
            return blas_fn(*args, **kwargs)
        finally:
            leave(saved)

    call.__name__ = call.__qualname__ = getattr(blas_fn, "__name__", "blas_call")
    call.raw_entry = blas_fn  # type: ignore[attr-defined]
    return call


following_load = limited  # the older name


def follow_load() -> int | None:
    """The BLAS thread count tracegrad would use now (None: TRACEGRAD_BLAS_FOLLOW_LOAD=0
    or no OpenBLAS loaded). Changes nothing: see the module docstring."""
    if not _is_enabled():
        return None
    libraries = _libraries if _libraries else _refresh_libraries()
    if not libraries:
        return None
    return threads_now()


_CORE_NAME_FUNCTIONS = (
    "openblas_get_corename",
    "scipy_openblas_get_corename64_",
    "scipy_openblas_get_corename",
    "openblas_get_corename64_",
)


def core_names() -> list[str]:
    """The CPU kernel set each loaded OpenBLAS chose ("Haswell", "SkylakeX", "Zen", ...:
    OPENBLAS_CORETYPE or its own detection); empty where none says."""
    names = []
    for path in _loaded_openblas_paths():
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle
        except OSError:
            continue
        fn = _symbol(lib, _CORE_NAME_FUNCTIONS)
        if fn is None:
            continue
        fn.argtypes, fn.restype = (), ctypes.c_char_p
        name = fn()
        if name:
            names.append(name.decode("ascii", "replace"))
    return names


def library_threads() -> list[int]:
    """The thread count each loaded OpenBLAS has now."""
    return [int(getter()) for _, _, getter in (_refresh_libraries() or ())]


def reset() -> None:
    """Forget the decisions (tests change the environment)."""
    global _libraries
    _enabled.clear()
    _neighbours_seen[0] = False
    _libraries = None
    _ceiling[0] = 0


def _numpy_pool_after_fork() -> None:
    """OpenBLAS shuts its pool down before every fork (its own pthread_atfork handler)
    and starts new workers at the next threaded call. In the parent, start NumPy's
    pool again now, and tell ops/parallel.py the new workers are tracegrad's (its
    BLAS calls use them): otherwise they would count as another runtime's threads."""
    from tracegrad.runtime import numpy_openblas

    if not _threads_module.startup_thread_ids():
        return  # no /proc: nothing to tell apart
    libraries = _libraries if _libraries is not None else _refresh_libraries()
    ours = [lib for lib in libraries if os.path.realpath(lib[0]) == numpy_openblas.path()]
    if not ours:
        return
    before = _threads_module.thread_ids()
    for _, setter, getter in ours:
        setter(getter())  # the same count: OpenBLAS starts its workers for it
    _threads_module.adopt_threads(_threads_module.thread_ids() - before)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_parent=_numpy_pool_after_fork)


def note_new_library() -> None:
    """Call after something may have loaded another BLAS (a first compiled kernel)."""
    if _libraries is not None:
        _refresh_libraries()
