"""PyTorch's top-level odds and ends that scripts touch: `torch.device`, `torch.cuda`,
`torch.backends`, `torch.Generator`, `Variable`, default device, and `torch.save`/`torch.load`.

tracegrad runs on the CPU only: `torch.cuda.is_available()` is False, a "cuda" device
raises what a CPU-only PyTorch raises, "cpu" is accepted wherever PyTorch takes a device.

    >>> import tracegrad.eager as torch
    >>> torch.device("cpu"), str(torch.device("cpu")), torch.cuda.is_available()
    (device(type='cpu'), 'cpu', False)
    >>> device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    >>> torch.ones(2, device=device).to(device)
    tensor([1., 1.])
"""

from __future__ import annotations

import io
import json
import os
import types
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

from tracegrad.eager._tensor import Tensor

_DEVICE_TYPES = (
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
)


class device(str):
    """torch.device: a str subclass ("cpu", "cpu:0", "cuda", ...), so every place that
    takes a device string takes it too; prints as PyTorch's `device(type='cpu')`."""

    def __new__(cls, type_or_device: Any, index: int | None = None):
        if isinstance(type_or_device, device):
            return (
                type_or_device
                if index is None
                else super().__new__(cls, f"{type_or_device.type}:{index}")
            )
        if isinstance(type_or_device, int) and not isinstance(type_or_device, bool):
            raise RuntimeError(
                "tracegrad.eager has no accelerator: a device index alone "
                f"({type_or_device}) names no device"
            )
        text = str(type_or_device)
        kind, _, idx = text.partition(":")
        if kind not in _DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start "
                f"of device string: {text}"
            )
        if idx and index is not None:
            raise RuntimeError(
                f"type (string) must not include an index because index was "
                f"passed explicitly: {text}"
            )
        if idx and not idx.isdigit():
            raise RuntimeError(f"Invalid device string: '{text}'")
        if index is not None:
            text = f"{kind}:{int(index)}"
        return super().__new__(cls, text)

    @property
    def type(self) -> str:
        return str.partition(self, ":")[0]

    @property
    def index(self) -> int | None:
        idx = str.partition(self, ":")[2]
        return int(idx) if idx else None

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return str.__str__(self)

    __hash__ = str.__hash__

    def __reduce__(self):
        return (device, (str.__str__(self),))


def check_device(dev) -> None:
    """Accept None and the CPU; raise what a CPU-only PyTorch raises for anything else."""
    if dev is None:
        return
    kind = device(dev).type if not isinstance(dev, device) else dev.type
    if kind == "cpu":
        return
    if kind == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    raise RuntimeError(f"tracegrad.eager runs on the CPU only; got device '{dev}'")


_DEFAULT_DEVICE = device("cpu")


def set_default_device(dev) -> None:
    check_device(dev)


def get_default_device() -> device:
    return _DEFAULT_DEVICE


# ---------------------------------------------------------------- cuda / backends


def _false(*args, **kwargs) -> bool:
    return False


def _no_cuda(*args, **kwargs):
    raise AssertionError("Torch not compiled with CUDA enabled")


cuda = types.ModuleType("tracegrad.eager.cuda", "torch.cuda on a CPU-only build.")
cuda.is_available = _false
cuda.is_initialized = _false
cuda.device_count = lambda: 0
cuda.manual_seed = lambda seed: None  # PyTorch: silently ignored without CUDA
cuda.manual_seed_all = lambda seed: None
cuda.synchronize = _no_cuda
cuda.current_device = _no_cuda
cuda.get_device_name = _no_cuda
cuda.empty_cache = lambda: None

accelerator = types.ModuleType(
    "tracegrad.eager.accelerator", "torch.accelerator with no accelerator."
)
accelerator.is_available = _false
accelerator.current_accelerator = lambda check_available=False: None
accelerator.device_count = lambda: 0
accelerator.synchronize = lambda device=None: None

backends = types.ModuleType("tracegrad.eager.backends", "torch.backends on a CPU-only build.")
backends.mps = types.SimpleNamespace(is_available=_false, is_built=_false)
backends.cudnn = types.SimpleNamespace(
    is_available=_false, enabled=True, deterministic=False, benchmark=False
)


# ---------------------------------------------------------------- Generator


class Generator:
    """torch.Generator over a NumPy generator (`_np`); `manual_seed` returns self.
    Samplers and nn.init take it as `generator=`."""

    def __init__(self, device="cpu"):
        check_device(device)
        self.device = globals()["device"](device)
        self._seed = int(np.random.SeedSequence().entropy % (2**63))
        self._np = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self._np = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        self.manual_seed(int(np.random.SeedSequence().entropy % (2**63)))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        return self._np.bit_generator.state

    def set_state(self, state) -> Generator:
        self._np.bit_generator.state = state
        return self


