"""The pieces CUDA kernels are written with (plan.py, plan_ops.py): value layouts,
buffers and units, literals and casts, the rule table's code templates in their
CUDA form, loads through strides, index digits, block tree reductions. Pure Python.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from tracegrad.ir.graph import Node


class CudaUnsupported(NotImplementedError):
    """An op the CUDA backend does not implement (it never falls back to the host)."""


def unsupported(node: Node, why: str = "") -> CudaUnsupported:
    where = f" (made at {node.source})" if node.source else ""
    return CudaUnsupported(
        f"the CUDA backend lacks op {node.op!r}: {node.name} = {node.op} "
        f"{', '.join(i.name for i in node.inputs)} : {node.type_str()}{where}"
        + (f"; {why}" if why else "")
        + ". It does not run it on the host behind your back: call the function with "
        "host (NumPy) arrays for the CPU path"
    )


# ------------------------------------------------------------------ layouts


def c_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@dataclass(frozen=True)
class Layout:
    """Where a value's elements are: buffer `buf` at `offset + sum(i_d * strides[d])`
    (elements), or a scalar `literal` (source text) broadcast everywhere."""

    shape: tuple
    dtype: np.dtype
    buf: str | None = None
    offset: int = 0
    strides: tuple = ()
    literal: str | None = None

    @property
    def contiguous(self) -> bool:
        return self.literal is None and all(
            s == c or d == 1
            for s, c, d in zip(self.strides, c_strides(self.shape), self.shape, strict=True)
        )


# The buffer gathers set when an index is out of range (runtime.py checks it per call).
RANGE_FLAG = "range_flag"


@dataclass
class Buffer:
    name: str
    size: int
    dtype: np.dtype
    kind: str  # "input", "temp", "output", "const", "flag" (RANGE_FLAG)
    value: np.ndarray | None = None  # for consts
    index: int = -1  # input position, or output position


@dataclass
class Unit:
    """One step on the GPU. kind: "elementwise", "reduce" or "gemm"."""

    kind: str
    name: str
    source: str = ""  # the kernel(s) as Python source for numba.cuda
    args: list = field(default_factory=list)  # buffer names, in the kernel's order
    launch: tuple = ()  # (blocks, threads)
    # launches after the first: a reduction's second pass over its chunks' partials,
    # (name, source, args, launch) each
    after: list = field(default_factory=list)
    # gemm
    gemm: dict = field(default_factory=dict)
    # scan: the body graph (fused), operands and the packed output (runtime.py runs it)
    scan: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)  # the IR lines it computes (for comments)


@dataclass
class Plan:
    units: list
    buffers: dict
    outputs: list  # Layout per graph output (contiguous buffers, or literals)


# ------------------------------------------------------------------ math for CUDA

# CPU templates call tg_* helpers and a few np.* functions; in CUDA kernels
# these names are device functions of runtime.PRELUDE.
_NP_CALL = re.compile(
    r"\bnp\.(arccos|arcsin|arctan2|arctan|expm1|floor|sqrt|isfinite|sign|remainder)\("
)


def cuda_expr(template: str, operands: list[str]) -> str:
    text = template.format(*operands)
    return _NP_CALL.sub(lambda m: f"tg_{m.group(1)}(", text)


def cuda_template(node: Node) -> str | None:
    """The CUDA form of an elementwise node's code template, or None when it calls a
    helper the prelude lacks (e.g. threefry2x32, which the CPU path runs between
    kernel segments)."""
    from tracegrad.codegen.cuda.prelude import HELPERS
    from tracegrad.ops.core import REGISTRY

    cg = REGISTRY[node.op].codegen
    if not (isinstance(cg, str) or callable(cg)):
        return None
    if np.dtype(node.dtype).kind == "c" or any(
        np.dtype(i.dtype).kind == "c" for i in node.inputs if hasattr(i, "dtype")
    ):
        return None  # complex values (real, imag, conj, complex, ...): no CUDA form here
    template = cg(**node.attrs) if callable(cg) else cg
    probe = cuda_expr(template, [f"a{k}" for k in range(len(node.inputs))])
    if any(name not in HELPERS for name in re.findall(r"\b(tg_\w+)\(", probe)):
        return None
    if re.search(r"\bnp\.(?!float|int|uint|bool_|nan\b|inf\b)\w+\(", probe):
        return None  # a NumPy function without a device version here
    return template


def literal(value, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return repr(bool(value))
    if np.issubdtype(dtype, np.integer):
        return f"np.{dtype.name}({int(value)})"
    v = float(value)
    if math.isnan(v):
        text = "np.nan"
    elif math.isinf(v):
        text = "np.inf" if v > 0 else "-np.inf"
    else:
        text = repr(v)
    return f"np.{dtype.name}({text})"


def cast(expr: str, dtype) -> str:
    dtype = np.dtype(dtype)
    return expr if dtype == np.bool_ else f"np.{dtype.name}({expr})"


# ------------------------------------------------------------------ kernel text


class _Body:
    """Loads and statements of one kernel over a domain, indexed by digit
    variables d0..d{r-1} (made on demand) or a linear index `lin` when the
    caller has one for C-ordered identity loads."""

    def __init__(self, domain: tuple, linear: str | None):
        self.domain = domain
        self.linear = linear
        self.params: list[str] = []  # buffer names
        self.lines: list[str] = []
        self.uses_digits = False

    def param(self, buf: str | None) -> str:
        assert buf is not None, "a literal has no buffer"
        if buf not in self.params:
            self.params.append(buf)
        return f"p{self.params.index(buf)}"

    def load(self, lay: Layout) -> str:
        if lay.literal is not None:
            return lay.literal
        r = len(self.domain)
        lead = r - len(lay.shape)
        eff = [0] * r
        for j, (n, s) in enumerate(zip(lay.shape, lay.strides, strict=True)):
            if n != 1:
                eff[lead + j] = s
        assert lay.buf is not None
        name = self.param(lay.buf)
        if self.linear is not None and lay.offset == 0 and tuple(eff) == _c_eff(self.domain):
            return f"{name}[{self.linear}]"
        terms = [str(lay.offset)] if lay.offset else []
        for d, s in enumerate(eff):
            if s:
                self.uses_digits = True
                terms.append(f"d{d}" if s == 1 else f"d{d} * {s}")
        return f"{name}[{' + '.join(terms) or '0'}]"


def _c_eff(shape: tuple) -> tuple:
    return tuple(0 if n == 1 else s for n, s in zip(shape, c_strides(shape), strict=True))


def _digits(var: str, dims: list[int], shape: tuple, indent: str) -> list[str]:
    """d<k> for each domain dim k in `dims` (C order) from the linear `var`."""
    lines: list[str] = []
    if not dims:
        return lines
    if len(dims) == 1:
        return [f"{indent}d{dims[0]} = {var}"]
    lines.append(f"{indent}rem = {var}")
    for k in reversed(dims[1:]):
        lines.append(f"{indent}d{k} = rem % {shape[k]}")
        lines.append(f"{indent}rem = rem // {shape[k]}")
    lines.append(f"{indent}d{dims[0]} = rem")
    return lines


def _axes_of(r: Node) -> tuple:
    """A reduction's axes, sorted and non-negative."""
    axis = r.attrs.get("axis")
    nd = len(r.inputs[0].shape)
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        return (int(axis) % nd,)
    return tuple(sorted(int(a) % nd for a in axis))


