"""Intra-op parallelism for large elementwise ufuncs (the NumPy impls of the rule table).

NumPy runs a ufunc on one core. For large arrays (at least `MIN_PARALLEL`
elements) an elementwise impl splits its flat index range into one chunk per
thread: the caller computes the last chunk while a small pool computes the
others (NumPy releases the GIL inside the loop). Each output element is
computed by the same ufunc loop from the same inputs, so the result is the one
the serial call gives, bit for bit (chunk boundaries are multiples of 64
elements, so every chunk keeps the alignment of the whole array).

The split applies only where the serial call's result is known in advance:
every array operand is an ndarray of the same float32/float64 dtype, either of
the output's full shape (C-contiguous, or any strides for 1-D) or of size one
(broadcast); the other operands are Python floats or ints. Anything else runs
the plain serial call. Floating-point errors keep NumPy's semantics: the chunks
run with errors recorded, and if any chunk saw one the whole call is redone
serially under the caller's `np.errstate`, so warnings and exceptions are
exactly the serial ones.

Threads: TRACEGRAD_EAGER_THREADS, else tracegrad's one thread limit
(`tracegrad.set_num_threads`, TRACEGRAD_NUM_THREADS, NUMBA_NUM_THREADS /
OMP_NUM_THREADS, the CPUs of the affinity mask and cgroup quota: runtime/threads.py).
One thread means always serial. The pool's workers block on a queue between
chunks (no busy-wait), and a call uses one thread per GRAIN elements at most, so
mid-sized arrays do not wake every core. Like OpenMP's dynamic mode
(OMP_DYNAMIC), the split uses only CPUs no other process is running on: on Linux
the count of runnable tasks (/proc/loadavg, re-read at most every 50 ms) decides,
so on a machine whose cores are all busy the call stays serial (a split then
waits for a core and is slower than one thread).

`keep_freed_memory()` (called when tracegrad.eager is imported) tells glibc's
malloc to keep freed blocks of up to 32 MB for reuse instead of handing them
back to the kernel. Eager steps allocate and free the same large temporaries
every step; by default glibc returns them (its trim threshold is a few MB) and
every new array page-faults its memory in again: on a 1M-element float32 step
that was ~5800 page faults and about half the step's time. The cost is that the
process keeps up to 128 MB of freed memory (the trim threshold) for reuse.
TRACEGRAD_MALLOC_TUNING=0 leaves malloc as it is; other C libraries are untouched.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import numpy as np

from tracegrad.runtime import eager_math
from tracegrad.runtime import threads as _threads

MIN_PARALLEL = 1 << 17  # elements: below this the pool hand-off costs more than it saves
_ALIGN = 64  # chunk boundaries, in elements

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_ndarray = np.ndarray
_asarray = np.asarray
_empty = np.empty


GRAIN = MIN_PARALLEL // 2  # elements per thread at least: a call on n elements uses n // GRAIN


def _thread_count() -> int:
    from tracegrad.config import eager_threads

    threads = eager_threads()
    if threads is not None:
        return threads
    return _threads.get_num_threads()


THREADS = _thread_count()  # the eager split's thread count now (follows set_num_threads)
_CPUS = max(1, os.cpu_count() or 1)  # /proc/loadavg counts the whole machine's tasks
_pool = None
_pool_size = 0
_pool_lock = threading.Lock()


def _on_limit_change(_limit: int) -> None:
    """tracegrad.set_num_threads: the split's count follows; a pool too small for it
    is replaced on next use (the old one's idle workers exit)."""
    global THREADS
    THREADS = _thread_count()
    _free[0] = 0.0  # threads_now() looks again


def _get_pool():
    global _pool, _pool_size
    if _pool is None or _pool_size < THREADS - 1:
        with _pool_lock:
            if _pool is None or _pool_size < THREADS - 1:
                from concurrent.futures import ThreadPoolExecutor

                old = _pool
                _pool_size = max(1, THREADS - 1)
                _pool = ThreadPoolExecutor(
                    max_workers=_pool_size,
                    thread_name_prefix="tracegrad-elementwise",
                    initializer=_remember_worker,
                )
                if old is not None:
                    old.shutdown(wait=False)
    return _pool


_free = [0.0, 1]  # (time of the last look, threads to use now)
_workers: list[int] = []  # native thread ids of the pool's workers


def _remember_worker() -> None:
    _workers.append(threading.get_native_id())


def _own_threads_running() -> int:
    """How many of this process's other threads the kernel counts as runnable right now
    but not as load: tracegrad's eager pool, and the threads the process had when
    tracegrad was imported (NumPy's OpenBLAS workers, which the kernels' BLAS calls
    use). Those may not have gone back to sleep after the last chunk, and they would
    take the next one. Any other running thread is load: another runtime's pool in
    this process (an OpenBLAS of its own spins ~0.1 s after each call: jax.jit's
    Cholesky on SciPy's OpenBLAS doubled the GP kernel's 2-thread median beside it),
    a background build, a user's thread. Where an import-time thread has ended (a fork
    restarts OpenBLAS's pool), every running thread counts as ours, as before.
    Also notes when those other threads last ran (`foreign_threads_busy`)."""
    me = threading.get_native_id()
    now = time.monotonic()
    running = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        _foreign_busy_at[0] = now  # cannot tell: as if they were busy
        return 0
    own: set[str] | None = _threads.startup_thread_ids()
    if not own or not own.issubset(tids):
        own = None
        _foreign_busy_at[0] = now
    ticks_before, ticks_now = _foreign_ticks.copy(), {}
    for tid in tids:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            state, ticks = fields[0], int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
        if own is None or tid in own or int(tid) in _workers:
            running += state == b"R"
            continue
        ticks_now[tid] = ticks
        if state == b"R":
            _foreign_busy_at[0] = now
        elif ticks > ticks_before.get(tid, ticks):  # it ran since the last look, maybe long ago
            _foreign_busy_at[0] = max(_foreign_busy_at[0], _foreign_ticks_at[0])
    _foreign_ticks.clear()
    _foreign_ticks.update(ticks_now)
    _foreign_ticks_at[0] = now
    return running


# Threads not tracegrad's (see _own_threads_running): their CPU ticks at the last look,
# and when one of them was last seen running or having run since the look before.
_foreign_ticks: dict[str, int] = {}
_foreign_ticks_at = [-1e9]
_foreign_busy_at = [-1e9]


def foreign_threads_busy(within: float = 1.0) -> bool:
    """Whether a thread of this process that is not tracegrad's (another runtime's
    pool, a user's thread) ran in the last `within` seconds, as of the last look
    `threads_now` took (True where that cannot be told: no /proc, or after a fork)."""
    return time.monotonic() - _foreign_busy_at[0] < within


def threads_now() -> int:
    """Threads worth using now: the thread limit (runtime/threads.py), less the CPUs
    other runnable tasks occupy (other processes', and other runtimes' threads in this
    one: `_own_threads_running`; re-read at most every 50 ms); BLAS calls,
    parallel kernels and the eager split (at most THREADS) follow it."""
    now = time.monotonic()
    if now - _free[0] < 0.05:
        return _free[1]
    _free[0] = now
    limit = _threads.get_num_threads()
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
        # this thread is one of the runnable tasks, and our own other threads are not load
        others = max(0, running - 1 - _own_threads_running())
        _free[1] = max(1, min(limit, _CPUS - others))
    except (OSError, ValueError, IndexError):
        _free[1] = limit
    return _free[1]


class _Flag:
    """np.errstate(call=...) target: remembers that a chunk raised an FP error."""

    __slots__ = ("hit",)

    def __init__(self):
        self.hit = False

    def __call__(self, kind, flag):
        self.hit = True


def _run_chunk(ufunc, operands, out, flag):
    with np.errstate(all="call", call=flag):
        ufunc(*operands, out=out)


def _flat_operands(args):
    """(flat operands, output shape, dtype, size) when the call can be split, else None."""
    shape = None
    dtype = None
    for a in args:
        if type(a) is _ndarray:
            if a.size >= MIN_PARALLEL:
                shape = a.shape
                dtype = a.dtype
                break
    if shape is None or (dtype is not _F32 and dtype is not _F64):
        return None
    n = 1
    for d in shape:
        n *= d
    flat = []
    for a in args:
        t = type(a)
        if t is _ndarray:
            if a.dtype is not dtype:
                return None
            if a.shape == shape:
                if len(shape) == 1:
                    flat.append(a)
                elif a.flags.c_contiguous:
                    flat.append(a.reshape(n))
                else:
                    return None
            elif a.size == 1 and a.ndim <= len(shape):
                flat.append(a.reshape(()))
            else:
                return None
        elif t is float or t is int:
            flat.append(a)
        else:
            return None
    return flat, shape, dtype, n


# NumPy's float64 sin/cos are scalar libm loops (~8x slower than a vectorized loop):
# large arrays go to codegen's eager_math kernels, loaded on first use (see there).
_SCALAR_F64_UFUNCS = {np.sin: "sin", np.cos: "cos"}


def elementwise_impl(ufunc):
    """The impl of an elementwise primitive: `ufunc` on its operands, split across
    threads when large (see module docstring); 0-d results are ndarrays."""
    if ufunc.nin == 1:
        fast_math = _SCALAR_F64_UFUNCS.get(ufunc)

        def impl(x):
            if type(x) is _ndarray and x.size >= MIN_PARALLEL:
                if fast_math is not None and x.dtype is _F64 and x.flags.c_contiguous:
                    out = _fast_math_call(fast_math, x)
                    if out is not None:
                        return out
                    out = numpy_impl(x)
                    eager_math.start_loading()  # after NumPy's answer: that call never waits
                    return out
                return numpy_impl(x)
            out = ufunc(x)
            return out if type(out) is _ndarray else _asarray(out)

        def numpy_impl(x):
            plan = _flat_operands((x,)) if THREADS > 1 else None
            if plan is not None:
                k = min(threads_now(), THREADS)
                if k > 1:
                    return _parallel_call(ufunc, (x,), plan, k)
            out = ufunc(x)
            return out if type(out) is _ndarray else _asarray(out)
    elif ufunc.nin == 2:

        def impl(x, y):
            if (
                (type(x) is _ndarray and x.size >= MIN_PARALLEL)
                or (type(y) is _ndarray and y.size >= MIN_PARALLEL)
            ) and THREADS > 1:
                plan = _flat_operands((x, y))
                if plan is not None:
                    k = min(threads_now(), THREADS)
                    if k > 1:
                        return _parallel_call(ufunc, (x, y), plan, k)
            out = ufunc(x, y)
            return out if type(out) is _ndarray else _asarray(out)
    else:
        raise ValueError(f"elementwise_impl: {ufunc.__name__} takes {ufunc.nin} operands")
    impl.__name__ = getattr(ufunc, "__name__", "impl")
    impl.ufunc = ufunc
    return impl


def _fast_math_call(short: str, x: np.ndarray):
    """short(x) by the eager_math kernel, split across idle cores (the kernel releases
    the GIL); None when the caller must use NumPy (disabled, or an argument beyond the
    kernel's range: NumPy then gives its own results and warnings)."""
    if eager_math.kernel(short, start=False) is None:  # disabled, or not loaded yet
        return None
    flat = x.reshape(-1)
    out = _empty(x.shape, _F64)
    flat_out = out.reshape(-1)
    return _split_kernel(lambda lo, hi: eager_math.apply(short, flat[lo:hi], flat_out[lo:hi]), out)


def fused_vjp(name: str, g, y):
    """A fused vjp loop from codegen's eager_math (`tanh_backward`: g * (1 - y*y);
    `sin_backward`: g * cos(y)) for large same-shape float32/float64 arrays, split
    across idle cores; None when the rule must use table ops (tracers, tensors of a
    recorded backward, small or mixed arrays, kernel unavailable)."""
    if (
        type(g) is not _ndarray
        or type(y) is not _ndarray
        or g.size < MIN_PARALLEL
        or g.shape != y.shape
        or g.dtype is not y.dtype
        or (g.dtype is not _F32 and g.dtype is not _F64)
        or not (g.flags.c_contiguous and y.flags.c_contiguous)
    ):
        return None
    if not eager_math.enabled():
        return None
    out = _empty(g.shape, g.dtype)
    flat_out, flat_g, flat_y = out.reshape(-1), g.reshape(-1), y.reshape(-1)

    def run(lo, hi):
        return eager_math.apply_fused(name, flat_g[lo:hi], flat_y[lo:hi], flat_out[lo:hi])

    return _split_kernel(run, out)


def _split_kernel(run, out):
    """run(lo, hi) over chunks of out's flat range, on idle cores; out, or None if any
    chunk asked for the fallback."""
    n = out.size
    threads = min(threads_now(), THREADS, max(1, n // GRAIN)) if THREADS > 1 else 1
    step = -(-n // threads)
    step = -(-step // _ALIGN) * _ALIGN
    bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)]
    futures = [_get_pool().submit(run, lo, hi) for lo, hi in bounds[:-1]]
    ok = run(*bounds[-1])
    for f in futures:
        ok = f.result() and ok
    return out if ok else None


def _parallel_call(ufunc, args, plan, threads):
    flat, shape, dtype, n = plan
    out = _empty(shape, dtype)
    flat_out = out.reshape(n)
    parts = min(threads, max(1, n // GRAIN))
    step = -(-n // parts)
    step = -(-step // _ALIGN) * _ALIGN
    bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)]
    pool = _get_pool()
    flags = [_Flag() for _ in bounds]
    futures = []
    failed = False
    try:
        for (lo, hi), flag in zip(bounds[:-1], flags, strict=True):
            ops = [op[lo:hi] if type(op) is _ndarray and op.ndim == 1 else op for op in flat]
            futures.append(pool.submit(_run_chunk, ufunc, ops, flat_out[lo:hi], flag))
        lo, hi = bounds[-1]
        ops = [op[lo:hi] if type(op) is _ndarray and op.ndim == 1 else op for op in flat]
        _run_chunk(ufunc, ops, flat_out[lo:hi], flags[-1])
    except Exception:
        failed = True
    for f in futures:
        if f.exception() is not None:
            failed = True
    if failed or any(flag.hit for flag in flags):
        # an FP error or a failure: NumPy's own warning, exception or result, from one serial call
        out = ufunc(*args)
        return out if type(out) is _ndarray else _asarray(out)
    return out


def _after_fork_in_child() -> None:
    """fork() copies only the forking thread: the pool's workers do not exist in the
    child, yet the copied pool would count them as idle and queue work nobody runs
    (a hang). The child starts with no pool (made again on first use) and fresh
    locks. Also here, because this module is imported with tracegrad itself: the
    compiler's build lock (an RLock another thread, such as a background parallel
    build, may have held at the fork) is made new, unless the forking thread holds it."""
    global _pool, _pool_lock, _pool_size
    _pool = None
    _pool_size = 0
    _pool_lock = threading.Lock()
    _workers.clear()
    _free[0], _free[1] = 0.0, 1
    _foreign_ticks.clear()
    _foreign_ticks_at[0] = _foreign_busy_at[0] = -1e9
    compiler = sys.modules.get("tracegrad.compiler")
    lock = getattr(compiler, "_BUILD_LOCK", None)
    if (
        lock is not None
        and hasattr(lock, "_at_fork_reinit")
        and hasattr(lock, "_is_owned")
        and not lock._is_owned()
    ):
        lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_threads.on_change(_on_limit_change)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_malloc_tuned = None


def keep_freed_memory() -> bool:
    """glibc only: reuse freed large blocks instead of re-faulting fresh pages (see the
    module docstring). Returns whether the setting was applied; done once per process."""
    global _malloc_tuned
    if _malloc_tuned is not None:
        return _malloc_tuned
    _malloc_tuned = False
    from tracegrad.config import malloc_tuning

    if not malloc_tuning() or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - raises AttributeError on musl (glibc only)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _malloc_tuned = bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    )
    return _malloc_tuned