# ---------------------------------------------------------------- Variable


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper, as PyTorch keeps it: `Variable(t, requires_grad=...)` returns a
    tensor sharing t's memory, detached from t's graph; every tensor is a Variable."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


def _install_execution_engine() -> None:
    from tracegrad.eager.engine import ExecutionEngine

    Variable._execution_engine = ExecutionEngine()


_install_execution_engine()


# ---------------------------------------------------------------- save / load
# save writes PyTorch's zip layout when it can (see _TorchPickleWriter below), else this
# fallback: a zip holding `structure.json` (the nested containers, with tensors as
# references) and one `.npy` per tensor written with allow_pickle=False. load reads both;
# PyTorch's pickles go through a restricted unpickler, so nothing is ever executed,
# whatever `weights_only` says.

_FORMAT = "tracegrad.eager.save/1"


def _encode(obj: Any, arrays: list) -> Any:
    if isinstance(obj, Tensor):
        arrays.append(np.array(obj._data, order="C", copy=True))
        return {
            "$": "tensor",
            "i": len(arrays) - 1,
            "requires_grad": bool(obj.requires_grad),
            "parameter": bool(getattr(obj, "_is_parameter", False)),
        }
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("torch.save (tracegrad): object arrays cannot be saved")
        arrays.append(np.array(obj, order="C", copy=True))
        return {"$": "ndarray", "i": len(arrays) - 1}
    if isinstance(obj, device):
        return {"$": "device", "v": str(obj)}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"$": "int", "v": str(obj)} if abs(obj) >= 2**53 else obj
    if isinstance(obj, float):
        return {"$": "float", "v": repr(obj)}
    if isinstance(obj, np.generic):
        return {
            "$": "npscalar",
            "dtype": obj.dtype.str,
            "v": obj.item() if obj.dtype.kind != "f" else repr(obj.item()),
        }
    if isinstance(obj, dict):
        kind = "odict" if isinstance(obj, OrderedDict) else "dict"
        return {
            "$": kind,
            "items": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()],
        }
    if isinstance(obj, tuple):
        return {"$": "tuple", "items": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, (list, set, frozenset)):
        tag = "list" if isinstance(obj, list) else "set"
        return {"$": tag, "items": [_encode(v, arrays) for v in obj]}
    from tracegrad.eager import dtypes as _dt

    if isinstance(obj, _dt.dtype):
        return {"$": "dtype", "v": np.dtype(obj.np).name}
    raise TypeError(
        f"torch.save (tracegrad) stores tensors, arrays, numbers, strings, None and "
        f"dicts/lists/tuples of them; got {type(obj).__name__}"
    )


def _decode(obj: Any, arrays: dict) -> Any:
    if not isinstance(obj, dict):
        return obj
    tag = obj["$"]
    if tag == "tensor":
        t = Tensor._wrap(arrays[obj["i"]])
        if obj.get("parameter"):
            from tracegrad.eager.nn.modules import Parameter

            return Parameter(t, requires_grad=obj["requires_grad"])
        if obj["requires_grad"]:
            t.requires_grad_(True)
        return t
    if tag == "ndarray":
        return arrays[obj["i"]]
    if tag == "device":
        return device(obj["v"])
    if tag == "int":
        return int(obj["v"])
    if tag == "float":
        return float(obj["v"])
    if tag == "npscalar":
        dt = np.dtype(obj["dtype"])
        return dt.type(float(obj["v"]) if dt.kind == "f" else obj["v"])
    if tag in ("dict", "odict"):
        items = [(_decode(k, arrays), _decode(v, arrays)) for k, v in obj["items"]]
        return OrderedDict(items) if tag == "odict" else dict(items)
    if tag == "tuple":
        return tuple(_decode(v, arrays) for v in obj["items"])
    if tag == "list":
        return [_decode(v, arrays) for v in obj["items"]]
    if tag == "set":
        return {_decode(v, arrays) for v in obj["items"]}
    if tag == "dtype":
        from tracegrad.eager import dtypes as _dt

        return _dt.from_numpy_dtype(np.dtype(obj["v"]))
    raise ValueError(f"torch.load (tracegrad): unknown entry {tag!r}")


def save(
    obj: Any,
    f,
    pickle_module=None,
    pickle_protocol=None,
    _use_new_zipfile_serialization: bool = True,
) -> None:
    """Write `obj` (a state_dict, an optimizer's state_dict, nested containers of tensors,
    numbers, strings) to a path or binary file in PyTorch's own zip layout, so that real
    PyTorch's torch.load(weights_only=True) reads it; its pickle names only the globals
    such a reader allows. Anything else PyTorch's weights-only reader would refuse
    (devices, dtypes, NumPy arrays, sets) is written instead as a zip of .npy arrays plus
    a JSON structure, which only tracegrad reads."""
    if pickle_module is not None:
        raise ValueError(
            "torch.save (tracegrad) writes its own pickle; pickle_module is not supported"
        )
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "wb") if own else f
    try:
        if _save_pytorch_zip(obj, fh):
            return
        arrays: list = []
        structure = {"format": _FORMAT, "root": _encode(obj, arrays)}
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("structure.json", json.dumps(structure))
            for i, a in enumerate(arrays):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, a, allow_pickle=False)
                zf.writestr(f"arrays/{i}.npy", buf.getvalue())
    finally:
        if own:
            fh.close()


