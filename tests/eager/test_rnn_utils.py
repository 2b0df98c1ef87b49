"""torch.nn.utils.rnn (issue 26): pad_sequence (both sides, batch_first, padding value),
pack_padded_sequence / pad_packed_sequence / pack_sequence round trips, and
RNN/LSTM/GRU on a PackedSequence (bidirectional, two layers, unsorted lengths): outputs,
final states and gradients equal PyTorch's; by hand without torch."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(0)
SEQS = [R.standard_normal((n, 3)) for n in (4, 2, 3)]
X = R.standard_normal((3, 5, 4))
LENS = [5, 2, 4]


def _utils(L):
    ts = [L.tensor(s, requires_grad=True) for s in SEQS]
    rnn = L.nn.utils.rnn
    p = rnn.pad_sequence(ts, batch_first=True, padding_value=-1.0)
    left = rnn.pad_sequence(ts, padding_side="left")
    packed = rnn.pack_padded_sequence(p, [4, 2, 3], batch_first=True, enforce_sorted=False)
    back, lens = rnn.pad_packed_sequence(
        packed, batch_first=True, padding_value=-2.0, total_length=6
    )
    sorted_pack = rnn.pack_sequence([ts[0], ts[2], ts[1]])
    total = p.sum() + (back * back).sum() + (left * 2).sum() + (sorted_pack.data**2).sum()
    total.backward()
    return [
        p.detach().numpy(), left.detach().numpy(), packed.data.detach().numpy(),
        packed.batch_sizes.numpy(), packed.sorted_indices.numpy(), back.detach().numpy(),
        lens.numpy(), sorted_pack.data.detach().numpy(), *[t.grad.numpy() for t in ts],
    ]  # fmt: skip


def test_pad_and_pack_match_pytorch():
    rt = pytest.importorskip("torch")
    for a, b in zip(_utils(tg), _utils(rt), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _packed_rnn(L, kind, state=None):
    L.manual_seed(0)
    m = getattr(L.nn, kind)(4, 3, num_layers=2, batch_first=True, bidirectional=True).double()
    if state is not None:
        m.load_state_dict({k: L.tensor(v) for k, v in state.items()})
    x = L.tensor(X, requires_grad=True)
    packed = L.nn.utils.rnn.pack_padded_sequence(x, LENS, batch_first=True, enforce_sorted=False)
    out, h = m(packed)
    padded, lens = L.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    hs = h if isinstance(h, tuple) else (h,)
    ((padded**2).sum() + sum((t * 3).sum() for t in hs)).backward()
    grads = [p.grad.numpy() for p in m.parameters()]
    return m, [padded.detach().numpy(), *(t.detach().numpy() for t in hs), x.grad.numpy(), *grads]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_take_packed_sequences(kind):
    rt = pytest.importorskip("torch")
    m_rt, theirs = _packed_rnn(rt, kind)
    state = {k: v.detach().numpy() for k, v in m_rt.state_dict().items()}
    _, ours = _packed_rnn(tg, kind, state)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_by_hand():
    p = tg.nn.utils.rnn.pad_sequence([tg.tensor([1, 2, 3]), tg.tensor([4])], batch_first=True)
    assert p.tolist() == [[1, 2, 3], [4, 0, 0]]
    packed = tg.nn.utils.rnn.pack_padded_sequence(p, [3, 1], batch_first=True)
    assert packed.data.tolist() == [1, 4, 2, 3] and packed.batch_sizes.tolist() == [2, 1, 1]
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        tg.nn.utils.rnn.pack_padded_sequence(p, [1, 3], batch_first=True)
    # a GRU's final state on a packed batch is each sequence's state at its own length
    tg.manual_seed(0)
    gru = tg.nn.GRU(1, 2, batch_first=True)
    x = tg.tensor([[[1.0], [2.0], [3.0]], [[1.0], [0.0], [0.0]]])
    packed = tg.nn.utils.rnn.pack_padded_sequence(x, [3, 1], batch_first=True)
    _, h = gru(packed)
    _, h_short = gru(x[1:, :1])
    np.testing.assert_allclose(h[0, 1].detach().numpy(), h_short[0, 0].detach().numpy())
