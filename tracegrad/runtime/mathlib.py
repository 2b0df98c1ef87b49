"""Fast scalar math for generated kernels, as source that Numba compiles inline.

Why: inside an njit loop `np.tanh(x[i])` is a scalar libm call, which LLVM
cannot vectorize (PyPI's llvmlite has no SVML): 1M float32 tanh take ~15 ms,
against 0.2 ms for NumPy's SIMD ufunc. These helpers are straight-line
arithmetic plus `select`s (no branches, no calls), so once LLVM inlines them
into a fused loop the whole loop vectorizes.

What each computes, and how accurately (tests/codegen/test_mathlib.py checks
dense grids and the edges 0, -0, tiny, subnormal, huge, +-inf, nan):

  exp, tanh, sigmoid, log,  float64: <= 1e-14 relative (measured ~2e-16);
  log1p                     float32: computed natively in float32 (Cephes
                            single-precision polynomials, float32 reductions)
                            so loops get twice the SIMD lanes: <= 2 ulp from
                            the correctly rounded value (measured: exp, log,
                            tanh 1 ulp; sigmoid 2 ulp for x < 0).
  sin, cos                  Cody-Waite reduction by pi/2 in three parts, exact
                            enough for |x| <= 1e6; polynomials on |r| <= pi/4.
                            Beyond 1e6 (or inf) the code generator re-runs the
                            fused loop with libm (`tg_sin_exact_*`): see
                            fused.py ("guarded" helpers). Same bounds as above
                            (float32: the reduction stays in float64, the
                            polynomials are float32; measured <= 2 ulp).
  sqrt                      the hardware instruction (vectorizes already).

Method: exp uses k = round(x/ln2), r = x - k*ln2 (two-part ln2), a Taylor
polynomial for exp(r) on |r| <= ln2/2, and 2**k built from bits in two halves
(so overflow gives inf and subnormal results round once). log splits x into
2**e * m with m in [sqrt(1/2), sqrt(2)) from the bits and sums the atanh series
of s = (m-1)/(m+1). tanh uses Cephes' rational form for |x| < 0.625 and
1 - 2/(exp(2|x|)+1) above. sigmoid is 1/(1+t) or t/(1+t) with t = exp(-|x|),
accurate in both tails. The helpers are inlined into kernels compiled with
fast-math (reassociation allowed), so the steps whose order matters (the
Cody-Waite reductions and the two-step 2**k scaling) are intrinsics that emit
plain IEEE operations: tg_cw2, tg_cw3, tg_scale2 (float32: tg_cw2_f32,
tg_scale2_f32). The float32 helpers follow Cephes' expf/logf/tanhf/sinf/cosf
polynomials with the same structure, all in float32 except sin/cos's reduction.
"""

from __future__ import annotations

import re

# name -> (source, names it calls)
FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {}

# Math helpers are compiled without 'reassoc'/'nsz': see the module doc.
HELPER_FASTMATH = {"contract"}
# |x| above which tg_sin/tg_cos's reduction is not exact: the loop is re-run with libm.
TRIG_LIMIT = 1.0e6
GUARDED = {"tg_sin": "tg_sin_exact", "tg_cos": "tg_cos_exact"}


def _define(name: str, source: str, deps: tuple = ()) -> None:
    FUNCTIONS[name] = (source.strip("\n"), tuple(deps))


