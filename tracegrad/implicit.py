"""Arrays a compiled function reads from outside its arguments: implicit inputs.

A function may read arrays from its closure, from module globals, or from
attributes of an object it is bound to (`self.W`). tracegrad does not freeze
them at the first call: every array (or eager tensor) found that way becomes an
implicit input of the traced graph, read again on every call (as torch.compile
does with module parameters):

- an in-place change (`W -= lr * g`) is seen by the next call, with no retrace;
- rebinding (`W = new_array`) is seen too; a new shape or dtype retraces;
- a Python scalar, string or None found the same way (`scale = 0.5`,
  `mode = "train"`) is a static value: a new value retraces; so is a function it calls
  (`act = tg.tanh` or `np.tanh` rebound to `tg.sin` or `np.sin` retraces, by identity);
- an eager tensor that requires grad, read by `tg.compile(f)`, gets its `.grad`
  through the `CompiledFunctionBackward` node, like an argument.

`grad`/`value_and_grad` never differentiate implicit inputs (as in JAX, values
closed over are constants of the derivative); pass an array as an argument to
differentiate it.

Where they are looked for: the function's closure cells, the globals its code
names, and from there dicts, lists and tuples (six levels, as in
`params["encoder"]["layers"][0]["attn"]["W"]`), attributes named in the code of objects found (`self.W`,
also a class attribute or a __slots__ slot read through the instance, and what the
properties and methods called through `self` read), attributes a function keeps
on itself (`f.W`), default values of its arguments (`def f(x, W=W)`), bound
methods, `functools.partial`, the rules of a `custom_vjp`/`custom_jvp`, other
Python functions it calls (six levels), wrapped compiled functions, and
attributes of the user's own modules (`hparams.W`; not the standard library's or a
library's). Names built at run time (`getattr(self, name)`) are not followed: pass
such arrays as arguments. While the function is traced, each implicit array is
swapped for its tracer where it lives (cell, global, attribute, dict or list item) and restored
afterwards, so NumPy-side views such as `W.T` or `W[0]` are traced too. Other
compiled functions called from other threads meanwhile still read the real
value; plain Python code in another thread that reads the same global during
that trace sees the tracer and gets tracegrad's "escaped trace" error, never a
silently wrong value.

    >>> import numpy as np, tracegrad as tg
    >>> W = np.ones(3)
    >>> f = tg.grad(lambda x: tg.sum(W * x), backend="interpret")
    >>> f(np.ones(3))
    array([1., 1., 1.])
    >>> W *= 2
    >>> f(np.ones(3))
    array([2., 2., 2.])
"""

from __future__ import annotations

import functools
import os
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

_MAX_EXTERNALS = 1024
_MAX_FUNCTION_DEPTH = 6
_MAX_CONTAINER_DEPTH = 6  # params["encoder"]["layers"][0]["attn"]["W"]
_MAX_CONTAINER_ITEMS = 1024
_MAX_CONTAINER_VISITS = 20_000  # per search: a huge nested global costs no more than before


