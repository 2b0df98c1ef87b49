"""SciPy's special functions and distributions, traceable and differentiable: spelled as
`jax.scipy` (and HIPS `autograd.scipy`), so `import tracegrad.scipy.stats.norm as norm`
replaces `import autograd.scipy.stats.norm as norm`.

    special   logsumexp, gammaln, digamma, polygamma, betaln, multigammaln, erf, erfc,
              erfinv, expit, logit, log_ndtr, ndtr, ndtri, xlogy, xlog1py, entr,
              gammainc, gammaincc, betainc, softmax, log_softmax
    stats     norm, multivariate_normal, t, dirichlet, beta, gamma, expon, uniform,
              laplace, logistic, cauchy, poisson, bernoulli (logpdf/logpmf, pdf/pmf, and
              cdf/logcdf/ppf/sf where jax.scipy has them)

Each function is a composite of tracegrad ops and the rule table's special-function
primitives (tracegrad/ops/special.py), so it runs on NumPy arrays, eager tensors and
under every transform. SciPy's own functions given a traced value raise an error that
points here.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.scipy.stats import norm
    >>> float(tg.grad(lambda mu: norm.logpdf(1.0, mu, 2.0))(0.0))
    0.25
"""

from tracegrad.scipy import special, stats

__all__ = ["special", "stats"]
