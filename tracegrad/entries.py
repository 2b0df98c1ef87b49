"""The one cache of a compiled function: signature -> entry, plus shortcuts to it.

Every signature a `CompiledFunction` has compiled owns one entry in
`EntryCache.by_signature`, whatever the caller passed:

- plain arrays and pytrees of them (`compile`, `grad`, `value_and_grad`): key
  `_Signature.key()`;
- eager tensors and PyTorch-style code (`tracegrad.capture`): key
  `("capture", ...)`, entry a list of captured entries, each with its guards;
- tracers of an enclosing trace (grad of grad): key `(TRACED, ...)`, entry the
  joint graph to inline.

Finding an entry by its signature means flattening the arguments and reading
their avals: microseconds. So a call whose arguments a cheaper key describes
fully remembers a *shortcut*, that key mapped to what to call. Shortcuts are only
a memo of the signature map: dropping an entry drops them all.

    >>> import numpy as np, tracegrad as tg
    >>> f = tg.compile(lambda x: x + 1.0, backend="interpret")
    >>> _ = f(np.ones(2)); _ = f(np.ones(2)); _ = f(np.ones(3))
    >>> len(f.entries), f.cache_info()
    (2, CacheInfo(traces=2, hits=1))
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

# Shortcut kinds. Plain-array keys (the hot path) are stored bare: they are flat
# tuples of shapes, types and values, never starting with one of these strings.
ARRAYS, TREE, EAGER = "arrays", "tree", "eager"
# Signature-key kinds other than plain arrays.
TRACED = "traced"

MAX_SHORTCUTS = 1024


class EntryCache:
    """Signature key -> entry (at most `max_entries`, oldest dropped first), the
    shortcuts to them, and the counts `cache_info` reports."""

    __slots__ = (
        "by_signature",
        "shortcuts",
        "shortcut_kinds",
        "max_entries",
        "signatures",
        "traces",
        "hits",
        "warned",
    )

    def __init__(self, max_entries: int):
        self.by_signature: dict[Hashable, Any] = {}
        self.shortcuts: dict[Hashable, Any] = {}  # the hot path holds this dict: never rebound
        self.shortcut_kinds: set[str] = set()
        self.max_entries = max_entries
        self.signatures: list[Any] = []  # in the order traced, for retrace reports
        self.traces = 0
        self.hits = 0
        self.warned = False

    # ---- the signature map
    def get(self, key: Hashable) -> Any:
        return self.by_signature.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.by_signature

    def __len__(self) -> int:
        return len(self.by_signature)

    def values(self) -> Iterator[Any]:
        return iter(list(self.by_signature.values()))

    def add(self, key: Hashable, entry: Any) -> Any:
        """Keep `entry` for `key`; returns the entry dropped to make room, if any
        (every shortcut goes with it, since some may lead there)."""
        self.by_signature[key] = entry
        if len(self.by_signature) <= self.max_entries:
            return None
        dropped = self.by_signature.pop(next(iter(self.by_signature)))
        self.drop_shortcuts()
        return dropped

    def replace(self, key: Hashable, old: Any, new: Any) -> None:
        """Put `new` in `old`'s place, if `old` still holds `key`."""
        if self.by_signature.get(key) is old:
            self.by_signature[key] = new

    # ---- shortcuts
    def shortcut(self, kind: str, key: Hashable) -> Any:
        """What `remember` stored for this cheap key, or None."""
        if kind not in self.shortcut_kinds:
            return None
        return self.shortcuts.get(key if kind == ARRAYS else (kind, key))

    def remember(self, kind: str, key: Hashable, value: Any) -> None:
        if len(self.shortcuts) >= MAX_SHORTCUTS:
            return  # a new layout every call: the signature map still answers
        self.shortcuts[key if kind == ARRAYS else (kind, key)] = value
        self.shortcut_kinds.add(kind)

    def drop_shortcuts(self) -> None:
        self.shortcuts.clear()
        self.shortcut_kinds.clear()

    # ---- counts
    def note_trace(self, signature: Any) -> int:
        """Count a newly traced signature; returns how many there have been."""
        self.traces += 1
        self.signatures.append(signature)
        return len(self.signatures)

    def clear(self, on_drop: Callable[[Any], None] = lambda entry: None) -> None:
        for entry in self.by_signature.values():
            on_drop(entry)
        self.by_signature.clear()
        self.drop_shortcuts()
        self.signatures.clear()
        self.traces = self.hits = 0
        self.warned = False
