"""The import graph between tracegrad's parts runs one way (issue 15).

Every import is counted, function-level ones too. A part may import only parts
below it; a new top-level module or package needs a place in LAYERS.
"""

import ast
import collections
import pathlib

import tracegrad

ROOT = pathlib.Path(tracegrad.__file__).resolve().parent

# bottom to top; parts on the same rank must not import each other
LAYERS = {
    "config": 0,
    "runtime": 1,
    "ops": 2,
    "ir": 3,
    "eager": 3,
    "pytree": 4,
    "viz": 4,
    "placement": 4,  # placement (device_put, DeviceArray); numba.cuda only when used
    "tracing": 5,
    "autodiff": 6,
    "implicit": 6,
    "forward": 7,
    "loops": 8,
    "passes": 9,
    "codegen": 10,
    "lowering": 11,
    "entries": 11,
    "compiled_eager": 12,
    "capture": 12.5,
    "compiler": 13,
    "batching": 14,
    "custom": 14,
    "explainer": 14,
    "transforms": 15,
    "random": 16,  # jax.random: composites of the rule table's threefry2x32
    "scipy": 16,  # jax.scipy.special / stats: composites of tracegrad ops
    "tracegrad": 99,
    "distributed": 100,
}


def _modules() -> dict:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "tracegrad"


def _imports(name: str, path: pathlib.Path, mods: dict):
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in mods)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
            yield from subs
            if len(subs) < len(node.names) and base in mods:
                yield base


def _part_edges() -> dict:
    mods = _modules()
    edges = collections.defaultdict(set)
    for name, path in mods.items():
        for target in _imports(name, path, mods):
            if _part(target) != _part(name):
                edges[_part(name)].add((_part(target), name, target))
    return edges


def test_every_part_has_a_layer():
    parts = {_part(m) for m in _modules()}
    assert parts <= set(LAYERS), f"give these a rank in LAYERS: {sorted(parts - set(LAYERS))}"


def test_parts_import_only_parts_below_them():
    upward = [
        f"{src} ({a}) imports {dst} ({b})"
        for src, targets in _part_edges().items()
        for dst, a, b in targets
        if LAYERS[dst] >= LAYERS[src]
    ]
    assert not upward, "upward or sideways imports:\n  " + "\n  ".join(sorted(upward))
