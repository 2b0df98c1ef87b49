"""Linear algebra (tracegrad/ops/linalg.py) in NumPy mode and compiled mode.

Values vs NumPy/SciPy, gradients vs float64 central differences and JAX (x64),
second derivatives vs JAX's hessian and differences of the gradient, errors for
non-square / non-positive-definite / singular input (also raised from compiled
kernels), and the Gaussian-process likelihood of perf/gp_nll_workload.py.

Few distinct graphs on purpose: each compiled function is built once per module.
"""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np
import pytest
import scipy.linalg as sla
from compile_helpers import assert_close, numeric_grad

import tracegrad as tg
from tracegrad.ops.core import DTypeError, ShapeError
from tracegrad.ops.linalg import LinAlgError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
from perf import gp_nll_workload as gp


def _spd(rng, n, batch=()):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


RNG = np.random.default_rng(1234)
A = _spd(RNG, 4)
AS = _spd(RNG, 3, (2,))  # a batch of two 3x3 matrices
B = RNG.standard_normal((4, 3))
b = RNG.standard_normal(4)
G = RNG.standard_normal((4, 4)) + 4 * np.eye(4)  # general (non-symmetric), invertible


def every_op(A, AS, B, b, G):
    """One scalar through every primitive, spelled with np.linalg where NumPy has the name."""
    L = np.linalg.cholesky(A)
    U = tg.linalg.cholesky(A, upper=True)
    x = tg.linalg.solve_triangular(L, b, lower=True)
    Y = tg.linalg.solve_triangular(U, B, lower=False, trans="T")
    Z = tg.linalg.solve_triangular(L, B, lower=True, unit_diagonal=True)
    sign, logabsdet = np.linalg.slogdet(G)
    return (
        np.sum(x * x)
        + np.sum(np.sin(Y))
        + np.sum(Z**2)
        + np.sum(np.linalg.solve(G, B) ** 2)
        + np.sum(np.cos(np.linalg.solve(AS, b[:3])))
        + np.sum(np.linalg.inv(G) ** 2)
        + 0.1 * np.linalg.det(G)
        + sign * logabsdet
        + np.sum(np.linalg.det(AS)) * 1e-3
        + np.sum(np.linalg.cholesky(AS))
    )


def every_op_jax(A, AS, B, b, G):
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    L = jnp.linalg.cholesky(A)
    U = jnp.linalg.cholesky(A).T
    x = solve_triangular(L, b, lower=True)
    Y = solve_triangular(U, B, lower=False, trans="T")
    Z = solve_triangular(L, B, lower=True, unit_diagonal=True)
    sign, logabsdet = jnp.linalg.slogdet(G)
    return (
        jnp.sum(x * x)
        + jnp.sum(jnp.sin(Y))
        + jnp.sum(Z**2)
        + jnp.sum(jnp.linalg.solve(G, B) ** 2)
        + jnp.sum(jnp.cos(jnp.linalg.solve(AS, b[:3])))
        + jnp.sum(jnp.linalg.inv(G) ** 2)
        + 0.1 * jnp.linalg.det(G)
        + sign * logabsdet
        + jnp.sum(jnp.linalg.det(AS)) * 1e-3
        + jnp.sum(jnp.linalg.cholesky(AS))
    )


ARGS = (A, AS, B, b, G)
ARGNUMS = (0, 1, 2, 3, 4)
VALUE_AND_GRAD = tg.value_and_grad(every_op, argnums=ARGNUMS)


@pytest.fixture(scope="module")
def compiled_result():
    return VALUE_AND_GRAD(*ARGS)


def _sym(m):
    return 0.5 * (m + np.swapaxes(m, -1, -2))


# ------------------------------------------------------------------ NumPy mode


