"""Complex numbers in compiled mode, JAX's conventions (issue 26).

JAX's tests/api_test.py complex cases are ported with their assertions
(test_holomorphic_grad ... test_jacfwd_of_complex_errors); the rest compares
values and gradients with jax (float64) where it is installed.
"""

import re

import numpy as np
import pytest

import tracegrad as tg

I = {"backend": "interpret"}
ZS = 0.5j * np.arange(5) + np.arange(5)  # JAX's test input


# ------------------------------------------------ ported from JAX's tests/api_test.py


def test_complex_grad_raises_error():
    with pytest.raises(TypeError):
        tg.grad(lambda x: tg.sin(x), **I)(1 + 2j)


def test_holomorphic_grad():
    out = tg.grad(lambda x: tg.sin(x), holomorphic=True, **I)(1 + 2j)
    expected = 2.0327230070196656 - 3.0518977991518j
    np.testing.assert_allclose(out, expected)


def test_nonholomorphic_grad():
    def f(z):
        return tg.sum(tg.cos(tg.abs(z)))

    ans = tg.grad(f, **I)(ZS)
    expected = np.array(
        [
            0.0 + 0.0j,
            -0.80430663 + 0.40215331j,
            -0.70368982 + 0.35184491j,
            0.1886467 - 0.09432335j,
            0.86873727 - 0.43436864j,
        ]
    )
    np.testing.assert_allclose(ans, expected, atol=1e-5, rtol=1e-5)


def test_complex_output_jacrev_raises_error():
    with pytest.raises(TypeError):
        tg.jacrev(lambda x: tg.sin(x), **I)(1 + 2j)


def test_nonholomorphic_jacrev():
    # code based on https://github.com/jax-ml/jax/issues/603
    def f(z):
        return tg.cos(tg.linalg.norm(2 * z))

    ans = tg.jacrev(f, **I)(ZS)
    expected = tg.grad(f, **I)(ZS)
    np.testing.assert_allclose(ans, expected)


def test_heterogeneous_grad():
    # See https://github.com/jax-ml/jax/issues/7157
    x = np.array(1.0 + 1j)
    y = np.array(2.0)

    def f(tup):
        x, y = tup
        return tg.square(tg.abs(x)) + y

    actual = tg.grad(f, **I)((x, y))
    desired = (np.array(2 - 2j), np.array(1.0))
    for a, d in zip(actual, desired, strict=True):
        assert a.dtype == d.dtype
        np.testing.assert_allclose(a, d)


def test_complex_input_jacfwd_raises_error():
    with pytest.raises(TypeError):
        tg.jacfwd(lambda x: tg.sin(x), **I)(1 + 2j)


def test_grad_complex_result_errors():
    dfn = tg.grad(lambda x: x**2 + 1j, **I)
    with pytest.raises(
        TypeError,
        match=r"grad requires real-valued outputs \(output dtype that is a "
        r"sub-dtype of np.floating\), but got complex.*",
    ):
        dfn(3.0)


def test_holomorphic_grad_of_float_errors():
    dfn = tg.grad(lambda x: x**2, holomorphic=True, **I)
    with pytest.raises(
        TypeError,
        match=r"grad with holomorphic=True requires inputs with complex dtype, but got float.*",
    ):
        dfn(3.0)


def test_holomorphic_jacrev_of_float_errors():
    dfn = tg.jacrev(lambda x: x**2, holomorphic=True, **I)
    with pytest.raises(
        TypeError,
        match=r"jacrev with holomorphic=True requires inputs with complex dtype, but got float.*",
    ):
        dfn(3.0)


def test_holomorphic_jacfwd_of_float_errors():
    dfn = tg.jacfwd(lambda x: x**2, holomorphic=True, **I)
    with pytest.raises(
        TypeError,
        match=r"jacfwd with holomorphic=True requires inputs with complex dtype, but got float.*",
    ):
        dfn(3.0)


def test_jacfwd_of_complex_errors():
    dfn = tg.jacfwd(lambda x: x**2, **I)
    with pytest.raises(
        TypeError,
        match=r"jacfwd requires real-valued inputs \(input dtype that is a "
        r"sub-dtype of np.floating\), but got complex.*",
    ):
        dfn(3.0 + 1j)


def test_grad_complex_output_error_text_is_jaxs():
    """The whole first two sentences are JAX's (`_check_output_dtype_revderiv`)."""
    with pytest.raises(TypeError) as info:
        tg.grad(lambda z: tg.sum(z * z), **I)(np.array([1 + 1j], np.complex64))
    assert str(info.value).startswith(
        "grad requires real-valued outputs (output dtype that is a sub-dtype of "
        "np.floating), but got complex64. For holomorphic differentiation, pass "
        "holomorphic=True."
    )


