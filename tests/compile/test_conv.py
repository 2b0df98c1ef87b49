"""tg.conv2d / tg.max_pool2d / tg.avg_pool2d / tg.cross_entropy (tracegrad/ops/nn.py):
values and gradients of the compiled functions against PyTorch's
torch.nn.functional, JAX's lax.conv_general_dilated / lax.reduce_window and float64
central differences, grad of grad, the same ops on eager tensors, and bad input.

Each case is compiled once (module-level cache) and shared by every check of it.
"""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pytest
from compile_helpers import numeric_grad

import tracegrad as tg
import tracegrad.eager as te
from tracegrad.ops import nn as tg_nn
from tracegrad.ops.core import DTypeError, ShapeError

# (name, x shape, w shape, stride, padding, dilation, groups, with bias)
CONV_CASES = [
    ("plain", (2, 3, 6, 5), (4, 3, 3, 3), 1, 0, 1, 1, True),
    ("stride_pad_dilation", (2, 2, 8, 7), (3, 2, 2, 3), (1, 2), (1, 0), (2, 1), 1, False),
    ("groups2_same", (1, 4, 5, 5), (6, 2, 3, 3), 1, "same", 1, 2, True),
    ("pad1_no_bias", (2, 2, 5, 6), (3, 2, 3, 3), 1, 1, 1, 1, False),
    ("stride2_pad2", (1, 3, 7, 6), (2, 3, 3, 2), 2, 2, 1, 1, True),
]
# (name, x shape, kernel, stride, padding, dilation)
POOL_CASES = [
    ("k2", (2, 3, 6, 8), 2, None, 0, 1),
    ("k3_s2_pad1", (1, 2, 7, 7), 3, 2, 1, 1),
    ("rect_overlap", (2, 2, 5, 7), (2, 3), (1, 2), (1, 1), 1),
    ("dilated", (1, 2, 7, 6), 2, 1, 0, 2),
]
# Each case costs a Numba compile (~1.5 s): the default run keeps the first ones
QUICK_CONV, QUICK_POOL = 3, 2


def _params(cases, quick: int):
    return [
        pytest.param(c[0], marks=() if i < quick else pytest.mark.slow) for i, c in enumerate(cases)
    ]


CONV_IDS = _params(CONV_CASES, QUICK_CONV)
POOL_IDS = _params(POOL_CASES, QUICK_POOL)
CONV = {c[0]: c[1:] for c in CONV_CASES}
POOL = {c[0]: c[1:] for c in POOL_CASES}


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


def _pad_arg(padding):
    return padding if isinstance(padding, (str, int)) else tuple(padding)


def _conv_inputs(name: str):
    """Inputs of a conv case (float64): [x, w] or [x, w, b], and a fixed cotangent."""
    xs, ws, stride, padding, dilation, groups, bias = CONV[name]
    rng = _rng(name)
    inputs = [rng.standard_normal(xs), rng.standard_normal(ws)]
    if bias:
        inputs.append(rng.standard_normal(ws[0]))
    b = inputs[2] if bias else None
    cot = rng.standard_normal(tg.conv2d(*inputs[:2], b, stride, padding, dilation, groups).shape)
    return inputs, cot


def _conv_loss(name: str, cot: np.ndarray):
    """sum(conv2d(x, w, b) * cot) for one case, on arrays, eager tensors or tracers."""
    _, _, stride, padding, dilation, groups, _ = CONV[name]

    def loss(x, w, b=None):
        return tg.sum(tg.conv2d(x, w, b, stride, padding, dilation, groups) * cot)

    return loss


@functools.cache
def conv_case(name: str) -> dict:
    """A conv case compiled once: value and gradients of sum(conv2d(...) * cot).
    (One kernel per case: bundling the cases into one graph compiled slower.)"""
    _, _, stride, padding, dilation, groups, _ = CONV[name]
    inputs, cot = _conv_inputs(name)
    loss = _conv_loss(name, cot)
    value, grads = tg.value_and_grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    return dict(
        inputs=inputs,
        x=inputs[0],
        w=inputs[1],
        b=inputs[2] if len(inputs) > 2 else None,
        cot=cot,
        loss=loss,
        value=value,
        grads=list(grads),
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )


