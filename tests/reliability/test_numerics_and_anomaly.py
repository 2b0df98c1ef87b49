"""Numerics at +-1e4 in every mode, the `where` trap, anomaly mode and check_finite.

Modes: eager (PyTorch's API: nn.functional, torch.logsumexp, torch.sigmoid),
compiled through the interpreter, and compiled through Numba kernels (one
kernel per dtype: all five functions are summed, each on its own input, so
each gets its own gradient). References are exact float64 formulas
(scipy.special), not tracegrad.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import tracegrad as tg
import tracegrad.eager as E
from tracegrad.compiler import NonFiniteError

F = E.nn.functional
HERE = "test_numerics_and_anomaly.py"

# Logits mixing +-1e4 with ordinary values, rows that tie at the top, and a row of -1e4.
LOGITS = np.array(
    [
        [1e4, -1e4, 0.0, 1.0],
        [-1e4, 1e4, 1e4, -3.0],
        [-1e4, -1e4, -1e4, -1e4],
        [2.0, -1e4, 1e4 - 1.0, 1e4],
    ]
)
TARGETS = np.array([0, 2, 3, 1])
W = np.array(
    [[1.0, 2.0, -1.0, 0.5], [0.3, -0.7, 1.5, 2.0], [1.0, 1.0, -2.0, 0.25], [-1.0, 0.5, 0.5, 3.0]]
)  # weights: distinct gradients


def reference():
    """Exact values and gradients (float64) of each objective."""
    s = special.softmax(LOGITS, axis=1)
    ls = special.log_softmax(LOGITS, axis=1)
    lse = special.logsumexp(LOGITS, axis=1)
    sig = special.expit(LOGITS)
    onehot = np.eye(4)[TARGETS]
    n = len(TARGETS)
    return {
        "softmax": (np.sum(W * s), s * (W - np.sum(W * s, axis=1, keepdims=True))),
        "log_softmax": (np.sum(W * ls), W - s * np.sum(W, axis=1, keepdims=True)),
        "logsumexp": (np.sum(W[:, 0] * lse), W[:, :1] * s),
        "sigmoid": (np.sum(W * sig), W * sig * (1 - sig)),
        "cross_entropy": (-np.mean(ls[np.arange(n), TARGETS]), (s - onehot) / n),
    }


NAMES = ["softmax", "log_softmax", "logsumexp", "sigmoid", "cross_entropy"]


def compiled_objectives(xs, w, targets):
    """The five objectives with tracegrad's NumPy-named ops (traced or eager)."""
    a, b, c, d, e = xs
    ce = -tg.mean(tg.take_along_axis(tg.log_softmax(e, axis=1), targets[:, None], axis=1))
    return [
        tg.sum(w * tg.softmax(a, axis=1)),
        tg.sum(w * tg.log_softmax(b, axis=1)),
        tg.sum(w[:, 0] * tg.logsumexp(c, axis=1)),
        tg.sum(w * tg.sigmoid(d)),
        ce,
    ]


def compiled_total(a, b, c, d, e, w, targets):
    parts = compiled_objectives((a, b, c, d, e), w, targets)
    return parts[0] + parts[1] + parts[2] + parts[3] + parts[4], tuple(parts)


def eager_objective(name, x, w):
    if name == "softmax":
        return (w * F.softmax(x, dim=1)).sum()
    if name == "log_softmax":
        return (w * F.log_softmax(x, dim=1)).sum()
    if name == "logsumexp":
        return (w[:, 0] * E.logsumexp(x, dim=1)).sum()
    if name == "sigmoid":
        return (w * E.sigmoid(x)).sum()
    return F.cross_entropy(x, E.tensor(TARGETS))


# float32 at |x| = 1e4: one ulp of the input is ~1e-3, so a backward-stable result
# may differ from the exact one by |x| * eps32 * |w| ~ 4e-3 (PyTorch's rules do too).
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-3, atol=4e-3)}


def _check(name, dtype, value, grad):
    ref_value, ref_grad = reference()[name]
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad)), (name, value, grad)
    assert np.asarray(grad).dtype == dtype
    np.testing.assert_allclose(value, ref_value, **TOL[dtype], err_msg=f"{name} value")
    np.testing.assert_allclose(grad, ref_grad, **TOL[dtype], err_msg=f"{name} gradient")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_eager_finite_and_exact_at_1e4(name, dtype):
    x = E.tensor(LOGITS.astype(dtype), requires_grad=True)
    out = eager_objective(name, x, E.tensor(W.astype(dtype)))
    out.backward()
    _check(name, dtype, out.item(), x.grad.numpy())


