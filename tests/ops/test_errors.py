"""Bad inputs: each error names the op, the shapes or dtypes, and the caller's file:line."""

import inspect

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ops import table as T
from tracegrad.ops.core import Aval, DTypeError, ShapeError, TracegradError


def raises_here(exc, fn, *args, **kwargs):
    """Call fn; the error must point at the `fn(...)` line below (the user's line)."""
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert f"{__file__}:{line}" in message, message
    return message


def test_broadcast_mismatch():
    msg = raises_here(ShapeError, tg.add, np.ones((3, 4)), np.ones(5))
    assert msg.startswith("add: shapes cannot be broadcast together")
    assert "f64[3,4], f64[5]" in msg


def test_broadcast_mismatch_through_operator_names_sub():
    msg = raises_here(ShapeError, tg.subtract, np.ones((2, 3), np.float32), np.ones((4, 1, 2)))
    assert "sub:" in msg and "f32[2,3]" in msg and "f64[4,1,2]" in msg


@pytest.mark.parametrize(
    "x_shape, y_shape, dims",
    [((3, 4), (5, 6), "4 vs 5"), ((4,), (3,), "4 vs 3"), ((2, 3, 4), (2, 5, 6), "4 vs 5")],
)
def test_matmul_inner_dims(x_shape, y_shape, dims):
    msg = raises_here(ShapeError, tg.matmul, np.ones(x_shape), np.ones(y_shape))
    assert msg.startswith("matmul: inner dimensions differ") and dims in msg
    assert f"f64[{','.join(map(str, x_shape))}]" in msg


