"""tracegrad.distributed on a real Dask LocalCluster (issue 16).

One module-scoped cluster of 2 worker processes serves the quick tests; the
worker-killing test is `slow`.
"""

import os
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed")

import tracegrad as tg  # noqa: E402
from tracegrad import distributed as tgd  # noqa: E402


def loss(params, x, y):
    w1, w2 = params
    h = tg.tanh(x @ w1)
    return tg.mean((h @ w2 - y) ** 2)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        env=dict(tgd.WORKER_ENV),
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1001, 8)), rng.standard_normal((1001, 1))  # odd: uneven shards
    params = (0.3 * rng.standard_normal((8, 16)), 0.3 * rng.standard_normal((16, 1)))
    return params, x, y


def test_matches_single_process_and_traces_once_per_worker(client, data):
    params, x, y = data
    vg = tgd.value_and_grad(loss, client=client, argnums=0, shard_argnums=(1, 2))
    value, grads = vg(params, x, y)
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert float(value) == pytest.approx(float(ref_value), rel=1e-12)
    for g, r in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-14)
    again = vg(params, x, y)
    assert float(again[0]) == float(value)  # a fixed summation order: bitwise the same
    for g, r in zip(again[1], grads, strict=True):
        np.testing.assert_array_equal(g, r)
    traces = client.run(lambda: [vg.cache_info().traces for vg in tgd._WORKER_CACHE.values()])
    assert sorted(sum(traces.values(), [])) == [1, 1]  # each worker traced once


def test_empty_shards_are_skipped_and_sum_reduction(client, data):
    params, x, y = data
    one_row = tgd.value_and_grad(loss, client=client)(params, x[:1], y[:1])
    ref = tg.value_and_grad(loss)(params, x[:1], y[:1])
    assert float(one_row[0]) == pytest.approx(float(ref[0]), rel=1e-12)
    sse = lambda p, x, y: tg.sum((tg.tanh(x @ p[0]) @ p[1] - y) ** 2)
    total = tgd.value_and_grad(sse, client=client, reduce="sum")(params, x, y)
    ref = tg.value_and_grad(sse)(params, x, y)
    assert float(total[0]) == pytest.approx(float(ref[0]), rel=1e-12)
    np.testing.assert_allclose(total[1][0], ref[1][0], rtol=1e-11)


def test_shards_already_on_the_workers(client, data):
    params, x, y = data
    xs = client.scatter(np.array_split(x, 3))
    ys = client.scatter(np.array_split(y, 3))
    value, grads = tgd.value_and_grad(loss, client=client)(params, xs, ys)
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert float(value) == pytest.approx(float(ref_value), rel=1e-12)
    np.testing.assert_allclose(grads[0], ref_grads[0], rtol=1e-11, atol=1e-14)


def test_dask_arrays_chunked_by_rows_are_the_shards(client, data):
    da = pytest.importorskip("dask.array")
    params, x, y = data
    xd = client.persist(da.from_array(x, chunks=(334, 8)))  # blocks of 334, 334, 333 rows
    yd = client.persist(da.from_array(y, chunks=(334, 1)))
    vg = tgd.value_and_grad(loss, client=client)
    value, grads = vg(params, xd, yd)
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert float(value) == pytest.approx(float(ref_value), rel=1e-12)
    np.testing.assert_allclose(grads[0], ref_grads[0], rtol=1e-11, atol=1e-14)
    lazy = vg(params, da.from_array(x, chunks=(500, 8)), da.from_array(y, chunks=(500, 1)))
    assert float(lazy[0]) == pytest.approx(float(ref_value), rel=1e-12)
    with pytest.raises(ValueError, match="chunked along axis 0 only"):
        vg(params, da.from_array(x, chunks=(500, 4)), yd)
    with pytest.raises(ValueError, match="same row chunks"):
        vg(params, xd, da.from_array(y, chunks=(500, 1)))


