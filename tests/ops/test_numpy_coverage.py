"""NumPy coverage while tracing (issue 13): NumPy's names trace, with correct values and gradients.

Each case is one function written against a module `m`: run with `m = numpy` on
plain arrays it is the NumPy reference (values, and float64 central differences
for gradients); the same function with `m = numpy` on tracers checks the np.*
spelling (through __array_ufunc__ / __array_function__); with `m = tracegrad` it
checks the tg.* spelling, compiled (interpreter backend), and on eager tensors;
with `m = jax.numpy` (float64) it cross-checks the gradients against JAX.
One parametrized test runs a representative set through the default Numba backend.
"""

from __future__ import annotations

import pathlib
import sys
import warnings
import zlib

import numpy as np
import pytest
from op_cases import _draw

import tracegrad as tg
from tracegrad.ops import table as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "compile"))
from compile_helpers import numeric_grad


def _e(subscripts):
    return lambda m, *xs: m.einsum(subscripts, *xs)


def _holes(m, x):
    """x with nans at fixed places (for the nan-aware reductions)."""
    mask = np.zeros(x.shape, bool)
    mask.flat[[1, 6]] = True
    return m.where(mask, np.nan, x)


def _pieces(m, parts):
    """A list of arrays as one array, each piece weighted differently."""
    return m.concatenate([m.ravel(p) * (i + 1.0) for i, p in enumerate(parts)])


