"""PyTorch's tensor repr, reproduced: `tensor([0.5000, 0.3000])`, suffixes and all.

Follows torch/_tensor_str.py (precision 4, line width 80, summarize above
1000 elements with 3 edge items): floats whose values are all integral print
as `7.`; a spread over 1000x or values beyond 1e8 or below 1e-4 switch to
scientific notation; columns are right-aligned to the widest element.
"""

from __future__ import annotations

import math

import numpy as np

PRECISION = 4
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3
SCI_MODE = None  # None: chosen from the values; True/False: forced (set_printoptions)


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """torch.set_printoptions: digits, summarization threshold and edge items, line
    width, a profile ("default", "short", "full") and scientific notation on/off/auto.

    >>> import tracegrad.eager as torch
    >>> torch.set_printoptions(precision=2); torch.tensor([1.2345, 2.0])
    tensor([1.23, 2.00])
    >>> torch.set_printoptions(profile="default")
    """
    global PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE
    if profile is not None:
        PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = {
            "default": (4, 1000, 3, 80),
            "short": (2, 1000, 2, 80),
            "full": (4, math.inf, 3, 80),
        }[profile]
    if precision is not None:
        PRECISION = precision
    if threshold is not None:
        THRESHOLD = threshold
    if edgeitems is not None:
        EDGEITEMS = edgeitems
    if linewidth is not None:
        LINEWIDTH = linewidth
    SCI_MODE = sci_mode


def _default_float_name() -> str:
    from tracegrad.eager.dtypes import default_float

    return default_float().name


def _default_complex_name() -> str:
    from tracegrad.eager.dtypes import default_complex

    return default_complex().name


class _Formatter:
    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(self._plain(v)))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if finite.size == 0:
            return
        absval = np.abs(finite)
        lo, hi = float(absval.min()), float(absval.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if SCI_MODE is not None:
            self.sci_mode = SCI_MODE
        for v in finite.tolist():
            if self.sci_mode:
                s = f"{v:.{PRECISION}e}"
            elif self.int_mode:
                s = f"{v:.0f}" + "."
            else:
                s = f"{v:.{PRECISION}f}"
            self.max_width = max(self.max_width, len(s))

    @staticmethod
    def _plain(v) -> str:
        return str(v)

    def width(self) -> int:
        return self.max_width

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRECISION}f}"
        else:
            ret = str(value)
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """torch/_tensor_str.py's complex case: one formatter for the real parts, one for
    the imaginary parts; `1.0000+2.j`."""

    def __init__(self, values: np.ndarray):
        self.real = _Formatter(np.ascontiguousarray(values.real))
        self.imag = _Formatter(np.ascontiguousarray(values.imag))

    def width(self) -> int:
        return self.real.width() + self.imag.width() + 1

    def format(self, value) -> str:
        value = complex(value)
        real_str = self.real.format(value.real)
        imag_str = (self.imag.format(value.imag) + "j").lstrip()
        if imag_str[0] in "+-":
            return real_str + imag_str
        return real_str + "+" + imag_str


def _summarized(values: np.ndarray) -> np.ndarray:
    """The edge items only (what the formatter measures when summarizing)."""
    if values.ndim == 0:
        return values
    if values.shape[0] > 2 * EDGEITEMS:
        values = np.concatenate([values[:EDGEITEMS], values[-EDGEITEMS:]])
    if values.ndim == 1:
        return values
    return np.stack([_summarized(v) for v in values])


def _vector_str(values: np.ndarray, indent: int, summarize: bool, fmt) -> str:
    element_length = fmt.width() + 2
    per_line = max(1, math.floor((LINEWIDTH - indent) / element_length))
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        data = (
            [fmt.format(v) for v in values[:EDGEITEMS].tolist()]
            + [" ..."]
            + [fmt.format(v) for v in values[-EDGEITEMS:].tolist()]
        )
    else:
        data = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(values: np.ndarray, indent: int, summarize: bool, fmt) -> str:
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _vector_str(values, indent, summarize, fmt)
    n = values.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        parts = (
            [_tensor_str(values[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)]
            + ["..."]
            + [_tensor_str(values[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)]
        )
    else:
        parts = [_tensor_str(values[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def array_str(values: np.ndarray, indent: int) -> str:
    if values.size == 0:
        return "[]"
    summarize = values.size > THRESHOLD
    shown = _summarized(values) if summarize else values
    fmt: _Formatter | _ComplexFormatter = (
        _ComplexFormatter(shown) if values.dtype.kind == "c" else _Formatter(shown)
    )
    return _tensor_str(values, indent, summarize, fmt)


def _add_suffixes(body: str, suffixes: list, indent: int) -> str:
    parts = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t) -> str:
    """`tensor([27.], grad_fn=<MulBackward0>)` and friends."""
    values = t._data
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    dtype_name = values.dtype.name
    if values.size == 0:
        if values.ndim != 1:
            suffixes.append("size=" + str(tuple(values.shape)))
        if dtype_name != _default_float_name():
            suffixes.append(f"dtype=torch.{dtype_name}")
        body = "[]"
    else:
        if dtype_name not in ("int64", "bool", _default_float_name(), _default_complex_name()):
            suffixes.append(f"dtype=torch.{dtype_name}")
        body = array_str(values, indent)
    if t._grad_fn is not None:
        fn = t._grad_fn
        shown = fn.display_name() if hasattr(fn, "display_name") else fn.name()
        suffixes.append(f"grad_fn=<{shown}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    text = _add_suffixes(prefix + body, suffixes, indent)
    if getattr(type(t), "_is_parameter", False):
        return "Parameter containing:\n" + text
    return text
