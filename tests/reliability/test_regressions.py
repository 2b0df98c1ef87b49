"""Bugs the reliability suite found, one named test each (the name says what broke).

Rows of test_bad_inputs.py cover the same inputs among many others; these
keep each fixed bug visible by name. Kernels reuse the shapes of the other
reliability tests, so Numba loads them from the disk cache.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as E
from tracegrad.ops.core import ArgumentError, IndexTypeError, OutOfRangeError

HERE = "test_regressions.py"
x23 = np.ones((2, 3))


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_index_array_out_of_range_at_run_time_raised_numpys_bare_IndexError(backend):
    """Index arrays passed as arguments are data: the kernel (or NumPy inside the
    interpreter) raised a bare IndexError without op, shapes or the user's line."""
    f = tg.value_and_grad(lambda a, i: tg.sum(a[i]), backend=backend)
    with pytest.raises(OutOfRangeError) as info:
        f(x23, np.array([0, 7]))
    text = str(info.value)
    assert "getitem" in text and "index 7" in text and "f64[2,3]" in text and HERE in text
    assert isinstance(info.value, IndexError) and isinstance(info.value, tg.ShapeError)


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_take_along_axis_out_of_range_came_from_generated_code(backend):
    f = tg.value_and_grad(lambda a, i: tg.sum(tg.take_along_axis(a, i, axis=1)), backend=backend)
    with pytest.raises(OutOfRangeError) as info:
        f(x23, np.array([[0], [5]]))
    text = str(info.value)
    assert "take_along_axis" in text and "index 5" in text and "size 3" in text and HERE in text
    assert "tg_" not in text.split("(at ")[-1]  # the user's line, not a generated module's


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8"])
def test_eager_float_ops_on_small_int_or_bool_tensors_gave_float16(dtype):
    """NumPy computes exp(bool) in float16; PyTorch (and now tracegrad.eager) in float32."""
    t = E.tensor(np.array([1, 0]).astype(dtype))
    for fn in (E.exp, E.tanh, E.sigmoid, E.sqrt):
        assert fn(t).dtype == E.float32
    np.testing.assert_allclose(E.exp(t).numpy(), [np.e, 1.0], rtol=1e-6)


def test_eager_where_with_a_float_condition_was_silently_accepted():
    with pytest.raises(RuntimeError, match="where.*bool.*float32"):
        E.where(E.ones(2), E.ones(2), E.zeros(2))


def test_none_operand_raised_a_plain_TypeError_not_tracegrads():
    with pytest.raises(ArgumentError, match="mul: expected an array, got NoneType") as info:
        tg.compile(lambda a, b: a * b, backend="interpret")(x23, None)
    assert isinstance(info.value, TypeError) and HERE in str(info.value)


def test_float_index_array_raised_TypeError_where_numpy_and_pytorch_raise_IndexError():
    with pytest.raises(IndexTypeError) as info:
        tg.getitem(x23, np.array([0.0]))
    assert isinstance(info.value, IndexError) and isinstance(info.value, tg.DTypeError)
    with pytest.raises(IndexError):
        E.ones(2, 3)[E.tensor([0.0])]


def test_matmul_batch_mismatch_named_only_the_batch_parts_as_operands():
    with pytest.raises(tg.ShapeError) as info:
        tg.matmul(np.ones((3, 2, 2)), np.ones((2, 2, 2)))
    text = str(info.value)
    assert "f64[3,2,2]" in text and "f64[2,2,2]" in text and "(3,) and (2,)" in text


@pytest.mark.parametrize("argnums", ["a", ()])
def test_bad_argnums_raised_builtin_errors_without_the_users_line(argnums):
    with pytest.raises(tg.TracegradError) as info:
        tg.value_and_grad(lambda a: tg.sum(a), argnums=argnums)
    assert HERE in str(info.value)


def test_empty_array_kernel_failed_numba_typing_and_fell_back_with_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        value, grad = tg.value_and_grad(lambda a: tg.sum(tg.tanh(a) * 2.0))(np.ones((0, 3)))
    assert float(value) == 0.0 and grad.shape == (0, 3)


def test_float16_kernel_failed_numba_typing_and_fell_back_with_a_warning():
    x = np.full(3, 0.5, np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        value, grad = tg.value_and_grad(lambda a: tg.sum(tg.tanh(a) * 2.0))(x)
    assert grad.dtype == np.float16
    np.testing.assert_allclose(grad, 2 * (1 - np.tanh(0.5) ** 2), rtol=1e-2)


@pytest.mark.slow  # (a long fused kernel: several seconds of Numba compile)
def test_long_elementwise_chain_hit_numbas_recursion_limit_and_fell_back_to_the_interpreter():
    """A fused chain of ~100 tanh ops made Numba's SSA pass recurse past Python's
    recursion limit (numba/core/ssa.py); build_kernel fell back to the interpreter
    with a RuntimeWarning (fixed in codegen by outlining/rerolling long loops)."""

    def chain(x):
        for _ in range(100):
            x = tg.tanh(x) * 0.9
        return tg.sum(x)

    x = np.linspace(-1, 1, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        value, grad = tg.value_and_grad(chain)(x)
    ref_value, ref_grad = tg.value_and_grad(chain, backend="interpret")(x)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10)


def test_same_graph_built_twice_gave_different_source_so_each_new_compiled_function_recompiled():
    """mathlib's inline expansion numbered its temporaries with a process-wide counter
    (tracegrad/runtime/mathlib.py `_UIDS`), so the same graph produced different source
    on every build: a new content hash, a new module in sys.modules and in the cache
    directory, and a Numba compile or cache load each time. `tg.grad(f)(x)` inside a
    loop grew memory by ~50 KB per call, and the disk cache only hit when processes
    happened to build kernels in the same order."""
    import sys

    x = np.linspace(-1.0, 1.0, 5)

    def f(v):
        return tg.sum(tg.tanh(v) * v)

    first, second = tg.grad(f).lower(x), tg.grad(f).lower(x)
    assert first.source == second.source and first.source_path == second.source_path
    modules = sum(name.startswith("tg_") for name in sys.modules)
    for _ in range(3):
        tg.grad(f)(x)  # a new compiled function each time, as in a careless loop
    assert sum(name.startswith("tg_") for name in sys.modules) == modules
