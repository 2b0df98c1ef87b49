"""`vmap` by batching rules, as JAX's: one traced function, batched node by node.

`vmap(fn, in_axes, out_axes)(*args)`:

1. traces `fn` once on one example (mapped leaves lose their mapped axis;
   unmapped leaves keep their shape; closed-over tracers of an enclosing trace
   are captured as unmapped inputs);
2. walks that graph node by node with values that carry a batch dimension
   (`(value, batch_dim)`, batch_dim an int or None), applying each primitive's
   batching rule. The rules are written in tracegrad ops and run through
   `bind`, so the batched program is computed on NumPy arrays, recorded into an
   enclosing trace (`tg.compile`, `tg.grad`, an outer `vmap`), or recorded as
   eager ops on eager tensors, exactly as `autodiff.replay` does for graphs.

Why trace first and batch the graph rather than batch while tracing (JAX's
BatchTracer): tracegrad already has one kind of tracer, and nested transforms
(`grad` inlining its joint graph, `compile`, loops capturing outer tracers)
already speak "graph in, bind out". A graph walk reuses all of that: nested
vmap, vmap of grad and grad of vmap need no new value kind.

A batching rule maps `(args, dims, **attrs) -> (out, out_dim)`. A primitive's
own `batch_rule` wins (this module registers rules for matmul, the shape ops,
indexing, the axis-taking ops, linalg, scan, cond, while, call and
custom_vjp_call); otherwise the default for its `kind` (elementwise, reduction)
applies; a primitive with neither (a new one), or a rule that raises
`NotImplementedError` for a case it does not handle, falls back to a per-node
loop: a `scan` over the batch of just that node, so vmap is always correct.
`uses_loop_fallback(graph)` tells whether a traced graph holds such a loop.

    >>> import numpy as np, tracegrad as tg
    >>> tg.vmap(lambda x, w: x @ w, in_axes=(0, None))(np.ones((4, 3)), np.ones((3, 2))).shape
    (4, 2)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY, Aval, Primitive, TracegradError, aval_of, bind
from tracegrad.ops.rulekit import normalize_axes
from tracegrad.pytree import leaf_paths
from tracegrad.tracing import (
    TraceContext,
    Tracer,
    abstract_leaf,
    active_contexts,
    argument_names,
    node_source,
    trace_flat,
    tree_flatten,
    tree_unflatten,
)

__all__ = ["BatchingError", "batch_graph", "jacobian_rows", "uses_loop_fallback", "vmap"]


class BatchingError(TracegradError, ValueError, TypeError):
    """Bad vmap arguments (in_axes/out_axes, sizes). A ValueError as in JAX, and a
    TypeError too, as tracegrad's earlier scan-based vmap raised."""


# ------------------------------------------------------------------ helpers


def _shape(v) -> tuple:
    shape = getattr(v, "shape", None)
    return tuple(shape) if shape is not None else tuple(np.shape(v))


def _ndim(v) -> int:
    return len(_shape(v))


def _moveaxis(x, source: int, destination: int = 0):
    """x with axis `source` moved to `destination` (one transpose, none if in place)."""
    nd = _ndim(x)
    source, destination = source % nd, destination % nd
    if source == destination:
        return x
    order = [d for d in range(nd) if d != source]
    order.insert(destination, source)
    return _permute(x, tuple(order))


def _permute(x, order: tuple):
    """transpose(x, order); a reshape when only size-1 axes move (the data order stays)."""
    shape = _shape(x)
    if [a for a in order if shape[a] != 1] == [a for a in range(len(shape)) if shape[a] != 1]:
        return _reshape(x, tuple(shape[a] for a in order))
    return T.transpose(x, axes=order)


def _reshape(x, shape: tuple):
    shape = tuple(int(d) for d in shape)
    return x if _shape(x) == shape else T.reshape(x, shape=shape)


def _to_front(x, dim: int | None, size: int):
    """x batched along axis 0; an unbatched x is broadcast to the batch."""
    if dim is None:
        return T.broadcast_to(x, shape=(size,) + _shape(x))
    return _moveaxis(x, dim, 0)


def _batch_size(args, dims) -> int:
    for a, d in zip(args, dims, strict=True):
        if d is not None:
            return _shape(a)[d]
    raise AssertionError("a batching rule ran with no batched operand")


def _norm_axis(axis: int, ndim: int) -> int:
    return int(axis) % ndim if ndim else 0


def _padded(x, size: int, rank: int):
    """A batched x (axis 0) with size-1 axes after the batch axis so that it has
    `rank` dims per example: NumPy's broadcasting then lines up per-example axes."""
    shape = _shape(x)
    missing = rank - (len(shape) - 1)
    return _reshape(x, (size,) + (1,) * missing + shape[1:]) if missing > 0 else x


# --------------------------------------------------------- the kind defaults


def elementwise_rule(prim: Primitive) -> Callable:
    """Broadcasting ops: batch axes to the front, per-example ranks aligned."""

    def rule(args, dims, **attrs):
        size = _batch_size(args, dims)
        ranks = [_ndim(a) - (d is not None) for a, d in zip(args, dims, strict=True)]
        rank = max(ranks)
        batched = [d for d in dims if d is not None]
        same = len(set(batched)) == 1
        if (
            same
            and all(r == rank for r, d in zip(ranks, dims, strict=True) if d is not None)
            and (
                batched[0] == 0
                or all(r == 0 for r, d in zip(ranks, dims, strict=True) if d is None)
            )
        ):
            return prim(*args, **attrs), batched[0]  # already lined up
        moved = [
            a if d is None else _padded(_moveaxis(a, d, 0), size, rank)
            for a, d in zip(args, dims, strict=True)
        ]
        return prim(*moved, **attrs), 0

    return rule


def _reduced_axes(axis, ndim: int, name: str) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    return normalize_axes(name, Aval((1,) * ndim, np.dtype(np.float64)), axis)


def reduction_rule(prim: Primitive) -> Callable:
    """Reductions: shift the axis attribute past the batch axis (no data moved)."""
    single = prim.name in ("argmax", "argmin")

    def rule(args, dims, axis=None, keepdims=False, **attrs):
        (x,), (d,) = args, dims
        nd = _ndim(x) - 1
        if single and axis is None:  # NumPy flattens the example first
            size = _shape(x)[d]
            per_example = int(np.prod(_shape(x), dtype=np.int64)) // size if size else 0
            flat = _reshape(_moveaxis(x, d, 0), (size, per_example))
            out = prim(flat, axis=1, keepdims=False, **attrs)
            return (_reshape(out, (size,) + (1,) * nd) if keepdims else out), 0
        axes = _reduced_axes(axis, nd, prim.name)
        full = tuple(a if a < d else a + 1 for a in axes)
        new_axis = full[0] if single else full
        out = prim(x, axis=new_axis, keepdims=keepdims, **attrs)
        return out, (d if keepdims else d - sum(1 for a in full if a < d))

    return rule


