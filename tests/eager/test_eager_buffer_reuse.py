"""The eager fast paths keep results identical: chunked large ufuncs (bit for bit,
same dtype/shape/layout, same FP-error semantics) and the engine's reuse of
gradient buffers only it holds (never aliasing a user's, a tensor's or another
gradient's memory)."""

import warnings

import numpy as np
import pytest

import tracegrad.eager as torch
from tracegrad.ops import parallel
from tracegrad.ops.parallel import elementwise_impl

N = parallel.MIN_PARALLEL * 2 + 37  # above the threshold, not a multiple of the chunk alignment


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(parallel, "THREADS", 2)
    monkeypatch.setattr(parallel, "threads_now", lambda: 2)  # even when other tasks busy the CPUs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chunked_ufuncs_match_numpy_bit_for_bit(two_threads, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(N) * 3).astype(dtype)
    y = rng.standard_normal(N).astype(dtype)
    m = rng.standard_normal((N // 512 + 1, 512)).astype(dtype)
    g = np.broadcast_to(np.asarray(1.5, dtype), (N,))  # a broadcast cotangent (stride 0)
    for uf in (np.add, np.subtract, np.multiply, np.true_divide, np.power, np.maximum, np.minimum):
        for args in ((x, y), (x, 2), (2.5, y), (g, x), (x, np.asarray(y[0])), (m, m), (m, 0.5)):
            with np.errstate(all="ignore"):
                got, want = elementwise_impl(uf)(*args), uf(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.strides == want.strides
            np.testing.assert_array_equal(got, want)
    for uf in (np.negative, np.exp, np.sin, np.cos, np.tanh, np.abs):
        for a in (x, m, m.T):
            got, want = elementwise_impl(uf)(a), uf(a)
            assert got.dtype == want.dtype and got.strides == want.strides
            if uf in (np.sin, np.cos) and a.dtype == np.float64 and a.flags.c_contiguous:
                # large float64 sin/cos run codegen's kernels: a few ulp, not bit for bit
                # (tests/eager/test_eager_fast_math.py)
                np.testing.assert_allclose(got, want, rtol=4e-16, atol=2e-16)
                continue
            np.testing.assert_array_equal(got, want)


def test_chunked_ufuncs_keep_numpy_error_semantics(two_threads):
    x = -np.abs(np.random.default_rng(1).standard_normal(N))
    with pytest.raises(FloatingPointError):
        with np.errstate(invalid="raise"):
            elementwise_impl(np.log)(x)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = elementwise_impl(np.log)(x)
    assert np.isnan(out).all()
    assert [str(w.message) for w in seen] == ["invalid value encountered in log"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(invalid="ignore"):
            elementwise_impl(np.log)(x)


def test_small_or_mixed_calls_stay_serial_and_exact(two_threads):
    x = np.arange(N, dtype=np.float32)
    # float64 0-d operand promotes: the result dtype is NumPy's
    assert elementwise_impl(np.multiply)(x, np.asarray(2.0)).dtype == np.float64
    assert elementwise_impl(np.multiply)(x, np.float64(2.0)).dtype == np.float64
    assert elementwise_impl(np.add)(np.arange(N), 1).dtype == np.arange(1).dtype
    assert type(elementwise_impl(np.add)(1.0, 2.0)) is np.ndarray


def test_elementwise_gradient_through_reused_buffers():
    rng = np.random.default_rng(2)
    xs = rng.standard_normal(N)
    x = torch.tensor(xs.copy(), requires_grad=True)
    (torch.tanh(x) * torch.sin(x) + torch.exp(-(x**2))).sum().backward()
    t, s, e = np.tanh(xs), np.sin(xs), np.exp(-xs * xs)
    np.testing.assert_allclose(
        x.grad.numpy(), (1 - t * t) * s + t * np.cos(xs) - 2 * xs * e, rtol=1e-12, atol=1e-12
    )


def test_leaf_grads_never_share_memory():
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
    (a + b).sum().backward()  # add passes one gradient array to both operands
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.numpy()[0] = 100.0
    assert b.grad.numpy()[0] == 1.0
    c = torch.tensor([1.0, 2.0], requires_grad=True)
    (c + c + c).sum().backward()
    assert c.grad.tolist() == [3.0, 3.0]


def test_user_gradient_and_hooks_are_not_reused():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    g = np.array([1.0, 1.0])
    x.backward(torch.from_numpy(g))
    assert not np.shares_memory(x.grad.numpy(), g)
    x.grad.numpy()[:] = 7.0
    assert g.tolist() == [1.0, 1.0]
    seen = []
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    y.register_hook(lambda grad: seen.append(grad))
    (y * 2).sum().backward()
    assert not np.shares_memory(y.grad.numpy(), seen[0].numpy())


def test_intermediate_gradients_with_many_contributions():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h + h.sin() + h.exp()).sum().backward()
    hv = np.array([0.5, -1.0, 2.0]) * 3
    want_h = 2 * hv + np.cos(hv) + np.exp(hv)
    np.testing.assert_allclose(h.grad.numpy(), want_h, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 3 * want_h, rtol=1e-12)
    assert not np.shares_memory(h.grad.numpy(), x.grad.numpy())
