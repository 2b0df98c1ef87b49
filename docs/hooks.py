"""MkDocs hooks for tracegrad's site (mkdocs.yml `hooks:`).

- The API reference pages are generated at build time from the live packages: one
  entry per public name of `tracegrad` and `tracegrad.eager` (what `dir()` lists), so a
  new public function appears without editing a page, and one that lacks a docstring
  still gets its signature and a pointer to what it mirrors.
- perf/report.md (with its plots), the other perf/*.md and CHANGELOG.md are served from
  where they live, not copied into docs/src.
"""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from griffe_doctest import fence_doctests

ROOT = Path(__file__).resolve().parents[1]

# Names that are modules or plain values are listed in a table, not rendered by
# mkdocstrings (a module's page would pull in its whole contents).
_INTRO = {
    "tracegrad": (
        "Every public name of `tracegrad`: the compiled front end (`compile`, `grad`, "
        "`value_and_grad`, ...), the transforms, the loops, and the NumPy-named ops, which "
        "run on NumPy arrays, on eager tensors and while tracing. Each entry shows the "
        "signature and the docstring, whose examples run as doctests in the test suite."
    ),
    "tracegrad.eager": (
        "Every public name of `tracegrad.eager` (use it as `import tracegrad.eager as "
        "torch`). It follows PyTorch: a function without a docstring of its own behaves as "
        "PyTorch's function of the same name (values, `grad_fn` names and error texts are "
        "checked against PyTorch in the test suite)."
    ),
}


def _public(module: types.ModuleType) -> list[tuple[str, object]]:
    out = []
    for name in sorted(dir(module), key=str.lower):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except Exception:  # a lazy name whose import fails here: skip, never break docs
            continue
        out.append((name, obj))
    return out


def _target(module_name: str, name: str, obj: object) -> str | None:
    """The dotted path mkdocstrings should render, or None for values and modules."""
    if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
        return None
    if not str(getattr(obj, "__module__", "") or "").startswith("tracegrad"):
        return None  # re-exported from elsewhere (a NumPy dtype, typing.Any): a table row
    return f"{module_name}.{name}"


def _importable(obj: object) -> bool:
    """Whether mkdocstrings can find `obj` where it says it was defined (not for a
    function made by a factory, `<locals>` in its name, or a callable instance)."""
    import importlib

    if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
        return False
    found: object = importlib.import_module(obj.__module__)
    for part in obj.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is obj


def _by_hand(module_name: str, name: str, obj: object) -> list[str]:
    """The entry mkdocstrings would write, for what it cannot look up itself."""
    try:
        signature = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        signature = f"{name}(...)"
    doc = inspect.getdoc(obj) if inspect.isfunction(obj) else None
    anchor = f'<a id="{module_name}.{name}"></a>'  # the id mkdocstrings gives its entries
    lines = [anchor, "", f"### `{name}`", "", "```python", signature, "```", ""]
    if doc:
        lines += [fence_doctests(doc), ""]
    elif module_name == "tracegrad.eager":
        lines += [f"As PyTorch's `torch.{name}`.", ""]
    else:
        lines += [f"A `{type(obj).__name__}` of the rule table, called as a function.", ""]
    return lines


def _api_page(module_name: str) -> str:
    import importlib

    module = importlib.import_module(module_name)
    members = _public(module)
    lines = [f"# `{module_name}`", "", _INTRO[module_name], ""]
    values = [(n, o) for n, o in members if _target(module_name, n, o) is None]
    if values:
        lines += ["## Modules and values", "", "| name | what it is |", "| --- | --- |"]
        for name, obj in values:
            if inspect.ismodule(obj):
                first = (obj.__doc__ or "").strip().split("\n")[0].replace("|", "\\|")
                lines.append(f"| `{name}` | module `{obj.__name__}`: {first} |")
            elif inspect.isclass(obj) or callable(obj):
                origin = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', name)}"
                lines.append(f"| `{name}` | `{origin}`, re-exported |")
            else:
                text = repr(obj).replace("|", "\\|").replace("\n", " ")[:60]
                lines.append(f"| `{name}` | `{type(obj).__name__}`: `{text}` |")
        lines.append("")
    lines += ["## Functions and classes", ""]
    for name, obj in members:
        target = _target(module_name, name, obj)
        if target is None:
            continue
        if not _importable(obj):
            lines += _by_hand(module_name, name, obj)
            continue
        lines += [f"::: {target}", ""]
        if not (getattr(obj, "__doc__", None) or "").strip() and module_name == "tracegrad.eager":
            lines += [f"As PyTorch's `torch.{name}`.", ""]
    return "\n".join(lines)


_PAGES = (("tracegrad", "api/tracegrad.md"), ("tracegrad.eager", "api/eager.md"))


def on_post_build(config) -> None:
    """Every public function and class has its entry (an element with its dotted id)."""
    import importlib

    from mkdocs.exceptions import PluginError

    for module_name, uri in _PAGES:
        html = (Path(config["site_dir"]) / uri.replace(".md", ".html")).read_text()
        module = importlib.import_module(module_name)
        missing = [
            name
            for name, obj in _public(module)
            if _target(module_name, name, obj) and f'id="{module_name}.{name}"' not in html
        ]
        if missing:
            raise PluginError(f"{uri}: no entry for {missing}")


def on_files(files: Files, config) -> Files:
    for module_name, uri in _PAGES:
        files.append(File.generated(config, uri, content=_api_page(module_name)))
    files.append(
        File.generated(config, "changelog.md", content=(ROOT / "CHANGELOG.md").read_text())
    )
    for path in sorted((ROOT / "perf").glob("*.md")) + sorted((ROOT / "perf").glob("*.png")):
        uri = f"perf/{path.name}"
        if path.suffix == ".md":
            files.append(File.generated(config, uri, content=path.read_text()))
        else:
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
