"""Issue 13's nn surface: each layer/function against real PyTorch (same weights: values and
gradients of inputs and parameters), and, without torch, against float64 finite
differences or hand-derived values."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tracegrad.eager as torch
import tracegrad.eager.nn.functional as F
from tracegrad.eager import nn
from tracegrad.eager.gradcheck import gradcheck

RTOL, ATOL = 1e-5, 1e-5


def arr(*shape, seed=0, lo=-1.0, hi=1.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def close(a, b, rtol=RTOL, atol=ATOL):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def copy_to_torch(tg_module, rt_module, rt):
    state = {k: rt.tensor(v.numpy()) for k, v in tg_module.state_dict().items()}
    rt_module.load_state_dict(state)


def compare_module(tg_module, rt_module, x, rt, train=True, integer_input=False, extra=()):
    """Same weights, same input, same upstream gradient: outputs, input grads and
    parameter grads agree."""
    rt = rt
    copy_to_torch(tg_module, rt_module, rt)
    tg_module.train(train)
    rt_module.train(train)
    if integer_input:
        xt, xr = torch.tensor(x), rt.tensor(x)
    else:
        xt = torch.tensor(x, requires_grad=True)
        xr = rt.tensor(x, requires_grad=True)
    out_t = tg_module(xt, *extra[:1])
    out_r = rt_module(xr, *extra[1:])
    close(out_t, out_r)
    g = arr(*out_r.shape, seed=99)
    out_t.backward(torch.tensor(g))
    out_r.backward(rt.tensor(g))
    if not integer_input:
        close(xt.grad, xr.grad)
    rt_params = dict(rt_module.named_parameters())
    for name, p in tg_module.named_parameters():
        close(p.grad, rt_params[name].grad)
    for (_, b), (_, br) in zip(tg_module.named_buffers(), rt_module.named_buffers(), strict=True):
        close(b, br)
    return out_t, out_r


# ------------------------------------------------------------------- against PyTorch


@pytest.fixture
def rt():
    return pytest.importorskip("torch")


CONV2D_CASES = [
    dict(),
    dict(padding=1),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
    dict(padding="same", dilation=2),
    dict(padding="valid", bias=False),
    dict(groups=2, padding=1),
    dict(padding=1, padding_mode="reflect"),
    dict(padding=2, padding_mode="replicate"),
    dict(padding=1, padding_mode="circular"),
]


@pytest.mark.parametrize("kw", CONV2D_CASES, ids=[str(c) for c in CONV2D_CASES])
def test_conv2d_module_matches_torch(rt, kw):
    torch.manual_seed(0)
    m = nn.Conv2d(4, 6, (3, 2) if "dilation" in kw and kw["dilation"] != 2 else 3, **kw)
    mr = rt.nn.Conv2d(4, 6, m.kernel_size, **kw)
    assert repr(m) == repr(mr)
    out, _ = compare_module(m, mr, arr(2, 4, 7, 6), rt)
    assert out.grad_fn.name() == "ConvolutionBackward0"


def test_conv2d_unbatched_and_functional(rt):
    x, w, b = arr(3, 5, 5), arr(2, 3, 3, 3, seed=1), arr(2, seed=2)
    close(
        F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=2),
        rt.nn.functional.conv2d(rt.tensor(x), rt.tensor(w), rt.tensor(b), stride=2),
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(stride=2, padding=2),
        dict(dilation=2, groups=2),
        dict(padding="same", bias=False),
    ],
)
def test_conv1d_module_matches_torch(rt, kw):
    torch.manual_seed(1)
    m = nn.Conv1d(4, 6, 3, **kw)
    mr = rt.nn.Conv1d(4, 6, 3, **kw)
    assert repr(m) == repr(mr)
    compare_module(m, mr, arr(2, 4, 11), rt)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=3, stride=2, ceil_mode=True),
        dict(kernel_size=(2, 3), stride=1, dilation=(2, 1)),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    ],
)
def test_maxpool2d_matches_torch(rt, kw):
    m, mr = nn.MaxPool2d(**kw), rt.nn.MaxPool2d(**kw)
    assert repr(m) == repr(mr)
    out, _ = compare_module(m, mr, arr(2, 3, 7, 8), rt)
    assert out.grad_fn.name() == "MaxPool2DWithIndicesBackward0"


def test_maxpool2d_ties_and_indices_match_torch(rt):
    # a constant plane: every window is one tie; PyTorch sends the gradient to its first element
    x = np.ones((1, 1, 4, 4), np.float32)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    F.max_pool2d(xt, 2).sum().backward()
    rt.nn.functional.max_pool2d(xr, 2).sum().backward()
    close(xt.grad, xr.grad)
    y = arr(2, 3, 6, 7, seed=3)
    _, it = F.max_pool2d(torch.tensor(y), 3, 2, 1, return_indices=True)
    _, ir = rt.nn.functional.max_pool2d(rt.tensor(y), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(it.numpy(), ir.numpy())


def test_avgpool2d_matches_torch(rt):
    compare_module(nn.AvgPool2d(2), rt.nn.AvgPool2d(2), arr(2, 3, 6, 6), rt)
    compare_module(nn.AvgPool2d(3, 2, 1), rt.nn.AvgPool2d(3, 2, 1), arr(2, 3, 7, 6), rt)


@pytest.mark.parametrize(
    "make",
    [
        lambda nn_: nn_.Flatten(),
        lambda nn_: nn_.Flatten(0, 2),
        lambda nn_: nn_.Softmax(dim=1),
        lambda nn_: nn_.LogSoftmax(dim=-1),
        lambda nn_: nn_.GELU(),
        lambda nn_: nn_.GELU(approximate="tanh"),
        lambda nn_: nn_.Sigmoid(),
        lambda nn_: nn_.SiLU(),
        lambda nn_: nn_.LeakyReLU(0.2),
        lambda nn_: nn_.Unflatten(1, (2, 2)),
    ],
    ids=[
        "Flatten",
        "Flatten(0,2)",
        "Softmax",
        "LogSoftmax",
        "GELU",
        "GELU(tanh)",
        "Sigmoid",
        "SiLU",
        "LeakyReLU",
        "Unflatten",
    ],
)
def test_stateless_modules_match_torch(rt, make):
    m, mr = make(nn), make(rt.nn)
    assert repr(m) == repr(mr)
    compare_module(m, mr, arr(3, 4, 2, 3, lo=-3, hi=3), rt)


def test_grad_fn_names_match_torch(rt):
    x = arr(3, 4)
    cases = [
        (lambda F_, x: F_.gelu(x)),
        (lambda F_, x: F_.softmax(x, dim=1)),
        (lambda F_, x: F_.layer_norm(x, (4,))),
        (lambda F_, x: F_.binary_cross_entropy_with_logits(x, x.detach().sigmoid())),
        (lambda F_, x: F_.mse_loss(x, x.detach() * 2)),
    ]
    for case in cases:
        a = case(F, torch.tensor(x, requires_grad=True))
        b = case(rt.nn.functional, rt.tensor(x, requires_grad=True))
        assert a.grad_fn.name() == b.grad_fn.name()


def test_layernorm_matches_torch(rt):
    torch.manual_seed(0)
    for shape, kw in [
        ((5,), {}),
        ((3, 5), {"eps": 1e-3}),
        ((5,), {"elementwise_affine": False}),
        ((5,), {"bias": False}),
    ]:
        m, mr = nn.LayerNorm(shape, **kw), rt.nn.LayerNorm(shape, **kw)
        assert repr(m) == repr(mr)
        if m.weight is not None:  # non-trivial affine weights
            nn.init.normal_(m.weight)
            if m.bias is not None:
                nn.init.normal_(m.bias)
        compare_module(m, mr, arr(2, 3, 5, seed=4, lo=-2, hi=3), rt)
    with pytest.raises(RuntimeError) as ours:
        nn.LayerNorm(4)(torch.ones(2, 3))
    with pytest.raises(RuntimeError) as theirs:
        rt.nn.LayerNorm(4)(rt.ones(2, 3))
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(momentum=None),
        dict(affine=False),
        dict(track_running_stats=False),
        dict(momentum=0.3, eps=1e-3),
        dict(bias=False),
    ],
)
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
def test_batchnorm1d_matches_torch_train_then_eval(rt, kw, shape):
    torch.manual_seed(0)
    m, mr = nn.BatchNorm1d(3, **kw), rt.nn.BatchNorm1d(3, **kw)
    assert repr(m) == repr(mr)
    for p in m.parameters():
        nn.init.normal_(p)
    assert list(m.state_dict()) == list(mr.state_dict())
    for step in range(3):  # running statistics follow torch's over several batches
        compare_module(m, mr, arr(*shape, seed=step, lo=-2, hi=4), rt, train=True)
        mr.zero_grad()
        m.zero_grad()
    compare_module(m, mr, arr(*shape, seed=7), rt, train=False)
    if m.track_running_stats:
        assert int(m.num_batches_tracked.item()) == int(mr.num_batches_tracked.item()) == 3


def test_batchnorm_errors_match_torch(rt):
    for bad in [(2,), (1, 2, 3, 4)]:
        with pytest.raises(ValueError) as ours:
            nn.BatchNorm1d(2)(torch.ones(*bad))
        with pytest.raises(ValueError) as theirs:
            rt.nn.BatchNorm1d(2)(rt.ones(*bad))
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError) as ours:
        nn.BatchNorm1d(3)(torch.ones(1, 3))
    with pytest.raises(ValueError) as theirs:
        rt.nn.BatchNorm1d(3)(rt.ones(1, 3))
    assert str(ours.value) == str(theirs.value)


def test_batchnorm2d_matches_torch(rt):
    compare_module(nn.BatchNorm2d(3), rt.nn.BatchNorm2d(3), arr(2, 3, 4, 5, lo=0, hi=3), rt)


@pytest.mark.parametrize("padding_idx", [None, 0, -1])
def test_embedding_matches_torch(rt, padding_idx):
    torch.manual_seed(0)
    m, mr = (
        nn.Embedding(7, 4, padding_idx=padding_idx),
        rt.nn.Embedding(7, 4, padding_idx=padding_idx),
    )
    assert repr(m) == repr(mr)
    if padding_idx is not None:
        assert not m.weight[padding_idx].detach().numpy().any()
    idx = np.array([[0, 2, 6], [2, 2, 1]], np.int64)
    out, _ = compare_module(m, mr, idx, rt, integer_input=True)
    assert out.grad_fn.name() == "EmbeddingBackward0"
    with pytest.raises(IndexError) as ours:
        m(torch.tensor([7]))
    with pytest.raises(IndexError) as theirs:
        mr(rt.tensor([7]))
    assert str(ours.value) == str(theirs.value)


def test_dropout_semantics():
    torch.manual_seed(0)
    m = nn.Dropout(0.25)
    assert repr(m) == "Dropout(p=0.25, inplace=False)"
    x = torch.ones(4000, requires_grad=True)
    y = m(x)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.75) < 0.03
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)
    h = x * 1
    assert F.dropout(h, 0.5, inplace=True) is h and h._version == 1
    m.eval()
    assert m(x) is x
    assert F.dropout(x, 0.5, training=False) is x
    assert not F.dropout(torch.ones(5), 1.0).numpy().any()
    with pytest.raises(
        ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"
    ):
        F.dropout(x, 1.5)


def test_dropout_matches_torch_repr_and_error(rt):
    assert repr(nn.Dropout(0.25)) == repr(rt.nn.Dropout(0.25))
    with pytest.raises(ValueError) as ours:
        F.dropout(torch.ones(2), 1.5)
    with pytest.raises(ValueError) as theirs:
        rt.nn.functional.dropout(rt.ones(2), 1.5)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(pos_weight=True),
        dict(weight=True),
    ],
)
def test_bce_with_logits_matches_torch(rt, kw):
    x = arr(4, 3, lo=-30, hi=30)  # large logits: must stay finite
    t = arr(4, 3, seed=1, lo=0, hi=1)
    extra_t, extra_r = {}, {}
    for key in ("pos_weight", "weight"):
        if kw.get(key):
            w = arr(3, seed=2, lo=0.5, hi=2)
            extra_t[key], extra_r[key] = torch.tensor(w), rt.tensor(w)
    red = kw.get("reduction", "mean")
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    a = F.binary_cross_entropy_with_logits(xt, torch.tensor(t), reduction=red, **extra_t)
    b = rt.nn.functional.binary_cross_entropy_with_logits(
        xr, rt.tensor(t), reduction=red, **extra_r
    )
    close(a, b)
    a.sum().backward()
    b.sum().backward()
    close(xt.grad, xr.grad)
    m = nn.BCEWithLogitsLoss(reduction=red, **extra_t)
    close(m(torch.tensor(x), torch.tensor(t)), b)


def test_bce_and_l1_match_torch(rt):
    p, t = arr(5, lo=0.01, hi=0.99), arr(5, seed=1, lo=0, hi=1)
    for ours, theirs in [
        (nn.BCELoss(), rt.nn.BCELoss()),
        (nn.L1Loss(), rt.nn.L1Loss()),
        (nn.MSELoss(reduction="sum"), rt.nn.MSELoss(reduction="sum")),
    ]:
        pt, pr = torch.tensor(p, requires_grad=True), rt.tensor(p, requires_grad=True)
        a, b = ours(pt, torch.tensor(t)), theirs(pr, rt.tensor(t))
        close(a, b)
        a.backward()
        b.backward()
        close(pt.grad, pr.grad)


def test_functional_softmax_mse_match_torch(rt):
    x, y = arr(3, 4), arr(3, 4, seed=1)
    for fn in [
        lambda F_, a, b: F_.softmax(a, dim=0),
        lambda F_, a, b: F_.mse_loss(a, b),
        lambda F_, a, b: F_.mse_loss(a, b, reduction="none"),
        lambda F_, a, b: F_.log_softmax(a, 1),
    ]:
        xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
        a, b = fn(F, xt, torch.tensor(y)), fn(rt.nn.functional, xr, rt.tensor(y))
        close(a, b)
        (a * torch.tensor(y)).sum().backward()
        (b * rt.tensor(y)).sum().backward()
        close(xt.grad, xr.grad)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_matches_torch(rt, mode):
    x = arr(2, 3, 4, 5)
    pads = (1, 2, 2, 1)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    kw = {"value": 1.5} if mode == "constant" else {}
    a = F.pad(xt, pads, mode=mode, **kw)
    b = rt.nn.functional.pad(xr, pads, mode=mode, **kw)
    close(a, b)
    assert a.grad_fn.name() == b.grad_fn.name()
    g = arr(*b.shape, seed=5)
    a.backward(torch.tensor(g))
    b.backward(rt.tensor(g))
    close(xt.grad, xr.grad)


def test_pad_and_softmax_messages_match_torch(rt):
    with pytest.raises(NotImplementedError) as ours:
        F.pad(torch.ones(2, 3), (1, 1, 1, 1), mode="reflect")
    with pytest.raises(NotImplementedError) as theirs:
        rt.nn.functional.pad(rt.ones(2, 3), (1, 1, 1, 1), mode="reflect")
    assert str(ours.value) == str(theirs.value)
    for name in ("softmax", "log_softmax"):
        with pytest.warns(UserWarning) as ours:
            getattr(F, name)(torch.ones(2, 2))
        with pytest.warns(UserWarning) as theirs:
            getattr(rt.nn.functional, name)(rt.ones(2, 2))
        assert str(ours[0].message) == str(theirs[0].message)


def test_init_functions_follow_torch_rules(rt):
    assert nn.init.calculate_gain("leaky_relu", 0.2) == rt.nn.init.calculate_gain("leaky_relu", 0.2)
    for name in ["linear", "relu", "tanh", "sigmoid", "selu", "conv2d"]:
        assert nn.init.calculate_gain(name) == rt.nn.init.calculate_gain(name)
    w = torch.empty(64, 32, 3, 3)
    assert nn.init._calculate_fan_in_and_fan_out(w) == rt.nn.init._calculate_fan_in_and_fan_out(
        rt.empty(64, 32, 3, 3)
    )
    with pytest.raises(ValueError) as ours:
        nn.init.xavier_uniform_(torch.empty(3))
    with pytest.raises(ValueError) as theirs:
        rt.nn.init.xavier_uniform_(rt.empty(3))
    assert str(ours.value) == str(theirs.value)


def test_clip_grad_norm_matches_torch(rt):
    for norm_type, max_norm in [(2.0, 0.5), (1.0, 0.3), (math.inf, 0.1), (2.0, 100.0), (3, 1.0)]:
        grads = [arr(3, 4, seed=1), arr(5, seed=2), arr(2, 2, 2, seed=3)]
        ps = [torch.zeros(*g.shape, requires_grad=True) for g in grads]
        prs = [rt.zeros(*g.shape, requires_grad=True) for g in grads]
        for p, pr, g in zip(ps, prs, grads, strict=True):
            p.grad, pr.grad = torch.tensor(g), rt.tensor(g)
        total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        total_r = rt.nn.utils.clip_grad_norm_(prs, max_norm, norm_type=norm_type)
        close(total, total_r)
        for p, pr in zip(ps, prs, strict=True):
            close(p.grad, pr.grad)
    p = torch.zeros(2, requires_grad=True)
    p.grad = torch.tensor([1.0, float("nan")])
    with pytest.raises(RuntimeError) as ours:
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    pr = rt.zeros(2, requires_grad=True)
    pr.grad = rt.tensor([1.0, float("nan")])
    with pytest.raises(RuntimeError) as theirs:
        rt.nn.utils.clip_grad_norm_(pr, 1.0, error_if_nonfinite=True)
    assert str(ours.value) == str(theirs.value)


def test_state_dict_keys_and_load_match_torch(rt):
    def build(nn_):
        return nn_.Sequential(
            nn_.Conv2d(1, 2, 3),
            nn_.BatchNorm2d(2),
            nn_.Flatten(),
            nn_.Linear(2, 2),
            nn_.LayerNorm(2),
            nn_.Embedding(3, 2),
        )

    ours, theirs = build(nn), build(rt.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    state = {k: torch.tensor(v.numpy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    for (_k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items(), strict=True):
        close(a, b)
    state.pop("1.running_var")
    state["extra"] = torch.zeros(1)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "1.running_var"'):
        ours.load_state_dict(state)
    result = ours.load_state_dict(state, strict=False)
    assert result.missing_keys == ["1.running_var"] and result.unexpected_keys == ["extra"]


# ------------------------------------------------------------- without PyTorch


def test_conv_and_pool_gradcheck_float64():
    x, w, b = (
        arr(2, 3, 5, 4, dtype=np.float64),
        arr(4, 3, 2, 3, seed=1, dtype=np.float64),
        arr(4, seed=2, dtype=np.float64),
    )
    args = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1), args)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, None, padding=(0, 1), dilation=(1, 2)), args)
    wg = torch.tensor(arr(4, 1, 2, 2, seed=5, dtype=np.float64), requires_grad=True)
    xg = torch.tensor(arr(1, 2, 4, 4, seed=6, dtype=np.float64), requires_grad=True)
    assert gradcheck(lambda x, w: F.conv2d(x, w, groups=2, stride=2), [xg, wg])
    assert gradcheck(lambda x: F.max_pool2d(x, 2, 1, 1), args[:1])
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), args[:1])
    assert gradcheck(lambda x: F.leaky_relu(x * 1, 0.1, inplace=True), args[:1])
    assert gradcheck(lambda x: F.pad(x, (1, 1, 2, 0), mode="reflect"), args[:1])
    w1 = torch.tensor(arr(4, 3, 3, seed=3, dtype=np.float64), requires_grad=True)
    x1 = torch.tensor(arr(2, 3, 7, seed=4, dtype=np.float64), requires_grad=True)
    assert gradcheck(lambda x, w: F.conv1d(x, w, stride=2, padding=1), [x1, w1])


def test_conv2d_hand_values():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    out = F.conv2d(x, torch.ones(1, 1, 2, 2), torch.tensor([0.5]), stride=2)
    np.testing.assert_array_equal(out.numpy(), [[[[10.5, 18.5], [42.5, 50.5]]]])
    xr = torch.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
    F.conv2d(xr, torch.ones(1, 1, 3, 3), padding=1).sum().backward()
    # each input element is counted once per 3x3 window containing it
    expected = np.array([[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]], np.float32)
    np.testing.assert_array_equal(xr.grad.numpy()[0, 0], expected)
    pooled = F.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2)
    np.testing.assert_array_equal(pooled.numpy(), [[[[5, 7], [13, 15]]]])
    # adaptive bins of 4 rows into 3: [0, 2), [1, 3), [2, 4)
    ada = F.adaptive_avg_pool2d(torch.arange(16.0).reshape(1, 4, 4), (3, 1))
    np.testing.assert_allclose(ada.numpy().ravel(), [3.5, 7.5, 11.5])


def test_norms_embedding_losses_gradcheck_float64():
    x = torch.tensor(arr(4, 3, 5, seed=5, dtype=np.float64), requires_grad=True)
    w = torch.tensor(arr(5, seed=6, dtype=np.float64), requires_grad=True)
    b = torch.tensor(arr(5, seed=7, dtype=np.float64), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (5,), w, b), [x, w, b])
    wc = torch.tensor(arr(3, seed=8, dtype=np.float64), requires_grad=True)
    assert gradcheck(lambda x, w: F.batch_norm(x, None, None, w, None, training=True), [x, wc])
    assert gradcheck(lambda x: F.gelu(x), [x])
    assert gradcheck(lambda x: F.gelu(x, approximate="tanh"), [x])
    t = torch.tensor(arr(4, 3, 5, seed=9, lo=0, hi=1, dtype=np.float64))
    assert gradcheck(lambda x: F.binary_cross_entropy_with_logits(x * 10, t, pos_weight=w), [x])
    emb = torch.tensor(arr(6, 3, seed=10, dtype=np.float64), requires_grad=True)
    idx = torch.tensor([[1, 0, 1], [5, 1, 0]])
    assert gradcheck(lambda e: F.embedding(idx, e), [emb])
    # padding_idx: the row is read (forward) but gets no gradient, as in PyTorch
    F.embedding(idx, emb, padding_idx=0).sum().backward()
    np.testing.assert_array_equal(emb.grad.numpy()[:, 0], [0, 3, 0, 0, 0, 1])


def test_losses_with_options_gradcheck_float64():
    x = torch.tensor(arr(5, 4, seed=30, lo=-2, hi=2, dtype=np.float64), requires_grad=True)
    t = torch.tensor([0, 3, -100, 2, 3])
    w = torch.tensor(arr(4, seed=31, lo=0.5, hi=2, dtype=np.float64))
    for kw in [
        dict(weight=w),
        dict(ignore_index=-100, label_smoothing=0.2),
        dict(weight=w, label_smoothing=0.1, reduction="sum"),
    ]:
        assert gradcheck(lambda x: F.cross_entropy(x, t, **kw), [x])  # noqa: B023 - gradcheck runs it in this iteration
    probs = torch.tensor(np.full((5, 4), 0.25))
    assert gradcheck(lambda x: F.cross_entropy(x, probs, weight=w, label_smoothing=0.3), [x])


def test_parameters_to_vector_roundtrip_and_cuda_refused():
    model = nn.Sequential(nn.Linear(3, 2), nn.Conv1d(1, 2, 2))
    vec = nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (sum(p.numel() for p in model.parameters()),)
    nn.utils.vector_to_parameters(vec * 0 + 1, model.parameters())
    assert all(p.detach().numpy().min() == 1 for p in model.parameters())
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        model.cuda()


def test_hand_derived_values():
    # LayerNorm of [1, 2, 3]: mean 2, var 2/3 -> (x - 2) / sqrt(2/3 + eps)
    out = F.layer_norm(torch.tensor([1.0, 2.0, 3.0]), (3,), eps=0.0)
    np.testing.assert_allclose(out.numpy(), [-math.sqrt(1.5), 0, math.sqrt(1.5)], rtol=1e-6)
    # GELU(1) = Phi(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447
    np.testing.assert_allclose(F.gelu(torch.tensor([1.0])).numpy(), [0.8413447], rtol=1e-6)
    # BCE with logits at x = 0 is log 2 whatever the target
    loss = F.binary_cross_entropy_with_logits(torch.zeros(3), torch.tensor([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(loss.item(), math.log(2), rtol=1e-6)
    # BatchNorm1d running stats after one batch [[0], [2]]: mean 1, unbiased var 2
    bn = nn.BatchNorm1d(1)
    bn(torch.tensor([[0.0], [2.0]]))
    np.testing.assert_allclose(bn.running_mean.numpy(), [0.1], rtol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), [0.9 + 0.2], rtol=1e-6)
    # weighted NLL: mean divides by the summed weights of the counted targets
    logp = torch.tensor(
        [[math.log(0.5), math.log(0.5)], [math.log(0.25), math.log(0.75)], [0.0, -1.0]],
        requires_grad=True,
    )
    loss = F.nll_loss(logp, torch.tensor([0, 1, -100]), weight=torch.tensor([1.0, 3.0]))
    np.testing.assert_allclose(loss.item(), (math.log(2) + 3 * -math.log(0.75)) / 4, rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(logp.grad.numpy(), [[-0.25, 0], [0, -0.75], [0, 0]], rtol=1e-6)
    # clip_grad_norm_: grads [3, 4] -> norm 5, scaled by 1 / (5 + 1e-6)
    p = torch.zeros(2, requires_grad=True)
    p.grad = torch.tensor([3.0, 4.0])
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_init_distributions_and_module_defaults():
    torch.manual_seed(0)
    w = torch.empty(200, 100)
    nn.init.kaiming_uniform_(w, mode="fan_in", nonlinearity="relu")
    bound = math.sqrt(2.0) * math.sqrt(3.0 / 100)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    nn.init.kaiming_normal_(w, mode="fan_out")
    np.testing.assert_allclose(w.numpy().std(), math.sqrt(2.0 / 200), rtol=0.05)
    nn.init.xavier_normal_(w)
    np.testing.assert_allclose(w.numpy().std(), math.sqrt(2.0 / 300), rtol=0.05)
    nn.init.xavier_uniform_(w, gain=2.0)
    assert np.abs(w.numpy()).max() <= 2.0 * math.sqrt(6.0 / 300)
    nn.init.normal_(w, 3.0, 0.5)
    np.testing.assert_allclose([w.numpy().mean(), w.numpy().std()], [3.0, 0.5], rtol=0.05)
    nn.init.uniform_(w, -2, -1)
    assert w.numpy().min() >= -2 and w.numpy().max() <= -1
    assert not nn.init.zeros_(w).numpy().any() and nn.init.ones_(w).numpy().all()
    conv = nn.Conv2d(3, 8, 3)
    fan_in = 3 * 9
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    assert np.abs(conv.bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    assert conv.weight.shape == (8, 3, 3, 3) and conv.weight.requires_grad


# ------------------------------------------------------------------- optim


OPTIM_CASES = [
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.05, maximize=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, betas=(0.8, 0.9), amsgrad=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, eps=1e-6)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2)),
]


@pytest.mark.parametrize("name,kw", OPTIM_CASES, ids=[f"{n}{k}" for n, k in OPTIM_CASES])
def test_optimizers_match_torch_step_by_step(rt, name, kw):
    w0, x = arr(3, 4, seed=1), arr(8, 4, seed=2)
    w = torch.tensor(w0, requires_grad=True)
    wr = rt.tensor(w0, requires_grad=True)
    opt = getattr(torch.optim, name)([w], **kw)
    opt_r = getattr(rt.optim, name)([wr], **kw)
    for _step in range(15):
        for opt_, w_, lib in ((opt, w, torch), (opt_r, wr, rt)):
            opt_.zero_grad()
            loss = ((lib.tensor(x) @ w_.T).tanh() ** 2).sum()
            loss.backward()
            opt_.step()
        close(w, wr, rtol=1e-5, atol=1e-6)


def test_adamw_decay_by_hand():
    # zero gradient: Adam's update is 0, so AdamW only decays: p * (1 - lr * wd) per step
    p = torch.tensor([2.0], requires_grad=True)
    opt = torch.optim.AdamW([p], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        p.grad = torch.zeros(1)
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [2.0 * 0.95**3], rtol=1e-6)
    # RMSprop first step: v = (1 - alpha) g^2, p -= lr * g / (sqrt(v) + eps)
    q = torch.tensor([1.0], requires_grad=True)
    q.grad = torch.tensor([2.0])
    torch.optim.RMSprop([q], lr=0.01, alpha=0.99, eps=0.0).step()
    np.testing.assert_allclose(
        q.detach().numpy(), [1.0 - 0.01 * 2.0 / math.sqrt(0.01 * 4)], rtol=1e-6
    )


def test_adadelta_adagrad_first_step_by_hand():
    # Adadelta: v = (1 - rho) g^2, delta = sqrt(eps) / sqrt(v + eps) * g
    p = torch.tensor([1.0], requires_grad=True)
    p.grad = torch.tensor([2.0])
    torch.optim.Adadelta([p], lr=1.0, rho=0.9, eps=1e-6).step()
    delta = math.sqrt(1e-6) / math.sqrt(0.1 * 4 + 1e-6) * 2.0
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - delta], rtol=1e-6)
    # Adagrad: s = g^2, p -= lr * g / (sqrt(s) + eps) = lr * sign(g)
    q = torch.tensor([1.0], requires_grad=True)
    q.grad = torch.tensor([-3.0])
    torch.optim.Adagrad([q], lr=0.1).step()
    np.testing.assert_allclose(q.detach().numpy(), [1.1], rtol=1e-6)


def test_optimizer_state_dict_roundtrip():
    w = torch.tensor(arr(3, seed=3), requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
    saved = opt.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and saved["state"][0]["step"] == 3
    w2 = torch.tensor(w.detach().numpy(), requires_grad=True)
    opt2 = torch.optim.Adam([w2], lr=0.5)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.1
    for o, p in ((opt, w), (opt2, w2)):
        o.zero_grad()
        (p * p).sum().backward()
        o.step()
    close(w, w2, rtol=0, atol=0)


SCHED_CASES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=5)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.01)),
    ("MultiStepLR", dict(milestones=[2, 5, 5], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("LinearLR", dict(start_factor=0.25, total_iters=4)),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.1, total_iters=6)),
]


@pytest.mark.parametrize("name,kw", SCHED_CASES, ids=[f"{n}{k}" for n, k in SCHED_CASES])
def test_lr_schedulers_match_torch(rt, name, kw):
    w = torch.zeros(2, requires_grad=True)
    wr = rt.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    opt_r = rt.optim.SGD([wr], lr=0.1, momentum=0.9)
    sched = getattr(torch.optim.lr_scheduler, name)(opt, **kw)
    sched_r = getattr(rt.optim.lr_scheduler, name)(opt_r, **kw)
    for _ in range(14):  # past T_max: cosine comes back up, as PyTorch's recursion does
        for o, p, s in ((opt, w, sched), (opt_r, wr, sched_r)):
            o.zero_grad()
            (p - 1).pow(2).sum().backward()
            o.step()
            s.step()
        assert sched.get_last_lr() == pytest.approx(sched_r.get_last_lr(), rel=1e-12, abs=1e-15)
        close(w, wr, rtol=1e-5, atol=1e-7)


def test_reduce_lr_on_plateau_matches_torch(rt):
    metrics = [5, 4, 4.1, 4.2, 4.0, 4.3, 3.0, 3.1, 3.2, 3.3, 3.4, 3.5, 2.0, 2.5, 2.6, 2.7]
    for kw in [
        dict(patience=1),
        dict(patience=2, cooldown=2, factor=0.5),
        dict(mode="max", patience=0, threshold_mode="abs", threshold=0.5, min_lr=0.02),
    ]:
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        opt_r = rt.optim.SGD([rt.zeros(1, requires_grad=True)], lr=0.1)
        s, s_r = (
            torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw),
            rt.optim.lr_scheduler.ReduceLROnPlateau(opt_r, **kw),
        )
        for m in metrics:
            s.step(m)
            s_r.step(m)
            assert s.get_last_lr() == pytest.approx(s_r.get_last_lr(), rel=1e-12)
            assert opt.param_groups[0]["lr"] == pytest.approx(opt_r.param_groups[0]["lr"])


def test_plateau_and_linear_by_hand():
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    lrs = []
    for metric in [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]:
        plateau.step(metric)
        lrs.append(plateau.get_last_lr()[0])
    # two calls without improvement exceed patience 1: x0.1; 0.5 improves; two more: x0.1
    assert lrs == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.1, 0.01])
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    seen = [opt.param_groups[0]["lr"]]
    for _ in range(4):
        opt.step()
        warm.step()
        seen.append(warm.get_last_lr()[0])
    assert seen == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])


def test_cosine_schedule_by_hand():
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    np.testing.assert_allclose(
        lrs, [(1 + math.cos(math.pi * t / 4)) / 2 for t in range(5)], atol=1e-12
    )


def test_double_backward_through_conv_pool_gelu_matches_torch(rt):
    """A gradient penalty (create_graph through conv2d, GELU, max_pool2d, layer_norm)."""
    x, w = arr(2, 3, 6, 6, seed=11), arr(4, 3, 3, 3, seed=12)

    def penalty(lib, Fm):
        X, W = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = Fm.max_pool2d(Fm.gelu(Fm.conv2d(X, W, padding=1)), 2)
        y = Fm.layer_norm(y, (3, 3))
        (gx,) = lib.autograd.grad((y**2).sum() + y.sum(), X, create_graph=True)
        (gx**2).sum().backward()
        return W.grad, X.grad

    for a, b in zip(penalty(torch, F), penalty(rt, rt.nn.functional), strict=True):
        close(a, b, rtol=1e-4, atol=1e-5)


CE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weight=True),
    dict(weight=True, reduction="sum"),
    dict(ignore_index=1),
    dict(ignore_index=1, weight=True),
    dict(label_smoothing=0.1),
    dict(label_smoothing=0.2, weight=True),
    dict(label_smoothing=0.2, weight=True, ignore_index=2),
    dict(label_smoothing=0.3, reduction="none"),
    dict(label_smoothing=0.1, ignore_index=0, reduction="sum"),
    dict(probs=True),
    dict(probs=True, label_smoothing=0.2, weight=True),
]


@pytest.mark.parametrize("kw", CE_CASES, ids=[str(c) for c in CE_CASES])
def test_cross_entropy_options_match_torch(rt, kw):
    kw = dict(kw)
    x = arr(6, 4, seed=20, lo=-3, hi=3)
    if kw.pop("probs", False):
        p = arr(6, 4, seed=21, lo=0, hi=1)
        t_ours, t_rt = (
            torch.tensor(p / p.sum(1, keepdims=True)),
            rt.tensor(p / p.sum(1, keepdims=True)),
        )
    else:
        t = np.array([0, 1, 2, 3, 1, 2])
        t_ours, t_rt = torch.tensor(t), rt.tensor(t)
    kw_rt = dict(kw)
    if kw.pop("weight", False):
        w = arr(4, seed=22, lo=0.2, hi=2)
        kw["weight"], kw_rt["weight"] = torch.tensor(w), rt.tensor(w)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    a = nn.CrossEntropyLoss(**kw)(xt, t_ours)
    b = rt.nn.CrossEntropyLoss(**kw_rt)(xr, t_rt)
    close(a, b)
    a.sum().backward()
    b.sum().backward()
    close(xt.grad, xr.grad)
    if "label_smoothing" not in kw and t_ours.dtype == torch.int64:
        lp, lpr = F.log_softmax(torch.tensor(x), 1), rt.log_softmax(rt.tensor(x), 1)
        kw.pop("label_smoothing", None)
        kw_rt.pop("label_smoothing", None)
        close(nn.NLLLoss(**kw)(lp, t_ours), rt.nn.NLLLoss(**kw_rt)(lpr, t_rt))
        assert nn.NLLLoss(**kw)(lp.requires_grad_(), t_ours).grad_fn.name() == "NllLossBackward0"


def test_legacy_size_average_reduce_flags(rt):
    x, y = arr(3, 2), arr(3, 2, seed=1)
    for flags in [
        dict(size_average=False),
        dict(reduce=False),
        dict(size_average=True, reduce=True),
    ]:
        close(
            nn.MSELoss(**flags)(torch.tensor(x), torch.tensor(y)),
            rt.nn.MSELoss(**flags)(rt.tensor(x), rt.tensor(y)),
        )


ERROR_CASES = [
    ("conv channels", lambda M: M.nn.functional.conv2d(M.ones(1, 3, 5, 5), M.ones(2, 4, 3, 3))),
    (
        "conv dtype",
        lambda M: M.nn.functional.conv2d(M.ones(1, 3, 5, 5, dtype=M.float64), M.ones(2, 3, 3, 3)),
    ),
    (
        "conv kernel too big",
        lambda M: M.nn.functional.conv2d(M.ones(1, 3, 2, 2), M.ones(2, 3, 3, 3)),
    ),
    ("conv rank", lambda M: M.nn.functional.conv2d(M.ones(3, 5), M.ones(2, 3, 3, 3))),
    (
        "conv groups",
        lambda M: M.nn.functional.conv2d(M.ones(1, 4, 5, 5), M.ones(3, 2, 3, 3), groups=2),
    ),
    ("conv1d channels", lambda M: M.nn.Conv1d(2, 3, 3)(M.ones(1, 1, 5))),
    ("Conv2d same + stride", lambda M: M.nn.Conv2d(2, 3, 3, stride=2, padding="same")),
    ("Conv2d groups", lambda M: M.nn.Conv2d(3, 4, 3, groups=2)),
    ("pool padding", lambda M: M.nn.functional.max_pool2d(M.ones(1, 1, 5, 5), 2, padding=2)),
    ("pool too small", lambda M: M.nn.functional.max_pool2d(M.ones(1, 1, 1, 1), 2)),
    ("embedding float", lambda M: M.nn.functional.embedding(M.ones(2), M.ones(3, 2))),
    ("bce size", lambda M: M.nn.functional.binary_cross_entropy_with_logits(M.ones(2), M.ones(3))),
    ("bce range", lambda M: M.nn.functional.binary_cross_entropy(M.tensor([1.5]), M.tensor([1.0]))),
    (
        "label smoothing",
        lambda M: M.nn.functional.cross_entropy(
            M.ones(2, 3), M.tensor([0, 1]), label_smoothing=1.5
        ),
    ),
    (
        "nll weight",
        lambda M: M.nn.functional.nll_loss(M.ones(2, 3), M.tensor([0, 1]), weight=M.ones(2)),
    ),
    ("gelu approximate", lambda M: M.nn.functional.gelu(M.ones(2), approximate="x")),
    ("LayerNorm shape", lambda M: M.nn.LayerNorm((2, 3))(M.ones(3, 2))),
    ("adam lr", lambda M: M.optim.Adam([M.ones(1, requires_grad=True)], lr=-1)),
    ("rmsprop alpha", lambda M: M.optim.RMSprop([M.ones(1, requires_grad=True)], alpha=-1)),
]


@pytest.mark.parametrize("name,call", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_error_texts_match_torch(rt, name, call):
    with pytest.raises(Exception) as theirs:
        call(rt)
    with pytest.raises(type(theirs.value)) as ours:
        call(torch)
    assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]


def test_forward_hooks_and_containers(rt):
    def build(nn_):
        class Net(nn_.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn_.ModuleDict({"conv": nn_.Conv2d(1, 2, 3), "act": nn_.ReLU()})
                self.scales = nn_.ParameterList([_ones(nn_, 2)])
                self.extra = nn_.ParameterDict({"b": _ones(nn_, 1)})

            def forward(self, x):
                return (
                    self.blocks["act"](self.blocks["conv"](x)) * self.scales[0].reshape(1, 2, 1, 1)
                    + self.extra["b"]
                )

        return Net()

    def _ones(nn_, n):
        return nn_.Parameter((torch if nn_ is nn else rt).ones(n))

    ours, theirs = build(nn), build(rt.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    seen = []
    handle = ours.blocks["conv"].register_forward_hook(
        lambda m, args, out: seen.append(tuple(out.shape))
    )
    pre = ours.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    out = ours(torch.ones(1, 1, 4, 4))
    assert seen == [(1, 2, 2, 2)]
    expected = np.maximum(ours.blocks["conv"].bias.detach().numpy(), 0).reshape(1, 2, 1, 1) + 1
    np.testing.assert_allclose(
        out.detach().numpy(), np.broadcast_to(expected, (1, 2, 2, 2)), rtol=1e-6
    )
    handle.remove()
    pre.remove()
    ours(torch.ones(1, 1, 4, 4))
    assert len(seen) == 1
    swap = ours.register_forward_hook(lambda m, args, out: out.sum())
    assert ours(torch.ones(1, 1, 4, 4)).ndim == 0
    swap.remove()


@pytest.mark.parametrize("size", [(1, 1), 2, (3, 2), (None, 4), 5])
def test_adaptive_avg_pool2d_matches_torch(rt, size):
    m, mr = nn.AdaptiveAvgPool2d(size), rt.nn.AdaptiveAvgPool2d(size)
    assert repr(m) == repr(mr)
    out, out_r = compare_module(m, mr, arr(2, 3, 7, 6), rt)
    assert out.grad_fn.name() == out_r.grad_fn.name()
    compare_module(m, mr, arr(3, 8, 8), rt)


@pytest.mark.parametrize(
    "make",
    [
        lambda nn_: nn_.ReLU(inplace=True),
        lambda nn_: nn_.LeakyReLU(0.2, inplace=True),
        lambda nn_: nn_.SiLU(inplace=True),
    ],
    ids=["ReLU", "LeakyReLU", "SiLU"],
)
def test_inplace_activations_match_torch(rt, make):
    m, mr = make(nn), make(rt.nn)
    assert repr(m) == repr(mr)
    x = arr(3, 4, lo=-2, hi=2)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    ht, hr = xt * 1.5, xr * 1.5
    yt, yr = m(ht), mr(hr)
    assert yt is ht and yr is hr  # the activation wrote into its input
    close(ht, hr)
    assert ht._version == hr._version == 1
    (yt * yt).sum().backward()
    (yr * yr).sum().backward()
    close(xt.grad, xr.grad)


CONVT_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=3, padding=2, dilation=2, output_padding=1),
    dict(groups=2, stride=2, bias=False),
    dict(padding=2),
]


@pytest.mark.parametrize("kw", CONVT_CASES, ids=[str(c) for c in CONVT_CASES])
def test_conv_transpose2d_matches_torch(rt, kw):
    torch.manual_seed(0)
    m, mr = nn.ConvTranspose2d(4, 6, 3, **kw), rt.nn.ConvTranspose2d(4, 6, 3, **kw)
    assert repr(m) == repr(mr)
    assert m.weight.shape == tuple(mr.weight.shape)
    out, _ = compare_module(m, mr, arr(2, 4, 5, 4), rt)
    assert out.grad_fn.name() == "ConvolutionBackward0"


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1)])
def test_conv_transpose1d_matches_torch(rt, kw):
    m, mr = nn.ConvTranspose1d(3, 2, 4, **kw), rt.nn.ConvTranspose1d(3, 2, 4, **kw)
    assert repr(m) == repr(mr)
    compare_module(m, mr, arr(2, 3, 6), rt)


def test_conv_transpose_output_size_matches_torch(rt):
    m, mr = (
        nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
        rt.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
    )
    copy_to_torch(m, mr, rt)
    x = arr(1, 2, 4, 4)
    close(m(torch.tensor(x), output_size=[8, 8]), mr(rt.tensor(x), output_size=[8, 8]))


def test_conv_transpose_is_the_adjoint_of_conv_float64():
    # <conv(x, w), y> == <x, conv_transpose(y, w)> for the same stride/padding/dilation
    x = torch.tensor(arr(2, 3, 9, 8, seed=40, dtype=np.float64))
    w = torch.tensor(arr(4, 3, 3, 2, seed=41, dtype=np.float64))
    for kw in [dict(), dict(stride=2, padding=1), dict(stride=(2, 3), dilation=(2, 1))]:
        y_shape = F.conv2d(x, w, **kw).shape
        y = torch.tensor(np.random.default_rng(42).normal(size=tuple(y_shape)))
        lhs = (F.conv2d(x, w, **kw) * y).sum().item()
        back = F.conv_transpose2d(y, w, **kw)
        pad = [(0, a - b) for a, b in zip(x.shape[2:], back.shape[2:], strict=True)]
        back = F.pad(back, (0, pad[1][1], 0, pad[0][1]))
        assert lhs == pytest.approx((back * x).sum().item(), rel=1e-10)
    xg = torch.tensor(arr(1, 2, 3, 3, seed=43, dtype=np.float64), requires_grad=True)
    wg = torch.tensor(arr(2, 2, 2, 2, seed=44, dtype=np.float64), requires_grad=True)
    assert gradcheck(
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [xg, wg]
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda nn_: nn_.Softplus(),
        lambda nn_: nn_.Softplus(beta=2.0, threshold=3.0),
        lambda nn_: nn_.ELU(),
        lambda nn_: nn_.ELU(0.5),
        lambda nn_: nn_.GroupNorm(2, 4),
        lambda nn_: nn_.GroupNorm(4, 4, affine=False),
        lambda nn_: nn_.GroupNorm(1, 4, eps=1e-3),
    ],
    ids=[
        "Softplus",
        "Softplus(2,3)",
        "ELU",
        "ELU(0.5)",
        "GroupNorm(2,4)",
        "GroupNorm(4,4)",
        "GroupNorm(1,4)",
    ],
)
def test_more_modules_match_torch(rt, make):
    torch.manual_seed(3)
    m, mr = make(nn), make(rt.nn)
    assert repr(m) == repr(mr)
    for p in m.parameters():
        nn.init.normal_(p)
    out, out_r = compare_module(m, mr, arr(2, 4, 3, 5, lo=-25, hi=25, seed=5), rt)
    assert out.grad_fn.name() == out_r.grad_fn.name()


LOSS_CASES = [
    ("SmoothL1Loss", dict()),
    ("SmoothL1Loss", dict(beta=0.5, reduction="sum")),
    ("SmoothL1Loss", dict(beta=0.0)),
    ("HuberLoss", dict(delta=0.7)),
    ("HuberLoss", dict(reduction="none")),
    ("KLDivLoss", dict(reduction="batchmean")),
    ("KLDivLoss", dict(reduction="sum", log_target=True)),
    ("KLDivLoss", dict(reduction="none")),
]


@pytest.mark.parametrize("name,kw", LOSS_CASES, ids=[f"{n}{k}" for n, k in LOSS_CASES])
def test_more_losses_match_torch(rt, name, kw):
    x, y = arr(4, 5, seed=6, lo=-2, hi=2), arr(4, 5, seed=7, lo=-2, hi=2)
    if name == "KLDivLoss":
        x = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True)).astype(np.float32)
        y = np.exp(y) / np.exp(y).sum(1, keepdims=True)
        y[0, :2] = 0  # zero target probabilities contribute 0
        y = (np.log(np.maximum(y, 1e-30)) if kw.get("log_target") else y).astype(np.float32)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    a = getattr(nn, name)(**kw)(xt, torch.tensor(y))
    b = getattr(rt.nn, name)(**kw)(xr, rt.tensor(y))
    close(a, b)
    a.sum().backward()
    b.sum().backward()
    close(xt.grad, xr.grad)


def test_one_hot_and_normalize_match_torch(rt):
    idx = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(
        F.one_hot(torch.tensor(idx)).numpy(), rt.nn.functional.one_hot(rt.tensor(idx)).numpy()
    )
    assert F.one_hot(torch.tensor(idx), 6).dtype == torch.int64
    x = arr(3, 4, seed=8)
    x[1] = 0  # a zero row: finite output and gradient, as torch
    for kw in [dict(), dict(p=1, dim=0)]:
        xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
        a, b = F.normalize(xt, **kw), rt.nn.functional.normalize(xr, **kw)
        close(a, b)
        (a * torch.tensor(x + 1)).sum().backward()
        (b * rt.tensor(x + 1)).sum().backward()
        close(xt.grad, xr.grad)


def test_more_functions_gradcheck_float64():
    x = torch.tensor(arr(3, 4, 2, seed=50, lo=-3, hi=3, dtype=np.float64), requires_grad=True)
    y = torch.tensor(arr(3, 4, 2, seed=51, lo=-3, hi=3, dtype=np.float64))
    assert gradcheck(lambda x: F.softplus(x, beta=2.0), [x])
    assert gradcheck(lambda x: F.elu(x, 0.7), [x])
    assert gradcheck(lambda x: F.group_norm(x, 2), [x])
    assert gradcheck(lambda x: F.smooth_l1_loss(x, y, beta=0.5), [x])
    assert gradcheck(lambda x: F.huber_loss(x, y, delta=0.5), [x])
    assert gradcheck(lambda x: F.normalize(x, dim=1), [x])
    p = torch.tensor(np.full((3, 4, 2), 0.125))
    assert gradcheck(lambda x: F.kl_div(F.log_softmax(x, 1), p, reduction="batchmean"), [x])
    # hand values: softplus(0) = log 2, elu(-inf) = -alpha, huber at |d| = 2 > 1: 1 * (2 - 0.5)
    assert F.softplus(torch.zeros(1)).item() == pytest.approx(math.log(2))
    assert F.elu(torch.tensor([-1e4]), 0.5).item() == pytest.approx(-0.5)
    assert F.huber_loss(torch.tensor([2.0]), torch.zeros(1)).item() == pytest.approx(1.5)


RNN_CASES = [
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, batch_first=True)),
    ("LSTM", dict(bidirectional=True, bias=False)),
    ("GRU", dict()),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("RNN", dict()),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
]


@pytest.mark.parametrize("name,kw", RNN_CASES, ids=[f"{n}{k}" for n, k in RNN_CASES])
def test_recurrent_layers_match_torch(rt, name, kw):
    torch.manual_seed(0)
    m, mr = getattr(nn, name)(3, 4, **kw), getattr(rt.nn, name)(3, 4, **kw)
    assert repr(m) == repr(mr)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in mr.named_parameters()]
    copy_to_torch(m, mr, rt)
    x = arr(5, 2, 3, seed=60)  # (T, B, F), or (B=5, T=2, F) when batch_first
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    (out, state), (out_r, state_r) = m(xt), mr(xr)
    close(out, out_r)
    states = state if isinstance(state, tuple) else (state,)
    states_r = state_r if isinstance(state_r, tuple) else (state_r,)
    for s, sr in zip(states, states_r, strict=True):
        close(s, sr)
    g = arr(*out_r.shape, seed=61)
    ((out * torch.tensor(g)).sum() + sum(s.sum() for s in states)).backward()
    ((out_r * rt.tensor(g)).sum() + sum(s.sum() for s in states_r)).backward()
    close(xt.grad, xr.grad)
    grads_r = dict(mr.named_parameters())
    for pname, p in m.named_parameters():
        close(p.grad, grads_r[pname].grad)
    # given initial states and an unbatched input
    h0 = arr(*states_r[0].shape[:1], states_r[0].shape[2], seed=62)
    init_t = tuple(torch.tensor(h0) for _ in states)
    init_r = tuple(rt.tensor(h0) for _ in states_r)
    a, _ = m(
        torch.tensor(x[:, 0] if not kw.get("batch_first") else x[0]),
        init_t if len(init_t) > 1 else init_t[0],
    )
    b, _ = mr(
        rt.tensor(x[:, 0] if not kw.get("batch_first") else x[0]),
        init_r if len(init_r) > 1 else init_r[0],
    )
    close(a, b)


def test_recurrent_layers_gradcheck_float64():
    for cls in (nn.LSTM, nn.GRU, nn.RNN):
        torch.manual_seed(1)
        m = cls(2, 3, bidirectional=True).double()
        x = torch.tensor(arr(3, 2, 2, seed=70, dtype=np.float64), requires_grad=True)
        assert gradcheck(lambda x: m(x)[0], [x])  # noqa: B023 - gradcheck runs it in this iteration
    # one LSTM step by hand: zero state, all weights 0 but the cell-input bias b:
    # c = sigmoid(0) * tanh(b) = tanh(b) / 2, h = sigmoid(0) * tanh(c)
    lstm = nn.LSTM(1, 1)
    for p in lstm.parameters():
        nn.init.zeros_(p)
    with torch.no_grad():
        lstm.bias_ih_l0[2] = 0.8
    out, (h, c) = lstm(torch.zeros(1, 1, 1))
    assert c.item() == pytest.approx(math.tanh(0.8) / 2, rel=1e-6)
    assert h.item() == pytest.approx(0.5 * math.tanh(math.tanh(0.8) / 2), rel=1e-6)


def _masks(lib, kind, n_batch, length):
    if kind == "none":
        return {}
    if kind == "causal":
        m = np.triu(np.ones((length, length), bool), 1)
        return {"attn_mask": lib.tensor(m)}
    pad = np.zeros((n_batch, length), bool)
    pad[0, -2:] = True
    return {"key_padding_mask": lib.tensor(pad)}


@pytest.mark.parametrize("mask", ["none", "causal", "padding"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(rt, mask, batch_first):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    mr = rt.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in mr.named_parameters()]
    for p in m.parameters():
        nn.init.normal_(p, 0, 0.3)
    copy_to_torch(m, mr, rt)
    x = arr(5, 3, 8, seed=80) if not batch_first else arr(3, 5, 8, seed=80)
    xt, xr = torch.tensor(x, requires_grad=True), rt.tensor(x, requires_grad=True)
    out, w = m(xt, xt, xt, **_masks(torch, mask, 3, 5))
    out_r, w_r = mr(xr, xr, xr, **_masks(rt, mask, 3, 5))
    close(out, out_r)
    close(w, w_r)
    (out.sum() + (w * w).sum()).backward()
    (out_r.sum() + (w_r * w_r).sum()).backward()
    close(xt.grad, xr.grad, rtol=1e-4, atol=1e-5)
    grads_r = dict(mr.named_parameters())
    for name, p in m.named_parameters():
        close(p.grad, grads_r[name].grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kw", [dict(), dict(norm_first=True, activation="gelu"), dict(batch_first=True)]
)
def test_transformer_encoder_matches_torch(rt, kw):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw)
    layer_r = rt.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw)
    m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    mr = rt.nn.TransformerEncoder(layer_r, 2, norm=rt.nn.LayerNorm(8), enable_nested_tensor=False)
    assert list(m.state_dict()) == list(mr.state_dict())
    out, _ = compare_module(m, mr, arr(5, 3, 8, seed=81), rt)


def test_scaled_dot_product_attention_matches_torch(rt):
    q, k, v = arr(2, 3, 4, 8, seed=82), arr(2, 3, 6, 8, seed=83), arr(2, 3, 6, 5, seed=84)
    bool_mask = np.random.default_rng(85).random((4, 6)) > 0.3
    bool_mask[:, 0] = True
    for kw_t, kw_r in [
        ({}, {}),
        ({"is_causal": True}, {"is_causal": True}),
        ({"attn_mask": torch.tensor(bool_mask)}, {"attn_mask": rt.tensor(bool_mask)}),
        ({"scale": 0.3}, {"scale": 0.3}),
    ]:
        ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        rs = [rt.tensor(a, requires_grad=True) for a in (q, k, v)]
        a = F.scaled_dot_product_attention(*ts, **kw_t)
        b = rt.nn.functional.scaled_dot_product_attention(*rs, **kw_r)
        close(a, b)
        a.sum().backward()
        b.sum().backward()
        for x, y in zip(ts, rs, strict=True):
            close(x.grad, y.grad, rtol=1e-4, atol=1e-5)


def test_attention_gradcheck_float64():
    torch.manual_seed(2)
    m = nn.MultiheadAttention(4, 2).double()
    x = torch.tensor(arr(3, 2, 4, seed=86, dtype=np.float64), requires_grad=True)
    pad = torch.tensor(np.array([[False, False, True], [False, False, False]]))
    assert gradcheck(lambda x: m(x, x, x, key_padding_mask=pad)[0], [x])
