"""`tracegrad.compile` of PyTorch-style code: modules, losses, backward, optimizer steps.

The front end's rooms: `session` (lifting the state a function reads into graph
inputs, and writing it back), `guards` (when a captured graph still applies),
`entry` (tracing with the one rule table and tracer, lowering, running),
`breaks` (graph breaks) and `module` (`compile(module)`); `tracegrad.explain`
reports graphs and breaks.

    >>> import numpy as np, tracegrad as tg, tracegrad.eager as torch
    >>> model = torch.nn.Linear(3, 2)
    >>> step = tg.compile(lambda x: model(x).sum(), backend="interpret")
    >>> x = torch.ones(4, 3)
    >>> loss = step(x)
    >>> loss.grad_fn.name()
    'CompiledFunctionBackward'
    >>> loss.backward()
    >>> np.allclose(model.weight.grad.numpy(), 4.0)
    True
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tracegrad.capture.breaks import BREAK_ERRORS, EagerFallback, GraphBreakError, note_break
from tracegrad.capture.entry import build_entry
from tracegrad.capture.module import CompiledModule
from tracegrad.lowering import _BUILD_LOCK

__all__ = ["call_captured", "lower_captured", "CompiledModule", "GraphBreakError"]

CAPTURE = "capture"
# Tracing swaps the `_data` of the user's tensors for tracers, and entries read
# `_data` back: traces and runs of captured functions take turns across threads.
_CAPTURE_LOCK = threading.RLock()


def _eager_state():
    from tracegrad.eager._tensor import Tensor
    from tracegrad.eager.grad_mode import STATE

    return Tensor, STATE


def _leaf_key(value: Any, Tensor, grad_enabled: bool):
    if isinstance(value, Tensor):
        d = value._data
        return ("t", d.shape, d.dtype.str, bool(value._requires_grad and grad_enabled))
    if isinstance(value, np.ndarray):
        return ("a", value.shape, value.dtype.str)
    if type(value) in (int, float, bool, str) or value is None:
        return (type(value), repr(value))
    shape = getattr(value, "shape", None)
    if shape is not None:
        return ("x", tuple(shape), str(getattr(value, "dtype", "")))
    return ("o", id(value))


def _fast_key(args: tuple, Tensor, grad_enabled: bool):
    """A cheap key for arguments that are all tensors or arrays (then they are the
    leaves themselves); None otherwise."""
    key = (grad_enabled,)
    for a in args:
        kind = type(a)
        if kind is Tensor:
            d = a._data
            if type(d) is not np.ndarray:
                return None
            key += (d.shape, d.dtype, a._requires_grad)
        elif kind is np.ndarray:
            key += (a.shape, a.dtype, None)
        else:
            return None
    return key


def try_fast(cf, args: tuple):
    """The hot path: arguments described by `_fast_key`, an entry whose guards pass; else
    None (the full path decides)."""
    Tensor, STATE = _eager_state()
    key = _fast_key(args, Tensor, bool(STATE.grad_enabled))
    candidates = cf.entries.shortcut(CAPTURE, key) if key is not None else None
    if not candidates:
        return None
    leaves = list(args)
    with _CAPTURE_LOCK:
        for entry in candidates:
            if entry.guards.failure(leaves) is None:
                cf.entries.hits += 1
                return (entry.run(leaves),)
    return None


def _signature(cf, args: tuple, kwargs: dict):
    """(Tensor class, grad mode, leaves, their tree, the entry key) of a call."""
    Tensor, STATE = _eager_state()
    grad_enabled = bool(STATE.grad_enabled)
    leaves, in_tree, _ = cf._flatten(args, kwargs, ())
    key = (
        CAPTURE,
        in_tree,
        tuple(_leaf_key(v, Tensor, grad_enabled) for v in leaves),
        tuple(kwargs),
        grad_enabled,
    )
    return Tensor, grad_enabled, leaves, in_tree, key


def call_captured(cf, args: tuple, kwargs: dict):
    """Run compiled function `cf` on arguments that hold eager tensors (or whose code
    runs eager modules): find or build the captured entry whose guards pass."""
    Tensor, grad_enabled, leaves, in_tree, key = _signature(cf, args, kwargs)
    with _CAPTURE_LOCK:
        candidates = cf.entries.get(key)
        reason = "first call" if not cf.trace_reasons else "new argument signature"
        if candidates:
            for entry in candidates:
                failure = entry.guards.failure(leaves)
                if failure is None:
                    cf.entries.hits += 1
                    return entry.run(leaves)
                reason = failure
        entry = _build(cf, args, kwargs, leaves, in_tree, grad_enabled, reason)
        if candidates is None:
            candidates = []
            cf.add_entry(key, candidates)
        candidates.insert(0, entry)
        fast = None if kwargs else _fast_key(args, Tensor, grad_enabled)
        if fast is not None and len(leaves) == len(args):
            cf.entries.remember(CAPTURE, fast, candidates)
        return entry.run(leaves)


def lower_captured(cf, args: tuple, kwargs: dict):
    """`cf.lower(*args)` for PyTorch-style code: the captured entry's stages, traced (not
    run) if this signature has none yet. `joint` is the whole joint graph (forward,
    backward and the optimizer's update for a training step); with an AOT split,
    `forward` and `backward` are the two kernels' own stages."""
    from tracegrad.lowering import Lowered

    _, grad_enabled, leaves, in_tree, key = _signature(cf, args, kwargs)
    with _CAPTURE_LOCK:
        entry = next(
            (e for e in cf.entries.get(key) or () if e.guards.failure(leaves) is None), None
        )
        if entry is None:
            entry = _build(cf, args, kwargs, leaves, in_tree, grad_enabled, "lower()")
            cf.add_entry(key, (cf.entries.get(key) or []) + [entry])
    if entry.lowered is None:
        raise GraphBreakError(entry.record.message(fullgraph=True))
    base = entry.lowered
    if entry.aot is None:
        return base
    lowered = Lowered(
        entry.graph, entry.aot.joint, base.optimized, base.kernel, base.backend, base.timings
    )
    lowered.forward, lowered.backward = base, entry.lowered_backward
    return lowered


def _build(cf, args, kwargs, leaves, in_tree, grad_enabled: bool, reason: str):
    cf.entries.traces += 1
    cf.trace_reasons.append(reason)
    names = cf.capture_names()
    with _BUILD_LOCK:
        try:
            return build_entry(
                cf, args, kwargs, leaves, in_tree, cf.backend, cf.optimize, grad_enabled, names
            )
        except BREAK_ERRORS as exc:
            record = note_break(cf, exc)
            if cf.fullgraph:
                raise GraphBreakError(record.message(fullgraph=True)) from exc
            return EagerFallback(cf, args, kwargs, record)
