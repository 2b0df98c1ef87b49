"""Per-example gradients of an MLP (batch 256): vmap by batching rules vs the old
scan-based vmap vs jax.jit(jax.vmap(jax.grad)).

    python perf/vmap_per_example.py [--batch 256] [--dtype float32] [--rounds 30]

Each system's gradients are checked against the new vmap before timing; times are
the median (and min) over interleaved rounds of one call each, after warm-up
(first call = trace + compile, reported separately).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tracegrad as tg


def loss(params, x, onehot):
    """Cross-entropy of one example (one-hot target: the old scan-based vmap cannot
    compile an integer label in its loop body, see the report)."""
    (w1, b1), (w2, b2) = params
    hidden = tg.tanh(x @ w1 + b1)
    return -tg.sum(onehot * tg.log_softmax(hidden @ w2 + b2, axis=0))


def old_scan_vmap(fn, in_axes):
    """tracegrad's vmap before batching rules: a scan over the examples."""

    def mapped(*args):
        positions = [i for i, a in enumerate(in_axes) if a is not None]

        def body(carry, xs):
            full = list(args)
            for i, x in zip(positions, xs, strict=True):
                full[i] = x
            return carry, fn(*full)

        return tg.scan(body, None, tuple(args[i] for i in positions))[1]

    return mapped


def make_systems(dtype):
    systems = {
        "tracegrad vmap (batching rules)": tg.compile(
            lambda p, X, Y: tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(p, X, Y)
        ),
        "tracegrad old vmap (scan)": tg.compile(
            lambda p, X, Y: old_scan_vmap(tg.grad(loss), (None, 0, 0))(p, X, Y)
        ),
    }
    try:
        import jax
        import jax.numpy as jnp

        if dtype == np.float64:
            jax.config.update("jax_enable_x64", True)

        def jax_loss(params, x, onehot):
            (w1, b1), (w2, b2) = params
            hidden = jnp.tanh(x @ w1 + b1)
            return -jnp.sum(onehot * jax.nn.log_softmax(hidden @ w2 + b2))

        per_example = jax.jit(jax.vmap(jax.grad(jax_loss), in_axes=(None, 0, 0)))

        def run_jax(p, X, Y):
            out = per_example(p, X, Y)
            jax.block_until_ready(out)
            return out

        systems["jax.jit(jax.vmap(jax.grad))"] = run_jax
    except ImportError:
        pass
    return systems


def flat(tree):
    return np.concatenate([np.asarray(v).ravel() for pair in tree for v in pair])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--sizes", default="64,128,10")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    dtype = np.dtype(args.dtype).type
    d, h, c = (int(s) for s in args.sizes.split(","))
    rng = np.random.default_rng(0)
    params = (
        (rng.standard_normal((d, h)).astype(dtype) / np.sqrt(d), np.zeros(h, dtype)),
        (rng.standard_normal((h, c)).astype(dtype) / np.sqrt(h), np.zeros(c, dtype)),
    )
    X = rng.standard_normal((args.batch, d)).astype(dtype)
    Y = np.eye(c, dtype=dtype)[rng.integers(0, c, args.batch)]
    systems = make_systems(dtype)
    first, reference = {}, None
    for name, run in systems.items():
        start = time.perf_counter()
        out = run(params, X, Y)
        first[name] = time.perf_counter() - start
        got = flat(out)
        if reference is None:
            reference = got
        tol = 1e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got, reference, rtol=tol, atol=tol, err_msg=name)
    times = {name: [] for name in systems}
    names = list(systems)
    for r in range(args.rounds):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            start = time.perf_counter()
            systems[name](params, X, Y)
            times[name].append(time.perf_counter() - start)
    print(
        f"per-example gradients, MLP {d}-{h}-{c}, batch {args.batch}, {args.dtype}, "
        f"{args.rounds} rounds"
    )
    print(f"{'system':36s} {'median ms':>10s} {'min ms':>8s} {'first call s':>13s}")
    for name in names:
        t = times[name]
        print(
            f"{name:36s} {1e3 * statistics.median(t):10.3f} {1e3 * min(t):8.3f} {first[name]:13.2f}"
        )


if __name__ == "__main__":
    main()