class External:
    """One place a function reads a value from: a root and a path of steps."""

    __slots__ = ("label", "root", "steps", "expect")

    def __init__(self, label: str, root: tuple, steps: tuple, expect: Any = None):
        self.label = label
        self.root = root  # ("arg", i) | ("cell", cell) | ("global", dict, name) | ("obj", obj)
        #                     | ("default", fn, i) | ("kwdefault", fn, name)
        self.steps = steps  # (("attr", name) | ("item", key) | ("type" | "structure", None), ...)
        self.expect = expect  # a "structure" step: the container's length or keys when found

    def read(self, args: tuple) -> Any:
        value = _root_value(self.root, args)
        for kind, key in self.steps:
            if kind == "type":  # the class of a callable object (its __call__'s code)
                value = type(value)
            elif kind == "structure":  # a list or dict whose arrays were found: if items
                # came or went since (`layers.append(W)`), look for the arrays again
                if _structure(value) != self.expect:
                    raise StaleExternal(f"{self.label} changed")
                return None
            else:
                value = _attribute(value, key) if kind == "attr" else value[key]
        return value

    def write(self, args: tuple, value: Any) -> bool:
        """Put `value` where this external lives; False if that place is read-only."""
        if not self.steps:
            kind = self.root[0]
            if kind == "cell":
                self.root[1].cell_contents = value
                return True
            if kind == "global":
                self.root[1][self.root[2]] = value
                return True
            if kind == "default":
                fn, i = self.root[1], self.root[2]
                defaults = fn.__defaults__
                fn.__defaults__ = defaults[:i] + (value,) + defaults[i + 1 :]
                return True
            if kind == "kwdefault":
                self.root[1].__kwdefaults__[self.root[2]] = value
                return True
            return False
        parent = _root_value(self.root, args)
        for kind, key in self.steps[:-1]:
            if kind in ("type", "structure"):
                return False
            parent = _attribute(parent, key) if kind == "attr" else parent[key]
        kind, key = self.steps[-1]
        if kind in ("type", "structure"):
            return False
        if kind == "attr":
            own = getattr(parent, "__dict__", None)
            if isinstance(parent, type):  # a class attribute, read through the class
                setattr(_owner(parent, key), key, value)
            elif own is not None and key in own:
                own[key] = value
            else:  # a slot, or a class attribute read through the instance
                owner = _defining_class(parent, key)
                if isinstance(owner.__dict__[key], types.MemberDescriptorType):
                    owner.__dict__[key].__set__(parent, value)
                else:
                    setattr(owner, key, value)
        elif isinstance(parent, (dict, list)):
            parent[key] = value
        else:
            return False
        return True

    def __repr__(self) -> str:
        return f"<External {self.label}>"


def _root_value(root: tuple, args: tuple) -> Any:
    kind = root[0]
    if kind == "arg":
        return args[root[1]]
    if kind == "cell":
        return root[1].cell_contents
    if kind == "global":
        return root[1][root[2]]
    if kind == "default":
        return root[1].__defaults__[root[2]]
    if kind == "kwdefault":
        return root[1].__kwdefaults__[root[2]]
    return root[1]


def _attribute(obj: Any, name: str) -> Any:
    """`obj.name` as the instance sees it, without running properties or descriptors:
    its own attribute or __slots__ slot, else the class attribute it inherits (`scale`
    set on the class). For a class, its (inherited) class attribute."""
    if isinstance(obj, type):
        return _owner(obj, name).__dict__[name]
    own = getattr(obj, "__dict__", None)
    if own is not None and name in own:
        return own[name]
    value = _defining_class(obj, name).__dict__[name]
    if isinstance(value, types.MemberDescriptorType):
        return value.__get__(obj, type(obj))
    return value


def _is_user_module(module: types.ModuleType) -> bool:
    """A module of the user's code: a file, not the standard library or a library."""
    top = module.__name__.split(".")[0]
    return (
        getattr(module, "__file__", None) is not None
        and top not in _LIBRARIES
        and top not in sys.stdlib_module_names
    )


def _is_user_class(value: Any) -> bool:
    """A class of the user's code (not a builtin, stdlib-typing or library class)."""
    if not isinstance(value, type):
        return False
    module = (value.__module__ or "").split(".")[0]
    return module not in _LIBRARIES + (
        "builtins",
        "abc",
        "typing",
        "enum",
        "collections",
        "types",
        "dataclasses",
    )


def _class_names(cls: type) -> set:
    names: set = set()
    for c in cls.__mro__[:-1]:  # (not object)
        names.update(c.__dict__.keys())
    return names


def _has_slots(obj: Any) -> bool:
    """A user's instance whose attributes live in __slots__ (not tracegrad's own)."""
    module = type(obj).__module__
    return (
        hasattr(type(obj), "__slots__")
        and module not in ("builtins", "numpy")
        and not module.startswith("tracegrad")
    )


def _defining_class(obj: Any, name: str) -> type:
    return _owner(type(obj), name)


def _owner(cls: type, name: str) -> type:
    """The class in `cls`'s method resolution order that defines `name`."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return c
    raise AttributeError(name)


class StaleExternal(Exception):
    """An external's path no longer resolves (a global was deleted, ...): rescan."""


