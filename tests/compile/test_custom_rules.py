"""Custom derivative rules (issue 13): tg.custom_vjp and tg.custom_jvp with JAX's API.

Cases come from JAX's custom-derivatives tutorial (clip_gradient, a numerically
stable log1pexp, a custom_jvp rule); values are checked by hand, against
finite differences, against JAX where installed, in the interpreter and in
Numba kernels, and on eager tensors.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.custom import CustomRuleError

INTERP = dict(backend="interpret")


@functools.partial(tg.custom_vjp, nondiff_argnums=(0, 1))
def clip_gradient(lo, hi, x):
    return x * 1.0


def _clip_fwd(lo, hi, x):
    return x * 1.0, None


def _clip_bwd(lo, hi, res, g):
    return (tg.clip(g, lo, hi),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@tg.custom_vjp
def log1pexp(x):
    return tg.log(1.0 + tg.exp(x))


def _log1pexp_fwd(x):
    return log1pexp(x), x


def _log1pexp_bwd(x, g):
    return (g * tg.sigmoid(x),)


log1pexp.defvjp(_log1pexp_fwd, _log1pexp_bwd)


@tg.custom_jvp
def f_jvp_rule(x, y):
    return tg.sin(x) * y


@f_jvp_rule.defjvp
def _f_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    return tg.sin(x) * y, tg.cos(x) * tx * y + tg.sin(x) * ty


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_clip_gradient_uses_the_rule(backend):
    f = lambda x: tg.sum(clip_gradient(-1.0, 1.0, x) * 5.0)
    np.testing.assert_array_equal(tg.grad(f, backend=backend)(np.array([1.0, 2.0])), [1.0, 1.0])
    assert float(f(np.array([1.0, 2.0]))) == 15.0  # forward is the plain function


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_stable_log1pexp_gradient_has_no_nan(backend):
    x = np.array([0.0, -3.0, 100.0, 1000.0])
    g = tg.grad(lambda x: tg.sum(log1pexp(x)), backend=backend)(x)
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-x)), rtol=1e-12)
    assert np.all(np.isfinite(g))
    # the plain formula's gradient is exp(x)/(1+exp(x)) = inf/inf = nan at 1000
    naive = tg.grad(lambda x: tg.sum(tg.log(1.0 + tg.exp(x))), backend=backend)(x)
    assert np.isnan(naive[-1])


def test_second_order_through_a_custom_vjp():
    x = np.array([0.5, -1.0])
    h = tg.grad(lambda x: tg.sum(tg.grad(lambda y: tg.sum(log1pexp(y)), **INTERP)(x)), **INTERP)(x)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(h, s * (1 - s), rtol=1e-12)


def test_custom_jvp_rule_gives_reverse_mode_by_transposition(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    gx, gy = tg.grad(lambda x, y: tg.sum(f_jvp_rule(x, y)), argnums=(0, 1), **INTERP)(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y, rtol=1e-12)
    np.testing.assert_allclose(gy, np.sin(x), rtol=1e-12)


def test_custom_jvp_rule_is_really_used():
    @tg.custom_jvp
    def f(x):
        return tg.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return tg.sin(x), 2.0 * t  # deliberately not cos(x)

    assert float(tg.grad(f, **INTERP)(0.3)) == 2.0


def test_custom_vjp_on_eager_tensors_uses_the_rule():
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    (clip_gradient(-1.0, 1.0, t) * 5.0).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, 1.0])


def test_custom_rules_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    @jax.custom_vjp
    def jlog1pexp(x):
        return jnp.log(1.0 + jnp.exp(x))

    jlog1pexp.defvjp(lambda x: (jlog1pexp(x), x), lambda x, g: (g * jax.nn.sigmoid(x),))
    x = np.array([0.0, -3.0, 100.0])
    np.testing.assert_allclose(
        tg.grad(lambda x: tg.sum(log1pexp(x)), **INTERP)(x),
        np.asarray(jax.grad(lambda x: jnp.sum(jlog1pexp(x)))(x)),
        rtol=1e-12,
    )


def test_rule_errors_are_clear():
    @tg.custom_vjp
    def f(x):
        return x * 2.0

    with pytest.raises(AttributeError, match="No VJP defined"):
        tg.grad(lambda x: tg.sum(f(x)), **INTERP)(np.ones(2))
    f.defvjp(lambda x: x * 2.0, lambda r, g: (g,))  # fwd without residuals
    with pytest.raises(CustomRuleError, match=r"pair \(output, residuals\)"):
        tg.grad(lambda x: tg.sum(f(x)), **INTERP)(np.ones(2))
    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g, g))
    with pytest.raises(CustomRuleError, match="one cotangent per"):
        tg.grad(lambda x: tg.sum(f(x)), **INTERP)(np.ones(2))
    assert isinstance(CustomRuleError("x"), TypeError)
