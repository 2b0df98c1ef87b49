"""One fusion group -> one loop nest over scalars.

The loop runs over the group's domain (its elementwise members' shape), with
dims that every access walks contiguously merged into one (so a fully
contiguous group is a single flat loop that LLVM vectorizes). Members used
elsewhere are stored to their buffers; the rest stay scalar temporaries.
Reductions accumulate in a scalar where the innermost loops are all reduced
(a float64 accumulator for float32 sums), or straight into their output.
"""

from __future__ import annotations

import numpy as np

from tracegrad.codegen.access import Access, c_strides, size_of
from tracegrad.codegen.emit import (
    PARALLEL_MIN_ELEMENTS,
    Emitter,
    NoCodegen,
    dshort,
    literal,
    np_dtype_name,
    template_of,
)
from tracegrad.ir.graph import Node
from tracegrad.passes.fuse import is_fusible_reduction
from tracegrad.runtime import mathlib

REDUCE_IDENTITY = {"sum": 0, "mean": 0, "prod": 1}


def reduce_axes(node: Node) -> tuple:
    nd = node.inputs[0].ndim
    axis = node.attrs.get("axis")
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(a) % nd for a in axes))


def reduction_strides(node: Node, domain: tuple) -> tuple:
    """Strides of the reduction's output buffer over the input domain (0 = reduced)."""
    axes = reduce_axes(node)
    kept = [d for i, d in enumerate(domain) if i not in axes]
    kept_strides = iter(c_strides(tuple(kept)))
    return tuple(0 if i in axes else next(kept_strides) for i in range(len(domain)))


def group_domain(members: list[Node]) -> tuple:
    for m in members:
        if not is_fusible_reduction(m):
            return tuple(m.shape)
    return tuple(members[0].inputs[0].shape)


def identity_literal(op: str, dtype) -> str:
    dtype = np.dtype(dtype)
    if op in REDUCE_IDENTITY:
        return literal(REDUCE_IDENTITY[op], dtype)
    big = (
        np.inf
        if np.issubdtype(dtype, np.floating)
        else (np.iinfo(dtype).max if dtype != np.bool_ else True)
    )
    if dtype == np.bool_:
        return "False" if op in ("max", "amax") else "True"
    return literal(-big if op in ("max", "amax") else big, dtype)


def combine(op: str, acc: str, v: str) -> str:
    """Statement folding value `v` into accumulator expression `acc`."""
    if op in ("sum", "mean"):
        return f"{acc} += {v}"
    if op == "prod":
        return f"{acc} *= {v}"
    cmp = ">" if op in ("max", "amax") else "<"
    # NaN wins, as in NumPy: once acc is NaN neither test is true again
    return f"{acc} = {v} if (({v} {cmp} {acc}) | ({v} != {v})) else {acc}"


class _Reduction:
    def __init__(self, node: Node, domain: tuple, out: Access, loop_strides: tuple, nlevels: int):
        self.node = node
        self.op = node.op
        self.out = out
        self.strides = loop_strides
        # innermost run of reduced levels: accumulate those in a scalar
        level = nlevels
        while level > 0 and loop_strides[level - 1] == 0:
            level -= 1
        self.acc_level = level
        self.outer_reduced = any(s == 0 for s in loop_strides[:level])
        self.direct = level == nlevels  # no scalar accumulator
        self.preinit = self.direct or self.outer_reduced
        self.count = size_of(domain) // max(node.size, 1)
        out_dt = np.dtype(node.dtype)
        wide = self.op in ("sum", "mean", "prod") and out_dt == np.float32 and not self.direct
        self.acc_dtype = np.dtype(np.float64) if wide else out_dt
        self.acc = f"acc{node.id}"

    def index(self, loop_vars) -> str:
        return self.out.index_expr(self.strides, loop_vars)


