"""Pytrees: nested tuples, lists and dicts around array leaves.

Every front end (compile, grad, the loops, custom rules, vmap, distributed)
flattens its arguments and outputs with these functions, so they all agree on
what a leaf is and on how a structure is keyed.

    >>> leaves, tree = tree_flatten({"w": np.ones(2), "n": 3})
    >>> tree, len(leaves)
    ({'w': *, 'n': 3}, 1)
    >>> tree_unflatten(tree, [np.zeros(2)])
    {'w': array([0., 0.]), 'n': 3}
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from tracegrad.ops.core import ArgumentError


class TreeDef:
    """The structure of nested tuples/lists/dicts around array leaves.

    A leaf is kind "array" (becomes a graph input / output) or "static" (a
    Python scalar or other hashable value baked into the graph).
    """

    __slots__ = ("kind", "children", "keys", "static", "_hash")

    def __init__(self, kind: str, children=(), keys=None, static=None):
        self.kind = kind  # "array", "static", "tuple", "list", "dict"
        self.children = tuple(children)
        self.keys = keys
        self.static = static
        self._hash = hash((kind, self.children, keys, _static_key(static)))

    def __eq__(self, other):
        return (
            isinstance(other, TreeDef)
            and self.kind == other.kind
            and self.children == other.children
            and self.keys == other.keys
            and _static_key(self.static) == _static_key(other.static)
        )

    def __hash__(self):
        return self._hash

    @property
    def num_leaves(self) -> int:
        if self.kind == "array":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self):
        if self.kind == "array":
            return "*"
        if self.kind == "static":
            return repr(self.static)
        if self.kind == "dict":
            return (
                "{"
                + ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, self.children, strict=True))
                + "}"
            )
        body = ", ".join(map(repr, self.children))
        return f"[{body}]" if self.kind == "list" else f"({body})"


def _static_key(value):
    # Static values are compared by type and value (1 and 1.0 and True differ).
    return (type(value).__name__, static_scalar_key(value))


def static_scalar_key(value):
    """A float's key tells 0.0 from -0.0 (they compare equal) and makes every NaN
    equal to itself (NaN != NaN would retrace on every call)."""
    if type(value) is float and not (value == value and value):
        return repr(value)
    return value


def is_array_like_leaf(value: Any) -> bool:
    """Arrays, NumPy scalars, tracers, eager tensors: anything with a shape and a dtype.

    A tuple or list is never one leaf, also of numbers: it is a structure, as in JAX
    and HIPS autograd (`grad(lambda t: t[0] * t[1])((0.4, 0.5))` is the tuple
    `(0.5, 0.4)`). Its numbers are leaves of their own: static values in `compile`,
    arrays where they are differentiated."""
    if isinstance(value, (np.ndarray, np.generic)):
        return True
    if isinstance(value, (list, tuple)):
        return False
    return hasattr(value, "shape") and hasattr(value, "dtype")


def is_namedtuple(value) -> bool:
    """A namedtuple is a structure (its fields are children), never one array."""
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def tree_flatten(value: Any, arrays_only_scalars: bool = False) -> tuple[list, TreeDef]:
    """Leaves (in order) and structure. Python scalars are static leaves unless
    `arrays_only_scalars` makes them array leaves (gradient arguments)."""
    leaves: list = []
    treedef = _flatten(value, leaves, arrays_only_scalars)
    return leaves, treedef


def _flatten(value, leaves: list, scalars_are_arrays: bool) -> TreeDef:
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        # (a namedtuple keeps its class in `keys`: gradients come back as that class)
        return TreeDef(
            kind,
            [_flatten(v, leaves, scalars_are_arrays) for v in value],
            keys=type(value) if is_namedtuple(value) else None,
        )
    if isinstance(value, dict):
        keys = tuple(value)
        return TreeDef(
            "dict",
            [_flatten(value[k], leaves, scalars_are_arrays) for k in keys],
            keys=keys,
            static=_dict_class(value),
        )
    if is_array_like_leaf(value) or (
        scalars_are_arrays and type(value) in (int, float, bool, complex)
    ):
        leaves.append(value)
        return TreeDef("array")
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(
            f"cannot use a value of type {type(value).__name__} as an argument: "
            "arguments must be arrays, Python scalars, or tuples/lists/dicts "
            "of them"
        ) from None
    return TreeDef("static", static=value)


def tree_unflatten(treedef: TreeDef, leaves: Sequence) -> Any:
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(treedef: TreeDef, it):
    kind = treedef.kind
    if kind == "array":
        return next(it)
    if kind == "static":
        return treedef.static
    children = [_unflatten(c, it) for c in treedef.children]
    if kind == "tuple":
        return tuple(children) if treedef.keys is None else treedef.keys(*children)
    if kind == "list":
        return children
    items = list(zip(treedef.keys, children, strict=True))
    cls = treedef.static
    if cls is None:
        return dict(items)
    try:
        if isinstance(cls, tuple):  # (defaultdict, its default_factory)
            return cls[0](cls[1], items)
        return cls(items)
    except TypeError:  # a subclass whose constructor takes other arguments
        return dict(items)


def _dict_class(value: dict):
    """How to rebuild a dict subclass (OrderedDict, defaultdict: gradients came back as
    plain dicts), or None for a dict."""
    cls = type(value)
    if cls is dict:
        return None
    if isinstance(value, defaultdict):
        return (cls, value.default_factory)
    return cls


def leaf_paths(treedef: TreeDef, prefix: str) -> list[str]:
    """Readable names for the array leaves: `x`, `params['w']`, `xs[0]`."""
    if treedef.kind == "array":
        return [prefix]
    if treedef.kind == "static":
        return []
    out = []
    for i, child in enumerate(treedef.children):
        key = treedef.keys[i] if treedef.kind == "dict" else i
        out.extend(leaf_paths(child, f"{prefix}[{key!r}]"))
    return out


def identifier(path: str) -> str:
    """`params['w']` -> `params_w`: a name valid in generated Python source."""
    name = re.sub(r"\W+", "_", path).strip("_") or "arg"
    return name if not name[0].isdigit() else "_" + name
