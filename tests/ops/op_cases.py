"""OpInfo-style table: one row per (primitive, operand shapes, attrs) case.

A row names the primitive, how to draw its operands, its attrs and a plain
NumPy reference. The tests run every row through: impl vs reference (float32
and float64), the dot-product vjp check against finite differences, and (where
`order2`) grad-of-grad. Adding an op adds rows here, nothing else.

Operand kinds:
  ("n", shape)          normal floats
  ("p", shape)          positive floats in [0.5, 2] (log, sqrt, pow bases)
  ("u", shape)          floats in (-0.9, 0.9) (arcsin, arccos)
  ("prob", shape)       floats in [0.05, 0.95] (ndtri)
  ("a", shape)          floats with |x| in [0.5, 2] and a random sign (away from kinks)
  ("d", shape)          distinct floats, no ties (max, min, sort-like ops)
  ("i", shape, high)    int64 indices in [0, high)
  ("ineg", shape, high) int64 indices in [-high, high)
  ("b", shape)          bools
  ("spd", shape)        symmetric positive-definite (..., n, n) matrices
  anything else         used as is (Python scalars, arrays)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracegrad.ops import linalg as L
from tracegrad.ops import special as S
from tracegrad.ops import table as T


@dataclass
class Case:
    id: str
    prim: Any
    operands: list
    attrs: dict = field(default_factory=dict)
    ref: Callable | None = None  # ref(*operands, **attrs); None: no reference check
    order2: bool = True  # also check grad-of-grad
    dtypes: tuple = ("float32", "float64")

    def draw(self, rng: np.random.Generator, dtype: str) -> list:
        return [_draw(spec, rng, dtype) for spec in self.operands]

    def __repr__(self) -> str:
        return self.id


def _draw(spec, rng, dtype):
    if not (isinstance(spec, tuple) and spec and isinstance(spec[0], str)):
        return spec
    kind, shape = spec[0], spec[1]
    if kind == "n":
        return rng.standard_normal(shape).astype(dtype)
    if kind == "p":
        return rng.uniform(0.5, 2.0, shape).astype(dtype)
    if kind == "u":  # inside (-1, 1), away from the edges (arcsin, arccos)
        return rng.uniform(-0.9, 0.9, shape).astype(dtype)
    if kind == "prob":  # probabilities away from 0 and 1 (ndtri)
        return rng.uniform(0.05, 0.95, shape).astype(dtype)
    if kind == "a":
        return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(dtype)
    if kind == "d":
        n = int(np.prod(shape))
        return (
            rng.permutation(n).reshape(shape) * 0.37 - n * 0.1 + rng.uniform(0, 0.1, shape)
        ).astype(dtype)
    if kind == "i":
        return rng.integers(0, spec[2], shape)
    if kind == "ineg":
        return rng.integers(-spec[2], spec[2], shape)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind == "spd":  # well-conditioned symmetric positive-definite matrices (linalg)
        m = rng.standard_normal(shape)
        return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)
    raise ValueError(spec)


def _scipy_special(name):
    import scipy.special

    return getattr(scipy.special, name)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _index_add_ref(g, rows, spec, shape):
    out = np.zeros(shape, g.dtype)
    for r, i in enumerate(rows):  # repeated rows accumulate
        out[i, 0:2] += g[r]
    return out


def _put_along_axis_add_ref(g, idx, axis, shape):
    out = np.zeros(shape, g.dtype)
    for r in range(idx.shape[0]):
        for c in range(idx.shape[1]):
            out[r, idx[r, c]] += g[r, c]
    return out


def _linrec_ref(a, b, axis, reverse=False):
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    out, h = np.zeros_like(b), 0.0
    for t in range(len(b) - 1, -1, -1) if reverse else range(len(b)):
        h = a[t] * h + b[t]
        out[t] = h
    return np.moveaxis(out, 0, axis)


def sl(start, stop, step=1):
    return ("slice", start, stop, step)


CASES = [
    # ---------------------------------------------------------------- arithmetic
    Case("add", T.add, [("n", (3, 4)), ("n", (3, 4))], ref=np.add),
    Case("add_bcast", T.add, [("n", (2, 1, 3)), ("n", (4, 1))], ref=np.add),
    Case("add_scalar", T.add, [("n", (3,)), 2.5], ref=np.add),
    Case("radd_scalar", T.add, [2.5, ("n", (3,))], ref=np.add),
    Case("sub_bcast", T.sub, [("n", (3, 4)), ("n", (4,))], ref=np.subtract),
    Case("rsub_scalar", T.sub, [1.0, ("n", (3,))], ref=np.subtract),
    Case("mul_bcast", T.mul, [("n", (3, 1)), ("n", (1, 4))], ref=np.multiply),
    Case("mul_scalar", T.mul, [("n", (3,)), 3.0], ref=np.multiply),
    Case("div_bcast", T.div, [("n", (3, 4)), ("a", (4,))], ref=np.divide),
    Case("rdiv_scalar", T.div, [1.0, ("a", (3,))], ref=np.divide),
    Case("neg", T.neg, [("n", (3, 4))], ref=np.negative),
    Case("pow_scalar", T.pow_, [("p", (3, 4)), 2.0], ref=np.power),
    Case("pow_int_negbase", T.pow_, [("a", (5,)), 3], ref=np.power),
    Case("pow_half", T.pow_, [("p", (5,)), 0.5], ref=np.power),
    Case("pow_zero", T.pow_, [("n", (5,)), 0], ref=np.power),
    Case("pow_tensor", T.pow_, [("p", (3, 4)), ("n", (4,))], ref=np.power),
    Case("rpow_scalar", T.pow_, [2.0, ("n", (3, 2))], ref=np.power),
    # ------------------------------------------------------ elementwise functions
    Case("exp", T.exp, [("n", (3, 4))], ref=np.exp),
    Case("log", T.log, [("p", (3, 4))], ref=np.log),
    Case("sqrt", T.sqrt, [("p", (3, 4))], ref=np.sqrt),
    Case("sin", T.sin, [("n", (3, 4))], ref=np.sin),
    Case("cos", T.cos, [("n", (3, 4))], ref=np.cos),
    Case("tanh", T.tanh, [("n", (3, 4))], ref=np.tanh),
    Case("sigmoid", T.sigmoid, [("n", (3, 4))], ref=_sigmoid),
    Case("relu", T.relu, [("a", (3, 4))], ref=lambda x: np.maximum(x, 0)),
    Case("abs", T.abs_, [("a", (3, 4))], ref=np.abs),
    Case("sign", T.sign, [("a", (3, 4))], ref=np.sign),
    Case("maximum", T.maximum, [("n", (3, 4)), ("n", (4,))], ref=np.maximum),
    Case("maximum_scalar", T.maximum, [("a", (3, 4)), 0.0], ref=np.maximum),
    Case("minimum", T.minimum, [("n", (3, 1)), ("n", (1, 4))], ref=np.minimum),
    Case("where", T.where, [("b", (3, 4)), ("n", (3, 4)), ("n", (4,))], ref=np.where),
    Case("where_scalar", T.where, [("b", (3, 4)), ("n", (3, 1)), 0.0], ref=np.where),
    Case(
        "clip",
        T.clip,
        [("a", (3, 4))],
        {"lo": -1.0, "hi": 1.0},
        ref=lambda x, lo, hi: np.clip(x, lo, hi),
    ),
    Case(
        "clip_lo",
        T.clip,
        [("a", (3, 4))],
        {"lo": 0.0, "hi": None},
        ref=lambda x, lo, hi: np.maximum(x, lo),
    ),
    Case(
        "clip_hi",
        T.clip,
        [("a", (3, 4))],
        {"lo": None, "hi": 0.0},
        ref=lambda x, lo, hi: np.minimum(x, hi),
    ),
    Case(
        "astype_f64",
        T.astype,
        [("n", (3,))],
        {"dtype": "float64"},
        ref=lambda x, dtype: x.astype(dtype),
    ),
    # NumPy coverage (issue 13): elementwise primitives
    Case("log1p", T.log1p, [("p", (3, 4))], ref=np.log1p),
    Case("expm1", T.expm1, [("n", (3, 4))], ref=np.expm1),
    Case("arcsin", T.arcsin, [("u", (3, 4))], ref=np.arcsin),
    Case("arccos", T.arccos, [("u", (3, 4))], ref=np.arccos),
    Case("arctan", T.arctan, [("n", (3, 4))], ref=np.arctan),
    Case("arctan2", T.arctan2, [("a", (3, 4)), ("a", (4,))], ref=np.arctan2),
    Case("floor", T.floor, [("a", (3, 4))], ref=np.floor),
    Case("remainder", T.remainder, [("n", (3, 4)), ("p", (4,))], ref=np.remainder),
    Case("remainder_negdiv", T.remainder, [("p", (3,)), ("a", (3,))], ref=np.remainder),
    Case("remainder_scalar", T.remainder, [("n", (3, 4)), 0.75], ref=np.remainder),
    # ---------------------------------------------------------------- reductions
    Case("sum_all", T.sum_, [("n", (3, 4))], ref=np.sum),
    Case("sum_axis", T.sum_, [("n", (2, 3, 4))], {"axis": 1}, ref=np.sum),
    Case(
        "sum_axes_keep", T.sum_, [("n", (2, 3, 4))], {"axis": (0, 2), "keepdims": True}, ref=np.sum
    ),
    Case("sum_neg_axis", T.sum_, [("n", (2, 3, 4))], {"axis": -1}, ref=np.sum),
    Case("mean_all", T.mean, [("n", (3, 4))], ref=np.mean),
    Case("mean_axis_keep", T.mean, [("n", (3, 4))], {"axis": 0, "keepdims": True}, ref=np.mean),
    Case("max_all", T.max_, [("d", (3, 4))], ref=np.max),
    Case("max_axis", T.max_, [("d", (2, 3, 4))], {"axis": 1}, ref=np.max),
    Case(
        "max_axes_keep", T.max_, [("d", (2, 3, 4))], {"axis": (0, 2), "keepdims": True}, ref=np.max
    ),
    Case("min_axis", T.min_, [("d", (3, 4))], {"axis": -1}, ref=np.min),
    Case("var_all", T.var, [("n", (3, 4))], ref=np.var),
    Case("var_axis_ddof1", T.var, [("n", (3, 4))], {"axis": 1, "ddof": 1}, ref=np.var),
    Case("var_keep", T.var, [("n", (2, 3, 4))], {"axis": (0, 1), "keepdims": True}, ref=np.var),
    Case("logsumexp_all", T.logsumexp, [("n", (3, 4))], ref=lambda x: np.log(np.sum(np.exp(x)))),
    Case(
        "logsumexp_axis",
        T.logsumexp,
        [("n", (3, 4))],
        {"axis": 1},
        ref=lambda x, axis: np.log(np.sum(np.exp(x), axis=axis)),
    ),
    Case(
        "logsumexp_keep",
        T.logsumexp,
        [("n", (2, 3, 4))],
        {"axis": (0, 2), "keepdims": True},
        ref=lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
    ),
    # ------------------------------------------------------------ softmax family
    Case("softmax_last", T.softmax, [("n", (3, 4))], {"axis": -1}, ref=_softmax),
    Case("softmax_first", T.softmax, [("n", (3, 4))], {"axis": 0}, ref=_softmax),
    Case(
        "log_softmax",
        T.log_softmax,
        [("n", (2, 3, 4))],
        {"axis": 1},
        ref=lambda x, axis: np.log(_softmax(x, axis)),
    ),
    # ---------------------------------------------------------------- shape ops
    Case("reshape", T.reshape, [("n", (3, 4))], {"shape": (2, 6)}, ref=np.reshape),
    Case("reshape_scalar", T.reshape, [("n", (1, 1))], {"shape": ()}, ref=np.reshape),
    Case(
        "broadcast_to", T.broadcast_to, [("n", (3, 1))], {"shape": (2, 3, 4)}, ref=np.broadcast_to
    ),
    Case("transpose", T.transpose, [("n", (2, 3, 4))], {"axes": (2, 0, 1)}, ref=np.transpose),
    Case("transpose_2d", T.transpose, [("n", (3, 4))], {"axes": (1, 0)}, ref=np.transpose),
    Case(
        "concatenate",
        T.concatenate,
        [("n", (2, 3)), ("n", (1, 3)), ("n", (4, 3))],
        {"axis": 0},
        ref=lambda *xs, axis: np.concatenate(xs, axis=axis),
    ),
    Case(
        "concatenate_last",
        T.concatenate,
        [("n", (2, 3)), ("n", (2, 2))],
        {"axis": -1},
        ref=lambda *xs, axis: np.concatenate(xs, axis=axis),
    ),
    # NumPy coverage (issue 13): scans along an axis
    Case(
        "cumsum",
        T.cumsum,
        [("n", (3, 4))],
        {"axis": 1},
        ref=lambda x, axis: np.cumsum(x, axis=axis),
    ),
    Case(
        "cumsum_reverse",
        T.cumsum,
        [("n", (3, 4))],
        {"axis": 0, "reverse": True},
        ref=lambda x, axis, reverse: np.cumsum(x[::-1], axis=0)[::-1],
    ),
    Case("linrec", T.linrec, [("n", (2, 5)), ("n", (2, 5))], {"axis": 1}, ref=_linrec_ref),
    Case(
        "linrec_reverse",
        T.linrec,
        [("n", (4, 3)), ("n", (4, 3))],
        {"axis": 0, "reverse": True},
        ref=_linrec_ref,
    ),
    # ------------------------------------------------------------------- linalg
    Case("cholesky", L.cholesky_p, [("spd", (3, 3))], ref=np.linalg.cholesky),
    Case(
        "cholesky_upper_batch",
        L.cholesky_p,
        [("spd", (2, 3, 3))],
        {"upper": True},
        ref=lambda a, upper: np.swapaxes(np.linalg.cholesky(a), -1, -2),
    ),
    Case(
        "triangular_solve_lower",
        L.triangular_solve_p,
        [("spd", (3, 3)), ("n", (3, 2))],
        {"lower": True},
        ref=lambda a, b, lower: np.linalg.solve(np.tril(a), b),
    ),
    Case(
        "triangular_solve_upper_trans_vec",
        L.triangular_solve_p,
        [("spd", (3, 3)), ("n", (3,))],
        {"lower": False, "trans": True},
        ref=lambda a, b, lower, trans: np.linalg.solve(np.triu(a).T, b),
    ),
    Case(
        "triangular_solve_unit_batch",
        L.triangular_solve_p,
        [("spd", (2, 3, 3)), ("n", (2, 3, 2))],
        {"lower": True, "unit_diagonal": True},
        ref=lambda a, b, lower, unit_diagonal: np.linalg.solve(np.tril(a, -1) + np.eye(3), b),
    ),
    Case(
        "triangular_matmul_lower_trans",
        L.triangular_matmul_p,
        [("n", (3, 3)), ("n", (3, 2))],
        {"lower": True, "trans": True},
        ref=lambda a, b, lower, trans: np.tril(a).T @ b,
    ),
    Case(
        "triangular_matmul_upper_vec_batch",
        L.triangular_matmul_p,
        [("n", (2, 3, 3)), ("n", (2, 3, 1))],
        {"lower": False},
        ref=lambda a, b, lower: np.triu(a) @ b,
    ),
    Case("solve", L.solve_p, [("spd", (3, 3)), ("n", (3, 2))], ref=np.linalg.solve),
    Case("solve_vec_batch", L.solve_p, [("spd", (2, 3, 3)), ("n", (3,))], ref=np.linalg.solve),
    Case("inv", L.inv_p, [("spd", (3, 3))], ref=np.linalg.inv),
    Case("det_batch", L.det_p, [("spd", (2, 3, 3))], ref=np.linalg.det),
    Case("logabsdet", L.logabsdet_p, [("spd", (3, 3))], ref=lambda a: np.linalg.slogdet(a)[1]),
    # decompositions: packed factors; float64 only (float32 LAPACK may pick other signs
    # for the vectors); random operands have distinct eigen/singular values
    Case(
        "eigh",
        L.eigh_p,
        [("n", (3, 3))],
        dtypes=("float64",),
        ref=lambda a: np.concatenate(
            [np.linalg.eigh((a + a.T) / 2)[0][None], np.linalg.eigh((a + a.T) / 2)[1]]
        ),
    ),
    Case(
        "eigvalsh_batch",
        L.eigvalsh_p,
        [("n", (2, 3, 3))],
        dtypes=("float64",),
        ref=lambda a: np.linalg.eigvalsh((a + np.swapaxes(a, -1, -2)) / 2),
    ),
    Case(
        "qr_tall",
        L.qr_p,
        [("n", (4, 3))],
        dtypes=("float64",),
        ref=lambda a: np.concatenate([np.linalg.qr(a)[0], np.linalg.qr(a)[1].T]),
    ),
    Case("qr_wide_batch", L.qr_p, [("n", (2, 2, 3))], dtypes=("float64",)),
    Case(
        "svd_tall",
        L.svd_p,
        [("n", (4, 3))],
        dtypes=("float64",),
        ref=lambda a: np.concatenate(
            [
                np.linalg.svd(a, full_matrices=False)[0],
                np.linalg.svd(a)[1][None],
                np.linalg.svd(a)[2].T,
            ]
        ),
    ),
    Case("svd_wide_batch", L.svd_p, [("n", (2, 2, 3))], dtypes=("float64",)),
    Case(
        "svdvals",
        L.svdvals_p,
        [("n", (3, 4))],
        dtypes=("float64",),
        ref=lambda a: np.linalg.svd(a, compute_uv=False),
    ),
    Case("pinv", L.pinv_p, [("n", (3, 4))], dtypes=("float64",), ref=np.linalg.pinv),
    Case(
        "lstsq",
        L.lstsq_p,
        [("n", (4, 3)), ("n", (4, 2))],
        dtypes=("float64",),
        ref=lambda a, b: np.linalg.lstsq(a, b)[0],
    ),
    # ------------------------------------------------------------------- matmul
    Case("matmul_mm", T.matmul, [("n", (3, 4)), ("n", (4, 5))], ref=np.matmul),
    Case("matmul_dot", T.matmul, [("n", (4,)), ("n", (4,))], ref=np.matmul),
    Case("matmul_mv", T.matmul, [("n", (3, 4)), ("n", (4,))], ref=np.matmul),
    Case("matmul_vm", T.matmul, [("n", (4,)), ("n", (4, 5))], ref=np.matmul),
    Case("matmul_bmm", T.matmul, [("n", (2, 3, 4)), ("n", (2, 4, 5))], ref=np.matmul),
    Case("matmul_batch_2d", T.matmul, [("n", (2, 3, 4)), ("n", (4, 5))], ref=np.matmul),
    Case("matmul_bcast_batch", T.matmul, [("n", (2, 1, 3, 4)), ("n", (5, 4, 2))], ref=np.matmul),
    Case("matmul_v_batch", T.matmul, [("n", (4,)), ("n", (2, 4, 5))], ref=np.matmul),
    Case("matmul_batch_v", T.matmul, [("n", (2, 3, 4)), ("n", (4,))], ref=np.matmul),
    Case(
        "addmm_row_bias",
        T.addmm,
        [("n", (5,)), ("n", (3, 4)), ("n", (4, 5))],
        ref=lambda b, x, y: b + x @ y,
    ),
    Case(
        "addmm_full_bias",
        T.addmm,
        [("n", (3, 5)), ("n", (3, 4)), ("n", (4, 5))],
        ref=lambda b, x, y: b + x @ y,
    ),
    Case(
        "addmm_column_bias",
        T.addmm,
        [("n", (3, 1)), ("n", (3, 4)), ("n", (4, 2))],
        ref=lambda b, x, y: b + x @ y,
    ),
    Case(
        "nll_loss_mean",
        T.nll_loss,
        [("n", (4, 5)), ("i", (4,), 5)],
        {"reduction": "mean"},
        ref=lambda lp, t, reduction: -lp[np.arange(len(t)), t].mean(),
    ),
    Case(
        "nll_loss_sum",
        T.nll_loss,
        [("n", (4, 5)), ("i", (4,), 5)],
        {"reduction": "sum"},
        ref=lambda lp, t, reduction: -lp[np.arange(len(t)), t].sum(),
    ),
    Case(
        "nll_loss_none",
        T.nll_loss,
        [("n", (3, 2)), ("i", (3,), 2)],
        {"reduction": "none"},
        ref=lambda lp, t, reduction: -lp[np.arange(len(t)), t],
    ),
    # ----------------------------------------------------------------- indexing
    Case(
        "getitem_int", T.getitem, [("n", (3, 4))], {"spec": (1, sl(0, 4))}, ref=lambda x, spec: x[1]
    ),
    Case(
        "getitem_slices",
        T.getitem,
        [("n", (5, 4))],
        {"spec": (sl(1, 4), sl(3, None, -2))},
        ref=lambda x, spec: x[1:4, ::-2],
    ),
    Case(
        "getitem_newaxis",
        T.getitem,
        [("n", (3, 4))],
        {"spec": (None, sl(0, 3), 2, None)},
        ref=lambda x, spec: x[None, :, 2, None],
    ),
    Case(
        "getitem_array_dups",
        T.getitem,
        [("n", (4, 3)), np.array([0, 2, 0, 3])],
        {"spec": (("array", 0), sl(0, 3))},
        ref=lambda x, i, spec: x[i],
    ),
    Case(
        "getitem_arrays_apart",
        T.getitem,
        [("n", (3, 4, 5)), np.array([[0, 1], [2, 2]]), np.array([4, -1])],
        {"spec": (("array", 0), sl(0, 4), ("array", 1))},
        ref=lambda x, i, j, spec: x[i, :, j],
    ),
    Case(
        "getitem_int_and_array",
        T.getitem,
        [("n", (3, 4, 5)), np.array([1, 1, 3])],
        {"spec": (sl(0, 3), ("array", 0), 2)},
        ref=lambda x, i, spec: x[:, i, 2],
    ),
    Case(
        "index_add_zeros",
        T.index_add_zeros,
        [("n", (4, 2)), np.array([0, 2, 0, 1])],
        {"spec": (("array", 0), sl(0, 2)), "shape": (3, 2)},
        ref=_index_add_ref,
    ),
    Case(
        "index_add_basic",
        T.index_add_zeros,
        [("n", (2,))],
        {"spec": (1, sl(0, 4, 2)), "shape": (3, 4)},
        ref=lambda g, spec, shape: np.pad(np.stack([g, 0 * g], 1).ravel()[None], ((1, 1), (0, 0))),
    ),
    Case(
        "take_along_axis",
        T.take_along_axis,
        [("n", (3, 4)), ("i", (3, 2), 4)],
        {"axis": 1},
        ref=lambda x, i, axis: np.take_along_axis(x, i, axis),
    ),
    Case(
        "take_along_axis_bcast",
        T.take_along_axis,
        [("n", (1, 4)), ("ineg", (3, 1), 4)],
        {"axis": 1},
        ref=lambda x, i, axis: np.take_along_axis(np.broadcast_to(x, (3, 4)), i, axis),
    ),
    Case(
        "take_along_axis_0",
        T.take_along_axis,
        [("n", (3, 4)), ("i", (5, 4), 3)],
        {"axis": 0},
        ref=lambda x, i, axis: np.take_along_axis(x, i, axis),
    ),
    Case(
        "put_along_axis_add",
        T.put_along_axis_add,
        [("n", (3, 5)), ("i", (3, 5), 4)],
        {"axis": 1, "shape": (3, 4)},
        ref=_put_along_axis_add_ref,
    ),
    # ---------------------------------------------- PyTorch's eager surface
    Case("erf", T.erf, [("n", (3, 4))], ref=lambda x: np.vectorize(__import__("math").erf)(x)),
    # ------------------------------------- special functions (tracegrad/ops/special.py)
    Case("erfinv", S.erfinv, [("u", (3, 4))], ref=lambda x: _scipy_special("erfinv")(x)),
    Case("gammaln", S.gammaln, [("p", (3, 4))], ref=lambda x: _scipy_special("gammaln")(x)),
    Case("digamma", S.digamma, [("p", (3, 4))], ref=lambda x: _scipy_special("psi")(x)),
    Case(
        "polygamma_2",
        S.polygamma,
        [("p", (3, 4))],
        {"n": 2},
        ref=lambda x, n: _scipy_special("polygamma")(n, x),
    ),
    Case("log_ndtr", S.log_ndtr, [("n", (3, 4))], ref=lambda x: _scipy_special("log_ndtr")(x)),
    # incomplete gamma/beta: differentiable in x only (the shape parameters are scalars)
    Case(
        "gammainc",
        S.gammainc,
        [2.5, ("p", (3, 4))],
        ref=lambda a, x: _scipy_special("gammainc")(a, x),
    ),
    Case(
        "gammaincc",
        S.gammaincc,
        [0.7, ("p", (3, 4))],
        ref=lambda a, x: _scipy_special("gammaincc")(a, x),
    ),
    Case(
        "betainc",
        S.betainc,
        [2.5, 0.7, ("prob", (3, 4))],
        ref=lambda a, b, x: _scipy_special("betainc")(a, b, x),
    ),
    Case(
        "ndtri",
        S.ndtri,
        [("prob", (3, 4))],
        ref=lambda x: _scipy_special("ndtri")(x),
    ),
    Case(
        "clamp_tensor",
        T.clamp_tensor,
        [("n", (3, 4)), ("n", (4,)), ("n", (3, 1))],
        {"has_lo": True, "has_hi": True},
        ref=lambda x, lo, hi, has_lo, has_hi: np.minimum(np.maximum(x, lo), hi),
        order2=False,
    ),
    Case(
        "clamp_tensor_lo",
        T.clamp_tensor,
        [("n", (3, 4)), ("n", (3, 4)), 0.0],
        {"has_lo": True, "has_hi": False},
        ref=lambda x, lo, hi, has_lo, has_hi: np.maximum(x, lo),
        order2=False,
    ),
    Case(
        "vector_norm_2",
        T.vector_norm,
        [("a", (3, 4))],
        {"ord": 2.0, "axis": (1,), "keepdims": False},
        ref=lambda x, ord, axis, keepdims: np.linalg.norm(x, axis=1),
    ),
    Case(
        "vector_norm_3_all",
        T.vector_norm,
        [("a", (3, 4))],
        {"ord": 3.0, "axis": None, "keepdims": True},
        ref=lambda x, ord, axis, keepdims: np.sum(np.abs(x) ** 3, keepdims=True) ** (1 / 3),
    ),
    Case(
        "diagonal",
        T.diagonal,
        [("n", (2, 4, 3))],
        {"offset": 1, "axis1": 1, "axis2": 2},
        ref=lambda x, offset, axis1, axis2: np.diagonal(x, offset, axis1, axis2),
    ),
    Case(
        "diagonal_scatter_zeros",
        T.diagonal_scatter_zeros,
        [("n", (3,))],
        {"offset": -1, "axis1": 0, "axis2": 1, "shape": (4, 3)},
        ref=lambda g, offset, axis1, axis2, shape: np.diag(g, -1)[:, :3],
    ),
    Case(
        "unfold",
        T.unfold,
        [("n", (2, 7, 3))],
        {"dimension": 1, "size": 3, "step": 2},  # overlapping windows
        ref=lambda x, dimension, size, step: np.lib.stride_tricks.sliding_window_view(
            x, size, axis=dimension
        )[:, ::step],
    ),
    Case(
        "unfold_backward",
        T.unfold_backward,
        [("n", (2, 3, 3, 3))],
        {"dimension": 1, "size": 3, "step": 2, "shape": (2, 7, 3)},
        ref=lambda g, dimension, size, step, shape: _unfold_backward_ref(g, step, shape),
    ),
    Case(
        "as_strided",
        T.as_strided,
        [("n", (7,))],
        {"size": (3, 2), "stride": (2, 1), "offset": 1},  # overlapping rows
        ref=lambda x, size, stride, offset: np.array(
            [[x[1 + 2 * i + j] for j in range(2)] for i in range(3)]
        ),
    ),
    Case(
        "as_strided_backward",
        T.as_strided_backward,
        [("n", (3, 2))],
        {"size": (3, 2), "stride": (2, 1), "offset": 1, "length": 7},
        ref=lambda g, size, stride, offset, length: _as_strided_backward_ref(g, length),
    ),
]


def _unfold_backward_ref(g, step, shape):
    out = np.zeros(shape, g.dtype)
    for w in range(g.shape[1]):  # window w covers rows w*step .. w*step + size - 1
        out[:, w * step : w * step + g.shape[3]] += np.moveaxis(g[:, w], -1, 1)
    return out


def _as_strided_backward_ref(g, length):
    out = np.zeros(length, g.dtype)
    for i in range(3):
        for j in range(2):
            out[1 + 2 * i + j] += g[i, j]
    return out


CASE_IDS = [c.id for c in CASES]