def test_values_match_numpy_and_scipy_on_plain_arrays():
    L = np.linalg.cholesky(A)
    assert_close(tg.linalg.cholesky(A), L, rtol=1e-14, atol=0)
    assert_close(tg.linalg.cholesky(A, upper=True), L.T, rtol=1e-14, atol=0)
    assert_close(tg.linalg.cholesky(AS), np.linalg.cholesky(AS), rtol=1e-14, atol=0)
    for lower, trans, unit in [(True, 0, False), (False, 1, False), (True, "T", True)]:
        tri = np.tril(A) if lower else np.triu(A)
        for rhs in (b, B):
            assert_close(
                tg.linalg.solve_triangular(tri, rhs, lower=lower, trans=trans, unit_diagonal=unit),
                sla.solve_triangular(tri, rhs, lower=lower, trans=trans, unit_diagonal=unit),
                rtol=1e-13,
            )
    assert_close(tg.linalg.solve(G, B), np.linalg.solve(G, B), rtol=1e-13)
    assert_close(tg.linalg.solve(AS, b[:3]), np.linalg.solve(AS, b[:3]), rtol=1e-13)
    assert_close(tg.linalg.inv(G), np.linalg.inv(G), rtol=1e-13)
    assert_close(tg.linalg.det(AS), np.linalg.det(AS), rtol=1e-13)
    sign, logabsdet = tg.linalg.slogdet(-G)
    ref = np.linalg.slogdet(-G)
    assert float(sign) == ref.sign and abs(float(logabsdet) - ref.logabsdet) < 1e-13


def test_float32_stays_float32_and_ints_compute_in_float64():
    a32 = A.astype(np.float32)
    for out in (
        tg.linalg.cholesky(a32),
        tg.linalg.inv(a32),
        tg.linalg.det(a32),
        tg.linalg.solve(a32, b.astype(np.float32)),
        tg.linalg.slogdet(a32).logabsdet,
    ):
        assert np.asarray(out).dtype == np.float32
    ints = np.array([[2, 1], [1, 2]])
    assert tg.linalg.cholesky(ints).dtype == np.float64
    assert_close(tg.linalg.det(ints), 3.0, rtol=1e-14)


def test_cholesky_reads_the_symmetric_part_as_jax_does():
    """NumPy reads the lower triangle; tracegrad (like JAX) factors (A + A^T) / 2."""
    skew = A + np.triu(np.ones((4, 4)), 1)  # non-symmetric
    assert_close(tg.linalg.cholesky(skew), np.linalg.cholesky(_sym(skew)), rtol=1e-14)


# --------------------------------------------------------------- compiled mode


def test_compiled_value_matches_numpy(compiled_result):
    value, _ = compiled_result
    assert_close(value, every_op(*ARGS), rtol=1e-12)


def test_np_linalg_names_trace_into_the_linalg_primitives():
    traced = str(VALUE_AND_GRAD.lower(*ARGS).traced)
    for op in ("cholesky", "triangular_solve", "solve", "inv", "det", "slogdet_sign", "logabsdet"):
        assert re.search(rf"= {op}[\[ ]", traced), op


def test_compiled_gradients_match_finite_differences(compiled_result):
    _, grads = compiled_result

    def on_symmetric(A, AS, *rest):
        return every_op(_sym(A), _sym(AS), *rest)

    for i, grad in zip(ARGNUMS, grads, strict=True):
        if i in (0, 1):
            # NumPy's cholesky (which the differences run) reads only the lower triangle;
            # along symmetric directions both read the same matrix (JAX covers the rest)
            grad, expected = _sym(grad), numeric_grad(on_symmetric, list(ARGS), i)
        else:
            expected = numeric_grad(every_op, list(ARGS), i)
        assert_close(grad, expected, rtol=1e-6, atol=1e-7, what=f"argument {i}")


def test_compiled_gradients_match_jax(compiled_result):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    value, grads = compiled_result
    jvalue, jgrads = jax.jit(jax.value_and_grad(every_op_jax, argnums=ARGNUMS))(*ARGS)
    assert_close(value, float(jvalue), rtol=1e-12)
    for i, (got, want) in enumerate(zip(grads, jgrads, strict=True)):
        assert_close(got, np.asarray(want), rtol=1e-9, atol=1e-11, what=f"argument {i}")


def _second_order(A, G, b):
    """A scalar whose Hessian goes through every vjp rule's own derivative."""
    L = np.linalg.cholesky(A)
    x = tg.linalg.solve_triangular(L, b, lower=True, trans=1)
    return (
        np.sum(x**3)
        + np.sum(np.linalg.solve(A, b) ** 2)
        + np.linalg.slogdet(A)[1]
        + np.sum(np.linalg.inv(G) * G.T)
        + np.linalg.det(G) * 0.01
        + np.sum(np.log(np.diagonal(L)))
    )


