"""The AOT split of a joint graph, and its eager backward node (AOTAutograd's shape).

`tracegrad.compile(f)(x, W)` with eager tensors that require grad (tracegrad.capture
traces `f`, PyTorch-style or not) builds the joint graph with one cotangent input per
output, and partitions it here:

    forward kernel:  primal inputs -> outputs + the values the backward needs
    backward kernel: saved values + output cotangents -> input gradients

The call runs the forward kernel and returns eager tensors whose `grad_fn` is
one `CompiledFunctionBackward` node; `loss.backward()` reaches that node, which
runs the backward kernel, so `.grad` fills exactly as in eager mode. With several
differentiable outputs (of one dtype), each output's `CompiledFunctionBackward`
places its gradient in a slice of one flat cotangent bundle that flows to a
shared node, so the backward kernel runs once per backward pass, not per output.

A node is "backward" when it depends on a cotangent input; everything else
(including parts of vjp rules that only need forward values, e.g. 1 - tanh^2)
runs in the forward kernel and is saved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracegrad.ir.clone import needed_ids, subgraph
from tracegrad.ir.graph import Graph, Node
from tracegrad.ops import core

_EAGER = None


def _eager():
    """(tensor module, graph module, grad-mode STATE), imported on first use."""
    global _EAGER
    if _EAGER is None:
        # By module path (`tracegrad.eager.tensor` is the tensor() factory).
        import importlib

        tensor_mod = importlib.import_module("tracegrad.eager._tensor")
        graph_mod = importlib.import_module("tracegrad.eager.graph")
        from tracegrad.eager.grad_mode import STATE

        _EAGER = (tensor_mod, graph_mod, STATE)
    return _EAGER


class _EagerEntry:
    """One signature's forward and backward kernels and how to pack results."""

    def __init__(
        self,
        traced,
        joint,
        forward,
        backward,
        n_out,
        saved_ids,
        diff_outputs,
        wrt,
        out_tree,
        lowered_forward,
        lowered_backward,
    ):
        self.traced = traced
        self.joint = joint
        self.forward = forward  # kernel: primals -> outputs + saved
        self.backward = backward  # kernel: saved + cotangents -> grads
        self.n_out = n_out
        self.saved_ids = saved_ids
        self.diff_outputs = diff_outputs  # output indices with a cotangent input
        self.wrt = wrt  # leaf indices that get gradients
        self.out_tree = out_tree
        self.lowered_forward = lowered_forward
        self.lowered_backward = lowered_backward
        inputs = traced.graph.inputs
        self.wrt_meta = tuple((inputs[i].shape, inputs[i].dtype) for i in wrt)
        self.bundle = _bundle_layout(traced.graph.outputs, diff_outputs)


def _bundle_layout(outputs, diff_outputs):
    """(total size, dtype, [(output index, offset, size, shape)]) when several outputs
    carry gradients: their cotangents travel to the one backward node as one flat
    array (each output's node fills its own slice), so the backward kernel runs once
    per backward pass. None for a single output or outputs of mixed dtypes."""
    if len(diff_outputs) < 2 or len({np.dtype(outputs[k].dtype) for k in diff_outputs}) != 1:
        return None
    slots, offset = [], 0
    for k in diff_outputs:
        size = int(np.prod(outputs[k].shape, dtype=np.int64))
        slots.append((k, offset, size, tuple(outputs[k].shape)))
        offset += size
    return offset, np.dtype(outputs[diff_outputs[0]].dtype), slots


def partition(joint: Graph, n_out: int, n_primals: int) -> tuple[Graph, Graph, list[int]]:
    """Split a joint graph (primals + cotangents -> outputs + grads) into a
    forward graph (primals -> outputs + saved) and a backward graph
    (saved + cotangents -> grads)."""
    primals = joint.inputs[:n_primals]
    cotangents = joint.inputs[n_primals:]
    depends_on_ct = {n.id for n in cotangents}
    for node in joint.nodes:
        if any(i.id in depends_on_ct for i in node.inputs):
            depends_on_ct.add(node.id)
    grads = joint.outputs[n_out:]
    # Forward values the backward reads: not consts (copied instead), not cotangent-side.
    backward_nodes = needed_ids(grads, set())
    saved: dict[int, Node] = {}
    for node in joint.nodes:
        if node.id not in backward_nodes or node.id not in depends_on_ct:
            continue
        for i in node.inputs:
            if i.id not in depends_on_ct and i.op != "const":
                saved[i.id] = i
    # Gradients that do not depend on a cotangent (e.g. zeros) are computed backward-side
    # from their own inputs: include those as saved too.
    for g in grads:
        if g.id not in depends_on_ct and g.op != "const":
            saved[g.id] = g
    saved_nodes = sorted(saved.values(), key=lambda n: n.id)
    forward = subgraph(
        joint, primals, joint.outputs[:n_out] + saved_nodes, name=joint.name + "_forward"
    )
    backward = subgraph(joint, saved_nodes + list(cotangents), grads, name=joint.name + "_backward")
    return forward, backward, [n.id for n in saved_nodes]


