"""One forward loop where reverse mode made two.

Reverse mode of a `scan` (loops/primitives.py) adds a second forward scan whose
body also emits each step's starting carry (the residuals). Its packed value
begins with exactly the original scan's value, so the original scan is
replaced by a slice of it: the forward runs once.

    scan(B, ops)  and  scan(history(B), ops)   ->   h = scan(history(B), ops); h[:n]
"""

from __future__ import annotations

from tracegrad.ir.graph import Graph, Node
from tracegrad.loops.primitives import SUBGRAPH_ATTRS
from tracegrad.passes.rewrite import copy_graph


def _loop_key(node: Node, body: Graph) -> tuple:
    a = node.attrs
    return (
        id(body),
        tuple(i.id for i in node.inputs),
        a["length"],
        a["reverse"],
        a["n_carry"],
        a["n_xs"],
    )


def share_scan_residuals_counted(graph: Graph) -> tuple[Graph, int]:
    from tracegrad.loops.primitives import history_base

    histories = {}
    for node in graph.nodes:
        if node.op == "scan":
            base = history_base(node.attrs["body"])
            if base is not None:
                histories.setdefault(_loop_key(node, base), node)
    if not histories:
        return graph, 0
    forward = [
        n for n in graph.nodes if n.op == "scan" and _loop_key(n, n.attrs["body"]) in histories
    ]
    if not forward:
        return graph, 0
    graph = copy_graph(graph)
    by_id = {n.id: n for n in graph.nodes}
    replaced: dict[int, Node] = {}
    for old in forward:
        s1 = by_id[old.id]
        s2 = by_id[histories[_loop_key(old, old.attrs["body"])].id]
        size = s1.shape[0]
        graph.nodes.remove(s2)
        at = graph.nodes.index(s1)
        graph.nodes.insert(at, s2)  # its operands are s1's: defined before s1
        s2.tag = s1.tag
        part = Node(
            graph._next_id,
            "getitem",
            (s2,),
            {"spec": (("slice", 0, size, 1),)},
            (size,),
            s1.dtype,
            s1.source,
            s1.tag,
        )
        graph._next_id += 1
        graph.nodes[graph.nodes.index(s1)] = part
        replaced[s1.id] = part
    for n in graph.nodes:
        if any(i.id in replaced for i in n.inputs):
            n.inputs = tuple(replaced.get(i.id, i) for i in n.inputs)
    graph.outputs = [replaced.get(o.id, o) for o in graph.outputs]
    return graph, len(replaced)


# ------------------------------------------------------------------ rerolling
"""Python loops unroll into long periodic chains of nodes. `reroll_loops` finds a
chain whose steps repeat exactly (same ops, attrs, shapes; each step reads only
its own nodes, the previous step's nodes, and values from outside the chain
that are the same for every step) and puts one step in a `scan`, so the graph,
its reverse mode and the generated code keep the size of one step:

    h1 = tanh(h0*w+b); h2 = tanh(h1*w+b); ... h100 = tanh(h99*w+b)
        ->  packed = scan[body: h -> tanh(h*w+b)](h0, w, b); h100 = packed[...]
"""

MIN_STEPS = 16  # shorter chains stay unrolled (faster per call, cheap to compile)
MAX_PERIOD = 64  # nodes in one step
_MIN_NODES = 48  # and at least this many nodes in the chain


def reroll_loops(graph: Graph, min_steps: int | None = None) -> Graph:
    """`graph` with each long periodic chain replaced by one scan node (a new graph;
    the input graph is not modified). Same inputs and outputs."""
    min_steps = MIN_STEPS if min_steps is None else min_steps
    for _ in range(8):  # several separate loops in one function
        found = _find_chain(graph, min_steps)
        if found is None:
            return graph
        graph = _rebuild_with_scan(graph, *found)
    return graph


def _signature(node: Node, cache: dict) -> int:
    from tracegrad.ir.graph import attrs_key

    try:
        key = (node.op, attrs_key(node.attrs), node.shape, node.dtype.str)
        hash(key)
    except TypeError:  # unhashable attrs (a sub-graph): never part of a chain
        return -1 - node.id
    return cache.setdefault(key, len(cache))


