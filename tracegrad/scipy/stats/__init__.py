"""`scipy.stats` distributions, traceable and differentiable, as `jax.scipy.stats`: each
is a module of functions (`norm.logpdf(x, loc, scale)`), so both
`from tracegrad.scipy.stats import norm` and `import tracegrad.scipy.stats.norm as norm`
work, as with JAX and HIPS autograd.

    >>> import numpy as np
    >>> from tracegrad.scipy import stats
    >>> round(float(stats.norm.cdf(1.96)), 6), round(float(stats.t.logpdf(0.5, 3.0)), 6)
    (0.975002, -1.160974)
"""

from tracegrad.scipy.stats import (
    bernoulli,
    beta,
    cauchy,
    dirichlet,
    expon,
    gamma,
    laplace,
    logistic,
    multivariate_normal,
    norm,
    poisson,
    t,
    uniform,
)

__all__ = [
    "bernoulli",
    "beta",
    "cauchy",
    "dirichlet",
    "expon",
    "gamma",
    "laplace",
    "logistic",
    "multivariate_normal",
    "norm",
    "poisson",
    "t",
    "uniform",
]