def _matmul_core(x, dx, y, dy):
    """x @ y per example, for any per-example ranks (NumPy's matmul semantics)."""
    nx, ny = _ndim(x) - (dx is not None), _ndim(y) - (dy is not None)
    size = _batch_size((x, y), (dx, dy))
    if dy is None and ny == 2:  # a shared matrix: the batch joins the rows (one GEMM)
        x = _moveaxis(x, dx, 0)
        lead, k = _shape(x)[:-1], _shape(x)[-1]
        rows = _reshape(x, (int(np.prod(lead, dtype=np.int64)), k))
        return _reshape(T.matmul(rows, y), lead + (_shape(y)[1],)), 0
    if dx is None and nx == 2 and ny == 1:  # a shared matrix times batched vectors
        return T.matmul(_moveaxis(y, dy, 0), T.transpose(x, axes=(1, 0))), 0
    x = x if dx is None else _moveaxis(x, dx, 0)
    y = y if dy is None else _moveaxis(y, dy, 0)
    row, col = nx == 1, ny == 1  # 1-d operands act as a row / a column, dropped after
    if row:
        x = _reshape(x, _shape(x)[:-1] + (1,) + _shape(x)[-1:])
    if col:
        y = _reshape(y, _shape(y) + (1,))
    nx, ny = max(nx, 2), max(ny, 2)
    rank = max(nx, ny)
    if dx is not None:
        x = _padded(x, size, rank)
    if dy is not None:
        y = _padded(y, size, rank)
    if dx is not None and dy is not None and _shape(x)[-1] == 1:
        out = T.mul(x, y)  # outer products (per-example weight gradients): no tiny GEMMs
    else:
        out = T.matmul(x, y)
    shape = _shape(out)
    if row or col:
        core = shape[-2:]
        kept = (() if row else core[:1]) + (() if col else core[1:])
        out = _reshape(out, shape[:-2] + kept)
    return out, 0


def matmul_rule(args, dims):
    (x, y), (dx, dy) = args, dims
    return _matmul_core(x, dx, y, dy)


def addmm_rule(args, dims):
    bias, m1, m2 = args
    db, d1, d2 = dims
    if d1 is None and d2 is None:
        prod, dp = T.matmul(m1, m2), None
    else:
        prod, dp = _matmul_core(m1, d1, m2, d2)
    return elementwise_rule(T.add)([bias, prod], [db, dp])


def reshape_rule(args, dims, shape):
    (x,), (d,) = args, dims
    size = _shape(x)[d]
    return _reshape(_moveaxis(x, d, 0), (size,) + tuple(shape)), 0


def broadcast_to_rule(args, dims, shape):
    (x,), (d,) = args, dims
    size = _shape(x)[d]
    x = _padded(_moveaxis(x, d, 0), size, len(shape))
    return T.broadcast_to(x, shape=(size,) + tuple(shape)), 0


def transpose_rule(args, dims, axes):
    (x,), (d,) = args, dims
    order = (d,) + tuple(a if a < d else a + 1 for a in axes)
    return _permute(x, order), 0


def concatenate_rule(args, dims, axis):
    size = _batch_size(args, dims)
    nd = _ndim(args[0]) - (dims[0] is not None)
    moved = [_to_front(a, d, size) for a, d in zip(args, dims, strict=True)]
    return T.concatenate(*moved, axis=_norm_axis(axis, nd) + 1), 0


def _axis_rule(prim: Primitive, n_operands: int = 1) -> Callable:
    """Ops along one `axis` of same-shaped operands (softmax, cumsum, linrec, ...)."""

    def rule(args, dims, axis, **attrs):
        if n_operands == 1:
            (x,), (d,) = args, dims
            a = _norm_axis(axis, _ndim(x) - 1)
            return prim(x, axis=a if a < d else a + 1, **attrs), d
        size = _batch_size(args, dims)
        moved = [_to_front(v, d, size) for v, d in zip(args, dims, strict=True)]
        return prim(*moved, axis=_norm_axis(axis, _ndim(moved[0]) - 1) + 1, **attrs), 0

    return rule


# ---------------------------------------------------------------- indexing


def _advanced_positions(spec) -> list[int]:
    """Spec positions of NumPy's advanced indices (ints count once an array is present)."""
    if not any(isinstance(e, tuple) and e[0] == "array" for e in spec):
        return []
    return [
        k
        for k, e in enumerate(spec)
        if isinstance(e, (int, np.integer)) or (isinstance(e, tuple) and e[0] == "array")
    ]


def _adjacent(positions: list[int]) -> bool:
    return positions == list(range(positions[0], positions[-1] + 1))


def _index_batch_dim(spec, arrays) -> int:
    """Where the batch axis lands in x[(:,) + spec]: first, unless NumPy moves a
    block of non-adjacent advanced indices to the front."""
    advanced = _advanced_positions(spec)
    if not advanced or _adjacent(advanced):
        return 0
    shapes = [_shape(arrays[spec[k][1]]) for k in advanced if isinstance(spec[k], tuple)]
    return len(np.broadcast_shapes(*shapes))


def _batched_index(spec, arrays, dims, size: int, with_iota: bool):
    """(spec, arrays, block position) for an index whose arrays differ per example.

    Batched index arrays get the batch as their leading axis (padded to the block's
    rank); with `with_iota`, an index arange(B) joins the advanced block, just before
    its first entry, so each example reads its own slice of a batched operand. The
    batched block lands where NumPy puts the per-example block (at the first advanced
    position when the advanced entries are adjacent, else first)."""
    advanced = _advanced_positions(spec)
    per_example = [
        _shape(a)[:d] + _shape(a)[d + 1 :] if d is not None else _shape(a)
        for a, d in zip(arrays, dims, strict=True)
    ]
    rank = len(
        np.broadcast_shapes(
            *[per_example[spec[k][1]] for k in advanced if isinstance(spec[k], tuple)]
        )
    )
    new_arrays = [
        a if d is None else _padded(_moveaxis(a, d, 0), size, rank)
        for a, d in zip(arrays, dims, strict=True)
    ]
    first = advanced[0]
    if with_iota:
        iota = np.arange(size, dtype=np.int64).reshape((size,) + (1,) * rank)
        spec = tuple(spec[:first]) + (("array", len(new_arrays)),) + tuple(spec[first:])
        new_arrays.append(iota)
    block_at = first if _adjacent(advanced) else 0
    return spec, new_arrays, block_at, sum(1 for e in spec[:first] if e is not None)


