"""Helpers the distributions share."""

from __future__ import annotations

import numpy as np

from tracegrad.ops import api as A
from tracegrad.scipy.special import _float


def floats(*values):
    """The arguments as floating-point values (Python numbers in float64)."""
    return tuple(_float(v) for v in values)


def standardize(x, loc, scale):
    x, loc, scale = floats(x, loc, scale)
    return A.divide(A.subtract(x, loc), scale), scale


def nan_where(bad, value):
    """`value`, nan where `bad` (an invalid parameter, as SciPy and JAX give)."""
    return A.where(bad, np.nan, value)