@pytest.mark.parametrize("backend", ["interpret", "numba"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_finite_and_exact_at_1e4(backend, dtype):
    xs = [LOGITS.astype(dtype)] * 5
    f = tg.value_and_grad(compiled_total, argnums=(0, 1, 2, 3, 4), has_aux=True, backend=backend)
    (_, parts), grads = f(*xs, W.astype(dtype), TARGETS)
    for name, value, grad in zip(NAMES, parts, grads, strict=True):
        _check(name, dtype, value, grad)


# ------------------------------------------------------------------ the where trap


def where_trap(x):
    return tg.sum(tg.where(x > 0, tg.sqrt(x), 0.0))


def where_safe(x):
    # make the untaken branch harmless, not just unselected
    return tg.sum(tg.where(x > 0, tg.sqrt(tg.where(x > 0, x, 1.0)), 0.0))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mode", ["eager", "interpret", "numba"])
def test_where_trap_gives_nan_and_the_safe_idiom_does_not(mode):
    """sqrt'(x) at x <= 0 is inf or nan; where() multiplies it by a zero cotangent,
    and 0 * inf = nan. The value is right, the gradient is NaN: guard the input."""
    x = np.array([-1.0, 0.0, 4.0])
    grads = {}
    for name, fn in (("trap", where_trap), ("safe", where_safe)):
        if mode == "eager":
            t = E.tensor(x, requires_grad=True)
            fn(t).backward()
            grads[name] = t.grad.numpy()
        else:
            grads[name] = tg.grad(fn, backend=mode)(x)
    assert np.isnan(grads["trap"][:2]).all() and grads["trap"][2] == 0.25
    np.testing.assert_array_equal(grads["safe"], [0.0, 0.0, 0.25])


# -------------------------------------------------------------------- anomaly mode


def _forward_with_a_log(x):
    return E.log(x * 0.0 + x)  # the op anomaly mode must point at


def test_anomaly_names_the_first_bad_node_and_its_forward_line_in_a_deep_graph():
    x = E.tensor([0.0, 1.0], requires_grad=True)
    with E.detect_anomaly():
        y = (_forward_with_a_log(x).exp() * 3.0).sum()
        with pytest.raises(RuntimeError) as info:
            y.backward()
    text = str(info.value)
    # ExpBackward0 and MulBackward0 run first and are finite; LogBackward0 gives
    # 0 * (1 / 0) = nan (exp(log 0) = 0 zeroes the incoming gradient)
    assert "Function 'LogBackward0' returned nan values in its 0th output." in text
    assert "return E.log(x * 0.0 + x)  # the op anomaly mode must point at" in text
    assert HERE in text


def test_anomaly_decorator_form_and_nan_through_softmax():
    @E.detect_anomaly()
    def step(x):
        p = F.softmax(x, dim=0)  # p[1] underflows to exactly 0
        loss = E.log(p).sum()  # log(0) = -inf: the backward divides by 0
        loss.backward()

    x = E.tensor([1e4, -1e4], requires_grad=True)
    with pytest.raises(RuntimeError, match="'LogBackward0' returned (nan|inf) values") as info:
        step(x)
    assert "loss = E.log(p).sum()" in str(info.value)


def test_without_anomaly_mode_nan_gradients_pass_silently_as_in_pytorch():
    x = E.tensor([0.0, 1.0], requires_grad=True)
    E.log(x).sum().backward()
    assert np.isinf(x.grad.numpy()[0])


def test_regression_anomaly_mode_keeps_the_forward_trace_of_a_compiled_call():
    """CompiledFunctionBackward was made without the forward traceback, so anomaly
    mode said 'recorded outside detect_anomaly()' although it was not."""
    step = tg.compile(lambda a: tg.sqrt(a) * 2.0, backend="interpret")
    x = E.tensor([0.0, 1.0], requires_grad=True)
    with E.detect_anomaly():
        y = step(x)  # compiled forward: the line the error shows
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    text = str(info.value)
    assert "CompiledFunctionBackward" in text and "inf values" in text
    assert "y = step(x)  # compiled forward: the line the error shows" in text


# -------------------------------------------------------------------- check_finite


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_check_finite_on_a_forward_kernel_names_output_node_and_line():
    f = tg.compile(lambda a: tg.log(a) * 2.0, check_finite=True)
    np.testing.assert_allclose(f(np.array([1.0, np.e])), [0.0, 2.0])
    with pytest.raises(NonFiniteError) as info:
        f(np.array([0.0, 1.0]))
    text = str(info.value)
    assert "output 0 contains Inf" in text and "log" in text and HERE in text
    assert isinstance(info.value, FloatingPointError)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_check_finite_finds_the_where_trap_in_the_gradient():
    g = tg.grad(where_trap, check_finite=True)
    with pytest.raises(NonFiniteError, match=r"gradient for 'x' contains NaN.*sqrt") as info:
        g(np.array([-1.0, 4.0]))
    assert "test_numerics_and_anomaly.py" in str(info.value)
    np.testing.assert_array_equal(
        tg.grad(where_safe, check_finite=True)(np.array([-1.0, 4.0])), [0.0, 0.25]
    )


def test_check_finite_off_returns_the_non_finite_values():
    f = tg.compile(lambda a: tg.log(a) * 2.0, check_finite=False)
    with np.errstate(divide="ignore"):
        out = f(np.array([0.0, 1.0]))
    assert out[0] == -np.inf and out[1] == 0.0
