"""Issue 26's added torch.nn classes (tracegrad/eager/nn/more_modules.py) and functions
(nn/more_functional.py), each against real PyTorch from the same weights and inputs:
outputs, the input's and every parameter's gradient (float64, 1e-9), parameter names and
shapes (a torch state_dict loads), reprs; float64 gradcheck without torch."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(1)
X2 = R.standard_normal((3, 4))
X3 = R.standard_normal((2, 4, 6))
X4 = R.standard_normal((2, 4, 5, 6))
POS2 = R.uniform(0.1, 2.0, (3, 4))

# name -> (module factory fn(nn), inputs (arrays), input dtype kinds)
MODULES = {
    "ReLU6": (lambda nn: nn.ReLU6(), (X2 * 5,)),
    "Hardtanh": (lambda nn: nn.Hardtanh(-0.5, 0.7), (X2,)),
    "Hardswish": (lambda nn: nn.Hardswish(), (X2 * 3,)),
    "Hardsigmoid": (lambda nn: nn.Hardsigmoid(), (X2 * 3,)),
    "Mish": (lambda nn: nn.Mish(), (X2,)),
    "SELU": (lambda nn: nn.SELU(), (X2,)),
    "CELU": (lambda nn: nn.CELU(0.5), (X2,)),
    "GLU": (lambda nn: nn.GLU(), (X2,)),
    "GLU dim": (lambda nn: nn.GLU(dim=1), (X3,)),
    "LogSigmoid": (lambda nn: nn.LogSigmoid(), (X2 * 10,)),
    "Softsign": (lambda nn: nn.Softsign(), (X2,)),
    "Softmin": (lambda nn: nn.Softmin(dim=1), (X2,)),
    "Softshrink": (lambda nn: nn.Softshrink(0.3), (X2,)),
    "Hardshrink": (lambda nn: nn.Hardshrink(0.3), (X2,)),
    "Tanhshrink": (lambda nn: nn.Tanhshrink(), (X2,)),
    "Threshold": (lambda nn: nn.Threshold(0.1, 20.0), (X2,)),
    "Softmax2d": (lambda nn: nn.Softmax2d(), (X4,)),
    "PReLU": (lambda nn: nn.PReLU(), (X2,)),
    "PReLU channels": (lambda nn: nn.PReLU(4, init=0.1), (X3,)),
    "Upsample nearest": (lambda nn: nn.Upsample(scale_factor=2), (X4,)),
    "Upsample size": (lambda nn: nn.Upsample(size=(7, 9)), (X4,)),
    "Upsample bilinear": (lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"), (X4,)),
    "Upsample bilinear corners": (
        lambda nn: nn.Upsample(size=(3, 8), mode="bilinear", align_corners=True),
        (X4,),
    ),
    "Upsample linear": (lambda nn: nn.Upsample(scale_factor=1.5, mode="linear"), (X3,)),
    "UpsamplingNearest2d": (lambda nn: nn.UpsamplingNearest2d(scale_factor=3), (X4,)),
    "UpsamplingBilinear2d": (lambda nn: nn.UpsamplingBilinear2d(scale_factor=2), (X4,)),
    "MaxPool1d": (lambda nn: nn.MaxPool1d(2), (X3,)),
    "MaxPool1d stride pad": (lambda nn: nn.MaxPool1d(3, 2, 1), (X3,)),
    "AvgPool1d": (lambda nn: nn.AvgPool1d(3, 1), (X3,)),
    "AdaptiveAvgPool1d": (lambda nn: nn.AdaptiveAvgPool1d(4), (X3,)),
    "AdaptiveMaxPool1d": (lambda nn: nn.AdaptiveMaxPool1d(4), (X3,)),
    "AdaptiveMaxPool2d": (lambda nn: nn.AdaptiveMaxPool2d((2, 4)), (X4,)),
    "ZeroPad2d": (lambda nn: nn.ZeroPad2d((1, 2, 0, 1)), (X4,)),
    "ConstantPad1d": (lambda nn: nn.ConstantPad1d(2, 3.5), (X3,)),
    "ReflectionPad1d": (lambda nn: nn.ReflectionPad1d(2), (X3,)),
    "ReflectionPad2d": (lambda nn: nn.ReflectionPad2d((1, 1, 2, 0)), (X4,)),
    "ReplicationPad2d": (lambda nn: nn.ReplicationPad2d(1), (X4,)),
    "CircularPad1d": (lambda nn: nn.CircularPad1d(1), (X3,)),
    "PixelShuffle": (lambda nn: nn.PixelShuffle(2), (X4,)),
    "PixelUnshuffle": (lambda nn: nn.PixelUnshuffle(2), (R.standard_normal((1, 2, 4, 6)),)),
    "RMSNorm": (lambda nn: nn.RMSNorm(6), (X3,)),
    "RMSNorm eps": (lambda nn: nn.RMSNorm([5, 6], eps=1e-3), (X4,)),
    "InstanceNorm1d": (lambda nn: nn.InstanceNorm1d(4), (X3,)),
    "InstanceNorm2d affine": (lambda nn: nn.InstanceNorm2d(4, affine=True), (X4,)),
    "LocalResponseNorm": (lambda nn: nn.LocalResponseNorm(3), (X4,)),
    "Bilinear": (lambda nn: nn.Bilinear(4, 6, 3), (X2, R.standard_normal((3, 6)))),
    "RNNCell": (lambda nn: nn.RNNCell(4, 5), (X2, R.standard_normal((3, 5)))),
    "RNNCell relu no hidden": (lambda nn: nn.RNNCell(4, 5, nonlinearity="relu"), (X2,)),
    "GRUCell": (lambda nn: nn.GRUCell(4, 5), (X2, R.standard_normal((3, 5)))),
    "GRUCell unbatched": (lambda nn: nn.GRUCell(4, 5, bias=False), (X2[0],)),
    "LSTMCell": (lambda nn: nn.LSTMCell(4, 5), (X2,)),
    "CosineSimilarity": (lambda nn: nn.CosineSimilarity(dim=1), (X2, POS2)),
    "PairwiseDistance": (lambda nn: nn.PairwiseDistance(p=1.5), (X2, POS2)),
    "MarginRankingLoss": (lambda nn: nn.MarginRankingLoss(0.2), (X2[0], X2[1], np.sign(X2[2]))),
    "SoftMarginLoss": (lambda nn: nn.SoftMarginLoss(), (X2, np.sign(POS2 - 1))),
    "HingeEmbeddingLoss": (
        lambda nn: nn.HingeEmbeddingLoss(reduction="sum"),
        (X2, np.sign(POS2 - 1)),
    ),
    "CosineEmbeddingLoss": (
        lambda nn: nn.CosineEmbeddingLoss(0.1),
        (X2, POS2, np.array([1.0, -1.0, 1.0])),
    ),
    "TripletMarginLoss": (lambda nn: nn.TripletMarginLoss(), (X2, POS2, X2 * 0.5)),
    "GaussianNLLLoss": (lambda nn: nn.GaussianNLLLoss(), (X2, POS2, POS2 * 0.5)),
    "PoissonNLLLoss": (lambda nn: nn.PoissonNLLLoss(), (X2, np.floor(POS2 * 3))),
    "Unfold": (
        lambda nn: nn.Unfold(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=2),
        (X4,),
    ),
    "Fold": (lambda nn: nn.Fold((5, 6), 2, stride=1), (R.standard_normal((2, 16, 20)),)),
    "Fold padding": (
        lambda nn: nn.Fold((4, 6), (2, 2), padding=1, stride=2),
        (R.standard_normal((1, 8, 12)),),
    ),
    "ChannelShuffle": (lambda nn: nn.ChannelShuffle(2), (X4,)),
    "MultiMarginLoss": (lambda nn: nn.MultiMarginLoss(), (X2, np.array([0, 3, 1]))),
    "MultiMarginLoss p2 margin": (
        lambda nn: nn.MultiMarginLoss(p=2, margin=0.5, reduction="sum"),
        (X2, np.array([2, 2, 0])),
    ),
    "MultiLabelMarginLoss": (
        lambda nn: nn.MultiLabelMarginLoss(),
        (X2, np.array([[3, 0, -1, 1], [1, -1, 2, 0], [0, 1, 2, 3]])),
    ),
    "TripletMarginWithDistanceLoss": (
        lambda nn: nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True),
        (X2, POS2, X2 * 0.5),
    ),
    "LPPool1d": (lambda nn: nn.LPPool1d(2, 3, 2), (np.abs(X3) + 0.1,)),
    "LPPool2d": (lambda nn: nn.LPPool2d(3, 2), (np.abs(X4) + 0.1,)),
    "ReflectionPad3d": (lambda nn: nn.ReflectionPad3d(1), (R.standard_normal((1, 2, 3, 3, 3)),)),
    "ReplicationPad3d": (
        lambda nn: nn.ReplicationPad3d((1, 0, 2, 1, 0, 1)),
        (R.standard_normal((1, 2, 3, 3, 3)),),
    ),
    "CircularPad3d": (lambda nn: nn.CircularPad3d(1), (R.standard_normal((1, 1, 2, 3, 3)),)),
    "RReLU eval": (lambda nn: nn.RReLU(0.1, 0.3).eval(), (X2,)),
    "DataParallel": (lambda nn: nn.DataParallel(nn.Linear(4, 2)), (X2,)),
    "NLLLoss2d": (
        lambda nn: nn.NLLLoss2d(),
        (R.standard_normal((2, 3, 2, 2)), np.array([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])),
    ),
    "Conv3d": (
        lambda nn: nn.Conv3d(2, 4, (2, 3, 2), stride=(2, 1, 1), padding=1),
        (R.standard_normal((2, 2, 4, 5, 4)),),
    ),
    "Conv3d groups dilation no bias": (
        lambda nn: nn.Conv3d(4, 2, 2, dilation=(2, 1, 1), groups=2, bias=False),
        (R.standard_normal((1, 4, 5, 3, 3)),),
    ),
    "Conv3d same unbatched": (
        lambda nn: nn.Conv3d(2, 2, 3, padding="same"),
        (R.standard_normal((2, 3, 4, 4)),),
    ),
    "ConvTranspose3d": (
        lambda nn: nn.ConvTranspose3d(
            2, 3, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1), output_padding=(1, 0, 1)
        ),
        (R.standard_normal((1, 2, 3, 3, 3)),),
    ),
    "ConvTranspose3d groups dilation": (
        lambda nn: nn.ConvTranspose3d(4, 2, 2, groups=2, dilation=2, bias=False),
        (R.standard_normal((2, 4, 2, 3, 2)),),
    ),
    "MaxPool3d": (lambda nn: nn.MaxPool3d(2), (R.standard_normal((1, 2, 4, 4, 4)),)),
    "MaxPool3d stride pad": (
        lambda nn: nn.MaxPool3d(3, 2, 1),
        (R.standard_normal((1, 2, 5, 5, 5)),),
    ),
    "AvgPool3d": (lambda nn: nn.AvgPool3d((2, 2, 1), 1), (R.standard_normal((2, 1, 3, 3, 3)),)),
    "AdaptiveAvgPool3d": (
        lambda nn: nn.AdaptiveAvgPool3d((2, 3, 1)),
        (R.standard_normal((1, 2, 5, 4, 3)),),
    ),
    "AdaptiveMaxPool3d": (
        lambda nn: nn.AdaptiveMaxPool3d(2),
        (R.standard_normal((1, 2, 5, 4, 3)),),
    ),
    "LPPool3d": (lambda nn: nn.LPPool3d(2, 2), (np.abs(R.standard_normal((1, 2, 4, 4, 4))) + 0.1,)),
    "BatchNorm3d": (lambda nn: nn.BatchNorm3d(2), (R.standard_normal((2, 2, 2, 3, 2)),)),
    "SyncBatchNorm": (lambda nn: nn.SyncBatchNorm(4), (X4,)),
    "MultiLabelSoftMarginLoss": (
        lambda nn: nn.MultiLabelSoftMarginLoss(),
        (X2, (POS2 > 1).astype(float)),
    ),
}
NOT_DIFF = {  # inputs that are targets (no gradient)
    "MarginRankingLoss": {2}, "SoftMarginLoss": {1}, "HingeEmbeddingLoss": {1},
    "CosineEmbeddingLoss": {2}, "PoissonNLLLoss": {1}, "MultiLabelSoftMarginLoss": {1},
    "MultiMarginLoss": {1}, "MultiMarginLoss p2 margin": {1}, "MultiLabelMarginLoss": {1},
    "NLLLoss2d": {1},
}  # fmt: skip


def _run(L, case, state=None):
    make, arrays = MODULES[case]
    L.manual_seed(0)
    m = make(L.nn).double()
    if state is not None:
        m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
    skip = NOT_DIFF.get(case, set())
    xs = [
        L.tensor(a.copy())
        if a.dtype.kind == "i"
        else L.tensor(a.copy(), dtype=L.float64, requires_grad=k not in skip)
        for k, a in enumerate(arrays)
    ]
    out = m(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    total = 0
    for o in outs:
        w = L.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)), dtype=L.float64)
        total = total + (o * w).sum()
    total.backward()
    grads = [x.grad.numpy() if x.grad is not None else None for x in xs]
    params = {k: p.grad.numpy() for k, p in m.named_parameters()}
    return m, [o.detach().numpy() for o in outs], grads, params


@pytest.mark.parametrize("case", list(MODULES))
def test_module_matches_pytorch(case):
    rt = pytest.importorskip("torch")
    m_rt, out_rt, g_rt, p_rt = _run(rt, case)
    state = {k: v.detach().numpy() for k, v in m_rt.state_dict().items()}
    m, out, g, p = _run(tg, case, state)
    assert repr(m) == repr(m_rt)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in m_rt.state_dict().items()
    ]
    # PyTorch's CPU hardsigmoid multiplies by the float constant 1.0f / 6 even in float64
    tol = 1e-7 if case == "Hardsigmoid" else 1e-8
    for a, b in zip(out, out_rt, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=tol, atol=1e-12)
    for a, b in zip(g, g_rt, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=tol, atol=1e-12)
    assert p.keys() == p_rt.keys()
    for k in p:
        np.testing.assert_allclose(p[k], p_rt[k], rtol=1e-8, atol=1e-12, err_msg=k)


KINKS = {"ReLU6", "Hardtanh", "Hardswish", "Hardsigmoid", "Softshrink", "Hardshrink",
         "Threshold", "MaxPool1d", "MaxPool1d stride pad", "AdaptiveMaxPool1d",
         "AdaptiveMaxPool2d", "MarginRankingLoss", "HingeEmbeddingLoss", "TripletMarginLoss",
         "CosineEmbeddingLoss", "MultiMarginLoss", "MultiMarginLoss p2 margin",
         "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss", "RReLU eval", "MaxPool3d",
         "MaxPool3d stride pad", "AdaptiveMaxPool3d"}  # fmt: skip


@pytest.mark.parametrize("case", [c for c in MODULES if c not in KINKS])
def test_module_gradcheck(case):
    make, arrays = MODULES[case]
    tg.manual_seed(0)
    m = make(tg.nn).double()
    skip = NOT_DIFF.get(case, set())
    xs = [
        tg.tensor(a.copy())
        if a.dtype.kind == "i"
        else tg.tensor(a.copy(), dtype=tg.float64, requires_grad=k not in skip)
        for k, a in enumerate(arrays)
    ]
    # the inputs' gradients; parameter gradients are compared with PyTorch above
    assert tg.autograd.gradcheck(lambda *a: m(*a), xs)


def test_cells_state_dict_from_torch_rnn_names():
    """The cells' parameter names and init bounds are PyTorch's: uniform(+-1/sqrt(H))."""
    cell = tg.nn.LSTMCell(3, 16)
    assert [(k, tuple(v.shape)) for k, v in cell.named_parameters()] == [
        ("weight_ih", (64, 3)),
        ("weight_hh", (64, 16)),
        ("bias_ih", (64,)),
        ("bias_hh", (64,)),
    ]
    for p in cell.parameters():
        assert np.abs(p.detach().numpy()).max() <= 0.25
    assert np.abs(tg.nn.Bilinear(4, 6, 3).weight.detach().numpy()).max() <= 0.5


def test_feature_dropout_zeroes_whole_channels():
    tg.manual_seed(0)
    x = tg.ones(8, 16, 5, 5)
    m = tg.nn.Dropout2d(0.5)
    y = m(x).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # a channel is all kept or all 0
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    m.eval()
    assert m(x) is x
    y1 = tg.nn.Dropout1d(0.5)(tg.ones(4, 8, 3)).numpy()
    assert (y1.min(-1) == y1.max(-1)).all()
    with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
        tg.nn.Dropout1d(0.5)(tg.ones(2, 3, 4, 5))


def test_gumbel_softmax():
    tg.manual_seed(0)
    logits = tg.tensor(np.log([[0.1, 0.6, 0.3]] * 4000))
    soft = tg.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-12)
    x = logits.clone().requires_grad_()
    hard = tg.nn.functional.gumbel_softmax(x, hard=True)
    assert set(np.unique(hard.detach().numpy())) == {0.0, 1.0}
    freq = hard.detach().numpy().mean(0)  # argmax of logits + Gumbel ~ softmax(logits)
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.03)
    (hard * tg.tensor([1.0, 2.0, 3.0])).sum().backward()  # straight-through: soft grads
    assert x.grad is not None and np.abs(x.grad.numpy()).sum() > 0


def test_functional_names_exist_in_pytorch():
    rt = pytest.importorskip("torch")
    import tracegrad.eager.nn.more_functional as MF

    public = [n for n in dir(MF) if not n.startswith("_") and callable(getattr(MF, n))]
    for n in public:
        if n in ("Tensor", "shape_error"):
            continue
        assert hasattr(rt.nn.functional, n), n
        assert hasattr(tg.nn.functional, n), n


X3C = R.standard_normal((2, 5, 3))  # (N, C, d1)
T3C = np.array([[1, 0, 4], [2, 2, 3]])
PROB3 = np.exp(R.standard_normal((2, 5, 3)))
PROB3 /= PROB3.sum(1, keepdims=True)
EMB = R.standard_normal((6, 4)) * 2
Q4, K4, V4 = (R.standard_normal(s) for s in ((1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 2)))

# name -> (fn(F, L, *tensors), inputs): float inputs require grad
FUNCTIONAL = {
    "cross_entropy (N, C, d)": (
        lambda F, L, x: F.cross_entropy(x, L.tensor(T3C), label_smoothing=0.1),
        (X3C,),
    ),
    "cross_entropy (N, C, d) none ignore": (
        lambda F, L, x: F.cross_entropy(x, L.tensor(T3C), ignore_index=2, reduction="none"),
        (X3C,),
    ),
    "cross_entropy (N, C, d) probabilities": (
        lambda F, L, x, p: F.cross_entropy(x, p, reduction="sum"),
        (X3C, PROB3),
    ),
    "cross_entropy unbatched": (lambda F, L, x: F.cross_entropy(x, L.tensor(3)), (X3C[0, :, 0],)),
    "nll_loss (N, C, d) weight": (
        lambda F, L, x: F.nll_loss(x, L.tensor(T3C), weight=L.arange(1.0, 6.0, dtype=L.float64)),
        (X3C,),
    ),
    "embedding max_norm": (
        lambda F, L, w: F.embedding(L.tensor([[1, 3], [1, 5]]), w.detach().clone(), max_norm=1.0),
        (EMB,),
    ),
    "embedding scale_grad_by_freq": (
        lambda F, L, w: F.embedding(L.tensor([1, 3, 1, 1]), w, scale_grad_by_freq=True),
        (EMB,),
    ),
    "embedding padding_idx": (
        lambda F, L, w: F.embedding(L.tensor([0, 2, 0]), w, padding_idx=0),
        (EMB,),
    ),
    "sdpa grouped-query": (
        lambda F, L, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        (Q4, K4, V4),
    ),
    "interpolate nearest-exact": (
        lambda F, L, x: F.interpolate(x, scale_factor=2, mode="nearest-exact"),
        (X3C,),
    ),
    "unfold unbatched": (lambda F, L, x: F.unfold(x, 3, padding=1), (X4[0],)),
    "bilinear": (
        lambda F, L, a, b, w, bias: F.bilinear(a, b, w, bias),
        (X2, X2[:, :3], R.standard_normal((2, 4, 3)), R.standard_normal(2)),
    ),
    "pdist": (lambda F, L, x: F.pdist(x, p=3), (X2,)),
    "in-place activations": (
        lambda F, L, x: (
            F.relu_(x * 1)
            + F.elu_(x * 1)
            + F.leaky_relu_(x * 1, 0.2)
            + F.selu_(x * 1)
            + F.hardtanh_(x * 1)
            + F.threshold_(x * 1, 0.1, 2.0)
            + F.celu_(x * 1)
        ),
        (X2,),
    ),
    "interpolate nearest-exact size": (
        lambda F, L, x: F.interpolate(x, size=5, mode="nearest-exact"),
        (X3C,),
    ),
}


def _functional(L, case):
    fn, arrays = FUNCTIONAL[case]
    xs = [L.tensor(a.copy(), requires_grad=True) for a in arrays]
    y = fn(L.nn.functional, L, *xs)
    if y.requires_grad:
        w = L.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=L.float64)
        (y * w).sum().backward()
    return y.detach().numpy(), [None if x.grad is None else x.grad.numpy() for x in xs]


@pytest.mark.parametrize("case", list(FUNCTIONAL))
def test_functional_options_match_pytorch(case):
    rt = pytest.importorskip("torch")
    y, g = _functional(tg, case)
    y_rt, g_rt = _functional(rt, case)
    assert y.shape == y_rt.shape
    np.testing.assert_allclose(y, y_rt, rtol=1e-9, atol=1e-12)
    for a, b in zip(g, g_rt, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_embedding_options_by_hand():
    """max_norm renormalizes the looked-up rows of the weight in place (PyTorch's
    embedding_renorm_); scale_grad_by_freq divides each row's gradient by its count."""
    w = tg.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    emb = tg.nn.Embedding.from_pretrained(w, freeze=False, max_norm=1.0)
    out = emb(tg.tensor([0, 1]))
    np.testing.assert_allclose(out.detach().numpy(), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    np.testing.assert_allclose(emb.weight.detach().numpy()[2], [6.0, 8.0])  # not looked up
    w2 = tg.ones(3, 2, requires_grad=True)
    tg.nn.functional.embedding(tg.tensor([1, 1, 2]), w2, scale_grad_by_freq=True).sum().backward()
    assert w2.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    layer = tg.nn.Embedding(5, 3, padding_idx=1)
    assert layer.weight[1].tolist() == [0.0, 0.0, 0.0]  # the padding row starts at 0


def test_cross_entropy_target_shape_errors_match_pytorch():
    rt = pytest.importorskip("torch")
    for L in (tg, rt):
        with pytest.raises(RuntimeError, match=r"Expected target size \[2, 3\], got \[2, 4\]"):
            L.nn.functional.cross_entropy(L.zeros(2, 5, 3), L.zeros(2, 4, dtype=L.int64))
        with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target"):
            L.nn.functional.cross_entropy(L.zeros(2, 5, 3), L.zeros(3, 3, dtype=L.int64))


BAGS = {
    "2d mean": ({"mode": "mean"}, np.array([[1, 2, 4], [4, 3, 0]]), None, None),
    "offsets sum weights": (
        {"mode": "sum"},
        np.array([1, 2, 4, 5, 4, 3, 2, 9]),
        np.array([0, 3, 3, 6]),  # an empty bag
        R.standard_normal(8),
    ),
    "offsets max": ({"mode": "max"}, np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 5]), None),
    "include_last_offset mean padding": (
        {"mode": "mean", "include_last_offset": True, "padding_idx": 4},
        np.array([1, 4, 4, 5, 4, 3]),
        np.array([0, 3, 6]),
        None,
    ),
}


