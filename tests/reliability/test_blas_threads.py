"""BLAS threads at most the idle CPUs during tracegrad's own calls, put back after
(tracegrad/ops/blas_threads.py)."""

import numpy as np
import pytest

from tracegrad.ops import blas_threads, parallel


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("TRACEGRAD_BLAS_FOLLOW_LOAD", raising=False)
    blas_threads.reset()
    yield monkeypatch
    blas_threads.reset()


def _library_threads() -> list[int]:
    import ctypes

    counts = []
    for path, _setter, _start in blas_threads._libraries or ():
        lib = ctypes.CDLL(path)
        getter = next(getattr(lib, n) for n in blas_threads._GETTERS if hasattr(lib, n))
        getter.restype = ctypes.c_int
        counts.append(getter())
    return counts


def test_threads_are_lowered_for_the_call_and_put_back(fresh):
    np.ones((4, 4)) @ np.ones((4, 4))  # NumPy's OpenBLAS is loaded
    if not blas_threads._refresh_libraries():
        pytest.skip("no OpenBLAS with a thread-count API in this process")
    starts = _library_threads()
    fresh.setattr(blas_threads, "threads_now", lambda: 1)
    blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)  # as on a multi-core machine
    inside = []
    blas_threads.limited(lambda: inside.append(_library_threads()))()
    assert inside == [[1] * len(starts)]
    assert _library_threads() == starts  # put back after the call
    fresh.setattr(blas_threads, "threads_now", lambda: 64)
    blas_threads.limited(lambda: inside.append(_library_threads()))()
    assert inside[-1] == starts  # never more than the library has


def test_the_switch_turns_it_off(fresh):
    fresh.setenv("TRACEGRAD_BLAS_FOLLOW_LOAD", "0")
    assert blas_threads.follow_load() is None and blas_threads.enter() is None


def test_eager_matmul_results_do_not_depend_on_the_thread_count(fresh):
    import tracegrad.eager as torch

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
    fresh.setattr(blas_threads, "threads_now", lambda: 1)
    one = torch.tensor(a) @ torch.tensor(b)
    np.testing.assert_allclose(one.numpy(), a @ b, rtol=1e-12)


def test_own_threads_are_not_counted_as_load():
    from tracegrad.runtime import threads

    assert parallel._own_threads_running() >= 0
    assert 1 <= parallel.threads_now() <= threads.get_num_threads()


class _Spinner:
    """A thread that is not tracegrad's, runnable until `stop()`, then asleep (still
    alive) until the `with` block ends. Hashing a large buffer releases the GIL."""

    def __init__(self):
        import threading

        self._stop, self._resting, self._exit = (threading.Event() for _ in range(3))
        self._ids: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import hashlib
        import threading

        self._ids.append(str(threading.get_native_id()))
        data = b"x" * (1 << 22)
        while not self._stop.is_set():
            hashlib.sha256(data).digest()
        self._resting.set()
        self._exit.wait()

    def __enter__(self):
        self._thread.start()
        while not self._ids:
            pass
        return self

    @property
    def tid(self) -> str:
        return self._ids[0]

    def stop(self):
        self._stop.set()
        assert self._resting.wait(10)

    def __exit__(self, *exc):
        self._stop.set()
        self._exit.set()
        self._thread.join()


def _running_counts(samples: int = 60) -> int:
    import time

    total = 0
    for _ in range(samples):
        total += parallel._own_threads_running()
        time.sleep(0.001)
    return total


def test_another_runtimes_running_thread_is_load(monkeypatch):
    """A thread that was not there when tracegrad was imported (another library's pool,
    spinning) is not subtracted from the runnable tasks; the import-time threads are.
    Where an import-time thread has ended (a fork restarts OpenBLAS's pool), every
    thread counts as ours again."""
    import os

    from tracegrad.runtime import threads

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc")
    with _Spinner() as spinner:
        everyone = set(os.listdir("/proc/self/task"))
        monkeypatch.setattr(threads, "startup_thread_ids", lambda: everyone)
        as_ours = _running_counts()
        monkeypatch.setattr(threads, "startup_thread_ids", lambda: everyone - {spinner.tid})
        as_load = _running_counts()
        monkeypatch.setattr(threads, "startup_thread_ids", lambda: everyone | {"999999999"})
        after_fork = _running_counts()
    assert as_ours >= 30, "the spinning thread should be runnable most of the time"
    assert as_load <= as_ours - 25
    assert after_fork >= 30


