"""Graph -> CUDA units, and each kernel's source. Pure Python: no CUDA here.

The fused groups come from `passes/fuse.py` and their order from `codegen/plan.py`'s
`schedule`, the planning both backends share. Each group becomes, on the GPU:

  - one elementwise kernel (a grid-stride loop over the group's domain) that
    computes its members in registers and stores the members read outside the
    group (forward and backward members of one group share the loop, as on the
    CPU); reductions of the group over its whole domain accumulate in the same
    loop (per thread, then a block tree, then a pass over the blocks' partials);
  - when every reduction of the group reduces the same trailing axes (softmax,
    cross-entropy and attention rows) and rows are many: one kernel, a block per
    row, storing the members and reducing in the same pass;
  - otherwise one kernel per other reduction member, which recomputes the chain
    feeding it inline (so that chain is never stored): each block reduces a fixed
    chunk in a fixed order, then a shared-memory tree; a second pass reduces the
    chunks' partials when one output has several chunks. Chunks depend only on
    shapes, so results are deterministic run to run.

Views (reshape, transpose, broadcast_to, basic getitem) are strides, never copies;
a view of a non-contiguous value that must be reshaped is copied first.
matmul/addmm are GEMM units (runtime.py: cuBLAS through CuPy, or a tiled kernel).
plan_ops.py plans the other ops (scan, row and gather kernels, cumsum/linrec,
concatenate); kernel_text.py holds the pieces kernels are written with. Anything
else raises `NotImplementedError` naming the op.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.lowering import _optimize_graph
    >>> g = _optimize_graph(tg.trace(lambda x: tg.sum(tg.tanh(x) * 2.0), np.ones(8, "f4")), True, {})
    >>> [u.kind for u in plan_graph(g, simulated=True).units]
    ['reduce']
"""

from __future__ import annotations

import numpy as np

from tracegrad.codegen.cuda.kernel_text import (
    Buffer,
    CudaUnsupported,
    Layout,
    Plan,
    Unit,
    _axes_of,
    _batch_offsets,
    _Body,
    _digits,
    _reduces_all,
    _ReduceSpec,
    _tree,
    c_strides,
    cast,
    cuda_expr,
    cuda_template,
    literal,
    unsupported,
)
from tracegrad.codegen.cuda.plan_ops import OtherOps
from tracegrad.codegen.plan import schedule, unit_nodes
from tracegrad.ir.graph import Graph, Node
from tracegrad.passes.fuse import groups_of, is_elementwise, is_fusible_reduction

__all__ = ["CudaUnsupported", "Plan", "Unit", "cuda_template", "place_temporaries", "plan_graph"]

REDUCTIONS = {"sum", "mean", "max", "min", "prod", "amax", "amin"}
GEMMS = {"matmul", "addmm"}
ROW_OPS = {"softmax", "log_softmax", "logsumexp"}


# ------------------------------------------------------------------ the planner


class _Planner(OtherOps):
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
        self._returned: set = set()  # buffers of the outputs planned so far

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
        """Nodes and groups (lists of members) in the shared schedule (codegen/plan.py,
        the CPU backend's order): a group runs once all its external operands exist."""
        groups = groups_of(self.graph)
        return [unit_nodes(groups, u) if u[0] == "group" else u[1] for u in schedule(self.graph)]

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
        if op in ("while", "cond"):
            self.control_unit(node)
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
        rows = self._row_fusable(stored, reductions, domain)
        if rows is not None:  # reductions over trailing axes: one block per row
            self._rowwise_group(members, ids, stored, reductions, domain, rows)
            return
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

    def _row_fusable(self, stored, reductions, domain) -> int | None:
        """R (the row length) when every reduction of the group reduces the same
        trailing axes of the group's domain, there are members to store, and rows
        are many enough to fill the GPU with one block each; else None."""
        if not stored or not reductions or domain is None:
            return None
        nd = len(domain)
        axes_set = {_axes_of(r) for r in reductions}
        if len(axes_set) != 1 or any(r.inputs[0].shape != domain for r in reductions):
            return None
        axes = axes_set.pop()
        if not axes or list(axes) != list(range(nd - len(axes), nd)) or len(axes) == nd:
            return None
        R = int(np.prod([domain[d] for d in axes], dtype=np.int64))
        M = int(np.prod(domain, dtype=np.int64)) // max(R, 1)
        return R if M >= (2 if self.simulated else 64) and R > 0 else None

    def _rowwise_group(self, members, ids, stored, reductions, domain, R: int) -> None:
        """One kernel: block m walks row m (threads stride along it), stores the
        members read outside the group and accumulates every reduction; a block
        tree per reduction writes out[m]. Rows are fixed by shape: deterministic."""
        n = int(np.prod(domain, dtype=np.int64))
        M = n // R
        body = _Body(domain, "i")
        roots = stored + [r.inputs[0] for r in reductions if r.inputs[0].id in ids]
        values = self._emit_members(body, self._closure(roots, ids), ids)
        outs = []
        for m in stored:
            lay = self.new_buffer(m, m.shape, m.dtype)
            self.layouts[m.id] = lay
            outs.append((body.param(lay.buf), values[m.id]))
        specs = []
        for r in reductions:
            src = r.inputs[0]
            value = values[src.id] if src.id in values else body.load(self.layout_of(src))
            out = self.new_buffer(r, r.shape, r.dtype)
            self.layouts[r.id] = out
            specs.append((_ReduceSpec(r, R), value, body.param(out.buf)))
        T = min(self.threads, 1 << max(3, (R - 1).bit_length()))  # a power of two
        name = f"rows_{members[0].id}"
        i1, i2 = "        ", "            "
        lines = [f"def {name}({', '.join(f'p{k}' for k in range(len(body.params)))}):"]
        lines += [
            "    t = cuda.threadIdx.x",
            "    m = cuda.blockIdx.x",
            *[
                f"    sm{k} = cuda.shared.array({T}, np.{sp.acc_t.name})"
                for k, (sp, _, _) in enumerate(specs)
            ],
            f"    while m < {M}:",
            *[f"{i1}acc{k} = {sp.init}" for k, (sp, _, _) in enumerate(specs)],
            f"{i1}k = t",
            f"{i1}while k < {R}:",
            f"{i2}i = m * {R} + k",
        ]
        if body.uses_digits:
            lines += _digits("i", list(range(len(domain))), domain, i2)
        lines += [i2 + ln for ln in body.lines]
        lines += [f"{i2}{p}[i] = {expr}" for p, expr in outs]
        for k, (sp, value, _) in enumerate(specs):
            lines.append(f"{i2}acc{k} = {sp.combine.format(a=f'acc{k}', b=cast(value, sp.acc_t))}")
        lines.append(f"{i2}k += {T}")
        for k, (sp, _, p) in enumerate(specs):
            lines.append(f"{i1}acc = acc{k}")
            lines += ["    " + ln.replace("sm[", f"sm{k}[") for ln in _tree(T, sp.combine)]
            lines.append(f"{i1}if t == 0:")
            lines.append(f"{i2}{p}[m] = {sp.final.replace('sm[', f'sm{k}[')}")
            lines.append(f"{i1}cuda.syncthreads()")
        lines.append(f"{i1}m += cuda.gridDim.x")
        self.units.append(
            Unit(
                "rows",
                name,
                "\n".join(lines) + "\n",
                list(body.params),
                (max(1, min(self.max_blocks, M)), T),
                nodes=[m.name for m in members],
            )
        )

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
            or lay.buf in self._returned  # returned twice: a buffer each (as the CPU path)
        )
        if needs_copy:
            out = self.new_buffer(f"o{k}_{node.id}", node.shape, node.dtype)
            body = _Body(node.shape, "i")
            expr = body.load(lay)
            self._elementwise_unit(
                f"out_{k}", node.shape, body, [(out, cast(expr, node.dtype))], [node]
            )
            lay = out
        self._returned.add(lay.buf)
        return lay