def _horner(var: str, coeffs: list[float]) -> str:
    """c0 + var*(c1 + var*(c2 + ...)), as source."""
    expr = repr(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        expr = f"{c!r} + {var} * ({expr})"
    return expr


def _factorials(n: int) -> list[float]:
    out, f = [], 1.0
    for i in range(n + 1):
        if i:
            f *= i
        out.append(1.0 / f)
    return out


# ------------------------------------------------------------------ exp


def _exp_source(name: str, degree: int) -> str:
    poly = _horner("r", _factorials(degree))
    return f"""
def {name}(x):
    # exp(x) = 2**k * exp(r), k = round(x / ln2), |r| <= ln2/2
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -746.0 else -746.0
    k = np.floor(xc * 1.4426950408889634 + 0.5)
    r = tg_cw2(xc, k, 0.6931471803691238, 1.9082149292705877e-10)
    p = {poly}
    ki = np.int64(k)
    k1 = ki >> 1
    y = tg_scale2(p, k1, ki - k1)
    return y if x == x else x
"""


_define("_exp64", _exp_source("_exp64", 13))
_define("tg_exp_f64", "def tg_exp_f64(x):\n    return _exp64(x)\n", ("_exp64",))

# ------------------------------------------------------------------ log


def _log_source(name: str, terms: int) -> str:
    # 2*atanh(s) = 2*(s + s^3/3 + s^5/5 + ...)
    coeffs = [2.0 / (2 * i + 1) for i in range(terms)]
    poly = _horner("z", coeffs)
    return f"""
def {name}(x):
    tiny = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if tiny else x
    bits = tg_bits_from_f64(xs)
    e = ((bits >> 52) & 0x7ff) - (1077 if tiny else 1023)
    m = tg_f64_from_bits((bits & 0xfffffffffffff) | 0x3ff0000000000000)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    fe = np.float64(e)
    y = fe * 0.6931471803691238 + (fe * 1.9082149292705877e-10 + s * ({poly}))
    y = -np.inf if x == 0.0 else y
    y = np.nan if x < 0.0 else y
    return x if ((x != x) | (x == np.inf)) else y
"""


_define("_log64", _log_source("_log64", 12))
_define("tg_log_f64", "def tg_log_f64(x):\n    return _log64(x)\n", ("_log64",))

# log1p(x) = log(u) * x / (u - 1) for u = 1 + x rounded (Goldberg): the rounding error
# of u cancels, so it is as exact as log near 1. u - 1 goes through tg_cw2 (1*1, then
# 1*0) because the kernel's fast-math would fold (1 + x) - 1 to x. Past 2**53 (2**24),
# where u - 1 = x, it is log(u): fast-math may compute (log(u) * x) / d, which overflows.
_define(
    "tg_log1p_f64",
    """
def tg_log1p_f64(x):
    u = 1.0 + x
    d = tg_cw2(u, 1.0, 1.0, 0.0)
    lu = _log64(u)
    y = lu * (x / d)
    y = lu if x > 9007199254740992.0 else y
    y = x if d == 0.0 else y
    return x if x == np.inf else y
""",
    ("_log64",),
)

# ------------------------------------------------------------------ tanh

_TANH_P = "(-0.964399179425052238628 * z - 99.2877231001918586564) * z - 1614.68768441708447952"
_TANH_Q = "((z + 112.811678491632931402) * z + 2235.48839060100448583) * z + 4844.06305325125486048"


def _tanh_source(name: str, exp_name: str) -> str:
    return f"""
def {name}(x):
    a = abs(x)
    z = x * x
    small = x + x * z * (({_TANH_P}) / ({_TANH_Q}))
    e = {exp_name}(2.0 * (a if a < 40.0 else 40.0))
    big = 1.0 - 2.0 / (e + 1.0)
    big = big if x >= 0.0 else -big
    y = small if a < 0.625 else big
    return x if ((a < 1e-9) | (x != x)) else y
"""


_define("_tanh64", _tanh_source("_tanh64", "_exp64"), ("_exp64",))
_define("tg_tanh_f64", "def tg_tanh_f64(x):\n    return _tanh64(x)\n", ("_tanh64",))

# ------------------------------------------------------------------ sigmoid


def _sigmoid_source(name: str, exp_name: str) -> str:
    return f"""
def {name}(x):
    t = {exp_name}(-abs(x))
    y = 1.0 / (1.0 + t) if x >= 0.0 else t / (1.0 + t)
    return y if x == x else x
"""


_define("_sigmoid64", _sigmoid_source("_sigmoid64", "_exp64"), ("_exp64",))
_define("tg_sigmoid_f64", "def tg_sigmoid_f64(x):\n    return _sigmoid64(x)\n", ("_sigmoid64",))

# ------------------------------------------------------------------ sin, cos


def _trig_source(name: str, sin_terms: int, cos_terms: int, want: str) -> str:
    # sin r = r * (1 - z/3! + z^2/5! ...), cos r = 1 - z/2! + z^2/4! ...
    f = _factorials(2 * max(sin_terms, cos_terms) + 2)
    sin_poly = _horner("z", [(-1) ** i * f[2 * i + 1] for i in range(sin_terms)])
    cos_poly = _horner("z", [(-1) ** i * f[2 * i] for i in range(cos_terms)])
    if want == "sin":
        tail = """    w = c if (q & 1) else s
    y = -w if (q & 2) else w
    y = -y if x < 0.0 else y
    y = x if a < 1e-9 else y"""
    else:
        tail = """    w = s if (q & 1) else c
    y = -w if ((q + 1) & 2) else w"""
    return f"""
def {name}(x):
    a = abs(x)
    ac = a if a < 1.0e7 else 0.0
    k = np.floor(ac * 0.6366197723675814 + 0.5)
    r = tg_cw3(ac, k, 1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21)
    z = r * r
    s = r * ({sin_poly})
    c = {cos_poly}
    q = np.int64(k) & 3
{tail}
    return y if a <= 1.7976931348623157e308 else x - x
"""


for _fn in ("sin", "cos"):
    _define(f"_{_fn}64", _trig_source(f"_{_fn}64", 9, 10, _fn))
    _define(f"tg_{_fn}_f64", f"def tg_{_fn}_f64(x):\n    return _{_fn}64(x)\n", (f"_{_fn}64",))
    _define(f"tg_{_fn}_exact_f64", f"def tg_{_fn}_exact_f64(x):\n    return np.{_fn}(x)\n")
    _define(
        f"tg_{_fn}_exact_f32",
        f"def tg_{_fn}_exact_f32(x):\n    return np.float32(np.{_fn}(np.float64(x)))\n",
    )

# ------------------------------------------------ native float32 versions
# float32 kernels compute float32 math in float32: twice the SIMD lanes of
# the float64 helpers above. Every constant is spelled np.float32(...) (a bare
# Python float would promote the arithmetic to float64). Cephes' single
# precision polynomials; sin/cos keep the float64 Cody-Waite reduction (exact
# up to TRIG_LIMIT) and evaluate the polynomials in float32: a three-part
# float32 reduction (no FMA) measured 478 ulp off at x = 505.8, just next to
# a multiple of pi/2, already for |x| < 1024.


def _f(c: float) -> str:
    return f"np.float32({float(c)!r})"


def _horner32(var: str, coeffs: list[float]) -> str:
    expr = _f(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        expr = f"{_f(c)} + {var} * ({expr})"
    return expr


# exp(r) - 1 - r = r^2 * P(r) on |r| <= ln2/2 (Cephes expf)
_EXPF_P = [
    5.0000001201e-1,
    1.6666665459e-1,
    4.1665795894e-2,
    8.3334519073e-3,
    1.3981999507e-3,
    1.9875691500e-4,
]

_define(
    "_exp32",
    f"""
def _exp32(x):
    # exp(x) = 2**k * exp(r), k = round(x / ln2); 88.8 overflows, -104 underflows to 0
    xc = x if x < {_f(88.8)} else {_f(88.8)}
    xc = xc if xc > {_f(-104.0)} else {_f(-104.0)}
    k = np.floor(xc * {_f(1.4426950408889634)} + {_f(0.5)})
    r = tg_cw2_f32(xc, k, {_f(0.693359375)}, {_f(-2.12194440e-4)})
    p = r * r * ({_horner32("r", _EXPF_P)}) + r + {_f(1.0)}
    ki = np.int32(k)
    k1 = ki >> np.int32(1)
    y = tg_scale2_f32(p, k1, ki - k1)
    return y if x == x else x
""",
)
_define("tg_exp_f32", "def tg_exp_f32(x):\n    return _exp32(x)\n", ("_exp32",))

# log(1+f) = f - f^2/2 + f^3*P(f), f = m - 1 in [sqrt(1/2)-1, sqrt(2)-1) (Cephes logf)
_LOGF_P = [
    3.3333331174e-1,
    -2.4999993993e-1,
    2.0000714765e-1,
    -1.6668057665e-1,
    1.4249322787e-1,
    -1.2420140846e-1,
    1.1676998740e-1,
    -1.1514610310e-1,
    7.0376836292e-2,
]
_define(
    "_log32",
    f"""
def _log32(x):
    tiny = x < {_f(1.1754943508222875e-38)}
    xs = x * {_f(33554432.0)} if tiny else x
    bits = tg_bits_from_f32(xs)
    e = ((bits >> np.int32(23)) & np.int32(255)) - (np.int32(152) if tiny else np.int32(127))
    m = tg_f32_from_bits((bits & np.int32(8388607)) | np.int32(1065353216))
    big = m > {_f(1.4142135623730951)}
    m = m * {_f(0.5)} if big else m
    e = e + np.int32(1) if big else e
    f = m - {_f(1.0)}
    z = f * f
    fe = np.float32(e)
    y = f * z * ({_horner32("f", _LOGF_P)}) + fe * {_f(-2.12194440e-4)} - {_f(0.5)} * z
    y = (f + y) + fe * {_f(0.693359375)}
    y = np.float32(-np.inf) if x == {_f(0.0)} else y
    y = np.float32(np.nan) if x < {_f(0.0)} else y
    return x if ((x != x) | (x == np.float32(np.inf))) else y
""",
)
_define("tg_log_f32", "def tg_log_f32(x):\n    return _log32(x)\n", ("_log32",))
_define(
    "tg_log1p_f32",
    f"""
def tg_log1p_f32(x):
    u = {_f(1.0)} + x
    d = tg_cw2_f32(u, {_f(1.0)}, {_f(1.0)}, {_f(0.0)})
    lu = _log32(u)
    y = lu * (x / d)
    y = lu if x > {_f(16777216.0)} else y
    y = x if d == {_f(0.0)} else y
    return x if x == np.float32(np.inf) else y
""",
    ("_log32",),
)

# tanh(x) = x + x*z*P(z) for |x| < 0.625 (Cephes tanhf), else 1 - 2/(exp(2|x|)+1)
_TANHF_P = [
    -3.33332819422e-1,
    1.33314422036e-1,
    -5.37397155531e-2,
    2.06390887954e-2,
    -5.70498872745e-3,
]
_define(
    "_tanh32",
    f"""
def _tanh32(x):
    a = abs(x)
    z = x * x
    small = x + x * z * ({_horner32("z", _TANHF_P)})
    e = _exp32({_f(2.0)} * (a if a < {_f(10.0)} else {_f(10.0)}))
    big = {_f(1.0)} - {_f(2.0)} / (e + {_f(1.0)})
    big = big if x >= {_f(0.0)} else -big
    y = small if a < {_f(0.625)} else big
    return x if ((a < {_f(1e-9)}) | (x != x)) else y  # keeps -0.0
""",
    ("_exp32",),
)
_define("tg_tanh_f32", "def tg_tanh_f32(x):\n    return _tanh32(x)\n", ("_tanh32",))

_define(
    "_sigmoid32",
    f"""
def _sigmoid32(x):
    t = _exp32(-abs(x))
    y = {_f(1.0)} / ({_f(1.0)} + t) if x >= {_f(0.0)} else t / ({_f(1.0)} + t)
    return y if x == x else x
""",
    ("_exp32",),
)
_define("tg_sigmoid_f32", "def tg_sigmoid_f32(x):\n    return _sigmoid32(x)\n", ("_sigmoid32",))

# sin r = r + r*z*S(z), cos r = 1 - z/2 + z*z*C(z) on |r| <= pi/4 (Cephes sinf/cosf)
_SINF_S = [-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4]
_COSF_C = [4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5]


def _trig32_source(name: str, want: str) -> str:
    if want == "sin":
        tail = (
            f"    w = c if (q & 1) else s\n    y = -w if (q & 2) else w\n"
            f"    y = -y if x < {_f(0.0)} else y\n    y = x if a < {_f(1e-9)} else y"
        )
    else:
        tail = "    w = s if (q & 1) else c\n    y = -w if ((q + 1) & 2) else w"
    return f"""
def {name}(x):
    a = abs(x)
    ad = np.float64(a)
    ac = ad if ad < 1.0e7 else 0.0
    k = np.floor(ac * 0.6366197723675814 + 0.5)
    r = np.float32(tg_cw3(ac, k, 1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21))
    z = r * r
    s = r + r * z * ({_horner32("z", _SINF_S)})
    c = {_f(1.0)} - {_f(0.5)} * z + z * z * ({_horner32("z", _COSF_C)})
    q = np.int32(k) & np.int32(3)  # int32: AVX2 has no vector float64 -> int64 conversion
{tail}
    return y if a <= {_f(3.4028234663852886e38)} else x - x
"""


for _fn in ("sin", "cos"):
    _define(f"_{_fn}32", _trig32_source(f"_{_fn}32", _fn))
    _define(f"tg_{_fn}_f32", f"def tg_{_fn}_f32(x):\n    return _{_fn}32(x)\n", (f"_{_fn}32",))

# ------------------------------------------------------------------ the rest

for _dt in ("f32", "f64"):
    _define(f"tg_sqrt_{_dt}", f"def tg_sqrt_{_dt}(x):\n    return np.sqrt(x)\n")

# complex scalars (issue 26): Numba's own complex math (np.exp ... on complex values)
for _dt in ("c64", "c128"):
    for _fn in ("exp", "log", "log1p", "sqrt", "sin", "cos", "tanh"):
        _define(f"tg_{_fn}_{_dt}", f"def tg_{_fn}_{_dt}(x):\n    return np.{_fn}(x)\n")
    _define(f"tg_sigmoid_{_dt}", f"def tg_sigmoid_{_dt}(x):\n    return 1 / (1 + np.exp(-x))\n")
    for _fn in ("sin", "cos"):  # (the libm-exact variants a guarded loop re-runs with)
        _define(f"tg_{_fn}_exact_{_dt}", f"def tg_{_fn}_exact_{_dt}(x):\n    return np.{_fn}(x)\n")

# Tiny helpers are expanded inline by the code generator (see INLINE); these
# definitions serve anything that still calls them by name.
_define("tg_pow", "def tg_pow(x, y):\n    return x ** y\n")
# relu(-1) is +0.0 as in NumPy and PyTorch (x * 0 would give -0.0); NaN propagates
_define("tg_relu", "def tg_relu(x):\n    return x if (x > 0) | (x != x) else 0\n")
_define("tg_sign", "def tg_sign(x):\n    return np.sign(x)\n")
_define("tg_maximum", "def tg_maximum(x, y):\n    return x if (x >= y or x != x) else y\n")
_define("tg_minimum", "def tg_minimum(x, y):\n    return x if (x <= y or x != x) else y\n")
_define("tg_where", "def tg_where(c, x, y):\n    return x if c else y\n")
_define("tg_isfinite", "def tg_isfinite(x):\n    return np.isfinite(x)\n")

# Helpers short enough to expand in place: no separate function to compile.
# Each operand appears in the expansion as given; the generator only passes
# plain names, literals and array loads, so repeating them is free.
INLINE = {
    "tg_relu": "({0} if ({0} > 0) | ({0} != {0}) else 0)",
    "tg_where": "({1} if {0} else {2})",
    "tg_maximum": "({0} if (({0} >= {1}) | ({0} != {0})) else {1})",
    "tg_minimum": "({0} if (({0} <= {1}) | ({0} != {0})) else {1})",
    "tg_sqrt_f32": "np.sqrt({0})",
    "tg_sqrt_f64": "np.sqrt({0})",
    "tg_isfinite": "(abs({0}) < np.inf)",
}

_CALL = re.compile(r"\b(tg_\w+)\(")


def specialize(expr: str, dtype_short: str, exact: bool = False) -> str:
    """Point `tg_exp(` at the dtype's version (`tg_exp_f32(`) when there is one;
    with `exact`, guarded helpers (sin, cos) at their libm versions."""

    def repl(m):
        name = m.group(1)
        if exact and name in GUARDED:
            name = GUARDED[name]
        typed = f"{name}_{dtype_short}"
        return f"{typed}(" if typed in FUNCTIONS else f"{name}("

    return _CALL.sub(repl, expr)


def is_guarded(template: str) -> bool:
    return any(re.search(rf"\b{g}\(", template) for g in GUARDED)


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


INTRINSICS = (
    "tg_f64_from_bits",
    "tg_bits_from_f64",
    "tg_cw2",
    "tg_cw3",
    "tg_scale2",
    "tg_f32_from_bits",
    "tg_bits_from_f32",
    "tg_cw2_f32",
    "tg_scale2_f32",
)


def intrinsics_used(texts) -> list[str]:
    """The tracegrad.runtime.intrinsics that the source texts call."""
    return [i for i in INTRINSICS if any(re.search(rf"\b{i}\(", t) for t in texts)]


# ------------------------------------------------------- inline expansion
# Kernels do not call the helpers: each call is expanded in place into plain
# statements (locals renamed apart). Numba then types a single function, and
# LLVM vectorizes the loop with the math in it; this compiles faster than
# Numba's own inline='always' pass and needs no inliner heuristics.

import ast  # noqa: E402
import itertools  # noqa: E402

_UIDS = itertools.count()
_PARSED: dict[str, ast.FunctionDef] = {}

# Each expanded call site costs compile time (~0.3 s for sin or cos), so a
# chain of 30 sins took 18 s to compile. A kernel whose source would hold more
# than this many expansions is generated again with helper calls left as calls
# to shared noinline helpers: scalar speed in those loops, but a compile cost
# that no longer grows with the chain.
EXPANSION_BUDGET = 24
_expand = True
_EXPANDED_SITE = re.compile(r"\bret_m\d+ =")


def start_kernel(expand: bool = True) -> None:
    """Per-kernel state: temporaries numbered from 0 (same graph, same source)
    and whether helper calls are expanded in place."""
    global _UIDS, _expand
    _UIDS = itertools.count()
    _expand = expand


def expanded_sites(source: str) -> int:
    return len(_EXPANDED_SITE.findall(source))


def outlined(name: str) -> bool:
    """Helpers that, when left as calls, are compiled once and not inlined."""
    return name.startswith("tg_") and expandable(name)


def _parsed(name: str) -> ast.FunctionDef:
    fn = _PARSED.get(name)
    if fn is None:
        fn = ast.parse(FUNCTIONS[name][0]).body[0]
        _PARSED[name] = fn
    return fn


def expandable(name: str) -> bool:
    return name in FUNCTIONS and name not in ("tg_pow", "tg_sign")


class _Expander(ast.NodeTransformer):
    """Replaces helper calls inside an expression by names, collecting the
    statements that compute them in `self.before`."""

    def __init__(self):
        self.before: list[ast.stmt] = []

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and expandable(node.func.id):
            if not _expand and node.func.id.startswith("tg_"):
                return node  # stays a call (see EXPANSION_BUDGET)
            return ast.Name(id=self.inline(node.func.id, node.args), ctx=ast.Load())
        return node

    def inline(self, name: str, args: list[ast.expr]) -> str:
        fn = _parsed(name)
        uid = next(_UIDS)
        params = [a.arg for a in fn.args.args]
        local = {p for p in params}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    local.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        rename = {v: f"{v}_m{uid}" for v in local}
        for p, a in zip(params, args, strict=True):
            self.before.append(
                ast.Assign(targets=[ast.Name(rename[p], ast.Store())], value=a, lineno=0)
            )
        result = f"ret_m{uid}"
        for stmt in fn.body:
            stmt = _Renamer(rename).visit(ast.parse(ast.unparse(stmt)).body[0])
            if isinstance(stmt, ast.Return):
                value = self.visit(stmt.value)
                self.before.append(
                    ast.Assign(targets=[ast.Name(result, ast.Store())], value=value, lineno=0)
                )
            elif isinstance(stmt, ast.Assign):
                stmt.value = self.visit(stmt.value)
                self.before.append(stmt)
            else:  # pragma: no cover - helpers are straight-line code
                raise ValueError(f"mathlib helper {name}: unsupported statement")
        return result


class _Renamer(ast.NodeTransformer):
    def __init__(self, rename):
        self.rename = rename

    def visit_Name(self, node: ast.Name):
        if node.id in self.rename:
            return ast.Name(id=self.rename[node.id], ctx=node.ctx)
        return node


def expand_statement(line: str) -> list[str]:
    """`v5 = np.float32(tg_tanh_f32(x[i]))` -> the statements computing it,
    with every helper call expanded in place."""
    if "tg_" not in line and "_exp64" not in line and "_exp32" not in line:
        return [line]
    tree = ast.parse(line).body[0]
    exp = _Expander()
    if isinstance(tree, ast.Assign):
        tree.value = exp.visit(tree.value)
    elif isinstance(tree, ast.AugAssign):
        tree.value = exp.visit(tree.value)
    else:
        return [line]
    if not exp.before:
        return [line]
    return [ast.unparse(s) for s in exp.before] + [ast.unparse(tree)]
