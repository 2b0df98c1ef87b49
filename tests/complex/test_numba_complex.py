"""Complex values under the Numba backend (issue 26): the complex elementwise ops
Numba compiles (arithmetic, real/imag/conj/complex/abs, exp, log, sqrt, sin, cos,
tanh, ...: passes.fuse.COMPLEX_FUSIBLE) are fused into the kernels like real ones;
every other node with a complex value (fft, eig, complex sums, ...) runs in NumPy
between njit segments (codegen.generate._complex_to_numpy). Values and gradients
equal the interpreter's. Numba compiles: the CI's second pass (numba_pass)."""

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
    # only the transforms and the complex reduction run in NumPy; mul, abs, conj, div of
    # complex values are in the kernels
    assert numpy_lines and all("fft[" in line or "sum[" in line for line in numpy_lines)
    assert "@njit" in source and "conjugate()" in source


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


FUNCS = {
    "arith": lambda z, w, x: tg.sum(tg.abs(z * z + z / (z + 2) - z * 1j + x)),
    "funcs": lambda z, w, x: tg.sum(
        tg.real(tg.exp(z) + tg.log(z) + tg.sqrt(z) + tg.sin(z) + tg.cos(z) + tg.tanh(z))
    ),
    "parts": lambda z, w, x: tg.sum(tg.real(z) * tg.imag(z) + tg.abs(tg.conj(z) * x) + tg.angle(z)),
    "complex64": lambda z, w, x: tg.sum(tg.abs(w * w + tg.exp(w) * 0.5)),
    "real_to_complex": lambda z, w, x: tg.sum(tg.abs(x * 1j + x * x) ** 2),
    "where_pow": lambda z, w, x: tg.sum(tg.abs(tg.where(x > 0, z, z * z) + z**2.5)),
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_fused_complex_kernels_equal_the_interpreter(name):
    w = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
    x = rng.standard_normal(5)
    f = FUNCS[name]
    got = tg.value_and_grad(f, argnums=(0, 1, 2), backend="numba")(Z, w, x)
    want = tg.value_and_grad(f, argnums=(0, 1, 2), backend="interpret")(Z, w, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
