"""What both compiled front ends share: lowering a joint graph to a kernel.

`tracegrad.compiler` (compile, grad, value_and_grad on arrays) and
`tracegrad.compiled_eager` (compile on eager tensors that require grad) both
trace, differentiate and then lower graphs here: passes, fusion and code
generation (`lower_graphs`), under one build lock, with one logger, one
signature record and one way to hand arrays to a kernel. It sits below both, so
neither imports the other's internals.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.lowering import lower_graphs
    >>> g = tg.trace(lambda x: x * 2.0, np.ones(2))
    >>> lowered = lower_graphs(g, g, backend="interpret")
    >>> lowered.kernel(np.ones(2))
    (array([2., 2.]),)
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tracegrad import config
from tracegrad.ir.graph import Graph
from tracegrad.ops import core

log = logging.getLogger("tracegrad")
if config.log_enabled() and not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[tracegrad] %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)


# One lock for all tracing and kernel building: each signature is traced exactly
# once even when threads race. Re-entrant, because grad(grad(f)) traces f while
# tracing grad(f).
_BUILD_LOCK = threading.RLock()


# ------------------------------------------------------------------ lowering


class Lowered:
    """Every stage of one compiled signature.

    traced:     the graph `trace` recorded;
    joint:      after reverse mode (equal to `traced` for `compile`);
    optimized:  after passes and fusion (what the kernel runs);
    source:     the generated Numba source (None with backend="interpret");
    source_path: the file that holds it;
    memory:     the kernel's arrays (codegen/memory.py MemoryReport): workspace
                bytes per dtype (temporaries, whose regions are reused once
                dead), output bytes, the peak bytes of temporaries live at once,
                and what one region per temporary would need. Computed from the
                generated source on first use, so it works with either backend.

    >>> import numpy as np, tracegrad as tg
    >>> def loss(w, x):
    ...     h = tg.tanh(x @ w)
    ...     return tg.sum(tg.tanh(h @ w.T) ** 2)
    >>> f = tg.value_and_grad(loss, backend="interpret")
    >>> mem = f.lower(np.ones((64, 64)), np.ones((32, 64))).memory
    >>> mem.workspace_bytes["float64"] <= mem.no_reuse_bytes
    True
    >>> mem.peak_live_bytes <= mem.total_workspace_bytes
    True
    """

    def __init__(
        self,
        traced: Graph,
        joint: Graph | None,
        optimized: Graph | None,
        kernel: Any,
        backend: str,
        timings: dict,
        make_joint: Callable[[], Graph] | None = None,
        optimize: bool = True,
    ):
        self.traced = traced
        self._joint = joint
        self._optimized = optimized
        self._make_joint = make_joint  # for a kernel found through the cache index:
        self._optimize = optimize  # the graphs are rebuilt only if asked for
        self.kernel = kernel
        self.backend = backend
        self.timings = timings
        self.tier_build = None  # the background build while kernel is None (tiered)
        self.tier_runner = None  # what runs meanwhile, if not the interpreter
        self.shapes_ahead = None  # TRACEGRAD_SHAPE_GENERIC=ahead: that background build
        self.source = getattr(kernel, "source", None)
        self.source_path = getattr(kernel, "source_path", None)

    @property
    def joint(self) -> Graph:
        if self._joint is None:
            with _BUILD_LOCK:
                if self._joint is None:
                    self._joint = self._make_joint()
        return self._joint

    @property
    def optimized(self) -> Graph:
        if self._optimized is None:
            joint = self.joint
            with _BUILD_LOCK:
                if self._optimized is None:
                    self._optimized = _optimize_graph(joint, self._optimize, {})
        return self._optimized

    @property
    def scan_residual_bytes(self) -> int:
        """Bytes reverse mode of the graph's scans keeps between its forward and
        backward loops: each step's starting carry (0 without scans)."""
        from tracegrad.loops.primitives import residual_bytes

        return residual_bytes(self.optimized)

    @functools.cached_property
    def memory(self):
        """The kernel's memory record (see the class doc)."""
        from tracegrad.codegen.kernel import report_for

        return report_for(self.optimized)  # code generation takes its own lock

    def __str__(self) -> str:
        return str(self.optimized)

    def __repr__(self) -> str:
        return (
            f"<Lowered {self.traced.name}: traced {len(self.traced.nodes)} nodes, joint "
            f"{len(self.joint.nodes)}, optimized {len(self.optimized.nodes)}; "
            f"backend {self.backend}; {self._memory_text()}>"
        )

    def _memory_text(self) -> str:
        try:
            return str(self.memory)
        except Exception as exc:
            return f"memory unknown ({type(exc).__name__}: {exc})"


