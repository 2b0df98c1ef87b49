"""Tuples and lists are pytrees at a transform's boundary, as in JAX and HIPS autograd
(issue 26): a tuple or list of Python floats is a structure, never one array; an
np.ndarray stays one leaf.

Each case checks the structure exactly (tuple vs list vs array, nesting) and the
values, against hand-derived values and, where installed, against jax and autograd.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import tracegrad as tg

INTERP = {"backend": "interpret"}


def assert_same_tree(got, want, rtol=1e-12, atol=1e-12):
    """Same nesting of tuples/lists/dicts (types included), leaves close."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (got, want)
        for k in want:
            assert_same_tree(got[k], want[k], rtol, atol)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            assert_same_tree(g, w, rtol, atol)
    else:
        assert not isinstance(got, (tuple, list, dict)), (got, want)
        assert np.shape(got) == np.shape(want), (got, want)
        np.testing.assert_allclose(
            np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol
        )


def _as_numpy_tree(tree):
    if isinstance(tree, dict):
        return {k: _as_numpy_tree(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_as_numpy_tree(v) for v in tree)
    return np.asarray(tree)


@pytest.fixture
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


# ------------------------------------------------------------------ grad, value_and_grad
def test_grad_of_a_tuple_of_floats_is_a_tuple():
    g = tg.grad(lambda t: t[0] * t[1], **INTERP)((0.4, 0.5))
    assert_same_tree(g, (0.5, 0.4))


def test_grad_of_a_list_of_floats_is_a_list():
    g = tg.grad(lambda t: t[0] * t[1] ** 2, **INTERP)([0.4, 0.5])
    assert_same_tree(g, [0.25, 0.4])


def test_grad_matches_jax_and_autograd_structure(jax):
    autograd = pytest.importorskip("autograd")
    f = lambda t: t[0] * t[1] ** 2
    ours = tg.grad(f, **INTERP)((0.4, 0.5))
    assert_same_tree(ours, _as_numpy_tree(jax.grad(f)((0.4, 0.5))))
    assert_same_tree(ours, autograd.grad(f)((0.4, 0.5)))


def test_ndarray_stays_one_leaf():
    g = tg.grad(lambda t: t[0] * t[1], **INTERP)(np.array([0.4, 0.5]))
    assert isinstance(g, np.ndarray)
    np.testing.assert_array_equal(g, [0.5, 0.4])


def test_value_and_grad_nested_containers():
    def f(p):
        (a, b), c = p
        return a * b + c[0] ** 2 + np.sum(c[1])

    value, g = tg.value_and_grad(f, **INTERP)(((2.0, 3.0), [4.0, np.ones(2)]))
    assert float(value) == 2.0 * 3.0 + 16.0 + 2.0
    assert_same_tree(g, ((3.0, 2.0), [8.0, np.ones(2)]))


def test_namedtuple_gradient_keeps_its_class():
    Point = namedtuple("Point", ["x", "y"])
    g = tg.grad(lambda p: p.x * p.y**2, **INTERP)(Point(2.0, 3.0))
    assert type(g) is Point
    assert (float(g.x), float(g.y)) == (9.0, 12.0)


def test_grad_keeps_a_bool_static_in_every_transform():
    """jacfwd used to trace a Python bool argument that grad and jacrev keep static."""

    def f(x, square):
        return x**2 if square else x**3

    x = np.array([1.0, 2.0])
    for flag, want in ((True, np.diag(2 * x)), (False, np.diag(3 * x**2))):
        np.testing.assert_allclose(tg.jacfwd(f, **INTERP)(x, flag), want)
        np.testing.assert_allclose(tg.jacrev(f, **INTERP)(x, flag), want)
        np.testing.assert_allclose(
            tg.grad(lambda x, s: tg.sum(f(x, s)), **INTERP)(x, flag), np.diag(want)
        )
        h = tg.hessian(lambda x, s: tg.sum(f(x, s)), **INTERP)(x, flag)
        np.testing.assert_allclose(h, np.diag(np.full(2, 2.0) if flag else 6 * x))
    both = tg.jacfwd(lambda a, s, b: a * b if s else a + b, argnums=(0, 2), **INTERP)
    assert_same_tree(both(1.0, True, np.array([2.0, 3.0])), (np.array([2.0, 3.0]), np.eye(2)))


# ------------------------------------------------------------------------- vjp, jvp
def test_vjp_of_a_tuple_primal():
    out, pullback = tg.vjp(lambda t: t[0] * t[1], (0.4, 0.5), **INTERP)
    assert float(out) == pytest.approx(0.2)
    assert_same_tree(pullback(2.0), ((1.0, 0.8),))


def test_jvp_takes_a_pair_of_tuples(jax):
    f = lambda t: (t[0] * t[1], np.sin(t[0]))
    primals, tangents = ((0.4, 0.5),), ((1.0, -2.0),)
    out, tangent = tg.jvp(f, primals, tangents, **INTERP)
    want_out, want_tangent = jax.jvp(
        lambda t: (t[0] * t[1], jax.numpy.sin(t[0])), primals, tangents
    )
    assert_same_tree(out, _as_numpy_tree(want_out))
    assert_same_tree(tangent, _as_numpy_tree(want_tangent))
    assert_same_tree(tangent, (0.5 - 0.8, np.cos(0.4)))


def test_jvp_tuple_of_floats_with_tangents_of_0d_arrays():
    """The primal a tuple of floats, its tangent a tuple of 0-d arrays (autograd's
    vspace(x).randn()): rejected as 'different structures' before."""
    out, tangent = tg.jvp(
        lambda t: t[0] * t[1], ((0.4, 0.5),), ((np.array(1.0), np.array(0.0)),), **INTERP
    )
    assert float(out) == pytest.approx(0.2) and float(tangent) == pytest.approx(0.5)


def test_jvp_structure_mismatch_is_a_clear_error():
    with pytest.raises(TypeError, match="different structures"):
        tg.jvp(lambda t: t[0] * t[1], ((0.4, 0.5),), ((1.0, 0.0, 3.0),), **INTERP)
    with pytest.raises(TypeError, match=r"the primal has \(\*, \*\), the tangent \[\*, \*\]"):
        tg.jvp(lambda t: t[0] * t[1], ((0.4, 0.5),), ([1.0, 0.0],), **INTERP)  # as jax.jvp


def test_jvp_and_linearize_pair_dict_tangents_by_key(jax):
    """A tangent dict in another key order pairs by key (it paired by position: the
    tangent of b went to a, a silently wrong derivative)."""
    f = lambda t: t["a"] * t["b"] ** 2
    primal, tangent = {"a": 1.0, "b": 2.0}, {"b": 1.0, "a": 0.0}
    _, ours = tg.jvp(f, (primal,), (tangent,), **INTERP)
    _, theirs = jax.jvp(f, (primal,), (tangent,))
    assert float(ours) == float(theirs) == 4.0
    _, f_jvp = tg.linearize(f, primal, **INTERP)
    assert float(f_jvp(tangent)) == 4.0
    _, pullback = tg.vjp(lambda t: {"x": t["a"], "y": t["b"]}, primal, **INTERP)
    assert_same_tree(pullback({"y": 1.0, "x": 0.0}), ({"a": 0.0, "b": 1.0},))


def test_linearize_of_a_list_primal():
    out, f_jvp = tg.linearize(lambda t: t[0] ** 2 * t[1], [3.0, 2.0], **INTERP)
    assert float(out) == 18.0
    assert float(f_jvp([1.0, 0.0])) == 12.0
    assert float(f_jvp([0.0, 1.0])) == 9.0


# ---------------------------------------------------- jacobian / hessian on pytrees
@pytest.mark.parametrize("jacfun", [tg.jacfwd, tg.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_on_pytrees(jacfun):
    """JAX's api_test test_jacobian_on_pytrees, with the structure checked exactly
    (JAX: assertAllClose of nested tuples)."""
    ans = jacfun(lambda x, y: (x, y), **INTERP)(0.0, 1.0)
    assert_same_tree(ans, (1.0, 0.0))
    ans = jacfun(lambda x, y: (x, y), 1, **INTERP)(0.0, 1.0)
    assert_same_tree(ans, (0.0, 1.0))
    ans = jacfun(lambda x, y: (x, y), (0, 1), **INTERP)(0.0, 1.0)
    assert_same_tree(ans, ((1.0, 0.0), (0.0, 1.0)))
    ans = jacfun(lambda x: x[:2], **INTERP)((1.0, 2.0, 3.0))
    assert_same_tree(ans, ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)))
    R = np.random.RandomState(0).randn
    x, y = R(2), R(3)
    ans = jacfun(lambda x, y: {"x": x, "xy": np.outer(x, y)}, **INTERP)(x, y)
    expected = {"x": np.eye(2), "xy": np.kron(np.eye(2), y[:, None]).reshape(2, 3, 2)}
    assert_same_tree(ans, expected)


def test_hessian_on_pytrees():
    """JAX's api_test test_hessian_on_pytrees: nested tuples, not one (2, 2, 2) array."""
    ans = tg.hessian(lambda x: tg.array(x) ** 2, **INTERP)((1.0, 2.0))
    expected = (
        (np.array([2.0, 0.0]), np.array([0.0, 0.0])),
        (np.array([0.0, 0.0]), np.array([0.0, 2.0])),
    )
    assert_same_tree(ans, expected)


def test_hessian_of_a_scalar_function_of_a_tuple_matches_autograd():
    f = lambda t: t[0] ** 2 * t[1] + t[1] ** 3
    ours = tg.hessian(f, **INTERP)((1.5, -0.5))
    assert_same_tree(ours, ((2 * -0.5, 2 * 1.5), (2 * 1.5, 6 * -0.5)))
    autograd = pytest.importorskip("autograd")
    theirs = autograd.hessian(lambda v: f((v[0], v[1])))(np.array([1.5, -0.5]))
    np.testing.assert_allclose(np.array(ours, dtype=float), theirs, rtol=1e-14)


# ------------------------------------------------------------------ vmap and compile
def test_vmap_over_a_tuple_of_arrays_and_a_static_list():
    f = lambda t, w: t[0] * w[0] + t[1] * w[1]
    xs = (np.arange(3.0), np.ones(3))
    out = tg.vmap(f, in_axes=(0, None))(xs, [2.0, 10.0])
    np.testing.assert_array_equal(out, 2 * np.arange(3.0) + 10)


def test_vmap_of_a_list_of_floats_is_jaxs_rank_error():
    with pytest.raises(ValueError, match="rank should be at least 1"):
        tg.vmap(lambda t: t[0] * t[1])([1.0, 2.0])


def test_compile_tuple_argument_is_a_structure():
    f = tg.compile(lambda t: t + t, **INTERP)  # tuple concatenation, as jax.jit
    out = f((0.4, 0.5))
    assert isinstance(out, tuple) and len(out) == 4
    np.testing.assert_array_equal(np.array(out), [0.4, 0.5, 0.4, 0.5])
    g = tg.compile(lambda x, t: x * t[0] + t[1], **INTERP)
    np.testing.assert_array_equal(g(np.ones(2), (2.0, np.array([1.0, 3.0]))), [3.0, 5.0])


def test_jvp_mismatched_arguments():
    """JAX's api_test test_jvp_mismatched_arguments, each case a TypeError (JAX's
    different-shapes case is a ValueError there; tracegrad's is a TypeError)."""
    with pytest.raises(TypeError, match="1 primals but 0 tangents"):
        tg.jvp(lambda x, y: x * y, (np.float32(2),), (), **INTERP)
    with pytest.raises(TypeError, match="dtypes must be equal"):
        tg.jvp(lambda x: -x, (np.float16(2),), (np.float32(4),), **INTERP)
    with pytest.raises(TypeError, match="shape"):
        tg.jvp(lambda x: x + 1, (np.array([1.0, 2.0, 3.0]),), (np.array([1.0, 2, 3, 4]),))
    # a Python number tangent takes its primal's dtype (JAX's weak type)
    _, t = tg.jvp(lambda x: -x, (np.float32(2),), (1.0,), **INTERP)
    assert t.dtype == np.float32 and float(t) == -1.0


def test_jit_with_many_args_works():
    """JAX's test_jit_with_many_args_works: a list of 500 numbers is a pytree."""
    f = tg.jit(lambda args_list: sum(args_list), **INTERP)
    assert f(list(range(500))) == sum(range(500))
    g = tg.grad(lambda xs: sum(x * x for x in xs), **INTERP)
    grads = g([float(v) for v in range(50)])
    assert isinstance(grads, list) and [float(v) for v in grads] == [2.0 * v for v in range(50)]


def test_retrace_warning_names_numbers_inside_a_tuple():
    f = tg.compile(lambda x, t: x * t[0], **INTERP)
    with pytest.warns(RuntimeWarning, match="a tuple or list is a pytree whose numbers are static"):
        for k in range(10):
            f(np.ones(2), (float(k), 2.0))