def getitem_rule(args, dims, spec):
    x, arrays = args[0], args[1:]
    if all(d is None for d in dims[1:]):
        x = _moveaxis(x, dims[0], 0)
        spec = (("slice", 0, _shape(x)[0], 1),) + tuple(spec)
        return T.getitem(x, *arrays, spec=spec), _index_batch_dim(spec[1:], arrays)
    size = _batch_size(args, dims)
    batched_x = dims[0] is not None
    new_spec, new_arrays, block_at, x_axis = _batched_index(
        spec, arrays, dims[1:], size, with_iota=batched_x
    )
    if batched_x:  # the batch axis of x sits where the iota index reads it
        x = _moveaxis(x, dims[0], x_axis)
    return T.getitem(x, *new_arrays, spec=new_spec), block_at


def index_add_zeros_rule(args, dims, spec, shape):
    g, arrays = args[0], args[1:]
    size = _batch_size(args, dims)
    if all(d is None for d in dims[1:]):
        g = _moveaxis(g, dims[0], _index_batch_dim(spec, arrays))
        return T.index_add_zeros(
            g, *arrays, spec=(("slice", 0, size, 1),) + tuple(spec), shape=(size,) + tuple(shape)
        ), 0
    new_spec, new_arrays, block_at, x_axis = _batched_index(
        spec, arrays, dims[1:], size, with_iota=True
    )
    g = (
        _moveaxis(g, dims[0], block_at)
        if dims[0] is not None
        else T.broadcast_to(
            _reshape(g, _shape(g)[:block_at] + (1,) + _shape(g)[block_at:]),
            shape=_shape(g)[:block_at] + (size,) + _shape(g)[block_at:],
        )
    )
    full = tuple(shape)[:x_axis] + (size,) + tuple(shape)[x_axis:]
    return T.index_add_zeros(g, *new_arrays, spec=new_spec, shape=full), x_axis


def _along_axis_operand(v, d):
    """A take/put_along_axis operand: batched at axis 0, or with a size-1 axis there
    (those ops broadcast every axis but `axis`)."""
    return _moveaxis(v, d, 0) if d is not None else _reshape(v, (1,) + _shape(v))


def take_along_axis_rule(args, dims, axis):
    (x, idx), (dx, didx) = args, dims
    nd = _ndim(x) - (dx is not None)
    return T.take_along_axis(
        _along_axis_operand(x, dx), _along_axis_operand(idx, didx), axis=_norm_axis(axis, nd) + 1
    ), 0


def put_along_axis_add_rule(args, dims, axis, shape):
    (g, idx), (dg, didx) = args, dims
    size = _batch_size(args, dims)
    return T.put_along_axis_add(
        _to_front(g, dg, size),
        _along_axis_operand(idx, didx),
        axis=_norm_axis(axis, len(shape)) + 1,
        shape=(size,) + tuple(shape),
    ), 0


def nll_loss_rule(args, dims, reduction):
    """Every example's rows in one unreduced nll_loss, then reduced per example."""
    (logp, target), (dl, dt) = args, dims
    size = _batch_size(args, dims)
    logp, target = _to_front(logp, dl, size), _to_front(target, dt, size)
    _, n, c = _shape(logp)
    per_row = _reshape(
        T.nll_loss(_reshape(logp, (size * n, c)), _reshape(target, (size * n,)), reduction="none"),
        (size, n),
    )
    if reduction == "none":
        return per_row, 0
    reduce = T.mean if reduction == "mean" else T.sum_
    return reduce(per_row, axis=1, keepdims=False), 0


# ------------------------------------------------------------------ linalg


def _stacked_matrices_rule(prim: Primitive) -> Callable:
    """Ops on (..., n, n) stacks of matrices: the batch is one more leading axis."""

    def rule(args, dims, **attrs):
        (a,), (d,) = args, dims
        return prim(_moveaxis(a, d, 0), **attrs), 0

    return rule


def _solve_batch_rule(prim: Primitive, batch_broadcasts: bool) -> Callable:
    """A x = b per example: a 1-D b becomes a column (NumPy would read a batch of
    vectors as a matrix), batch axes are lined up behind the batch axis."""

    def rule(args, dims, **attrs):
        (a, b), (da, db) = args, dims
        size = _batch_size(args, dims)
        ra, rb = _ndim(a) - (da is not None), _ndim(b) - (db is not None)
        vec = rb == 1
        if batch_broadcasts:
            a = a if da is None else _moveaxis(a, da, 0)
            b = b if db is None else _moveaxis(b, db, 0)
        else:  # the batch axes of a and b must match exactly
            a, b = _to_front(a, da, size), _to_front(b, db, size)
        if vec:
            b = _reshape(b, _shape(b) + (1,))
        if batch_broadcasts:
            rank = max(ra, rb + vec)
            a = a if da is None else _padded(a, size, rank)
            b = b if db is None else _padded(b, size, rank)
        out = prim(a, b, **attrs)
        return (_reshape(out, _shape(out)[:-1]) if vec else out), 0

    return rule


# ------------------------------------------------- the eager surface's ops


def vector_norm_rule(args, dims, ord, axis, keepdims):
    (x,), (d,) = args, dims
    axes = range(_ndim(x) - 1) if axis is None else [_norm_axis(a, _ndim(x) - 1) for a in axis]
    full = tuple(a if a < d else a + 1 for a in axes)
    out = REGISTRY["vector_norm"](x, ord=ord, axis=full, keepdims=keepdims)
    return out, (d if keepdims else d - sum(1 for a in full if a < d))


def diagonal_rule(args, dims, offset, axis1, axis2):
    (x,), (d,) = args, dims
    nd = _ndim(x) - 1
    out = REGISTRY["diagonal"](
        _moveaxis(x, d, 0),
        offset=offset,
        axis1=_norm_axis(axis1, nd) + 1,
        axis2=_norm_axis(axis2, nd) + 1,
    )
    return out, 0


def diagonal_scatter_zeros_rule(args, dims, offset, axis1, axis2, shape):
    (g,), (d,) = args, dims
    nd = len(shape)
    out = REGISTRY["diagonal_scatter_zeros"](
        _moveaxis(g, d, 0),
        offset=offset,
        axis1=_norm_axis(axis1, nd) + 1,
        axis2=_norm_axis(axis2, nd) + 1,
        shape=(_shape(g)[d],) + tuple(shape),
    )
    return out, 0


