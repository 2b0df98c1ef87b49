"""More torch.nn classes (issue 26), by how often public model code uses them: activation
modules, feature dropout, Upsample, 1-D pooling, padding, PixelShuffle, RMSNorm,
InstanceNorm, the RNN/LSTM/GRU cells, Bilinear, PReLU, distances and more losses.

Same constructor arguments, parameter names, shapes and initialization as PyTorch (so a
torch state_dict loads); each forward is a composition of rule-table primitives.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager import nn
    >>> cell = nn.GRUCell(3, 4)
    >>> [k for k, _ in cell.named_parameters()]
    ['weight_ih', 'weight_hh', 'bias_ih', 'bias_hh']
    >>> cell(torch.zeros(2, 3)).shape
    torch.Size([2, 4])
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.eager import dtypes as _dt
from tracegrad.eager import torch_ops as O
from tracegrad.eager._tensor import Tensor
from tracegrad.eager.nn import functional as F
from tracegrad.eager.nn import init
from tracegrad.eager.nn.modules import Module, Parameter


def _param(shape, dtype=None, fill=None) -> Parameter:
    npd = _dt.to_numpy_dtype(dtype) if dtype is not None else _dt.default_float()
    data = np.empty(shape, npd) if fill is None else np.full(shape, fill, npd)
    return Parameter(Tensor._wrap(data))


def _simple(name: str, fn, doc: str, **defaults):
    """An activation Module calling fn(input, **its arguments), with PyTorch's repr."""

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        names = list(defaults)
        values = dict(defaults)
        for k, v in zip(names, args, strict=False):
            values[k] = v
        values.update(kwargs)
        for k, v in values.items():
            setattr(self, k, v)

    def forward(self, input):
        return fn(input, **{k: getattr(self, k) for k in defaults})

    def extra_repr(self):
        parts = []
        for k in defaults:
            cur = getattr(self, k)
            if k == "inplace":
                if cur:
                    parts.append("inplace=True")
            else:
                parts.append(f"{k}={cur}")
        return ", ".join(parts)

    return type(
        name,
        (Module,),
        {
            "__init__": __init__,
            "forward": forward,
            "extra_repr": extra_repr,
            "__doc__": doc,
            "__module__": __name__,
        },
    )


ReLU6 = _simple("ReLU6", F.relu6, "min(max(0, x), 6).", inplace=False)
Hardtanh = _simple(
    "Hardtanh", F.hardtanh, "clamp(x, min_val, max_val).", min_val=-1.0, max_val=1.0, inplace=False
)
Hardswish = _simple("Hardswish", F.hardswish, "x * relu6(x + 3) / 6.", inplace=False)
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "relu6(x + 3) / 6.", inplace=False)
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x)).", inplace=False)
SELU = _simple("SELU", F.selu, "scale * elu(x, alpha) (self-normalizing).", inplace=False)
CELU = _simple(
    "CELU", F.celu, "max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).", alpha=1.0, inplace=False
)
GLU = _simple("GLU", F.glu, "a * sigmoid(b) of the two halves along dim.", dim=-1)
LogSigmoid = _simple("LogSigmoid", F.logsigmoid, "log(sigmoid(x)).")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|).")
Softmin = _simple("Softmin", F.softmin, "softmax(-x, dim).", dim=None)
Softshrink = _simple(
    "Softshrink", F.softshrink, "x -+ lambd outside [-lambd, lambd], else 0.", lambd=0.5
)
Hardshrink = _simple("Hardshrink", F.hardshrink, "x outside [-lambd, lambd], else 0.", lambd=0.5)
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x).")
Threshold = _simple(
    "Threshold",
    F.threshold,
    "x where x > threshold, else value.",
    threshold=0.0,
    value=0.0,
    inplace=False,
)
Dropout1d = _simple(
    "Dropout1d", None, "Zeroes whole channels of (N, C, L) input.", p=0.5, inplace=False
)
Dropout2d = _simple(
    "Dropout2d", None, "Zeroes whole channels of (N, C, H, W) input.", p=0.5, inplace=False
)
Dropout3d = _simple(
    "Dropout3d", None, "Zeroes whole channels of (N, C, D, H, W) input.", p=0.5, inplace=False
)
AlphaDropout = _simple(
    "AlphaDropout", None, "Dropout that keeps SELU's mean and variance.", p=0.5, inplace=False
)
Dropout1d.forward = lambda self, x: F.dropout1d(x, self.p, self.training, self.inplace)
Dropout2d.forward = lambda self, x: F.dropout2d(x, self.p, self.training, self.inplace)
Dropout3d.forward = lambda self, x: F.dropout3d(x, self.p, self.training, self.inplace)
AlphaDropout.forward = lambda self, x: F.alpha_dropout(x, self.p, self.training, self.inplace)
for _cls in (Dropout1d, Dropout2d, Dropout3d, AlphaDropout):
    _cls.extra_repr = lambda self: f"p={self.p}, inplace={self.inplace}"
