"""torch.linalg.eigh/eigvalsh/qr/svd/svdvals/pinv/lstsq/matrix_norm on eager tensors.

Gradients vs finite differences (gradcheck, float64) and, where PyTorch is
installed, values, gradients and second derivatives vs torch.autograd. The cases
are those of PyTorch's OpInfos for these ops (common_methods_invocations.py):
eigh's input made Hermitian by the wrapper and its eigenvectors compared through
abs() (gradcheck_wrapper_hermitian_input, output_process_fn_grad), svd's factors
through abs(U), S, abs(Vh) or U diag(S) Vh; full_matrices=True on rectangular
input, qr in every mode PyTorch differentiates, and PyTorch's errors where it
raises.
"""

from __future__ import annotations

import numpy as np
import pytest
from eager_op_table import float64_leaves, weighted_backward

import tracegrad.eager as tt

RNG = np.random.default_rng(808)
SQUARE = RNG.standard_normal((4, 4))
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))
BATCH = RNG.standard_normal((2, 4, 3))
RHS = RNG.standard_normal((5, 2))


def _herm(T, a):
    return a + a.transpose(-2, -1)


def _svd_parts(T, a, full=False):
    U, S, Vh = T.linalg.svd(a, full_matrices=full)
    k = min(a.shape[-2:])
    return U[..., :k].abs().sum(-1) + S.sum(-1, keepdim=True), Vh[..., :k, :].abs() * 2


def _svd_product(T, a, full=False):
    U, S, Vh = T.linalg.svd(a, full_matrices=full)
    k = min(a.shape[-2:])
    return (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]


def _qr_parts(T, a, mode="reduced"):
    Q, R = T.linalg.qr(a, mode=mode)
    return (Q @ R).sin() + Q.abs().sum() + (R * R).sum()


# (id, fn(T, *tensors), operands): each runs unchanged on tracegrad.eager and on torch
CASES = [
    ("eigh_values", lambda T, a: T.linalg.eigh(_herm(T, a)).eigenvalues, [SQUARE]),
    ("eigh_vectors_abs", lambda T, a: T.linalg.eigh(_herm(T, a))[1].abs(), [SQUARE]),
    ("eigh_upper", lambda T, a: T.linalg.eigh(_herm(T, a), UPLO="U")[1].abs(), [SQUARE]),
    ("eigh_batch", lambda T, a: T.linalg.eigh(_herm(T, a))[1].abs(), [BATCH[..., :3, :]]),
    ("eigvalsh", lambda T, a: T.linalg.eigvalsh(_herm(T, a)), [SQUARE]),
    ("qr_tall", lambda T, a: _qr_parts(T, a), [TALL]),
    ("qr_wide", lambda T, a: _qr_parts(T, a), [WIDE]),
    ("qr_square_complete", lambda T, a: _qr_parts(T, a, "complete"), [SQUARE]),
    ("qr_wide_complete", lambda T, a: _qr_parts(T, a, "complete"), [WIDE]),
    ("qr_batch", lambda T, a: _qr_parts(T, a), [BATCH]),
    ("svd_abs_tall", lambda T, a: _svd_parts(T, a)[0], [TALL]),
    ("svd_abs_wide_vh", lambda T, a: _svd_parts(T, a)[1], [WIDE]),
    ("svd_full_tall", lambda T, a: _svd_parts(T, a, full=True)[0], [TALL]),
    ("svd_full_wide", lambda T, a: _svd_parts(T, a, full=True)[1], [WIDE]),
    ("svd_product_batch", lambda T, a: _svd_product(T, a), [BATCH]),
    ("svdvals", lambda T, a: T.linalg.svdvals(a), [WIDE]),
    ("pinv_tall", lambda T, a: T.linalg.pinv(a), [TALL]),
    ("pinv_wide", lambda T, a: T.linalg.pinv(a), [WIDE]),
    ("lstsq", lambda T, a, b: T.linalg.lstsq(a, b).solution, [TALL, RHS]),
    ("lstsq_wide", lambda T, a, b: T.linalg.lstsq(a, b).solution, [WIDE, RHS[:3]]),
    ("matrix_norm_nuc", lambda T, a: T.linalg.matrix_norm(a, ord="nuc"), [TALL]),
    ("matrix_norm_2", lambda T, a: T.linalg.matrix_norm(a, ord=2), [BATCH]),
    ("norm_neg2", lambda T, a: T.linalg.norm(a, ord=-2), [WIDE]),
    (
        "torch_svd",
        lambda T, a: T.svd(a)[0].abs().sum(-1) + T.svd(a)[1].sum() + T.svd(a)[2].abs().sum(0)[0],
        [TALL],
    ),
    ("torch_svd_not_some", lambda T, a: T.svd(a, some=False)[2][:, :3].abs(), [WIDE]),
    ("torch_qr", lambda T, a: T.qr(a)[0].abs() + T.qr(a)[1].sum(), [TALL]),
    ("pinverse", lambda T, a: T.pinverse(a), [WIDE]),
]
IDS = [c[0] for c in CASES]
# the factors are slices of one packed result here (module docstring of eager/linalg.py)
NAME_DIFFERS = {"eigh_values", "matrix_norm_nuc", "norm_neg2", "pinverse"}
GRADGRAD = set(IDS)  # every vjp is written in tracegrad ops: double backward works for all


@pytest.mark.parametrize("case_id,fn,arrays", CASES, ids=IDS)
def test_gradcheck(case_id, fn, arrays):
    assert tt.autograd.gradcheck(lambda *xs: fn(tt, *xs), float64_leaves(tt, arrays))