def _register_optional_rules() -> None:
    """Rules for primitives that other parts of tracegrad add (linalg, the eager
    surface's ops), where they are defined."""
    makers = {
        name: lambda prim: _stacked_matrices_rule(prim)
        for name in ("cholesky", "inv", "det", "slogdet_sign", "logabsdet")
    }
    makers["solve"] = lambda prim: _solve_batch_rule(prim, batch_broadcasts=True)
    makers["triangular_solve"] = lambda prim: _solve_batch_rule(prim, batch_broadcasts=False)
    makers["triangular_matmul"] = lambda prim: _solve_batch_rule(prim, batch_broadcasts=False)
    makers["erf"] = elementwise_rule
    special = ("threefry2x32", "erfinv", "gammaln", "digamma", "polygamma", "log_ndtr", "ndtri")
    special += ("gammainc", "gammaincc", "betainc", "random_gamma", "random_gamma_grad")
    special += ("gammainc_grad_a",)
    for name in special:  # tracegrad/ops/special.py
        makers[name] = elementwise_rule
    makers["clamp_tensor"] = elementwise_rule
    makers["vector_norm"] = lambda prim: vector_norm_rule
    makers["diagonal"] = lambda prim: diagonal_rule
    makers["diagonal_scatter_zeros"] = lambda prim: diagonal_scatter_zeros_rule
    for name, make in makers.items():
        prim = REGISTRY.get(name)
        if prim is not None and prim.batch_rule is None:
            prim.batch_rule = make(prim)


# ------------------------------------------------------ loops and branches


def _repack(parts: list, avals: list, size: int):
    """Batched results (each (B,) + shape) packed per example into (B, total), the
    layout of a control-flow node's packed value with a batch axis in front."""
    from tracegrad.loops.primitives import packed_layout

    dtype, slots = packed_layout(avals)
    flat = []
    for part, (_, n, _, part_dtype) in zip(parts, slots, strict=True):
        part = _reshape(part, (size, n))
        flat.append(part if part_dtype == dtype else T.astype(part, dtype=dtype.name))
    if not flat:
        raise NotImplementedError("a loop or branch without results")
    return flat[0] if len(flat) == 1 else T.concatenate(*flat, axis=1)


def _batched_body(graph, dims: list, size: int, force: set, name: str):
    """A new graph computing `graph` on inputs batched at axis 0 (where dims says so).
    Outputs in `force` come out batched at axis 0 (broadcast if they do not depend on
    the batch); the others stay as they are. Returns (graph, output dims)."""
    from tracegrad.tracing import TreeDef, trace_subgraph

    avals = [
        Aval((size,) + n.shape, n.dtype) if d is not None else n.aval
        for n, d in zip(graph.inputs, dims, strict=True)
    ]
    out_dims: list = []

    def batched(*vals):
        out_dims.clear()
        results = []
        for k, (v, d) in enumerate(batch_graph(graph, vals, dims, size)):
            if d is not None:
                v, d = _moveaxis(v, d, 0), 0
            elif k in force:
                v, d = T.broadcast_to(v, shape=(size,) + _shape(v)), 0
            results.append(v)
            out_dims.append(d)
        return results

    in_tree = TreeDef("tuple", [TreeDef("array")] * len(avals))
    body, _, captures = trace_subgraph(batched, in_tree, avals, name)
    if captures:
        raise NotImplementedError("a batched body that reads enclosing values")
    return body, list(out_dims)


def scan_rule(args, dims, body, length, reverse, n_carry, n_xs, remat=False):
    """scan with a batched body: batched carries ride along (a carry is batched when
    its start or anything it is updated from is), xs keep the scanned axis first."""
    from tracegrad.loops.primitives import _scan_avals, scan_p, unpack

    size = _batch_size(args, dims)
    carry_batched = [d is not None for d in dims[:n_carry]]
    n_out = len(body.outputs)
    for _ in range(n_carry + 1):  # a fixpoint: each round batches at least one more carry
        in_dims = [0 if b else None for b in carry_batched] + [
            None if d is None else 0 for d in dims[n_carry:]
        ]
        force = {k for k in range(n_carry) if carry_batched[k]} | set(range(n_carry, n_out))
        new_body, out_dims = _batched_body(body, in_dims, size, force, f"{body.name}_batched")
        grown = [k for k in range(n_carry) if out_dims[k] is not None and not carry_batched[k]]
        if not grown:
            break
        for k in grown:
            carry_batched[k] = True
    carries = [
        (_to_front(v, d, size) if carry_batched[k] else v)
        for k, (v, d) in enumerate(zip(args[:n_carry], dims[:n_carry], strict=True))
    ]
    xs = [
        v if d is None else _moveaxis(v, d, 1)  # (length, B, ...): one batch per step
        for v, d in zip(args[n_carry : n_carry + n_xs], dims[n_carry : n_carry + n_xs], strict=True)
    ]
    consts = [
        v if d is None else _moveaxis(v, d, 0)
        for v, d in zip(args[n_carry + n_xs :], dims[n_carry + n_xs :], strict=True)
    ]
    packed = scan_p(
        *carries,
        *xs,
        *consts,
        body=new_body,
        length=length,
        reverse=reverse,
        n_carry=n_carry,
        n_xs=n_xs,
        **({"remat": True} if remat else {}),
    )
    parts = unpack(packed, _scan_avals(new_body, length, n_carry))
    parts = [
        (p if carry_batched[k] else T.broadcast_to(p, shape=(size,) + _shape(p)))
        if k < n_carry
        else _moveaxis(p, 1, 0)
        for k, p in enumerate(parts)
    ]
    return _repack(parts, _scan_avals(body, length, n_carry), size), 0


def cond_rule(args, dims, true_branch, false_branch):
    """A shared predicate keeps one cond over batched branches; a batched predicate
    runs both branches on the whole batch and selects per example (as JAX does)."""
    from tracegrad.loops.primitives import cond_p, unpack

    size = _batch_size(args, dims)
    pred, operands, dp = args[0], args[1:], dims[0]
    avals = [n.aval for n in true_branch.outputs]
    if dp is None:
        moved = [
            v if d is None else _moveaxis(v, d, 0) for v, d in zip(operands, dims[1:], strict=True)
        ]
        in_dims = [None if d is None else 0 for d in dims[1:]]
        every = set(range(len(avals)))
        t, _ = _batched_body(true_branch, in_dims, size, every, f"{true_branch.name}_batched")
        f, _ = _batched_body(false_branch, in_dims, size, every, f"{false_branch.name}_batched")
        packed = cond_p(pred, *moved, true_branch=t, false_branch=f)
        parts = unpack(packed, [Aval((size,) + a.shape, a.dtype) for a in avals])
    else:
        pred = _moveaxis(pred, dp, 0)
        parts = []
        for (tv, td), (fv, fd), a in zip(
            batch_graph(true_branch, operands, dims[1:], size),
            batch_graph(false_branch, operands, dims[1:], size),
            avals,
            strict=True,
        ):
            mask = _reshape(pred, (size,) + (1,) * len(a.shape))
            parts.append(T.where(mask, _to_front(tv, td, size), _to_front(fv, fd, size)))
    return _repack(parts, avals, size), 0


