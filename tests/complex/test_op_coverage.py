"""Many ops on complex values, each against its peer (issue 26): compiled mode's
values and gradients against jax, eager mode's against torch (float64/complex128).
The loss of a complex result is sum |out|^2, of a real one sum(out).

Sixty-odd peer comparisons take a while on a busy 2-core machine, so this sweep runs
in CI's second pass (numba_pass), like the other long sweeps; the core cases of each
op family are in the default run's test_compiled_complex/test_eager_complex."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch

pytestmark = pytest.mark.numba_pass

I = {"backend": "interpret"}
rng = np.random.default_rng(0)
ZN = rng.standard_normal(4) + 1j * rng.standard_normal(4)
WN = rng.standard_normal(4) + 1j * rng.standard_normal(4)
MN = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))

UNARY = [  # tracegrad and jax.numpy share these names
    "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arctanh", "expm1",
    "log1p", "log10", "log2", "exp2", "square", "reciprocal", "sign", "conjugate",
    "negative", "var", "std", "mean", "prod", "cumsum", "cumprod", "diag",
]  # fmt: skip
BINARY = {  # name: (tracegrad, jax.numpy)
    "vdot": (lambda m, z: m.vdot(z, WN), None),
    "dot": (lambda m, z: m.dot(MN, z), None),
    "inner": (lambda m, z: m.inner(z, WN), None),
    "einsum": (lambda m, z: m.einsum("ij,j->i", MN, z), None),
    "tensordot": (lambda m, z: m.tensordot(MN, z, 1), None),
    "outer": (lambda m, z: m.outer(z, WN), None),
    "kron": (lambda m, z: m.kron(z, WN), None),
    "trace": (lambda m, z: m.trace(m.outer(z, WN)), None),
    "norm": (lambda m, z: m.linalg.norm(z), None),
    "matmul_T": (lambda m, z: (m.outer(z, WN) @ MN.T) @ z, None),
    "where_concat": (lambda m, z: m.concatenate([m.where(m.real(z) > 0, z, WN), z * 2j]), None),
    "power": (lambda m, z: m.power(z, WN) + z**0.5, None),
}


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


def _loss(m, out):
    return m.sum(m.abs(out) ** 2) if np.iscomplexobj(out) or m.iscomplexobj(out) else m.sum(out)


@pytest.mark.parametrize("name", UNARY + list(BINARY))
def test_compiled_values_and_gradients_match_jax(name):
    jax, jnp = _jax()
    if name in BINARY:
        fn = BINARY[name][0]
        f, jf = (lambda z: fn(tg, z)), (lambda z: fn(jnp, z))
    else:
        f, jf = (lambda z: getattr(tg, name)(z)), (lambda z: getattr(jnp, name)(z))
    np.testing.assert_allclose(f(ZN), jf(ZN), rtol=1e-12, atol=1e-14)
    g = tg.grad(lambda z: _loss(tg, f(z)), **I)(ZN)
    np.testing.assert_allclose(g, jax.grad(lambda z: _loss(jnp, jf(z)))(ZN), rtol=1e-10)


def test_arccosh_gradient_is_the_true_derivative():
    """JAX's arccosh jvp, rsqrt((z - 1)(z + 1)), takes the other branch than its value
    on part of the plane; tracegrad's gradient is the derivative of the value it
    computes (checked by finite differences), so it differs from JAX's there."""
    z = np.array([0.3 + 1.2j, -1.5 - 0.4j, 2 + 0.1j, -0.2 + 0.3j])
    g = tg.grad(lambda z: tg.sum(tg.real(tg.arccosh(z))), **I)(z)
    eps = 1e-6
    dx = (np.arccosh(z + eps).real - np.arccosh(z - eps).real) / (2 * eps)
    dy = (np.arccosh(z + 1j * eps).real - np.arccosh(z - 1j * eps).real) / (2 * eps)
    np.testing.assert_allclose(g, dx - 1j * dy, rtol=1e-6)


EAGER = {
    "sinh": lambda m, z, w, M: z.sinh(),
    "cosh": lambda m, z, w, M: z.cosh(),
    "tan": lambda m, z, w, M: z.tan(),
    "rsqrt": lambda m, z, w, M: z.rsqrt(),
    "reciprocal": lambda m, z, w, M: z.reciprocal(),
    "square": lambda m, z, w, M: z.square(),
    "sigmoid": lambda m, z, w, M: z.sigmoid(),
    "pow_tensor": lambda m, z, w, M: z.pow(w),
    "rpow": lambda m, z, w, M: 2**z,
    "matmul": lambda m, z, w, M: M @ z,
    "einsum": lambda m, z, w, M: m.einsum("ij,j->i", M, z),
    "dot": lambda m, z, w, M: m.dot(z, w),
    "vdot": lambda m, z, w, M: m.vdot(z, w),
    "mean": lambda m, z, w, M: z.mean(),
    "var": lambda m, z, w, M: z.var(),
    "std": lambda m, z, w, M: M.std(0),
    "prod": lambda m, z, w, M: z.prod(),
    "cumsum": lambda m, z, w, M: z.cumsum(0),
    "sgn": lambda m, z, w, M: z.sgn(),
    "cat_stack": lambda m, z, w, M: m.cat([z, w]) * m.stack([z, w]).sum(0).repeat(2),
    "index": lambda m, z, w, M: z[[0, 2]] * M[1:3, 0],
    "where": lambda m, z, w, M: m.where(z.real > 0, z, w),
    "t_clone": lambda m, z, w, M: (M.t() @ z).clone(),
    "mH": lambda m, z, w, M: M.mH @ z,
    "linear": lambda m, z, w, M: m.nn.functional.linear(z, M),
    "sum_dim": lambda m, z, w, M: M.sum(1),
    "inplace": lambda m, z, w, M: (z * 1).mul_(w).add_(1j),
    "exp_log_sqrt": lambda m, z, w, M: m.exp(z) + m.log(w) + m.sqrt(z),
}


@pytest.mark.parametrize("name", list(EAGER))
def test_eager_values_and_gradients_match_torch(name):
    real_torch = pytest.importorskip("torch")
    results = []
    for m in (torch, real_torch):
        z, w, M = (m.tensor(v, requires_grad=True) for v in (ZN, WN, MN))
        out = EAGER[name](m, z, w, M)
        loss = (out.abs() ** 2).sum() if out.is_complex() else out.sum()
        loss.backward()
        grads = [None if t.grad is None else t.grad.numpy() for t in (z, w, M)]
        results.append((out.detach().numpy(), grads))
    (mine, my_grads), (theirs, their_grads) = results
    assert mine.dtype == theirs.dtype
    np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)
    for a, b in zip(my_grads, their_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
