"""The rule table on complex operands: each vjp rule is JAX's transpose of the jvp.

For each row, on plain NumPy arrays (the rules' NumPy mode): with random complex
directions v (complex operands) and cotangents u (complex outputs),

    Re sum(vjp_i(u) * v) == Re sum(u * (f(x + eps v) - f(x - eps v)) / 2 eps),

the pairing whose transpose JAX (and so tracegrad's compiled mode) takes; and the
jvp rule (tracegrad.forward) against the same finite differences. These rows stand
in for tests/ops/op_cases.py's, which draw real operands only (test_registry's
COMPLEX_ROWS). eig's rows are tests/complex/test_eig.py (its vjp needs a
phase-independent cotangent).
"""

import zlib

import numpy as np
import pytest

from tracegrad.forward import jvp_rule
from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY


def _c(shape):
    return ("c", shape)


def _r(shape):
    return ("r", shape)


ROWS = [  # (id, primitive name, operand specs, attrs)
    ("real", "real", [_c((3, 2))], {}),
    ("imag", "imag", [_c((3, 2))], {}),
    ("conj", "conj", [_c((4,))], {}),
    ("complex", "complex", [_r((3,)), _r((2, 3))], {}),
    ("fft", "fft", [_c((2, 5))], {"axis": 1}),
    ("ifft_ortho", "fft", [_c((4, 3))], {"axis": 0, "inverse": True, "norm": "ortho"}),
    ("fft_forward", "fft", [_c((6,))], {"axis": 0, "norm": "forward"}),
    ("abs", "abs", [_c((3, 2))], {}),
    ("exp", "exp", [_c((3,))], {}),
    ("log", "log", [_c((3,))], {}),
    ("sqrt", "sqrt", [_c((3,))], {}),
    ("sin", "sin", [_c((3,))], {}),
    ("tanh", "tanh", [_c((3,))], {}),
    ("mul_mixed", "mul", [_c((2, 3)), _r((3,))], {}),
    ("div", "div", [_c((3,)), _c((2, 3))], {}),
    ("pow", "pow", [_c((3,)), _c((3,))], {}),
    ("pow_scalar", "pow", [_c((3,)), 2.5], {}),
    ("matmul", "matmul", [_c((2, 3)), _c((3, 4))], {}),
    ("sum", "sum", [_c((2, 3))], {"axis": 1}),
    ("mean", "mean", [_c((2, 3))], {"axis": None}),
    ("astype_c2r", "astype", [_c((3,))], {"dtype": "float64"}),
    ("astype_r2c", "astype", [_r((3,))], {"dtype": "complex128"}),
    ("solve_general", "solve_general", [_c((3, 3)), _c((3, 2))], {}),
    ("solve_general_real", "solve_general", [_r((2, 2)), _r((2, 1))], {}),
    ("det_general", "det_general", [_c((3, 3))], {}),
]


def _draw(spec, rng):
    if not isinstance(spec, tuple):
        return spec
    kind, shape = spec
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    if len(shape) == 2 and shape[0] == shape[1]:
        x = x + 3 * np.eye(shape[0])  # well-conditioned square matrices (solve)
    if kind == "c":
        x = x + 1j * rng.uniform(0.3, 1.2, shape)  # away from the branch cut of log/sqrt/pow
    return x


def _direction(x, rng):
    v = rng.standard_normal(np.shape(x))
    return v + 1j * rng.standard_normal(np.shape(x)) if np.iscomplexobj(x) else v


def _pair(a, b) -> float:
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_complex_vjp_and_jvp_against_finite_differences(row):
    _, name, specs, attrs = row
    prim = REGISTRY[name]
    rng = np.random.default_rng(zlib.crc32(row[0].encode()))
    args = [_draw(s, rng) for s in specs]
    out = prim.impl(*args, **attrs)
    u = _direction(out, rng)
    eps = 1e-6
    checked = 0
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray):
            continue
        v = _direction(a, rng)

        def at(t, i=i, v=v):
            moved = list(args)
            moved[i] = args[i] + t * v
            return prim.impl(*moved, **attrs)

        numeric = (at(eps) - at(-eps)) / (2 * eps)
        ct = prim.vjps[i](u, out, *args, **attrs)
        ct = T.sum_to_shape(ct, a.shape)
        if np.iscomplexobj(ct) and not np.iscomplexobj(a):
            ct = np.real(ct)  # (the autodiff drivers keep a real operand's real part)
        assert np.isclose(_pair(ct, v), _pair(u, numeric), rtol=1e-6, atol=1e-7), (i, name)
        tangents = [None] * len(args)
        tangents[i] = v
        t_out = jvp_rule(prim)(tuple(args), tuple(tangents), out, **attrs)
        t_out = np.broadcast_to(np.asarray(t_out), np.shape(out))
        if not np.iscomplexobj(out):
            t_out = np.real(t_out)
        np.testing.assert_allclose(t_out, numeric, rtol=1e-6, atol=1e-7)
        checked += 1
    assert checked


def test_shape_rules_give_numpys_dtypes():
    z64 = np.ones(3, np.complex64)
    for name, args, expected in [
        ("real", (z64,), np.float32),
        ("imag", (z64.astype(np.complex128),), np.float64),
        ("abs", (z64,), np.float32),
        ("conj", (z64,), np.complex64),
        ("complex", (np.ones(2, np.float32), np.ones(2, np.float32)), np.complex64),
        ("complex", (np.ones(2, np.float32), np.ones(2)), np.complex128),
    ]:
        prim = REGISTRY[name]
        aval = prim.shape_rule(*[T.aval_of(a) for a in args])
        assert aval.dtype == expected, name
        assert prim.impl(*args).dtype == expected, name
