"""The discrete Fourier transform: one primitive, `fft`, and NumPy's `fft` namespace
(`tg.fft.fft`, `ifft`, `rfft`, `irfft`, `fft2`, `ifft2`, `fftn`, `ifftn`, `fftshift`,
`ifftshift`, `fftfreq`, `rfftfreq`) as composites of it (issue 26).

The primitive is the 1-D complex DFT along one axis, forward or inverse, with
NumPy's `norm` ("backward", "ortho" or "forward"). Its matrix is symmetric, so
its transpose (JAX's vjp convention) is the same transform: the vjp rule is the
op applied to the cotangent. `rfft` and `irfft` are built from it (a cast to
complex and a slice; a Hermitian extension and the real part), so their
gradients follow from the rules of those ops and equal JAX's.

    >>> import numpy as np, tracegrad as tg
    >>> tg.fft.fft(np.array([1.0, 2.0, 3.0, 4.0]))
    array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    >>> tg.fft.irfft(tg.fft.rfft(np.array([1.0, 2.0, 3.0])), n=3)
    array([1., 2., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ops import table as T
from tracegrad.ops.complex_ops import complex_dtype, conj, real
from tracegrad.ops.core import Aval, DTypeError, ShapeError, op_error, primitive
from tracegrad.ops.rulekit import as_aval, normalize_axes

_NORMS = ("backward", "ortho", "forward")


def _fft_rule(x, axis, inverse=False, norm="backward"):
    x = as_aval(x)
    if x.dtype.kind != "c":
        raise op_error("fft", [x], f"expected a complex operand, got {x.dtype}", cls=DTypeError)
    normalize_axes("fft", x, axis)
    if norm not in _NORMS:
        raise op_error("fft", [x], f"norm must be one of {_NORMS}, got {norm!r}", cls=ValueError)
    return Aval(x.shape, x.dtype)


def _fft_impl(x, axis, inverse=False, norm="backward"):
    run = np.fft.ifft if inverse else np.fft.fft
    out = run(x, axis=axis, norm=norm)
    return np.asarray(out, dtype=x.dtype)


def _fft_vjp(g, out, x, axis, inverse=False, norm="backward"):
    # the DFT matrix (and its inverse) is symmetric: the transpose is the same transform
    return fft_p(g, axis=axis, inverse=inverse, norm=norm)


def _fft_jvp(primals, tangents, out, axis, inverse=False, norm="backward"):
    t = tangents[0]
    return None if t is None else fft_p(t, axis=axis, inverse=inverse, norm=norm)


def _fft_batch(args, dims, axis, inverse=False, norm="backward"):
    (x,), (d,) = args, dims
    if d is None:
        return fft_p(x, axis=axis, inverse=inverse, norm=norm), None
    return fft_p(x, axis=axis + 1 if d <= axis else axis, inverse=inverse, norm=norm), d


fft_p = primitive(  # the 1-D complex DFT along `axis` (forward, or inverse)
    "fft",
    impl=_fft_impl,
    shape_rule=_fft_rule,
    kind="other",
    vjps=(_fft_vjp,),
    jvp=_fft_jvp,
    torch_name="FftC2CBackward0",
    saves=(),
    codegen="numpy",  # NumPy's pocketfft between kernel segments
    batch_rule=_fft_batch,
)


# ------------------------------------------------------------ NumPy's namespace


def _axis(x, axis: int) -> int:
    return normalize_axes("fft", as_aval(T.aval_of(x)), axis)[0]


def _resize(x, n: int | None, axis: int):
    """`x` cut or zero-padded to length n along `axis` (NumPy's fft `n`)."""
    from tracegrad.ops import api

    if n is None:
        return x
    n = int(n)
    if n < 1:
        raise ShapeError(f"fft: invalid number of data points ({n}) specified")
    size = np.shape(x)[axis]
    if n == size:
        return x
    if n < size:
        index = [slice(None)] * np.ndim(x)
        index[axis] = slice(0, n)
        return x[tuple(index)]
    widths = [(0, 0)] * np.ndim(x)
    widths[axis] = (0, n - size)
    return api.pad(x, widths)


def _as_complex(x):
    from tracegrad.ops import api

    x = api.asarray(x) if isinstance(x, (list, tuple)) else x
    dtype = np.dtype(T.aval_of(x).dtype)
    if dtype.kind == "c":
        return x
    return T.astype(x, dtype=complex_dtype(dtype if dtype.kind == "f" else np.float64).name)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.fft: the 1-D discrete Fourier transform (differentiable)."""
    x = _as_complex(a)
    ax = _axis(x, axis)
    return fft_p(_resize(x, n, ax), axis=ax, inverse=False, norm=norm or "backward")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.ifft: the inverse 1-D discrete Fourier transform."""
    x = _as_complex(a)
    ax = _axis(x, axis)
    return fft_p(_resize(x, n, ax), axis=ax, inverse=True, norm=norm or "backward")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.rfft: the DFT of real input, its n // 2 + 1 non-negative frequencies."""
    dtype = np.dtype(T.aval_of(a).dtype)
    if dtype.kind == "c":
        raise DTypeError("rfft: expected a real input, got complex (use fft)")
    ax = _axis(a, axis)
    x = _resize(a, n, ax)
    full = fft(x, axis=ax, norm=norm)
    index = [slice(None)] * np.ndim(full)
    index[ax] = slice(0, np.shape(x)[ax] // 2 + 1)
    return full[tuple(index)]


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """numpy.fft.irfft: the inverse of rfft, a real signal of length n (default
    2 (m - 1) for m input frequencies); the imaginary parts NumPy ignores (those of the
    zero and, for even n, the Nyquist frequency) get zero gradient, as in JAX."""
    from tracegrad.ops import api

    x = _as_complex(a)
    ax = _axis(x, axis)
    m = np.shape(x)[ax]
    n = 2 * (m - 1) if n is None else int(n)
    if n < 1:
        raise ShapeError(f"irfft: invalid number of data points ({n}) specified")
    half = n // 2 + 1
    x = _resize(x, half, ax)  # the frequencies an n-point signal has
    # Hermitian extension: X[k] = conj(X[n - k]) for k = half .. n - 1
    tail = [slice(None)] * np.ndim(x)
    tail[ax] = slice(n - half, 0, -1)
    full = api.concatenate([x, conj(x[tuple(tail)])], axis=ax) if n > half else x
    return real(fft_p(full, axis=ax, inverse=True, norm=norm or "backward"))


def _axes_and_sizes(a: Any, s: Any, axes: Any, default_last: int | None) -> tuple:
    nd = np.ndim(a)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
        if default_last is not None and s is None:
            axes = tuple(range(nd))[-default_last:]
    axes = tuple(normalize_axes("fft", as_aval(T.aval_of(a)), (ax,))[0] for ax in axes)
    sizes = (None,) * len(axes) if s is None else tuple(s)
    if len(sizes) != len(axes):
        raise ShapeError("fftn: s and axes must have the same length")
    return axes, sizes


def _along_axes(transform, a: Any, s: Any, axes: Any, norm: str | None) -> Any:
    """`transform` (fft or ifft) along each of `axes` (all by default), one after another."""
    axes, sizes = _axes_and_sizes(a, s, axes, None)
    x = _as_complex(a)
    for ax, n in zip(axes, sizes, strict=True):
        x = transform(x, n=n, axis=ax, norm=norm)
    return x


def fftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> Any:
    """numpy.fft.fftn: the transform along each of `axes` (all by default), one after another."""
    return _along_axes(fft, a, s, axes, norm)


def ifftn(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> Any:
    """numpy.fft.ifftn: the inverse transform along each of `axes`."""
    return _along_axes(ifft, a, s, axes, norm)


def fft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.fft2: fftn over the last two axes."""
    return fftn(a, s=s, axes=axes, norm=norm)


def ifft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: str | None = None) -> Any:
    """numpy.fft.ifft2: ifftn over the last two axes."""
    return ifftn(a, s=s, axes=axes, norm=norm)


def fftshift(x: Any, axes: Any = None) -> Any:
    """numpy.fft.fftshift: the zero frequency moved to the middle (a roll)."""
    from tracegrad.ops import api

    nd = np.ndim(x)
    axes = tuple(range(nd)) if axes is None else ((axes,) if np.ndim(axes) == 0 else tuple(axes))
    shifts = tuple(np.shape(x)[ax] // 2 for ax in axes)
    return api.roll(x, shifts, axes)


def ifftshift(x: Any, axes: Any = None) -> Any:
    """numpy.fft.ifftshift: the inverse of fftshift."""
    from tracegrad.ops import api

    nd = np.ndim(x)
    axes = tuple(range(nd)) if axes is None else ((axes,) if np.ndim(axes) == 0 else tuple(axes))
    shifts = tuple(-(np.shape(x)[ax] // 2) for ax in axes)
    return api.roll(x, shifts, axes)


def fftfreq(n: int, d: float = 1.0) -> np.ndarray:
    """numpy.fft.fftfreq (a constant)."""
    return np.fft.fftfreq(n, d)


def rfftfreq(n: int, d: float = 1.0) -> np.ndarray:
    """numpy.fft.rfftfreq (a constant)."""
    return np.fft.rfftfreq(n, d)


class _FFT:
    """`tracegrad.fft`: fft ifft rfft irfft fft2 ifft2 fftn ifftn fftshift ifftshift fftfreq
    rfftfreq (NumPy's signatures).

    >>> import numpy as np, tracegrad as tg
    >>> tg.fft.ifft(tg.fft.fft(np.array([1.0, 2.0]))).real
    array([1., 2.])
    """

    fft = staticmethod(fft)
    ifft = staticmethod(ifft)
    rfft = staticmethod(rfft)
    irfft = staticmethod(irfft)
    fft2 = staticmethod(fft2)
    ifft2 = staticmethod(ifft2)
    fftn = staticmethod(fftn)
    ifftn = staticmethod(ifftn)
    fftshift = staticmethod(fftshift)
    ifftshift = staticmethod(ifftshift)
    fftfreq = staticmethod(fftfreq)
    rfftfreq = staticmethod(rfftfreq)

    def __repr__(self) -> str:
        return (
            "<tracegrad.fft: fft ifft rfft irfft fft2 ifft2 fftn ifftn fftshift ifftshift "
            "fftfreq rfftfreq>"
        )


NAMESPACE = _FFT()