# name, f(m, *xs), operand specs (op_cases kinds: n normal, p positive, a |x| in [0.5, 2],
# u in (-0.9, 0.9), d distinct)
CASES = [
    # elementwise
    ("tan", lambda m, x: m.tan(x), [("u", (3, 4))]),
    ("sinh", lambda m, x: m.sinh(x), [("n", (3, 4))]),
    ("sinh_wide", lambda m, x: m.sinh(x * 3), [("n", (3, 4))]),
    ("cosh", lambda m, x: m.cosh(x * 3), [("n", (3, 4))]),
    ("arcsin", lambda m, x: m.arcsin(x), [("u", (3, 4))]),
    ("arccos", lambda m, x: m.arccos(x), [("u", (3, 4))]),
    ("arctan", lambda m, x: m.arctan(x * 3), [("n", (3, 4))]),
    ("arctan2", lambda m, y, x: m.arctan2(y, x), [("a", (3, 4)), ("a", (4,))]),
    ("hypot", lambda m, x, y: m.hypot(x, y), [("a", (3, 4)), ("n", (3, 4))]),
    ("log1p", lambda m, x: m.log1p(x), [("p", (3, 4))]),
    ("expm1", lambda m, x: m.expm1(x), [("n", (3, 4))]),
    ("log2", lambda m, x: m.log2(x), [("p", (3, 4))]),
    ("log10", lambda m, x: m.log10(x), [("p", (3, 4))]),
    ("exp2", lambda m, x: m.exp2(x), [("n", (3, 4))]),
    ("square_reciprocal", lambda m, x: m.square(x) + m.reciprocal(x), [("a", (3, 4))]),
    ("logaddexp", lambda m, x, y: m.logaddexp(x, y), [("n", (3, 4)), ("n", (4,))]),
    ("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), [("n", (3, 4)), ("n", (3, 4))]),
    ("sinc", lambda m, x: m.sinc(x), [("n", (3, 4))]),
    ("real_imag_conj", lambda m, x: m.real(x) * 2 + m.imag(x) + m.conj(x) * 3, [("n", (3, 4))]),
    ("remainder", lambda m, x, y: m.remainder(x, y), [("n", (3, 4)), ("p", (4,))]),
    ("mod_operator", lambda m, x, y: x % y + 2.5 % y, [("n", (3, 4)), ("a", (3, 4))]),
    ("fmod", lambda m, x, y: m.fmod(x * 3, y), [("n", (3, 4)), ("a", (4,))]),
    ("degrees", lambda m, x: m.deg2rad(m.rad2deg(x) * 2), [("n", (3,))]),
    ("arcsinh", lambda m, x: m.arcsinh(x * 3), [("n", (3, 4))]),
    ("arccosh", lambda m, x: m.arccosh(x + 1.0), [("p", (3, 4))]),
    ("arctanh", lambda m, x: m.arctanh(x), [("u", (3, 4))]),
    ("fmax_fmin", lambda m, x, y: m.fmax(x, y) + m.fmin(x, y) * 2, [("n", (3, 4)), ("n", (4,))]),
    ("nan_to_num", lambda m, x: m.nan_to_num(x) * 2, [("n", (3, 4))]),
    (
        "rounding",
        lambda m, x: m.ceil(x * 3) + m.trunc(x * 3) * 2 + m.floor(x) + m.angle(x) + x,
        [("a", (3, 4))],
    ),
    (
        "floor_divide",
        lambda m, x, y: m.floor_divide(x * 5, y) + (x * 7) // 2.0 + x,
        [("n", (3, 4)), ("a", (4,))],
    ),
    (
        "round",
        lambda m, x: m.round(x * 10, 1) + m.rint(x * 3) + m.round(x * 100, -1) + x,
        [("n", (3, 4))],
    ),
    ("cbrt", lambda m, x: m.cbrt(x), [("a", (3, 4))]),
    ("heaviside", lambda m, x: m.heaviside(x, 0.5) + x, [("a", (3, 4))]),
    # reductions and scans
    (
        "any_all",
        lambda m, x: (m.any(x > 1, axis=0) * 1.0 + m.all(x > -1, axis=0)) * x,
        [("n", (3, 4))],
    ),
    ("ptp", lambda m, x: m.ptp(x, axis=1), [("d", (3, 4))]),
    ("average", lambda m, x, w: m.average(x, axis=1, weights=w), [("n", (3, 4)), ("p", (4,))]),
    ("nansum_nanmean", lambda m, x: m.nansum(x, axis=0) + m.nanmean(x), [("n", (3, 4))]),
    (
        "nan_reductions",
        lambda m, x: (
            m.nanmax(_holes(m, x), axis=0)
            + m.nanmin(_holes(m, x))
            + m.nanprod(_holes(m, x), axis=1).sum()
            + m.nanvar(_holes(m, x), axis=0, ddof=1)
            + m.nanstd(_holes(m, x))
            + m.nancumsum(_holes(m, x))[5]
        ),
        [("d", (3, 4))],
    ),
    ("median", lambda m, x: m.median(x, axis=1), [("d", (3, 4))]),
    ("median_odd_all", lambda m, x: m.median(x), [("d", (3, 5))]),
    ("quantile", lambda m, x: m.quantile(x, np.array([0.1, 0.75]), axis=0), [("d", (5, 3))]),
    ("percentile", lambda m, x: m.percentile(x, 30, keepdims=True), [("d", (2, 3))]),
    (
        "methods",
        lambda m, x: (
            x.cumsum(axis=0)
            + x.cumprod(axis=1)
            + x.prod()
            + x.std()
            + x.repeat(1, axis=0)
            + x.trace()
            + x.round(1)
        ),
        [("a", (3, 3))],
    ),
    ("prod_all", lambda m, x: m.prod(x), [("a", (3, 4))]),
    ("prod_axis", lambda m, x: m.prod(x, axis=1), [("n", (3, 4))]),
    ("prod_axes_keep", lambda m, x: m.prod(x, axis=(0, 2), keepdims=True), [("a", (2, 3, 2))]),
    ("cumsum_flat", lambda m, x: m.cumsum(x), [("n", (3, 4))]),
    ("cumsum_axis0", lambda m, x: m.cumsum(x, axis=0), [("n", (3, 4))]),
    ("cumprod_axis1", lambda m, x: m.cumprod(x, axis=1), [("n", (3, 4))]),
    ("cumprod_flat", lambda m, x: m.cumprod(x), [("a", (2, 3))]),
    ("std", lambda m, x: m.std(x), [("n", (3, 4))]),
    ("std_axis_ddof", lambda m, x: m.std(x, axis=0, ddof=1), [("n", (3, 4))]),
    ("var_keepdims", lambda m, x: m.var(x, axis=1, keepdims=True), [("n", (3, 4))]),
    ("sort_last", lambda m, x: m.sort(x), [("d", (3, 4))]),
    ("sort_axis0", lambda m, x: m.sort(x, axis=0), [("d", (3, 4))]),
    ("sort_flat", lambda m, x: m.sort(x, axis=None), [("d", (3, 4))]),
    ("diff", lambda m, x: m.diff(x, n=2, axis=0), [("n", (4, 3))]),
    ("norm_vector", lambda m, x: m.linalg.norm(x), [("n", (5,))]),
    ("norm_all", lambda m, x: m.linalg.norm(x), [("n", (2, 3, 2))]),
    ("norm_axis", lambda m, x: m.linalg.norm(x, axis=1), [("n", (3, 4))]),
    ("norm_ord1", lambda m, x: m.linalg.norm(x, ord=1, axis=0), [("a", (3, 4))]),
    ("norm_ord_inf", lambda m, x: m.linalg.norm(x, ord=np.inf), [("d", (5,))]),
    ("norm_ord3", lambda m, x: m.linalg.norm(x, ord=3), [("a", (5,))]),
    ("norm_fro", lambda m, x: m.linalg.norm(x, ord="fro"), [("n", (3, 4))]),
    ("norm_matrix_1", lambda m, x: m.linalg.norm(x, ord=1), [("d", (3, 4))]),
    ("norm_matrix_inf", lambda m, x: m.linalg.norm(x, ord=np.inf), [("d", (3, 4))]),
    # shape functions
    ("repeat_flat", lambda m, x: m.repeat(x, 2), [("n", (2, 3))]),
    ("repeat_axis", lambda m, x: m.repeat(x, 3, axis=1), [("n", (2, 3))]),
    ("repeat_counts", lambda m, x: m.repeat(x, np.array([1, 0, 2]), axis=0), [("n", (3, 2))]),
    ("tile", lambda m, x: m.tile(x, (2, 1, 2)), [("n", (2, 3))]),
    ("vstack", lambda m, x, y: m.vstack([x, y, x * y]), [("n", (3,)), ("n", (3,))]),
    ("hstack", lambda m, x, y: m.hstack([x, y * 2]), [("n", (2, 3)), ("n", (2, 1))]),
    ("hstack_1d", lambda m, x, y: m.hstack([x, y]), [("n", (3,)), ("n", (2,))]),
    ("dstack", lambda m, x, y: m.dstack([x, y]), [("n", (2, 3)), ("n", (2, 3))]),
    ("column_stack", lambda m, x, y: m.column_stack([x, y]), [("n", (3,)), ("n", (3, 2))]),
    ("stack_axis1", lambda m, x, y: m.stack([x, y], axis=1), [("n", (2, 3)), ("n", (2, 3))]),
    ("concatenate", lambda m, x, y: m.concatenate([x, y], axis=1), [("n", (2, 3)), ("n", (2, 2))]),
    ("split", lambda m, x: _pieces(m, m.split(x, 2, axis=1)), [("n", (3, 4))]),
    ("split_indices", lambda m, x: _pieces(m, m.split(x, [1, 3])), [("n", (5, 2))]),
    ("array_split", lambda m, x: _pieces(m, m.array_split(x, 3)), [("n", (7,))]),
    ("roll_flat", lambda m, x: m.roll(x, 5), [("n", (3, 4))]),
    ("roll_axis", lambda m, x: m.roll(x, -1, axis=1), [("n", (3, 4))]),
    ("roll_axes", lambda m, x: m.roll(x, (1, 2), axis=(0, 1)), [("n", (3, 4))]),
    ("flip", lambda m, x: m.flip(x, 0) + m.fliplr(x) * 2 + m.flipud(x) * 3, [("n", (3, 3))]),
    (
        "swap_move",
        lambda m, x: m.swapaxes(x, 0, 2) + m.moveaxis(x, [0, 1], [2, 1]) * 2,
        [("n", (2, 3, 2))],
    ),
    ("atleast_2d", lambda m, x: m.atleast_2d(x) * 2, [("n", (3,))]),
    (
        "pad",
        lambda m, x: m.pad(x, ((1, 0), (2, 1))) + m.pad(x, ((1, 0), (3, 0)), constant_values=2.0),
        [("n", (2, 3))],
    ),
    (
        "meshgrid",
        lambda m, x, y: _pieces(m, m.meshgrid(x, y) + m.meshgrid(y, x, indexing="ij")),
        [("n", (3,)), ("n", (2,))],
    ),
    (
        "rot90",
        lambda m, x: m.rot90(x) + m.rot90(x, 3) * 2 + m.rot90(x, 2, axes=(1, 0)),
        [("n", (3, 3))],
    ),
    ("rollaxis", lambda m, x: m.rollaxis(x, 2) * 2 + m.rollaxis(x, 1, 0), [("n", (3, 3, 3))]),
    ("linspace_traced", lambda m, x: m.linspace(x[0], x[1], 5) * x[2], [("n", (3,))]),
    # diagonals, triangles, products
    ("trace", lambda m, x: m.trace(x), [("n", (3, 4))]),
    ("trace_offset", lambda m, x: m.trace(x, offset=1), [("n", (3, 4))]),
    ("trace_3d", lambda m, x: m.trace(x, axis1=1, axis2=2), [("n", (2, 3, 3))]),
    ("diag_build", lambda m, x: m.diag(x, k=1), [("n", (3,))]),
    ("diag_take", lambda m, x: m.diag(x, k=-1), [("n", (3, 4))]),
    ("diagonal", lambda m, x: m.diagonal(x, 1, 0, 2), [("n", (3, 2, 4))]),
    ("triu", lambda m, x: m.triu(x, 1), [("n", (3, 4))]),
    ("tril", lambda m, x: m.tril(x), [("n", (2, 3, 3))]),
    ("outer", lambda m, x, y: m.outer(x, y), [("n", (3,)), ("n", (2, 2))]),
    ("inner", lambda m, x, y: m.inner(x, y), [("n", (2, 3)), ("n", (4, 3))]),
    ("kron", lambda m, x, y: m.kron(x, y), [("n", (2, 3)), ("n", (2, 2))]),
    ("kron_1d", lambda m, x, y: m.kron(x, y), [("n", (3,)), ("n", (2,))]),
    ("cross", lambda m, x, y: m.cross(x, y), [("n", (4, 3)), ("n", (3,))]),
    ("tensordot_1", lambda m, x, y: m.tensordot(x, y, axes=1), [("n", (2, 3)), ("n", (3, 4))]),
    ("tensordot_2", lambda m, x, y: m.tensordot(x, y), [("n", (2, 3, 4)), ("n", (3, 4, 5))]),
    (
        "tensordot_pairs",
        lambda m, x, y: m.tensordot(x, y, axes=([0, 2], [2, 0])),
        [("n", (2, 3, 4)), ("n", (4, 5, 2))],
    ),
    ("tensordot_0", lambda m, x, y: m.tensordot(x, y, axes=0), [("n", (2,)), ("n", (3,))]),
    ("dot_nd", lambda m, x, y: m.dot(x, y), [("n", (2, 3, 4)), ("n", (2, 4, 3))]),
    # einsum
    ("einsum_matmul", _e("ij,jk->ik"), [("n", (3, 4)), ("n", (4, 2))]),
    ("einsum_bmm", _e("bij,bjk->bik"), [("n", (2, 3, 4)), ("n", (2, 4, 5))]),
    ("einsum_dot", _e("i,i->"), [("n", (4,)), ("n", (4,))]),
    ("einsum_transpose", _e("ij->ji"), [("n", (3, 4))]),
    ("einsum_trace", _e("ii->"), [("n", (3, 3))]),
    ("einsum_diag", _e("ii->i"), [("n", (3, 3))]),
    ("einsum_matvec", _e("ij,j->i"), [("n", (3, 4)), ("n", (4,))]),
    ("einsum_outer", _e("i,j->ij"), [("n", (3,)), ("n", (2,))]),
    ("einsum_implicit", _e("ij,jk"), [("n", (3, 4)), ("n", (4, 2))]),
    ("einsum_sum_axis", _e("ijk->kj"), [("n", (2, 3, 4))]),
    ("einsum_rowdot", _e("ij,ij->i"), [("n", (3, 4)), ("n", (3, 4))]),
    ("einsum_ellipsis", _e("...ij,...jk->...ik"), [("n", (2, 3, 4)), ("n", (4, 2))]),
    ("einsum_three", _e("ij,jk,kl->il"), [("n", (2, 3)), ("n", (3, 4)), ("n", (4, 2))]),
    ("einsum_batch_outer", _e("bi,bj->bij"), [("n", (2, 3)), ("n", (2, 4))]),
    ("einsum_bilinear", _e("i,ij,j->"), [("n", (3,)), ("n", (3, 4)), ("n", (4,))]),
    ("einsum_attention", _e("bhqd,bhkd->bhqk"), [("n", (2, 2, 3, 4)), ("n", (2, 2, 5, 4))]),
    (
        "einsum_sublists",
        lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [0, 2]) + m.einsum(x, [0, 1], x, [0, 1]),
        [("n", (3, 4)), ("n", (4, 3))],
    ),
]
IDS = [c[0] for c in CASES]
NUMPY_METHODS = {"methods"}  # ndarray method spelling: eager tensors follow PyTorch's instead
_BY_NAME = {c[0]: c for c in CASES}


