"""Native loops for `scan` nodes: the body's kernel called from one njit loop.

A scan node runs where a kernel's driver calls NumPy impls (it has no per-node
template). Instead of its impl (a Python loop over the interpreter), the loader
installs the runner built here: the body graph is optimized, fused and
generated as its own kernel, and a small njit loop in the same generated module
calls that kernel once per step and writes carries and per-step outputs into
the packed result. The module's size does not depend on the trip count.

    @njit(cache=True)
    def scan_loop(consts..., carry..., xs..., scan_consts..., length):
        out = np.empty(total, dtype)
        for t in range(length):
            i = length - 1 - t      # or t
            res = body(consts..., carry..., tg_view(xs_f, i * size, shape)..., scan_consts...)
            carry = res[0], ...
            out[offset_y + i * size_y : ...] = res[k]      (elementwise copies)
        out[:carry sizes] = carry...
        return out

Bodies that cannot be generated as one njit function (a nested loop inside, a
node without codegen), or results of several dtypes, use a Python loop over the
body's kernel instead: slower per step, still compiled once.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node

log = logging.getLogger("tracegrad")

_RUNNERS: weakref.WeakKeyDictionary[Graph, dict] = weakref.WeakKeyDictionary()


def scan_runner(
    node: Node,
    build_kernel: Callable[[Graph], Callable],
    calls_blas: Callable[[str], bool],
    blas_cap: Callable[[str], int | None],
) -> Callable | None:
    """A callable computing the scan node's packed value from its operands.

    The kernel builder (`kernel.build_kernel`, for bodies that need a Python loop),
    its BLAS test (`kernel._calls_blas`) and the BLAS threads the body's largest call
    is worth (`kernel.blas_thread_cap`) come from the caller: this module sits below
    kernel.py, which installs the runners, so imports run one way."""
    attrs = node.attrs
    body = attrs["body"]
    key = (attrs["length"], attrs["reverse"], attrs["n_carry"], attrs["n_xs"])
    per_body = _RUNNERS.setdefault(body, {})
    run = per_body.get(key)
    if run is None:
        run = per_body[key] = _build(body, *key, build_kernel, calls_blas, blas_cap)
    return run


def _build(
    body: Graph,
    length: int,
    reverse: bool,
    n_carry: int,
    n_xs: int,
    build_kernel: Callable[[Graph], Callable],
    calls_blas: Callable[[str], bool],
    blas_cap: Callable[[str], int | None],
) -> Callable:
    from tracegrad.codegen.generate import generate
    from tracegrad.codegen.plan import ir_hash, optimized_body
    from tracegrad.loops.primitives import _scan_avals, pack, packed_layout

    graph = optimized_body(body)
    dtype, slots = packed_layout(_scan_avals(graph, length, n_carry))
    same_dtype = all(slot[3] == dtype for slot in slots)
    name = f"scan_body_{ir_hash(graph)}"
    emitted = generate(graph, name)
    if same_dtype and not emitted.fallback_ids:
        try:
            return _native(
                graph,
                emitted,
                name,
                length,
                reverse,
                n_carry,
                n_xs,
                dtype,
                slots,
                calls_blas,
                blas_cap,
            )
        except Exception as exc:  # never the user's fault: run the body kernel per step
            log.warning(
                "scan %s: native loop failed (%s: %s); Python loop over the body kernel",
                body.name,
                type(exc).__name__,
                exc,
            )
    kernel = build_kernel(graph)
    y_nodes = graph.outputs[n_carry:]

    def run_python_loop(*operands):
        carry = [np.ascontiguousarray(c) for c in operands[:n_carry]]
        xs = operands[n_carry : n_carry + n_xs]
        consts = operands[n_carry + n_xs :]
        ys = [np.empty((length,) + tuple(n.shape), n.dtype) for n in y_nodes]
        for t in range(length):
            i = length - 1 - t if reverse else t
            outs = kernel(*carry, *[np.ascontiguousarray(x[i]) for x in xs], *consts)
            carry = list(outs[:n_carry])
            for y, o in zip(ys, outs[n_carry:], strict=True):
                y[i] = o
        return pack(carry + ys, dtype)

    return run_python_loop


def _native(
    graph, emitted, body_name, length, reverse, n_carry, n_xs, dtype, slots, calls_blas, blas_cap
):
    from tracegrad.runtime.cache import load_source

    n_in = len(graph.inputs)
    consts = [f"c{cid}" for cid in emitted.const_ids]
    carry = [f"carry{k}" for k in range(n_carry)]
    xs = [f"xs{k}" for k in range(n_xs)]
    scan_consts = [f"k{k}" for k in range(n_in - n_carry - n_xs)]
    x_nodes = graph.inputs[n_carry : n_carry + n_xs]
    loop_name = f"{body_name}_loop"
    total = sum(slot[1] for slot in slots)
    lines = [
        "@njit(cache=True, nogil=True)",
        f"def {loop_name}({', '.join(consts + carry + xs + scan_consts)}):",
        f"    out = np.empty({max(total, 1)}, np.{dtype.name})",
    ]
    for k, _node in enumerate(x_nodes):
        lines.append(f"    xs{k}_f = tg_flat(xs{k})")
    lines.append(f"    for t in range({length}):")
    lines.append(f"        i = {length - 1} - t" if reverse else "        i = t")
    x_args = [
        f"tg_view(xs{k}_f, i * {max(node.size, 0)}, {tuple(node.shape)!r})"
        for k, node in enumerate(x_nodes)
    ]
    call_args = consts + carry + x_args + scan_consts
    lines.append(f"        res = {body_name}({', '.join(call_args)})")
    for k in range(n_carry):
        lines.append(f"        carry{k} = res[{k}]")
    for k, (off, size, _shape, _) in enumerate(slots[n_carry:]):
        step = size // length if length else 0
        if step == 0:
            continue
        lines.append(f"        r{k} = tg_flat(res[{n_carry + k}])")
        lines.append(f"        for j in range({step}):")
        lines.append(f"            out[{off} + i * {step} + j] = r{k}[j]")
    for k, (off, size, _shape, _) in enumerate(slots[:n_carry]):
        if size == 0:
            continue
        lines.append(f"    cf{k} = tg_flat(carry{k})")
        lines.append(f"    for j in range({size}):")
        lines.append(f"        out[{off} + j] = cf{k}[j]")
    lines.append("    return out")
    emitted.source = emitted.source.rstrip("\n") + "\n\n\n" + "\n".join(lines) + "\n"
    module, _path, _status = load_source(emitted.source)  # an error: the Python loop
    loop = getattr(module, loop_name)
    const_values = [
        np.ascontiguousarray(
            next(n for n in graph.nodes if n.id == cid).attrs["value"],
            dtype=next(n for n in graph.nodes if n.id == cid).dtype,
        )
        for cid in emitted.const_ids
    ]
    in_dtypes = [n.dtype for n in graph.inputs]
    from tracegrad.ops import blas_threads

    # like a kernel's entry (codegen._load_aware): BLAS threads at most the idle CPUs for
    # the call. A driver around scans has no GEMM of its own, so nothing else limits them;
    # small GEMMs on 2 threads on a busy machine took 3-5x longer (lstm_scan_t20: 7-11 ms vs 2.4).
    # Beside another runtime's busy pool, at most the threads the largest call is worth,
    # as for a kernel: PyTorch eager's LSTM interleaved with lstm_scan_t20 f64 took 12.9-14.3
    # ms with the scan's GEMMs on 2 threads, 6.0-6.7 ms on 1 (tracegrad's 3.7-3.9 -> 4.0-4.2)
    limited = calls_blas(emitted.source)
    cap = blas_cap(emitted.source) if limited else None

    def run_native(*operands):
        args = [_kernel_array(a, d) for a, d in zip(operands, in_dtypes, strict=True)]
        if limited:
            saved = blas_threads.enter(cap)
            if saved is not None:
                try:
                    return loop(*const_values, *args)
                finally:
                    blas_threads.leave(saved)
        return loop(*const_values, *args)

    return run_native


def _kernel_array(value: Any, dtype) -> np.ndarray:
    """A C-contiguous, writeable array of the body's input dtype."""
    arr = np.asarray(value)
    if arr.dtype != dtype or not arr.flags.c_contiguous or not arr.flags.writeable:
        arr = np.array(arr, dtype=dtype, order="C", copy=True)
    return arr
