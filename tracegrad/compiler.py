"""The compiled front end: `compile`, `grad`, `value_and_grad`.

Per input signature (shapes, dtypes, which arguments need a gradient, static
arguments) the function is traced once, differentiated into one joint graph,
optimized, fused and turned into a kernel; later calls with the same signature
cost one dict lookup on a tuple key plus the kernel call.

    >>> import numpy as np, tracegrad as tg
    >>> f = lambda x, y: tg.sum(x * y + x ** 2)
    >>> value, (gx, gy) = tg.value_and_grad(f, argnums=(0, 1), backend="interpret")(
    ...     np.array([2.0]), np.array([3.0]))
    >>> float(value), gx, gy
    (10.0, array([7.]), array([2.]))

The pipeline, stage by stage (`.lower(*args)` shows each one):

    trace -> vjp_graph (joint) -> passes.optimize -> passes.fuse -> codegen.build_kernel

`backend="interpret"` runs the graph with the NumPy reference interpreter
instead of generating a kernel (slow, but no Numba compile: handy in tests).
Set TRACEGRAD_LOG=1 to log each stage's time and every cache miss with its
reason on the "tracegrad" logger.

Tiered execution (TRACEGRAD_TIERED): a new signature of a function that already
has a kernel (a new batch size, say) does not wait for Numba. Trace, autodiff and
passes take milliseconds; the optimized graph then answers on the NumPy
interpreter (same values to float tolerance, same errors and `check_finite`
checks) while codegen/background.py builds its kernel, which the next call after
it is ready uses (`f.tier_info()` counts the interpreter's calls; `f.wait_kernels()`
waits; `f.lower(...)` always returns the real kernel). A signature whose kernel is
in the disk cache's index loads it at once instead. By default (TRACEGRAD_TIERED=first)
a function's first signature is tiered too, where its optimized graph is cheap for
the interpreter (`interpreter_seconds` under TIER_MAX_SECONDS) and no backend is
named (`backend=` or TRACEGRAD_BACKEND: then the first call waits for the kernel);
=shapes tiers only new signatures, =always every one, =0 none. Shapes whose sources
differ only in literals share one shape-generic kernel (codegen/shape_generic.py,
TRACEGRAD_SHAPE_GENERIC): the second shape's build compiles it, and later shapes,
in this process or the next, run it with no Numba compile.
"""

from __future__ import annotations

import collections
import functools
import inspect
import logging
import sys
import time
import warnings
import weakref
from collections import namedtuple
from collections.abc import Callable, Sequence
from types import BuiltinFunctionType, FunctionType
from typing import Any

import numpy as np

from tracegrad import config
from tracegrad.entries import ARRAYS, TRACED, TREE, EntryCache
from tracegrad.implicit import StaleExternal, find_externals, read_all, swapped_in
from tracegrad.ir.graph import Graph
from tracegrad.lowering import (  # noqa: F401  (Lowered and lower_graphs are public here too)
    _BUILD_LOCK,
    Lowered,
    _canonical_leaf,
    _fn_name,
    _Interpreted,
    _lower_in_background,
    _optimize_graph,
    _plain_leaf,
    _Signature,
    log,
    lower_graphs,
)
from tracegrad.ops import core
from tracegrad.ops.core import TracegradError
from tracegrad.passes.loops import reroll_loops
from tracegrad.placement import DeviceArray, is_device_array
from tracegrad.tracing import (
    RandomWatch,
    Tracer,
    TracingError,
    TreeDef,
    active_contexts,
    argument_names,
    identifier,
    static_scalar_key,
    trace_flat,
    traceable,
    tree_flatten,
    tree_unflatten,
)

CacheInfo = namedtuple("CacheInfo", ["traces", "hits"])
TierInfo = namedtuple("TierInfo", ["pending", "interpreted_calls"])

# More distinct signatures than this warns (once) that something keeps retracing.
MAX_SIGNATURES = 8

# Kernels kept per function: a retrace storm (a new shape every call) evicts the
# least recently built ones, whose generated modules are then released.
MAX_ENTRIES = 32

_LIVE: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()

BACKENDS = ("numba", "interpret")


class _NeverRaised(Exception):
    pass


def _needs_capture() -> type[Exception]:
    """eager's NeedsCapture, raised by eager code only: where `tracegrad.eager` was never
    imported nothing can raise it, and a compiled first call does not import it (the
    eager package: ~10-20% of a warm first call). Used as `except _needs_capture():`,
    evaluated only when an exception passes."""
    hooks = sys.modules.get("tracegrad.eager.capture_hooks")
    return hooks.NeedsCapture if hooks is not None else _NeverRaised


class CompileError(TracegradError):
    """A function cannot be compiled or differentiated as asked."""


class ArgnumsError(CompileError, TypeError):
    """argnums names a positional argument the call did not pass (JAX: TypeError)."""


class GradOutputError(CompileError, TypeError):
    """`grad` of a function whose output is not one scalar (JAX raises TypeError)."""


class ArgumentTypeError(CompileError, TypeError):
    """A differentiated argument of a type that is not an array (JAX raises TypeError)."""


class NonFiniteError(TracegradError, FloatingPointError):
    """check_finite=True found a NaN or Inf in a compiled function's output."""


# ------------------------------------------------------------ argument checks


def _normalize_argnums(argnums: Any) -> tuple[int, ...]:
    items = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise core.ArgumentError(
                f"argnums must be an int or a tuple of ints, got {argnums!r}"
                + core.user_location_suffix()
            )
    if isinstance(argnums, (tuple, list)) and not argnums:
        raise CompileError(
            "argnums must name at least one argument, got ()" + core.user_location_suffix()
        )
    return tuple(int(a) for a in items)


def _resolve_argnums(argnums: tuple[int, ...], nargs: int, fn: Callable) -> tuple[int, ...]:
    out = []
    for a in argnums:
        if not -nargs <= a < nargs:
            need = a + 1 if a >= 0 else -a
            raise ArgnumsError(
                f"argnums={a} is out of range: {_fn_name(fn)} was called with {nargs} "
                f"positional argument{'s' if nargs != 1 else ''} (differentiating with "
                f"respect to argnums={a} requires at least {need} positional arguments to "
                f"be passed by the caller, but got only {nargs} positional arguments.)"
                + core.user_location_suffix()
            )
        out.append(a % nargs)
    return tuple(out)


def _wrt_leaves(arg_of_leaf: Sequence[int], wrt_args: Sequence[int]) -> tuple[int, ...]:
    """Leaf indices to differentiate, in argnums order (duplicates kept, as in JAX)."""
    return tuple(k for a in wrt_args for k, arg in enumerate(arg_of_leaf) if arg == a)


