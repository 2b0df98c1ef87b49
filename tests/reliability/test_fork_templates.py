"""Shape-generic kernels (codegen/shape_generic.py) across fork: a child forked after
a template was built runs it for its own new batch sizes, and a child forked while the
template is still being built finishes the build itself; every value and gradient is
the interpreter's. Each scenario runs in a fresh process with a private cache."""

from __future__ import annotations

import textwrap

import pytest

# One kernel compile, one template build and a fork per scenario (~10 s): CI's
# Numba pass runs them.
pytestmark = pytest.mark.numba_pass

CHILD = textwrap.dedent(r"""
    import multiprocessing as mp, sys
    import numpy as np
    import tracegrad as tg

    def loss(w1, b1, w2, x):
        return tg.sum(tg.tanh(x @ w1 + b1) @ w2 ** 2)

    F = tg.value_and_grad(loss, argnums=(0, 1, 2))
    REF = tg.value_and_grad(loss, argnums=(0, 1, 2), backend="interpret")
    rng = np.random.default_rng(0)
    W1, B1, W2 = rng.standard_normal((5, 7)), rng.standard_normal(7), rng.standard_normal((7, 3))

    def batch(n):
        return np.random.default_rng(n).standard_normal((n, 5))

    def check(n):
        (v, g), (rv, rg) = F(W1, B1, W2, batch(n)), REF(W1, B1, W2, batch(n))
        assert abs(v - rv) <= 1e-12 * abs(rv), (n, v, rv)
        for a, b in zip(g, rg):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)

    def template_of(n):
        return getattr(F.lower(W1, B1, W2, batch(n)).kernel, "shape_generic", None)

    def child(queue, built):
        try:
            if built:                      # the parent's template serves new sizes at once
                before = F.tier_info()
                check(18)
                check(22)
                assert F.tier_info() == before, (F.tier_info(), before)
            else:                          # the build was in flight at the fork
                check(18)
                assert F.wait_kernels(timeout=240), "the child's build never finished"
                check(22)
            check(6)
            assert template_of(22) is not None
            queue.put("ok")
        except BaseException as exc:
            import traceback
            queue.put(traceback.format_exc())

    if __name__ == "__main__":
        built = sys.argv[1] == "after_build"
        check(6)                           # the first shape: its own kernel
        check(10)                          # the second: the interpreter, template queued
        if built:
            assert F.wait_kernels(timeout=240)
            check(14)
            assert template_of(14) is not None
        else:
            print("in flight:", F.tier_info().pending >= 1, flush=True)
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(queue, built))
        proc.start()
        proc.join(240)
        if proc.is_alive():
            proc.kill()
            print("HANG", flush=True)
            sys.exit(1)
        result = queue.get(timeout=10)
        assert result == "ok" and proc.exitcode == 0, (result, proc.exitcode)
        assert F.wait_kernels(timeout=240)
        check(26)                          # the parent's own template still answers
        print("OK", flush=True)
""")


def run_child(run_script, scenario: str) -> str:
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork start method here")
    return run_script(
        CHILD,
        scenario,
        unset=["TRACEGRAD_TIERED", "TRACEGRAD_SHAPE_GENERIC"],
        TRACEGRAD_BACKEND="numba",
    )


def test_a_child_forked_after_the_template_was_built_runs_it(run_script):
    run_child(run_script, "after_build")


def test_a_child_forked_during_the_template_build_finishes_it(run_script):
    out = run_child(run_script, "during_build")
    assert "in flight: True" in out, out