def emit_group(em: Emitter, gid: int) -> None:
    members = em.groups[gid]
    ids = {m.id for m in members}
    domain = group_domain(members)
    em.emit(f"# fused group g{gid} over {domain}: " + " ".join(m.name for m in members))

    def materialized(m: Node) -> bool:
        return (
            m.id in em.output_ids
            or is_fusible_reduction(m)
            or any(u.group != gid for u in em.users[m.id])
        )

    # what the loop reads from outside, as strides over the domain
    reads: dict[int, Access] = {}
    for m in members:
        for e in m.inputs:
            if e.id not in ids and e.id not in reads:
                reads[e.id] = em.acc(e).broadcast(domain)
    writes: dict[int, Access] = {}
    reductions: list[tuple[Node, str]] = []
    for m in members:
        if is_fusible_reduction(m):
            reductions.append((m, em.alloc(m)))
        elif materialized(m):
            a = em.alloc(m)
            writes[m.id] = Access(a.buf, domain, c_strides(domain), a.offset)

    read_ids, write_ids = list(reads), list(writes)
    stride_sets = (
        [reads[i].strides for i in read_ids]
        + [writes[i].strides for i in write_ids]
        + [reduction_strides(r, domain) for r, _ in reductions]
    )
    from tracegrad.codegen.plan import coalesce

    loop_dims, loop_strides = coalesce(list(domain), stride_sets)
    nlev = len(loop_dims)
    read_strides = dict(zip(read_ids, loop_strides[: len(read_ids)], strict=True))
    write_strides = dict(
        zip(write_ids, loop_strides[len(read_ids) : len(read_ids) + len(write_ids)], strict=True)
    )
    red_strides = loop_strides[len(read_ids) + len(write_ids) :]
    reds = [
        _Reduction(r, domain, buf, s, nlev)
        for (r, buf), s in zip(reductions, red_strides, strict=True)
    ]

    parallel = (
        size_of(domain) >= PARALLEL_MIN_ELEMENTS
        and nlev > 0
        and loop_dims[0] >= 2
        and all(r.strides[0] != 0 or (r.acc_level == 0 and r.op in ("sum", "mean")) for r in reds)
    )
    if parallel:
        em.wants_parallel = True
        parallel = em.allow_parallel
        em.parallel |= parallel

    guarded = [
        m
        for m in members
        if not is_fusible_reduction(m) and mathlib.is_guarded(str(_safe_template(m)))
    ]
    loop_vars = tuple(f"i{k}" for k in range(nlev))

    def emit_nest(exact: bool) -> None:
        for r in reds:
            if r.preinit:
                em.loop_fill(r.out, r.node.size, identity_literal(r.op, r.node.dtype))

        def emit_level(k: int) -> None:
            for r in reds:
                if r.acc_level == k and not r.direct:
                    em.emit(f"{r.acc} = {identity_literal(r.op, r.acc_dtype)}")
            if k == nlev:
                emit_body(
                    em,
                    members,
                    ids,
                    reads,
                    read_strides,
                    writes,
                    write_strides,
                    reds,
                    loop_vars,
                    exact,
                    guarded,
                )
            else:
                rng = "prange" if (parallel and k == 0) else "range"
                em.emit(f"for i{k} in {rng}({loop_dims[k]}):")
                em.indent += 1
                emit_level(k + 1)
                em.indent -= 1
            for r in reds:
                if r.acc_level == k and not r.direct:
                    emit_writeback(em, r, loop_vars)

        emit_level(0)
        for r in reds:
            if r.op == "mean" and r.preinit:
                scale = literal(1.0 / max(r.count, 1), r.node.dtype)
                em.emit(f"for q in range({r.node.size}):")
                em.emit(f"    {r.out.buf}[{r.out.offset} + q] *= {scale}")

    start = len(em.lines)
    if guarded:
        em.emit(f"big{gid} = 0  # arguments beyond the fast sin/cos range")
    emit_nest(exact=False)
    if guarded:
        em.emit(f"if big{gid} > 0:  # rare: redo the loop with libm sin/cos")
        em.indent += 1
        emit_nest(exact=True)
        em.indent -= 1
    if not parallel:  # (with its exact fallback, a guarded loop is one unit to share)
        em.outline(start, f"g{gid}")

    for m in members:
        if m.id in writes:
            em.set_materialized(m, writes[m.id])
    for r in reds:
        em.set_materialized(r.node, r.out)


def emit_writeback(em: Emitter, r: _Reduction, loop_vars) -> None:
    target = r.index(loop_vars)
    value = r.acc
    if r.op == "mean" and not r.preinit:
        value = f"{r.acc} * {literal(1.0 / max(r.count, 1), r.acc_dtype)}"
    if r.preinit:
        em.emit(combine(r.op, target, value))
    else:
        em.emit(f"{target} = {value}")


def operand_expr(em: Emitter, node: Node, e: Node, ids, reads, read_strides, loop_vars) -> str:
    if e.id in ids:
        return f"v{e.id}"
    a = reads[e.id]
    if a.scalar is not None:
        # weakly typed scalar consts take the consumer's float precision
        value = em.const_values.get(e.id)
        target = node.dtype if np.issubdtype(node.dtype, np.floating) else None
        numeric = np.dtype(e.dtype) != np.bool_
        if (
            value is not None
            and target is not None
            and numeric
            and (
                not np.issubdtype(e.dtype, np.floating)
                or np.dtype(target).itemsize < np.dtype(e.dtype).itemsize
            )
        ):
            return literal(value, target)
        return a.scalar
    return a.index_expr(read_strides[e.id], loop_vars)


def _safe_template(node: Node):
    try:
        return template_of(node)
    except Exception:
        return None


