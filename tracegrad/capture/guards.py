"""Guards: when a captured graph still describes what the function would do.

An entry is keyed by its arguments (shapes, dtypes, `requires_grad`, grad mode,
static Python values). What the function reads beyond them is checked on every
call, and a failed check retraces (with the reason kept in `cache_info()`):

- each state slot's shape, dtype and `requires_grad` (session.Slot.guard);
- a `.grad` that was None when read is still None;
- each module the function called: `training`, which parameter, buffer and
  submodule objects it holds, and its plain Python attributes (`p`, `eps`,
  `n_head`): swapping a submodule or `model.eval()` retraces;
- each optimizer that stepped: its hyperparameters (`betas`, `weight_decay`, ...;
  `lr` is an input, read every call), its parameters and the keys of its state.

    >>> import tracegrad.eager as torch
    >>> lin = torch.nn.Linear(2, 2)
    >>> before = module_fingerprint(lin)
    >>> _ = lin.eval()
    >>> module_fingerprint(lin) == before
    False
"""

from __future__ import annotations

from typing import Any

from tracegrad.capture.session import DrawSlot, GradSlot

_PLAIN = (int, float, bool, str, type(None))


def module_fingerprint(module: Any) -> tuple:
    """What a module's forward may depend on besides its tensors' values."""
    d = module.__dict__
    plain = tuple(
        sorted((k, v) for k, v in d.items() if type(v) in _PLAIN and not k.startswith("_"))
    )
    return (
        bool(d.get("training", True)),
        tuple((k, id(v)) for k, v in d["_parameters"].items()),
        tuple((k, id(v)) for k, v in d["_buffers"].items()),
        tuple((k, id(v)) for k, v in d["_modules"].items()),
        plain,
    )


def optimizer_fingerprint(optimizer: Any) -> tuple:
    """An optimizer's hyperparameters, parameters and state layout."""
    groups = tuple(
        (
            tuple(
                (k, _hashable(v)) for k, v in sorted(g.items()) if k not in ("params", "lr")
            ),  # lr: an input (session.ScalarSlot)
            tuple(id(p) for p in g["params"]),
        )
        for g in optimizer.param_groups
    )
    state = tuple((id(p), tuple(sorted(s))) for p, s in optimizer.state.items())
    return groups, state


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if type(value) in _PLAIN or isinstance(value, tuple):
        return value
    return ("id", id(value))


class _ModuleGuard:
    """module_fingerprint's facts, compared cheaply on every call (identities first)."""

    __slots__ = (
        "module",
        "fingerprint",
        "training",
        "params",
        "buffers",
        "children",
        "plain_names",
        "plain_values",
    )

    def __init__(self, module):
        d = module.__dict__
        self.module = module
        self.fingerprint = module_fingerprint(module)
        self.training = self.fingerprint[0]
        self.params = tuple(map(id, d["_parameters"].values()))
        self.buffers = tuple(map(id, d["_buffers"].values()))
        self.children = tuple(map(id, d["_modules"].values()))
        self.plain_names = tuple(k for k, _ in self.fingerprint[4])
        self.plain_values = tuple(v for _, v in self.fingerprint[4])

    def holds(self) -> bool:
        d = self.module.__dict__
        return (
            bool(d.get("training", True)) == self.training
            and tuple(map(id, d["_parameters"].values())) == self.params
            and tuple(map(id, d["_buffers"].values())) == self.buffers
            and tuple(map(id, d["_modules"].values())) == self.children
            and tuple(map(d.get, self.plain_names)) == self.plain_values
        )


class Guards:
    """The checks of one captured entry (see the module doc)."""

    def __init__(self, session, graph):
        used = {i.id for n in graph.nodes for i in n.inputs} | {n.id for n in graph.outputs}
        # a .grad the graph never reads (a forward without backward) needs no guard
        self.slots = [
            s
            for s in session.slots
            if not isinstance(s, DrawSlot)
            and not (isinstance(s, GradSlot) and s.placeholder.id not in used)
        ]
        self.grads_none = [
            p
            for p in session.grad_was_none
            if id(p) not in session.cleared_first and session.backward_ran
        ]
        self.modules = [_ModuleGuard(m) for m in session.modules.values()]
        self.optimizers = [(o, optimizer_fingerprint(o)) for o in session.optimizers.values()]

    def failure(self, leaves: list) -> str | None:
        """Why the entry does not fit this call, or None when it does."""
        for guard in self.modules:
            if not guard.holds():
                return _module_change(guard.module, guard.fingerprint)
        for optimizer, fingerprint in self.optimizers:
            if optimizer_fingerprint(optimizer) != fingerprint:
                return f"{type(optimizer).__name__}'s hyperparameters or state changed"
        for p in self.grads_none:
            if p._grad is not None:
                return "a parameter's .grad was None when traced and is a tensor now"
        for slot in self.slots:
            reason = slot.guard(leaves)
            if reason is not None:
                return reason
        return None


def _module_change(module: Any, old: tuple) -> str:
    new = module_fingerprint(module)
    name = type(module).__name__
    if new[0] != old[0]:
        return f"{name}.training changed to {new[0]}"
    if new[3] != old[3]:
        return f"a submodule of {name} was replaced"
    if new[1] != old[1] or new[2] != old[2]:
        return f"a parameter or buffer of {name} was replaced"
    changed = sorted(set(new[4]) ^ set(old[4]))
    return f"{name}.{changed[0][0]} changed" if changed else f"{name} changed"
