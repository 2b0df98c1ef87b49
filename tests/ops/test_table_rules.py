"""Every row of the op table: impl vs NumPy, vjp vs finite differences, grad-of-grad.

The vjp rules run here IN NUMPY MODE (on plain ndarrays) for the first-order
dot-product test, and on the recording kind of opkit for grad-of-grad.
"""

import zlib

import numpy as np
import pytest
from op_cases import CASES
from opkit import grad, value

from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY


def _rng(case, salt=""):
    return np.random.default_rng(zlib.crc32((case.id + salt).encode()))


def _float_operands(args):
    return [
        i
        for i, a in enumerate(args)
        if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating)
    ]


def _with(args, i, new):
    args = list(args)
    args[i] = new
    return args


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_impl_matches_numpy_reference(case, dtype):
    args = case.draw(_rng(case), dtype)
    out = case.prim.impl(*args, **case.attrs)
    assert isinstance(out, np.ndarray), type(out)
    aval = case.prim.shape_rule(
        *[a if T.is_static_scalar(a) else T.aval_of(a) for a in args], **case.attrs
    )
    assert out.shape == tuple(aval.shape)
    assert out.dtype == aval.dtype
    if any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
        assert out.dtype == np.dtype(dtype) or case.prim is T.astype
    if case.ref is not None:
        expected = case.ref(*args, **case.attrs)
        tol = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vjp_dot_product_against_finite_differences(case):
    """<vjp_i(g), v> == <g, (f(x + eps v) - f(x - eps v)) / 2 eps>, on ndarrays, float64."""
    rng = _rng(case, "vjp")
    args = case.draw(rng, "float64")
    out = case.prim.impl(*args, **case.attrs)
    g = rng.standard_normal(out.shape)
    checked = 0
    for i in _float_operands(args):
        ct = case.prim.vjps[i](g, out, *args, **case.attrs)
        assert ct is not None, f"{case.prim.name}: no gradient for operand {i}"
        ct = T.sum_to_shape(ct, args[i].shape)
        assert isinstance(ct, np.ndarray) and ct.shape == args[i].shape
        v = rng.standard_normal(args[i].shape)
        eps = 1e-6

        def along(t):
            return np.vdot(g, case.prim.impl(*_with(args, i, args[i] + t * v), **case.attrs))  # noqa: B023 - along() runs in this iteration

        numeric = (along(eps) - along(-eps)) / (2 * eps)
        analytic = np.vdot(ct, v)
        assert np.isclose(analytic, numeric, rtol=1e-6, atol=1e-7), (i, analytic, numeric)
        checked += 1
    assert checked, "the case has no floating operand to check"


@pytest.mark.parametrize("case", [c for c in CASES if c.order2], ids=lambda c: c.id)
def test_grad_of_grad_against_finite_differences(case):
    """Differentiate <grad_i F, u> where F = <prim(args), w>: the vjps must be built from ops."""
    rng = _rng(case, "hvp")
    args = case.draw(rng, "float64")
    w = rng.standard_normal(np.shape(case.prim.impl(*args, **case.attrs)))
    floats = _float_operands(args)

    def F(*a):
        return T.sum_(T.mul(case.prim(*a, **case.attrs), w))

    for i in floats:
        u = rng.standard_normal(args[i].shape)

        def H(*a, i=i, u=u):
            return T.sum_(T.mul(grad(F, i)(*a), u))

        for j in floats:
            second = value(grad(H, j)(*args))
            v = rng.standard_normal(args[j].shape)
            eps = 1e-6
            numeric = (
                float(value(H(*_with(args, j, args[j] + eps * v))))
                - float(value(H(*_with(args, j, args[j] - eps * v))))
            ) / (2 * eps)
            assert np.isclose(np.vdot(second, v), numeric, rtol=1e-5, atol=1e-6), (i, j)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_first_order_through_recording_driver(case):
    """The same vjps, run on recorded values (as eager/tracer would), agree with numpy mode."""
    rng = _rng(case, "rec")
    args = case.draw(rng, "float64")
    w = rng.standard_normal(np.shape(case.prim.impl(*args, **case.attrs)))
    for i in _float_operands(args):
        got = value(grad(lambda *a: T.sum_(T.mul(case.prim(*a, **case.attrs), w)), i)(*args))
        expected = T.sum_to_shape(
            case.prim.vjps[i](w, case.prim.impl(*args, **case.attrs), *args, **case.attrs),
            args[i].shape,
        )
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


