"""HIPS autograd's tests that differed silently (issue 26), ported with their assertions.

- Values at the edges: `power` and `hypot` second derivatives at 0
  (tests/test_scalar_ops.py `test_power_arg0`, `test_power_arg1_zero`;
  tests/test_binary_ops.py `test_hypot`), `std`/`var`/`mean` of lists and tuples of
  boxes (tests/test_numpy.py).
- Forward mode on tuples and lists (autograd's `check_grads` in `fwd` mode at order 2
  differentiates `(x, v)` pairs): tests/test_tuple.py, test_list.py, test_dict.py,
  test_jacobian.py and test_wrappers.py cases whose arguments are containers of floats.

`import autograd.numpy as np` becomes plain NumPy (traced values are captured), and
`check_grads` is ported_check_grads.check_grads; where autograd is installed the values
are compared with it too.
"""

from __future__ import annotations

import numpy as np
import pytest
from ported_check_grads import check_grads, check_grads_nary

import tracegrad as tg

INTERP = {"backend": "interpret"}
SLOW = pytest.mark.slow
npr = np.random.RandomState(1)


def grad(fun, argnum=0):
    return tg.grad(fun, argnum, **INTERP)


# --------------------------------------------------------- tests/test_scalar_ops.py
def test_power_arg0():
    # the +1.'s here are to avoid regimes where numerical diffs fail
    make_fun = lambda y: lambda x: np.power(x, y)
    fun = make_fun(npr.randn() ** 2 + 1.0)
    check_grads(fun)(npr.rand() ** 2 + 1.0)

    # test y == 0. as a special case, c.f. #116
    fun = make_fun(0.0)
    assert grad(fun)(0.0) == 0.0
    assert grad(grad(fun))(0.0) == 0.0


def test_power_arg0_traced_zero_exponent():
    """The same at y == 0 when y is an argument (the non-static rule)."""
    d2 = tg.hessian(lambda x, y: np.power(x, y), argnums=0, **INTERP)(0.0, 0.0)
    assert d2 == 0.0
    assert grad(grad(lambda x, y: np.power(x, y)), 0)(0.0, 0.0) == 0.0


def test_power_arg1():
    x = npr.randn() ** 2
    fun = lambda y: np.power(x, y)
    check_grads(fun)(npr.rand() ** 2)


def test_power_arg1_zero():
    fun = lambda y: np.power(0.0, y)
    check_grads(fun)(npr.rand() ** 2)


def test_power_arg1_zero_traced_base():
    """0 ** y with the base an argument: second derivative in y is 0 for y > 0."""
    h = tg.hessian(lambda x, y: np.power(x, y), argnums=1, **INTERP)(0.0, 0.7)
    assert h == 0.0


# --------------------------------------------------------- tests/test_binary_ops.py
def _arg_pairs():
    scalar = 2.0
    vector = npr.randn(4)
    mat = npr.randn(3, 4)
    mat2 = npr.randn(1, 4)
    allargs = [scalar, vector, mat, mat2]
    for arg1 in allargs:
        for arg2 in allargs:
            yield arg1, arg2


@pytest.mark.parametrize("full", [False, pytest.param(True, marks=SLOW)], ids=["some", "all"])
def test_hypot(full):
    pairs = list(_arg_pairs())
    for arg1, arg2 in pairs if full else pairs[::5]:  # (every pair with -m slow)
        check_grads(lambda x, y: np.hypot(x, y), argnum=(0, 1), modes=["rev"])(arg1, arg2)


@pytest.mark.parametrize("point", [(0.0, 2.0), (2.0, 0.0), (-3.0, 0.0), (0.3, -0.7)])
def test_hypot_second_derivatives_at_zero_match_autograd(point):
    """d2/dx2 hypot(x, y) = y**2 / r**3: 1/2 at (0, 2) (tracegrad gave 0 before)."""
    x, y = point
    r = np.hypot(x, y)
    exact = np.array([[y * y, -x * y], [-x * y, x * x]]) / r**3
    ours = tg.hessian(lambda x, y: np.hypot(x, y), argnums=(0, 1), **INTERP)(x, y)
    np.testing.assert_allclose(np.array(ours, dtype=float), exact, rtol=1e-12, atol=1e-15)
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    for i in (0, 1):
        for j in (0, 1):
            theirs = autograd.grad(autograd.grad(anp.hypot, i), j)(x, y)
            assert ours[i][j] == pytest.approx(theirs, rel=1e-12, abs=1e-15)


