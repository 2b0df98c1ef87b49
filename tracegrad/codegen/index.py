"""The second cache level: traced graph -> generated module, skipping the pipeline.

A warm process used to re-run autodiff, the passes, fusion and code
generation (~40 ms for an MLP) only to find that the module they produce is
already in the cache. This index maps a key of what *determines* that module
to the module's name, so the work is skipped:

    key = sha256(traced graph (every node: op, operand ids, attrs with full
                 const bytes, shape, dtype, tag; inputs, outputs, name),
                 what the compiler does with it (mode, differentiated leaves,
                 optimize flag), the content of tracegrad's own compile
                 pipeline source files, and the NumPy and Python versions)

The traced IR plus the code that transforms it fully determine the module;
the Numba version is not in the key because the module's own name (its
content hash) covers it: after an upgrade the referenced module fails its
hash check and the entry is rebuilt.

An entry is `<cache dir>/tgi_<key>.json` with the module name, its entry
function, the kernel's input types, the key itself (`graph`) and a checksum of
all that bound to the file's key (a truncated, edited or moved entry is
detected and rebuilt, with the reason logged). The module itself is loaded by
`cache.load_named`, with the same content-hash check as every load, and the
entry is used only if it names a Numba kernel defined by that very module and
compiled for the traced graph's input types (`codegen._not_a_kernel`): not an
imported `njit`, an intrinsic or another function's kernel. Entries are read
and written through the cache directory's handle (cache.py: no symlinks, no
FIFOs), atomically (temp file + os.replace; unlike a module, an entry may be
replaced: Numba's cache does not key on it) and only after the full pipeline
built and loaded that very module.

Only kernels that are a function of their inputs alone get entries: no
constant arrays passed as arguments (their values live in the graph), no
NumPy fallbacks (they are installed from graph nodes), no float16 wrapper.
Anything else takes the full path, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np

from tracegrad.ir.graph import Graph
from tracegrad.runtime.cache import KERNEL_RUNTIME_MODULES

log = logging.getLogger("tracegrad")

FORMAT = 2  # 2: the payload names its graph key
_PIPELINE_HASH: str | None = None
# What produces a module from a traced graph (eager/ and viz/ do not).
_PIPELINE_PARTS = (
    "__init__.py",
    "compiler.py",
    "tracing.py",
    "autodiff.py",
    "ir",
    "ops",
    "passes",
    "codegen",
    # compiled into each kernel's machine code (Numba's cache does not see them change)
    *(f"runtime/{name}" for name in KERNEL_RUNTIME_MODULES),
)


class _Unkeyable(Exception):
    pass


def pipeline_hash() -> str:
    """sha256 over the source of tracegrad's trace -> kernel pipeline (once per
    process); "" when the sources cannot be read (then there is no index: a
    change of the code could not be detected)."""
    global _PIPELINE_HASH
    if _PIPELINE_HASH is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256()
        try:
            for part in _PIPELINE_PARTS:  # (os, not pathlib: this runs in every warm process)
                files = _python_files(root, part)
                if not files:
                    raise FileNotFoundError(os.path.join(root, part))
                for rel in files:
                    with open(os.path.join(root, rel), "rb") as f:
                        h.update(rel.encode() + b"\0")
                        h.update(f.read() + b"\0")
            _PIPELINE_HASH = h.hexdigest()
        except OSError as exc:
            log.info("cache index disabled: cannot read tracegrad's source (%s)", exc)
            _PIPELINE_HASH = ""
    return _PIPELINE_HASH


def _python_files(root: str, part: str) -> list[str]:
    """`part` (a file or a folder under `root`) as sorted relative paths of .py files."""
    if os.path.isfile(os.path.join(root, part)):
        return [part]
    files = []
    for folder, subfolders, names in os.walk(os.path.join(root, part)):
        subfolders[:] = [s for s in subfolders if s != "__pycache__"]
        rel = os.path.relpath(folder, root)
        files += [os.path.join(rel, n) for n in names if n.endswith(".py")]
    return sorted(files)


_BLAS_CORES: list[str] = []


def _blas_cores() -> str:
    """OpenBLAS's kernel set: the generated code depends on it (structured.py's
    small_nt_is_slow), and a cache directory may be shared between machines."""
    if not _BLAS_CORES:
        from tracegrad.ops.blas_threads import core_names

        _BLAS_CORES.append(",".join(sorted(set(core_names()))))
    return _BLAS_CORES[0]


def graph_key(graph: Graph, **context) -> str | None:
    """The index key of a traced graph and what is done with it; None if some
    attribute has no exact, stable encoding (then there is no index entry)."""
    pipeline = pipeline_hash()
    if not pipeline:
        return None
    h = hashlib.sha256()
    h.update(
        f"tracegrad index {FORMAT}; numpy {np.__version__}; python "
        f"{sys.version_info[:3]}; pipeline {pipeline}; blas {_blas_cores()}\0".encode()
    )
    try:
        h.update(_encode(sorted(context.items())).encode())
        h.update(
            _encode(
                (graph.name, [n.id for n in graph.inputs], [n.id for n in graph.outputs])
            ).encode()
        )
        for n in graph.nodes:
            h.update(
                _encode(
                    (
                        n.id,
                        n.op,
                        [i.id for i in n.inputs],
                        n.shape,
                        n.dtype,
                        n.tag,
                        sorted(n.attrs.items()),
                    )
                ).encode()
            )
            for v in n.attrs.values():
                _hash_arrays(h, v)
    except _Unkeyable:
        return None
    return h.hexdigest()[:32]


def _encode(v) -> str:
    """An exact text for attribute values (arrays only by dtype and shape: their
    bytes go into the hash directly)."""
    if v is None or v is Ellipsis or isinstance(v, (bool, int, str, bytes)):
        return repr(v)
    if isinstance(v, float):
        return float.hex(v)
    if isinstance(v, np.ndarray):
        return f"ndarray({v.dtype.str}, {v.shape})"
    if isinstance(v, np.generic):
        return f"{v.dtype.str}:{v.tobytes().hex()}"
    if isinstance(v, np.dtype):
        return f"dtype({v.str})"
    if isinstance(v, slice):
        return f"slice({_encode(v.start)}, {_encode(v.stop)}, {_encode(v.step)})"
    if isinstance(v, (tuple, list)):
        return ("(" if isinstance(v, tuple) else "[") + ", ".join(_encode(x) for x in v) + ")"
    if isinstance(v, type) and v.__module__ in ("builtins", "numpy"):
        return f"type({v.__module__}.{v.__qualname__})"
    raise _Unkeyable(type(v).__name__)


def _hash_arrays(h, v) -> None:
    if isinstance(v, np.ndarray):
        h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, (tuple, list)):
        for x in v:
            _hash_arrays(h, x)


def entry_path(directory: Path, key: str) -> Path:
    return directory / f"tgi_{key}.json"


def _checksum(key: str, payload: dict) -> str:
    text = key + "\0" + json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _open_dir(directory):
    """The checked cache directory behind `directory` (a CacheDir, or the path of
    the process's cache directory); None if it is not usable."""
    from tracegrad.runtime import cache

    if isinstance(directory, cache.CacheDir):
        return directory
    d = cache.open_cache_dir()
    if d is not None and Path(directory) == d.path:
        return d
    return None


def read_entry(directory, key: str) -> tuple[dict | None, str]:
    """(payload, "") or (None, why not). The entry is read through the cache
    directory's handle (a FIFO or other non-file in its place is not opened),
    and its checksum binds it to `key`, the traced graph's hash."""
    from tracegrad.runtime import cache

    name = entry_path(Path("."), key).name
    d = _open_dir(directory)
    if d is None:
        return None, "no usable cache dir"
    try:
        raw = cache.read_file(d, name, limit=1 << 16)
    except cache.NotAFile as exc:
        cache.remove(d, name)
        return None, f"{name} skipped ({exc})"
    except OSError as exc:
        return None, f"cannot read {name} ({exc})"
    if raw is None:
        return None, "no entry"
    try:
        data = json.loads(raw.decode())
        payload, check = data["payload"], data["check"]
        ok = isinstance(payload, dict) and check == _checksum(key, payload)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        ok = False
    if not ok or payload.get("format") != FORMAT:
        return None, f"{name} is corrupt or from another format (checksum mismatch)"
    if payload.get("graph") != key:
        return (
            None,
            f"{name} is bound to another graph (its payload names {payload.get('graph')!r})",
        )
    return payload, ""


def write_entry(directory, key: str, payload: dict) -> None:
    """Atomically create or replace the entry (errors are logged, never raised)."""
    from tracegrad.runtime import cache

    payload = {**payload, "format": FORMAT, "graph": key}
    data = json.dumps({"payload": payload, "check": _checksum(key, payload)}, sort_keys=True)
    name = entry_path(Path("."), key).name
    d = _open_dir(directory)
    if d is None:
        log.info("cache: no usable cache dir for index entry %s", name)
        return
    try:
        cache.write_file(d, name, data.encode(), replace=True)
    except OSError as exc:
        log.info("cache: cannot write index entry %s (%s)", name, exc)
