"""CUDA kernels and their launch configuration in the disk cache, as the CPU kernels are.

Two levels, the CPU path's (codegen/kernel.py, codegen/index.py, runtime/cache.py):

  - every kernel's source is a real, hash-named module in the cache directory,
    written once and verified before import (runtime.py's `kernel_for` loads it
    through `cache.load_source`; the module takes the prelude's device functions);
  - a plan record: the units of a graph (kernel sources, their arguments and launch
    configurations, GEMM specs, buffers, outputs' layouts) as JSON, in a file named
    by the hash of its content (`tgp_<hash>.json`, checked on every read, like a
    module), and an index entry (`codegen/index.py`) from the traced graph's key to
    that record. A warm process finds the record from the key alone: no autodiff, no
    passes, no planning; its kernels' modules load from their verified files.

The index key is the CPU path's (traced graph, what is done with it, the pipeline's
source) salted with "cuda" and whether the simulator runs the kernels (it plans
smaller launches). Records hold no code that runs on load: JSON, read through the
cache directory's handle (regular files only), checked field by field. Constant
arrays are in the record (base64 of their bytes, at most MAX_CONST_BYTES in all; the
key covers their values, as it covers every byte of the traced graph). Plans with
loops and branches (their bodies are graphs) or bigger constants get no record and
take the full path, as the CPU index skips kernels with NumPy fallbacks.

What is not cached: numba.cuda's compiled code (PTX/cubin). Its stock cache
unpickles files that nothing verified (runtime/numba_cache.py hooks only the CPU
dispatcher), so it stays off: each process compiles each kernel once, from the
verified module.

    >>> import numpy as np
    >>> from tracegrad.codegen.cuda.kernel_text import Buffer, Layout, Plan, Unit
    >>> out = Layout((2,), np.dtype("float32"), "t1", 0, (1,))
    >>> plan = Plan([Unit("elementwise", "k1", "def k1(p0, p1):\\n    pass\\n", ["in0", "t1"], (1, 8))],
    ...             {"in0": Buffer("in0", 2, np.dtype("float32"), "input", index=0),
    ...              "t1": Buffer("t1", 2, np.dtype("float32"), "temp")}, [out])
    >>> plan_of(record_of(plan)).outputs == [out]
    True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import re
from typing import Any

import numpy as np

from tracegrad.codegen.cuda.kernel_text import Buffer, Layout, Plan, Unit

log = logging.getLogger("tracegrad")

FORMAT = 1
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
_RECORD = re.compile(r"tgp_[0-9a-f]{32}")
_KINDS = {"elementwise", "reduce", "row", "rows", "gemm"}
_BUFFER_KINDS = {"input", "temp", "flag", "const"}
_DTYPES = {
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
}
MAX_RECORD = 16 << 20  # bytes
MAX_CONST_BYTES = 4 << 20  # constant arrays recorded in one plan, in all


class BadRecord(ValueError):
    """A plan record that is not one this module writes."""


# ------------------------------------------------------------------ plan <-> JSON


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _lists(v: Any) -> Any:
    return [_lists(x) for x in v] if isinstance(v, (tuple, list)) else v


def _layout_rec(lay: Layout) -> dict:
    return {
        "shape": [int(d) for d in lay.shape],
        "dtype": np.dtype(lay.dtype).name,
        "buf": lay.buf,
        "offset": int(lay.offset),
        "strides": [int(s) for s in lay.strides],
        "literal": lay.literal,
    }


def record_of(plan: Plan) -> dict | None:
    """The plan as JSON-able data, or None when it has units whose bodies are graphs
    (loops, branches) or constants of more than MAX_CONST_BYTES: not recorded."""
    if any(u.kind not in _KINDS or u.scan for u in plan.units):
        return None
    if any(b.kind not in _BUFFER_KINDS for b in plan.buffers.values()):
        return None
    consts = [b for b in plan.buffers.values() if b.kind == "const"]
    if sum(np.asarray(b.value).nbytes for b in consts) > MAX_CONST_BYTES or any(
        np.asarray(b.value).size != b.size for b in consts
    ):
        return None
    units = []
    for u in plan.units:
        rec: dict = {
            "kind": u.kind,
            "name": u.name,
            "source": u.source,
            "args": list(u.args),
            "launch": _lists(u.launch),
            "after": [[n, src, list(args), _lists(launch)] for n, src, args, launch in u.after],
            "nodes": [str(n) for n in u.nodes],
        }
        if u.gemm:
            g = u.gemm
            rec["gemm"] = {
                "a": _layout_rec(g["a"]),
                "b": _layout_rec(g["b"]),
                "out": g["out"],
                **{k: int(g[k]) for k in ("m", "n", "k", "batch")},
                "offs_a": [int(x) for x in np.asarray(g["offs_a"]).reshape(-1)],
                "offs_b": [int(x) for x in np.asarray(g["offs_b"]).reshape(-1)],
                "dtype": np.dtype(g["dtype"]).name,
            }
        units.append(rec)
    buffers = [
        {
            "name": b.name,
            "size": int(b.size),
            "dtype": np.dtype(b.dtype).name,
            "kind": b.kind,
            "index": int(b.index),
            **({"value": _encode_array(b.value, b.dtype)} if b.kind == "const" else {}),
        }
        for b in plan.buffers.values()
    ]
    return {
        "format": FORMAT,
        "units": units,
        "buffers": buffers,
        "outputs": [_layout_rec(o) for o in plan.outputs],
    }


def _encode_array(value, dtype) -> str:
    flat = np.ascontiguousarray(value, dtype=np.dtype(dtype).newbyteorder("<")).reshape(-1)
    return base64.b64encode(flat.tobytes()).decode("ascii")


def _decode_array(text: Any, buffer: Buffer) -> np.ndarray:
    _want(isinstance(text, str) and len(text) <= 2 * MAX_CONST_BYTES, "bad constant")
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    dtype = np.dtype(buffer.dtype).newbyteorder("<")
    _want(len(raw) == buffer.size * dtype.itemsize, "a constant of the wrong size")
    return np.frombuffer(raw, dtype).astype(buffer.dtype)  # (a writable, native copy)


def _want(cond: bool, what: str) -> None:
    if not cond:
        raise BadRecord(what)


def _name(v: Any) -> str:
    _want(isinstance(v, str) and _NAME.fullmatch(v) is not None, f"bad name {v!r}")
    return v


def _int(v: Any, lo: int = 0) -> int:
    _want(isinstance(v, int) and not isinstance(v, bool) and v >= lo, f"bad integer {v!r}")
    return v


def _dtype(v: Any) -> np.dtype:
    _want(v in _DTYPES, f"bad dtype {v!r}")
    return np.dtype(v)


def _launch(v: Any) -> tuple:
    _want(isinstance(v, list) and len(v) == 2, f"bad launch {v!r}")
    for part in v:
        for x in part if isinstance(part, list) else [part]:
            _int(x, 1)
    return _tuples(v)


def _layout(v: Any, buffers: dict) -> Layout:
    _want(isinstance(v, dict), "bad layout")
    shape = tuple(_int(d) for d in v["shape"])
    strides = tuple(_int(s, -(1 << 62)) for s in v["strides"])
    literal, buf = v["literal"], v["buf"]
    if literal is not None:
        _want(isinstance(literal, str) and buf is None, "bad literal layout")
        _want(re.fullmatch(r"[\w.+\-() ]{1,80}", literal) is not None, "bad literal")
    else:
        _want(buf in buffers and len(strides) == len(shape), "bad buffer layout")
    return Layout(shape, _dtype(v["dtype"]), buf, _int(v["offset"]), strides, literal)


def plan_of(record: Any) -> Plan:
    """The Plan a record describes; BadRecord (a ValueError) for anything this
    module would not have written."""
    try:
        return _plan_of(record)
    except BadRecord:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        raise BadRecord(f"{type(exc).__name__}: {exc}") from None


def _plan_of(record: Any) -> Plan:
    _want(isinstance(record, dict) and record.get("format") == FORMAT, "another format")
    buffers: dict = {}
    for b in record["buffers"]:
        name = _name(b["name"])
        _want(b["kind"] in _BUFFER_KINDS and name not in buffers, f"bad buffer {name}")
        buffers[name] = Buffer(
            name, _int(b["size"], 1), _dtype(b["dtype"]), b["kind"], index=_int(b["index"], -1)
        )
        if b["kind"] == "const":
            buffers[name].value = _decode_array(b["value"], buffers[name])
    inputs = sorted(b.index for b in buffers.values() if b.kind == "input")
    _want(inputs == list(range(len(inputs))), "inputs are not numbered 0..n-1")
    units = []
    for u in record["units"]:
        _want(u["kind"] in _KINDS, f"bad unit kind {u['kind']!r}")
        args = [_name(a) for a in u["args"]]
        _want(all(a in buffers for a in args), "an argument names no buffer")
        unit = Unit(u["kind"], _name(u["name"]), nodes=[str(n) for n in u["nodes"]])
        unit.args = args
        if u["kind"] == "gemm":
            g = u["gemm"]
            _want(len(args) == 3 and g["out"] == args[2], "bad gemm arguments")
            unit.gemm = {
                "a": _layout(g["a"], buffers),
                "b": _layout(g["b"], buffers),
                "out": g["out"],
                **{k: _int(g[k]) for k in ("m", "n", "k", "batch")},
                "offs_a": np.array([_int(x) for x in g["offs_a"]], np.int64),
                "offs_b": np.array([_int(x) for x in g["offs_b"]], np.int64),
                "dtype": _dtype(g["dtype"]),
            }
            _want(len(unit.gemm["offs_a"]) == len(unit.gemm["offs_b"]) == g["batch"], "bad batch")
        else:
            _want(isinstance(u["source"], str) and bool(u["source"]), "a unit without source")
            unit.source = u["source"]
            unit.launch = _launch(u["launch"])
            for name, source, a_args, launch in u["after"]:
                _want(isinstance(source, str) and bool(source), "bad second pass")
                a_args = [_name(a) for a in a_args]
                _want(all(a in buffers for a in a_args), "an argument names no buffer")
                unit.after.append((_name(name), source, a_args, _launch(launch)))
        units.append(unit)
    outputs = [_layout(o, buffers) for o in record["outputs"]]
    return Plan(units, buffers, outputs)


# ------------------------------------------------------------------ the cache


def cuda_key(index_key: str) -> str:
    """The index key of a traced graph's CUDA plan (the CPU kernel's key, salted)."""
    from tracegrad.placement import is_simulated

    text = f"tracegrad cuda plan {FORMAT}; simulated {is_simulated()}; {index_key}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _types(in_types) -> list:
    return [[[int(d) for d in shape], np.dtype(dt).str] for shape, dt in in_types]


def write(index_key: str, plan: Plan, name: str, in_types) -> str:
    """Record `plan` (built and compiled by this process) for `index_key`; returns
    what happened, for the log. Errors are logged, never raised."""
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    record = record_of(plan)
    if record is None:
        return "not recorded (loop bodies, or constants over MAX_CONST_BYTES)"
    d = cache.open_cache_dir()
    if d is None:
        return "no usable cache dir"
    data = json.dumps(record, sort_keys=True).encode()
    fname = f"tgp_{cache.content_hash(data)}"
    try:
        cache.write_file(d, f"{fname}.json", data, sync=True)
    except OSError as exc:
        log.info("cuda: cannot write plan record %s (%s)", fname, exc)
        return f"write failed ({exc})"
    index.write_entry(
        d,
        cuda_key(index_key),
        {"cuda_plan": fname, "name": str(name), "in_types": _types(in_types)},
    )
    return f"recorded as {fname}"


def read(index_key: str, in_types) -> tuple[Plan, str] | tuple[None, str]:
    """(plan, graph name) recorded for `index_key`, or (None, why not)."""
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    d = cache.open_cache_dir()
    if d is None:
        return None, "no usable cache dir"
    payload, why = index.read_entry(d, cuda_key(index_key))
    if payload is None:
        return None, why
    fname = payload.get("cuda_plan")
    if not (isinstance(fname, str) and _RECORD.fullmatch(fname)):
        return None, "the entry names no plan record"
    if payload.get("in_types") != _types(in_types):
        return None, "the entry's input types differ"
    try:
        data = cache.read_file(d, f"{fname}.json", limit=MAX_RECORD)
    except OSError as exc:
        return None, f"{fname}.json unreadable ({type(exc).__name__})"
    if data is None:
        return None, f"{fname}.json is missing"
    if f"tgp_{cache.content_hash(data)}" != fname:
        cache.remove(d, f"{fname}.json")  # (the full path writes it again)
        return None, f"{fname}.json fails its hash check (stale or corrupt; removed)"
    try:
        plan = plan_of(json.loads(data.decode()))
    except (BadRecord, ValueError, UnicodeDecodeError) as exc:
        return None, f"{fname}.json is not a plan record ({exc})"
    n_inputs = sum(b.kind == "input" for b in plan.buffers.values())
    if n_inputs != len(in_types):
        return None, f"{fname}.json takes {n_inputs} inputs"
    return plan, str(payload.get("name") or "f")
