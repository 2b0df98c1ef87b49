"""eager_graph on real tracegrad.eager graphs, and on PyTorch's where it is installed."""

import numpy as np
import pytest

import tracegrad.eager as torch_like
from tracegrad.viz import eager_graph
from tracegrad.viz.eager import COLORS


def seed_graph(torch):
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    z = x * y + x**2
    return z, {"x": x, "y": y}


def test_seed_example_structure(parse_dot):
    z, params = seed_graph(torch_like)
    parsed = parse_dot(eager_graph(z, params))
    assert parsed.labels("grad_fn") == ["AddBackward0", "MulBackward0", "PowBackward0"]
    assert parsed.labels("leaf") == ["x\nf32[1]", "y\nf32[1]"]
    assert parsed.labels("output") == ["output\nf32[1]"]
    assert len(parsed.of_class("saved")) == 3  # mul keeps x and y, pow keeps x
    assert len(parsed.nodes) == 9
    # out<-add, add<-mul, add<-pow, mul<-x, mul<-y, pow<-x, and 3 saved links
    assert len(parsed.edges) == 9
    fills = {a["class"]: a["fillcolor"] for a in parsed.nodes.values()}
    assert fills == {k: COLORS[k] for k in ("output", "grad_fn", "leaf", "saved")}


def test_mlp_leaves_carry_parameter_names_and_shapes(parse_dot):
    nn = torch_like.nn
    torch_like.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    x = torch_like.randn(5, 2)
    target = torch_like.tensor(np.array([0, 1, 2, 0, 1]))
    loss = nn.functional.cross_entropy(model(x), target)
    params = dict(model.named_parameters())
    parsed = parse_dot(eager_graph(loss, params))
    shapes = {tuple(p.shape) for p in params.values()}
    assert len(parsed.of_class("leaf")) == len(params) == 4
    for name, p in params.items():
        assert f"{name}\nf32[{','.join(map(str, p.shape))}]" in parsed.labels("leaf")
    assert shapes == {(8, 2), (8,), (3, 8), (3,)}
    assert parsed.labels("output") == ["output\nf32[]"]
    # passing the module itself names its parameters the same way
    assert parse_dot(eager_graph(loss, model)).labels("leaf") == parsed.labels("leaf")


def seed_linear_relu(torch):
    """The seed's Example 1: relu(x @ W + b).sum()."""
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    W = torch.tensor([[0.5, -0.3], [0.2, 0.4]], requires_grad=True)
    b = torch.tensor([[0.1, -0.2]], requires_grad=True)
    return torch.relu(torch.matmul(x, W) + b).sum(), {"x": x, "W": W, "b": b}


@pytest.mark.parametrize("example", [seed_graph, seed_linear_relu])
def test_same_structure_as_pytorch_on_the_seed(example, parse_dot):
    torch = pytest.importorskip("torch")
    ours = parse_dot(eager_graph(*example(torch_like)))
    theirs = parse_dot(eager_graph(*example(torch)))
    for cls in ("grad_fn", "leaf", "output"):
        assert ours.labels(cls) == theirs.labels(cls)
    # Same saved shapes; their names may differ (PyTorch calls mm's second operand "mat2").
    assert sorted(l.split("\n")[1] for l in ours.labels("saved")) == sorted(
        l.split("\n")[1] for l in theirs.labels("saved")
    )
    assert len(ours.edges) == len(theirs.edges)


def test_after_backward_the_freed_saved_tensors_are_noted(parse_dot):
    z, params = seed_graph(torch_like)
    z.backward()
    parsed = parse_dot(eager_graph(z, params))
    assert not parsed.of_class("saved")
    labels = parsed.labels("grad_fn")
    assert "MulBackward0\n(saved tensors freed)" in labels
    assert "PowBackward0\n(saved tensors freed)" in labels
    assert "AddBackward0" in labels  # saved nothing, so nothing was freed


def test_a_compiled_function_is_one_lavender_node(parse_dot):
    import tracegrad as tg

    f = tg.compile(lambda x, w: tg.sum(tg.tanh(x @ w)))
    x = torch_like.tensor(np.ones((4, 3), np.float32))
    w = torch_like.tensor(np.full((3, 2), 0.5, np.float32), requires_grad=True)
    parsed = parse_dot(eager_graph(f(x, w) * 2.0, {"w": w}))
    compiled = parsed.of_class("compiled")
    assert [a["label"].split("\n")[0] for a in compiled.values()] == ["CompiledFunctionBackward"]
    assert all(a["fillcolor"] == COLORS["compiled"] for a in compiled.values())
    assert parsed.labels("leaf") == ["w\nf32[3,2]"]
    assert parsed.labels("grad_fn") == sorted(
        ["MulBackward0", "CompiledFunctionBackward\n(runs the compiled backward kernel)"]
    )
