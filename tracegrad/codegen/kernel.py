"""The CPU kernel: build (generate, cache, compile) and load a graph's Numba kernel.

`build_kernel(graph)` turns a fused graph into a `Kernel`: generate.py writes the
module, runtime/cache.py stores it as a hash-named .py file (verified before
import) and Numba compiles it; `load_indexed` finds a kernel through the index
(index.py) without building any graph. Nodes without code generation run their
NumPy impl between njit segments; `scan` nodes run the native loops of loops.py.

This is the top of the CPU backend's import graph: it imports the planning
(plan.py, memory.py) and the emitters (generate.py and what it uses), none of
which imports it. The package `tracegrad.codegen` re-exports its public names.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

import tracegrad.codegen.loops as loops
from tracegrad import config
from tracegrad.ir.graph import Graph

log = logging.getLogger("tracegrad")

__all__ = ["Kernel", "build_kernel", "load_indexed", "report_for"]


def _setup_logging() -> None:
    if config.log_enabled() and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[tracegrad] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _calls_blas(source: str | None) -> bool:
    return bool(source) and any(c in source for c in ("tg_gemm(", "tg_trs", "tg_potrf("))


# Multiply-adds of the largest BLAS call per BLAS thread worth starting where another
# runtime's pool shares the process (ops/blas_threads.py). Measured on 2 cores (n x n,
# OpenBLAS 0.3.x, float32 and float64): a second thread gave gemm 0.6x at n = 128
# (2^21) and trsm 1.1-1.3x at n = 256 (2^23 multiply-adds).
BLAS_WORK_PER_THREAD = 1 << 22
_MACS = {  # call -> (its leading integer arguments, multiply-adds from them)
    "tg_gemm": (5, lambda a: a[2] * a[3] * a[4]),  # (transa, transb, m, n, k, ...)
    "tg_trsm": (5, lambda a: a[3] * a[3] * a[4] // 2),  # (lower, trans, unit, m, k, ...)
    "tg_trmm": (5, lambda a: a[3] * a[3] * a[4] // 2),
    "tg_trsv": (4, lambda a: a[3] * a[3] // 2),  # (lower, trans, unit, m, ...)
    "tg_trmv": (4, lambda a: a[3] * a[3] // 2),
    "tg_potrf": (1, lambda a: a[0] ** 3 // 6),  # (n, ...)
}
_BLAS_CALL = re.compile(r"\b(tg_[a-z0-9_]+)\(([^()]*)")
_LAPACK_OTHER = re.compile(
    r"\btg_(getrf|getrs|getri|syevd|gesdd|geqrf|orgqr|lu_slogdet|qr_r_transposed)\("
)


def blas_thread_cap(source: str | None) -> int | None:
    """The BLAS threads worth using for a kernel's largest BLAS call (one per
    BLAS_WORK_PER_THREAD multiply-adds); None when there is no limit: no BLAS call,
    a size that is not a literal, or a LAPACK routine not sized here."""
    if not source or not _calls_blas(source) or _LAPACK_OTHER.search(source):
        return None
    largest = 0
    for name, args in _BLAS_CALL.findall(source):
        if name not in _MACS:
            continue
        count, macs = _MACS[name]
        try:
            largest = max(largest, macs([int(a) for a in args.split(",")[:count]]))
        except (ValueError, IndexError):  # a size that is a template parameter
            return None
    from tracegrad.ops.blas_threads import BLAS_THREADED_MNK

    if largest < BLAS_THREADED_MNK:
        return None  # OpenBLAS keeps such calls on one thread itself: no setting needed
    return -(-largest // BLAS_WORK_PER_THREAD)


def _load_aware(
    entry: Callable,
    calls_blas: bool,
    serial: Callable | None = None,
    work: int | None = None,
    blas_cap: int | None = None,
) -> Callable:
    """`entry`, made a good neighbour (runtime/threads.py, ops/blas_threads.py): a
    parallel variant runs on at most tracegrad's thread limit and the idle CPUs (the
    serial variant when that is one), Numba's count put back after the call; BLAS's
    threads are lowered to the same count for the call only, and to `blas_cap` when
    that is lower (blas_thread_cap). Kernels that need neither are returned as is."""
    if not calls_blas and serial is None:
        return entry
    from tracegrad.ops import blas_threads, parallel
    from tracegrad.runtime import threads

    call = (
        entry
        if serial is None
        else threads.numba_parallel_call(
            entry, serial, idle=lambda: parallel.threads_now(), work=work
        )
    )
    if calls_blas:
        call = blas_threads.limited(call, cap=blas_cap)
    call.raw_entry = entry
    return call


class Kernel:
    """A compiled graph: `kernel(*arrays)` returns a tuple, one array per output.

    `source` is the generated module's text, `source_path` its file in the
    cache (None without a disk cache). `entry` is the raw callable (one Numba
    dispatch when the graph has no NumPy fallbacks): the fastest way to call.
    Inputs should be C-contiguous arrays of the graph's dtypes; anything else
    (non-contiguous, read-only, Python scalars) is converted on a slower path.
    """

    def __init__(
        self,
        entry: Callable,
        graph: Graph | None,
        source: str,
        source_path: str | None,
        fallback_ids=(),
        timings: dict | None = None,
        module: Any = None,
        graph_factory: Callable[[], Graph] | None = None,
        in_types=None,
    ):
        self.entry = _load_aware(
            entry, calls_blas=_calls_blas(source), blas_cap=blas_thread_cap(source)
        )
        self._graph = graph
        self._graph_factory = graph_factory  # rebuilds the graph when loaded from the index
        self.source = source
        self.source_path = source_path
        self.fallback_ids = tuple(fallback_ids)
        self.timings = dict(timings or {})
        self.module = module
        if module is not None:
            _hold_module(self, module)
        self._in_types = (
            in_types
            if in_types is not None
            else [(tuple(n.shape), np.dtype(n.dtype)) for n in graph.inputs]
        )
        self.parallel_source: str | None = None
        self.parallel_source_path: str | None = None

    @property
    def graph(self) -> Graph:
        """The graph the kernel computes (for a kernel found through the index,
        rebuilt from the traced graph on first use: errors, parallel variant)."""
        if self._graph is None:
            self._graph = self._graph_factory()
        return self._graph

    def _swap_in_parallel(self, emitted) -> None:
        t0 = time.perf_counter()
        loaded = _load(self.graph, emitted)
        if loaded is None:
            return
        entry, module, path, status, hits = loaded
        if _NO_PARALLEL:  # forked from a process whose OpenMP threads are gone
            return
        self._serial_entry = self.entry
        # on a machine whose other cores are busy the serial variant runs (a parallel
        # region waits for every thread at its barrier, a descheduled one costs a slice)
        self.entry = _load_aware(
            entry,
            calls_blas=_calls_blas(emitted.source),
            blas_cap=blas_thread_cap(emitted.source),
            serial=self._serial_entry,
            work=max((n.size for n in self.graph.nodes), default=None),
        )
        _hold_module(self, module)
        _PARALLEL_KERNELS.add(self)
        self.parallel_source = emitted.source
        self.parallel_source_path = str(path) if path else None
        self.timings["parallel_load_compile"] = time.perf_counter() - t0
        log.info(
            "codegen %s: parallel variant ready (%s; numba %s %.1f ms)",
            self.graph.name,
            status,
            "cache load" if hits else "compile",
            1e3 * (time.perf_counter() - t0),
        )

    def wait_parallel(self, timeout: float | None = None) -> bool:
        """Wait for the background parallel variant (started now if the kernel was not
        called yet); True if it is in use."""
        start = getattr(self, "_start_parallel", None)
        if start is not None:
            start()
        thread = getattr(self, "_parallel_thread", None)
        if thread is not None:
            thread.join(timeout)
        return getattr(self, "parallel_source", None) is not None

    def __call__(self, *arrays):
        try:
            return self.entry(*arrays)
        except IndexError:
            # An index array (data) was out of range inside generated code. Re-run the
            # graph with the interpreter: the op's own check raises tracegrad's
            # OutOfRangeError naming the index, the axis, the shapes and the user's line.
            from tracegrad.ir.interpret import interpret

            interpret(self.graph, *arrays)
            raise
        except TypeError:
            if len(arrays) != len(self._in_types):
                raise TypeError(
                    f"kernel for graph {self.graph.name!r} takes "
                    f"{len(self._in_types)} arrays, got {len(arrays)}"
                ) from None
            fixed = [
                self._conform(a, shape, dt)
                for a, (shape, dt) in zip(arrays, self._in_types, strict=True)
            ]
            return self.entry(*fixed)

    @staticmethod
    def _conform(a, shape, dtype):
        arr = np.asarray(a)
        if arr.shape != shape:
            raise ValueError(f"expected an array of shape {shape}, got {arr.shape}")
        return np.require(arr, dtype=dtype, requirements=["C", "W"])

    def __repr__(self) -> str:
        return f"<Kernel {self.graph.name!r} at {self.source_path or '(memory)'}>"


def parallel_mode() -> str:
    """TRACEGRAD_PARALLEL: "background" (default), "sync" (build the parallel
    variant before returning; benchmarks and tests) or "0" (never)."""
    return config.parallel_mode()


def build_kernel(graph: Graph, index_key: str | None = None) -> Kernel:
    """Generate, cache and compile a kernel for `graph` (fused or not).

    A graph node without code generation runs its NumPy impl between njit
    segments (logged). If Numba fails to compile the generated code, the
    kernel falls back to the IR interpreter with a warning, never an error.

    Big loops run on all cores with `prange`, but Numba's parallel compile
    is slow (seconds), so the first kernel is serial and returned at once; a
    parallel variant is built in a background thread and swapped in when
    ready (TRACEGRAD_PARALLEL=sync waits for it, =0 never builds it).

    With `index_key` (see index.py), a kernel that depends on its inputs only
    is recorded in the index under that key once it is loaded."""
    _setup_logging()
    if any(np.dtype(n.dtype) == np.float16 for n in graph.nodes):
        return _build_float16(graph)
    t0 = time.perf_counter()
    from tracegrad.codegen.plan import ir_hash

    name = f"kernel_{ir_hash(graph)}"
    emitted = _generate(graph, name)
    t1 = time.perf_counter()
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()  # timed apart from the compile
    t2 = time.perf_counter()
    loaded = _load(graph, emitted)
    if loaded is None:
        from tracegrad.ir.interpret import interpret

        return Kernel(lambda *a: interpret(graph, *a), graph, emitted.source, None)
    entry, module, path, status, hits = loaded
    t3 = time.perf_counter()
    timings = {"codegen": t1 - t0, "import_numba": t2 - t1, "load_compile": t3 - t2}
    log.info(
        "codegen %s: %.1f ms (%d lines%s); module %s: %s; numba %s %.1f ms",
        graph.name,
        1e3 * (t1 - t0),
        emitted.source.count("\n"),
        f", {len(emitted.fallback_ids)} NumPy fallbacks" if emitted.fallback_ids else "",
        path.name if path else "(memory)",
        status,
        "cache load" if hits else "compile",
        1e3 * (t3 - t2),
    )
    kernel = Kernel(
        entry,
        graph,
        emitted.source,
        str(path) if path else None,
        emitted.fallback_ids,
        timings,
        module,
    )
    if (
        index_key is not None
        and path is not None
        and not emitted.const_ids
        and not emitted.fallback_ids
    ):
        import tracegrad.codegen.index as index

        index.write_entry(
            path.parent,
            index_key,
            {
                "module": path.stem,
                "entry": emitted.entry,
                "parallel": bool(emitted.wants_parallel),
                "in_types": [[list(s), d.str] for s, d in kernel._in_types],
            },
        )
    if emitted.wants_parallel:
        _start_parallel(kernel, name)
    return kernel


def _start_parallel(kernel: Kernel, name: str | None, label: str = "") -> None:
    """Build the parallel variant (TRACEGRAD_PARALLEL: in a background thread, now, or
    never). `name` None: the kernel's name is computed from its (rebuilt) graph."""
    mode = parallel_mode()
    if _NO_PARALLEL or mode == "0":
        return
    from tracegrad.runtime import threads

    def run():
        from tracegrad.codegen.plan import ir_hash

        graph = kernel.graph
        kernel._swap_in_parallel(
            _generate(graph, (name or f"kernel_{ir_hash(graph)}") + "_par", parallel=True)
        )

    if mode == "sync":
        threads.launch_numba()  # Numba's threads, started to sleep after a kernel (see there)
        run()
    elif mode == "background":
        # Built when it may be used: on the kernel's first call (a script that never
        # calls the kernel, say one whose only call the interpreter tier answered, does
        # not pay for Numba's parallel compile, nor wait for it at exit), and not at all
        # under a thread limit of one.
        serial = kernel.entry
        pending = [None]  # emptied by whoever starts it (list.pop is atomic)

        def start() -> None:
            try:
                pending.pop()
            except IndexError:
                return
            kernel.entry = serial
            if threads.get_num_threads() < 2:
                return
            threads.launch_numba()  # Numba's threads, started to sleep (see there)
            # not a daemon: interpreter exit waits for it, rather than killing
            # a Numba compile half way (which can crash the process at exit)
            kernel._parallel_thread = threading.Thread(
                target=run, daemon=False, name=f"tracegrad-parallel-{name or label}"
            )
            kernel._parallel_thread.start()

        def first_call(*arrays):
            start()
            return serial(*arrays)

        kernel.entry = first_call
        kernel._start_parallel = start


