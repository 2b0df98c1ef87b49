"""Placement, the JAX way: `devices()`, `device_put(x, "cuda")`, and the
`DeviceArray` that compiled functions return when called with GPU arrays.

Nothing here imports CUDA at module import: numba.cuda is loaded (through
`load_cuda`) the first time an array is put on the GPU. A compiled function
called with GPU arrays runs its optimized joint graph through the CUDA code
generator (tracegrad/codegen/cuda/) and returns `DeviceArray`s;
`np.asarray(result)` brings one back to the host.

    >>> import numpy as np, tracegrad as tg
    >>> "cpu" in [str(d) for d in tg.devices()]
    True
    >>> tg.device_put(np.ones(2), "cpu")
    array([1., 1.])

Without a GPU (and without Numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1),
`device_put(x, "cuda")` raises `DeviceError` saying what is missing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tracegrad.ops.core import TracegradError

INSTALL_HINT = (
    "install the GPU extra with `pip install tracegrad[cuda]` (numba-cuda and "
    "cupy-cuda12x), or run without a GPU in Numba's CUDA simulator by setting "
    "NUMBA_ENABLE_CUDASIM=1 before numba is imported"
)


class DeviceError(TracegradError, RuntimeError):
    """No such device, or the CUDA stack it needs is missing."""


class Device:
    """One place arrays can live: `cpu`, or `cuda:<n>` (`simulated` under
    NUMBA_ENABLE_CUDASIM=1)."""

    __slots__ = ("platform", "id", "simulated")

    def __init__(self, platform: str, id: int = 0, simulated: bool = False):
        self.platform = platform
        self.id = id
        self.simulated = simulated

    def __str__(self) -> str:
        return "cpu" if self.platform == "cpu" else f"{self.platform}:{self.id}"

    def __repr__(self) -> str:
        extra = " (CUDA simulator)" if self.simulated else ""
        return f"Device({str(self)!r}){extra}"

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


# ------------------------------------------------------------ loading numba.cuda

_CUDA: Any = None
_CUDA_PROBLEM: str | None = None


def simulator_enabled() -> bool:
    """Whether Numba's CUDA simulator is on (it must be set before numba.cuda loads)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _numpy_compat() -> None:
    """numba-cuda (up to at least 0.30) calls `np.row_stack`, which NumPy 2.5
    removed; it was always an alias of `np.vstack`. Only set when missing."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def load_cuda():
    """numba.cuda, loaded once, or raise `DeviceError` saying what is missing."""
    global _CUDA, _CUDA_PROBLEM
    if _CUDA is not None:
        return _CUDA
    if _CUDA_PROBLEM is None:
        _numpy_compat()
        try:
            from numba import cuda
        except Exception as exc:  # ImportError, or a broken CUDA install
            _CUDA_PROBLEM = f"numba.cuda cannot be imported ({type(exc).__name__}: {exc})"
        else:
            try:
                available = cuda.is_available()
            except Exception as exc:
                available, why = False, f" ({type(exc).__name__}: {exc})"
            else:
                why = ""
            if available:
                _quiet_occupancy_warnings()
                _CUDA = cuda
                return cuda
            _CUDA_PROBLEM = "numba.cuda finds no CUDA GPU" + why
    raise DeviceError(f"no CUDA device: {_CUDA_PROBLEM}; {INSTALL_HINT}")


def _quiet_occupancy_warnings() -> None:
    """numba-cuda warns at every launch of a small grid ("will likely result in GPU
    under-utilization"); tracegrad's small kernels are small on purpose."""
    try:
        from numba.core import config

        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    except Exception:  # pragma: no cover - another numba layout
        pass


def cuda_available() -> bool:
    """Whether `device_put(x, "cuda")` can work (a GPU, or the simulator)."""
    try:
        load_cuda()
    except DeviceError:
        return False
    return True


def is_simulated() -> bool:
    """Whether CUDA kernels run in Numba's simulator (the loaded numba.cuda decides)."""
    return _loaded_simulator(load_cuda())


def _loaded_simulator(cuda) -> bool:
    return "simulator" in type(cuda).__name__ or "simulator" in getattr(
        cuda.device_array, "__module__", ""
    )


def devices() -> list[Device]:
    """The devices arrays can be put on: always the CPU, then each CUDA GPU (or
    the simulated one under NUMBA_ENABLE_CUDASIM=1).

    >>> import tracegrad as tg
    >>> str(tg.devices()[0])
    'cpu'
    """
    found = [Device("cpu")]
    if not cuda_available():
        return found
    cuda = load_cuda()
    simulated = _loaded_simulator(cuda)
    try:
        n = len(cuda.gpus)
    except Exception:
        n = 1
    found.extend(Device("cuda", i, simulated) for i in range(max(n, 1)))
    return found


# ------------------------------------------------------------ device arrays


class DeviceArray:
    """An array in GPU memory: a Numba device array (`.data`), with NumPy's
    `shape`/`dtype`, `__cuda_array_interface__` (on a real GPU) and `__array__`,
    so `np.asarray(x)` copies it to the host.

    Compiled functions called with device arrays return these.

    >>> import numpy as np, tracegrad as tg
    >>> x = tg.device_put(np.arange(3.0), "cuda")  # (a GPU, or NUMBA_ENABLE_CUDASIM=1)
    >>> y = tg.compile(lambda x: x * 2.0)(x)
    >>> type(y).__name__, y.shape, np.asarray(y)
    ('DeviceArray', (3,), array([0., 2., 4.]))
    """

    __slots__ = ("data", "shape", "dtype", "_flat", "__weakref__")
    __array_priority__ = 100

    def __init__(self, data: Any, shape: tuple | None = None):
        self.data = data  # a numba.cuda device array (any shape, C-contiguous)
        self.shape = tuple(data.shape) if shape is None else tuple(shape)
        self.dtype = np.dtype(data.dtype)
        self._flat = None

    # ---- NumPy-like metadata
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def device(self) -> Device:
        return Device("cuda", 0, _loaded_simulator(load_cuda()))

    def flat_data(self):
        """The buffer as a 1-D device array (a view, no copy; made once)."""
        flat = self._flat
        if flat is None:
            n = self.size if self.shape else 1
            flat = self.data if self.data.shape == (n,) else self.data.reshape(n)
            self._flat = flat
        return flat

    # ---- leaving the device
    def __array__(self, dtype=None, copy=None):
        host = self.data.copy_to_host().reshape(self.shape)
        return host if dtype is None else host.astype(dtype, copy=False)

    def to_host(self) -> np.ndarray:
        return np.asarray(self)

    def __float__(self) -> float:
        return float(np.asarray(self))

    def __int__(self) -> int:
        return int(np.asarray(self))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        cai = getattr(self.data, "__cuda_array_interface__", None)
        if cai is None:
            raise AttributeError("the CUDA simulator's arrays have no __cuda_array_interface__")
        return {**cai, "shape": self.shape, "strides": None}

    def __repr__(self) -> str:
        return f"DeviceArray({np.asarray(self)!r}, device={str(self.device)!r})"


def is_device_array(value: Any) -> bool:
    """Whether `value` lives in GPU memory: a DeviceArray, a Numba device array,
    or anything with `__cuda_array_interface__` or a CUDA DLPack device. Never
    imports CUDA."""
    if isinstance(value, (np.ndarray, np.generic, int, float, bool)) or value is None:
        return False
    if isinstance(value, DeviceArray):
        return True
    cls = type(value)
    if cls.__module__.startswith("numba.cuda"):
        return hasattr(value, "copy_to_host")
    if hasattr(cls, "__cuda_array_interface__"):
        return True
    dl = getattr(value, "__dlpack_device__", None)
    if dl is not None:
        try:
            return dl()[0] in (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def as_device_array(value: Any) -> DeviceArray:
    """A DeviceArray viewing `value`'s GPU memory without a copy (host values
    are copied to the GPU)."""
    if isinstance(value, DeviceArray):
        return value
    cuda = load_cuda()
    cls = type(value)
    if cls.__module__.startswith("numba.cuda") and hasattr(value, "copy_to_host"):
        return DeviceArray(_contiguous(value))
    if hasattr(cls, "__cuda_array_interface__"):
        return DeviceArray(_contiguous(cuda.as_cuda_array(value)))
    if getattr(value, "__dlpack_device__", None) is not None and is_device_array(value):
        try:
            import cupy
        except ImportError:
            raise DeviceError(
                f"a {cls.__name__} on the GPU offers only DLPack; reading it needs CuPy "
                f"({INSTALL_HINT})"
            ) from None
        return DeviceArray(_contiguous(cuda.as_cuda_array(cupy.from_dlpack(value))))
    host = np.asarray(value, order="C")  # (ascontiguousarray makes 0-d 1-d)
    if host.dtype.kind not in "biuf":
        raise DeviceError(f"device_put: cannot put dtype {host.dtype} on the GPU")
    return DeviceArray(cuda.to_device(host.reshape(-1) if host.ndim == 0 else host), host.shape)


def _contiguous(arr):
    if getattr(arr, "is_c_contiguous", lambda: True)():
        return arr
    raise DeviceError(
        f"a GPU array of shape {tuple(arr.shape)} is not C-contiguous; tracegrad reads "
        "GPU arrays without copying, so pass a contiguous one (e.g. cupy.ascontiguousarray)"
    )


def _is_number_list(x) -> bool:
    return (
        all(isinstance(v, (int, float, bool, np.generic)) or _is_number_list(v) for v in x)
        if isinstance(x, (list, tuple)) and x
        else False
    )


def device_put(x: Any, device: str | Device = "cuda") -> Any:
    """Put `x` on `device` ("cuda", "cuda:0" or "cpu"): a `DeviceArray` on the GPU,
    an ndarray on the CPU; dicts, lists and tuples of arrays are mapped. GPU arrays of other libraries (CuPy, PyTorch CUDA
    tensors, Numba) are wrapped without copying.

    >>> import numpy as np, tracegrad as tg
    >>> tg.device_put([1.0, 2.0], "cpu")
    array([1., 2.])
    """
    if isinstance(x, dict):
        return type(x)((k, device_put(v, device)) for k, v in x.items())
    if isinstance(x, (list, tuple)) and not _is_number_list(x):
        items = [device_put(v, device) for v in x]
        return type(x)(*items) if hasattr(type(x), "_fields") else type(x)(items)
    name = str(device)
    if name == "cpu":
        return np.asarray(x) if not isinstance(x, DeviceArray) else np.asarray(x)
    if name not in ("cuda", "cuda:0", "gpu"):
        raise DeviceError(f"device_put: unknown device {name!r}; tracegrad.placement() lists them")
    load_cuda()  # the clear error when there is no GPU
    return as_device_array(x)
