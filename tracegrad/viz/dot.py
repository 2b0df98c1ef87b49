"""A small DOT writer and the `Drawing` that both graph views return.

DOT is Graphviz's text format. Writing it needs nothing installed; turning it
into a picture needs the `dot` program (Debian/Ubuntu package `graphviz`).

    >>> d = Drawing("demo")
    >>> d.node("a", label="x"); d.node("b", label="exp"); d.edge("a", "b")
    >>> print(d.to_dot().splitlines()[0])
    digraph "demo" {
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_TEXT_SUFFIXES = (".dot", ".gv")


class GraphvizNotFoundError(RuntimeError):
    """Raised by `render` when the Graphviz `dot` program is not installed."""


def quote(text: str) -> str:
    """A DOT double-quoted string. Newlines become DOT's centred line breaks."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def _attr_list(attrs: dict) -> str:
    items = [f"{k}={quote(v)}" for k, v in attrs.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


@dataclass
class Cluster:
    """A boxed subgraph (Graphviz draws a frame around its nodes)."""

    name: str
    attrs: dict
    node_ids: list = field(default_factory=list)


class Drawing:
    """A directed graph ready to be written as DOT or rendered by Graphviz.

    `nodes` maps node id -> attributes and `edges` is a list of
    (tail, head, attributes): handy for inspecting a drawing without Graphviz.
    """

    def __init__(
        self,
        name: str,
        graph_attrs: dict | None = None,
        node_attrs: dict | None = None,
        edge_attrs: dict | None = None,
    ):
        self.name = name
        self.graph_attrs = dict(graph_attrs or {})
        self.node_attrs = dict(node_attrs or {})
        self.edge_attrs = dict(edge_attrs or {})
        self.nodes: dict[str, dict] = {}
        self.edges: list[tuple[str, str, dict]] = []
        self.clusters: list[Cluster] = []
        self.same_rank: list[list[str]] = []

    # ------------------------------------------------------------- building
    def node(self, node_id: str, **attrs) -> None:
        self.nodes.setdefault(node_id, {}).update(attrs)

    def edge(self, tail: str, head: str, **attrs) -> None:
        self.edges.append((tail, head, attrs))

    def cluster(self, name: str, node_ids, **attrs) -> None:
        self.clusters.append(Cluster(name, attrs, list(node_ids)))

    def align(self, node_ids) -> None:
        """Ask Graphviz to put these nodes side by side (same rank)."""
        self.same_rank.append(list(node_ids))

    # -------------------------------------------------------------- output
    def to_dot(self) -> str:
        """The graph as DOT text; needs no Graphviz install."""
        lines = [f"digraph {quote(self.name)} {{"]
        for kind, attrs in (
            ("graph", self.graph_attrs),
            ("node", self.node_attrs),
            ("edge", self.edge_attrs),
        ):
            if attrs:
                lines.append(f"  {kind}{_attr_list(attrs)}")
        in_cluster = set()
        for c in self.clusters:
            lines.append(f"  subgraph {quote('cluster_' + c.name)} {{")
            for k, v in c.attrs.items():
                lines.append(f"    {k}={quote(v)}")
            for nid in c.node_ids:
                lines.append(f"    {quote(nid)}{_attr_list(self.nodes[nid])}")
                in_cluster.add(nid)
            lines.append("  }")
        for nid, attrs in self.nodes.items():
            if nid not in in_cluster:
                lines.append(f"  {quote(nid)}{_attr_list(attrs)}")
        for ids in self.same_rank:
            lines.append("  { rank=same; " + " ".join(quote(i) + ";" for i in ids) + " }")
        for tail, head, attrs in self.edges:
            lines.append(f"  {quote(tail)} -> {quote(head)}{_attr_list(attrs)}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def render(self, path: str | os.PathLike, format: str | None = None) -> str:
        """Write the picture to `path`; the suffix (.svg, .png, .pdf) picks the format.

        A `.dot`/`.gv` suffix writes the DOT text itself (no Graphviz needed).
        Everything else runs Graphviz's `dot` program. Returns the path written.
        """
        path = os.fspath(path)
        suffix = os.path.splitext(path)[1].lower()
        if format is None and suffix in _TEXT_SUFFIXES:
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.to_dot())
            return path
        fmt = format or _FORMATS.get(suffix)
        if fmt is None:
            raise ValueError(
                f"render: cannot tell the image format from {path!r}; "
                f"use a name ending in .svg, .png, .pdf or .dot, or pass format="
            )
        data = self._run_dot(fmt)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def _repr_svg_(self) -> str | None:
        """Jupyter's hook: the SVG picture, or None (plain repr) without Graphviz."""
        if find_dot() is None:
            return None
        return self._run_dot("svg").decode("utf-8")

    def __repr__(self) -> str:
        return (
            f"<Drawing {self.name!r}: {len(self.nodes)} nodes, {len(self.edges)} edges; "
            f".to_dot() for DOT text, .render('file.svg') for a picture>"
        )

    def _run_dot(self, fmt: str) -> bytes:
        dot = find_dot()
        if dot is None:
            raise GraphvizNotFoundError(
                "rendering needs the 'dot' program from Graphviz, which was not found on PATH.\n"
                "  Install it with: apt-get install graphviz   (Debian/Ubuntu package 'graphviz';\n"
                "  'brew install graphviz' on macOS, 'conda install graphviz' in conda).\n"
                "  Without Graphviz, call .to_dot() for the DOT text (or render to a .dot file)\n"
                "  and open it in any Graphviz viewer."
            )
        proc = subprocess.run(
            [dot, f"-T{fmt}"], input=self.to_dot().encode("utf-8"), capture_output=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"Graphviz 'dot -T{fmt}' failed: {proc.stderr.decode('utf-8', 'replace').strip()}"
            )
        return proc.stdout


def find_dot() -> str | None:
    """Path of Graphviz's `dot` program, or None when it is not installed."""
    return shutil.which("dot")