Softshrink.extra_repr = Hardshrink.extra_repr = lambda self: str(self.lambd)
Softmax2d = _simple("Softmax2d", lambda x: O.softmax(x, -3), "softmax over the channel dim.")
CosineSimilarity = _simple(
    "CosineSimilarity", F.cosine_similarity, "cosine along dim.", dim=1, eps=1e-8
)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


CosineSimilarity.forward = lambda self, x1, x2: F.cosine_similarity(x1, x2, self.dim, self.eps)
CosineSimilarity.extra_repr = lambda self: ""


class PReLU(Module):
    """max(0, x) + weight * min(0, x); weight has num_parameters entries (one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = _param((num_parameters,), dtype, fill=init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Upsample(Module):
    def __init__(
        self,
        size=None,
        scale_factor=None,
        mode: str = "nearest",
        align_corners=None,
        recompute_scale_factor=None,
    ):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, int) else scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class _Pool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, **kwargs):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        for k, v in kwargs.items():
            setattr(self, k, v)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(_Pool1d):
    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False
    ):
        if dilation != 1 or return_indices or ceil_mode:
            raise NotImplementedError(
                "MaxPool1d: dilation, return_indices and ceil_mode are not supported"
            )
        super().__init__(kernel_size, stride, padding, dilation=dilation, ceil_mode=ceil_mode)

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        return super().extra_repr() + ", dilation=1, ceil_mode=False"


class AvgPool1d(_Pool1d):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True
    ):
        if ceil_mode:
            raise NotImplementedError("AvgPool1d: ceil_mode is not supported")
        super().__init__(
            kernel_size, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad
        )

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        one = lambda v: (v if isinstance(v, int) else v[0],)  # noqa: E731
        return (
            f"kernel_size={one(self.kernel_size)}, stride={one(self.stride)}, "
            f"padding={one(self.padding)}"
        )


class _Adaptive(Module):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        if return_indices:
            raise NotImplementedError(f"{type(self).__name__}: return_indices is not supported")
        self.return_indices = return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_Adaptive):
    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool1d(_Adaptive):
    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size)


class AdaptiveMaxPool2d(_Adaptive):
    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size)


class _PadNd(Module):
    mode = "constant"
    n = 2

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        self.padding = (padding,) * (2 * self.n) if isinstance(padding, int) else tuple(padding)
        self.value = value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        if self.mode == "constant":
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, mode: str, n: int, zero: bool = False):
    def __init__(self, padding, *args):
        _PadNd.__init__(self, padding, 0.0 if zero or not args else args[0])

    attrs = {"mode": mode, "n": n, "__module__": __name__}
    if zero or mode != "constant":
        attrs["__init__"] = __init__
        if zero:
            attrs["extra_repr"] = lambda self: f"{self.padding}"
    return type(name, (_PadNd,), attrs)


ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, zero=True)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, zero=True)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, zero=True)
ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)


class PixelShuffle(Module):
    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (weight starts at 1)."""

    def __init__(
        self, normalized_shape, eps=None, elementwise_affine: bool = True, device=None, dtype=None
    ):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _param(self.normalized_shape, dtype, fill=1.0)
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class _InstanceNorm(Module):
    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = _param((num_features,), dtype, fill=1.0)
            self.bias = _param((num_features,), dtype, fill=0.0)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            npd = _dt.to_numpy_dtype(dtype) if dtype is not None else _dt.default_float()
            self.register_buffer("running_mean", Tensor._wrap(np.zeros(num_features, npd)))
            self.register_buffer("running_var", Tensor._wrap(np.ones(num_features, npd)))
            self.register_buffer("num_batches_tracked", Tensor._wrap(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, input):
        unbatched = input.ndim == self._ndim - 1
        x = O.unsqueeze(input, 0) if unbatched else input
        if self.track_running_stats and not self.training:  # normalize by the running stats
            shape = (1, -1) + (1,) * (x.ndim - 2)
            mean = O.reshape(self.running_mean, shape)
            var = O.reshape(self.running_var, shape)
            out = (x - mean) * O.rsqrt(var + self.eps)
            if self.weight is not None:
                out = out * O.reshape(self.weight, shape) + O.reshape(self.bias, shape)
        else:
            out = F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)
            if self.track_running_stats:  # PyTorch: the batch mean of per-instance stats
                dims = tuple(range(2, x.ndim))
                data = x._data
                count = int(np.prod([data.shape[d] for d in dims]))
                mean = data.mean(axis=dims).mean(0)
                var = data.var(axis=dims, ddof=1 if count > 1 else 0).mean(0)
                m = self.momentum
                rm, rv = self.running_mean, self.running_var
                rm._data[...] = (1 - m) * rm._data + m * mean.astype(rm._data.dtype)
                rv._data[...] = (1 - m) * rv._data + m * var.astype(rv._data.dtype)
        return O.squeeze(out, 0) if unbatched else out

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    _ndim = 3


