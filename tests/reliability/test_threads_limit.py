"""One thread limit (tracegrad/runtime/threads.py): where it comes from, and the pieces
that honour it in this process (the eager split, BLAS calls). Numba's part runs in
child processes: tests/reliability/test_threads_neighbours.py."""

import os

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import config
from tracegrad.ops import blas_threads, parallel
from tracegrad.runtime import threads

THREAD_VARS = (
    "TRACEGRAD_NUM_THREADS",
    "TRACEGRAD_EAGER_THREADS",
    "NUMBA_NUM_THREADS",
    "OMP_NUM_THREADS",
)


@pytest.fixture
def clean(monkeypatch):
    for name in THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    threads.reset()
    yield monkeypatch
    monkeypatch.undo()
    threads.reset()


# ------------------------------------------------------------------ cgroup fixture trees


def _tree(tmp_path, proc_cgroup: str, files: dict) -> tuple[str, str]:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "proc_cgroup"
    proc.write_text(proc_cgroup)
    return str(root), str(proc)


def test_cgroup_v2_quota_is_read_from_the_process_cgroup_and_its_parents(tmp_path):
    root, proc = _tree(
        tmp_path,
        "0::/kubepods/pod1/ctr\n",
        {
            "kubepods/pod1/ctr/cpu.max": "max 100000\n",  # no limit of its own
            "kubepods/pod1/cpu.max": "250000 100000\n",  # the pod: 2.5 CPUs
            "kubepods/cpu.max": "800000 100000\n",  # a looser one above
        },
    )
    assert threads.cgroup_cpus(root, proc) == 2.5


def test_cgroup_v2_without_a_quota(tmp_path):
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert threads.cgroup_cpus(root, proc) is None
    root, proc = _tree(tmp_path / "b", "0::/user.slice\n", {})  # no cpu controller files
    assert threads.cgroup_cpus(root, proc) is None


