"""Helpers for the viz tests: read back the DOT text a Drawing writes."""

import re

import pytest

_NODE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*(?:\[(.*)\])?$')
_EDGE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)"\s*(?:\[(.*)\])?$')
_ATTR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_CLUSTER = re.compile(r'^\s*subgraph "cluster_(\w+)" \{$')


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _attrs(text):
    return {k: _unescape(v) for k, v in _ATTR.findall(text or "")}


class ParsedDot:
    """Nodes (id -> attrs), edges [(tail, head, attrs)], clusters (name -> node ids)."""

    def __init__(self, text: str):
        self.nodes, self.edges, self.clusters = {}, [], {}
        cluster = None
        for line in text.splitlines()[1:-1]:
            if m := _CLUSTER.match(line):
                cluster = self.clusters.setdefault(m.group(1), [])
            elif line.strip() == "}":
                cluster = None
            elif m := _EDGE.match(line):
                self.edges.append(
                    (_unescape(m.group(1)), _unescape(m.group(2)), _attrs(m.group(3)))
                )
            elif m := _NODE.match(line):
                nid = _unescape(m.group(1))
                self.nodes[nid] = _attrs(m.group(2))
                if cluster is not None:
                    cluster.append(nid)

    def of_class(self, word: str) -> dict:
        """Nodes whose SVG class contains `word` (e.g. "leaf", "bwd")."""
        return {k: a for k, a in self.nodes.items() if word in a.get("class", "").split()}

    def labels(self, word: str) -> list:
        return sorted(a["label"] for a in self.of_class(word).values())


@pytest.fixture
def parse_dot():
    return lambda drawing: ParsedDot(drawing.to_dot())
