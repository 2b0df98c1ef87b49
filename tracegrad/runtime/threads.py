"""One thread limit for everything tracegrad runs in parallel, and Numba's threads
started so that they sleep once a kernel returns.

The limit (`get_num_threads()`) bounds the three places tracegrad uses threads:
the parallel (prange) variants of compiled kernels, eager mode's ufunc split
(ops/parallel.py) and the BLAS calls tracegrad makes (ops/blas_threads.py). It is,
first found first:

1. `tracegrad.set_num_threads(n)` (this process, from the call on);
2. TRACEGRAD_NUM_THREADS;
3. NUMBA_NUM_THREADS, then OMP_NUM_THREADS: a count the user gave thread pools in
   general (at most the CPUs below);
4. the CPUs this process may use: `os.sched_getaffinity`, capped by the cgroup's
   CPU quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`,
   rounded up), the cap a container's `--cpus` sets.

What tracegrad never does: set another library's environment variables, call
`numba.set_num_threads` for longer than one kernel call, or leave a BLAS thread
count changed after its own call returns (see each piece).

Numba's threads. A parallel kernel runs on Numba's threading layer, which on Linux
without TBB is GNU OpenMP (libgomp). libgomp's threads busy-wait after every
parallel region before they sleep: 300,000 spins when OMP_WAIT_POLICY and
GOMP_SPINCOUNT are unset, measured at 10-11 ms of CPU per thread on the 2-core
AMD EPYC dev machine (perf/threads.py, "spin"). On 16 cores that is up to
15 x 11 ms of CPU after each ~0.6 ms kernel, taken from every other thread pool
in the process (PyTorch's, XLA's, OpenBLAS's) and from other processes; on a busy
machine the spinning threads also slow the kernel itself, because a spinning
thread holds a core the thread with work needs (6 prange regions over 1M floats at
load 3.5 on 2 cores: median 14-72 ms with the default spin, 2.4-4.1 ms with 1000).

`launch_numba()` starts Numba's threading layer before tracegrad's first parallel
kernel is compiled, with GOMP_SPINCOUNT=1000 in the environment for the duration of
that one call (libgomp reads it when it is loaded) and the environment restored
right after. 1000 is what libgomp itself uses when it has more threads than CPUs:
about 40 us of spinning, enough for the next region of the same kernel. It applies
only when:
- TRACEGRAD_OMP_SPINCOUNT is not `default` (an integer sets another count);
- the user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT;
- no libgomp is loaded yet. If one is (PyTorch loads its own with its symbols
  global), Numba's kernels run on that runtime and its policy, which tracegrad
  leaves alone; `omp_report()` says which case a process is in.
A library that loads libgomp after tracegrad did (PyTorch imported later) shares
that runtime, its thread pool and this wait policy: one pool instead of two that
fight. TRACEGRAD_OMP_SPINCOUNT=default turns it off.

NumPy's OpenBLAS. Its threads spin about 0.1 s after each threaded BLAS call,
tracegrad's kernels' GEMMs included; `import_numpy()` (the first thing `import
tracegrad` does) cuts that the same way, where tracegrad imports NumPy first, and
TRACEGRAD_OPENBLAS_TIMEOUT=default turns it off. These two wait policies are the
only process-wide settings tracegrad makes.

    >>> from tracegrad.runtime import threads
    >>> threads.get_num_threads() >= 1
    True
"""

from __future__ import annotations

import math
import os
import threading

from tracegrad import config

_SPINCOUNT_DEFAULT = 1000
_override: list = [None]  # set_num_threads(n)
_cached: list = [None]  # the default limit, computed once (reset() recomputes)
_listeners: list = []  # called with the new limit (the eager pool resizes)


# --------------------------------------------------------------------------- the CPUs


def affinity_cpus() -> int:
    """CPUs this process may run on (sched_getaffinity; else os.cpu_count())."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _quota_v2(text: str | None) -> float | None:
    """cpu.max: "max 100000" (no limit) or "<quota> <period>" -> CPUs, None if none."""
    if not text:
        return None
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v1(quota: str | None, period: str | None) -> float | None:
    try:
        q, p = int(quota), int(period)
    except (TypeError, ValueError):
        return None
    return q / p if q > 0 and p > 0 else None


def _ancestors(path: str) -> list[str]:
    """'/a/b' -> ['/a/b', '/a', '/']: a quota anywhere above the process applies."""
    path = "/" + path.strip("/")
    out = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out


def cgroup_cpus(
    root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup"
) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (2.5 for `--cpus 2.5`), the
    smallest on its path up to the root; None when there is none (or no cgroup fs).
    `root` and `proc_cgroup` are parameters so that tests can give fixture trees."""
    lines = (_read(proc_cgroup) or "").splitlines()
    found: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2, unified
            for p in _ancestors(path):
                q = _quota_v2(_read(os.path.join(root, p.lstrip("/"), "cpu.max")))
                if q is not None:
                    found.append(q)
        elif "cpu" in controllers.split(","):  # cgroup v1
            for mount in (controllers, "cpu,cpuacct", "cpu"):
                base = os.path.join(root, mount)
                if not os.path.isdir(base):
                    continue
                for p in _ancestors(path):
                    d = os.path.join(base, p.lstrip("/"))
                    q = _quota_v1(
                        _read(os.path.join(d, "cpu.cfs_quota_us")),
                        _read(os.path.join(d, "cpu.cfs_period_us")),
                    )
                    if q is not None:
                        found.append(q)
                break
    if not found and not lines:  # no /proc/self/cgroup: a v2 root file may still say
        q = _quota_v2(_read(os.path.join(root, "cpu.max")))
        if q is not None:
            found.append(q)
    return min(found) if found else None


