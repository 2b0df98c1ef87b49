"""Reroll: fold repeated statement sequences of a kernel body back into a loop.

A traced 50-layer network is 50 copies of the same statements that differ
only in buffer offsets and in which weight array they use:

    tg_gemm(0, 0, 32, 64, 64, ws_float32, 2048, 64, w1_f, 0, 64, 0.0, ws_float32, 0, 64)
    kernel_x_loop0(ws_float32, np.int64(0), np.int64(6144), np.int64(8192))
    tg_gemm(0, 0, 32, 64, 64, ws_float32, 6144, 64, w2_f, 0, 64, 0.0, ws_float32, 0, 64)
    ...

Numba's compile time grows with every statement, so such runs become

    rolled0 = (w1_f, w2_f, ...)
    for rep in range(50):
        tg_gemm(0, 0, 32, 64, 64, ws_float32, _R0[rep], 64, rolled0[rep], ...)
        kernel_x_loop0(ws_float32, np.int64(0), np.int64(_R1[rep]), ...)

with the varying integers in small module-level int64 tables (`_R0`) and the
varying arrays in a tuple (all of one type, so it can be indexed at run
time). Only single-line call statements are folded; anything else ends a run.
"""

from __future__ import annotations

import re

MIN_COVERED = 8  # fold a run only if it replaces at least this many statements
MIN_REPEATS = 3
MAX_PERIOD = 8

_CALL = re.compile(r"^    [A-Za-z_][\w.]*\(.*\)\s*(#.*)?$")
_TOKEN = re.compile(r"(?<![\w.])(-?\d+)(?![\w.])|\b(ws_\w+|out_\w+|\w+_f)\b")


def _canon(line: str):
    code = line.split("#", 1)[0].rstrip()
    params = []

    def sub(m):
        if m.group(1) is not None:
            params.append(("int", m.group(1)))
            return "#I"
        params.append(("arr", m.group(2)))
        return "#A"

    return _TOKEN.sub(sub, code), params


def reroll(lines: list[str], array_type) -> tuple[list[str], list[str]]:
    """Fold runs in a kernel body (lines at 4-space indent). `array_type(name)`
    gives a flat array variable's Numba type. Returns (new lines, module-level
    definitions of the int tables)."""
    items = []  # (line, key or None for comments / non-call statements, params)
    i = 0
    while i < len(lines):
        line = lines[i]
        block = [line]
        j = i + 1
        if line.startswith("    ") and not line.startswith("     "):
            while j < len(lines) and lines[j].startswith("     "):
                block.append(lines[j])
                j += 1
        if len(block) == 1 and _CALL.match(line):
            key, params = _canon(line)
            items.append((block, key, params))
        elif line.strip().startswith("#"):
            items.append((block, "comment", None))
        else:
            items.append((block, None, None))
        i = j

    calls = [k for k, (_, key, _) in enumerate(items) if key not in (None, "comment")]
    out: list[str] = []
    tables: list[str] = []
    pos = 0
    n_rolled = 0
    while pos < len(items):
        run = _find_run(items, pos)
        if run is None:
            out.extend(items[pos][0])
            pos += 1
            continue
        period, repeats, members, end = run
        folded = _fold(items, members, period, repeats, array_type, n_rolled, tables)
        if folded is None:
            out.extend(items[pos][0])
            pos += 1
            continue
        out.extend(folded)
        n_rolled += 1
        pos = end
    del calls
    return out, tables


def _find_run(items, pos):
    """The best run of repeated call statements starting at items[pos]:
    (period, repeats, member item indices, index after the run) or None."""
    if items[pos][1] in (None, "comment"):
        return None
    seq = []  # indices of call statements from pos on, comments skipped
    k = pos
    while k < len(items) and items[k][1] is not None:
        if items[k][1] != "comment":
            seq.append(k)
        k += 1
    keys = [items[k][1] for k in seq]
    best = None
    for period in range(1, MAX_PERIOD + 1):
        if 2 * period > len(keys):
            break
        unit = keys[:period]
        repeats = 1
        while keys[repeats * period : (repeats + 1) * period] == unit:
            repeats += 1
        if (
            repeats >= MIN_REPEATS
            and period * repeats >= MIN_COVERED
            and (best is None or period * repeats > best[0] * best[1])
        ):
            best = (period, repeats)
    if best is None:
        return None
    period, repeats = best
    members = seq[: period * repeats]
    return period, repeats, members, members[-1] + 1


def _fold(items, members, period, repeats, array_type, n_rolled, tables):
    first = [items[m] for m in members[:period]]
    body = []
    setup = []
    for q, (_block, key, params) in enumerate(first):
        reps = [items[members[r * period + q]][2] for r in range(repeats)]
        values = []
        for slot, (kind, value) in enumerate(params):
            column = [rep[slot][1] for rep in reps]
            if all(v == column[0] for v in column):
                values.append(value)
            elif kind == "int":
                name = f"_R{len(tables)}"
                tables.append(f"{name} = np.array([{', '.join(column)}], np.int64)")
                values.append(f"{name}[rep]")
            else:
                types_ = {array_type(v) for v in column}
                if len(types_) != 1:
                    return None  # arrays of different types: a tuple cannot hold them
                name = f"rolled{n_rolled}_{q}_{slot}"
                setup.append(f"    {name} = ({', '.join(column)},)")
                values.append(f"{name}[rep]")
        it = iter(values)
        line = re.sub(r"#[IA]", lambda m: next(it), key)  # noqa: B023 - re.sub calls it now
        body.append("        " + line.strip())
    head = [
        f"    # {repeats} repeats of the next {period} statement(s), folded into a loop "
        "(see tracegrad/codegen/reroll.py)"
    ]
    return head + setup + [f"    for rep in range({repeats}):"] + body
