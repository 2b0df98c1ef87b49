"""The Dirichlet distribution, as jax.scipy.stats.dirichlet: logpdf and pdf.

x holds the k components along its first axis (x.shape[0] is k, or k - 1 with the last
component 1 - sum); alpha has shape (k,). Off the simplex the log density is -inf.

    >>> import numpy as np
    >>> from tracegrad.scipy.stats import dirichlet
    >>> round(float(dirichlet.pdf(np.array([0.2, 0.8]), np.array([2.0, 1.0]))), 6)  # 2 x0
    0.4
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.ops.core import ShapeError, user_location_suffix
from tracegrad.scipy.special import gammaln, xlogy
from tracegrad.scipy.stats._common import floats

Array = Any


def _is_simplex(x):
    on = A.less(A.abs(A.subtract(A.sum(x, axis=0), 1.0)), 1e-6)
    return A.logical_and(A.all(A.greater_equal(x, 0), axis=0), on)


def logpdf(x: Array, alpha: Array) -> Array:
    x, alpha = floats(x, alpha)
    k = np.shape(alpha)
    if len(k) != 1 or np.shape(x)[:1] not in ((k[0],), (k[0] - 1,)):
        raise ShapeError(
            f"dirichlet.logpdf: alpha must have shape (k,) and x k or k - 1 entries along "
            f"its first axis, got x {list(np.shape(x))}, alpha {list(k)}" + user_location_suffix()
        )
    if np.shape(x)[0] != k[0]:
        last = A.subtract(1.0, A.sum(x, axis=0, keepdims=True))
        x = A.concatenate([x, last], axis=0)
    normalizer = A.subtract(A.sum(gammaln(alpha)), gammaln(A.sum(alpha)))
    if len(np.shape(x)) > 1:
        alpha = A.reshape(alpha, k + (1,) * (len(np.shape(x)) - 1))
    logp = A.subtract(A.sum(xlogy(A.subtract(alpha, 1.0), x), axis=0), normalizer)
    return A.where(_is_simplex(x), logp, -np.inf)


def pdf(x: Array, alpha: Array) -> Array:
    return A.exp(logpdf(x, alpha))