_X = np.random.default_rng(5).standard_normal((3, 4))
_Y = np.random.default_rng(6).standard_normal((4,))
NONDIFF = [  # (primitive, operands, attrs, NumPy reference): no gradient, values and dtypes only
    (T.gt, (_X, _Y), {}, np.greater),
    (T.lt, (_X, 0.0), {}, np.less),
    (T.ge, (_X, _X), {}, np.greater_equal),
    (T.le, (0.5, _Y), {}, np.less_equal),
    (T.eq, (_X, _X[0]), {}, np.equal),
    (T.ne, (_X, _Y), {}, np.not_equal),
    (T.logical_and, (_X > 0, _Y > 0), {}, np.logical_and),
    (T.logical_or, (_X > 0, _Y > 0), {}, np.logical_or),
    (T.logical_not, (_X > 0,), {}, np.logical_not),
    (T.isfinite, (np.array([1.0, np.inf, -np.inf, np.nan]),), {}, np.isfinite),
    (T.argmax, (_X,), {"axis": 1}, lambda x, axis: np.argmax(x, axis)),
    (T.argmax, (_X,), {}, np.argmax),
    (
        T.argmin,
        (_X,),
        {"axis": 0, "keepdims": True},
        lambda x, axis, keepdims: np.argmin(x, axis, keepdims=keepdims),
    ),
    (T.full_like, (_X,), {"value": 2.5}, lambda x, value: np.full_like(x, value)),
    (
        T.full_like,
        (_X,),
        {"value": 1, "dtype": "bool"},
        lambda x, value, dtype: np.full(x.shape, value, dtype),
    ),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "prim, operands, attrs, ref", NONDIFF, ids=[f"{p.name}{i}" for i, (p, *_) in enumerate(NONDIFF)]
)
def test_nondiff_impl_matches_numpy(prim, operands, attrs, ref, dtype):
    operands = [
        o.astype(dtype) if isinstance(o, np.ndarray) and o.dtype.kind == "f" else o
        for o in operands
    ]
    out = prim.impl(*operands, **attrs)
    aval = prim.shape_rule(
        *[o if T.is_static_scalar(o) else T.aval_of(o) for o in operands], **attrs
    )
    assert isinstance(out, np.ndarray)
    assert out.shape == tuple(aval.shape) and out.dtype == aval.dtype
    np.testing.assert_array_equal(out, ref(*operands, **attrs))
    assert prim.nondiff


@pytest.mark.parametrize(
    "g_shape, shape",
    [
        ((2, 3, 4), (3, 1)),
        ((2, 3), (2, 3)),
        ((3,), ()),
        ((1, 3), (1, 3)),
        ((4, 1), (1,)),
        ((2, 5), (1, 1)),
    ],
)
def test_sum_to_shape_is_the_adjoint_of_broadcasting(g_shape, shape):
    g = np.arange(1.0, 1 + np.prod(g_shape)).reshape(g_shape)
    v = np.arange(2.0, 2 + np.prod(shape)).reshape(shape)
    out = T.sum_to_shape(g, shape)
    assert np.shape(out) == shape
    assert np.isclose(np.vdot(out, v), np.vdot(g, np.broadcast_to(v, g_shape)))


def test_sum_to_shape_widens_a_smaller_cotangent():
    np.testing.assert_array_equal(T.sum_to_shape(np.array(2.0), (2, 2)), np.full((2, 2), 2.0))


SCALAR_ATTRS = {
    "clip": {"lo": 0.0, "hi": 1.0},
    "astype": {"dtype": "float32"},
    "full_like": {"value": 3},
    "threefry2x32": {"word": 2},
}


@pytest.mark.parametrize("name", sorted(n for n, p in REGISTRY.items() if p.kind == "elementwise"))
def test_elementwise_impls_accept_python_scalars(name):
    prim = REGISTRY[name]
    arity = len(prim.vjps)
    operands = [True] + [0.75] * (arity - 1) if name == "where" else [0.75] * arity
    if name.startswith("logical"):
        operands = [True] * arity
    attrs = SCALAR_ATTRS.get(name, {})
    out = prim.impl(*operands, **attrs)
    assert isinstance(out, np.ndarray) and out.shape == ()
    assert out.dtype == prim.shape_rule(*operands, **attrs).dtype
