"""tracegrad.scipy.special and tracegrad.scipy.stats (issue 26): values against SciPy,
gradients against finite differences in eager mode (gradcheck) and traced mode
(tg.grad), against jax.scipy where installed; SciPy's own functions on a traced value
point here."""

import doctest
import importlib

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as ss

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.scipy import special, stats

RNG = np.random.default_rng(0)
X = np.linspace(-2.5, 2.5, 6)
POS = np.linspace(0.3, 4.0, 6)
UNIT = np.linspace(0.05, 0.95, 6)
C = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])
PTS = RNG.standard_normal((4, 3))
ALPHA = np.array([1.5, 2.0, 3.0])
SIMPLEX = np.array([[0.2, 0.3], [0.3, 0.3], [0.5, 0.4]])
COUNTS = np.array([0.0, 1.0, 3.0, 6.0])
FLIPS = np.array([0.0, 1.0, 1.0, 0.0])

# (name, ours, SciPy's, arguments): every argument is differentiated
CASES = [
    ("gammaln", special.gammaln, sp.gammaln, (POS,)),
    ("digamma", special.digamma, sp.digamma, (POS,)),
    ("polygamma2", lambda x: special.polygamma(2, x), lambda x: sp.polygamma(2, x), (POS,)),
    ("erf", special.erf, sp.erf, (X,)),
    ("erfc", special.erfc, sp.erfc, (X * 3,)),
    ("erfinv", special.erfinv, sp.erfinv, (UNIT * 2 - 1,)),
    ("expit", special.expit, sp.expit, (X * 10,)),
    ("logit", special.logit, sp.logit, (UNIT,)),
    ("log_ndtr", special.log_ndtr, sp.log_ndtr, (X * 8,)),
    ("ndtr", special.ndtr, sp.ndtr, (X,)),
    ("ndtri", special.ndtri, sp.ndtri, (UNIT,)),
    ("betaln", special.betaln, sp.betaln, (POS, POS[::-1])),
    ("multigammaln", lambda a: special.multigammaln(a, 3), lambda a: sp.multigammaln(a, 3), (3.5,)),
    ("xlogy", special.xlogy, sp.xlogy, (X, POS)),
    ("xlog1py", special.xlog1py, sp.xlog1py, (X, POS)),
    ("logsumexp", lambda a: special.logsumexp(a), sp.logsumexp, (X * 50,)),
    (
        "logsumexp_b",
        lambda a, b: special.logsumexp(a, axis=1, b=b),
        lambda a, b: sp.logsumexp(a, axis=1, b=b),
        (X.reshape(2, 3), POS.reshape(2, 3)),
    ),
    ("norm.logpdf", stats.norm.logpdf, ss.norm.logpdf, (X, 0.3, 1.7)),
    ("norm.pdf", stats.norm.pdf, ss.norm.pdf, (X, 0.3, 1.7)),
    ("norm.cdf", stats.norm.cdf, ss.norm.cdf, (X, 0.3, 1.7)),
    ("norm.logcdf", stats.norm.logcdf, ss.norm.logcdf, (X * 10, 0.3, 1.7)),
    ("norm.sf", stats.norm.sf, ss.norm.sf, (X, 0.3, 1.7)),
    ("norm.logsf", stats.norm.logsf, ss.norm.logsf, (X * 10, 0.3, 1.7)),
    ("norm.ppf", stats.norm.ppf, ss.norm.ppf, (UNIT, 0.3, 1.7)),
    ("t.logpdf", stats.t.logpdf, ss.t.logpdf, (X, 3.5, 0.3, 1.7)),
    ("t.pdf", stats.t.pdf, ss.t.pdf, (X, 3.5, 0.3, 1.7)),
    ("gamma.logpdf", stats.gamma.logpdf, ss.gamma.logpdf, (POS, 2.5, 0.01, 1.7)),
    ("gamma.pdf", stats.gamma.pdf, ss.gamma.pdf, (POS, 2.5, 0.01, 1.7)),
    ("beta.logpdf", stats.beta.logpdf, ss.beta.logpdf, (UNIT, 2.5, 0.7)),
    ("beta.pdf", stats.beta.pdf, ss.beta.pdf, (UNIT, 2.5, 0.7)),
    (
        "dirichlet.logpdf",
        stats.dirichlet.logpdf,
        lambda x, a: np.array([ss.dirichlet.logpdf(c, a) for c in x.T]),
        (SIMPLEX, ALPHA),
    ),
    ("expon.logpdf", stats.expon.logpdf, ss.expon.logpdf, (POS, 0.1, 1.7)),
    ("expon.cdf", stats.expon.cdf, ss.expon.cdf, (POS, 0.1, 1.7)),
    ("expon.logsf", stats.expon.logsf, ss.expon.logsf, (POS, 0.1, 1.7)),
    ("uniform.cdf", stats.uniform.cdf, ss.uniform.cdf, (UNIT * 2, 0.05, 1.5)),
    ("uniform.ppf", stats.uniform.ppf, ss.uniform.ppf, (UNIT, 0.05, 1.5)),
    ("laplace.logpdf", stats.laplace.logpdf, ss.laplace.logpdf, (X, 0.3, 1.7)),
    ("laplace.cdf", stats.laplace.cdf, ss.laplace.cdf, (X, 0.3, 1.7)),
    ("logistic.logpdf", stats.logistic.logpdf, ss.logistic.logpdf, (X * 30, 0.3, 1.7)),
    ("logistic.cdf", stats.logistic.cdf, ss.logistic.cdf, (X, 0.3, 1.7)),
    ("logistic.ppf", stats.logistic.ppf, ss.logistic.ppf, (UNIT, 0.3, 1.7)),
    ("cauchy.logpdf", stats.cauchy.logpdf, ss.cauchy.logpdf, (X, 0.3, 1.7)),
    ("cauchy.cdf", stats.cauchy.cdf, ss.cauchy.cdf, (X, 0.3, 1.7)),
    (
        "mvn.logpdf",
        stats.multivariate_normal.logpdf,
        ss.multivariate_normal.logpdf,
        (PTS, np.ones(3), C),
    ),
    (
        "mvn.pdf",
        stats.multivariate_normal.pdf,
        ss.multivariate_normal.pdf,
        (PTS, np.ones(3), C),
    ),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, ours, theirs, args", CASES, ids=IDS)
def test_values_match_scipy(name, ours, theirs, args):
    np.testing.assert_allclose(ours(*args), theirs(*args), rtol=1e-12, atol=1e-14)


def _wrt_all(args):
    return tuple(range(len(args)))


@pytest.mark.parametrize("name, ours, theirs, args", CASES, ids=IDS)
def test_traced_gradients_match_finite_differences(name, ours, theirs, args):
    """tg.grad of sum(f) against central differences of SciPy's f."""
    if name == "dirichlet.logpdf":  # off the simplex SciPy raises: move along it only
        args = (args[0], args[1])
    grads = tg.grad(lambda *a: tg.sum(ours(*a)), argnums=_wrt_all(args))(*args)
    eps = 1e-6
    for i, (a, g) in enumerate(zip(args, grads, strict=True)):
        a = np.asarray(a, dtype=np.float64)
        num = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            if name == "dirichlet.logpdf" and i == 0:
                continue
            step = np.zeros(a.shape)
            step[idx] = eps
            up = list(args)
            dn = list(args)
            up[i], dn[i] = a + step, a - step
            num[idx] = (np.sum(theirs(*up)) - np.sum(theirs(*dn))) / (2 * eps)
        if name == "dirichlet.logpdf" and i == 0:
            # d/dx sum_j (alpha_j - 1) log x_j
            num = (ALPHA[:, None] - 1) / SIMPLEX
        if name.startswith("mvn") and i == 2:  # cov is read symmetrically: symmetrize both
            num, g = (num + num.T) / 2, (np.asarray(g) + np.asarray(g).T) / 2
        np.testing.assert_allclose(g, num, rtol=2e-6, atol=2e-7, err_msg=f"{name} arg {i}")


@pytest.mark.parametrize(
    "name", ["gammaln", "digamma", "erfinv", "log_ndtr", "norm.logpdf", "t.logpdf", "beta.logpdf"]
)
def test_eager_gradcheck(name):
    """The same functions on eager tensors (backward through the rule table's vjps)."""
    _, ours, _, args = CASES[IDS.index(name)]
    tensors = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in args]
    assert tg.gradcheck(lambda *t: ours(*t), tensors)