def lower_graphs(
    traced: Graph, joint: Graph, backend: str, optimize: bool = True, index_key: str | None = None
) -> Lowered:
    """Run passes, fusion and code generation on a joint graph (`index_key`:
    record the kernel in the cache index, see codegen/index.py)."""
    timings: dict[str, float] = {}
    graph = _optimize_graph(joint, optimize, timings)
    if backend == "numba":
        from tracegrad.codegen import shape_generic

        t0 = time.perf_counter()
        kernel = attempt = None
        if shape_generic.enabled(graph) and shape_generic.may_have_template(graph):
            attempt = shape_generic.Attempt(graph)
            if not attempt.emitted.wants_parallel:  # (templates have no parallel variant)
                kernel = attempt.kernel
        if kernel is None:
            kernel = _specialized_kernel(graph, index_key, attempt)
        timings["codegen+numba"] = time.perf_counter() - t0
    elif backend == "cuda":  # called with GPU arrays (tracegrad.placement)
        from tracegrad.codegen.cuda import build_cuda_kernel

        t0 = time.perf_counter()
        in_types = [(n.shape, n.dtype) for n in traced.inputs]
        kernel = build_cuda_kernel(graph, index_key, in_types)
        timings["codegen+cuda"] = time.perf_counter() - t0
    else:
        kernel = _Interpreted(graph)
    return Lowered(traced, joint, graph, kernel, backend, timings, optimize=optimize)


def _lower_in_background(
    traced: Graph,
    joint: Graph,
    optimize: bool,
    index_key: str | None,
    timings: dict,
    choose: Callable[[Graph], bool] | None = None,
    hold: bool = False,
) -> Lowered:
    """Passes and fusion now; code generation and Numba in the background worker
    (codegen/background.py). The Lowered's kernel stays None until it is promoted.

    A compiled shape-generic kernel that reproduces this graph's source
    (codegen/shape_generic.py) is the kernel at once, with no build; one that
    lacks the parallel variant the graph wants (`tier_runner`) serves until the
    specialized kernel is built. Otherwise, when an earlier graph of the same
    structure differs from this one only in literals, the background build
    compiles their template, which serves this shape and the next ones.
    `choose(optimized graph)` False: the kernel is built now instead (the first-call
    tier's cost model, compiler.interpreter_seconds). `hold`: the build waits for
    `tier_build.release()` (background.submit)."""
    from tracegrad.codegen import shape_generic
    from tracegrad.codegen.background import submit

    graph = _optimize_graph(joint, optimize, timings)
    if choose is not None and not choose(graph):
        built = lower_graphs(traced, graph, "numba", optimize=False, index_key=index_key)
        timings.update(built.timings)
        return Lowered(traced, joint, graph, built.kernel, "numba", timings, optimize=optimize)
    enabled = shape_generic.enabled(graph)
    # the matching source costs a code generation: in this thread only when a template
    # for the structure exists (else the worker makes it, and the interpreter answers now);
    # never for a first call (`hold`): loading a template imports Numba, which the
    # interpreter's first result must not wait for
    attempt = (
        shape_generic.Attempt(graph)
        if enabled and not hold and shape_generic.may_have_template(graph)
        else None
    )
    if attempt is not None and attempt.kernel is not None:
        timings["shape_generic"] = attempt.seconds
        if not attempt.emitted.wants_parallel:
            return Lowered(
                traced, joint, graph, attempt.kernel, "numba", timings, optimize=optimize
            )
    lowered = Lowered(traced, joint, graph, None, "numba", timings, optimize=optimize)

    def specialized():
        return _specialized_kernel(graph, index_key, attempt)

    def indexed(build):
        # a warm cache: the kernel the index records for this traced graph, loaded
        # without generating its source (as the untiered path's _lower_from_index);
        # else `build`
        def builder():
            kernel = _indexed_kernel(traced, graph, index_key)
            return kernel if kernel is not None else build()

        return builder

    if attempt is not None and attempt.kernel is not None:
        lowered.tier_runner = attempt.kernel
        lowered.tier_build = submit(graph, index_key, builder=indexed(specialized), hold=hold)
        what = "its kernel"
    elif enabled:
        # in the worker, after the builds queued before it (a template made ahead for
        # this structure, or another shape's): found then, or paired, or specialized
        def later():
            nonlocal attempt
            attempt = attempt or shape_generic.Attempt(graph)
            return attempt.later(specialized)

        lowered.tier_build = submit(graph, index_key, builder=indexed(later), hold=hold)
        what = "its kernel (shape-generic if it can be)"
    else:
        lowered.tier_build = submit(graph, index_key, builder=indexed(specialized), hold=hold)
        what = "its kernel"
    log.info(
        "%s: tiered: %s until %s is built in the background",
        traced.name,
        "a shape-generic kernel" if lowered.tier_runner is not None else "interpreter",
        what,
    )
    return lowered


