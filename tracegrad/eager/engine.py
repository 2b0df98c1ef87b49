"""The backward engine: iterative topological order, dict accumulation.

`run_backward` walks the graph from the roots once to count, for each node,
how many edges point at it; a node runs when all its gradient contributions
have arrived (Kahn's algorithm, no recursion, so depth is unbounded). Each node
calls its primitive's vjp rules (see graph.Node.apply). Without create_graph
the rules run on plain ndarrays, which is fast; with create_graph they run on
Tensors under grad mode, so the backward pass is itself recorded.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Sequence

import numpy as np

from tracegrad.eager import capture_hooks
from tracegrad.eager.grad_mode import STATE
from tracegrad.eager.graph import (
    DROP_GRAD,
    AccumulateGrad,
    GradientEdge,
    Node,
    edge_meta,
    grad_accumulator,
)

_TENSOR = None


def _tensor_cls():
    global _TENSOR
    if _TENSOR is None:
        from tracegrad.eager._tensor import Tensor

        _TENSOR = Tensor
    return _TENSOR


def _size_str(shape) -> str:
    return f"torch.Size([{', '.join(map(str, shape))}])"


def make_root_grads(
    outputs: Sequence, grad_outputs: Sequence | None, create_graph: bool, for_grad: bool = False
):
    """Check the outputs and build their starting gradients (implicit only for scalars)."""
    Tensor = _tensor_cls()
    roots, grads = [], []
    for i, out in enumerate(outputs):
        if isinstance(out, GradientEdge):
            out = _EdgeOutput(out.node)
        if not isinstance(out, (Tensor, _EdgeOutput)):
            raise TypeError(f"backward: expected Tensors as outputs, got {type(out).__name__}")
        if not out._requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            if out._data.size != 1:
                from tracegrad.eager.errors import context

                raise RuntimeError(
                    "grad can be implicitly created only for scalar outputs"
                    + context("grad" if for_grad else "backward", (out,))
                )
            if out._data.dtype.kind == "c":
                from tracegrad.eager.dtypes import from_numpy_dtype
                from tracegrad.eager.errors import context

                raise RuntimeError(
                    "grad can be implicitly created only for real scalar outputs but got "
                    f"{from_numpy_dtype(out._data.dtype)!r}"
                    + context("grad" if for_grad else "backward", (out,))
                )
            g = np.ones(out._data.shape, out._data.dtype)
            if create_graph:
                g = Tensor._wrap(g)
        else:
            if not isinstance(g, Tensor):
                g = Tensor._wrap(np.asarray(g, dtype=out._data.dtype))
            if (g._data.dtype.kind == "c") != (out._data.dtype.kind == "c"):
                from tracegrad.eager.dtypes import from_numpy_dtype

                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have "
                    f"the same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of "
                    f"{from_numpy_dtype(g._data.dtype)!r} and output[{i}] has a dtype of "
                    f"{from_numpy_dtype(out._data.dtype)!r}."
                )
            if g._data.shape != out._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_size_str(g._data.shape)} "
                    f"and output[{i}] has a shape of {_size_str(out._data.shape)}."
                )
            if not create_graph:
                g = g._data.astype(out._data.dtype, copy=False)
            elif g._data.dtype != out._data.dtype:
                g = g.to(out._data.dtype)
        node = out._grad_fn if out._grad_fn is not None else grad_accumulator(out)
        roots.append(node)
        grads.append(g)
    return roots, grads


class _EdgeOutput:
    """A GradientEdge given as an output: the shape, dtype and node of the tensor it
    stands for (its values are never read)."""

    __slots__ = ("_data", "_grad_fn", "_requires_grad")

    def __init__(self, node):
        shape, dtype = edge_meta(node)
        self._data = np.broadcast_to(np.zeros((), dtype), shape)
        self._grad_fn = node
        self._requires_grad = True

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype


def _add(a, b):
    if a is None:
        return b
    return a + b


def _to_tensor(g):
    Tensor = _tensor_cls()
    return g if isinstance(g, Tensor) else Tensor._wrap(g)


def _from_hook(result, as_tensors: bool):
    if as_tensors:
        return result
    return result._data


def _run_tensor_hooks(hooks: dict, g, as_tensors: bool):
    for fn in list(hooks.values()):
        r = fn(_to_tensor(g))
        if r is DROP_GRAD:
            return None
        if r is not None:
            _check_hook_result(fn, r, g)
            g = _from_hook(r, as_tensors)
    return g


def _check_hook_result(fn, r, g) -> None:
    """PyTorch's checks of a value a hook returned (python_hook.cpp check_single_result):
    a tensor, of the gradient's dtype, then of its size."""
    Tensor = _tensor_cls()
    if not isinstance(r, Tensor):
        t = type(r)
        kind = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
        raise TypeError(f"expected Variable, but hook returned '{kind}'")
    name = getattr(fn, "hook_name", None) or getattr(fn, "__name__", None) or "<unknown>"
    if not isinstance(name, str):
        name = "<unknown>"
    was = g._data if isinstance(g, Tensor) else np.asarray(g)
    got = r._data
    if got.dtype != was.dtype:
        from tracegrad.eager.dtypes import from_numpy_dtype

        raise RuntimeError(
            f"hook '{name}' has changed the type of value (was "
            f"torch.{from_numpy_dtype(was.dtype)._tensor_type} got "
            f"torch.{from_numpy_dtype(got.dtype)._tensor_type})"
        )
    if got.shape != was.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value")