def _second_order_jax(A, G, b):
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    L = jnp.linalg.cholesky(A)
    x = solve_triangular(L, b, lower=True, trans=1)
    return (
        jnp.sum(x**3)
        + jnp.sum(jnp.linalg.solve(A, b) ** 2)
        + jnp.linalg.slogdet(A)[1]
        + jnp.sum(jnp.linalg.inv(G) * G.T)
        + jnp.linalg.det(G) * 0.01
        + jnp.sum(jnp.log(jnp.diagonal(L)))
    )


# The second-order graphs hold ~20 linalg nodes, each cutting the kernel into another
# njit segment (about a second of Numba compile each): the default run checks them on
# the IR interpreter (same graphs, same rules), the slow run compiles them with Numba.
BACKENDS = ["interpret", pytest.param("numba", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module")
def hessian_result(backend):
    return tg.hessian(_second_order, argnums=(0, 1), backend=backend)(A, G, b)


def test_grad_of_grad_matches_differences_of_the_gradient(hessian_result, backend):
    """Hessian-vector products along symmetric directions vs differences of tg.grad."""
    grad = tg.grad(_second_order, argnums=(0, 1), backend=backend)
    rng = np.random.default_rng(7)
    va, vg = _sym(rng.standard_normal((4, 4))), rng.standard_normal((4, 4))
    eps = 1e-5
    hi = grad(A + eps * va, G + eps * vg, b)
    lo = grad(A - eps * va, G - eps * vg, b)
    (haa, hag), (hga, hgg) = hessian_result
    for k, (row_a, row_g) in enumerate(((haa, hag), (hga, hgg))):
        hvp = np.tensordot(row_a, va, axes=2) + np.tensordot(row_g, vg, axes=2)
        numeric = (hi[k] - lo[k]) / (2 * eps)
        if k == 0:
            hvp, numeric = _sym(hvp), _sym(numeric)
        assert_close(hvp, numeric, rtol=1e-5, atol=1e-6, what=f"row {k}")


def test_hessian_matches_jax(hessian_result):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    want = jax.jit(jax.hessian(_second_order_jax, argnums=(0, 1)))(A, G, b)
    for i in range(2):
        for j in range(2):
            assert_close(
                hessian_result[i][j],
                np.asarray(want[i][j]),
                rtol=1e-8,
                atol=1e-10,
                what=f"d2/d{i}d{j}",
            )


# ----------------------------------------------------------------------- errors


def test_non_square_input_names_the_op_and_the_shapes():
    for fn in (np.linalg.cholesky, np.linalg.inv, np.linalg.det, lambda a: np.linalg.slogdet(a)[1]):
        with pytest.raises(ShapeError, match=r"square matrices.*f64\[3,2\]"):
            tg.grad(lambda a, fn=fn: np.sum(fn(a)))(np.ones((3, 2)))
    with pytest.raises(ShapeError, match=r"solve: b must have 3 rows.*f64\[3,3\], f64\[4\]"):
        tg.linalg.solve(np.eye(3), np.ones(4))
    with pytest.raises(ShapeError, match=r"triangular_solve: b must have 3 rows"):
        tg.grad(lambda a: np.sum(tg.linalg.solve_triangular(a, np.ones(2))))(np.eye(3))
    with pytest.raises(ShapeError, match="1-D"):
        tg.linalg.inv(np.ones(3))
    with pytest.raises(DTypeError, match="float32 or float64"):
        tg.linalg.inv(np.eye(2, dtype=np.float16))
    # complex matrices are supported since issue 26 (tests/complex/test_eig.py)
    np.testing.assert_allclose(tg.linalg.inv(np.eye(2, dtype=np.complex128) * 2j), np.eye(2) / 2j)


def test_non_positive_definite_raises_linalg_error_in_numpy_mode():
    with pytest.raises(
        LinAlgError,
        match=r"cholesky: the matrix is not positive definite "
        r"\(the leading minor of order 2 .*f64\[2,2\]",
    ):
        tg.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert issubclass(LinAlgError, np.linalg.LinAlgError)


def test_compiled_kernels_raise_linalg_error_not_crash(compiled_result):
    bad_spd = A.copy()
    bad_spd[0, 0] = -1.0
    with pytest.raises(
        LinAlgError,
        match=r"cholesky: the matrix is not positive definite.*"
        r"f64\[4,4\]",
    ):
        VALUE_AND_GRAD(bad_spd, AS, B, b, G)
    with pytest.raises(LinAlgError, match=r"(solve|inv): the matrix is singular"):
        VALUE_AND_GRAD(A, AS, B, b, np.zeros((4, 4)))
    with pytest.raises(
        LinAlgError,
        match=r"solve: the matrix is singular \(operands: "
        r"f64\[4,4\], f64\[4,3\]\)",
    ):  # from the kernel
        VALUE_AND_GRAD(A, AS, B, b, np.diag([1.0, 1.0, 0.0, 1.0]))
    # the kernel still works afterwards, and the user's arrays are untouched
    value, _ = VALUE_AND_GRAD(*ARGS)
    assert_close(value, every_op(*ARGS), rtol=1e-12)
    assert bad_spd[0, 0] == -1.0


def test_singular_triangular_solve_raises():
    with pytest.raises(LinAlgError, match="triangular_solve: the matrix is singular"):
        tg.linalg.solve_triangular(np.diag([1.0, 0.0]), np.ones(2), lower=True)


# ------------------------------------- LAPACK inside the kernel (codegen/linalg_emit.py)


def _tri_solves(T, b):
    """Both triangles, both `trans`, a transposed view of T (read without a copy) and
    a matrix right-hand side: every layout the triangular_solve emitter handles."""
    x = tg.linalg.solve_triangular(T, b, lower=True)
    y = tg.linalg.solve_triangular(T.T, b, lower=False, trans=1)  # T.T's upper = T's lower
    Z = tg.linalg.solve_triangular(T, np.stack([b, 2.0 * b], axis=1), lower=True, trans="T")
    return np.sum(x * x) + np.sum(np.sin(y)) + np.sum(Z**2)


TRI = np.tril(A)
TRI_GRAD = tg.value_and_grad(_tri_solves, argnums=(0, 1))


def _lowered_ops(lowered, ids):
    by_id = {n.id: n for n in lowered.optimized.nodes}
    return {by_id[i].op for i in ids if i in by_id}


def test_cholesky_and_triangular_solve_run_inside_the_kernel(compiled_result):
    """No NumPy fallback: LAPACK/BLAS calls in the generated source, batched
    solves (np.linalg.solve(AS, b[:3]): a vector for each matrix) too."""
    lowered = VALUE_AND_GRAD.lower(*ARGS)
    for call in (
        "tg_potrf(",
        "tg_trsm(",
        "tg_trmm(",
        "tg_getrf(",
        "tg_getrs(",
        "tg_getri(",
        "tg_lu_slogdet(",
    ):
        assert call in lowered.source, call
    assert lowered.kernel.fallback_ids == ()
    assert "_numpy(" not in lowered.source


def test_gp_value_and_grad_is_one_njit_call(gp_result):
    lowered = GP_VALUE_AND_GRAD.lower(*GP_PARAMS, *GP_DATA)
    assert lowered.kernel.fallback_ids == ()
    assert "_numpy(" not in lowered.source
    assert lowered.source.count("tg_potrf(") == 1
    assert lowered.source.count("tg_trsv(") == 4  # z, alpha and their two cotangents
    assert lowered.source.count("tg_trsm(") == 2  # cholesky's vjp: L^-T S L^-1


def test_triangular_solve_layouts_in_the_kernel_match_eager_and_differences():
    value, (g_tri, g_b) = TRI_GRAD(TRI, b)
    assert_close(value, _tri_solves(TRI, b), rtol=1e-13)
    eager_value, eager_grads = tg.value_and_grad(_tri_solves, argnums=(0, 1), backend="interpret")(
        TRI, b
    )
    assert_close(value, eager_value, rtol=1e-13)
    assert_close(g_tri, eager_grads[0], rtol=1e-11, atol=1e-13)
    assert_close(g_b, eager_grads[1], rtol=1e-11, atol=1e-13)
    assert_close(g_b, numeric_grad(_tri_solves, [TRI, b], 1), rtol=1e-6, atol=1e-8)
    # the gradient lives on the lower triangle only (the triangle the solves read)
    assert_close(g_tri, numeric_grad(_tri_solves, [TRI, b], 0), rtol=1e-6, atol=1e-8)
    assert np.all(np.triu(g_tri, 1) == 0)


def test_triangular_solve_layouts_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    def jax_tri_solves(T, b):
        x = solve_triangular(T, b, lower=True)
        y = solve_triangular(T.T, b, lower=False, trans=1)
        Z = solve_triangular(T, jnp.stack([b, 2.0 * b], axis=1), lower=True, trans="T")
        return jnp.sum(x * x) + jnp.sum(jnp.sin(y)) + jnp.sum(Z**2)

    value, grads = TRI_GRAD(TRI, b)
    jvalue, jgrads = jax.value_and_grad(jax_tri_solves, argnums=(0, 1))(TRI, b)
    assert_close(value, float(jvalue), rtol=1e-12)
    # JAX's gradient wrt T is not masked to the triangle it reads; the triangle is
    assert_close(grads[0], np.tril(np.asarray(jgrads[0])), rtol=1e-10, atol=1e-12)
    assert_close(grads[1], np.asarray(jgrads[1]), rtol=1e-10, atol=1e-12)


def _solves(AS, b, BB, B1):
    """Batched solves with every broadcast: a vector for each matrix, matching batches,
    a batch of matrices with one b, one matrix with a batch of b (whose cotangent,
    from np.sum, is a broadcast literal)."""
    return (
        np.sum(np.cos(np.linalg.solve(AS, b)))
        + np.sum(np.linalg.solve(AS, BB) ** 2)
        + np.sum(np.linalg.solve(AS, B1) ** 3)
        + np.sum(np.linalg.solve(AS[0], BB))
    )


def test_batched_solves_in_the_kernel_match_the_interpreter_and_differences():
    rng = np.random.default_rng(5)
    args = [AS, b[:3], rng.standard_normal((2, 3, 2)), rng.standard_normal((3, 2))]
    argnums = (0, 1, 2, 3)
    compiled = tg.value_and_grad(_solves, argnums=argnums)
    value, grads = compiled(*args)
    assert "tg_getrs(" in compiled.lower(*args).source
    ref_value, ref_grads = tg.value_and_grad(_solves, argnums=argnums, backend="interpret")(*args)
    assert_close(value, ref_value, rtol=1e-13)
    for i, (got, want) in enumerate(zip(grads, ref_grads, strict=True)):
        assert_close(got, want, rtol=1e-11, atol=1e-13, what=f"argument {i}")
        assert_close(got, numeric_grad(_solves, list(args), i), rtol=1e-6, atol=1e-8)


def test_compiled_linalg_errors_say_what_eager_mode_says(compiled_result):
    """The kernel's LinAlgError has eager mode's text (the op, the failing minor, the
    operand shapes), and the user's line; the user's arrays are left untouched."""
    bad = A.copy()
    bad[1, 1] = -50.0
    with pytest.raises(LinAlgError) as eager:
        tg.linalg.cholesky(bad)
    with pytest.raises(LinAlgError) as compiled:
        VALUE_AND_GRAD(bad, AS, B, b, G)
    head = str(eager.value).split("\n")[0]
    assert "the leading minor of order 2" in head
    assert str(compiled.value).split("\n")[0] == head
    assert re.search(r"\(at .*test_linalg\.py:\d+\)", str(compiled.value))
    bad_batch = AS.copy()
    bad_batch[1] *= -1.0  # the second matrix of the batch is negative definite
    with pytest.raises(LinAlgError) as eager:
        tg.linalg.cholesky(bad_batch)
    with pytest.raises(LinAlgError) as from_batch:
        VALUE_AND_GRAD(A, bad_batch, B, b, G)
    assert "order 1 " in str(eager.value) and "f64[2,3,3]" in str(eager.value)
    assert str(from_batch.value).split("\n")[0] == str(eager.value).split("\n")[0]
    import pickle  # errors cross process boundaries (tracegrad.distributed) intact

    again = pickle.loads(pickle.dumps(compiled.value))
    assert isinstance(again, LinAlgError) and str(again) == str(compiled.value)
    assert bad[1, 1] == -50.0
    singular = TRI.copy()
    singular[2, 2] = 0.0
    with pytest.raises(
        LinAlgError,
        match=r"triangular_solve: the matrix is singular "
        r"\(a zero on its diagonal\) .*f64\[4,4\], f64\[4\]",
    ):
        TRI_GRAD(singular, b)
    assert singular[2, 2] == 0.0 and np.all(np.isfinite(TRI_GRAD(TRI, b)[0]))


def test_without_numpys_openblas_the_nodes_fall_back_to_numpy(monkeypatch, compiled_result):
    """Code generation only (no compile): the emitters step aside and the nodes run
    their NumPy impl between segments, as before the emitters existed."""
    from tracegrad.codegen.generate import generate
    from tracegrad.runtime import lapack

    graph = VALUE_AND_GRAD.lower(*ARGS).optimized
    monkeypatch.setattr(lapack, "AVAILABLE", False)
    emitted = generate(graph, "kernel_no_lapack")
    by_id = {n.id: n for n in graph.nodes}
    ops = {by_id[i].op for i in emitted.fallback_ids}
    assert {"cholesky", "triangular_solve", "inv", "det", "logabsdet", "solve"} <= ops
    assert "tg_potrf(" not in emitted.source and "tg_trsm(" not in emitted.source
    assert "tg_getrf(" not in emitted.source


@pytest.mark.slow
def test_gp_nll_float32_in_the_kernel_matches_float64():
    params, data = gp.make_data("float32", seed=3, n=24)
    value, grads = GP_VALUE_AND_GRAD(*params, *data)
    assert np.asarray(value).dtype == np.float32
    ref_value, ref_grads = gp.numpy_value_and_grad(
        [p.astype(np.float64) for p in params], [d.astype(np.float64) for d in data]
    )
    assert_close(value, ref_value, rtol=1e-4)
    for got, want in zip(grads, ref_grads, strict=True):
        assert np.asarray(got).dtype == np.float32
        assert_close(got, want, rtol=2e-3, atol=1e-3)


# -------------------------------------------------------------- GP likelihood

GP_PARAMS, GP_DATA = gp.make_data("float64", seed=3, n=24)
GP_VALUE_AND_GRAD = tg.value_and_grad(gp.gp_nll, argnums=(0, 1, 2))


@pytest.fixture(scope="module")
def gp_result():
    return GP_VALUE_AND_GRAD(*GP_PARAMS, *GP_DATA)


def test_gp_nll_matches_the_hand_derived_gradient_and_finite_differences(gp_result):
    value, grads = gp_result
    ref_value, ref_grads = gp.numpy_value_and_grad(GP_PARAMS, GP_DATA)
    assert_close(value, ref_value, rtol=1e-12)
    args = list(GP_PARAMS) + list(GP_DATA)
    for i in range(3):
        assert_close(grads[i], ref_grads[i], rtol=1e-9, what=f"param {i}")
        assert_close(grads[i], numeric_grad(gp.gp_nll, args, i), rtol=1e-6, atol=1e-8)
    n = GP_DATA[0].shape[0]
    assert math.isfinite(float(value)) and float(value) > -n


def test_gp_nll_matches_jax(gp_result):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    value, grads = gp_result
    jvalue, jgrads = jax.jit(jax.value_and_grad(gp.gp_nll_jax, argnums=(0, 1, 2)))(
        *GP_PARAMS, *GP_DATA
    )
    assert_close(value, float(jvalue), rtol=1e-12)
    for got, want in zip(grads, jgrads, strict=True):
        assert_close(got, float(want), rtol=1e-9)


# ------------------------------------------------------- eager tensors, compiled


def _small(A, b):
    L = np.linalg.cholesky(A)
    return np.sum(tg.linalg.solve_triangular(L, b, lower=True) ** 2) + np.linalg.slogdet(A)[1]


def test_compiled_on_eager_tensors_matches_eager_mode():
    """One CompiledFunctionBackward node; its gradient equals eager torch.linalg's.
    (Its kernel returns a small const among its saved values from a multi-segment
    driver: that once named an undefined variable.)"""
    import tracegrad.eager as tt

    a = A[:2, :2].copy()
    leaf = tt.tensor(a, requires_grad=True)
    out = tg.compile(_small)(leaf, tt.tensor(b[:2]))
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    out.backward()
    eager_leaf = tt.tensor(a, requires_grad=True)
    low = tt.linalg.cholesky(eager_leaf)
    x = tt.linalg.solve_triangular(low, tt.tensor(b[:2])[:, None], upper=False)
    eager = x.pow(2).sum() + tt.linalg.slogdet(eager_leaf).logabsdet
    eager.backward()
    assert_close(out.item(), eager.item(), rtol=1e-13)
    assert_close(leaf.grad.numpy(), eager_leaf.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("module", [tg.linalg.cholesky.__module__, gp.__name__])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- decompositions
# their semantics are tested on the interpreter in test_decompositions.py; here one
# compiled function checks the kernels: eigh/eigvalsh (syevd; float32 too, a batch,
# UPLO='U'), svd/svdvals (gesdd) and qr (geqrf/orgqr; tall, and a batch of square
# matrices in mode 'complete') in the kernel, pinv and lstsq as NumPy segments


def decompositions(a, s, rhs):
    """Every decomposition once, in losses that do not depend on the vectors' signs."""
    w, v = np.linalg.eigh(s)
    w_batch, v_batch = np.linalg.eigh(np.stack([s, 2.0 * s]), UPLO="U")
    q, r = np.linalg.qr(a)
    u, sv, vh = np.linalg.svd(a, full_matrices=False)
    return (
        np.sum(w**3)
        + np.sum(np.abs(v))
        + np.sum(np.sin(q @ r))
        + np.sum(r * r)
        + np.sum(np.sin(w_batch))
        + np.sum(np.abs(v_batch) * np.abs(v_batch[..., :1, :]))
        + 1e-6 * np.sum(np.linalg.eigvalsh(s.astype(np.float32)) ** 2)  # (value only)
        + np.linalg.norm(np.stack([a, 2.0 * a]), 2, axis=(1, 2)).sum()
        + np.sum(np.abs(np.linalg.qr(np.stack([a.T[:, :3], a[1:]]), mode="complete")[0]))
        + np.sum(np.abs(u) * sv)
        + np.sum(np.abs(vh))
        + np.sum(np.sin(np.linalg.pinv(a)))
        + np.sum(np.sin(np.linalg.lstsq(a, rhs)[0]))
        + np.linalg.norm(a, "nuc")
    )


DECOMPOSITION_ARGS = (B[:, :3] + np.eye(4, 3), _sym(G), RNG.standard_normal((4, 2)))


def decomposition_kernels(a, s):
    """The in-kernel LAPACK calls alone (forward: one small kernel, ~4 s cold)."""
    w, v = np.linalg.eigh(np.stack([s, 2.0 * s]), UPLO="U")
    u, sv, vh = np.linalg.svd(a, full_matrices=False)
    q, r = np.linalg.qr(a)
    qc, rc = np.linalg.qr(np.stack([a.T[:, :3], a[1:]]), mode="complete")
    return (
        w,
        np.abs(v),
        np.abs(u),
        sv,
        np.abs(vh),
        q @ r,
        np.abs(q),
        np.abs(r),
        np.abs(qc),
        np.abs(rc),
        np.linalg.eigvalsh(s.astype(np.float32)),
        np.linalg.svd(a.T, compute_uv=False),
    )


def test_compiled_decomposition_kernels_match_numpy():
    a, s, _ = DECOMPOSITION_ARGS
    got = tg.compile(decomposition_kernels)(a, s)
    for i, (mine, ref) in enumerate(zip(got, decomposition_kernels(a, s), strict=True)):
        assert mine.dtype == ref.dtype
        tol = 1e-5 if ref.dtype == np.float32 else 1e-12
        assert_close(mine, ref, rtol=tol, atol=tol, what=f"output {i}")


@pytest.mark.numba_pass  # ~35 s of Numba compile (the VJPs of every decomposition)
def test_compiled_decompositions_match_numpy_and_finite_differences():
    value, grads = tg.value_and_grad(decompositions, argnums=(0, 1, 2))(*DECOMPOSITION_ARGS)
    assert_close(value, decompositions(*DECOMPOSITION_ARGS), rtol=1e-12)
    for i in (0, 2):
        assert_close(
            grads[i],
            numeric_grad(decompositions, list(DECOMPOSITION_ARGS), i),
            rtol=1e-5,
            atol=1e-7,
            what=f"argument {i}",
        )
    # eigh reads one triangle; its gradient G is the symmetric one: the derivative along
    # every symmetric direction E is <G, E>
    a, s, rhs = DECOMPOSITION_ARGS
    assert_close(grads[1], grads[1].T, rtol=1e-12)
    for seed in range(3):
        e = _sym(np.random.default_rng(seed).standard_normal(s.shape))
        eps = 1e-6
        slope = (decompositions(a, s + eps * e, rhs) - decompositions(a, s - eps * e, rhs)) / (
            2 * eps
        )
        assert abs(np.sum(grads[1] * e) - slope) < 1e-4 * (1 + abs(slope))
