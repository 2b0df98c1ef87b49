"""Fusion grouping: which nodes share a loop, and what stays materialized."""

from __future__ import annotations

import numpy as np
from codegen_helpers import GraphMaker

from tracegrad.passes.fuse import fuse_elementwise, groups_of


def test_chain_and_trailing_reduction_share_one_group():
    gm = GraphMaker()
    x = gm.input((8, 4))
    b = gm.input((4,))
    h = gm.op("tanh", gm.op("add", x, b))
    s = gm.op("sum", h, axis=1, keepdims=False)
    g = fuse_elementwise(gm.output(s))
    groups = groups_of(g)
    assert len(groups) == 1
    assert [n.op for n in next(iter(groups.values()))] == ["add", "tanh", "sum"]
    assert all(n.group is None for n in g.inputs)


def test_fusion_copies_the_graph():
    gm = GraphMaker()
    x = gm.input((3,))
    graph = gm.output(gm.op("exp", gm.op("neg", x)))
    fused = fuse_elementwise(graph)
    assert all(n.group is None for n in graph.nodes)
    assert fused is not graph and fused.nodes[1] is not graph.nodes[1]
    assert [n.id for n in fused.nodes] == [n.id for n in graph.nodes]


def test_matmul_splits_groups_and_nothing_reads_a_reduction_in_its_own_group():
    gm = GraphMaker()
    x = gm.input((4, 5))
    w = gm.input((5, 5))
    a = gm.op("exp", x)
    m = gm.op("matmul", a, w)
    r = gm.op("relu", m)
    total = gm.op("sum", r, axis=None, keepdims=False)
    scaled = gm.op(
        "mul", r, gm.op("broadcast_to", gm.op("reshape", total, shape=(1, 1)), shape=(4, 5))
    )
    g = fuse_elementwise(gm.output(scaled))
    by_op = {n.op: n for n in g.nodes}
    assert by_op["matmul"].group is None
    assert by_op["exp"].group != by_op["relu"].group
    assert by_op["sum"].group == by_op["relu"].group
    # the mul reads the finished sum, so it must run in a later loop
    assert by_op["mul"].group != by_op["sum"].group


def test_groups_never_form_a_cycle():
    # a -> reduce -> c, and b (same domain as a) feeds c: b must not join a's group
    # if that made the group wait on its own reduction.
    gm = GraphMaker()
    x = gm.input((6,))
    a = gm.op("exp", x)
    s = gm.op("sum", a, axis=None, keepdims=False)
    sb = gm.op("broadcast_to", s, shape=(6,))
    c = gm.op("mul", a, sb)
    d = gm.op("sin", c)
    g = fuse_elementwise(gm.output(d, a))
    from tracegrad.codegen.emit import schedule

    order = schedule(g)  # raises on a cycle
    assert len(order) >= 3
    by_op = {n.op: n for n in g.nodes}
    assert by_op["mul"].group != by_op["exp"].group


def test_comparison_and_where_fuse_with_arithmetic():
    gm = GraphMaker()
    x = gm.input((5,), "float64")
    zero = gm.const(0.0, "float64")
    pos = gm.op("gt", x, zero)
    y = gm.op("where", pos, gm.op("sqrt", gm.op("abs", x)), zero)
    g = fuse_elementwise(gm.output(y))
    assert len({n.group for n in g.nodes if n.op not in ("input", "const")}) == 1
    assert np.dtype(g.outputs[0].dtype) == np.float64


def test_docstring_examples_run():
    import doctest

    import tracegrad.codegen
    import tracegrad.codegen.plan
    import tracegrad.passes.fuse
    import tracegrad.runtime.cache

    modules = (
        tracegrad.passes.fuse,
        tracegrad.codegen,
        tracegrad.codegen.plan,
        tracegrad.runtime.cache,
    )
    for module in modules:
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_group_size_is_capped():
    from tracegrad.passes.fuse import MAX_GROUP_COST, node_cost

    gm = GraphMaker()
    x = gm.input((8,), "float64")
    for _ in range(40):
        x = gm.op("mul", gm.op("tanh", x), gm.const(0.9, "float64"))
    g = fuse_elementwise(gm.output(gm.op("sum", x, axis=None, keepdims=False)))
    groups = groups_of(g)
    assert len(groups) > 1
    assert all(sum(node_cost(n) for n in members) <= MAX_GROUP_COST for members in groups.values())