def _bag(L, case, state=None):
    kw, idx, offsets, weights = BAGS[case]
    L.manual_seed(0)
    m = L.nn.EmbeddingBag(10, 3, **kw).double()
    if state is not None:
        m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
    psw = None if weights is None else L.tensor(weights, requires_grad=True)
    off = None if offsets is None else L.tensor(offsets)
    out = m(L.tensor(idx), off, per_sample_weights=psw)
    (out * L.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))).sum().backward()
    return m, [out.detach().numpy(), m.weight.grad.numpy()] + (
        [] if psw is None else [psw.grad.numpy()]
    )


@pytest.mark.parametrize("case", list(BAGS))
def test_embedding_bag_matches_pytorch(case):
    rt = pytest.importorskip("torch")
    m_rt, theirs = _bag(rt, case)
    m, ours = _bag(tg, case, {k: v.detach().numpy() for k, v in m_rt.state_dict().items()})
    assert repr(m) == repr(m_rt)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_module_helpers_and_lazy_linear():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.BatchNorm1d(4))
    assert model.get_parameter("0.weight") is model[0].weight
    assert model.get_buffer("1.running_mean") is model[1].running_mean
    with pytest.raises(AttributeError):
        model.get_parameter("0.nothing")
    assert model.half()[0].weight.dtype == tg.float16
    lazy = tg.nn.LazyLinear(2)
    out = lazy(tg.ones(5, 7))
    assert tuple(out.shape) == (5, 2) and tuple(lazy.weight.shape) == (2, 7)
    assert [k for k, _ in lazy.named_parameters()] == ["weight", "bias"]
    assert np.abs(lazy.weight.detach().numpy()).max() <= 1 / np.sqrt(7)


