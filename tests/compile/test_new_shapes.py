"""Issue 14: a new shape of an already-compiled function answers at once (tiered
execution, TRACEGRAD_TIERED).

The new signature's optimized graph runs on the NumPy interpreter while its Numba
kernel is built by a background worker; the kernel is swapped in when ready. The
tests hold the interpreter tier against the kernel it stands in for, against eager
mode and central differences, check that the kernel really takes over
(`tier_info().interpreted_calls` stops growing, `cache_info().hits` grows), that
errors are the same in both tiers, and that threads, many shapes, process exit and
fork during a background build behave.

Every test here runs with its own empty kernel cache (a warm cache loads a known
shape's kernel at once, and then there is nothing to tier).
"""

from __future__ import annotations

import os
import textwrap
import threading

import numpy as np
import pytest
from compile_helpers import assert_close, numeric_grad

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.compiler import NonFiniteError, TierInfo
from tracegrad.ops.core import TracegradError

SIZES = (32, 64, 64, 10)  # the MLP


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(tmp_path_factory):
    """An empty kernel cache and TRACEGRAD_TIERED unset (its default) for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("new-shapes-cache")))
        mp.delenv("TRACEGRAD_TIERED", raising=False)
        yield
        for cf in (MLP, SMALL, LOG):
            cf.wait_kernels()


def mlp_loss(w1, b1, w2, b2, w3, b3, x, t):
    h = tg.maximum(x @ w1 + b1, 0.0)
    h = tg.maximum(h @ w2 + b2, 0.0)
    logp = tg.log_softmax(h @ w3 + b3, axis=1)
    return -tg.mean(tg.take_along_axis(logp, t, axis=1))


def small_loss(x):  # (a constant no other test uses: its kernels are this file's own)
    return tg.sum(tg.tanh(x) * x * 1.375)


def log_loss(x):
    return tg.sum(tg.log(x) * x * 0.625)


MLP = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)))
SMALL = tg.value_and_grad(small_loss)
LOG = tg.value_and_grad(log_loss, check_finite=True)


def mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        params += [
            rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in),
            rng.standard_normal(fan_out) * 0.1,
        ]
    return params


def mlp_batch(batch, seed=1, labels=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0]))
    t = rng.integers(0, SIZES[-1], size=(batch, 1)) if labels is None else labels
    return x, t


def eager_value_and_grads(params, x, t):
    """The same loss in eager mode (tracegrad.eager, PyTorch's semantics)."""
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    loss = mlp_loss(*tensors, torch.tensor(x), torch.tensor(t))
    loss.backward()
    return float(loss.detach().numpy()), [p.grad.numpy() for p in tensors]


class TwoTiers:
    """The MLP's second shape, called while its kernel builds and again after."""


@pytest.fixture(scope="module")
def mlp():
    """Two kernels in all: the first shape (compiled before returning), then a second
    shape whose calls are recorded on the interpreter tier, then with its kernel."""
    r = TwoTiers()
    r.params = params = mlp_params()
    MLP(*params, *mlp_batch(16))
    r.info_after_first = MLP.tier_info()
    r.x, r.t = x, t = mlp_batch(24, seed=2)
    r.bad = t.copy()
    r.bad[3, 0] = SIZES[-1] + 2  # a label out of range

    def value_of(b3):
        return MLP(*params[:5], b3, x, t)[0]

    r.tiered = MLP(*params, x, t)
    r.info_tiered = MLP.tier_info()
    r.fd_b3 = numeric_grad(value_of, [params[5]], argnum=0)
    r.error_tiered = error_of(MLP, *params, x, r.bad)
    r.info_before_wait = MLP.tier_info()
    r.lowered = MLP.lower(*params, x, t)  # waits for the kernel
    r.info_lowered = MLP.tier_info()
    r.hits = MLP.cache_info().hits
    r.kernel = MLP(*params, x, t)
    r.kernel_again = MLP(*params, x, t)
    r.info_kernel = MLP.tier_info()
    r.hits_kernel = MLP.cache_info().hits
    r.error_kernel = error_of(MLP, *params, x, r.bad)
    return r


def test_the_first_shape_is_compiled_before_returning(mlp):
    assert mlp.info_after_first == TierInfo(pending=0, interpreted_calls=0)


def test_second_shape_runs_tiered_and_equals_the_kernel_and_eager(mlp):
    assert mlp.info_tiered == TierInfo(pending=1, interpreted_calls=1)
    value, grads = mlp.tiered
    k_value, k_grads = mlp.kernel
    assert_close(value, k_value, rtol=1e-12, what="value: interpreter tier vs kernel")
    for g, kg in zip(grads, k_grads, strict=True):
        assert_close(g, kg, rtol=1e-10, atol=1e-14, what="grad: interpreter tier vs kernel")
    e_value, e_grads = eager_value_and_grads(mlp.params, mlp.x, mlp.t)
    assert_close(value, e_value, rtol=1e-12, what="value vs eager")
    for g, eg in zip(grads, e_grads, strict=True):
        assert_close(g, eg, rtol=1e-10, atol=1e-14, what="grad vs eager")


def test_interpreter_tier_gradient_matches_central_differences(mlp):
    assert_close(mlp.tiered[1][5], mlp.fd_b3, rtol=1e-6, atol=1e-9, what="d loss / d b3")


def test_lower_waits_for_the_kernel_which_then_answers(mlp):
    assert mlp.lowered.source is not None and "24" in mlp.lowered.source
    assert hasattr(mlp.lowered.kernel, "entry")  # a codegen Kernel
    assert mlp.info_lowered.pending == 0
    # no interpreter call after the build: each call was a plain cache hit
    assert mlp.info_kernel.interpreted_calls == mlp.info_lowered.interpreted_calls
    assert mlp.hits_kernel == mlp.hits + 2
    for a, b in zip(
        [mlp.kernel[0], *mlp.kernel[1]], [mlp.kernel_again[0], *mlp.kernel_again[1]], strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_out_of_range_labels_raise_the_same_error_in_both_tiers(mlp):
    assert mlp.info_before_wait.interpreted_calls > mlp.info_tiered.interpreted_calls
    assert mlp.error_tiered == mlp.error_kernel
    assert "take_along_axis" in mlp.error_tiered[1]


def test_shape_errors_are_the_same_as_without_a_kernel(mlp):
    wrong = np.ones((11, SIZES[0] + 1))
    t = np.zeros((11, 1), np.int64)
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")
    assert error_of(MLP, *mlp.params, wrong, t) == error_of(reference, *mlp.params, wrong, t)


# ---- shape-generic kernels (codegen/shape_generic.py): the second shape's build
# compiled the template of the first two shapes' sources; later shapes run it at once.


@pytest.fixture(scope="module")
def third(mlp):
    """A third batch size, after the second shape's kernel was built."""
    from types import SimpleNamespace

    assert MLP.wait_kernels(timeout=600)
    x, t = mlp_batch(20, seed=3)
    before = MLP.tier_info()
    out = MLP(*mlp.params, x, t)
    after = MLP.tier_info()

    def value_of(b3):
        return MLP(*mlp.params[:5], b3, x, t)[0]

    fd_b3 = numeric_grad(value_of, [mlp.params[5]], argnum=0)
    return SimpleNamespace(
        x=x,
        t=t,
        out=out,
        before=before,
        after=after,
        fd_b3=fd_b3,
        lowered=MLP.lower(*mlp.params, x, t),
    )


def test_second_shape_kernel_is_the_template_of_the_first_two(mlp):
    generic = getattr(mlp.lowered.kernel, "shape_generic", None)
    assert generic is not None
    assert "_S" in generic.template.text and "24" in mlp.lowered.source


def test_third_shape_runs_the_shape_generic_kernel_at_once(mlp, third):
    assert third.after == third.before  # no build queued, no interpreter call
    assert third.lowered.kernel.shape_generic is mlp.lowered.kernel.shape_generic
    value, grads = third.out
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")
    r_value, r_grads = reference(*mlp.params, third.x, third.t)
    e_value, e_grads = eager_value_and_grads(mlp.params, third.x, third.t)
    assert_close(value, r_value, rtol=1e-12, what="value: generic kernel vs interpreter")
    assert_close(value, e_value, rtol=1e-12, what="value: generic kernel vs eager")
    for g, rg, eg in zip(grads, r_grads, e_grads, strict=True):
        assert_close(g, rg, rtol=1e-10, atol=1e-14, what="grad: generic kernel vs interpreter")
        assert_close(g, eg, rtol=1e-10, atol=1e-14, what="grad: generic kernel vs eager")
    assert_close(grads[5], third.fd_b3, rtol=1e-6, atol=1e-9, what="d loss / d b3")


def test_out_of_range_labels_raise_the_same_error_from_the_generic_kernel(mlp, third):
    bad = third.t.copy()
    bad[5, 0] = -SIZES[-1] - 3
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")
    assert error_of(MLP, *mlp.params, third.x, bad) == error_of(
        reference, *mlp.params, third.x, bad
    )


def test_threads_with_new_shapes_on_one_generic_kernel_get_their_own_results(mlp, third):
    """Four threads call new batch sizes at once: each binds the one template to its
    own literals (loop bounds, workspace sizes and offsets, 1/n), and none may see
    another's sizes or buffers."""
    from concurrent.futures import ThreadPoolExecutor

    batches = {b: mlp_batch(b, seed=b) for b in (14, 18, 26, 30)}  # sizes no other test uses
    start = threading.Barrier(len(batches))

    def call(b):
        start.wait()
        return [MLP(*mlp.params, *batches[b]) for _ in range(3)]

    with ThreadPoolExecutor(len(batches)) as pool:
        results = dict(zip(batches, pool.map(call, batches), strict=True))
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")
    for b, runs in results.items():
        r_value, r_grads = reference(*mlp.params, *batches[b])
        assert (
            MLP.lower(*mlp.params, *batches[b]).kernel.shape_generic
            is mlp.lowered.kernel.shape_generic
        )
        for value, grads in runs:
            assert_close(value, r_value, rtol=1e-12, what=f"batch {b}: value in a thread")
            for g, rg in zip(grads, r_grads, strict=True):
                assert_close(g, rg, rtol=1e-10, atol=1e-14, what=f"batch {b}: grad in a thread")


def test_generic_kernel_equals_the_specialized_kernel(mlp):
    from tracegrad.codegen import shape_generic as sg

    x, t = mlp_batch(16)  # the first shape: its specialized kernel
    lowered = MLP.lower(*mlp.params, x, t)
    assert getattr(lowered.kernel, "shape_generic", None) is None
    emitted = sg.emit_for_matching(lowered.optimized)
    generic = sg.find(lowered.optimized, emitted, sg.Parsed(emitted.source), disk=False)
    assert generic is not None and generic.shape_generic is mlp.lowered.kernel.shape_generic
    arrays = [*mlp.params, x, np.ascontiguousarray(t)]
    for a, b in zip(generic(*arrays), lowered.kernel(*arrays), strict=True):
        assert_close(a, b, rtol=1e-12, atol=1e-15, what="generic vs specialized kernel")


@pytest.mark.numba_pass
def test_a_hot_shape_gets_its_specialized_kernel_in_the_background(mlp, third, monkeypatch):
    import time

    from tracegrad.codegen import shape_generic as sg

    monkeypatch.setattr(sg, "HOT_CALLS", 3)
    x, t = mlp_batch(22, seed=5)
    kernel = MLP.lower(*mlp.params, x, t).kernel
    assert kernel.shape_generic is not None and kernel.specialized is None
    first = [MLP(*mlp.params, x, t) for _ in range(3)][-1]
    deadline = time.monotonic() + 600
    while kernel.specialized is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kernel.specialized is not None
    assert getattr(kernel.specialized, "shape_generic", None) is None
    value, grads = MLP(*mlp.params, x, t)  # now through the specialized kernel
    assert_close(value, first[0], rtol=1e-12)
    for g, g0 in zip(grads, first[1], strict=True):
        assert_close(g, g0, rtol=1e-10, atol=1e-14)


@pytest.mark.numba_pass
def test_float32_shapes_run_the_shape_generic_kernel():
    def mlp_loss_f32(*args):  # a function of its own: not MLP's signatures
        return mlp_loss(*args)

    f32 = tg.value_and_grad(mlp_loss_f32, argnums=tuple(range(6)))
    params = [p.astype(np.float32) for p in mlp_params(seed=4)]
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")
    for batch in (16, 24, 20):
        x, t = mlp_batch(batch, seed=batch)
        value, grads = f32(*params, x.astype(np.float32), t)
        r_value, r_grads = reference(*params, x.astype(np.float32), t)
        assert_close(value, r_value, rtol=1e-5, what=f"f32 value, batch {batch}")
        for g, rg in zip(grads, r_grads, strict=True):
            assert g.dtype == np.float32
            assert_close(g, rg, rtol=1e-4, atol=1e-6, what=f"f32 grad, batch {batch}")
        assert f32.wait_kernels(timeout=600)
    lowered = f32.lower(
        *params, mlp_batch(20, seed=20)[0].astype(np.float32), mlp_batch(20, seed=20)[1]
    )
    assert getattr(lowered.kernel, "shape_generic", None) is not None


@pytest.mark.numba_pass
def test_a_gather_out_of_range_raises_the_interpreters_error_from_a_generic_kernel():
    def gather_loss(x, idx):  # its kernel's IndexError message names the size
        return tg.sum(x[idx] * tg.log1p(x[idx] ** 2))

    f = tg.value_and_grad(gather_loss)
    reference = tg.value_and_grad(gather_loss, backend="interpret")
    for n in (6, 9, 12):
        x, idx = np.linspace(-1.0, 1.0, n), np.arange(n // 2)
        assert f.wait_kernels(timeout=600)
        value, grad = f(x, idx)
        r_value, r_grad = reference(x, idx)
        assert_close(value, r_value, rtol=1e-12)
        assert_close(grad, r_grad, rtol=1e-12, atol=1e-15)
    assert getattr(f.lower(x, idx).kernel, "shape_generic", None) is not None
    bad = idx.copy()
    bad[1] = n + 4
    assert error_of(f, x, bad) == error_of(reference, x, bad)
    assert "getitem" in error_of(f, x, bad)[1]


SHAPES_CHILD = textwrap.dedent(r"""
    import sys, time
    import numpy as np
    import tracegrad as tg
    sys.path.insert(0, sys.argv[2])
    from test_new_shapes import mlp_loss, mlp_params, mlp_batch
    F = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)))
    params = mlp_params()
    reference = tg.value_and_grad(mlp_loss, argnums=tuple(range(6)), backend="interpret")

    def run(batch):
        x, t = mlp_batch(batch, seed=batch)
        t0 = time.perf_counter()
        value, grads = F(*params, x, t)
        seconds = time.perf_counter() - t0
        r_value, r_grads = reference(*params, x, t)
        assert abs(value - r_value) <= 1e-12 * abs(r_value)
        for g, rg in zip(grads, r_grads):
            np.testing.assert_allclose(g, rg, rtol=1e-10, atol=1e-14)
        kernel = F.lower(*params, x, t).kernel
        return seconds, getattr(kernel, "shape_generic", None)

    first, _ = run(16)
    if sys.argv[1] == "ahead":
        assert F.lower(*params, *mlp_batch(16)).shapes_ahead.wait(600)
    for batch in (12, 28):
        seconds, generic = run(batch)
        hits = sum(generic.fn.stats.cache_hits.values()) if generic else -1
        print(f"batch {batch}: {seconds:.3f} s generic {generic is not None} "
              f"numba cache hits {hits} tier {F.tier_info()}", flush=True)
    print("OK", flush=True)
""")


@pytest.mark.slow
def test_a_fresh_process_runs_new_shapes_on_the_cached_generic_kernel(mlp, run_script):
    assert MLP.wait_kernels(timeout=600)
    out = run_script(
        SHAPES_CHILD,
        "shapes",
        os.path.dirname(__file__),
        cache_dir=os.environ["TRACEGRAD_CACHE_DIR"],
        unset=["TRACEGRAD_TIERED"],
        TRACEGRAD_SHAPE_GENERIC="shapes",
    )
    # both new batch sizes: the template from the disk cache (Numba's cache, no compile),
    # no interpreter call and nothing left to build
    assert out.count("generic True numba cache hits 1") == 2, out
    assert "TierInfo(pending=0, interpreted_calls=0)" in out.splitlines()[-2], out


@pytest.mark.slow
def test_ahead_mode_serves_the_second_shape_with_the_generic_kernel(tmp_path, run_script):
    out = run_script(
        SHAPES_CHILD,
        "ahead",
        os.path.dirname(__file__),
        cache_dir=tmp_path / "cache",
        unset=["TRACEGRAD_TIERED"],
        TRACEGRAD_SHAPE_GENERIC="ahead",
    )
    assert out.count("generic True") == 2, out
    assert "TierInfo(pending=0, interpreted_calls=0)" in out.splitlines()[-2], out


def test_many_shapes_in_quick_succession():
    SMALL(np.linspace(-1, 1, 3))
    xs = [np.linspace(-2, 2, n) for n in range(4, 8)]
    first = [SMALL(x) for x in xs]
    assert SMALL.tier_info().pending >= 1
    for x, (v, g) in zip(xs, first, strict=True):
        assert_close(v, 1.375 * np.sum(np.tanh(x) * x), rtol=1e-13)
        assert_close(g, 1.375 * (np.tanh(x) + x * (1 - np.tanh(x) ** 2)), rtol=1e-13)
    assert SMALL.wait_kernels(timeout=600)
    assert SMALL.tier_info().pending == 0
    calls = SMALL.tier_info().interpreted_calls
    for x, (v, g) in zip(xs, first, strict=True):
        kv, kg = SMALL(x)
        assert_close(kv, v, rtol=1e-13)
        assert_close(kg, g, rtol=1e-13)
    assert SMALL.tier_info().interpreted_calls == calls
    assert SMALL.cache_info().traces == 1 + len(xs)


def test_threads_call_while_the_background_build_runs():
    SMALL(np.linspace(-1, 1, 3))
    shapes = [np.linspace(-1.5, 1.5, n) for n in (21, 22)]
    errors = []
    lowered = []

    def caller(k):
        try:
            for i in range(40):
                x = shapes[(i + k) % 2]
                v, g = SMALL(x)
                np.testing.assert_allclose(v, 1.375 * np.sum(np.tanh(x) * x), rtol=1e-13)
                np.testing.assert_allclose(
                    g, 1.375 * (np.tanh(x) + x * (1 - np.tanh(x) ** 2)), rtol=1e-13
                )
            lowered.append(SMALL.lower(shapes[k % 2]))  # waits for its kernel
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    assert not any(th.is_alive() for th in threads), "a caller hung"
    assert not errors, errors
    assert all(lw.source is not None for lw in lowered)
    assert SMALL.wait_kernels(timeout=300)


def error_of(fn, *args):
    with pytest.raises(TracegradError) as info:
        fn(*args)
    return type(info.value), str(info.value)


def test_check_finite_errors_are_the_same_in_both_tiers():
    LOG(np.array([1.0, 2.0]))
    x = np.array([1.0, -2.0, 3.0])
    LOG(np.array([1.0, 2.0, 4.0]))  # a new shape: tiered
    assert LOG.tier_info().pending == 1
    tiered = error_of(LOG, x)
    assert tiered[0] is NonFiniteError and "NaN" in tiered[1]
    assert LOG.wait_kernels(timeout=300)
    calls = LOG.tier_info().interpreted_calls
    assert error_of(LOG, x) == tiered
    assert LOG.tier_info().interpreted_calls == calls
    v, g = LOG(np.array([1.0, 2.0, 4.0]))
    assert_close(g, 0.625 * (np.log([1.0, 2.0, 4.0]) + 1), rtol=1e-13)


def test_tiering_switch(monkeypatch):
    f = tg.value_and_grad(lambda x: tg.sum(x * x * 3.0))
    monkeypatch.setenv("TRACEGRAD_TIERED", "0")
    f(np.ones(2))
    f(np.ones(3))  # compiled before returning
    assert f.tier_info() == TierInfo(0, 0)
    monkeypatch.setenv("TRACEGRAD_TIERED", "always")
    g = tg.compile(lambda x: x * 5.0)
    assert_close(g(np.ones(2)), [5.0, 5.0])  # even the first signature
    assert g.tier_info().interpreted_calls == 1
    assert g.lower(np.ones(2)).source is not None
    assert_close(g(np.ones(2)), [5.0, 5.0])
    assert g.tier_info() == TierInfo(0, 1)
    monkeypatch.setenv("TRACEGRAD_TIERED", "sometimes")
    from tracegrad import config

    config._warned.discard("TRACEGRAD_TIERED")
    with pytest.warns(RuntimeWarning, match="TRACEGRAD_TIERED='sometimes'"):
        assert config.tiered_mode() == "first"


CHILD = textwrap.dedent(r"""
    import multiprocessing as mp, sys
    import numpy as np
    import tracegrad as tg

    def loss(x):
        return tg.sum(tg.exp(-x) * x)

    F = tg.value_and_grad(loss)

    def check(x):
        v, g = F(x)
        assert abs(v - np.sum(np.exp(-x) * x)) < 1e-12
        assert np.allclose(g, np.exp(-x) * (1 - x), rtol=1e-12)

    def child(queue):
        try:
            x = np.linspace(0.0, 1.0, 7)
            check(x)                              # the interpreter tier, or the kernel
            assert F.lower(x).source is not None  # the build, redone in this process
            check(x)
            assert F.tier_info().pending == 0
            queue.put("ok")
        except BaseException as exc:
            queue.put(repr(exc))

    if __name__ == "__main__":
        check(np.linspace(0.0, 1.0, 5))          # the first shape: its kernel
        check(np.linspace(0.0, 1.0, 7))          # a second shape: built in the background
        print("in flight:", F.tier_info().pending == 1, flush=True)
        if sys.argv[1] == "fork":
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            proc = ctx.Process(target=child, args=(queue,))
            proc.start()
            proc.join(120)
            if proc.is_alive():
                proc.kill()
                print("HANG")
                sys.exit(1)
            result = queue.get(timeout=10)
            assert result == "ok" and proc.exitcode == 0, (result, proc.exitcode)
            assert F.wait_kernels(timeout=120)
            check(np.linspace(0.0, 1.0, 7))
        print("OK", flush=True)                 # "exit": leave while the build may run
""")


def test_process_exit_during_a_background_build(run_script):
    out = run_script(CHILD, "exit", unset=["TRACEGRAD_TIERED"], timeout=280)
    assert "in flight: True" in out


def test_fork_during_a_background_build(run_script):
    out = run_script(CHILD, "fork", unset=["TRACEGRAD_TIERED"], timeout=280)
    assert "in flight: True" in out


def test_background_builder_docstring_example():
    import doctest

    import tracegrad.codegen.background as background

    assert doctest.testmod(background).failed == 0