class InstanceNorm2d(_InstanceNorm):
    _ndim = 4


class InstanceNorm3d(_InstanceNorm):
    _ndim = 5


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class Bilinear(Module):
    """y = x1^T A x2 + b: weight (out, in1, in2), bias (out), uniform(+-1/sqrt(in1))."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = (
            in1_features,
            in2_features,
            out_features,
        )
        self.weight = _param((out_features, in1_features, in2_features), dtype)
        if bias:
            self.bias = _param((out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        from tracegrad.eager.more_ops import einsum

        out = einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class RNNCellBase(Module):
    """weight_ih (gates*hidden, input), weight_hh (gates*hidden, hidden), bias_ih, bias_hh;
    all uniform(+-1/sqrt(hidden_size)), as PyTorch."""

    _gates = 1

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None
    ):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g = self._gates * hidden_size
        self.weight_ih = _param((g, input_size), dtype)
        self.weight_hh = _param((g, hidden_size), dtype)
        if bias:
            self.bias_ih = _param((g,), dtype)
            self.bias_hh = _param((g,), dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _gates_of(self, x, h):
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        gh = F.linear(h, self.weight_hh, self.bias_hh)
        return gi, gh

    def _batched(self, input, hx):
        if input.ndim not in (1, 2):
            raise ValueError(
                f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead"
            )
        unbatched = input.ndim == 1
        x = O.unsqueeze(input, 0) if unbatched else input
        return x, unbatched

    def _zeros(self, x):
        return Tensor._wrap(np.zeros((x.shape[0], self.hidden_size), x._data.dtype))


class RNNCell(RNNCellBase):
    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, hx)
        h = self._zeros(x) if hx is None else (O.unsqueeze(hx, 0) if unbatched else hx)
        gi, gh = self._gates_of(x, h)
        out = O.tanh(gi + gh) if self.nonlinearity == "tanh" else O.relu(gi + gh)
        return O.squeeze(out, 0) if unbatched else out


class LSTMCell(RNNCellBase):
    _gates = 4

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, hx)
        if hx is None:
            h = c = self._zeros(x)
        else:
            h, c = (O.unsqueeze(t, 0) for t in hx) if unbatched else hx
        gi, gh = self._gates_of(x, h)
        i, f, g, o = O.chunk(gi + gh, 4, 1)
        c2 = O.sigmoid(f) * c + O.sigmoid(i) * O.tanh(g)
        h2 = O.sigmoid(o) * O.tanh(c2)
        if unbatched:
            return O.squeeze(h2, 0), O.squeeze(c2, 0)
        return h2, c2


class GRUCell(RNNCellBase):
    _gates = 3

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, hx)
        h = self._zeros(x) if hx is None else (O.unsqueeze(hx, 0) if unbatched else hx)
        gi, gh = self._gates_of(x, h)
        ir, iz, in_ = O.chunk(gi, 3, 1)
        hr, hz, hn = O.chunk(gh, 3, 1)
        r = O.sigmoid(ir + hr)
        z = O.sigmoid(iz + hz)
        n = O.tanh(in_ + r * hn)
        out = (1.0 - z) * n + z * h
        return O.squeeze(out, 0) if unbatched else out


# ------------------------------------------------------------------ losses


class _Loss(Module):
    def __init__(self, reduction: str = "mean", **kwargs):
        super().__init__()
        self.reduction = reduction
        for k, v in kwargs.items():
            setattr(self, k, v)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction, full=full, eps=eps)

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(
        self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean"
    ):
        super().__init__(reduction, margin=margin)

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class MarginRankingLoss(_Loss):
    def __init__(
        self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean"
    ):
        super().__init__(reduction, margin=margin)

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(
        self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"
    ):
        super().__init__(reduction, margin=margin)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(reduction)

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
    ):
        super().__init__(reduction, margin=margin, p=p, eps=eps, swap=swap)

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(
            anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction
        )


class PoissonNLLLoss(_Loss):
    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average=None,
        eps: float = 1e-8,
        reduce=None,
        reduction: str = "mean",
    ):
        super().__init__(reduction, log_input=log_input, full=full, eps=eps)

    def forward(self, log_input, target):
        return F.poisson_nll_loss(
            log_input, target, self.log_input, self.full, self.eps, self.reduction
        )


class MultiLabelSoftMarginLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = weight

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


class Unfold(Module):
    """im2col (F.unfold): (N, C, H, W) -> (N, C * prod(kernel_size), L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (
            kernel_size, dilation, padding, stride,
        )  # fmt: skip

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )


