"""Parameter initializers (in place, no graph), as torch.nn.init."""
from __future__ import annotations

import math

from tracegrad.eager.creation import generator
from tracegrad.eager.grad_mode import no_grad


def uniform_(tensor, a: float = 0.0, b: float = 1.0):
    with no_grad():
        tensor._data[...] = generator().uniform(a, b, tensor._data.shape)
    return tensor


def normal_(tensor, mean: float = 0.0, std: float = 1.0):
    with no_grad():
        tensor._data[...] = generator().normal(mean, std, tensor._data.shape)
    return tensor


def zeros_(tensor):
    tensor._data[...] = 0
    return tensor


def ones_(tensor):
    tensor._data[...] = 1
    return tensor


def constant_(tensor, val: float):
    tensor._data[...] = val
    return tensor


def kaiming_uniform_(tensor, a: float = 0.0):
    fan_in = tensor._data.shape[1] if tensor._data.ndim > 1 else tensor._data.shape[0]
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in)
    return uniform_(tensor, -bound, bound)


def xavier_uniform_(tensor, gain: float = 1.0):
    fan_out, fan_in = tensor._data.shape[0], tensor._data.shape[1]
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)