def load_indexed(
    index_key: str, in_types, graph_factory: Callable[[], Graph], label: str = "f"
) -> Kernel | None:
    """The kernel the index records for `index_key`, loaded without building
    any graph or source; None (reason logged) when there is no usable entry.

    `in_types` are the traced graph's input (shape, dtype)s: an entry whose
    kernel takes anything else is not used. `graph_factory` rebuilds the
    kernel's graph if it is ever needed (errors, the parallel variant)."""
    _setup_logging()
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    t0 = time.perf_counter()
    directory = cache.open_cache_dir()
    if directory is None:
        return None
    payload, why = index.read_entry(directory, index_key)
    if payload is None:
        log.info("codegen %s: index miss (%s)", label, why)
        return None
    try:
        types_ = [(tuple(int(d) for d in shape), np.dtype(dt)) for shape, dt in payload["in_types"]]
        module_name, entry_name = payload["module"], payload["entry"]
        wants_parallel = payload["parallel"]
        if not (
            cache.is_module_name(module_name)
            and isinstance(entry_name, str)
            and _KERNEL_NAME.fullmatch(entry_name)
            and isinstance(wants_parallel, bool)
        ):
            raise ValueError(entry_name)
    except (KeyError, TypeError, ValueError):
        log.info("codegen %s: index miss (entry tgi_%s has a bad payload)", label, index_key)
        return None
    if types_ != [(tuple(s), np.dtype(d)) for s, d in in_types]:
        log.info("codegen %s: index miss (entry's input types differ)", label)
        return None
    t1 = time.perf_counter()
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()
    t2 = time.perf_counter()
    try:
        module, path, status = cache.load_named(module_name)
    except Exception as exc:  # the module's Numba load failed: rebuild on the full path
        log.info("codegen %s: index miss (loading %s failed: %s)", label, module_name, exc)
        return None
    if module is None:
        log.info("codegen %s: index miss (%s)", label, status)
        return None
    entry = vars(module).get(entry_name)
    why = _not_a_kernel(entry, module, entry_name, types_)
    if why:
        log.info("codegen %s: index miss (%s.%s %s)", label, module_name, entry_name, why)
        return None
    t3 = time.perf_counter()
    hits = _numba_cache_hits(module)
    timings = {"index": t1 - t0, "import_numba": t2 - t1, "load_compile": t3 - t2}
    how = (
        "module already loaded"
        if status == "already imported"
        else ("numba cache load" if hits else "numba compile")
    )
    log.info(
        "codegen %s: index hit tgi_%s -> %s (%s); %s %.1f ms",
        label,
        index_key,
        path.name if path else module_name,
        status,
        how,
        1e3 * (t3 - t2),
    )
    source = getattr(module, "__tg_source__", "")
    kernel = Kernel(
        entry,
        None,
        source,
        str(path) if path else None,
        (),
        timings,
        module,
        graph_factory=graph_factory,
        in_types=types_,
    )
    if wants_parallel:
        _start_parallel(kernel, None, label)
    return kernel


