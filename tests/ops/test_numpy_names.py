"""The Array API / jax.numpy spellings and compositions in tracegrad/ops/numpy_names.py."""

import numpy as np
import pytest

import tracegrad as tg

rng = np.random.default_rng(7)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((3, 4))
M = rng.standard_normal((2, 3, 4))
V = rng.standard_normal((2, 4))
INTERP = dict(backend="interpret")

# name -> (tracegrad call, NumPy reference, inputs); all differentiable in the first input
CASES = {
    "acos": (lambda x: tg.acos(x * 0.3), lambda x: np.arccos(x * 0.3), (A,)),
    "atan2": (lambda x, y: tg.atan2(x, y), np.arctan2, (A, B)),
    "amax": (lambda x: tg.amax(x, axis=1), lambda x: np.amax(x, axis=1), (A,)),
    "concat": (
        lambda x, y: tg.concat([x, y], axis=1),
        lambda x, y: np.concatenate([x, y], 1),
        (A, B),
    ),
    "pow": (lambda x: tg.pow(x * x + 1, 1.5), lambda x: np.power(x * x + 1, 1.5), (A,)),
    "permute_dims": (
        lambda x: tg.permute_dims(x, (2, 0, 1)),
        lambda x: np.transpose(x, (2, 0, 1)),
        (M,),
    ),
    "matrix_transpose": (tg.matrix_transpose, lambda x: np.swapaxes(x, -1, -2), (M,)),
    "vecdot": (tg.vecdot, lambda a, b: np.sum(a * b, axis=-1), (A, B)),
    "matvec": (tg.matvec, lambda m, v: np.einsum("bij,bj->bi", m, v), (M, V)),
    "vecmat": (
        lambda v, m: tg.vecmat(v[:, :3], m),
        lambda v, m: np.einsum("bi,bij->bj", v[:, :3], m),
        (V, M),
    ),
    "take": (
        lambda x: tg.take(x, [2, 0, 2], axis=1),
        lambda x: np.take(x, [2, 0, 2], axis=1),
        (A,),
    ),
    "take_flat": (lambda x: tg.take(x, [5, 1]), lambda x: np.take(x, [5, 1]), (A,)),
    "select": (
        lambda x: tg.select([x > 0.5, x < -0.5], [x * 2, x**2], 0.0),
        lambda x: np.select([x > 0.5, x < -0.5], [x * 2, x**2], 0.0),
        (A,),
    ),
    "trapezoid": (lambda y: tg.trapezoid(y, dx=0.5), lambda y: np.trapezoid(y, dx=0.5), (A,)),
    "trapezoid_x": (
        lambda y, x: tg.trapezoid(y, x),
        lambda y, x: np.trapezoid(y, x),
        (A[0], np.cumsum(np.abs(B[0]))),
    ),
    "polyval": (
        lambda x: tg.polyval([0.5, -1.0, 2.0], x),
        lambda x: np.polyval([0.5, -1.0, 2.0], x),
        (A,),
    ),
    "float_power": (
        lambda x: tg.float_power(x * x + 1, 0.5),
        lambda x: np.float_power(x * x + 1, 0.5),
        (A,),
    ),
    "ldexp": (lambda x: tg.ldexp(x, 3), lambda x: np.ldexp(x, 3), (A,)),
    "positive": (tg.positive, np.positive, (A,)),
    "unstack": (lambda x: tg.unstack(x, axis=1)[2], lambda x: x[:, 2], (A,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients(name):
    fn, ref, args = CASES[name]
    np.testing.assert_allclose(tg.compile(fn, **INTERP)(*args), ref(*args), rtol=1e-12)
    loss = lambda *xs: tg.sum(tg.sin(fn(*xs)))
    g = tg.grad(loss, **INTERP)(*args)
    x0, eps = args[0], 1e-6
    num = np.zeros_like(x0)
    for i in range(x0.size):
        d = np.zeros_like(x0)
        d.flat[i] = eps
        num.flat[i] = (
            np.sum(np.sin(ref(x0 + d, *args[1:]))) - np.sum(np.sin(ref(x0 - d, *args[1:])))
        ) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_non_differentiable_helpers():
    assert tg.ndim(A) == 2 and tg.shape(M) == (2, 3, 4) and tg.size(M) == 24 and tg.size(M, 1) == 3
    np.testing.assert_array_equal(tg.isclose(A, A + 1e-9), np.isclose(A, A + 1e-9))
    assert tg.allclose(A, A + 1e-9) and not tg.allclose(A, B)
    np.testing.assert_array_equal(tg.logical_xor(A > 0, B > 0), np.logical_xor(A > 0, B > 0))
    assert int(tg.count_nonzero(np.array([0.0, 1.0, 2.0]))) == 2
    np.testing.assert_array_equal(tg.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(tg.arange(4), np.arange(4))
    np.testing.assert_array_equal(tg.eye(3), np.eye(3))
    # shapes are static while tracing
    assert tg.eval_shape(lambda x: tg.zeros(tg.shape(x)) + x * tg.ndim(x), A).shape == (3, 4)


def test_jax_names_and_dir():
    assert tg.jit is tg.compile
    graph = tg.make_jaxpr(lambda x: tg.sin(x) * 2.0)(A)
    assert [n.op for n in graph.nodes if n.op not in ("input", "const")] == ["sin", "mul"]
    out = tg.eval_shape(lambda x, y: {"p": x @ y.T, "s": tg.sum(x)}, A, B.astype(np.float32))
    assert out["p"].shape == (3, 3) and out["p"].dtype == np.float64 and out["s"].shape == ()
    for name in (
        "compile",
        "jit",
        "grad",
        "value_and_grad",
        "jacobian",
        "hessian",
        "vmap",
        "jvp",
        "vjp",
        "scan",
        "custom_vjp",
        "where",
        "vecdot",
        "zeros",
    ):
        assert name in dir(tg), name


def test_matches_jax_numpy():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    for name, ours, theirs in [
        (
            "vecdot",
            lambda x: tg.sum(tg.vecdot(x, B) ** 2),
            lambda x: jnp.sum(jnp.vecdot(x, B) ** 2),
        ),
        (
            "matrix_transpose",
            lambda x: tg.sum(tg.matrix_transpose(x) @ x),
            lambda x: jnp.sum(jnp.matrix_transpose(x) @ x),
        ),
        ("acos", lambda x: tg.sum(tg.acos(x * 0.3)), lambda x: jnp.sum(jnp.acos(x * 0.3))),
        (
            "polyval",
            lambda x: tg.sum(tg.polyval([1.0, 2.0, 3.0], x)),
            lambda x: jnp.sum(jnp.polyval(jnp.array([1.0, 2.0, 3.0]), x)),
        ),
    ]:
        np.testing.assert_allclose(
            tg.grad(ours, **INTERP)(A),
            np.asarray(jax.grad(theirs)(A)),
            rtol=1e-5,
            atol=1e-6,
            err_msg=name,
        )  # JAX computes in float32


def test_erf_gelu_compiled_matches_eager_and_jax():
    gelu = lambda x: tg.sum(0.5 * x * (1 + tg.erf(x / np.sqrt(2.0))))
    g = tg.grad(gelu)(A)  # through a Numba kernel (erf runs between segments)
    import tracegrad.eager as torch

    t = torch.tensor(A, requires_grad=True)
    torch.nn.functional.gelu(t).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)
    jax = pytest.importorskip("jax")
    ref = jax.grad(lambda x: jax.numpy.sum(jax.nn.gelu(x, approximate=False)))(A)  # float32
    np.testing.assert_allclose(g, np.asarray(ref), rtol=1e-5, atol=1e-6)
