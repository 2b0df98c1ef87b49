"""linalg.eig / eigvals of general matrices (issue 26): values against NumPy, the
eigenvalues' gradient against jax (compiled; JAX's rule), eigenvalues' and
eigenvectors' gradients against torch (eager; PyTorch's linalg_eig_backward).
Also inv, solve and det of complex matrices (linalg_eig.py's general primitives)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch

I = {"backend": "interpret"}
rng = np.random.default_rng(1)
A = rng.standard_normal((4, 4))
Z = A + 1j * rng.standard_normal((4, 4))
W = rng.standard_normal((4, 4))


def test_values_match_numpy():
    for a in (A, Z, A.astype(np.float32)):
        w, v = tg.linalg.eig(a)
        nw, nv = np.linalg.eig(a)
        assert w.dtype.kind == "c" and v.dtype.kind == "c"
        np.testing.assert_allclose(w, nw, rtol=1e-5)
        np.testing.assert_allclose(v, nv, rtol=1e-4, atol=1e-5)
    assert tg.linalg.eig(A.astype(np.float32)).eigenvalues.dtype == np.complex64
    np.testing.assert_allclose(tg.linalg.eigvals(A), np.linalg.eigvals(A))
    # NumPy's own np.linalg.eig on traced values
    out = tg.compile(lambda a: np.linalg.eigvals(a), **I)(A)
    np.testing.assert_allclose(out, np.linalg.eigvals(A))


def test_eigenvalue_gradients_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(a):
        w = tg.linalg.eigvals(a)
        return tg.sum(tg.abs(w) ** 2 + tg.real(w))

    def jf(a):
        w = jnp.linalg.eigvals(a)
        return jnp.sum(jnp.abs(w) ** 2 + jnp.real(w))

    np.testing.assert_allclose(tg.grad(f, **I)(A), jax.grad(jf)(A), rtol=1e-9, atol=1e-12)

    def h(z):
        return tg.sum(tg.linalg.eigvals(z) ** 2 * tg.arange(4))

    def jh(z):
        return jnp.sum(jnp.linalg.eigvals(z) ** 2 * jnp.arange(4))

    np.testing.assert_allclose(
        tg.grad(h, holomorphic=True, **I)(Z), jax.grad(jh, holomorphic=True)(Z), rtol=1e-9
    )
    np.testing.assert_allclose(
        tg.grad(lambda z: tg.real(h(z)), **I)(Z),
        jax.grad(lambda z: jnp.real(jh(z)))(Z),
        rtol=1e-9,
    )


EAGER = {
    "eigvals_abs": lambda m, a: m.linalg.eigvals(a).abs().sum(),
    "vectors_abs": lambda m, a: (
        (m.linalg.eig(a).eigenvectors.abs() * m.tensor(W)).sum()
        + m.linalg.eig(a).eigenvalues.real.sum()
    ),
    "vectors_abs2": lambda m, a: ((m.linalg.eig(a).eigenvectors.abs() ** 2) * m.tensor(W)).sum(),
}


@pytest.mark.parametrize("name", list(EAGER))
@pytest.mark.parametrize("complex_input", [False, True])
def test_eager_gradients_match_torch(name, complex_input):
    real_torch = pytest.importorskip("torch")
    results = []
    for m in (torch, real_torch):
        a = m.tensor(Z if complex_input else A, requires_grad=True)
        loss = EAGER[name](m, a)
        loss.backward()
        results.append((loss.detach().numpy(), a.grad.numpy()))
    (mine, my_grad), (theirs, their_grad) = results
    np.testing.assert_allclose(mine, theirs, rtol=1e-10)
    assert my_grad.dtype == their_grad.dtype
    np.testing.assert_allclose(my_grad, their_grad, rtol=1e-8, atol=1e-12)


def test_phase_dependent_loss_raises_pytorchs_error():
    a = torch.tensor(Z, requires_grad=True)
    with pytest.raises(RuntimeError, match="specified up to multiplication by e\\^\\{i phi\\}"):
        torch.linalg.eig(a).eigenvectors.real.sum().backward()


def test_eager_is_conj_of_compiled_for_eigenvectors():
    """Compiled eigenvector gradients (beyond JAX, which raises) are the conjugate of
    PyTorch's, as for every other op."""

    def loss(a):
        w, v = tg.linalg.eig(a)
        return tg.sum(tg.abs(v) * W) + tg.sum(tg.imag(w))

    a = torch.tensor(Z, requires_grad=True)
    loss(a).backward()
    np.testing.assert_allclose(a.grad.numpy(), np.conj(tg.grad(loss, **I)(Z)), rtol=1e-9)
    assert tg.gradcheck(
        lambda t: (torch.linalg.eig(t).eigenvectors.abs() ** 2).sum(0), (torch.tensor(Z),)
    )


M = Z + 3 * np.eye(4)
BV = rng.standard_normal(4) + 1j * rng.standard_normal(4)
BM = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))
COMPLEX_LINALG = {  # name: (f(m, a) for tracegrad and jax.numpy)
    "inv": lambda m, a: m.sum(m.abs(m.linalg.inv(a))),
    "solve_vector": lambda m, a: m.sum(m.abs(m.linalg.solve(a, BV)) ** 2),
    "solve_matrix": lambda m, a: m.sum(m.real(m.linalg.solve(a, BM))),
    "det": lambda m, a: m.abs(m.linalg.det(a)) + m.imag(m.linalg.det(a)),
}


@pytest.mark.parametrize("name", list(COMPLEX_LINALG))
def test_complex_inv_solve_det_match_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = COMPLEX_LINALG[name]
    np.testing.assert_allclose(f(tg, M), f(jax.numpy, M), rtol=1e-12)
    np.testing.assert_allclose(
        tg.grad(lambda a: f(tg, a), **I)(M), jax.grad(lambda a: f(jax.numpy, a))(M), rtol=1e-10
    )


@pytest.mark.parametrize("name", ["inv", "solve_vector", "solve_matrix", "det"])
def test_complex_inv_solve_det_match_torch(name):
    real_torch = pytest.importorskip("torch")
    losses = {
        "inv": lambda m, a: m.linalg.inv(a).abs().sum(),
        "solve_vector": lambda m, a: m.linalg.solve(a, m.tensor(BV)).abs().sum(),
        "solve_matrix": lambda m, a: m.linalg.solve(a, m.tensor(BM)).real.sum(),
        "det": lambda m, a: m.linalg.det(a).abs() + m.linalg.det(a).imag,
    }
    results = []
    for m in (torch, real_torch):
        a = m.tensor(M, requires_grad=True)
        loss = losses[name](m, a)
        loss.backward()
        results.append((loss.item(), a.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)
