"""torch.fft: fft, ifft, rfft, irfft, fft2, ifft2, fftn, ifftn, fftshift, ifftshift,
fftfreq, rfftfreq (issue 26).

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

__all__ = [
    "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "fftshift", "ifftshift",
    "fftfreq", "rfftfreq",
]  # fmt: skip


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


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """torch.fft.fftn: the transform along each of `dim` (all by default)."""
    return _F.fftn(_checked(input, "fftn"), s=s, axes=dim, norm=norm)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """torch.fft.ifftn: the inverse transform along each of `dim`."""
    return _F.ifftn(_checked(input, "ifftn"), s=s, axes=dim, norm=norm)


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """torch.fft.fft2: fftn over the last two dims."""
    return _F.fftn(_checked(input, "fft2"), s=s, axes=dim, norm=norm)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """torch.fft.ifft2: ifftn over the last two dims."""
    return _F.ifftn(_checked(input, "ifft2"), s=s, axes=dim, norm=norm)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """torch.fft.fftshift: the zero frequency moved to the middle."""
    return _F.fftshift(_checked(input, "fftshift"), axes=dim)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """torch.fft.ifftshift: the inverse of fftshift."""
    return _F.ifftshift(_checked(input, "ifftshift"), axes=dim)


def fftfreq(n: int, d: float = 1.0, *, dtype=None) -> Tensor:
    """torch.fft.fftfreq (float32 by default, as PyTorch's)."""
    return tensor(_F.fftfreq(n, d).astype("float32" if dtype is None else str(dtype)[6:]))


def rfftfreq(n: int, d: float = 1.0, *, dtype=None) -> Tensor:
    """torch.fft.rfftfreq (float32 by default, as PyTorch's)."""
    return tensor(_F.rfftfreq(n, d).astype("float32" if dtype is None else str(dtype)[6:]))