def scalar_expr(em: Emitter, node: Node, operands: list[str], exact: bool = False) -> str:
    """The scalar expression computing one element of an elementwise node."""
    try:
        template = template_of(node)
    except Exception as exc:  # a codegen callable that rejects these attrs
        raise NoCodegen(f"{node.op}: {exc}") from None
    if not isinstance(template, str):
        raise NoCodegen(f"{node.op} has no scalar template")
    if node.op == "pow":
        special = pow_by_constant(em, node, operands)
        if special is not None:
            return special
    # bitwise forms of and/or on bools: no short-circuit branches, so loops vectorize
    template = {"logical_and": "({0} & {1})", "logical_or": "({0} | {1})"}.get(node.op, template)
    if node.op in ("logical_and", "logical_or"):
        operands = [
            o if np.dtype(i.dtype) == np.bool_ else f"({o} != 0)"
            for o, i in zip(operands, node.inputs, strict=True)
        ]
    expr = template.format(*operands)
    float_dt = (
        node.dtype
        if np.issubdtype(node.dtype, np.floating)
        else next((i.dtype for i in node.inputs if np.issubdtype(i.dtype, np.floating)), node.dtype)
    )
    expr = expand_inline(mathlib.specialize(expr, dshort(float_dt), exact))
    if np.dtype(node.dtype) != np.bool_ and not _keeps_dtype(node):
        expr = f"np.{np_dtype_name(node.dtype)}({expr})"
    return expr


def _keeps_dtype(node: Node) -> bool:
    """Does Numba's scalar arithmetic already give node's dtype? True when all
    operands share it (float32 op float32 -> float32), False for mixes such as
    float32 * int64 -> float64, which need a cast back."""
    return (
        np.issubdtype(node.dtype, np.floating)
        and node.op not in ("astype",)
        and all(
            np.dtype(i.dtype) == np.dtype(node.dtype) or i.size == 1 and i.op == "const"
            for i in node.inputs
        )
    )


def expand_inline(expr: str) -> str:
    """Replace calls of tiny helpers (mathlib.INLINE) by their expansion."""
    for name, form in mathlib.INLINE.items():
        start = 0
        while True:
            at = expr.find(name + "(", start)
            if at < 0 or (at > 0 and (expr[at - 1].isalnum() or expr[at - 1] == "_")):
                if at < 0:
                    break
                start = at + 1
                continue
            args, end = _call_args(expr, at + len(name))
            expr = expr[:at] + form.format(*args) + expr[end:]
            start = at
    return expr


def _call_args(expr: str, open_at: int) -> tuple[list[str], int]:
    """Top-level comma-separated arguments of the call whose '(' is at open_at."""
    depth, args, cur = 0, [], []
    for i in range(open_at, len(expr)):
        ch = expr[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    raise ValueError(f"unbalanced call in {expr!r}")


def pow_by_constant(em: Emitter, node: Node, operands: list[str]) -> str | None:
    """x ** c for a few constant c as multiplications (exact as NumPy's power)."""
    exponent = em.const_values.get(node.inputs[1].id)
    if exponent is None or node.inputs[1].size != 1:
        return None
    x = operands[0]
    forms = {
        1.0: "{x}",
        2.0: "({x} * {x})",
        3.0: "({x} * {x} * {x})",
        0.5: "np.sqrt({x})",
        -1.0: "(1 / {x})" if not np.issubdtype(node.dtype, np.integer) else None,
        0.0: None,
    }
    form = forms.get(float(exponent))
    if form is None:
        return None
    return f"np.{np_dtype_name(node.dtype)}({form.format(x=x)})"


def emit_body(
    em,
    members,
    ids,
    reads,
    read_strides,
    writes,
    write_strides,
    reds,
    loop_vars,
    exact=False,
    guarded=(),
):
    red_by_id = {r.node.id: r for r in reds}
    guarded_ids = {m.id for m in guarded}
    guard_args: list[str] = []  # sin/cos arguments to check against the fast range
    for m in members:
        em.comment(m)
        if m.id in red_by_id:
            r = red_by_id[m.id]
            e = m.inputs[0]
            v = operand_expr(em, m, e, ids, reads, read_strides, loop_vars)
            if r.direct:
                em.emit(combine(r.op, r.index(loop_vars), v))
            else:
                em.emit(combine(r.op, r.acc, v))
            continue
        operands = [operand_expr(em, m, e, ids, reads, read_strides, loop_vars) for e in m.inputs]
        if m.id in guarded_ids and not exact and operands[0] not in guard_args:
            guard_args.append(operands[0])
        em.emit(f"v{m.id} = {scalar_expr(em, m, operands, exact)}")
        if m.id in writes:
            em.emit(f"{writes[m.id].index_expr(write_strides[m.id], loop_vars)} = v{m.id}")
    if guard_args:
        # one update per iteration: a prange reduction variable may be updated only once
        beyond = " | ".join(f"(abs({a}) > {mathlib.TRIG_LIMIT!r})" for a in guard_args)
        em.emit(f"big{guarded[0].group} += {beyond}")
