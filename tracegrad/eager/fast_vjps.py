"""Eager backward's NumPy shortcuts for a few hot rules.

The rule table's vjps are written in tracegrad ops, so one rule serves eager
backward, tracing, and grad of grad. When eager backward runs without
`create_graph`, every value is a NumPy array, and for a few hot ops calling NumPy
directly skips `bind`'s dispatch and gives the same result. Those shortcuts
belong to the eager engine, not to the rules: they live here, keyed by the
primitive, one per operand (None: use the rule). A shortcut returns
NotImplemented when its fast case does not apply.

    >>> import numpy as np
    >>> from tracegrad.ops import table as T
    >>> FAST_VJPS[T.relu][0](np.ones(2), np.array([0.0, 2.0]), None)
    array([0., 1.])
"""

from __future__ import annotations

import numpy as np

from tracegrad.ops import table as T


def _relu(g, out, x):
    if type(g) is np.ndarray and type(out) is np.ndarray:
        return np.where(out <= 0, 0, g)
    return NotImplemented


def _plain_matrices(g, x, y) -> bool:
    return (
        type(g) is np.ndarray
        and type(x) is np.ndarray
        and type(y) is np.ndarray
        and x.ndim == 2
        and y.ndim == 2
    )


def _matmul_x(g, out, x, y):
    return np.matmul(g, y.T) if _plain_matrices(g, x, y) else NotImplemented


def _matmul_y(g, out, x, y):
    return np.matmul(x.T, g) if _plain_matrices(g, x, y) else NotImplemented


def _nll_loss(g, out, logp, target, reduction):
    if type(g) is not np.ndarray or type(target) is not np.ndarray:
        return NotImplemented
    n, c = logp.shape
    grad = np.zeros((n, c), dtype=g.dtype)
    scale = -1.0 / n if reduction == "mean" else -1.0
    grad[np.arange(n), target] = g if reduction == "none" else g * scale
    if reduction == "none":
        np.negative(grad, out=grad)
    return grad


FAST_VJPS = {
    T.relu: (_relu,),
    T.matmul: (_matmul_x, _matmul_y),
    T.nll_loss: (_nll_loss, None),
}
