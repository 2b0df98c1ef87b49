"""`tracegrad.explain`: the graphs and graph breaks of compiled PyTorch-style code,
as `torch._dynamo.explain` reports them."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from tracegrad.capture.breaks import ExplainOutput, GraphBreakWarning
from tracegrad.capture.module import is_module
from tracegrad.compiler import CompiledFunction

__all__ = ["explain", "ExplainOutput"]


def explain(fn: Callable, *args: Any, **kwargs: Any) -> ExplainOutput:
    """Capture `fn(*args, **kwargs)` (it runs once, eagerly where it breaks) and report
    the graphs, the graph breaks and their reasons, as torch._dynamo.explain does.

    >>> import tracegrad as tg, tracegrad.eager as torch
    >>> def f(x):
    ...     y = x.sin()
    ...     if y.sum() > 0:        # needs the value: a graph break
    ...         return y * 2
    ...     return y
    >>> report = tg.explain(f, torch.ones(3))
    >>> report.graph_count, report.graph_break_count
    (0, 1)
    >>> "bool()" in report.break_reasons[0].reason
    True
    """
    target = fn
    if is_module(fn):
        module = fn
        target = lambda *a, **k: module(*a, **k)  # noqa: E731
    cf = CompiledFunction(target, "compile", backend="interpret")
    cf.force_capture = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphBreakWarning)
        out = cf(*args, **kwargs)
    graphs = [
        e.traced.graph
        for entries in cf.entries.values()
        for e in (entries if isinstance(entries, list) else [entries])
        if getattr(e, "traced", None) is not None
    ]
    ops = [[n.op for n in g.nodes if n.op not in ("input", "const")] for g in graphs]
    return ExplainOutput(graphs, len(graphs), len(cf.graph_breaks), list(cf.graph_breaks), ops, out)
