"""Gaussian-process negative log-likelihood: a Cholesky-based workload (issue 14).

    K     = s^2 exp(-|x_i - x_j|^2 / (2 l^2)) + noise I      (RBF kernel)
    L     = cholesky(K)
    alpha = L^-T (L^-1 y)
    nll   = 1/2 y^T alpha + sum(log diag L) + n/2 log(2 pi)

differentiated with respect to (log s, log l, log noise). `gp_nll` is written
once in NumPy style: it runs on NumPy arrays and traces under tracegrad
(`tg.value_and_grad(gp_nll, argnums=(0, 1, 2))`). `gp_nll_jax`, `gp_nll_torch`
and `gp_nll_autograd` are the peers (`gp_nll_eager` is the PyTorch spelling on
tracegrad.eager tensors); `numpy_value_and_grad` is the hand-derived
reference (dnll/dtheta = 1/2 tr((K^-1 - alpha alpha^T) dK/dtheta)).
`make_gp_workload` builds a perf/workloads.py `Workload` for the benchmark.

    >>> w = make_gp_workload("float64", n=32)
    >>> value, grads = w.numpy_value_and_grad(w.params, w.data)
    >>> abs(float(value) - float(gp_nll(*w.params, *w.data))) < 1e-9
    True
"""

from __future__ import annotations

import math

import numpy as np


def gp_nll(log_s, log_l, log_noise, X, y):
    """The GP's negative log marginal likelihood, in NumPy style (traces under tracegrad)."""
    import tracegrad as tg

    n = X.shape[0]
    sq = np.sum(X * X, axis=1)
    r2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (X @ X.T), 0.0)
    K = np.exp(2.0 * log_s) * np.exp(-r2 / (2.0 * np.exp(2.0 * log_l))) + np.exp(
        log_noise
    ) * np.eye(n, dtype=X.dtype)  # np.eye(n) would make K float64
    L = np.linalg.cholesky(K)
    z = tg.linalg.solve_triangular(L, y, lower=True)
    alpha = tg.linalg.solve_triangular(L, z, lower=True, trans=1)
    return (
        0.5 * np.sum(y * alpha) + np.sum(np.log(np.diagonal(L))) + 0.5 * n * math.log(2.0 * math.pi)
    )


def gp_nll_jax(log_s, log_l, log_noise, X, y):
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    n = X.shape[0]
    sq = jnp.sum(X * X, axis=1)
    r2 = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * (X @ X.T), 0.0)
    K = jnp.exp(2.0 * log_s) * jnp.exp(-r2 / (2.0 * jnp.exp(2.0 * log_l))) + jnp.exp(
        log_noise
    ) * jnp.eye(n, dtype=X.dtype)
    L = jnp.linalg.cholesky(K)
    alpha = solve_triangular(L, solve_triangular(L, y, lower=True), lower=True, trans=1)
    return (
        0.5 * jnp.sum(y * alpha)
        + jnp.sum(jnp.log(jnp.diagonal(L)))
        + 0.5 * n * math.log(2.0 * math.pi)
    )


def gp_nll_torch(log_s, log_l, log_noise, X, y, torch=None):
    """PyTorch's spelling; torch=tracegrad.eager runs it on tracegrad's eager tensors."""
    if torch is None:
        import torch
    n = X.shape[0]
    sq = torch.sum(X * X, dim=1)
    r2 = torch.clamp(sq[:, None] + sq[None, :] - 2.0 * (X @ X.T), min=0.0)
    K = torch.exp(2.0 * log_s) * torch.exp(-r2 / (2.0 * torch.exp(2.0 * log_l))) + torch.exp(
        log_noise
    ) * torch.eye(n, dtype=X.dtype)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
    return (
        0.5 * torch.sum(y * alpha)
        + torch.sum(torch.log(torch.diagonal(L)))
        + 0.5 * n * math.log(2.0 * math.pi)
    )


def gp_nll_autograd(params, X, y):
    import autograd.numpy as anp
    from autograd.scipy.linalg import solve_triangular

    log_s, log_l, log_noise = params
    n = X.shape[0]
    sq = anp.sum(X * X, axis=1)
    r2 = anp.maximum(sq[:, None] + sq[None, :] - 2.0 * anp.dot(X, X.T), 0.0)
    K = anp.exp(2.0 * log_s) * anp.exp(-r2 / (2.0 * anp.exp(2.0 * log_l))) + anp.exp(
        log_noise
    ) * anp.eye(n)
    L = anp.linalg.cholesky(K)
    alpha = solve_triangular(L, solve_triangular(L, y, lower=True), lower=True, trans=1)
    return (
        0.5 * anp.sum(y * alpha)
        + anp.sum(anp.log(anp.diagonal(L, axis1=-1, axis2=-2)))  # (its vjp needs these axes)
        + 0.5 * n * math.log(2.0 * math.pi)
    )


def numpy_value_and_grad(params, data):
    """Hand-derived value and gradient: dnll/dtheta = 1/2 tr((K^-1 - alpha alpha^T) dK/dtheta)."""
    log_s, log_l, log_noise = (float(p) for p in params)
    X, y = data
    n = X.shape[0]
    r2 = np.maximum(np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1), 0.0)
    rbf = math.exp(2 * log_s) * np.exp(-r2 / (2 * math.exp(2 * log_l)))
    noise = math.exp(log_noise)
    K = rbf + noise * np.eye(n)
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(K, y)
    value = 0.5 * y @ alpha + np.log(np.diag(L)).sum() + 0.5 * n * math.log(2 * math.pi)
    W = np.linalg.inv(K) - np.outer(alpha, alpha)
    dK = (2 * rbf, rbf * r2 / math.exp(2 * log_l), noise * np.eye(n))
    grads = [np.asarray(0.5 * np.sum(W * d), dtype=X.dtype) for d in dK]
    return np.asarray(value, dtype=X.dtype), grads


def make_data(dtype: str = "float64", seed: int = 0, n: int = 256, d: int = 3):
    """(params, data): log s, log l, log noise as 0-d arrays; X (n, d) and y (n,)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, d))
    y = np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)
    params = [np.asarray(v, dtype=dtype) for v in (0.1, 0.3, math.log(0.1))]
    return params, [X.astype(dtype), y.astype(dtype)]


def gp_nll_eager(log_s, log_l, log_noise, X, y):
    """gp_nll_torch on tracegrad.eager tensors."""
    import tracegrad.eager

    return gp_nll_torch(log_s, log_l, log_noise, X, y, torch=tracegrad.eager)


def make_gp_workload(dtype: str = "float64", seed: int = 0, n: int = 256, d: int = 3):
    """A perf/workloads.py Workload for the benchmark ("gp_nll_n256")."""
    from perf.workloads import Workload

    params, data = make_data(dtype, seed, n, d)
    return Workload(
        f"gp_nll_n{n}",
        dtype,
        params,
        data,
        gp_nll,
        numpy_value_and_grad,
        gp_nll_torch,
        gp_nll_jax,
        gp_nll_autograd,
        f"GP negative log-likelihood (RBF kernel, Cholesky) on {n} points in {d}-D",
        eager_fn=gp_nll_eager,
        extra={"n": n, "flops": n**3 // 3 + 2 * n**2 + 2 * n * n * d},
    )
