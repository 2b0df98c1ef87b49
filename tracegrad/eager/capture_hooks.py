"""Where eager code meets a capture (`tracegrad.compile` of PyTorch-style code).

While `tracegrad.compile` captures eager code, eager tensors may hold a tracer in
`_data` instead of an ndarray: their ops record IR nodes through the rule table
(`apply_op` calls `bind`), in-place ops rebind `_data` (functionalization), and the
eager engine runs the same vjp rules on tracers, so a `backward()` inside the
captured function becomes part of the graph.

This module is the eager side's only view of a capture. The front end
(`tracegrad.capture`) installs a session per thread; eager code asks it to lift
concrete state (parameters, buffers, optimizer state, tensors closed over) into
graph inputs, and tells it when a module runs, an optimizer steps or a random
number is drawn. Eager mode pays one list read per op when nothing is captured.

    >>> current() is None
    True
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tracegrad.ops.core import _KINDS, TracegradError, user_location_suffix  # noqa: F401

ACTIVE = [0]  # sessions open in any thread (cheap test before the local one)
_LOCAL = threading.local()


class GraphBreak(TracegradError):
    """Captured code needs a concrete value (`.item()`, `print(t)`, `.numpy()`, an op
    with no rule): the static graph has to end here."""


class NeedsCapture(TracegradError):
    """An eager op met a tracer outside a capture: the function being compiled runs
    PyTorch-style code, which `tracegrad.compile` captures (`grad`/`value_and_grad`
    trace tracegrad's own ops only)."""


def current() -> Any:
    """This thread's capture session, or None."""
    if not ACTIVE[0]:
        return None
    return getattr(_LOCAL, "session", None)


def install(session: Any) -> Any:
    """Make `session` this thread's capture; returns the previous one (to restore)."""
    previous = getattr(_LOCAL, "session", None)
    _LOCAL.session = session
    ACTIVE[0] += 1 if session is not None and previous is None else 0
    ACTIVE[0] -= 1 if session is None and previous is not None else 0
    return previous


def is_traced(data: Any) -> bool:
    """True for a tensor's `_data` that is a tracer (a registered value kind), not an
    array or a NumPy scalar."""
    return type(data) in _KINDS


def lift(tensor: Any) -> None:
    """Make a concrete tensor an input of the current capture (no-op without one)."""
    session = current()
    if session is not None and type(tensor._data) is np.ndarray:
        session.lift(tensor)


def module_called(module: Any) -> None:
    session = current()
    if session is not None:
        session.module_called(module)


def grad_cleared(param: Any, set_to_none: bool) -> None:
    session = current()
    if session is not None:
        session.grad_cleared(param, set_to_none)


def optimizer_step(optimizer: Any) -> None:
    session = current()
    if session is not None:
        session.optimizer_step(optimizer)


def backward_called() -> None:
    """The eager engine runs inside a capture: the graph holds its own backward."""
    session = current()
    if session is not None:
        session.backward_called()


def graph_break(reason: str) -> None:
    """Raise GraphBreak when a capture is running (eager code that needs real values)."""
    session = current()
    if session is not None:
        raise GraphBreak(reason)


def random_draw(method: str, args: tuple, kwargs: dict, dtype: Any = None):
    """A capture's stand-in for `generator().<method>(*args, **kwargs)`: a graph input
    drawn from the eager generator on every call, in program order; None without a
    capture (draw eagerly)."""
    session = current()
    if session is None:
        return None
    return session.random_draw(method, args, kwargs, dtype)
