"""The CUDA planner's ops beyond fused groups, GEMMs and views: basic-index
scatters, running sums and recurrences (cumsum, linrec), concatenate, scan, gathers
along an axis (take_along_axis, put_along_axis_add, nll_loss) and row kernels
(softmax, log_softmax, logsumexp). A mixin of plan._Planner. Pure Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tracegrad.codegen.cuda.kernel_text import (
    RANGE_FLAG,
    Buffer,
    Layout,
    Unit,
    _Body,
    _digits,
    _tree,
    c_strides,
    cast,
    literal,
    unsupported,
)
from tracegrad.ir.graph import Node


class OtherOps:
    """Planner methods for the ops above (self is the plan._Planner)."""

    # (what plan._Planner provides)
    layouts: dict
    buffers: dict
    units: list
    threads: int
    max_blocks: int

    if TYPE_CHECKING:

        def new_buffer(self, node_or_name: Any, shape: tuple, dtype: Any) -> Layout: ...

        def layout_of(self, node: Node) -> Layout: ...

        def copy(self, node: Node, src: Layout) -> Layout: ...

        def _index_view(
            self, node: Node, src: Layout, shape_out: tuple | None = None
        ) -> Layout: ...

        def _elementwise_unit(
            self, name: str, domain: tuple, body: _Body, outs: Any, nodes: Any, accs: Any = ()
        ) -> None: ...

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
        from tracegrad.codegen.plan import optimized_body

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
            "body": optimized_body(body),  # as on the CPU (codegen/loops.py)
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

    def control_unit(self, node: Node) -> None:
        """while_loop and cond: their graphs' own plans; the host reads the predicate
        (one synchronisation per trip or branch: the trip count is data)."""
        from tracegrad.passes.fuse import fuse_elementwise

        a = node.attrs
        if node.op == "while":
            graphs = {"cond": fuse_elementwise(a["cond"]), "body": fuse_elementwise(a["body"])}
            results = a["body"].outputs
        else:
            graphs = {
                "true": fuse_elementwise(a["true_branch"]),
                "false": fuse_elementwise(a["false_branch"]),
            }
            results = a["true_branch"].outputs
        if len({np.dtype(o.dtype) for o in results} | {np.dtype(node.dtype)}) != 1:
            raise unsupported(node, "results of several dtypes (packed as float64)")
        operands = []
        for i in node.inputs:
            lay = self.layout_of(i)
            if lay.literal is not None or not lay.contiguous:
                lay = self.copy(i, lay)
            operands.append((lay.buf, lay.offset, tuple(i.shape)))
        out = self.new_buffer(node, node.shape, node.dtype)
        self.layouts[node.id] = out
        spec = {
            **graphs,
            "n_carry": int(a.get("n_carry", 0)),
            "operands": operands,
            "parts": [int(np.prod(o.shape, dtype=np.int64)) for o in results],
            "out": out.buf,
        }
        self.units.append(
            Unit(
                node.op,
                f"{node.op}_{node.id}",
                args=[b for b, _, _ in operands],
                scan=spec,
                nodes=[node.name],
            )
        )

    # ---- gathers along an axis (cross-entropy's ops). An index outside [-n, n) sets
    # the kernel's range flag (runtime.py reads it at the end of the call and raises
    # the CPU path's OutOfRangeError); the element itself gets NaN.
    def _range_flag(self, body: _Body) -> str:
        """The flag buffer's parameter in `body` (one int32 per kernel, planned once)."""
        if RANGE_FLAG not in self.buffers:
            self.buffers[RANGE_FLAG] = Buffer(RANGE_FLAG, 1, np.dtype(np.int32), "flag")
        return body.param(RANGE_FLAG)

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
        flag = self._range_flag(body)
        lines = [
            f"a = {k}",
            f"a = a + {n} if a < 0 else a",
            f"if 0 <= a < {n}:",
            f"    {o}[i] = {xs}",
            "else:",
            f"    {o}[i] = {literal(np.nan, node.dtype)}",
            f"    {flag}[0] = 1",
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
        flag = self._range_flag(body)
        lines = [
            f"acc = {literal(0, node.dtype)}",
            f"for j in range({k}):",
            f"    a = {at_j(li)}",
            f"    a = a + {n} if a < 0 else a",
            f"    if a < 0 or a >= {n}:",
            f"        {flag}[0] = 1",
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
        flag = self._range_flag(body)
        get = [
            "d0 = i",
            f"a = {tgt}",
            f"a = a + {c} if a < 0 else a",  # as NumPy's (and the CPU path's) indexing
            f"v = -{pick} if 0 <= a < {c} else {literal(np.nan, t)}",
            f"if a < 0 or a >= {c}:",
            f"    {flag}[0] = 1",
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
