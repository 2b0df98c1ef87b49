"""Emit the Python source of a graph's Numba kernel.

The whole graph becomes ONE `@njit` function (one dispatch per call) unless a
node has no code generation, in which case the graph is cut into njit segments
joined by a small Python driver that calls that node's NumPy `impl`.

Inside a kernel:
  - every temporary lives in a flat C-ordered region of one workspace array per
    dtype, allocated once per call (`np.empty`); a region is reused by later
    values of any size once the last reader of its value (or of a view of it)
    has run (liveness-based, best-fit placement: memory.py);
  - each fusion group is one loop nest over scalars (explicit loops compile
    far faster than array expressions and let LLVM vectorize);
  - views (reshape, broadcast_to, transpose) are index arithmetic, not copies;
  - matmul calls BLAS gemm directly (`tg_gemm`), transposes folded into flags;
  - every statement carries its IR line as a comment.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tracegrad.codegen.access import Access, c_strides
from tracegrad.codegen.memory import (
    MemoryReport,
    Placement,
    PlanMismatch,
    Workspace,
    check_disjoint,
    plan_offline,
    poison_freed,
)
from tracegrad.codegen.plan import (  # noqa: F401  (planning is shared: codegen/plan.py)
    coalesce,
    schedule,
    storage_lifetimes,
    unit_nodes,
    view_root,
)
from tracegrad.ir.graph import Graph, Node
from tracegrad.ir.printer import format_node
from tracegrad.passes.fuse import groups_of, is_view
from tracegrad.runtime import mathlib

log = logging.getLogger("tracegrad")

# Fast-math for kernels. Not 'nnan'/'ninf': they make isnan/isinf checks always
# false. Not 'nsz' either: together with 'reassoc' it lets LLVM fold the inlined
# math helpers' two-part constants (x - k*ln2_hi - k*ln2_lo -> x - k*ln2) and
# reorder p * 2**k1 * 2**k2 into an overflow (exp(709.7) = inf); measured, and
# caught by tests/codegen/test_mathlib.py. 'reassoc' stays: reductions need it
# to vectorize.
FASTMATH = {"arcp", "contract", "afn", "reassoc"}
PARALLEL_MIN_ELEMENTS = 1 << 18  # loops this big run on all cores (prange)
# A loop body repeated this often becomes one shared function. At 2, not 4 (issue
# 25): the MLPs' per-layer groups (forward and backward of 2-3 layers) are shared.
# The compile time is about the same either way (a function costs ~0.1 s on its own,
# an inline copy of a fused group 0.1-0.4 s), but mlp_layernorm_b64's kernel ran 2x
# faster (f32 367-407 -> 180-183 us, f64 524-547 -> 326 us; perf/compile_time.md).
OUTLINE_MIN_USES = 2


class NoCodegen(Exception):
    """This node has no generated code; run its NumPy impl from Python instead."""


# A primitive's codegen template name (or op name) -> its emitter `fn(em, node)`:
# structured.py and linalg_emit.py register theirs here (one way: they import this).
STRUCTURED: dict[str, Callable[[Emitter, Node], None]] = {}


def structured(*names):
    """Register an emitter for the named primitives (a decorator)."""

    def register(fn):
        for n in names:
            STRUCTURED[n] = fn
        return fn

    return register


@dataclass
class EmittedModule:
    source: str
    entry: str  # name of the function to call
    const_ids: list[int]  # large consts passed as leading arguments
    fallback_ids: list[int]  # nodes run by NumPy in the Python driver
    parallel: bool = False  # this module's kernel uses prange
    wants_parallel: bool = False  # a parallel variant would differ (some loop is big)
    notes: list[str] = field(default_factory=list)
    memory: MemoryReport | None = None  # workspace, outputs, peak live bytes (memory.py)
    # segment -> workspace offsets planned with all lifetimes known, where they
    # need less memory than this module's (generate emits again with them)
    better_placements: dict = field(default_factory=dict, repr=False)


# ------------------------------------------------------------------ helpers


def np_dtype_name(dtype) -> str:
    return np.dtype(dtype).name


def dshort(dtype) -> str:
    """Which mathlib variant serves this dtype (float16 computes in float32)."""
    return {
        "float32": "f32",
        "float64": "f64",
        "float16": "f32",
        "complex64": "c64",  # (mathlib's complex helpers: Numba's complex math)
        "complex128": "c128",
    }.get(np.dtype(dtype).name, "f64")


def literal(value, dtype) -> str:
    """A scalar of `dtype` as Numba source that types exactly as `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return repr(bool(value))
    if np.issubdtype(dtype, np.integer):
        return f"np.{dtype.name}({int(value)})"
    if dtype.kind == "c":
        c = complex(value)
        text = f"complex({literal(c.real, np.float64)}, {literal(c.imag, np.float64)})"
        return text if dtype == np.complex128 else f"np.{dtype.name}({text})"
    v = float(value)
    if math.isnan(v):
        text = "np.nan"
    elif math.isinf(v):
        text = "np.inf" if v > 0 else "-np.inf"
    else:
        text = repr(v)
    return text if dtype == np.float64 else f"np.{dtype.name}({text})"


def ident(text: str) -> str:
    text = re.sub(r"\W", "_", str(text))
    return text if text and not text[0].isdigit() else "_" + text


def numba_array_type(shape, dtype) -> str:
    base = {
        "float32": "float32",
        "float64": "float64",
        "int64": "int64",
        "int32": "int32",
        "bool": "boolean",
        "int8": "int8",
        "uint8": "uint8",
        "int16": "int16",
        "uint16": "uint16",
        "uint32": "uint32",  # random keys and bits (tracegrad.random)
        "uint64": "uint64",
        "float16": "float16",
        "complex64": "complex64",  # (a complex input passed through unchanged)
        "complex128": "complex128",
    }[np.dtype(dtype).name]
    nd = len(shape)
    if nd == 0:
        return f"types.Array(types.{base}, 0, 'C')"
    return f"types.{base}[{', '.join([':'] * (nd - 1) + ['::1'])}]"


def template_of(node: Node) -> str:
    from tracegrad.ops.core import REGISTRY

    cg = REGISTRY[node.op].codegen
    return cg(**node.attrs) if callable(cg) else cg


# ------------------------------------------------------------------ emitter

_FLAT_OUTPUT = re.compile(r"\w+_f = np\.empty\((\d+), np\.(\w+)\)")  # parallel kernels' outputs


class Emitter:
    """Generates one njit function body for a list of scheduled units.

    Temporaries live in one workspace array per dtype (`ws_float32`, ...), at
    offsets planned here (memory.py): a value's region, and any copy made of
    it, goes back to the workspace's free blocks after the unit that reads it
    last (`set_lifetimes`, `end_unit`), and later values of any size are placed
    best-fit in those blocks. Graph outputs get their own arrays (`o12`),
    allocated in their final shape, and are never reused."""

    def __init__(self, graph: Graph, kernel_name: str):
        self.graph = graph
        self.name = kernel_name
        self.users = graph.users()
        self.groups = groups_of(graph)
        self.output_ids = {n.id for n in graph.outputs}
        self.lines: list[str] = []
        self.indent = 1
        self.access: dict[int, Access] = {}
        self.shaped: dict[int, str] = {}
        self.workspaces: dict[str, Workspace] = {}  # workspace name -> its offsets
        self.ws_dtype: dict[str, str] = {}
        self.regions: dict[int, list[tuple[str, int, int]]] = {}  # storage root -> regions
        self.dying: dict[int, list[int]] = {}  # unit position -> roots dead after it
        self.region_events: list[tuple[str, str, int, int]] = []  # for check_disjoint
        self.live_bytes = 0
        self.peak_live_bytes = 0
        self.poison = poison_freed()
        self.plan: dict[str, Placement] | None = None  # offsets decided ahead (second pass)
        self.parallel = False  # this body uses prange
        self.allow_parallel = False  # may it? (the parallel variant of a kernel)
        self.wants_parallel = False  # would it, if allowed?
        self.counter = 0
        self.const_values: dict[int, object] = {}  # size-1 consts, by node id
        self.outline_enabled = True
        self.outlined: dict[str, str] = {}  # canonical loop text -> function name
        self.outlined_src: dict[str, str] = {}  # function name -> its source
        self.outline_uses: dict[str, list] = {}  # function name -> [(line index, body)]
        self.flat_dtypes: dict[str, str] = {}  # flat param/output name -> dtype name
        self.out_allocs: list[str] = []  # output arrays, allocated in the prologue
        self.out_size: dict[str, int] = {}  # per-dtype output buffer -> elements
        self.own_outputs: set[str] = set()  # expressions of arrays made for outputs
        # value id -> the output that is a plain reshape of it (e.g. a loss
        # computed as f32[1] and returned as f32[]): written in place
        self.reshaped_outputs: dict[int, Node] = {}
        seen: set[int] = set()
        for o in graph.outputs:
            if o.id in seen:
                continue
            seen.add(o.id)
            root = o
            while root.op == "reshape":
                root = root.inputs[0]
            if (
                root is not o
                and root.op not in ("input", "const")
                and not is_view(root)
                and root.id not in self.output_ids
                and root.id not in self.reshaped_outputs
                and np.dtype(root.dtype) == np.dtype(o.dtype)
            ):
                self.reshaped_outputs[root.id] = o
        self.uses_gemm = False

    # ---------------------------------------------------------- small tools
    def emit(self, line: str) -> None:
        pad = "    " * self.indent
        if "tg_" in line and not line.lstrip().startswith("#"):
            try:
                expanded = mathlib.expand_statement(line)
            except SyntaxError:  # a block header (for/if): nothing to expand
                expanded = [line]
            if len(expanded) > 1:
                self.lines.extend(pad + e for e in expanded)
                return
        self.lines.append(pad + line)

    def comment(self, node: Node) -> None:
        text = format_node(node).replace("\n", " ")
        self.emit(f"# {text}")

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ------------------------------------------------------ outlining
    # Deep graphs repeat the same loop many times (50 layers: 50 identical
    # tanh loops, differing only in buffer offsets). Numba's compile time grows
    # with code size, so each distinct loop body becomes ONE njit function,
    # called with its arrays and offsets; the kernel keeps only the calls.
    _ARRAY_REF = re.compile(r"\b(ws_\w+|out_\w+|\w+_f)\[")
    _OFFSET = re.compile(r"\b(A\d+)\[(\d+)( \+ |\])")
    _LOCAL = re.compile(r"\b(v|acc|big)(\d+)\b|\b([a-z0-9]+)_m(\d+)\b")
    _NO_OFFSET = re.compile(r"\b(A\d+)\[(?!\d)")

    def outline(self, start: int, label: str) -> None:
        """Move em.lines[start:] (one loop nest, at the current indent) into a
        shared function when another unit has the same body (see above)."""
        body = self.lines[start:]
        if not body or not self.outline_enabled:
            return
        pad = "    " * self.indent
        text = "\n".join(
            line[len(pad) :] if line.startswith(pad) else line.strip() for line in body
        )
        arrays: list[str] = []

        def array_param(m):
            name = m.group(1)
            if name not in arrays:
                arrays.append(name)
            return f"A{arrays.index(name)}["

        canon = self._ARRAY_REF.sub(array_param, text)
        canon = self._NO_OFFSET.sub(lambda m: f"{m.group(1)}[0 + ", canon)
        offsets: list[str] = []

        def offset_param(m):
            offsets.append(m.group(2))
            return f"{m.group(1)}[O{len(offsets) - 1}{m.group(3)}"

        canon = self._OFFSET.sub(offset_param, canon)
        locals_: dict[str, str] = {}

        def local_name(m):
            key = m.group(0)
            if key not in locals_:
                locals_[key] = (
                    f"{m.group(1)}{len(locals_)}" if m.group(1) else f"{m.group(3)}_t{len(locals_)}"
                )
            return locals_[key]

        canon = self._LOCAL.sub(local_name, canon)
        key = "\n".join(line for line in canon.split("\n") if not line.lstrip().startswith("#"))
        fn = self.outlined.get(key)
        if fn is None:
            fn = f"{self.name}_loop{len(self.outlined)}"
            self.outlined[key] = fn
            params = [f"A{i}" for i in range(len(arrays))] + [f"O{i}" for i in range(len(offsets))]
            sig = ", ".join([self.array_type(a) for a in arrays] + ["types.int64"] * len(offsets))
            # Index views from offsets, not `A0[O0 + i]`: with a run-time offset Numba
            # cannot prove the index non-negative, adds a wraparound select, and the
            # loop no longer vectorizes. `V0 = A0[O0:]` then `V0[i]` does.
            views = []

            def view(m):
                views.append((m.group(1), m.group(2)))
                return f"V{m.group(2)[1:]}[" + ("" if m.group(3) == "]" else "")

            body_text = re.sub(
                r"\b(A\d+)\[(O\d+)( \+ |\])",
                lambda m: view(m) + ("0]" if m.group(3) == "]" else ""),
                canon,
            )
            prologue = [
                f"V{o[1:]} = {a}[{o}:]" for a, o in sorted(set(views), key=lambda t: int(t[1][1:]))
            ]
            self.outlined_src[fn] = (
                f"@njit(({sig},), fastmath=_FASTMATH, error_model='numpy', "
                "cache=True, nogil=True, no_cpython_wrapper=True)\n"
                f"def {fn}({', '.join(params)}):\n"
                + "\n".join("    " + line for line in prologue + body_text.split("\n"))
                + f"\n\n\ntg_noinline({fn})"
            )
        del self.lines[start:]
        # np.int64(...): a bare literal would make Numba compile one specialization
        # of the function per distinct offset value (measured: 4x slower compiles)
        call = f"{fn}({', '.join(arrays + [f'np.int64({o})' for o in offsets])})"
        self.emit(call + "  # one shared loop for all groups like this")
        self.outline_uses.setdefault(fn, []).append((len(self.lines) - 1, body))

    def finish_outlining(self) -> None:
        """Put back in place the loops that turned out to be used once."""
        restore = {}
        for fn, uses in self.outline_uses.items():
            if len(uses) < OUTLINE_MIN_USES:
                for line_no, body in uses:
                    restore[line_no] = body
                self.outlined_src.pop(fn)
        if restore:
            out = []
            for i, line in enumerate(self.lines):
                if i in restore:
                    out.extend(restore[i])
                else:
                    out.append(line)
            self.lines = out

    def array_type(self, flat_name: str) -> str:
        """The Numba type of a flat array variable (workspace, param or output)."""
        return numba_array_type((1,), self.array_dtype(flat_name))

    def array_dtype(self, flat_name: str) -> str:
        """The dtype name of a flat array variable (workspace, param or output)."""
        return self.ws_dtype.get(flat_name) or self.flat_dtypes[flat_name]

    def workspace(self, dtype) -> str:
        name = f"ws_{np.dtype(dtype).name}"
        if name not in self.workspaces:
            plan = None
            if self.plan is not None:
                if name not in self.plan:
                    raise PlanMismatch(f"{name} was not planned")
                plan = self.plan[name]
            self.workspaces[name] = Workspace(name, dtype, plan)
            self.ws_dtype[name] = np.dtype(dtype).name
        return name

    def alloc(self, node: Node, own_array: bool | None = None) -> Access:
        """Storage for node's value: its own output array if it is a graph
        output, else a region of the workspace (a dead value's, if one fits)."""
        shape = tuple(node.shape)
        view_out = self.reshaped_outputs.get(node.id)
        if own_array is None and view_out is not None and view_out.id not in self.shaped:
            # the value is returned only through a reshape: compute it straight
            # into that output array (no copy at the end)
            name, a = self._output_array(view_out)
            self.shaped[view_out.id] = name
            return Access(a.buf, shape, c_strides(shape), a.offset)
        if own_array or (
            own_array is None and node.id in self.output_ids and node.id not in self.shaped
        ):
            self.shaped[node.id], a = self._output_array(node)
            return a
        ws = self.workspace(node.dtype)
        offset = self._take(ws, node.size)
        # a copy of a view belongs to the view's base: it dies when the base does
        self.regions.setdefault(view_root(node).id, []).append((ws, offset, node.size))
        return Access(ws, shape, c_strides(shape), offset)

    def scratch(self, dtype, size: int) -> tuple[str, int, int]:
        """A workspace region that no node owns (say, an operand copied into
        another layout for one call): (workspace, offset, elements), live until
        `release_scratch(region)`, placed and checked like any value's region."""
        ws = self.workspace(dtype)
        return ws, self._take(ws, size), size

    def release_scratch(self, region: tuple[str, int, int]) -> None:
        self._give_back(*region)

    def _take(self, ws: str, size: int) -> int:
        offset = self.workspaces[ws].take(size)
        self.region_events.append(("take", ws, offset, size))
        self.live_bytes += size * self.workspaces[ws].dtype.itemsize
        self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return offset

    def _give_back(self, ws: str, offset: int, size: int) -> None:
        self.workspaces[ws].give_back(offset, size)
        self.region_events.append(("give_back", ws, offset, size))
        self.live_bytes -= size * self.workspaces[ws].dtype.itemsize
        if self.poison and self.workspaces[ws].dtype.kind == "f" and size:
            self.emit(
                f"{self._poisoner(ws)}({ws}, np.int64({offset}), np.int64({size}))"
                "  # poisoned: dead from here on"
            )

    def _poisoner(self, ws: str) -> str:
        """One shared function that fills a region of `ws` with NaN (TRACEGRAD_POISON_FREED;
        a call per dead region compiles faster than a loop per dead region)."""
        fn = f"{self.name}_poison_{self.ws_dtype[ws]}"
        if fn not in self.outlined_src:
            sig = f"{self.array_type(ws)}, types.int64, types.int64"
            self.outlined_src[fn] = (
                f"@njit(({sig},), cache=True, nogil=True, no_cpython_wrapper=True)\n"
                f"def {fn}(a, start, n):\n    for q in range(n):\n        a[start + q] = np.nan"
                f"\n\n\ntg_noinline({fn})"
            )
        return fn

    def _output_array(self, node: Node, name: str | None = None) -> tuple[str, Access]:
        """Allocate output `o<id>`: (expression to return, flat access to write)."""
        return self.output_region(name or f"o{node.id}", tuple(node.shape), node.dtype)

    def output_region(self, name: str, shape: tuple, dtype) -> tuple[str, Access]:
        ret, a = self._output_region(name, shape, dtype)
        self.own_outputs.add(ret)
        return ret, a

    def _output_region(self, name: str, shape: tuple, dtype) -> tuple[str, Access]:
        dtype = np_dtype_name(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        if self.allow_parallel:
            # Under parallel=True, Numba's parfor lowering loses writes made through
            # an intrinsic view inside prange (measured: the output stayed unwritten),
            # so parallel kernels allocate each output flat and reshape on return.
            self.flat_dtypes[f"{name}_f"] = dtype
            self.out_allocs.append(f"{name}_f = np.empty({size}, np.{dtype})")
            return f"{name}_f.reshape({shape!r})", Access(f"{name}_f", shape, c_strides(shape))
        # All outputs of one dtype are carved from one array (tg_view): one np.empty
        # signature to compile, whatever the outputs' ranks (~0.1 s less per kernel).
        buf = f"out_{dtype}"
        if buf not in self.out_size:
            self.out_size[buf] = 0
            self.flat_dtypes[buf] = dtype
        offset = self.out_size[buf]
        self.out_size[buf] += size
        self.out_allocs.append(f"{name} = tg_view({buf}, {offset}, {shape!r})")
        return name, Access(buf, shape, c_strides(shape), offset)

    # ------------------------------------------------------- lifetimes
    def set_lifetimes(self, dies_after: dict[int, int], keep=()) -> None:
        """Storage root id -> position of the unit after which nothing reads it
        (`storage_lifetimes`); roots in `keep` (values this function returns)
        and roots missing from `dies_after` are never reused."""
        keep = set(keep)
        self.dying = {}
        for root, p in dies_after.items():
            if root not in keep:
                self.dying.setdefault(p, []).append(root)

    def end_unit(self, p: int) -> None:
        """Unit `p` has been emitted: give back the regions of the values it read last."""
        for root in self.dying.get(p, ()):
            for ws, offset, size in self.regions.pop(root, ()):
                self._give_back(ws, offset, size)

    def better_placement(self) -> dict[str, Placement] | None:
        """Offsets planned with every lifetime known (memory.plan_offline), if
        they save enough workspace bytes over the ones chosen while emitting to
        pay for emitting the kernel a second time (~1/32 and 4 KiB)."""
        if self.plan is not None or not self.region_events:
            return None
        now = sum(ws.size * ws.dtype.itemsize for ws in self.workspaces.values())

        def worth(saved: int) -> bool:
            return saved * 32 >= now and saved >= 4096

        # no placement needs less than each workspace's peak of live elements
        if not worth(
            now - sum(ws.peak_live * ws.dtype.itemsize for ws in self.workspaces.values())
        ):
            return None
        dtypes = {name: ws.dtype for name, ws in self.workspaces.items()}
        plans = plan_offline(self.region_events, dtypes)
        planned = sum(p.size * dtypes[name].itemsize for name, p in plans.items())
        return plans if worth(now - planned) else None

    def memory_report(self) -> MemoryReport:
        """What this function's arrays need (checks first that no two live
        regions overlap: a wrong reuse would be a silently wrong result)."""
        check_disjoint(self.region_events)
        itemsize = {name: ws.dtype.itemsize for name, ws in self.workspaces.items()}
        workspace = {}
        for name, ws in self.workspaces.items():
            workspace[ws.dtype.name] = workspace.get(ws.dtype.name, 0) + ws.size * itemsize[name]
        outputs = sum(
            n * np.dtype(self.flat_dtypes[buf]).itemsize for buf, n in self.out_size.items()
        )
        outputs += sum(
            int(m.group(1)) * np.dtype(m.group(2)).itemsize
            for m in map(_FLAT_OUTPUT.match, self.out_allocs)
            if m
        )
        return MemoryReport(
            workspace_bytes=workspace,
            output_bytes=outputs,
            peak_live_bytes=self.peak_live_bytes,
            no_reuse_bytes=sum(ws.taken * itemsize[name] for name, ws in self.workspaces.items()),
            temporaries=sum(1 for e in self.region_events if e[0] == "take"),
        )

    def set_materialized(self, node: Node, a: Access) -> None:
        self.access[node.id] = Access(
            a.buf, tuple(node.shape), c_strides(tuple(node.shape)), a.offset
        )

    def prologue(self) -> list[str]:
        """Workspace and output allocations, to put at the top of the body (all
        allocation first keeps the rest a plain sequence of loops and calls,
        which `reroll` can fold)."""
        return (
            [
                f"    {name} = np.empty({max(ws.size, 1)}, np.{self.ws_dtype[name]})"
                for name, ws in self.workspaces.items()
            ]
            + [
                f"    {buf} = np.empty({max(n, 1)}, np.{self.flat_dtypes[buf]})"
                for buf, n in self.out_size.items()
            ]
            + ["    " + a for a in self.out_allocs]
        )

    def loop_fill(self, a: Access, size: int, value: str) -> None:
        """a[0:size] = value, as a loop (slice assignment compiles slowly)."""
        self.emit(f"for q in range({size}):")
        self.emit(
            f"    {a.buf}[{a.offset} + q] = {value}" if a.offset else f"    {a.buf}[q] = {value}"
        )

    # ------------------------------------------------------- array access
    def acc(self, node: Node) -> Access:
        a = self.access.get(node.id)
        if a is None:
            raise KeyError(f"{node.name} is read before it is computed")
        return a

    def contiguous(self, node: Node) -> Access:
        """node's elements in C order (copying a strided view if needed)."""
        a = self.acc(node)
        if a.scalar is None and a.contiguous:
            return a
        return self.copy_to_buffer(node)

    def copy_to_buffer(self, node: Node, own_array: bool | None = None) -> Access:
        src = self.acc(node)
        out = self.alloc(node, own_array)
        self.emit(f"# materialize {node.name} ({node.type_str()}) from its view")
        loop_dims, (ss, ds) = coalesce(list(node.shape), [src.strides, out.strides])
        vars_ = tuple(f"i{k}" for k in range(len(loop_dims)))
        for k, d in enumerate(loop_dims):
            self.emit(f"for i{k} in range({d}):")
            self.indent += 1
        self.emit(f"{out.index_expr(ds, vars_)} = {src.index_expr(ss, vars_)}")
        self.indent -= len(loop_dims)
        self.access[node.id] = out
        return out

    def array(self, node: Node) -> str:
        """An expression for a C-contiguous array of node's shape."""
        if node.id in self.shaped:
            return self.shaped[node.id]
        a = self.contiguous(node)
        if node.id in self.shaped:
            return self.shaped[node.id]
        name = f"s{node.id}"
        self.emit(
            f"{name} = {a.buf}[{a.offset}:{a.offset + node.size}].reshape({tuple(node.shape)!r})"
        )
        self.shaped[node.id] = name
        return name