def test_random_activations_and_feature_alpha_dropout():
    tg.manual_seed(0)
    x = -tg.ones(2000)
    y = tg.nn.RReLU(0.1, 0.3)(x).numpy()  # training: slopes ~ U(0.1, 0.3)
    assert (-y >= 0.1).all() and (-y <= 0.3).all() and abs(-y.mean() - 0.2) < 0.01
    m = tg.nn.FeatureAlphaDropout(0.5)
    out = m(tg.ones(4, 6, 3, 3)).numpy().reshape(4, 6, -1)
    assert (out.min(-1) == out.max(-1)).all()  # whole channels kept or dropped
    assert len(np.unique(out.round(6))) == 2
    m.eval()
    x = tg.ones(2, 3)
    assert m(x) is x


@pytest.mark.parametrize(
    "name,args,shape",
    [
        ("LazyConv1d", (4, 3), (2, 3, 8)),
        ("LazyConv2d", (4, 3), (2, 3, 6, 6)),
        ("LazyConv3d", (2, 2), (1, 3, 4, 4, 4)),
        ("LazyConvTranspose2d", (2, 3), (1, 3, 4, 4)),
        ("LazyConvTranspose3d", (2, 2), (1, 3, 3, 3, 3)),
        ("LazyBatchNorm1d", (), (4, 5)),
        ("LazyBatchNorm2d", (), (2, 3, 4, 4)),
        ("LazyInstanceNorm2d", (), (2, 3, 4, 4)),
    ],
)
def test_lazy_modules_become_their_class(name, args, shape):
    """The first input completes the module: it becomes the eager class with PyTorch's
    parameter names and shapes (checked against torch's own lazy module)."""
    rt = pytest.importorskip("torch")
    x = R.standard_normal(shape)
    got = []
    for L in (tg, rt):
        m = getattr(L.nn, name)(*args)
        m(L.tensor(x, dtype=L.float32))
        got.append((type(m).__name__, [(k, tuple(v.shape)) for k, v in m.state_dict().items()]))
    assert got[0] == got[1]


