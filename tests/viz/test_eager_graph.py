"""eager_graph: the walk over grad_fn nodes and what each node shows.

These tests drive the walker with minimal stand-in nodes (the duck-typed
contract: `name()`, `next_functions`, `.variable`, `saved_tensors_info`);
test_eager_graph_real.py draws real tracegrad.eager (and PyTorch) graphs.
"""

from tracegrad.viz import eager_graph
from tracegrad.viz.eager import COLORS


class FakeTensor:
    def __init__(self, shape, grad_fn=None, requires_grad=True, dtype="float32"):
        self.shape, self.grad_fn, self.requires_grad, self.dtype = (
            shape,
            grad_fn,
            requires_grad,
            dtype,
        )


class FakeNode:
    def __init__(self, name, next_functions=(), saved=()):
        self._name, self.next_functions, self.saved_tensors_info = (
            name,
            tuple(next_functions),
            list(saved),
        )

    def name(self):
        return self._name


class FakeAccumulate(FakeNode):
    def __init__(self, variable):
        super().__init__("AccumulateGrad")
        self.variable = variable


def test_deep_chain_is_walked_without_recursion(parse_dot):
    leaf = FakeTensor((4,))
    node = FakeAccumulate(leaf)
    depth = 5000  # far past Python's recursion limit
    for _ in range(depth):
        node = FakeNode("TanhBackward0", [(node, 0)], saved=[("result", (4,), "float32")])
    parsed = parse_dot(eager_graph(FakeTensor((4,), node)))
    assert len(parsed.of_class("grad_fn")) == depth
    assert len(parsed.of_class("saved")) == depth
    assert len(parsed.of_class("leaf")) == 1
    assert len(parsed.edges) == 1 + depth + depth  # output, chain (incl. leaf), saved


def test_none_entries_are_skipped_and_one_leaf_node_per_variable(parse_dot):
    w = FakeTensor((2, 3))
    # Two AccumulateGrad objects for the same variable still draw one leaf.
    mul = FakeNode("MulBackward0", [(FakeAccumulate(w), 0), (None, 0)])
    add = FakeNode("AddBackward0", [(mul, 0), (FakeAccumulate(w), 0)])
    parsed = parse_dot(eager_graph(FakeTensor((2, 3), add), params={"w": w}))
    assert parsed.labels("leaf") == ["w\nf32[2,3]"]
    leaf_id = next(iter(parsed.of_class("leaf")))
    assert sum(1 for t, h, _ in parsed.edges if t == leaf_id) == 2
    assert len(parsed.edges) == 4  # add->out, mul->add, w->mul, w->add


def test_saved_tensors_are_their_own_orange_nodes(parse_dot):
    x = FakeTensor((3,), dtype="float64")
    mul = FakeNode(
        "MulBackward0",
        [(FakeAccumulate(x), 0)],
        saved=[("self", (3,), "float64"), ("other", (), "float64")],
    )
    parsed = parse_dot(eager_graph(FakeTensor((3,), mul, dtype="float64")))
    saved = parsed.of_class("saved")
    assert sorted(a["label"] for a in saved.values()) == ["other\nf64[]", "self\nf64[3]"]
    assert all(a["fillcolor"] == COLORS["saved"] for a in saved.values())
    saved_edges = [e for e in parsed.edges if e[0] in saved]
    assert len(saved_edges) == 2 and all(e[2]["dir"] == "none" for e in saved_edges)
    without = parse_dot(eager_graph(FakeTensor((3,), mul), show_saved=False))
    assert not without.of_class("saved")


def test_tensor_without_a_graph_is_drawn_alone_with_a_note(parse_dot):
    parsed = parse_dot(eager_graph(FakeTensor((2,), requires_grad=False)))
    assert list(parsed.nodes) == ["out0"] and not parsed.edges
    assert "does not require grad" in parsed.nodes["out0"]["label"]


def test_several_outputs_share_their_common_subgraph(parse_dot):
    x = FakeTensor((3,))
    shared = FakeNode("ExpBackward0", [(FakeAccumulate(x), 0)])
    first = FakeNode("SumBackward0", [(shared, 0)])
    second = FakeNode("MeanBackward0", [(shared, 0)])
    parsed = parse_dot(eager_graph([FakeTensor((), first), FakeTensor((), second)], {"x": x}))
    assert parsed.labels("output") == ["output 0\nf32[]", "output 1\nf32[]"]
    assert parsed.labels("grad_fn") == ["ExpBackward0", "MeanBackward0", "SumBackward0"]
    assert len(parsed.edges) == 2 + 2 + 1  # outputs, sum/mean <- exp, exp <- x
