"""Scalar math helpers for generated kernels, as Numba-inlinable source.

Placeholder version: libm calls (correct, not vectorized). The fast versions
replace these bodies; the names and signatures stay.
"""
from __future__ import annotations

import re

# name -> (source, names it calls)
FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {}


def _define(name: str, source: str, deps: tuple = ()) -> None:
    FUNCTIONS[name] = (source.strip("\n"), deps)


for _dt in ("f32", "f64"):
    _define(f"tg_exp_{_dt}", f"def tg_exp_{_dt}(x):\n    return np.exp(x)\n")
    _define(f"tg_log_{_dt}", f"def tg_log_{_dt}(x):\n    return np.log(x)\n")
    _define(f"tg_tanh_{_dt}", f"def tg_tanh_{_dt}(x):\n    return np.tanh(x)\n")
    _define(f"tg_sin_{_dt}", f"def tg_sin_{_dt}(x):\n    return np.sin(x)\n")
    _define(f"tg_cos_{_dt}", f"def tg_cos_{_dt}(x):\n    return np.cos(x)\n")
    _define(f"tg_sqrt_{_dt}", f"def tg_sqrt_{_dt}(x):\n    return np.sqrt(x)\n")
    _define(f"tg_sigmoid_{_dt}",
            f"def tg_sigmoid_{_dt}(x):\n    e = np.exp(-abs(x))\n"
            f"    s = 1 / (1 + e)\n    return s if x >= 0 else (1 - s if x == x else x)\n")

_define("tg_pow", "def tg_pow(x, y):\n    return x ** y\n")
_define("tg_relu", "def tg_relu(x):\n    return x if x > 0 else x * 0\n")
_define("tg_sign", "def tg_sign(x):\n    return np.sign(x)\n")
_define("tg_maximum", "def tg_maximum(x, y):\n"
        "    return x if (x >= y or x != x) else y\n")
_define("tg_minimum", "def tg_minimum(x, y):\n"
        "    return x if (x <= y or x != x) else y\n")
_define("tg_where", "def tg_where(c, x, y):\n    return x if c else y\n")
_define("tg_isfinite", "def tg_isfinite(x):\n    return np.isfinite(x)\n")

_CALL = re.compile(r"\b(tg_\w+)\(")


def specialize(expr: str, dtype_short: str) -> str:
    """Point `tg_exp(` at the dtype's version (`tg_exp_f32(`) when there is one."""
    def repl(m):
        name = m.group(1)
        typed = f"{name}_{dtype_short}"
        return f"{typed}(" if typed in FUNCTIONS else m.group(0)
    return _CALL.sub(repl, expr)


def helpers_used(exprs) -> list[str]:
    """All helper names the expressions call, dependencies first."""
    order: list[str] = []

    def visit(name):
        if name in order or name not in FUNCTIONS:
            return
        for dep in FUNCTIONS[name][1]:
            visit(dep)
        order.append(name)

    for e in exprs:
        for name in _CALL.findall(e):
            visit(name)
    return order