# cdfs through the incomplete gamma/beta functions: differentiable in x, loc and scale
CDF_CASES = [
    ("gamma.cdf", stats.gamma.cdf, ss.gamma.cdf, (POS, 2.5, 0.01, 1.7), (0, 2, 3)),
    ("gamma.sf", stats.gamma.sf, ss.gamma.sf, (POS, 2.5, 0.01, 1.7), (0, 2, 3)),
    ("gamma.logcdf", stats.gamma.logcdf, ss.gamma.logcdf, (POS, 2.5, 0.01, 1.7), (0, 2, 3)),
    ("beta.cdf", stats.beta.cdf, ss.beta.cdf, (UNIT, 2.5, 0.7), (0,)),
    ("beta.logsf", stats.beta.logsf, ss.beta.logsf, (UNIT, 2.5, 0.7), (0,)),
    ("t.cdf", stats.t.cdf, ss.t.cdf, (X, 3.5, 0.3, 1.7), (0, 2, 3)),
    ("gammainc", special.gammainc, sp.gammainc, (2.5, POS), (1,)),
    # discrete: counts are not differentiated, the rate / probability is
    ("poisson.logpmf", stats.poisson.logpmf, ss.poisson.logpmf, (COUNTS, 2.5), (1,)),
    ("poisson.pmf", stats.poisson.pmf, ss.poisson.pmf, (COUNTS, 2.5), (1,)),
    ("poisson.cdf", stats.poisson.cdf, ss.poisson.cdf, (COUNTS, 2.5), (1,)),
    ("bernoulli.logpmf", stats.bernoulli.logpmf, ss.bernoulli.logpmf, (FLIPS, 0.3), (1,)),
    ("bernoulli.cdf", stats.bernoulli.cdf, ss.bernoulli.cdf, (FLIPS, 0.3), (1,)),
    ("betainc", special.betainc, sp.betainc, (2.5, 0.7, UNIT), (2,)),
]


