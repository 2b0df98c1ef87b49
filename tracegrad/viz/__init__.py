"""Pictures of both kinds of graph.

- `eager_graph(tensor, params=None)`: the dynamic backward graph behind an eager
  tensor (grad_fn nodes, AccumulateGrad leaves, saved tensors), like torchviz.
- `ir_graph(graph)`: a static IR graph from `lower()`, coloured by forward,
  backward and fusion group, with shape/dtype on every edge.

Both return a `Drawing`: `.to_dot()` gives DOT text (no Graphviz needed),
`.render("g.svg")` / `.render("g.png")` runs Graphviz's `dot`, and notebooks
show it inline through `_repr_svg_`.
"""

from tracegrad.viz.dot import Drawing, GraphvizNotFoundError, find_dot
from tracegrad.viz.eager import eager_graph
from tracegrad.viz.ir import ir_graph

__all__ = ["Drawing", "GraphvizNotFoundError", "eager_graph", "find_dot", "ir_graph"]
