"""ir_graph on every stage that the real `lower()` returns."""

import re

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.viz import ir_graph
from tracegrad.viz.ir import COLORS


def mlp_loss(w1, b1, w2, x, y):
    hidden = tg.tanh(x @ w1 + b1)
    return tg.mean((hidden @ w2 - y) ** 2)


@pytest.fixture(scope="module")
def lowered():
    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8,), (8, 1), (6, 4), (6, 1)]
    ]
    return tg.value_and_grad(mlp_loss, argnums=(0, 1, 2)).lower(*args)


@pytest.mark.parametrize("stage", ["traced", "joint", "optimized"])
def test_every_node_and_edge_is_drawn(lowered, stage, parse_dot):
    graph = getattr(lowered, stage)
    parsed = parse_dot(ir_graph(graph))
    scalar_consts = {
        n.id for n in graph.nodes if n.op == "const" and np.ndim(n.attrs["value"]) == 0
    }
    drawn = [n for n in graph.nodes if n.id not in scalar_consts]
    assert set(parsed.nodes) == {f"n{n.id}" for n in drawn} | {
        f"out{k}" for k in range(len(graph.outputs))
    }
    n_edges = sum(1 for n in graph.nodes for i in n.inputs if i.id not in scalar_consts)
    assert len(parsed.edges) == n_edges + len(graph.outputs)
    by_id = {f"n{n.id}": n for n in graph.nodes}
    for tail, _head, attrs in parsed.edges:
        # each edge carries its value's type, e.g. f32[6,8]
        assert attrs["label"].strip() == by_id[tail].type_str()
        assert re.fullmatch(r"(f32|bool|i64)\[[0-9,]*\]", attrs["label"].strip())
    for n in drawn:
        assert n.name in parsed.nodes[f"n{n.id}"]["label"]


def test_joint_graph_colours_forward_and_backward(lowered, parse_dot):
    parsed = parse_dot(ir_graph(lowered.joint))
    ops = parsed.of_class("op")
    tags = {n.id: n.tag for n in lowered.joint.nodes}
    assert {a["class"].split()[1] for a in ops.values()} == {"fwd", "bwd"}
    for nid, attrs in ops.items():
        assert attrs["class"].split()[1] == tags[int(nid[1:])]
        assert attrs["fillcolor"] == COLORS[tags[int(nid[1:])]]


def test_optimized_graph_frames_each_fusion_group(lowered, parse_dot):
    graph = lowered.optimized
    groups = {}
    for n in graph.nodes:
        if n.group is not None and not (n.op == "const" and np.ndim(n.attrs["value"]) == 0):
            groups.setdefault(f"g{n.group}", []).append(f"n{n.id}")
    assert groups, "the optimizer formed no fusion groups"
    assert parse_dot(ir_graph(graph)).clusters == groups
