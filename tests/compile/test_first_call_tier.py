"""Issue 25: a compiled function's first call answers on the NumPy interpreter while its
Numba kernel builds in the background (TRACEGRAD_TIERED=first, the default), then the
kernel takes over.

The tests hold the first result against the kernel's (float64, the tolerances
test_new_shapes.py uses for interpreter vs kernel) and against the formula; check that
the kernel replaces the interpreter on its own (no `wait_kernels`, no `lower`): the
interpreter's call count stops, the entry becomes a plain kernel entry, the fast path
serves it; that a graph the interpreter would run slowly (a long scan) builds first;
when tiering applies (a named backend waits for its kernel); and that exit during a
build is quick and clean.

The test session names a backend (tests/conftest.py sets TRACEGRAD_BACKEND), so first
calls elsewhere in the suite are not tiered; this file unsets it.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from compile_helpers import assert_close

import tracegrad as tg
import tracegrad.compiler as compiler
from tracegrad.compiler import TierInfo, interpreter_seconds


@pytest.fixture
def default_settings(monkeypatch, tmp_path):
    """The user's defaults: no backend named, TRACEGRAD_TIERED unset, an empty cache."""
    monkeypatch.delenv("TRACEGRAD_BACKEND", raising=False)
    monkeypatch.delenv("TRACEGRAD_TIERED", raising=False)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))


def loss(w, x):  # (constants no other test uses: the kernel is this file's own)
    h = tg.tanh(x @ w) * 1.8125
    return tg.sum(h * h) + 0.4375 * tg.sum(w * w)


def expected(w, x):
    h = np.tanh(x @ w) * 1.8125
    value = np.sum(h * h) + 0.4375 * np.sum(w * w)
    dh = 2 * h * 1.8125 * (1 - np.tanh(x @ w) ** 2)
    return value, x.T @ dh + 0.875 * w


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((6, 3)), rng.standard_normal((5, 6))


@pytest.mark.numba
def test_first_call_answers_on_the_interpreter_then_the_kernel_replaces_it(default_settings):
    f = tg.value_and_grad(loss)
    w, x = inputs()
    value, grad = f(w, x)  # the interpreter tier
    assert f.tier_info() == TierInfo(pending=1, interpreted_calls=1)
    ref_value, ref_grad = expected(w, x)
    assert_close(value, ref_value, rtol=1e-12, what="tiered value vs formula")
    assert_close(grad, ref_grad, rtol=1e-10, atol=1e-14, what="tiered grad vs formula")

    # the kernel arrives with nobody waiting for it through the function...
    (entry,) = f.entries.values()
    assert isinstance(entry, compiler._TieredEntry)
    assert entry.build._released.is_set()  # held until the first result was out
    assert entry.build.wait(timeout=600) and entry.build.kernel is not None
    # ...and the next call runs it and puts it in the interpreter's place
    k_value, k_grad = f(w, x)
    assert f.tier_info() == TierInfo(pending=0, interpreted_calls=1)
    (entry,) = f.entries.values()
    assert type(entry) is compiler._Entry and hasattr(entry.kernel, "entry")
    assert_close(value, k_value, rtol=1e-12, what="value: interpreter tier vs kernel")
    assert_close(grad, k_grad, rtol=1e-10, atol=1e-14, what="grad: interpreter tier vs kernel")
    # the fast path now serves the kernel: hits grow, the interpreter is not called
    hits = f.cache_info().hits
    for _ in range(3):
        again = f(w, x)
    assert f.cache_info().hits == hits + 3
    assert f.tier_info().interpreted_calls == 1
    assert_close(again[1], k_grad, rtol=0, atol=0, what="kernel vs kernel")
    assert f.lower(w, x).source is not None  # the real kernel's generated source


@pytest.mark.numba_pass  # (a scan kernel's compile: seconds)
def test_a_graph_the_interpreter_runs_slowly_builds_its_kernel_first(default_settings):
    def long_scan(c, xs):
        def step(carry, x):
            return tg.tanh(carry * 0.96875 + x), None

        final, _ = tg.scan(step, c, xs)
        return tg.sum(final)

    c, xs = np.ones(3), np.linspace(-1, 1, 30_000 * 3).reshape(30_000, 3)
    f = tg.compile(long_scan)
    traced = tg.trace(long_scan, c, xs)
    assert interpreter_seconds(traced) > compiler.TIER_MAX_SECONDS
    out = f(c, xs)
    assert f.tier_info() == TierInfo(pending=0, interpreted_calls=0)  # built before returning
    carry = c
    for x in xs:
        carry = np.tanh(carry * 0.96875 + x)
    assert_close(out, carry.sum(), rtol=1e-12)