def available_cpus() -> int:
    """CPUs this process may use: its affinity, capped by the cgroup quota (rounded up)."""
    cpus = affinity_cpus()
    quota = cgroup_cpus()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return cpus


# ---------------------------------------------------------------------------- the limit


def default_num_threads() -> int:
    """The limit when set_num_threads was not called (see the module docstring)."""
    value = config.num_threads()
    if value is not None:
        return value
    cpus = available_cpus()
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        text = os.environ.get(name, "").strip().split(",")[0]  # OMP allows "4,2"
        if text:
            try:
                return max(1, min(cpus, int(text)))
            except ValueError:
                continue
    return cpus


def get_num_threads() -> int:
    """The most threads tracegrad uses at once: compiled kernels' parallel loops,
    eager mode's ufunc split and its BLAS calls (fewer when other processes keep the
    CPUs busy, and one for small work).

    >>> import tracegrad as tg
    >>> tg.get_num_threads() >= 1
    True
    """
    n = _override[0]
    if n is not None:
        return n
    n = _cached[0]
    if n is None:
        n = _cached[0] = default_num_threads()
    return n


def set_num_threads(n: int | None) -> None:
    """Limit tracegrad to `n` threads in this process (None: back to the default from
    TRACEGRAD_NUM_THREADS / the CPUs). Other libraries' settings are not changed:
    Numba's and BLAS's counts are set for the duration of tracegrad's own calls only.

    >>> import tracegrad as tg
    >>> before = tg.get_num_threads()
    >>> tg.set_num_threads(1); tg.get_num_threads()
    1
    >>> tg.set_num_threads(None); tg.get_num_threads() == before
    True
    """
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) and not hasattr(n, "__index__"):
            raise TypeError(
                f"set_num_threads: the number of threads must be an int, got {type(n).__name__}"
            )
        n = int(n.__index__()) if not isinstance(n, int) else n
        if n < 1:
            raise ValueError(f"set_num_threads: the number of threads must be at least 1, got {n}")
    _override[0] = n
    for listener in list(_listeners):
        listener(get_num_threads())


def on_change(listener) -> None:
    """Call `listener(limit)` whenever set_num_threads changes the limit."""
    _listeners.append(listener)


def reset() -> None:
    """Forget set_num_threads and the cached default (tests change the environment)."""
    _override[0] = None
    _cached[0] = None
    for listener in list(_listeners):
        listener(get_num_threads())


# ------------------------------------------------------------------ Numba's threading layer

_launch_lock = threading.Lock()
_omp: dict = {}  # what launch_numba did: omp_report()


def _loaded_libgomp() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return sorted(
                {line.split(None, 5)[-1].strip() for line in f if "libgomp" in line and "/" in line}
            )
    except OSError:
        return []


def launch_numba() -> None:
    """Start Numba's threading layer, with libgomp's busy-wait after a region cut to
    TRACEGRAD_OMP_SPINCOUNT spins where tracegrad is the first to load libgomp (see the
    module docstring). The environment is as it was when this returns. Idempotent."""
    if _omp:
        return
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()
    from numba.np.ufunc import parallel as npar

    with _launch_lock:
        if _omp:
            return
        if npar._is_initialized:
            _omp.update(spin=None, why="Numba's threading layer was started before tracegrad's")
            return
        spin = config.omp_spincount()
        user = [v for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if os.environ.get(v)]
        before = _loaded_libgomp()
        if spin is None:
            why, spin = "TRACEGRAD_OMP_SPINCOUNT=default", None
        elif user:
            why, spin = f"the user set {', '.join(user)}", None
        elif before:
            why, spin = f"libgomp already loaded ({before[0]}): its policy stays", None
        else:
            why = f"GOMP_SPINCOUNT={spin} while Numba's layer loaded libgomp"
        if spin is None:
            npar._launch_threads()
        else:
            os.environ["GOMP_SPINCOUNT"] = str(spin)
            try:
                npar._launch_threads()
            finally:
                os.environ.pop("GOMP_SPINCOUNT", None)
        _omp.update(
            spin=spin,
            why=why,
            layer=npar._threading_layer,
            libgomp_before=before,
            libgomp_after=_loaded_libgomp(),
        )


