"""Custom derivative rules with JAX's decorator API: `custom_vjp` and `custom_jvp`.

    @tg.custom_vjp
    def clip_gradient(x):
        return x
    def fwd(x):
        return x, None                  # (output, residuals)
    def bwd(res, g):
        return (tg.clip(g, -1.0, 1.0),)  # one cotangent per argument
    clip_gradient.defvjp(fwd, bwd)

While tracing, a call becomes one `custom_vjp_call` node holding three traced
sub-graphs (the function, `fwd`, `bwd`; tracegrad/loops/primitives.py). Reverse mode
uses the rule instead of differentiating the function; Numba kernels run the
sub-graphs like other nodes without a template. On plain arrays the function
simply runs; on eager tensors the call is compiled (`tg.compile`), so eager
backward also uses the rule, through one `CompiledFunctionBackward` node.

`custom_jvp` takes JAX's `defjvp` rule `(primals, tangents) -> (out, tangent_out)`:
forward mode (`tg.jvp`, `tg.jacfwd`) calls the rule itself, and reverse mode
transposes it (it must be linear in the tangents, as JAX requires). Forward mode
through a `custom_vjp` function transposes its `bwd` (JAX refuses it).

    >>> import numpy as np, tracegrad as tg
    >>> @tg.custom_jvp
    ... def f(x):
    ...     return tg.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return tg.sin(x), 2.0 * t        # a deliberately different derivative
    >>> float(tg.grad(f, backend="interpret")(0.3))
    2.0

`nondiff_argnums` arguments are static (Python values, part of the cache key)
and are passed first to `bwd` and to the jvp rule, as in JAX.

Arrays that a custom function or its rule (`fwd`/`bwd`, the jvp rule) read from a
closure or a global are constants, as in JAX: they become extra operands of the
node (read on every call, like every implicit input; see tracegrad.implicit),
`fwd` hands them to `bwd` as residuals, and their cotangent and tangent are zero.
A value computed from them only (`2.0 * W`) counts as one. Closing over another
traced value (an argument of an enclosing traced function, a vmapped value) is an
error: the rule could not give it a cotangent (JAX allows a vmapped one).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad.loops.primitives import ControlFlowError, custom_vjp_p, unpack
from tracegrad.ops import api
from tracegrad.ops.core import Aval
from tracegrad.tracing import (
    Tracer,
    TreeDef,
    abstract_leaf,
    active_contexts,
    trace_subgraph,
    tree_flatten,
    tree_unflatten,
)


class CustomRuleError(ControlFlowError):
    """A custom rule that does not fit its function (structure, shapes, closures)."""


def _leaves(tree):
    return tree_flatten(tree, arrays_only_scalars=True)


def _is_eager(value) -> bool:
    return type(value).__module__.startswith("tracegrad.eager") and hasattr(value, "requires_grad")


def _args_flat(args: tuple):
    """Leaves and structure of a tuple of arguments, one child per argument (a tuple
    of Python floats is several arguments, not one array leaf)."""
    leaves, trees = [], []
    for a in args:
        sub, t = _leaves(a)
        leaves.extend(sub)
        trees.append(t)
    return leaves, TreeDef("tuple", trees)


def _is_constant(tracer: Tracer) -> bool:
    """Whether an outer tracer is computed from arrays read from closures or globals
    only (implicit inputs, and constants): a constant of every derivative, as JAX's
    closed-over constants. (`2.0 * W` is recorded in the trace that owns `W`, so a rule
    reading it captures the product, not `W`.)"""
    implicit = {
        id(hit[1].node) for context in active_contexts() for hit in context._substitutes.values()
    }
    stack, seen = [tracer.node], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "input" and id(node) not in implicit:
            return False
        stack.extend(node.inputs)
    return True


def _trace(
    fn: Callable, in_tree: TreeDef, avals: list, name: str, what: str, found: list | None = None
):
    """`fn` traced into a graph of its own. Closed-over constants it reads (outer
    values computed from implicit inputs only) are added to `found` (the caller
    passes them in as explicit inputs and traces again, see _read_as); any other
    closed-over traced value is an error."""
    graph, out_tree, captures = trace_subgraph(fn, in_tree, avals, name)
    for captured in captures:
        if found is None or not _is_constant(captured):
            raise CustomRuleError(
                f"{what} closes over a traced value ({captured.node.type_str()}); pass "
                "it as an argument instead (or through nondiff_argnums), as JAX requires"
            )
        if all(_value_key(captured.node) != _value_key(f.node) for f in found):
            found.append(captured)
    return graph, out_tree


def _read_as(closed: Sequence[Tracer], inputs: Sequence[Tracer]) -> None:
    """Inside a rule being traced: reads of the outer tracers `closed` (closed-over
    constants) become this graph's explicit `inputs`, not captures. A constant
    recomputed in the outer trace (`2.0 * W` again: a new node) is matched by what
    it computes (_value_key), so tracing the rule again finds nothing new."""
    context = active_contexts()[-1]
    by_value = {
        _value_key(outer.node): inner.node for outer, inner in zip(closed, inputs, strict=True)
    }
    capture = context.capture

    def capture_closed(outer: Tracer) -> Tracer:
        node = by_value.get(_value_key(outer.node))
        return Tracer(context, node) if node is not None else capture(outer)

    context.capture = capture_closed  # this rule's own trace only


def _value_key(root) -> tuple:
    """What an outer node computes: inputs by identity, constants by value, other
    nodes by op, attributes and operands (equal keys: the same value). Iterative: a
    constant may hang off a long chain of nodes."""
    keys: dict[int, tuple] = {}
    stack = [root]
    while stack:
        node = stack[-1]
        if id(node) in keys:
            stack.pop()
            continue
        if node.op == "input":
            keys[id(node)] = ("input", id(node))
        elif node.op == "const":
            value = np.asarray(node.attrs["value"])
            keys[id(node)] = ("const", value.dtype.str, value.shape, value.tobytes())
        else:
            pending = [i for i in node.inputs if id(i) not in keys]
            if pending:
                stack.extend(pending)
                continue
            keys[id(node)] = (
                node.op,
                repr(sorted(node.attrs.items(), key=lambda kv: kv[0])),
                tuple(keys[id(i)] for i in node.inputs),
            )
        stack.pop()
    return keys[id(root)]


def _closed_tree(closed: Sequence) -> TreeDef:
    return TreeDef("tuple", [TreeDef("array")] * len(closed))


class _CustomBase:
    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(int(i) for i in nondiff_argnums))
        self._building = threading.local()  # tracing this function's own rule

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """Keyword arguments and defaults bound to the function's signature and passed
        by position, so the rule sees every argument (JAX's resolve_kwargs)."""
        signature = self._signature()
        if signature is None:  # a builtin: positional only
            if kwargs:
                raise TypeError(
                    f"{getattr(self.fun, '__name__', 'f')}: keyword arguments "
                    "need a function with a Python signature"
                )
            return args
        if not kwargs and not self._has_defaults:
            return args  # the common case: nothing to bind
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError(
                f"{getattr(self.fun, '__name__', 'f')}: keyword-only arguments "
                f"{sorted(bound.kwargs)} are not supported by custom rules; pass "
                "them by position"
            )
        return bound.args

    def _signature(self):
        if not hasattr(self, "_signature_cache"):
            import inspect

            try:
                self._signature_cache = inspect.signature(self.fun)
            except (TypeError, ValueError):
                self._signature_cache = None
            self._has_defaults = self._signature_cache is not None and any(
                p.default is not p.empty for p in self._signature_cache.parameters.values()
            )
        return self._signature_cache

    def _split(self, args: tuple):
        static = {i: args[i] for i in self.nondiff_argnums}
        diff = tuple(a for i, a in enumerate(args) if i not in static)
        return static, diff

    def _merge(self, static: dict, diff: Sequence) -> tuple:
        it = iter(diff)
        return tuple(static[i] if i in static else next(it) for i in range(len(static) + len(diff)))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._check_defined()
        args = self._positional(args, kwargs)
        if getattr(self._building, "active", False):
            return self.fun(*args)  # the rule calling the function itself (`f(x), x` in fwd)
        static, diff = self._split(args)
        leaves, tree = _args_flat(diff)
        if not active_contexts() and not any(isinstance(v, Tracer) for v in leaves):
            if any(_is_eager(v) for v in leaves):  # eager tensors: compiled, rule used
                from tracegrad.compiler import compile as tg_compile

                return tg_compile(lambda *a: self(*a))(*args)
            return self.fun(*args)
        leaves = [np.asarray(v) if type(v) in (int, float, bool) else v for v in leaves]
        avals = [abstract_leaf(v) for v in leaves]
        name = getattr(self.fun, "__name__", "f").strip("<>")
        closed: list[Tracer] = []  # closed-over constants the three graphs read
        for _ in range(3):  # a second pass sees every constant; a third never adds one
            found = list(closed)
            fun_graph, out_tree, fwd_graph, bwd_graph = self._graphs(
                static, tree, avals, name, closed, found
            )
            if len(found) == len(closed):
                break
            closed = found  # trace again with them as explicit inputs
        else:
            raise CustomRuleError(
                f"{name}: the closed-over values its rule reads changed "
                "between traces; pass them as arguments instead"
            )
        packed = custom_vjp_p(
            *leaves,
            *closed,
            fun=fun_graph,
            fwd=fwd_graph,
            bwd=bwd_graph,
            n_out=len(fun_graph.outputs),
        )
        return tree_unflatten(out_tree, unpack(packed, [n.aval for n in fun_graph.outputs]))

    def _graphs(
        self, static: dict, tree: TreeDef, avals: list, name: str, closed: list, found: list
    ):
        """The function's and its rule's graphs; `closed` (outer implicit inputs) are
        the function's last operands, and `fwd` passes them on to `bwd` as residuals."""

        def fun(*d):
            if closed:
                *d, closed_inputs = d
                _read_as(closed, closed_inputs)
            return self.fun(*self._merge(static, d))

        in_tree = TreeDef("tuple", list(tree.children) + [_closed_tree(closed)]) if closed else tree
        in_avals = avals + [c.aval for c in closed]
        fun_graph, out_tree = _trace(fun, in_tree, in_avals, name, name, found)
        self._building.active = True
        try:
            fwd_graph, bwd_graph = self._rule_graphs(
                static, tree, avals, fun_graph, out_tree, name, closed, found
            )
        finally:
            self._building.active = False
        return fun_graph, out_tree, fwd_graph, bwd_graph


class custom_vjp(_CustomBase):
    """JAX's `custom_vjp`: `f.defvjp(fwd, bwd)`, with `fwd(*args) -> (out, residuals)`
    and `bwd(*nondiff, residuals, g) -> one cotangent (or None) per argument`.

    >>> import numpy as np, tracegrad as tg
    >>> @tg.custom_vjp
    ... def f(x):
    ...     return x ** 2
    >>> f.defvjp(lambda x: (x ** 2, x), lambda x, g: (10.0 * g,))
    >>> float(tg.grad(f, backend="interpret")(3.0))
    10.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd, self.bwd = fwd, bwd

    def _check_defined(self) -> None:
        if self.fwd is None:
            raise AttributeError(
                f"No VJP defined for custom_vjp function "
                f"{getattr(self.fun, '__name__', 'f')} using defvjp."
            )

    def _rule_graphs(self, static, tree, avals, fun_graph, out_tree, name, closed, found):
        def fwd(*d):
            if not closed:
                return self.fwd(*self._merge(static, d))
            *d, closed_inputs = d
            _read_as(closed, closed_inputs)
            result = self.fwd(*self._merge(static, d))
            if isinstance(result, (tuple, list)) and len(result) == 2:  # else: error below
                return result[0], (result[1], closed_inputs)  # bwd reads them as residuals
            return result

        in_tree = TreeDef("tuple", list(tree.children) + [_closed_tree(closed)]) if closed else tree
        fwd_graph, fwd_tree = _trace(
            fwd, in_tree, avals + [c.aval for c in closed], f"{name}_fwd", "fwd", found
        )
        if fwd_tree.kind not in ("tuple", "list") or len(fwd_tree.children) != 2:
            raise CustomRuleError(
                f"custom_vjp fwd of {name} must return a pair (output, "
                f"residuals), got structure {fwd_tree}"
            )
        n_out = len(fun_graph.outputs)
        fwd_out = [n.aval for n in fwd_graph.outputs[:n_out]]
        if fwd_tree.children[0] != out_tree or fwd_out != [n.aval for n in fun_graph.outputs]:
            raise CustomRuleError(
                f"custom_vjp fwd of {name} must return the same output as the function: "
                f"{out_tree} of {[str(a) for a in (n.aval for n in fun_graph.outputs)]}, got "
                f"{fwd_tree.children[0]} of {[str(a) for a in fwd_out]}"
            )
        res_tree = fwd_tree.children[1]
        res_avals = [n.aval for n in fwd_graph.outputs[n_out:]]
        out_avals = [n.aval for n in fun_graph.outputs]
        arg_trees = tree.children

        def bwd_flat(res, g):
            statics = [static[i] for i in sorted(static)]
            cts = self.bwd(*statics, res, g)
            if not isinstance(cts, (tuple, list)) or len(cts) != len(arg_trees):
                raise CustomRuleError(
                    f"custom_vjp bwd of {name} must return a tuple with one cotangent per "
                    f"differentiable argument ({len(arg_trees)}), got "
                    + (
                        f"a {type(cts).__name__} of length {len(cts)}"
                        if isinstance(cts, (tuple, list))
                        else f"a {type(cts).__name__}"
                    )
                )
            flat = []
            k = 0
            for ct, arg_tree in zip(cts, arg_trees, strict=True):
                n = arg_tree.num_leaves
                want = avals[k : k + n]
                got = [None] * n if ct is None else _leaves(ct)[0]
                if len(got) != n:
                    raise CustomRuleError(
                        f"custom_vjp bwd of {name}: a cotangent has structure "
                        f"{_leaves(ct)[1]}, its argument {arg_tree}"
                    )
                for v, a in zip(got, want, strict=True):
                    flat.append(_fit(v, a, name))
                k += n
            return flat

        def bwd(res, g):
            if not closed:
                return bwd_flat(res, g)
            res, closed_inputs = res
            _read_as(closed, closed_inputs)
            # closed-over values are constants: zero cotangents (as in JAX)
            return bwd_flat(res, g) + [api.zeros_like(c) for c in closed_inputs]

        bwd_graph, _ = _trace(
            bwd,
            TreeDef("tuple", [res_tree, out_tree]),
            res_avals + out_avals,
            f"{name}_bwd",
            "bwd",
            found,
        )
        return fwd_graph, bwd_graph


def _fit(
    v,
    aval: Aval,
    name: str,
    role: str = "custom_vjp bwd of {name} returned a "
    "cotangent of shape {got} for an argument of shape {want}",
):
    """A cotangent (or a jvp rule's output) as its argument's shape and dtype (None:
    zeros); `role` words the error."""
    if v is None:
        return api.zeros_like(np.zeros(aval.shape, aval.dtype))
    if tuple(np.shape(v)) != tuple(aval.shape):
        if np.shape(v) == ():
            v = api.broadcast_to(v, aval.shape)
        else:
            raise CustomRuleError(role.format(name=name, got=np.shape(v), want=aval.shape))
    dtype = v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype
    return api.astype(v, aval.dtype) if np.dtype(dtype) != np.dtype(aval.dtype) else v


class custom_jvp(_CustomBase):
    """JAX's `custom_jvp`: `@f.defjvp` with `rule(*nondiff, primals, tangents) ->
    (out, tangent_out)`; reverse mode transposes the rule (see the module doc)."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp: Callable) -> Callable:
        self.jvp = jvp
        return jvp

    def _check_defined(self) -> None:
        if self.jvp is None:
            raise AttributeError(
                f"No JVP defined for custom_jvp function "
                f"{getattr(self.fun, '__name__', 'f')} using defjvp."
            )

    def _rule_graphs(self, static, tree, avals, fun_graph, out_tree, name, closed, found):
        from tracegrad.compiler import grad

        statics = [static[i] for i in sorted(static)]
        with_closed = TreeDef("tuple", list(tree.children) + [_closed_tree(closed)])
        closed_avals = [c.aval for c in closed]

        def fwd_flat(*diff):
            if not closed:
                return self.fun(*self._merge(static, diff)), diff
            *diff, closed_inputs = diff
            _read_as(closed, closed_inputs)
            return self.fun(*self._merge(static, diff)), (tuple(diff), closed_inputs)

        fwd_graph, _ = _trace(
            fwd_flat,
            with_closed if closed else tree,
            avals + closed_avals,
            f"{name}_fwd",
            "fun",
            found,
        )

        def bwd_flat(primals, g):
            if closed:
                primals, closed_inputs = primals
                _read_as(closed, closed_inputs)

            def pairing(*tangents):
                _, tangent_out = _split_rule_result(
                    self.jvp(*statics, tuple(primals), tuple(tangents)), name
                )
                total = None
                for t, c in zip(_leaves(tangent_out)[0], _leaves(g)[0], strict=True):
                    term = api.sum(t * c)
                    total = term if total is None else total + term
                return total

            zeros = [
                tree_unflatten(t, [api.zeros_like(v) for v in _leaves(p)[0]])
                for p, t in zip(primals, tree.children, strict=True)
            ]
            cts = grad(
                pairing, argnums=tuple(range(len(primals))), backend="interpret", optimize=False
            )(*zeros)
            flat = [_leaves(c)[0] for c in cts]
            # closed-over values are constants: zero cotangents (as in JAX)
            return flat + [api.zeros_like(c) for c in closed_inputs] if closed else flat

        res_tree = TreeDef("tuple", [tree, _closed_tree(closed)]) if closed else tree
        bwd_graph, _ = _trace(
            bwd_flat,
            TreeDef("tuple", [res_tree, out_tree]),
            avals + closed_avals + [n.aval for n in fun_graph.outputs],
            f"{name}_bwd",
            "the jvp rule",
            found,
        )
        # forward mode calls the rule itself (loops/primitives.py _custom_jvp reads this)
        fun_graph.custom_jvp_rule = self._jvp_graph(
            statics, tree, avals, fun_graph, name, closed, found
        )
        return fwd_graph, bwd_graph

    def _jvp_graph(self, statics, tree, avals, fun_graph, name, closed, found):
        """The rule as a graph: (primals..., tangents...) -> (outs..., tangents of outs);
        closed-over constants are the last primals (their tangents are ignored)."""
        out_avals = [n.aval for n in fun_graph.outputs]

        def jvp_flat(primals, tangents):
            if closed:
                *primals, closed_inputs = primals
                tangents = tangents[:-1]
                _read_as(closed, closed_inputs)
            out, tangent_out = _split_rule_result(
                self.jvp(*statics, tuple(primals), tuple(tangents)), name
            )
            outs, touts = _leaves(out)[0], _leaves(tangent_out)[0]
            if len(outs) != len(out_avals) or len(touts) != len(out_avals):
                raise CustomRuleError(
                    f"custom_jvp rule of {name} must return (out, tangent_out) shaped like the "
                    f"function's output ({len(out_avals)} arrays), got {len(outs)} and "
                    f"{len(touts)}"
                )
            role = (
                "custom_jvp rule of {name} must produce primal and tangent outputs with "
                "the function's shapes: got {got} for an output of shape {want}"
            )
            return [_fit(v, a, name, role) for v, a in zip(outs, out_avals, strict=True)] + [
                _fit(t, a, name, role) for t, a in zip(touts, out_avals, strict=True)
            ]

        args = TreeDef("tuple", list(tree.children) + [_closed_tree(closed)]) if closed else tree
        all_avals = avals + [c.aval for c in closed]
        graph, _ = _trace(
            jvp_flat,
            TreeDef("tuple", [args, args]),
            all_avals + all_avals,
            f"{name}_jvp",
            "the jvp rule",
            found,
        )
        return graph


def _split_rule_result(result, name: str):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CustomRuleError(
            f"custom_jvp rule of {name} must return a pair (out, tangent_out), "
            f"got {type(result).__name__}"
        )
    out_tree, tangent_tree = _leaves(result[0])[1], _leaves(result[1])[1]
    if out_tree != tangent_tree:  # (a zip deep inside reverse mode raised ValueError)
        raise CustomRuleError(
            f"Custom JVP rule for function {name} must produce primal and tangent outputs "
            f"with equal container (pytree) structures, but got {out_tree} and "
            f"{tangent_tree} respectively."
        )
    return result