class Fold(Module):
    """col2im (F.fold): (N, C * prod(kernel_size), L) summed into (N, C, *output_size)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self):
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )


class ChannelShuffle(Module):
    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class EmbeddingBag(Module):
    """Bags of embedding rows reduced by sum, mean or max (weight ~ N(0, 1), PyTorch's)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx=None, device=None, dtype=None):  # fmt: skip
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = _param((num_embeddings, embedding_dim), dtype)
            init.normal_(self.weight)
            if padding_idx is not None:
                self.weight.data[padding_idx] = 0.0
        else:
            self.weight = Parameter(_weight)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(
            input, self.weight, offsets, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
            self.include_last_offset, self.padding_idx,
        )  # fmt: skip

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None):  # fmt: skip
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)  # fmt: skip
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class LazyLinear(Module):
    """A Linear whose in_features is read from the first input (then it is a Linear with
    PyTorch's initialization)."""

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.out_features, self._bias, self._dtype = out_features, bias, dtype
        self.in_features = 0
        self.weight = None
        self.bias = None

    def forward(self, input):
        from tracegrad.eager.nn.modules import Linear

        if self.in_features == 0:
            self.in_features = input.shape[-1]
            proto = Linear(self.in_features, self.out_features, self._bias, dtype=self._dtype)
            self.weight = proto.weight
            if self._bias:
                self.bias = proto.bias
            else:
                self.register_parameter("bias", None)
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self._bias}"
        )


class MultiMarginLoss(_Loss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                 reduce=None, reduction: str = "mean"):  # fmt: skip
        super().__init__(reduction, p=p, margin=margin)
        self.weight = weight

    def forward(self, input, target):
        return F.multi_margin_loss(
            input, target, self.p, self.margin, self.weight, reduction=self.reduction
        )


class MultiLabelMarginLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(reduction)

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean"):  # fmt: skip
        super().__init__(reduction, margin=margin, swap=swap)
        self.distance_function = (
            distance_function if distance_function is not None else PairwiseDistance()
        )

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class LPPool1d(Module):
    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride = norm_type, kernel_size, stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride)

    def extra_repr(self):
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, ceil_mode={self.ceil_mode}"
        )


class LPPool2d(LPPool1d):
    def forward(self, input):
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride)


