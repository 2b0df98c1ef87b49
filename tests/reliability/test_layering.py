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


# Inside codegen/ (issue 24): the planning both backends share at the bottom, each
# backend's emission above it, the CPU kernel's driver and the services on top, the
# package's facade (`tracegrad.codegen`) above all. A module may import only modules
# of a lower rank; equal ranks must not import each other.
CODEGEN = "tracegrad.codegen"
CODEGEN_LAYERS = {
    # shared planning: no code is written here
    "plan": 0,
    "memory": 0,
    "access": 0,
    "index": 0,
    "reroll": 0,
    # the CPU (Numba) emission
    "emit": 1,
    "fused": 2,
    "linalg_emit": 2,
    "structured": 3,
    "generate": 4,
    "loops": 5,
    "kernel": 6,
    "background": 7,
    "shape_generic": 8,
    # the CUDA emission
    "cuda.prelude": 1,
    "cuda.kernel_text": 2,
    "cuda.plan_ops": 3,
    "cuda.disk": 3,  # plans in the disk cache
    "cuda.plan": 4,
    "cuda.runtime": 5,
    "cuda": 6,
    "": 99,  # the facade
}
SHARED_PLANNING = {"plan", "memory", "access", "index", "reroll"}


def _codegen_edges() -> dict:
    mods = _modules()
    edges: dict = {}
    for name, path in mods.items():
        if name == CODEGEN or name.startswith(CODEGEN + "."):
            local = name[len(CODEGEN) + 1 :]
            edges[local] = {
                t[len(CODEGEN) + 1 :]
                for t in _imports(name, path, mods)
                if (t == CODEGEN or t.startswith(CODEGEN + ".")) and t != name
            }
    return edges


def _cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_an_import_circle():
    edges = {"generate": {"loops"}, "loops": {"memory"}, "memory": {"emit"}, "emit": {"generate"}}
    assert _cycles(edges) == [["emit", "generate", "loops", "memory"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_codegen_has_no_import_circle():
    """Every import counts, function-level ones too (codegen/ was one 7-module circle)."""
    circles = _cycles(_codegen_edges())
    assert not circles, "import circles inside codegen/:\n  " + "\n  ".join(map(str, circles))


def test_codegen_modules_import_only_lower_ranks():
    edges = _codegen_edges()
    missing = sorted(set(edges) - set(CODEGEN_LAYERS))
    assert not missing, f"give these codegen modules a rank in CODEGEN_LAYERS: {missing}"
    upward = [
        f"{src or CODEGEN} imports {dst or CODEGEN}"
        for src, targets in edges.items()
        for dst in targets
        if CODEGEN_LAYERS[dst] >= CODEGEN_LAYERS[src]
    ]
    assert not upward, "upward or sideways imports in codegen/:\n  " + "\n  ".join(sorted(upward))


def test_backends_share_planning_and_differ_in_emission():
    """The planning imports no emitter; neither backend imports the other's emission."""
    edges = _codegen_edges()
    cuda = {m for m in edges if m == "cuda" or m.startswith("cuda.")}
    cpu = set(edges) - cuda - SHARED_PLANNING - {""}
    bad = [
        f"{src} imports {dst}"
        for src, targets in edges.items()
        for dst in targets
        if (src in SHARED_PLANNING and dst not in SHARED_PLANNING)
        or (src in cuda and dst in cpu)
        or (src in cpu and dst in cuda)
    ]
    assert not bad, "\n  ".join(sorted(bad))
    assert "plan" in edges["cuda.plan"], "the CUDA planner should use the shared schedule"


def test_codegen_modules_never_import_through_the_facade():
    """Inside codegen/, `from tracegrad.codegen import x` reads as an import of the
    package (its __init__ imports kernel.py, which imports most of codegen/): name the
    submodule instead (`from tracegrad.codegen.kernel import build_kernel`,
    `import tracegrad.codegen.index as index`)."""
    mods = _modules()
    found = []
    for name, path in mods.items():
        if not name.startswith(CODEGEN + "."):  # (the facade itself may)
            continue
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:  # (a relative import: resolved as _imports does)
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base == CODEGEN:
                found.append(f"{name}:{node.lineno}")
    assert not found, "imports through the tracegrad.codegen facade: " + ", ".join(found)
