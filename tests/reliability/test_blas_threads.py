"""BLAS threads follow the idle CPUs (tracegrad/ops/blas_threads.py)."""
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
    blas_threads.follow_load()  # back to the real load's count


def _library_threads() -> list[int]:
    import ctypes
    counts = []
    for path, _setter, _start in blas_threads._libraries or ():
        lib = ctypes.CDLL(path)
        getter = next(getattr(lib, n) for n in blas_threads._GETTERS if hasattr(lib, n))
        getter.restype = ctypes.c_int
        counts.append(getter())
    return counts


def test_threads_follow_the_idle_cpu_count(fresh):
    np.ones((4, 4)) @ np.ones((4, 4))  # NumPy's OpenBLAS is loaded
    fresh.setattr(blas_threads, "threads_now", lambda: 1)
    assert blas_threads.follow_load() == 1
    if not blas_threads._libraries:
        pytest.skip("no OpenBLAS with a thread-count API in this process")
    assert _library_threads() == [1] * len(blas_threads._libraries)
    starts = [start for _, _, start in blas_threads._libraries]
    fresh.setattr(blas_threads, "threads_now", lambda: 64)
    blas_threads.follow_load()
    assert _library_threads() == starts  # never more than the library started with


def test_the_users_choice_is_left_alone(fresh):
    fresh.setenv("OPENBLAS_NUM_THREADS", "2")
    assert blas_threads.follow_load() is None
    blas_threads.reset()
    fresh.delenv("OPENBLAS_NUM_THREADS")
    fresh.setenv("TRACEGRAD_BLAS_FOLLOW_LOAD", "0")
    assert blas_threads.follow_load() is None


def test_eager_matmul_results_do_not_depend_on_the_thread_count(fresh):
    import tracegrad.eager as torch
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
    fresh.setattr(blas_threads, "threads_now", lambda: 1)
    one = torch.tensor(a) @ torch.tensor(b)
    np.testing.assert_allclose(one.numpy(), a @ b, rtol=1e-12)


def test_own_threads_are_not_counted_as_load():
    assert parallel._own_threads_running() >= 0
    assert 1 <= parallel.threads_now() <= parallel.THREADS


def test_kernels_follow_the_load(monkeypatch):
    from tracegrad import codegen
    calls = []
    parallel_entry = lambda *a: calls.append("parallel") or "p"  # noqa: E731
    serial_entry = lambda *a: calls.append("serial") or "s"  # noqa: E731
    entry = codegen._load_aware(parallel_entry, calls_blas=True, serial=serial_entry)
    set_to = []
    monkeypatch.setattr(blas_threads, "follow_load", lambda: set_to.append(1))
    monkeypatch.setattr(parallel, "threads_now", lambda: 1)
    assert entry() == "s" and calls == ["serial"] and set_to == [1]
    monkeypatch.setattr(parallel, "threads_now", lambda: 2)
    assert entry() == "p" and calls == ["serial", "parallel"]
    # a kernel with no BLAS call and no parallel variant is called directly
    assert codegen._load_aware(serial_entry, calls_blas=False) is serial_entry


def test_a_gemm_kernel_sets_blas_threads_before_it_runs(monkeypatch):
    import tracegrad as tg
    set_to = []
    monkeypatch.setattr(blas_threads, "follow_load", lambda: set_to.append(1))
    f = tg.compile(lambda a, b: tg.tanh(a @ b))
    a, b = np.ones((8, 4)), np.ones((4, 3))
    np.testing.assert_allclose(f(a, b), np.tanh(a @ b))
    assert "tg_gemm(" in f.lower(a, b).source and set_to


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
    batch = 1024   # loops of 2**19 elements: above PARALLEL_MIN_ELEMENTS
    assert batch * 512 >= PARALLEL_MIN_ELEMENTS and batch * 512 * 512 >= BLAS_THREADED_MNK
    assert not _wants_parallel(batch)
    # the same kernel, were BLAS single-threaded there, keeps its prange variant
    from tracegrad.codegen import structured
    monkeypatch.setattr(structured, "BLAS_THREADED_MNK", 1 << 62)
    assert _wants_parallel(batch)