def test_matmul_batch_mismatch():
    msg = raises_here(ShapeError, tg.matmul, np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    assert "matmul" in msg and "broadcast" in msg


def test_matmul_scalar_operand():
    msg = raises_here(ShapeError, tg.matmul, np.ones(()), np.ones(3))
    assert "at least one dimension" in msg


def test_reshape_size():
    msg = raises_here(ShapeError, tg.reshape, np.ones((3, 4)), (5, 2))
    assert msg.startswith("reshape: cannot reshape to (5, 2)") and "f64[3,4]" in msg


def test_reshape_unknown_dim_does_not_divide():
    msg = raises_here(ShapeError, tg.reshape, np.ones((3, 4)), (5, -1))
    assert "reshape" in msg and "(3, 4)" in msg


def test_concatenate_mismatch():
    msg = raises_here(ShapeError, tg.concatenate, [np.ones((2, 3)), np.ones((2, 4))], axis=0)
    assert msg.startswith("concatenate: shapes must match except along axis 0")
    assert "f64[2,3], f64[2,4]" in msg


def test_stack_mismatch():
    msg = raises_here(ShapeError, tg.stack, [np.ones(2), np.ones(3)])
    assert "stack" in msg and "(2,)" in msg and "(3,)" in msg


def test_axis_out_of_range():
    msg = raises_here(ShapeError, tg.sum, np.ones((2, 3)), axis=2)
    assert msg.startswith("sum: axis 2 is out of range for 2-d input") and "f64[2,3]" in msg
    msg = raises_here(ShapeError, tg.softmax, np.ones((2, 3)), axis=-3)
    assert "softmax: axis -3 is out of range" in msg


def test_transpose_axes_not_a_permutation():
    msg = raises_here(ShapeError, tg.transpose, np.ones((2, 3)), (0, 0))
    assert "transpose" in msg and "permutation" in msg


def test_broadcast_to_impossible():
    msg = raises_here(ShapeError, tg.broadcast_to, np.ones((3, 2)), (3, 3))
    assert msg.startswith("broadcast_to: cannot broadcast to (3, 3)") and "f64[3,2]" in msg


def test_index_out_of_range():
    msg = raises_here(ShapeError, tg.getitem, np.ones((3, 4)), (1, 4))
    assert msg.startswith("getitem: index 4 is out of range for axis 1 with size 4")


def test_index_array_out_of_range():
    msg = raises_here(ShapeError, tg.getitem, np.ones((3, 4)), np.array([0, 3]))
    assert "getitem: index 3 is out of range for axis 0 with size 3" in msg


def test_too_many_indices():
    msg = raises_here(ShapeError, tg.getitem, np.ones(3), (0, 0))
    assert "too many indices" in msg


def test_float_index_array():
    msg = raises_here(DTypeError, tg.getitem, np.ones(3), np.array([0.0]))
    assert "integers" in msg


def test_take_along_axis_ndim_mismatch():
    msg = raises_here(ShapeError, tg.take_along_axis, np.ones((3, 4)), np.zeros(3, int), 1)
    assert "take_along_axis" in msg and "f64[3,4], i64[3]" in msg


def test_traced_bool_mask_suggests_where():
    class SymbolicMask:  # a value kind that cannot become concrete (like a tracer)
        shape = (3,)
        dtype = np.dtype(bool)
        ndim = 1

    msg = raises_here(TracegradError, tg.getitem, np.ones(3), SymbolicMask())
    assert "data-dependent" in msg and "tracegrad.where" in msg


@pytest.mark.parametrize("prim", [T.exp, T.log, T.sqrt, T.sin, T.cos, T.tanh, T.sigmoid])
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_float_only_ops_reject_int_and_bool(prim, dtype):
    with pytest.raises(
        DTypeError,
        match=rf"{prim.name}: expected floating-point operands, "
        rf"got {dtype}",
    ):
        prim.shape_rule(Aval((3,), np.dtype(dtype)))


@pytest.mark.parametrize("prim", [T.softmax, T.log_softmax])
def test_softmax_rejects_int(prim):
    with pytest.raises(DTypeError, match=prim.name):
        prim.shape_rule(Aval((2, 3), np.dtype("int64")), axis=1)


def test_sub_and_neg_reject_bool():
    with pytest.raises(DTypeError, match="sub: not supported for bool"):
        T.sub.shape_rule(Aval((2,), np.dtype(bool)), Aval((2,), np.dtype(bool)))
    with pytest.raises(DTypeError, match="neg"):
        T.neg.shape_rule(Aval((2,), np.dtype(bool)))


def test_where_needs_bool_condition():
    with pytest.raises(DTypeError, match="where: condition must be bool"):
        T.where.shape_rule(Aval((2,), np.dtype(np.float32)), Aval((2,), np.dtype(np.float32)), 0.0)


def test_none_and_strings_are_not_arrays():
    msg = raises_here(TypeError, tg.exp, None)
    assert "exp" in msg and "None" in msg
    msg = raises_here(TypeError, tg.add, np.ones(2), "abc")
    assert "add" in msg and "str" in msg


def test_errors_are_catchable_as_builtin_types():
    with pytest.raises(ValueError):
        tg.matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(TypeError):
        T.exp.shape_rule(Aval((1,), np.dtype("int64")))


def test_expand_dims_and_squeeze_axes():
    msg = raises_here(ShapeError, tg.expand_dims, np.ones((2, 3)), 3)
    assert "expand_dims" in msg and "(2, 3)" in msg
    msg = raises_here(ShapeError, tg.squeeze, np.ones((1, 3)), 1)
    assert "squeeze" in msg and "(1, 3)" in msg
    msg = raises_here(ShapeError, tg.squeeze, np.ones((1, 3)), 2)
    assert "squeeze: axis 2 is out of range" in msg and "f64[1,3]" in msg


def test_dtype_error_while_tracing_points_at_the_user_line():
    def f(x):
        return tg.exp(x)  # the line the error must name

    line = f.__code__.co_firstlineno + 1
    with pytest.raises(DTypeError) as info:
        tg.trace(f, np.arange(3))
    message = str(info.value)
    assert message.startswith("exp: expected floating-point operands, got int64 (operands: i64[3])")
    assert f"{__file__}:{line}" in message
