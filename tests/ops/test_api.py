"""The NumPy-named api on plain arrays (values, dtypes, keywords), its docstrings, and the
operator mixin on a recording value kind."""

import doctest

import numpy as np
import pytest
from opkit import Rec, grad, numeric_grad, value

import tracegrad as tg
from tracegrad.ops import api
from tracegrad.ops import table as T

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
P = RNG.uniform(0.5, 2, (3, 4))
B3 = RNG.standard_normal((2, 3, 4))

SAME_AS_NUMPY = [
    ("exp", lambda m: m.exp(A)),
    ("log", lambda m: m.log(P)),
    ("sqrt", lambda m: m.sqrt(P)),
    ("sin", lambda m: m.sin(A)),
    ("cos", lambda m: m.cos(A)),
    ("tanh", lambda m: m.tanh(A)),
    ("abs", lambda m: m.abs(A)),
    ("sign", lambda m: m.sign(A)),
    ("maximum", lambda m: m.maximum(A, 0.1)),
    ("minimum", lambda m: m.minimum(A, A[0])),
    ("where", lambda m: m.where(A > 0, A, 0.0)),
    ("clip", lambda m: m.clip(A, -0.5, 0.5)),
    ("clip_none", lambda m: m.clip(A, None, 0.5)),
    ("clip_keywords", lambda m: m.clip(A, min=-0.5, max=0.5)),
    ("matmul", lambda m: m.matmul(A, A.T)),
    ("dot_vec", lambda m: m.dot(A[0], A[1])),
    ("dot_scalar", lambda m: m.dot(2.0, A)),
    ("dot_nd", lambda m: m.dot(B3, A.T)),
    ("sum", lambda m: m.sum(B3, axis=(0, 2), keepdims=True)),
    ("sum_list_axis", lambda m: m.sum(B3, axis=[0, 1] if m is tg else (0, 1))),
    ("mean", lambda m: m.mean(B3, axis=-1)),
    ("max", lambda m: m.max(B3, axis=1)),
    ("min", lambda m: m.min(B3)),
    ("argmax", lambda m: m.argmax(B3, axis=2)),
    ("argmax_flat", lambda m: m.argmax(B3)),
    ("argmin_keep", lambda m: m.argmin(B3, axis=0, keepdims=True)),
    ("var", lambda m: m.var(B3, axis=1, ddof=1)),
    ("reshape", lambda m: m.reshape(B3, (4, -1))),
    ("reshape_int", lambda m: m.reshape(B3, -1)),
    ("transpose", lambda m: m.transpose(B3)),
    ("transpose_axes", lambda m: m.transpose(B3, (1, -1, 0))),
    ("expand_dims", lambda m: m.expand_dims(A, (0, -1))),
    ("expand_dims_mid", lambda m: m.expand_dims(A, 1)),
    ("squeeze", lambda m: m.squeeze(A[None, :, None])),
    ("squeeze_axis", lambda m: m.squeeze(A[None, :, None], 2)),
    ("broadcast_to", lambda m: m.broadcast_to(A[0], (2, 3, 4))),
    ("concatenate", lambda m: m.concatenate([A, B3[0]], axis=1)),
    ("concatenate_none", lambda m: m.concatenate([A, B3], axis=None)),
    ("stack", lambda m: m.stack([A, A * 2], axis=-1)),
    ("stack0", lambda m: m.stack([A[0], A[1]])),
    ("take_along_axis", lambda m: m.take_along_axis(A, np.argsort(A, axis=1), axis=1)),
    ("astype", lambda m: m.astype(A, np.float32)),
    ("ravel", lambda m: m.ravel(B3)),
    ("zeros_like", lambda m: m.zeros_like(A)),
    ("ones_like_int", lambda m: m.ones_like(A, dtype="int64")),
    ("full_like", lambda m: m.full_like(A, 3.5)),
    ("greater", lambda m: m.greater(A, 0)),
    ("equal", lambda m: m.equal(A, A)),
    ("logical_not", lambda m: m.logical_not(A > 0)),
    ("isfinite", lambda m: m.isfinite(A)),
    ("power", lambda m: m.power(P, A)),
    ("divide", lambda m: m.divide(A, P)),
]


