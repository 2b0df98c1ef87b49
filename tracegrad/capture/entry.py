"""Capture: trace PyTorch-style code into one graph, and run it per call.

`build_entry` runs the user's function once with its tensors holding tracers
(tracegrad.capture.session lifts the state it reads), then lowers the graph:

- when the function ran `backward()` itself (a training step), the graph already
  holds forward, backward and the optimizer's update: it is lowered as it is, and
  every call writes the new parameters, grads and optimizer state back;
- otherwise, when an output needs a gradient, the reverse-mode pass builds one
  joint graph and splits it into a forward kernel and a backward kernel, as
  AOTAutograd does: outputs come back with a `CompiledFunctionBackward` grad_fn
  whose backward fills `.grad` of the arguments and of the parameters it read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.capture.guards import Guards
from tracegrad.capture.session import CaptureSession, LeafSlot, TensorSlot
from tracegrad.compiled_eager import _EagerEntry, node_class, output_node_class, partition
from tracegrad.lowering import _canonical_leaf, lower_graphs
from tracegrad.passes.loops import reroll_loops
from tracegrad.pytree import identifier, is_array_like_leaf, leaf_paths
from tracegrad.tracing import (
    TraceContext,
    TracedFunction,
    Tracer,
    _unique,
    abstract_leaf,
    argument_names,
    output_node,
    tree_flatten,
    tree_unflatten,
)


def _eager_tensor():
    from tracegrad.eager._tensor import Tensor

    return Tensor


class CapturedEntry:
    """One captured signature: the kernel(s), where each input is read from and
    where each changed piece of state is written back."""

    def __init__(
        self,
        traced: TracedFunction,
        leaf_inputs: list[int],
        slots: list,
        out_kinds: list,
        writers: list,
        clear_writers: list,
        guards: Guards,
        backward_ran: bool,
    ):
        self.traced = traced
        self.leaf_inputs = leaf_inputs  # leaf index of each argument input, in order
        self.slots = slots  # the state inputs that follow them
        self.out_kinds = out_kinds  # per function output: "tensor" or "array"
        self.writers = writers  # per state output, in order
        self.clear_writers = clear_writers  # state changes with no value (a grad cleared)
        self.guards = guards
        self.backward_ran = backward_ran
        self.n_fn_out = len(out_kinds)
        self.kernel = None  # plain: inputs -> outputs + state
        self.lowered = None
        self.aot: _EagerEntry | None = None  # forward/backward kernels, when split
        self.wrt_sources: list = []  # per differentiated input: leaf index or slot
        self.eager_tier = None  # runs the function eagerly until the kernels exist

    def _kernels_ready(self) -> bool:
        tiers = [self.kernel] if self.aot is None else [self.aot.forward, self.aot.backward]
        if all(t.ready() for t in tiers):
            self.eager_tier = None
            return True
        return False

    def wait_kernels(self, timeout: float | None = None) -> bool:
        tiers = [self.kernel] if self.aot is None else [self.aot.forward, self.aot.backward]
        return all(t.wait(timeout) for t in tiers)

    @property
    def graph(self):
        return self.traced.graph

    def inputs(self, leaves: list) -> list:
        arrays = [_canonical_leaf(_array_of(leaves[i])) for i in self.leaf_inputs]
        arrays.extend(_canonical_leaf(slot.read(leaves)) for slot in self.slots)
        return arrays

    def run(self, leaves: list):
        if self.eager_tier is not None and not self._kernels_ready():
            return self.eager_tier.run(leaves)  # the kernel is still being built
        arrays = self.inputs(leaves)
        Tensor = _eager_tensor()
        if self.aot is not None:
            outs = self.aot.forward(*arrays)
            n_out = self.aot.n_out
            saved = list(outs[n_out:])
        else:
            outs = self.kernel(*arrays)
            n_out = len(outs)
        outs = [np.asarray(v) for v in outs[:n_out]]
        for writer, value in zip(self.writers, outs[self.n_fn_out :], strict=True):
            writer.write(value, leaves)
        for writer in self.clear_writers:
            writer.write(None, leaves)
        results = []
        for kind, value in zip(self.out_kinds, outs[: self.n_fn_out], strict=True):
            results.append(Tensor._wrap(value) if kind == "tensor" else value)
        if self.aot is not None and self.aot.wrt:
            self._attach_backward(results, leaves, arrays, saved)
        return tree_unflatten(self.traced.out_tree, results)

    def _attach_backward(self, results: list, leaves: list, arrays: list, saved: list) -> None:
        from tracegrad.eager import graph as graph_mod

        entry = self.aot
        inputs = [leaves[src] if isinstance(src, int) else src.tensor for src in self.wrt_sources]
        make_node = node_class()
        if entry.bundle is None:
            for k in entry.diff_outputs:
                results[k]._requires_grad = True
                results[k]._grad_fn = make_node(entry, k, inputs, saved, arrays, graph_mod)
        else:
            shared = make_node(entry, None, inputs, saved, arrays, graph_mod)
            make_output_node = output_node_class()
            for slot in entry.bundle[2]:
                results[slot[0]]._requires_grad = True
                results[slot[0]]._grad_fn = make_output_node(shared, slot)


def _array_of(leaf: Any):
    Tensor = _eager_tensor()
    return leaf._data if isinstance(leaf, Tensor) else leaf


def build_entry(
    cf,
    args: tuple,
    kwargs: dict,
    leaves: list,
    in_tree,
    backend: str,
    optimize: bool,
    grad_enabled: bool,
    names: dict | None = None,
) -> CapturedEntry:
    """Trace `cf.fn` on eager tensors and lower what it did (see the module doc)."""
    Tensor = _eager_tensor()
    kw_names = tuple(kwargs)
    flat_fn = cf.flat_function(len(args), kw_names)
    arg_names = argument_names(flat_fn, len(args)) + list(kw_names)
    paths = [
        p
        for name, tree in zip(arg_names, in_tree.children, strict=True)
        for p in leaf_paths(tree, name)
    ]
    context = TraceContext(getattr(cf.fn, "__name__", None) or type(cf.fn).__name__)
    session = CaptureSession(context, names)
    session._leaf_objects = leaves
    values, leaf_inputs, used = [], [], set()
    with context.active():
        for i, leaf in enumerate(leaves):
            if not (isinstance(leaf, Tensor) or is_array_like_leaf(leaf)) or type(leaf) in (
                int,
                float,
                bool,
            ):
                values.append(leaf)  # a static Python value (part of the key)
                continue
            name = _unique(identifier(paths[i]) if i < len(paths) else f"arg{i}", used)
            tracer = context.new_input(abstract_leaf(leaf), name)
            leaf_inputs.append(i)
            if isinstance(leaf, Tensor):
                session.bind_leaf(i, leaf, tracer, name)
                values.append(leaf)
            else:
                values.append(tracer)
        previous = session.install()
        try:
            result = flat_fn(*tree_unflatten(in_tree, values))
            out_leaves, out_tree = tree_flatten(result, arrays_only_scalars=True)
            out_kinds, out_flags = [], []
            # traced values computed from tensor arguments come back as tensors too
            tensors_in = any(isinstance(leaf, Tensor) for leaf in leaves)
            for leaf in out_leaves:
                if isinstance(leaf, Tensor):
                    context.graph.outputs.append(output_node(context, leaf._data))
                    out_kinds.append("tensor")
                    out_flags.append(bool(leaf._requires_grad))
                else:
                    context.graph.outputs.append(output_node(context, leaf))
                    traced = isinstance(leaf, Tracer)
                    out_kinds.append("tensor" if traced and tensors_in else "array")
                    out_flags.append(traced and tensors_in)
            state = session.state_outputs()
        finally:
            session.restore()
            session.install_previous(previous)
    writers, clear_writers = [], []
    for node, writer in state:
        if node is None:
            clear_writers.append(writer)
        else:
            context.graph.outputs.append(node)
            writers.append(writer)
    traced = TracedFunction(context.graph, in_tree, out_tree, paths)
    traced.graph = reroll_loops(traced.graph)  # unrolled Python loops (layers) -> scan
    entry = CapturedEntry(
        traced,
        leaf_inputs,
        list(session.slots),
        out_kinds,
        writers,
        clear_writers,
        Guards(session, context.graph),
        session.backward_ran,
    )
    _lower(entry, session, out_flags, backend, optimize, grad_enabled)
    # PyTorch-style code (it called a module or an optimizer, or ran backward) is a valid
    # eager program: eager mode serves until the kernels exist. Code written with
    # tracegrad's or NumPy's ops on tensors may only run traced: the interpreter serves.
    pytorch_style = bool(session.modules or session.optimizers or session.backward_ran)
    if pytorch_style and not entry._kernels_ready():
        from tracegrad.capture.breaks import EagerFallback

        entry.eager_tier = EagerFallback(cf, args, kwargs, None)
    return entry


def _lower(
    entry: CapturedEntry,
    session: CaptureSession,
    out_flags: list,
    backend: str,
    optimize: bool,
    grad_enabled: bool,
) -> None:
    graph = entry.graph
    n_leaf = len(entry.leaf_inputs)
    # graph inputs: argument leaves first, then the state slots, in order
    sources = [(entry.leaf_inputs.index(s.index), s) for s in session.leaf_slots] + [
        (n_leaf + k, s) for k, s in enumerate(entry.slots)
    ]
    wrt, wrt_sources = [], []
    if grad_enabled and not entry.backward_ran:
        for index, slot in sources:
            if (
                isinstance(slot, TensorSlot)
                and slot.requires_grad
                and np.dtype(graph.inputs[index].dtype).kind in "fc"
            ):
                wrt.append(index)
                wrt_sources.append(slot.index if isinstance(slot, LeafSlot) else slot)
    diff_outputs = [
        k
        for k, flag in enumerate(out_flags)
        if flag and np.dtype(graph.outputs[k].dtype).kind in "fc"
    ]
    lower = _lowering(backend, optimize)
    if wrt and diff_outputs:
        from tracegrad.autodiff import vjp_graph

        n_out = len(graph.outputs)
        joint = vjp_graph(graph, wrt, diff_outputs=diff_outputs, seed_ones=False)
        forward, backward, saved_ids = partition(joint, n_out, len(graph.inputs))
        lowered_fwd, lowered_bwd = lower(graph, forward), lower(graph, backward)
        entry.aot = _EagerEntry(
            entry.traced,
            joint,
            _Tiered(lowered_fwd),
            _Tiered(lowered_bwd),
            n_out,
            saved_ids,
            diff_outputs,
            wrt,
            entry.traced.out_tree,
            lowered_fwd,
            lowered_bwd,
        )
        entry.wrt_sources = wrt_sources
        entry.lowered = lowered_fwd
        entry.lowered_backward = lowered_bwd
        return
    entry.lowered = lower(graph, graph)
    entry.kernel = _Tiered(entry.lowered)


def _lowering(backend: str, optimize: bool):
    """Passes and code generation for a captured graph. With Numba, the kernels are built
    in the background (codegen/background.py) and the function runs eagerly meanwhile
    (CapturedEntry.eager_tier; eager mode beat the NumPy interpreter of the tiny GPT's
    step graph 2-5x): a training step's graph (forward, backward, optimizer) is large, and
    its first Numba compile can take minutes on a small machine. TRACEGRAD_TIERED=0 waits
    for the kernels instead."""
    from tracegrad import config

    if backend != "numba" or config.tiered_mode() == "0":
        return lambda traced, joint: lower_graphs(traced, joint, backend, optimize=optimize)
    from tracegrad.lowering import _lower_in_background

    def lower(traced, joint):
        return _lower_in_background(traced, joint, optimize, None, {})

    return lower


class _Tiered:
    """A Lowered's kernel once built; until then its tier runner or the interpreter."""

    __slots__ = ("lowered", "kernel", "interpreter")

    def __init__(self, lowered):
        self.lowered = lowered
        self.kernel = lowered.kernel
        self.interpreter = None

    def __call__(self, *arrays):
        kernel = self.kernel
        if kernel is None:
            kernel = self._promote()
        return kernel(*arrays)

    def _promote(self):
        lowered = self.lowered
        build = lowered.tier_build
        if build is not None and build.kernel is not None:
            lowered.kernel, lowered.source, lowered.source_path = (
                build.kernel,
                build.kernel.source,
                build.kernel.source_path,
            )
            self.kernel = build.kernel
            return build.kernel
        from tracegrad.codegen.background import ensure_worker

        ensure_worker()
        if lowered.tier_runner is not None:
            return lowered.tier_runner
        if self.interpreter is None:
            self.interpreter = _interpreted(lowered.optimized)
        return self.interpreter

    def ready(self) -> bool:
        """The kernel is built (or its build ended: then the interpreter serves)."""
        if self.kernel is not None:
            return True
        build = self.lowered.tier_build
        if build is None or build.kernel is not None or build.done:
            self._promote()
            return True
        from tracegrad.codegen.background import ensure_worker

        ensure_worker()
        return False

    def wait(self, timeout: float | None = None) -> bool:
        build = self.lowered.tier_build
        if self.kernel is None and build is not None and build.wait(timeout):
            self._promote()
        return self.kernel is not None or build is None


def _interpreted(graph):
    from tracegrad.lowering import _Interpreted

    run = _Interpreted(graph)

    def interpreter(*arrays):
        with np.errstate(all="ignore"):  # as in a kernel
            return run(*arrays)

    return interpreter
