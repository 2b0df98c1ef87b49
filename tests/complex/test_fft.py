"""fft, ifft, rfft, irfft in both modes: values against NumPy, gradients against
jax (compiled) and torch (eager), where installed (issue 26)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch

I = {"backend": "interpret"}
rng = np.random.default_rng(0)
X6 = rng.standard_normal(6)
Z5 = rng.standard_normal(5) + 1j * rng.standard_normal(5)
M34 = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))


def test_values_match_numpy():
    np.testing.assert_allclose(tg.fft.fft(X6), np.fft.fft(X6))
    np.testing.assert_allclose(tg.fft.ifft(Z5, n=7), np.fft.ifft(Z5, n=7))
    np.testing.assert_allclose(tg.fft.rfft(X6, n=5), np.fft.rfft(X6, n=5))
    np.testing.assert_allclose(tg.fft.irfft(Z5), np.fft.irfft(Z5))
    np.testing.assert_allclose(tg.fft.irfft(Z5, n=9), np.fft.irfft(Z5, n=9))
    for norm in ("backward", "ortho", "forward"):
        np.testing.assert_allclose(
            tg.fft.ifft(M34, axis=0, norm=norm), np.fft.ifft(M34, axis=0, norm=norm)
        )
    assert tg.fft.fft(X6.astype(np.float32)).dtype == np.complex64
    # NumPy's own np.fft functions on traced values
    out = tg.compile(lambda x: np.fft.rfft(x), **I)(X6)
    np.testing.assert_allclose(out, np.fft.rfft(X6))
    np.testing.assert_allclose(tg.fft.fftfreq(4), np.fft.fftfreq(4))


def test_batched_fft_by_vmap():
    np.testing.assert_allclose(tg.vmap(lambda v: tg.fft.fft(v))(M34), np.fft.fft(M34))
    np.testing.assert_allclose(
        tg.vmap(lambda v: tg.fft.fft(v), in_axes=1)(M34), np.fft.fft(M34, axis=0).T
    )


CASES = {  # (tracegrad, jax.numpy, argument)
    "fft_power": (
        lambda x: tg.sum(tg.abs(tg.fft.fft(x)) ** 2 * tg.arange(6)),
        lambda jnp, x: jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2 * jnp.arange(6)),
        X6,
    ),
    "rfft_padded": (
        lambda x: tg.sum(tg.real(tg.fft.rfft(x)) * tg.imag(tg.fft.rfft(x, n=7))),
        lambda jnp, x: jnp.sum(jnp.real(jnp.fft.rfft(x)) * jnp.imag(jnp.fft.rfft(x, n=7))),
        X6,
    ),
    "irfft_even": (
        lambda z: tg.sum(tg.fft.irfft(z) * tg.arange(8.0)),
        lambda jnp, z: jnp.sum(jnp.fft.irfft(z) * jnp.arange(8.0)),
        Z5,
    ),
    "irfft_odd": (
        lambda z: tg.sum(tg.fft.irfft(z, n=9) ** 2),
        lambda jnp, z: jnp.sum(jnp.fft.irfft(z, n=9) ** 2),
        Z5,
    ),
    "ifft_ortho_axis0": (
        lambda m: tg.sum(tg.abs(tg.fft.ifft(m * m, axis=0, norm="ortho"))),
        lambda jnp, m: jnp.sum(jnp.abs(jnp.fft.ifft(m * m, axis=0, norm="ortho"))),
        M34,
    ),
    "fft_cropped": (
        lambda m: tg.sum(tg.abs(tg.fft.fft(m, n=3))),
        lambda jnp, m: jnp.sum(jnp.abs(jnp.fft.fft(m, n=3))),
        M34,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_gradients_match_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f, jf, a = CASES[name]
    np.testing.assert_allclose(
        tg.grad(f, **I)(a), jax.grad(lambda a: jf(jax.numpy, a))(a), rtol=1e-10, atol=1e-12
    )


def test_jacobians_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    np.testing.assert_allclose(
        tg.jacfwd(lambda x: tg.fft.rfft(x), **I)(X6), jax.jacfwd(jnp.fft.rfft)(X6), atol=1e-12
    )
    np.testing.assert_allclose(
        tg.jacrev(lambda z: tg.fft.fft(z), holomorphic=True, **I)(Z5),
        jax.jacrev(jnp.fft.fft, holomorphic=True)(Z5),
        atol=1e-12,
    )


EAGER = [
    lambda m, x, z, X: (m.fft.fft(x).abs() ** 2 * m.arange(6)).sum(),
    lambda m, x, z, X: (m.fft.rfft(x).real * m.fft.rfft(x, n=7).imag).sum(),
    lambda m, x, z, X: (m.fft.irfft(z) * m.arange(8)).sum() + (m.fft.irfft(z, n=9) ** 2).sum(),
    lambda m, x, z, X: (
        m.fft.ifft(X * X, dim=0, norm="ortho").abs().sum() + m.fft.fft(X, n=6).abs().sum()
    ),
]


@pytest.mark.parametrize("k", range(len(EAGER)))
def test_eager_values_and_gradients_match_torch(k):
    real_torch = pytest.importorskip("torch")
    results = []
    for m in (torch, real_torch):
        x, z, X = (m.tensor(v, requires_grad=True) for v in (X6, Z5, M34))
        loss = EAGER[k](m, x, z, X)
        loss.backward()
        grads = [None if t.grad is None else t.grad.numpy() for t in (x, z, X)]
        results.append((loss.detach().numpy(), grads))
    (mine, my_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    for a, b in zip(my_grads, their_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_eager_fft_dtype_and_gradcheck():
    assert torch.fft.fft(torch.tensor([1.0, 2.0])).dtype == torch.complex64
    assert torch.fft.rfftfreq(4).dtype == torch.float32
    z = torch.tensor(Z5, requires_grad=True)
    assert tg.gradcheck(lambda t: torch.fft.fft(t * t), (z,))
    assert tg.gradcheck(lambda t: torch.fft.irfft(t, n=7), (z,))


def test_nd_transforms_and_shifts():
    r = rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(tg.fft.fft2(M34), np.fft.fft2(M34))
    np.testing.assert_allclose(tg.fft.ifftn(r, axes=(0, 2)), np.fft.ifftn(r, axes=(0, 2)))
    np.testing.assert_allclose(tg.fft.fftn(r, s=(5, 2)), np.fft.fftn(r, s=(5, 2), axes=(1, 2)))
    np.testing.assert_allclose(tg.fft.fftshift(r), np.fft.fftshift(r))
    np.testing.assert_allclose(tg.fft.ifftshift(M34, axes=1), np.fft.ifftshift(M34, axes=1))
    out = tg.compile(lambda x: np.fft.fftshift(np.fft.fft2(x)), **I)(M34)
    np.testing.assert_allclose(out, np.fft.fftshift(np.fft.fft2(M34)))


def test_nd_gradients_match_jax_and_torch():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(m, x):
        return m.sum(m.abs(m.fft.fftshift(m.fft.fft2(x * x))) * m.arange(4.0))

    np.testing.assert_allclose(
        tg.grad(lambda x: f(tg, x), **I)(M34), jax.grad(lambda x: f(jnp, x))(M34), rtol=1e-10
    )
    real_torch = pytest.importorskip("torch")
    results = []
    for m in (torch, real_torch):
        x = m.tensor(M34, requires_grad=True)
        loss = (m.fft.fftshift(m.fft.fft2(x * x)).abs() * m.arange(4)).sum()
        loss = loss + m.fft.ifftn(x, dim=(0,)).real.sum()
        loss.backward()
        results.append((loss.item(), x.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)
