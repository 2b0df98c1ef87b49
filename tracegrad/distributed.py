"""Data-parallel gradients on Dask: the compiled value-and-grad runs on every shard.

    import tracegrad as tg
    from tracegrad import distributed
    vg = distributed.value_and_grad(loss, argnums=0, shard_argnums=(1, 2))
    value, grads = vg(params, x, y)     # x, y split along axis 0 over the workers

`client=None` starts a `LocalCluster` with one single-threaded worker process per
core (multi-process parallelism on one machine); pass your own
`dask.distributed.Client` to use a cluster. On each worker, tracegrad's thread limit
(`tracegrad.set_num_threads`) is the worker's `threads_per_worker`, shared among the
tasks it runs at once, so parallel kernels, eager ops and BLAS calls on the workers
never use more threads than the cluster was given. Dask is an optional extra:
`pip install -e '.[distributed]'`.

Per call:
- the sharded arguments (NumPy arrays) are split along axis 0 into one shard per
  worker (`np.array_split`: uneven sizes are fine, empty shards are skipped); a
  list of Dask futures (from `client.scatter(shards)`), or a Dask array chunked
  along axis 0 only (one shard per block; persist it once with `client.persist`),
  is taken as shards that already live on the workers, so an epoch loop ships
  only the parameters;
- the other arguments (the parameters) are scattered with `broadcast=True`;
- each shard runs `tracegrad.value_and_grad(f, argnums)` on its worker. The
  compiled function is kept per worker (keyed by the pickled function), so a
  worker traces and compiles once; with a shared `TRACEGRAD_CACHE_DIR` it loads
  the kernel from disk instead;
- values and gradients are combined on the workers by a pairwise tree in shard
  order (a fixed summation order: deterministic for a fixed number of shards),
  so the client receives one gradient message, not one per worker:
  `reduce="mean"` weights each shard by its rows (for a loss that is a mean over
  rows), `reduce="sum"` adds. Each shard reports its own row count, so shards
  given as futures cost no extra round trip.

A worker that dies mid-call: Dask runs its tasks again on the others (up to
its `allowed_failures`), or the call raises `KilledWorker`; a partial sum is
never returned, because every shard's result is gathered before combining.
"""

from __future__ import annotations

import atexit
import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_LOCAL: dict = {}
_LOCAL_LOCK = threading.Lock()
_WORKER_CACHE: dict = {}  # on each worker: function key -> compiled value_and_grad
# The embedded cluster's workers have one thread each: Numba's pool is made that size
# (it is fixed when Numba starts its threads), and tracegrad's limit is one. Dask
# itself pins OMP/MKL/OpenBLAS to one thread in its workers.
WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "TRACEGRAD_NUM_THREADS": "1"}


def worker_threads() -> int | None:
    """On a Dask worker, its thread count (`threads_per_worker`); None elsewhere."""
    try:
        from dask.distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    n = getattr(getattr(worker, "state", None), "nthreads", None) or getattr(
        worker, "nthreads", None
    )
    return int(n) if n else None