_KERNEL_NAME = re.compile(r"kernel_[0-9a-f]{16}")


def _not_a_kernel(entry, module, entry_name: str, in_types) -> str:
    """Why `entry` is not the generated kernel an index entry may name ("" if it
    is): a Numba dispatcher defined in that very module under that name (not an
    imported `njit`, an intrinsic or a helper), compiled for exactly the entry's
    input types, in a module with the loader's NumPy-fallback table."""
    from numba.core.dispatcher import Dispatcher

    if not isinstance(entry, Dispatcher) or not hasattr(module, "_NUMPY"):
        return "is not a compiled kernel"
    py_func = entry.py_func
    if (
        py_func.__module__ != module.__name__
        or py_func.__name__ != entry_name
        or py_func.__globals__ is not vars(module)
    ):
        return "is not defined by that module"
    from numba import from_dtype, types

    sigs = entry.signatures
    want = tuple(types.Array(from_dtype(dt), len(shape), "C") for shape, dt in in_types)
    if (
        len(sigs) != 1
        or len(sigs[0]) != len(want)
        or any(
            not isinstance(a, types.Array) or (a.dtype, a.ndim, a.layout) != (w.dtype, w.ndim, "C")
            for a, w in zip(sigs[0], want, strict=True)
        )
    ):
        return "is compiled for other input types"
    return ""


