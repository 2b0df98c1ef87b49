"""Issue 13's PyTorch tensor surface: views and index ops (narrow, select, split, chunk,
unbind, diagonal, repeat, gather, scatter_add, index_select), masked_fill, where, clamp
with number or tensor bounds, norm, cumsum, new_*, the in-place elementwise ops, and the
hooks / graph API (post-accumulate-grad hooks, node pre/post hooks, saved_tensors_hooks,
_raw_saved_*, gradgradcheck, functional vhp/hvp and multi-output vjp/jvp).

Each op is checked against real PyTorch when it is installed (values, gradients, grad_fn
names, error classes and texts) and, always, by tracegrad.gradcheck in float64 or by
hand-derived values. Tests taking the `lib` fixture run the same program under tracegrad
and under torch: their assertions are PyTorch's own (several are ported from PyTorch's
test/test_autograd.py, as named) and hold for both.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracegrad.eager as tg
from tracegrad.eager.gradcheck import gradcheck


@pytest.fixture(params=["tracegrad", "torch"])
def lib(request):
    if request.param == "torch":
        return pytest.importorskip("torch")
    return tg


def _torch():
    return pytest.importorskip("torch")


I = lambda L, v: L.tensor(v)  # an index tensor of the library at hand

# (id, fn(L, *tensors), operand shapes): every op of the task, forward and backward.
OP_CASES = [
    ("narrow", lambda L, x: x.narrow(1, 1, 2), [(4, 5)]),
    ("narrow_neg_start", lambda L, x: L.narrow(x, 0, -2, 2), [(4, 5)]),
    ("narrow_full", lambda L, x: x.narrow(0, 0, 4), [(4, 5)]),
    ("select", lambda L, x: x.select(1, -1), [(4, 5)]),
    ("split_int", lambda L, x: x.split(2, 1), [(4, 5)]),
    ("split_sizes", lambda L, x: L.split(x, [1, 4], 1), [(4, 5)]),
    ("chunk", lambda L, x: x.chunk(3, 0), [(4, 5)]),
    ("chunk_uneven", lambda L, x: L.chunk(x, 4, 1), [(4, 5)]),
    ("unbind", lambda L, x: x.unbind(1), [(4, 5)]),
    ("repeat", lambda L, x: x.repeat(2, 1, 3), [(4, 5)]),
    ("repeat_broadcast", lambda L, x: x.repeat(2, 3), [(1, 1)]),
    ("diagonal", lambda L, x: x.diagonal(), [(4, 5)]),
    ("diagonal_offset", lambda L, x: x.diagonal(1), [(4, 5)]),
    ("diagonal_neg_swapped", lambda L, x: L.diagonal(x, -2, 1, 0), [(4, 5)]),
    ("diagonal_3d", lambda L, x: x.diagonal(0, 0, 2), [(3, 4, 5)]),
    ("gather_same_shape", lambda L, x: x.gather(1, I(L, [[0, 4, 4, 1, 0]] * 4)), [(4, 5)]),
    ("gather_smaller_index", lambda L, x: L.gather(x, 0, I(L, [[0, 1, 2], [3, 3, 0]])), [(4, 5)]),
    (
        "scatter_add",
        lambda L, x, s: x.scatter_add(0, I(L, [[0, 1, 2, 3, 0], [1, 1, 1, 1, 1]]), s),
        [(4, 5), (2, 5)],
    ),
    ("index_select", lambda L, x: x.index_select(1, I(L, [0, 2, 2])), [(4, 5)]),
    ("index_select_0d", lambda L, x: L.index_select(x, 0, I(L, 1)), [(4, 5)]),
    ("masked_fill", lambda L, x: x.masked_fill(x > 0, 0.5), [(4, 5)]),
    ("masked_fill_tensor", lambda L, x, v: x.masked_fill(x > 0, v.sum()), [(4, 5), (2,)]),
    ("where", lambda L, x, y: L.where(x > 0, x, y), [(4, 5), (5,)]),
    ("where_scalar", lambda L, x: L.where(x > 0, x, 0.0), [(4, 5)]),
    ("where_method", lambda L, x, y: x.where(x > 0, y), [(4, 5), (4, 5)]),
    ("clamp_numbers", lambda L, x: x.clamp(-0.5, 0.5), [(4, 5)]),
    ("clamp_min_number", lambda L, x: L.clamp(x, min=0.1), [(4, 5)]),
    ("clip", lambda L, x: x.clip(max=0.2), [(4, 5)]),
    ("clamp_tensors", lambda L, x, lo, hi: x.clamp(lo, hi), [(4, 5), (5,), (4, 1)]),
    ("clamp_min_tensor", lambda L, x, lo: x.clamp(min=lo), [(4, 5), (5,)]),
    ("clamp_max_tensor", lambda L, x, hi: L.clamp(x, max=hi), [(4, 5), (5,)]),
    ("norm", lambda L, x: x.norm(), [(4, 5)]),
    ("norm_1", lambda L, x: x.norm(p=1), [(4, 5)]),
    ("norm_inf", lambda L, x: x.norm(p=float("inf")), [(4, 5)]),
    ("norm_dim", lambda L, x: x.norm(dim=1), [(4, 5)]),
    ("norm_1_keepdim", lambda L, x: x.norm(p=1, dim=0, keepdim=True), [(4, 5)]),
    ("norm_3_dims", lambda L, x: x.norm(p=3, dim=(0, 1)), [(4, 5)]),
    ("norm_inf_dim", lambda L, x: L.norm(x, p=float("inf"), dim=1), [(4, 5)]),
    ("norm_fro", lambda L, x: L.norm(x, p="fro", dim=(0, 1)), [(4, 5)]),
    ("cumsum", lambda L, x: x.cumsum(1), [(4, 5)]),
    ("cumsum_fn", lambda L, x: L.cumsum(x, dim=0), [(4, 5)]),
    ("cos_", lambda L, x: (x * 1).cos_(), [(4, 5)]),
    ("sin_then_exp_", lambda L, x: (x * 1).sin_().exp_(), [(4, 5)]),
    ("abs_add_log_sqrt_", lambda L, x: (x * 1).abs_().add_(1).log_().sqrt_(), [(4, 5)]),
    ("tanh_", lambda L, x: (x * 1).tanh_(), [(4, 5)]),
    ("sigmoid_", lambda L, x: (x * 1).sin_().sigmoid_(), [(4, 5)]),
    ("relu_", lambda L, x: (x * 1).sub_(0.1).relu_(), [(4, 5)]),
    ("neg_pow_", lambda L, x: (x * 1).neg_().pow_(2), [(4, 5)]),
    ("square_reciprocal_", lambda L, x: (x * 1).add_(3).square_().reciprocal_(), [(4, 5)]),
    ("masked_fill_", lambda L, x: (x * 1).masked_fill_(x > 0, 2.0), [(4, 5)]),
    ("clamp_numbers_", lambda L, x: (x * 1).clamp_(-0.3, 0.3), [(4, 5)]),
    ("clamp_tensor_", lambda L, x, lo: (x * 1).clamp_(min=lo), [(4, 5), (5,)]),
    # more of what real scripts use (composites; the last node has PyTorch's name)
    ("addcmul", lambda L, x, y, z: x.addcmul(y, z, value=0.5), [(4, 5), (4, 5), (5,)]),
    ("addcdiv", lambda L, x, y, z: L.addcdiv(x, y, z * z + 1, value=2), [(4, 5)] * 3),
    ("lerp_scalar", lambda L, x, y: x.lerp(y, 0.3), [(4, 5), (4, 5)]),
    ("lerp_tensor", lambda L, x, y, w: x.lerp(y, w.sigmoid()), [(4, 5)] * 3),
    ("index_add", lambda L, x, s: x.index_add(0, I(L, [0, 0, 3]), s, alpha=2), [(4, 5), (3, 5)]),
    ("index_add_dim1", lambda L, x, s: L.index_add(x, 1, I(L, [4, 1]), s), [(4, 5), (4, 2)]),
    ("flip", lambda L, x: x.flip(0, 1), [(4, 5)]),
    ("flip_last", lambda L, x: L.flip(x, [-1]), [(3, 4, 5)]),
    ("tril", lambda L, x: x.tril(1), [(4, 5)]),
    ("triu_batched", lambda L, x: L.triu(x, -1), [(2, 4, 5)]),
    (
        "masked_select",
        lambda L, x: x.masked_select(I(L, [True, False, True, False, True])),
        [(4, 5)],
    ),
    (
        "scatter_add_",
        lambda L, x, s: (x * 1).scatter_add_(0, I(L, [[1, 0, 3, 3, 2]]), s),
        [(4, 5), (1, 5)],
    ),
    ("index_add_", lambda L, x, s: (x * 1).index_add_(0, I(L, [1, 1]), s), [(4, 5), (2, 5)]),
    ("addcmul_", lambda L, x, y, z: (x * 1).addcmul_(y, z), [(4, 5)] * 3),
    ("addcdiv_", lambda L, x, y, z: (x * 1).addcdiv_(y, z.exp(), value=-1), [(4, 5)] * 3),
    ("lerp_", lambda L, x, y: (x * 1).lerp_(y, 0.75), [(4, 5), (4, 5)]),
    ("sort", lambda L, x: x.sort(1).values, [(4, 5)]),
    ("sort_descending_dim0", lambda L, x: L.sort(x, dim=0, descending=True)[0], [(4, 5)]),
    ("topk", lambda L, x: x.topk(2, 1).values, [(4, 5)]),
    ("topk_smallest", lambda L, x: L.topk(x, 3, dim=0, largest=False)[0], [(4, 5)]),
]


def _arrays(shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _run(L, fn, arrays):
    xs = [L.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(L, *xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(tuple(o.shape)).astype(arrays[0].dtype) for o in outs]
    total = sum((o * L.tensor(w)).sum() for o, w in zip(outs, weights, strict=True))
    total.backward()
    return xs, outs


@pytest.mark.parametrize("case", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_op_matches_pytorch(case):
    torch = _torch()
    _, fn, shapes = case
    arrays = _arrays(shapes)
    txs, touts = _run(tg, fn, arrays)
    rxs, routs = _run(torch, fn, arrays)
    assert len(touts) == len(routs)
    for t, r in zip(touts, routs, strict=True):
        assert tuple(t.shape) == tuple(r.shape)
        assert str(t.dtype) == str(r.dtype)
        np.testing.assert_allclose(t.detach().numpy(), r.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert t.grad_fn.name() == r.grad_fn.name()
    for t, r in zip(txs, rxs, strict=True):
        assert (t.grad is None) == (r.grad is None)
        if t.grad is not None:
            np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-5, atol=1e-5)


# Inputs kept away from the kinks (clamp bounds, |x| = 0, ties of the inf-norm) so that
# central differences are exact enough; the kinks themselves are checked by hand below.
_GRADCHECK_SKIP = {
    "masked_fill_",
    "masked_fill",
    "masked_fill_tensor",
    "where",
    "where_scalar",
    "where_method",
}  # masks computed from x itself: checked by hand


@pytest.mark.parametrize("case", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_op_gradcheck_float64(case):
    name, fn, shapes = case
    if name in _GRADCHECK_SKIP:
        pytest.skip("the mask depends on x; hand-checked in test_masked_fill_and_where_by_hand")
    arrays = _arrays(shapes, np.float64, seed=3)
    if name.startswith("clamp") or name == "clip":
        arrays[0] = np.round(arrays[0], 1) + 0.05  # no element sits on a bound, and
        for k, a in enumerate(arrays[1:]):  # no lower bound equals an upper one
            a[...] = np.round(a, 1) + 0.02 * k
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]

    def f(*ts):
        return fn(tg, *ts)

    assert gradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "name",
    [
        "repeat",
        "gather_smaller_index",
        "scatter_add",
        "index_select",
        "diagonal_3d",
        "norm",
        "norm_inf_dim",
        "clamp_tensors",
        "cumsum",
        "narrow",
        "unbind",
    ],
)
def test_op_gradgradcheck_float64(name):
    _, fn, shapes = next(c for c in OP_CASES if c[0] == name)
    arrays = _arrays(shapes, np.float64, seed=5)
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]

    def f(*ts):
        out = fn(tg, *ts)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(o * o for o in outs)  # nonlinear, so the second derivative is not zero

    assert tg.autograd.gradgradcheck(f, xs)


def test_masked_fill_and_where_by_hand():
    x = tg.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    v = tg.tensor(7.0, requires_grad=True)
    y = x.masked_fill(x > 0, v)
    assert y.tolist() == [-1.0, 7.0, -3.0, 7.0]
    (y * tg.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 3.0, 0.0] and v.grad.item() == 6.0
    x.grad = None
    z = tg.where(x > 0, x * x, 5.0)
    z.sum().backward()
    assert z.tolist() == [5.0, 4.0, 5.0, 16.0] and x.grad.tolist() == [0.0, 4.0, 0.0, 8.0]
    assert [t.tolist() for t in tg.where(tg.tensor([[True, False], [False, True]]))] == [
        [0, 1],
        [0, 1],
    ]


def test_clamp_gradients_at_the_bounds_by_hand():
    # PyTorch's masks: self gets it where min <= x <= max (bounds included), min where
    # x < min and min < max, max where x > max or max < min
    x = tg.tensor([0.0, 1.0, 2.0, 3.0, -1.0], requires_grad=True)
    lo = tg.tensor([0.0, 0.5, 0.5, 0.5, 0.0], requires_grad=True)
    hi = tg.tensor([1.0, 1.0, 1.0, 3.0, -0.5], requires_grad=True)
    y = x.clamp(lo, hi)
    assert y.tolist() == [0.0, 1.0, 1.0, 3.0, -0.5]
    assert y.grad_fn.name() == "ClampBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert lo.grad.tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]
    w = tg.tensor([0.0, 0.5, 1.0], requires_grad=True)
    w.clamp(0.0, 1.0).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]  # number bounds: ClampBackward1, inclusive


def test_norm_gradients_by_hand():
    x = tg.tensor([3.0, -4.0], requires_grad=True)
    n = x.norm()
    assert n.item() == 5.0 and n.grad_fn.name() == "LinalgVectorNormBackward0"
    n.backward()
    assert np.allclose(x.grad.numpy(), [0.6, -0.8])
    z = tg.zeros(3, requires_grad=True)
    z.norm().backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]  # not nan: PyTorch masks norm == 0
    t = tg.tensor([1.0, -3.0, 3.0], requires_grad=True)
    t.norm(p=float("inf")).backward()
    assert t.grad.tolist() == [0.0, -0.5, 0.5]  # split evenly among the ties
    t.grad = None
    t.norm(p=1).backward()
    assert t.grad.tolist() == [1.0, -1.0, 1.0]


def test_views_share_memory_and_version(lib):
    L = lib
    x = L.arange(12.0).reshape(3, 4)
    parts = [
        x.narrow(1, 1, 2),
        x.select(0, 1),
        x.split(2, 1)[1],
        x.chunk(3)[2],
        x.unbind(1)[0],
        x.diagonal(1),
    ]
    x.add_(100)
    assert [p._version for p in parts] == [1] * 6
    assert parts[0].tolist() == [[101.0, 102.0], [105.0, 106.0], [109.0, 110.0]]
    assert parts[5].tolist() == [101.0, 106.0, 111.0]
    parts[5].mul_(0)  # the diagonal is a view: the write lands in x
    assert x.tolist()[0][1] == 0.0 and x.tolist()[1][2] == 0.0 and x._version == 2
    r, g, s = (
        x.repeat(1, 2),
        x.gather(0, L.tensor([[0, 0, 0, 0]])),
        x.index_select(0, L.tensor([0])),
    )
    x.add_(1)
    assert r._version == g._version == s._version == 0  # copies, as in PyTorch


def test_inplace_through_diagonal_view_is_copyslices(lib):
    L = lib
    d = L.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
    e = d * 1
    e.diagonal().mul_(10)
    assert e.grad_fn.name() == "torch::autograd::CopySlices"
    assert e.tolist() == [[10.0, 2.0, 3.0], [4.0, 50.0, 6.0], [7.0, 8.0, 90.0]]
    e.sum().backward()
    assert d.grad.tolist() == [[10.0, 1.0, 1.0], [1.0, 10.0, 1.0], [1.0, 1.0, 10.0]]


def test_multi_output_views_refuse_inplace(lib):
    L = lib
    b = L.ones(4, requires_grad=True) * 1
    cases = [
        (lambda: b.split(2)[0], "Output 0 of SplitBackward0"),
        (lambda: b.chunk(2)[1], "Output 1 of SplitBackward0"),
        (lambda: b.split([1, 3])[1], "Output 1 of SplitWithSizesBackward0"),
        (lambda: b.unbind(0)[2], "Output 2 of UnbindBackward0"),
    ]
    for make, head in cases:
        with pytest.raises(RuntimeError) as info:
            make().mul_(2)
        assert str(info.value).replace("Backward0", "") == (
            f"{head.replace('Backward0', '')} is a view and is being modified inplace. This view "
            "is the output of a function that returns multiple views. Such functions do not "
            "allow the output views to be modified inplace. You should replace the inplace "
            "operation by an out-of-place one."
        )
    with L.no_grad():
        b.split(2)[0].mul_(2)  # allowed outside grad mode
    assert b.tolist() == [2.0, 2.0, 1.0, 1.0]
    n = b.narrow(0, 0, 2)
    n.add_(1)  # a single view may be written
    assert b.grad_fn.name() == "torch::autograd::CopySlices"


ERROR_CASES = [
    (
        "gather_out_of_range",
        lambda L, x: x.gather(0, L.tensor([[5]])),
        RuntimeError,
        "index 5 is out of bounds for dimension 0 with size 4",
    ),
    (
        "gather_float_index",
        lambda L, x: x.gather(0, L.tensor([[1.0]])),
        RuntimeError,
        "gather(): Expected dtype int32/int64 for index",
    ),
    (
        "gather_ndim",
        lambda L, x: x.gather(0, L.tensor([1])),
        RuntimeError,
        "Index tensor must have the same number of dimensions as input tensor",
    ),
    (
        "gather_too_large",
        lambda L, x: x.gather(0, L.tensor([[1, 1, 1, 1, 1, 1]])),
        RuntimeError,
        "Size does not match at dimension 1 expected index [1, 6] to be no larger than self "
        "[4, 5] apart from dimension 0",
    ),
    (
        "index_select_matrix",
        lambda L, x: x.index_select(0, L.tensor([[1]])),
        IndexError,
        "index_select(): Index is supposed to be a vector",
    ),
    (
        "index_select_range",
        lambda L, x: x.index_select(0, L.tensor([7])),
        IndexError,
        "index out of range in self",
    ),
    (
        "index_select_float",
        lambda L, x: x.index_select(0, L.tensor([1.0])),
        RuntimeError,
        "index_select(): Expected dtype int32 or int64 for index",
    ),
    (
        "masked_fill_long_mask",
        lambda L, x: x.masked_fill(L.tensor([1, 0, 1, 0, 1]), 0.0),
        RuntimeError,
        "masked_fill_ only supports boolean masks, but got mask with dtype long int",
    ),
    (
        "masked_fill_1d_value",
        lambda L, x: x.masked_fill(x > 0, L.tensor([1.0, 2.0])),
        RuntimeError,
        "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
        "with 1 dimension(s).",
    ),
    (
        "narrow_too_long",
        lambda L, x: x.narrow(1, 3, 4),
        RuntimeError,
        "start (3) + length (4) exceeds dimension size (5).",
    ),
    (
        "select_range",
        lambda L, x: x.select(0, 4),
        IndexError,
        "select(): index 4 out of range for tensor of size [4, 5] at dimension 0",
    ),
    (
        "repeat_too_few",
        lambda L, x: x.repeat(2),
        RuntimeError,
        "Number of dimensions of repeat dims can not be smaller than number of dimensions of "
        "tensor",
    ),
    (
        "chunk_zero",
        lambda L, x: x.chunk(0),
        RuntimeError,
        "chunk expects `chunks` to be greater than 0, got: 0",
    ),
    (
        "split_sizes_sum",
        lambda L, x: x.split([1, 2], 1),
        RuntimeError,
        "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at "
        "dimension 1), but got split_sizes=[1, 2]",
    ),
    (
        "scatter_add_range",
        lambda L, x: x.scatter_add(0, L.tensor([[4]]), L.ones(1, 1)),
        RuntimeError,
        "index 4 is out of bounds for dimension 0 with size 4",
    ),
    (
        "clamp_no_bounds",
        lambda L, x: x.clamp(),
        RuntimeError,
        "torch.clamp: At least one of 'min' or 'max' must not be None",
    ),
    (
        "cumsum_dim",
        lambda L, x: x.cumsum(2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "inplace_leaf",
        lambda L, x: x.cos_(),
        RuntimeError,
        "a leaf Variable that requires grad is being used in an in-place operation.",
    ),
    (
        "inplace_leaf_masked_fill_",
        lambda L, x: x.masked_fill_(x > 0, 0.0),
        RuntimeError,
        "a leaf Variable that requires grad is being used in an in-place operation.",
    ),
    (
        "inplace_leaf_clamp_",
        lambda L, x: x.clamp_(0, 1),
        RuntimeError,
        "a leaf Variable that requires grad is being used in an in-place operation.",
    ),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors(case, lib):
    _, fn, cls, text = case
    x = lib.tensor(_arrays([(4, 5)])[0], requires_grad=True)
    with pytest.raises(cls) as info:
        fn(lib, x)
    assert str(info.value).split("\n")[0].startswith(text)


def test_inplace_ops_record_versions_and_saved_tensor_errors(lib):
    L = lib
    x = L.tensor([0.5, 1.0, 1.5], requires_grad=True)
    y = x.exp()
    y.cos_()  # ExpBackward0 saved its result, which cos_ changes
    assert y._version == 1 and y.grad_fn.name() == "CosBackward0"
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert str(info.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; "
        "expected version 0 instead."
    )
    # sin_ needs its own input: it keeps the pre-update value, so this backward works
    z = x * 1
    z.sin_().exp_()
    assert z._version == 2
    z.sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy(), np.exp(np.sin([0.5, 1.0, 1.5])) * np.cos([0.5, 1.0, 1.5]), rtol=1e-6
    )
    w = L.ones(3, dtype=L.int64)
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        w.sqrt_()


def test_new_constructors(lib):
    L = lib
    x = L.ones(2, 3, dtype=L.float64, requires_grad=True)
    a = x.new_tensor([1, 2])
    assert a.dtype == L.float64 and a.tolist() == [1.0, 2.0] and not a.requires_grad
    assert x.new_zeros(2, 3).shape == (2, 3) and x.new_zeros((2,)).dtype == L.float64
    assert x.new_ones((2,), dtype=L.int64).tolist() == [1, 1]
    f = x.new_full((2, 2), 3)
    assert f.tolist() == [[3.0, 3.0], [3.0, 3.0]] and f.dtype == L.float64
    assert x.new_zeros(1, requires_grad=True).requires_grad
    assert x.new_empty(4).shape == (4,)
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        c = x.new_tensor(x)
    assert not c.requires_grad and c.tolist() == x.tolist()


def test_cumsum_dtypes(lib):
    L = lib
    assert L.ones(3, dtype=L.int32).cumsum(0).dtype == L.int64
    assert L.ones(3, dtype=L.bool).cumsum(0).tolist() == [1, 2, 3]
    assert L.ones(3).cumsum(0, dtype=L.float64).dtype == L.float64
    assert L.tensor([1.0, 2.0, 3.0]).cumsum(0).tolist() == [1.0, 3.0, 6.0]


# ================================================================ hooks and graph API


def test_post_accumulate_grad_hook_ordering(lib):
    # PyTorch test_autograd.py: test_post_accumulate_grad_hook_ordering
    torch = lib
    tensor = torch.rand(3, requires_grad=True)

    def pre_hook(grad):
        return grad.sub(2.0)

    def acc_grad_node_pre_hook(grad_out):
        return (grad_out[0].div(5.0),)

    def post_acc_grad_hook(tensor):
        tensor.grad.add_(0.5)

    def acc_grad_node_post_hook(grad_in, grad_out):
        tensor.grad = grad_out[0].mul(10)

    acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    tensor.register_hook(pre_hook)
    acc_grad.register_prehook(acc_grad_node_pre_hook)
    tensor.register_post_accumulate_grad_hook(post_acc_grad_hook)
    acc_grad.register_hook(acc_grad_node_post_hook)
    tensor.sum().backward()
    # tensor prehook, acc_grad prehook, post acc_grad hook, acc_grad posthook:
    # ((1 - 2) / 5 + 0.5) * 10 = 3
    assert tensor.grad.tolist() == pytest.approx([3.0, 3.0, 3.0])


def test_post_accumulate_grad_hook_gets_cleaned_up(lib):
    # PyTorch test_autograd.py: test_post_accumulate_grad_hook_gets_cleaned_up
    torch = lib

    def fun_stuff_with_hook():
        thing_to_put_in_hook = torch.rand(3)

        def hook(tensor):
            tensor.sub_(tensor.grad)
            tensor.add_(thing_to_put_in_hook)

        tensor = torch.rand(3, requires_grad=True)
        tensor.register_post_accumulate_grad_hook(hook)
        tensor.sum().backward()
        ref = weakref.ref(thing_to_put_in_hook)
        gc.collect()
        return tensor, ref

    tensor, ref = fun_stuff_with_hook()
    assert ref() is not None  # kept alive by tensor
    del tensor
    gc.collect()
    assert ref() is None


def test_post_accumulate_grad_hook_e2e_and_errors(lib):
    torch = lib
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (p * 3).sum().backward()
    (p * 3).sum().backward()
    assert seen == [[3.0, 3.0], [6.0, 6.0]]
    handle.remove()
    (p * 3).sum().backward()
    assert len(seen) == 2
    torch.autograd.grad((p * 2).sum(), p)  # grad() does not accumulate: no hook call
    assert len(seen) == 2
    with pytest.raises(
        RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"
    ):
        (p * 1).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(
        RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"
    ):
        torch.ones(2).register_post_accumulate_grad_hook(lambda t: None)


def test_prehook_ordering(lib):
    # PyTorch test_autograd.py: test_prehook_ordering
    torch = lib
    log = []

    def hook1(g):
        log.append(1)
        return g * 3

    def hook2(gs):
        log.append(2)
        return tuple(g * 2 for g in gs)

    a = torch.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(hook2)
    b.register_hook(hook1)
    b.grad_fn.register_prehook(hook2)
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(hook1)
    acc.register_prehook(hook2)
    a.register_hook(hook1)

    b.sum().backward(retain_graph=True)
    assert log == [1, 2, 2, 1, 1, 2]
    log = []
    torch.autograd.grad(b.sum(), inputs=(a,), retain_graph=True)
    assert log == [1, 2, 2, 1, 1]
    log = []
    b.sum().backward(inputs=(b,))
    assert log == [1, 2, 2]
    assert b.grad.item() == 3  # retains_grad runs after the tensor hooks, before node prehooks


def test_retains_grad_can_always_observe_tensor_prehook(lib):
    # PyTorch test_autograd.py: test_retains_grad_can_always_observe_tensor_prehook
    torch = lib

    def tensor_prehook(g):
        return g * 2

    a = torch.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(tensor_prehook)
    b.retain_grad()
    b.register_hook(tensor_prehook)
    b.clone().backward()
    assert b.grad.item() == 4
    a = torch.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.retain_grad()
    b.register_hook(tensor_prehook)
    b.clone().backward()
    assert b.grad.item() == 2


def test_accumulate_grad_posthooks_can_observe_tensor_prehook(lib):
    # PyTorch test_autograd.py: test_accumulate_grad_posthooks_can_observe_tensor_prehook
    torch = lib
    a = torch.tensor(1.0, requires_grad=True)
    calls = []

    def tensor_prehook(g):
        return g * 2

    def posthook(gO, gI):
        assert torch.allclose(gI[0], a * 2)
        assert len(gO) == 0
        calls.append("post")

    def prehook(gI):
        assert torch.allclose(gI[0], a * 2)
        assert len(gI) == 1
        calls.append("pre")

    b = a.clone()
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(posthook)
    acc.register_prehook(prehook)
    a.register_hook(tensor_prehook)
    b.backward()
    assert calls == ["pre", "post"]


def test_hook_edge_case_when_called_with_grad(lib):
    # PyTorch test_autograd.py: test_hook_edge_case_when_called_with_grad
    torch = lib
    a = torch.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 2
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def tensor_prehook(g):
        counts["tensor"] += 1

    def prehook(g):
        counts["pre"] += 1

    def posthook(gI, gO):
        counts["post"] += 1

    a.register_hook(tensor_prehook)
    b.register_hook(tensor_prehook)
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(posthook)
    acc.register_prehook(prehook)
    b.grad_fn.register_hook(posthook)
    b.grad_fn.register_prehook(prehook)

    def run(fn):
        for k in counts:
            counts[k] = 0
        fn()
        return counts["tensor"], counts["pre"], counts["post"]

    assert run(lambda: torch.autograd.grad(c, inputs=(b), retain_graph=True)) == (1, 0, 0)
    assert run(lambda: torch.autograd.grad(c, inputs=(a, b), retain_graph=True)) == (2, 1, 1)
    assert run(lambda: c.backward(retain_graph=True)) == (2, 2, 2)
    assert run(lambda: c.backward(inputs=(a, b), retain_graph=True)) == (2, 2, 2)


def test_node_posthook_can_replace_grad_inputs(lib):
    torch = lib
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    handle = b.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
    b.sum().backward()
    assert a.grad.tolist() == [30.0, 30.0]
    handle.remove()
    a.grad = None
    (a * 3).sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


def test_saved_tensors_hooks_pack_unpack(lib):
    torch = lib
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.detach().numpy().copy() * 1  # any object: here a plain array copy

    def unpack(arr):
        unpacked.append(arr.shape)
        return torch.tensor(arr)

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x * x  # saves self and other
        z = y.exp()  # saves its result
        w = z + 1  # saves nothing
    assert packed == [(3,), (3,), (3,)]
    assert unpacked == []
    w.sum().backward()
    assert len(unpacked) == 3
    np.testing.assert_allclose(
        x.grad.numpy(), np.exp([1.0, 4.0, 9.0]) * 2 * np.array([1, 2, 3]), rtol=1e-5
    )
    x.grad = None
    v = x * x  # outside the context: saved as usual
    v.sum().backward()
    assert len(packed) == 3 and x.grad.tolist() == [2.0, 4.0, 6.0]


def test_saved_tensors_hooks_skip_version_check_and_nest(lib):
    torch = lib
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    # the unpack hook's value is used as is: PyTorch does not version-check hooked values
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
        y = x.exp()
    with torch.no_grad():
        y.mul_(0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    log = []
    outer = torch.autograd.graph.saved_tensors_hooks(
        lambda t: log.append("outer") or t, lambda p: p
    )
    inner = torch.autograd.graph.saved_tensors_hooks(
        lambda t: log.append("inner") or t, lambda p: p
    )
    with outer:
        _ = x.sin()
        with inner:
            _ = x.cos()
        _ = x.log()
    assert log == ["outer", "inner", "outer"]


def test_saved_tensors_hooks_double_backward(lib):
    torch = lib
    count = [0]

    def pack(t):
        count[0] += 1
        return t

    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
        y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert g.tolist() == [3.0, 12.0]
    (h,) = torch.autograd.grad(g.sum(), x)
    assert h.tolist() == [6.0, 12.0] and count[0] >= 1


def test_saved_tensor_hooks_extra_exit_during_bw_no_crash(lib):
    # PyTorch test_autograd.py: test_saved_tensor_hooks_extra_exit_during_bw_no_crash
    torch = lib

    def unpack(x):
        ctx_1.__exit__()
        return x

    ctx_1 = torch.autograd.graph.saved_tensors_hooks(lambda x: x, unpack)
    ctx_2 = torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x)
    for _ in range(10):
        with ctx_2:
            ctx_1.__enter__()
            x = torch.randn(3, 3, requires_grad=True)
            x.sin().sum().backward()
    for _ in range(10):
        ctx_1.__exit__()
    a = torch.tensor(1.0, requires_grad=True)
    y = a.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)


def test_saved_variable_packing_unpacking_did_not_save_original_with_hooks(lib):
    # PyTorch test_autograd.py: the test of that name
    torch = lib
    a = torch.randn(5, requires_grad=True)
    y = torch.exp(a)
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)
    assert torch.equal(y, y.grad_fn._saved_result)
    assert y.grad_fn is y.grad_fn._saved_result.grad_fn
    y.sum().backward()
    assert torch.allclose(a.grad, y)


def test_raw_saved_register_hooks(lib):
    torch = lib
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.pow(2)
    calls = []
    y.grad_fn._raw_saved_self.register_hooks(
        lambda t: calls.append("pack") or t * 10, lambda p: calls.append("unpack") or p
    )
    assert calls == ["pack"]
    assert y.grad_fn._saved_self.tolist() == [10.0, 20.0]  # what unpack returns
    y.sum().backward()
    assert x.grad.tolist() == [20.0, 40.0]  # backward used the unpacked (scaled) value
    assert calls == ["pack", "unpack", "unpack"]
    with pytest.raises(RuntimeError, match="after it has been freed"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda p: p)
    z = x * 2
    with pytest.raises(AttributeError):
        z.grad_fn._raw_saved_mat2  # noqa: B018
    g = x.gather(0, torch.tensor([1, 0]))
    assert g.grad_fn._saved_index.tolist() == [1, 0]
    m = x.masked_fill(x > 1, 0.0)
    assert m.grad_fn._saved_mask.tolist() == [False, True]
    n = x.norm()
    assert torch.equal(n.grad_fn._saved_self, x) and n.grad_fn._saved_result.item() == n.item()


def test_gradgradcheck_unrelated_inputs(lib):
    # PyTorch test_autograd.py: test_unrelated_inputs
    torch = lib

    def my_function(x, y):
        return x * x

    x = torch.rand(10, dtype=torch.double, requires_grad=True)
    y = torch.rand(10, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(my_function, (x, y))
    assert torch.autograd.gradgradcheck(my_function, (x, y))


def test_gradgradcheck_catches_a_wrong_second_derivative():
    # a function whose first derivative is right but whose backward is not differentiable
    # correctly: grad of (x ** 3) computed through detach loses the second derivative
    x = tg.tensor([0.7, -1.3], dtype=tg.float64, requires_grad=True)

    def f(t):
        return t**3

    assert tg.autograd.gradgradcheck(f, (x,))

    def broken(t):
        # forward t**3, backward 3 t^2 evaluated on a detached t: second derivative 0
        c = (t.detach() ** 2) * 3
        return (t - t.detach()) * c + t.detach() ** 3

    assert tg.autograd.gradcheck(broken, (x,))
    assert not tg.autograd.gradgradcheck(broken, (x,), raise_exception=False)


def test_functional_vjp_jvp_multi_output(lib):
    torch = lib
    F = torch.autograd.functional
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    y = torch.tensor([0.5, -1.0], dtype=torch.float64)

    def f(a, b):
        return a * a * b.sum(), (a**3).sum() * b

    v = (torch.ones(3, dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64))
    out, g = F.vjp(f, (x, y), v)
    assert [o.tolist() for o in out] == [[-0.5, -2.0, -4.5], [18.0, -36.0]]
    # d/da: 2a*sum(b)*1 + 3a^2*(b.v2) ; d/db: sum(a^2) + sum(a^3)*v2
    assert g[0].tolist() == [-5.5, -20.0, -43.5] and g[1].tolist() == [50.0, 86.0]
    out, jv = F.jvp(f, (x, y), v)
    assert jv[0].tolist() == [2.0, 10.0, 24.0] and jv[1].tolist() == [57.0, 30.0]
    assert not out[0].requires_grad and not jv[0].requires_grad
    with pytest.raises(
        RuntimeError,
        match=r"v is a tuple of invalid length: should be 2 but "
        r"got 1\.",
    ):
        F.vjp(f, (x, y), (torch.ones(3),))
    with pytest.raises(
        RuntimeError,
        match=r"Entry 1 in v has invalid size: should be "
        r"torch.Size\(\[2\]\) but got torch.Size\(\[3\]\)\.",
    ):
        F.vjp(f, (x, y), (torch.ones(3), torch.ones(3)))


def test_functional_vhp_hvp(lib):
    torch = lib
    F = torch.autograd.functional
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    y = torch.tensor([0.5, -1.0], dtype=torch.float64)

    def h(a, b):
        return (a**3).sum() * (b**2).sum()

    v = (torch.ones(3, dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64))
    # H = [[6a*sum(b^2) diag, 3a^2 (x) 2b], [2b (x) 3a^2, 2 sum(a^3) I]]
    out, r = F.vhp(h, (x, y), v)
    assert out.item() == 36 * 1.25
    assert r[0].tolist() == [-1.5, -21.0, -58.5] and r[1].tolist() == [114.0, 60.0]
    _, r2 = F.hvp(h, (x, y), v)
    assert [t.tolist() for t in r2] == [t.tolist() for t in r]
    _, single = F.hvp(lambda a: (a**3).sum(), x, torch.ones(3, dtype=torch.float64))
    assert single.tolist() == [6.0, 12.0, 18.0]
    with pytest.raises(
        RuntimeError,
        match="The Tensor returned by the function given to hvp should contain a single element",
    ):
        F.hvp(lambda a: a**2, x, x)
    with pytest.raises(
        RuntimeError, match="The function given to vhp should return a single Tensor"
    ):
        F.vhp(lambda a: (a.sum(), a.sum()), x, x)
    with pytest.raises(
        RuntimeError,
        match=r"v has invalid size: should be torch.Size\(\[3\]\) "
        r"but got torch.Size\(\[2\]\)\.",
    ):
        F.vhp(lambda a: a.sum(), x, torch.ones(2))
    with pytest.raises(
        RuntimeError,
        match="The vector v can only be None if the input to the "
        "user-provided function is a single Tensor with a "
        "single element.",
    ):
        F.hvp(lambda a: a.sum(), x)
    _, g = F.vhp(lambda a: (a**3).sum(), x, torch.ones(3, dtype=torch.float64), create_graph=True)
    assert g.requires_grad and g.tolist() == [6.0, 12.0, 18.0]  # create_graph: part of a graph


def test_saved_attributes_are_the_tensors_themselves(lib):
    torch = lib
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    z = x * y
    assert z.grad_fn._saved_self is x and z.grad_fn._saved_other is y
    e = x.exp()
    r = e.grad_fn._saved_result
    assert r.grad_fn is e.grad_fn and r.requires_grad and torch.equal(r, e)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        r.numpy()


SECOND_BACKWARD = {  # does a second backward (without retain_graph) raise? PyTorch's answers
    "repeat": (lambda L, x: x.repeat(2, 1), False),
    "gather": (lambda L, x: x.gather(1, L.tensor([[0, 1, 2]] * 4)), True),
    "gather_small_index": (lambda L, x: x.gather(1, L.tensor([[0]])), True),
    "index_select": (lambda L, x: x.index_select(0, L.tensor([1])), True),
    "scatter_add_const_src": (
        lambda L, x: x.scatter_add(0, L.tensor([[0, 1, 2]]), L.ones(1, 3)),
        False,
    ),
    "masked_fill": (lambda L, x: x.masked_fill(x > 0, 0.0), True),
    "narrow": (lambda L, x: x.narrow(0, 1, 2), False),
    "diagonal": (lambda L, x: x.diagonal(), False),
    "cumsum": (lambda L, x: x.cumsum(0), False),
    "clamp": (lambda L, x: x.clamp(0, 1), True),
    "clamp_tensors": (lambda L, x: x.clamp(L.zeros(3), L.ones(3)), True),
    "norm": (lambda L, x: x.norm(), True),
    "where": (lambda L, x: L.where(x > 0, x, 0.0), True),
    "split": (lambda L, x: x.split(2)[0], False),
    "unbind": (lambda L, x: x.unbind()[0], False),
}


@pytest.mark.parametrize("name", sorted(SECOND_BACKWARD))
def test_second_backward_raises_where_pytorch_saved_tensors(name, lib):
    fn, raises = SECOND_BACKWARD[name]
    x = lib.tensor(_arrays([(4, 3)])[0], requires_grad=True)
    y = fn(lib, x).sum()
    y.backward()
    if raises:
        with pytest.raises(
            RuntimeError, match="Trying to backward through the graph a second time"
        ):
            y.backward()
    else:
        y.backward()
        assert x.grad is not None


SAVED_ATTRS = [  # PyTorch's non-tensor saved attributes of the new nodes (torch 2.13)
    (
        "narrow",
        lambda L, x: x.narrow(1, 1, 2),
        {"dim": 1, "start": 1, "end": 3, "step": 1, "self_sym_sizes": (4, 5)},
    ),
    ("select", lambda L, x: x.select(0, 1), {"dim": 0, "index": 1, "self_sym_sizes": (4, 5)}),
    ("split", lambda L, x: x.split(2, 1)[0], {"dim": 1, "self_sym_sizes": (4, 5), "split_size": 2}),
    (
        "split_sizes",
        lambda L, x: x.split([1, 4], 1)[1],
        {"dim": 1, "self_sym_sizes": (4, 5), "split_sizes": (1, 4)},
    ),
    ("unbind", lambda L, x: x.unbind(1)[0], {"dim": 1}),
    ("repeat", lambda L, x: x.repeat(2, 1), {"repeats": (2, 1), "self_sym_sizes": (4, 5)}),
    (
        "diagonal",
        lambda L, x: x.diagonal(1),
        {"dim1": 0, "dim2": 1, "offset": 1, "self_sym_sizes": (4, 5)},
    ),
    ("gather", lambda L, x: x.gather(0, L.tensor([[1]])), {"dim": 0, "sparse_grad": False}),
    ("scatter_add", lambda L, x: x.scatter_add(0, L.tensor([[1]]), L.ones(1, 1)), {"dim": 0}),
    (
        "index_select",
        lambda L, x: x.index_select(1, L.tensor([0])),
        {"dim": 1, "self_sym_sizes": (4, 5)},
    ),
    ("clamp", lambda L, x: x.clamp(0, None), {"min": 0, "max": None}),
    ("norm_1_dim", lambda L, x: x.norm(p=1, dim=1), {"dim": (1,), "keepdim": False, "ord": 1}),
    ("norm", lambda L, x: x.norm(), {"dim": None, "keepdim": False, "ord": 2}),
    ("cumsum", lambda L, x: x.cumsum(1), {"dim": 1}),
]


@pytest.mark.parametrize("case", SAVED_ATTRS, ids=[c[0] for c in SAVED_ATTRS])
def test_non_tensor_saved_attributes(case, lib):
    _, fn, expected = case
    x = lib.randn(4, 5, requires_grad=True)
    node = fn(lib, x).grad_fn
    got = {k: getattr(node, f"_saved_{k}") for k in expected}
    assert got == expected


def test_predicates_and_nonzero(lib):
    L = lib
    x = L.tensor(np.array([[1.0, np.nan], [np.inf, 0.0]], np.float32))
    assert x.isnan().tolist() == [[False, True], [False, False]]
    assert L.isinf(x).tolist() == [[False, False], [True, False]]
    assert x.all().item() is False and x.any(0).tolist() == [True, True]
    assert (x > 0).all(1, keepdim=True).tolist() == [[False], [False]]
    assert x.nonzero().tolist() == [[0, 0], [0, 1], [1, 0]]
    assert [t.tolist() for t in x.nonzero(as_tuple=True)] == [[0, 0, 1], [0, 1, 0]]
    assert x.type_as(L.ones(1, dtype=L.float64)).dtype == L.float64
    with pytest.raises(RuntimeError, match="masked_select: expected BoolTensor for mask"):
        x.masked_select(L.tensor([[1, 0], [0, 1]]))


def test_sort_topk_indices_and_ties(lib):
    L = lib
    x = L.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0]], requires_grad=True)
    v, i = x.sort(dim=1)
    assert i.tolist() == [[1, 3, 2, 0], [3, 0, 1, 2]] and v.grad_fn.name() == "SortBackward0"
    assert x.sort(dim=1, descending=True).indices.tolist() == [[0, 2, 1, 3], [1, 2, 0, 3]]
    assert x.argsort(1, descending=True).tolist() == [[0, 2, 1, 3], [1, 2, 0, 3]]
    v, i = x.topk(2, 1)
    assert i.tolist() == [[0, 2], [1, 2]] and v.tolist() == [[3.0, 2.0], [5.0, 5.0]]
    assert x.topk(2, 1, largest=False).indices.tolist() == [[1, 3], [3, 0]]
    v.sum().backward()  # the gradient goes to the chosen indices only
    assert x.grad.tolist() == [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]]
    n = L.tensor([1.0, float("nan"), 0.0])
    assert n.sort().indices.tolist() == [2, 0, 1]
    assert n.sort(descending=True).indices.tolist() == [1, 0, 2]  # NaN is the largest
    assert type(x.sort()).__name__ == "sort"
    assert x.stride() == (4, 1) and x.t().stride() == (1, 4) and x.element_size() == 4


def test_hook_return_value_errors(lib):
    torch = lib
    x = torch.ones(2, requires_grad=True)
    h = x.register_post_accumulate_grad_hook(lambda t: t * 2)
    with pytest.raises(
        RuntimeError, match="^Tensor post accumulate grad hooks should return None.$"
    ):
        x.sum().backward()
    h.remove()
    x.register_post_accumulate_grad_hook(lambda t: 5)
    with pytest.raises(TypeError, match="^expected Variable, but hook returned 'int'$"):
        x.sum().backward()
    y = torch.ones(2, requires_grad=True)
    for hook, cls, text in [
        (
            lambda gi, go: (gi[0], gi[0]),
            RuntimeError,
            "can't replace a None gradient with a non-None value",
        ),
        (lambda gi, go: 3, TypeError, "expected tuple, but hook returned 'int'"),
        (
            lambda gi, go: (gi[0],),
            RuntimeError,
            "hook '<lambda>' has returned an incorrect number of values (got 1, but expected 2)",
        ),
    ]:
        z = y * 2
        z.grad_fn.register_hook(hook)
        with pytest.raises(cls) as info:
            z.sum().backward()
        assert str(info.value) == text


def test_node_prehook_return_values(lib):
    torch = lib
    y = torch.ones(2, requires_grad=True)
    for hook, cls, text in [
        (lambda go: 3, TypeError, "expected tuple, but hook returned 'int'"),
        (
            lambda go: (go[0], go[0]),
            RuntimeError,
            "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)",
        ),
        (lambda go: go[0], TypeError, "expected tuple, but hook returned 'Tensor'"),
        (
            lambda go: (torch.ones(3),),
            RuntimeError,
            "hook '<lambda>' has changed the size of value",
        ),
    ]:
        z = y * 2
        z.grad_fn.register_prehook(hook)
        with pytest.raises(cls) as info:
            z.sum().backward()
        assert str(info.value) == text
    z = y * 2
    z.grad_fn.register_prehook(lambda go: (None,))  # the gradient stops here
    z.sum().backward()
    assert y.grad is None
    acc = (y * 1).grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: (go[0] * 5,))
    (y * 1).sum().backward()
    assert y.grad.tolist() == [5.0, 5.0]


def test_inplace_methods_through_views_rebase_the_base(lib):
    L = lib
    x = L.tensor(np.arange(6.0).reshape(2, 3).astype(np.float32), requires_grad=True)
    y = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    b[0].addcmul_(y, y, value=2)
    b[1].lerp_(y, 0.25)
    b.diagonal().clamp_(max=L.tensor([1.5, 2.0]))
    b.narrow(1, 1, 2).index_add_(1, L.tensor([0, 0]), y[:2].expand(2, 2) * 1)
    assert b._version == 4 and b.grad_fn.name() == "torch::autograd::CopySlices"
    (b * b).sum().backward()
    assert b.tolist() == [[1.5, 12.0, 20.0], [2.5, 5.0, 4.5]]
    assert x.grad.tolist() == [[0.0, 24.0, 40.0], [3.75, 0.0, 6.75]]
    assert y.grad.tolist() == [35.25, 226.0, 482.25]
