"""torch.nn.utils.rnn: pad_sequence, unpad_sequence, and PackedSequence helpers
(pack_padded_sequence / pad_packed_sequence / pack_sequence) that round-trip the padded
data; the recurrent layers themselves take padded input.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager.nn.utils.rnn import pad_sequence
    >>> pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True).tolist()
    [[1, 2, 3], [4, 0, 0]]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tracegrad.eager import torch_ops as O
from tracegrad.eager._tensor import Tensor, tensor


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:  # fmt: skip
    """Stack variable-length (L_i, *) tensors into (L_max, B, *) (or (B, L_max, *)),
    filled with padding_value; differentiable in each sequence (F.pad, then stack)."""
    from tracegrad.eager.nn.functional import pad

    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    seqs = list(sequences)
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(pad(s, tuple(widths), value=padding_value) if extra else s)
    return O.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    x = padded_sequences if batch_first else O.transpose(padded_sequences, 0, 1)
    return [x[i, : int(n)] for i, n in enumerate(_lengths(lengths))]


def _lengths(lengths) -> list:
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


class PackedSequence(NamedTuple):
    """The padded (batch_first) data with its lengths; `data` holds the packed time-major
    rows as PyTorch's (step 0 of every sequence, then step 1, ...)."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:  # fmt: skip
    n = _lengths(lengths)
    if enforce_sorted and any(a < b for a, b in zip(n, n[1:], strict=False)):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
            "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
            "pack_sequence to sidestep this requirement if you do not need ONNX "
            "exportability."
        )
    order = np.argsort(-np.asarray(n), kind="stable")
    x = input if batch_first else O.transpose(input, 0, 1)  # (B, T, *)
    rows, batch_sizes = [], []
    for t in range(max(n)):
        live = [int(i) for i in order if n[i] > t]
        batch_sizes.append(len(live))
        rows.append(x[tensor(np.array(live, np.int64)), t])
    data = O.cat(rows, 0)
    sorted_idx = None if enforce_sorted else tensor(order.astype(np.int64))
    unsorted = None if enforce_sorted else tensor(np.argsort(order).astype(np.int64))
    return PackedSequence(data, tensor(np.array(batch_sizes, np.int64)), sorted_idx, unsorted)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length=None):  # fmt: skip
    data, sizes = sequence.data, sequence.batch_sizes.tolist()
    b = sizes[0]
    order = list(range(b)) if sequence.sorted_indices is None else sequence.sorted_indices.tolist()
    lengths = [sum(1 for s in sizes if s > j) for j in range(b)]  # per sorted position
    per_seq: list = [[] for _ in range(b)]
    start = 0
    for s in sizes:
        for j in range(s):
            per_seq[j].append(data[start + j])
        start += s
    seqs = [O.stack(rows, 0) for rows in per_seq]
    out = [None] * b
    for j, idx in enumerate(order):
        out[idx] = seqs[j]
    padded = pad_sequence(out, batch_first=True, padding_value=padding_value)
    if total_length is not None and total_length > padded.shape[1]:
        from tracegrad.eager.nn.functional import pad

        widths = [0, 0] * (padded.ndim - 2) + [0, total_length - padded.shape[1]]
        padded = pad(padded, tuple(widths), value=padding_value)
    out_lengths = [0] * b
    for j, idx in enumerate(order):
        out_lengths[idx] = lengths[j]
    padded = padded if batch_first else O.transpose(padded, 0, 1)
    return padded, tensor(np.array(out_lengths, np.int64))


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
