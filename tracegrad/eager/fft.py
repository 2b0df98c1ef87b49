"""torch.fft: fft, ifft, rfft, irfft, fftfreq, rfftfreq (issue 26).

The same composites of the rule table's `fft` primitive as `tracegrad.fft`
(tracegrad/ops/fourier.py), on eager tensors; gradients follow PyTorch's
convention through the engine's conjugation (tracegrad/eager/graph.py).

    >>> import tracegrad.eager as torch
    >>> torch.fft.fft(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
"""

from __future__ import annotations

from tracegrad.eager._tensor import Tensor
from tracegrad.eager.creation import tensor
from tracegrad.ops import fourier as _F

__all__ = ["fft", "ifft", "rfft", "irfft", "fftfreq", "rfftfreq"]


def _checked(input, name: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(
            f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
            f"{type(input).__name__}"
        )
    return input


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """torch.fft.fft: the 1-D discrete Fourier transform along `dim`."""
    return _F.fft(_checked(input, "fft"), n=n, axis=dim, norm=norm)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """torch.fft.ifft: the inverse 1-D discrete Fourier transform."""
    return _F.ifft(_checked(input, "ifft"), n=n, axis=dim, norm=norm)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """torch.fft.rfft: the DFT of a real signal (its n // 2 + 1 non-negative frequencies)."""
    return _F.rfft(_checked(input, "rfft"), n=n, axis=dim, norm=norm)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """torch.fft.irfft: the inverse of rfft, a real signal of length n."""
    return _F.irfft(_checked(input, "irfft"), n=n, axis=dim, norm=norm)


def fftfreq(n: int, d: float = 1.0, *, dtype=None) -> Tensor:
    """torch.fft.fftfreq (float32 by default, as PyTorch's)."""
    return tensor(_F.fftfreq(n, d).astype("float32" if dtype is None else str(dtype)[6:]))


def rfftfreq(n: int, d: float = 1.0, *, dtype=None) -> Tensor:
    """torch.fft.rfftfreq (float32 by default, as PyTorch's)."""
    return tensor(_F.rfftfreq(n, d).astype("float32" if dtype is None else str(dtype)[6:]))