def _structure(value: Any) -> Any:
    return tuple(value) if isinstance(value, dict) else len(value)


def read_all(externals: list[External], args: tuple) -> tuple:
    try:
        values = tuple(e.read(args) for e in externals)
    except StaleExternal:
        raise
    except (KeyError, IndexError, AttributeError, ValueError, TypeError) as exc:
        raise StaleExternal(str(exc)) from None
    if _SWAPPED:  # some thread is tracing with tracers swapped in
        values = tuple(_unswapped(v) for v in values)
    for v in values:
        # a place that held an array, scalar or function now holds a container
        # (a global rebound from 2 to (2, 1)): look for the externals again (they are
        # inside it now), never pass it on as one value
        if type(v) in _CONTAINER_TYPES:
            raise StaleExternal(f"an implicit input is now a {type(v).__name__}")
    return values


_CONTAINER_TYPES = frozenset({tuple, list, dict, set, frozenset, bytes})


# id(tracer) -> (tracer, the value it replaced) while a trace has it swapped in:
# another thread reading that place gets the real value, not a foreign tracer.
_SWAPPED: dict[int, tuple[Any, Any]] = {}


def _unswapped(value: Any) -> Any:
    hit = _SWAPPED.get(id(value))
    if hit is None or hit[0] is not value:
        return value
    from tracegrad.tracing import active_contexts

    return value if value.context in active_contexts() else hit[1]


def is_lifted_value(value: Any) -> bool:
    """Values read on every call: arrays, eager tensors, Python/NumPy scalars, strings
    and None."""
    if isinstance(value, (np.ndarray, np.generic)):
        return True
    if type(value) in (int, float, bool, str) or value is None:
        return True  # (static: a new value retraces; a str or None is not frozen either)
    return _is_eager_tensor(value)


def _is_mutable_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or _is_eager_tensor(value)


def _is_eager_tensor(value: Any) -> bool:
    return (
        type(value).__module__.startswith("tracegrad.eager")
        and hasattr(value, "requires_grad")
        and hasattr(value, "detach")
    )


def find_externals(fn: Callable, args: tuple) -> list[External]:
    """Every place `fn` reads an array or scalar from outside its arguments.

    `args` are the call's positional arguments: attributes of static objects
    among them (`self` of a method) are looked at too.
    """
    finder = _Finder()
    finder.function(fn, depth=0)
    names = finder.names_used
    for i, a in enumerate(args):
        if _is_plain_object(a):
            finder.attributes(a, ("arg", i), (), f"arg{i}", names, 0)
    return finder.found


