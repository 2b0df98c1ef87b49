"""Assemble the generated module: segments, the Python driver, helpers.

Normally the module holds ONE njit function taking (large consts..., inputs...)
and returning a tuple of outputs. Nodes without code generation cut the graph:
each run of generated units becomes an njit "segment", and a plain Python
driver calls the segments and, between them, the NumPy impl of those nodes.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from tracegrad.codegen.access import Access, c_strides
from tracegrad.codegen.emit import (
    FASTMATH,
    EmittedModule,
    Emitter,
    NoCodegen,
    ident,
    literal,
    numba_array_type,
)
from tracegrad.codegen.memory import MemoryReport, PlanMismatch
from tracegrad.codegen.plan import schedule, storage_lifetimes, unit_nodes
from tracegrad.codegen.reroll import reroll
from tracegrad.ir.graph import Graph, Node
from tracegrad.loops.primitives import SUBGRAPH_ATTRS
from tracegrad.passes.fuse import fuse_elementwise, groups_of, is_elementwise, is_view
from tracegrad.runtime import mathlib

log = logging.getLogger("tracegrad")

SMALL_CONST = 1  # consts of at most this many elements become literals


# Loops and branches run outside njit segments (their bodies are kernels of their
# own). When what is left around them is this small, NumPy runs it: a pure Python
# driver needs no Numba compile (~0.5 s at a cold start) and costs microseconds.
SMALL_AROUND_LOOPS = 65_536


def _numpy_driver_suffices(graph: Graph) -> bool:
    if not any(n.op in tuple(SUBGRAPH_ATTRS) for n in graph.nodes):
        return False
    work = sum(
        n.size
        for n in graph.nodes
        if n.op not in ("input", "const") + tuple(SUBGRAPH_ATTRS) and not is_view(n)
    )
    return work <= SMALL_AROUND_LOOPS


def generate(graph: Graph, kernel_name: str, parallel: bool = False) -> EmittedModule:
    """Source of a module whose `kernel_name` runs `graph` (see module doc)."""
    if _numpy_driver_suffices(graph):
        from tracegrad.passes.rewrite import copy_graph

        plain = copy_graph(graph)
        for n in plain.nodes:
            n.group = None
        forced = {n.id for n in plain.nodes if n.op not in ("input", "const")}
        return _generate(plain, kernel_name, forced, parallel)
    if not any(n.group is not None for n in graph.nodes) and any(
        is_elementwise(n) for n in graph.nodes
    ):
        graph = fuse_elementwise(graph)
    graph, forced = _complex_to_numpy(graph)
    for _ in range(len(graph.nodes) + 1):
        try:
            return _generate(graph, kernel_name, forced, parallel)
        except NoCodegen as exc:
            node_id = getattr(exc, "node_id", None)
            if node_id is None or node_id in forced:
                raise
            log.info("codegen: %%%d runs in NumPy (%s)", node_id, exc)
            forced.add(node_id)
    raise RuntimeError("code generation did not converge")


def _touches_complex(node: Node) -> bool:
    return np.dtype(node.dtype).kind == "c" or any(
        np.dtype(i.dtype).kind == "c" for i in node.inputs
    )


def _complex_to_numpy(graph: Graph) -> tuple[Graph, set[int]]:
    """Nodes with a complex operand or result that fusion left out of its groups run in
    NumPy between the njit segments (only passes.fuse.COMPLEX_FUSIBLE ops have complex
    kernels: the structured emitters are real-valued). Returns the graph (a copy when
    changed) and the ids forced to NumPy."""
    complex_ids = {
        n.id
        for n in graph.nodes
        if n.op not in ("input", "const") and _touches_complex(n) and n.group is None
    }
    if not complex_ids:
        return graph, set()
    from tracegrad.passes.rewrite import copy_graph

    graph = copy_graph(graph)
    broken = {n.group for n in graph.nodes if n.id in complex_ids and n.group is not None}
    for n in graph.nodes:
        if n.group in broken:
            n.group = None
    return graph, complex_ids


def _needs_numpy(node: Node, forced: set[int]) -> bool:
    from tracegrad.codegen.structured import emitter_for

    if node.id in forced:
        return True
    if node.op in ("input", "const") or is_view(node):
        return False
    return emitter_for(node) is None


def _param_names(graph: Graph) -> dict[int, str]:
    names: dict[int, str] = {}
    taken: set[str] = set()
    for n in graph.inputs:
        base = ident(n.attrs.get("name") or f"arg{len(names)}")
        if base in taken or base.startswith(
            (
                "a",
                "v",
                "s",
                "m",
                "c",
                "p",
                "i",
                "b",
                "acc",
                "np",
                "tg_",
                "kernel",
                "prange",
                "types",
            )
        ):
            base = f"in_{base}"
        while base in taken:
            base += "_"
        taken.add(base)
        names[n.id] = base
    return names


def _generate(graph: Graph, kernel_name: str, forced: set[int], parallel: bool) -> EmittedModule:
    """Emit twice when it saves memory: the first pass records every temporary's
    lifetime; when placing them all at once needs a smaller workspace than the
    placement made while emitting, the second pass uses those offsets."""
    expand = mathlib._expand
    first = _generate_once(graph, kernel_name, forced, parallel, plans=None)
    if not first.better_placements:
        return first
    # the second pass numbers mathlib's temporaries from 0 again: the text must not
    # depend on whether a pass ran before (shape_generic compares shapes' sources)
    mathlib.start_kernel(expand=expand)
    try:
        return _generate_once(graph, kernel_name, forced, parallel, first.better_placements)
    except PlanMismatch as exc:  # a bug, but the first pass's placement is sound
        log.warning("codegen %s: planned placement not used (%s)", kernel_name, exc)
        return first


def _generate_once(
    graph: Graph, kernel_name: str, forced: set[int], parallel: bool, plans: dict | None
) -> EmittedModule:
    groups = groups_of(graph)
    units = schedule(graph)
    numpy_unit = [u[0] == "node" and _needs_numpy(u[1], forced) for u in units]
    for u in units:  # a group member that failed codegen sends its whole group to NumPy? no:
        if u[0] == "group" and any(m.id in forced for m in groups[u[1]]):
            raise NoCodegen("group member without codegen")  # fuse should not group it

    param_name = _param_names(graph)
    big_consts = [n for n in graph.nodes if n.op == "const" and n.size > SMALL_CONST]
    for c in big_consts:
        param_name[c.id] = f"c{c.id}"
    entry_params = [c.id for c in big_consts] + [n.id for n in graph.inputs]

    # Where each unit sits, and after which unit each value's storage is dead.
    pos_of: dict[int, int] = {}
    for p, u in enumerate(units):
        for n in unit_nodes(groups, u):
            pos_of[n.id] = p
    dies_after = storage_lifetimes(graph, groups, units)
    memory: list[MemoryReport] = []
    better_placements: dict[int, dict] = {}  # segment -> offsets planned ahead, if smaller

    # Cut into segments at NumPy units.
    segments: list[tuple[str, list[int]]] = []
    for p, is_np in enumerate(numpy_unit):
        if is_np:
            segments.append(("numpy", [p]))
        elif segments and segments[-1][0] == "jit":
            segments[-1][1].append(p)
        else:
            segments.append(("jit", [p]))

    single = len(segments) == 1 and segments[0][0] == "jit"
    helpers: list[str] = []
    functions: list[str] = []
    driver: list[str] = []
    any_parallel = False
    module_tables: list[str] = []
    wants_parallel = False
    fallback_ids: list[int] = []
    uses_gemm = False

    def used_after(node_ids: set[int], last_pos: int) -> list[int]:
        later = []
        for nid in sorted(node_ids):
            users_after = any(pos_of.get(u.id, -1) > last_pos for u in users.get(nid, []))
            if users_after or nid in output_set:
                later.append(nid)
        return later

    users = graph.users()
    output_set = {o.id for o in graph.outputs}
    by_id = {n.id: n for n in graph.nodes}

    for si, (kind, positions) in enumerate(segments):
        if kind == "numpy":
            node = units[positions[0]][1]
            fallback_ids.append(node.id)
            operands = [_driver_operand(i, param_name) for i in node.inputs]
            driver.append(f"    # {_ir_line(node)}  (NumPy: no code generation)")
            direct = _driver_direct(node, operands)
            driver.append(
                f"    a{node.id} = {direct}"
                if direct
                else f"    a{node.id} = _numpy({node.id}, {', '.join(operands)})"
            )
            continue
        fname = kernel_name if single else f"{kernel_name}_s{si}"
        defined = {
            n.id
            for p in positions
            for n in unit_nodes(groups, units[p])
            if n.op not in ("input", "const")
        }
        needed = []
        for p in positions:
            for n in unit_nodes(groups, units[p]):
                for i in n.inputs:
                    if i.id not in defined and i.id not in needed:
                        needed.append(i.id)
        if single:
            params = entry_params
        else:
            params = [
                i for i in needed if not (by_id[i].op == "const" and by_id[i].size <= SMALL_CONST)
            ]
        em = Emitter(graph, fname)
        em.allow_parallel = parallel
        if plans is not None:
            em.plan = plans.get(si)  # None: placed while emitting, as in the first pass
        for pid in params:
            _bind_param(em, by_id[pid], param_name.get(pid, f"p{pid}"))
        for n in graph.nodes:  # small consts are literals wherever they are read
            if n.op == "const" and n.size <= SMALL_CONST and n.id not in em.access:
                _bind_small_const(em, n)
        returns = used_after(defined, positions[-1]) if not single else []
        em.set_lifetimes(dies_after, keep=returns)
        for p in positions:
            _emit_unit(em, units[p])
            em.end_unit(p)
        if single:
            outs = _return_outputs(em, graph, param_name)
        else:
            outs = [em.array(by_id[r]) for r in returns]
        em.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        sig = ", ".join(numba_array_type(by_id[p].shape, by_id[p].dtype) for p in params)
        names = ", ".join(param_name.get(p, f"p{p}") for p in params)
        deco = (
            f'@njit(({sig},), fastmath=_FASTMATH, error_model="numpy", cache=True, nogil=True'
            + (", parallel=True)" if em.parallel else ")")
        )
        if not params:
            deco = deco.replace("((,), ", "((), ")
        em.finish_outlining()
        em.lines, int_tables = reroll(em.lines, em.array_type)
        if int_tables and not single:  # each segment's tables _R0, _R1, ... get their own names
            em.lines, int_tables = (
                [re.sub(r"\b_R(\d+)\b", rf"_R{si}_\1", t) for t in ts]
                for ts in (em.lines, int_tables)
            )
        module_tables.extend(int_tables)
        functions.extend(em.outlined_src.values())
        functions.append("\n".join([deco, f"def {fname}({names}):"] + em.prologue() + em.lines))
        memory.append(em.memory_report())
        better = em.better_placement()
        if better:
            better_placements[si] = better
        any_parallel |= em.parallel
        # no prange variant beside BLAS's own threads (structured.BLAS_THREADED_MNK)
        wants_parallel |= em.wants_parallel and not getattr(em, "threaded_gemm", False)
        uses_gemm |= em.uses_gemm
        if not single:
            rets = ", ".join(f"a{r}" for r in returns)
            call_args = ", ".join(_driver_name(p, param_name) for p in params)
            driver.append(
                f"    {rets}{',' if len(returns) == 1 else ''} = {fname}({call_args})"
                if returns
                else f"    {fname}({call_args})"
            )

    body_text = [line for f in functions for line in f.split("\n")]
    helper_names = mathlib.helpers_used(body_text)  # those not expanded in place
    for name in helper_names:
        src, _ = mathlib.FUNCTIONS[name]
        inline = "never" if mathlib.outlined(name) else "always"
        helpers.append(
            f"@njit(fastmath=_HELPER_FASTMATH, error_model='numpy', inline='{inline}', cache=True, nogil=True)\n{src}"
        )

    header = [
        f"# Generated by tracegrad from graph {graph.name!r}. Do not edit: the file name is",
        "# the hash of this text, checked before every import.",
        "import numpy as np",
        "from numba import njit, prange, types",
    ]
    header.append(
        "from tracegrad.runtime.intrinsics import tg_flat, tg_noinline, tg_view"
        + (", tg_gemm" if uses_gemm else "")
        + "".join(f", {i}" for i in mathlib.intrinsics_used(body_text + helpers))
    )
    header.append(
        "\n_FASTMATH = {"
        + ", ".join(map(repr, sorted(FASTMATH)))
        + "}  # no 'nnan'/'ninf': NaN and inf checks still work"
    )
    header.append(
        "_HELPER_FASTMATH = {"
        + ", ".join(map(repr, sorted(mathlib.HELPER_FASTMATH)))
        + "}  # math helpers: no reassociation (it would undo their reductions)"
    )
    header.append("_NUMPY = {}  # node id -> NumPy impl, filled in by the loader")
    header.extend(module_tables)
    parts = ["\n".join(header)] + helpers + functions
    if not single:
        entry_names = ", ".join(param_name[p] for p in entry_params)
        out_names = []
        seen: set[int] = set()
        for o in graph.outputs:
            name = _driver_operand(o, param_name)  # a small const output is a literal here
            alias = o.id in seen or o.op in ("input", "const")
            out_names.append(f"np.array({name})" if alias else name)
            seen.add(o.id)
        parts.append(
            "\n".join(
                [
                    "def _numpy(node_id, *args):",
                    "    return _NUMPY[node_id](*args)",
                    "",
                    f"def {kernel_name}({entry_names}):",
                ]
                + driver
                + [f"    return ({', '.join(out_names)}{',' if len(out_names) == 1 else ''})"]
            )
        )
    source = "\n\n\n".join(parts) + "\n"
    source = _hoist_typed_literals(source)
    return EmittedModule(
        source=source,
        entry=kernel_name,
        const_ids=[c.id for c in big_consts],
        fallback_ids=fallback_ids,
        parallel=any_parallel,
        wants_parallel=wants_parallel,
        memory=MemoryReport.combine(memory),
        better_placements=better_placements if plans is None else {},
    )


def _driver_name(node_id: int, param_name: dict[int, str]) -> str:
    return param_name.get(node_id, f"a{node_id}")


def _driver_operand(node: Node, param_name: dict[int, str]) -> str:
    """An operand of a NumPy-run node: small consts are literals, not variables."""
    if node.op == "const" and node.id not in param_name:
        value = np.asarray(node.attrs["value"]).reshape(-1)
        items = ", ".join(
            repr(v.item()) if v.dtype.kind != "f" or np.isfinite(v) else f"float({str(v.item())!r})"
            for v in value
        )
        return (
            f"np.array([{items}], dtype=np.{np.dtype(node.dtype).name})"
            f".reshape({tuple(node.shape)!r})"
        )
    return _driver_name(node.id, param_name)


def _driver_direct(node: Node, operands: list[str]) -> str | None:
    """Plain NumPy for a driver's commonest steps, the views that unpack a loop's packed
    result and the zeros a backward loop starts from; None: the generic `_numpy` call.
    That call (impl, then asarray/ascontiguousarray/reshape) costs ~10 us, and the driver
    around an LSTM's two scans made 36 of them per call. Results are C-contiguous
    arrays of the node's shape and dtype, as `_numpy`'s are."""
    if len(node.inputs) != 1 or node.inputs[0].dtype != node.dtype:
        return None
    x, shape = operands[0], tuple(node.shape)
    if node.op == "reshape":
        return f"np.ascontiguousarray({x}).reshape({shape!r})"
    if node.op == "getitem" and all(
        e is None or isinstance(e, (int, np.integer)) or e[0] == "slice" for e in node.attrs["spec"]
    ):
        return f"np.ascontiguousarray({x}[{_index_source(node.attrs['spec'])}])"
    source = node.inputs[0]
    if node.op == "broadcast_to" and source.op == "const" and source.size == 1:
        value = np.asarray(source.attrs["value"]).reshape(-1)[0]
        if np.isfinite(value):
            return f"np.full({shape!r}, {value.item()!r}, dtype=np.{np.dtype(node.dtype).name})"
    return None


def _index_source(spec) -> str:
    """NumPy index source for a getitem spec without index arrays (rulekit.spec_to_index)."""
    parts = []
    for e in spec:
        if e is None:
            parts.append("None")
        elif isinstance(e, (int, np.integer)):
            parts.append(str(int(e)))
        else:
            _, start, stop, step = e
            parts.append(f"{start}:{'' if stop is None else stop}:{step}")
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def _ir_line(node: Node) -> str:
    from tracegrad.ir.printer import format_node

    return format_node(node)


def _bind_param(em: Emitter, node: Node, name: str) -> None:
    flat = f"{name}_f"
    em.emit(f"{flat} = tg_flat({name})")
    em.flat_dtypes[flat] = np.dtype(node.dtype).name
    em.access[node.id] = Access(flat, tuple(node.shape), c_strides(tuple(node.shape)))
    em.shaped[node.id] = name


def _bind_small_const(em: Emitter, node: Node) -> None:
    value = np.asarray(node.attrs["value"]).reshape(-1)
    if value.size == 0:  # an empty region: loops over it run zero times
        em.access[node.id] = em.alloc(node, own_array=False)
        return
    v = value[0].item()
    em.const_values[node.id] = v
    em.access[node.id] = Access("", tuple(node.shape), (0,) * node.ndim, 0, literal(v, node.dtype))


def _emit_unit(em: Emitter, unit) -> None:
    from tracegrad.codegen.fused import emit_group
    from tracegrad.codegen.structured import emitter_for

    kind, v = unit
    if kind == "group":
        try:
            emit_group(em, v)
        except NoCodegen as exc:
            exc.node_id = getattr(exc, "node_id", None) or em.groups[v][0].id
            raise
        return
    node: Node = v
    if node.op in ("input", "const"):
        if node.id not in em.access:  # an input of the graph this segment does not take
            return
        return
    if is_view(node):
        _emit_view(em, node)
        return
    fn = emitter_for(node)
    try:
        if fn is None:
            raise NoCodegen(f"no code generation for {node.op}")
        fn(em, node)
    except NoCodegen as exc:
        exc.node_id = node.id
        raise


def _emit_view(em: Emitter, node: Node) -> None:
    src = em.acc(node.inputs[0])
    if node.op == "broadcast_to":
        a = src.broadcast(tuple(node.attrs["shape"]))
    elif node.op in ("transpose", "permute"):
        a = src.transpose(node.attrs.get("axes"))
    elif node.op == "getitem":  # basic indexing only (is_view): offset and strides
        from tracegrad.codegen.structured import basic_index_view

        a = basic_index_view(src, node.attrs["spec"])
    else:  # reshape-like: reshape, expand_dims, squeeze, view
        a = src.reshape(tuple(node.shape))
        if a is None:  # not expressible as strides: copy the source in C order first
            em.copy_to_buffer(node.inputs[0])
            a = em.acc(node.inputs[0]).reshape(tuple(node.shape))
    em.access[node.id] = a


def _return_outputs(em: Emitter, graph: Graph, param_name) -> list[str]:
    """Names of the output arrays; a fresh copy where the value is an input,
    a const, a view of another value, or returned twice."""
    outs = []
    returned: set[str] = set()
    for o in graph.outputs:
        name = em.shaped.get(o.id, "")
        if name in em.own_outputs and name not in returned:
            outs.append(name)
            returned.add(name)
            continue
        src = em.acc(o)
        shape = tuple(o.shape)
        em.emit(f"# output {o.name} ({o.type_str()}) as a fresh array")
        name, dst = em.output_region(em.fresh("r"), shape, o.dtype)
        loop_dims, (ss, ds) = _coalesce(list(shape), [src.strides, dst.strides])
        for k, d in enumerate(loop_dims):
            em.emit(f"for i{k} in range({d}):")
            em.indent += 1
        vars_ = tuple(f"i{k}" for k in range(len(loop_dims)))
        em.emit(f"{dst.index_expr(ds, vars_)} = {src.index_expr(ss, vars_)}")
        em.indent -= len(loop_dims)
        outs.append(name)
        returned.add(name)
    return outs


def _coalesce(dims, strides):
    from tracegrad.codegen.plan import coalesce

    return coalesce(dims, strides)


_TYPED_LITERAL = re.compile(
    r"np\.(float32|float64|int64|int32|int8|uint8|int16)\((-?(?:np\.inf|np\.nan|[0-9][0-9.e+-]*))\)"
)


def _hoist_typed_literals(source: str) -> str:
    """`np.float32(0.5)` in code -> a module constant `_f32_0p5`: Numba types a
    global scalar once, instead of resolving a call at every use."""
    names: dict[str, str] = {}

    def name_for(m) -> str:
        key = m.group(0)
        if key not in names:
            short = {"float32": "f32", "float64": "f64"}.get(m.group(1), m.group(1))
            names[key] = f"_{short}_{len(names)}"
        return names[key]

    head, sep, body = source.partition("\n\n\n")
    body = _TYPED_LITERAL.sub(name_for, body)
    if not names:
        return source
    decls = "\n".join(f"{n} = {k}" for k, n in names.items())
    return head + "\n" + decls + sep + body