def test_hypot_zero_zero_subgradient_and_no_overflow():
    g = tg.grad(lambda x, y: np.hypot(x, y), argnums=(0, 1), **INTERP)(0.0, 0.0)
    assert g == (0.0, 0.0)
    big = tg.grad(lambda x: np.hypot(x, 4e300), **INTERP)(3e300)
    assert big == pytest.approx(0.6, rel=1e-15)


# --------------------------------------------------------------- tests/test_numpy.py
def test_mean_list_of_boxes():
    assert grad(lambda x: np.mean([x, x + 2]))(0.0) == 1.0
    assert grad(lambda x: np.mean((x, x + 2)))(0.0) == 1.0


def test_std_list_of_boxes():
    # Symmetric around the mean, so grad w.r.t. x at x=0 is 0.
    assert grad(lambda x: np.std([x, x + 2]))(0.0) == 0.0
    assert grad(lambda x: np.std((x, x + 2)))(0.0) == 0.0


def test_var_list_of_boxes():
    assert grad(lambda x: np.var([x, x + 2]))(0.0) == 0.0
    assert grad(lambda x: np.var((x, x + 2)))(0.0) == 0.0


def test_std_of_one_value_has_zero_gradient_as_autograd():
    """autograd's std vjp returns 0 when it reduces one value (num_reps <= 1)."""
    assert grad(lambda x: np.std((x,)))(0.0) == 0.0
    assert grad(grad(lambda x: np.std((x,))))(0.3) == 0.0
    g = tg.grad(lambda x: np.sum(np.std(x, axis=1)), **INTERP)(npr.randn(3, 1))
    np.testing.assert_array_equal(g, np.zeros((3, 1)))
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    assert autograd.grad(lambda x: anp.std((x,)))(0.0) == 0.0


