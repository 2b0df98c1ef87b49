from passes_helpers import GraphMaker, assert_same_results, ops, snapshot

from tracegrad.ir import verify
from tracegrad.passes import dce


def test_dce_removes_unused_nodes_and_keeps_inputs():
    gm = GraphMaker()
    x, unused_input = gm.input((3,)), gm.input((2,))
    dead = gm.op("exp", x)
    gm.op("neg", dead)  # a dead chain
    g = gm.output(gm.op("tanh", x))
    before = snapshot(g)
    h = dce(g)
    assert ops(h) == ["tanh"]
    assert [n.id for n in h.inputs] == [x.id, unused_input.id]
    assert len(h.nodes) == 3  # both inputs stay: the signature does not change
    assert_same_results(g, h)
    assert snapshot(g) == before  # the input graph is untouched


def test_dce_keeps_everything_that_is_live():
    gm = GraphMaker()
    x = gm.input((2, 3))
    a = gm.op("exp", x)
    g = gm.output(gm.op("mul", a, a), a)
    h = dce(g)
    assert ops(h) == ["exp", "mul"]
    assert [n.id for n in h.outputs] == [n.id for n in g.outputs]
    assert_same_results(g, h)


def test_dce_on_a_deep_chain_does_not_recurse():
    gm = GraphMaker()
    y = gm.input((1,))
    for _ in range(5000):
        y = gm.op("neg", y)
    h = dce(gm.output(y))
    assert len(h.nodes) == 5001
    verify(h)
