"""Property tests: random broadcastable shapes and reduction axes, vjp vs finite differences."""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tracegrad.ops import table as T

BINARY = [T.add, T.sub, T.mul, T.div, T.maximum, T.minimum, T.pow_]
REDUCE = [T.sum_, T.mean, T.max_, T.min_, T.var, T.logsumexp]


def _dot_product_check(prim, args, attrs, rng):
    out = prim.impl(*args, **attrs)
    g = rng.standard_normal(out.shape)
    for i, a in enumerate(args):
        ct = T.sum_to_shape(prim.vjps[i](g, out, *args, **attrs), a.shape)
        assert ct.shape == a.shape
        v = rng.standard_normal(a.shape)
        eps = 1e-6

        def along(t, i=i, v=v):
            moved = list(args)
            moved[i] = args[i] + t * v
            return np.vdot(g, prim.impl(*moved, **attrs))

        numeric = (along(eps) - along(-eps)) / (2 * eps)
        assert np.isclose(np.vdot(ct, v), numeric, rtol=1e-5, atol=1e-6), (prim.name, i)


@given(
    st.sampled_from(BINARY),
    hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    st.integers(0, 2**31),
)
def test_binary_ops_with_random_broadcasting(prim, shapes, seed):
    rng = np.random.default_rng(seed)
    # |x| in [0.5, 2] keeps div and pow smooth
    args = [rng.uniform(0.5, 2, s) for s in shapes.input_shapes]
    if prim in (T.maximum, T.minimum):  # finite differences must not straddle a tie
        assume(np.min(np.abs(np.subtract(*args))) > 1e-3)
    out_shape = T.broadcast_shapes(
        prim.name, *[T.Aval(s, np.dtype(float)) for s in shapes.input_shapes]
    )
    assert out_shape == shapes.result_shape
    _dot_product_check(prim, args, {}, rng)


@given(
    st.sampled_from(REDUCE),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    st.data(),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_reductions_with_random_axes(prim, shape, data, keepdims, seed):
    rng = np.random.default_rng(seed)
    axes = data.draw(
        st.none()
        | st.lists(
            st.integers(-len(shape), len(shape) - 1),
            min_size=1,
            max_size=len(shape),
            unique_by=lambda a: a % len(shape),
        )
    )
    axis = None if axes is None else (axes[0] if len(axes) == 1 else tuple(axes))
    x = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.3 + rng.uniform(0, 0.1, shape)
    attrs = {"axis": axis, "keepdims": keepdims}
    rule = prim.shape_rule(T.Aval(shape, x.dtype), **attrs)
    assert tuple(rule.shape) == prim.impl(x, **attrs).shape
    _dot_product_check(prim, [x], attrs, rng)