# ------------------------------------- forward mode through tuples: autograd's recursion
# autograd's check_grads checks order 2 by differentiating (x, v) -> jvp(f, x)(v) with
# respect to the tuple (x, v): forward mode on tuples of floats and arrays. These are
# the tests/test_scalar_ops.py cases run through ported_check_grads.check_grads_nary,
# which follows that recursion step by step (fwd and rev, order 2).
_r = np.random.RandomState(1)
SCALAR_CASES = {
    "test_abs": (lambda x: 3.0 * np.abs(x), (1.1,)),
    "test_absolute_neg": (lambda x: 3.0 * np.absolute(x), (-1.1,)),
    "test_sin": (lambda x: 3.0 * np.sin(x), (_r.randn(),)),
    "test_sign": (lambda x: 3.0 * np.sign(x), (1.1,)),
    "test_exp": (lambda x: 3.0 * np.exp(x), (_r.randn(),)),
    "test_log": (lambda x: 3.0 * np.log(x), (abs(_r.randn()),)),
    "test_log2": (lambda x: 3.0 * np.log2(x), (abs(_r.randn()),)),
    "test_log10": (lambda x: 3.0 * np.log10(x), (abs(_r.randn()),)),
    "test_log1p": (lambda x: 3.0 * np.log1p(x), (abs(_r.randn()),)),
    "test_expm1": (lambda x: 3.0 * np.expm1(x), (abs(_r.randn()),)),
    "test_exp2": (lambda x: 3.0 * np.exp2(x), (abs(_r.randn()),)),
    "test_neg": (lambda x: 3.0 * -x, (_r.randn(),)),
    "test_cos": (lambda x: 3.0 * np.cos(x), (_r.randn(),)),
    "test_tan": (lambda x: 3.0 * np.tan(x), (_r.randn(),)),
    "test_cosh": (lambda x: 3.0 * np.cosh(x), (_r.randn(),)),
    "test_sinh": (lambda x: 3.0 * np.sinh(x), (_r.randn(),)),
    "test_tanh": (lambda x: 3.0 * np.tanh(x), (_r.randn(),)),
    "test_arccos": (lambda x: 3.0 * np.arccos(x), (0.1,)),
    "test_arcsin": (lambda x: 3.0 * np.arcsin(x), (0.1,)),
    "test_arctan": (lambda x: 3.0 * np.arctan(x), (0.2,)),
    "test_arccosh": (lambda x: 3.0 * np.arccosh(x), (_r.randn() ** 2 + 1.2,)),
    "test_arcsinh": (lambda x: 3.0 * np.arcsinh(x), (_r.randn(),)),
    "test_arctanh": (lambda x: 3.0 * np.arctanh(x), (0.2,)),
    "test_sqrt": (lambda x: 3.0 * np.sqrt(x), (10.0 * _r.rand(),)),
    "test_power_arg0": (lambda x: np.power(x, 1.7), (_r.rand() ** 2 + 1.0,)),
    "test_power_arg1": (lambda y: np.power(0.8, y), (_r.rand() ** 2,)),
    "test_power_arg1_zero": (lambda y: np.power(0.0, y), (_r.rand() ** 2,)),
    "test_mod_arg0": (lambda x, y: np.mod(x, y), (_r.rand(), _r.rand())),
    "test_divide_arg0": (lambda x, y: np.divide(x, y), (_r.rand(), _r.rand())),
    "test_multiply_arg0": (lambda x, y: np.multiply(x, y), (_r.rand(), _r.rand())),
    "test_true_divide_arg0": (lambda x, y: np.true_divide(x, y), (_r.rand(), _r.rand())),
    "test_reciprocal": (lambda x: np.reciprocal(x), (_r.rand(),)),
    "test_negative": (lambda x: np.negative(x), (_r.rand(),)),
    "test_rad2deg": (lambda x: 3.0 * np.rad2deg(x), (10.0 * _r.rand(),)),
    "test_deg2rad": (lambda x: 3.0 * np.deg2rad(x), (10.0 * _r.rand(),)),
    "test_radians": (lambda x: 3.0 * np.radians(x), (10.0 * _r.rand(),)),
    "test_degrees": (lambda x: 3.0 * np.degrees(x), (10.0 * _r.rand(),)),
    "test_sinc": (lambda x: 3.0 * np.sinc(x), (10.0 * _r.rand(),)),
}
# a handful in the default run (one per kind of rule); all of them with -m slow
_QUICK = {"test_sin", "test_power_arg1_zero", "test_mod_arg0", "test_abs", "test_sinc"}


@pytest.mark.parametrize(
    "fun, args",
    [
        pytest.param(*SCALAR_CASES[name], id=name, marks=[] if name in _QUICK else [SLOW])
        for name in SCALAR_CASES
    ],
)
def test_scalar_ops_autograd_recursion(fun, args):
    check_grads_nary(fun)(*args)


def test_binary_argnum_tuple_is_one_tuple_argument():
    """check_grads(fun, argnum=(0, 1))(x, y): the checked argument is the tuple (x, y)
    (tests/test_dict.py::test_get and tests/test_binary_ops.py pass such pairs)."""
    check_grads_nary(lambda x, y: np.sum(x * np.sin(y)), argnum=(0, 1))(_r.randn(3), 0.4)

    def fun(d, x):
        return d.get("item_1", x) ** 2

    check_grads_nary(fun, argnum=(0, 1))({"item_1": 3.0}, 2.0)
    check_grads_nary(fun, argnum=(0, 1))({"item_2": 4.0}, 2.0)
    check_grads_nary(fun, argnum=(0, 1))({}, 2.0)