def _fn_location(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return f" (defined at {code.co_filename}:{code.co_firstlineno})"


def _bad_leaf_error(fn: Callable, name: str, value: Any, position: int) -> TracegradError:
    return ArgumentTypeError(
        f"{_fn_name(fn)}: argument {name!r} (position {position}) is {value!r:.40} of type "
        f"{type(value)}, where an array is expected: a differentiated argument is a "
        "floating-point array or Python float, or a tuple/list/dict of them (pass other "
        "values outside argnums)" + core.user_location_suffix()
    )


# ------------------------------------------------------------------- entries


class _Entry:
    """One compiled signature: the kernel and how to pack its results.

    `call(arrays)` is the whole per-call work: kernel, optional finiteness
    check, and packing into the caller's structure.
    """

    __slots__ = (
        "lowered",
        "kernel",
        "pack",
        "signature",
        "output_names",
        "leaf_paths",
        "call",
        "captures",
        "impure",
    )

    def __init__(self, lowered, pack, signature, output_names, leaf_paths, check_finite=False):
        self.lowered = lowered
        self.kernel = kernel = lowered.kernel
        self.pack = pack
        self.signature = signature
        self.output_names = output_names
        self.leaf_paths = leaf_paths
        self.captures = []  # tracers of enclosing traces the function closed over
        self.impure = None  # the random generator its trace drew from: never cached
        if check_finite:

            def call(arrays):
                outs = kernel(*arrays)
                _check_finite(self, arrays, outs)
                return pack(outs)
        elif hasattr(kernel, "entry"):  # a codegen Kernel: call its Numba entry directly

            def call(arrays):
                # kernel.entry is read per call: a parallel variant may be swapped in.
                try:
                    outs = kernel.entry(*arrays)
                except (TypeError, IndexError):
                    outs = kernel(*arrays)  # copies unusual layouts, or explains the error
                return pack(outs)
        else:

            def call(arrays):
                return pack(kernel(*arrays))

        self.call = call


class _TieredEntry(_Entry):
    """A signature whose kernel is still being built in the background (tiered
    execution, TRACEGRAD_TIERED): calls run the optimized graph, the kernel's own
    graph, on the NumPy interpreter, with floating-point warnings off as in a
    kernel, and the same finiteness check. Once the kernel is ready, the next call
    (or `lower`, `wait_kernels`) puts a plain `_Entry` in the function's place.
    Tiered entries never become shortcuts (see entries.py), so the swap needs no clearing."""

    __slots__ = ("build", "promoted", "owner", "key", "check_finite")

    def __init__(
        self,
        lowered,
        pack,
        signature,
        output_names,
        leaf_paths,
        check_finite,
        owner: CompiledFunction,
    ):
        super().__init__(lowered, pack, signature, output_names, leaf_paths)
        self.build = build = lowered.tier_build
        self.promoted = None
        self.owner = weakref.ref(owner)  # (no cycle through the function's entry map)
        self.key = None  # set by _entry_for before anyone calls
        self.check_finite = check_finite
        # a shape-generic kernel (codegen/shape_generic.py) or the interpreter
        interpreted = lowered.tier_runner is None
        run = _Interpreted(lowered.optimized) if interpreted else lowered.tier_runner
        from tracegrad.codegen.background import ensure_worker

        def call(arrays):
            if build.kernel is not None:
                return self.promote().call(arrays)
            if not build.done:
                ensure_worker()  # (a forked child starts its own builder)
            cf = self.owner()
            if cf is not None and interpreted:
                cf._interpreted_calls += 1
            try:
                with np.errstate(all="ignore"):
                    outs = run(*arrays)
            finally:
                build.release()  # a first call's build waits for its result (hold)
            if check_finite:
                _check_finite(self, arrays, outs)
            return pack(outs)

        self.call = call

    def promote(self) -> _Entry:
        """The plain entry of the built kernel, put in this entry's place."""
        real = self.promoted
        if real is None:
            lowered, kernel = self.lowered, self.build.kernel
            lowered.kernel, lowered.source, lowered.source_path = (
                kernel,
                kernel.source,
                kernel.source_path,
            )
            lowered.timings["codegen+numba"] = self.build.seconds or 0.0
            real = _Entry(
                lowered,
                self.pack,
                self.signature,
                self.output_names,
                self.leaf_paths,
                self.check_finite,
            )
            real.captures = self.captures
            self.promoted = real
            log.info(
                "tiered: kernel for %s in use (built in %.1f ms in the background)",
                lowered.traced.name,
                1e3 * (self.build.seconds or 0.0),
            )
        cf = self.owner()
        # never wait here: this runs on the call path, and the lock may be held for
        # a whole compile (the next call tries again)
        if cf is not None and _BUILD_LOCK.acquire(blocking=False):
            try:
                cf.entries.replace(self.key, self, real)
            finally:
                _BUILD_LOCK.release()
        return real

    def finish(self, timeout: float | None = None) -> _Entry | None:
        """Wait for the kernel (None after `timeout`) and promote it. A build that
        was dropped (exit, eviction) or failed is redone here, so its error, if any,
        is raised to the caller as without tiering."""
        from tracegrad.codegen.background import run_now

        build = self.build
        if not ((timeout is None and run_now(build)) or build.wait(timeout)):
            return None
        if build.kernel is None:
            from tracegrad.codegen import build_kernel

            t0 = time.perf_counter()
            kernel = build_kernel(self.lowered.optimized, index_key=build.index_key)
            build.seconds = time.perf_counter() - t0
            build.kernel = kernel
        return self.promote()


# The first-call tier's cost model (TRACEGRAD_TIERED=first, the default): what one
# call of a graph costs the NumPy interpreter beyond the kernel, from perf/
# first_call_tier.py's measurements (a busy 2-core machine: ~5 us of Python per node
# run, ~2.5 ns per element of each node's output, which a fused kernel never writes).
INTERPRETER_NODE_S = 5e-6
INTERPRETER_ELEMENT_S = 2.5e-9
WHILE_TRIPS_GUESS = 100  # a while loop's trip count is data: its body counts this often
# A first signature whose estimate exceeds this builds its kernel before answering: one
# interpreted call would cost a good part of the fastest Numba compile (~0.3 s).
TIER_MAX_SECONDS = 0.1


def interpreter_seconds(graph: Graph) -> float:
    """The NumPy interpreter's estimated extra time for one call of `graph`: per node
    run INTERPRETER_NODE_S plus INTERPRETER_ELEMENT_S per output element, a scan's
    body once per step, a while loop's WHILE_TRIPS_GUESS times, a cond's dearer
    branch (inputs and constants cost nothing).

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x: tg.sin(x) * 2.0, np.ones(1000))
    >>> round(interpreter_seconds(g) * 1e6)  # two nodes: 2 * (5 + 1000 * 0.0025) us
    15
    """
    total = 0.0
    for node in graph.nodes:
        if node.op in ("input", "const"):
            continue
        total += INTERPRETER_NODE_S + INTERPRETER_ELEMENT_S * int(np.prod(node.shape))
        inner = [interpreter_seconds(v) for v in node.attrs.values() if isinstance(v, Graph)]
        if not inner:
            continue
        if node.op == "scan":
            total += node.attrs["length"] * sum(inner)
        elif node.op == "while":
            total += WHILE_TRIPS_GUESS * sum(inner)
        elif node.op == "cond":
            total += max(inner)
        else:
            total += sum(inner)
    return total


def _cheap_to_interpret(graph: Graph) -> bool:
    seconds = interpreter_seconds(graph)
    if seconds > TIER_MAX_SECONDS:
        log.info(
            "%s: first call builds its kernel (interpreter estimate %.0f ms per call > %.0f ms)",
            graph.name,
            1e3 * seconds,
            1e3 * TIER_MAX_SECONDS,
        )
        return False
    return True


def _cancel_build(entry) -> None:
    if isinstance(entry, _TieredEntry):
        entry.build.cancel()


_NOT_FAST = object()  # a fast key that cannot be cached (pytrees, lists, tensors...)
_AS_IS, _CONVERT = 0, 1  # how a pytree fast hit turns leaves into kernel arrays


def _fast_key(args: tuple):
    """The hot-path key: cheap, and only for plain ndarray / Python scalar, str and
    None args.

    One flat tuple: per array its shape and dtype. Layout and flags are left
    out: the kernel's Numba signature rejects a non-contiguous or read-only
    array with TypeError, and the entry then copies it (see `_Entry`).
    """
    key = ()
    for a in args:
        if type(a) is np.ndarray:
            key += (a.shape, a.dtype)
        elif type(a) in (float, int, bool, str) or a is None:
            key += (type(a), static_scalar_key(a))
        elif type(a) in _IDENTITY_KEYED:
            key += (a,)
        else:
            return _NOT_FAST
    return key


# implicit inputs keyed by identity on the hot path: a helper function, a NumPy ufunc or
# function, a builtin, a class (of a callable object; implicit.py)
_IDENTITY_KEYED = frozenset({FunctionType, BuiltinFunctionType, np.ufunc, type(np.sum), type})


class _NotFast(Exception):
    pass


def _tree_key(args: tuple):
    """(key, array leaves) for args made of dicts/lists/tuples of ndarrays and
    static scalars, without building TreeDefs; (None, None) for anything else."""
    key: list = []
    leaves: list = []
    try:
        for a in args:
            _visit(a, key, leaves)
    except _NotFast:
        return None, None
    return tuple(key), leaves


def _visit(a, key: list, leaves: list) -> None:
    # A module-level function, not a closure: a self-referencing closure would
    # make a reference cycle on every call.
    t = type(a)
    if t is np.ndarray:
        key.append((a.shape, a.strides, a.dtype, a.flags.writeable))
        leaves.append(a)
    elif t is dict:
        key.append(("{", tuple(a)))
        for v in a.values():
            _visit(v, key, leaves)
    elif t is list or t is tuple:
        key.append((t, len(a)))
        for v in a:
            _visit(v, key, leaves)
    elif t is float or t is int or t is bool or t is str or a is None:
        key.append((t, static_scalar_key(a)))
    else:
        raise _NotFast


# ---------------------------------------------------------- compiled function


class CompiledFunction:
    """A function compiled per input signature; see `compile` / `value_and_grad`."""

    def __init__(
        self,
        fn: Callable,
        mode: str,
        argnums: Any = 0,
        has_aux: bool = False,
        backend: str | None = None,
        check_finite: bool = False,
        optimize: bool = True,
        fullgraph: bool = False,
        holomorphic: Any = False,  # True, False, or "any" (tracegrad.vjp: no dtype checks)
    ):
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}")
        if (
            inspect.isgeneratorfunction(fn)
            or inspect.isasyncgenfunction(fn)
            or inspect.iscoroutinefunction(fn)
        ):
            kind = (
                "a coroutine function"
                if inspect.iscoroutinefunction(fn)
                else "a generator function"
            )
            raise TypeError(
                f"tracegrad.{mode}: {_fn_name(fn)} is {kind}; its body runs only "
                "when the result is iterated, so there is nothing to trace. Return "
                "arrays (e.g. a tuple or list of them) instead of yielding them" + _fn_location(fn)
            )
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self._backend = backend  # None: TRACEGRAD_BACKEND, read per build
        self.fn = fn
        self.mode = mode  # "compile", "value_and_grad" or "grad"
        self.argnums = _normalize_argnums(argnums) if mode != "compile" else ()
        self.argnums_is_tuple = isinstance(argnums, (tuple, list))
        self.has_aux = has_aux
        self.holomorphic = holomorphic  # JAX's grad(..., holomorphic=True)
        self.check_finite = check_finite
        self.optimize = optimize
        self._interpreted_calls = 0  # calls served by the interpreter tier
        self.entries = EntryCache(MAX_ENTRIES)  # signature -> entry, and shortcuts to it
        self._shortcuts = self.entries.shortcuts  # (the hot path's one dict)
        self._externals: list | None = (
            None  # implicit inputs (tracegrad.implicit); None: not looked for yet
        )
        self._n_ext = 0
        # PyTorch-style code (tracegrad.capture): break policy, retrace reasons, breaks seen
        self.fullgraph = fullgraph  # a graph break raises instead of running eagerly
        self.force_capture = False  # capture even without tensor arguments
        self.names_from: Any = None  # where readable names of parameters come from
        self.trace_reasons: list[str] = []
        self.graph_breaks: list = []
        self._capture_names: dict | None = None
        _LIVE.add(self)
        # name and docs only: copying fn.__dict__ would overwrite our own state when fn
        # is itself a CompiledFunction (grad(grad(f)) silently became grad(f))
        functools.update_wrapper(self, fn, updated=())

    @property
    def backend(self) -> str:
        """ "numba" or "interpret": as given, else TRACEGRAD_BACKEND (default "numba")."""
        return self._backend or config.default_backend()

    # ---- the hot path
    def __call__(self, *args, **kwargs):
        externals = self._externals
        if externals:  # closed-over arrays and globals, read on every call
            try:
                args = args + read_all(externals, args)
            except StaleExternal:
                return self._rescan_and_call(args, kwargs)
        elif externals is None:
            return self._rescan_and_call(args, kwargs)
        if not kwargs:
            key = ()  # _fast_key, inlined: this is the whole per-call overhead
            for a in args:
                if type(a) is np.ndarray:
                    key += (a.shape, a.dtype)
                elif type(a) is float:  # 0.0 vs -0.0 and NaN: see static_scalar_key
                    key += (float, a) if a == a and a else (float, repr(a))
                elif type(a) in (int, bool, str) or a is None:
                    key += (type(a), a)
                elif type(a) in _IDENTITY_KEYED:  # a function it calls (implicit)
                    key += (a,)
                elif type(a) is DeviceArray:  # on the GPU (tracegrad.placement)
                    key += (DeviceArray, a.shape, a.dtype)
                else:
                    break
            else:
                fast_call = self._shortcuts.get(key)
                if fast_call is not None:
                    self.entries.hits += 1
                    return fast_call(args)
        return self._call_slow(args, kwargs)

    def _rescan_and_call(self, args: tuple, kwargs: dict):
        """Find the arrays and scalars fn reads from outside its arguments (first
        call, or a path that no longer resolves), then call."""
        with _BUILD_LOCK:
            externals = find_externals(self.fn, args)
            if self._externals is not None and [e.label for e in externals] != [
                e.label for e in self._externals
            ]:
                log.info(
                    "%s: implicit inputs changed: %s",
                    _fn_name(self.fn),
                    [e.label for e in externals],
                )
            self._externals, self._n_ext = externals, len(externals)
        return self(*args, **kwargs)

    def _with_externals(self, args: tuple) -> tuple:
        if self._externals is None:
            self._externals = find_externals(self.fn, args)
            self._n_ext = len(self._externals)
        return args + read_all(self._externals, args) if self._externals else args

    def implicit_snapshot(self, args: tuple) -> tuple:
        """The implicit inputs' values now, arrays copied, for `call_with_implicit`: a
        vjp's pullback is the derivative where vjp was taken, even if a closed-over
        array changes in place before the pullback is called."""
        try:
            values = self._with_externals(args)[len(args) :]
        except StaleExternal:  # a path that no longer resolves: look again
            self._externals = None
            values = self._with_externals(args)[len(args) :]
        return self._externals, tuple(
            np.array(v, copy=True) if type(v) is np.ndarray else v for v in values
        )

    def call_with_implicit(self, args: tuple, snapshot: tuple):
        """Call on `args` with the implicit inputs of `implicit_snapshot`, not read now."""
        externals, values = snapshot
        if externals is not self._externals:
            raise RuntimeError(
                f"{_fn_name(self.fn)}: the places it reads arrays from changed "
                "since the snapshot was taken (a global deleted or rebound "
                "to a container); call vjp again"
            )
        return self._call_slow(args + values, {})

    def _arg_names(self, nargs: int) -> list[str]:
        """Names of the explicit arguments, then of the implicit inputs."""
        n_explicit = nargs - self._n_ext
        names = argument_names(self.fn, n_explicit)
        return names + [e.label for e in (self._externals or [])][: nargs - n_explicit]

    def _wrt_args(self, nargs: int) -> tuple[int, ...]:
        """Argument positions to differentiate (implicit inputs never are)."""
        return _resolve_argnums(self.argnums, nargs - self._n_ext, self.fn) if self.argnums else ()

    def flat_function(self, nargs: int, kw_names: tuple) -> Callable:
        """fn taking every leaf position flat: explicit args, implicit inputs, kwargs.
        While it is traced, implicit arrays are swapped for their tracers."""
        fn, externals, n_explicit = self.fn, list(self._externals or ()), nargs - self._n_ext
        fn = traceable(fn)  # np.asarray itself: its tracing stand-in

        def flat_fn(*all_args):
            explicit = all_args[:n_explicit]
            kw = dict(zip(kw_names, all_args[nargs:], strict=True))
            if not externals:
                return fn(*explicit, **kw)
            values = all_args[n_explicit:nargs]
            originals = read_all(externals, explicit)
            context = active_contexts()[-1]
            for original, value in zip(originals, values, strict=True):
                if isinstance(value, Tracer) and value is not original:
                    context.substitute(original, value)
            with swapped_in(externals, explicit, values, originals):
                return fn(*explicit, **kw)

        flat_fn.__name__ = getattr(fn, "__name__", "f")
        try:
            names = self._arg_names(nargs)
            flat_fn.__signature__ = _signature_of(names, kw_names)
        except (TypeError, ValueError):
            pass
        return flat_fn

    # ---- everything else: pytrees, tensors, tracers, first calls
    def _call_slow(self, args: tuple, kwargs: dict):
        if not kwargs and "capture" in self.entries.shortcut_kinds:  # PyTorch-style code
            from tracegrad.capture import try_fast

            result = try_fast(self, args)
            if result is not None:
                return result[0]
        if not kwargs:
            if TREE in self.entries.shortcut_kinds:  # pytrees of arrays (a dict of params)
                key, tree_leaves = _tree_key(args)
                hit = self.entries.shortcut(TREE, key) if key is not None else None
                if hit is not None:
                    self.entries.hits += 1
                    entry, how = hit
                    return entry.call(
                        tree_leaves if how == _AS_IS else [_canonical_leaf(a) for a in tree_leaves]
                    )
        wrt_args = self._wrt_args(len(args))
        leaves, in_tree, arg_of_leaf = self._flatten(args, kwargs, wrt_args)
        if active_contexts() or any(isinstance(v, Tracer) for v in leaves):
            # Called while an enclosing grad/compile traces: inline into its graph.
            return self._call_traced(args, kwargs, leaves, in_tree, arg_of_leaf, wrt_args)
        if self.mode == "compile" and (
            self.force_capture or any(_is_eager_tensor(v) for v in leaves)
        ):
            from tracegrad.capture import call_captured

            return call_captured(self, args, kwargs)
        if any(is_device_array(v) for v in leaves):  # GPU arrays: the CUDA backend
            return self._call_on_device(args, kwargs, leaves, in_tree, arg_of_leaf, wrt_args)
        _check_leaves(self, args, leaves, arg_of_leaf)
        leaves = [_plain_leaf(v) for v in leaves]
        arrays = [_canonical_leaf(v) for v in leaves]
        avals = tuple(_leaf_aval(v) for v in arrays)
        wrt = _wrt_leaves(arg_of_leaf, wrt_args)
        signature = _Signature(in_tree, avals, wrt, tuple(kwargs))
        if signature.key() not in self.entries:  # checked once per signature
            self._check_wrt(args, kwargs, leaves, avals, wrt, arg_of_leaf, wrt_args)
        try:
            entry = self._entry_for(signature, args, kwargs)
        except _needs_capture():  # the function runs eager modules or tensors: capture it
            if self.mode != "compile":
                raise
            from tracegrad.capture import call_captured

            self.force_capture = True
            return call_captured(self, args, kwargs)
        if not kwargs and not entry.impure:
            self._remember_fast(args, wrt_args, entry, arrays, leaves)
        return entry.call(arrays)

    def _call_on_device(self, args, kwargs, leaves, in_tree, arg_of_leaf, wrt_args):
        """A call with GPU arrays (tracegrad.placement): the same traced, differentiated and
        optimized graph, lowered by the CUDA backend; host leaves are copied to the GPU,
        as JAX does. Results are DeviceArrays."""
        from tracegrad.placement import as_device_array, load_cuda

        load_cuda()  # the clear error when numba.cuda or the GPU is missing
        arrays = [as_device_array(v) for v in leaves]
        avals = tuple(core.Aval(a.shape, a.dtype) for a in arrays)
        wrt = _wrt_leaves(arg_of_leaf, wrt_args)
        signature = _Signature(in_tree, avals, wrt, tuple(kwargs))
        key = ("cuda", *signature.key())
        entry = self.entries.get(key)
        if entry is None:
            with _BUILD_LOCK:
                entry = self.entries.get(key)
                if entry is None:
                    # trace with host stand-ins of the same avals (never read)
                    stand_ins = tree_unflatten(in_tree, [np.zeros(a.shape, a.dtype) for a in avals])
                    host_args = tuple(stand_ins[: len(args)])
                    host_kwargs = dict(zip(kwargs, stand_ins[len(args) :], strict=True))
                    self._check_wrt(args, kwargs, leaves, avals, wrt, arg_of_leaf, wrt_args)
                    entry = self._build(signature, host_args, host_kwargs, "cuda", self.optimize)
                    self.add_entry(key, entry)
                    self.note_new_signature(signature, args)
        else:
            self.entries.hits += 1
        if not kwargs and all(type(a) is DeviceArray for a in args):  # the hot path's key
            key = ()
            for a in args:
                key += (DeviceArray, a.shape, a.dtype)
            self.entries.remember(ARRAYS, key, entry.call)
        return entry.call(arrays)

    def _remember_fast(self, args, wrt_args, entry, arrays, leaves) -> None:
        """Map this call's cheap key to the entry, if the key describes it fully."""
        key = _fast_key(args)
        if key is _NOT_FAST:
            self._remember_tree(args, entry, arrays, leaves)
            return
        if isinstance(entry, _TieredEntry):
            return
        if any(type(a) is not np.ndarray and i in wrt_args for i, a in enumerate(args)):
            return  # a Python scalar being differentiated is an array leaf
        # Layout and flags are not in the key; the entry copies unusual layouts itself.
        call = entry.call
        if any(type(a) is np.ndarray and not a.dtype.isnative for a in args):
            self.entries.remember(
                ARRAYS,
                key,
                lambda args: call([_canonical_leaf(a) for a in args if type(a) is np.ndarray]),
            )
        elif all(type(a) is np.ndarray for a in args):
            self.entries.remember(ARRAYS, key, call)
        else:
            self.entries.remember(
                ARRAYS, key, lambda args: call([a for a in args if type(a) is np.ndarray])
            )

    def _remember_tree(self, args, entry, arrays, leaves) -> None:
        key, tree_leaves = _tree_key(args)
        if key is None:
            return
        # The cheap walk must find exactly the leaves tree_flatten found (it does not
        # treat lists of numbers or differentiated Python scalars as arrays).
        if len(tree_leaves) != len(leaves) or any(
            a is not b for a, b in zip(tree_leaves, leaves, strict=True)
        ):
            return
        how = _AS_IS if all(a is b for a, b in zip(arrays, leaves, strict=True)) else _CONVERT
        self.entries.remember(TREE, key, (entry, how))

    def _flatten(self, args, kwargs, wrt_args):
        leaves: list = []
        trees = []
        arg_of_leaf: list[int] = []
        for i, a in enumerate(args):
            sub, tree = tree_flatten(a, arrays_only_scalars=i in wrt_args)
            leaves.extend(sub)
            arg_of_leaf.extend([i] * len(sub))
            trees.append(tree)
        for _k, v in kwargs.items():
            sub, tree = tree_flatten(v)
            leaves.extend(sub)
            arg_of_leaf.extend([-1] * len(sub))
            trees.append(tree)
        return leaves, TreeDef("tuple", trees), arg_of_leaf

    def _check_wrt(self, args, kwargs, leaves, avals, wrt, arg_of_leaf, wrt_args):
        names = self._arg_names(len(args))  # (runs once per new signature)
        for i in wrt_args:
            a = args[i]
            if a is None or isinstance(a, str):
                raise _bad_leaf_error(self.fn, names[i], a, i)
            if not any(arg == i for arg in arg_of_leaf):
                raise CompileError(
                    f"{_fn_name(self.fn)}: argument {names[i]!r} (argnums "
                    f"{i}) holds no arrays to differentiate" + core.user_location_suffix()
                )
        for k in wrt:
            if self.holomorphic is True and avals[k].dtype.kind != "c":  # JAX's TypeError, text
                raise core.DTypeError(
                    f"{self.mode} with holomorphic=True requires inputs with complex dtype, "
                    f"but got {avals[k].dtype.name}." + core.user_location_suffix()
                )
            if not np.issubdtype(avals[k].dtype, np.inexact):
                raise core.DTypeError(
                    f"{self.mode} requires real-valued inputs (a floating-point dtype) for "
                    f"argument {names[arg_of_leaf[k]]!r}, but got {avals[k].dtype}"
                    + core.user_location_suffix()
                )

    # ---- building (once per signature)
    def _entry_for(self, signature: _Signature, args, kwargs, tier: bool = True) -> _Entry:
        key = signature.key()
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.hits += 1
            if log.isEnabledFor(logging.INFO) and not isinstance(entry, _TieredEntry):
                # (the hot path never gets here; tiered entries always do)
                log.info(
                    "%s: cache hit off the fast path (same signature; new argument layout "
                    "or structure: %s)",
                    _fn_name(self.fn),
                    ", ".join(map(str, signature.avals)),
                )
            return entry
        with _BUILD_LOCK:
            entry = self.entries.get(key)
            if entry is not None:
                return entry
            reason = self._miss_reason(signature)
            log.info("%s: cache miss (%s); tracing", _fn_name(self.fn), reason)
            entry = self._build(
                signature,
                args,
                kwargs,
                self.backend,
                self.optimize,
                tier=self._tier_policy() if tier else None,
            )
            if isinstance(entry, _TieredEntry):
                entry.key = key
            if entry.captures:  # cannot happen outside an enclosing trace
                raise TracingError(
                    f"{_fn_name(self.fn)} closes over a traced value of a "
                    "finished trace" + core.user_location_suffix()
                )
            if entry.impure:
                _warn_impure(self.fn, entry.impure)
                return entry  # not cached: the next call traces (and draws) again
            self.add_entry(key, entry)
            self.note_new_signature(signature, args)
        return entry

    def _tier_policy(self) -> str | None:
        """Whether a new signature runs on the interpreter while its kernel is built in
        the background: "always", "if_cheap" (a first signature: when the graph's
        `interpreter_seconds` is at most TIER_MAX_SECONDS) or None (build first).

        TRACEGRAD_TIERED: "first" (default) tiers a function's first signature if cheap,
        unless a backend is named (`backend=` or TRACEGRAD_BACKEND: naming Numba asks for
        its kernel), and its new signatures once it has a kernel; "shapes" only the
        latter; "always" every signature; "0" none."""
        if self.backend != "numba":
            return None
        mode = config.tiered_mode()
        if mode == "0":
            return None
        if mode == "always" or any(
            isinstance(e, _Entry) and e.lowered.backend == "numba" for e in self.entries.values()
        ):
            return "always"
        if mode == "first" and self._backend is None and not config.backend_named():
            return "if_cheap"
        return None

    def note_new_signature(self, signature: _Signature, args) -> None:
        """Count a trace; warn once when signatures keep changing."""
        if self.entries.note_trace(signature) > MAX_SIGNATURES and not self.entries.warned:
            self.entries.warned = True
            warnings.warn(self._retrace_message(args), RuntimeWarning, stacklevel=5)

    def _build(
        self,
        signature: _Signature,
        args,
        kwargs,
        backend: str,
        optimize: bool,
        tier: str | None = None,
    ) -> _Entry:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        kw_names = signature.kwarg_names
        flat_fn = self.flat_function(len(args), kw_names)
        example = tuple(args) + tuple(kwargs[k] for k in kw_names)
        wrt_args = set(self._wrt_args(len(args)))
        with RandomWatch(self.fn) as watch:
            traced = trace_flat(
                flat_fn, example, avals=list(signature.avals), scalar_argnums=tuple(wrt_args)
            )
        if self.mode == "compile":  # jit traces once, as JAX's: a draw is a constant
            watch.drew = None
        if watch.drew:  # retraced every call (its draws differ): the interpreter, no kernel
            backend, tier = "interpret", None
        if backend == "cuda" and _has_complex(traced.graph):
            # complex values run on the NumPy interpreter (the CUDA kernels are
            # real-valued; the Numba backend runs complex nodes in NumPy between
            # its kernel segments: codegen.generate._complex_to_numpy)
            log.info("%s: complex values: the interpreter runs it", _fn_name(self.fn))
            backend, tier = "interpret", None
        if backend != "cuda":  # (the CUDA backend lacks scan; unrolled, it has no host loop)
            traced.graph = reroll_loops(traced.graph)  # unrolled Python loops -> scan
        timings["trace"] = time.perf_counter() - t0
        graph = traced.graph
        if self.mode == "compile":
            pack = _forward_packer(traced.out_tree)
        else:
            pack = self._grad_pack(traced, signature, args)
        lowered = None
        index_key = None
        if backend == "numba" and not traced.captures and tier == "if_cheap":
            # a cached kernel loads in the background too: Numba's import and its cache
            # load take longer than the interpreter's first result
            index_key = self._index_key(traced, signature, optimize, timings)
        elif backend in ("numba", "cuda") and not traced.captures:
            lowered, index_key = self._lower_from_index(
                traced, signature, optimize, timings, backend
            )
        if lowered is None:
            if self.mode == "compile":
                joint = graph
            else:
                t0 = time.perf_counter()
                joint = self._joint_graph(graph, signature)
                timings["autodiff"] = time.perf_counter() - t0
            if tier:
                choose = _cheap_to_interpret if tier == "if_cheap" else None
                lowered = _lower_in_background(
                    graph,
                    joint,
                    optimize,
                    index_key,
                    timings,
                    choose=choose,
                    hold=choose is not None,
                )
            else:
                lowered = lower_graphs(
                    graph, joint, backend, optimize=optimize, index_key=index_key
                )
        # a function's first signature (tiered or not) readies its next shapes: their
        # jobs queue behind its kernel's build
        if backend == "numba" and (tier == "if_cheap" or (not tier and lowered.kernel is not None)):
            generic = config.shape_generic_mode()
            if generic == "ahead":
                self._shapes_ahead(lowered, signature, flat_fn, example, wrt_args)
            elif generic == "shapes":
                from tracegrad.lowering import prefetch_template

                prefetch_template(lowered)
        timings.update(lowered.timings)
        lowered.timings = timings
        log.info(
            "%s: %s",
            _fn_name(self.fn),
            ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in timings.items()),
        )
        output_names = _output_names(self, traced, signature)
        if lowered.tier_build is not None:
            entry = _TieredEntry(
                lowered, pack, signature, output_names, traced.input_paths, self.check_finite, self
            )
        else:
            entry = _Entry(
                lowered, pack, signature, output_names, traced.input_paths, self.check_finite
            )
        entry.captures = traced.captures
        entry.impure = watch.drew
        return entry

    def _shapes_ahead(self, lowered, signature, flat_fn, example, wrt_args) -> None:
        """TRACEGRAD_SHAPE_GENERIC=ahead: the next shapes' kernel, built in the background
        (lowering.prepare_shapes_ahead)."""
        from tracegrad.lowering import prepare_shapes_ahead

        def retrace(avals):
            traced = trace_flat(flat_fn, example, avals=avals, scalar_argnums=tuple(wrt_args))
            graph = reroll_loops(traced.graph)
            return graph if self.mode == "compile" else self._joint_graph(graph, signature)

        data = [k for k in range(len(signature.avals)) if k not in set(signature.wrt)]
        prepare_shapes_ahead(lowered, list(signature.avals), data, retrace, self.optimize)

    def _index_key(self, traced, signature: _Signature, optimize: bool, timings: dict):
        """The traced graph's key in the cache index (codegen/index.py), or None."""
        from tracegrad.codegen import index

        t0 = time.perf_counter()
        key = index.graph_key(
            traced.graph,
            mode=self.mode,
            wrt=tuple(signature.wrt),
            optimize=bool(optimize),
            has_aux=bool(self.has_aux),
        )
        timings["index_key"] = time.perf_counter() - t0
        if key is None:
            log.info("%s: no index key (an attribute has no exact encoding)", _fn_name(self.fn))
        return key

    def _lower_from_index(
        self, traced, signature: _Signature, optimize: bool, timings: dict, backend="numba"
    ):
        """(Lowered, key) from the cache index (no autodiff, passes or codegen), or
        (None, key to record the kernel under once built). See codegen/index.py (and
        codegen/cuda/disk.py for backend "cuda")."""
        if backend == "cuda":
            from tracegrad.codegen.cuda import load_cuda_indexed as load_indexed
        else:
            from tracegrad.codegen import load_indexed

        graph = traced.graph
        key = self._index_key(traced, signature, optimize, timings)
        if key is None:
            return None, None
        if self.mode == "compile":

            def make_joint():
                return graph
        else:

            def make_joint():
                return self._joint_graph(graph, signature)

        lowered = Lowered(
            graph, None, None, None, backend, {}, make_joint=make_joint, optimize=optimize
        )
        t0 = time.perf_counter()
        kernel = load_indexed(
            key,
            [(n.shape, n.dtype) for n in graph.inputs],
            lambda: lowered.optimized,
            label=graph.name,
        )
        if kernel is None:
            return None, key
        # the same stage name as the full path's; the kernel's own timings say what it
        # was made of here ("index" lookup, "import_numba", "load_compile")
        timings["codegen+cuda" if backend == "cuda" else "codegen+numba"] = time.perf_counter() - t0
        lowered.kernel, lowered.source, lowered.source_path = (
            kernel,
            kernel.source,
            kernel.source_path,
        )
        return lowered, key

    @staticmethod
    def _joint_graph(graph: Graph, signature: _Signature) -> Graph:
        from tracegrad.autodiff import vjp_graph

        return vjp_graph(graph, list(signature.wrt), diff_outputs=[0], seed_ones=True)

    def _grad_pack(self, traced, signature: _Signature, args):
        """Check that the traced function can be differentiated; its result packer."""
        graph = traced.graph
        out_tree = traced.out_tree
        aux_tree = None
        if self.has_aux:
            if out_tree.kind not in ("tuple", "list") or len(out_tree.children) != 2:
                raise CompileError(
                    f"{_fn_name(self.fn)}: with has_aux=True the function must return a pair "
                    f"(value, aux), got structure {out_tree}{_fn_location(self.fn)}"
                )
            value_tree, aux_tree = out_tree.children
        else:
            value_tree = out_tree
        if value_tree.kind != "array":
            raise GradOutputError(
                f"Gradient only defined for scalar-output functions. {_fn_name(self.fn)}: "
                f"{self.mode} needs a function returning one scalar array, got structure "
                f"{value_tree}; for several outputs use tracegrad.jacobian or tracegrad.vjp, "
                f"or has_aux=True for (value, aux){_fn_location(self.fn)}"
            )
        value = graph.outputs[0]
        if value.shape != ():
            raise GradOutputError(
                f"Gradient only defined for scalar-output functions. Output had shape: "
                f"{value.shape} ({_fn_name(self.fn)} returned {value.type_str()} made at "
                f"{value.source}); reduce it, e.g. with tracegrad.sum, or use "
                "tracegrad.jacobian (all derivatives) or tracegrad.vjp (a vector-Jacobian "
                "product) for vector outputs"
            )
        _check_output_dtype(self.mode, self.holomorphic, value.dtype, self.fn)
        if not np.issubdtype(value.dtype, np.inexact):
            raise core.DTypeError(
                f"{self.mode} requires real-valued outputs (a floating-point dtype), but "
                f"{_fn_name(self.fn)} returned {value.dtype}{_fn_location(self.fn)}"
            )
        n_out = len(graph.outputs)
        grad_trees = self._grad_trees(signature, args)
        return _grad_packer(self.mode, n_out, aux_tree, grad_trees, self.argnums_is_tuple)

    def _grad_trees(self, signature: _Signature, args) -> list[TreeDef]:
        """The argument structure each gradient is returned in."""
        return [signature.in_tree.children[i] for i in self._wrt_args(len(args))]

    # ---- tracing through: grad(grad(f)), compile inside compile
    def _call_traced(self, args, kwargs, leaves, in_tree, arg_of_leaf, wrt_args):
        from tracegrad.autodiff import replay

        leaves = [v if isinstance(v, Tracer) else _canonical_leaf(_plain_leaf(v)) for v in leaves]
        avals = tuple(_leaf_aval(v) for v in leaves)
        wrt = _wrt_leaves(arg_of_leaf, wrt_args)
        signature = _Signature(in_tree, avals, wrt, tuple(kwargs))
        if signature.key() not in self.entries:
            self._check_wrt(args, kwargs, leaves, avals, wrt, arg_of_leaf, wrt_args)
        entry = self._entry_for_tracing(signature, args, kwargs)
        stack = active_contexts()
        contexts = [v.context for v in list(leaves) + entry.captures if isinstance(v, Tracer)]
        # Consts join the innermost trace involved (none: plain NumPy evaluation).
        context = max(contexts, key=lambda c: stack.index(c) if c in stack else -1, default=None)
        env = replay(entry.lowered.joint, list(leaves) + entry.captures, context)
        outs = tuple(env[n.id] for n in entry.lowered.joint.outputs)
        return entry.pack(outs)

    def _entry_for_tracing(self, signature, args, kwargs) -> _Entry:
        """The joint graph to inline into an enclosing trace (grad of grad, compile
        of grad): no passes or code generation, the enclosing pipeline does those."""
        key = (TRACED,) + signature.key()
        entry = self.entries.get(key)
        if entry is None:
            with _BUILD_LOCK:
                entry = self._build(signature, args, kwargs, "interpret", False)
                self.entries.traces += 1
                if not entry.captures:  # closures over enclosing tracers differ per call
                    self.add_entry(key, entry)
        return entry

    # ---- inspection
    def lower(self, *args, **kwargs) -> Lowered:
        """The stages (traced, joint, optimized graphs; generated source) for these args.
        Always the real kernel: a signature still on the interpreter tier waits for it."""
        args = self._with_externals(args)
        wrt_args = self._wrt_args(len(args))
        leaves, in_tree, arg_of_leaf = self._flatten(args, kwargs, wrt_args)
        if self.mode == "compile" and (
            self.force_capture or any(_is_eager_tensor(v) for v in leaves)
        ):
            from tracegrad.capture import lower_captured

            return lower_captured(self, args, kwargs)
        _check_leaves(self, args, leaves, arg_of_leaf)
        leaves = [_canonical_leaf(_plain_leaf(v)) for v in leaves]
        avals = tuple(_leaf_aval(v) for v in leaves)
        wrt = _wrt_leaves(arg_of_leaf, wrt_args)
        self._check_wrt(args, kwargs, leaves, avals, wrt, arg_of_leaf, wrt_args)
        signature = _Signature(in_tree, avals, wrt, tuple(kwargs))
        entry = self.entries.get(signature.key())  # not a call: no hit counted
        if entry is None:  # lower() wants the kernel: no interpreter tier
            try:
                entry = self._entry_for(signature, args, kwargs, tier=False)
            except _needs_capture():  # PyTorch-style code: the captured stages
                if self.mode != "compile":
                    raise
                from tracegrad.capture import lower_captured

                self.force_capture = True
                return lower_captured(self, args, kwargs)
        if isinstance(entry, _TieredEntry):  # its kernel is building: wait for it
            entry = entry.finish()
        return entry.lowered

    def wait_kernels(self, timeout: float | None = None) -> bool:
        """Wait until every signature that runs on the interpreter tier (see
        TRACEGRAD_TIERED) has its Numba kernel in use; False after `timeout` seconds.

        >>> import numpy as np, tracegrad as tg
        >>> f = tg.compile(lambda x: x * 2.0)
        >>> _ = f(np.ones(2)); _ = f(np.ones(3))  # the second shape may start tiered
        >>> f.wait_kernels(), f.tier_info().pending
        (True, 0)
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for entry in self.entries.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if isinstance(entry, _TieredEntry):
                if entry.finish(left) is None:
                    return False
            elif isinstance(entry, list):  # captured PyTorch-style entries (tracegrad.capture)
                if not all(e.wait_kernels(left) for e in entry if hasattr(e, "wait_kernels")):
                    return False
        return True

    def tier_info(self) -> TierInfo:
        """TierInfo(pending, interpreted_calls): signatures whose kernel is still being
        built in the background, and calls the NumPy interpreter answered meanwhile."""
        pending = sum(
            isinstance(e, _TieredEntry) and e.build.kernel is None for e in self.entries.values()
        )
        return TierInfo(pending, self._interpreted_calls)

    def add_entry(self, key, entry) -> None:
        """Keep `entry` for `key`; past MAX_ENTRIES the oldest one is dropped (and
        the shortcuts, which may lead to it, start again)."""
        with _BUILD_LOCK:
            dropped = self.entries.add(key, entry)
            if dropped is not None:
                _cancel_build(dropped)
                log.info(
                    "%s: dropped the oldest of %d kernels (a new signature every call?)",
                    _fn_name(self.fn),
                    MAX_ENTRIES + 1,
                )

    def cache_info(self) -> CacheInfo:
        """CacheInfo(traces, hits): signatures traced, and calls served from the cache.
        For captured PyTorch-style code, `trace_reasons` says why each trace happened."""
        return CacheInfo(self.entries.traces, self.entries.hits)

    def capture_names(self) -> dict:
        """Readable names ("model.fc1.weight") for the state a captured trace lifts."""
        if self._capture_names is None:
            from tracegrad.capture.module import module_names

            self._capture_names = module_names(self.names_from or self.fn)
        return self._capture_names

    def cache_clear(self) -> None:
        with _BUILD_LOCK:
            self.entries.clear(on_drop=_cancel_build)
            self._interpreted_calls = 0
            self._externals, self._n_ext = None, 0

    # ---- retrace reports
    def _miss_reason(self, signature: _Signature) -> str:
        if not self.entries.signatures:
            return "first call"
        last = self.entries.signatures[-1]
        changed = _changed_arguments(
            last,
            signature,
            self._arg_names(len(signature.in_tree.children) - len(signature.kwarg_names)),
        )
        return "changed: " + "; ".join(changed) if changed else "new signature"

    def _retrace_message(self, args) -> str:
        names = self._arg_names(len(args))
        counts = {}
        for pos in range(len(self.entries.signatures[-1].in_tree.children)):
            seen = {_arg_part(s, pos) for s in self.entries.signatures}
            counts[pos] = len(seen)
        pos = max(counts, key=counts.get)
        name = names[pos] if pos < len(names) else f"keyword argument {pos - len(names)}"
        tree = self.entries.signatures[-1].in_tree.children[pos]
        what = (
            "static value"
            if tree.kind == "static"
            else "shape/dtype, or the Python numbers inside it: a tuple or list is a "
            "pytree whose numbers are static values"
            if _holds_static(tree)
            else "shape/dtype"
        )
        return (
            f"tracegrad: {_fn_name(self.fn)} has been traced for "
            f"{len(self.entries.signatures)} different signatures; argument {name!r} keeps "
            f"changing ({what}, {counts[pos]} distinct values). Every new signature is "
            "traced and compiled again: pass changing Python scalars as arrays, or keep "
            f"shapes fixed.{_fn_location(self.fn)}"
        )

    def __repr__(self) -> str:
        return f"<tracegrad.{self.mode} of {_fn_name(self.fn)}>"

    def __get__(self, obj, objtype=None):  # works as a method decorator too
        return self if obj is None else functools.partial(self, obj)


def _signature_of(names: list[str], kw_names):
    import inspect

    unique: list[str] = []
    for n in list(names) + list(kw_names):
        n = base = identifier(n)
        k = 1
        while n in unique:
            n, k = f"{base}_{k}", k + 1
        unique.append(n)
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in unique]
    return inspect.Signature(params)


def _holds_static(tree: TreeDef) -> bool:
    return tree.kind == "static" or any(_holds_static(c) for c in tree.children)


def _arg_part(signature: _Signature, pos: int):
    tree = signature.in_tree.children[pos]
    start = sum(c.num_leaves for c in signature.in_tree.children[:pos])
    return (tree, signature.avals[start : start + tree.num_leaves])


def _changed_arguments(old: _Signature, new: _Signature, names: list[str]) -> list[str]:
    out = []
    if len(old.in_tree.children) != len(new.in_tree.children):
        return [f"{len(old.in_tree.children)} -> {len(new.in_tree.children)} arguments"]
    for pos in range(len(new.in_tree.children)):
        a, b = _arg_part(old, pos), _arg_part(new, pos)
        if a != b:
            name = names[pos] if pos < len(names) else f"argument {pos}"
            out.append(f"{name}: {_describe(a)} -> {_describe(b)}")
    return out


def _describe(part) -> str:
    tree, avals = part
    if tree.kind == "static":
        return repr(tree.static)
    if tree.kind == "array":
        return str(avals[0])
    return f"{tree} of {', '.join(map(str, avals))}"


# NumPy's ufunc and iterator machinery stops at 32 dimensions (NPY_MAXARGS) even
# where arrays may have 64.
MAX_RANK = 32
_SUPPORTED_KINDS = "biufc"  # bool, ints, floats, complex


def _check_leaves(cf: CompiledFunction, args: tuple, leaves: list, arg_of_leaf: list) -> None:
    """Refuse leaves that would be silently changed or crash deep inside codegen."""
    for value, pos in zip(leaves, arg_of_leaf, strict=True):
        if isinstance(value, Tracer):
            continue
        problem, cls = _leaf_problem(value)
        if problem is not None:
            names = cf._arg_names(len(args))
            name = names[pos] if 0 <= pos < len(names) else "a keyword argument"
            raise cls(
                f"{_fn_name(cf.fn)}: argument {name!r} {problem}" + core.user_location_suffix()
            )


def _has_complex(graph: Graph) -> bool:
    """Whether any value of `graph` (an input, a const or a node) is complex."""
    return any(node.dtype.kind == "c" for node in graph.nodes) or any(
        node.dtype.kind == "c" for node in graph.inputs
    )


def _check_output_dtype(mode: str, holomorphic: Any, dtype: np.dtype, fn: Callable) -> None:
    """JAX's `_check_output_dtype_revderiv` for complex outputs (its TypeError and text):
    holomorphic=True needs a complex output, and a complex output needs holomorphic=True."""
    if holomorphic == "any":  # (vjp's pullback: any cotangent, no check)
        return
    where = f" ({_fn_name(fn)}{_fn_location(fn)})"
    if holomorphic and dtype.kind != "c":
        raise core.DTypeError(
            f"{mode} with holomorphic=True requires outputs with complex dtype, "
            f"but got {dtype.name}." + where
        )
    if not holomorphic and dtype.kind == "c":
        raise core.DTypeError(
            f"{mode} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dtype.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex outputs, use tracegrad.vjp directly." + where
        )


def _leaf_problem(value: Any) -> tuple[str | None, type]:
    # no masked array exists before numpy.ma is imported (importing it is slow); another
    # thread may be importing it right now, before MaskedArray is defined
    masked_array = getattr(sys.modules.get("numpy.ma"), "MaskedArray", None)
    if masked_array is not None and isinstance(value, masked_array):
        return (
            "is a masked array; tracegrad would drop its mask. Pass "
            "np.ma.filled(x, fill) or the data and the mask as two arrays"
        ), core.DTypeError
    dtype = getattr(value, "dtype", None)
    if isinstance(value, (list, tuple)):
        try:
            dtype = np.asarray(value).dtype
        except ValueError:
            return None, TypeError
    try:
        dtype = np.dtype(dtype) if dtype is not None else None
    except TypeError:  # an eager dtype object
        dtype = np.dtype(str(dtype).rsplit(".", 1)[-1])
    if dtype is not None and dtype.kind not in _SUPPORTED_KINDS:
        what = {
            "c": "complex",
            "O": "object",
            "U": "string",
            "S": "bytes",
            "V": "structured",
            "M": "datetime",
            "m": "timedelta",
        }.get(dtype.kind, dtype.kind)
        return (
            f"has dtype {dtype} ({what}); tracegrad supports bool, integer, "
            "floating-point and complex arrays"
        ), core.DTypeError
    ndim = getattr(value, "ndim", None)
    if isinstance(ndim, int) and ndim > MAX_RANK:
        return (
            f"has {ndim} dimensions; tracegrad supports at most {MAX_RANK} (NumPy's "
            "ufuncs stop there)"
        ), core.ShapeError
    return None, TypeError


def _leaf_aval(value: Any) -> core.Aval:
    if isinstance(value, Tracer):
        return value.aval
    if isinstance(value, np.ndarray):
        return core.Aval(value.shape, value.dtype)
    if type(value) in (float, int, bool) or isinstance(value, np.generic):
        return core.Aval((), np.asarray(value).dtype)
    arr = _plain_leaf(value)
    return core.Aval(np.shape(arr), np.asarray(arr).dtype)


def _is_eager_tensor(value: Any) -> bool:
    return (
        hasattr(value, "requires_grad")
        and hasattr(value, "detach")
        and not isinstance(value, np.ndarray)
    )


# -------------------------------------------------------------------- packing


def _forward_packer(out_tree: TreeDef) -> Callable:
    if out_tree.kind == "array":
        return lambda outs: outs[0]
    return lambda outs: tree_unflatten(out_tree, outs)


def _grad_packer(mode: str, n_out: int, aux_tree, grad_trees, argnums_is_tuple) -> Callable:
    """Turn the joint graph's outputs (value, aux..., grads...) into JAX's layout."""
    simple = aux_tree is None and n_out == 1 and all(t.kind == "array" for t in grad_trees)
    if simple:  # the common case, without a Python loop per call
        if mode == "grad":
            return (lambda outs: tuple(outs[1:])) if argnums_is_tuple else (lambda outs: outs[1])
        if argnums_is_tuple:
            return lambda outs: (outs[0], tuple(outs[1:]))
        return lambda outs: (outs[0], outs[1])

    # (start, stop, structure) of each argument's gradients among the outputs
    spans, pos = [], n_out
    for tree in grad_trees:
        k = tree.num_leaves
        spans.append((pos, pos + k, None if tree.kind == "array" else _grad_tree(tree)))
        pos += k

    def grads_of(outs):
        trees = [
            outs[start] if tree is None else tree_unflatten(tree, outs[start:stop])
            for start, stop, tree in spans
        ]
        return tuple(trees) if argnums_is_tuple else trees[0]

    if aux_tree is None:
        if mode == "grad":
            return grads_of
        return lambda outs: (outs[0], grads_of(outs))

    def with_aux(outs):
        aux = tree_unflatten(aux_tree, outs[1:n_out])
        if mode == "grad":
            return grads_of(outs), aux
        return (outs[0], aux), grads_of(outs)

    return with_aux


def _grad_tree(tree: TreeDef) -> TreeDef:
    # Static leaves of a differentiated argument get gradient None.
    if tree.kind == "static":
        return TreeDef("static", static=None)
    if tree.kind == "array":
        return tree
    return TreeDef(
        tree.kind, [_grad_tree(c) for c in tree.children], keys=tree.keys, static=tree.static
    )


def _output_names(cf: CompiledFunction, traced, signature: _Signature) -> list[str]:
    n_out = len(traced.graph.outputs)
    names = [
        "value"
        if cf.mode != "compile" and i == 0
        else ("aux" if cf.mode != "compile" else f"output {i}")
        for i in range(n_out)
    ]
    if cf.mode != "compile":
        names += [f"gradient for {traced.input_paths[k]!r}" for k in signature.wrt]
    return names


def _check_finite(entry: _Entry, arrays, outs) -> None:
    for i, out in enumerate(outs):
        arr = np.asarray(out)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            what = "NaN" if np.isnan(arr).any() else "Inf"
            raise NonFiniteError(
                f"check_finite: {entry.output_names[i]} contains {what}"
                + _first_nonfinite_node(entry, arrays)
            )


def _first_nonfinite_node(entry: _Entry, arrays) -> str:
    """Find, with the interpreter, the first node that produced a NaN/Inf."""
    from tracegrad.ir.interpret import _run_node

    graph = entry.lowered.joint
    env = {n.id: a for n, a in zip(graph.inputs, arrays, strict=True)}
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            if node.id in env:
                continue
            value = _run_node(node, env)
            env[node.id] = value
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                line = node.source or "unknown line"
                origin = getattr(graph, "vjp_origin", {}).get(node.id)
                role = f"in the gradient of {origin}" if origin else f"{node.tag} pass"
                return (
                    f"; first produced by {node.name} = {node.op} : {node.type_str()} "
                    f"({role}) at {line}"
                )
    return ""


# ------------------------------------------------------------- public API

# `tg.grad(lambda w: loss(w, X))` made inside a training loop is a new function
# object every step: functions with the same code, closure cells, defaults and
# globals (so the same behaviour: closed-over values are read on every call)
# share one CompiledFunction, and its kernels.
_SHARED: collections.OrderedDict[tuple, CompiledFunction] = collections.OrderedDict()
_SHARED_MAX = 128
_UNKEYED_WARN_AFTER = 100
_unkeyed = {"count": 0, "warned": False}


def _reuse_key(fn: Callable, settings: tuple):
    if type(fn) is not FunctionType:
        return None
    try:
        kwdefaults = tuple(sorted(fn.__kwdefaults__.items())) if fn.__kwdefaults__ else None
        # cells compare by contents and do not hash: by identity (the shared
        # CompiledFunction's fn keeps them alive while its key exists)
        cells = tuple(id(c) for c in fn.__closure__) if fn.__closure__ else None
        key = (fn.__code__, cells, id(fn.__globals__), fn.__defaults__, kwdefaults, settings)
        hash(key)
    except TypeError:  # an unhashable default value
        return None
    return key


_WARNED_IMPURE: set = set()


def _warn_impure(fn, drew: str) -> None:
    """Once per function: its trace drew from a NumPy random generator."""
    code = getattr(fn, "__code__", None)
    if code in _WARNED_IMPURE:
        return
    _WARNED_IMPURE.add(code)
    warnings.warn(
        f"{_fn_name(fn)} drew from {drew} while it was traced: tracegrad traces it again on "
        "every call (as HIPS autograd and JAX's grad without jit run it afresh) and runs "
        "it on the NumPy interpreter. For a cached kernel, pass the random values in as "
        "arguments or draw them with tracegrad.random keys.",
        RuntimeWarning,
        stacklevel=4,
    )


def shared_compiled(
    fn: Callable, mode: str, argnums: Any = 0, has_aux: bool = False, **options
) -> CompiledFunction:
    """The CompiledFunction for `fn`, shared with earlier ones made from an
    equivalent function (see `_SHARED`)."""
    settings = (
        mode,
        argnums if not isinstance(argnums, list) else tuple(argnums),
        has_aux,
        tuple(sorted(options.items())),
    )
    key = _reuse_key(fn, settings)
    if key is None:
        _note_unkeyed(fn, mode)
        return CompiledFunction(fn, mode, argnums, has_aux, **options)
    with _BUILD_LOCK:
        cf = _SHARED.get(key)
        if cf is not None:
            _SHARED.move_to_end(key)
            return cf
        cf = _SHARED[key] = CompiledFunction(fn, mode, argnums, has_aux, **options)
        if len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)
        return cf


def _shared_static(fn: Callable, static_argnums, static_argnames, **options):
    """The StaticArgsFunction for `fn` and these static arguments, shared like
    `shared_compiled` (jit(f, static_argnums=1) inside a loop traces once per value)."""

    def make(bound: Callable) -> CompiledFunction:
        return CompiledFunction(bound, "compile", **options)

    settings = (
        "static",
        _as_tuple(static_argnums, int, "static_argnums"),
        _as_tuple(static_argnames, str, "static_argnames"),
        tuple(sorted(options.items())),
    )
    key = _reuse_key(fn, settings)
    if key is None:
        return StaticArgsFunction(fn, static_argnums, static_argnames, make)
    with _BUILD_LOCK:
        sf = _SHARED.get(key)
        if sf is None:
            sf = _SHARED[key] = StaticArgsFunction(fn, static_argnums, static_argnames, make)
            if len(_SHARED) > _SHARED_MAX:
                _SHARED.popitem(last=False)
        return sf


def _note_unkeyed(fn: Callable, mode: str) -> None:
    """Warn once when many compiled functions are made of callables that cannot be
    recognised again (each one traces and compiles anew)."""
    _unkeyed["count"] += 1
    if _unkeyed["count"] >= _UNKEYED_WARN_AFTER and not _unkeyed["warned"]:
        _unkeyed["warned"] = True
        warnings.warn(
            f"tracegrad: {_unkeyed['count']} compiled functions were made from callables "
            f"that cannot be matched to earlier ones (the latest: tracegrad.{mode} of "
            f"{_fn_name(fn)}, a {type(fn).__name__}); each traces and compiles again. Make "
            f"tracegrad.{mode}(...) once, outside the loop, and call it inside.",
            RuntimeWarning,
            stacklevel=3,
        )


class StaticArgsFunction:
    """`compile(fn, static_argnums=..., static_argnames=...)`, JAX's static arguments.

    A static argument reaches `fn` as the Python value itself (never a tracer), so
    Python control flow and shapes may depend on it. Its value is part of the cache
    key: each new hashable value traces and compiles once (one `CompiledFunction` per
    value, each with its own signatures). An unhashable value (an array, a list) is
    a ValueError, as in JAX. `static_argnums` also covers the same parameters passed
    by keyword, and `static_argnames` the same parameters passed by position.

    >>> import numpy as np, tracegrad as tg
    >>> f = tg.jit(lambda x, n: x ** n if n > 1 else x, static_argnums=1, backend="interpret")
    >>> f(np.array([2.0]), 3), f(np.array([2.0]), 1)
    (array([8.]), array([2.]))
    >>> f(np.array([2.0]), np.array(3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: Non-hashable static arguments are not supported. ...
    """

    def __init__(self, fn: Callable, static_argnums: Any, static_argnames: Any, make: Callable):
        self.fn = fn
        self._make = make  # bound function -> CompiledFunction
        self.static_argnums, self.static_argnames = _resolve_static(
            fn, static_argnums, static_argnames
        )
        self._by_static: collections.OrderedDict[tuple, CompiledFunction] = (
            collections.OrderedDict()
        )
        self._warned = False
        functools.update_wrapper(self, fn, updated=())

    def _split(self, args: tuple, kwargs: dict) -> tuple:
        """(key, dynamic args, dynamic kwargs): the static values keyed by place."""
        n = len(args)
        positions = sorted({p % n for p in self.static_argnums if -n <= p < n})
        key: list = [n]
        for p in positions:
            key.append((p, _static_value_key(self.fn, args[p], p)))
        dyn_kwargs = {}
        for name, value in kwargs.items():
            if name in self.static_argnames:
                key.append((name, _static_value_key(self.fn, value, name)))
            else:
                dyn_kwargs[name] = value
        dyn_args = tuple(a for i, a in enumerate(args) if i not in positions)
        return tuple(key), dyn_args, dyn_kwargs

    def _compiled_for(self, key: tuple, args: tuple, kwargs: dict) -> CompiledFunction:
        cf = self._by_static.get(key)
        if cf is not None:
            self._by_static.move_to_end(key)
            return cf
        n = key[0]
        placed = [(p, args[p]) for p, _ in key[1:] if isinstance(p, int)]
        named = {k: kwargs[k] for k, _ in key[1:] if isinstance(k, str)}
        fn = self.fn

        def with_static(*dyn, **dyn_kw):
            full = list(dyn)
            for p, value in placed:  # ascending positions, all below n
                full.insert(p, value)
            return fn(*full, **named, **dyn_kw)

        with_static.__name__ = with_static.__qualname__ = _fn_name(fn)
        with_static.__wrapped__ = fn
        try:
            names = argument_names(fn, n)
            statics = {p for p, _ in placed}
            with_static.__signature__ = inspect.Signature(
                [
                    inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                    for i, name in enumerate(names)
                    if i not in statics
                ]
            )
        except (TypeError, ValueError):
            pass
        cf = self._by_static[key] = self._make(with_static)
        if len(self._by_static) > MAX_ENTRIES:
            self._by_static.popitem(last=False)
        if len(self._by_static) > MAX_SIGNATURES and not self._warned:
            self._warned = True
            warnings.warn(
                f"tracegrad.compile: {_fn_name(fn)} was traced for "
                f"{len(self._by_static)} different values of its static arguments "
                f"(the latest: {key[1:]!r:.200}); each new value traces and compiles again",
                RuntimeWarning,
                stacklevel=3,
            )
        return cf

    def __call__(self, *args, **kwargs):
        key, dyn_args, dyn_kwargs = self._split(args, kwargs)
        return self._compiled_for(key, args, kwargs)(*dyn_args, **dyn_kwargs)

    def lower(self, *args, **kwargs) -> Lowered:
        """`CompiledFunction.lower` of the function compiled for these static values."""
        key, dyn_args, dyn_kwargs = self._split(args, kwargs)
        return self._compiled_for(key, args, kwargs).lower(*dyn_args, **dyn_kwargs)

    def cache_info(self) -> CacheInfo:
        """Traces and hits summed over every static value seen."""
        infos = [cf.cache_info() for cf in self._by_static.values()]
        return CacheInfo(sum(i.traces for i in infos), sum(i.hits for i in infos))

    def cache_clear(self) -> None:
        self._by_static.clear()

    def __repr__(self) -> str:
        return (
            f"<compiled {_fn_name(self.fn)}: static_argnums={self.static_argnums}, "
            f"static_argnames={self.static_argnames}, {len(self._by_static)} static values>"
        )

    def __get__(self, obj, objtype=None):  # a method decorator too
        return self if obj is None else functools.partial(self, obj)


def _as_tuple(value: Any, kind: type, what: str) -> tuple:
    if value is None:
        return ()
    if isinstance(value, kind):
        return (value,)
    try:
        items = tuple(value)
    except TypeError:
        items = (value,)
    if not all(isinstance(v, kind) and not isinstance(v, bool) for v in items):
        raise TypeError(f"{what} must be {kind.__name__}s or a sequence of them, got {value!r}")
    return items


def _resolve_static(fn: Callable, argnums: Any, argnames: Any) -> tuple[tuple, tuple]:
    """JAX's `_infer_argnums_and_argnames`: each of static_argnums / static_argnames
    also names the same parameter the other way, where `fn`'s signature says so."""
    nums = _as_tuple(argnums, int, "static_argnums")
    names = _as_tuple(argnames, str, "static_argnames")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return nums, names
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    if not var_positional:
        for p in nums:
            if not -len(positional) <= p < len(positional):
                raise ValueError(
                    f"jitted function has static_argnums={nums}, but only accepts "
                    f"{len(positional)} positional arguments ({_fn_name(fn)}{_fn_location(fn)})"
                )
    index = {p.name: i for i, p in enumerate(positional) if p.kind != p.POSITIONAL_ONLY}
    kinds = {p.name: p.kind for p in params}
    var_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    for name in names:  # JAX's ValueErrors (test_jit_argnames_validation)
        kind = kinds.get(name)
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL) or (
            kind is None and not var_keyword
        ):
            what = "is not a parameter" if kind is None else f"is a {kind.description} parameter"
            raise ValueError(
                f"jitted function has static_argnames={names}, but {name!r} {what} of "
                f"{_fn_name(fn)}: static_argnames name keyword parameters{_fn_location(fn)}"
            )
    nums += tuple(index[n] for n in names if n in index and index[n] not in nums)
    names += tuple(
        positional[p].name
        for p in nums
        if -len(positional) <= p < len(positional)
        and positional[p].kind != positional[p].POSITIONAL_ONLY
        and positional[p].name not in names
    )
    return nums, names


def _static_value_key(fn: Callable, value: Any, where: Any) -> tuple:
    """A static value's cache key: its type and value (1, 1.0 and True differ, and
    so do 0.0 and -0.0); ValueError, as JAX's, for an unhashable one."""
    try:
        hash(value)
    except TypeError as e:
        place = f"argument {where}" if isinstance(where, int) else f"argument {where!r}"
        raise ValueError(
            "Non-hashable static arguments are not supported. An error occurred while "
            f"trying to hash an object of type {type(value)}, {value!r:.80}. The error "
            f"was:\nTypeError: {e}\n({_fn_name(fn)}, static {place}: pass arrays as "
            "ordinary traced arguments, or a tuple instead of a list)" + _fn_location(fn)
        ) from None
    if isinstance(value, tuple):
        return (type(value), tuple(_static_value_key(fn, v, where) for v in value))
    return (type(value), static_scalar_key(value))


def compile(
    fn: Callable | None = None,
    *,
    backend: str | None = None,
    check_finite: bool = False,
    optimize: bool = True,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    mode: str | None = None,
    options: dict | None = None,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Sequence[str] | None = None,
    donate_argnums: Any = None,
) -> Callable[..., Any]:
    """Compile `fn` per input signature into a kernel; usable as `@compile`.

    A signature is the arguments' pytree structure, shapes and dtypes, and the
    values of static (Python scalar) arguments; each new one is traced once. The
    function's first call with a signature traces and compiles it (or loads its
    kernel from the disk cache); later calls run the kernel. `f.lower(*args)`
    shows every stage (graphs, timings, generated source); `f.cache_info()`
    counts traces and hits.

    backend: "numba" generates and compiles a kernel, cached on disk;
        "interpret" runs the optimized graph on the NumPy reference interpreter
        (no compile: handy in tests and for debugging). None (default): the
        TRACEGRAD_BACKEND variable when a signature is built, else "numba".
    check_finite: raise NonFiniteError, naming the output and the input leaves,
        when a result holds NaN or Inf (costs one pass over the outputs).
    optimize: run the graph passes (DCE, CSE, folding, simplification, fusion);
        False keeps the graph as traced (to inspect or to rule a pass out).

    Called with numpy arrays it returns numpy arrays; called with eager tensors
    that require grad it returns an eager tensor whose grad_fn is one
    CompiledFunctionBackward node.

    PyTorch-style code compiles too (`tracegrad.capture`): `compile(model)` or
    `compile(train_step)` captures eager ops, `nn.Module` forwards, losses,
    `loss.backward()` and `optimizer.step()` into one graph, with parameters,
    grads and optimizer state read and written on every call. fullgraph: a graph
    break (`.item()` feeding an `if`, `print(t)`) raises instead of running that
    call eagerly. dynamic, mode and options are accepted for torch.compile's
    callers and change nothing (every new shape retraces; kernels are always
    fused and cached).

    static_argnums, static_argnames: as in `jax.jit`: these arguments reach `fn` as
    the values themselves (Python control flow and shapes may depend on them), and
    each new hashable value traces once (`StaticArgsFunction`); an unhashable one
    (an array, a list) raises ValueError. donate_argnums is accepted and ignored
    (as JAX on CPU: nothing is donated).

    Arrays that `fn` reads from its closure, from module globals or from
    attributes of the object it is bound to are implicit inputs, read again on
    every call: an in-place change (`W -= lr * g`) or a rebinding is seen by the
    next call (a new shape or dtype retraces), and a closed-over eager tensor
    that requires grad gets its `.grad`. Closed-over Python scalars are static
    values: a new value retraces. `grad` never differentiates implicit inputs.
    Details and limits: `help(tracegrad.implicit)`.

    >>> import numpy as np, tracegrad as tg
    >>> @tg.compile(backend="interpret")
    ... def f(x):
    ...     return tg.tanh(x) * 2.0
    >>> f(np.zeros(2))
    array([0., 0.])
    >>> W = np.ones(2)
    >>> g = tg.compile(lambda x: x * W, backend="interpret")
    >>> W *= 3
    >>> g(np.ones(2))
    array([3., 3.])
    """

    def wrap(f):
        from tracegrad.capture.module import is_module

        if static_argnums is not None or static_argnames is not None:
            return _shared_static(
                f,
                static_argnums,
                static_argnames,
                backend=backend,
                check_finite=check_finite,
                optimize=optimize,
                fullgraph=fullgraph,
            )

        if is_module(f):
            from tracegrad.capture import CompiledModule

            return CompiledModule(
                f,
                lambda fn, b: CompiledFunction(fn, "compile", backend=b),
                backend=backend,
                fullgraph=fullgraph,
            )
        if fullgraph:
            return shared_compiled(
                f,
                "compile",
                backend=backend,
                check_finite=check_finite,
                optimize=optimize,
                fullgraph=True,
            )
        return shared_compiled(
            f, "compile", backend=backend, check_finite=check_finite, optimize=optimize
        )

    return wrap if fn is None else wrap(fn)


def value_and_grad(
    fn: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    holomorphic: bool = False,
    backend: str | None = None,
    check_finite: bool = False,
    optimize: bool = True,
) -> CompiledFunction:
    """`fn`'s value and its gradient with respect to `argnums`, as in JAX.

    Returns `(value, grads)`; `grads` is a tuple iff `argnums` is a tuple; with
    `has_aux=True`, `fn` returns `(value, aux)` and the call `((value, aux), grads)`.

    fn: returns a scalar (a 0-d floating-point array or Python float); arguments
        may be arrays, Python scalars (static: part of the cache key) or pytrees
        (tuples, lists, dicts) of them.
    argnums: which positional argument(s) to differentiate; an int or a tuple.
    has_aux: `fn` returns `(value, aux)`; aux is passed through, not differentiated.
    holomorphic: `fn` maps complex inputs to a complex output holomorphically; the
        gradient is then f'(z) (JAX's convention; without it a complex output raises
        JAX's TypeError).
    backend, check_finite, optimize: as for `compile` ("numba" or "interpret"; raise
        on NaN/Inf outputs; run the graph passes).

    >>> import numpy as np, tracegrad as tg
    >>> vg = tg.value_and_grad(lambda x: tg.sum(x * x), backend="interpret")
    >>> vg(np.array([1.0, 2.0]))
    (array(5.), array([2., 4.]))
    """
    if holomorphic:  # (a separate key only when set: existing cache keys stay as they were)
        return shared_compiled(
            fn,
            "value_and_grad",
            argnums,
            has_aux,
            holomorphic=True,
            backend=backend,
            check_finite=check_finite,
            optimize=optimize,
        )
    return shared_compiled(
        fn,
        "value_and_grad",
        argnums,
        has_aux,
        backend=backend,
        check_finite=check_finite,
        optimize=optimize,
    )


def grad(
    fn: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    *,
    holomorphic: Any = False,
    backend: str | None = None,
    check_finite: bool = False,
    optimize: bool = True,
) -> CompiledFunction:
    """The gradient of scalar-valued `fn` with respect to `argnums`, as in JAX.

    Arguments as for `value_and_grad` (`argnums`, `has_aux`: then the call returns
    `(grads, aux)`). A non-scalar output raises GradOutputError (a TypeError),
    pointing to `tg.jacobian`. `holomorphic=True` (complex inputs and output): the
    complex derivative f'(z), as in JAX; a real-valued `fn` of complex inputs gets
    JAX's gradient, df/dx - i df/dy (the conjugate of PyTorch's `z.grad`).

    backend, check_finite, optimize: as for `compile` ("numba" or "interpret"; raise
        on NaN/Inf outputs; run the graph passes).

    >>> import numpy as np, tracegrad as tg
    >>> tg.grad(lambda x: tg.sum(x ** 3), backend="interpret")(np.array([1.0, 2.0]))
    array([ 3., 12.])
    >>> tg.grad(lambda z: tg.sum(z * z), holomorphic=True, backend="interpret")(
    ...     np.array([1 + 2j]))
    array([2.+4.j])
    """
    if holomorphic:
        return shared_compiled(
            fn,
            "grad",
            argnums,
            has_aux,
            holomorphic=holomorphic,
            backend=backend,
            check_finite=check_finite,
            optimize=optimize,
        )
    return shared_compiled(
        fn, "grad", argnums, has_aux, backend=backend, check_finite=check_finite, optimize=optimize
    )


def clear_caches() -> None:
    """Drop every compiled function's traced graphs and kernels, as JAX's
    `jax.clear_caches()`: generated modules whose kernels are all gone leave
    `sys.modules` (the disk cache stays, so recompiling loads from it).

    >>> import tracegrad as tg
    >>> tg.clear_caches()
    """
    import gc

    with _BUILD_LOCK:
        _SHARED.clear()
        for cf in list(_LIVE):
            cf.cache_clear()
        from tracegrad.codegen import loops as codegen_loops
        from tracegrad.loops import primitives as control

        codegen_loops._RUNNERS.clear()
        control.clear_caches()
        from tracegrad.codegen import shape_generic

        shape_generic.clear()
        cuda_runtime = sys.modules.get("tracegrad.codegen.cuda.runtime")
        if cuda_runtime is not None:  # the CUDA kernels (loaded only by calls with GPU arrays)
            cuda_runtime.clear()
        for clear in _CACHE_CLEARERS:  # the transforms above this module (vjp, linearize)
            clear()
    gc.collect()


_CACHE_CLEARERS: list[Callable[[], None]] = []


def on_clear_caches(clear: Callable[[], None]) -> None:
    """Have `clear_caches()` call `clear` too (modules above this one register their
    caches here, so this module never imports them)."""
    _CACHE_CLEARERS.append(clear)
