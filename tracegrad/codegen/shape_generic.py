"""Shape-generic kernels: a new shape of a compiled graph reuses its Numba kernel.

Two shapes of the same function usually generate kernels whose sources differ only
in integer and float literals (loop bounds, workspace offsets, 1/n). Such a pair
gives a *template*: the module in which every literal that differed is read from
an array argument instead (`_S[k]`, int64; `_F[k]`, float64), everything else
staying literal. It is compiled once and serves every shape whose own generated
source it reproduces.

Soundness by construction: a shape uses a template only when rewriting the shape's
*own* generated source at the template's positions gives the template's text
exactly (`bind`); the values passed are that source's own literals at those
positions, so the kernel runs exactly the shape's source with the literals read
from arrays. Anything else (another graph, another code choice, a literal that is
fixed in the template but differs here) is a miss, and the caller falls back to
its specialized kernel.

    >>> a = "def k(x):\\n    for i in range(16):\\n        x[i] = 0.0625\\n"
    >>> b = a.replace("16", "24").replace("0.0625", "0.041666666666666664")
    >>> t = derive(a, b)
    >>> print(t.text.rstrip())
    def k(x, _S, _F):
        _tgs0 = _S[0] & 0xffffffffffff
        _tgf0 = _F[0]
        for i in range(_tgs0):
            x[i] = _tgf0
    >>> bind(t, b)
    ([24], [0.041666666666666664])
    >>> bind(t, a.replace("range(16)", "range(16 + 1)")) is None
    True

Kernels are cached on disk like any generated module (runtime/cache.py verifies
every file before import), and a small record (the family of sources, a hash of
the token stream without its numbers -> the template's positions) lets a later
process find the template without the shapes that made it: the record is only a
hint, since the module it leads to must still hash to the text rebuilt from the
new shape's own source.
"""

from __future__ import annotations

import collections
import hashlib
import io
import logging
import re
import threading
import time
import tokenize
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("tracegrad")

KERNEL_NAME = "kernel_tgshape"  # the entry name sources are generated under for matching
_S, _F = "_S", "_F"
# Int parameters are masked to this many bits where they are read: a no-op for the
# values passed (literals have no sign; larger values are refused by `bind`), it
# tells LLVM they are non-negative, so an index `ws[off + i]` needs no wraparound
# select and its loop still vectorizes, as with a literal offset.
INT_LIMIT = (1 << 48) - 1
_EXTRA_TYPES = "types.int64[::1], types.float64[::1]"
_TYPED_DECL = re.compile(
    r"(_(?:f32|f64|int64|int32|int8|uint8|int16)_\d+) = "
    r"(np\.(?:float32|float64|int64|int32|int8|uint8|int16))\("
)


# ------------------------------------------------------------------ tokens


@dataclass(frozen=True)
class _Tok:
    type: int
    string: str
    start: tuple[int, int]
    end: tuple[int, int]


_FLAT_INDEX = re.compile(r"\b((?:ws|out)_\w+|V\d+)\[(?=[A-Za-z_])")


_HOISTED = re.compile(r"^(_(?:f32|f64|u?int\d+|bool_?)_\d+) = (np\.\w+\([^\n]*\))$", re.M)


def _unhoist(source: str) -> str:
    """Typed literals put back at their uses: `_int64_3` -> `np.int64(512)`. The
    generator names them in order of first appearance (generate._hoist_typed_literals),
    so which name a call site reads depends on which values happen to be equal: with
    loops shared by two groups, batch 3's offsets coincide where batch 16's do not."""
    decls = dict(_HOISTED.findall(source))
    if not decls:
        return source
    source = _HOISTED.sub("", source)
    return re.sub(
        r"\b_(?:f32|f64|u?int\d+|bool_?)_\d+\b", lambda m: decls.get(m.group(0), m.group(0)), source
    )