def _args(name, dtype="float64"):
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # (str hash() differs per process)
    return [_draw(spec, rng, dtype) for spec in _BY_NAME[name][2]]


def _weights(fn, args):
    """Fixed weights in the output's shape, so every output entry matters to the loss."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = np.asarray(fn(np, *args))
    return np.linspace(0.5, 1.5, out.size).reshape(out.shape) if out.size else np.ones(out.shape)


def _loss(fn, m, weights):
    return lambda *xs: m.sum(fn(m, *xs) * weights)


@pytest.mark.parametrize("name", IDS)
def test_values_and_gradients_both_spellings(name):
    """tg.* and np.* on tracers: compile/value_and_grad give NumPy's values and the
    gradients of float64 central differences."""
    _, fn, _ = _BY_NAME[name]
    args = _args(name)
    w = _weights(fn, args)
    expected = np.asarray(fn(np, *args))
    reference = _loss(fn, np, w)
    argnums = tuple(range(len(args)))
    numeric = [numeric_grad(reference, args, k) for k in argnums]
    for m in (tg, np):
        out = tg.compile(lambda *xs: fn(m, *xs), backend="interpret")(*args)  # noqa: B023 - compiled and run in this iteration
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
        assert np.asarray(out).dtype == expected.dtype
        value, grads = tg.value_and_grad(_loss(fn, m, w), argnums=argnums, backend="interpret")(
            *args
        )
        np.testing.assert_allclose(value, reference(*args), rtol=1e-12)
        for k, g in enumerate(grads):
            np.testing.assert_allclose(
                g, numeric[k], rtol=1e-6, atol=1e-7, err_msg=f"{name} ({m.__name__}) gradient {k}"
            )
    grads = tg.grad(_loss(fn, tg, w), argnums=argnums, backend="interpret")(*args)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric[k], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", IDS)
def test_tg_spelling_runs_on_plain_arrays_and_float32(name):
    _, fn, _ = _BY_NAME[name]
    args = _args(name, "float32")
    expected = np.asarray(fn(np, *args))
    out = np.asarray(fn(tg, *args))
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
    traced = tg.compile(lambda *xs: fn(tg, *xs), backend="interpret")(*args)
    np.testing.assert_allclose(traced, expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", IDS)
def test_eager_tensors(name):
    """The tg.* spelling on eager tensors: values and .grad from backward()."""
    import tracegrad.eager as torch

    if name in NUMPY_METHODS:
        pytest.skip("eager tensors spell methods as PyTorch does (x.cumsum(dim))")
    _, fn, _ = _BY_NAME[name]
    args = _args(name)
    w = _weights(fn, args)
    tensors = [torch.tensor(a, requires_grad=True) for a in args]
    out = _loss(fn, tg, w)(*tensors)
    out.backward()
    np.testing.assert_allclose(out.detach().numpy(), _loss(fn, np, w)(*args), rtol=1e-12)
    for k, t in enumerate(tensors):
        np.testing.assert_allclose(
            t.grad.numpy(), numeric_grad(_loss(fn, np, w), args, k), rtol=1e-6, atol=1e-7
        )


@pytest.fixture(scope="module")
def jax_x64():
    jax = pytest.importorskip("jax")
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("name", IDS)
def test_gradients_match_jax(name, jax_x64):
    jnp = jax_x64.numpy
    _, fn, _ = _BY_NAME[name]
    args = _args(name)
    w = _weights(fn, args)
    argnums = tuple(range(len(args)))
    expected = jax_x64.jit(jax_x64.grad(_loss(fn, jnp, jnp.asarray(w)), argnums=argnums))(
        *[jnp.asarray(a) for a in args]
    )
    ours = tg.grad(_loss(fn, np, w), argnums=argnums, backend="interpret")(*args)
    for k in argnums:
        np.testing.assert_allclose(ours[k], np.asarray(expected[k]), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------- edges


def _grad(f, *args):
    argnums = tuple(range(len(args)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tg.value_and_grad(lambda *xs: tg.sum(f(*xs)), argnums=argnums, backend="interpret")(
            *args
        )


def test_inverse_trig_at_the_domain_edges():
    x = np.array([1.0, -1.0])
    value, (g,) = _grad(np.arcsin, x)
    assert value == 0.0 and np.all(g == np.inf)  # JAX: +inf at both edges
    value, (g,) = _grad(np.arccos, x)
    assert value == pytest.approx(np.pi) and np.all(g == -np.inf)
    assert tg.compile(np.arcsin, backend="interpret")(x).tolist() == [np.pi / 2, -np.pi / 2]


def test_inverse_hyperbolic_functions_at_their_edges():
    x = np.array([0.0, 1e-12, -1e300, 1e300])
    np.testing.assert_allclose(tg.arcsinh(x), np.arcsinh(x), rtol=1e-15)
    _, (g,) = _grad(np.arcsinh, x[:2])
    np.testing.assert_allclose(g, [1.0, 1.0])  # 1 / sqrt(1 + x^2), also exactly at 0
    _, (g,) = _grad(np.arctanh, np.array([0.0, 1.0, -1.0]))
    np.testing.assert_array_equal(g, [1.0, np.inf, np.inf])
    value, (g,) = _grad(np.arccosh, np.array([1.0, 1e300]))
    assert g[0] == np.inf and np.isfinite(value)
    z = np.array([-0.999999, 0.99999999, 1 + 1e-12, 1e9])
    np.testing.assert_allclose(tg.arctanh(z[:2]), np.arctanh(z[:2]), rtol=1e-15)
    np.testing.assert_allclose(tg.arccosh(z[2:]), np.arccosh(z[2:]), rtol=1e-10)


def test_log1p_expm1_keep_tiny_arguments():
    x = np.array([1e-17, -1e-300, 3e-9])
    for f in (np.log1p, np.expm1):
        np.testing.assert_array_equal(tg.compile(f, backend="interpret")(x), f(x))
        np.testing.assert_allclose(_grad(f, x)[1][0], 1.0, rtol=1e-8)
    np.testing.assert_allclose(tg.sinh(x), np.sinh(x), rtol=1e-15)  # expm1 branch near 0
    np.testing.assert_allclose(tg.tan(x), np.tan(x), rtol=1e-15)


def test_hypot_does_not_overflow_and_is_zero_safe():
    x, y = np.array([3e300, 0.0, np.inf, 3.0]), np.array([4e300, 0.0, 1.0, -4.0])
    value = tg.compile(np.hypot, backend="interpret")(x, y)
    np.testing.assert_array_equal(value, np.hypot(x, y))
    _, (gx, gy) = _grad(np.hypot, x[[0, 1, 3]], y[[0, 1, 3]])
    # x / hypot and y / hypot; at (0, 0) the zero subgradient (JAX's max-splitting gives 1/2)
    np.testing.assert_allclose(gx, [0.6, 0.0, 0.6])
    np.testing.assert_allclose(gy, [0.8, 0.0, -0.8])


def test_logaddexp_at_infinities_and_large_values():
    x = np.array([-np.inf, np.inf, np.inf, 1e4, 2.0, -np.inf])
    y = np.array([-np.inf, np.inf, 1.0, 1e4, -np.inf, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inf - inf inside the composite, NumPy's interpreter
        value = tg.compile(np.logaddexp, backend="interpret")(x, y)
    np.testing.assert_array_equal(value, np.logaddexp(x, y))
    _, (gx, gy) = _grad(np.logaddexp, x, y)
    # exp(x - out): 1/2 each where x = y (JAX gives nan at (-inf, -inf) and e at (inf, 1))
    np.testing.assert_allclose(gx, [0.5, 0.5, 1.0, 0.5, 1.0, 0.0])
    np.testing.assert_allclose(gy, [0.5, 0.5, 0.0, 0.5, 0.0, 1.0])


def test_logaddexp_second_derivatives_at_and_near_the_branch_switch():
    # d2/dx2 log(e^x + e^y) = s(1 - s), d2/dxdy = -s(1 - s), s = sigmoid(x - y): 1/4 at x = y,
    # where a max + log1p(exp(-|x - y|)) form would get the kinks of |x - y| instead
    x = np.array([1.5, 1.5, 1.5 + 1e-9, -3.0, 40.0])
    y = np.array([1.5, 1.5 + 1e-9, 1.5, 2.0, -2.0])
    s = 1.0 / (1.0 + np.exp(-(x - y)))
    e = np.exp(-abs(x - y))
    curvature = e / (1 + e) ** 2  # s(1 - s), without cancelling to 0 at x - y = 42
    dx = tg.grad(lambda a, b: tg.sum(tg.logaddexp(a, b)), argnums=0, backend="interpret")
    dxx, dxy = tg.grad(lambda a, b: tg.sum(dx(a, b)), argnums=(0, 1), backend="interpret")(x, y)
    np.testing.assert_allclose(dx(x, y), s, rtol=1e-12)
    np.testing.assert_allclose(dxx, curvature, rtol=1e-9)
    np.testing.assert_allclose(dxy, -curvature, rtol=1e-9)


def test_prod_and_cumprod_gradients_at_zeros(jax_x64):
    jnp = jax_x64.numpy
    for x in (
        np.array([0.0, 2.0, 3.0, -1.5]),
        np.array([2.0, 0.0, 0.0, 5.0]),
        np.array([[0.0, 2.0], [3.0, 0.5]]),
        np.array([np.inf, 2.0, 1.0]),
    ):
        w = np.linspace(1.0, 2.0, x.size).reshape(x.shape)
        for fn in (
            lambda m, v: m.prod(v, axis=0),
            lambda m, v: m.cumprod(v, axis=0) * w,  # noqa: B023 - a row of the loop's table; run in this iteration
            lambda m, v: m.prod(v),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value, (g,) = _grad(lambda v: fn(np, v), x)  # noqa: B023 - run in this iteration
                expected = jax_x64.jit(jax_x64.grad(lambda v: jnp.sum(fn(jnp, v))))(jnp.asarray(x))  # noqa: B023 - run in this iteration
                np.testing.assert_allclose(value, np.sum(fn(np, x)))
            np.testing.assert_allclose(g, np.asarray(expected), rtol=1e-12)


def test_norm_std_sinc_arctan2_at_zero_follow_jax():
    zeros = np.zeros(3)
    assert np.all(np.isnan(_grad(np.linalg.norm, zeros)[1][0]))  # JAX: x / |x| = nan
    assert np.all(np.isnan(_grad(np.std, np.ones(3))[1][0]))  # JAX: nan too
    value, (g,) = _grad(np.sinc, np.array([0.0, 1e-9]))
    assert value == pytest.approx(2.0) and np.allclose(g, 0.0, atol=1e-8)
    _, (gy, gx) = _grad(np.arctan2, np.array([0.0, 1.0]), np.array([0.0, 0.0]))
    assert np.isnan(gy[0]) and np.isnan(gx[0]) and gy[1] == 0.0 and gx[1] == -1.0


def test_cosh_sinh_reach_numpys_overflow_threshold():
    x = np.array([710.0, -710.3, 30.0, -0.5, 1.0])
    for f in (np.cosh, np.sinh):
        out = tg.compile(f, backend="interpret")(x)
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out, f(x), rtol=4e-16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float32: 710 overflows (NumPy and tracegrad)
            np.testing.assert_allclose(
                f(x.astype(np.float32)), getattr(tg, f.__name__)(x.astype(np.float32)), rtol=5e-7
            )


def test_remainder_by_zero_and_sign_of_divisor():
    x, y = np.array([5.5, -5.5, 5.5, 1.0]), np.array([2.0, 2.0, -2.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = tg.compile(lambda a, b: a % b, backend="interpret")(x, y)
        np.testing.assert_array_equal(value, np.remainder(x, y))
    _, (gx, gy) = _grad(lambda a, b: a % b, x[:3], y[:3])
    np.testing.assert_array_equal(gx, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy, -np.floor(x[:3] / y[:3]))
    # the quotient NumPy used: 1 % 0.1 = 1 - 9 * 0.1 (floor(1 / 0.1) would say 10)
    _, (gx, gy) = _grad(lambda a, b: a % b, np.array([1.0]), np.array([0.1]))
    assert gy.tolist() == [-9.0]
    assert np.remainder(1.0, 0.1) == pytest.approx(1.0 - 9 * 0.1, abs=1e-15)


def test_sort_gradient_goes_to_original_positions_with_ties():
    x = np.array([3.0, 1.0, 1.0, 2.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    _, (g,) = _grad(lambda v: np.sort(v) * w, x)
    np.testing.assert_array_equal(g, [1000.0, 1.0, 10.0, 100.0])  # stable order for ties
    assert tg.argsort(np.array([2.0, np.nan, 1.0])).tolist() == [2, 0, 1]  # NaN last


# ----------------------------------------------------------- arrays from traced values


def test_tg_array_and_stack_of_traced_scalars():
    def f(x):
        v = tg.array([x[0], 2 * x[1], 3.0])
        m = tg.array([[x[0], 1.0], [x[1], x[0] * x[1]]])
        s = tg.stack([x[1], x[0]])
        return tg.sum(v * v) + tg.sum(m @ m) + tg.sum(s * np.array([1.0, 5.0]))

    def reference(x):
        v = np.array([x[0], 2 * x[1], 3.0])
        m = np.array([[x[0], 1.0], [x[1], x[0] * x[1]]])
        return np.sum(v * v) + np.sum(m @ m) + x[1] + 5 * x[0]

    x = np.array([0.5, -1.5])
    value, g = tg.value_and_grad(f, backend="interpret")(x)
    assert value == pytest.approx(reference(x))
    np.testing.assert_allclose(g, numeric_grad(reference, [x], 0), rtol=1e-7)
    assert tg.array([1, 2]).dtype == np.array([1, 2]).dtype
    traced = tg.trace(lambda x: tg.array([x[0], x[1]], dtype=np.float32), x)
    assert traced.outputs[0].dtype == np.float32 and traced.outputs[0].shape == (2,)


def test_full_with_a_traced_fill_value():
    value, g = tg.value_and_grad(lambda x: tg.sum(tg.full((2, 3), x[0] * 2)), backend="interpret")(
        np.array([1.5, 0.0])
    )
    assert value == 18.0 and g.tolist() == [12.0, 0.0]


def test_np_array_of_a_large_traced_array_points_to_tg_array():
    from tracegrad.tracing import OBJECT_ARRAY_LIMIT, TracingError

    with pytest.raises(TracingError, match=r"tracegrad\.array"):
        tg.trace(lambda x: np.array([x, x]), np.ones(OBJECT_ARRAY_LIMIT + 1))


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda x: np.split(x, 3), ValueError),
        (lambda x: np.linalg.norm(x, ord=3), ValueError),  # no such matrix norm (NumPy's error)
        (lambda x: np.einsum("ij,jk->ik", x, x[:, :2].T), tg.ShapeError),
        (lambda x: np.tensordot(x, x, axes=([0], [1])), tg.ShapeError),
        (lambda x: np.prod(x, dtype=np.float32), NotImplementedError),
    ],
)
def test_unsupported_or_invalid_calls_raise(call, error):
    with pytest.raises(error):
        tg.trace(call, np.ones((4, 3)))


def test_primitives_have_eager_node_names():
    assert T.log1p.node_name(np.ones(2)) == "Log1PBackward0"
    assert T.arctan2.node_name(np.ones(2), np.ones(2)) == "Atan2Backward0"
    assert T.remainder.node_name(np.ones(2), 2.0) == "RemainderBackward0"
    assert T.cumsum.node_name(np.ones(2), axis=0) == "CumsumBackward0"


# ------------------------------------------------------------- the Numba backend


def _numba_unary(x):
    return (
        np.tan(x)
        + np.sinh(x) * 2
        + np.cosh(x)
        + np.arcsin(x * 0.5)
        + np.arccos(x * 0.3)
        + np.arctan(x)
        + np.log1p(x * x)
        + np.expm1(x)
        + np.log2(1.5 + x)
        + np.sinc(x)
    )


def _numba_binary(x, y):
    return (
        np.arctan2(x, y)
        + np.hypot(x, y) * 2
        + np.logaddexp(x, y)
        + x % (np.abs(y) + 0.5)
        + np.fmod(x, y + 3.0)
    )


def _numba_scans(x, y):
    return (
        np.sum(np.cumsum(x, axis=1) * y)
        + np.sum(np.cumprod(x, axis=0) * y)
        + np.sum(np.prod(x, axis=1))
        + np.sum(np.sort(x, axis=0) * y)
        + np.std(x)
        + np.linalg.norm(x)
    )


def _numba_shapes(x, y):
    b = np.einsum("bij,bjk->bik", np.reshape(x, (2, 2, 3)), np.reshape(y, (2, 3, 2)))
    return (
        np.sum(b * b)
        + np.tensordot(x, y, axes=2)
        + np.trace(x @ y.T)
        + np.roll(x, 1)[0, 0]
        + np.sum(np.diag(x[0]) @ np.triu(x @ y.T)[:3, :3])
        + np.sum(np.kron(x[:2, :2], y[:2]))
        + np.sum(np.repeat(x, 2, axis=0) * np.vstack([y, y]))
        + np.sum(np.outer(x[0], y[1]))
        + sum(np.sum(p * (i + 1)) for i, p in enumerate(np.array_split(np.hstack([x, y]), 3)))
    )


def _numba_edges(x, y):
    # values at the edges, compiled with the kernels' fast-math flags
    return (
        np.arcsin(np.clip(x * 10, -1.0, 1.0))
        + np.log1p(x * 1e-15) * 1e15
        + np.hypot(x * 1e300, y * 1e300) * 1e-300
        + np.logaddexp(x * 1e4, y * 1e4) * 1e-4
    )


NUMBA = {
    "unary": (_numba_unary, 1),
    "binary": (_numba_binary, 2),
    "scans": (_numba_scans, 2),
    "shapes": (_numba_shapes, 2),
    "edges": (_numba_edges, 2),
}


@pytest.mark.parametrize("group", sorted(NUMBA))
def test_numba_backend(group):
    """One value_and_grad kernel per group through the default backend, against the
    interpreter (same graph) and NumPy (values) and central differences (gradients)."""
    fn, arity = NUMBA[group]
    rng = np.random.default_rng(3)
    args = [rng.uniform(-0.9, 0.9, (4, 3)) for _ in range(arity)]

    def loss(*xs):
        return np.sum(fn(*xs))

    argnums = tuple(range(arity))
    value, grads = tg.value_and_grad(loss, argnums=argnums)(*args)
    ref_value, ref_grads = tg.value_and_grad(loss, argnums=argnums, backend="interpret")(*args)
    np.testing.assert_allclose(value, loss(*args), rtol=1e-12)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    for k in argnums:
        np.testing.assert_allclose(grads[k], ref_grads[k], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grads[k], numeric_grad(loss, args, k), rtol=1e-5, atol=1e-6)


# ------------------------------------------- np.array of traced values (issue 13)
# NumPy's array() cannot be overridden; a small traced array converts to an object
# array of its traced elements, which tracegrad ops and outputs unbox again.
def _np_array_programs():
    return {
        "scalars": (lambda x: np.array([x, 2 * x, x**2]), 3.0),
        "matrix_of_elements": (
            lambda x: np.tanh(np.array([[x[0], x[1]], [x[0] * x[1], 1.0]]) @ np.array([0.5, -1.0])),
            np.array([0.3, -0.7]),
        ),
        "rows": (lambda x: np.array([x, np.sin(x)]).T @ np.ones(2), np.array([0.1, 0.2, 0.3])),
        "summed_by_tg": (lambda x: tg.sum(np.array([x, 2 * x])) * x, 1.5),
        "asarray_of_small": (lambda x: np.asarray(x).sum() * x[0], np.array([1.0, 2.0])),
    }


@pytest.mark.parametrize("name", list(_np_array_programs()))
def test_np_array_of_traced_values(name):
    fn, x = _np_array_programs()[name]
    interp = dict(backend="interpret")
    out = tg.compile(fn, **interp)(x)
    np.testing.assert_allclose(out, fn(x), rtol=1e-12)
    jac = tg.jacobian(fn, **interp)(x)
    eps = 1e-6
    xs = np.asarray(x, float)
    cols = []
    for i in range(xs.size):
        d = np.zeros_like(xs)
        d.flat[i] = eps
        cols.append(
            (
                np.asarray(fn(xs + d if xs.ndim else float(xs + d)))
                - np.asarray(fn(xs - d if xs.ndim else float(xs - d)))
            )
            / (2 * eps)
        )
    expected = np.stack(cols, axis=-1).reshape(np.shape(jac))
    np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-8)


def test_np_array_of_traced_values_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.array([0.3, -0.7])
    ours = tg.grad(
        lambda x: np.sum(np.tanh(np.array([[x[0], x[1]], [x[1] * x[0], 1.0]]) @ np.ones((2, 2)))),
        backend="interpret",
    )(x)
    theirs = jax.grad(
        lambda x: jnp.sum(
            jnp.tanh(jnp.array([[x[0], x[1]], [x[1] * x[0], 1.0]]) @ jnp.ones((2, 2)))
        )
    )(x)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-6)
