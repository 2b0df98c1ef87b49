"""Complex values under the Numba backend (issue 26): the generated kernels are
real-valued, so each node with a complex operand or result runs in NumPy between
njit segments (codegen.generate._complex_to_numpy; passes.fuse never fuses them),
and the real parts of the graph still compile. Values and gradients equal the
interpreter's. Numba compiles: the CI's second pass (numba_pass)."""

import numpy as np
import pytest

import tracegrad as tg

pytestmark = pytest.mark.numba_pass

rng = np.random.default_rng(0)
Z = rng.standard_normal(5) + 1j * rng.standard_normal(5)
X = rng.standard_normal((4, 5))
W = rng.standard_normal((5, 5))


def mixed(x, z):
    h = tg.tanh(x @ W)
    s = tg.fft.fft(h * 2.0 + 1.0)
    return tg.sum(tg.abs(s * z) ** 2) + tg.sum(h * h)


def test_mixed_real_complex_graph_compiles_its_real_parts():
    vg = tg.value_and_grad(mixed, argnums=(0, 1), backend="numba")
    got = vg(X, Z)
    want = tg.value_and_grad(mixed, argnums=(0, 1), backend="interpret")(X, Z)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for a, b in zip(got[1], want[1], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-12)
    source = vg.lower(X, Z).source
    numpy_lines = [line for line in source.splitlines() if "(NumPy: no code generation)" in line]
    assert numpy_lines and all(
        ": c" in line or "abs" in line or "real" in line for line in numpy_lines
    )
    assert "@njit" in source  # tanh, matmul and the real backward run in kernels


def test_complex_only_functions_and_pass_through_outputs():
    f = tg.compile(lambda z, x: (z, x * 2, tg.real(z) + 1, tg.exp(z) * tg.conj(z)), backend="numba")
    z, x2, r, e = f(Z, X[0])
    np.testing.assert_array_equal(z, Z)
    np.testing.assert_allclose(x2, X[0] * 2)
    np.testing.assert_allclose(r, Z.real + 1)
    np.testing.assert_allclose(e, np.exp(Z) * np.conj(Z))
    g = tg.grad(lambda z: tg.sum(tg.abs(z * z + 1j)), backend="numba")(Z)
    np.testing.assert_allclose(
        g, tg.grad(lambda z: tg.sum(tg.abs(z * z + 1j)), backend="interpret")(Z)
    )
    h = tg.grad(lambda z: tg.sum(tg.sin(z) * z), holomorphic=True, backend="numba")(Z)
    np.testing.assert_allclose(h, np.cos(Z) * Z + np.sin(Z))
