"""Hook handles: `handle = t.register_hook(fn)`; `handle.remove()`."""

from __future__ import annotations

import itertools
from collections.abc import Callable

_ids = itertools.count()


class RemovableHandle:
    """Removes its hook from the dict that holds it."""

    __slots__ = ("_hooks", "id")

    def __init__(self, hooks: dict, hook_id: int):
        self._hooks = hooks
        self.id = hook_id

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def add_hook(hooks: dict, fn: Callable, node_level: bool = False) -> RemovableHandle:
    if not callable(fn):
        raise TypeError(f"register_hook expects a callable, got {type(fn).__name__}")
    hook_id = next(_ids)
    hooks[hook_id] = fn
    return RemovableHandle(hooks, hook_id)
