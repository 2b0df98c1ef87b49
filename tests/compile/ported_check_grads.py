"""HIPS autograd's `check_grads`, rebuilt on tracegrad's compiled transforms.

autograd's `check_grads(fun, modes=['fwd', 'rev'], order=2, argnum=0)(*args)`
compares, for random directions, the exact forward- and reverse-mode derivatives
of `fun` with respect to `args[argnum]` against central finite differences, and
then checks the same for the derivative itself (order 2). Here:

- the finite differences run `fun` on plain float64 NumPy arrays (NumPy's own
  functions, no tracegrad involved), so they are an independent oracle;
- `rev` is the dot-product test <u, J v> == <J^T u, v> with `tg.vjp`;
- `fwd` compares `tg.jvp` with the directional difference J v;
- order 2 differentiates the gradient: `tg.grad` of <fun(x), u> with respect to
  every checked argument, checked again by `rev`/`fwd` (order 1).

>>> import numpy as np
>>> check_grads(lambda x: np.sin(x) * x)(np.array([0.3, -1.2]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tracegrad as tg

EPS = 1e-6  # autograd's finite-difference step (central, float64)
RTOL = 1e-5
ATOL = 1e-6


def _leaves(tree) -> list:
    """Array leaves of nested tuples/lists/dicts, in a fixed order."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def _vdot(a_leaves: Sequence, b_leaves: Sequence) -> float:
    return float(
        sum(
            np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64))
            for a, b in zip(a_leaves, b_leaves, strict=True)
        )
    )


def _random_like(rng, x):
    """A random direction shaped like `x` (a Python float for a Python float; a tuple or
    list of them for a tuple or list: containers are pytrees, as autograd's vspaces)."""
    if isinstance(x, (tuple, list)):
        return type(x)(_random_like(rng, item) for item in x)
    if isinstance(x, dict):
        return {k: _random_like(rng, x[k]) for k in sorted(x)}
    v = rng.standard_normal(np.shape(x))
    return float(v) if isinstance(x, (float, int)) and not isinstance(x, bool) else v


def _shift(x, v, step: float):
    if isinstance(x, (tuple, list)):
        return type(x)(_shift(a, b, step) for a, b in zip(x, v, strict=True))
    if isinstance(x, dict):
        return {k: _shift(x[k], v[k], step) for k in x}
    return x + step * v if isinstance(x, float) else np.asarray(x, np.float64) + step * v


def _numeric_directional(fun: Callable, xs: tuple, vs: tuple) -> list:
    """Leaves of (fun(x + eps/2 v) - fun(x - eps/2 v)) / eps, on plain NumPy."""
    plus = _leaves(fun(*[_shift(x, v, EPS / 2) for x, v in zip(xs, vs, strict=True)]))
    minus = _leaves(fun(*[_shift(x, v, -EPS / 2) for x, v in zip(xs, vs, strict=True)]))
    return [
        (np.asarray(p, np.float64) - np.asarray(m, np.float64)) / EPS
        for p, m in zip(plus, minus, strict=True)
    ]


def _assert_close(exact: float, numeric: float, what: str) -> None:
    assert abs(exact - numeric) <= ATOL + RTOL * max(abs(exact), abs(numeric)), (
        f"{what}: exact {exact!r} vs finite differences {numeric!r} (diff {exact - numeric:.3g})"
    )


def _check_order1(
    fun: Callable, xs: tuple, modes: Sequence[str], backend: str, rng, label: str
) -> None:
    vs = tuple(_random_like(rng, x) for x in xs)
    numeric = _numeric_directional(fun, xs, vs)
    if "rev" in modes:
        out, pullback = tg.vjp(fun, *xs, backend=backend)
        out_leaves = _leaves(out)
        for got, want in zip(out_leaves, _leaves(fun(*xs)), strict=True):
            np.testing.assert_allclose(
                np.asarray(got, np.float64),
                np.asarray(want, np.float64),
                rtol=1e-9,
                atol=1e-12,
                err_msg=f"{label}: value",
            )
        us = [rng.standard_normal(np.shape(o)) for o in out_leaves]
        ct = _rebuild(out, us)
        grads = pullback(ct)
        _assert_close(_vdot(_leaves(grads), _leaves(vs)), _vdot(us, numeric), f"{label} rev (vjp)")
    if "fwd" in modes:
        _, tangent = tg.jvp(fun, xs, vs, backend=backend)
        t_leaves = _leaves(tangent)
        w = [rng.standard_normal(np.shape(t)) for t in numeric]
        _assert_close(_vdot(t_leaves, w), _vdot(numeric, w), f"{label} fwd (jvp)")