_GENERATE_LOCK = threading.RLock()


def _generate(graph: Graph, name: str, **options):
    """The generated module, the same text for the same graph every time.

    mathlib numbers the temporaries of the helpers it inlines from a counter;
    restarting it (and its expansion budget) per kernel keeps the source (and so its content hash, cache
    file and module) identical across builds and processes. Otherwise every new
    compiled function of the same graph compiled and imported a new module."""
    from tracegrad.codegen.generate import generate
    from tracegrad.runtime import mathlib

    with _GENERATE_LOCK:
        mathlib.start_kernel()
        emitted = generate(graph, name, **options)
        if mathlib.expanded_sites(emitted.source) > mathlib.EXPANSION_BUDGET:
            mathlib.start_kernel(expand=False)  # keep compile time bounded
            emitted = generate(graph, name, **options)
        return emitted


_MODULE_USERS: dict[str, int] = {}  # generated module name -> live Kernels using it
_USERS_LOCK = threading.Lock()


def _hold_module(kernel: Kernel, module) -> None:
    """Count `kernel` as a user of generated `module`; when the last user dies, the
    module leaves sys.modules (it was put there so that Numba can find it), so that
    deleting a compiled function releases its modules."""
    name = getattr(module, "__name__", "")
    if not name.startswith("tg_"):
        return
    release_pending_modules()
    with _USERS_LOCK:
        _MODULE_USERS[name] = _MODULE_USERS.get(name, 0) + 1
    weakref.finalize(kernel, _release_module, name)


