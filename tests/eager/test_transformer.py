"""nn.Transformer, TransformerDecoder(Layer) and TransformerEncoder(Layer) (issue 26)
against real PyTorch from the same weights: outputs and every gradient, with causal and
padding masks, norm_first, batch_first, gelu, no bias; state_dict keys; the causal mask."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(2)
SRC = R.standard_normal((5, 2, 8))  # (S, N, E)
TGT = R.standard_normal((4, 2, 8))  # (T, N, E)

CASES = {
    "Transformer": lambda nn: nn.Transformer(8, 2, 2, 1, 16, dropout=0.0),
    "Transformer norm_first gelu": lambda nn: nn.Transformer(
        8, 2, 1, 2, 16, dropout=0.0, activation="gelu", norm_first=True
    ),
    "Transformer batch_first no bias": lambda nn: nn.Transformer(
        8, 2, 1, 1, 12, dropout=0.0, batch_first=True, bias=False
    ),
    "DecoderLayer": lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
    "Decoder with norm": lambda nn: nn.TransformerDecoder(
        nn.TransformerDecoderLayer(8, 4, 16, dropout=0.0), 2, norm=nn.LayerNorm(8)
    ),
}


def _call(L, case, m, src, tgt, masks):
    tgt_mask = L.nn.Transformer.generate_square_subsequent_mask(4) if masks else None
    pad = L.tensor([[False, False, False, True, True], [False] * 5]) if masks else None
    tpad = L.tensor([[False, False, False, True], [False] * 4]) if masks else None
    if case.startswith("Transformer"):
        if m.batch_first:
            src, tgt = src.transpose(0, 1), tgt.transpose(0, 1)
        return m(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=pad,
                 tgt_key_padding_mask=tpad, memory_key_padding_mask=pad)  # fmt: skip
    return m(tgt, src, tgt_mask=tgt_mask, tgt_key_padding_mask=tpad, memory_key_padding_mask=pad)


def _run(L, case, masks, state=None):
    L.manual_seed(0)
    m = CASES[case](L.nn).double()
    if state is not None:
        m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
    src = L.tensor(SRC, requires_grad=True)
    tgt = L.tensor(TGT, requires_grad=True)
    out = _call(L, case, m, src, tgt, masks)
    w = L.tensor(np.sin(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=L.float64)
    (out * w).sum().backward()
    grads = {k: p.grad.numpy() for k, p in m.named_parameters() if p.grad is not None}
    return m, out.detach().numpy(), src.grad.numpy(), tgt.grad.numpy(), grads


@pytest.mark.parametrize("masks", [False, True], ids=["no masks", "masks"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytorch(case, masks):
    rt = pytest.importorskip("torch")
    m_rt, out_rt, gs_rt, gt_rt, p_rt = _run(rt, case, masks)
    state = {k: v.detach().numpy() for k, v in m_rt.state_dict().items()}
    m, out, gs, gt, p = _run(tg, case, masks, state)
    assert list(m.state_dict()) == list(m_rt.state_dict())
    np.testing.assert_allclose(out, out_rt, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gs, gs_rt, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(gt, gt_rt, rtol=1e-8, atol=1e-11)
    assert p.keys() == p_rt.keys()
    for k in p:
        np.testing.assert_allclose(p[k], p_rt[k], rtol=1e-8, atol=1e-11, err_msg=k)


def test_causal_mask_and_errors():
    m = tg.nn.Transformer.generate_square_subsequent_mask(3)
    assert m.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]
    model = tg.nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(tg.zeros(5, 2, 8), tg.zeros(4, 3, 8))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal"):
        model(tg.zeros(5, 2, 8), tg.zeros(4, 2, 6))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        tg.nn.TransformerDecoderLayer(8, 2, activation="tanh")
    # every matrix of nn.Transformer is xavier-uniform initialized: within sqrt(6/(in+out))
    w = model.decoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16))


def test_gradcheck_decoder_layer():
    tg.manual_seed(0)
    layer = tg.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0).double()
    tgt = tg.tensor(TGT[:3, :1, :4], requires_grad=True)
    mem = tg.tensor(SRC[:2, :1, :4], requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: layer(a, b), [tgt, mem])


MHA = {
    "plain": (lambda nn: nn.MultiheadAttention(8, 2), {}),
    "kdim vdim": (lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=3), {}),
    "bias_kv": (lambda nn: nn.MultiheadAttention(8, 2, add_bias_kv=True), {}),
    "zero_attn": (lambda nn: nn.MultiheadAttention(8, 4, add_zero_attn=True), {}),
    "all, masks": (
        lambda nn: nn.MultiheadAttention(
            8, 2, add_bias_kv=True, add_zero_attn=True, kdim=5, vdim=3
        ),
        {"masks": True},
    ),
    "batch_first no bias, masks": (
        lambda nn: nn.MultiheadAttention(8, 2, bias=False, batch_first=True),
        {"masks": True},
    ),
}
KEY5, VAL3 = R.standard_normal((5, 2, 5)), R.standard_normal((5, 2, 3))


def _mha(L, case, state=None):
    make, opts = MHA[case]
    L.manual_seed(0)
    m = make(L.nn).double()
    if state is not None:
        m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
    q = L.tensor(TGT, requires_grad=True)
    k = L.tensor(KEY5 if m.kdim == 5 else SRC, requires_grad=True)
    v = L.tensor(VAL3 if m.vdim == 3 else SRC, requires_grad=True)
    if m.batch_first:
        q, k, v = (t.detach().transpose(0, 1).requires_grad_() for t in (q, k, v))
    kw = {}
    if opts.get("masks"):
        kw["attn_mask"] = L.tensor(np.triu(np.ones((4, 5), dtype=bool), 2))
        kw["key_padding_mask"] = L.tensor([[False] * 4 + [True], [False] * 5])
    out, weights = m(q, k, v, **kw)
    w = L.tensor(np.sin(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=L.float64)
    ((out * w).sum() + (weights * weights).sum()).backward()
    grads = {n: p.grad.numpy() for n, p in m.named_parameters()}
    return (
        m,
        out.detach().numpy(),
        weights.detach().numpy(),
        [t.grad.numpy() for t in (q, k, v)],
        grads,
    )


@pytest.mark.parametrize("case", list(MHA))
def test_multihead_attention_options_match_pytorch(case):
    rt = pytest.importorskip("torch")
    m_rt, out_rt, w_rt, g_rt, p_rt = _mha(rt, case)
    state = {k: v.detach().numpy() for k, v in m_rt.state_dict().items()}
    m, out, w, g, p = _mha(tg, case, state)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in m_rt.state_dict().items()
    ]
    np.testing.assert_allclose(out, out_rt, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w, w_rt, rtol=1e-9, atol=1e-11)
    for a, b in zip(g, g_rt, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-11)
    assert p.keys() == p_rt.keys()
    for k in p:
        np.testing.assert_allclose(p[k], p_rt[k], rtol=1e-8, atol=1e-11, err_msg=k)