@pytest.mark.parametrize("name, ours, theirs, args, wrt", CDF_CASES, ids=[c[0] for c in CDF_CASES])
def test_cdfs_match_scipy_and_differentiate_in_x(name, ours, theirs, args, wrt):
    np.testing.assert_allclose(ours(*args), theirs(*args), rtol=1e-12, atol=1e-14)
    grads = tg.grad(lambda *a: tg.sum(ours(*a)), argnums=wrt)(*args)
    for i, g in zip(wrt, grads, strict=True):
        a = np.asarray(args[i], dtype=np.float64)
        num = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            step = np.zeros(a.shape)
            step[idx] = 1e-6
            up, dn = list(args), list(args)
            up[i], dn[i] = a + step, a - step
            num[idx] = (np.sum(theirs(*up)) - np.sum(theirs(*dn))) / 2e-6
        np.testing.assert_allclose(g, num, rtol=2e-6, atol=2e-7, err_msg=f"{name} arg {i}")


def test_shape_parameter_gradients():
    """gammainc differentiates in a (its series, term by term); betainc's a and b raise."""
    for ours, theirs in [(stats.gamma.cdf, ss.gamma.cdf), (stats.gamma.sf, ss.gamma.sf)]:
        got = tg.grad(lambda a, ours=ours: tg.sum(ours(POS, a)))(2.5)
        num = (np.sum(theirs(POS, 2.5 + 1e-6)) - np.sum(theirs(POS, 2.5 - 1e-6))) / 2e-6
        np.testing.assert_allclose(got, num, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="betainc: the gradient with respect to b"):
        tg.grad(lambda b: tg.sum(special.betainc(2.0, b, UNIT)))(0.7)


def test_second_derivatives():
    """digamma's derivative is polygamma(1), whose derivative is polygamma(2)."""
    d1 = tg.grad(lambda x: tg.sum(special.gammaln(x)))
    h = tg.grad(lambda x: tg.sum(d1(x)))(POS)
    np.testing.assert_allclose(h, sp.polygamma(1, POS), rtol=1e-12)
    d2 = tg.grad(lambda x: tg.sum(special.digamma(x)))
    h3 = tg.grad(lambda x: tg.sum(d2(x)))(POS)
    np.testing.assert_allclose(h3, sp.polygamma(2, POS), rtol=1e-12)


def test_compiled_vmap_and_eager_agree():
    f = lambda x, mu: stats.norm.logpdf(x, mu, 2.0) + special.gammaln(x * x + 1.0)
    want = f(X, 0.5)
    np.testing.assert_allclose(tg.jit(f, backend="interpret")(X, 0.5), want, rtol=1e-14)
    np.testing.assert_allclose(tg.vmap(f, in_axes=(0, None))(X, 0.5), want, rtol=1e-14)
    eager = f(torch.tensor(X), 0.5)
    np.testing.assert_allclose(eager.detach().numpy(), want, rtol=1e-14)


