"""JAX's transforms (issue 13): vjp, jvp, linearize, jacfwd, and JAX's TypeErrors.

Checked against hand derivations, float64 central differences, the reverse-mode
`jacobian`, and JAX where installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg

INTERP = dict(backend="interpret")


def f_vec(x, y):
    return tg.sin(x) * y[::-1] + x**2 * tg.sum(y)


def central_jvp(f, primals, tangents, eps=1e-6):
    plus = f(*[p + eps * t for p, t in zip(primals, tangents, strict=True)])
    minus = f(*[p - eps * t for p, t in zip(primals, tangents, strict=True)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_jvp_matches_finite_differences(rng, backend):
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    tx, ty = rng.standard_normal(4), rng.standard_normal(4)
    out, tangent = tg.jvp(f_vec, (x, y), (tx, ty), backend=backend)
    np.testing.assert_allclose(out, f_vec(x, y), rtol=1e-12)
    np.testing.assert_allclose(tangent, central_jvp(f_vec, (x, y), (tx, ty)), rtol=1e-6, atol=1e-8)


def test_vjp_pullback_is_the_transpose_of_jvp(rng):
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    tx, ty = rng.standard_normal(4), rng.standard_normal(4)
    ct = rng.standard_normal(4)
    out, pullback = tg.vjp(f_vec, x, y, **INTERP)
    gx, gy = pullback(ct)
    _, tangent = tg.jvp(f_vec, (x, y), (tx, ty), **INTERP)
    # <ct, J t> == <J^T ct, t>
    assert float(ct @ tangent) == pytest.approx(float(gx @ tx + gy @ ty), rel=1e-10)


def test_vjp_with_pytrees_and_aux():
    def f(p):
        return {"s": tg.sum(p["w"] * p["b"]), "v": p["w"] ** 2}, "aux-value"

    params = {"w": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0])}
    out, pullback, aux = tg.vjp(f, params, has_aux=True, **INTERP)
    assert aux == "aux-value"
    (g,) = pullback({"s": np.array(1.0), "v": np.array([1.0, 1.0])})
    np.testing.assert_allclose(g["w"], params["b"] + 2 * params["w"])
    np.testing.assert_allclose(g["b"], params["w"])


def test_jacfwd_equals_jacobian_and_finite_differences(rng):
    x = rng.standard_normal(3)
    y = rng.standard_normal(3)
    jf = tg.jacfwd(f_vec, argnums=(0, 1), **INTERP)(x, y)
    jr = tg.jacobian(f_vec, argnums=(0, 1), **INTERP)(x, y)
    for a, b in zip(jf, jr, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    eye = np.eye(3)
    fd = np.stack([central_jvp(f_vec, (x, y), (eye[k], 0 * y)) for k in range(3)], axis=-1)
    np.testing.assert_allclose(jf[0], fd, rtol=1e-6, atol=1e-8)
    assert tg.jacrev is tg.jacobian


def test_linearize_reuses_the_primal(rng):
    x = rng.standard_normal(3)
    out, f_jvp = tg.linearize(lambda x: tg.exp(x) * x, x, **INTERP)
    np.testing.assert_allclose(out, np.exp(x) * x)
    t = rng.standard_normal(3)
    np.testing.assert_allclose(f_jvp(t), (np.exp(x) * x + np.exp(x)) * t, rtol=1e-12)


def test_jvp_tangent_shape_mismatch_is_a_type_error():
    with pytest.raises(TypeError, match="tangents must match their primals"):
        tg.jvp(tg.sin, (np.ones(3),), (np.ones(2),), **INTERP)


def test_grad_of_vector_output_is_a_type_error_pointing_to_jacobian():
    with pytest.raises(TypeError, match=r"scalar-output.*tracegrad\.jacobian"):
        tg.grad(lambda x: x * 2, **INTERP)(np.ones(3))
    with pytest.raises(TypeError, match=r"scalar-output.*tracegrad\.jacobian"):
        tg.grad(lambda x: (tg.sum(x), tg.sum(x)), **INTERP)(np.ones(3))


def test_grad_of_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="floating-point"):
        tg.grad(lambda x: tg.sum(x * 2.0), **INTERP)(np.arange(3))


def test_transforms_match_jax(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def jf(x, y):
        return jnp.sin(x) * y[::-1] + x**2 * jnp.sum(y)

    x, y = rng.standard_normal(4), rng.standard_normal(4)
    tx, ty = rng.standard_normal(4), rng.standard_normal(4)
    ours = tg.jvp(f_vec, (x, y), (tx, ty), **INTERP)[1]
    theirs = jax.jvp(jf, (x, y), (tx, ty))[1]
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)
    np.testing.assert_allclose(
        tg.jacfwd(f_vec, **INTERP)(x, y), np.asarray(jax.jacfwd(jf)(x, y)), rtol=1e-12
    )
    ct = rng.standard_normal(4)
    for a, b in zip(tg.vjp(f_vec, x, y, **INTERP)[1](ct), jax.vjp(jf, x, y)[1](ct), strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12)


def test_vmap_per_example_gradients(rng):
    def loss(w, x, y):
        return (tg.sum(tg.tanh(w * x)) - y) ** 2

    w = rng.standard_normal(3)
    X, Y = rng.standard_normal((20, 3)), rng.standard_normal(20)
    per_example = tg.vmap(tg.grad(loss, **INTERP), in_axes=(None, 0, 0))
    expected = np.stack([tg.grad(loss, **INTERP)(w, x, y) for x, y in zip(X, Y, strict=True)])
    np.testing.assert_allclose(per_example(w, X, Y), expected, rtol=1e-12)
    compiled = tg.compile(lambda w, X, Y: per_example(w, X, Y))
    np.testing.assert_allclose(compiled(w, X, Y), expected, rtol=1e-10)
    # batching rules (tracegrad/batching.py): no loop over the examples is left
    assert [n.op for n in compiled.lower(w, X, Y).traced.nodes].count("scan") == 0


def test_vmap_axes():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(tg.vmap(lambda r: tg.sum(r), in_axes=1)(x), x.sum(axis=0))
    out = tg.vmap(lambda r: r * 2.0, in_axes=0, out_axes=1)(x)
    np.testing.assert_array_equal(out, (x * 2.0).T)
    with pytest.raises(TypeError, match="in_axes has 1 entries"):
        tg.vmap(lambda a, b: a, in_axes=(0,))(x, x)


def test_vmap_matches_jax(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    w, X = rng.standard_normal(3), rng.standard_normal((5, 3))
    ours = tg.vmap(tg.grad(lambda w, x: tg.sum(tg.sin(w * x)), **INTERP), in_axes=(None, 0))(w, X)
    theirs = jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.sin(w * x))), in_axes=(None, 0))(w, X)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)


def test_jacobian_and_hessian_with_pytrees_and_aux(rng):
    params = {"w": rng.standard_normal(3), "b": rng.standard_normal(2)}

    def f(p):
        return {"y": tg.sin(p["w"][:2]) * p["b"], "s": tg.sum(p["w"] ** 2)}, "aux"

    J, aux = tg.jacobian(f, has_aux=True, **INTERP)(params)
    assert aux == "aux"
    assert J["y"]["w"].shape == (2, 3) and J["y"]["b"].shape == (2, 2)
    assert J["s"]["w"].shape == (3,) and J["s"]["b"].shape == (2,)
    w, b = params["w"], params["b"]
    expected_yw = np.zeros((2, 3))
    expected_yw[[0, 1], [0, 1]] = np.cos(w[:2]) * b
    np.testing.assert_allclose(J["y"]["w"], expected_yw, rtol=1e-12)
    np.testing.assert_allclose(J["y"]["b"], np.diag(np.sin(w[:2])), rtol=1e-12)
    np.testing.assert_allclose(J["s"]["w"], 2 * w, rtol=1e-12)
    np.testing.assert_allclose(J["s"]["b"], np.zeros(2))
    H, aux = tg.hessian(lambda x: (tg.sum(x**3), x[0]), has_aux=True, **INTERP)(w)
    np.testing.assert_allclose(H, np.diag(6 * w), rtol=1e-12)
    assert float(aux) == w[0]


def test_pytree_jacobian_matches_jax(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x, y = rng.standard_normal(3), rng.standard_normal(2)
    ours = tg.jacobian(
        lambda x, y: (
            x * tg.sum(y),
            tg.outer(x, y) if hasattr(tg, "outer") else x[:, None] * y[None, :],
        ),
        argnums=(0, 1),
        **INTERP,
    )(x, y)
    theirs = jax.jacrev(lambda x, y: (x * jnp.sum(y), x[:, None] * y[None, :]), argnums=(0, 1))(
        x, y
    )
    for a_out, b_out in zip(ours, theirs, strict=True):
        for a, b in zip(a_out, b_out, strict=True):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12)