def canonical(source: str) -> str:
    """`source` with an explicit `0 + ` where a flat buffer's index has no constant
    offset (`ws_float64[i0 * 64 + i1]`, as the emitter writes offset 0), so that an
    offset that is 0 for one shape and not for another is one literal. `0 + e` equals
    `e` for integer indices whatever `e`'s operators (+ binds tighter than every
    operator of lower precedence, and adding 0 changes no int)."""
    return _FLAT_INDEX.sub(r"\1[0 + ", _unhoist(source))


def _tokens(source: str) -> list[_Tok] | None:
    """The source's tokens without comments and blank-line markers (None if it
    does not tokenize, or already uses the names templates add)."""
    if re.search(r"\b(_S|_F|_tg[sf]\d+)\b", source):
        return None
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type in (tokenize.COMMENT, tokenize.NL):
                continue
            out.append(_Tok(t.type, t.string, t.start, t.end))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return out


def _kind(token: str) -> str | None:
    """ "i" for a plain decimal int literal, "f" for a float literal, else None."""
    if re.fullmatch(r"[0-9]+", token):
        return "i" if len(token) < 19 and (token == "0" or token[0] != "0") else None
    if re.fullmatch(r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?", token):
        return "f"
    return None


class Parsed:
    """One generated source, canonical (see `canonical`), with its tokens and family
    (the hash of its tokens with every number blanked: sources of one family
    differ only in literals). `tokens` is None if the source cannot be a template."""

    __slots__ = ("source", "tokens", "family")

    def __init__(self, source: str):
        self.source = canonical(source)
        self.tokens = _tokens(self.source)
        self.family = None
        if self.tokens is not None:
            h = hashlib.sha256()
            erased = _erased_strings(self.tokens)
            for k, t in enumerate(self.tokens):
                blank = t.type == tokenize.NUMBER or k in erased
                h.update(f"{t.type}\0{'#' if blank else t.string}\0".encode())
            self.family = h.hexdigest()[:32]


def _parsed(source) -> Parsed:
    return source if isinstance(source, Parsed) else Parsed(source)


# ------------------------------------------------------------------ templates


@dataclass(frozen=True)
class Template:
    """A shape-generic module: `text` (entry `entry`, taking the graph's arrays then
    `_S`, `_F`), the token positions it reads from arrays, their kinds ("i"/"f"),
    and the tokens of a source it was made from (`reference`)."""

    text: str
    entry: str
    positions: tuple[int, ...]
    kinds: str
    slots: tuple[int, ...]  # per position: its parameter (among those of its kind)
    family: str
    reference: tuple

    def __repr__(self) -> str:
        n = {
            k: len({s for s, kk in zip(self.slots, self.kinds, strict=True) if kk == k})
            for k in "if"
        }
        return (
            f"<Template {self.entry}: {len(self.positions)} literals, {n['i']} int and "
            f"{n['f']} float parameters>"
        )


def derive(source_a, source_b, name: str = KERNEL_NAME) -> Template | None:
    """The template of two generated sources that differ only in numbers (None if
    they differ anywhere else, or a differing number changes its kind)."""
    pa, pb = _parsed(source_a), _parsed(source_b)
    ta, tb = pa.tokens, pb.tokens
    if ta is None or tb is None or pa.family != pb.family:
        return None
    positions, kinds, slots = [], [], []
    # each literal is a parameter of its own: literals equal for two shapes (an offset
    # and a size, both 16 * 10) need not be equal for a third (the plan moved one)
    slot_of: dict[tuple, int] = {}
    offsets = _offset_positions(ta)
    erased = _erased_strings(ta)
    for k, (x, y) in enumerate(zip(ta, tb, strict=True)):
        if k in erased:
            positions.append(k)
            kinds.append("x")
            slots.append(0)
            continue
        if x.string == y.string and k not in offsets:
            continue
        kx, ky = _kind(x.string), _kind(y.string)
        if x.type != tokenize.NUMBER or kx is None or kx != ky:
            return None
        positions.append(k)
        kinds.append(kx)
        key = (kx, k)
        if key not in slot_of:
            slot_of[key] = sum(1 for kk in slot_of if kk[0] == kx)
        slots.append(slot_of[key])
    if not positions:
        return None
    return _template(pa, tuple(positions), "".join(kinds), tuple(slots), name)


_FLAT_BUFFER = re.compile(r"(?:ws|out)_\w+|V\d+")


def _offset_positions(toks: list[_Tok]) -> set[int]:
    """Offsets into flat buffers (`ws_f64[3072 + ...`, `tg_gemm(..., ws_f64, 3072, ...`,
    and a shared loop's `kernel_loop2(ws_f64, ..., np.int64(3072))`): parameters even
    where two shapes agree, since the workspace plan places a buffer at 0 for some
    shapes and elsewhere for others."""
    out = set()
    for k in range(2, len(toks)):
        t = toks[k]
        if t.type != tokenize.NUMBER or _kind(t.string) != "i":
            continue
        if toks[k - 1].string in ("[", ",") and _FLAT_BUFFER.fullmatch(toks[k - 2].string):
            out.add(k)
        elif _is_loop_call_offset(toks, k):
            out.add(k)
    return out


_LOOP_FUNCTION = re.compile(r"\w+_loop\d+")


def _is_loop_call_offset(toks: list[_Tok], k: int) -> bool:
    """Whether toks[k] is `N` in `np.int64(N)`, an argument of a shared loop's call
    (emit.py's outlining passes every offset that way)."""
    if k < 4 or [t.string for t in toks[k - 4 : k]] != ["np", ".", "int64", "("]:
        return False
    depth = 0
    for j in range(k - 5, -1, -1):  # back to the call's opening parenthesis
        s = toks[j].string
        if s == ")":
            depth += 1
        elif s == "(":
            if depth == 0:
                return j > 0 and bool(_LOOP_FUNCTION.fullmatch(toks[j - 1].string))
            depth -= 1
        elif toks[j].type in (tokenize.NEWLINE, tokenize.NL):
            return False
    return False


# The message of `raise IndexError('...size 6...')` in a kernel names sizes, but never
# reaches the user: codegen.Kernel answers an IndexError by running the graph on
# the interpreter, whose own check raises the error that names index, axis and
# line. In a template the message is this one (Numba needs a constant message).
_ERASED = repr("index out of range (in a shape-generic kernel)")


def _erased_strings(toks: list[_Tok]) -> set[int]:
    """Positions of the messages of `raise IndexError('...')`."""
    return {
        k
        for k in range(3, len(toks))
        if toks[k].type == tokenize.STRING
        and toks[k - 1].string == "("
        and toks[k - 2].string == "IndexError"
        and toks[k - 3].string == "raise"
    }


def _template(
    parsed: Parsed, positions: tuple[int, ...], kinds: str, slots: tuple[int, ...], name: str
) -> Template | None:
    text = _generic_text(parsed.source, parsed.tokens, positions, kinds, slots, name)
    if text is None:
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    entry = f"kernel_{digest}"
    return Template(
        re.sub(rf"\b{name}", entry, text),
        entry,
        positions,
        kinds,
        slots,
        parsed.family,
        tuple((t.type, t.string) for t in parsed.tokens),
    )


def bind(template: Template, source) -> tuple[list, list] | None:
    """The values (ints, floats) that make `template` run `source`, or None when
    the template does not reproduce `source`. The soundness check: `source`'s
    tokens must be the template's reference tokens everywhere but at the
    template's positions, which must hold numbers of the same kind (whitespace
    between tokens carries no meaning, comments are dropped)."""
    parsed = _parsed(source)
    toks = parsed.tokens
    ref = template.reference
    if toks is None or len(toks) != len(ref) or parsed.family != template.family:
        return None
    values: dict[tuple[str, int], str] = {}
    pos = {
        p: (k, s)
        for p, k, s in zip(template.positions, template.kinds, template.slots, strict=True)
    }
    for k, (t, r) in enumerate(zip(toks, ref, strict=True)):
        slot = pos.get(k)
        if slot is None:
            if t.string != r[1] or t.type != r[0]:
                return None
        elif slot[0] == "x":
            if t.type != tokenize.STRING:
                return None
        elif (
            t.type != tokenize.NUMBER
            or _kind(t.string) != slot[0]
            or values.setdefault(slot, t.string) != t.string
        ):
            return None  # (a shared parameter must hold one value)
    ints = [int(values[("i", j)]) for j in range(sum(1 for s in values if s[0] == "i"))]
    floats = [float(values[("f", j)]) for j in range(sum(1 for s in values if s[0] == "f"))]
    if any(v > INT_LIMIT for v in ints):
        return None
    return ints, floats


def _generic_text(source: str, toks: list[_Tok], positions, kinds, slots, name: str) -> str | None:
    """`source` with comments dropped, the numbers at `positions` read from `_S`/`_F`,
    and those two arrays passed to every function that reads them (directly or
    through a call). Hoisted typed constants (`_f32_0 = np.float32(0.5)`) that read
    them are put back at their uses. None if a module-level statement other than
    such a constant reads them (a table the template cannot pass)."""
    lines = source.split("\n")
    edits: dict[tuple[int, int], tuple[int, str]] = {}  # start -> (end col, new text)
    for k, kind, slot in zip(positions, kinds, slots, strict=True):
        t = toks[k]
        if t.start[0] != t.end[0]:
            return None
        edits[t.start] = (
            t.end[1],
            _ERASED if kind == "x" else f"_tg{'s' if kind == 'i' else 'f'}{slot}",
        )
    comment_cols = _comment_starts(source)
    out = []
    for row, line in enumerate(lines, start=1):
        if row in comment_cols:
            line = line[: comment_cols[row]].rstrip()
            if not line:
                continue
        cols = sorted(c for (r, c) in edits if r == row)
        for col in reversed(cols):
            end, new = edits[(row, col)]
            line = line[:col] + new + line[end:]
        out.append(line)
    return _thread_arrays("\n".join(out), name)


def _comment_starts(source: str) -> dict[int, int]:
    starts = {}
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type == tokenize.COMMENT:
            starts[t.start[0]] = t.start[1]
    return starts


_READS = re.compile(r"\b_tg[sf]\d+\b")


def _thread_arrays(text: str, entry: str) -> str | None:
    blocks = _top_level_blocks(text)
    text = _inline_hoisted(blocks)
    if text is None:
        return None
    blocks = _top_level_blocks(text)
    defs = {b.name: b for b in blocks if b.name}
    for b in blocks:
        if not b.name and _READS.search(b.body):
            return None  # a module-level table reads them: not generic
    needs = {n for n, b in defs.items() if _READS.search(b.body)} | {entry}
    changed = True
    while changed:  # callers of functions that need the arrays need them too
        changed = False
        for n, b in defs.items():
            if n not in needs and any(re.search(rf"\b{re.escape(m)}\(", b.body) for m in needs):
                needs.add(n)
                changed = True
    parts = []
    for b in blocks:
        body = b.body
        for m in needs:  # call sites (not the def line, not tg_noinline(name))
            body = _add_call_args(body, m)
        if b.name in needs:
            body = _add_params(body, b.name)
            if body is not None:
                body = _add_loads(body, b.name)
            if body is None:
                return None
        parts.append(body)
    return "".join(parts)


@dataclass
class _Block:
    name: str | None  # the function a block defines (with its decorators), else None
    body: str


def _top_level_blocks(text: str) -> list[_Block]:
    """The module cut into functions (decorator lines, def and body) and the
    top-level statements between them."""
    blocks: list[_Block] = []
    cur: list[str] = []
    cur_name = None

    def flush():
        nonlocal cur, cur_name
        if cur:
            blocks.append(_Block(cur_name, "\n".join(cur) + "\n"))
        cur, cur_name = [], None

    for line in text.split("\n"):
        if line and not line[0].isspace():
            decorating = bool(cur) and cur_name is None and all(c.startswith("@") for c in cur)
            if line.startswith(("@", "def ")) and decorating:
                pass  # the function these decorators belong to
            else:
                flush()
            if line.startswith("def "):
                cur_name = re.match(r"def (\w+)", line).group(1)
        cur.append(line)
    flush()
    blocks[-1].body = blocks[-1].body[:-1]  # no newline was added after the last line
    return blocks


def _inline_hoisted(blocks: list[_Block]) -> str | None:
    """Module constants `_f32_3 = np.float32(_F[0])` back into the code that uses them."""
    subst = {}
    kept = []
    for b in blocks:
        if b.name is None and _READS.search(b.body):
            lines = []
            for line in b.body.split("\n"):
                m = _TYPED_DECL.match(line)
                if m and _READS.search(line):
                    subst[m.group(1)] = line[m.end(1) + 3 :]
                else:
                    lines.append(line)
            kept.append(_Block(None, "\n".join(lines)))
        else:
            kept.append(b)
    text = "".join(b.body for b in kept)
    for n, expr in subst.items():
        text = re.sub(rf"\b{n}\b", expr, text)
    return text


def _add_call_args(body: str, fn: str) -> str:
    out, pos = [], 0
    for m in re.finditer(rf"(?<![\w.]){re.escape(fn)}\(", body):
        if body[max(0, m.start() - 4) : m.start()] == "def ":
            continue
        close = _matching(body, m.end() - 1)
        inner = body[m.end() : close].strip()
        out.append(body[pos:close])
        out.append(f", {_S}, {_F}" if inner else f"{_S}, {_F}")
        pos = close
    out.append(body[pos:])
    return "".join(out)


def _add_params(body: str, fn: str) -> str | None:
    m = re.search(rf"^def {re.escape(fn)}\(", body, re.M)
    close = _matching(body, m.end() - 1)
    inner = body[m.end() : close].strip()
    body = body[:close] + (f", {_S}, {_F}" if inner else f"{_S}, {_F}") + body[close:]
    deco = re.search(r"^@njit\(\(", body, re.M)
    if deco is None:  # a plain Python driver, or a helper without a signature
        return body
    close = _matching(body, deco.end() - 1)
    inner = body[deco.end() : close].rstrip()
    if not inner:
        new = _EXTRA_TYPES
    elif inner.endswith(","):
        new = f"{inner} {_EXTRA_TYPES},"
    else:
        new = f"{inner}, {_EXTRA_TYPES}"
    return body[: deco.end()] + new + body[close:]


def _add_loads(body: str, fn: str) -> str:
    """Each value the function reads, loaded into a local once at its top: a local
    is a register to LLVM, while a load from `_S` inside a loop that writes other
    arrays could not be hoisted (no alias information) and blocks vectorization."""
    used = sorted(set(_READS.findall(body)), key=lambda n: (n[3] != "s", int(n[4:])))
    if not used:
        return body
    m = re.search(rf"^def {re.escape(fn)}\(.*\n", body, re.M)
    indent = re.match(r"[ \t]*", body[m.end() :]).group(0) or "    "
    loads = "".join(
        f"{indent}{n} = {_S}[{n[4:]}] & {INT_LIMIT:#x}\n"
        if n[3] == "s"
        else f"{indent}{n} = {_F}[{n[4:]}]\n"
        for n in used
    )
    return body[: m.end()] + loads + body[m.end() :]


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parentheses in generated source")


# ------------------------------------------------------------------ kernels


class GenericKernel:
    """A compiled template: `bound(graph, emitted, parsed)` gives a codegen Kernel
    for one shape (None when the template does not reproduce that shape's source)."""

    def __init__(self, template: Template, module, path):
        self.template = template
        self.module = module
        self.path = path
        self.fn = getattr(module, template.entry)

    def bound(self, graph, emitted, parsed: Parsed | None = None):
        from tracegrad.codegen.kernel import Kernel

        values = bind(self.template, parsed or Parsed(emitted.source))
        if values is None:
            return None
        ints = np.array(values[0], np.int64)
        floats = np.array(values[1], np.float64)
        by_id = {n.id: n for n in graph.nodes}
        consts = tuple(
            np.ascontiguousarray(by_id[cid].attrs["value"], dtype=by_id[cid].dtype)
            for cid in emitted.const_ids
        )
        calls = [0]

        def entry(*arrays, _f=self.fn, _c=consts, _s=ints, _x=floats):
            calls[0] += 1
            if calls[0] == HOT_CALLS:
                _specialize_later(kernel)
            return _f(*_c, *arrays, _s, _x)

        kernel = Kernel(
            entry,
            graph,
            emitted.source,
            str(self.path) if self.path else None,
            (),
            {"shape_generic": 1.0},
            self.module,
        )
        kernel.shape_generic = self
        kernel.shape_values = (ints, floats)
        kernel.specialized = None
        return kernel


# A template kernel runs a few percent slower than a specialized one (the MLP at
# batch 24: 36 vs 34 us float64, load ~4): a shape called this often gets its
# specialized kernel built in the background, which then takes the calls.
HOT_CALLS = 2000


def _specialize_later(kernel) -> None:
    from tracegrad.codegen.background import submit
    from tracegrad.codegen.kernel import build_kernel

    graph = kernel.graph

    def swap(build):
        spec = build.kernel
        if getattr(spec, "module", None) is None:  # Numba failed: the interpreter; keep ours
            return
        kernel.specialized = spec
        kernel.entry = lambda *arrays: spec.entry(*arrays)  # (its parallel variant too)
        log.info(
            "codegen %s: specialized kernel in use after %d calls of the shape-generic one",
            graph.name,
            HOT_CALLS,
        )

    submit(graph, builder=lambda: build_kernel(graph), on_done=swap)


_LOCK = threading.RLock()
_BY_FAMILY: dict[str, list[GenericKernel]] = {}  # family -> compiled templates
_STRUCTURES: set[str] = set()  # structure keys with a compiled template


def usable(emitted) -> bool:
    """Whether a generated module can become a template at all: NumPy fallbacks would
    need the module's table filled per shape, and an entry that is a Python driver
    around segments (fallbacks) is not one Numba dispatch."""
    return not emitted.fallback_ids


def emit_for_matching(graph):
    """The graph's module under the fixed entry name sources are compared by."""
    from tracegrad.codegen.kernel import _generate

    return _generate(graph, KERNEL_NAME)


def find(graph, emitted, parsed: Parsed, disk: bool = True):
    """A Kernel for `graph` from a compiled template that reproduces its source (in
    this process, else through the disk record); None if there is none."""
    if parsed.family is None or not usable(emitted):
        return None
    with _LOCK:
        known = list(_BY_FAMILY.get(parsed.family, ()))
    for gk in known:
        kernel = gk.bound(graph, emitted, parsed)
        if kernel is not None:
            return kernel
    if not disk:
        return None
    gk = _load_recorded(parsed)
    return gk.bound(graph, emitted, parsed) if gk is not None else None


def compile_template(template: Template, structure: str | None = None) -> GenericKernel | None:
    """Compile (or load from Numba's cache) a template's module, record it on disk
    for later processes, and register it here. None (logged) if Numba rejects it."""
    from tracegrad.runtime.cache import load_source
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()
    try:
        module, path, status = load_source(template.text)
    except Exception as exc:  # a literal Numba needs at compile time: not generic
        log.info(
            "codegen: shape-generic kernel rejected by Numba (%s: %s)",
            type(exc).__name__,
            str(exc).split("\n")[0][:200],
        )
        return None
    gk = GenericKernel(template, module, path)
    _register(gk)
    _record(template, structure)
    log.info(
        "codegen: shape-generic kernel %s ready (%d int, %d float parameters; %s)",
        template.entry,
        template.kinds.count("i"),
        template.kinds.count("f"),
        status,
    )
    return gk


def _register(gk: GenericKernel) -> None:
    with _LOCK:
        kernels = _BY_FAMILY.setdefault(gk.template.family, [])
        if all(k.template.text != gk.template.text for k in kernels):
            kernels.append(gk)


def _record_key(fam: str) -> str:
    return hashlib.sha256(f"shape-generic\0{fam}".encode()).hexdigest()[:32]


def _record(template: Template, structure: str | None) -> None:
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    if structure is not None:
        with _LOCK:
            _STRUCTURES.add(structure)
    directory = cache.open_cache_dir()
    if directory is None:
        return
    if structure is not None:
        index.write_entry(directory.path, _record_key("structure\0" + structure), {})
        if index.read_entry(directory.path, _record_key("any"))[0] is None:
            index.write_entry(directory.path, _record_key("any"), {})
    index.write_entry(
        directory.path,
        _record_key(template.family),
        {
            "positions": list(template.positions),
            "kinds": template.kinds,
            "slots": list(template.slots),
        },
    )


def _load_recorded(parsed: Parsed) -> GenericKernel | None:
    """The template a disk record names for this family, loaded only if its module
    exists and verifies: the module's name is the hash of the text rebuilt from
    `parsed` itself at the recorded positions, so a wrong record is only a miss."""
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    directory = cache.open_cache_dir()
    if directory is None:
        return None
    payload, why = index.read_entry(directory.path, _record_key(parsed.family))
    if payload is None:
        return None
    try:
        positions = tuple(int(p) for p in payload["positions"])
        kinds = str(payload["kinds"])
        slots = tuple(int(s) for s in payload["slots"])
        if (
            len(kinds) != len(positions)
            or len(slots) != len(positions)
            or not positions
            or any(s < 0 or s >= len(slots) for s in slots)
            or set(kinds) - {"i", "f", "x"}
            or list(positions) != sorted(set(positions))
            or positions[0] < 0
            or positions[-1] >= len(parsed.tokens)
        ):
            raise ValueError(kinds)
    except (KeyError, TypeError, ValueError):
        log.info("codegen: shape-generic record for %s unusable", parsed.family)
        return None
    if any(
        parsed.tokens[p].type != tokenize.STRING
        if k == "x"
        else parsed.tokens[p].type != tokenize.NUMBER or _kind(parsed.tokens[p].string) != k
        for p, k in zip(positions, kinds, strict=True)
    ):
        return None
    template = _template(parsed, positions, kinds, slots, KERNEL_NAME)
    if template is None:
        return None
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()
    try:
        module, path, status = cache.load_named(cache.module_name_for(template.text))
    except Exception as exc:
        log.info("codegen: shape-generic module failed to load (%s)", exc)
        return None
    if module is None or not hasattr(module, template.entry):
        log.info("codegen: shape-generic module for %s: %s", parsed.family, status)
        return None
    gk = GenericKernel(template, module, path)
    _register(gk)
    log.info("codegen: shape-generic kernel %s loaded (%s)", template.entry, status)
    return gk


# ------------------------------------------------------------------ for lowering.py

_PARTNERS: collections.OrderedDict[str, list] = collections.OrderedDict()
MAX_PARTNERS = 64  # structures
PARTNERS_PER_STRUCTURE = 4


def structure_key(graph) -> str:
    """A cheap key shared by graphs that may generate sources of one family: the ops,
    ranks and dtypes of the nodes, in order (never their sizes)."""
    h = hashlib.sha256()
    for n in graph.nodes:
        h.update(
            f"{n.op}\0{len(n.shape)}\0{np.dtype(n.dtype).str}\0{n.group is not None}\n".encode()
        )
    for o in graph.outputs:
        h.update(f"out {o.id}\n".encode())
    return h.hexdigest()[:24]


class Attempt:
    """One graph's try at a compiled template: its source under the matching name
    (`emitted`, `parsed`) and the kernel found (`kernel`, None on a miss)."""

    def __init__(self, graph):
        t0 = time.perf_counter()
        self.graph = graph
        self.emitted = emit_for_matching(graph)
        self.parsed = Parsed(self.emitted.source)
        self.kernel = find(graph, self.emitted, self.parsed)
        self.seconds = time.perf_counter() - t0
        if self.kernel is not None:
            self.kernel.timings["shape_generic"] = self.seconds
            log.info(
                "codegen %s: a compiled shape-generic kernel runs this shape (%.1f ms)",
                graph.name,
                1e3 * self.seconds,
            )

    def template(self) -> Template | None:
        """The template of this graph and an earlier graph of the same structure and
        family whose kernel was built (None if there is none)."""
        if self.parsed.family is None or not usable(self.emitted):
            return None
        key = structure_key(self.graph)
        with _LOCK:
            partners = list(_PARTNERS.get(key, ()))
        for k, partner in enumerate(partners):
            if partner is not None and not isinstance(partner, Parsed):
                emitted = emit_for_matching(partner)  # on first use, then kept as text
                partner = Parsed(emitted.source) if usable(emitted) else None
                with _LOCK:
                    kept = _PARTNERS.get(key)
                    if kept is not None and k < len(kept) and kept[k] is partners[k]:
                        kept[k] = partner
            if partner is not None and partner.family == self.parsed.family:
                return derive(partner, self.parsed)
        return None

    @staticmethod
    def pair(graph, other) -> Template | None:
        """The template of two graphs' sources (None if they differ beyond literals)."""
        ea, eb = emit_for_matching(graph), emit_for_matching(other)
        if not (usable(ea) and usable(eb)):
            return None
        return derive(Parsed(ea.source), Parsed(eb.source))

    def later(self, fallback):
        """This graph's kernel, built in the background worker: a template compiled
        since the attempt, else the template of this graph and an earlier one compiled
        now, else `fallback()` (the specialized kernel; also if Numba rejects the
        template)."""
        kernel = find(self.graph, self.emitted, self.parsed, disk=False)
        if kernel is None:
            template = self.template()
            if template is not None:
                gk = compile_template(template, structure_key(self.graph))
                kernel = gk.bound(self.graph, self.emitted, self.parsed) if gk else None
        return kernel if kernel is not None else fallback()


def enabled(graph) -> bool:
    """TRACEGRAD_SHAPE_GENERIC is on, and the graph is one templates can serve."""
    from tracegrad import config

    return config.shape_generic_mode() != "0" and not any(
        np.dtype(n.dtype) == np.float16 for n in graph.nodes
    )


def may_have_template(graph) -> bool:
    """Whether a template for graphs of this structure was compiled, in this process
    or (a record on disk) an earlier one: the cheap test before generating a source."""
    key = structure_key(graph)
    with _LOCK:
        if key in _STRUCTURES:
            return True
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    directory = cache.open_cache_dir()
    if directory is None:
        return False
    payload, _ = index.read_entry(directory.path, _record_key("structure\0" + key))
    return payload is not None


def any_recorded() -> bool:
    """Whether this process or the disk cache has any template at all (one file read:
    the test before anything that costs more)."""
    with _LOCK:
        if _STRUCTURES or _BY_FAMILY:
            return True
    import tracegrad.codegen.index as index
    from tracegrad.runtime import cache

    directory = cache.open_cache_dir()
    return (
        directory is not None
        and index.read_entry(directory.path, _record_key("any"))[0] is not None
    )


def note_built(graph, parsed: Parsed | None = None) -> None:
    """`graph`'s specialized kernel exists: a later graph of its structure (and of its
    family: sizes can change the code, as a BLAS re-layout from some batch size on)
    may pair with it. A few graphs per structure, one per family where known."""
    key = structure_key(graph)
    with _LOCK:
        partners = _PARTNERS.setdefault(key, [])
        _PARTNERS.move_to_end(key)
        if parsed is not None and any(
            isinstance(p, Parsed) and p.family == parsed.family for p in partners
        ):
            return
        if len(partners) < PARTNERS_PER_STRUCTURE:
            partners.append(parsed if parsed is not None else graph)
        while len(_PARTNERS) > MAX_PARTNERS:
            _PARTNERS.popitem(last=False)


def clear() -> None:
    """Forget this process's templates and sources (tests)."""
    with _LOCK:
        _BY_FAMILY.clear()
        _STRUCTURES.clear()
        _PARTNERS.clear()