def _limit_threads_to_worker() -> None:
    """tracegrad's thread limit on this worker: its threads_per_worker, divided among
    the tasks it runs at once (one shard per worker is the usual case), so that
    workers x threads never exceed what the cluster was given. Dask's OMP_NUM_THREADS=1
    in the worker's environment would otherwise make it one."""
    from tracegrad.runtime import threads

    n = worker_threads()
    if n is None:
        return
    try:
        from dask.distributed import get_worker

        running = max(1, len(getattr(get_worker().state, "executing", ()) or ()))
    except Exception:
        running = 1
    threads.set_num_threads(max(1, n // running))


def _dask():
    try:
        import cloudpickle  # noqa: F401
        from dask import distributed
    except ImportError as exc:
        raise ImportError(
            "tracegrad.distributed needs Dask: pip install -e '.[distributed]' "
            "(or pip install 'dask[distributed]')"
        ) from exc
    return distributed


def local_client(n_workers: int | None = None):
    """The embedded `LocalCluster` client (one single-threaded worker process per
    CPU this process may use: affinity and cgroup quota, at most tracegrad's thread
    limit), started on first use and closed at exit."""
    from tracegrad.runtime import threads

    distributed = _dask()
    n = n_workers or threads.get_num_threads()
    with _LOCAL_LOCK:
        client = _LOCAL.get(n)
        if client is None:
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                env=dict(WORKER_ENV),
            )
            client = _LOCAL[n] = distributed.Client(cluster)
            atexit.register(_close, n)
    return client


def _close(n: int) -> None:
    client = _LOCAL.pop(n, None)
    if client is not None:
        cluster = client.cluster
        client.close()
        cluster.close()


def _shard_value_and_grad(
    key: str, fn_bytes: bytes, argnums, shard_args: tuple, shard_argnums: tuple, replicated: tuple
):
    """Runs on a worker: (rows, value, grads) of one shard; an empty shard gives
    (0, None, None) and weighs nothing."""
    rows = int(np.shape(shard_args[0])[0])
    if rows == 0:
        return 0, None, None
    _limit_threads_to_worker()
    vg = _WORKER_CACHE.get(key)
    if vg is None:
        import cloudpickle

        import tracegrad as tg

        vg = _WORKER_CACHE[key] = tg.value_and_grad(cloudpickle.loads(fn_bytes), argnums=argnums)
    given = iter(replicated)
    args = [
        shard_args[shard_argnums.index(i)] if i in shard_argnums else next(given)
        for i in range(len(shard_args) + len(replicated))
    ]
    value, grads = vg(*args)
    return rows, value, grads


def _merge(a: tuple, b: tuple, reduce: str) -> tuple:
    """Runs on a worker: two partial results (rows, value, grads) as one, summed in
    float64 and returned in the inputs' dtypes; `mean` weights each side by its rows."""
    from tracegrad.tracing import tree_flatten, tree_unflatten

    (rows_a, value_a, grads_a), (rows_b, value_b, grads_b) = a, b
    if rows_a == 0 or rows_b == 0:  # an empty shard
        return b if rows_a == 0 else a
    rows = rows_a + rows_b
    w_a, w_b = (rows_a / rows, rows_b / rows) if reduce == "mean" else (1.0, 1.0)

    def mix(x, y):
        dtype = np.asarray(x).dtype
        return (np.asarray(x, np.float64) * w_a + np.asarray(y, np.float64) * w_b).astype(dtype)

    leaves_a, tree = tree_flatten(grads_a, arrays_only_scalars=True)
    leaves_b = tree_flatten(grads_b, arrays_only_scalars=True)[0]
    return (
        rows,
        mix(value_a, value_b),
        tree_unflatten(tree, [mix(x, y) for x, y in zip(leaves_a, leaves_b, strict=True)]),
    )


def _tree_reduce(client, futures: list, reduce: str):
    """One future for the combination of `futures`: pairs merged level by level in
    shard order (a fixed order, so the same shards always give the same bits)."""
    level = list(futures)
    while len(level) > 1:
        merged = [
            client.submit(_merge, level[i], level[i + 1], reduce, pure=False)
            for i in range(0, len(level) - 1, 2)
        ]
        level = merged + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def value_and_grad(
    fn: Callable,
    client: Any = None,
    argnums: int | Sequence[int] = 0,
    shard_argnums: Sequence[int] = (1, 2),
    reduce: str = "mean",
) -> Callable:
    """`tracegrad.value_and_grad(fn, argnums)` evaluated data-parallel on Dask.

    Returns a function with `tracegrad.value_and_grad(fn)`'s signature and results
    (NumPy arrays); see the module docstring for sharding and combining. Keep the
    data on the workers between calls by passing lists of futures, one per shard:

        >>> import numpy as np, tracegrad as tg
        >>> from tracegrad import distributed
        >>> def loss(w, x, y):
        ...     return tg.mean((x @ w - y) ** 2)
        >>> client = distributed.local_client()           # doctest: +SKIP
        >>> x, y = np.ones((1000, 3)), np.zeros((1000, 1))
        >>> xs = client.scatter(np.array_split(x, 2))      # doctest: +SKIP
        >>> ys = client.scatter(np.array_split(y, 2))      # doctest: +SKIP
        >>> vg = distributed.value_and_grad(loss, client=client)  # doctest: +SKIP
        >>> value, dw = vg(np.ones((3, 1)), xs, ys)        # doctest: +SKIP
        >>> float(value), np.round(dw, 9).ravel().tolist()  # doctest: +SKIP
        (9.0, [6.0, 6.0, 6.0])
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
        replicated = _broadcast(c, args, shard_argnums)
        futures = [
            c.submit(
                _shard_value_and_grad,
                key,
                fn_bytes,
                argnums,
                tuple(shard_args),
                shard_argnums,
                replicated,
                pure=False,
            )
            for shard_args in shards
        ]
        # raises if a shard cannot be computed: a partial sum is never returned
        rows, value, grads = c.gather(_tree_reduce(c, futures, reduce))
        if rows == 0:
            raise ValueError("distributed.value_and_grad: every shard is empty (no rows)")
        return value, grads

    distributed_value_and_grad.__name__ = (
        f"distributed_value_and_grad({getattr(fn, '__name__', 'f')})"
    )
    return distributed_value_and_grad


def _broadcast(client, args: tuple, shard_argnums: tuple):
    """One future holding the replicated arguments (the parameters) in order, sent to
    every worker by one scatter (Dask copies it on from worker to worker)."""
    replicated = tuple(a for i, a in enumerate(args) if i not in shard_argnums)
    # a list of one item: scatter of a bare tuple would scatter its items;
    # hash=False: a content-named key could be released by the previous call meanwhile
    (future,) = client.scatter([replicated], broadcast=True, hash=False)
    return future


def _shards(client, args: tuple, shard_argnums: tuple) -> list:
    """[shard args in shard_argnums order], empty shards left out (for futures, a
    shard's rows are known only on its worker: empty ones run and weigh 0)."""
    sharded = [args[i] for i in shard_argnums]
    if any(_is_dask_array(a) for a in sharded):
        return _dask_array_shards(client, sharded)
    if all(isinstance(a, (list, tuple)) and a and _is_future(a[0]) for a in sharded):
        # shards already on the workers (client.scatter of per-shard lists)
        if len({len(a) for a in sharded}) != 1:
            raise ValueError(
                f"sharded arguments given as futures need the same number of "
                f"shards each, got {[len(a) for a in sharded]}"
            )
        return list(zip(*sharded, strict=True))
    arrays = [np.asarray(a) for a in sharded]
    n_rows = {a.shape[0] for a in arrays}
    if len(n_rows) != 1:
        raise ValueError(
            f"sharded arguments must have the same number of rows, got {sorted(n_rows)}"
        )
    n_workers = max(1, len(client.scheduler_info().get("workers", {})) or 1)
    pieces = [np.array_split(a, n_workers, axis=0) for a in arrays]
    return [parts for parts in zip(*pieces, strict=True) if len(parts[0]) > 0]


def _is_dask_array(value) -> bool:
    return type(value).__name__ == "Array" and hasattr(value, "__dask_keys__")


def _dask_array_shards(client, arrays: list) -> list:
    """Each block of rows of the Dask arrays is one shard. A persisted array's blocks
    stay where they are; any other is persisted for this call (persist it once with
    `client.persist` so that later calls do not compute it again)."""
    from dask.core import flatten
    from dask.distributed import futures_of

    if not all(_is_dask_array(a) for a in arrays):
        raise ValueError("sharded arguments: give all as Dask arrays or none")
    for a in arrays:
        if any(n != 1 for n in a.numblocks[1:]):
            raise ValueError(
                f"a sharded Dask array must be chunked along axis 0 only, got "
                f"chunks {a.chunks}: rechunk it, e.g. x.rechunk({{1: -1}})"
            )
    if len({a.chunks[0] for a in arrays}) != 1:
        raise ValueError(
            f"sharded Dask arrays need the same row chunks, got {[a.chunks[0] for a in arrays]}"
        )
    per_array = []
    for a in arrays:
        keys = list(flatten(a.__dask_keys__()))
        futures = {f.key: f for f in futures_of(a)}
        if not all(k in futures for k in keys):
            a = client.persist(a)
            futures = {f.key: f for f in futures_of(a)}
        per_array.append([futures[k] for k in keys])
    return [
        parts
        for parts, rows in zip(zip(*per_array, strict=True), arrays[0].chunks[0], strict=True)
        if rows > 0
    ]


def _is_future(value) -> bool:
    return type(value).__name__ == "Future" and hasattr(value, "key")