def while_rule(args, dims, cond, body, n_carry):
    """while_loop with a batched body. A shared predicate keeps one loop; a predicate
    that differs per example loops while any example goes on, and examples that
    have stopped keep their carry (a select), as JAX does."""
    from tracegrad.loops.primitives import unpack, while_p
    from tracegrad.ops import api
    from tracegrad.tracing import TreeDef, trace_subgraph

    size = _batch_size(args, dims)
    n_cc = len(cond.inputs) - n_carry
    carry_d, cc_d, bc_d = dims[:n_carry], dims[n_carry : n_carry + n_cc], dims[n_carry + n_cc :]
    const_dims = (
        [None if d is None else 0 for d in cc_d],
        [None if d is None else 0 for d in bc_d],
    )
    carry_batched = [d is not None for d in carry_d]
    for _ in range(n_carry + 2):  # a fixpoint over which carries (and the predicate) vary
        cdims = [0 if b else None for b in carry_batched]
        new_cond, pred_dims = _batched_body(cond, cdims + const_dims[0], size, set(), "while_cond")
        if pred_dims[0] is not None:
            carry_batched = [True] * n_carry
            break
        force = {k for k in range(n_carry) if carry_batched[k]}
        new_body, out_dims = _batched_body(body, cdims + const_dims[1], size, force, "while_body")
        grown = [k for k in range(n_carry) if out_dims[k] is not None and not carry_batched[k]]
        if not grown:
            break
        for k in grown:
            carry_batched[k] = True
    carries = [
        _to_front(v, d, size) if carry_batched[k] else v
        for k, (v, d) in enumerate(zip(args[:n_carry], carry_d, strict=True))
    ]
    cc = [
        v if d is None else _moveaxis(v, d, 0)
        for v, d in zip(args[n_carry : n_carry + n_cc], cc_d, strict=True)
    ]
    bc = [
        v if d is None else _moveaxis(v, d, 0)
        for v, d in zip(args[n_carry + n_cc :], bc_d, strict=True)
    ]
    if pred_dims[0] is None:
        packed = while_p(*carries, *cc, *bc, cond=new_cond, body=new_body, n_carry=n_carry)
        avals = [
            Aval((size,) + n.shape, n.dtype) if b else n.aval
            for n, b in zip(body.outputs, carry_batched, strict=True)
        ]
    else:
        all_batched = [0] * n_carry

        def any_goes_on(*vals):
            pred, _ = batch_graph(cond, vals, all_batched + const_dims[0], size)[0]
            return api.any(pred)

        def step(*vals):
            carry = vals[:n_carry]
            cvals, bvals = vals[n_carry : n_carry + n_cc], vals[n_carry + n_cc :]
            pred, _ = batch_graph(cond, carry + cvals, all_batched + const_dims[0], size)[0]
            new = batch_graph(body, carry + bvals, all_batched + const_dims[1], size)
            return [
                T.where(_reshape(pred, (size,) + (1,) * (_ndim(c) - 1)), _to_front(v, d, size), c)
                for (v, d), c in zip(new, carry, strict=True)
            ]

        avals = [Aval((size,) + n.shape, n.dtype) for n in body.outputs]
        c_avals = avals + [Aval(_shape(v), aval_of(v).dtype) for v in cc]
        b_avals = c_avals + [Aval(_shape(v), aval_of(v).dtype) for v in bc]

        def tree(n):
            return TreeDef("tuple", [TreeDef("array")] * n)

        new_cond, _, caps_c = trace_subgraph(
            any_goes_on, tree(len(c_avals)), c_avals, "while_cond_batched"
        )
        new_body, _, caps_b = trace_subgraph(
            step, tree(len(b_avals)), b_avals, "while_body_batched"
        )
        if caps_c or caps_b:
            raise NotImplementedError("a batched while body that reads enclosing values")
        packed = while_p(*carries, *cc, *cc, *bc, cond=new_cond, body=new_body, n_carry=n_carry)
    parts = unpack(packed, avals)
    parts = [
        p if b else T.broadcast_to(p, shape=(size,) + _shape(p))
        for p, b in zip(parts, carry_batched, strict=True)
    ]
    return _repack(parts, [n.aval for n in body.outputs], size), 0


def custom_vjp_rule(args, dims, fun, fwd, bwd, n_out):
    """A custom_vjp call with its function, forward and backward rules all batched (the
    user's rule keeps giving the gradient). Every result comes out batched; a shared
    operand's cotangent is then summed over the batch by the autodiff driver."""
    from tracegrad.loops.primitives import custom_vjp_p, unpack

    size = _batch_size(args, dims)
    moved = [v if d is None else _moveaxis(v, d, 0) for v, d in zip(args, dims, strict=True)]
    in_dims = [None if d is None else 0 for d in dims]

    def every(graph):
        return set(range(len(graph.outputs)))

    fun_b, _ = _batched_body(fun, in_dims, size, every(fun), f"{fun.name}_batched")
    fwd_b, _ = _batched_body(fwd, in_dims, size, every(fwd), f"{fwd.name}_batched")
    bwd_b, _ = _batched_body(bwd, [0] * len(bwd.inputs), size, every(bwd), f"{bwd.name}_batched")
    packed = custom_vjp_p(*moved, fun=fun_b, fwd=fwd_b, bwd=bwd_b, n_out=n_out)
    avals = [n.aval for n in fun.outputs]
    parts = unpack(packed, [Aval((size,) + a.shape, a.dtype) for a in avals])
    return _repack(parts, avals, size), 0


def call_rule(args, dims, graph):
    """A called graph is batched inline."""
    size = _batch_size(args, dims)
    parts = [_to_front(v, d, size) for v, d in batch_graph(graph, args, dims, size)]
    return _repack(parts, [n.aval for n in graph.outputs], size), 0


# ------------------------------------------------------- rule registration

_KIND_DEFAULTS: dict[str, Callable[[Primitive], Callable]] = {
    "elementwise": elementwise_rule,
    "reduction": reduction_rule,
}

