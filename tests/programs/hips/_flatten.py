"""`flatten` for the vendored optimizers.py, in place of autograd.misc.flatten (this
folder's own code, not vendored): a value made of arrays, scalars, lists, tuples and
dicts -> (one flat float vector, a function rebuilding the value from such a vector)."""

import numpy as np


def flatten(value):
    if isinstance(value, (list, tuple)):
        parts = [flatten(v) for v in value]
        return _join(parts, lambda items: type(value)(items))
    if isinstance(value, dict):
        keys = sorted(value)
        parts = [flatten(value[k]) for k in keys]
        return _join(parts, lambda items: dict(zip(keys, items, strict=True)))
    arr = np.asarray(value)
    return np.ravel(arr), lambda v: np.reshape(v, arr.shape)


def _join(parts, build):
    sizes = [len(flat) for flat, _ in parts]
    ends = np.cumsum(sizes)
    flat = np.concatenate([f for f, _ in parts]) if parts else np.zeros(0)

    def unflatten(vector):
        pieces = np.split(vector, ends[:-1]) if parts else []
        return build([un(p) for (_, un), p in zip(parts, pieces, strict=True)])

    return flat, unflatten
