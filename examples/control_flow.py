"""Control flow: why a static graph cannot branch on data, and what to write instead.

1. A Python `if` on a tensor's value works eagerly: the graph is recorded as the
   code runs, so only the branch taken is in it.
2. The same function cannot be compiled: while tracing, values are unknown, so
   `if` has nothing to test. tracegrad raises a TracingError at your line.
3. `tracegrad.where` computes both branches and selects per element: that is a
   static graph, it compiles, and its gradients equal the eager ones.
4. The `where` NaN trap: `where(x > 0, sqrt(x), 0)` has NaN gradients at x < 0,
   in both modes (and in PyTorch and JAX). Make the input safe first.

Run:  python examples/control_flow.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

import tracegrad as tg
import tracegrad.eager as eager


def heading(text: str) -> None:
    print(f"\n{'=' * 78}\n{text}\n{'=' * 78}")


# ---------------------------------------------------- a data-dependent branch
def soft_abs_branchy(x):
    """sum(x)^2 / 2 when sum(x) > 0, else -sum(x): a Python `if` on a value."""
    total = tg.sum(x)
    if total > 0:
        return total * total / 2.0
    return -total


def soft_abs_where(x):
    """The same function without Python control flow: both sides, then select."""
    total = tg.sum(x)
    return tg.where(total > 0, total * total / 2.0, -total)


def eager_grad(fn, x: np.ndarray) -> tuple[float, np.ndarray]:
    xt = eager.tensor(x, requires_grad=True)
    out = fn(xt)
    out.backward()
    return float(out.item()), xt.grad.numpy()


# ------------------------------------------------------------ the NaN trap
def sqrt_or_zero_naive(x):
    return tg.sum(tg.where(x > 0, tg.sqrt(x), 0.0))


def sqrt_or_zero_safe(x):
    # Feed sqrt only values where it is defined (and differentiable); the
    # selected result is the same, but the untaken branch's gradient is finite.
    positive = x > 0
    safe_x = tg.where(positive, x, 1.0)
    return tg.sum(tg.where(positive, tg.sqrt(safe_x), 0.0))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="(already quick; accepted for symmetry)"
    )
    parser.parse_args(argv)
    print(__doc__.split("\n\nRun:")[0])
    inputs = {
        "sum(x) > 0": np.array([1.0, 2.0, -0.5], np.float32),
        "sum(x) < 0": np.array([-1.0, 0.5, -2.0], np.float32),
    }

    heading("1. Eager mode: the `if` runs on the actual value")
    eager_results = {}
    for case, x in inputs.items():
        value, grad = eager_grad(soft_abs_branchy, x)
        eager_results[case] = grad
        print(f"x = {x}  ({case}):  value {value:.4f}, grad {grad}")

    heading("2. Compiled mode: the same code cannot be traced")
    try:
        tg.value_and_grad(soft_abs_branchy)(inputs["sum(x) > 0"])
    except tg.TracingError as err:
        print(f"{type(err).__name__}: {err}")
    else:  # pragma: no cover - would mean tracing silently baked in one branch
        raise SystemExit("expected a TracingError: the branch depends on traced data")

    heading("3. The tracegrad.where rewrite compiles and gives the same gradients")
    compiled = tg.value_and_grad(soft_abs_where)
    for case, x in inputs.items():
        value, grad = compiled(x)
        _, where_eager = eager_grad(soft_abs_where, x)
        diff = float(np.max(np.abs(np.asarray(grad) - eager_results[case])))
        print(f"x = {x}  ({case}):  compiled value {float(value):.4f}, grad {np.asarray(grad)}")
        print(
            f"{'':34}max |compiled - eager if-version| = {diff:.1e}; "
            f"eager where-version agrees: {np.allclose(where_eager, grad)}"
        )
    info = compiled.cache_info() if hasattr(compiled, "cache_info") else None
    traces = f"{info.traces} trace for both inputs" if info else "one static graph"
    print(f"{traces}: the branch is now data inside the graph, not Python control flow.")

    heading("4. The where NaN trap, and the safe idiom")
    x = np.array([4.0, -1.0, 0.25], np.float32)
    print(f"x = {x};  f(x) = sum(where(x > 0, sqrt(x), 0))")
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, fn in (
            ("naive where(x > 0, sqrt(x), 0)", sqrt_or_zero_naive),
            ("safe  where(x > 0, sqrt(where(x > 0, x, 1)), 0)", sqrt_or_zero_safe),
        ):
            value_c, grad_c = tg.value_and_grad(fn)(x)
            value_e, grad_e = eager_grad(fn, x)
            print(f"\n{name}")
            print(f"  value: compiled {float(value_c):.4f}, eager {value_e:.4f}")
            print(f"  grad:  compiled {np.asarray(grad_c)}, eager {grad_e}")
            if np.isnan(grad_c).any() or np.isnan(grad_e).any():
                print("  -> NaN gradient at x < 0: the value there is 0, but backward still")
                print("     multiplies the zero cotangent by d sqrt(x)/dx = 0.5/sqrt(-1) = NaN,")
                print("     and 0 * NaN = NaN.")
            else:
                print(
                    "  -> finite everywhere: d/dx sqrt(x) = 0.5/sqrt(x) at x > 0, and 0 elsewhere."
                )


if __name__ == "__main__":
    main()