def test_numpy_blas_workers_stay_ours_across_a_fork():
    """OpenBLAS stops its pool before a fork; tracegrad starts NumPy's again in the
    parent and counts the new workers as its own, so they never look like another
    runtime's threads (which would cost the kernels their second BLAS thread)."""
    import multiprocessing
    import os

    from tracegrad.runtime import numpy_openblas, threads

    np.ones((300, 300)) @ np.ones((300, 300))
    ours = [
        lib
        for lib in blas_threads._refresh_libraries()
        if os.path.realpath(lib[0]) == numpy_openblas.path()
    ]
    if not ours or ours[0][2]() < 2 or not threads.startup_thread_ids():
        pytest.skip("no threaded NumPy OpenBLAS, or no /proc")
    before = set(threads.startup_thread_ids())
    assert before <= threads.thread_ids()
    child = multiprocessing.get_context("fork").Process(target=int)
    child.start()
    child.join()
    assert child.exitcode == 0
    after = threads.startup_thread_ids()
    assert after <= threads.thread_ids()  # nothing stale: no fall back to the old rule
    assert after - before, "the restarted workers were adopted"


def test_foreign_threads_are_busy_while_one_runs_and_idle_after(monkeypatch):
    """`foreign_threads_busy` (which gates the BLAS cap beside another runtime) says
    whether a thread that is not tracegrad's ran lately: a spinning one makes it true,
    and a second after the spinning stopped (sleeping threads only) it is false."""
    import os
    import time

    from tracegrad.runtime import threads

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc")
    with _Spinner() as spinner:
        # every other thread (the test runner's come and go) counts as tracegrad's
        monkeypatch.setattr(
            threads,
            "startup_thread_ids",
            lambda: set(os.listdir("/proc/self/task")) - {spinner.tid},
        )
        parallel._foreign_busy_at[0] = -1e9
        parallel._own_threads_running()
        assert parallel.foreign_threads_busy(within=1.0)
        time.sleep(0.1)  # a few CPU ticks
        spinner.stop()
        time.sleep(0.05)
        parallel._own_threads_running()  # its ticks at rest
        parallel._foreign_busy_at[0] = -1e9
        time.sleep(0.05)
        parallel._own_threads_running()  # no tick since: not busy
        assert not parallel.foreign_threads_busy(within=1.0)
        # ticks that grew since a look 5 s ago may be 5 s old: not busy within the last second
        parallel._foreign_ticks[spinner.tid] = 0
        parallel._foreign_ticks_at[0] = time.monotonic() - 5
        parallel._own_threads_running()
        assert not parallel.foreign_threads_busy(within=1.0)
        assert parallel.foreign_threads_busy(within=10.0)
    # where the threads cannot be told apart (after a fork), it answers busy
    monkeypatch.setattr(threads, "startup_thread_ids", lambda: {"999999999"})
    parallel._own_threads_running()
    assert parallel.foreign_threads_busy(within=1.0)


def test_kernels_limit_blas_for_the_call(monkeypatch):
    from tracegrad import codegen

    calls = []
    entry = lambda *a: calls.append("kernel") or "k"
    monkeypatch.setattr(blas_threads, "enter", lambda cap=None: calls.append("enter") or ["saved"])
    monkeypatch.setattr(blas_threads, "leave", lambda saved: calls.append(("leave", saved)))
    wrapped = codegen._load_aware(entry, calls_blas=True)
    assert wrapped() == "k" and calls == ["enter", "kernel", ("leave", ["saved"])]
    # a kernel with no BLAS call and no parallel variant is called directly
    assert codegen._load_aware(entry, calls_blas=False) is entry
    # (the parallel/serial choice: tests/reliability/test_threads_neighbours.py)


