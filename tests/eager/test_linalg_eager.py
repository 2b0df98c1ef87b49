"""torch.linalg on eager tensors (tracegrad/eager/linalg.py over tracegrad/ops/linalg.py).

Values vs NumPy, gradients and second derivatives vs finite differences
(gradcheck / gradgradcheck, float64), values, gradients, double backward,
grad_fn names and error texts vs real PyTorch where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from eager_op_table import float64_leaves, weighted_backward

import tracegrad.eager as tt

RNG = np.random.default_rng(2024)
M = RNG.standard_normal((4, 4))
SPD = M @ M.T + 4 * np.eye(4)
SPD_BATCH = np.stack([SPD, SPD + np.eye(4)])
GEN = RNG.standard_normal((4, 4)) + 4 * np.eye(4)
RHS = RNG.standard_normal((4, 3))
VEC = RNG.standard_normal(4)
LOW = np.linalg.cholesky(SPD)


def _sym_spd(T, m):
    """A symmetric positive-definite matrix from any square m (so differences stay SPD)."""
    return m @ m.transpose(-2, -1) + 4 * T.eye(m.shape[-1], dtype=m.dtype)


# (id, fn(T, *tensors), operands): each runs unchanged on tracegrad.eager and on torch
CASES = [
    ("cholesky", lambda T, m: T.linalg.cholesky(_sym_spd(T, m)), [M]),
    ("cholesky_upper", lambda T, m: T.linalg.cholesky(_sym_spd(T, m), upper=True), [M]),
    ("cholesky_batch", lambda T, m: T.linalg.cholesky(_sym_spd(T, m)), [np.stack([M, M.T])]),
    ("solve", lambda T, a, b: T.linalg.solve(a, b), [GEN, RHS]),
    ("solve_vector", lambda T, a, b: T.linalg.solve(a, b), [GEN, VEC]),
    (
        "solve_batch_vectors",
        lambda T, a, b: T.linalg.solve(a, b),
        [SPD_BATCH, RNG.standard_normal((2, 4))],
    ),
    ("solve_right", lambda T, a, b: T.linalg.solve(a, b, left=False), [GEN, RHS.T]),
    ("inv", lambda T, a: T.linalg.inv(a), [GEN]),
    ("inverse", lambda T, a: T.inverse(a), [GEN]),
    ("det", lambda T, a: T.linalg.det(a), [GEN]),
    ("det_batch", lambda T, a: T.det(a), [SPD_BATCH]),
    ("slogdet", lambda T, a: T.linalg.slogdet(a)[1], [-GEN]),
    ("logdet", lambda T, a: T.logdet(a), [SPD]),
    (
        "solve_triangular_lower",
        lambda T, a, b: T.linalg.solve_triangular(a, b, upper=False),
        [LOW, RHS],
    ),
    (
        "solve_triangular_upper_right_unit",
        lambda T, a, b: T.linalg.solve_triangular(a, b, upper=True, left=False, unitriangular=True),
        [LOW.T.copy(), RHS.T.copy()],
    ),
    ("triangular_solve", lambda T, b, a: T.triangular_solve(b, a, upper=False)[0], [RHS, LOW]),
    (
        "triangular_solve_transpose",
        lambda T, b, a: T.triangular_solve(b, a, upper=True, transpose=True)[0],
        [RHS, LOW.T.copy()],
    ),
    ("cholesky_solve", lambda T, b, low: T.cholesky_solve(b, low), [RHS, LOW]),
    (
        "cholesky_solve_upper",
        lambda T, b, up: T.cholesky_solve(b, up, upper=True),
        [RHS, LOW.T.copy()],
    ),
    ("torch_cholesky", lambda T, m: T.cholesky(_sym_spd(T, m)), [M]),
    ("norm", lambda T, a: T.linalg.norm(a), [GEN]),
    ("norm_1", lambda T, a: T.linalg.norm(a, ord=1), [GEN]),
    (
        "norm_inf_keepdim",
        lambda T, a: T.linalg.matrix_norm(a, ord=float("inf"), keepdim=True),
        [GEN],
    ),
    ("vector_norm_3", lambda T, a: T.linalg.vector_norm(a, ord=3, dim=1), [GEN]),
]
IDS = [c[0] for c in CASES]
# our grad_fn differs from PyTorch's where the op is a composition here (module docstring)
NAME_DIFFERS = {
    "cholesky_solve",
    "cholesky_solve_upper",
    "solve_batch_vectors",
    "solve_right",
    "solve_triangular_upper_right_unit",
}


# piecewise linear (no curvature), or PyTorch's first derivative differs on purpose (below)
NO_SECOND_ORDER_VS_TORCH = {"norm_1", "norm_inf_keepdim", "cholesky_solve", "cholesky_solve_upper"}
# gradgradcheck is slow through cholesky (~5-10 s each on a busy machine): the default run
# checks each primitive once, the slow run every case
SLOW_GRADGRAD = {
    "cholesky_upper",
    "cholesky_batch",
    "torch_cholesky",
    "cholesky_solve",
    "cholesky_solve_upper",
    "triangular_solve",
    "triangular_solve_transpose",
    "solve_triangular_upper_right_unit",
    "inverse",
    "det_batch",
}
GRADGRAD_CASES = [
    pytest.param(*c, marks=pytest.mark.slow) if c[0] in SLOW_GRADGRAD else c
    for c in CASES
    if c[0] not in ("norm_1", "norm_inf_keepdim")
]


@pytest.mark.parametrize("case_id,fn,arrays", CASES, ids=IDS)
def test_gradcheck(case_id, fn, arrays):
    assert tt.autograd.gradcheck(lambda *xs: fn(tt, *xs), float64_leaves(tt, arrays))


@pytest.mark.parametrize(
    "case_id,fn,arrays",
    GRADGRAD_CASES,
    ids=[c[0] for c in CASES if c[0] not in ("norm_1", "norm_inf_keepdim")],
)
def test_gradgradcheck(case_id, fn, arrays):
    assert tt.autograd.gradgradcheck(lambda *xs: fn(tt, *xs), float64_leaves(tt, arrays))


def test_values_match_numpy():
    assert np.allclose(tt.linalg.cholesky(tt.tensor(SPD)).numpy(), np.linalg.cholesky(SPD))
    assert np.allclose(
        tt.linalg.solve(tt.tensor(GEN), tt.tensor(RHS)).numpy(), np.linalg.solve(GEN, RHS)
    )
    assert np.allclose(tt.linalg.inv(tt.tensor(GEN)).numpy(), np.linalg.inv(GEN))
    assert np.allclose(tt.linalg.det(tt.tensor(SPD_BATCH)).numpy(), np.linalg.det(SPD_BATCH))
    sign, logabsdet = tt.linalg.slogdet(tt.tensor(-GEN))
    ref = np.linalg.slogdet(-GEN)
    assert sign.item() == ref.sign and np.isclose(logabsdet.item(), ref.logabsdet)
    assert np.allclose(
        tt.cholesky_solve(tt.tensor(RHS), tt.tensor(LOW)).numpy(), np.linalg.solve(SPD, RHS)
    )
    out = tt.linalg.cholesky(tt.tensor(SPD, dtype=tt.float32))
    assert out.dtype == tt.float32


def test_grad_fn_names():
    a = tt.tensor(SPD, requires_grad=True)
    b = tt.tensor(RHS, requires_grad=True)
    assert tt.linalg.cholesky(a).grad_fn.name() == "LinalgCholeskyExBackward0"
    assert tt.linalg.solve(a, b).grad_fn.name() == "LinalgSolveExBackward0"
    assert tt.linalg.inv(a).grad_fn.name() == "LinalgInvExBackward0"
    assert tt.linalg.det(a).grad_fn.name() == "LinalgDetBackward0"
    assert tt.linalg.slogdet(a).logabsdet.grad_fn.name() == "LinalgSlogdetBackward0"
    assert tt.linalg.slogdet(a).sign.grad_fn is None
    assert tt.cholesky(a).grad_fn.name() == "CholeskyBackward0"
    solution, coefficient = tt.triangular_solve(b, a, upper=False)
    assert solution.grad_fn.name() == "TriangularSolveBackward0"
    assert np.array_equal(coefficient.detach().numpy(), SPD)


@pytest.mark.parametrize("case_id,fn,arrays", CASES, ids=IDS)
def test_matches_torch(case_id, fn, arrays):
    torch = pytest.importorskip("torch")
    second = case_id not in NO_SECOND_ORDER_VS_TORCH
    ours = weighted_backward(tt, fn, arrays, create_graph=second)
    theirs = weighted_backward(torch, fn, arrays, create_graph=second)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-12)
    if case_id not in NAME_DIFFERS:
        assert ours[1] == theirs[1], (ours[1], theirs[1])
    for k, (mine, ref) in enumerate(zip(ours[2], theirs[2], strict=True)):
        np.testing.assert_allclose(mine, _read_part(case_id, k, ref), rtol=1e-9, atol=1e-11)
    for k, (mine, ref) in enumerate(zip(ours[3] or (), theirs[3] or (), strict=True)):
        np.testing.assert_allclose(mine, _read_part(case_id, k, ref), rtol=1e-8, atol=1e-10)


# cholesky_solve reads one triangle of its factor (LAPACK potrs), and its gradient here is
# zero elsewhere (gradcheck confirms); PyTorch's formula also fills the unread triangle
FACTOR_TRIANGLE = {"cholesky_solve": np.tril, "cholesky_solve_upper": np.triu}


def _read_part(case_id, k, ref):
    return FACTOR_TRIANGLE[case_id](ref) if case_id in FACTOR_TRIANGLE and k == 1 else ref


ERRORS = [
    ("not_square", lambda T: T.linalg.cholesky(T.zeros(3, 2))),
    ("det_not_square", lambda T: T.linalg.det(T.zeros(2, 3))),
    (
        "not_positive_definite",
        lambda T: T.linalg.cholesky(T.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=T.float64)),
    ),
    ("negative_definite", lambda T: T.linalg.cholesky(-T.eye(3))),
    ("singular_solve", lambda T: T.linalg.solve(T.zeros(3, 3), T.ones(3))),
    ("singular_inv", lambda T: T.linalg.inv(T.tensor([[1.0, 2.0], [2.0, 4.0]]))),
    ("solve_shapes", lambda T: T.linalg.solve(T.eye(3), T.zeros(4, 1))),
]


@pytest.mark.parametrize("case_id,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(case_id, call):
    with pytest.raises(RuntimeError) as ours:
        call(tt)
    if case_id.startswith(("not_positive", "negative", "singular")):
        assert isinstance(ours.value, tt.linalg.LinAlgError)
        assert isinstance(ours.value, np.linalg.LinAlgError)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    assert str(ours.value).split("\n")[0] == str(theirs.value).split("\n")[0]
    assert isinstance(theirs.value, torch.linalg.LinAlgError) == isinstance(
        ours.value, tt.linalg.LinAlgError
    )


def test_inputs_are_not_mutated():
    a = SPD.copy()
    t = tt.tensor(a, requires_grad=True)
    tt.linalg.cholesky(t).sum().backward()
    assert np.array_equal(t.detach().numpy(), SPD)


def test_docstring_examples_run():
    import doctest

    from tracegrad.eager import linalg

    result = doctest.testmod(linalg)
    assert result.attempted > 0 and result.failed == 0
