"""The IR's printer (golden strings), verifier (catches broken graphs) and interpreter."""

import numpy as np
import pytest

from tracegrad.ir import (
    Graph,
    InterpretError,
    VerifyError,
    clone_graph,
    find_problems,
    format_graph,
    interpret,
    verify,
)
from tracegrad.ops.core import Aval

F32 = np.dtype("float32")
F64 = np.dtype("float64")


def small_graph(dtype=F32):
    """x:[2,3], w:[3] -> sum(tanh(x * w) + 2)"""
    g = Graph(name="small")
    x = g.add_input(Aval((2, 3), dtype), "x")
    w = g.add_input(Aval((3,), dtype), "w")
    xw = g.new_node("mul", (x, w), {}, Aval((2, 3), dtype))
    t = g.new_node("tanh", (xw,), {}, Aval((2, 3), dtype))
    two = g.add_const(np.asarray(2.0, dtype))
    s = g.new_node("add", (t, two), {}, Aval((2, 3), dtype))
    total = g.new_node("sum", (s,), {"axis": None, "keepdims": False}, Aval((), dtype))
    g.outputs.append(total)
    return g


def test_printer_golden():
    g = small_graph()
    g.nodes[-1].tag = "bwd"
    g.nodes[3].group = 2
    assert (
        format_graph(g)
        == """\
graph small(%0: f32[2,3] x, %1: f32[3] w) -> (%6) {
  %2 = mul %0, %1 : f32[2,3]
  %3 = tanh %2 : f32[2,3]                       # g2
  %4 = const 2.0 : f32[]
  %5 = add %3, %4 : f32[2,3]
  %6 = sum[axis=None, keepdims=False] %5 : f32[]  # bwd
  return %6
}"""
    )
    assert str(g) == format_graph(g)


def test_printer_consts_are_compact():
    g = Graph(name="consts")
    g.add_const(np.float32(0.1))
    g.add_const(np.arange(4.0).reshape(2, 2))
    g.add_const(np.ones(1000, np.float32))
    g.add_const(np.arange(100))
    text = format_graph(g)
    assert "%0 = const 0.1 : f32[]" in text
    assert "%1 = const [[0.0, 1.0], [2.0, 3.0]] : f64[2,2]" in text
    assert "%2 = const full(1.0) : f32[1000]" in text
    assert "%3 = const [0, 1, 2, ... 100 values] : i64[100]" in text


def test_printer_shows_source_on_request():
    g = small_graph()
    g.nodes[2].source = "model.py:12"
    assert "# @ model.py:12" in format_graph(g, show_source=True)
    assert "model.py" not in format_graph(g)


def test_interpreter_matches_numpy(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    (out,) = interpret(small_graph(), x, w)
    assert out.dtype == np.float32 and out.shape == ()
    np.testing.assert_allclose(out, np.sum(np.tanh(x * w) + 2), rtol=1e-6)


def test_interpreter_rejects_wrong_arguments():
    g = small_graph(F64)
    with pytest.raises(InterpretError, match="takes 2 inputs"):
        interpret(g, np.ones((2, 3)))
    with pytest.raises(InterpretError, match="expects f64\\[3\\]"):
        interpret(g, np.ones((2, 3)), np.ones(4))
    with pytest.raises(InterpretError, match="dtype float32"):
        interpret(g, np.ones((2, 3)), np.ones(3, np.float32))


def test_verify_accepts_sound_graph():
    g = small_graph()
    assert verify(g) is g
    assert find_problems(clone_graph(g)) == []


def test_verify_catches_wrong_shape():
    g = small_graph()
    g.nodes[2].shape = (3, 2)
    with pytest.raises(
        VerifyError,
        match="%2 = mul: the graph says f32\\[3,2\\], the shape rule gives f32\\[2,3\\]",
    ):
        verify(g)


def test_verify_catches_wrong_dtype():
    g = small_graph()
    g.nodes[3].dtype = F64
    assert any("%3 = tanh" in p for p in find_problems(g))


def test_verify_catches_use_before_definition():
    g = small_graph()
    g.nodes[2], g.nodes[3] = g.nodes[3], g.nodes[2]
    assert any("operand %2 is not defined" in p for p in find_problems(g))


def test_verify_catches_foreign_operand_and_output():
    g, other = small_graph(), small_graph()
    g.nodes[3].inputs = (other.nodes[2],)
    g.outputs.append(other.nodes[-1])
    problems = find_problems(g)
    assert any("operand %2 is not defined" in p for p in problems)
    assert any("output %6 is not a node" in p for p in problems)


def test_verify_catches_duplicate_ids_unknown_ops_and_bad_consts():
    g = small_graph()
    g.nodes[3].id = 2
    g.nodes[5].op = "frobnicate"
    g.nodes[4].attrs["value"] = np.ones(2, np.float32)
    problems = "\n".join(find_problems(g))
    assert "id used by two nodes" in problems
    assert "unknown op 'frobnicate'" in problems
    assert "const value is float32[2]" in problems


def test_verify_catches_rejected_shape_rule():
    g = small_graph()
    g.nodes[2].inputs = (g.nodes[0], g.add_input(Aval((4,), F32), "v"))
    assert any("shape rule rejects it" in p for p in find_problems(g))


def test_verify_catches_input_not_registered():
    g = small_graph()
    g.inputs.pop()
    assert any("missing from graph.inputs" in p for p in find_problems(g))


def test_clone_is_independent():
    g = small_graph()
    h = clone_graph(g)
    h.nodes[2].attrs["x"] = 1
    h.outputs.clear()
    assert g.nodes[2].attrs == {} and len(g.outputs) == 1
    assert format_graph(clone_graph(g)) == format_graph(g)
    new = h.new_node("neg", (h.nodes[2],), {}, h.nodes[2].aval)
    assert new.id == g._next_id
