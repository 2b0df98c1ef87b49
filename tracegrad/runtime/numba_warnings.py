"""Numba's compiler, run from a second thread, leaves the process's warning filters alone.

Numba wraps each function's type inference in `warnings.catch_warnings(record=True)`
(errors.WarningsFixer) and a rewrite retry in `warnings.catch_warnings()`. Before
Python 3.14 those swap process-wide state: the filter list and `showwarning`, saved on
entry and put back on exit. From tracegrad's background build thread that races with
the user's main thread: a `with warnings.catch_warnings(): warnings.simplefilter(...)`
block of the user's (or pytest's, around each test) that begins while a compile is in
flight loses its filters when the compile ends, and one that ends meanwhile has its
filters put back afterwards, for good (every warning an error, in the case found).

`leave_filters_alone()` gives those two Numba modules a `warnings` whose
`catch_warnings` and filter calls, in any thread but the main one, touch nothing: the
warnings Numba raises there go through the process's filters directly, once each, as
they would after Numba's flush (without its filename fix-up). In the main thread they
behave exactly as before.
"""

from __future__ import annotations

import threading
import types
import warnings
from typing import Any

_INSIDE = threading.local()  # depth of skipped catch_warnings blocks in this thread


class _SkippedCatch:
    """catch_warnings that saves and restores nothing (record=True: records nothing)."""

    def __init__(self, record: bool):
        self.record = record

    def __enter__(self) -> list | None:
        _INSIDE.depth = getattr(_INSIDE, "depth", 0) + 1
        return [] if self.record else None

    def __exit__(self, *exc_detail: Any) -> None:
        _INSIDE.depth -= 1


def _off_main_thread() -> bool:
    return threading.current_thread() is not threading.main_thread()


class _ThreadAwareWarnings(types.ModuleType):
    """`warnings`, but catch_warnings off the main thread is _SkippedCatch, and filter
    calls inside one are dropped (they would change the process's filters for good)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(warnings, name)

    def catch_warnings(self, *args: Any, record: bool = False, **kwargs: Any) -> Any:
        if _off_main_thread():
            return _SkippedCatch(record)
        return warnings.catch_warnings(*args, record=record, **kwargs)

    def simplefilter(self, *args: Any, **kwargs: Any) -> None:
        if not getattr(_INSIDE, "depth", 0):
            warnings.simplefilter(*args, **kwargs)

    def filterwarnings(self, *args: Any, **kwargs: Any) -> None:
        if not getattr(_INSIDE, "depth", 0):
            warnings.filterwarnings(*args, **kwargs)


THREAD_AWARE_WARNINGS = _ThreadAwareWarnings("warnings")


def leave_filters_alone() -> None:
    """Give Numba's type inference and compiler the thread-aware `warnings`."""
    from numba.core import compiler, errors

    for module in (errors, compiler):
        if getattr(module, "warnings", None) is warnings:
            setattr(module, "warnings", THREAD_AWARE_WARNINGS)  # noqa: B010 (mypy: untyped module)