_RULES: dict[str, Callable] = {
    "matmul": matmul_rule,
    "addmm": addmm_rule,
    "reshape": reshape_rule,
    "broadcast_to": broadcast_to_rule,
    "transpose": transpose_rule,
    "concatenate": concatenate_rule,
    "getitem": getitem_rule,
    "index_add_zeros": index_add_zeros_rule,
    "take_along_axis": take_along_axis_rule,
    "put_along_axis_add": put_along_axis_add_rule,
    "nll_loss": nll_loss_rule,
    "softmax": _axis_rule(T.softmax),
    "log_softmax": _axis_rule(T.log_softmax),
    "cumsum": _axis_rule(T.cumsum),
    "argsort": _axis_rule(T.argsort),
    "linrec": _axis_rule(T.linrec, n_operands=2),
    "scan": scan_rule,
    "cond": cond_rule,
    "while": while_rule,
    "call": call_rule,
    "custom_vjp_call": custom_vjp_rule,
}


def _register_rules() -> None:
    """Give each primitive its rule (a `batch_rule=` set in the table wins)."""
    for name, rule in _RULES.items():
        prim = REGISTRY[name]
        if prim.batch_rule is None:
            prim.batch_rule = rule


_register_rules()
try:  # the linalg primitives register when tracegrad.ops.api imports them
    import tracegrad.ops.linalg  # noqa: F401
except ImportError:  # pragma: no cover
    pass
_register_optional_rules()


def rule_for(prim: Primitive) -> Callable | None:
    """The batching rule of `prim`: its own, else its kind's default, else None."""
    if prim.batch_rule is not None:
        return prim.batch_rule
    make = _KIND_DEFAULTS.get(prim.kind)
    if make is None:
        return None
    rule = prim.batch_rule = make(prim)  # built once per primitive
    return rule


# ------------------------------------------------------ the per-node loop


def _loop_fallback(prim: Primitive, args, dims, attrs, out_aval):
    """prim applied example by example: a `scan` over the batch of this one node."""
    from tracegrad.loops import scan

    size = _batch_size(args, dims)
    if size == 0:
        return T.broadcast_to(
            np.zeros(out_aval.shape, out_aval.dtype), shape=(0,) + tuple(out_aval.shape)
        ), 0
    positions = [k for k, d in enumerate(dims) if d is not None]
    xs = tuple(_moveaxis(args[k], dims[k], 0) for k in positions)

    def one_example(carry, x):
        full = list(args)
        for k, v in zip(positions, x, strict=True):
            full[k] = v
        return carry, bind(prim, *full, **attrs)

    one_example.__name__ = f"vmap_{prim.name}"
    _, ys = scan(one_example, None, xs)
    return ys, 0


# ------------------------------------------------------- batching a graph


def batch_graph(graph, args: Sequence[Any], dims: Sequence[int | None], size: int):
    """Run `graph` (traced on one example) on batched `args`; returns a list of
    (value, batch_dim) per output. Values are computed with `bind`, so this
    records into the enclosing trace when the arguments are tracers.

    >>> import numpy as np, tracegrad as tg
    >>> g = tg.trace(lambda x, w: tg.sum(x * w), np.ones(3), np.ones(3))
    >>> [(v.tolist(), d) for v, d in batch_graph(g, [np.eye(3), np.arange(3.0)], [1, None], 3)]
    [([0.0, 1.0, 2.0], 0)]
    """
    context = _innermost_context(args)
    env: dict[int, tuple[Any, int | None]] = {
        n.id: (a, d) for n, a, d in zip(graph.inputs, args, dims, strict=True)
    }
    for node in graph.nodes:
        if node.id in env:
            continue
        if node.op == "const":
            value = node.attrs["value"]
            if context is not None:
                value = Tracer(context, context.const_node(value))
            env[node.id] = (value, None)
            continue
        prim = REGISTRY[node.op]
        vals = [env[i.id][0] for i in node.inputs]
        in_dims = [env[i.id][1] for i in node.inputs]
        with node_source(node.source):
            if all(d is None for d in in_dims):
                env[node.id] = (bind(prim, *vals, **node.attrs), None)
            else:
                env[node.id] = _apply_rule(prim, vals, in_dims, node, size)
    return [env[o.id] for o in graph.outputs]


def _apply_rule(prim, vals, dims, node, size):
    if prim.name in _BODY_PRIMITIVES and any(_is_eager_tensor(v) for v in vals):
        out = _through_compile(prim, vals, dims, node)
    else:
        out = _batched_node(prim, vals, dims, node)
    value, d = out
    expected = list(node.shape)
    expected.insert(d, size)
    got = aval_of(value)
    if tuple(got.shape) != tuple(expected) or np.dtype(got.dtype) != node.dtype:
        raise TracegradError(
            f"vmap: the batching rule of {prim.name} made {got} with the "
            f"batch on axis {d}; expected {node.dtype}{tuple(expected)} (a tracegrad bug)"
        )
    return value, d


def _batched_node(prim, vals, dims, node):
    rule = rule_for(prim)
    if rule is not None:
        try:
            return rule(vals, dims, **node.attrs)
        except NotImplementedError:
            pass
    return _loop_fallback(prim, vals, dims, node.attrs, node.aval)


# Primitives holding sub-graphs: bound directly on eager tensors, their eager nodes
# would not keep the operands their reverse mode re-runs the body on.
_BODY_PRIMITIVES = frozenset({"scan", "cond", "while", "call", "custom_vjp_call"})


def _is_eager_tensor(value) -> bool:
    return (
        not isinstance(value, (np.ndarray, np.generic, Tracer))
        and hasattr(value, "requires_grad")
        and hasattr(value, "detach")
    )


def _through_compile(prim, vals, dims, node):
    """The batched node as one compiled call on eager tensors: one eager node
    (CompiledFunctionBackward) whose backward is the batched node's reverse mode."""
    from tracegrad.compiler import CompiledFunction

    out_dims: list = []

    def batched_node(*values):
        value, d = _batched_node(prim, values, dims, node)
        out_dims.append(d)
        return value

    batched_node.__name__ = f"vmap_{prim.name}"
    value = CompiledFunction(batched_node, "compile", backend="interpret")(*vals)
    return value, out_dims[-1] if out_dims else 0  # (these rules all batch on axis 0)


def _innermost_context(values) -> TraceContext | None:
    stack = active_contexts()
    contexts = [v.context for v in values if isinstance(v, Tracer) and v.context in stack]
    return max(contexts, key=stack.index, default=None)