class _Finder:
    def __init__(self):
        self.found: list[External] = []
        self.names_used: set[str] = set()
        self._seen_functions: set[int] = set()
        self._seen_places: set[tuple] = set()
        self._visits = 0  # container items looked at (bounded by _MAX_CONTAINER_VISITS)
        self._arrays = 0  # arrays (and eager tensors) found so far

    def add(self, label: str, root: tuple, steps: tuple) -> None:
        place = (root[0], id(root[1]), root[2] if len(root) > 2 else None, steps)
        if place in self._seen_places:
            return
        if len(self.found) >= _MAX_EXTERNALS:
            _warn_frozen(f"{label}: more than {_MAX_EXTERNALS} values read from outside")
            return
        self._seen_places.add(place)
        self.found.append(External(label, root, steps))

    def function(self, fn: Any, depth: int) -> None:
        if depth > _MAX_FUNCTION_DEPTH or id(fn) in self._seen_functions:
            return
        self._seen_functions.add(id(fn))
        wrapped = getattr(fn, "__wrapped__", None)
        if isinstance(fn, functools.partial):
            self.function(fn.func, depth + 1)
            for i, a in enumerate(fn.args):
                self.value(
                    a,
                    ("obj", fn.args),
                    (("item", i),),
                    f"partial arg {i}",
                    self.names_used,
                    0,
                    depth,
                )
            for k, a in fn.keywords.items():
                self.value(a, ("obj", fn.keywords), (("item", k),), k, self.names_used, 0, depth)
            return
        if isinstance(fn, types.MethodType):
            self.function(fn.__func__, depth + 1)
            owner = fn.__self__
            if _is_plain_object(owner):
                self.attributes(
                    owner,
                    ("obj", owner),
                    (),
                    type(owner).__name__.lower(),
                    _code_names(fn.__func__),
                    0,
                )
            return
        if not isinstance(fn, types.FunctionType):
            if _is_plain_object(fn) and _user_call(fn) is not None:  # tg.grad(model)
                self.attributes(fn, ("obj", fn), (), type(fn).__name__.lower(), set(), 0)
                return
            if wrapped is not None:  # a CompiledFunction or another wrapper
                self.function(wrapped, depth + 1)
            if type(fn).__module__ == "tracegrad.custom":  # custom_vjp / custom_jvp: the
                for rule in (
                    getattr(fn, "fwd", None),
                    getattr(fn, "bwd", None),  # rules too
                    getattr(fn, "jvp", None),
                ):
                    if rule is not None:
                        self.function(rule, depth + 1)
            inner = getattr(fn, "fn", None)
            if callable(inner) and wrapped is None:
                self.function(inner, depth + 1)
            return
        names = _code_names(fn)
        self.names_used |= names
        code = fn.__code__
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                continue
            self.value(value, ("cell", cell), (), name, names, 0, depth)
        # an array default (`def f(x, W=W)`, or `m=model` reading m.W) is one object
        # shared by every call: read it on every call too, or an in-place change of W
        # would meet a frozen copy (immutable scalar defaults need no reading)
        n_positional = code.co_argcount
        defaults = fn.__defaults__ or ()
        for i, value in enumerate(defaults):
            name = code.co_varnames[n_positional - len(defaults) + i]
            self.default(value, ("default", fn, i), name, names, depth)
        for name, value in (fn.__kwdefaults__ or {}).items():
            self.default(value, ("kwdefault", fn, name), name, names, depth)
        if _is_library(fn):  # tracegrad's own wrappers: only what they close over
            return
        for name in sorted(names & fn.__dict__.keys()):  # f.W: state kept on the function
            self.value(
                fn.__dict__[name],
                ("obj", fn),
                (("attr", name),),
                f"{fn.__name__}.{name}",
                names,
                0,
                depth,
            )
        g = fn.__globals__
        for name in sorted(names):
            if name in g:
                self.value(g[name], ("global", g, name), (), name, names, 0, depth)
        if wrapped is not None:
            self.function(wrapped, depth + 1)

    def default(self, value, root, label, names, depth) -> None:
        if _is_mutable_array(value):
            self.add(label, root, ())
        elif type(value) in (dict, list, tuple) or _is_plain_object(value):
            self.value(value, root, (), label, names, 0, depth)

    def value(self, value, root, steps, label, names, level, depth) -> None:
        if is_lifted_value(value):
            self.add(label, root, steps)
            self._arrays += _is_mutable_array(value)
        elif isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) or (
            getattr(value, "__wrapped__", None) is not None and callable(value)
        ):
            if not isinstance(value, types.MethodType):
                self.add(label, root, steps)  # rebinding a helper function retraces
                # (a bound method is new on each access); a library function's place too:
                # `act = np.tanh` rebound to `tg.sin` (or a loop's `for f in (...)`)
                # gave the first function's derivative
            self.function(value, depth + 1)
        elif (
            isinstance(value, (np.ufunc, types.BuiltinFunctionType))
            or (callable(value) and not isinstance(value, type) and _is_library(value))
        ) and _hashable(value):  # np.sin, math.exp, np.sum (a dispatcher): by identity
            self.add(label, root, steps)
        elif level < _MAX_CONTAINER_DEPTH and self._visits < _MAX_CONTAINER_VISITS:
            # (subclasses too: OrderedDict, defaultdict, namedtuples)
            if isinstance(value, (dict, list, tuple)):
                self._visits += min(len(value), _MAX_CONTAINER_ITEMS)
            before = self._arrays
            if isinstance(value, (dict, list, tuple)) and len(value) > _MAX_CONTAINER_ITEMS:
                rest = list(value.values() if isinstance(value, dict) else value)
                if any(_is_mutable_array(v) for v in rest[_MAX_CONTAINER_ITEMS:]):
                    _warn_frozen(f"{label} holds more than {_MAX_CONTAINER_ITEMS} items")
            if isinstance(value, dict):
                for k in list(value)[:_MAX_CONTAINER_ITEMS]:
                    self.value(
                        value[k],
                        root,
                        steps + (("item", k),),
                        f"{label}[{k!r}]",
                        names,
                        level + 1,
                        depth,
                    )
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value[:_MAX_CONTAINER_ITEMS]):
                    self.value(
                        v, root, steps + (("item", i),), f"{label}[{i}]", names, level + 1, depth
                    )
            self.container(value, root, steps, label, before)
            if isinstance(value, (dict, list, tuple)):
                return
            if _is_plain_object(value):
                self.attributes(value, root, steps, label, names, level + 1)
            elif isinstance(value, types.ModuleType):  # hparams.W of the user's own module
                if _is_user_module(value) and ("module", id(value)) not in self._seen_places:
                    self._seen_places.add(("module", id(value)))
                    space = vars(value)
                    for name in sorted(names & space.keys()):
                        self.value(
                            space[name],
                            ("global", space, name),
                            (),
                            f"{value.__name__}.{name}",
                            names,
                            level + 1,
                            depth,
                        )
            elif _is_user_class(value):  # a class used as a namespace: Config.W
                for name in sorted(names & _class_names(value)):
                    self.value(
                        _attribute(value, name),
                        root,
                        steps + (("attr", name),),
                        f"{label}.{name}",
                        names,
                        level + 1,
                        depth,
                    )

    def container(self, value, root, steps, label, before: int) -> None:
        """A list or dict in which arrays were found: its items may come and go
        (`layers.append(W)`); a change is seen, and the arrays looked for again. (Not
        for a list of other values: a log the function appends to while traced would
        make every call look again.)"""
        if (
            isinstance(value, (dict, list))
            and before < self._arrays
            and len(self.found) < (_MAX_EXTERNALS)
        ):
            expect = _structure(value)
            self.found.append(
                External(f"{label} (items)", root, steps + (("structure", None),), expect)
            )

    def attributes(self, obj, root, steps, label, names, level) -> None:
        call = _user_call(obj)
        if call is not None:  # `model(x)`: what its __call__ reads through self, and its
            # class (another class's __call__ is other code: a new class retraces)
            self.add(f"type({label})", root, steps + (("type", None),))
            self.method(obj, call, root, steps, label, level)
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            if not _has_slots(obj):
                return
            attrs = {}
        for name in sorted(names & attrs.keys()):
            self.value(
                attrs[name],
                root,
                steps + (("attr", name),),
                f"{label}.{name}",
                names,
                level,
                _MAX_FUNCTION_DEPTH,
            )
        # names the instance does not hold itself: its class's
        for name in sorted(names - attrs.keys()):
            try:
                raw = _defining_class(obj, name).__dict__[name]
            except AttributeError:
                continue
            if isinstance(raw, types.MemberDescriptorType):  # a __slots__ slot
                try:
                    value = _attribute(obj, name)
                except AttributeError:  # (not set yet)
                    continue
                self.value(
                    value,
                    root,
                    steps + (("attr", name),),
                    f"{label}.{name}",
                    names,
                    level,
                    _MAX_FUNCTION_DEPTH,
                )
            elif is_lifted_value(raw):  # `scale` set on the class, read as self.scale
                self.value(
                    raw,
                    root,
                    steps + (("attr", name),),
                    f"{label}.{name}",
                    names,
                    level,
                    _MAX_FUNCTION_DEPTH,
                )
            else:  # a method or property it calls: what that reads, through self too
                if isinstance(raw, types.FunctionType) and not _is_library(raw):
                    # and the method itself, read from the class: a method replaced on
                    # the class (or an object of another class) runs other code
                    self.add(f"{label}.{name}", root, steps + (("type", None), ("attr", name)))
                self.method(obj, raw, root, steps, label, level)

    def method(self, obj, raw, root, steps, label, level) -> None:
        """A method, property, staticmethod or classmethod read through `obj`: its
        closure and globals, and the attributes of `obj` its code reads."""
        if isinstance(raw, property):
            raw = raw.fget
        elif isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if not isinstance(raw, types.FunctionType) or _is_library(raw):
            return
        key = ("method", id(obj), id(raw), root[0], id(root[1]), steps)
        if key in self._seen_places:
            return
        self._seen_places.add(key)
        self.function(raw, _MAX_FUNCTION_DEPTH)
        self.attributes(obj, root, steps, label, _code_names(raw), level)


