"""Graph passes, IR -> IR: simplification (here) and fusion (`passes.fuse`).

`optimize(graph)` runs constant folding, algebraic simplification, common-
subexpression elimination and dead-code elimination in rounds until a round
changes nothing (a fixpoint), or until `max_rounds` rounds have run (a guard
against rules that undo each other; it warns with `RewriteLimitWarning`).
Every pass returns a new graph; the input graph is never modified.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph()
    >>> x = g.add_input(Aval((3,), np.dtype("float32")))
    >>> one = g.add_const(np.ones(3, np.float32))
    >>> g.outputs.append(g.new_node("neg", (g.new_node("neg", (g.new_node("mul", (x, one), {}, x.aval),), {}, x.aval),), {}, x.aval))
    >>> [n.op for n in optimize(g).nodes]
    ['input']
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from tracegrad.ir.graph import Graph
from tracegrad.passes.cse import cse, cse_counted
from tracegrad.passes.dce import dce, dce_counted
from tracegrad.passes.fold import MAX_FOLD_ELEMENTS, fold, fold_counted
from tracegrad.passes.loops import optimize_bodies_counted, share_scan_residuals_counted
from tracegrad.passes.rewrite import copy_graph, rewrite_graph
from tracegrad.passes.simplify import RULES, Rule, describe_rules, simplify, simplify_counted

__all__ = [
    "optimize",
    "optimize_with_stats",
    "OptimizeStats",
    "RewriteLimitWarning",
    "dce",
    "cse",
    "fold",
    "simplify",
    "Rule",
    "RULES",
    "describe_rules",
    "rewrite_graph",
    "copy_graph",
]

MAX_ROUNDS = 50

CountedPass = Callable[[Graph], "tuple[Graph, int]"]


class RewriteLimitWarning(RuntimeWarning):
    """optimize() stopped at its round limit before reaching a fixpoint."""


@dataclass
class OptimizeStats:
    rounds: int = 0
    reached_fixpoint: bool = False
    changes: dict[str, int] = field(default_factory=dict)  # pass name -> total changes


def optimize(
    graph: Graph,
    *,
    rules: list[Rule] | None = None,
    max_rounds: int = MAX_ROUNDS,
    max_fold_elements: int = MAX_FOLD_ELEMENTS,
) -> Graph:
    """A simplified copy of `graph`: same inputs (in order), same number of outputs.

    Outputs may be re-pointed to equivalent nodes (even to an input or a const).
    """
    return optimize_with_stats(
        graph, rules=rules, max_rounds=max_rounds, max_fold_elements=max_fold_elements
    )[0]


def optimize_with_stats(
    graph: Graph,
    *,
    rules: list[Rule] | None = None,
    max_rounds: int = MAX_ROUNDS,
    max_fold_elements: int = MAX_FOLD_ELEMENTS,
) -> tuple[Graph, OptimizeStats]:
    """`optimize`, also saying how many rounds ran and what each pass changed."""
    passes: list[tuple[str, CountedPass]] = [
        ("fold", lambda g: fold_counted(g, max_fold_elements)),
        ("simplify", lambda g: simplify_counted(g, rules)),
        ("cse", cse_counted),
        ("dce", dce_counted),
        ("loops", share_scan_residuals_counted),
        ("bodies", optimize_bodies_counted),
    ]
    stats = OptimizeStats(changes={name: 0 for name, _ in passes})
    current = copy_graph(graph)
    for _ in range(max_rounds):
        stats.rounds += 1
        round_changes = 0
        for name, run in passes:
            current, changes = run(current)
            stats.changes[name] += changes
            round_changes += changes
        if round_changes == 0:
            stats.reached_fixpoint = True
            return current, stats
    warnings.warn(
        f"optimize({graph.name}): no fixpoint after {max_rounds} rounds "
        f"(changes per pass: {stats.changes}); returning the graph as it is",
        RewriteLimitWarning,
        stacklevel=2,
    )
    return current, stats
