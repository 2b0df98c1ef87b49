"""eigh, eigvalsh, qr, svd, svdvals, pinv, lstsq, matrix_rank (tracegrad/ops/linalg.py).

On the NumPy interpreter backend (the default run): values vs NumPy, in NumPy mode
and traced through np.linalg; gradients vs float64 central differences (on inputs
where they are defined: symmetric with distinct eigenvalues, full rank with
distinct singular values, losses that do not depend on the vectors' signs),
vs jax.grad, as JAX's tests/linalg_test.py checks them (testEighGrad,
testSvdGrad, testQrGrad, testPinvGrad, testLstsq: `check_grads` of the same
decompositions); errors for bad operands. The Numba kernels of these ops are
checked in test_linalg.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_helpers import assert_close, numeric_grad

import tracegrad as tg
from tracegrad.ops.core import DTypeError, ShapeError
from tracegrad.ops.linalg import QRNotDifferentiable

RNG = np.random.default_rng(77)
SQUARE = RNG.standard_normal((4, 4))
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))
BATCH = RNG.standard_normal((2, 4, 3))
WEIGHTS = RNG.standard_normal((4, 4))
RHS = RNG.standard_normal((5, 2))
SHAPES = {"square": SQUARE, "tall": TALL, "wide": WIDE, "batch": BATCH}


def _sym(m):
    return 0.5 * (m + np.swapaxes(m, -1, -2))


def _k(a):
    return min(np.shape(a)[-2:])


# ------------------------------------------------------------------- values


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_values_match_numpy_in_numpy_mode(name):
    a = SHAPES[name]
    for mode in ("reduced", "complete"):
        q, r = tg.linalg.qr(a, mode=mode)
        q0, r0 = np.linalg.qr(a, mode=mode)
        assert_close(q, q0, rtol=1e-12, atol=1e-12)
        assert_close(r, r0, rtol=1e-12, atol=1e-12)
    assert_close(tg.linalg.qr(a, mode="r"), np.linalg.qr(a, mode="r"), rtol=1e-12, atol=1e-12)
    for full in (True, False):
        u, s, vh = tg.linalg.svd(a, full_matrices=full)
        u0, s0, vh0 = np.linalg.svd(a, full_matrices=full)
        assert_close(s, s0, rtol=1e-12)
        # singular vectors are unique up to sign: compare |U|, |Vh| of the first k
        k = _k(a)
        assert_close(np.abs(u[..., :k]), np.abs(u0[..., :k]), rtol=1e-9, atol=1e-9)
        assert_close(np.abs(vh[..., :k, :]), np.abs(vh0[..., :k, :]), rtol=1e-9, atol=1e-9)
        assert u.shape == u0.shape and vh.shape == vh0.shape
        assert_close(u[..., :k] * s[..., None, :] @ vh[..., :k, :], a, rtol=1e-12, atol=1e-12)
    assert_close(tg.linalg.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    assert_close(tg.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    assert_close(tg.linalg.pinv(a), np.linalg.pinv(a), rtol=1e-10, atol=1e-12)


def test_eigh_values_match_numpy_and_read_the_symmetric_part():
    s = _sym(SQUARE)
    w, v = tg.linalg.eigh(s)
    w0, v0 = np.linalg.eigh(s)
    assert_close(w, w0, rtol=1e-12)
    assert_close(np.abs(v), np.abs(v0), rtol=1e-9, atol=1e-12)
    assert_close(tg.linalg.eigvalsh(s), w0, rtol=1e-12)
    # a non-symmetric operand: its symmetric part is read (as JAX's; NumPy reads UPLO's
    # triangle), so the gradient is the true one in every direction
    for uplo in ("L", "U"):
        assert_close(tg.linalg.eigh(SQUARE, UPLO=uplo).eigenvalues, w0, rtol=1e-12)
        assert_close(tg.linalg.eigvalsh(SQUARE, UPLO=uplo), w0, rtol=1e-12)

    def loss(a):  # tg.linalg: NumPy's own would read one triangle in the differences
        return np.sum(tg.linalg.eigvalsh(a) ** 3) + np.sum(np.abs(tg.linalg.eigh(a)[1]))

    assert_close(tg.grad(loss)(SQUARE), numeric_grad(loss, [SQUARE], 0), rtol=1e-5, atol=1e-7)
    batch = _sym(RNG.standard_normal((3, 4, 4)))
    assert_close(tg.linalg.eigh(batch)[0], np.linalg.eigvalsh(batch), rtol=1e-12)


def test_lstsq_and_matrix_rank_match_numpy():
    for b in (RHS, RHS[:, 0]):
        for got, ref in zip(tg.linalg.lstsq(TALL, b), np.linalg.lstsq(TALL, b), strict=True):
            assert_close(got, ref, rtol=1e-10, atol=1e-12)
    x, residuals, rank, _ = tg.linalg.lstsq(WIDE, RHS[:3])
    ref = np.linalg.lstsq(WIDE, RHS[:3])
    assert_close(x, ref[0], rtol=1e-10)
    assert residuals.shape == (0,) and int(rank) == 3
    deficient = np.outer(np.arange(1.0, 5.0), [1.0, 2.0, 3.0])  # rank 1: minimum-norm solution
    assert_close(
        tg.linalg.lstsq(deficient, RHS[:4])[0],
        np.linalg.lstsq(deficient, RHS[:4])[0],
        rtol=1e-10,
        atol=1e-12,
    )
    assert int(tg.linalg.matrix_rank(deficient)) == np.linalg.matrix_rank(deficient) == 1


def test_dtypes_follow_numpy():
    a32 = SQUARE.astype(np.float32)
    for out in (
        tg.linalg.eigh(_sym(a32))[1],
        tg.linalg.qr(a32)[0],
        tg.linalg.svd(a32)[0],
        tg.linalg.svdvals(a32),
        tg.linalg.pinv(a32),
    ):
        assert np.asarray(out).dtype == np.float32
    ints = np.array([[2, 1], [1, 2]])
    assert_close(tg.linalg.eigvalsh(ints), [1.0, 3.0], rtol=1e-14)
    assert tg.linalg.svdvals(ints).dtype == np.float64


def test_compiled_values_match_numpy_mode():
    def f(a, s, b):
        w, v = np.linalg.eigh(s)
        q, r = np.linalg.qr(a)
        u, sv, vh = np.linalg.svd(a, full_matrices=False)
        x = np.linalg.lstsq(a, b)[0]
        return w, v, q, r, u, sv, vh, np.linalg.pinv(a), x, np.linalg.svd(a, compute_uv=False)

    args = (TALL, _sym(SQUARE), RHS)
    for got, ref in zip(tg.compile(f)(*args), f(*args), strict=True):
        assert_close(got, ref, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- gradients
# (name, loss of one operand, operand); every loss is invariant to the signs of
# singular and eigen vectors (|V|, U diag(s) Vh, Q R, ...)


def _eigh_values(a):
    return np.sum(np.linalg.eigh(_sym(a))[0] ** 3)


def _eigh_vectors(a):
    return np.sum(np.abs(np.linalg.eigh(_sym(a))[1]) * WEIGHTS)


def _eigvalsh(a):
    return np.sum(np.sin(np.linalg.eigvalsh(_sym(a))))


def _qr(mode):
    def loss(a):
        q, r = np.linalg.qr(a, mode=mode)
        return np.sum(np.sin(q @ np.diag(np.sign(np.diag(r[..., : _k(a), : _k(a)]))))) + np.sum(
            np.cos(r) * r
        )

    return loss


def _qr_sign_free(a):
    q, r = np.linalg.qr(a)
    return np.sum(np.sin(q @ r)) + np.sum(r * r) + np.sum(np.abs(q))


def _svd(full):
    def loss(a):
        u, s, vh = np.linalg.svd(a, full_matrices=full)
        k = _k(a)
        return (
            np.sum(np.abs(u[..., :k]))
            + np.sum(s**2)
            + 0.5 * np.sum(np.abs(vh[..., :k, :]))
            + np.sum(np.sin((u[..., :k] * s[..., None, :]) @ vh[..., :k, :]))
        )

    return loss


def _svdvals(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) ** 3)


def _pinv(a):
    return np.sum(np.sin(np.linalg.pinv(a)))


def _lstsq(a):
    return np.sum(np.sin(np.linalg.lstsq(a, RHS[: np.shape(a)[-2]])[0]))


def _lstsq_vector(a):
    return np.sum(np.sin(np.linalg.lstsq(a, RHS[: np.shape(a)[-2], 0])[0]))


GRAD_CASES = [
    ("eigh_values", _eigh_values, SQUARE),
    ("eigh_vectors", _eigh_vectors, SQUARE),
    ("eigvalsh", _eigvalsh, SQUARE),
    (
        "eigh_batch",
        lambda a: (
            np.sum(np.linalg.eigh(_sym(a))[0] ** 2) + np.sum(np.abs(np.linalg.eigh(_sym(a))[1]))
        ),
        RNG.standard_normal((2, 3, 3)),
    ),
    ("qr_tall", _qr_sign_free, TALL),
    ("qr_square", _qr_sign_free, SQUARE),
    ("qr_wide", _qr_sign_free, WIDE),
    ("qr_wide_complete", _qr("complete"), WIDE),
    ("qr_batch", _qr_sign_free, BATCH),
    ("svd_tall", _svd(False), TALL),
    ("svd_tall_full", _svd(True), TALL),
    ("svd_wide_full", _svd(True), WIDE),
    ("svd_square", _svd(False), SQUARE),
    ("svd_batch", _svd(False), BATCH),
    ("svdvals_wide", _svdvals, WIDE),
    ("pinv_tall", _pinv, TALL),
    ("pinv_wide", _pinv, WIDE),
    ("lstsq_tall", _lstsq, TALL),
    ("lstsq_wide_vector", _lstsq_vector, WIDE),
]


@pytest.mark.parametrize("name,loss,a", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_finite_differences(name, loss, a):
    assert_close(tg.grad(loss)(a), numeric_grad(loss, [a], 0), rtol=1e-5, atol=1e-7, what=name)


def test_lstsq_gradient_in_b_matches_finite_differences():
    def loss(b):
        return np.sum(np.sin(np.linalg.lstsq(TALL, b)[0]))

    assert_close(tg.grad(loss)(RHS), numeric_grad(loss, [RHS], 0), rtol=1e-5, atol=1e-8)


@pytest.mark.slow  # ~18 s: importing JAX and compiling its decompositions
def test_gradients_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def jax_losses(a, s):
        w, v = jnp.linalg.eigh(s)
        q, r = jnp.linalg.qr(a)
        u, sv, vh = jnp.linalg.svd(a, full_matrices=False)
        return (
            jnp.sum(w**3)
            + jnp.sum(jnp.abs(v))
            + jnp.sum(jnp.sin(q @ r))
            + jnp.sum(r * r)
            + jnp.sum(jnp.abs(u))
            + jnp.sum(sv**2)
            + jnp.sum(jnp.abs(vh))
            + jnp.sum(jnp.sin(jnp.linalg.pinv(a)))
            + jnp.sum(jnp.sin(jnp.linalg.lstsq(a, RHS)[0]))
        )

    def losses(a, s):
        w, v = np.linalg.eigh(s)
        q, r = np.linalg.qr(a)
        u, sv, vh = np.linalg.svd(a, full_matrices=False)
        return (
            np.sum(w**3)
            + np.sum(np.abs(v))
            + np.sum(np.sin(q @ r))
            + np.sum(r * r)
            + np.sum(np.abs(u))
            + np.sum(sv**2)
            + np.sum(np.abs(vh))
            + np.sum(np.sin(np.linalg.pinv(a)))
            + np.sum(np.sin(np.linalg.lstsq(a, RHS)[0]))
        )

    s = _sym(SQUARE)
    got = tg.grad(losses, argnums=(0, 1))(TALL, s)
    ref = jax.grad(jax_losses, argnums=(0, 1))(TALL, s)
    assert_close(got[0], np.asarray(ref[0]), rtol=1e-9, atol=1e-11)
    # both read eigh's input's symmetric part: the gradient is the symmetric one
    assert_close(got[1], np.asarray(ref[1]), rtol=1e-9, atol=1e-11)


def test_second_derivatives_of_eigvalsh_and_svdvals():
    def loss(a):
        return np.sum(np.linalg.eigvalsh(_sym(a)) ** 3) + np.sum(
            np.linalg.svd(a, compute_uv=False) ** 3
        )

    hess_row = tg.grad(lambda a: np.sum(tg.grad(loss)(a) * WEIGHTS))(SQUARE)
    ref = numeric_grad(lambda a: np.sum(tg.grad(loss)(a) * WEIGHTS), [SQUARE], 0)
    assert_close(hess_row, ref, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------- errors


def test_bad_operands_raise_naming_the_op():
    with pytest.raises(ShapeError, match=r"eigh.*square"):
        tg.linalg.eigh(TALL)
    with pytest.raises(ShapeError, match=r"eigvalsh.*square"):
        tg.linalg.eigvalsh(TALL)
    for fn, name in (
        (tg.linalg.svd, "svd"),
        (tg.linalg.qr, "qr"),
        (tg.linalg.pinv, "pinv"),
        (tg.linalg.svdvals, "svdvals"),
    ):
        with pytest.raises(ShapeError, match=rf"{name}.*1-D"):
            fn(np.ones(3))
    with pytest.raises(DTypeError, match="svd"):
        tg.linalg.svdvals(SQUARE.astype(np.complex128))
    with pytest.raises(ShapeError, match="lstsq.*rows"):
        tg.linalg.lstsq(TALL, RHS[:4])
    with pytest.raises(ValueError, match="mode"):
        tg.linalg.qr(SQUARE, mode="economic")
    with pytest.raises(ValueError, match="UPLO"):
        tg.linalg.eigh(SQUARE, UPLO="X")


def test_complete_qr_of_a_tall_matrix_has_no_gradient_as_in_pytorch():
    with pytest.raises(QRNotDifferentiable, match="mode='complete' and nrows > ncols"):
        tg.grad(lambda a: np.sum(np.linalg.qr(a, mode="complete")[0]))(TALL)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3), (0, 0)])
def test_empty_matrices_give_numpy_results(shape):
    x = np.zeros(shape)
    pairs = [
        (tg.linalg.qr(x), np.linalg.qr(x)),
        (tg.linalg.svdvals(x), np.linalg.svdvals(x)),
        (tg.linalg.pinv(x), np.linalg.pinv(x)),
    ]
    pairs += [
        (tg.linalg.svd(x, full_matrices=full), np.linalg.svd(x, full_matrices=full))
        for full in (True, False)
    ]
    if shape[-1] == shape[-2]:
        pairs.append((tg.linalg.eigh(x), np.linalg.eigh(x)))
    for got, ref in pairs:
        got, ref = (got, ref) if isinstance(ref, tuple) else ((got,), (ref,))
        for mine, theirs in zip(got, ref, strict=True):
            assert np.shape(mine) == np.shape(theirs) and np.array_equal(mine, theirs)
