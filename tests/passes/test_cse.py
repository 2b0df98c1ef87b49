from passes_helpers import GraphMaker, assert_same_results, ops, snapshot

from tracegrad.passes import cse


def test_cse_merges_identical_nodes():
    gm = GraphMaker()
    x = gm.input((2, 3))
    a, b = gm.op("exp", x), gm.op("exp", x)
    c, d = gm.op("mul", a, x), gm.op("mul", b, x)  # equal once a and b merge
    g = gm.output(gm.op("add", c, d))
    before = snapshot(g)
    h = cse(g)
    assert ops(h) == ["exp", "mul", "add"]
    add = h.outputs[0]
    assert add.inputs[0] is add.inputs[1]
    assert_same_results(g, h)
    assert snapshot(g) == before


def test_cse_merges_consts_by_value_only():
    gm = GraphMaker()
    x = gm.input((3,))
    two_a, two_b = gm.const(2.0), gm.const(2.0)
    two_f64 = gm.const(2.0, "float64")
    zero, minus_zero = gm.const(0.0), gm.const(-0.0)
    g = gm.output(
        gm.op("mul", x, two_a),
        gm.op("mul", x, two_b),
        gm.op("mul", x, two_f64),
        gm.op("add", x, zero),
        gm.op("add", x, minus_zero),
    )
    h = cse(g)
    # 2.0 f32 twice -> once; 2.0 f64 differs by dtype; -0.0 differs from 0.0 by bits
    assert ops(h).count("const") == 4
    assert h.outputs[0] is h.outputs[1]
    assert h.outputs[0] is not h.outputs[2]
    assert_same_results(g, h)


def test_cse_keeps_nodes_with_different_attrs_and_all_inputs():
    gm = GraphMaker()
    x, y = gm.input((2, 3)), gm.input((2, 3))  # same type, still two inputs
    s0, s1 = gm.op("sum", x, axis=0), gm.op("sum", x, axis=1)
    keep = gm.op("sum", x, axis=0, keepdims=True)
    g = gm.output(s0, s1, keep, gm.op("add", x, y))
    h = cse(g)
    assert ops(h) == ["sum", "sum", "sum", "add"]
    assert len(h.inputs) == 2
    assert_same_results(g, h)


def test_cse_keeps_the_first_nodes_source_and_tag():
    gm = GraphMaker()
    x = gm.input((3,))
    first = gm.op("exp", x, source="user.py:1", tag="fwd")
    second = gm.op("exp", x, source="user.py:9", tag="bwd")
    g = gm.output(gm.op("add", first, second))
    (exp,) = [n for n in cse(g).nodes if n.op == "exp"]
    assert (exp.id, exp.source, exp.tag) == (first.id, "user.py:1", "fwd")


def test_cse_merges_commutative_ops_in_either_order():
    gm = GraphMaker()
    x, y = gm.input((2, 3)), gm.input((3,))
    g = gm.output(
        gm.op("mul", x, y),
        gm.op("mul", y, x),
        gm.op("add", y, x),
        gm.op("add", x, y),
        gm.op("sub", x, y),
        gm.op("sub", y, x),
    )  # sub does not commute
    h = cse(g)
    assert ops(h) == ["mul", "add", "sub", "sub"]
    assert h.outputs[0] is h.outputs[1] and h.outputs[2] is h.outputs[3]
    assert_same_results(g, h)