def test_holomorphic_with_real_output_errors():
    with pytest.raises(
        TypeError, match=re.escape("grad with holomorphic=True requires outputs with complex dtype")
    ):
        tg.grad(lambda z: tg.sum(tg.abs(z)), holomorphic=True, **I)(ZS)


def test_hessian_holomorphic():
    R = np.random.default_rng(0).standard_normal
    A = R((4, 4))
    x = R(4).astype("complex64") * (1 + 2j)

    def f(x):
        return tg.dot(x, tg.dot(A.astype(x.dtype), x))

    assert np.allclose(tg.hessian(f, holomorphic=True, **I)(x), A + A.T)


# ---------------------------------------------------------- dtypes and values


def test_complex_arrays_trace_and_keep_dtypes():
    z64 = (np.arange(3) + 1j).astype(np.complex64)
    f = tg.compile(lambda z: tg.exp(z) * z + 1, **I)
    out = f(z64)
    assert out.dtype == np.complex64
    np.testing.assert_allclose(out, np.exp(z64) * z64 + 1, rtol=1e-6)
    # Python complex scalars are weak: float32 * 1j is complex64, as in NumPy 2 and JAX
    x32 = np.ones(2, np.float32)
    assert tg.compile(lambda x: x * 1j, **I)(x32).dtype == np.complex64
    assert tg.compile(lambda x: x * 1j, **I)(x32.astype(np.float64)).dtype == np.complex128
    # complex64 with float64 promotes to complex128
    assert tg.compile(lambda z, x: z + x, **I)(z64, np.ones(3)).dtype == np.complex128


def test_real_imag_conj_abs_angle_values():
    z = np.array([3 + 4j, -1 - 2j, 0.5j])
    outs = tg.compile(
        lambda z: (tg.real(z), tg.imag(z), tg.conj(z), tg.abs(z), tg.angle(z), z.real, z.conj()),
        **I,
    )(z)
    refs = (z.real, z.imag, np.conj(z), np.abs(z), np.angle(z), z.real, np.conj(z))
    for o, r in zip(outs, refs, strict=True):
        assert o.dtype == r.dtype
        np.testing.assert_allclose(o, r)
    assert tg.angle(z, deg=True)[0] == pytest.approx(np.angle(z, deg=True)[0])


def test_real_inputs_keep_their_real_helpers():
    x = np.array([-2.0, 3.0])
    np.testing.assert_array_equal(tg.real(x), x)
    np.testing.assert_array_equal(tg.imag(x), np.zeros(2))
    np.testing.assert_array_equal(tg.conj(x), x)


# ---------------------------------------------------------------- against JAX


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


# (tracegrad function, the same in jax.numpy)
REAL_OF_COMPLEX = {
    "abs2": (lambda z: tg.sum(tg.abs(z) ** 2), lambda jnp, z: jnp.sum(jnp.abs(z) ** 2)),
    "real": (lambda z: tg.sum(tg.real(z * z)), lambda jnp, z: jnp.sum(jnp.real(z * z))),
    "imag_exp": (
        lambda z: tg.sum(tg.imag(tg.exp(z))),
        lambda jnp, z: jnp.sum(jnp.imag(jnp.exp(z))),
    ),
    "angle": (lambda z: tg.sum(tg.angle(z)), lambda jnp, z: jnp.sum(jnp.angle(z))),
    "conj_sin": (
        lambda z: tg.sum(tg.real(tg.conj(z) * tg.sin(z))),
        lambda jnp, z: jnp.sum(jnp.real(jnp.conj(z) * jnp.sin(z))),
    ),
    "log_sqrt_tanh_pow": (
        lambda z: tg.sum(tg.abs(tg.log(z) + tg.sqrt(z) / z + tg.tanh(z) ** 1.5)),
        lambda jnp, z: jnp.sum(jnp.abs(jnp.log(z) + jnp.sqrt(z) / z + jnp.tanh(z) ** 1.5)),
    ),
    "mean_cos": (
        lambda z: tg.real(tg.mean(z * tg.cos(z))),
        lambda jnp, z: jnp.real(jnp.mean(z * jnp.cos(z))),
    ),
    "matmul": (
        lambda z: tg.sum(tg.abs(tg.reshape(z, (2, 2)) @ tg.reshape(z, (2, 2)).T)),
        lambda jnp, z: jnp.sum(jnp.abs(jnp.reshape(z, (2, 2)) @ jnp.reshape(z, (2, 2)).T)),
    ),
    "pow_complex_exponent": (
        lambda z: tg.sum(tg.abs(z ** (z * 0.3))),
        lambda jnp, z: jnp.sum(jnp.abs(z ** (z * 0.3))),
    ),
}
Z4 = np.array([1 + 2j, 3 - 1j, -0.5 + 0.2j, 0.7 - 1.1j])