def uses_loop_fallback(graph) -> bool:
    """Whether a (traced) graph holds a scan made by vmap's per-node loop.

    >>> import numpy as np, tracegrad as tg
    >>> uses_loop_fallback(tg.trace(tg.vmap(lambda x: tg.exp(x) @ x), np.ones((4, 3))))
    False
    """
    return any(
        n.op == "scan" and n.attrs["body"].name.startswith("scan_body_vmap_") for n in graph.nodes
    )


# ----------------------------------------------------------- in/out axes


def _is_axis(spec) -> bool:
    return spec is None or isinstance(spec, (int, np.integer)) and not isinstance(spec, bool)


def _leaf_axes(spec, value, path: str, what: str) -> list:
    """One axis per array leaf of `value` (flattening order), from a prefix `spec`."""
    if _is_axis(spec):
        leaves, _ = tree_flatten(value, arrays_only_scalars=False)
        if (
            spec is not None
            and what == "in_axes"
            and len(leaves) != len(tree_flatten(value, arrays_only_scalars=True)[0])
        ):  # a Python scalar to map
            raise BatchingError(
                f"vmap was requested to map its argument along axis {spec}, "
                f"which implies that its rank should be at least "
                f"{spec + 1 if spec >= 0 else -spec}, but is only 0 (a Python "
                f"scalar in argument {path})"
            )
        paths = leaf_paths(tree_flatten(value, arrays_only_scalars=False)[1], path)
        if len(paths) != len(leaves):
            paths = [path] * len(leaves)
        return [(spec, p) for p in paths]  # (b[0], not b: JAX's names in errors)
    _, tree = tree_flatten(value, arrays_only_scalars=False)
    kind = tree.kind
    if isinstance(spec, dict) and kind == "dict" and set(spec) == set(value):
        out = []
        for key in value:
            out.extend(_leaf_axes(spec[key], value[key], f"{path}[{key!r}]", what))
        return out
    if (
        isinstance(spec, (tuple, list))
        and kind in ("tuple", "list")
        and len(spec) == len(value)
        and isinstance(spec, tuple) == isinstance(value, tuple)
    ):
        out = []
        for k, (s, v) in enumerate(zip(spec, value, strict=True)):
            out.extend(_leaf_axes(s, v, f"{path}[{k}]", what))
        return out
    spec_kind = type(spec).__name__
    detail = (
        f"different types ({spec_kind} in the specification, {kind} in the value)"
        if spec_kind != kind
        else "different numbers of children or keys"
    )
    raise BatchingError(
        f"vmap {what} specification must be a tree prefix of the corresponding "
        f"value; got specification {spec!r} for value tree {tree} at {path}. "
        f"Mismatch details: {detail}"
    )


def _check_axes_leaves(spec, what: str) -> None:
    """in_axes / out_axes: ints and None in tuples, lists and dicts (JAX's TypeErrors);
    a top-level in_axes is an int, None, or a tuple/list (one entry per argument)."""
    if what == "in_axes" and not (_is_axis(spec) or isinstance(spec, (tuple, list))):
        if not isinstance(spec, bool):
            raise BatchingError(
                "vmap in_axes must be an int, None, or a tuple of entries corresponding "
                "to the positional arguments passed to the function, but got "
                f"{spec!r}."
            )

    def bad(s) -> bool:
        if isinstance(s, dict):
            return any(bad(v) for v in s.values())
        if isinstance(s, (tuple, list)):
            return any(bad(v) for v in s)
        return not _is_axis(s)

    if bad(spec):
        raise BatchingError(
            f"vmap {what} must be an int, None, or (nested) container with those types "
            f"as leaves, but got {spec!r}."
        )


def _in_axes_per_argument(in_axes, nargs: int) -> tuple:
    if _is_axis(in_axes):
        return (in_axes,) * nargs
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple):
        raise BatchingError(
            f"vmap in_axes must be an int, None, or a tuple of entries "
            f"corresponding to the positional arguments passed to the "
            f"function, but got {in_axes!r}"
        )
    if len(in_axes) != nargs:
        raise BatchingError(
            f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
            f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
            f"len(args)={nargs} (in_axes has {len(in_axes)} entries but the function was "
            f"called with {nargs} positional arguments)"
        )
    return in_axes


def _type_of(v) -> str:
    return str(aval_of(v))


def _check_sizes(mapped: list) -> int:
    """The one batch size of the mapped leaves [(leaf, axis, name)], or JAX's error."""
    sizes = [_shape(v)[a] for v, a, _ in mapped]
    if len(set(sizes)) <= 1:
        return sizes[0]
    lines = []
    for size in dict.fromkeys(sizes):
        where = [(v, a, n) for (v, a, n), s in zip(mapped, sizes, strict=True) if s == size]
        v, a, n = where[0]
        desc = f"axis {a} of argument {n} of type {_type_of(v)}"
        if len(where) == 1:
            lines.append(f"  * one axis had size {size}: {desc}")
        else:
            lines.append(f"  * {len(where)} axes had size {size}, e.g. {desc}")
    raise BatchingError(
        "vmap got inconsistent sizes for array axes to be mapped:\n" + ";\n".join(lines)
    )