def test_a_gemm_kernel_limits_blas_threads_while_it_runs(fresh):
    """A (512, 64) @ (64, 64) product (attention's projections) is 2**21 multiply-adds:
    where another runtime's pool shares the process, one BLAS thread while the kernel
    runs, however many are idle; alone, the idle CPUs. The count is put back."""
    import tracegrad as tg

    np.ones((4, 4)) @ np.ones((4, 4))  # NumPy's OpenBLAS is loaded
    caps, inside = [], []
    real_enter, real_leave = blas_threads.enter, blas_threads.leave
    fresh.setattr(blas_threads, "enter", lambda cap=None: caps.append(cap) or real_enter(cap))
    fresh.setattr(
        blas_threads, "leave", lambda saved: inside.append(_library_threads()) or real_leave(saved)
    )
    fresh.setattr(blas_threads, "threads_now", lambda: 2)  # both cores idle
    f = tg.compile(lambda a, b: tg.tanh(a @ b))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 64)), rng.standard_normal((64, 64))
    np.testing.assert_allclose(f(a, b), np.tanh(a @ b), rtol=1e-12)
    assert "tg_gemm(" in f.lower(a, b).source and caps and set(caps) == {1}
    blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)  # as on a multi-core machine
    starts = _library_threads()
    fresh.setattr(blas_threads, "neighbour_pools", lambda: True)
    fresh.setattr(blas_threads, "foreign_threads_busy", lambda: True)
    np.testing.assert_allclose(f(a, b), np.tanh(a @ b), rtol=1e-12)
    assert inside and inside[-1] == [1] * len(starts)
    assert _library_threads() == starts
    inside.clear()
    # the runtime is imported but none of its threads ran lately: nothing lowered
    fresh.setattr(blas_threads, "foreign_threads_busy", lambda: False)
    np.testing.assert_allclose(f(a, b), np.tanh(a @ b), rtol=1e-12)
    assert inside == []
    fresh.setattr(blas_threads, "foreign_threads_busy", lambda: True)
    fresh.setattr(blas_threads, "neighbour_pools", lambda: False)
    np.testing.assert_allclose(f(a, b), np.tanh(a @ b), rtol=1e-12)
    assert inside == []  # alone in the process: nothing lowered, nothing to put back


def test_neighbour_pools_are_other_runtimes_in_sys_modules(fresh):
    import sys
    import types

    fresh.setattr(blas_threads, "NEIGHBOUR_RUNTIMES", ("tg_fake_runtime",))
    assert not blas_threads.neighbour_pools()
    fresh.setitem(sys.modules, "tg_fake_runtime", types.ModuleType("tg_fake_runtime"))
    assert blas_threads.neighbour_pools()
    fresh.delitem(sys.modules, "tg_fake_runtime")
    assert blas_threads.neighbour_pools()  # once seen, kept (modules are not unloaded)