def _node_base():
    from tracegrad.eager.graph import Node as EagerNode

    return EagerNode


def _make_node_class():
    EagerNode = _node_base()

    _BASE_SLOTS = tuple(s for s in EagerNode.__slots__ if s != "__weakref__")

    class CompiledFunctionBackward(EagerNode):
        """The eager backward node of a compiled call: runs the compiled backward kernel."""

        __slots__ = (
            "entry",
            "output_index",
            "saved_arrays",
            "input_tensors",
            "primal_arrays",
            "versions",
        )

        def __init__(self, entry, output_index, inputs, saved, primal_arrays, graph_mod):
            # Fill the eager Node's fields by name (not through its __init__, whose
            # signature belongs to eager mode), then ours.
            for slot in _BASE_SLOTS:
                setattr(self, slot, None)
            if output_index is None:  # one node for all outputs: g is their flat bundle
                total, dtype, slots = entry.bundle
                name = f"CompiledFunctionBackward (shared by {len(slots)} outputs)"
                out_meta = ((total,), dtype)
            else:
                out = entry.traced.graph.outputs[output_index]
                name, out_meta = "CompiledFunctionBackward", (out.shape, out.dtype)
            self.attrs, self._name, self.operands = {}, name, ()
            self.inputs = tuple((t._grad_fn or graph_mod.grad_accumulator(t)) for t in inputs)
            self.in_meta = entry.wrt_meta
            if "out_meta" in EagerNode.__slots__:
                self.out_meta = out_meta
            self.saved = True
            self.freed = False
            self.entry = entry
            self.output_index = output_index
            self.saved_arrays = saved
            self.input_tensors = list(inputs)
            self.primal_arrays = primal_arrays
            self.versions = [(t._counter, t._counter[0]) for t in inputs]
            if graph_mod.STATE.anomaly:  # detect_anomaly() shows where the forward ran
                import traceback

                user = [
                    f
                    for f in traceback.extract_stack()
                    if not f.filename.startswith(core._PACKAGE_DIR)
                ]
                self.trace = traceback.format_list(user)

        def apply(self, g, as_tensors: bool):
            # the compiled backward is JAX's vjp; PyTorch's gradient of complex values
            # is its conjugate (as eager nodes do: tracegrad.eager.graph.Node.apply)
            from tracegrad.eager.graph import _conj_grad

            return [_conj_grad(r) for r in self._apply_vjp(_conj_grad(g), as_tensors)]

        def _apply_vjp(self, g, as_tensors: bool):
            if self.freed:
                raise RuntimeError(_freed_message())
            self._check_versions()
            entry = self.entry
            if as_tensors:  # create_graph=True: record the backward as eager ops
                return self._apply_recorded(g)
            cts = []
            if self.output_index is None:
                flat = np.asarray(g, dtype=entry.bundle[1])
                for _, offset, size, shape in entry.bundle[2]:
                    cts.append(np.ascontiguousarray(flat[offset : offset + size]).reshape(shape))
                return list(entry.backward(*self.saved_arrays, *cts))
            for k in entry.diff_outputs:
                node = entry.traced.graph.outputs[k]
                if k == self.output_index:
                    # (not np.ascontiguousarray: it turns 0-d arrays into 1-d ones)
                    cts.append(_canonical_leaf(np.asarray(g, dtype=node.dtype)))
                else:
                    cts.append(np.zeros(node.shape, node.dtype))
            return list(entry.backward(*self.saved_arrays, *cts))

        def _apply_recorded(self, g):
            from tracegrad.autodiff import replay

            tensor_mod, _, _ = _eager()
            entry = self.entry
            joint = entry.joint
            n_primals = len(entry.traced.graph.inputs)
            args = list(self.primal_arrays)
            for k, i in enumerate(entry.wrt):
                args[i] = self.input_tensors[k]
            if self.output_index is None:
                cts = [
                    g[offset : offset + size].reshape(shape)
                    for _, offset, size, shape in entry.bundle[2]
                ]
            else:
                outputs = entry.traced.graph.outputs
                cts = [
                    g
                    if k == self.output_index
                    else tensor_mod.Tensor._wrap(np.zeros(outputs[k].shape, outputs[k].dtype))
                    for k in entry.diff_outputs
                ]
            env = replay(joint, args[:n_primals] + cts)
            return [
                env[n.id] if n.op != "const" else tensor_mod.Tensor._wrap(n.attrs["value"])
                for n in joint.outputs[entry.n_out :]
            ]

        def _check_versions(self):
            for (counter, version), t in zip(self.versions, self.input_tensors, strict=True):
                if counter[0] != version:
                    raise RuntimeError(
                        "one of the variables needed for gradient computation has been modified "
                        f"by an inplace operation: [{tuple(t.shape)}] is at version "
                        f"{counter[0]}; expected version {version} instead. (input of "
                        "CompiledFunctionBackward)"
                    )

        def release(self) -> None:
            self.saved_arrays = None
            self.input_tensors = None
            self.primal_arrays = None
            self.freed = True

        @property
        def saved_tensors_info(self) -> list:
            if self.freed or self.saved_arrays is None:
                return []
            return [
                (f"saved{i}", tuple(a.shape), str(a.dtype)) for i, a in enumerate(self.saved_arrays)
            ]

    return CompiledFunctionBackward