def _indexed_kernel(traced: Graph, graph: Graph, index_key: str | None):
    """The kernel the cache index maps `index_key` to (codegen.load_indexed: one index
    read, then the module's verified load; no code generation), or None. `graph`, the
    optimized graph, is the kernel's graph (errors, the parallel variant) and is noted
    as built, so a later shape of its structure may pair with it as after a build."""
    if index_key is None:
        return None
    from tracegrad.codegen import load_indexed, shape_generic

    kernel = load_indexed(
        index_key, [(n.shape, n.dtype) for n in traced.inputs], lambda: graph, label=traced.name
    )
    if kernel is not None:
        shape_generic.note_built(graph)
    return kernel


def _specialized_kernel(graph: Graph, index_key: str | None, attempt=None):
    """The graph's own kernel; noted, so a later shape of its structure can pair with it
    into a shape-generic template (codegen/shape_generic.py)."""
    from tracegrad.codegen import build_kernel, shape_generic

    kernel = build_kernel(graph, index_key=index_key)
    shape_generic.note_built(graph, attempt.parsed if attempt is not None else None)
    return kernel


def prepare_shapes_ahead(
    lowered: Lowered, avals, data_leaves, retrace: Callable, optimize: bool = True
) -> None:
    """TRACEGRAD_SHAPE_GENERIC=ahead: after a signature's kernel, make the shape-generic
    kernel its next shapes will run, in the background worker: the function is traced
    again with every size that leads a data argument (not differentiated) one larger
    (then one smaller), and the template of the two sources is compiled (or loaded
    from the disk cache). `retrace(avals)` gives the joint graph for other avals."""
    from tracegrad.codegen import shape_generic
    from tracegrad.codegen.background import submit

    graph = lowered.optimized
    if not shape_generic.enabled(graph):
        return
    leading = {avals[k].shape[0] for k in data_leaves if len(avals[k].shape) >= 1}
    leading.discard(0)
    leading.discard(1)
    if not leading:
        return

    def job():
        for step in (1, -1):
            moved = [
                core.Aval(tuple(d + step if d in leading else d for d in a.shape), a.dtype)
                for a in avals
            ]
            try:
                with _BUILD_LOCK:  # tracing runs the user's function
                    joint = retrace(moved)
                other = _optimize_graph(joint, optimize, {})
                template = shape_generic.Attempt.pair(graph, other)
            except Exception as exc:
                log.info(
                    "%s: shape-generic ahead: retrace failed (%s: %s)",
                    graph.name,
                    type(exc).__name__,
                    exc,
                )
                continue
            if template is not None:
                shape_generic.compile_template(template, shape_generic.structure_key(graph))
                return None
        log.info(
            "%s: shape-generic ahead: no template (the sources differ beyond literals)", graph.name
        )
        return None

    lowered.shapes_ahead = submit(graph, builder=job)


