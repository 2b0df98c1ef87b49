"""The CUDA kernels' math: device functions for the names the rule table's code
templates call (tg_* helpers, and the np.* functions plan.cuda_expr renames).
CUDA's libdevice gives these accurately (tanhf, expf, ...), so each is one call;
NVVM inlines them. The guards keep the simulator (Python's math) to NumPy's values.
Source text, compiled into every kernel's namespace by runtime.py.
"""

from __future__ import annotations

import re

PRELUDE = """
import math
import numpy as np
from numba import cuda


@cuda.jit(device=True)
def tg_exp(x):
    return np.inf if x >= 709.0 else math.exp(x)  # (the simulator's math.exp raises)


@cuda.jit(device=True)
def tg_log(x):
    return math.log(x) if x > 0 else (-np.inf if x == 0 else np.nan)


@cuda.jit(device=True)
def tg_log1p(x):
    return math.log1p(x) if x > -1 else (-np.inf if x == -1 else np.nan)


@cuda.jit(device=True)
def tg_tanh(x):
    return math.tanh(x)


@cuda.jit(device=True)
def tg_sin(x):
    return math.sin(x)


@cuda.jit(device=True)
def tg_cos(x):
    return math.cos(x)


@cuda.jit(device=True)
def tg_sqrt(x):
    return math.sqrt(x) if x >= 0 else np.nan


@cuda.jit(device=True)
def tg_expm1(x):
    return np.inf if x >= 709.0 else math.expm1(x)


@cuda.jit(device=True)
def tg_floor(x):
    return math.floor(x) if abs(x) < 4.5e15 else x  # (math.floor gives an integer)


@cuda.jit(device=True)
def tg_arccos(x):
    return math.acos(x) if -1 <= x <= 1 else np.nan


@cuda.jit(device=True)
def tg_arcsin(x):
    return math.asin(x) if -1 <= x <= 1 else np.nan


@cuda.jit(device=True)
def tg_arctan(x):
    return math.atan(x)


@cuda.jit(device=True)
def tg_arctan2(y, x):
    return math.atan2(y, x)


@cuda.jit(device=True)
def tg_sigmoid(x):
    if x >= 0:
        return 1 / (1 + math.exp(-x))
    t = math.exp(x)
    return t / (1 + t)


@cuda.jit(device=True)
def tg_relu(x):
    return x if (x > 0) or (x != x) else 0  # +0.0, as NumPy (x - x is nan at -inf)


@cuda.jit(device=True)
def tg_maximum(x, y):
    return x if ((x >= y) or (x != x)) else y


@cuda.jit(device=True)
def tg_minimum(x, y):
    return x if ((x <= y) or (x != x)) else y


@cuda.jit(device=True)
def tg_where(c, x, y):
    return x if c else y


@cuda.jit(device=True)
def tg_isfinite(x):
    return abs(x) < np.inf


@cuda.jit(device=True)
def tg_sign(x):
    return 1.0 if x > 0 else (-1.0 if x < 0 else x)


@cuda.jit(device=True)
def tg_remainder(x, y):
    return x % y


@cuda.jit(device=True)
def tg_pow(x, y):
    return x ** y
"""

# The helper names a kernel may call; a template calling another one has no CUDA form.
HELPERS = frozenset(re.findall(r"^def (tg_\w+)\(", PRELUDE, re.M))
