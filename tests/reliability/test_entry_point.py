"""The compiled entry point, as a careless caller uses it.

Layouts (non-contiguous, negative strides, Fortran order, read-only) and
"inputs never mutated" are checked for every op by the themed Numba programs
in test_property_programs.py (value_and_grad). Here: forward-only kernels on
awkward layouts, outputs that never alias the caller's arrays or each other
across calls, and arguments that change between calls: each either retraces
(new shape, dtype, rank, structure, static value) or raises a clear error,
and the function keeps working afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as E

BACKENDS = ["interpret", "numba"]

VIEW_FUNCTIONS = {
    "identity": lambda a: a,
    "reshape": lambda a: tg.reshape(a, (-1,)),
    "transpose": lambda a: a.T,
    "slice": lambda a: a[1:, ::-1],
    "two outputs": lambda a: (a, a * 2.0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(VIEW_FUNCTIONS))
def test_outputs_never_alias_inputs_and_are_fresh_on_every_call(name, backend):
    f = tg.compile(VIEW_FUNCTIONS[name], backend=backend)
    x = np.arange(6.0).reshape(2, 3)
    outs = f(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    assert not any(np.shares_memory(o, x) for o in outs)
    kept = [o.copy() for o in outs]
    f(x + 100.0)  # a second call must not overwrite the first call's results
    for o, k in zip(outs, kept, strict=True):
        np.testing.assert_array_equal(o, k)
    outs[0][...] = -1.0  # and writing into a result must not reach the input
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_and_grad_results_are_fresh_arrays(backend):
    vg = tg.value_and_grad(lambda a: tg.sum(a * a), backend=backend)
    v1, g1 = vg(np.ones(3))
    v2, g2 = vg(np.full(3, 5.0))
    np.testing.assert_array_equal(g1, [2.0, 2.0, 2.0])
    assert float(v1) == 3.0 and not np.shares_memory(g1, g2)


def layouts(x):
    ro = x.copy()
    ro.setflags(write=False)
    flipped = np.ascontiguousarray(x[:, ::-1])[:, ::-1]
    wide = np.zeros((x.shape[0], 2 * x.shape[1]))
    wide[:, ::2] = x
    return {
        "C": x,
        "Fortran": np.asfortranarray(x),
        "negative stride": flipped,
        "strided": wide[:, ::2],
        "read-only": ro,
        "big-endian": x.astype(">f8"),
        "transposed view": np.ascontiguousarray(x.T).T,
    }


def test_forward_kernel_on_every_layout_gives_identical_results_and_leaves_inputs_alone():
    f = tg.compile(lambda a, b: tg.softmax(a, axis=1) @ b.T + tg.sum(a * b, axis=1, keepdims=True))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    expected = f(a, b)
    for name, view in layouts(a).items():
        before = view.copy()
        out = f(view, layouts(b)[name])
        np.testing.assert_array_equal(out, expected, err_msg=name)
        np.testing.assert_array_equal(view, before, err_msg=f"{name} input mutated")
    assert f.cache_info().traces == 1


# --------------------------------------------------- arguments that change


def counting(fn):
    calls = []

    def traced(*args, **kwargs):
        calls.append(tuple(np.shape(a) for a in args))
        return fn(*args, **kwargs)

    return traced, calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_shape_dtype_or_rank_retraces_and_stays_correct(backend):
    fn, calls = counting(lambda x: tg.sum(tg.tanh(x) * x))
    vg = tg.value_and_grad(fn, backend=backend)
    cases = [
        np.linspace(-1, 1, 4),
        np.linspace(-1, 1, 5),
        np.linspace(-1, 1, 4).astype(np.float32),
        np.linspace(-1, 1, 6).reshape(2, 3),
        np.linspace(-1, 1, 4),
    ]
    for x in cases:
        value, g = vg(x)
        x64 = x.astype(np.float64)
        assert g.dtype == x.dtype and g.shape == x.shape
        tol = 1e-6 if x.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(value, np.sum(np.tanh(x64) * x64), rtol=tol)
        np.testing.assert_allclose(
            g, np.tanh(x64) + x64 * (1 - np.tanh(x64) ** 2), rtol=tol, atol=tol
        )
    assert len(calls) == 4 and vg.cache_info().traces == 4  # the last case was a hit


def test_static_python_scalars_retrace_per_value_and_arrays_do_not():
    fn, calls = counting(lambda x, s: tg.sum(x * s))
    f = tg.compile(fn, backend="interpret")
    x = np.ones(3)
    assert float(f(x, 2.0)) == 6.0 and float(f(x, 3.0)) == 9.0  # two static values
    assert float(f(x, np.array(2.0))) == 6.0 and float(f(x, np.array(5.0))) == 15.0  # one array
    assert len(calls) == 3


def test_wrong_number_of_arguments_raises_pythons_error_and_the_function_still_works():
    f = tg.value_and_grad(lambda x, y: tg.sum(x * y), backend="interpret")
    x = np.ones(3)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        f(x)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        f(x, x, x)
    value, g = f(x, np.full(3, 2.0))
    assert float(value) == 6.0 and g.tolist() == [2.0, 2.0, 2.0]


def test_keyword_and_positional_calls_agree():
    f = tg.compile(lambda x, y: x * 2.0 + y, backend="interpret")
    x, y = np.ones(2), np.arange(2.0)
    np.testing.assert_array_equal(f(x, y), f(x, y=y))
    np.testing.assert_array_equal(f(x, y), f(y=y, x=x))


def test_changing_structure_retraces():
    f = tg.compile(
        lambda p: tg.sum(p["w"] * 2.0) + (tg.sum(p["b"]) if "b" in p else 0.0), backend="interpret"
    )
    assert float(f({"w": np.ones(2)})) == 4.0
    assert float(f({"w": np.ones(2), "b": np.ones(3)})) == 7.0
    assert float(f({"w": np.ones(2)})) == 4.0
    assert f.cache_info().traces == 2


def test_integer_arrays_where_floats_were_traced_retrace_with_integer_semantics():
    f = tg.compile(lambda a: a * 3 + 1)
    np.testing.assert_array_equal(f(np.array([0.5, 1.5])), [2.5, 5.5])
    out = f(np.array([1, 2]))
    assert out.dtype == np.int64 and out.tolist() == [4, 7]


def test_eager_tensors_and_arrays_share_a_compiled_function():
    f = tg.compile(lambda a: tg.sum(tg.exp(a)), backend="interpret")
    x = np.array([0.0, 1.0])
    from_array = f(x)
    t = E.tensor(x, requires_grad=True)
    from_tensor = f(t)
    assert isinstance(from_tensor, E.Tensor) and from_tensor.grad_fn is not None
    np.testing.assert_allclose(from_tensor.item(), from_array)
    from_tensor.backward()
    np.testing.assert_allclose(t.grad.numpy(), np.exp(x))