_TRACEGRAD_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARIES = (
    "tracegrad",
    "numpy",
    "scipy",
    "numba",
    "torch",
    "jax",
    "jaxlib",
    "autograd",
    "functools",
)


_WARNED_FROZEN: set = set()


def _warn_frozen(what: str) -> None:
    """Arrays beyond the search's limits are constants of the graph: an update of them
    is not seen. Never silently: once per place."""
    if what in _WARNED_FROZEN:
        return
    _WARNED_FROZEN.add(what)
    warnings.warn(
        f"tracegrad: {what}; arrays beyond are frozen into the compiled function at its "
        "first call (later changes are not seen). Pass them as arguments.",
        RuntimeWarning,
        stacklevel=5,
    )


def _user_call(obj: Any):
    """The __call__ function of a user's class that `obj` is an instance of, or None."""
    cls = type(obj)
    try:
        raw = _owner(cls, "__call__").__dict__["__call__"]
    except AttributeError:
        return None
    if not isinstance(raw, types.FunctionType) or _is_library(raw):
        return None
    return raw


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _is_library(fn) -> bool:
    """Library code (tracegrad's own wrappers, NumPy...): its globals are not the
    user's state, and it is not rebound between calls."""
    module = (getattr(fn, "__module__", None) or "").split(".")[0]
    if module != "tracegrad":
        return module in _LIBRARIES
    code = getattr(fn, "__code__", None)  # (doctests run in tracegrad's namespaces)
    return code is not None and code.co_filename.startswith(_TRACEGRAD_DIR)


