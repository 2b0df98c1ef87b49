"""Eager errors: PyTorch's class and text, plus the op, the operand types and the user's line.

Shape errors are both `tracegrad.ShapeError` and PyTorch's class (RuntimeError,
or IndexError for indexing), so `except RuntimeError` written for PyTorch and
`except tracegrad.ShapeError` both catch them. The text starts with PyTorch's
message verbatim; the context follows on the next line:

    shape '[4]' is invalid for input of size 6
      (reshape of f32[2,3] at train.py:12)
"""

from __future__ import annotations

from tracegrad.ops.core import DTypeError, ShapeError, dtype_short, user_frame


class EagerShapeError(ShapeError, RuntimeError):
    """Operand shapes do not fit the op (PyTorch raises RuntimeError)."""


class EagerIndexError(ShapeError, IndexError):
    """An index does not fit the tensor (PyTorch raises IndexError)."""


class EagerValueError(ShapeError):
    """Operands that do not fit together where PyTorch raises ValueError (loss batch sizes)."""


class EagerDTypeError(DTypeError, RuntimeError):
    """An operand's dtype does not fit the op."""


class EagerNotImplementedError(DTypeError, NotImplementedError):
    """PyTorch has no kernel for this dtype (softmax of an integer tensor)."""


def _describe(t) -> str:
    data = getattr(t, "_data", None)
    if data is None:
        return type(t).__name__
    return f"{dtype_short(data.dtype)}[{','.join(map(str, data.shape))}]"


def _where() -> str | None:
    """The user's file:line, plus the lines in the same file that called it
    (a helper such as `def step(): loss.backward()` is then traced to its caller)."""
    frame = user_frame()
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    text = f"{filename}:{frame.f_lineno}"
    callers = []
    outer = frame.f_back
    while outer is not None and len(callers) < 2:
        if outer.f_code.co_filename == filename:
            callers.append(f"{filename}:{outer.f_lineno}")
        outer = outer.f_back
    if callers:
        text += ", called from " + ", ".join(callers)
    return text


def context(op: str, operands=()) -> str:
    parts = f"{op} of {', '.join(_describe(t) for t in operands)}" if operands else op
    loc = _where()
    return f"\n  ({parts}{' at ' + loc if loc else ''})"


def shape_error(op: str, text: str, *operands, cls=EagerShapeError) -> Exception:
    return cls(text + context(op, operands))


def with_context(text: str, op: str, *operands) -> str:
    """PyTorch's text verbatim on the first line, then what and where."""
    return text + context(op, operands)


def with_pytorch_class(exc: Exception) -> Exception:
    """A table ShapeError/DTypeError re-raised with PyTorch's class as well."""
    if isinstance(exc, ShapeError) and not isinstance(exc, RuntimeError):
        return EagerShapeError(str(exc))
    if isinstance(exc, DTypeError) and not isinstance(exc, RuntimeError):
        return EagerDTypeError(str(exc))
    return exc