def test_shards_given_as_futures_may_be_empty(client, data):
    params, x, y = data
    xs = client.scatter([x[:0], x[:600], x[600:]])  # the first shard has no rows
    ys = client.scatter([y[:0], y[:600], y[600:]])
    value, grads = tgd.value_and_grad(loss, client=client)(params, xs, ys)
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert float(value) == pytest.approx(float(ref_value), rel=1e-12)
    np.testing.assert_allclose(grads[1], ref_grads[1], rtol=1e-11, atol=1e-14)
    empty = [client.scatter([x[:0]]), client.scatter([y[:0]])]
    with pytest.raises(ValueError, match="every shard is empty"):
        tgd.value_and_grad(loss, client=client)(params, *empty)


def _bytes_sent_by_workers(client) -> int:
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())


def test_a_call_moves_parameters_and_gradients_not_data(client):
    """Regression: resident shards stay where they are, the row counts cost no extra
    round trip (no `_rows` tasks), and gradients are merged on the workers (one
    `_merge` per pair), so a call moves about 3 parameter-sized messages."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((40_000, 8)), rng.standard_normal((40_000, 1))
    params = (0.3 * rng.standard_normal((8, 16)), 0.3 * rng.standard_normal((16, 1)))
    xs, ys = client.scatter(np.array_split(x, 2)), client.scatter(np.array_split(y, 2))
    vg = tgd.value_and_grad(loss, client=client)
    vg(params, xs, ys)
    before = _bytes_sent_by_workers(client)
    with distributed.get_task_stream(client) as stream:
        value, grads = vg(params, xs, ys)
    sent = _bytes_sent_by_workers(client) - before
    shard_bytes = xs[0].result().nbytes  # 160 kB; the parameters are 1.1 kB
    assert sent < shard_bytes / 10, sent
    assert all(len(holders) == 1 for holders in client.who_has(xs + ys).values())
    names = sorted(distributed.utils.key_split(task["key"]) for task in stream.data)
    # (key_split drops the leading underscore of _shard_value_and_grad, _merge, _rows)
    assert names.count("shard_value_and_grad") == 2 and names.count("merge") == 1, names
    assert "rows" not in names
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert float(value) == pytest.approx(float(ref_value), rel=1e-12)
    np.testing.assert_allclose(grads[0], ref_grads[0], rtol=1e-11, atol=1e-14)


def test_float32_gradients_keep_their_dtype(client, data):
    params, x, y = (
        tuple(p.astype(np.float32) for p in data[0]),
        data[1].astype(np.float32),
        data[2].astype(np.float32),
    )
    value, grads = tgd.value_and_grad(loss, client=client)(params, x, y)
    ref_value, ref_grads = tg.value_and_grad(loss)(params, x, y)
    assert np.asarray(value).dtype == np.float32 and grads[0].dtype == np.float32
    assert float(value) == pytest.approx(float(ref_value), rel=1e-5)
    np.testing.assert_allclose(grads[0], ref_grads[0], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_a_worker_killed_mid_call_gives_the_same_result_or_an_error(client, data):
    params, x, y = data

    def slow_loss(params, x, y):  # tracing sleeps: the call is in flight when the kill lands
        time.sleep(1.0)
        return loss(params, x, y)

    vg = tgd.value_and_grad(slow_loss, client=client)
    result = {}

    def call():
        try:
            result["ok"] = vg(params, x, y)
        except Exception as exc:  # a clear error is allowed, a partial sum is not
            result["error"] = exc

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)  # both shards are tracing (sleeping) now
    pids = client.run(os.getpid)
    os.kill(pids[sorted(pids)[0]], 9)  # SIGKILL one worker process; its nanny restarts it
    t.join(120)
    assert not t.is_alive()
    print("worker killed mid-call ->", "same result" if "ok" in result else result["error"])
    if "ok" in result:
        ref_value, _ = tg.value_and_grad(loss)(params, x, y)
        assert float(result["ok"][0]) == pytest.approx(float(ref_value), rel=1e-12)
    else:
        assert "error" in result