def _code_names(fn) -> set[str]:
    """Global and attribute names the function's code (and nested code) uses."""
    names: set[str] = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _is_plain_object(value: Any) -> bool:
    """An instance whose attributes may hold parameters (not a module, class,
    function, array, or builtin value)."""
    if (
        isinstance(
            value,
            (
                types.ModuleType,
                type,
                types.FunctionType,
                types.MethodType,
                types.BuiltinFunctionType,
                functools.partial,
                np.ndarray,
                np.generic,
                str,
                bytes,
                int,
                float,
                bool,
                complex,
            ),
        )
        or value is None
    ):
        return False
    if (
        type(value).__module__ in ("builtins", "numpy")
        or _is_eager_tensor(value)
        or _is_eager_state(value)
    ):
        return False
    return isinstance(getattr(value, "__dict__", None), dict) or _has_slots(value)


def _is_eager_state(value: Any) -> bool:
    """An nn.Module or optimizer: tracegrad.capture reads its tensors and guards its
    attributes itself (here, `opt.step` would be a new bound method every call)."""
    for name, cls in (
        ("tracegrad.eager.nn.modules", "Module"),
        ("tracegrad.eager.optim", "Optimizer"),
    ):
        module = sys.modules.get(name)
        if module is not None and isinstance(value, getattr(module, cls)):
            return True
    return False


@contextmanager
def swapped_in(
    externals: list[External], args: tuple, values: tuple, originals: tuple
) -> Iterator[None]:
    """While tracing: each external array that now has a tracer lives as that
    tracer in its place; restored afterwards, also on errors."""
    done = []
    try:
        for ext, value, original in zip(externals, values, originals, strict=True):
            if value is original:  # static scalars pass through unchanged
                continue
            try:
                if ext.read(args) is original and ext.write(args, value):
                    done.append((ext, value, original))
                    _SWAPPED[id(value)] = (value, original)
            except Exception:  # an unusual container: the tracer is used where passed
                continue
        yield
    finally:
        for ext, value, original in reversed(done):
            ext.write(args, original)
            _SWAPPED.pop(id(value), None)
