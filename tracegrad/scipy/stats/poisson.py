"""The Poisson distribution, as jax.scipy.stats.poisson: logpmf, pmf, cdf (k an integer
count, -inf/0 elsewhere; differentiable in mu)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.special import gammaincc, gammaln, xlogy
from tracegrad.scipy.stats._common import floats

Array = Any


def logpmf(k: Array, mu: Array, loc: Array = 0.0) -> Array:
    k, mu, loc = floats(k, mu, loc)
    x = A.subtract(k, loc)
    logp = A.subtract(A.subtract(xlogy(x, mu), gammaln(A.add(x, 1.0))), mu)
    bad = A.logical_or(A.less(x, 0), A.not_equal(A.floor(x), x))
    return A.where(bad, -np.inf, logp)


def pmf(k: Array, mu: Array, loc: Array = 0.0) -> Array:
    return A.exp(logpmf(k, mu, loc))


def cdf(k: Array, mu: Array, loc: Array = 0.0) -> Array:
    """Q(floor(k) + 1, mu), the regularized upper incomplete gamma (differentiable in mu,
    its second operand)."""
    k, mu, loc = floats(k, mu, loc)
    x = A.floor(A.subtract(k, loc))
    return A.where(A.less(x, 0), 0.0, gammaincc(A.add(A.maximum(x, 0.0), 1.0), mu))
