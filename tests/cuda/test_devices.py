"""Placement: tracegrad.placement, device_put, DeviceArray, and the error without a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg


def test_devices_lists_cpu_then_cuda():
    devs = tg.devices()
    assert str(devs[0]) == "cpu"
    assert [str(d) for d in devs[1:]] == ["cuda:0"]


def test_device_put_round_trip_keeps_shape_and_dtype():
    for x in (np.arange(6, dtype="f4").reshape(2, 3), np.float64(2.5), np.array([True, False])):
        d = tg.device_put(x, "cuda")
        assert isinstance(d, tg.DeviceArray)
        assert d.shape == np.shape(x) and d.dtype == np.asarray(x).dtype
        np.testing.assert_array_equal(np.asarray(d), x)
        np.testing.assert_array_equal(tg.device_put(d, "cpu"), x)
    assert float(tg.device_put(2.5)) == 2.5


def test_device_put_maps_pytrees_and_wraps_numba_arrays_without_copy():
    from numba import cuda

    raw = cuda.to_device(np.ones(3, "f4"))
    tree = tg.device_put({"a": raw, "b": [np.zeros(2)]})
    assert tree["a"].data is raw  # the caller's GPU buffer, not a copy
    assert isinstance(tree["b"][0], tg.DeviceArray)


def test_unknown_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        tg.device_put(np.ones(2), "tpu")


def test_mixed_host_and_device_arguments_run_on_the_device():
    f = tg.compile(lambda x, y: x * y + 1.0)
    out = f(tg.device_put(np.arange(3.0)), np.full(3, 2.0))  # the host array is copied over
    assert isinstance(out, tg.DeviceArray)
    np.testing.assert_array_equal(np.asarray(out), np.arange(3.0) * 2 + 1)
    # the CPU path is unchanged: host arrays in, host arrays out, separate cache entries
    host = f(np.arange(3.0), np.full(3, 2.0))
    assert type(host) is np.ndarray
    assert len(f.entries) == 2


def test_without_a_gpu_device_put_says_what_is_missing():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = (
        "import numpy as np, tracegrad as tg\n"
        "import sys; assert 'numba' not in sys.modules  # import tracegrad loads no CUDA\n"
        "assert [str(d) for d in tg.devices()] == ['cpu']\n"
        "try:\n"
        "    tg.device_put(np.ones(2), 'cuda')\n"
        "except RuntimeError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    if "DeviceError" not in out.stdout:
        pytest.skip("this machine has a CUDA GPU")
    assert "no CUDA device" in out.stdout
    assert "pip install tracegrad[cuda]" in out.stdout
    assert "NUMBA_ENABLE_CUDASIM=1" in out.stdout


def test_repeated_gpu_calls_take_the_hot_path_and_accept_numba_arrays():
    from numba import cuda

    f = tg.value_and_grad(lambda w, x: tg.sum(tg.tanh(x @ w)))
    w, x = tg.device_put(np.ones((3, 2), "f4")), tg.device_put(np.ones((4, 3), "f4"))
    first = f(w, x)
    again = f(w, x)  # the fast key: (DeviceArray, shape, dtype) per argument
    assert f.cache_info().hits == 1 and f.cache_info().traces == 1
    np.testing.assert_array_equal(np.asarray(first[1]), np.asarray(again[1]))
    raw = f(cuda.to_device(np.ones((3, 2), "f4")), x)  # a Numba device array, as it is
    np.testing.assert_array_equal(np.asarray(raw[1]), np.asarray(first[1]))
    b = tg.compile(lambda x: x > 0.5)(tg.device_put(np.array([0.2, 0.7])))  # bool output
    assert b.dtype == np.bool_ and np.asarray(b).tolist() == [False, True]


def test_cupy_arrays_in_and_cublas_gemm_on_a_real_gpu(real_gpu):
    cupy = pytest.importorskip("cupy")
    a = cupy.asarray(np.random.default_rng(0).standard_normal((64, 32)).astype("f4"))
    b = cupy.asarray(np.random.default_rng(1).standard_normal((32, 16)).astype("f4"))
    f = tg.value_and_grad(lambda a, b: tg.sum(tg.tanh(a @ b)), argnums=(0, 1))
    value, (ga, gb) = f(a, b)  # CuPy arrays, read without copies
    ref = tg.value_and_grad(
        lambda a, b: tg.sum(tg.tanh(a @ b)), argnums=(0, 1), backend="interpret"
    )(cupy.asnumpy(a), cupy.asnumpy(b))
    np.testing.assert_allclose(float(value), ref[0], rtol=1e-4)
    np.testing.assert_allclose(np.asarray(ga), ref[1][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gb), ref[1][1], rtol=1e-4, atol=1e-5)
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    assert entry.lowered.kernel.cupy is not None  # GEMMs went to cuBLAS through CuPy


def test_torch_cuda_tensors_are_read_without_copies(real_gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.linspace(-1, 1, 10, device="cuda")
    d = tg.device_put(x)
    assert d.__cuda_array_interface__["data"][0] == x.data_ptr()
    out = tg.compile(lambda x: tg.sin(x) * 2.0)(x)
    np.testing.assert_allclose(np.asarray(out), 2 * np.sin(x.cpu().numpy()), rtol=1e-6)


def test_clear_caches_drops_the_cuda_kernels():
    from tracegrad.codegen.cuda import runtime

    f = tg.compile(lambda x: tg.cos(x) * 3.0)
    f(tg.device_put(np.ones(2)))
    assert runtime._KERNELS
    tg.clear_caches()
    assert not runtime._KERNELS and len(f.entries) == 0
    np.testing.assert_allclose(np.asarray(f(tg.device_put(np.ones(2)))), 3 * np.cos(1.0))