def _collect(roots, want_parents: bool):
    """Edge counts of every node reachable from the roots (and, if asked, its parents)."""
    deps: dict = {}
    parents: dict = {}
    stack = list(dict.fromkeys(roots))
    seen = set(stack)  # the roots; any other node is seen once it has a count in deps
    get = deps.get
    while stack:
        node = stack.pop()
        for nxt in node.inputs:
            if nxt is None:
                continue
            count = get(nxt)
            if count is None:
                deps[nxt] = 1
                if nxt not in seen:
                    stack.append(nxt)
            else:
                deps[nxt] = count + 1
            if want_parents:
                parents.setdefault(nxt, []).append(node)
    return deps, parents


def _needed(targets, parents, include_targets: bool = True) -> set:
    """Nodes from which some target is reachable (only these need to run). Without
    include_targets a target itself runs only when another target is below it:
    autograd.grad captures the gradient flowing into a target and stops there, so
    the graph below stays intact (PyTorch's exec_info needed_ flags)."""
    needed = set(targets) if include_targets else set()
    stack = list(targets)
    while stack:
        n = stack.pop()
        for p in parents.get(n, ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


class ExecutionEngine:
    """PyTorch's `Variable._execution_engine`: `queue_callback(fn)` runs fn once the
    backward pass now running (the innermost, for a backward inside a backward) ends."""

    @staticmethod
    def queue_callback(callback) -> None:
        stack = STATE.final_callbacks
        if not stack:
            raise RuntimeError("Final callbacks can only be installed during backward pass.")
        stack[-1].append(callback)


def _run_final_callbacks(callbacks: list) -> None:
    i = 0
    while i < len(callbacks):  # a callback may queue another one: it runs too
        callbacks[i]()
        i += 1


def run_backward(
    roots: list,
    root_grads: list,
    retain_graph: bool,
    create_graph: bool,
    targets: dict | None = None,
    accumulate: bool = True,
) -> dict:
    """Propagate gradients from `roots`. `targets` maps nodes whose incoming
    gradient is wanted (autograd.grad / backward(inputs=...)) to the tensor
    whose .grad backward(inputs=...) fills (or None); the captured gradients
    are returned as {node: grad}. With `accumulate`, leaves
    (AccumulateGrad nodes) add their gradient into `.grad`; when targets are
    given only target leaves do."""
    if capture_hooks.ACTIVE[0]:
        capture_hooks.backward_called()
    deps, parents = _collect(roots, targets is not None)
    needed = _needed(targets, parents, accumulate) if targets is not None else None
    grads: dict = {}
    for node, g in zip(roots, root_grads, strict=True):
        grads[node] = _add(grads.get(node), g)
    captured: dict = {}
    ready = [n for n in dict.fromkeys(roots) if n not in deps]
    prev_mode = STATE.grad_enabled
    prev_partial = STATE.partial_backward
    STATE.grad_enabled = create_graph
    STATE.partial_backward = targets is not None
    callback_stack: list | None = STATE.final_callbacks
    if callback_stack is None:
        callback_stack = []
        STATE.final_callbacks = callback_stack
    callbacks: list = []
    callback_stack.append(callbacks)
    anomaly = STATE.anomaly
    plain = targets is None and not anomaly  # the fast paths below apply
    prev = gi = None  # (the loop's last gradients; the ownership check counts them)
    try:
        while ready:
            node = ready.pop()
            g = grads.pop(node, None)
            results = None
            kind = type(node)
            if needed is not None and node not in needed:
                # not run (no target below it): PyTorch leaves its buffers alone; a
                # target's gradient is still captured, after its tensor hooks
                if g is not None and node in targets:
                    _run_node(
                        node,
                        g,
                        create_graph,
                        retain_graph,
                        targets,
                        captured,
                        accumulate,
                        anomaly,
                        execute=False,
                    )
            elif g is None:
                if not retain_graph:
                    node.release()
            elif (
                plain
                and kind is Node
                and node.tensor_hooks is None
                and node.pre_hooks is None
                and node.retain_ref is None
                and node.post_hooks is None
            ):
                results = node.apply(g, create_graph)  # the common case, inlined
                if not retain_graph and node.saved:
                    node.release()
            elif (
                targets is None
                and kind is AccumulateGrad
                and node.pre_hooks is None
                and node.post_hooks is None
                and not node.variable._hooks
                and not node.variable._post_acc_hooks
            ):
                if accumulate:
                    var = node.variable
                    with _grad_lock(var):  # other threads may be accumulating into var
                        if (
                            var._grad is None
                            and _OWNERSHIP
                            and type(g) is _ndarray
                            and _refcount(g) == _EXCLUSIVE_LOCAL + (prev is g) + (gi is g)
                            and g.base is None
                            and g.dtype is var._data.dtype
                            and g.shape == var._data.shape
                            and g.flags.writeable
                        ):
                            # nothing else references this gradient: it becomes .grad (no copy)
                            var._grad = _tensor_cls()._wrap(g)
                        else:
                            _accumulate_unlocked(var, g, create_graph)  # a leaf, inlined
                continue
            else:
                results = _run_node(
                    node, g, create_graph, retain_graph, targets, captured, accumulate, anomaly
                )
            inputs = node.inputs
            for i in range(len(inputs)):
                nxt = inputs[i]
                if nxt is None:
                    continue
                if results is not None:
                    gi = results[i]
                    if gi is not None:
                        prev = grads.get(nxt)
                        if prev is None:
                            grads[nxt] = gi
                        else:
                            grads[nxt] = _sum_into(grads, nxt, prev, gi)
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    ready.append(nxt)
        if callbacks:
            _run_final_callbacks(callbacks)
    finally:
        STATE.grad_enabled = prev_mode
        STATE.partial_backward = prev_partial
        callback_stack.pop()
    return captured


# Gradient buffers the engine alone holds are reused in place (PyTorch does the same
# with its use_count checks): a sum of contributions is written into one of them, and a
# leaf's first gradient becomes its .grad without a copy. An array is the engine's alone
# when CPython's reference count shows no other holder (no tensor, saved value, view,
# hook, other gradient slot or user variable); the counts below are those of the code
# that checks them, and interpreters that may borrow references skip the reuse.
_OWNERSHIP = sys.implementation.name == "cpython" and sys.version_info < (3, 14)
_refcount = sys.getrefcount
_ndarray = np.ndarray
_EXCLUSIVE_LOCAL = 2  # run_backward's `g` + getrefcount's argument
_EXCLUSIVE_SLOT = 4  # grads[node] + the caller's `prev` + _sum_into's `prev` + argument
_EXCLUSIVE_RESULT = 4  # results[i] + the caller's `gi` + _sum_into's `gi` + argument


def _sum_into(grads: dict, node, prev, gi):
    """prev + gi, written into whichever of them only the engine holds (else a new array)."""
    if (
        _OWNERSHIP
        and type(prev) is _ndarray
        and type(gi) is _ndarray
        and prev.shape == gi.shape
        and prev.dtype is gi.dtype
    ):
        if _refcount(prev) == _EXCLUSIVE_SLOT and prev.base is None and prev.flags.writeable:
            return np.add(prev, gi, out=prev)
        if _refcount(gi) == _EXCLUSIVE_RESULT and gi.base is None and gi.flags.writeable:
            return np.add(prev, gi, out=gi)
    return prev + gi


def _run_node(
    node,
    g,
    create_graph,
    retain_graph,
    targets,
    captured,
    accumulate,
    anomaly,
    execute: bool = True,
):
    """One node with its hooks, in PyTorch's order: the tensor's hooks, retain_grad and the
    capture of autograd.grad's inputs, then (only if the node runs) the node's pre-hooks,
    the node itself, and its post-hooks."""
    if type(node) is AccumulateGrad:
        var = node.variable
        if var._hooks:
            g = _run_tensor_hooks(var._hooks, g, create_graph)
        if targets is not None and node in targets:
            captured[node] = g
        runs = execute and accumulate and (targets is None or node in targets)
        if not runs:
            return None
        if node.pre_hooks:
            g = _run_tensor_hooks(node.pre_hooks, g, create_graph)
            if g is None:
                return None
        first = var._grad is None
        accumulate_grad(var, g, create_graph)
        if var._post_acc_hooks:
            for fn in list(var._post_acc_hooks.values()):
                r = fn(var)
                if r is not None:  # PyTorch's two texts
                    if not isinstance(r, _tensor_cls()):
                        raise TypeError(
                            f"expected Variable, but hook returned '{type(r).__name__}'"
                        )
                    raise RuntimeError("Tensor post accumulate grad hooks should return None.")
        if node.post_hooks:
            # PyTorch's first accumulation makes the incoming gradient .grad itself, so the
            # post-hook sees .grad (with whatever post-accumulate hooks did to it)
            grad_outputs = (var._grad if first and var._grad is not None else _to_tensor(g),)
            for fn in list(node.post_hooks.values()):
                fn((), grad_outputs)
        return None
    if node.tensor_hooks:
        g = _run_tensor_hooks(node.tensor_hooks, g, create_graph)
    if node.retain_ref is not None:
        t = node.retain_ref()
        if t is not None:
            accumulate_grad(t, g, create_graph)
    if targets is not None and node in targets:
        captured[node] = g
        tensor = targets[node]
        retained = node.retain_ref() if node.retain_ref is not None else None
        if accumulate and tensor is not None and tensor is not retained:
            accumulate_grad(tensor, g, create_graph)  # backward(inputs=[non_leaf]) fills .grad
    if not execute:
        return None
    if node.pre_hooks:
        g = _run_tensor_hooks(node.pre_hooks, g, create_graph)
        if g is None:  # a pre-hook returned (None,): nothing flows on
            if not retain_graph:
                node.release()
            return None
    if anomaly:
        results = _apply_with_anomaly(node, g, create_graph)
    else:
        results = node.apply(g, create_graph)
    if not retain_graph:
        node.release()
    if node.post_hooks:
        results = _run_post_hooks(node, results, g, create_graph)
    return results


def _run_post_hooks(node, results, g, create_graph):
    """fn(grad_inputs, grad_outputs), one entry per next_functions edge; a returned tuple
    replaces the gradients (PyTorch's function post hooks)."""
    idx = range(len(node.inputs)) if node.visible is None else node.visible
    grad_outputs = (_to_tensor(g),)
    for fn in list(node.post_hooks.values()):
        grad_inputs = tuple(_to_tensor(results[i]) if results[i] is not None else None for i in idx)
        r = fn(grad_inputs, grad_outputs)
        if r is None:
            continue
        if not isinstance(r, tuple):
            raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
        if len(r) != len(grad_inputs):
            raise RuntimeError(
                f"hook '{getattr(fn, '__name__', '<unknown>')}' has returned an "
                f"incorrect number of values (got {len(r)}, but expected "
                f"{len(grad_inputs)})"
            )
        results = list(results)
        for k, i in enumerate(idx):
            v = r[k]
            if v is not None and results[i] is None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            if v is not None:
                _check_hook_result(fn, v, results[i])
            results[i] = None if v is None else _from_hook(v, create_graph)
    return results


# `.grad` accumulation is a read-modify-write (is .grad None? then add in place, and
# NumPy releases the GIL inside large adds): backward calls in several threads into
# one leaf would lose contributions. Each leaf's accumulation holds one of these
# locks (striped by identity, as PyTorch's AccumulateGrad holds a per-node mutex).
_GRAD_LOCKS = tuple(threading.Lock() for _ in range(64))


def _grad_lock(var) -> threading.Lock:
    return _GRAD_LOCKS[(id(var) >> 4) & 63]


_CONCRETE = (np.ndarray, np.generic, int, float)


def _accumulate_traced(var, old, g) -> None:
    """AccumulateGrad inside a capture: tracers are values, so the sum is a new one."""
    Tensor = _tensor_cls()
    dtype = var._data.dtype
    if getattr(g, "dtype", None) != dtype:
        g = g.astype(dtype) if hasattr(g, "astype") else np.asarray(g, dtype)
    if old is None:
        var._grad = Tensor._wrap(g if type(g) is not np.ndarray else g.copy())
    elif old._requires_grad:
        var._grad = Tensor._wrap(old._data + g)
    else:
        old._data = old._data + g
        old._counter[0] += 1


def accumulate_grad(var, g, create_graph: bool) -> None:
    """var.grad += g, in place when possible (PyTorch's AccumulateGrad); thread-safe."""
    with _grad_lock(var):
        _accumulate_unlocked(var, g, create_graph)


def _accumulate_unlocked(var, g, create_graph: bool) -> None:
    Tensor = _tensor_cls()
    old = var._grad
    if create_graph:
        g = _to_tensor(g)
        var._grad = g if old is None else old + g
        return
    if isinstance(g, Tensor):
        g = g._data
    if (
        not isinstance(var._data, _CONCRETE)
        or not isinstance(g, _CONCRETE)
        or (old is not None and not isinstance(old._data, _CONCRETE))
    ):
        _accumulate_traced(var, old, g)
        return
    if old is None:
        var._grad = Tensor._wrap(np.array(g, dtype=var._data.dtype, copy=True))
    elif old._requires_grad:
        var._grad = Tensor._wrap(old._data + g)
    else:
        np.add(old._data, g, out=old._data, casting="unsafe")
        old._counter[0] += 1


NO_FORWARD_TRACE = (
    "No forward pass information available. Enable detect anomaly during forward pass for "
    "more information (the op was recorded outside detect_anomaly())."
)


def anomaly_trace(stack: list) -> list:
    """A node's forward traceback in anomaly mode; a node made while another node's
    backward runs (double backward) also gets that node's own forward traceback, as
    PyTorch's "Previous calculation was induced by ..." part."""
    parent = STATE.anomaly_parent
    if parent is not None:
        stack.append(
            f"\nPrevious calculation was induced by {parent.name()}. Traceback of forward "
            "call that induced the previous calculation:\n"
        )
        stack.extend(parent.trace or [NO_FORWARD_TRACE + "\n"])
    return stack


def _apply_with_anomaly(node, g, create_graph):
    prev_parent = STATE.anomaly_parent
    STATE.anomaly_parent = node
    try:
        results = node.apply(g, create_graph)
    except Exception:
        _warn_forward_trace(node)
        raise
    finally:
        STATE.anomaly_parent = prev_parent
    if not STATE.anomaly_check_nan:
        return results
    for i, r in enumerate(results):
        if r is None:
            continue
        arr = r._data if hasattr(r, "_data") else np.asarray(r)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            what = "nan" if np.isnan(arr).any() else "inf"
            _warn_forward_trace(node)  # PyTorch warns with the forward traceback, then raises
            raise RuntimeError(
                f"Function '{node.name()}' returned {what} values in its {i}th output.\n"
                + _forward_trace_text(node)
            )
    return results


def _forward_trace_text(node) -> str:
    if not node.trace:
        return NO_FORWARD_TRACE
    return "Traceback of forward call that caused the error (most recent call last):\n" + "".join(
        node.trace
    )


def _warn_forward_trace(node) -> None:
    warnings.warn(f"Error detected in {node.name()}. {_forward_trace_text(node)}", stacklevel=3)
