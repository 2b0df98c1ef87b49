"""tg.jacobian (JAX's jacrev) and tg.hessian: compiled, checked against hand values,
finite differences, eager mode's torch.autograd.functional, and JAX where installed."""

from __future__ import annotations

import numpy as np
import pytest
from tracegrad.eager.autograd.functional import hessian as eager_hessian
from tracegrad.eager.autograd.functional import jacobian as eager_jacobian

import tracegrad as tg
import tracegrad.eager as torch


def numeric_jacobian(f, x, eps=1e-6):
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        jac[(...,) + idx] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return jac


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_jacobian_matches_finite_differences_and_eager(backend):
    w = np.random.default_rng(0).standard_normal((3, 4))

    def f(x):
        return tg.tanh(w @ x) * x[0]

    x = np.random.default_rng(1).standard_normal(4)
    jac = tg.jacobian(f, backend=backend)(x)
    assert jac.shape == (3, 4)
    np.testing.assert_allclose(
        jac, numeric_jacobian(lambda v: np.tanh(w @ v) * v[0], x), rtol=1e-6, atol=1e-8
    )
    eager = eager_jacobian(lambda v: torch.tanh(torch.tensor(w) @ v) * v[0], torch.tensor(x))
    np.testing.assert_allclose(jac, eager.numpy(), rtol=1e-12)


def test_jacobian_of_several_arguments_and_matrix_outputs():
    a = np.random.default_rng(2).standard_normal((2, 3))
    b = np.random.default_rng(3).standard_normal(3)
    ja, jb = tg.jacobian(lambda a, b: tg.sin(a * b), argnums=(0, 1), backend="interpret")(a, b)
    assert ja.shape == (2, 3, 2, 3) and jb.shape == (2, 3, 3)
    np.testing.assert_allclose(
        ja, numeric_jacobian(lambda v: np.sin(v * b), a), rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(
        jb, numeric_jacobian(lambda v: np.sin(a * v), b), rtol=1e-6, atol=1e-8
    )


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_hessian_hand_values_and_eager(backend):
    m = np.array([[2.0, 1.0], [0.0, 3.0]])
    x = np.array([0.4, -0.3])
    h = tg.hessian(lambda x: x @ m @ x + tg.sum(tg.exp(x)), backend=backend)(x)
    np.testing.assert_allclose(h, m + m.T + np.diag(np.exp(x)), rtol=1e-12)
    he = eager_hessian(lambda v: v @ torch.tensor(m) @ v + v.exp().sum(), torch.tensor(x))
    np.testing.assert_allclose(h, he.numpy(), rtol=1e-12)


def test_jacobian_compiles_once_per_signature():
    jac = tg.jacobian(lambda x: x * x, backend="interpret")
    for _ in range(3):
        jac(np.ones(3))
    assert jac.cache_info().traces == 1


def test_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    x = np.random.default_rng(4).standard_normal(3)
    np.testing.assert_allclose(
        tg.jacobian(lambda v: tg.sin(v) * tg.sum(v), backend="interpret")(x),
        jax.jacrev(lambda v: jnp.sin(v) * jnp.sum(v))(x),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        tg.hessian(lambda v: tg.sum(tg.tanh(v) ** 3), backend="interpret")(x),
        jax.hessian(lambda v: jnp.sum(jnp.tanh(v) ** 3))(x),
        rtol=1e-10,
    )
