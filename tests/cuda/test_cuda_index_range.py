"""Index arrays are data: an index out of range in a gather on the GPU raises the CPU
path's OutOfRangeError (op, index, axis, shapes, the user's line), never NaN in silence.

The gathers (take_along_axis, its gradient put_along_axis_add, nll_loss) set a range
flag that the call reads once at its end; runs in Numba's CUDA simulator.
"""

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ops.core import OutOfRangeError

Z = np.linspace(-1.0, 1.0, 20, dtype="float32").reshape(5, 4)

GATHERS = {
    "cross_entropy": lambda z, y: tg.cross_entropy(z, y),
    "cross_entropy_none": lambda z, y: tg.sum(tg.cross_entropy(z, y, reduction="none") ** 2),
    "take_along_axis": lambda z, y: tg.sum(tg.take_along_axis(z, y[:, None], axis=1) ** 2),
}


# compiled once per module: a signature's kernels serve every test below
CPU = {name: tg.value_and_grad(fn, backend="interpret") for name, fn in GATHERS.items()}
GPU = {name: tg.value_and_grad(fn) for name, fn in GATHERS.items()}


def _cpu_and_gpu(name, z, y):
    return CPU[name], GPU[name], (tg.device_put(z), tg.device_put(y))


def _error_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]  # (the second line is where the call was traced)


@pytest.mark.parametrize(
    "name, bad",
    [("cross_entropy", 4), ("cross_entropy_none", 100), ("take_along_axis", -5)],
)
def test_out_of_range_index_raises_the_cpu_error(name, bad):
    y = np.array([0, 3, bad, 1, 2])
    cpu, gpu, args = _cpu_and_gpu(name, Z, y)
    with pytest.raises(OutOfRangeError) as want:
        cpu(Z, y)
    with pytest.raises(OutOfRangeError) as got:
        gpu(*args)
    assert _error_line(got.value) == _error_line(want.value)
    assert f"index {bad} is out of range" in str(got.value)
    # the flag is cleared: the next call with good labels gives the CPU's values
    good = np.array([0, 3, 1, 1, 2])
    want_v, want_g = cpu(Z, good)
    got_v, got_g = gpu(tg.device_put(Z), tg.device_put(good))
    np.testing.assert_allclose(np.asarray(got_v), want_v, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_g), want_g, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["cross_entropy_none", "take_along_axis"])
def test_negative_indices_in_range_count_from_the_end_as_on_the_cpu(name):
    y = np.array([-1, -4, 2, -2, 0])
    cpu, gpu, args = _cpu_and_gpu(name, Z, y)
    want_v, want_g = cpu(Z, y)
    got_v, got_g = gpu(*args)
    assert np.isfinite(np.asarray(got_v)).all()
    np.testing.assert_allclose(np.asarray(got_v), want_v, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_g), want_g, rtol=1e-5, atol=1e-6)


def _kernel(f):
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    return entry.lowered.kernel


def test_only_kernels_with_gathers_read_a_flag():
    y = np.array([0, 3, 1, 1, 2])
    gather = GPU["cross_entropy"]
    gather(tg.device_put(Z), tg.device_put(y))
    plain = tg.value_and_grad(lambda z: tg.sum(tg.tanh(z)))
    plain(tg.device_put(Z))
    assert _kernel(gather).checks_range
    assert not _kernel(plain).checks_range  # (no copy to the host at the end of its calls)
    # the backward gather checks its indices too
    units = _kernel(gather).plan.units
    assert any(u.name.startswith("put_") and "range_flag" in u.args for u in units)


def test_an_index_out_of_range_inside_a_scan_body_raises_after_the_loop():
    def f(z, idx):
        def body(c, i):
            return c + tg.sum(tg.take_along_axis(z, i[:, None], axis=1)), tg.sum(c)

        c, ys = tg.scan(body, tg.zeros((5,), "float32"), idx)
        return tg.sum(c) + tg.sum(ys)

    good = np.array([[0, 1, 2, 3, 0], [1, 1, 1, 1, 1]])
    bad = np.array([[0, 1, 2, 3, 0], [1, 1, 9, 1, 1]])
    cpu = tg.value_and_grad(f, backend="interpret")
    gpu = tg.value_and_grad(f)
    want_v, want_g = cpu(Z, good)
    got_v, got_g = gpu(tg.device_put(Z), tg.device_put(good))
    np.testing.assert_allclose(np.asarray(got_v), want_v, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_g), want_g, rtol=1e-5, atol=1e-6)
    assert _kernel(gpu).checks_range
    with pytest.raises(OutOfRangeError, match="index 9 is out of range"):
        gpu(tg.device_put(Z), tg.device_put(bad))