def test_cgroup_v1_quota_and_period(tmp_path):
    root, proc = _tree(
        tmp_path,
        "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
        {
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",  # the root: unlimited
            "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert threads.cgroup_cpus(root, proc) == 1.5


def test_cgroup_v1_unlimited_and_garbage(tmp_path):
    root, proc = _tree(
        tmp_path, "3:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
    )
    assert threads.cgroup_cpus(root, proc) is None
    root, proc = _tree(tmp_path / "b", "0::/x\n", {"x/cpu.max": "lots 100000\n"})
    assert threads.cgroup_cpus(root, proc) is None


def test_available_cpus_is_the_affinity_capped_by_the_quota_rounded_up(clean):
    clean.setattr(threads, "affinity_cpus", lambda: 16)
    clean.setattr(threads, "cgroup_cpus", lambda: 2.5)
    assert threads.available_cpus() == 3
    clean.setattr(threads, "cgroup_cpus", lambda: 0.2)
    assert threads.available_cpus() == 1
    clean.setattr(threads, "cgroup_cpus", lambda: None)
    assert threads.available_cpus() == 16
    assert threads.affinity_cpus.__module__  # (the real one is os.sched_getaffinity)


def test_the_real_affinity_is_used():
    if hasattr(os, "sched_getaffinity"):
        assert threads.affinity_cpus() == len(os.sched_getaffinity(0))


# ------------------------------------------------------------------------ the limit


def test_where_the_default_limit_comes_from(clean):
    clean.setattr(threads, "available_cpus", lambda: 8)
    assert threads.default_num_threads() == 8
    clean.setenv("OMP_NUM_THREADS", "3,2")  # OpenMP's nested form: the first level
    assert threads.default_num_threads() == 3
    clean.setenv("OMP_NUM_THREADS", "64")  # at most the CPUs
    assert threads.default_num_threads() == 8
    clean.setenv("NUMBA_NUM_THREADS", "2")  # Numba's before OpenMP's
    assert threads.default_num_threads() == 2
    clean.setenv("TRACEGRAD_NUM_THREADS", "5")  # tracegrad's own first
    assert threads.default_num_threads() == 5


def test_set_num_threads_overrides_and_none_restores(clean):
    clean.setenv("TRACEGRAD_NUM_THREADS", "3")
    threads.reset()
    assert tg.get_num_threads() == 3
    tg.set_num_threads(1)
    assert tg.get_num_threads() == 1
    tg.set_num_threads(np.int64(6))
    assert tg.get_num_threads() == 6
    tg.set_num_threads(None)
    assert tg.get_num_threads() == 3


@pytest.mark.parametrize(
    "bad, error",
    [(0, ValueError), (-2, ValueError), (2.5, TypeError), (True, TypeError), ("4", TypeError)],
)
def test_set_num_threads_refuses_what_is_not_a_count(clean, bad, error):
    with pytest.raises(error, match="set_num_threads"):
        tg.set_num_threads(bad)


def test_a_bad_environment_value_warns_and_is_ignored(clean):
    config._warned.discard("TRACEGRAD_NUM_THREADS")
    clean.setenv("TRACEGRAD_NUM_THREADS", "many")
    clean.setattr(threads, "available_cpus", lambda: 4)
    with pytest.warns(RuntimeWarning, match="TRACEGRAD_NUM_THREADS='many'"):
        assert threads.default_num_threads() == 4


def test_the_eager_split_follows_the_limit(clean):
    tg.set_num_threads(3)
    assert parallel.THREADS == 3
    pool = parallel._get_pool()
    assert pool._max_workers >= 2
    tg.set_num_threads(1)
    assert parallel.THREADS == 1 and parallel.threads_now() == 1
    x = np.linspace(-3, 3, parallel.MIN_PARALLEL * 2)
    tanh = parallel.elementwise_impl(np.tanh)
    before = parallel._get_pool()._work_queue.qsize()
    np.testing.assert_array_equal(tanh(x), np.tanh(x))  # serial: nothing queued
    assert parallel._get_pool()._work_queue.qsize() == before
    tg.set_num_threads(5)
    assert parallel._get_pool()._max_workers >= 4  # the pool grew for the new limit
    np.testing.assert_array_equal(tanh(x), np.tanh(x))


def test_eager_threads_variable_limits_only_the_split(clean):
    clean.setenv("TRACEGRAD_EAGER_THREADS", "1")
    threads.reset()
    assert parallel.THREADS == 1
    assert tg.get_num_threads() == threads.default_num_threads()


def test_threads_now_never_exceeds_the_limit(clean):
    for n in (1, 2, 7):
        tg.set_num_threads(n)
        parallel._free[0] = 0.0
        assert 1 <= parallel.threads_now() <= n


def test_small_arrays_use_fewer_threads_than_the_limit(clean, monkeypatch):
    """A split uses one thread per GRAIN elements at most."""
    tg.set_num_threads(16)
    monkeypatch.setattr(parallel, "threads_now", lambda: 16)
    n = parallel.GRAIN * 3
    submitted = []
    real = parallel._get_pool

    class Recorder:
        def __init__(self, pool):
            self.pool = pool

        def submit(self, *a, **k):
            submitted.append(1)
            return self.pool.submit(*a, **k)

    monkeypatch.setattr(parallel, "_get_pool", lambda: Recorder(real()))
    x = np.linspace(0, 1, n)
    out = parallel.elementwise_impl(np.exp)(x)
    np.testing.assert_array_equal(out, np.exp(x))
    assert len(submitted) == 2  # 3 chunks: two on the pool, one on the caller


# ------------------------------------------------------------------------------- BLAS


@pytest.fixture
def blas(clean):
    for name in ("OPENBLAS_NUM_THREADS", "TRACEGRAD_BLAS_FOLLOW_LOAD"):
        clean.delenv(name, raising=False)
    np.ones((4, 4)) @ np.ones((4, 4))
    blas_threads.reset()
    if not blas_threads._refresh_libraries():
        pytest.skip("no OpenBLAS with a thread-count API in this process")
    yield clean
    blas_threads.reset()


def test_blas_is_lowered_for_tracegrads_call_only_and_put_back(blas):
    before = blas_threads.library_threads()
    seen = []
    blas.setattr(blas_threads, "threads_now", lambda: 1)
    blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)  # as on a multi-core machine
    call = blas_threads.limited(lambda a, b: seen.append(blas_threads.library_threads()) or a @ b)
    a = np.eye(3)
    np.testing.assert_array_equal(call(a, a), a)
    assert seen == [[min(1, b) for b in before]]
    assert blas_threads.library_threads() == before  # put back


def test_blas_is_put_back_when_the_call_raises(blas):
    before = blas_threads.library_threads()
    blas.setattr(blas_threads, "threads_now", lambda: 1)
    blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)

    def fails():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        blas_threads.limited(fails)()
    assert blas_threads.library_threads() == before


def test_blas_counts_are_never_raised(blas):
    blas.setattr(blas_threads, "threads_now", lambda: 1024)
    before = blas_threads.library_threads()
    assert blas_threads.enter() is None
    assert blas_threads.library_threads() == before


def test_follow_load_changes_nothing(blas):
    blas.setattr(blas_threads, "threads_now", lambda: 1)
    before = blas_threads.library_threads()
    assert blas_threads.follow_load() == 1
    assert blas_threads.library_threads() == before


def test_the_switch_turns_blas_limiting_off(blas):
    blas.setenv("TRACEGRAD_BLAS_FOLLOW_LOAD", "0")
    blas_threads.reset()
    blas.setattr(blas_threads, "threads_now", lambda: 1)
    assert blas_threads.enter() is None and blas_threads.follow_load() is None


def test_eager_matmul_and_addmm_leave_blas_as_they_found_it(blas):
    import tracegrad.eager as torch

    blas.setattr(blas_threads, "threads_now", lambda: 1)
    blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)
    before = blas_threads.library_threads()
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((64, 32)), rng.standard_normal((32, 16)), rng.standard_normal(16)
    out = torch.tensor(a) @ torch.tensor(b)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    out = torch.addmm(torch.tensor(c), torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(out.numpy(), c + a @ b, rtol=1e-12)
    assert blas_threads.library_threads() == before