def load(
    f,
    map_location=None,
    pickle_module=None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args,
) -> Any:
    """Read what `save` wrote (nothing is unpickled), or a file PyTorch's torch.save wrote
    (its pickle read by an unpickler that resolves only OrderedDict, tensor/Parameter
    rebuilds and storage types, as PyTorch's weights_only=True). weights_only=False is
    accepted and changes nothing: no other globals are ever resolved."""
    if (
        map_location is not None
        and not callable(map_location)
        and not isinstance(map_location, dict)
    ):
        check_device(map_location)
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "rb") if own else f
    try:
        try:
            zf = zipfile.ZipFile(fh, "r")
        except zipfile.BadZipFile:
            raise RuntimeError(
                "torch.load (tracegrad): not a file written by tracegrad.eager.save"
            ) from None
        with zf:
            names = set(zf.namelist())
            if "structure.json" not in names:
                pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
                if len(pickles) == 1:
                    return _load_pytorch_zip(zf, pickles[0][: -len("data.pkl")])
                raise RuntimeError(
                    "torch.load (tracegrad): not a file written by "
                    "tracegrad.eager.save or by PyTorch's torch.save"
                )
            structure = json.loads(zf.read("structure.json"))
            if structure.get("format") != _FORMAT:
                raise RuntimeError(
                    f"torch.load (tracegrad): unknown format {structure.get('format')!r}"
                )
            arrays = {}
            for name in names:
                if name.startswith("arrays/") and name.endswith(".npy"):
                    i = int(name[len("arrays/") : -len(".npy")])
                    arrays[i] = np.lib.format.read_array(
                        io.BytesIO(zf.read(name)), allow_pickle=False
                    )
            return _decode(structure["root"], arrays)
    finally:
        if own:
            fh.close()


# ---------------------------------------------------------------- PyTorch's own files
# torch.save's zip: <name>/data.pkl refers to raw little-endian storages <name>/data/<key>.
# It is read with an unpickler that resolves only the globals a state dict needs (as
# PyTorch's weights_only=True does), so a crafted file cannot run code.

_TORCH_STORAGES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


class _StorageType:
    def __init__(self, dtype: str):
        self.dtype = np.dtype(dtype)


def _rebuild_tensor_v2(
    storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None
):
    itemsize = storage.dtype.itemsize
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    offset = int(storage_offset)
    # as_strided does not check bounds: a crafted file must not reach outside its storage
    last = offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True) if n > 0)
    if (
        len(size) != len(stride)
        or offset < 0
        or any(n < 0 for n in size)
        or any(st < 0 for st in stride)
        or (0 not in size and (last >= storage.size or offset >= storage.size))
    ):
        raise RuntimeError(
            f"torch.load (tracegrad): tensor of size {list(size)}, stride "
            f"{list(stride)} and offset {offset} does not fit its storage of "
            f"{storage.size} elements"
        )
    storage_offset = offset
    if not size:
        arr = storage[storage_offset : storage_offset + 1].reshape(())
    else:
        arr = np.lib.stride_tricks.as_strided(
            storage[storage_offset:],
            shape=tuple(size),
            strides=tuple(st * itemsize for st in stride),
            writeable=False,
        )
    t = Tensor._wrap(np.array(arr, copy=True))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks, *args):
    from tracegrad.eager.nn.modules import Parameter

    return Parameter(data, requires_grad=requires_grad)


def _load_pytorch_zip(zf: zipfile.ZipFile, prefix: str) -> Any:
    import pickle

    if f"{prefix}byteorder" in zf.namelist() and zf.read(f"{prefix}byteorder") != b"little":
        raise RuntimeError("torch.load (tracegrad): big-endian PyTorch files are not supported")
    allowed = {
        ("collections", "OrderedDict"): OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch", "device"): device,
    }
    storages: dict = {}

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str):
            if module == "torch" and name in _TORCH_STORAGES:
                return _StorageType(_TORCH_STORAGES[name])
            found = allowed.get((module, name))
            if found is None:
                raise pickle.UnpicklingError(
                    f"Weights only load failed: Unsupported global: GLOBAL {module}.{name} "
                    "(tracegrad reads state dicts of tensors, containers and numbers only)"
                )
            return found

        def persistent_load(self, pid):
            if not (
                isinstance(pid, tuple)
                and pid
                and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)
            ):
                raise pickle.UnpicklingError(
                    f"torch.load (tracegrad): unsupported storage record {pid!r:.80}"
                )
            _, kind, key, _location, numel = pid[:5]
            if key not in storages:
                raw = zf.read(f"{prefix}data/{key}")
                storages[key] = np.frombuffer(raw, dtype=kind.dtype, count=int(numel))
            return storages[key]

    return Restricted(io.BytesIO(zf.read(f"{prefix}data.pkl"))).load()


