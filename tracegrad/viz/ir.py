"""Draw an IR graph: forward nodes blue, backward nodes orange, fusion groups boxed.

Every edge carries the type of the value it moves (`f32[16,64]`). Node labels
read like the printed IR (`%5 = mul %3, 2.0`), so the picture and `print(graph)`
can be read side by side. 0-d constants are written into their user's label
instead of being drawn as nodes of their own: they would only add clutter.

    >>> import numpy as np, tracegrad as tg
    >>> from tracegrad.viz import ir_graph
    >>> def loss(x):
    ...     return tg.sum(tg.tanh(x))
    >>> lowered = tg.value_and_grad(loss).lower(np.ones(3, np.float32))
    >>> drawing = ir_graph(lowered.joint, output_names=["loss", "grad x"])
    >>> drawing.to_dot().splitlines()[0]
    'digraph "loss" {'
    >>> sorted(a["label"] for a in drawing.nodes.values() if a["class"] == "output")
    ['grad x', 'loss']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ir.graph import Graph, Node
from tracegrad.viz.dot import Drawing

COLORS = {
    "fwd": "#cfe2ff",  # light blue: forward
    "bwd": "#ffd8b8",  # light orange: backward
    "input": "#e8e8e8",
    "const": "#f5f5f5",
    "output": "#caff70",
}
# Frame colours for fusion groups, cycled.
GROUP_COLORS = [
    "#2b7a3b",
    "#8a2be2",
    "#b8860b",
    "#c2185b",
    "#00838f",
    "#5d4037",
    "#1f4fd1",
    "#d35400",
    "#6d8b00",
    "#7b1fa2",
]
LEGEND = (
    "blue: forward   orange: backward   framed: one fusion group (one loop)   "
    "edge label: shape and dtype of the value"
)


def ir_graph(
    graph: Graph | Any, legend: bool = True, output_names: list[str] | None = None
) -> Drawing:
    """Draw an IR `Graph` (any stage of `lower()`: traced, joint or optimized).

    Passing the object `lower()` returns draws its `optimized` stage.
    `output_names` labels the outputs (e.g. ["loss", "d loss/d w"]); by default
    they are "output 0", "output 1", ...
    """
    if not isinstance(graph, Graph) and hasattr(graph, "optimized"):
        graph = graph.optimized
    drawing = Drawing(
        graph.name,
        graph_attrs={"rankdir": "TB", "nodesep": "0.3", "ranksep": "0.4"},
        node_attrs={
            "shape": "box",
            "style": "filled,rounded",
            "fontname": "Helvetica",
            "fontsize": "11",
            "height": "0.3",
            "margin": "0.1,0.04",
        },
        edge_attrs={
            "fontname": "Helvetica",
            "fontsize": "9",
            "fontcolor": "#444444",
            "color": "#555555",
            "arrowsize": "0.7",
        },
    )
    inline = {n.id for n in graph.nodes if _is_inlined_const(n)}
    for node in graph.nodes:
        if node.id not in inline:
            _draw_node(drawing, node, inline)
    _draw_edges(drawing, graph, inline)
    _draw_outputs(drawing, graph, output_names)
    _draw_groups(drawing, graph)
    if legend:
        drawing.graph_attrs.update(
            label=LEGEND, labelloc="b", fontsize="10", fontcolor="#555555", fontname="Helvetica"
        )
    return drawing


def node_id(node: Node) -> str:
    return f"n{node.id}"


def _is_inlined_const(node: Node) -> bool:
    return node.op == "const" and np.ndim(node.attrs.get("value")) == 0


def _draw_node(drawing: Drawing, node: Node, inline: set[int]) -> None:
    from tracegrad.ir.printer import format_attrs, format_const

    # SVG class: what the node is, then which half of the graph it belongs to.
    attrs: dict[str, Any] = {"class": f"op {node.tag}"}
    if node.op == "input":
        label = f"{node.name}: {node.attrs.get('name', 'input')}\n{node.type_str()}"
        attrs.update(
            shape="ellipse",
            style="filled",
            fillcolor=COLORS["input"],
            **{"class": f"input {node.tag}"},
        )
    elif node.op == "const":
        label = f"{node.name} = const\n{format_const(node.attrs['value'])}"
        attrs.update(fillcolor=COLORS["const"], fontsize="10", **{"class": f"const {node.tag}"})
    else:
        args = ", ".join(
            format_const(i.attrs["value"]) if i.id in inline else i.name for i in node.inputs
        )
        label = f"{node.name} = {node.op} {args}".rstrip()
        node_attrs = format_attrs(node.attrs)
        if node_attrs:
            label += "\n" + node_attrs[1:-1]  # without the brackets
        attrs["fillcolor"] = COLORS.get(node.tag, COLORS["fwd"])
    tooltip = [f"{node.name}: {node.type_str()} ({node.tag})"]
    if node.group is not None:
        tooltip.append(f"fusion group {node.group}")
    if node.source:
        tooltip.append(f"from {node.source}")
    drawing.node(node_id(node), label=label, tooltip="; ".join(tooltip), **attrs)


def _draw_edges(drawing: Drawing, graph: Graph, inline: set[int]) -> None:
    for node in graph.nodes:
        for operand in node.inputs:
            if operand.id not in inline:
                drawing.edge(node_id(operand), node_id(node), label=" " + operand.type_str())


def _draw_outputs(drawing: Drawing, graph: Graph, names: list[str] | None) -> None:
    if names is not None and len(names) != len(graph.outputs):
        raise ValueError(
            f"ir_graph: output_names has {len(names)} names for "
            f"{len(graph.outputs)} outputs of graph {graph.name!r}"
        )
    names = [str(n) for n in names] if names is not None else _output_names(graph)
    for k, out in enumerate(graph.outputs):
        out_id = f"out{k}"
        drawing.node(
            out_id,
            label=names[k],
            shape="box",
            style="filled",
            fillcolor=COLORS["output"],
            **{"class": "output"},
        )
        drawing.edge(node_id(out), out_id, label=" " + out.type_str())


def _output_names(graph: Graph) -> list[str]:
    """'output 0', ... unless the graph carries names (attr `output_names`)."""
    names = getattr(graph, "output_names", None)
    if names and len(names) == len(graph.outputs):
        return [str(n) for n in names]
    if len(graph.outputs) == 1:
        return ["output"]
    return [f"output {k}" for k in range(len(graph.outputs))]


def _draw_groups(drawing: Drawing, graph: Graph) -> None:
    members: dict[int, list[str]] = {}
    for node in graph.nodes:
        if node.group is not None and node_id(node) in drawing.nodes:
            members.setdefault(node.group, []).append(node_id(node))
    for k, (group, ids) in enumerate(sorted(members.items())):
        color = GROUP_COLORS[k % len(GROUP_COLORS)]
        drawing.cluster(
            f"g{group}",
            ids,
            label=f"fusion group {group}",
            color=color,
            fontcolor=color,
            style="dashed,rounded",
            penwidth="1.6",
            fontname="Helvetica",
            fontsize="10",
        )
        for nid in ids:
            drawing.nodes[nid].update(color=color, penwidth="1.6")