def prefetch_template(lowered: Lowered) -> None:
    """TRACEGRAD_SHAPE_GENERIC=shapes: when an earlier process compiled a template for
    graphs of this signature's structure (a record on disk), load it in the background
    worker now, so the function's next shape finds it in memory."""
    from tracegrad.codegen import shape_generic
    from tracegrad.codegen.background import submit

    if not shape_generic.any_recorded():
        return

    def job():
        graph = lowered.optimized
        if shape_generic.enabled(graph) and shape_generic.may_have_template(graph):
            emitted = shape_generic.emit_for_matching(graph)
            shape_generic.find(graph, emitted, shape_generic.Parsed(emitted.source))
        return None

    submit(None, builder=job)


def _optimize_graph(joint: Graph, optimize: bool, timings: dict) -> Graph:
    if not optimize:
        return joint
    from tracegrad.passes import optimize as optimize_graph
    from tracegrad.passes.fuse import fuse_elementwise

    t0 = time.perf_counter()
    graph = optimize_graph(joint)
    timings["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph = fuse_elementwise(graph)
    timings["fuse"] = time.perf_counter() - t0
    return graph


class _Interpreted:
    """The kernel contract (`kernel(*arrays) -> tuple`) on the NumPy interpreter."""

    source = None
    source_path = None

    def __init__(self, graph: Graph):
        from tracegrad.ir.interpret import interpret

        self._run = functools.partial(interpret, graph)
        # the graph's constant arrays: an output that is one (a Hessian of a quadratic,
        # folded to a constant) or a view of one is copied, else the caller's in-place
        # update changed every later call's result
        self._consts = tuple(
            n.attrs["value"]
            for n in graph.nodes
            if n.op == "const" and isinstance(n.attrs.get("value"), np.ndarray)
        )

    def __call__(self, *arrays):
        outs = self._run(*arrays)
        # Like a kernel, never hand back the caller's buffers (reshape/identity are views)
        # nor the graph's own constants.
        return tuple(o.copy() if self._shares_memory(o, arrays) else o for o in outs)

    def _shares_memory(self, out, arrays) -> bool:
        if getattr(out, "base", None) is None:  # owns its memory: new, or an input or const
            return any(out is a for a in arrays) or any(out is c for c in self._consts)
        return any(np.may_share_memory(out, a) for a in arrays + self._consts)


def _fn_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class _Signature:
    """What a call looked like, for cache keys and retrace reports."""

    __slots__ = ("in_tree", "avals", "wrt", "kwarg_names")

    def __init__(self, in_tree, avals, wrt, kwarg_names):
        self.in_tree = in_tree
        self.avals = avals
        self.wrt = wrt
        self.kwarg_names = kwarg_names

    def key(self) -> tuple:
        return (self.in_tree, self.avals, self.wrt, self.kwarg_names)


def _canonical_leaf(value: Any) -> np.ndarray:
    """A C-contiguous, writeable, native-byte-order ndarray for the kernel (the
    user's array is never mutated; copies only when layout or flags require it)."""
    if type(value) is np.ndarray:
        if value.flags.c_contiguous and value.flags.writeable and value.dtype.isnative:
            return value
        arr = value
    elif isinstance(value, (np.generic, float, int, bool)):
        return np.array(value)
    else:
        arr = core.as_operand(value)
        if not isinstance(arr, np.ndarray):
            arr = np.asarray(arr)
    if not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="), order="C")
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        arr = np.array(arr, order="C", copy=True)
    return arr


def _plain_leaf(value: Any):
    if isinstance(value, (np.ndarray, np.generic)) or type(value) in (float, int, bool):
        return value
    if _is_eager_tensor(value):
        return value.detach().numpy()
    return _canonical_leaf(value)


def _is_eager_tensor(value: Any) -> bool:
    return (
        type(value).__module__.startswith("tracegrad.eager")
        and hasattr(value, "requires_grad")
        and hasattr(value, "detach")
    )
