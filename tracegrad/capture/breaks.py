"""Graph breaks: captured code that needs real values, and `explain`.

`.item()` or `bool(t)` feeding Python control flow, `print(t)`, `t.numpy()`, an
optimizer without a capturable step, `manual_seed` inside the function: a static
graph cannot hold them. By default the call runs as eager code instead (a
warning names the user's file and line once); `fullgraph=True` raises
`GraphBreakError`. `tracegrad.explain(fn, *args)` (tracegrad/explain.py) reports
the graphs and breaks.
"""

from __future__ import annotations

import os
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from tracegrad.eager.capture_hooks import GraphBreak
from tracegrad.ops import core
from tracegrad.tracing import TracingError, tree_unflatten

BREAK_ERRORS = (GraphBreak, TracingError)


class GraphBreakError(TracingError):
    """`fullgraph=True` and the function cannot be captured as one graph."""


class GraphBreakWarning(UserWarning):
    """A compiled function met code it cannot capture and ran it eagerly."""


@dataclass
class BreakRecord:
    reason: str
    filename: str | None
    lineno: int | None
    line: str

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}" if self.filename else "unknown location"

    def message(self, fullgraph: bool = False) -> str:
        what = (
            "fullgraph=True: the function cannot be captured as one graph"
            if fullgraph
            else "graph break; this call runs as eager code"
        )
        shown = f"\n    {self.line}" if self.line else ""
        return f"tracegrad.compile: {what}\n  at {self.location}{shown}\n  reason: {self.reason}"


def _user_frame_of(exc: BaseException):
    """The innermost frame of the traceback outside tracegrad and NumPy."""
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        module = frame.f_globals.get("__name__", "")
        if (
            not core._inside_package(name)
            and not module.startswith("numpy")
            and not name.startswith("<frozen")
        ):
            found = (name, lineno)
    return found


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else type(text).__name__


def note_break(cf, exc: BaseException) -> BreakRecord:
    """Record (and warn about, once per line) why capturing `cf` stopped."""
    import linecache

    where = _user_frame_of(exc)
    filename, lineno = where if where else (None, None)
    line = linecache.getline(filename, lineno).strip() if filename else ""
    record = BreakRecord(_first_line(str(exc)) or type(exc).__name__, filename, lineno, line)
    cf.graph_breaks.append(record)
    if not cf.fullgraph:
        warnings.warn_explicit(
            record.message(),
            GraphBreakWarning,
            filename or "<tracegrad>",
            lineno or 0,
            module=os.path.splitext(os.path.basename(filename or "x"))[0],
        )
    return record


class EagerFallback:
    """The entry of a signature whose capture broke: runs the function eagerly."""

    traced = None
    lowered = None

    def __init__(self, cf, args: tuple, kwargs: dict, record: BreakRecord):
        self.fn = cf.fn
        self.n_explicit = len(args) - cf._n_ext
        self.kw_names = tuple(kwargs)
        self.in_tree = cf._flatten(args, kwargs, ())[1]
        self.record = record
        self.guards = _NoGuards()

    def run(self, leaves: list):
        values = tree_unflatten(self.in_tree, leaves)
        n_args = len(values) - len(self.kw_names)
        kwargs = dict(zip(self.kw_names, values[n_args:], strict=True))
        return self.fn(*values[: self.n_explicit], **kwargs)


class _NoGuards:
    @staticmethod
    def failure(leaves: list) -> None:
        return None


@dataclass
class ExplainOutput:
    """What `tracegrad.explain` found (the fields of torch._dynamo.explain's)."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    ops_per_graph: list
    out: Any = None

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {sum(len(ops) for ops in self.ops_per_graph)}",
            "Break Reasons:",
        ]
        for k, record in enumerate(self.break_reasons, 1):
            lines.append(
                f"  Break Reason {k}:\n    Reason: {record.reason}\n"
                f"    User Stack: {record.location}"
                + (f"\n      {record.line}" if record.line else "")
            )
        lines.append("Ops per Graph:")
        for k, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {k}: {', '.join(ops)}")
        return "\n".join(lines)