def _tie_input() -> np.ndarray:
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = x[0, 0, 1, 0] = 2.0  # a tie at the maximum, in the first window
    return x


def _tie_loss(x):
    return tg.sum(tg.max_pool2d(x, 2) * np.arange(1.0, 5.0).reshape(2, 2))


def _avg_pool_cross_entropy(x, w):
    pooled = tg.avg_pool2d(x, 3, stride=2, padding=1)  # zero padding counted
    return tg.cross_entropy(tg.reshape(pooled, (2, -1)) @ w, np.array([2, 0]))


@functools.cache
def pool_case(name: str) -> dict:
    """A max-pool case on a tie-free input, compiled once, or the "tie" case, or the
    "avg_ce" case (avg_pool2d + cross_entropy)."""
    cot = None
    if name == "tie":
        inputs, loss = [_tie_input()], _tie_loss
    elif name == "avg_ce":
        rng = np.random.default_rng(7)
        inputs = [rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((27, 4))]
        loss = _avg_pool_cross_entropy
    else:
        xs, kernel, stride, padding, dilation = POOL[name]
        rng = _rng(name)
        x = rng.permutation(np.prod(xs)).reshape(xs) / 7.0 - 3.0  # distinct values: no ties
        cot = rng.standard_normal(tg.max_pool2d(x, kernel, stride, padding, dilation).shape)

        def loss(x):
            return tg.sum(tg.max_pool2d(x, kernel, stride, padding, dilation) * cot)

        inputs = [x]
    value, grads = tg.value_and_grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    c = dict(
        inputs=inputs,
        x=inputs[0],
        loss=loss,
        value=value,
        grads=list(grads),
        grad=grads[0],
        cot=cot,
    )
    if name in POOL:
        c["kernel"], c["stride"], c["padding"], c["dilation"] = POOL[name][1:]
    return c


# ------------------------------------------------------------------ PyTorch


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _torch_conv_grads(torch, c):
    tx, tw = torch.tensor(c["x"], requires_grad=True), torch.tensor(c["w"], requires_grad=True)
    tb = None if c["b"] is None else torch.tensor(c["b"], requires_grad=True)
    out = torch.nn.functional.conv2d(
        tx, tw, tb, c["stride"], _pad_arg(c["padding"]), c["dilation"], c["groups"]
    )
    loss = (out * torch.tensor(c["cot"])).sum()
    loss.backward()
    grads = [tx.grad.numpy(), tw.grad.numpy()] + ([] if tb is None else [tb.grad.numpy()])
    return out.detach().numpy(), loss.item(), grads