def _batchnorm3d():
    from tracegrad.eager.nn.modules import BatchNorm2d

    class BatchNorm3d(BatchNorm2d):
        """BatchNorm over (N, C, D, H, W) inputs."""

        _dims = (5,)

    BatchNorm3d.__module__ = __name__
    return BatchNorm3d


BatchNorm3d = _batchnorm3d()


def _sync_batchnorm():
    from tracegrad.eager.nn.modules import _BatchNorm

    class SyncBatchNorm(_BatchNorm):
        """One process: BatchNorm over any (N, C, ...) input (its statistics are this
        process's; there is no process group to synchronize with)."""

        _dims = (2, 3, 4, 5)

        @classmethod
        def convert_sync_batchnorm(cls, module, process_group=None):
            return module

    SyncBatchNorm.__module__ = __name__
    return SyncBatchNorm


SyncBatchNorm = _sync_batchnorm()


class DataParallel(Module):
    """One device: calls `module` (its parameters appear under "module.", as PyTorch's
    DataParallel state_dict keys)."""

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class RReLU(Module):
    """Randomized leaky ReLU: negative slopes ~ U(lower, upper) per element in training,
    their mean (lower + upper) / 2 in evaluation."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else ""
        )


class FeatureAlphaDropout(Module):
    """AlphaDropout of whole channels."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


def _aliases():
    from tracegrad.eager.nn.modules import NLLLoss, _RNNBase

    class NLLLoss2d(NLLLoss):
        """The deprecated name of NLLLoss for (N, C, H, W) inputs."""

    NLLLoss2d.__module__ = __name__
    return NLLLoss2d, _RNNBase


NLLLoss2d, RNNBase = _aliases()


def _conv3d_class():
    from tracegrad.eager.nn.modules import _ConvNd

    class Conv3d(_ConvNd):
        """3-d convolution (F.conv3d: conv2d over depth slices, summed)."""

        _n = 3

        def forward(self, input):
            return F.conv3d(
                input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                self.groups, self.padding_mode,
            )  # fmt: skip

    Conv3d.__module__ = __name__
    return Conv3d


Conv3d = _conv3d_class()


class MaxPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):  # fmt: skip
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)  # fmt: skip

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):  # fmt: skip
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)  # fmt: skip

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(_Adaptive):
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_Adaptive):
    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size)


def _lazy(name: str, target):
    """A Lazy* module: the first input's size(1) (channels) completes the constructor of
    `target`; the module then becomes a `target` (PyTorch's cls_to_become)."""

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        object.__setattr__(self, "_lazy_args", (args, kwargs))

    def forward(self, input, *rest, **kw):
        args, kwargs = self.__dict__["_lazy_args"]
        cls = target()
        channels = input.shape[1] if input.ndim > 1 else input.shape[0]
        real = cls(channels, *args, **kwargs)
        training = self.training
        self.__dict__.clear()
        self.__dict__.update(real.__dict__)
        self.__class__ = cls
        self.train(training)
        return self.forward(input, *rest, **kw)

    def extra_repr(self):
        return "(uninitialized)"

    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": extra_repr, "__module__": __name__,
                                  "__doc__": _lazy.__doc__})  # fmt: skip


def _modules():
    from tracegrad.eager.nn import modules as M

    return M


LazyConv1d = _lazy("LazyConv1d", lambda: _modules().Conv1d)
LazyConv2d = _lazy("LazyConv2d", lambda: _modules().Conv2d)
LazyConv3d = _lazy("LazyConv3d", lambda: Conv3d)
LazyConvTranspose1d = _lazy("LazyConvTranspose1d", lambda: _modules().ConvTranspose1d)
LazyConvTranspose2d = _lazy("LazyConvTranspose2d", lambda: _modules().ConvTranspose2d)
LazyBatchNorm1d = _lazy("LazyBatchNorm1d", lambda: _modules().BatchNorm1d)
LazyBatchNorm2d = _lazy("LazyBatchNorm2d", lambda: _modules().BatchNorm2d)
LazyBatchNorm3d = _lazy("LazyBatchNorm3d", lambda: BatchNorm3d)


