"""NumPy indexing through the getitem primitive: specs, shapes, masks, gradients."""

import numpy as np
import pytest
from opkit import Rec, grad, value

import tracegrad as tg
from tracegrad.ops import table as T
from tracegrad.ops.core import Aval
from tracegrad.ops.indexing import index_spec

X = np.arange(60.0).reshape(3, 4, 5)
I2 = np.array([[0, 1], [2, 0]])

INDEXES = [
    0,
    -1,
    (1, 2),
    (1, 2, 3),
    slice(None),
    slice(1, None),
    slice(None, None, -1),
    (slice(0, 3, 2), slice(None), slice(4, 0, -2)),
    (Ellipsis, 0),
    (0, Ellipsis),
    (None, 0),
    (Ellipsis, None),
    (slice(None), None, 1),
    (None, Ellipsis, None),
    np.array([0, 2, 0]),
    (np.array([0, 2]), np.array([1, 3])),
    (slice(None), np.array([3, -1])),
    (np.array([0, 1]), slice(None), np.array([4, 0])),  # arrays apart: block goes first
    (0, slice(None), np.array([1, 2])),  # int counts as advanced
    (slice(None), 0, np.array([1, 2])),  # adjacent: block stays in place
    (I2, slice(1, 3)),
    (Ellipsis, I2),
    (None, I2, None),
    [0, 2],
    (slice(None), [1, 1]),
    X[:, :, 0] > 20,
    X > 30,
    (X[:, 0, 0] > 5,),
    (slice(None), np.array([True, False, True, True])),
    (slice(10, 20),),
    (slice(-100, 100),),
]


@pytest.mark.parametrize("index", INDEXES, ids=[repr(i)[:40] for i in range(len(INDEXES))])
def test_getitem_matches_numpy(index):
    expected = X[index]
    got = tg.getitem(X, index)
    np.testing.assert_array_equal(got, expected)
    spec, arrays = index_spec(X.shape, index)
    rule = T.getitem.shape_rule(
        Aval(X.shape, X.dtype), *[Aval(a.shape, a.dtype) for a in arrays], spec=spec
    )
    assert tuple(rule.shape) == expected.shape
    hash(spec)  # attrs are static and hashable


def test_random_specs_shape_rule_matches_numpy():
    """The analytic shape rule against NumPy on many random basic+advanced indexes."""
    rng = np.random.default_rng(1)
    for _ in range(400):
        shape = tuple(int(d) for d in rng.integers(1, 4, rng.integers(1, 5)))
        x = rng.standard_normal(shape)
        index = []
        for n in shape:
            kind = rng.integers(0, 5)
            if kind == 0:
                index.append(int(rng.integers(-n, n)))
            elif kind == 1:
                a, b = sorted(rng.integers(-n - 1, n + 1, 2))
                index.append(slice(int(a), int(b), int(rng.choice([1, 2, -1]))))
            elif kind == 2:
                index.append(rng.integers(-n, n, tuple(rng.integers(1, 3, rng.integers(0, 2)))))
            elif kind == 3:
                index.append(None)
                index.append(slice(None))
            else:
                index.append(slice(None))
        index = tuple(index)
        try:
            expected = x[index]
        except IndexError:  # index arrays that do not broadcast together
            with pytest.raises(ValueError):
                tg.getitem(x, index)
            continue
        np.testing.assert_array_equal(tg.getitem(x, index), expected, err_msg=repr(index))


def test_gradient_accumulates_repeated_indices():
    x = np.arange(4.0)
    g = value(grad(lambda v: tg.sum(v[np.array([0, 0, 3, 0])]))(x))
    np.testing.assert_array_equal(g, [3, 0, 0, 1])


def test_gradient_of_basic_and_mask_indexing():
    x = np.arange(12.0).reshape(3, 4)
    w = np.arange(1.0, 3.0)
    g = value(grad(lambda v: tg.sum(v[1, 1:3] * w))(x))
    expected = np.zeros((3, 4))
    expected[1, 1:3] = w
    np.testing.assert_array_equal(g, expected)
    g = value(grad(lambda v: tg.sum(v[v > 5.5] ** 2))(x))
    np.testing.assert_array_equal(g, np.where(x > 5.5, 2 * x, 0))


def test_grad_of_grad_through_indexing():
    x = np.array([1.0, 2.0, 3.0])
    idx = np.array([2, 2, 0])

    def f(v):
        return tg.sum(v[idx] ** 3)

    def first(v):
        return tg.sum(grad(f)(v) * np.array([1.0, 1.0, 1.0]))

    # d/dx_k sum_j 3 x_idx_j^2 = 6 * count_k * x_k
    np.testing.assert_allclose(value(grad(first)(x)), [6 * 1 * 1, 0, 6 * 2 * 3])


def test_take_along_axis_cross_entropy_gradient():
    logits = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]])
    targets = np.array([[1], [2]])

    def loss(z):
        logp = tg.log_softmax(z, axis=1)
        return -tg.mean(tg.take_along_axis(logp, targets, axis=1))

    onehot = np.zeros_like(logits)
    onehot[[0, 1], [1, 2]] = 1
    e = np.exp(logits - logits.max(1, keepdims=True))
    expected = (e / e.sum(1, keepdims=True) - onehot) / 2
    np.testing.assert_allclose(value(grad(loss)(logits)), expected, rtol=1e-12)


def test_eager_like_value_kind_masks_are_concrete():
    x = Rec(np.arange(5.0))
    out = x[Rec(np.array([True, False, True, False, True]))]
    np.testing.assert_array_equal(value(out), [0, 2, 4])


def test_index_arrays_as_value_kinds_become_operands():
    x = Rec(np.arange(5.0))
    out = x[Rec(np.array([4, 1]))]
    prim, args, attrs = out.parents
    assert prim is T.getitem and len(args) == 2 and attrs["spec"] == (("array", 0),)
    np.testing.assert_array_equal(value(out), [4, 1])