CTC_X = R.standard_normal((6, 3, 5))
CTC_CASES = {
    "padded mean": (
        np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]]),
        [6, 5, 4],
        [3, 2, 2],
        "mean",
        False,
    ),
    "padded sum": (np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]]), [6, 5, 4], [3, 2, 2], "sum", False),
    "concatenated none": (np.array([1, 2, 2, 3, 1, 4, 4]), [6, 5, 4], [3, 2, 2], "none", False),
    "impossible zero_infinity": (
        np.array([1, 2, 2, 3, 1, 4, 4, 4]),
        [6, 5, 2],
        [3, 2, 3],
        "none",
        True,
    ),
}


def _ctc(L, case):
    targets, in_len, tl, red, zero_inf = CTC_CASES[case]
    a = L.tensor(CTC_X, requires_grad=True)
    lp = L.nn.functional.log_softmax(a, 2)
    loss = L.nn.CTCLoss(reduction=red, zero_infinity=zero_inf)(
        lp, L.tensor(targets), L.tensor(in_len), L.tensor(tl)
    )
    w = L.tensor(np.arange(1.0, 1 + loss.numel()).reshape(tuple(loss.shape)))
    (loss * w).sum().backward()
    return loss.detach().numpy(), a.grad.numpy()


@pytest.mark.parametrize("case", list(CTC_CASES))
def test_ctc_loss_matches_pytorch(case):
    rt = pytest.importorskip("torch")
    for a, b in zip(_ctc(tg, case), _ctc(rt, case), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_ctc_loss_by_hand():
    """One frame, target [1]: the only alignment emits 1, so the loss is -log p(1)."""
    p = np.array([[[0.2, 0.5, 0.3]]])
    loss = tg.nn.functional.ctc_loss(
        tg.tensor(np.log(p)), tg.tensor([[1]]), [1], [1], reduction="sum"
    )
    assert loss.item() == pytest.approx(-np.log(0.5))
    # two frames, target [1]: alignments 1-1, 1-b, b-1
    p2 = np.array([[[0.2, 0.5, 0.3]], [[0.4, 0.1, 0.5]]])
    loss = tg.nn.functional.ctc_loss(
        tg.tensor(np.log(p2)), tg.tensor([[1]]), [2], [1], reduction="sum"
    )
    assert loss.item() == pytest.approx(-np.log(0.5 * 0.1 + 0.5 * 0.4 + 0.2 * 0.1))


@pytest.mark.parametrize("dims", [1, 2])
def test_max_unpool_matches_pytorch(dims):
    rt = pytest.importorskip("torch")
    shape = (2, 3, 8) if dims == 1 else (2, 3, 4, 6)
    x = R.standard_normal(shape)
    got = []
    for L in (tg, rt):
        a = L.tensor(x, requires_grad=True)
        pool = getattr(L.nn.functional, f"max_pool{dims}d")
        p, idx = pool(a, 2, return_indices=True)
        unpool = getattr(L.nn, f"MaxUnpool{dims}d")(2)
        u = unpool(p, idx)
        w = L.tensor(np.arange(u.numel(), dtype=float).reshape(tuple(u.shape)))
        (u * w).sum().backward()
        got.append((u.detach().numpy(), a.grad.numpy()))
    for ours, theirs in zip(*got, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_max_unpool3d_matches_pytorch():
    """With torch's max_pool3d indices (tracegrad's max_pool3d has no return_indices)."""
    rt = pytest.importorskip("torch")
    x = rt.tensor(R.standard_normal((1, 2, 4, 4, 4)))
    pooled, idx = rt.nn.functional.max_pool3d(x, 2, return_indices=True)
    got = []
    for L, p, i in ((tg, tg.tensor(pooled.numpy()), tg.tensor(idx.numpy())), (rt, pooled, idx)):
        p = p.detach().clone().requires_grad_()
        u = L.nn.MaxUnpool3d(2)(p, i)
        (u * L.tensor(np.arange(u.numel(), dtype=float).reshape(tuple(u.shape)))).sum().backward()
        got.append((u.detach().numpy(), p.grad.numpy()))
    for a, b in zip(*got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_adaptive_log_softmax_matches_pytorch():
    rt = pytest.importorskip("torch")
    x = R.standard_normal((6, 8))
    target = np.array([0, 3, 5, 9, 12, 2])
    got, state = [], None
    for L in (rt, tg):
        L.manual_seed(0)
        m = L.nn.AdaptiveLogSoftmaxWithLoss(8, 14, [4, 10], div_value=2.0).double()
        if state is None:
            state = {k: v.detach().numpy() for k, v in m.state_dict().items()}
        else:
            assert list(m.state_dict()) == list(state)
            m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
        a = L.tensor(x, requires_grad=True)
        out, loss = m(a, L.tensor(target))
        (loss + (out * L.tensor(np.arange(6.0))).sum()).backward()
        lp = m.log_prob(a.detach())
        got.append([out.detach().numpy(), loss.detach().numpy(), a.grad.numpy(),
                    m.head.weight.grad.numpy(), m.tail[1][0].weight.grad.numpy(),
                    lp.detach().numpy(), m.predict(a.detach()).numpy()])  # fmt: skip
    for ours, theirs in zip(got[1], got[0], strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_instance_norm_running_stats_match_pytorch():
    """track_running_stats: training updates the running mean/var (the batch mean of
    per-instance statistics, unbiased variance), eval normalizes by them."""
    rt = pytest.importorskip("torch")
    xs = [R.standard_normal((2, 3, 4, 5)) for _ in range(3)]
    got = []
    for L in (tg, rt):
        m = L.nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.3).double()
        for x in xs[:2]:
            m(L.tensor(x))
        m.eval()
        a = L.tensor(xs[2], requires_grad=True)
        out = m(a)
        (
            out * L.tensor(np.arange(out.numel(), dtype=float).reshape(tuple(out.shape)))
        ).sum().backward()
        got.append([out.detach().numpy(), a.grad.numpy(), m.weight.grad.numpy(),
                    *(v.numpy() for v in m.state_dict().values())])  # fmt: skip
    for ours, theirs in zip(*got, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