def _reduces_all(r: Node) -> bool:
    axis = r.attrs.get("axis")
    nd = len(r.inputs[0].shape)
    if axis is None:
        return True
    axes = {int(axis) % nd} if isinstance(axis, (int, np.integer)) else {int(a) % nd for a in axis}
    return axes == set(range(nd))


class _ReduceSpec:
    """A reduction's accumulator type, identity, combining expression and final value."""

    def __init__(self, r: Node, count: int):
        self.node = r
        self.acc_t = acc_t = np.dtype(r.dtype)
        op = {"amax": "max", "amin": "min"}.get(r.op, r.op)
        if op in ("max", "min"):
            if acc_t.kind == "f":
                start = -np.inf if op == "max" else np.inf
            elif acc_t.kind in "iu":
                info = np.iinfo(acc_t)
                start = info.min if op == "max" else info.max
            else:
                start = 0 if op == "max" else 1
        else:
            start = 1 if op == "prod" else 0
        self.init = literal(start, acc_t)
        self.combine = {
            "sum": "({a} + {b})",
            "mean": "({a} + {b})",
            "prod": "({a} * {b})",
            "max": "({a} if (({a} >= {b}) or ({a} != {a})) else {b})",
            "min": "({a} if (({a} <= {b}) or ({a} != {a})) else {b})",
        }[op]
        self.final = f"np.{acc_t.name}(sm[0] / {count})" if op == "mean" else "sm[0]"

    def final_pass(self, name: str, part: str, out: str, P: int, T: int, M: int = 1) -> tuple:
        """The second launch: block m reduces partials m*P .. m*P+P-1 into out[m]."""
        lines = [
            f"def {name}(part, out):",
            f"    sm = cuda.shared.array({T}, np.{self.acc_t.name})",
            "    t = cuda.threadIdx.x",
            "    m = cuda.blockIdx.x",
            f"    acc = {self.init}",
            "    j = t",
            f"    while j < {P}:",
            f"        acc = {self.combine.format(a='acc', b=f'part[m * {P} + j]')}",
            f"        j += {T}",
            *_tree(T, self.combine),
            "    if t == 0:",
            f"        out[m] = {self.final}",
        ]
        return (name, "\n".join(lines) + "\n", [part, out], (M, T))


def _tree(T: int, combine: str) -> list[str]:
    """A shared-memory tree over T (a power of two) partial results, fixed order."""
    return [
        "    sm[t] = acc",
        "    cuda.syncthreads()",
        f"    s = {T // 2}",
        "    while s > 0:",
        "        if t < s:",
        f"            sm[t] = {combine.format(a='sm[t]', b='sm[t + s]')}",
        "        cuda.syncthreads()",
        "        s //= 2",
    ]


def _batch_offsets(lay: Layout, batch: tuple) -> np.ndarray:
    """The element offset of each (broadcast) batch matrix of a GEMM operand."""
    nb = len(batch)
    own = lay.shape[:-2]
    lead = nb - len(own)
    strides = [0] * lead + [0 if d == 1 else s for d, s in zip(own, lay.strides[:-2], strict=True)]
    offs = np.full(int(np.prod(batch, dtype=np.int64)), lay.offset, dtype=np.int64)
    if nb:
        idx = np.indices(batch).reshape(nb, -1)
        offs = offs + (np.asarray(strides, dtype=np.int64)[:, None] * idx).sum(axis=0)
    return offs
