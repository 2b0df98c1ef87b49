"""Student's t distribution, as jax.scipy.stats.t: logpdf and pdf.

>>> from tracegrad.scipy.stats import t
>>> round(float(t.pdf(0.0, 1.0)), 6)  # Cauchy at 0: 1 / pi
0.31831
"""

from __future__ import annotations

import math
from typing import Any

from tracegrad.ops import api as A
from tracegrad.scipy.special import gammaln
from tracegrad.scipy.stats._common import floats, standardize

Array = Any


def logpdf(x: Array, df: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    z, scale = standardize(x, loc, scale)
    (df,) = floats(df)
    half = A.multiply(A.add(df, 1.0), 0.5)
    norm = A.subtract(
        A.subtract(gammaln(half), gammaln(A.multiply(df, 0.5))),
        A.add(A.multiply(0.5, A.log(A.multiply(df, math.pi))), A.log(scale)),
    )
    return A.subtract(norm, A.multiply(half, A.log1p(A.divide(A.multiply(z, z), df))))


def pdf(x: Array, df: Array, loc: Array = 0.0, scale: Array = 1.0) -> Array:
    return A.exp(logpdf(x, df, loc, scale))
