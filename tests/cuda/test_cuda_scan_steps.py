"""A scan step on the GPU is the body's launches alone: the body writes its ys straight
into their slots of the packed result and its carries into two buffers in turn (the
last step into the result), so no step copies or allocates. Values and gradients equal
the CPU path's. In Numba's CUDA simulator, like every test here."""

import numpy as np

import tracegrad as tg
from tracegrad.codegen.cuda import runtime

XS = np.linspace(-1.0, 1.0, 24, dtype="float32").reshape(3, 2, 4)
W = np.linspace(-0.5, 0.5, 16, dtype="float32").reshape(4, 4)
H = np.linspace(0.1, 0.8, 8, dtype="float32").reshape(2, 4)


def two_carries(w, h):
    def body(carry, x):
        h, s = carry
        h = tg.tanh(h @ w + x)
        return (h, s + tg.sum(h)), (h * 2.0, tg.sum(h * h, axis=1))

    (h, s), (ys, zs) = tg.scan(body, (h, tg.zeros((), "float32")), XS)
    return tg.sum(h) + s + tg.sum(ys * ys) + tg.sum(zs)


def same_value_twice(w, h):
    def body(h, x):
        h = tg.tanh(h @ w + x)
        return h, h  # one buffer for the carry and the y: copied into place

    h, ys = tg.scan(body, h, XS)
    return tg.sum(h) + tg.sum(ys * ys)


def one_step(w, h):
    h, ys = tg.scan(lambda h, x: (tg.tanh(h @ w + x), tg.sum(h)), h, XS[:1])
    return tg.sum(h) + tg.sum(ys)


def _check(fn):
    want = tg.value_and_grad(fn, argnums=(0, 1), backend="interpret")(W, H)
    before = runtime.STATS["scan_copies"]
    got = tg.value_and_grad(fn, argnums=(0, 1))(tg.device_put(W), tg.device_put(H))
    copies = runtime.STATS["scan_copies"] - before
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=2e-5)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=1e-5)
    return copies


def test_scan_steps_write_in_place():
    # the forward scan and reverse mode's backward scan (a reverse one): no step
    # copies its results
    assert _check(two_carries) == 0


def test_a_value_returned_twice_gets_a_buffer_each():
    # (the carry and the y: the body's plan copies the second, as the CPU path does,
    # and both are written in place)
    assert _check(same_value_twice) == 0
    f = tg.compile(lambda x: (tg.tanh(x), tg.tanh(x)))
    a, b = f(tg.device_put(H))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    first, second = entry.lowered.kernel.plan.outputs
    assert first.buf != second.buf


def test_a_single_step_writes_its_carry_into_the_result():
    assert _check(one_step) == 0