def _lazy_instance(name, target):
    """Lazy InstanceNorm: PyTorch's lazy variants default to affine and running stats."""
    base = _lazy(name, target)
    init = base.__init__

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):  # fmt: skip
        init(self, eps, momentum, affine, track_running_stats, dtype=dtype)

    base.__init__ = __init__
    return base


LazyInstanceNorm1d = _lazy_instance("LazyInstanceNorm1d", lambda: InstanceNorm1d)
LazyInstanceNorm2d = _lazy_instance("LazyInstanceNorm2d", lambda: InstanceNorm2d)
LazyInstanceNorm3d = _lazy_instance("LazyInstanceNorm3d", lambda: InstanceNorm3d)


class CTCLoss(_Loss):
    """Connectionist temporal classification loss (F.ctc_loss)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction, blank=blank, zero_infinity=zero_infinity)

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
            self.zero_infinity,
        )  # fmt: skip


class MaxUnpool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


def _conv_transpose3d_class():
    from tracegrad.eager.nn.modules import _ConvTransposeNd

    class ConvTranspose3d(_ConvTransposeNd):
        """3-d transposed convolution (F.conv_transpose3d)."""

        _n = 3

        def forward(self, input, output_size=None):
            if output_size is not None:
                raise NotImplementedError("ConvTranspose3d(output_size=...) is not supported")
            return F.conv_transpose3d(
                input, self.weight, self.bias, self.stride, self.padding,
                self.output_padding, self.groups, self.dilation,
            )  # fmt: skip

    ConvTranspose3d.__module__ = __name__
    return ConvTranspose3d


ConvTranspose3d = _conv_transpose3d_class()


class LPPool3d(LPPool1d):
    def forward(self, input):
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride)


LazyConvTranspose3d = _lazy("LazyConvTranspose3d", lambda: ConvTranspose3d)


class MaxUnpool3d(MaxUnpool2d):
    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class _ASMoutput(tuple):
    """(output, loss) with PyTorch's field names."""

    def __new__(cls, output, loss):
        return super().__new__(cls, (output, loss))

    output = property(lambda self: self[0])
    loss = property(lambda self: self[1])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax over many classes (Grave et al.): a head over the shortlist and
    one entry per cluster, and a projected tail per cluster; PyTorch's parameters
    (head, tail.i.0, tail.i.1) and computation, in eager ops."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0,
                 head_bias: bool = False, device=None, dtype=None):  # fmt: skip
        from tracegrad.eager.nn.modules import Linear, ModuleList, Sequential

        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hsz, bias=False, dtype=dtype),
                    Linear(hsz, osz, bias=False, dtype=dtype),
                )
            )

    def forward(self, input_, target_):
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError(
                    "Input and target should have the same size in the batch dimension."
                )
        elif targ_dim != 0:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        t = target.numpy()
        n = t.shape[0]
        head_logprob = F.log_softmax(self.head(input), dim=1)
        gather = np.zeros(n, np.int64)
        parts, rows_of = [], []
        bounds = [0] + self.cutoffs
        used = 0
        for i in range(len(bounds) - 1):
            lo, hi = bounds[i], bounds[i + 1]
            rows = np.flatnonzero((t >= lo) & (t < hi))
            if rows.size == 0:
                continue
            used += rows.size
            if i == 0:
                gather[rows] = t[rows]
                continue
            gather[rows] = self.shortlist_size + i - 1
            sub = input.index_select(0, Tensor._wrap(rows))
            cluster = F.log_softmax(self.tail[i - 1](sub), dim=1)
            rel = Tensor._wrap((t[rows] - lo)[:, None])
            parts.append(cluster.gather(1, rel).squeeze(1))
            rows_of.append(rows)
        if used != n:
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{t.min()}, {t.max()}] were found. "
            )
        output = head_logprob.gather(1, Tensor._wrap(gather[:, None])).squeeze(1)
        if parts:  # the tail's log-probabilities, added at their rows
            zeros = Tensor._wrap(np.zeros(n, output._data.dtype))
            order = np.concatenate(rows_of)
            output = output + zeros.index_add(0, Tensor._wrap(order), O.cat(parts, 0))
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        cols = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            cols.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return O.cat(cols, 1)

    def log_prob(self, input):
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        return O.argmax(self.log_prob(input), 1)