def test_blas_threads_follow_the_largest_call():
    """One BLAS thread per 2**22 multiply-adds of a kernel's largest call; no limit
    when the sizes are unknown or OpenBLAS keeps every call on one thread itself."""
    from tracegrad.codegen.kernel import BLAS_WORK_PER_THREAD, blas_thread_cap

    def gemm(m, n, k):
        return f"    tg_gemm(0, 1, {m}, {n}, {k}, a_f, 0, {k}, b_f, 0, {k}, 0.0, c, 0, {n})\n"

    assert blas_thread_cap("    x = a + b\n") is None  # no BLAS call
    assert blas_thread_cap(gemm(16, 16, 16)) is None  # below OpenBLAS's own threshold
    assert blas_thread_cap(gemm(512, 64, 64)) == 1  # attention's projections
    assert blas_thread_cap(gemm(128, 128, 256)) == 1  # exactly 2**22
    assert blas_thread_cap(gemm(128, 128, 257)) == 2
    assert blas_thread_cap(gemm(4096, 256, 784)) == -(-4096 * 256 * 784 // BLAS_WORK_PER_THREAD)
    assert blas_thread_cap(gemm(512, 64, 64) + gemm(1024, 1024, 1024)) == 256  # the largest
    # the GP workload: potrf, trsm, trmm and trsv at order 256
    gp = (
        "    info = tg_potrf(256, ws, 0)\n"
        "    tg_trsm(1, 1, 0, 256, 256, ws, 0, 256, ws, 262144, 256)\n"
        "    tg_trmm(1, 1, 0, 256, 256, ws, 0, 256, ws, 131072, 256)\n"
        "    tg_trsv(1, 0, 0, 256, ws, 0, 256, ws, 327680)\n"
    )
    assert blas_thread_cap(gp) == 2  # trsm: 256**3 / 2
    assert blas_thread_cap(gp.replace("256", "1024")) == 128
    # a size that is a template parameter, or a LAPACK routine this does not size
    assert (
        blas_thread_cap("    tg_gemm(0, 0, _s[0], 64, 64, a, 0, 64, b, 0, 64, 0.0, c, 0, 64)\n")
        is None
    )
    assert blas_thread_cap(gemm(512, 64, 64) + "    info = tg_getrf(256, ws, 0, piv, 0)\n") is None


def _wants_parallel(batch: int) -> bool:
    """Whether the kernel of relu(x @ W) over a (batch, 512) @ (512, 512) product
    (loops of batch * 512 elements) would get a prange variant. Generation only."""
    from codegen_helpers import GraphMaker

    from tracegrad.codegen import _generate

    gm = GraphMaker("gemm_then_loop")
    x = gm.input((batch, 512), "float64", "x")
    w = gm.input((512, 512), "float64", "w")
    y = gm.op("exp", gm.op("matmul", x, w))
    graph = gm.output(gm.op("sum", y, axis=None, keepdims=False))
    return _generate(graph, "kernel_check").wants_parallel


def test_no_prange_variant_beside_a_threaded_gemm(monkeypatch):
    """OpenBLAS threads a GEMM this big (M*N*K = 2**28); Numba's OpenMP workers
    would spin on the cores its workers need (codegen/structured.BLAS_THREADED_MNK)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "codegen"))
    from tracegrad.codegen.emit import PARALLEL_MIN_ELEMENTS
    from tracegrad.codegen.structured import BLAS_THREADED_MNK

    batch = 1024  # loops of 2**19 elements: above PARALLEL_MIN_ELEMENTS
    assert batch * 512 >= PARALLEL_MIN_ELEMENTS and batch * 512 * 512 >= BLAS_THREADED_MNK
    assert not _wants_parallel(batch)
    # the same kernel, were BLAS single-threaded there, keeps its prange variant
    from tracegrad.codegen import structured

    monkeypatch.setattr(structured, "BLAS_THREADED_MNK", 1 << 62)
    assert _wants_parallel(batch)


def test_a_scan_limits_its_blas_like_a_kernel(fresh, caplog):
    """A scan's native loop passes the cap its body's largest GEMM is worth, as a
    kernel does: beside another runtime's busy pool its per-step GEMMs stay on one
    thread, and the value is the loop's."""
    import tracegrad as tg

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 256)) / 8
    xs = rng.standard_normal((5, 32, 64))

    def f(w, xs):
        def step(h, x):
            return tg.tanh(x @ w + h), None

        h, _ = tg.scan(step, np.zeros((32, 256)), xs)
        return tg.sum(h)

    caps = []
    real_enter = blas_threads.enter
    fresh.setattr(blas_threads, "enter", lambda cap=None: caps.append(cap) or real_enter(cap))
    g = tg.compile(f, backend="numba")
    h = np.zeros((32, 256))
    for x in xs:
        h = np.tanh(x @ w + h)
    with caplog.at_level("WARNING", logger="tracegrad"):
        np.testing.assert_allclose(g(w, xs), h.sum(), rtol=1e-10)
    assert "native loop failed" not in caplog.text  # the njit loop, not the fallback
    assert 1 in caps  # 32 x 256 x 64 = 2**19 multiply-adds: one thread's worth
