"""The Drawing: DOT text, rendering through Graphviz, and the error without it."""

from pathlib import Path

import pytest

from tracegrad.viz import Drawing, GraphvizNotFoundError, find_dot

needs_dot = pytest.mark.skipif(find_dot() is None, reason="Graphviz 'dot' is not installed")


def tiny() -> Drawing:
    d = Drawing("tiny", node_attrs={"shape": "box"})
    d.node("a", label='say "hi"\nback\\slash', fillcolor="#cfe2ff")
    d.node("b", label="exp")
    d.edge("a", "b", label="f32[2,3]")
    d.cluster("g0", ["b"], label="fusion group 0")
    return d


def test_to_dot_round_trips_labels_with_quotes_newlines_and_backslashes(parse_dot):
    parsed = parse_dot(tiny())
    assert parsed.nodes["a"]["label"] == 'say "hi"\nback\\slash'
    assert parsed.edges == [("a", "b", {"label": "f32[2,3]"})]
    assert parsed.clusters == {"g0": ["b"]}


def test_render_dot_suffix_writes_text_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    path = tiny().render(tmp_path / "g.dot")
    assert Path(path).read_text() == tiny().to_dot()


def test_missing_dot_names_the_package_and_points_to_to_dot(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizNotFoundError) as info:
        tiny().render(tmp_path / "g.svg")
    text = str(info.value)
    assert "apt-get install graphviz" in text
    assert "package 'graphviz'" in text
    assert ".to_dot()" in text
    assert not (tmp_path / "g.svg").exists()
    assert tiny()._repr_svg_() is None  # notebooks fall back to the plain repr


def test_unknown_suffix_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"\.svg, \.png"):
        tiny().render(tmp_path / "g.jpeg2000")


@needs_dot
def test_render_svg_and_png(tmp_path):
    svg = tiny().render(tmp_path / "g.svg")
    png = tiny().render(tmp_path / "g.png")
    assert "<svg" in Path(svg).read_text()
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert tiny()._repr_svg_().lstrip().startswith("<?xml")


@needs_dot
def test_graphviz_accepts_the_escaped_labels():
    svg = tiny()._repr_svg_()
    assert "say &quot;hi&quot;" in svg and "back\\slash" in svg