def _make_output_node_class():
    EagerNode = _node_base()
    _BASE_SLOTS = tuple(s for s in EagerNode.__slots__ if s != "__weakref__")

    class CompiledFunctionOutputBackward(EagerNode):
        """One output of a multi-output compiled call (PyTorch's name for it,
        CompiledFunctionBackward): places the output's gradient in its slice of the
        shared node's flat cotangent bundle; the shared node runs the kernel once."""

        __slots__ = ("slot",)

        def __init__(self, shared, slot):
            for name in _BASE_SLOTS:
                setattr(self, name, None)
            total, dtype = shared.out_meta
            _, _, _, shape = slot
            self.attrs, self._name, self.operands = {}, "CompiledFunctionBackward", ()
            self.inputs = (shared,)
            self.in_meta = ((total, dtype),)
            if "out_meta" in EagerNode.__slots__:
                self.out_meta = (shape, dtype)
            self.saved = False
            self.freed = False
            self.slot = slot

        def apply(self, g, as_tensors: bool):
            _, offset, size, _ = self.slot
            (total,), dtype = self.in_meta[0]
            if as_tensors:  # recorded: the bundle is built from g with eager ops
                import tracegrad.eager as E

                parts = [
                    E.zeros(offset, dtype=g.dtype),
                    g.reshape(-1),
                    E.zeros(total - offset - size, dtype=g.dtype),
                ]
                return [E.cat(parts)]
            bundle = np.zeros(total, dtype)
            bundle[offset : offset + size] = np.asarray(g).reshape(-1)
            return [bundle]

        def release(self) -> None:
            pass  # nothing saved here; the shared node refuses a second backward

        @property
        def saved_tensors_info(self) -> list:
            return []

    return CompiledFunctionOutputBackward


_OUTPUT_NODE_CLASS = None


def output_node_class():
    global _OUTPUT_NODE_CLASS
    if _OUTPUT_NODE_CLASS is None:
        _OUTPUT_NODE_CLASS = _make_output_node_class()
    return _OUTPUT_NODE_CLASS


def _canonical_leaf(value):
    from tracegrad.lowering import _canonical_leaf as canonical

    return canonical(value)


def _freed_message() -> str:
    from tracegrad.eager.graph import FREED_MESSAGE

    return FREED_MESSAGE


_NODE_CLASS = None


def node_class():
    """The CompiledFunctionBackward class (a subclass of the eager Node), built on
    first use so that importing this module does not import eager mode."""
    global _NODE_CLASS
    if _NODE_CLASS is None:
        _NODE_CLASS = _make_node_class()
    return _NODE_CLASS


def __getattr__(name: str) -> Any:
    if name == "CompiledFunctionBackward":
        return node_class()
    raise AttributeError(name)
