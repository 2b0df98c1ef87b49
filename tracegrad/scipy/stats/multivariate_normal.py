"""The multivariate normal distribution, as jax.scipy.stats.multivariate_normal: logpdf,
pdf and entropy.

x has shape (..., n) (a batch of points), mean (n,) (or broadcastable), cov (n, n)
positive definite: its Cholesky factor gives the solve and the log-determinant.

    >>> import numpy as np
    >>> from tracegrad.scipy.stats import multivariate_normal as mvn
    >>> round(float(mvn.logpdf(np.zeros(2), np.zeros(2), np.eye(2))), 6)  # -log(2 pi)
    -1.837877
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.ops.core import ShapeError, user_location_suffix
from tracegrad.scipy.stats._common import floats

Array = Any
_LOG_2PI = math.log(2 * math.pi)


def logpdf(x: Array, mean: Array, cov: Array, allow_singular: None = None) -> Array:
    x, mean, cov = floats(x, mean, cov)
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True")
    if len(np.shape(cov)) == 0 or len(np.shape(cov)) == 1:  # a variance or a diagonal
        cov = A.multiply(np.eye(np.shape(x)[-1] if np.shape(x) else 1), cov)
    n = np.shape(cov)[-1]
    if np.shape(cov) != (n, n) or (np.shape(x) and np.shape(x)[-1] != n):
        raise ShapeError(
            f"multivariate_normal.logpdf: cov must be (n, n) and x (..., n), got x "
            f"{list(np.shape(x))}, mean {list(np.shape(mean))}, cov {list(np.shape(cov))}"
            + user_location_suffix()
        )
    chol = A.linalg.cholesky(cov)
    diff = A.subtract(x, mean)
    flat = A.reshape(diff, (-1, n))
    y = A.linalg.solve_triangular(chol, A.transpose(flat), lower=True)  # (n, m)
    quad = A.reshape(A.sum(A.multiply(y, y), axis=0), np.shape(diff)[:-1])
    logdet = A.multiply(2.0, A.sum(A.log(A.diagonal(chol))))
    return A.multiply(-0.5, A.add(A.add(quad, logdet), n * _LOG_2PI))


def pdf(x: Array, mean: Array, cov: Array) -> Array:
    return A.exp(logpdf(x, mean, cov))


def entropy(mean: Array, cov: Array) -> Array:
    """0.5 * n * (1 + log(2 pi)) + 0.5 * log det(cov)."""
    (cov,) = floats(cov)
    n = np.shape(cov)[-1]
    logdet = A.multiply(2.0, A.sum(A.log(A.diagonal(A.linalg.cholesky(cov)))))
    return A.add(0.5 * n * (1.0 + _LOG_2PI), A.multiply(0.5, logdet))
