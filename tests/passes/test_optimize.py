"""optimize(): the passes together, to a fixpoint, never touching their input."""

import warnings

import pytest
from passes_helpers import GraphMaker, assert_same_results, ops, snapshot

from tracegrad.ir import verify
from tracegrad.passes import RULES, RewriteLimitWarning, Rule, optimize, optimize_with_stats


def messy_graph():
    """A graph with work for every pass: dead code, repeats, consts, identities."""
    gm = GraphMaker("messy")
    x, w = gm.input((4, 3), name="x"), gm.input((3,), name="w")
    gm.op("exp", x)  # dead
    scale = gm.op("mul", gm.const(2.0), gm.const(0.5))  # folds to 1.0
    y = gm.op("mul", gm.op("add", x, w, source="user.py:7"), scale)  # x*1 -> x
    y2 = gm.op("add", x, w)  # repeats y's add
    t = gm.op("transpose", gm.op("transpose", y2, axes=(1, 0)), axes=(1, 0))
    total = gm.op("sum", gm.op("broadcast_to", w, shape=(4, 3)), axis=0)
    return gm.output(gm.op("tanh", y), gm.op("neg", gm.op("neg", t)), total)


def test_optimize_reaches_a_fixpoint():
    g = messy_graph()
    h, stats = optimize_with_stats(g)
    assert stats.reached_fixpoint and stats.rounds <= 4
    assert all(stats.changes[name] > 0 for name in ("fold", "simplify", "cse", "dce"))
    assert ops(h) == ["add", "const", "mul", "tanh"]
    assert_same_results(g, h)
    again, stats2 = optimize_with_stats(h)
    assert stats2.rounds == 1 and sum(stats2.changes.values()) == 0
    assert str(again) == str(h)


def test_optimize_golden_text():
    h = optimize(messy_graph())
    assert (
        str(h)
        == """\
graph messy(%0: f32[4,3] x, %1: f32[3] w) -> (%13, %6, %18) {
  %6 = add %0, %1 : f32[4,3]
  %17 = const 4.0 : f32[]
  %18 = mul %1, %17 : f32[3]
  %13 = tanh %6 : f32[4,3]
  return %13, %6, %18
}"""
    )


def test_optimize_never_mutates_its_input():
    g = messy_graph()
    before = snapshot(g)
    optimize(g)
    assert snapshot(g) == before


def test_optimize_keeps_inputs_outputs_source_and_tag():
    g = messy_graph()
    h = optimize(g)
    assert [n.attrs["name"] for n in h.inputs] == ["x", "w"]
    assert [n.id for n in h.inputs] == [n.id for n in g.inputs]
    assert len(h.outputs) == len(g.outputs)
    add = h.outputs[0].inputs[0]
    assert add.source == "user.py:7" and add.tag == "fwd"


def test_new_nodes_inherit_source_and_tag_of_what_they_replace():
    gm = GraphMaker()
    x = gm.input((3,))
    g = gm.output(gm.op("mul", x, gm.const(-1.0), source="user.py:3", tag="bwd"))
    (neg,) = [n for n in optimize(g).nodes if n.op == "neg"]
    assert (neg.source, neg.tag) == ("user.py:3", "bwd")


def test_unused_inputs_and_input_outputs_survive():
    gm = GraphMaker()
    x, unused = gm.input((2,)), gm.input((5,))
    g = gm.output(gm.op("add", x, gm.const(0.0)), x)
    h = optimize(g)
    assert h.inputs[1].id == unused.id and unused.id in {n.id for n in h.nodes}
    assert h.outputs[0] is h.inputs[0] and h.outputs[1] is h.inputs[0]
    verify(h)


def test_round_limit_stops_rules_that_undo_each_other():
    def commute(node, b):  # x+y -> y+x: always applies, never converges
        return b.emit("add", node.inputs[1], node.inputs[0])

    gm = GraphMaker()
    x, y = gm.input((3,)), gm.input((3,))
    g = gm.output(gm.op("add", x, y))
    with pytest.warns(RewriteLimitWarning, match="no fixpoint after 7 rounds"):
        h, stats = optimize_with_stats(
            g, rules=RULES + [Rule("add", "x+y -> y+x", commute)], max_rounds=7
        )
    assert stats.rounds == 7 and not stats.reached_fixpoint
    assert_same_results(g, h)  # the graph is still valid and right


def test_optimize_silently_when_a_fixpoint_exists():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimize(messy_graph())


def test_a_long_chain_collapses_in_few_rounds():
    gm = GraphMaker()
    y = gm.input((3,))
    for k in range(200):
        y = gm.op("neg", y) if k % 2 else gm.op("mul", y, gm.const(1.0))
    h, stats = optimize_with_stats(gm.output(y))
    assert ops(h) == [] and stats.rounds <= 3


def test_a_rule_that_gives_up_leaves_no_dead_nodes():
    def emits_then_gives_up(node, b):
        b.emit("neg", node.inputs[0])
        return None

    def aborts_midway(node, b):
        b.emit("neg", node.inputs[0])
        b.emit("transpose", node.inputs[0], axes=(0, 0))  # the shape rule refuses

    gm = GraphMaker()
    x = gm.input((3,))
    g = gm.output(gm.op("mul", x, gm.const(1.0)))
    rules = [
        Rule("mul", "emits -> nothing", emits_then_gives_up),
        Rule("mul", "aborts -> nothing", aborts_midway),
    ] + RULES
    h, stats = optimize_with_stats(g, rules=rules)
    assert stats.reached_fixpoint and stats.rounds == 2
    assert ops(h) == [] and h.outputs[0] is h.inputs[0]  # the later x*1 rule still ran
