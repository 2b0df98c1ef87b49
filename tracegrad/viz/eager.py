"""Draw the backward graph behind an eager tensor, the way torchviz does.

The walk starts at the tensor's `grad_fn` and follows `next_functions` down to
the AccumulateGrad leaves. Arrows point the way the forward pass ran (leaves at
the top, the output at the bottom); backward runs them in reverse.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.viz import eager_graph
    >>> x = torch.tensor([2.0], requires_grad=True)
    >>> y = torch.tensor([3.0], requires_grad=True)
    >>> z = x * y + x ** 2
    >>> drawing = eager_graph(z, params={"x": x, "y": y})
    >>> sorted(a["label"] for a in drawing.nodes.values() if a["class"] == "grad_fn")
    ['AddBackward0', 'MulBackward0', 'PowBackward0']

Works on PyTorch tensors too (their saved tensors are read from `_saved_*`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tracegrad.ops.core import dtype_short
from tracegrad.viz.dot import Drawing

# torchviz's colours, so the picture looks familiar.
COLORS = {
    "output": "#caff70",  # darkolivegreen1
    "leaf": "#add8e6",  # lightblue
    "saved": "#ffc46b",  # orange, a little softer
    "grad_fn": "#e8e8e8",  # lightgrey
    "compiled": "#e3d7f7",  # lavender: one node standing for a whole compiled backward
}
COMPILED_NODE = "CompiledFunctionBackward"
LEGEND = (
    "green: output   blue: leaf with .grad (AccumulateGrad)   "
    "grey: backward node (grad_fn)   orange: tensor saved for backward"
)


def eager_graph(
    tensor: Any,
    params: dict[str, Any] | Any | None = None,
    show_saved: bool = True,
    legend: bool = True,
) -> Drawing:
    """The backward graph behind `tensor` (or a list of tensors) as a `Drawing`.

    `params` maps names to leaf tensors (a module works too: its
    `named_parameters()` are used); their AccumulateGrad nodes are labelled with
    the name. `show_saved=False` leaves out the saved-tensor nodes.
    """
    if hasattr(params, "named_parameters"):
        params = dict(params.named_parameters())
    outputs = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    walker = _Walker(params or {}, show_saved)
    for k, out in enumerate(outputs):
        walker.add_output(out, k if len(outputs) > 1 else None)
    walker.walk()
    if legend:
        has_compiled = any("compiled" in a["class"] for a in walker.drawing.nodes.values())
        text = LEGEND + ("   lavender: a compiled function" if has_compiled else "")
        walker.drawing.graph_attrs.update(
            label=text, labelloc="b", fontsize="10", fontcolor="#555555", fontname="Helvetica"
        )
    return walker.drawing


class _Walker:
    """Iterative depth-first walk over grad_fn nodes (no recursion limit)."""

    def __init__(self, params: dict[str, Any], show_saved: bool):
        self.names = {id(t): name for name, t in params.items()}
        self.show_saved = show_saved
        self.drawing = Drawing(
            "backward",
            graph_attrs={"rankdir": "TB", "nodesep": "0.25", "ranksep": "0.35"},
            node_attrs={
                "shape": "box",
                "style": "filled,rounded",
                "fontname": "Helvetica",
                "fontsize": "11",
                "height": "0.3",
                "margin": "0.1,0.04",
            },
            edge_attrs={"color": "#555555", "arrowsize": "0.7"},
        )
        self.ids: dict[int, str] = {}  # id(python object) -> DOT node id
        self.alive: list[Any] = []  # keep walked objects alive so their id()s stay unique
        self.stack: list[Any] = []

    def add_output(self, out: Any, index: int | None) -> None:
        name = self.names.get(id(out), "output" if index is None else f"output {index}")
        out_id = f"out{0 if index is None else index}"
        self.drawing.node(
            out_id,
            label=f"{name}\n{type_str(out)}",
            fillcolor=COLORS["output"],
            tooltip="the tensor you passed in",
            **{"class": "output"},
        )
        fn = getattr(out, "grad_fn", None)
        if fn is not None:
            self.drawing.edge(self.node_id(fn), out_id)
            self.stack.append(fn)
        elif getattr(out, "requires_grad", False):
            self.drawing.nodes[out_id]["label"] += "\n(a leaf: no backward graph)"
        else:
            self.drawing.nodes[out_id]["label"] += "\n(does not require grad: no graph)"

    def node_id(self, fn: Any) -> str:
        var = getattr(fn, "variable", None)
        key = id(var) if var is not None else id(fn)  # one node per leaf, however reached
        if key not in self.ids:
            prefix = "leaf" if var is not None else "fn"
            self.ids[key] = f"{prefix}{len(self.ids)}"
            self.alive.append(fn)
        return self.ids[key]

    def walk(self) -> None:
        drawn: set[str] = set()
        while self.stack:
            fn = self.stack.pop()
            fn_id = self.node_id(fn)
            if fn_id in drawn:
                continue
            drawn.add(fn_id)
            self.draw_node(fn, fn_id)
            children = [c for c, _ in _next_functions(fn) if c is not None]
            for child in children:
                self.drawing.edge(self.node_id(child), fn_id)
            # Reversed so the first operand is walked (and laid out) first.
            self.stack.extend(c for c in reversed(children) if self.node_id(c) not in drawn)

    def draw_node(self, fn: Any, fn_id: str) -> None:
        var = getattr(fn, "variable", None)
        if var is not None:
            name = self.names.get(id(var))
            lines = ([name] if name else []) + [type_str(var)]
            self.drawing.node(
                fn_id,
                label="\n".join(lines),
                fillcolor=COLORS["leaf"],
                tooltip=f"{node_name(fn)}: accumulates into .grad",
                **{"class": "leaf"},
            )
            return
        saved = saved_tensors(fn)
        name = node_name(fn)
        label = name if saved is not None else f"{name}\n(saved tensors freed)"
        if name == COMPILED_NODE:
            self.drawing.node(
                fn_id,
                label=label + "\n(runs the compiled backward kernel)",
                fillcolor=COLORS["compiled"],
                **{"class": "grad_fn compiled"},
            )
        else:
            self.drawing.node(
                fn_id, label=label, fillcolor=COLORS["grad_fn"], **{"class": "grad_fn"}
            )
        if self.show_saved:
            for i, (label, shape, dtype) in enumerate(saved or ()):
                saved_id = f"{fn_id}_saved{i}"
                self.drawing.node(
                    saved_id,
                    label=f"{label}\n{format_type(shape, dtype)}",
                    fillcolor=COLORS["saved"],
                    fontsize="10",
                    tooltip=f"saved by {node_name(fn)} for backward",
                    **{"class": "saved"},
                )
                # Undirected and dashed: a value the node holds, not an input it waits for.
                self.drawing.edge(saved_id, fn_id, dir="none", style="dashed", color="#c07a1e")


# ------------------------------------------------------------------ helpers
def node_name(fn: Any) -> str:
    name = getattr(fn, "name", None)
    return name() if callable(name) else type(fn).__name__


def _next_functions(fn: Any) -> Iterable[tuple[Any, int]]:
    return getattr(fn, "next_functions", ()) or ()


def saved_tensors(fn: Any) -> list[tuple[str, tuple, str]] | None:
    """(label, shape, dtype) of each tensor `fn` keeps for backward; None once a
    backward without retain_graph has freed them."""
    if getattr(fn, "freed", False):
        return None
    try:
        info = getattr(fn, "saved_tensors_info", None)
        if info is not None:
            info = info() if callable(info) else info
            return [(str(label), tuple(shape), str(dtype)) for label, shape, dtype in info]
        return _torch_saved_tensors(fn)
    except RuntimeError:  # PyTorch raises once they are freed
        return None


def _torch_saved_tensors(fn: Any) -> list[tuple[str, tuple, str]]:
    out = []
    for attr in dir(fn):
        if not attr.startswith("_saved_"):
            continue
        value = getattr(fn, attr)
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            out.append((attr[len("_saved_") :], tuple(value.shape), str(value.dtype)))
    return out


def type_str(tensor: Any) -> str:
    return format_type(tuple(getattr(tensor, "shape", ())), _dtype_of(tensor))


def _dtype_of(tensor: Any) -> Any:
    return getattr(tensor, "np_dtype", None) or getattr(tensor, "dtype", "?")


def format_type(shape: tuple, dtype: Any) -> str:
    """`f32[2,3]`: the same spelling as the IR printer."""
    return f"{short_dtype(dtype)}[{','.join(str(int(d)) for d in shape)}]"


def short_dtype(dtype: Any) -> str:
    text = str(dtype).removeprefix("torch.").removeprefix("tracegrad.eager.")
    try:
        return dtype_short(np.dtype(text))
    except TypeError:
        try:
            return dtype_short(np.dtype(dtype))
        except TypeError:
            return text