@pytest.mark.parametrize("name", CONV_IDS)
def test_conv2d_matches_torch(name, torch):
    c = conv_case(name)
    out, value, grads = _torch_conv_grads(torch, c)
    np.testing.assert_allclose(
        tg.conv2d(c["x"], c["w"], c["b"], c["stride"], c["padding"], c["dilation"], c["groups"]),
        out,
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_allclose(c["value"], value, rtol=1e-12)
    assert len(c["grads"]) == len(grads)
    for ours, theirs in zip(c["grads"], grads, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", POOL_IDS)
def test_max_pool2d_matches_torch(name, torch):
    c = pool_case(name)
    tx = torch.tensor(c["x"], requires_grad=True)
    out = torch.nn.functional.max_pool2d(tx, c["kernel"], c["stride"], c["padding"], c["dilation"])
    (out * torch.tensor(c["cot"])).sum().backward()
    np.testing.assert_array_equal(
        tg.max_pool2d(c["x"], c["kernel"], c["stride"], c["padding"], c["dilation"]),
        out.detach().numpy(),
    )
    np.testing.assert_allclose(c["grad"], tx.grad.numpy(), rtol=1e-12)


def test_max_pool2d_ties_send_the_gradient_to_the_first_maximum(torch):
    """ReLU before a pool makes all-zero windows common: PyTorch gives the whole
    gradient to the first maximum of a window (NumPy's argmax order), not an even split."""
    (grad,) = pool_case("tie")["grads"]
    tx = torch.tensor(_tie_input(), requires_grad=True)
    (torch.nn.functional.max_pool2d(tx, 2) * torch.arange(1.0, 5.0).reshape(2, 2)).sum().backward()
    np.testing.assert_array_equal(grad, tx.grad.numpy())
    assert grad[0, 0, 1, 0] == 1.0 and grad[0, 0, 1, 1] == 0.0  # the first of the tie
    assert grad[0, 0, 0, 2] == 2.0 and grad.sum() == 10.0  # one element per window


def test_avg_pool2d_and_cross_entropy_match_torch(torch):
    c = pool_case("avg_ce")
    (x, w), (gx, gw) = c["inputs"], c["grads"]
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    F = torch.nn.functional
    ref = F.cross_entropy(F.avg_pool2d(tx, 3, 2, 1).reshape(2, -1) @ tw, torch.tensor([2, 0]))
    ref.backward()
    np.testing.assert_allclose(c["value"], ref.item(), rtol=1e-12)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-10, atol=1e-13)
    rng = np.random.default_rng(8)
    logits, y = rng.standard_normal((5, 3)), np.array([0, 2, 1, 1, 0])
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_allclose(
            tg.cross_entropy(logits, y, reduction),
            F.cross_entropy(torch.tensor(logits), torch.tensor(y), reduction=reduction).numpy(),
            rtol=1e-12,
        )


def test_avg_pool2d_and_cross_entropy_gradients_match_finite_differences():
    c = pool_case("avg_ce")
    for k, grad in enumerate(c["grads"]):
        np.testing.assert_allclose(
            grad,
            numeric_grad(c["loss"], c["inputs"], k),
            rtol=1e-6,
            atol=1e-8,
            err_msg=f"argument {k}",
        )


# ---------------------------------------------------------------------- JAX


@pytest.fixture(scope="module")
def jax_x64():
    jax = pytest.importorskip("jax")
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


def _lax_padding(padding, w_shape, dilation):
    if padding == "same":  # PyTorch's split: the extra row/column goes after
        total = [d * (k - 1) for k, d in zip(w_shape[2:], dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in total]
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    return [(ph, ph), (pw, pw)]


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("name", CONV_IDS)
def test_conv2d_matches_jax_conv_general_dilated(name, jax_x64):
    lax, jnp = jax_x64.lax, jax_x64.numpy
    c = conv_case(name)
    dilation = _pair(c["dilation"])

    def loss(x, w, b):
        out = lax.conv_general_dilated(
            x,
            w,
            window_strides=_pair(c["stride"]),
            padding=_lax_padding(c["padding"], c["w"].shape, dilation),
            rhs_dilation=dilation,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            feature_group_count=c["groups"],
        )
        if b is not None:
            out = out + b[:, None, None]
        return jnp.sum(out * c["cot"])

    argnums = (0, 1, 2) if c["b"] is not None else (0, 1)
    value, grads = jax_x64.value_and_grad(loss, argnums=argnums)(c["x"], c["w"], c["b"])
    np.testing.assert_allclose(c["value"], float(value), rtol=1e-12)
    for ours, theirs in zip(c["grads"], grads, strict=True):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", POOL_IDS)
def test_max_pool2d_matches_jax_reduce_window(name, jax_x64):
    lax, jnp = jax_x64.lax, jax_x64.numpy
    c = pool_case(name)
    kernel = _pair(c["kernel"])
    stride = kernel if c["stride"] is None else _pair(c["stride"])
    ph, pw = _pair(c["padding"])

    def loss(x):
        out = lax.reduce_window(
            x,
            -jnp.inf,
            lax.max,
            (1, 1) + kernel,
            (1, 1) + stride,
            ((0, 0), (0, 0), (ph, ph), (pw, pw)),
            window_dilation=(1, 1) + _pair(c["dilation"]),
        )
        return jnp.sum(out * c["cot"])

    if _pair(c["dilation"]) != (1, 1):  # JAX has no VJP for a dilated max pool: values only
        np.testing.assert_allclose(c["value"], float(loss(c["x"])), rtol=1e-12)
        return
    value, grad = jax_x64.value_and_grad(loss)(c["x"])
    np.testing.assert_allclose(c["value"], float(value), rtol=1e-12)
    np.testing.assert_allclose(c["grad"], np.asarray(grad), rtol=1e-12)


# ------------------------------------------------- finite differences (always run)


@pytest.mark.parametrize("name", CONV_IDS)
def test_conv2d_gradients_match_finite_differences(name):
    c = conv_case(name)
    for k, grad in enumerate(c["grads"]):
        np.testing.assert_allclose(
            grad,
            numeric_grad(c["loss"], c["inputs"], k),
            rtol=1e-6,
            atol=1e-7,
            err_msg=f"argument {k}",
        )


@pytest.mark.parametrize("name", POOL_IDS)
def test_max_pool2d_gradient_matches_finite_differences(name):
    c = pool_case(name)  # distinct inputs 1/7 apart: a 1e-6 step never changes a window's max
    np.testing.assert_allclose(
        c["grad"], numeric_grad(c["loss"], [c["x"]], 0), rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(c["value"], c["loss"](c["x"]), rtol=1e-12)  # compiled == NumPy


def _small_net(x, w, v):
    """conv -> tanh -> max pool -> contraction: smooth enough for second derivatives."""
    h = tg.max_pool2d(tg.tanh(tg.conv2d(x, w, stride=1, padding=1)), 2)
    return tg.sum(h * v)


@functools.cache
def second_order_case():
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((2, 2, 3, 3))
    v = rng.standard_normal((1, 2, 2, 2))

    def grad_norm(x, w):  # |d net / d x|^2: its gradient in w is a mixed second derivative
        # traced into the outer graph; called on arrays (finite differences) it is run by
        # the IR interpreter, which saves a Numba compile
        return tg.sum(tg.grad(_small_net, backend="interpret")(x, w, v) ** 2)

    return x, w, v, grad_norm, tg.grad(grad_norm, argnums=1)(x, w)


def test_grad_of_grad_matches_finite_differences():
    x, w, v, grad_norm, gw = second_order_case()
    np.testing.assert_allclose(gw, numeric_grad(grad_norm, [x, w], 1), rtol=1e-6, atol=1e-7)


def test_grad_of_grad_matches_torch_double_backward(torch):
    x, w, v, _, gw = second_order_case()
    F = torch.nn.functional
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    net = (F.max_pool2d(torch.tanh(F.conv2d(tx, tw, padding=1)), 2) * torch.tensor(v)).sum()
    (dx,) = torch.autograd.grad(net, tx, create_graph=True)
    (dw,) = torch.autograd.grad((dx**2).sum(), tw)
    np.testing.assert_allclose(gw, dw.numpy(), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------- eager tensors


def test_tg_conv2d_on_eager_tensors_matches_eager_functional():
    """tg.conv2d / tg.max_pool2d record on eager tensors; eager's own F.conv2d /
    F.max_pool2d (a separate implementation) give the same values and gradients."""
    rng = np.random.default_rng(5)
    x, w, b = (
        rng.standard_normal((2, 2, 7, 6)),
        rng.standard_normal((3, 2, 3, 3)),
        rng.standard_normal(3),
    )
    F = te.nn.functional
    results = []
    for conv, pool in ((tg.conv2d, tg.max_pool2d), (F.conv2d, F.max_pool2d)):
        tx, tw, tb = (te.tensor(a, requires_grad=True) for a in (x, w, b))
        out = pool(te.tanh(conv(tx, tw, tb, stride=(2, 1), padding=1)), 2, stride=1)
        (out * out).sum().backward()
        results.append([out.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()])
    for ours, eager in zip(*results, strict=True):
        np.testing.assert_allclose(ours, eager, rtol=1e-12, atol=1e-13)


@pytest.mark.slow  # one more cold compile; tests/examples' test_cnn_classifier_compiled
# checks compiled against eager losses step by step on the example's model
def test_compiled_loss_equals_eager_loss_in_float32():
    """The CNN shape of examples/cnn_classifier.py, float32: compiled value_and_grad
    against the same function run on eager tensors."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    labels = np.array([0, 2, 1, 1])
    w = (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32)
    b = np.zeros(8, np.float32)
    v = (rng.standard_normal((8 * 4 * 4, 3)) * 0.1).astype(np.float32)

    def loss(w, b, v, x, labels):
        h = tg.max_pool2d(tg.relu(tg.conv2d(x, w, b, padding=1)), 2)
        return tg.cross_entropy(tg.reshape(h, (x.shape[0], -1)) @ v, labels)

    value, grads = tg.value_and_grad(loss, argnums=(0, 1, 2))(w, b, v, x, labels)
    params = [te.tensor(a, requires_grad=True) for a in (w, b, v)]
    eager = loss(*params, te.tensor(x), te.tensor(labels))
    eager.backward()
    assert np.asarray(value).dtype == np.float32
    np.testing.assert_allclose(value, eager.item(), rtol=1e-6)
    for ours, p in zip(grads, params, strict=True):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_inputs_are_not_mutated():
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((1, 1, 5, 5)), rng.standard_normal((1, 1, 3, 3))
    x0, w0 = x.copy(), w.copy()
    tg.max_pool2d(tg.conv2d(x, w, padding=1), 2, padding=1)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)


# ------------------------------------------------------------------ bad input


X = np.zeros((2, 3, 5, 5), np.float32)
W = np.zeros((4, 3, 3, 3), np.float32)


@pytest.mark.parametrize(
    "call, cls, words",
    [
        (lambda: tg.conv2d(X[0], W), ShapeError, ["conv2d", "4-d (N, C, H, W)", "f32[3,5,5]"]),
        (lambda: tg.conv2d(X, W[0]), ShapeError, ["conv2d", "weight", "f32[3,3,3]"]),
        (lambda: tg.conv2d(X, W.astype(np.float64)), DTypeError, ["same dtype", "f64[4,3,3,3]"]),
        (lambda: tg.conv2d(X.astype(np.int64), W), DTypeError, ["floating-point", "i64[2,3,5,5]"]),
        (lambda: tg.conv2d(X, W[:, :2]), ShapeError, ["groups=1", "f32[4,2,3,3]"]),
        (lambda: tg.conv2d(X, W, groups=2), ShapeError, ["groups=2"]),
        (lambda: tg.conv2d(X, W, np.zeros(3, np.float32)), ShapeError, ["bias", "(4,)", "f32[3]"]),
        (lambda: tg.conv2d(X, np.zeros((1, 3, 6, 6), np.float32)), ShapeError, ["larger", "5x5"]),
        (lambda: tg.conv2d(X, W, stride=0), ShapeError, ["stride", "at least 1"]),
        (lambda: tg.conv2d(X, W, stride=1.5), TypeError, ["stride", "1.5"]),
        (lambda: tg.conv2d(X, W, padding=-1), ShapeError, ["padding", "at least 0"]),
        (lambda: tg.conv2d(X, W, stride=2, padding="same"), ShapeError, ["same", "stride 1"]),
        (lambda: tg.conv2d(X, W, padding="full"), ValueError, ["'full'"]),
        (
            lambda: tg.max_pool2d(X, 2, padding=2),
            ShapeError,
            ["max_pool2d", "half", "f32[2,3,5,5]"],
        ),
        (lambda: tg.max_pool2d(X, 6), ShapeError, ["max_pool2d", "6x6", "larger"]),
        (lambda: tg.max_pool2d(X, (2, 2, 2)), TypeError, ["kernel_size", "pair"]),
        (
            lambda: tg.cross_entropy(np.zeros((2, 3, 1)), np.zeros(2, np.int64)),
            ShapeError,
            ["cross_entropy", "(N, C)"],
        ),
    ],
)
def test_bad_input_gets_a_clear_error(call, cls, words):
    with pytest.raises(cls) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_bad_input_while_tracing_names_the_user_line():
    with pytest.raises(ShapeError, match=r"conv2d: .*bias.*\n.*test_conv\.py"):
        tg.trace(lambda x: tg.sum(tg.conv2d(x, W, np.zeros(2, np.float32))), X)


def test_docstring_examples():
    failures, tried = doctest.testmod(tg_nn, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried >= 6 and failures == 0
