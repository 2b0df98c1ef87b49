"""Data-parallel training on Dask: the same compiled gradient on every worker.

An MLP (16 -> 32 -> 1, float64) is fitted by full-batch gradient descent to a
synthetic regression set of 2,000,000 rows. The rows are split over the workers
of a Dask LocalCluster once (`client.scatter`), so each epoch ships only the
parameters and the gradients. The script prints:

1. the loss per epoch, distributed and single-process, and their largest
   difference (float64: they agree to rounding);
2. seconds per epoch against the number of workers (1 and 2 here).

Needs Dask: pip install -e '.[distributed]'.
Run:  python examples/distributed_training.py [--quick] [--rows N] [--epochs N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tracegrad as tg


def loss(params, x, y):
    w1, b1, w2, b2 = params
    h = tg.tanh(x @ w1 + b1)
    return tg.mean((h @ w2 + b2 - y) ** 2)


def make_data(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 16))
    w_true = rng.standard_normal((16, 1)) / 4
    y = np.sin(x @ w_true) + 0.1 * rng.standard_normal((rows, 1))
    params = (
        0.3 * rng.standard_normal((16, 32)),
        np.zeros(32),
        0.3 * rng.standard_normal((32, 1)),
        np.zeros(1),
    )
    return params, x, y


def train(step, params, epochs: int, lr: float):
    losses, times = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        value, grads = step(params)
        params = tuple(p - lr * g for p, g in zip(params, grads, strict=True))
        times.append(time.perf_counter() - t0)
        losses.append(float(value))
    return losses, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 3 epochs")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    rows, epochs = (200_000, 3) if args.quick else (args.rows, args.epochs)
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("This example needs Dask: pip install -e '.[distributed]'")
        raise SystemExit(2) from None
    from tracegrad import distributed

    params, x, y = make_data(rows)
    print(f"{rows:,} rows, MLP 16 -> 32 -> 1, full-batch gradient descent, {epochs} epochs")
    single = tg.value_and_grad(loss)
    single(params, x, y)  # compile first: epochs time the steps only
    single_losses, single_times = train(lambda p: single(p, x, y), params, epochs, lr=0.1)

    results = {}
    for workers in (1, 2):
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            xs = client.scatter(np.array_split(x, workers))  # the data moves once
            ys = client.scatter(np.array_split(y, workers))
            vg = distributed.value_and_grad(loss, client=client, argnums=0, shard_argnums=(1, 2))
            vg(params, xs, ys)  # first call: each worker compiles (or loads from the cache)
            results[workers] = train(lambda p: vg(p, xs, ys), params, epochs, lr=0.1)  # noqa: B023 - train() runs it in this iteration

    print(f"\n{'epoch':>5} {'single-process':>16} {'2 workers':>16}")
    for k in range(epochs):
        print(f"{k:5d} {single_losses[k]:16.10f} {results[2][0][k]:16.10f}")
    diff = max(
        abs(a - b) for w in results for a, b in zip(single_losses, results[w][0], strict=True)
    )
    print(f"\nmax |distributed - single-process| loss over all epochs: {diff:.2e}")
    print(f"\n{'workers':>7} {'s per epoch':>12}")
    print(f"{'single':>7} {np.median(single_times):12.3f}")
    for w in (1, 2):
        print(f"{w:7d} {np.median(results[w][1]):12.3f}")


if __name__ == "__main__":
    main()