def test_interpreter_estimate_counts_loop_steps_and_elements():
    def body(carry, x):
        return carry * 2.0 + x, None

    def scanned(n):
        return tg.trace(lambda c, xs: tg.scan(body, c, xs)[0], np.ones(4), np.ones((n, 4)))

    short, long = interpreter_seconds(scanned(10)), interpreter_seconds(scanned(1000))
    per_step = (long - short) / 990
    # a body of two nodes on 4 elements, run once per step
    assert per_step == pytest.approx(2 * (compiler.INTERPRETER_NODE_S + 4 * 2.5e-9), rel=0.5)
    small = interpreter_seconds(tg.trace(lambda x: tg.exp(x), np.ones(10)))
    big = interpreter_seconds(tg.trace(lambda x: tg.exp(x), np.ones(10**6)))
    assert big - small == pytest.approx((10**6 - 10) * compiler.INTERPRETER_ELEMENT_S)


@pytest.mark.parametrize(
    "env, backend, has_kernel, want",
    [
        ({}, None, False, "if_cheap"),  # the default: first calls tier if cheap
        ({}, None, True, "always"),  # a new shape of a function with a kernel
        ({"TRACEGRAD_BACKEND": "numba"}, None, False, None),  # a named backend waits
        ({}, "numba", False, None),
        ({"TRACEGRAD_BACKEND": "numba"}, None, True, "always"),
        ({"TRACEGRAD_TIERED": "shapes"}, None, False, None),
        ({"TRACEGRAD_TIERED": "shapes"}, None, True, "always"),
        ({"TRACEGRAD_TIERED": "always"}, "numba", False, "always"),
        ({"TRACEGRAD_TIERED": "0"}, None, True, None),
        ({"TRACEGRAD_BACKEND": "interpret"}, None, False, None),
    ],
)
def test_tier_policy(monkeypatch, env, backend, has_kernel, want):
    for name in ("TRACEGRAD_BACKEND", "TRACEGRAD_TIERED"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    f = compiler.CompiledFunction(lambda x: x * 3.0, "compile", backend=backend)  # unshared
    if has_kernel:

        class Lowered:
            backend = "numba"

        entry = object.__new__(compiler._Entry)
        entry.lowered = Lowered()
        f.entries.add(("a kernel",), entry)
    assert f._tier_policy() == want


# The children's common start: tracegrad's log messages kept in `messages`.
LOG_KEPT = textwrap.dedent(r"""
    import logging, sys, time
    import numpy as np
    import tracegrad as tg

    messages = []
    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())
    logging.getLogger("tracegrad").addHandler(Keep())
    logging.getLogger("tracegrad").setLevel(logging.INFO)
""")

EXIT_CHILD = LOG_KEPT + textwrap.dedent(r"""

    f = tg.value_and_grad(lambda x: tg.sum(tg.sinh(x) * x * 0.8125))
    x = np.linspace(0.0, 1.0, 9)
    v, g = f(x)
    assert abs(v - np.sum(np.sinh(x) * x * 0.8125)) < 1e-12
    print("tiered:", f.tier_info(), flush=True)
    if sys.argv[1] == "second":  # the kernel is loaded from the disk cache, not compiled
        assert f.wait_kernels(timeout=300)
        loads = [m for m in messages if m.startswith("codegen") and "numba" in m]
        assert loads and all("cache load" in m for m in loads), messages
    print("OK", flush=True)
""")


def test_exit_during_a_first_call_build_is_quick_and_clean(run_script):
    out = run_script(
        EXIT_CHILD,
        "first",
        unset=["TRACEGRAD_BACKEND", "TRACEGRAD_TIERED"],
        TRACEGRAD_EXIT_WAIT="0",
        timeout=120,
    )
    assert "tiered: TierInfo(pending=1, interpreted_calls=1)" in out


@pytest.mark.numba_pass
def test_exit_lets_the_build_finish_so_the_next_process_loads_the_kernel(run_script, tmp_path):
    cache = tmp_path / "shared-cache"
    unset = ["TRACEGRAD_BACKEND", "TRACEGRAD_TIERED"]
    first = run_script(EXIT_CHILD, "first", cache_dir=cache, unset=unset, TRACEGRAD_EXIT_WAIT="600")
    assert "interpreted_calls=1" in first
    run_script(EXIT_CHILD, "second", cache_dir=cache, unset=unset)


def test_a_held_build_starts_only_once_released(monkeypatch):
    from tracegrad.codegen import background

    monkeypatch.setattr(background, "HOLD_MAX_S", 60.0)
    started = []
    build = background.submit(None, builder=lambda: started.append(1) or "kernel", hold=True)
    other = background.submit(None, builder=lambda: "next")  # queued behind it
    assert not other.wait(timeout=0.3) and not started  # held (not a lost wake-up: 60 s)
    build.release()
    assert build.wait(timeout=60) and other.wait(timeout=60)
    assert started == [1] and build.kernel == "kernel" and other.kernel == "next"


def test_wait_idle_releases_held_builds_and_waits_for_the_queue(monkeypatch):
    import threading

    from tracegrad.codegen import background

    monkeypatch.setattr(background, "HOLD_MAX_S", 60.0)
    gate = threading.Event()
    held = background.submit(None, builder=lambda: "held", hold=True)
    slow = background.submit(None, builder=lambda: gate.wait(60) and "slow")
    assert not background.wait_idle(timeout=0.3)  # `slow` runs until the gate opens
    assert held.done and held.kernel == "held"  # released, not left for 60 s
    gate.set()
    assert background.wait_idle(timeout=60) and background.pending() == 0
    assert slow.kernel == "slow"


@pytest.mark.numba_pass  # (Numba's parallel compile: seconds)
def test_the_parallel_variant_is_built_from_the_kernels_first_call(monkeypatch, tmp_path):
    from tracegrad.codegen import build_kernel
    from tracegrad.codegen.emit import PARALLEL_MIN_ELEMENTS
    from tracegrad.runtime import threads

    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRACEGRAD_PARALLEL", "background")
    x = np.linspace(0.0, 1.0, PARALLEL_MIN_ELEMENTS)
    graph = tg.trace(lambda x: tg.sum(tg.cosh(x) * x * 0.6875), x)
    kernel = build_kernel(graph)
    assert getattr(kernel, "_parallel_thread", None) is None  # not before a call
    (serial,) = kernel(x)
    assert kernel._parallel_thread is not None  # the first call started it
    assert kernel.wait_parallel(timeout=600) and "prange(" in kernel.parallel_source
    (parallel,) = kernel(x)
    np.testing.assert_allclose(parallel, serial, rtol=1e-10)  # (another summation order)
    np.testing.assert_allclose(serial, np.sum(np.cosh(x) * x * 0.6875), rtol=1e-10)

    monkeypatch.setattr(threads, "get_num_threads", lambda: 1)  # one thread: never built
    one = build_kernel(tg.trace(lambda x: tg.sum(tg.cosh(x) * x * 0.3125), x))
    one(x)
    one(x)
    assert getattr(one, "_parallel_thread", None) is None and not one.wait_parallel()


WARM_CHILD = LOG_KEPT + textwrap.dedent(r"""

    f = tg.value_and_grad(lambda x: tg.sum(tg.cosh(x) * x * 0.6875))
    x = np.linspace(0.0, 1.0, 7)
    v, g = f(x)
    assert abs(v - np.sum(np.cosh(x) * x * 0.6875)) < 1e-12
    assert f.wait_kernels(timeout=300)
    v2, g2 = f(x)  # the kernel's
    assert f.tier_info().interpreted_calls == 1
    assert abs(v2 - v) < 1e-12 and np.allclose(g2, g, rtol=1e-10, atol=1e-12)
    if sys.argv[1] == "warm":
        loads = [m for m in messages if m.startswith("codegen")]
        # the index maps the traced graph to the kernel's module: no code generation,
        # and Numba's cache load rebuilds it without refreshing its target context
        assert loads and all("index hit" in m and "numba cache load" in m for m in loads), loads
        assert "tracegrad.codegen.generate" not in sys.modules
        import numba
        from tracegrad.runtime.numba_cache import LIGHT_LOAD_NUMBA
        if tuple(int(p) for p in numba.__version__.split(".")[:2]) in LIGHT_LOAD_NUMBA:
            assert "numba.np.arraymath" not in sys.modules
    print("OK", flush=True)
""")


@pytest.mark.numba_pass
def test_a_warm_first_call_loads_its_kernel_through_the_index(run_script, tmp_path):
    """A warm cache's tiered first call: the interpreter answers, and the background
    build takes the kernel from the cache index (as the untiered path does) instead of
    generating the source to find its module; the load refreshes nothing in Numba."""
    cache = tmp_path / "shared-cache"
    unset = ["TRACEGRAD_BACKEND", "TRACEGRAD_TIERED"]
    run_script(WARM_CHILD, "cold", cache_dir=cache, unset=unset, TRACEGRAD_EXIT_WAIT="600")
    run_script(WARM_CHILD, "warm", cache_dir=cache, unset=unset)