# ---------------------------------------------------------------- writing PyTorch's format
# torch.save writes PyTorch's own zip layout, so real PyTorch reads our checkpoints with
# torch.load(weights_only=True). The pickle is emitted opcode by opcode (protocol 2) and
# names only the globals a weights-only reader allows: collections.OrderedDict,
# torch._utils._rebuild_tensor_v2 / _rebuild_parameter and torch.<Type>Storage.

_STORAGE_NAMES = {np.dtype(v): k for k, v in _TORCH_STORAGES.items()}


class _TorchPickleWriter:
    def __init__(self):
        self.out = io.BytesIO()
        self.storages: list = []

    def _global(self, module: str, name: str) -> None:
        self.out.write(b"c" + f"{module}\n{name}\n".encode())

    def _empty_ordered_dict(self) -> None:
        self._global("collections", "OrderedDict")
        self.out.write(b")R")

    def dump(self, obj) -> bytes:
        self.out.write(b"\x80\x02")
        self._obj(obj)
        self.out.write(b".")
        return self.out.getvalue()

    def _obj(self, o) -> None:
        import struct

        w = self.out.write
        if o is None:
            w(b"N")
        elif o is True or o is False:
            w(b"\x88" if o else b"\x89")
        elif isinstance(o, Tensor):
            self._tensor(o)
        elif isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)):
            o = int(o)
            if -(2**31) <= o < 2**31:
                w(b"J" + struct.pack("<i", o))
            else:
                n = (o.bit_length() + 8) // 8
                w(b"\x8a" + bytes([n]) + o.to_bytes(n, "little", signed=True))
        elif isinstance(o, (float, np.floating)):
            w(b"G" + struct.pack(">d", float(o)))
        elif isinstance(o, device):
            raise TypeError("device")  # kept as a device by the JSON layout
        elif isinstance(o, str):
            data = o.encode("utf-8")
            w(b"X" + struct.pack("<I", len(data)) + data)
        elif isinstance(o, tuple):
            w(b"(")
            for v in o:
                self._obj(v)
            w(b"t")
        elif isinstance(o, list):
            w(b"]")
            if o:
                w(b"(")
                for v in o:
                    self._obj(v)
                w(b"e")
        elif isinstance(o, dict):
            if isinstance(o, OrderedDict):
                self._empty_ordered_dict()
            else:
                w(b"}")
            if o:
                w(b"(")
                for k, v in o.items():
                    self._obj(k)
                    self._obj(v)
                w(b"u")
        else:
            raise TypeError(type(o).__name__)

    def _tensor(self, t: Tensor) -> None:
        w = self.out.write
        param = bool(getattr(t, "_is_parameter", False))
        a = np.ascontiguousarray(t._data).reshape(t._data.shape)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        kind = _STORAGE_NAMES.get(np.dtype(a.dtype))
        if kind is None:
            raise TypeError(f"tensor of dtype {a.dtype}")
        if param:
            self._global("torch._utils", "_rebuild_parameter")
            w(b"(")
        key = str(len(self.storages))
        self.storages.append(a)
        self._global("torch._utils", "_rebuild_tensor_v2")
        w(b"((")
        for v in ("storage",):
            self._obj(v)
        self._global("torch", kind)
        self._obj(key)
        self._obj("cpu")
        self._obj(int(a.size))
        w(b"tQ")
        self._obj(0)
        self._obj(tuple(int(n) for n in a.shape))
        strides, step = [], 1
        for n in reversed(a.shape):
            strides.append(step)
            step *= max(int(n), 1)
        self._obj(tuple(reversed(strides)))
        self._obj(bool(t.requires_grad) and not param)
        self._empty_ordered_dict()
        w(b"tR")
        if param:
            self._obj(bool(t.requires_grad))
            self._empty_ordered_dict()
            w(b"tR")


def _save_pytorch_zip(obj, fh) -> bool:
    """Write obj in PyTorch's layout; False (nothing written) if it holds something a
    weights-only reader cannot take (then save falls back to the JSON + .npy layout)."""
    writer = _TorchPickleWriter()
    try:
        pkl = writer.dump(obj)
    except TypeError:
        return False
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", b"little")
        for i, a in enumerate(writer.storages):
            zf.writestr(f"archive/data/{i}", a.tobytes())
        zf.writestr("archive/version", b"3\n")
    return True