# Kernels die inside garbage collection, which can run while this very thread
# holds _USERS_LOCK or the cache's lock (an allocation under the lock): the
# finalizer then must not wait for them. It takes them only if they are free and
# otherwise leaves the release here, for the next kernel load to finish.
_PENDING_RELEASES: collections.deque[str] = collections.deque()


def _release_module(name: str) -> None:
    if not _USERS_LOCK.acquire(blocking=False):
        _PENDING_RELEASES.append(name)
        return
    try:
        left = _MODULE_USERS.get(name, 0) - 1
        if left > 0:
            _MODULE_USERS[name] = left
            return
        _MODULE_USERS.pop(name, None)
    finally:
        _USERS_LOCK.release()
    from tracegrad.runtime import cache

    if not cache.unload(name, blocking=False):
        _PENDING_RELEASES.append(f"\0{name}")  # counted already: only the unload is left


def release_pending_modules() -> None:
    """Finish module releases that a finalizer had to leave (see _PENDING_RELEASES)."""
    from tracegrad.runtime import cache

    while True:
        try:
            name = _PENDING_RELEASES.popleft()
        except IndexError:
            return
        if name.startswith("\0"):
            cache.unload(name[1:])
        else:
            _release_module(name)


_PARALLEL_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()  # parallel variant in use
_NO_PARALLEL = False


def _after_fork_in_child() -> None:
    """The child of a fork has only the forking thread: a background build that held
    the generator's lock is gone, so the lock is new (unless the forking thread
    holds it itself).

    Parallel variants run on Numba's threading layer; with GNU OpenMP ("omp", the
    layer Numba picks when TBB is not installed) a child forked after the parent
    started OpenMP's threads is killed by Numba's guard the first time it runs a
    parallel kernel ("fork() called from a process already using GNU OpenMP"). In
    such a child every kernel goes back to its serial variant and no parallel
    variant is built (results are the same)."""
    global _GENERATE_LOCK, _NO_PARALLEL
    if not _GENERATE_LOCK._is_owned():
        _GENERATE_LOCK = threading.RLock()
    par = sys.modules.get("numba.np.ufunc.parallel")
    if (
        par is not None
        and getattr(par, "_is_initialized", False)
        and getattr(par, "_threading_layer", None) != "tbb"
    ):
        _NO_PARALLEL = True
        for kernel in list(_PARALLEL_KERNELS):
            serial = getattr(kernel, "_serial_entry", None)
            if serial is not None:
                kernel.entry = serial
                kernel.parallel_source = kernel.parallel_source_path = None
        _PARALLEL_KERNELS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _build_float16(graph: Graph) -> Kernel:
    """Compute a float32 copy of the graph, and convert at the edges (values round
    once, at the end, instead of per op)."""
    from tracegrad.codegen.plan import widened_float16

    wide = widened_float16(graph)
    inner = build_kernel(wide)
    out_dtypes = [np.dtype(n.dtype) for n in graph.outputs]
    in_dtypes = [np.dtype(n.dtype) for n in wide.inputs]

    def entry(*arrays, _k=inner, _in=in_dtypes, _out=out_dtypes):
        outs = _k(*[np.asarray(a, dtype=d) for a, d in zip(arrays, _in, strict=True)])
        return tuple(o.astype(d, copy=False) for o, d in zip(outs, _out, strict=True))

    return Kernel(
        entry,
        graph,
        inner.source,
        inner.source_path,
        inner.fallback_ids,
        inner.timings,
        inner.module,
    )