def unit_buffers(unit: Unit) -> set:
    """Every buffer a unit's launches read or write."""
    names = set(unit.args)
    for _name, _source, args, _launch in unit.after:
        names |= set(args)
    if unit.scan:
        names.add(unit.scan["out"])
        names |= {b for b, _off, _shape in unit.scan["operands"]}
    return names


def place_temporaries(plan: Plan) -> tuple[dict, dict]:
    """Where the plan's temporaries live: one workspace per dtype, placed by the
    CPU path's allocator (codegen/memory.py: best fit, a region reused once the
    last unit using its buffer has run; views share their base's buffer, so a
    buffer's uses are its views' too). Returns ({dtype name: elements},
    {buffer: (dtype name, offset)}). Outputs (new every call), inputs, constants
    and the range flag are not temporaries. Placements are checked for overlap.

    >>> import numpy as np
    >>> f32 = np.dtype("float32")
    >>> plan = Plan([Unit("elementwise", "a", args=["in0", "t1"]),
    ...              Unit("elementwise", "b", args=["t1", "t2"]),
    ...              Unit("elementwise", "c", args=["t2", "t3"]),
    ...              Unit("elementwise", "d", args=["t3", "t4"])],
    ...             {"in0": Buffer("in0", 100, f32, "input", index=0),
    ...              **{f"t{k}": Buffer(f"t{k}", 100, f32, "temp") for k in range(1, 5)}},
    ...             [Layout((100,), f32, "t4", 0, (1,))])
    >>> place_temporaries(plan)   # t3 takes t1's place once t1 is dead
    ({'float32': 224}, {'t1': ('float32', 0), 't2': ('float32', 112), 't3': ('float32', 0)})
    """
    from tracegrad.codegen.memory import Workspace, check_disjoint

    returned = {lay.buf for lay in plan.outputs}
    temps = {
        name: b for name, b in plan.buffers.items() if b.kind == "temp" and name not in returned
    }
    first: dict = {}
    last: dict = {}
    for p, unit in enumerate(plan.units):
        for name in unit_buffers(unit):
            if name in temps:
                first.setdefault(name, p)
                last[name] = p
    spaces: dict = {}
    where: dict = {}
    events: list = []
    by_start: dict = {}
    by_end: dict = {}
    for name in first:
        by_start.setdefault(first[name], []).append(name)
        by_end.setdefault(last[name], []).append(name)
    for p in range(len(plan.units)):
        for name in by_start.get(p, ()):  # (all of a unit's buffers live at once)
            b = temps[name]
            dt = np.dtype(b.dtype).name
            ws = spaces.setdefault(dt, Workspace(dt, b.dtype))
            where[name] = (dt, ws.take(b.size))
            events.append(("take", dt, where[name][1], b.size))
        for name in by_end.get(p, ()):
            dt, offset = where[name]
            spaces[dt].give_back(offset, temps[name].size)
            events.append(("give_back", dt, offset, temps[name].size))
    check_disjoint(events)
    return {dt: ws.size for dt, ws in spaces.items()}, where


def plan_graph(graph: Graph, simulated: bool = False) -> Plan:
    """The CUDA units of an optimized (fused) graph; raises `NotImplementedError`
    for an op the backend lacks."""
    return _Planner(graph, simulated).plan()