def test_edges_follow_scipy():
    assert np.isneginf(stats.gamma.logpdf(-1.0, 2.0))
    assert np.isneginf(stats.beta.logpdf(1.5, 2.0, 2.0))
    assert np.isnan(stats.beta.logpdf(0.5, -1.0, 2.0))
    assert np.isneginf(stats.dirichlet.logpdf(np.array([0.5, 0.6]), np.array([1.0, 2.0])))
    assert np.isneginf(stats.expon.logpdf(-1.0)) and np.isneginf(stats.uniform.logpdf(2.0))
    assert np.all(np.isneginf(stats.poisson.logpmf(np.array([-1.0, 1.5]), 2.0)))
    assert np.all(np.isneginf(stats.bernoulli.logpmf(np.array([-1.0, 2.0]), 0.3)))
    assert float(special.xlogy(0.0, 0.0)) == 0.0
    # no nan gradient through the masked branch of xlogy at x = 0, y = 0
    g = tg.grad(lambda y: special.xlogy(0.0, y))(0.0)
    assert float(g) == 0.0
    out, sign = special.logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0]), return_sign=True)
    want = sp.logsumexp([1.0, 2.0], b=[1.0, -1.0], return_sign=True)
    np.testing.assert_allclose([out, sign], want, rtol=1e-14)


def test_matches_jax_scipy():
    jax = pytest.importorskip("jax")
    import jax.scipy.special as jsp
    import jax.scipy.stats as jss

    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:

        def both(sp_mod, st_mod):
            return [
                sp_mod.gammaln(POS),
                sp_mod.digamma(POS),
                sp_mod.logsumexp(X.reshape(2, 3), axis=0),
                sp_mod.multigammaln(3.5, 3),
                st_mod.norm.logcdf(X * 10, 0.3, 1.7),
                st_mod.t.logpdf(X, 3.5, 0.3, 1.7),
                st_mod.beta.logpdf(UNIT, 2.5, 0.7),
                st_mod.gamma.logpdf(POS, 2.5, 0.01, 1.7),
                st_mod.dirichlet.logpdf(SIMPLEX, ALPHA),
                st_mod.multivariate_normal.logpdf(PTS, np.ones(3), C),
                st_mod.gamma.cdf(POS, 2.5, 0.01, 1.7),
                st_mod.beta.cdf(UNIT, 2.5, 0.7),
                sp_mod.betainc(2.5, 0.7, UNIT),
                st_mod.expon.logpdf(POS, 0.1, 1.7),
                st_mod.uniform.logpdf(UNIT * 2, 0.05, 1.5),
                st_mod.laplace.cdf(X, 0.3, 1.7),
                st_mod.logistic.logpdf(X * 30, 0.3, 1.7),
                st_mod.cauchy.logpdf(X, 0.3, 1.7),
                st_mod.poisson.logpmf(COUNTS, 2.5),
                st_mod.poisson.cdf(COUNTS, 2.5),
                st_mod.bernoulli.logpmf(FLIPS, 0.3),
            ]

        theirs = jax.jit(lambda: both(jsp, jss))()
        for i, (a, b) in enumerate(zip(both(special, stats), theirs, strict=True)):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-11, atol=1e-12, err_msg=str(i))
    finally:
        jax.config.update("jax_enable_x64", old)


def test_scipy_on_a_traced_value_points_to_tracegrad_scipy():
    with pytest.raises(
        tg.TracingError,
        match=r"(?s)scipy\.stats\.norm\.logpdf.*tracegrad\.scipy\.stats\.norm\.logpdf",
    ):
        tg.grad(lambda x: tg.sum(ss.norm.logpdf(x)))(np.ones(3))
    with pytest.raises(tg.TracingError, match=r"(?s)tracegrad\.scipy\.stats\.multivariate_normal"):
        tg.grad(lambda x: ss.multivariate_normal.logpdf(x, np.zeros(3), np.eye(3)))(np.ones(3))
    with pytest.raises(tg.TracingError, match=r"tracegrad\.scipy\.special\.gammaln"):
        tg.grad(lambda x: tg.sum(sp.gammaln(x)))(np.ones(3))


@pytest.mark.parametrize(
    "name",
    [
        "tracegrad.random",
        "tracegrad.ops.special",
        "tracegrad.scipy",
        "tracegrad.scipy.special",
        "tracegrad.scipy.stats",
        "tracegrad.scipy.stats.norm",
        "tracegrad.scipy.stats.t",
        "tracegrad.scipy.stats.gamma",
        "tracegrad.scipy.stats.beta",
        "tracegrad.scipy.stats.dirichlet",
        "tracegrad.scipy.stats.multivariate_normal",
    ],  # (expon, uniform, laplace, logistic, cauchy, poisson, bernoulli: no examples)
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
