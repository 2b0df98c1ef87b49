"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode.

Each works as a context manager and as a decorator, like PyTorch's. The state
is per thread, as in PyTorch.

    >>> import tracegrad.eager as torch
    >>> x = torch.ones(2, requires_grad=True)
    >>> with torch.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any


class _State(threading.local):
    grad_enabled = True
    inference = False
    anomaly = False
    anomaly_check_nan = True
    anomaly_parent = None  # in anomaly mode, the backward node now running (nodes it makes)
    # per running backward (innermost last): the lists queue_callback appends to
    final_callbacks: list | None = None
    ckpt = None  # the innermost non-reentrant checkpoint frame recording nodes, if any
    partial_backward = False  # the running backward is autograd.grad / backward(inputs=...)


STATE = _State()


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are being recorded."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _DecoratorContextManager:
    """Base: instances are context managers and decorators; `@no_grad` without
    parentheses works too (as in PyTorch 2)."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], bool):
            return cls()(args[0])  # used as a bare decorator
        return super().__new__(cls)

    def __call__(self, fn: Callable) -> Callable:
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(self.clone, fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return self.__class__()


def _wrap_generator(ctx_factory: Callable, fn: Callable) -> Callable:
    """A generator function whose body runs in the mode at every resumption, and the
    caller's mode between them (PyTorch's torch.utils._contextlib._wrap_generator)."""

    @functools.wraps(fn)
    def generator_context(*args: Any, **kwargs: Any):
        gen = fn(*args, **kwargs)
        try:
            with ctx_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException:
                    with ctx_factory():
                        response = gen.throw(*sys.exc_info())
                else:
                    with ctx_factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context


class no_grad(_DecoratorContextManager):
    """Disable recording: results of ops do not require grad."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class enable_grad(_DecoratorContextManager):
    """Re-enable recording inside a no_grad region."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class set_grad_enabled(_DecoratorContextManager):
    """Set recording on or off. Takes effect immediately (like PyTorch) and is
    restored on leaving the `with` block."""

    def __init__(self, mode: bool):
        self._prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def clone(self):
        return self.__class__(self.mode)

    def __call__(self, fn: Callable) -> Callable:
        STATE.grad_enabled = self._prev  # as a decorator it must not change the mode now
        return super().__call__(fn)


class inference_mode(_DecoratorContextManager):
    """Like no_grad, and tensors made inside are inference tensors: they can
    never be saved for backward later."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = (STATE.grad_enabled, STATE.inference)
        if self.mode:
            STATE.grad_enabled = False
            STATE.inference = True
        else:
            STATE.inference = False

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self._prev
        return False

    def clone(self):
        return self.__class__(self.mode)
