"""A griffe extension for tracegrad's docs: docstrings are plain text whose examples are
doctest blocks (`>>> ...` and the expected output, ended by a blank line). Markdown would
read `>>>` as a quote and `[(2,), (2,)]` as a link, so each block is fenced as a Python
console session before mkdocstrings renders the docstring (the text itself is unchanged:
the same examples still run as doctests in the test suite)."""

from __future__ import annotations

import textwrap
from typing import Any

from griffe import Extension


def fence_doctests(text: str) -> str:
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        if out and out[-1].strip():
            out.append("")  # a fence must start its own paragraph
        out += ["```pycon", textwrap.dedent("\n".join(block)), "```"]
    return "\n".join(out)


class DoctestBlocks(Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