@pytest.mark.parametrize(
    "case_id,fn,arrays",
    [c for c in CASES if c[0] in GRADGRAD],
    ids=[c for c in IDS if c in GRADGRAD],
)
def test_gradgradcheck(case_id, fn, arrays):
    assert tt.autograd.gradgradcheck(lambda *xs: fn(tt, *xs), float64_leaves(tt, arrays))


@pytest.mark.parametrize("case_id,fn,arrays", CASES, ids=IDS)
def test_matches_torch(case_id, fn, arrays):
    torch = pytest.importorskip("torch")
    second = case_id in GRADGRAD
    ours = weighted_backward(tt, fn, arrays, create_graph=second)
    theirs = weighted_backward(torch, fn, arrays, create_graph=second)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-12)
    if case_id not in NAME_DIFFERS:
        assert ours[1] == theirs[1], (ours[1], theirs[1])
    for mine, ref in zip(ours[2], theirs[2], strict=True):
        np.testing.assert_allclose(mine, ref, rtol=1e-9, atol=1e-11)
    for mine, ref in zip(ours[3] or (), theirs[3] or (), strict=True):
        np.testing.assert_allclose(mine, ref, rtol=1e-8, atol=1e-10)


def test_results_and_names_follow_pytorch():
    a = tt.tensor(SQUARE, requires_grad=True)
    w = tt.linalg.eigh(a)[0]
    assert type(tt.linalg.eigh(a)).__name__ == "linalg_eigh" and w.shape == (4,)
    assert tt.linalg.eigvalsh(a).grad_fn.name() == "LinalgEighBackward0"
    assert tt.linalg.svdvals(a).grad_fn.name() == "LinalgSvdBackward0"
    assert tt.linalg.pinv(a).grad_fn.name() == "LinalgPinvBackward0"
    result = tt.linalg.lstsq(a, tt.tensor(RHS[:4]))
    assert result._fields == ("solution", "residuals", "rank", "singular_values")
    assert result.solution.grad_fn.name() == "LinalgLstsqBackward0" and int(result.rank) == 4
    U, S, Vh = tt.linalg.svd(tt.tensor(TALL))
    assert (U.shape, S.shape, Vh.shape) == ((5, 5), (3,), (3, 3))
    Q, R = tt.linalg.qr(tt.tensor(TALL), mode="complete")
    assert (Q.shape, R.shape) == ((5, 5), (5, 3))
    Q, R = tt.linalg.qr(tt.tensor(TALL), mode="r")
    assert Q.shape == (0,) and np.allclose(R.numpy(), np.linalg.qr(TALL, mode="r"))
    assert int(tt.linalg.matrix_rank(tt.tensor(np.outer([1.0, 2.0], [3.0, 4.0])))) == 1
    s = tt.linalg.eigh(tt.tensor(SQUARE, dtype=tt.float32)).eigenvalues
    assert s.dtype == tt.float32


def _backward(T, fn):
    fn(T).sum().backward()


ERRORS = [
    ("eigh_not_square", lambda T: T.linalg.eigh(T.zeros(3, 4))),
    ("eigh_vector", lambda T: T.linalg.eigh(T.zeros(3))),
    ("eigvalsh_not_square", lambda T: T.linalg.eigvalsh(T.zeros(3, 2))),
    ("svd_vector", lambda T: T.linalg.svd(T.ones(3))),
    ("svd_int", lambda T: T.linalg.svd(T.ones(3, 3, dtype=T.int64))),
    ("svdvals_vector", lambda T: T.linalg.svdvals(T.ones(3))),
    ("qr_vector", lambda T: T.linalg.qr(T.ones(3))),
    ("qr_int", lambda T: T.linalg.qr(T.ones(3, 3, dtype=T.int64))),
    ("qr_mode", lambda T: T.linalg.qr(T.ones(3, 3), mode="x")),
    ("pinv_vector", lambda T: T.linalg.pinv(T.ones(3))),
    ("lstsq_rows", lambda T: T.linalg.lstsq(T.ones(3, 2), T.ones(4, 1))),
    (
        "qr_r_backward",
        lambda T: (
            T.linalg.qr(
                T.ones(3, 2, dtype=T.float64, requires_grad=True) + T.eye(3, 2, dtype=T.float64),
                mode="r",
            )[1]
            .sum()
            .backward()
        ),
    ),
    (
        "qr_complete_tall_backward",
        lambda T: (
            T.linalg.qr(T.tensor(TALL, requires_grad=True), mode="complete")[0].sum().backward()
        ),
    ),
]


@pytest.mark.parametrize("case_id,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(case_id, call):
    with pytest.raises(RuntimeError) as ours:
        call(tt)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    assert str(ours.value).split("\n")[0] == str(theirs.value).split("\n")[0]


def test_eigh_of_an_int_tensor_is_not_implemented_as_in_pytorch():
    with pytest.raises(NotImplementedError, match="linalg_eigh_cpu.*Long"):
        tt.linalg.eigh(tt.ones(3, 3, dtype=tt.int64))


def test_inputs_are_not_mutated():
    t = tt.tensor(SQUARE.copy(), requires_grad=True)
    tt.linalg.eigh(t)[1].abs().sum().backward()
    tt.linalg.svd(t)[0].abs().sum().backward()
    tt.linalg.qr(t)[1].sum().backward()
    assert np.array_equal(t.detach().numpy(), SQUARE)