_blas: dict = {}  # what import_numpy did: blas_report()


def import_numpy() -> None:
    """Import NumPy, with its OpenBLAS's busy-wait after a BLAS call cut to
    2**TRACEGRAD_OPENBLAS_TIMEOUT cycles where tracegrad is the first to import it.

    OpenBLAS's threads spin for 2**28 cycles (about 0.1 s) after every threaded call
    before they sleep: 12-30 ms of CPU in the 30 ms after one 512x512 GEMM on 2 cores
    (perf/threads.py, "spin"), and after each compiled kernel that calls GEMM, since
    kernels call NumPy's OpenBLAS. OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when
    it loads with NumPy, and offers no call to change it later; so the variable is set
    for the duration of NumPy's import and removed right after. It applies only when
    TRACEGRAD_OPENBLAS_TIMEOUT is not `default`, the user did not set
    OPENBLAS_THREAD_TIMEOUT, and NumPy is not imported yet. Idempotent."""
    import sys

    if _blas:
        return
    timeout = config.openblas_timeout()
    if "numpy" in sys.modules:
        why, timeout = "NumPy was imported before tracegrad: OpenBLAS's policy stays", None
    elif os.environ.get("OPENBLAS_THREAD_TIMEOUT"):
        why, timeout = "the user set OPENBLAS_THREAD_TIMEOUT", None
    elif timeout is None:
        why = "TRACEGRAD_OPENBLAS_TIMEOUT=default"
    else:
        why = f"OPENBLAS_THREAD_TIMEOUT={timeout} while NumPy loaded OpenBLAS"
    if timeout is None:
        import numpy
    else:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(timeout)
        try:
            import numpy  # noqa: F401
        finally:
            os.environ.pop("OPENBLAS_THREAD_TIMEOUT", None)
    _blas.update(timeout=timeout, why=why)
    _startup_threads.update(thread_ids())


_startup_threads: set[str] = set()


def thread_ids() -> set[str]:
    """This process's thread ids (/proc/self/task names); empty without /proc."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def startup_thread_ids() -> set[str]:
    """This process's thread ids when tracegrad was imported, NumPy's OpenBLAS workers
    among them (those still alive, and the workers OpenBLAS restarted after a fork:
    `adopt_threads`); empty where /proc cannot be read."""
    return _startup_threads


def adopt_threads(new_ids: set[str]) -> None:
    """Count `new_ids` (NumPy's OpenBLAS workers, started again after a fork) with the
    import-time threads, and forget those that have ended."""
    if _startup_threads and new_ids:
        _startup_threads.intersection_update(thread_ids())
        _startup_threads.update(new_ids)


def blas_report() -> dict:
    """What import_numpy did: `timeout` (the log2 cycles set, None where OpenBLAS's
    own policy applies) and `why`."""
    return dict(_blas)


def omp_report() -> dict:
    """What launch_numba did: `spin` (the count set, None if libgomp's own policy
    applies), `why`, the threading `layer`, and the libgomp files loaded before and
    after. Empty before the first parallel kernel."""
    return dict(_omp)


def numba_pool_size() -> int:
    """Threads in Numba's pool (NUMBA_NUM_THREADS, fixed at launch)."""
    from numba.core import config as numba_config

    return int(numba_config.NUMBA_NUM_THREADS)


KERNEL_GRAIN = 1 << 16  # elements per thread at least in a parallel kernel's largest loop


def numba_parallel_call(entry, serial, idle=None, work: int | None = None):
    """`entry` (a kernel with prange loops) made to run on at most the thread limit,
    `idle()` (the CPUs not busy now; codegen passes ops/parallel.threads_now), Numba's
    pool and one thread per KERNEL_GRAIN elements of `work` (its largest loop), and
    `serial` when that is one thread. Numba's thread count is per calling thread; it
    is set for the call and put back right after, so the caller's own Numba code keeps
    its count.

    KERNEL_GRAIN: on 16 cores the issue measured elementwise_1M still faster on 16
    threads than on 8 (605 vs 859 us), so 1M elements take all 16; a 2**18-element
    kernel (the smallest with a parallel variant) takes 4. Not measured above 2 cores
    here (perf/threads.py, crossover, measures it per core count)."""
    from numba.np.ufunc import parallel as npar

    launch_numba()
    get, set_ = npar._get_num_threads, npar._set_num_threads
    pool = numba_pool_size()
    if work is not None:
        pool = min(pool, max(1, int(work) // KERNEL_GRAIN))

    def call(*arrays):
        k = min(get_num_threads(), pool)
        if idle is not None:
            k = min(k, idle())
        if k < 2:
            return serial(*arrays)
        before = get()
        if before == k:
            return entry(*arrays)
        set_(k)
        try:
            return entry(*arrays)
        finally:
            set_(before)

    call.raw_entry = entry
    return call
