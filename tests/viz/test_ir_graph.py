"""ir_graph on a hand-built joint graph: labels, edge types, colours, fusion groups."""

import numpy as np
import pytest

from tracegrad.ir.graph import Graph
from tracegrad.ops.core import Aval
from tracegrad.viz import ir_graph
from tracegrad.viz.ir import COLORS

F32 = np.dtype("float32")


def tanh_sum_joint() -> Graph:
    """value_and_grad of sum(tanh(x)), written out by hand, with two fusion groups."""
    g = Graph(name="joint")
    x = g.add_input(Aval((16, 64), F32), "x")
    t = g.new_node("tanh", (x,), {}, Aval((16, 64), F32))
    s = g.new_node("sum", (t,), {"axis": None, "keepdims": False}, Aval((), F32))
    one = g.add_const(np.float32(1.0), tag="bwd")
    ones = g.new_node("broadcast_to", (one,), {"shape": (16, 64)}, Aval((16, 64), F32), tag="bwd")
    sq = g.new_node("mul", (t, t), {}, Aval((16, 64), F32), tag="bwd")
    d = g.new_node("sub", (one, sq), {}, Aval((16, 64), F32), tag="bwd")
    gx = g.new_node("mul", (ones, d), {}, Aval((16, 64), F32), tag="bwd")
    g.add_const(np.arange(3, dtype=F32), tag="bwd")  # non-scalar consts get a node (unused here)
    t.group = s.group = 0
    sq.group = d.group = gx.group = 1
    g.outputs = [s, gx]
    return g


def test_nodes_labels_and_inlined_scalar_constants(parse_dot):
    parsed = parse_dot(ir_graph(tanh_sum_joint()))
    # 9 IR nodes; the 0-d const %3 is written into its users' labels instead.
    assert "n3" not in parsed.nodes
    assert parsed.nodes["n6"]["label"] == "%6 = sub 1.0, %5"
    assert parsed.nodes["n4"]["label"] == "%4 = broadcast_to 1.0\nshape=(16, 64)"
    assert parsed.nodes["n2"]["label"] == "%2 = sum %1\naxis=None, keepdims=False"
    assert parsed.nodes["n0"]["label"] == "%0: x\nf32[16,64]"
    assert parsed.nodes["n8"]["label"] == "%8 = const\n[0.0, 1.0, 2.0]"
    assert parsed.labels("output") == ["output 0", "output 1"]
    assert len(parsed.nodes) == 8 + 2  # drawn IR nodes + outputs


def test_edges_carry_shape_and_dtype(parse_dot):
    parsed = parse_dot(ir_graph(tanh_sum_joint()))
    edges = {(t, h) for t, h, _ in parsed.edges}
    assert ("n3", "n6") not in edges  # inlined constant: no edge
    labels = [a["label"].strip() for _, _, a in parsed.edges]
    # x->tanh, tanh->sum, tanh->mul twice, mul->sub, bcast->mul, sub->mul, 2 outputs
    assert len(parsed.edges) == 9
    assert labels.count("f32[16,64]") == 8 and labels.count("f32[]") == 1


def test_colours_by_tag_and_frames_by_fusion_group(parse_dot):
    parsed = parse_dot(ir_graph(tanh_sum_joint()))
    ops = parsed.of_class("op")
    assert {k for k, a in ops.items() if "fwd" in a["class"]} == {"n1", "n2"}
    assert {k for k, a in ops.items() if "bwd" in a["class"]} == {"n4", "n5", "n6", "n7"}
    for a in ops.values():
        tag = a["class"].split()[1]
        assert a["fillcolor"] == COLORS[tag]
    assert parsed.clusters == {"g0": ["n1", "n2"], "g1": ["n5", "n6", "n7"]}
    assert parsed.nodes["n1"]["color"] == parsed.nodes["n2"]["color"] != parsed.nodes["n5"]["color"]
    assert "color" not in parsed.nodes["n4"]  # not fused: no frame colour


def test_graph_without_groups_has_no_clusters_and_legend_is_optional(parse_dot):
    g = tanh_sum_joint()
    for n in g.nodes:
        n.group = None
    drawing = ir_graph(g, legend=False)
    assert not parse_dot(drawing).clusters
    assert "label" not in drawing.graph_attrs


def test_a_lowered_object_draws_its_optimized_stage(parse_dot):
    class Lowered:
        traced = joint = None
        optimized = tanh_sum_joint()

    assert parse_dot(ir_graph(Lowered())).nodes == parse_dot(ir_graph(Lowered.optimized)).nodes


def test_output_names(parse_dot):
    parsed = parse_dot(ir_graph(tanh_sum_joint(), output_names=["loss", "d loss / d x"]))
    assert parsed.labels("output") == ["d loss / d x", "loss"]
    with pytest.raises(ValueError, match="1 names for 2 outputs"):
        ir_graph(tanh_sum_joint(), output_names=["loss"])