def _rebuild(template, flat: list):
    """`flat` arranged like `template` (tuples/lists/dicts of arrays)."""
    it = iter(flat)

    def build(t):
        if isinstance(t, dict):
            return {k: build(t[k]) for k in sorted(t)}
        if isinstance(t, (tuple, list)):
            return type(t)(build(item) for item in t)
        return np.asarray(next(it))  # arrays, even for float outputs (see test_vjp_*)

    return build(template)


def check_grads(
    fun: Callable,
    argnum: int | Sequence[int] = 0,
    modes: Sequence[str] = ("fwd", "rev"),
    order: int = 2,
    backend: str = "interpret",
    seed: int = 0,
) -> Callable[..., None]:
    """autograd's `check_grads(fun, modes, order)` with `argnum`, on tracegrad."""
    nums = (argnum,) if isinstance(argnum, int) else tuple(argnum)

    def check(*args: Any) -> None:
        rng = np.random.default_rng(seed)

        def of_checked(*xs):
            full = list(args)
            for k, x in zip(nums, xs, strict=True):
                full[k] = x
            return fun(*full)

        xs = tuple(args[k] for k in nums)
        _check_order1(of_checked, xs, modes, backend, rng, "order 1")
        if order >= 2:
            us = [rng.standard_normal(np.shape(o)) for o in _leaves(of_checked(*xs))]

            def projected(*xs_):
                return sum(
                    np.sum(o * u) for o, u in zip(_leaves(of_checked(*xs_)), us, strict=True)
                )

            gradient = tg.grad(projected, argnums=tuple(range(len(xs))), backend=backend)
            _check_order1(gradient, xs, modes, backend, rng, "order 2")

    return check


# ------------------------------------------------- autograd's own recursion, verbatim
# autograd.test_util.check_grads differentiates a *unary* function: with argnum=(0, 1)
# its argument is the tuple (x, v), and its order-2 checks differentiate
# `lambda x, v: make_jvp(f, x)(v)[1]` with respect to that tuple. So forward mode meets
# tuples (of floats, of arrays, nested) at the transform's boundary. `check_grads_nary`
# follows it step by step on tg.jvp / tg.vjp; check_grads above is the cheaper variant.


def _tree_map(f: Callable, *trees):
    first = trees[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_tree_map(f, *items) for items in zip(*trees, strict=True))
    if isinstance(first, dict):
        return {k: _tree_map(f, *(t[k] for t in trees)) for k in first}
    return f(*trees)


def _vspace_signature(tree):
    """autograd's vspace equality, as structure plus leaf shapes."""
    if isinstance(tree, (tuple, list)):
        return (type(tree).__name__, tuple(_vspace_signature(t) for t in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _vspace_signature(tree[k])) for k in sorted(tree)))
    return np.shape(tree)


def _inner(a, b) -> float:
    return _vdot(_leaves(a), _leaves(b))


def _scalar_close(a: float, b: float) -> bool:  # autograd's TOL = RTOL = 1e-6
    return abs(a - b) < 1e-6 or abs(a - b) / abs(a + b) < 1e-6


def _numerical_jvp(f: Callable, x, v):
    plus = f(_shift_tree(x, v, EPS / 2))
    minus = f(_shift_tree(x, v, -EPS / 2))
    return _tree_map(
        lambda p, m: (np.asarray(p, np.float64) - np.asarray(m, np.float64)) / EPS, plus, minus
    )


def _shift_tree(x, v, step: float):
    return _tree_map(lambda a, b: _shift(a, b, step), x, v)