@pytest.mark.parametrize("name", list(REAL_OF_COMPLEX))
def test_real_function_of_complex_matches_jax(name):
    jax, jnp = _jax()
    f, jf = REAL_OF_COMPLEX[name]
    value, grad = tg.value_and_grad(f, **I)(Z4)
    np.testing.assert_allclose(value, jf(jnp, Z4), rtol=1e-12)
    np.testing.assert_allclose(grad, jax.grad(lambda z: jf(jnp, z))(Z4), rtol=1e-10, atol=1e-12)


def test_holomorphic_grad_jacrev_jacfwd_match_jax():
    jax, jnp = _jax()
    z = Z4[:3]

    def f(z):
        return tg.exp(z) * tg.sin(z[::-1]) / (1 + z * z)

    def jf(z):
        return jnp.exp(z) * jnp.sin(z[::-1]) / (1 + z * z)

    np.testing.assert_allclose(
        tg.jacrev(f, holomorphic=True, **I)(z), jax.jacrev(jf, holomorphic=True)(z)
    )
    np.testing.assert_allclose(
        tg.jacfwd(f, holomorphic=True, **I)(z), jax.jacfwd(jf, holomorphic=True)(z)
    )
    g = tg.grad(lambda z: tg.sum(f(z)), holomorphic=True, **I)(z)
    np.testing.assert_allclose(g, jax.grad(lambda z: jnp.sum(jf(z)), holomorphic=True)(z))


def test_vjp_jvp_with_complex_values_match_jax():
    jax, jnp = _jax()
    z, ct = Z4[:2], np.array([1 - 1j, 0.5 + 2j])
    out, pb = tg.vjp(lambda z: tg.exp(z) * z, z, **I)
    _, jpb = jax.vjp(lambda z: jnp.exp(z) * z, z)
    np.testing.assert_allclose(pb(ct)[0], jpb(ct)[0])
    # a real input with a complex output: the cotangent's real part (JAX's)
    x = np.array([0.3, 1.4])
    _, pb = tg.vjp(lambda x: tg.exp(1j * x) * x, x, **I)
    _, jpb = jax.vjp(lambda x: jnp.exp(1j * x) * x, x)
    assert pb(ct)[0].dtype == np.float64
    np.testing.assert_allclose(pb(ct)[0], jpb(ct)[0])
    t = np.array([0.2 + 1j, -1 + 0.1j])
    np.testing.assert_allclose(
        tg.jvp(lambda z: tg.abs(z) * z, (z,), (t,), **I)[1],
        jax.jvp(lambda z: jnp.abs(z) * z, (z,), (t,))[1],
    )
    np.testing.assert_allclose(
        tg.jacfwd(lambda x: tg.exp(1j * x) * x, **I)(x),
        jax.jacfwd(lambda x: jnp.exp(1j * x) * x)(x),
    )


def test_real_input_complex_intermediate_matches_jax():
    jax, jnp = _jax()
    x = np.array([0.3, -1.2])

    def f(x):
        return tg.sum(tg.abs(x * (1 + 2j)) ** 2 + tg.real(tg.exp(1j * x)))

    def jf(x):
        return jnp.sum(jnp.abs(x * (1 + 2j)) ** 2 + jnp.real(jnp.exp(1j * x)))

    g = tg.grad(f, **I)(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, jax.grad(jf)(x))
    np.testing.assert_allclose(
        tg.hessian(lambda x: tg.sum(tg.abs(x * x * (1 + 1j))), **I)(x),
        jax.hessian(lambda x: jnp.sum(jnp.abs(x * x * (1 + 1j))))(x),
    )


def test_grad_of_grad_through_complex_matches_jax():
    jax, jnp = _jax()
    x = np.array(0.7)

    def f(x):
        return tg.real(tg.exp(1j * x * x) * (2 + 1j))

    def jf(x):
        return jnp.real(jnp.exp(1j * x * x) * (2 + 1j))

    np.testing.assert_allclose(tg.grad(tg.grad(f, **I), **I)(x), jax.grad(jax.grad(jf))(x))


def test_holomorphic_hessian_matches_jax():
    jax, jnp = _jax()
    z = np.array([1 + 2j, 0.5 - 1j])
    np.testing.assert_allclose(
        tg.hessian(lambda z: tg.sum(tg.exp(z) * z[::-1]), holomorphic=True, **I)(z),
        jax.hessian(lambda z: jnp.sum(jnp.exp(z) * z[::-1]), holomorphic=True)(z),
    )


def test_vmap_of_complex_functions():
    rng = np.random.default_rng(0)
    zs = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    per_row = tg.grad(lambda z: tg.sum(tg.abs(z * z)), **I)
    np.testing.assert_allclose(tg.vmap(per_row)(zs), np.stack([per_row(r) for r in zs]))
    a = rng.standard_normal((2, 3, 3))
    np.testing.assert_allclose(tg.vmap(tg.linalg.eigvals)(a), np.linalg.eigvals(a))