def vmap(
    fn: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None
) -> Callable:
    """JAX's `vmap`: `fn` mapped over an axis of its arguments by batching rules.

    `in_axes` is an int, None, or a tuple with one entry per positional argument,
    each an int, None or a pytree prefix of that argument (None: shared by every
    example); negative axes count from the end. `out_axes` is an int, None (the
    output must not depend on the batch) or a pytree prefix of the output.
    The batched program has no loop over the examples: `x @ w` over a batch of
    vectors is one matrix product. Primitives without a batching rule run as a
    loop over the batch of that one node (see `tracegrad.batching`).

    >>> import numpy as np, tracegrad as tg
    >>> per_example = tg.vmap(tg.grad(lambda w, x: tg.sum(w * x) ** 2, backend="interpret"),
    ...                       in_axes=(None, 0))
    >>> per_example(np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([[2., 0.],
           [0., 4.]])
    """

    _check_axes_leaves(in_axes, "in_axes")  # JAX's TypeErrors, when vmap is called
    _check_axes_leaves(out_axes, "out_axes")

    def mapped(*args, **kwargs):
        try:
            axes = _in_axes_per_argument(in_axes, len(args))
        except BatchingError as exc:
            if kwargs and isinstance(in_axes, (tuple, list)):
                raise BatchingError(
                    f"{exc}. Note that the function was called with keyword arguments "
                    f"{list(kwargs)}, which the entries of a tuple in_axes never "
                    "correspond to: keyword arguments are always mapped along their "
                    "leading axis (axis 0)"
                ) from None
            raise
        if kwargs:  # keyword arguments are mapped over their axis 0, as in JAX
            n = len(args)
            names = argument_names(fn, n) + ["kwargs"]
            inner_axes = axes + ({k: 0 for k in kwargs},)  # (names kwargs['y'] in errors)
            inner = vmap(lambda *a: fn(*a[:n], **a[n]), inner_axes, out_axes, axis_size)
            return inner.__wrapped_call__(args + (kwargs,), names)
        return _mapped_call(args, argument_names(fn, len(args)))

    def _mapped_call(args, names):
        axes = _in_axes_per_argument(in_axes, len(args))
        leaf_axes: list = []
        leaves: list = []
        for k, (spec, a) in enumerate(zip(axes, args, strict=True)):
            leaf_axes.extend(_leaf_axes(spec, a, names[k], "in_axes"))
            leaves.extend(tree_flatten(a, arrays_only_scalars=False)[0])
        mapped_leaves = []
        norm_axes = []
        for v, (ax, name) in zip(leaves, leaf_axes, strict=True):
            if ax is None:
                norm_axes.append(None)
                continue
            nd = _ndim(v)
            if not -nd <= ax < nd:
                raise BatchingError(
                    f"vmap was requested to map its argument along axis {ax}, which implies "
                    f"that its rank should be at least {ax + 1 if ax >= 0 else -ax}, but is "
                    f"only {nd} (its shape is {_shape(v)})"
                )
            norm_axes.append(int(ax) % nd)
            mapped_leaves.append((v, int(ax) % nd, name))
        if not mapped_leaves and axis_size is None:
            if not leaves:  # JAX's text for vmap(f)({})
                kwargs = args[-1] if names[-1:] == ["kwargs"] else {}
                positional = args[:-1] if names[-1:] == ["kwargs"] else args
                raise BatchingError(
                    "vmap wrapped function must be passed at least one argument "
                    "containing an array or axis_size must be specified, got empty "
                    f"*args={positional!r} and **kwargs={kwargs!r}"
                )
            raise BatchingError(
                "vmap must have at least one non-None value in in_axes or "
                "axis_size must be specified"
            )
        if axis_size is not None and mapped_leaves:
            wrong = [m for m in mapped_leaves if _shape(m[0])[m[1]] != axis_size]
            if wrong:  # JAX's text: the axis_size line, then the axes
                size = _shape(wrong[0][0])[wrong[0][1]]
                v, a, n = wrong[0]
                raise BatchingError(
                    "vmap got inconsistent sizes for array axes to be mapped:\n"
                    f"  * the `axis_size` argument was {axis_size};\n"
                    f"  * {'one axis' if len(wrong) == 1 else f'{len(wrong)} axes'} had size "
                    f"{size}: axis {a} of argument {n} of type {_type_of(v)} "
                    f"(vmap got axis_size={axis_size})"
                )
        size = _check_sizes(mapped_leaves) if mapped_leaves else int(axis_size)
        return _run(fn, args, leaves, norm_axes, size, out_axes)

    mapped.__wrapped_call__ = _mapped_call
    mapped.__name__ = f"vmap({getattr(fn, '__name__', 'f')})"
    mapped.__qualname__ = mapped.__name__
    mapped.__wrapped__ = fn
    return mapped


def _run(fn, args, leaves, axes, size, out_axes):
    avals = []
    for v, ax in zip(leaves, axes, strict=True):
        a = abstract_leaf(v)
        avals.append(a if ax is None else Aval(a.shape[:ax] + a.shape[ax + 1 :], a.dtype))
    name = f"vmap_{getattr(fn, '__name__', 'f')}".replace("<", "").replace(">", "")
    traced = trace_flat(fn, tuple(args), avals=avals, name=name)
    inputs = list(leaves) + list(traced.captures)
    dims = list(axes) + [None] * len(traced.captures)
    outs = batch_graph(traced.graph, inputs, dims, size)
    out_specs = _leaf_axes(
        out_axes, tree_unflatten(traced.out_tree, [o for o, _ in outs]), "vmap out_axes", "out_axes"
    )
    results = []
    for (value, d), (spec, _) in zip(outs, out_specs, strict=True):
        results.append(_place_output(value, d, spec, size))
    return tree_unflatten(traced.out_tree, results)


def _place_output(value, d, spec, size):
    if spec is None:
        if d is not None:
            raise BatchingError(
                f"at vmap out_axes, got axis spec None but output was batched on axis {d}"
            )
        return value
    if d is None:  # an output that does not depend on the batch: repeated, as in JAX
        value, d = T.broadcast_to(value, shape=(size,) + _shape(value)), 0
    nd = _ndim(value)
    if not -nd <= spec < nd:
        raise BatchingError(
            f"vmap out_axes {spec} is out of bounds for an output of "
            f"dimension {nd} (shape {_shape(value)} with the batch axis)"
        )
    return _moveaxis(value, d, int(spec) % nd)


# ------------------------------------------------------------ Jacobian rows


def jacobian_rows(
    flat_output: Callable,
    args: Sequence[Any],
    argnums: Sequence[int],
    dtype: Any = np.float64,
    n_out: int | None = None,
):
    """Every row of the Jacobian of `flat_output` (a function returning a 1-D array)
    at `args`, as JAX's `jacrev` builds it: one `vmap` of the pullback over the
    identity matrix. The forward pass is traced once and stays unbatched; only the
    backward pass carries the batch of output cotangents.

    Returns, per position in `argnums`, that argument's pytree with leaves shaped
    `(n_out,) + leaf.shape`, or None when the output is empty (nothing to map).
    `n_out` (the output size) saves one forward call when the caller knows it.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.batching import jacobian_rows
    >>> jacobian_rows(lambda x: x ** 2, (np.array([1.0, 3.0]),), (0,))[0]
    array([[2., 0.],
           [0., 6.]])
    """
    from tracegrad.compiler import grad
    from tracegrad.ops import api

    if n_out is None:
        n_out = int(np.prod(_shape(flat_output(*args)), dtype=np.int64))
    if n_out == 0:
        return None

    def pullback_of(ct):
        return grad(
            lambda *a: api.sum(flat_output(*a) * ct),
            argnums=tuple(argnums),
            backend="interpret",
            optimize=False,
            # complex rows: seeded with 1, the gradient is JAX's transpose of the jvp
            holomorphic="any" if np.dtype(dtype).kind == "c" else False,
        )(*args)

    return vmap(pullback_of)(np.eye(n_out, dtype=dtype))
