"""HIPS autograd's complex tests, ported with their assertions (issue 26).

From autograd's tests/test_complex.py (all six) and the two complex cases of its
tests/test_graphs.py. autograd's convention for a real function of complex
inputs is JAX's (the transpose of the jvp), which is tracegrad's compiled mode.

`check_grads` here is autograd's, for complex values: finite differences on
plain NumPy along random complex directions v (`fwd`: jvp(v) against them;
`rev`: Re<vjp(u), v> == Re<u, J v>, the pairing whose transpose JAX and autograd
take), to order 2 (the same checks of `grad(fun)`).
"""

import numpy as np
import pytest

import tracegrad as tg

I = {"backend": "interpret"}
EPS = 1e-6
rng = np.random.default_rng(1)


def _direction(x):
    v = rng.standard_normal(np.shape(x))
    if np.iscomplexobj(x):
        v = v + 1j * rng.standard_normal(np.shape(x))
    return v


def _pair(a, b) -> float:
    """Re sum(a * b): the real bilinear pairing vjp is the transpose for."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


def _check_order1(fun, x):
    x = np.asarray(x)
    v = _direction(x)
    numeric = (np.asarray(fun(x + EPS * v)) - np.asarray(fun(x - EPS * v))) / (2 * EPS)
    # fwd: the exact directional derivative
    _, tangent = tg.jvp(fun, (x,), (v.astype(x.dtype) if x.dtype.kind == "c" else v,), **I)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-5, atol=1e-6)
    # rev: the dot-product test with a random output cotangent
    out = np.asarray(fun(x))
    u = _direction(out)
    _, pullback = tg.vjp(fun, x, **I)
    (ct,) = pullback(u.astype(out.dtype) if out.dtype.kind == "c" else u)
    assert np.isclose(_pair(ct, v), _pair(u, numeric), rtol=1e-5, atol=1e-6)


def check_grads(fun, x):
    """autograd's check_grads(fun)(x), modes fwd and rev, order 2."""
    _check_order1(fun, x)
    x = np.asarray(x)
    out = np.asarray(fun(x))
    if out.dtype.kind != "c" and out.ndim == 0:  # order 2: the gradient, checked again
        _check_order1(tg.grad(fun, **I), x)


def to_scalar(x):
    """autograd.util.to_scalar."""
    return tg.sum(tg.real(tg.sin(x)))


# ------------------------------------------------------ autograd tests/test_complex.py


def test_real_type():
    fun = lambda x: tg.sum(tg.real(x))
    df = tg.grad(fun, **I)
    assert np.isrealobj(df(2.0))
    assert np.iscomplexobj(df(1.0j))


def test_real_if_close_type():
    fun = lambda x: tg.sum(tg.real(x))
    df = tg.grad(fun, **I)
    assert np.isrealobj(df(1.0))
    assert np.iscomplexobj(df(1.0j))


def test_angle_real():
    fun = lambda x: tg.angle(x)
    d_fun = lambda x: tg.grad(fun, **I)(x)
    check_grads(fun, rng.random())
    check_grads(d_fun, rng.random())


def test_angle_complex():
    fun = lambda x: tg.angle(x)
    d_fun = lambda x: tg.grad(fun, **I)(x)
    check_grads(fun, rng.random() + 1j * rng.random())
    check_grads(d_fun, rng.random() + 1j * rng.random())


def test_abs_real():
    fun = lambda x: tg.abs(x)
    d_fun = lambda x: tg.grad(fun, **I)(x)
    check_grads(fun, 1.1)
    check_grads(d_fun, 2.1)


def test_abs_complex():
    fun = lambda x: tg.abs(x)
    d_fun = lambda x: tg.grad(fun, **I)(x)
    check_grads(fun, 1.1 + 1.2j)
    check_grads(d_fun, 1.1 + 1.3j)


# -------------------------------------------------- autograd tests/test_graphs.py


def test_complex_mutating_outgrad_from_indexing():
    def fun(a):
        b = a + 1.0j
        c = b[0] + 1.5
        d = a + b
        e = d + c
        return to_scalar(e)

    A = rng.standard_normal(5)
    check_grads(fun, A)
    d_fun = lambda x: to_scalar(tg.grad(fun, **I)(x))
    check_grads(d_fun, A)


def test_complex_separate_real_and_imaginary():
    def fun(a):
        r, i = tg.real(a), tg.imag(a)
        a = tg.abs(r) ** 1.4 + tg.abs(i) ** 1.3
        return to_scalar(a)

    d_fun = lambda x: to_scalar(tg.grad(fun, **I)(x))
    A = rng.standard_normal((5, 3)) + 0.1j * rng.standard_normal((5, 3))
    check_grads(fun, A)
    check_grads(d_fun, A)


def test_values_agree_with_autograd():
    """The same gradients as HIPS autograd itself, where it is installed."""
    ag = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    z = np.array([1.1 + 1.2j, -0.4 + 0.3j, 2.0 - 0.5j])
    cases = [
        (lambda x: tg.sum(tg.abs(x) * tg.angle(x)), lambda x: anp.sum(anp.abs(x) * anp.angle(x))),
        (
            lambda x: tg.sum(tg.real(tg.exp(x) * tg.conj(x))),
            lambda x: anp.sum(anp.real(anp.exp(x) * anp.conj(x))),
        ),
        (lambda x: tg.sum(tg.imag(x * x) ** 2), lambda x: anp.sum(anp.imag(x * x) ** 2)),
    ]
    for f, af in cases:
        np.testing.assert_allclose(tg.grad(f, **I)(z), ag.grad(af)(z), rtol=1e-12)