@pytest.mark.parametrize("name, call", SAME_AS_NUMPY, ids=[n for n, _ in SAME_AS_NUMPY])
def test_api_agrees_with_numpy(name, call):
    ours, theirs = call(tg), call(np)
    assert isinstance(ours, np.ndarray)
    assert ours.shape == np.shape(theirs) and ours.dtype == np.asarray(theirs).dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_ml_functions_on_arrays():
    e = np.exp(A - A.max(1, keepdims=True))
    np.testing.assert_allclose(tg.softmax(A, axis=1), e / e.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(
        tg.log_softmax(A, axis=0), A - np.log(np.exp(A).sum(0, keepdims=True)), rtol=1e-12
    )
    np.testing.assert_allclose(tg.logsumexp(A, axis=1), np.log(np.exp(A).sum(1)), rtol=1e-12)
    np.testing.assert_allclose(tg.sigmoid(A), 1 / (1 + np.exp(-A)), rtol=1e-12)
    np.testing.assert_allclose(tg.relu(A), np.maximum(A, 0))


def test_docstring_examples_run():
    failures, tried = doctest.testmod(api, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 40 and failures == 0


def test_every_public_function_has_an_example():
    for name in api.__all__:
        fn = getattr(api, name)
        assert fn.__doc__ and ">>>" in fn.__doc__, name
        assert hasattr(tg, name), f"tracegrad.{name} is not re-exported"


COMPOSITES = [  # gradients of api compositions on the recording kind vs finite differences
    ("stack", lambda x: tg.sum(tg.stack([x, x * x], axis=1) * np.arange(24.0).reshape(3, 2, 4))),
    ("expand_squeeze", lambda x: tg.sum(tg.squeeze(tg.expand_dims(x, 0), 0) ** 2)),
    ("dot", lambda x: tg.dot(tg.ravel(x), tg.ravel(x))),
    (
        "reshape_transpose",
        lambda x: tg.sum(tg.transpose(tg.reshape(x, (2, -1))) * np.arange(12.0).reshape(6, 2)),
    ),
    (
        "mlp",
        lambda x: tg.mean(tg.log_softmax(tg.relu(x @ np.ones((4, 5)) * 0.1 + x[:, :1]), axis=1)),
    ),
    ("var_mean", lambda x: tg.var(x, axis=0) @ tg.mean(x, axis=0)),
    ("concat_none", lambda x: tg.sum(tg.concatenate([x, x[:1]], axis=None) ** 3)),
    ("logsumexp_tuple", lambda x: tg.sum(tg.logsumexp(x.reshape(3, 2, 2), axis=(0, 2)))),
]


@pytest.mark.parametrize("name, f", COMPOSITES, ids=[n for n, _ in COMPOSITES])
def test_composite_gradients(name, f):
    x = np.random.default_rng(3).standard_normal((3, 4))
    np.testing.assert_allclose(value(grad(f)(x)), numeric_grad(f, [x], 0), rtol=1e-6, atol=1e-8)


def test_operators_dispatch_to_primitives():
    x, y = Rec(np.array([1.0, 2.0])), np.array([3.0, 4.0])
    cases = [
        (x + y, T.add, [4, 6]),
        (y + x, T.add, [4, 6]),
        (x - y, T.sub, [-2, -2]),
        (2.0 - x, T.sub, [1, 0]),
        (x * 2, T.mul, [2, 4]),
        (3 * x, T.mul, [3, 6]),
        (x / 2, T.div, [0.5, 1]),
        (2 / x, T.div, [2, 1]),
        (x**2, T.pow_, [1, 4]),
        (2**x, T.pow_, [2, 4]),
        (x @ y, T.matmul, 11),
        (y @ x, T.matmul, 11),
        (-x, T.neg, [-1, -2]),
        (abs(-x), T.abs_, [1, 2]),
        (x > 1.5, T.gt, [False, True]),
        (x < 1.5, T.lt, [True, False]),
        (x >= 2, T.ge, [False, True]),
        (x <= 1, T.le, [True, False]),
        (x == 2, T.eq, [False, True]),
        (x != 2, T.ne, [True, False]),
        (~(x > 1.5), T.logical_not, [True, False]),
        ((x > 1.5) & (x > 0), T.logical_and, [False, True]),
        ((x > 1.5) | (x < 0), T.logical_or, [False, True]),
        (x[1], T.getitem, 2.0),
    ]
    for out, prim, expected in cases:
        assert out.parents[0] is prim
        np.testing.assert_array_equal(value(out), expected)
    assert +x is x
    assert hash(x) == hash(x) and {x: 1}[x] == 1


def test_array_methods_use_numpy_spelling():
    x = Rec(B3)
    np.testing.assert_allclose(value(x.sum(axis=1, keepdims=True)), B3.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(value(x.mean(axis=(0, 2))), B3.mean(axis=(0, 2)))
    np.testing.assert_allclose(value(x.max(axis=0)), B3.max(axis=0))
    np.testing.assert_allclose(value(x.min()), B3.min())
    np.testing.assert_array_equal(value(x.argmax(axis=1)), B3.argmax(axis=1))
    np.testing.assert_allclose(value(x.var(ddof=1)), B3.var(ddof=1))
    np.testing.assert_allclose(value(x.reshape(4, 6)), B3.reshape(4, 6))
    np.testing.assert_allclose(value(x.reshape((-1,))), B3.reshape(-1))
    np.testing.assert_allclose(value(x.transpose(2, 0, 1)), B3.transpose(2, 0, 1))
    np.testing.assert_allclose(value(x.T), B3.T)
    np.testing.assert_allclose(value(x.clip(0, 1)), B3.clip(0, 1))
    np.testing.assert_allclose(value(x[0].dot(A.T)), B3[0].dot(A.T))
    assert value(x.astype("float32")).dtype == np.float32
    assert value(x.flatten()).shape == (24,)