def check_grads_nary(
    fun: Callable,
    argnum: int | Sequence[int] = 0,
    modes: Sequence[str] = ("fwd", "rev"),
    order: int = 2,
    backend: str = "interpret",
    seed: int = 0,
) -> Callable[..., None]:
    """autograd's `check_grads(fun, argnum, modes, order)(*args)`, recursion and all:
    the checked argument is `args[argnum]`, or the tuple of `args[i]` for a tuple
    argnum; order 2 checks `(x, v) -> jvp` and `(x, v) -> vjp` on that tuple."""
    rng = np.random.default_rng(seed)

    def check(*args: Any) -> None:
        many = not isinstance(argnum, int)

        def unary(x):
            full = list(args)
            for k, value in zip(argnum if many else (argnum,), x if many else (x,), strict=True):
                full[k] = value
            return fun(*full)

        x = tuple(args[k] for k in argnum) if many else args[argnum]
        _check_unary(unary, x, modes, order, backend, rng)

    return check


def _check_unary(f: Callable, x, modes, order: int, backend: str, rng) -> None:
    if "fwd" in modes:
        v = _random_like(rng, x)
        _, exact = tg.jvp(f, (x,), (v,), backend=backend)
        numeric = _numerical_jvp(f, x, v)
        assert _vspace_signature(exact) == _vspace_signature(numeric), (exact, numeric)
        w = _random_like(rng, numeric)
        assert _scalar_close(_inner(exact, w), _inner(numeric, w)), (
            f"jvp check failed at order {order}: {exact} vs {numeric}"
        )
        if order > 1:

            def jvp_f(x, v):
                return tg.jvp(f, (x,), (v,), backend=backend)[1]

            check_grads_nary(jvp_f, (0, 1), modes, order - 1, backend)(x, _random_like(rng, x))
    if "rev" in modes:
        y, pullback = tg.vjp(f, x, backend=backend)
        x_v, y_v = _random_like(rng, x), _random_like(rng, y)
        (vjp_y,) = pullback(_tree_map(np.asarray, y_v))
        assert _vspace_signature(vjp_y) == _vspace_signature(x), (vjp_y, x)
        exact, numeric = _inner(x_v, vjp_y), _inner(y_v, _numerical_jvp(f, x, x_v))
        assert _scalar_close(numeric, exact), (
            f"vjp check failed at order {order}: analytic {exact} vs numeric {numeric}"
        )
        if order > 1:

            def vjp_f(x, v):
                return tg.vjp(f, x, backend=backend)[1](v)[0]

            v = _random_like(rng, y)
            check_grads_nary(vjp_f, (0, 1), modes, order - 1, backend)(x, v)


def short_traceback(test: Callable) -> Callable:
    """Re-raise a test's error as one AssertionError carrying its type and text.

    pytest renders the source of every frame of a failure's traceback, also for an
    expected failure (xfail), and tracegrad's tracebacks run through large modules:
    that costs ~2 s per xfailed case, so these tests fail with a one-frame traceback.
    """
    import functools

    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except Exception as error:
            raise AssertionError(f"{type(error).__name__}: {error}") from None

    return run


def custom_sin_vjp():
    """JAX's api_test custom_vjp example: sin with a reverse rule that doubles cos."""

    @tg.custom_vjp
    def f(x):
        return np.sin(x)

    def f_fwd(x):
        return f(x), np.cos(x)

    def f_rev(cos_x, g):
        return (2 * cos_x * g,)

    f.defvjp(f_fwd, f_rev)
    return f


def custom_sin_jvp():
    """JAX's api_test custom_jvp example: sin with a tangent rule that doubles cos."""

    @tg.custom_jvp
    def f(x):
        return np.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,) = primals
        (g,) = tangents
        return f(x), 2 * np.cos(x) * g

    return f


def assert_all_close(a, b, rtol=1e-12, atol=1e-12):
    """JAX's assertAllClose over pytrees (tuples, lists, dicts)."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and sorted(a) == sorted(b), (a, b)
        for k in b:
            assert_all_close(a[k], b[k], rtol, atol)
    elif isinstance(b, (tuple, list)) and not isinstance(a, np.ndarray):  # (else: numbers)
        assert isinstance(a, (tuple, list)) and len(a) == len(b), (a, b)
        for x, y in zip(a, b, strict=True):
            assert_all_close(x, y, rtol, atol)
    else:
        np.testing.assert_allclose(
            np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol
        )
