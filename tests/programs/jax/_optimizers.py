"""momentum and sgd with jax.example_libraries.optimizers' (init, update, get_params)
interface, for the vendored JAX examples of this folder (this folder's own code: JAX's
module registers its OptimizerState as a custom pytree node). Parameters are an array or
a tuple/list of arrays; the state is a tuple of per-leaf states, a plain pytree that
tracegrad.jit traces. The arithmetic is JAX's, operation for operation."""

from typing import NamedTuple

import tracegrad as jnp


class Optimizer(NamedTuple):
    init_fn: object
    update_fn: object
    params_fn: object


def _leaves(tree):
    return list(tree) if isinstance(tree, (tuple, list)) else [tree]


def _rebuild(like, leaves):
    return type(like)(leaves) if isinstance(like, (tuple, list)) else leaves[0]


def _tree_optimizer(init, update, get_params):
    shape = {}

    def tree_init(x0):
        shape["like"] = x0
        return tuple(init(x) for x in _leaves(x0))

    def tree_update(i, grads, state):
        return tuple(update(i, g, s) for g, s in zip(_leaves(grads), state, strict=True))

    def tree_get_params(state):
        return _rebuild(shape["like"], [get_params(s) for s in state])

    return Optimizer(tree_init, tree_update, tree_get_params)


def make_schedule(step_size):
    return step_size if callable(step_size) else (lambda i: step_size)


def sgd(step_size):
    step_size = make_schedule(step_size)
    return _tree_optimizer(lambda x0: x0, lambda i, g, x: x - step_size(i) * g, lambda x: x)


def momentum(step_size, mass):
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        x = x - step_size(i) * velocity
        return x, velocity

    return _tree_optimizer(init, update, lambda state: state[0])