def _load(graph: Graph, emitted):
    """(entry, module, path, status, numba cache hits) or None if Numba fails."""
    from tracegrad.runtime.cache import load_source

    try:
        module, path, status = load_source(emitted.source)
    except Exception as exc:  # generated code that Numba rejects: a bug, but never the user's
        import warnings

        warnings.warn(
            f"tracegrad: Numba could not compile the kernel for graph "
            f"{graph.name!r} ({type(exc).__name__}: {exc}); running it with the "
            "IR interpreter instead (slow)",
            RuntimeWarning,
            stacklevel=3,
        )
        log.warning("codegen %s: Numba failed: %s", graph.name, exc)
        return None
    fn = getattr(module, emitted.entry)
    _install_numpy_fallbacks(module, graph, emitted.fallback_ids)
    consts = [
        np.ascontiguousarray(by_id.attrs["value"], dtype=by_id.dtype)
        for cid in emitted.const_ids
        for by_id in [next(n for n in graph.nodes if n.id == cid)]
    ]
    entry = (lambda *a, _f=fn, _c=tuple(consts): _f(*_c, *a)) if consts else fn
    return entry, module, path, status, _numba_cache_hits(module)


def _install_numpy_fallbacks(module, graph: Graph, ids) -> None:
    from tracegrad.ops.core import REGISTRY

    by_id = {n.id: n for n in graph.nodes}
    for nid in ids:
        node = by_id[nid]
        impl, attrs, shape, dtype = REGISTRY[node.op].impl, dict(node.attrs), node.shape, node.dtype
        if node.op == "scan":  # its body runs as a kernel of its own (codegen/loops.py)
            runner = loops.scan_runner(node, build_kernel, _calls_blas, blas_thread_cap)
            impl, attrs = (lambda *a, _run=runner, **_: _run(*a)), {}

        def run(*args, _impl=impl, _attrs=attrs, _shape=shape, _dtype=dtype):
            out = np.asarray(_impl(*args, **_attrs))
            return np.ascontiguousarray(out, dtype=_dtype).reshape(_shape)

        module._NUMPY[nid] = run


def _numba_cache_hits(module) -> int:
    hits = 0
    for v in vars(module).values():
        stats = getattr(v, "stats", None)
        if stats is not None and hasattr(stats, "cache_hits"):
            hits += sum(stats.cache_hits.values())
    return hits


def report_for(graph: Graph):
    """The MemoryReport (memory.py) of the kernel `build_kernel(graph)` makes, from
    its generated source alone (no Numba compile), with one nested record per
    scan body (the kernels codegen/loops.py builds)."""
    from tracegrad.codegen.memory import MemoryReport
    from tracegrad.codegen.plan import ir_hash, optimized_body, widened_float16

    if any(np.dtype(n.dtype) == np.float16 for n in graph.nodes):
        graph = widened_float16(graph)  # as build_kernel: float16 graphs compute in float32
    emitted = _generate(graph, f"kernel_{ir_hash(graph)}")
    report = emitted.memory or MemoryReport()
    bodies = tuple(
        report_for(optimized_body(n.attrs["body"])) for n in graph.nodes if n.op == "scan"
    )
    if not bodies:
        return report
    return MemoryReport(
        report.workspace_bytes,
        report.output_bytes,
        report.peak_live_bytes,
        report.no_reuse_bytes,
        report.temporaries,
        bodies,
    )
