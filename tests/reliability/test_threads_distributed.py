"""tracegrad.distributed gives each Dask worker tracegrad's thread limit = its
threads_per_worker (issue 23), whatever Dask's OMP_NUM_THREADS=1 in the worker says."""

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed")

import tracegrad as tg  # noqa: E402
from tracegrad import distributed as tgd  # noqa: E402


def loss(w, x, y):
    return tg.mean((x @ w - y) ** 2)


def _limit_on_worker():
    import tracegrad

    return tracegrad.get_num_threads(), tgd.worker_threads()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=3, processes=True, dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_a_worker_runs_tracegrad_on_its_threads_per_worker(client):
    rng = np.random.default_rng(0)
    x, y, w = rng.standard_normal((40, 3)), rng.standard_normal((40, 1)), np.ones((3, 1))
    vg = tgd.value_and_grad(loss, client=client)
    value, grad = vg(w, x, y)
    ref_value, ref_grad = tg.value_and_grad(loss)(w, x, y)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12)
    # Dask pins OMP_NUM_THREADS=1 in its workers; tracegrad's limit is the worker's 3
    ((limit, _),) = client.run(_limit_on_worker).values()
    assert limit == 3
    assert client.submit(_limit_on_worker, pure=False).result() == (3, 3)


def test_the_limit_is_shared_among_tasks_running_at_once(monkeypatch):
    from tracegrad.runtime import threads

    class State:
        nthreads = 4
        executing = {"a", "b"}

    class Worker:
        state = State()

    monkeypatch.setattr(distributed, "get_worker", lambda: Worker())
    try:
        tgd._limit_threads_to_worker()
        assert tg.get_num_threads() == 2
    finally:
        threads.set_num_threads(None)


def test_outside_a_worker_nothing_is_set():
    before = tg.get_num_threads()
    assert tgd.worker_threads() is None
    tgd._limit_threads_to_worker()
    assert tg.get_num_threads() == before


def test_the_embedded_cluster_gives_its_workers_one_thread():
    assert tgd.WORKER_ENV["TRACEGRAD_NUM_THREADS"] == "1"
    assert tgd.WORKER_ENV["NUMBA_NUM_THREADS"] == "1"