# ------------------------------------------------------ tests/test_tuple.py, test_list.py
def test_tuple_nested_higher_order():
    """test_tuple.py::test_nested_higher_order: grad of a function of a tuple (x, x),
    made into an array, inside check_grads and two more grads."""

    def outer_fun(x):
        def inner_fun(y):
            return y[0] * y[1]

        return np.sum(np.sin(np.array(grad(inner_fun)((x, x)))))

    check_grads_nary(outer_fun)(5.0)
    check_grads_nary(grad(outer_fun))(10.0)
    check_grads_nary(grad(grad(outer_fun)), order=1)(10.0)


def test_tuple_isinstance():
    def fun(x):
        assert isinstance(x, tuple)
        return x[0]

    fun((1.0, 2.0, 3.0))
    g = grad(fun)((1.0, 2.0, 3.0))
    assert isinstance(g, tuple) and [float(v) for v in g] == [1.0, 0.0, 0.0]


def test_list_slices():
    def f(x):
        s = slice(None, -1, None)
        y = x[s]
        return y[0]

    assert [float(v) for v in grad(f)([1.0, 2.0, 3.0])] == [1.0, 0.0, 0.0]

    def f(x):
        y = x[1:3]
        return y[0]

    g = grad(f)([1.0, 2.0, 3.0])
    assert isinstance(g, list) and [float(v) for v in g] == [0.0, 1.0, 0.0]


def test_list_nested_list():
    A = [[1.0], 2.0, 1.5]

    def fun(x):
        return x[1:][0]

    check_grads_nary(fun)(A)


def test_list_make_list():
    def fun(x):
        return [x, x]  # autograd: ag_list((x, x))

    check_grads_nary(fun)(1.0)


def test_list_isinstance():
    def fun(x):
        assert isinstance(x, list)
        return x[0]

    fun([1.0, 2.0, 3.0])
    assert isinstance(grad(fun)([1.0, 2.0, 3.0]), list)


def test_make_dict():
    def fun(x):
        return dict([("a", x)], b=x)  # autograd: ag_dict

    check_grads_nary(fun, modes=["rev"])(1.0)
    check_grads_nary(lambda x: {"a": x}, modes=["rev"])(1.0)


def test_results_match_autograd_on_containers():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")

    def f(t):
        (a, b), c = t
        return a * anp.sin(b) + c[0] ** 2 * c[1]

    def g(t):
        (a, b), c = t
        return a * np.sin(b) + c[0] ** 2 * c[1]

    x = ((0.3, -1.2), [0.7, 2.0])
    theirs = autograd.grad(f)(x)
    ours = grad(g)(x)
    assert type(ours) is type(theirs) and type(ours[1]) is type(theirs[1]) is list
    np.testing.assert_allclose(
        [float(v) for v in (*ours[0], *ours[1])],
        [float(v) for v in (*theirs[0], *theirs[1])],
        rtol=1e-14,
    )


def _numpy_case_params():
    """tests/test_numpy.py's cases (test_ported_autograd.NUMPY_CASES, with its xfails)."""
    import test_ported_autograd as ported

    seen: dict[str, int] = {}
    for case in ported.NUMPY_CASES:
        name, fun, args = case[:3]
        argnum = case[3] if len(case) > 3 else 0
        seen[name] = seen.get(name, 0) + 1
        case_id = name if seen[name] == 1 else f"{name}-{seen[name]}"
        reason = ported.NUMPY_XFAIL.get(case_id)
        marks = [SLOW] + ([pytest.mark.xfail(reason=reason, strict=True)] if reason else [])
        yield pytest.param(fun, args, argnum, id=case_id, marks=marks)


@pytest.mark.parametrize("fun, args, argnum", list(_numpy_case_params()))
def test_numpy_autograd_recursion(fun, args, argnum):
    """The same 103 cases through autograd's own recursion (tuple (x, v) at order 2)."""
    check_grads_nary(fun, argnum)(*args)


# ------------------------------------------------ tests/test_binary_ops.py, verbatim
def _binary_arg_pairs():
    rs = np.random.RandomState(0)
    scalar, vector, mat, mat2 = 2.0, rs.randn(4), rs.randn(3, 4), rs.randn(1, 4)
    allargs = [scalar, vector, mat, mat2]
    return [(a, b) for a in allargs for b in allargs]