def _find_chain(graph: Graph, min_steps: int):
    seq = [n for n in graph.nodes if n.op not in ("input", "const")]
    if len(seq) < max(_MIN_NODES, 2 * min_steps):
        return None
    cache: dict = {}
    sig = [_signature(n, cache) for n in seq]
    candidates = []
    for p in range(1, min(MAX_PERIOD, len(seq) // min_steps) + 1):
        i = 0
        while i + p < len(seq):
            if sig[i] != sig[i + p]:
                i += 1
                continue
            start = i
            while i + p < len(seq) and sig[i] == sig[i + p]:
                i += 1
            count = (i - start + p) // p
            if count >= min_steps and count * p >= _MIN_NODES:
                candidates.append((count * p, start, p, count))
    for _, start, p, count in sorted(candidates, key=lambda c: (-c[0], c[2])):
        for shift in range(p):  # the chain may start mid-step (a first step that differs)
            if count - (1 if shift else 0) < min_steps:
                break
            n = count - (1 if shift else 0)
            plan = _plan(seq, start + shift, p, n)
            if plan is not None:
                return plan
    return None


def _plan(seq: list[Node], start: int, p: int, count: int):
    """Check that seq[start : start + p*count] is a loop of `count` steps; return
    what the scan needs, or None."""
    pos = {n.id: k for k, n in enumerate(seq)}
    end = start + p * count
    classes: dict[tuple[int, int], tuple] = {}  # (j, q) -> class for steps >= 1
    first: dict[tuple[int, int], tuple] = {}  # (j, q) -> class in step 0
    for k in range(count):
        for j in range(p):
            node = seq[start + k * p + j]
            for q, inp in enumerate(node.inputs):
                where = pos.get(inp.id)
                if where is not None and start <= where < end:
                    kk, r = divmod(where - start, p)
                    if kk == k and r < j:
                        cls = ("intra", r)
                    elif kk == k - 1:
                        cls = ("carry", r)
                    else:
                        return None
                else:
                    cls = ("ext", inp)
                if k == 0:
                    first[j, q] = cls
                elif classes.setdefault((j, q), cls) != cls and not (
                    cls[0] == "ext" and classes[j, q][0] == "ext" and cls[1] is classes[j, q][1]
                ):
                    return None
    init: dict[int, Node] = {}
    for (j, q), cls in classes.items():
        f = first[j, q]
        if cls[0] == "carry":
            if f[0] != "ext" or init.setdefault(cls[1], f[1]) is not f[1]:
                return None
            if f[1].aval != seq[start + cls[1]].aval:
                return None
        elif cls[0] == "ext":
            if f[0] != "ext" or f[1] is not cls[1]:
                return None
        elif f != cls:
            return None
    run_ids = {seq[i].id for i in range(start, end)}
    return seq[start:end], p, count, classes, init, run_ids


def _rebuild_with_scan(
    graph: Graph, run: list[Node], p: int, count: int, classes: dict, init: dict, run_ids: set
) -> Graph:
    from tracegrad.loops.primitives import _scan_avals, packed_layout

    carries = sorted(init)
    step0 = run[:p]
    externals: list[Node] = []
    for _, cls in sorted(classes.items(), key=lambda kv: kv[0]):
        if cls[0] == "ext" and cls[1].op != "const" and all(e is not cls[1] for e in externals):
            externals.append(cls[1])
    # which step values are read after the chain (or returned)
    used_after: dict[int, set[int]] = {}
    later = [n for n in graph.nodes if n.id not in run_ids]
    index_of = {n.id: i for i, n in enumerate(run)}
    for n in later:
        for i in n.inputs:
            if i.id in index_of:
                k, j = divmod(index_of[i.id], p)
                used_after.setdefault(j, set()).add(k)
    for o in graph.outputs:
        if o.id in index_of:
            k, j = divmod(index_of[o.id], p)
            used_after.setdefault(j, set()).add(k)
    ys = sorted(j for j, ks in used_after.items() if j not in carries or ks != {count - 1})

    # the body: one step
    body = Graph(name=f"{graph.name}_step")
    body_of: dict[int, Node] = {}
    carry_in = {r: body.add_input(step0[r].aval, f"carry{r}") for r in carries}
    ext_in = {e.id: body.add_input(e.aval, f"ext{e.id}") for e in externals}
    consts: dict[int, Node] = {}
    for j, node in enumerate(step0):
        ins = []
        for q, _ in enumerate(node.inputs):
            cls = classes.get((j, q))
            if cls[0] == "intra":
                ins.append(body_of[cls[1]])
            elif cls[0] == "carry":
                ins.append(carry_in[cls[1]])
            elif cls[1].op == "const":
                c = consts.get(cls[1].id)
                if c is None:
                    c = consts[cls[1].id] = body.add_const(cls[1].attrs["value"], cls[1].dtype)
                ins.append(c)
            else:
                ins.append(ext_in[cls[1].id])
        body_of[j] = body.new_node(node.op, ins, node.attrs, node.aval, node.source, node.tag)
    body.outputs = [body_of[r] for r in carries] + [body_of[j] for j in ys]

    # the new graph: the chain becomes scan + slices
    new = Graph(name=graph.name)
    new._next_id = graph._next_id
    mapped: dict[int, Node] = {}
    extracted: dict[tuple[int, int], Node] = {}
    scan_node = None
    parts: dict = {}

    def node_copy(n: Node) -> Node:
        m = Node(
            n.id,
            n.op,
            tuple(value_of(i) for i in n.inputs),
            dict(n.attrs),
            n.shape,
            n.dtype,
            n.source,
            n.tag,
            n.group,
        )
        new.nodes.append(m)
        return m

    def emit(op, ins, attrs, shape, dtype, like: Node) -> Node:
        m = Node(
            new._next_id,
            op,
            tuple(ins),
            attrs,
            tuple(shape),
            np_dtype(dtype),
            like.source,
            like.tag,
        )
        new._next_id += 1
        new.nodes.append(m)
        return m

    def part(slot: int) -> Node:
        if slot not in parts:
            off, size, shape, dt = layout[slot]
            piece = emit(
                "getitem",
                (scan_node,),
                {"spec": (("slice", off, off + size, 1),)},
                (size,),
                packed_dtype,
                run[0],
            )
            piece = emit("reshape", (piece,), {"shape": shape}, shape, packed_dtype, run[0])
            if np_dtype(dt) != packed_dtype:
                piece = emit("astype", (piece,), {"dtype": np_dtype(dt).name}, shape, dt, run[0])
            parts[slot] = piece
        return parts[slot]

    def value_of(i: Node) -> Node:
        if i.id not in index_of:
            return mapped[i.id]
        k, j = divmod(index_of[i.id], p)
        if j in carries and k == count - 1:  # the final carry
            return part(carries.index(j))
        if (k, j) not in extracted:
            y = part(len(carries) + ys.index(j))
            shape = run[j].shape
            spec = (k,) + tuple(("slice", 0, d, 1) for d in shape)
            extracted[k, j] = emit("getitem", (y,), {"spec": spec}, shape, run[j].dtype, run[j])
        return extracted[k, j]

    for n in graph.nodes:
        if n.id in run_ids:
            if scan_node is None:
                for e in [init[r] for r in carries] + externals:
                    if e.id not in mapped and e.op == "const":  # defined inside the chain
                        mapped[e.id] = node_copy(e)
                operands = [mapped[init[r].id] for r in carries] + [mapped[e.id] for e in externals]
                avals = _scan_avals(body, count, len(carries))
                packed_dtype, layout = packed_layout(avals)
                total = sum(s[1] for s in layout)
                scan_node = emit(
                    "scan",
                    operands,
                    {
                        "body": body,
                        "length": count,
                        "reverse": False,
                        "n_carry": len(carries),
                        "n_xs": 0,
                    },
                    (total,),
                    packed_dtype,
                    run[0],
                )
            continue
        if n.id in mapped:  # a const copied early (see above)
            continue
        if n.op == "input":
            m = Node(n.id, n.op, (), dict(n.attrs), n.shape, n.dtype, n.source, n.tag, n.group)
            new.nodes.append(m)
            mapped[n.id] = m
            continue
        mapped[n.id] = node_copy(n)
    new.inputs = [mapped[n.id] for n in graph.inputs]
    new.outputs = [value_of(o) for o in graph.outputs]
    for attr in ("vjp_origin",):
        if hasattr(graph, attr):
            setattr(new, attr, getattr(graph, attr))
    return new


def np_dtype(dtype):
    import numpy as np

    return np.dtype(dtype)


# -------------------------------------------------------- passes inside bodies


def optimize_bodies_counted(graph: Graph) -> tuple[Graph, int]:
    """Run the simplification passes inside the sub-graphs of loops and branches
    (each keeps its inputs and its number of outputs). Counts bodies that shrank."""
    from tracegrad.passes import optimize

    changed = 0
    replacements: dict[int, dict] = {}
    for node in graph.nodes:
        keys = SUBGRAPH_ATTRS.get(node.op, ())
        new_attrs = {}
        for key in keys:
            body = node.attrs[key]  # (share_scan_residuals pairs bodies by identity; it
            smaller = optimize(body)  # runs before this pass in each round)
            if len(smaller.nodes) < len(body.nodes):
                new_attrs[key] = smaller
        if new_attrs:
            replacements[node.id] = new_attrs
    if not replacements:
        return graph, 0
    from tracegrad.loops.primitives import inherit_history

    graph = copy_graph(graph)
    for node in graph.nodes:
        if node.id in replacements:
            for key, smaller in replacements[node.id].items():
                inherit_history(node.attrs[key], smaller)  # its residual record
            node.attrs = {**node.attrs, **replacements[node.id]}
            changed += 1
    return graph, changed
