"""The Bernoulli distribution, as jax.scipy.stats.bernoulli: logpmf, pmf, cdf
(differentiable in p)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.special import xlog1py, xlogy
from tracegrad.scipy.stats._common import floats

Array = Any


def logpmf(k: Array, p: Array, loc: Array = 0.0) -> Array:
    k, p, loc = floats(k, p, loc)
    x = A.subtract(k, loc)
    logp = A.add(xlogy(x, p), xlog1py(A.subtract(1.0, x), A.negative(p)))
    valid = A.logical_or(A.equal(x, 0), A.equal(x, 1))
    return A.where(valid, logp, -np.inf)


def pmf(k: Array, p: Array, loc: Array = 0.0) -> Array:
    return A.exp(logpmf(k, p, loc))


def cdf(k: Array, p: Array, loc: Array = 0.0) -> Array:
    k, p, loc = floats(k, p, loc)
    x = A.subtract(k, loc)
    one_minus = A.broadcast_to(A.subtract(1.0, p), np.broadcast_shapes(np.shape(x), np.shape(p)))
    return A.where(A.less(x, 0), 0.0, A.where(A.less(x, 1), one_minus, 1.0))
