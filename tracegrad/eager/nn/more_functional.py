"""More of torch.nn.functional (issue 26): activations (relu6, hardtanh, hardswish,
hardsigmoid, mish, selu, celu, glu, logsigmoid, softsign, softmin, tanhshrink, threshold,
prelu, ...), dropout1d/2d/3d, distances, interpolate (nearest, nearest-exact, linear/bilinear), pooling
in 1-D, pixel_shuffle, rms_norm, instance_norm, local sizes.

Compositions of the eager ops (rule-table primitives), so their gradients are the table's.

    >>> import tracegrad.eager as torch
    >>> import tracegrad.eager.nn.functional as F
    >>> F.relu6(torch.tensor([-1.0, 3.0, 7.0])).tolist()
    [0.0, 3.0, 6.0]
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.eager import more_ops as M
from tracegrad.eager import torch_ops as O
from tracegrad.eager._tensor import Tensor
from tracegrad.eager.errors import shape_error

cosine_similarity = M.cosine_similarity
pairwise_distance = M.pairwise_distance


def _const(x: Tensor, v) -> Tensor:
    return Tensor._wrap(np.asarray(v, dtype=x._data.dtype))


def _maybe_inplace(input: Tensor, fn, inplace: bool) -> Tensor:
    """fn(input), or with inplace=True written into input: fn then reads a copy, so what
    its nodes saved is not the tensor the write changes (PyTorch's in-place activations
    save their result instead)."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input.clone()))


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    return _maybe_inplace(input, lambda x: O.clamp(x, min_val, max_val), inplace)


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace: bool = False):
    return _maybe_inplace(input, lambda x: O.clamp(x / 6.0 + 0.5, 0.0, 1.0), inplace)


