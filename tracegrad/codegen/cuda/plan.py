"""Graph -> CUDA units, and each kernel's source. Pure Python: no CUDA here.

The fused groups come from `passes/fuse.py`, the planning both backends share.
Each group becomes, on the GPU:

  - one elementwise kernel (a grid-stride loop over the group's domain) that
    computes its members in registers and stores the members read outside the
    group (forward and backward members of one group share the loop, as on the
    CPU);
  - one reduction kernel per reduction member, which recomputes the elementwise
    chain feeding it inline (so that chain is never stored): each block reduces
    a fixed chunk in a fixed order, then a shared-memory tree; a second pass
    reduces the chunks' partials when one output has several chunks. Chunks
    depend only on shapes, so results are deterministic run to run.

Views (reshape, transpose, broadcast_to) are strides, never copies; a view of a
non-contiguous value that must be reshaped is copied first. matmul/addmm are
GEMM units (runtime.py: cuBLAS through CuPy, or a tiled kernel). Anything else
raises `NotImplementedError` naming the op.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.lowering import _optimize_graph
    >>> g = _optimize_graph(tg.trace(lambda x: tg.sum(tg.tanh(x) * 2.0), np.ones(8, "f4")), True, {})
    >>> [u.kind for u in plan_graph(g, simulated=True).units]
    ['reduce']
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.passes.fuse import is_elementwise, is_fusible_reduction

ELEMENTWISE_OPS_MISSING: frozenset = frozenset()  # elementwise ops without a CUDA form
REDUCTIONS = {"sum", "mean", "max", "min", "prod", "amax", "amin"}
GEMMS = {"matmul", "addmm"}
ROW_OPS = {"softmax", "log_softmax", "logsumexp"}


class CudaUnsupported(NotImplementedError):
    """An op the CUDA backend does not implement (it never falls back to the host)."""


def unsupported(node: Node, why: str = "") -> CudaUnsupported:
    where = f" (made at {node.source})" if node.source else ""
    return CudaUnsupported(
        f"the CUDA backend lacks op {node.op!r}: {node.name} = {node.op} "
        f"{', '.join(i.name for i in node.inputs)} : {node.type_str()}{where}"
        + (f"; {why}" if why else "")
        + ". It does not run it on the host behind your back: call the function with "
        "host (NumPy) arrays for the CPU path"
    )


# ------------------------------------------------------------------ layouts


def c_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@dataclass(frozen=True)
class Layout:
    """Where a value's elements are: buffer `buf` at `offset + sum(i_d * strides[d])`
    (elements), or a scalar `literal` (source text) broadcast everywhere."""

    shape: tuple
    dtype: np.dtype
    buf: str | None = None
    offset: int = 0
    strides: tuple = ()
    literal: str | None = None

    @property
    def contiguous(self) -> bool:
        return self.literal is None and all(
            s == c or d == 1
            for s, c, d in zip(self.strides, c_strides(self.shape), self.shape, strict=True)
        )


@dataclass
class Buffer:
    name: str
    size: int
    dtype: np.dtype
    kind: str  # "input", "temp", "output", "const"
    value: np.ndarray | None = None  # for consts
    index: int = -1  # input position, or output position


@dataclass
class Unit:
    """One step on the GPU. kind: "elementwise", "reduce" or "gemm"."""

    kind: str
    name: str
    source: str = ""  # the kernel(s) as Python source for numba.cuda
    args: list = field(default_factory=list)  # buffer names, in the kernel's order
    launch: tuple = ()  # (blocks, threads)
    # launches after the first: a reduction's second pass over its chunks' partials,
    # (name, source, args, launch) each
    after: list = field(default_factory=list)
    # gemm
    gemm: dict = field(default_factory=dict)
    # scan: the body graph (fused), operands and the packed output (runtime.py runs it)
    scan: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)  # the IR lines it computes (for comments)


@dataclass
class Plan:
    units: list
    buffers: dict
    outputs: list  # Layout per graph output (contiguous buffers, or literals)


# ------------------------------------------------------------------ math for CUDA

# CPU templates call tg_* helpers and a few np.* functions; in CUDA kernels
# these names are device functions of runtime.PRELUDE.
_NP_CALL = re.compile(
    r"\bnp\.(arccos|arcsin|arctan2|arctan|expm1|floor|sqrt|isfinite|sign|remainder)\("
)


def cuda_expr(template: str, operands: list[str]) -> str:
    text = template.format(*operands)
    return _NP_CALL.sub(lambda m: f"tg_{m.group(1)}(", text)


def cuda_template(node: Node) -> str | None:
    """The CUDA form of an elementwise node's code template, or None when it calls a
    helper the prelude lacks (e.g. threefry2x32, which the CPU path runs between
    kernel segments)."""
    from tracegrad.codegen.cuda.prelude import HELPERS
    from tracegrad.ops.core import REGISTRY

    cg = REGISTRY[node.op].codegen
    if not (isinstance(cg, str) or callable(cg)):
        return None
    template = cg(**node.attrs) if callable(cg) else cg
    probe = cuda_expr(template, [f"a{k}" for k in range(len(node.inputs))])
    if any(name not in HELPERS for name in re.findall(r"\b(tg_\w+)\(", probe)):
        return None
    if re.search(r"\bnp\.(?!float|int|uint|bool_|nan\b|inf\b)\w+\(", probe):
        return None  # a NumPy function without a device version here
    return template


def literal(value, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return repr(bool(value))
    if np.issubdtype(dtype, np.integer):
        return f"np.{dtype.name}({int(value)})"
    v = float(value)
    if math.isnan(v):
        text = "np.nan"
    elif math.isinf(v):
        text = "np.inf" if v > 0 else "-np.inf"
    else:
        text = repr(v)
    return f"np.{dtype.name}({text})"


def cast(expr: str, dtype) -> str:
    dtype = np.dtype(dtype)
    return expr if dtype == np.bool_ else f"np.{dtype.name}({expr})"


# ------------------------------------------------------------------ kernel text


class _Body:
    """Loads and statements of one kernel over a domain, indexed by digit
    variables d0..d{r-1} (made on demand) or a linear index `lin` when the
    caller has one for C-ordered identity loads."""

    def __init__(self, domain: tuple, linear: str | None):
        self.domain = domain
        self.linear = linear
        self.params: list[str] = []  # buffer names
        self.lines: list[str] = []
        self.uses_digits = False

    def param(self, buf: str) -> str:
        if buf not in self.params:
            self.params.append(buf)
        return f"p{self.params.index(buf)}"

    def load(self, lay: Layout) -> str:
        if lay.literal is not None:
            return lay.literal
        r = len(self.domain)
        lead = r - len(lay.shape)
        eff = [0] * r
        for j, (n, s) in enumerate(zip(lay.shape, lay.strides, strict=True)):
            if n != 1:
                eff[lead + j] = s
        assert lay.buf is not None
        name = self.param(lay.buf)
        if self.linear is not None and lay.offset == 0 and tuple(eff) == _c_eff(self.domain):
            return f"{name}[{self.linear}]"
        terms = [str(lay.offset)] if lay.offset else []
        for d, s in enumerate(eff):
            if s:
                self.uses_digits = True
                terms.append(f"d{d}" if s == 1 else f"d{d} * {s}")
        return f"{name}[{' + '.join(terms) or '0'}]"


def _c_eff(shape: tuple) -> tuple:
    return tuple(0 if n == 1 else s for n, s in zip(shape, c_strides(shape), strict=True))


def _digits(var: str, dims: list[int], shape: tuple, indent: str) -> list[str]:
    """d<k> for each domain dim k in `dims` (C order) from the linear `var`."""
    lines: list[str] = []
    if not dims:
        return lines
    if len(dims) == 1:
        return [f"{indent}d{dims[0]} = {var}"]
    lines.append(f"{indent}rem = {var}")
    for k in reversed(dims[1:]):
        lines.append(f"{indent}d{k} = rem % {shape[k]}")
        lines.append(f"{indent}rem = rem // {shape[k]}")
    lines.append(f"{indent}d{dims[0]} = rem")
    return lines


# ------------------------------------------------------------------ the planner


class _Planner:
    def __init__(self, graph: Graph, simulated: bool):
        self.graph = graph
        self.simulated = simulated
        self.threads = 8 if simulated else 256  # (the simulator: a Python thread each)
        self.max_blocks = 8 if simulated else 65535
        self.layouts: dict[int, Layout] = {}
        self.buffers: dict[str, Buffer] = {}
        self.units: list[Unit] = []
        self.users = graph.users() if hasattr(graph, "users") else {}
        self.out_ids = {n.id for n in graph.outputs}
        self.consts: dict[int, Node] = {}

    # ---- buffers
    def new_buffer(self, node_or_name, shape, dtype, kind="temp") -> Layout:
        name = node_or_name if isinstance(node_or_name, str) else f"t{node_or_name.id}"
        size = int(np.prod(shape, dtype=np.int64))
        self.buffers[name] = Buffer(name, max(size, 1), np.dtype(dtype), kind)
        return Layout(tuple(shape), np.dtype(dtype), name, 0, c_strides(tuple(shape)))

    # ---- views
    def view(self, node: Node) -> Layout:
        src = self.layout_of(node.inputs[0])
        op = node.op
        if src.literal is not None:  # a scalar constant stays a literal
            return Layout(node.shape, node.dtype, literal=src.literal)
        if op == "broadcast_to":
            lead = len(node.shape) - len(src.shape)
            strides = [0] * lead + [
                0 if n == 1 and m != 1 else s
                for n, m, s in zip(src.shape, node.shape[lead:], src.strides, strict=True)
            ]
            return Layout(node.shape, node.dtype, src.buf, src.offset, tuple(strides))
        if op == "transpose":
            axes = node.attrs.get("axes") or tuple(reversed(range(len(src.shape))))
            return Layout(
                node.shape,
                node.dtype,
                src.buf,
                src.offset,
                tuple(src.strides[a] for a in axes),
            )
        if op == "getitem":  # basic indexing: ints, slices, None
            return self._index_view(node, src)
        if op == "reshape":
            if not src.contiguous:
                src = self.copy(node.inputs[0], src)
            return Layout(node.shape, node.dtype, src.buf, src.offset, c_strides(node.shape))
        raise unsupported(node)

    def _index_view(self, node: Node, src: Layout, shape_out: tuple | None = None) -> Layout:
        """The strided view `src[spec]` (basic indexing) of `node.attrs["spec"]`."""
        shape_out = node.shape if shape_out is None else shape_out
        offset, shape, strides, dim = src.offset, [], [], 0
        for e in node.attrs["spec"]:
            if e is None:
                shape.append(1)
                strides.append(0)
            elif isinstance(e, (int, np.integer)):
                offset += int(e) * src.strides[dim]
                dim += 1
            elif isinstance(e, tuple) and e[0] == "slice":
                _, start, stop, step = e
                n = len(range(start, -1 if stop is None else stop, step))
                offset += start * src.strides[dim] if n else 0
                shape.append(n)
                strides.append(step * src.strides[dim])
                dim += 1
            else:
                raise unsupported(node, "advanced (array) indexing")
        shape += src.shape[dim:]
        strides += src.strides[dim:]
        if tuple(shape) != tuple(shape_out):  # pragma: no cover - the shape rule agrees
            raise unsupported(node, f"index view shape {tuple(shape)}")
        return Layout(tuple(shape_out), src.dtype, src.buf, offset, tuple(strides))

    def index_add_zeros(self, node: Node) -> None:
        """zeros(shape) with g written into its basic-index view: a fill kernel, then
        a kernel over g's elements storing each through the view's strides."""
        if len(node.inputs) != 1:
            raise unsupported(node, "advanced (array) indexing")
        g = node.inputs[0]
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        fill = _Body(node.shape, "i")
        self._elementwise_unit(
            f"zeros_{node.id}", node.shape, fill, [(out, literal(0, node.dtype))], [node]
        )
        body = _Body(g.shape, "i")
        value = cast(body.load(self.layout_of(g)), node.dtype)
        target = body.load(self._index_view(node, out, g.shape))
        n = max(g.size, 0)
        ind = "        "
        lines = [f"def scatter_{node.id}({', '.join(f'p{k}' for k in range(len(body.params)))}):"]
        lines += ["    i = cuda.grid(1)", "    step = cuda.gridsize(1)", f"    while i < {n}:"]
        if body.uses_digits:
            lines += _digits("i", list(range(len(g.shape))), g.shape, ind)
        lines += [f"{ind}{target} = {value}", f"{ind}i += step"]
        T = self.threads
        self.units.append(
            Unit(
                "elementwise",
                f"scatter_{node.id}",
                "\n".join(lines) + "\n",
                list(body.params),
                (max(1, min(self.max_blocks, -(-n // T))), T),
                nodes=[node.name],
            )
        )

    def copy(self, node: Node, src: Layout) -> Layout:
        """A contiguous copy of a strided value (one elementwise kernel)."""
        out = self.new_buffer(f"c{node.id}", src.shape, src.dtype)
        body = _Body(src.shape, "i")
        expr = body.load(src)
        self._elementwise_unit(f"copy_{node.id}", src.shape, body, [(out, expr)], [node])
        return out

    def layout_of(self, node: Node) -> Layout:
        lay = self.layouts.get(node.id)
        if lay is None:
            raise unsupported(node, "its value was not planned")  # pragma: no cover
        return lay

    # ---- the walk
    def plan(self) -> Plan:
        g = self.graph
        for k, node in enumerate(g.inputs):
            self.buffers[f"in{k}"] = Buffer(
                f"in{k}", max(node.size, 1), np.dtype(node.dtype), "input", index=k
            )
            self.layouts[node.id] = Layout(
                node.shape, np.dtype(node.dtype), f"in{k}", 0, c_strides(node.shape)
            )
        for unit in self._units_in_order():
            if isinstance(unit, list):
                self.group(unit)
            else:
                self.single(unit)
        outputs = [self.output(k, n) for k, n in enumerate(g.outputs)]
        return Plan(self.units, self.buffers, outputs)

    def _units_in_order(self) -> list:
        """Nodes and groups (lists of members) in an order that respects every
        dependency: a group runs once all its external operands exist."""
        members: dict[int, list[Node]] = {}
        unit_of: dict[int, object] = {}
        order: list = []
        for n in self.graph.nodes:
            if n.group is not None and n.op not in ("input", "const"):
                if n.group not in members:
                    members[n.group] = []
                    order.append(("g", n.group))
                members[n.group].append(n)
                unit_of[n.id] = ("g", n.group)
            else:
                order.append(("n", n.id))
                unit_of[n.id] = ("n", n.id)
        nodes = {n.id: n for n in self.graph.nodes}
        deps: dict = {}
        for u in order:
            items = members[u[1]] if u[0] == "g" else [nodes[u[1]]]
            deps[u] = {
                unit_of[i.id]
                for m in items
                for i in m.inputs
                if i.id in unit_of and unit_of[i.id] != u
            }
        done: set = set()
        out: list = []
        pending = list(order)
        while pending:
            ready = next((k for k, u in enumerate(pending) if deps[u] <= done), None)
            if ready is None:  # pragma: no cover - fuse.py refuses cyclic groups
                raise RuntimeError("CUDA planner: the fused groups depend on each other in a cycle")
            u = pending.pop(ready)
            done.add(u)
            out.append(members[u[1]] if u[0] == "g" else nodes[u[1]])
        return out

    def single(self, node: Node) -> None:
        op = node.op
        if op == "input" or node.id in self.layouts:
            return
        if op == "const":
            value = np.asarray(node.attrs["value"])
            if value.ndim == 0:
                self.layouts[node.id] = Layout(
                    node.shape, np.dtype(node.dtype), literal=literal(value.item(), node.dtype)
                )
            else:
                name = f"k{node.id}"
                self.buffers[name] = Buffer(
                    name,
                    max(node.size, 1),
                    np.dtype(node.dtype),
                    "const",
                    value=np.ascontiguousarray(value, dtype=node.dtype).reshape(-1),
                )
                self.layouts[node.id] = Layout(
                    node.shape, np.dtype(node.dtype), name, 0, c_strides(node.shape)
                )
            return
        if op in ("reshape", "broadcast_to", "transpose") or (
            op == "getitem" and len(node.inputs) == 1
        ):
            self.layouts[node.id] = self.view(node)
            return
        if op in ROW_OPS:
            self.row_op(node)
            return
        if op == "index_add_zeros":
            self.index_add_zeros(node)
            return
        if op == "scan":
            self.scan_unit(node)
            return
        if op in ("cumsum", "linrec"):
            self.running(node)
            return
        if op == "concatenate":
            self.concatenate(node)
            return
        if op in ("take_along_axis", "put_along_axis_add", "nll_loss"):
            getattr(self, op)(node)
            return
        if op in GEMMS:
            self.gemm(node)
            return
        if is_elementwise(node) or (is_fusible_reduction(node) and node.op in REDUCTIONS):
            self.group([node])
            return
        raise unsupported(node)

    # ---- fused groups
    def group(self, members: list[Node]) -> None:
        ids = {m.id for m in members}
        for m in members:
            if not (is_elementwise(m) or (is_fusible_reduction(m) and m.op in REDUCTIONS)):
                raise unsupported(m)
            if m.op in ELEMENTWISE_OPS_MISSING:
                raise unsupported(m)
        reductions = [m for m in members if m.op in REDUCTIONS]
        elementwise = [m for m in members if m.op not in REDUCTIONS]
        # members read outside the group, or returned
        stored = [
            m
            for m in elementwise
            if m.id in self.out_ids or any(u.id not in ids for u in self.users.get(m.id, []))
        ]
        domain = elementwise[0].shape if elementwise else None
        # reductions over the whole domain join the elementwise kernel's loop (one pass
        # over memory: forward value and backward members together); others get their own
        fused = [
            r for r in reductions if stored and _reduces_all(r) and r.inputs[0].shape == domain
        ]
        if stored:
            body = _Body(domain, "i")
            roots = stored + [r.inputs[0] for r in fused if r.inputs[0].id in ids]
            values = self._emit_members(body, self._closure(roots, ids), ids)
            outs = []
            for m in stored:
                lay = self.new_buffer(m, m.shape, m.dtype)
                self.layouts[m.id] = lay
                outs.append((lay, values[m.id]))
            accs = []
            for r in fused:
                src = r.inputs[0]
                value = values[src.id] if src.id in values else body.load(self.layout_of(src))
                accs.append((r, value))
            self._elementwise_unit(f"group_{members[0].id}", domain, body, outs, members, accs)
        for r in reductions:
            if r not in fused:
                self.reduction(r, ids)

    def _closure(self, roots: list[Node], ids: set) -> list[Node]:
        """The group members `roots` need, in graph order."""
        need: set[int] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n.id in need:
                continue
            need.add(n.id)
            stack.extend(i for i in n.inputs if i.id in ids and i.op not in REDUCTIONS)
        return [n for n in self.graph.nodes if n.id in need]

    def _emit_members(self, body: _Body, members: list[Node], ids: set) -> dict[int, str]:
        """v<id> = ... for each member; returns node id -> variable name."""
        values: dict[int, str] = {}
        for m in members:
            operands = [
                values[i.id] if i.id in values else body.load(self.layout_of(i)) for i in m.inputs
            ]
            template = cuda_template(m)
            if template is None:
                raise unsupported(m, "its code template calls a function with no CUDA version")
            expr = cuda_expr(template, operands)
            body.lines.append(f"# {m.name} = {m.op} {', '.join(i.name for i in m.inputs)}")
            var = f"v{len(values)}"  # numbered per kernel: equal layers, equal sources
            body.lines.append(f"{var} = {cast(expr, m.dtype)}")
            values[m.id] = var
        return values

    def _elementwise_unit(self, name, domain, body: _Body, outs, nodes, accs=()) -> None:
        """A grid-stride loop storing `outs` ((layout, expr) pairs); each of `accs`
        ((reduction node, expr) pairs, full reductions) is accumulated per thread, then
        per block (a tree), then over the blocks' partials by a second launch."""
        n = int(np.prod(domain, dtype=np.int64))
        T = self.threads
        blocks = max(1, min(self.max_blocks, -(-n // T)))
        out_params = [body.param(lay.buf) for lay, _ in outs]
        specs = [_ReduceSpec(r, n) for r, _ in accs]
        part_params = []
        after = []
        for spec in specs:
            out = self.new_buffer(spec.node, spec.node.shape, spec.node.dtype)
            self.layouts[spec.node.id] = out
            part = out.buf if blocks == 1 else f"part{spec.node.id}"
            if blocks > 1:
                self.buffers[part] = Buffer(part, blocks, spec.acc_t, "temp")
                after.append(
                    spec.final_pass(f"{name}_final_{spec.node.id}", part, out.buf, blocks, T)
                )
            part_params.append(body.param(part))
        ind = "        "
        lines = [f"def {name}({', '.join(f'p{k}' for k in range(len(body.params)))}):"]
        lines.append("    i = cuda.grid(1)")
        lines.append("    step = cuda.gridsize(1)")
        for k, spec in enumerate(specs):
            lines.append(f"    acc{k} = {spec.init}")
        lines.append(f"    while i < {n}:")
        if body.uses_digits:
            lines += _digits("i", list(range(len(domain))), domain, ind)
        lines += [ind + ln for ln in body.lines]
        for (_lay, expr), p in zip(outs, out_params, strict=True):
            lines.append(f"{ind}{p}[i] = {expr}")
        for k, (spec, (_r, expr)) in enumerate(zip(specs, accs, strict=True)):
            lines.append(
                f"{ind}acc{k} = {spec.combine.format(a=f'acc{k}', b=cast(expr, spec.acc_t))}"
            )
        lines.append(f"{ind}i += step")
        if specs:
            lines.append("    t = cuda.threadIdx.x")
        for k, (spec, p) in enumerate(zip(specs, part_params, strict=True)):
            sm = f"sm{k}"  # (one shared array per reduction: their types may differ)
            lines.append(f"    {sm} = cuda.shared.array({T}, np.{spec.acc_t.name})")
            lines.append(f"    acc = acc{k}")
            lines += [ln.replace("sm[", f"{sm}[") for ln in _tree(T, spec.combine)]
            lines.append("    if t == 0:")
            value = spec.final if blocks == 1 else "sm[0]"
            lines.append(f"        {p}[cuda.blockIdx.x] = {value.replace('sm[', f'{sm}[')}")
            lines.append("    cuda.syncthreads()")
        self.units.append(
            Unit(
                "elementwise",
                name,
                "\n".join(lines) + "\n",
                list(body.params),
                (blocks, T),
                after=after,
                nodes=[m.name for m in nodes],
            )
        )

    def reduction(self, r: Node, ids: set) -> None:
        src = r.inputs[0]
        domain = src.shape
        nd = len(domain)
        axes = r.attrs.get("axis")
        if axes is None:
            axes = tuple(range(nd))
        elif isinstance(axes, (int, np.integer)):
            axes = (int(axes) % nd,)
        else:
            axes = tuple(sorted(int(a) % nd for a in axes))
        kept = [d for d in range(nd) if d not in axes]
        M = int(np.prod([domain[d] for d in kept], dtype=np.int64))
        R = int(np.prod([domain[d] for d in axes], dtype=np.int64))
        suffix = list(axes) == list(range(nd - len(axes), nd))
        body = _Body(domain, f"(m * {R} + k)" if suffix else None)
        if src.id in ids and src.op not in REDUCTIONS:
            values = self._emit_members(body, self._closure([src], ids), ids)
            value = values[src.id]
        else:
            value = body.load(self.layout_of(src))
        spec = _ReduceSpec(r, R)
        acc_t, init, combine = spec.acc_t, spec.init, spec.combine
        T = self.threads
        # chunks per output: enough blocks to fill the GPU when outputs are few
        want = max(1, min(self.max_blocks, 1024) // max(M, 1))
        P = max(1, min(want, -(-R // (T * 4))))
        final = spec.final
        out = self.new_buffer(r, r.shape, r.dtype)
        self.layouts[r.id] = out
        name = f"reduce_{r.id}"
        params = body.params  # loads registered; the output goes last
        ind = "        "
        lines = [f"def {name}({', '.join([*(f'p{k}' for k in range(len(params))), 'out'])}):"]
        lines += [
            f"    sm = cuda.shared.array({T}, np.{acc_t.name})",
            "    t = cuda.threadIdx.x",
            "    b = cuda.blockIdx.x",
            f"    m = b // {P}",
            f"    k = (b % {P}) * {T} + t",
            f"    acc = {init}",
        ]
        if body.uses_digits:
            lines += _digits("m", kept, domain, "    ")
        lines.append(f"    while k < {R}:")
        if body.uses_digits:
            lines += _digits("k", list(axes), domain, ind)
        lines += [ind + ln for ln in body.lines]
        lines.append(f"{ind}acc = {combine.format(a='acc', b=cast(value, acc_t))}")
        lines.append(f"{ind}k += {P * T}")
        lines += _tree(T, combine)
        lines.append("    if t == 0:")
        lines.append(f"        out[b] = {final if P == 1 else 'sm[0]'}")
        unit = Unit(
            "reduce",
            name,
            "\n".join(lines) + "\n",
            [*params, out.buf],
            (M * P, T),
            nodes=[r.name],
        )
        if P > 1:
            part = f"part{r.id}"
            self.buffers[part] = Buffer(part, M * P, acc_t, "temp")
            unit.args[-1] = part
            unit.after.append(spec.final_pass(f"{name}_final", part, out.buf, P, T, M))
        self.units.append(unit)

    # ---- running sums and linear recurrences along an axis
    def running(self, node: Node) -> None:
        """cumsum (h = h + x_t) and linrec (h = a_t * h + b_t): one thread per line
        along the axis, in order (deterministic)."""
        nd = len(node.shape)
        ax = int(node.attrs["axis"]) % max(nd, 1)
        reverse = bool(node.attrs.get("reverse", False))
        body = _Body(node.shape, None)
        t = np.dtype(node.dtype)
        loads = [cast(body.load(self.layout_of(i)), t) for i in node.inputs]
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        o = body.param(out.buf)
        kept = [d for d in range(nd) if d != ax]
        lines_n = int(np.prod([node.shape[d] for d in kept], dtype=np.int64))
        n = node.shape[ax]
        cs = c_strides(node.shape)
        out_index = " + ".join(f"d{d} * {cs[d]}" for d in range(nd) if node.shape[d] != 1) or "0"
        step = "h = h + x0" if node.op == "cumsum" else "h = x0 * h + x1"
        ind, ind2 = "        ", "            "
        lines = [
            f"def run_{node.id}({', '.join(f'p{k}' for k in range(len(body.params)))}):",
            "    r = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            f"    while r < {lines_n}:",
            *_digits("r", kept, node.shape, ind),
            f"{ind}h = {literal(0, t)}",
            f"{ind}for q in range({n}):",
            f"{ind2}d{ax} = {n - 1} - q" if reverse else f"{ind2}d{ax} = q",
            *[f"{ind2}x{k} = {e}" for k, e in enumerate(loads)],
            f"{ind2}{step}",
            f"{ind2}h = {cast('h', t)}",
            f"{ind2}{o}[{out_index}] = h",
            f"{ind}r += step",
        ]
        T = self.threads
        self.units.append(
            Unit(
                "row",
                f"run_{node.id}",
                "\n".join(lines) + "\n",
                list(body.params),
                (max(1, min(self.max_blocks, -(-lines_n // T))), T),
                nodes=[node.name],
            )
        )

    def concatenate(self, node: Node) -> None:
        """Each input stored into its slice of the output (a kernel per input)."""
        ax = int(node.attrs["axis"]) % len(node.shape)
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        start = 0
        for k, x in enumerate(node.inputs):
            part = Layout(x.shape, out.dtype, out.buf, start * out.strides[ax], out.strides)
            start += x.shape[ax]
            if x.size == 0:
                continue
            body = _Body(x.shape, "i")
            value = cast(body.load(self.layout_of(x)), node.dtype)
            target = body.load(part)
            ind = "        "
            name = f"concat_{node.id}_{k}"
            lines = [f"def {name}({', '.join(f'p{j}' for j in range(len(body.params)))}):"]
            lines += [
                "    i = cuda.grid(1)",
                "    step = cuda.gridsize(1)",
                f"    while i < {x.size}:",
            ]
            if body.uses_digits:
                lines += _digits("i", list(range(len(x.shape))), x.shape, ind)
            lines += [f"{ind}{target} = {value}", f"{ind}i += step"]
            T = self.threads
            self.units.append(
                Unit(
                    "elementwise",
                    name,
                    "\n".join(lines) + "\n",
                    list(body.params),
                    (max(1, min(self.max_blocks, -(-x.size // T))), T),
                    nodes=[node.name],
                )
            )

    # ---- scan: the body's own plan, run once per step (runtime.py)
    def scan_unit(self, node: Node) -> None:
        from tracegrad.passes.fuse import fuse_elementwise

        a = node.attrs
        body, length, n_carry = a["body"], int(a["length"]), int(a["n_carry"])
        n_xs = int(a["n_xs"])
        carries = [o.aval for o in body.outputs[:n_carry]]
        ys = [(length, *o.shape) for o in body.outputs[n_carry:]]
        dtypes = {np.dtype(o.dtype) for o in body.outputs} | {np.dtype(node.dtype)}
        if len(dtypes) != 1:
            raise unsupported(node, "a loop whose results have several dtypes (packed as float64)")
        operands = []
        for i in node.inputs:
            lay = self.layout_of(i)
            if lay.literal is not None or not lay.contiguous:
                lay = self.copy(i, lay)
            operands.append((lay.buf, lay.offset, tuple(i.shape)))
        # (sizes of the packed output's parts: final carries, then the stacked ys)
        parts = [int(np.prod(c.shape, dtype=np.int64)) for c in carries]
        parts += [int(np.prod(y, dtype=np.int64)) for y in ys]
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        spec = {
            "body": fuse_elementwise(body),
            "length": length,
            "reverse": bool(a["reverse"]),
            "n_carry": n_carry,
            "n_xs": n_xs,
            "operands": operands,
            "parts": parts,
            "out": out.buf,
        }
        self.units.append(
            Unit(
                "scan",
                f"scan_{node.id}",
                args=[b for b, _, _ in operands],
                scan=spec,
                nodes=[node.name],
            )
        )

    # ---- gathers along an axis (cross-entropy's ops); out-of-range indices give NaN
    def _loop_unit(self, name, domain, body: _Body, lines_in: list[str], nodes) -> None:
        """A grid-stride loop over `domain` (digits d0.. made) running `lines_in`."""
        n = int(np.prod(domain, dtype=np.int64))
        ind = "        "
        lines = [f"def {name}({', '.join(f'p{k}' for k in range(len(body.params)))}):"]
        lines += ["    i = cuda.grid(1)", "    step = cuda.gridsize(1)", f"    while i < {n}:"]
        lines += _digits("i", list(range(len(domain))), domain, ind)
        lines += [ind + ln for ln in lines_in] + [f"{ind}i += step"]
        T = self.threads
        blocks = max(1, min(self.max_blocks, -(-n // T)))
        self.units.append(
            Unit(
                "elementwise",
                name,
                "\n".join(lines) + "\n",
                list(body.params),
                (blocks, T),
                nodes=[m.name for m in nodes],
            )
        )

    def _along(self, node: Node, x: Node, idx: Node):
        ax = int(node.attrs["axis"]) % max(len(x.shape), 1)
        if len(x.shape) != len(idx.shape) or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, idx.shape, strict=True)) if d != ax
        ):
            raise unsupported(node, "index batch dims that differ from the array's")
        return ax

    def take_along_axis(self, node: Node) -> None:
        x, idx = node.inputs
        ax = self._along(node, x, idx)
        n = x.shape[ax]
        body = _Body(node.shape, None)
        k = body.load(self.layout_of(idx))
        lx = self.layout_of(x)
        moved = Layout(lx.shape, lx.dtype, lx.buf, lx.offset, lx.strides)
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        o = body.param(out.buf)
        # x's element with the axis digit replaced by the index: load at digit `a`
        xs = body.load(
            Layout(
                lx.shape,
                lx.dtype,
                lx.buf,
                lx.offset,
                tuple(0 if d == ax else st for d, st in enumerate(lx.strides)),
            )
        )
        st = moved.strides[ax]
        xs = xs[:-1] + f" + a * {st}]"
        lines = [
            f"a = {k}",
            f"a = a + {n} if a < 0 else a",
            f"{o}[i] = {xs} if 0 <= a < {n} else {literal(np.nan, node.dtype)}",
        ]
        self._loop_unit(f"take_{node.id}", node.shape, body, lines, [node])

    def put_along_axis_add(self, node: Node) -> None:
        """zeros(shape) plus g at idx along the axis; each output element sums its
        row's matching entries in index order (deterministic, no atomics)."""
        g, idx = node.inputs
        shape = tuple(node.attrs["shape"])
        ax = int(node.attrs["axis"]) % len(shape)
        if g.shape != idx.shape or any(
            a != b for d, (a, b) in enumerate(zip(shape, idx.shape, strict=True)) if d != ax
        ):
            raise unsupported(node, "index batch dims that differ from the output's")
        n, k = shape[ax], idx.shape[ax]
        body = _Body(shape, None)
        lg, li = self.layout_of(g), self.layout_of(idx)

        # read g and idx at (digits with the axis digit = j)
        def at_j(lay):
            if lay.literal is not None:
                return lay.literal
            e = body.load(
                Layout(
                    lay.shape,
                    lay.dtype,
                    lay.buf,
                    lay.offset,
                    tuple(0 if d == ax else s for d, s in enumerate(lay.strides)),
                )
            )
            return e[:-1] + f" + j * {lay.strides[ax]}]"

        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        o = body.param(out.buf)
        lines = [
            f"acc = {literal(0, node.dtype)}",
            f"for j in range({k}):",
            f"    a = {at_j(li)}",
            f"    a = a + {n} if a < 0 else a",
            f"    if a == d{ax}:",
            f"        acc = {cast(f'acc + {at_j(lg)}', node.dtype)}",
            f"{o}[i] = acc",
        ]
        self._loop_unit(f"put_{node.id}", shape, body, lines, [node])

    def nll_loss(self, node: Node) -> None:
        logp, target = node.inputs
        nrows, c = logp.shape
        red = node.attrs["reduction"]
        t = np.dtype(node.dtype)
        body = _Body((nrows,), None)
        lp, lt = self.layout_of(logp), self.layout_of(target)
        tgt = body.load(Layout((nrows,), lt.dtype, lt.buf, lt.offset, lt.strides[:1]))
        row = body.load(Layout((nrows,), lp.dtype, lp.buf, lp.offset, lp.strides[:1]))
        pick = row[:-1] + f" + a * {lp.strides[1]}]"
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        o = body.param(out.buf)
        get = [
            "d0 = i",
            f"a = {tgt}",
            f"v = -{pick} if 0 <= a < {c} else {literal(np.nan, t)}",
        ]
        if red == "none":
            self._loop_unit(
                f"nll_{node.id}", (nrows,), body, [*get[1:], f"{o}[i] = {cast('v', t)}"], [node]
            )
            return
        T = self.threads
        final = f"sm[0] / {nrows}" if red == "mean" else "sm[0]"
        lines = [
            f"def nll_{node.id}({', '.join(f'p{k}' for k in range(len(body.params)))}):",
            f"    sm = cuda.shared.array({T}, np.{t.name})",
            "    t = cuda.threadIdx.x",
            f"    acc = {literal(0, t)}",
            "    i = t",
            f"    while i < {nrows}:",
            *["        " + ln for ln in get],
            f"        acc = {cast('acc + v', t)}",
            f"        i += {T}",
            *_tree(T, "({a} + {b})"),
            "    if t == 0:",
            f"        {o}[0] = {cast(final, t)}",
        ]
        self.units.append(
            Unit(
                "reduce",
                f"nll_{node.id}",
                "\n".join(lines) + "\n",
                list(body.params),
                (1, T),
                nodes=[node.name],
            )
        )

    # ---- softmax, log_softmax, logsumexp
    def row_op(self, node: Node) -> None:
        """One thread per row (every index but the reduced axes), three passes along
        the row: max, sum of exp(x - max), then the outputs. Deterministic."""
        src = node.inputs[0]
        domain, nd = src.shape, len(src.shape)
        axis = node.attrs.get("axis")
        if axis is None:
            axes = list(range(nd))
        elif isinstance(axis, (int, np.integer)):
            axes = [int(axis) % nd]
        else:
            axes = sorted(int(a) % nd for a in axis)
        kept = [d for d in range(nd) if d not in axes]
        rows = int(np.prod([domain[d] for d in kept], dtype=np.int64))
        R = int(np.prod([domain[d] for d in axes], dtype=np.int64))
        t = np.dtype(node.dtype)
        body = _Body(domain, None)
        x = body.load(self.layout_of(src))
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        o = body.param(out.buf)
        name = f"{node.op}_{node.id}"
        ind, ind2 = "        ", "            "
        inner = _digits("j", axes, domain, ind2)
        cs = c_strides(domain)
        out_index = " + ".join(f"d{d} * {cs[d]}" for d in range(nd) if domain[d] != 1) or "0"
        lines = [
            f"def {name}({', '.join(f'p{k}' for k in range(len(body.params)))}):",
            "    r = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            f"    while r < {rows}:",
            *_digits("r", kept, domain, ind),
            f"{ind}m = {literal(-np.inf, t)}",
            f"{ind}for j in range({R}):",
            *inner,
            f"{ind2}m = tg_maximum(m, {cast(x, t)})",
            f"{ind}ms = m if abs(m) < np.inf else {literal(0, t)}",
            f"{ind}acc = {literal(0, t)}",
            f"{ind}for j in range({R}):",
            *inner,
            f"{ind2}acc = {cast(f'acc + tg_exp({x} - ms)', t)}",
        ]
        if node.op == "logsumexp":
            lines.append(f"{ind}{o}[r] = {cast('ms + tg_log(acc)', t)}")
        else:
            value = "tg_exp(x - ms) / acc" if node.op == "softmax" else "x - ms - tg_log(acc)"
            lines += [
                f"{ind}for j in range({R}):",
                *inner,
                f"{ind2}x = {x}",
                f"{ind2}{o}[{out_index}] = {cast(value, t)}",
            ]
        lines.append(f"{ind}r += step")
        T = self.threads
        blocks = max(1, min(self.max_blocks, -(-rows // T)))
        self.units.append(
            Unit(
                "row",
                name,
                "\n".join(lines) + "\n",
                list(body.params),
                (blocks, T),
                nodes=[node.name],
            )
        )

    # ---- GEMM
    def gemm(self, node: Node) -> None:
        if node.op == "addmm":
            bias, a, b = node.inputs
        else:
            bias = None
            a, b = node.inputs
        la, lb = self.layout_of(a), self.layout_of(b)
        for lay, n in ((la, a), (lb, b)):
            if lay.literal is not None:
                raise unsupported(node, f"operand {n.name} is a scalar constant")
        # NumPy's rules: 1-D operands gain a dimension, dropped again from the result
        if len(la.shape) == 1:
            la = Layout((1, *la.shape), la.dtype, la.buf, la.offset, (0, *la.strides))
        if len(lb.shape) == 1:
            lb = Layout((*lb.shape, 1), lb.dtype, lb.buf, lb.offset, (*lb.strides, 0))
        m, k = la.shape[-2:]
        n = lb.shape[-1]
        batch = np.broadcast_shapes(la.shape[:-2], lb.shape[:-2])
        nb = int(np.prod(batch, dtype=np.int64))
        offs_a, offs_b = _batch_offsets(la, batch), _batch_offsets(lb, batch)
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        spec = {
            "a": la,
            "b": lb,
            "out": out.buf,
            "m": m,
            "n": n,
            "k": k,
            "batch": nb,
            "offs_a": offs_a,
            "offs_b": offs_b,
            "dtype": np.dtype(node.dtype),
        }
        self.units.append(
            Unit(
                "gemm",
                f"gemm_{node.id}",
                args=[la.buf, lb.buf, out.buf],
                gemm=spec,
                nodes=[node.name],
            )
        )
        if bias is not None:  # out += bias (broadcast), one elementwise kernel
            body = _Body(node.shape, "i")
            expr = f"({body.load(out)} + {body.load(self.layout_of(bias))})"
            self._elementwise_unit(
                f"addmm_bias_{node.id}", node.shape, body, [(out, cast(expr, node.dtype))], [node]
            )

    # ---- outputs
    def output(self, k: int, node: Node) -> Layout:
        lay = self.layout_of(node) if node.id in self.layouts else None
        if lay is None:
            raise unsupported(node, "its value was not planned")  # pragma: no cover
        needs_copy = (
            lay.buf is None
            or lay.buf.startswith("in")
            or lay.buf.startswith("k")
            or not lay.contiguous
            or lay.offset != 0
            or self.buffers[lay.buf].size != max(node.size, 1)  # a part of a bigger buffer
        )
        if needs_copy:
            out = self.new_buffer(f"o{k}_{node.id}", node.shape, node.dtype)
            body = _Body(node.shape, "i")
            expr = body.load(lay)
            self._elementwise_unit(
                f"out_{k}", node.shape, body, [(out, cast(expr, node.dtype))], [node]
            )
            lay = out
        return lay


def _reduces_all(r: Node) -> bool:
    axis = r.attrs.get("axis")
    nd = len(r.inputs[0].shape)
    if axis is None:
        return True
    axes = {int(axis) % nd} if isinstance(axis, (int, np.integer)) else {int(a) % nd for a in axis}
    return axes == set(range(nd))


class _ReduceSpec:
    """A reduction's accumulator type, identity, combining expression and final value."""

    def __init__(self, r: Node, count: int):
        self.node = r
        self.acc_t = acc_t = np.dtype(r.dtype)
        op = {"amax": "max", "amin": "min"}.get(r.op, r.op)
        if op in ("max", "min"):
            if acc_t.kind == "f":
                start = -np.inf if op == "max" else np.inf
            elif acc_t.kind in "iu":
                info = np.iinfo(acc_t)
                start = info.min if op == "max" else info.max
            else:
                start = 0 if op == "max" else 1
        else:
            start = 1 if op == "prod" else 0
        self.init = literal(start, acc_t)
        self.combine = {
            "sum": "({a} + {b})",
            "mean": "({a} + {b})",
            "prod": "({a} * {b})",
            "max": "({a} if (({a} >= {b}) or ({a} != {a})) else {b})",
            "min": "({a} if (({a} <= {b}) or ({a} != {a})) else {b})",
        }[op]
        self.final = f"np.{acc_t.name}(sm[0] / {count})" if op == "mean" else "sm[0]"

    def final_pass(self, name: str, part: str, out: str, P: int, T: int, M: int = 1) -> tuple:
        """The second launch: block m reduces partials m*P .. m*P+P-1 into out[m]."""
        lines = [
            f"def {name}(part, out):",
            f"    sm = cuda.shared.array({T}, np.{self.acc_t.name})",
            "    t = cuda.threadIdx.x",
            "    m = cuda.blockIdx.x",
            f"    acc = {self.init}",
            "    j = t",
            f"    while j < {P}:",
            f"        acc = {self.combine.format(a='acc', b=f'part[m * {P} + j]')}",
            f"        j += {T}",
            *_tree(T, self.combine),
            "    if t == 0:",
            f"        out[m] = {self.final}",
        ]
        return (name, "\n".join(lines) + "\n", [part, out], (M, T))


def _tree(T: int, combine: str) -> list[str]:
    """A shared-memory tree over T (a power of two) partial results, fixed order."""
    return [
        "    sm[t] = acc",
        "    cuda.syncthreads()",
        f"    s = {T // 2}",
        "    while s > 0:",
        "        if t < s:",
        f"            sm[t] = {combine.format(a='sm[t]', b='sm[t + s]')}",
        "        cuda.syncthreads()",
        "        s //= 2",
    ]


def _batch_offsets(lay: Layout, batch: tuple) -> np.ndarray:
    """The element offset of each (broadcast) batch matrix of a GEMM operand."""
    nb = len(batch)
    own = lay.shape[:-2]
    lead = nb - len(own)
    strides = [0] * lead + [0 if d == 1 else s for d, s in zip(own, lay.strides[:-2], strict=True)]
    offs = np.full(int(np.prod(batch, dtype=np.int64)), lay.offset, dtype=np.int64)
    if nb:
        idx = np.indices(batch).reshape(nb, -1)
        offs = offs + (np.asarray(strides, dtype=np.int64)[:, None] * idx).sum(axis=0)
    return offs


def plan_graph(graph: Graph, simulated: bool = False) -> Plan:
    """The CUDA units of an optimized (fused) graph; raises `NotImplementedError`
    for an op the backend lacks."""
    return _Planner(graph, simulated).plan()