def _gap(x):
    return np.sqrt(x**2 + 0.5)


def _positive(x):
    return np.abs(x) + 1.1


BINARY = {
    "test_mul": (lambda x, y: x * y, lambda a, b: (a, b)),
    "test_add": (lambda x, y: x + y, lambda a, b: (a, b)),
    "test_sub": (lambda x, y: x - y, lambda a, b: (a, b)),
    "test_div": (lambda x, y: x / y, lambda a, b: (_gap(a), _gap(b))),
    "test_mod": (lambda x, y: x % y, lambda a, b: (_gap(a), _gap(b))),
    "test_pow": (lambda x, y: x**y, lambda a, b: (_positive(a), b)),
    "test_arctan2": (np.arctan2, lambda a, b: (a, b)),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n == "test_mul" else [SLOW]) for n in BINARY]
)
def test_binary_ops_autograd_recursion(name):
    """autograd's check_grads(fun)(arg1, arg2) over every pair of a scalar, a vector
    and two matrices (test_mod skips arg1 is arg2: undefined where x == y)."""
    fun, prepare = BINARY[name]
    pairs = _binary_arg_pairs()
    for arg1, arg2 in pairs if name != "test_mul" else pairs[::3]:
        if name == "test_mod" and arg1 is arg2:
            continue
        check_grads_nary(fun)(*prepare(arg1, arg2))


# --------------------------------------------------- tests/test_wrappers.py, fwd mode
def _check_equivalent(x, y):
    """autograd's check_equivalent: same vspace (structure, shapes), close values."""
    assert np.shape(x) == np.shape(y), (x, y)
    np.testing.assert_allclose(np.asarray(x, float), np.asarray(y, float), rtol=1e-6, atol=1e-6)


def _make_jvp(fun):
    """autograd's make_jvp(fun)(x)(v) -> (fun(x), J v), on tg.jvp."""
    return lambda x: lambda v: tg.jvp(fun, (x,), (v,), **INTERP)


def _make_hvp(fun):
    """autograd's make_hvp: forward over reverse, jvp of grad."""
    return lambda x: (lambda v: tg.jvp(grad(fun), (x,), (v,), **INTERP)[1], fun(x))


def _make_ggnvp(f, g=lambda x: 1.0 / 2 * np.sum(x**2, axis=-1)):
    """autograd's make_ggnvp: v -> J^T H_g J v, as f's vjp of g's hvp of f's jvp."""

    def ggnvp_maker(x):
        f_x, f_vjp = tg.vjp(f, x, **INTERP)

        def ggnvp(v):
            jv = tg.jvp(f, (x,), (v,), **INTERP)[1]
            hjv = tg.jvp(grad(g), (f_x,), (jv,), **INTERP)[1]
            return f_vjp(hjv)[0]

        return ggnvp

    return ggnvp_maker


def _make_explicit_ggnvp(f, g=lambda x: 1.0 / 2 * np.dot(x, x)):
    def ggnvp_maker(x):
        J = tg.jacobian(f, **INTERP)(x)
        H = tg.hessian(g, **INTERP)(f(x))

        def ggnvp(v):
            return np.dot(J.T, np.dot(H, np.dot(J, v)))

        return ggnvp

    return ggnvp_maker


def test_value_and_multigrad():
    def complicated_fun(a, b, c, d, e, f=1.1, g=9.0):
        return a + np.sin(b) + np.cosh(c) + np.cos(d) + np.tan(e) + f + g

    A, B, C, D, E, F, G = 0.5, -0.3, 0.2, -1.1, 0.7, 0.6, -0.1
    dfun = tg.grad(complicated_fun, argnums=[3, 1], **INTERP)
    dfun_both = tg.value_and_grad(complicated_fun, argnums=[3, 1], **INTERP)
    _check_equivalent(
        complicated_fun(A, B, C, D, E, f=F, g=G), dfun_both(A, B, C, D, E, f=F, g=G)[0]
    )
    _check_equivalent(dfun(A, B, C, D, E, f=F, g=G), dfun_both(A, B, C, D, E, f=F, g=G)[1])