def hardswish(input, inplace: bool = False):
    return _maybe_inplace(input, lambda x: x * O.clamp(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    from tracegrad.eager.nn import functional as F

    return F.softplus(input, beta, threshold)


def mish(input, inplace: bool = False):
    return _maybe_inplace(input, lambda x: x * O.tanh(softplus(x)), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def elu(input, alpha: float = 1.0):
    neg = O.expm1(O.clamp(input, max=0.0)) * alpha
    return O.where(O.gt(input, 0), input, neg)


def selu(input, inplace: bool = False):
    return _maybe_inplace(input, lambda x: elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    def fn(x):
        return O.where(O.gt(x, 0), x, O.expm1(O.clamp(x, max=0.0) / alpha) * alpha)

    return _maybe_inplace(input, fn, inplace)


def glu(input, dim: int = -1):
    a, b = O.chunk(input, 2, dim)
    return a * O.sigmoid(b)


def logsigmoid(input):
    # log(sigmoid(x)) = -softplus(-x), computed stably
    return -softplus(-input)


def softsign(input):
    return input / (O.abs(input) + 1.0)


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    return O.softmax(-input, dim, dtype)


def tanhshrink(input):
    return input - O.tanh(input)


def softshrink(input, lambd: float = 0.5):
    return O.where(
        O.gt(input, lambd),
        input - lambd,
        O.where(O.lt(input, -lambd), input + lambd, _const(input, 0.0)),
    )


def hardshrink(input, lambd: float = 0.5):
    return O.where(O.gt(O.abs(input), lambd), input, _const(input, 0.0))


def threshold(input, threshold: float, value: float, inplace: bool = False):
    return _maybe_inplace(
        input, lambda x: O.where(O.gt(x, threshold), x, _const(x, value)), inplace
    )


def prelu(input, weight):
    w = weight
    if input.ndim >= 2 and weight.numel() > 1:
        w = O.reshape(weight, (-1,) + (1,) * (input.ndim - 2))
    return O.where(O.gt(input, 0), input, input * w)


def _feature_dropout(input, p: float, training: bool, inplace: bool, lead: int, name: str):
    """Zero whole channels: the mask has the input's shape up to the channel dim, 1 after."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    from tracegrad.eager.creation import generator

    batched = input.ndim == lead + 2
    if input.ndim not in (lead + 1, lead + 2):
        raise shape_error(
            name,
            f"{name}: Expected {lead + 1}D or {lead + 2}D input, but received a "
            f"{input.ndim}D input",
            input,
            cls=RuntimeError,
        )
    shape = input._data.shape[: 2 if batched else 1] + (1,) * lead
    keep = generator().random(shape) >= p
    scale = (
        keep.astype(input._data.dtype) / (1.0 - p) if p < 1 else np.zeros(shape, input._data.dtype)
    )
    return _maybe_inplace(input, lambda x: x * _const(x, scale), inplace)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    if not training or p == 0.0:
        return input
    from tracegrad.eager.creation import generator

    alpha_p = -_SELU_ALPHA * _SELU_SCALE
    keep = generator().random(input._data.shape) >= p
    a = ((1 - p) * (1 + p * alpha_p**2)) ** -0.5
    b = -a * alpha_p * p

    def fn(x):
        return (x * _const(x, keep) + _const(x, np.where(keep, 0.0, alpha_p))) * a + b

    return _maybe_inplace(input, fn, inplace)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    dims = tuple(range(-len(tuple(normalized_shape)), 0))
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps)
    out = input * O.rsqrt(O.mean(input * input, dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    dims = tuple(range(2, input.ndim))
    mean = O.mean(input, dims, keepdim=True)
    var = O.var(input, dims, keepdim=True, unbiased=False)
    out = (input - mean) * O.rsqrt(var + eps)
    shape = (1, -1) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * O.reshape(weight, shape)
    if bias is not None:
        out = out + O.reshape(bias, shape)
    return out


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    from tracegrad.eager.nn import functional as F

    sq = input * input
    c = input._data.shape[1]
    padded = F.pad(O.movedim(sq, 1, -1), (size // 2, (size - 1) // 2))
    windows = padded.unfold(-1, size, 1)  # (..., C, size)
    div = O.movedim(O.sum(windows, -1), -1, 1) * (alpha / size) + k
    del c
    return input / div**beta


def pixel_shuffle(input, upscale_factor: int):
    r = upscale_factor
    *lead, c, h, w = input.shape
    out = O.reshape(input, (*lead, c // (r * r), r, r, h, w))
    n = len(lead)
    out = O.permute(out, *range(n), n, n + 3, n + 1, n + 4, n + 2)
    return O.reshape(out, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int):
    r = downscale_factor
    *lead, c, h, w = input.shape
    out = O.reshape(input, (*lead, c, h // r, r, w // r, r))
    n = len(lead)
    out = O.permute(out, *range(n), n, n + 2, n + 4, n + 1, n + 3)
    return O.reshape(out, (*lead, c * r * r, h // r, w // r))


def _pool1d(input, fn, kernel_size, stride, padding, ceil_mode=False):
    ks = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    st = (
        ks if stride is None or stride == [] else (stride if isinstance(stride, int) else stride[0])
    )
    pd = padding if isinstance(padding, int) else padding[0]
    x = O.unsqueeze(input, -2)
    return O.squeeze(fn(x, (1, ks), (1, st), (0, pd)), -2)


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    from tracegrad.eager.nn import functional as F

    if dilation != 1 or ceil_mode:
        raise NotImplementedError("max_pool1d: dilation and ceil_mode are not supported")
    if not return_indices:
        return _pool1d(input, F.max_pool2d, kernel_size, stride, padding)
    # (a 1-row plane: the 2-d pool's flat indices are the 1-d ones)
    ks = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    st = (
        ks if stride is None or stride == [] else (stride if isinstance(stride, int) else stride[0])
    )
    pd = padding if isinstance(padding, int) else padding[0]
    out, idx = F.max_pool2d(O.unsqueeze(input, -2), (1, ks), (1, st), (0, pd), return_indices=True)
    return O.squeeze(out, -2), O.squeeze(idx, -2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    from tracegrad.eager.nn import functional as F

    return _pool1d(input, F.avg_pool2d, kernel_size, stride, padding)


def _adaptive_bounds(n_in: int, n_out: int):
    return [(math.floor(i * n_in / n_out), math.ceil((i + 1) * n_in / n_out)) for i in range(n_out)]


def adaptive_avg_pool1d(input, output_size):
    n = output_size if isinstance(output_size, int) else output_size[0]
    parts = [
        O.mean(O.narrow(input, -1, a, b - a), -1, keepdim=True)
        for a, b in _adaptive_bounds(input._data.shape[-1], n)
    ]
    return O.cat(parts, -1)


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    n = output_size if isinstance(output_size, int) else output_size[0]
    parts = [
        O.amax(O.narrow(input, -1, a, b - a), -1, keepdim=True)
        for a, b in _adaptive_bounds(input._data.shape[-1], n)
    ]
    return O.cat(parts, -1)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = input._data.shape[-2:]
    oh, ow = oh or h, ow or w
    rows = []
    for a, b in _adaptive_bounds(h, oh):
        band = O.narrow(input, -2, a, b - a)
        cols = [
            O.amax(O.narrow(band, -1, c, d - c), (-2, -1), keepdim=True)
            for c, d in _adaptive_bounds(w, ow)
        ]
        rows.append(O.cat(cols, -1))
    return O.cat(rows, -2)


def _nearest_index(n_in: int, n_out: int, scale=None, exact: bool = False) -> np.ndarray:
    s = n_in / n_out if scale is None else 1.0 / scale
    pos = (np.arange(n_out) + 0.5) * s if exact else np.arange(n_out) * s
    return np.minimum(np.floor(pos).astype(np.int64), n_in - 1)


def _linear_weights(n_in: int, n_out: int, align_corners: bool, scale=None):
    if align_corners:
        pos = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = n_in / n_out if scale is None else 1.0 / scale
        pos = np.maximum((np.arange(n_out) + 0.5) * s - 0.5, 0.0)
    lo = np.minimum(np.floor(pos).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, pos - lo


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias: bool = False,
):
    """Resize the spatial dims (all but batch and channel): 'nearest', 'linear',
    'bilinear', 'trilinear' (separable), as index gathers and weighted sums."""
    nsp = input.ndim - 2
    spatial = tuple(input._data.shape[2:])
    if size is not None:
        out_size = (size,) * nsp if isinstance(size, int) else tuple(size)
        scales = (None,) * nsp
    else:
        sf = (
            (scale_factor,) * nsp
            if not isinstance(scale_factor, (tuple, list))
            else tuple(scale_factor)
        )
        out_size = tuple(int(math.floor(n * f)) for n, f in zip(spatial, sf, strict=True))
        scales = (None,) * nsp if recompute_scale_factor else sf
    x = input
    for k in range(nsp):
        d = 2 + k
        if mode in ("nearest", "nearest-exact"):
            exact = mode == "nearest-exact"
            index = _nearest_index(spatial[k], out_size[k], scales[k], exact)
            x = O.index_select(x, d, Tensor._wrap(index))
        elif mode in ("linear", "bilinear", "trilinear", "bicubic"):
            if mode == "bicubic":
                raise NotImplementedError("interpolate(mode='bicubic') is not supported")
            lo, hi, t = _linear_weights(spatial[k], out_size[k], bool(align_corners), scales[k])
            shape = [1] * x.ndim
            shape[d] = -1
            tw = _const(x, t.reshape(shape))
            a = O.index_select(x, d, Tensor._wrap(lo))
            b = O.index_select(x, d, Tensor._wrap(hi))
            x = a * (1.0 - tw) + b * tw
        else:
            raise NotImplementedError(f"interpolate(mode={mode!r}) is not supported")
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, "bilinear", align_corners=True)


def gaussian_nll_loss(
    input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"
):
    v = O.clamp(var, min=eps)
    loss = (O.log(v) + (input - target) ** 2 / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return O.mean(loss)
    if reduction == "sum":
        return O.sum(loss)
    return loss


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean"):
    cos = cosine_similarity(input1, input2, dim=-1, eps=1e-8)
    pos = 1.0 - cos
    neg = O.clamp(cos - margin, min=0.0)
    loss = O.where(O.eq(target, 1), pos, O.where(O.eq(target, -1), neg, _const(cos, 0.0)))
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean"):
    return _reduce(O.clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, reduction: str = "mean"):
    neg = O.clamp(margin - input, min=0.0)
    loss = O.where(O.eq(target, 1), input, _const(input, 0.0)) + O.where(
        O.eq(target, -1), neg, _const(input, 0.0)
    )
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, reduction: str = "mean"):
    return _reduce(softplus(-target * input), reduction)


def triplet_margin_loss(
    anchor,
    positive,
    negative,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: str = "mean",
):
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = O.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(O.clamp(d_pos - d_neg + margin, min=0.0), reduction)


def poisson_nll_loss(
    input,
    target,
    log_input: bool = True,
    full: bool = False,
    eps: float = 1e-8,
    reduction: str = "mean",
):
    if log_input:
        loss = O.exp(input) - target * input
    else:
        loss = input - target * O.log(input + eps)
    if full:
        t = target._data
        stirling = np.where(
            t > 1,
            t * np.log(np.where(t > 1, t, 1)) - t + 0.5 * np.log(2 * np.pi * np.where(t > 1, t, 1)),
            0,
        )
        loss = loss + _const(loss, stirling)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction: str = "mean"):
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = O.mean(loss, -1)
    return _reduce(loss, reduction)


def _pair(v) -> tuple:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)


def _patch_index(size, kernel, dilation, stride):
    """rows/cols (kh*kw, L) of each kernel offset at each output position (im2col)."""
    (h, w), (kh, kw), (dh, dw), (sh, sw) = size, kernel, dilation, stride
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    ki, kj = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    pi, pj = np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij")
    rows = ki.reshape(-1, 1) * dh + pi.reshape(1, -1) * sh
    cols = kj.reshape(-1, 1) * dw + pj.reshape(1, -1) * sw
    return rows, cols, oh, ow


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), each column one sliding block (an
    index gather of the padded input, so the gradient sums overlapping blocks)."""
    from tracegrad.eager.nn import functional as F

    if input.ndim not in (3, 4):
        raise shape_error(
            "unfold",
            f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)",
            input,
            cls=NotImplementedError,
        )
    batched = input.ndim == 4
    x = input if batched else O.unsqueeze(input, 0)
    kernel, dil, pad, st = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    if any(pad):
        x = F.pad(x, (pad[1], pad[1], pad[0], pad[0]))
    n, c, h, w = x.shape
    rows, cols, _, _ = _patch_index((h, w), kernel, dil, st)
    spec = (("slice", 0, n, 1), ("slice", 0, c, 1), ("array", 0), ("array", 1))
    from tracegrad.eager._tensor import apply_op
    from tracegrad.ops import table as T

    blocks = apply_op(T.getitem, (x, rows, cols), {"spec": spec}, name="Im2ColBackward0")
    out = O.reshape(blocks, (n, c * kernel[0] * kernel[1], rows.shape[1]))
    return out if batched else O.squeeze(out, 0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: (N, C * kh * kw, L) summed into (N, C, H, W)."""
    from tracegrad.eager._tensor import apply_op
    from tracegrad.ops import table as T

    batched = input.ndim == 3
    x = input if batched else O.unsqueeze(input, 0)
    kernel, dil, pad, st = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    (oh_, ow_) = _pair(output_size)
    h, w = oh_ + 2 * pad[0], ow_ + 2 * pad[1]
    rows, cols, _, _ = _patch_index((h, w), kernel, dil, st)
    n, ckk, length = x.shape
    k = kernel[0] * kernel[1]
    if ckk % k or length != rows.shape[1]:
        raise shape_error(
            "fold",
            f"Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, and input's dimension 2 to match the calculated number of sliding "
            f"blocks {rows.shape[1]}, but got input.size(1)={ckk}, input.size(2)={length}.",
            input,
            cls=RuntimeError,
        )
    c = ckk // k
    blocks = O.reshape(x, (n, c, k, length))
    spec = (("slice", 0, n, 1), ("slice", 0, c, 1), ("array", 0), ("array", 1))
    out = apply_op(
        T.index_add_zeros,
        (blocks, rows, cols),
        {"spec": spec, "shape": (n, c, h, w)},
        name="Col2ImBackward0",
    )
    if any(pad):
        out = out[:, :, pad[0] : pad[0] + oh_, pad[1] : pad[1] + ow_]
    return out if batched else O.squeeze(out, 0)


def bilinear(input1, input2, weight, bias=None):
    out = M.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def gumbel_softmax(logits, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """softmax((logits + Gumbel noise) / tau); hard=True gives the one-hot argmax in the
    forward pass with the soft sample's gradient (straight-through)."""
    from tracegrad.eager.creation import generator

    g = -np.log(generator().exponential(size=logits._data.shape))
    y = O.softmax((logits + _const(logits, g)) / tau, dim)
    if not hard:
        return y
    idx = np.argmax(y._data, axis=dim)
    hard_y = np.zeros_like(y._data)
    np.put_along_axis(hard_y, np.expand_dims(idx, dim), 1.0, axis=dim)
    return _const(y, hard_y) - y.detach() + y


def pdist(input, p: float = 2.0):
    """The condensed pairwise distances of the rows (i < j)."""
    n = input._data.shape[0]
    i, j = np.triu_indices(n, 1)
    return O.norm(input[Tensor._wrap(i)] - input[Tensor._wrap(j)], p, dim=-1)


def channel_shuffle(input, groups: int):
    n, c = input._data.shape[:2]
    rest = tuple(input._data.shape[2:])
    x = O.reshape(input, (n, groups, c // groups, *rest))
    return O.reshape(O.transpose(x, 1, 2), (n, c, *rest))


native_channel_shuffle = channel_shuffle


def _inplace_of(fn):
    def op(input, *args, **kwargs):
        return input.copy_(fn(input.clone(), *args, **kwargs))

    op.__name__ = fn.__name__ + "_"
    op.__doc__ = f"In-place {fn.__name__}."
    return op


selu_ = _inplace_of(selu)
celu_ = _inplace_of(celu)
hardtanh_ = _inplace_of(hardtanh)
threshold_ = _inplace_of(threshold)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):  # fmt: skip
    """Sums, means or maxima of bags of embedding rows: input (B, N) makes B bags of N, or
    1-d input with offsets marks where each bag starts. An embedding gather, then
    index_add into the bags (max: per-bag amax); padding_idx rows are left out."""
    from tracegrad.eager.nn import functional as F

    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
            "on GitHub."
        )
    idx = input._data
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None")
        b, n = idx.shape
        starts = np.arange(b) * n
        flat = O.reshape(input, (-1,))
        if per_sample_weights is not None:
            per_sample_weights = O.reshape(per_sample_weights, (-1,))
    else:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = offsets._data.astype(np.int64)
        if include_last_offset:
            starts = starts[:-1]
        b = starts.shape[0]
        flat = input
    total = flat._data.shape[0]
    rows = F.embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq)
    bag = np.searchsorted(starts, np.arange(total), side="right") - 1
    keep = np.ones(total, bool) if padding_idx is None else flat._data != padding_idx
    d = weight.shape[1]
    if per_sample_weights is not None:
        rows = rows * O.unsqueeze(per_sample_weights, 1)
    if mode == "max":
        outs = []
        for i in range(b):
            sel = np.flatnonzero((bag == i) & keep)
            if sel.size:
                outs.append(O.amax(rows[Tensor._wrap(sel)], 0))
            else:
                outs.append(Tensor._wrap(np.zeros(d, weight._data.dtype)))
        return O.stack(outs, 0)
    if not keep.all():
        rows = rows * _const(rows, keep[:, None])
    zeros = Tensor._wrap(np.zeros((b, d), weight._data.dtype))
    sums = O.index_add(zeros, 0, Tensor._wrap(bag.astype(np.int64)), rows)
    if mode == "sum":
        return sums
    counts = np.bincount(bag[keep], minlength=b).astype(weight._data.dtype)
    return sums / _const(sums, np.maximum(counts, 1)[:, None])


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean"):  # fmt: skip
    """sum_{j != y} max(0, margin - x[y] + x[j])^p / C per row (times weight[y])."""
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = O.unsqueeze(input, 0) if input.ndim == 1 else input
    t = O.reshape(target, (-1,))
    c = x._data.shape[1]
    picked = O.gather(x, 1, O.unsqueeze(t, 1))
    z = O.clamp(margin - picked + x, min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * O.unsqueeze(weight[t], 1)
    other = np.ones(x._data.shape, dtype=bool)
    other[np.arange(x._data.shape[0]), t._data] = False
    loss = O.sum(z * _const(z, other), 1) / c
    if input.ndim == 1:
        loss = O.squeeze(loss, 0)
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None,
                           reduction: str = "mean"):  # fmt: skip
    """sum over target classes j (the -1-terminated prefix of target) and non-target
    classes i of max(0, 1 - (x[j] - x[i])) / C."""
    x = O.unsqueeze(input, 0) if input.ndim == 1 else input
    tgt = target._data.reshape(x._data.shape)
    n, c = x._data.shape
    rows = []
    for r in range(n):
        labels = []
        for v in tgt[r]:
            if v < 0:
                break
            labels.append(int(v))
        is_target = np.zeros(c, bool)
        is_target[labels] = True
        if not labels:
            rows.append(O.sum(x[r] * 0.0))
            continue
        xj = O.unsqueeze(x[r][Tensor._wrap(np.array(labels))], 1)  # (J, 1)
        hinge = O.clamp(1.0 - (xj - O.unsqueeze(x[r], 0)), min=0.0)  # (J, C)
        rows.append(O.sum(hinge * _const(hinge, ~is_target[None, :])) / c)
    loss = O.stack(rows, 0)
    if input.ndim == 1:
        loss = O.squeeze(loss, 0)
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean"):  # fmt: skip
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = O.minimum(d_neg, dist(positive, negative))
    return _reduce(O.clamp(d_pos - d_neg + margin, min=0.0), reduction)


def lp_pool1d(input, norm_type: float, kernel_size: int, stride=None, ceil_mode: bool = False):
    """(sum over each window of x^p)^(1/p), as PyTorch: avg_pool of x^p times the size."""
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    pooled = avg_pool1d(O.pow(input, norm_type), k, stride)
    return O.pow(O.sign(pooled) * O.relu(O.abs(pooled)) * k, 1.0 / norm_type)


def lp_pool2d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
    from tracegrad.eager.nn import functional as F

    kh, kw = _pair(kernel_size)
    pooled = F.avg_pool2d(O.pow(input, norm_type), (kh, kw), stride)
    return O.pow(O.sign(pooled) * O.relu(O.abs(pooled)) * (kh * kw), 1.0 / norm_type)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False):  # fmt: skip
    """Leaky ReLU with slope ~ U(lower, upper) per element when training, else the mean."""
    if training:
        from tracegrad.eager.creation import generator

        slope = generator().uniform(lower, upper, input._data.shape)
    else:
        slope = (lower + upper) / 2

    def fn(x):
        return O.where(O.ge(x, 0), x, x * _const(x, slope))

    return _maybe_inplace(input, fn, inplace)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """AlphaDropout with one keep/drop draw per channel."""
    if not training or p == 0.0:
        return input
    from tracegrad.eager.creation import generator

    alpha_p = -_SELU_ALPHA * _SELU_SCALE
    shape = input._data.shape[:2] + (1,) * (input.ndim - 2)
    keep = generator().random(shape) >= p
    a = ((1 - p) * (1 + p * alpha_p**2)) ** -0.5
    b = -a * alpha_p * p

    def fn(x):
        return (x * _const(x, keep) + _const(x, np.where(keep, 0.0, alpha_p))) * a + b

    return _maybe_inplace(input, fn, inplace)


# ------------------------------------------------------------------ 3-d: conv, pooling


def _triple(v) -> tuple:
    return (int(v),) * 3 if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)


def _depth_slices(x, k: int, stride: int, dilation: int, out: int):
    """For each kernel depth offset, the input depths it meets: x[:, :, kd*dil :: stride]."""
    return [
        x[:, :, kd * dilation : kd * dilation + (out - 1) * stride + 1 : stride] for kd in range(k)
    ]


def _to_planes(x):
    """(N, C, D, H, W) -> (N * D, C, H, W)."""
    n, c, d, h, w = x.shape
    return O.reshape(O.transpose(x, 1, 2), (n * d, c, h, w))


def _from_planes(y, n: int, d: int):
    """(N * D, C, H, W) -> (N, C, D, H, W)."""
    _, c, h, w = y.shape
    return O.transpose(O.reshape(y, (n, d, c, h, w)), 1, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1,
           padding_mode: str = "zeros"):  # fmt: skip
    """A sum over the kernel's depth of conv2d of depth slices (the 2-d convolution's
    gradients serve), then the bias."""
    from tracegrad.eager.nn import functional as F

    unbatched = input.ndim == 4
    x = O.unsqueeze(input, 0) if unbatched else input
    if x.ndim != 5:
        raise RuntimeError(
            f"Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of "
            f"size: {list(input.shape)}"
        )
    st, dil = _triple(stride), _triple(dilation)
    kd, kh, kw = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pad3 = (0, 0, 0)
        else:  # 'same' (stride 1)
            total = [dl * (k - 1) for dl, k in zip(dil, (kd, kh, kw), strict=True)]
            widths = [(t // 2, t - t // 2) for t in total]
            flat = tuple(v for lo_hi in reversed(widths) for v in lo_hi)
            x = F.pad(x, flat, mode="constant" if padding_mode == "zeros" else padding_mode)
            pad3 = (0, 0, 0)
    else:
        pad3 = _triple(padding)
    if any(pad3):
        flat = (pad3[2], pad3[2], pad3[1], pad3[1], pad3[0], pad3[0])
        x = F.pad(x, flat, mode="constant" if padding_mode == "zeros" else padding_mode)
    n, d = x.shape[0], x.shape[2]
    do = (d - dil[0] * (kd - 1) - 1) // st[0] + 1
    out = None
    for k, xs in enumerate(_depth_slices(x, kd, st[0], dil[0], do)):
        y = F.conv2d(_to_planes(xs), weight[:, :, k], None, st[1:], 0, dil[1:], groups)
        out = y if out is None else out + y
    out = _from_planes(out, n, do)
    if bias is not None:
        out = out + O.reshape(bias, (1, -1, 1, 1, 1))
    return O.squeeze(out, 0) if unbatched else out


def _pool3d(input, kernel_size, stride, padding, fn2d, combine, name):
    from tracegrad.eager.nn import functional as F

    unbatched = input.ndim == 4
    x = O.unsqueeze(input, 0) if unbatched else input
    k = _triple(kernel_size)
    st = k if stride is None or stride == [] else _triple(stride)
    pd = _triple(padding)
    if pd[0]:
        fill = -np.inf if name == "max" else 0.0
        x = F.pad(x, (0, 0, 0, 0, pd[0], pd[0]), value=fill)
    n, d = x.shape[0], x.shape[2]
    do = (d - k[0]) // st[0] + 1
    parts = [
        fn2d(_to_planes(xs), k[1:], st[1:], pd[1:]) for xs in _depth_slices(x, k[0], st[0], 1, do)
    ]
    out = combine(parts)
    out = _from_planes(out, n, do)
    return O.squeeze(out, 0) if unbatched else out


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):  # fmt: skip
    from tracegrad.eager.nn import functional as F

    if dilation not in (1, (1, 1, 1)) or ceil_mode or return_indices:
        raise NotImplementedError("max_pool3d: dilation, ceil_mode and return_indices")

    def combine(parts):
        out = parts[0]
        for p in parts[1:]:
            out = O.maximum(out, p)
        return out

    return _pool3d(input, kernel_size, stride, padding, F.max_pool2d, combine, "max")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):  # fmt: skip
    from tracegrad.eager.nn import functional as F

    if ceil_mode or not count_include_pad or divisor_override is not None:
        raise NotImplementedError(
            "avg_pool3d: ceil_mode, count_include_pad=False, divisor_override"
        )

    def combine(parts):
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return total / float(len(parts))

    return _pool3d(input, kernel_size, stride, padding, F.avg_pool2d, combine, "avg")


def _adaptive3d(input, output_size, reduce):
    size = (
        _triple(output_size) if not isinstance(output_size, (tuple, list)) else tuple(output_size)
    )
    spatial = input.shape[-3:]
    size = tuple(s if s is not None else n for s, n in zip(size, spatial, strict=True))
    x = input
    for axis, (n_in, n_out) in enumerate(zip(spatial, size, strict=True)):
        dim = x.ndim - 3 + axis
        parts = [reduce(O.narrow(x, dim, a, b - a), dim) for a, b in _adaptive_bounds(n_in, n_out)]
        x = O.cat(parts, dim)
    return x


def adaptive_avg_pool3d(input, output_size):
    return _adaptive3d(input, output_size, lambda t, d: O.mean(t, d, keepdim=True))


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    return _adaptive3d(input, output_size, lambda t, d: O.amax(t, d, keepdim=True))


# ------------------------------------------------------------------ CTC


_CTC_NEG = -1e30  # log(0) stand-in: finite, so logsumexp and its gradient stay finite


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False):  # fmt: skip
    """Connectionist temporal classification: -log of the summed probability of every
    alignment of each target, by the forward (alpha) recursion over the blank-extended
    target in log space, written in tensor ops (its gradient is the table's). log_probs
    is (T, N, C) (or (T, C) unbatched); targets (N, S) padded or 1-d concatenated."""
    unbatched = log_probs.ndim == 2
    lp = O.unsqueeze(log_probs, 1) if unbatched else log_probs
    n = lp.shape[1]

    def ints(v):
        if isinstance(v, Tensor):
            return [int(a) for a in np.atleast_1d(v._data).tolist()]
        return [int(a) for a in np.atleast_1d(v)]

    in_len, tgt_len = ints(input_lengths), ints(target_lengths)
    tg_data = targets._data if isinstance(targets, Tensor) else np.asarray(targets)
    if unbatched and tg_data.ndim == 1 and len(tgt_len) == 1:
        tg_data = tg_data[None, :]
    offsets = np.concatenate([[0], np.cumsum(tgt_len)]) if tg_data.ndim == 1 else None
    losses = []
    for b in range(n):
        s_len = tgt_len[b]
        labels = (
            tg_data[offsets[b] : offsets[b] + s_len] if offsets is not None else tg_data[b, :s_len]
        ).astype(np.int64)
        ext = np.full(2 * s_len + 1, blank, np.int64)
        ext[1::2] = labels
        size = ext.size
        skip_ok = np.zeros(size, bool)  # alpha[s-2] may jump to s: a label unlike s-2's
        skip_ok[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
        seq = lp[: in_len[b], b]  # (T_b, C)
        emit = seq[:, Tensor._wrap(ext)]  # (T_b, size)
        start = np.full(size, _CTC_NEG)
        start[0] = 0.0
        if size > 1:
            start[1] = 0.0
        alpha = emit[0] + _const(emit, np.where(start == 0.0, 0.0, _CTC_NEG))
        neg1 = _const(emit, np.full(1, _CTC_NEG))
        neg2 = _const(emit, np.full(2, _CTC_NEG))
        skip_mask = Tensor._wrap(skip_ok)
        for t in range(1, in_len[b]):
            one = O.cat([neg1, alpha[:-1]], 0)
            two = O.where(skip_mask, O.cat([neg2, alpha[:-2]], 0), _const(alpha, _CTC_NEG))
            alpha = O.logsumexp(O.stack([alpha, one, two], 0), 0) + emit[t]
        tail = alpha[-2:] if size > 1 else alpha[-1:]
        loss = -O.logsumexp(tail, 0)
        if zero_infinity and loss._data > 1e29:
            loss = loss * 0.0
        losses.append(loss)
    out = O.stack(losses, 0)
    if reduction == "mean":
        lengths = np.maximum(np.asarray(tgt_len, dtype=out._data.dtype), 1)
        return O.mean(out / _const(out, lengths))
    if reduction == "sum":
        return O.sum(out)
    return O.squeeze(out, 0) if unbatched else out


def _unpool(input, indices, kernel_size, stride, padding, output_size, n: int):
    k = (kernel_size,) * n if isinstance(kernel_size, int) else tuple(kernel_size)
    st = k if stride is None else ((stride,) * n if isinstance(stride, int) else tuple(stride))
    pd = (padding,) * n if isinstance(padding, int) else tuple(padding)
    spatial = tuple(input.shape[-n:])
    if output_size is None:
        size = tuple(
            (s - 1) * t - 2 * p + kk for s, t, p, kk in zip(spatial, st, pd, k, strict=True)
        )
    else:
        size = tuple(output_size)[-n:]
    lead = tuple(input.shape[:-n])
    flat_in = O.reshape(input, (*lead, -1))
    idx = O.reshape(indices, (*lead, -1))
    zeros = Tensor._wrap(np.zeros((*lead, int(np.prod(size))), input._data.dtype))
    out = M.scatter(zeros, len(lead), idx, flat_in)
    return O.reshape(out, (*lead, *size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool1d's partial inverse: each value back at its index, zeros elsewhere."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool2d's partial inverse: each value back at its index, zeros elsewhere."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):  # fmt: skip
    """conv3d's adjoint: the input spread out by `stride` (zeros between), padded by
    dilation * (k - 1) - padding (+ output_padding at the end), then conv3d with the
    kernel flipped and its in/out channels swapped per group."""
    from tracegrad.eager._tensor import apply_op
    from tracegrad.ops import table as T

    unbatched = input.ndim == 4
    x = O.unsqueeze(input, 0) if unbatched else input
    st, pd, op, dil = _triple(stride), _triple(padding), _triple(output_padding), _triple(dilation)
    n, c = x.shape[:2]
    spatial = tuple(x.shape[2:])
    k = tuple(weight.shape[2:])
    if any(s > 1 for s in st):
        up = tuple((m - 1) * s + 1 for m, s in zip(spatial, st, strict=True))
        spec = (("slice", 0, n, 1), ("slice", 0, c, 1)) + tuple(
            ("slice", 0, u, s) for u, s in zip(up, st, strict=True)
        )
        x = apply_op(T.index_add_zeros, (x,), {"spec": spec, "shape": (n, c, *up)})
    lo = [d * (kk - 1) - p for d, kk, p in zip(dil, k, pd, strict=True)]
    hi = [a + o for a, o in zip(lo, op, strict=True)]
    from tracegrad.eager.nn import functional as F

    pads = []
    for a, b in zip(reversed(lo), reversed(hi), strict=True):
        pads += [max(a, 0), max(b, 0)]
    if any(pads):
        x = F.pad(x, tuple(pads))
    crop = [slice(None), slice(None)]
    for a, b, m in zip(lo, hi, x.shape[2:], strict=True):
        crop.append(slice(-a if a < 0 else 0, m + b if b < 0 else m))
    if any(a < 0 or b < 0 for a, b in zip(lo, hi, strict=True)):
        x = x[tuple(crop)]
    cin_g = weight.shape[0] // groups
    parts = [
        O.transpose(weight[g * cin_g : (g + 1) * cin_g], 0, 1) for g in range(groups)
    ]  # each (cout_g, cin_g, k)
    w = O.flip(O.cat(parts, 0), 2, 3, 4)
    out = conv3d(x, w, bias, 1, 0, dil, groups)
    return O.squeeze(out, 0) if unbatched else out


def lp_pool3d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
    k = _triple(kernel_size)
    pooled = avg_pool3d(O.pow(input, norm_type), k, stride)
    return O.pow(O.sign(pooled) * O.relu(O.abs(pooled)) * float(np.prod(k)), 1.0 / norm_type)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool3d's partial inverse: each value back at its flat index, zeros elsewhere."""
    return _unpool(input, indices, kernel_size, stride, padding, output_size, 3)
