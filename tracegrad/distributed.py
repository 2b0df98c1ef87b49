"""Data-parallel gradients on Dask: the compiled value-and-grad runs on every shard.

    import tracegrad as tg
    from tracegrad import distributed
    vg = distributed.value_and_grad(loss, argnums=0, shard_argnums=(1, 2))
    value, grads = vg(params, x, y)     # x, y split along axis 0 over the workers

`client=None` starts a `LocalCluster` with one single-threaded worker process per
core (multi-process parallelism on one machine); pass your own
`dask.distributed.Client` to use a cluster. Dask is an optional extra:
`pip install -e '.[distributed]'`.

Per call:
- the sharded arguments (NumPy arrays) are split along axis 0 into one shard per
  worker (`np.array_split`: uneven sizes are fine, empty shards are skipped); a
  list of Dask futures (from `client.scatter(shards)`) is taken as shards that
  already live on the workers, so an epoch loop ships only the parameters;
- the other arguments (the parameters) are scattered with `broadcast=True`;
- each shard runs `tracegrad.value_and_grad(f, argnums)` on its worker. The
  compiled function is kept per worker (keyed by the pickled function), so a
  worker traces and compiles once; with a shared `TRACEGRAD_CACHE_DIR` it loads
  the kernel from disk instead;
- values and gradients are combined in shard order (a fixed summation order:
  deterministic for a fixed number of shards): `reduce="mean"` weights each
  shard by its rows (for a loss that is a mean over rows), `reduce="sum"` adds.

A worker that dies mid-call: Dask runs its tasks again on the others (up to
its `allowed_failures`), or the call raises `KilledWorker`; a partial sum is
never returned, because every shard's result is gathered before combining.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

_LOCAL: dict = {}
_LOCAL_LOCK = threading.Lock()
_WORKER_CACHE: dict = {}  # on each worker: function key -> compiled value_and_grad


def _dask():
    try:
        import cloudpickle  # noqa: F401
        from dask import distributed
    except ImportError as exc:
        raise ImportError("tracegrad.distributed needs Dask: pip install -e '.[distributed]' "
                          "(or pip install 'dask[distributed]')") from exc
    return distributed


def local_client(n_workers: int | None = None):
    """The embedded `LocalCluster` client (one single-threaded worker process per
    core), started on first use and closed at exit."""
    distributed = _dask()
    n = n_workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else os.cpu_count() or 1)
    with _LOCAL_LOCK:
        client = _LOCAL.get(n)
        if client is None:
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                               dashboard_address=None)
            client = _LOCAL[n] = distributed.Client(cluster)
            atexit.register(_close, n)
    return client


def _close(n: int) -> None:
    client = _LOCAL.pop(n, None)
    if client is not None:
        cluster = client.cluster
        client.close()
        cluster.close()


def _shard_value_and_grad(key: str, fn_bytes: bytes, argnums, args: tuple):
    """Runs on a worker: (rows, value, grads) of one shard."""
    vg = _WORKER_CACHE.get(key)
    if vg is None:
        import cloudpickle
        import tracegrad as tg
        vg = _WORKER_CACHE[key] = tg.value_and_grad(cloudpickle.loads(fn_bytes), argnums=argnums)
    value, grads = vg(*args)
    return value, grads


def _rows(shard_args: Sequence) -> int:
    return int(np.shape(shard_args[0])[0])


def value_and_grad(fn: Callable, client: Any = None, argnums: int | Sequence[int] = 0,
                   shard_argnums: Sequence[int] = (1, 2), reduce: str = "mean") -> Callable:
    """`tracegrad.value_and_grad(fn, argnums)` evaluated data-parallel on Dask.

    Returns a function with `tracegrad.value_and_grad(fn)`'s signature and results
    (NumPy arrays); see the module docstring for sharding and combining.
    """
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
    import cloudpickle
    fn_bytes = cloudpickle.dumps(fn)
    key = hashlib.sha256(fn_bytes).hexdigest()
    shard_argnums = tuple(shard_argnums)

    def distributed_value_and_grad(*args):
        c = client if client is not None else local_client()
        shards = _shards(c, args, shard_argnums)
        if not shards:
            raise ValueError("distributed.value_and_grad: every shard is empty (no rows)")
        # one future per argument (scatter of a bare tuple would scatter its items);
        # hash=False: a content-named key could be released by the previous call meanwhile
        replicated = {i: c.scatter([a], broadcast=True, hash=False)[0] for i, a in enumerate(args)
                      if i not in shard_argnums}
        futures, rows = [], []
        for shard_args, n in shards:
            call_args = tuple(shard_args[shard_argnums.index(i)] if i in shard_argnums
                              else replicated[i] for i in range(len(args)))
            futures.append(c.submit(_shard_value_and_grad, key, fn_bytes, argnums, call_args,
                                    pure=False))
            rows.append(n)
        results = c.gather(futures)  # raises if a shard cannot be computed: no partial sums
        return _combine(results, rows, reduce)
    distributed_value_and_grad.__name__ = f"distributed_value_and_grad({getattr(fn, '__name__', 'f')})"
    return distributed_value_and_grad


def _shards(client, args: tuple, shard_argnums: tuple) -> list:
    """[(shard args in shard_argnums order, rows)] with empty shards left out."""
    sharded = [args[i] for i in shard_argnums]
    if all(isinstance(a, (list, tuple)) and a and _is_future(a[0]) for a in sharded):
        # shards already on the workers (client.scatter of per-shard lists)
        sizes = client.gather([client.submit(_rows, parts) for parts in zip(*sharded)])
        return [(parts, n) for parts, n in zip(zip(*sharded), sizes) if n > 0]
    arrays = [np.asarray(a) for a in sharded]
    n_rows = {a.shape[0] for a in arrays}
    if len(n_rows) != 1:
        raise ValueError(f"sharded arguments must have the same number of rows, got "
                         f"{sorted(n_rows)}")
    n_workers = max(1, len(client.scheduler_info().get("workers", {})) or 1)
    pieces = [np.array_split(a, n_workers, axis=0) for a in arrays]
    return [(parts, len(parts[0])) for parts in zip(*pieces) if len(parts[0]) > 0]


def _is_future(value) -> bool:
    return type(value).__name__ == "Future" and hasattr(value, "key")


def _combine(results: list, rows: list, reduce: str):
    """Values and gradients summed in shard order (deterministic), weighted by rows
    for `mean`."""
    from tracegrad.tracing import tree_flatten, tree_unflatten
    total = float(sum(rows))
    weights = [n / total if reduce == "mean" else 1.0 for n in rows]
    value = None
    flat_sum, tree = None, None
    for (v, grads), w in zip(results, weights):
        leaves, tree = tree_flatten(grads, arrays_only_scalars=True)
        v = np.asarray(v, dtype=np.float64) * w
        value = v if value is None else value + v
        scaled = [np.asarray(g, dtype=np.float64) * w for g in leaves]
        flat_sum = scaled if flat_sum is None else [a + b for a, b in zip(flat_sum, scaled)]
    first_leaves = tree_flatten(results[0][1], arrays_only_scalars=True)[0]
    out = [s.astype(np.asarray(g).dtype) for s, g in zip(flat_sum, first_leaves)]
    return value.astype(np.asarray(results[0][0]).dtype), tree_unflatten(tree, out)