def test_hvp():
    fun = lambda a: np.sum(np.sin(a))
    a, v = npr.randn(5), npr.randn(5)
    H = tg.hessian(fun, **INTERP)(a)
    hvp = _make_hvp(fun)(a)[0]
    _check_equivalent(np.dot(H, v), hvp(v))


def test_make_jvp():
    A, x, v = npr.randn(3, 5), npr.randn(5), npr.randn(5)
    fun = lambda x: np.tanh(np.dot(A, x))
    jvp_explicit = lambda x: lambda v: np.dot(tg.jacobian(fun, **INTERP)(x), v)
    _check_equivalent(jvp_explicit(x)(v), _make_jvp(fun)(x)(v)[1])


def test_make_ggnvp():
    A, x, v = npr.randn(5, 4), npr.randn(4), npr.randn(4)
    fun = lambda x: np.dot(A, x)
    _check_equivalent(_make_ggnvp(fun)(x)(v), _make_explicit_ggnvp(fun)(x)(v))
    fun2 = lambda x: np.tanh(np.dot(A, x))
    _check_equivalent(_make_ggnvp(fun2)(x)(v), _make_explicit_ggnvp(fun2)(x)(v))


def test_make_ggnvp_nondefault_g():
    A, x, v = npr.randn(5, 4), npr.randn(4), npr.randn(4)
    g = lambda y: np.sum(2.0 * y**2 + y**4)
    fun = lambda x: np.dot(A, x)
    _check_equivalent(_make_ggnvp(fun, g)(x)(v), _make_explicit_ggnvp(fun, g)(x)(v))
    fun2 = lambda x: np.tanh(np.dot(A, x))
    _check_equivalent(_make_ggnvp(fun2, g)(x)(v), _make_explicit_ggnvp(fun2, g)(x)(v))


# ------------------------------------------------ tests/test_systematic.py, verbatim
@SLOW
@pytest.mark.parametrize("kind", ["stat", "unary", "binary", "combos"])
def test_systematic_autograd_recursion(kind, monkeypatch):
    """test_ported_autograd's systematic checks (stat_check, unary_ufunc_check,
    binary_ufunc_check with argnum (0, 1), the combo_check cases) with its check_grads
    swapped for autograd's own recursion: fwd and rev at order 2 on tuples."""
    import test_ported_autograd as ported

    monkeypatch.setattr(ported, "check_grads", check_grads_nary)
    if kind == "stat":
        for fun in ported.STATS.values():
            ported._stat_check(fun)
    elif kind == "unary":
        for fun, lims in ported.UNARY.values():
            ported._unary_ufunc_check(fun, lims)
    elif kind == "binary":
        for fun, kw in ported.BINARY.values():
            ported._binary_ufunc_check(fun, **kw)
    else:
        for case in ported.SYSTEMATIC_COMBOS:
            case()


@pytest.mark.numba_pass
def test_edge_derivatives_through_numba_kernels():
    """The hypot and pow rules above, generated as Numba kernels: same values."""
    x, y = np.array([0.0, 3.0, 3e300, -1.0]), np.array([2.0, 4.0, 4e300, 0.0])
    np.testing.assert_array_equal(tg.compile(tg.hypot, backend="numba")(x, y), np.hypot(x, y))
    h = tg.hessian(lambda x, y: tg.sum(tg.hypot(x, y)), backend="numba")(x, y)
    r = np.hypot(x, y)
    np.testing.assert_allclose(np.diag(h), (y / r) ** 2 / r, rtol=1e-12)
    d2 = tg.hessian(lambda x, y: tg.sum(x**y), backend="numba")(
        np.array([0.0, 2.0]), np.array([0.0, 2.0])
    )
    np.testing.assert_array_equal(np.diag(d2), [0.0, 2.0])
    f = tg.jit(lambda x, n: x**n, static_argnums=1, backend="numba")
    assert f(np.array([2.0]), 3)[0] == 8.0 and f(np.array([2.0]), 2)[0] == 4.0
