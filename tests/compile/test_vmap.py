"""vmap by batching rules (tracegrad/batching.py, issue 13).

Every case is checked against an explicit Python loop over the batch (NumPy's
`np.stack` of per-example results) and, where JAX is installed, against
`jax.vmap`. Cases are ported from JAX's tests/batching_test.py and
tests/api_test.py. The batched graphs of common functions are checked to hold
no per-node loop (`scan`), so the rules are what runs.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from compile_helpers import numeric_grad

import tracegrad as tg
from tracegrad import batching
from tracegrad.batching import BatchingError

INTERP = {"backend": "interpret"}


@pytest.fixture(scope="module")
def jax_np():
    """(jax, jax.numpy) in float64, or None: without JAX the loop checks still run."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def _take(v, axis, i):
    return v if axis is None else np.take(np.asarray(v), i, axis=axis)


def loop_vmap(fn, in_axes, args, out_axes=0):
    """The reference: fn on each example, results stacked with np.stack."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None)
    results = [
        fn(*[_take(a, ax, i) for a, ax in zip(args, axes, strict=True)]) for i in range(size)
    ]
    if isinstance(results[0], tuple):
        outs = out_axes if isinstance(out_axes, tuple) else (out_axes,) * len(results[0])
        return tuple(
            np.stack([np.asarray(r[k]) for r in results], axis=o)
            if o is not None
            else np.asarray(results[0][k])
            for k, o in enumerate(outs)
        )
    return np.stack([np.asarray(r) for r in results], axis=out_axes)


def traced_ops(fn, *args) -> list[str]:
    return [n.op for n in tg.trace(fn, *args).nodes]


def check(fn, args, in_axes=0, out_axes=0, jax_fn=None, jax_np=None, rtol=1e-12, own_loops=0):
    """vmap(fn) == a Python loop (== jax.vmap(jax_fn)); its graph has no per-node loop
    and no scan but the `own_loops` scans of fn itself, batched."""
    ours = tg.vmap(fn, in_axes=in_axes, out_axes=out_axes)(*args)
    expected = loop_vmap(fn, in_axes, args, out_axes)
    for a, b in zip(
        ours if isinstance(ours, tuple) else (ours,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)
    if jax_fn is not None and jax_np is not None:
        jax, _ = jax_np
        theirs = jax.vmap(jax_fn, in_axes=in_axes, out_axes=out_axes)(*args)
        for a, b in zip(
            ours if isinstance(ours, tuple) else (ours,),
            theirs if isinstance(theirs, tuple) else (theirs,),
            strict=True,
        ):
            np.testing.assert_allclose(a, np.asarray(b), rtol=max(rtol, 1e-10), atol=1e-12)
    graph = tg.trace(tg.vmap(fn, in_axes=in_axes, out_axes=out_axes), *args)
    assert not batching.uses_loop_fallback(graph), str(graph)
    assert [n.op for n in graph.nodes].count("scan") == own_loops
    return ours


R = np.random.RandomState(0).randn


# ------------------------------------------------------------------- matmul

MATMUL_CASES = [  # (x shape, y shape, in_axes): per-example ranks 1, 2 and 3 on each side
    ((5, 3), (3, 4), (0, None)),
    ((5, 3), (3,), (0, None)),
    ((3,), (5, 3, 4), (None, 0)),
    ((2, 3), (3, 5), (None, 1)),
    ((5, 3), (5, 3), (0, 0)),
    ((5, 2, 3), (5, 3), (0, 0)),
    ((5, 3), (5, 3, 4), (0, 0)),
    ((5, 2, 3), (5, 3, 4), (0, 0)),
    ((2, 3, 5), (3, 4), (2, None)),
    ((6, 2, 3), (3, 4, 5), (None, 2)),
    ((5, 7, 2, 3), (3, 4), (0, None)),
    ((2, 3), (6, 5, 3, 4), (None, 1)),
    ((5, 6, 2, 3), (5, 3, 4), (0, 0)),
    ((3, 5), (5, 2, 3, 4), (1, 0)),
]


@pytest.mark.parametrize("xs, ys, in_axes", MATMUL_CASES)
def test_matmul_in_axes(xs, ys, in_axes, jax_np):
    check(
        lambda x, y: x @ y,
        (R(*xs), R(*ys)),
        in_axes,
        jax_fn=jax_np[1].matmul if jax_np else None,
        jax_np=jax_np,
    )


def test_dot_cases_from_jax():
    """JAX's testDot2/3/4 and testDot's nested vecvec."""
    xs, ys = R(10, 3), R(10, 3)
    np.testing.assert_allclose(tg.vmap(tg.dot)(xs, ys), np.einsum("ni,ni->n", xs, ys))
    xs, ys = R(5, 8, 10), R(10, 1)
    np.testing.assert_allclose(
        tg.vmap(tg.dot, in_axes=(1, None))(xs, ys), np.einsum("inj,jk->nik", xs, ys)
    )
    xs, ys = R(3, 2), R(3)
    np.testing.assert_allclose(
        tg.vmap(tg.dot, in_axes=(1, None))(xs, ys), np.einsum("ij,i->j", xs, ys)
    )

    def vecvec(a, b):
        dot = tg.dot
        for ndim in range(1, max(a.ndim, b.ndim)):
            dot = tg.vmap(dot, in_axes=(0 if a.ndim > ndim else None, 0 if b.ndim > ndim else None))
        return dot(a, b)

    assert vecvec(np.zeros((3,)), np.zeros((3,))).shape == ()
    assert vecvec(np.zeros((2, 3)), np.zeros((3,))).shape == (2,)
    assert vecvec(np.zeros((4, 2, 3)), np.zeros((3,))).shape == (4, 2)


def test_nested_batching_mat_mat():
    """JAX's testNestedBatchingMatMat: matmat from vdot by two vmaps is A @ B, and its
    graph is one product and one reduction (JAX: one dot_general), no loop."""
    matvec = tg.vmap(tg.vdot, in_axes=(0, None))
    matmat = tg.vmap(matvec, in_axes=(None, 1), out_axes=1)
    A, B = R(4, 3), R(3, 2)
    np.testing.assert_allclose(matmat(A, B), A @ B, rtol=1e-12)
    ops = traced_ops(matmat, A, B)
    assert "scan" not in ops
    assert ops.count("mul") == 1 and ops.count("sum") == 1


# --------------------------------------------------------------- reductions


@pytest.mark.parametrize(
    "name", ["sum", "mean", "max", "min", "var", "logsumexp", "argmax", "argmin", "std", "prod"]
)
@pytest.mark.parametrize(
    "axis, keepdims", [(None, False), (0, False), (-1, True), ((0, 2), False), (None, True)]
)
@pytest.mark.parametrize("in_axis", [0, 1, -1])
def test_reductions(name, axis, keepdims, in_axis):
    if name in ("argmax", "argmin") and isinstance(axis, tuple):
        pytest.skip("NumPy's argmax takes one axis")
    op = getattr(tg, name)
    x = R(4, 5, 3, 2)
    check(lambda v: op(v, axis=axis, keepdims=keepdims), (x,), in_axis)


def test_any_from_jax():
    ans = tg.vmap(tg.any)(np.array([[True, False], [False, False]]))
    np.testing.assert_array_equal(ans, [True, False])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tg.softmax(x, axis=-1),
        lambda x: tg.log_softmax(x, axis=0),
        lambda x: tg.cumsum(x, axis=1),
        lambda x: tg.sort(x, axis=0),
        lambda x: tg.cumprod(x, axis=-1),
    ],
)
@pytest.mark.parametrize("in_axis", [0, 2])
def test_axis_ops(fn, in_axis):
    check(fn, (R(3, 4, 5),), in_axis)


# -------------------------------------------------------- elementwise, shape


def test_elementwise_broadcasting_against_unmapped(jax_np):
    x, y = R(4, 3), R(2, 3)
    check(
        lambda a, b: a * b + 1.0, (x, y), (0, None), jax_fn=lambda a, b: a * b + 1.0, jax_np=jax_np
    )
    check(
        lambda a, b: tg.maximum(a, b),
        (x, R(3, 4)),
        (0, 1),
        jax_fn=jax_np[1].maximum if jax_np else None,
        jax_np=jax_np,
    )
    check(lambda a, b: tg.where(a > b, a, b**2), (R(2, 6), R(6)), (1, 0))
    check(lambda a: tg.clip(a, -0.5, 0.5) > 0.1, (R(10, 5, 3, 7),), 0)  # testNpGtrThan-like


def test_constant_function():
    """JAX's testConstantFunction: an output that ignores the batch is repeated."""
    np.testing.assert_array_equal(tg.vmap(lambda x: 3.0)(np.ones(4)), 3.0 * np.ones(4))


def test_slices_and_reversal_from_jax():
    """JAX's testSliceNumpy and testRevNumpy, in_axes/out_axes moved around."""
    x = R(10, 5, 3, 7)
    np.testing.assert_array_equal(tg.vmap(lambda v: v[:, 2])(x), x[:, :, 2])
    x = R(3, 2, 4)
    fun = lambda v: v[:, ::-1]
    np.testing.assert_array_equal(tg.vmap(fun)(x), x[:, :, ::-1])
    np.testing.assert_array_equal(tg.vmap(fun, (1,), 1)(x), x[:, :, ::-1])
    np.testing.assert_array_equal(tg.vmap(fun, (2,), 2)(x), x[:, ::-1, :])
    check(fun, (x,), 2)


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: v.reshape(-1),
        lambda v: v.T,
        lambda v: tg.broadcast_to(v, (2,) + v.shape),
        lambda v: tg.expand_dims(v, 1),
        lambda v: tg.stack([v, 2 * v], axis=-1),
        lambda v: tg.concatenate([v, v[:1]], axis=0),
        lambda v: v[None, 1:, [0, 2]],
        lambda v: v[[1, 0, 1], :, [2, 2, 0]],
        lambda v: v[1, :, [0, 3]],
        lambda v: tg.take_along_axis(v, np.array([[[1], [0], [2], [4]]]), axis=2),
        lambda v: tg.swapaxes(v, 0, 2),
    ],
)
@pytest.mark.parametrize("in_axis", [0, 1])
def test_shape_and_index_ops(fn, in_axis):
    check(fn, (R(3, 3, 4, 5) if in_axis == 0 else R(3, 6, 4, 5),), in_axis)


def test_concatenate_from_jax():
    """JAX's testConcatenate: operands mapped on different axes, one unmapped."""
    x, y, z = R(10, 2, 3), R(1, 10, 3), R(4, 3)
    ans = tg.vmap(lambda *a: tg.concatenate(a, axis=0), in_axes=(0, 1, None))(x, y, z)
    expected = np.concatenate([x, np.swapaxes(y, 0, 1), np.broadcast_to(z, (10, 4, 3))], 1)
    np.testing.assert_array_equal(ans, expected)
    x, y, z = R(10, 2, 1), R(2, 3), R(2, 4, 10)
    ans = tg.vmap(lambda *a: tg.concatenate(a, axis=1), in_axes=(0, None, 2))(x, y, z)
    expected = np.concatenate([x, np.broadcast_to(y, (10, 2, 3)), np.moveaxis(z, 2, 0)], 2)
    np.testing.assert_array_equal(ans, expected)


_IDX = np.random.RandomState(1)
_X = _IDX.randn(5, 4, 6, 3)
_I4, _I6, _J3 = (_IDX.randint(0, 4, (5, 2)), _IDX.randint(0, 6, (5, 2)), _IDX.randint(0, 3, (5, 2)))
BATCHED_INDEX_CASES = [  # (fn, in_axes, args): index arrays that differ per example
    (lambda v, i: v[i], (0, 0), (_X, _I4)),
    (lambda v, i: v[:, i], (0, 0), (_X, _I6)),
    (lambda v, i: v[i], (None, 0), (_X[0], _I4)),
    (lambda v, i: v[:, i], (None, 0), (_X[0], _I6)),
    (lambda v, i, j: v[i, :, j], (0, 0, 0), (_X, _I4, _J3)),  # non-adjacent: block first
    (lambda v, i, j: v[i, :, j], (None, 0, None), (_X[0], _I4, _J3[0])),
    (lambda v, i, j: v[None, :, i, j], (0, 0, 0), (_X, _I6, _J3)),
    (lambda v, i, j: v[1, i, j], (2, 1, None), (_X, _IDX.randint(0, 4, (2, 6)), _J3[0])),
    (lambda v, i: v[i, 2], (1, 0), (_X[0], _IDX.randint(0, 4, 6))),  # one index per example
]


@pytest.mark.parametrize("fn, in_axes, args", BATCHED_INDEX_CASES)
def test_batched_index_arrays(fn, in_axes, args):
    """x[i] with i mapped: one gather with an arange(B) index, no loop; its gradient
    (index_add_zeros with mapped indices) is batched too."""
    check(fn, args, in_axes)
    if in_axes[0] is not None:
        per_example_grad = tg.grad(lambda *a: tg.sum(tg.sin(fn(*a))), **INTERP)
        check(per_example_grad, args, in_axes)


def test_dynamic_index_from_jax():
    """JAX's testDynamicSlice: x[i] with a mapped index."""
    x = np.arange(30.0).reshape((10, 3))
    np.testing.assert_array_equal(tg.vmap(lambda v, i: v[i], in_axes=(0, None))(x, 1), x[:, 1])
    idx = np.array([0, 1, 2, 1, 0] * 2)
    f = tg.vmap(lambda v, i: v[i], in_axes=(0, 0))
    np.testing.assert_array_equal(f(x, idx), x[np.arange(10), idx])
    assert "scan" not in traced_ops(f, x, idx)
    np.testing.assert_array_equal(
        tg.vmap(lambda v, i: v[i], in_axes=(None, 0))(x[0], idx), x[0][idx]
    )


# ------------------------------------------------------- per-example gradients


def _predict(params, inputs):
    for W, b in params:
        outputs = tg.dot(W, inputs) + b
        inputs = tg.tanh(outputs)
    return outputs


def _mlp_loss(params, data):
    inputs, targets = data
    return tg.sum((_predict(params, inputs) - targets) ** 2)


@pytest.fixture(scope="module")
def mlp_case():
    layer_sizes = [3, 2, 4]
    rng = np.random.RandomState(0)
    params = [
        (rng.randn(m, n), rng.randn(m))
        for m, n in zip(layer_sizes[1:], layer_sizes[:-1], strict=True)
    ]
    return params, (rng.randn(5, 3), rng.randn(5, 4))


def test_per_example_gradients_from_jax(mlp_case, jax_np):
    """JAX's testPerExampleGradients: vmap(partial(grad(loss), params))(batch)."""
    params, batch = mlp_case
    grad_loss = tg.grad(_mlp_loss, **INTERP)
    ans = tg.vmap(functools.partial(grad_loss, params))(batch)
    for i in range(5):
        one = grad_loss(params, (batch[0][i], batch[1][i]))
        for (dW, db), (eW, eb) in zip(ans, one, strict=True):
            np.testing.assert_allclose(dW[i], eW, rtol=1e-12)
            np.testing.assert_allclose(db[i], eb, rtol=1e-12)
    for (dW, db), (W, b) in zip(ans, params, strict=True):
        assert dW.shape == (5,) + W.shape and db.shape == (5,) + b.shape
    graph = tg.trace(tg.vmap(functools.partial(grad_loss, params)), batch)
    assert "scan" not in [n.op for n in graph.nodes]
    if jax_np is None:  # JAX not installed: the checks above stand alone
        return
    jax, jnp = jax_np

    def jax_loss(params, data):
        inputs, targets = data
        for W, b in params:
            outputs = jnp.dot(W, inputs) + b
            inputs = jnp.tanh(outputs)
        return jnp.sum((outputs - targets) ** 2)

    theirs = jax.vmap(functools.partial(jax.grad(jax_loss), params))(batch)
    for (dW, db), (tW, tb) in zip(ans, theirs, strict=True):
        np.testing.assert_allclose(dW, np.asarray(tW), rtol=1e-10)
        np.testing.assert_allclose(db, np.asarray(tb), rtol=1e-10)


def test_np_maximum_per_example_grad():
    """JAX's testNpMaximumPerExampleGrad, against its hand-derived gradient."""
    x, W = R(10, 5), R(5, 5)
    fun = lambda W, x: tg.sum(tg.maximum(tg.dot(x, W), 0.0) ** 2)
    ans = check(functools.partial(tg.grad(fun, **INTERP), W), (x,), 0)
    for i in range(10):
        x_ex = x[i : i + 1]
        expected = (2.0 * np.maximum(W.T @ x_ex.T, 0.0) @ x_ex).T
        np.testing.assert_allclose(ans[i], expected, rtol=1e-12)


def test_grad_of_vmap_matches_finite_differences_and_jax(jax_np):
    X = R(6, 3)
    w = R(3, 2)

    def loss(w):
        per_example = tg.vmap(lambda w, x: tg.sum(tg.tanh(x @ w) ** 2), in_axes=(None, 0))(w, X)
        return tg.sum(per_example * np.arange(1.0, 7.0))

    g = tg.grad(loss, **INTERP)(w)
    assert tg.gradcheck(loss, (w,))
    if jax_np is None:  # JAX not installed: the checks above stand alone
        return
    jax, jnp = jax_np
    jax_loss = lambda w: jnp.sum(
        jax.vmap(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2), in_axes=(None, 0))(w, X)
        * np.arange(1.0, 7.0)
    )
    np.testing.assert_allclose(g, np.asarray(jax.grad(jax_loss)(w)), rtol=1e-10)


def test_jacobians_from_jax(jax_np):
    """JAX's testJacobians: jacrev as vmap of the pullback over the standard basis
    (out_axes=ndim(y)), jacfwd as vmap of jvp with out_axes=(None, 0)."""
    A, b, x = R(4, 3), R(4), R(3)
    f = lambda x: tg.tanh(tg.dot(A, x) + b)
    y, pullback = tg.vjp(f, x, **INTERP)
    basis = np.eye(y.size).reshape((-1,) + y.shape)
    (jac_rows,) = tg.vmap(pullback, out_axes=y.ndim)(basis)
    push = lambda v: tg.jvp(f, (x,), (v,), **INTERP)
    y2, jac_cols = tg.vmap(push, out_axes=(None, 0))(np.eye(x.size))
    np.testing.assert_allclose(y2, y, rtol=1e-12)
    expected = tg.jacobian(f, **INTERP)(x)
    # the pullback of basis vector i is row i of the Jacobian, placed on axis ndim(y)
    np.testing.assert_allclose(jac_rows.T, expected, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(jac_cols.T, expected, rtol=1e-10, atol=1e-14)  # jvp of e_j
    if jax_np is None:  # JAX not installed: the checks above stand alone
        return
    jax, jnp = jax_np
    np.testing.assert_allclose(
        expected, np.asarray(jax.jacrev(lambda x: jnp.tanh(A @ x + b))(x)), rtol=1e-10, atol=1e-14
    )


# ------------------------------------------------- nesting, pytrees, out_axes


def test_nested_vmap_closing_over_outer_example(jax_np):
    xs, ys = R(3, 2), R(4, 2)
    f = lambda x: tg.vmap(lambda y: tg.sum(x * y) + tg.sin(x[0]))(ys)
    ours = check(f, (xs,), 0)
    if jax_np is None:  # JAX not installed: the checks above stand alone
        return
    jax, jnp = jax_np
    theirs = jax.vmap(lambda x: jax.vmap(lambda y: jnp.sum(x * y) + jnp.sin(x[0]))(ys))(xs)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)


def test_pytree_in_axes_prefix_and_out_axes():
    params = {"w": R(3), "b": R(5)}
    xs = R(3, 5)

    def f(p, x):
        return {"dot": tg.sum(p["w"] * x), "shift": x + p["b"]}, tg.sum(p["w"])

    out, total = tg.vmap(
        f, in_axes=({"w": None, "b": 0}, 1), out_axes=({"dot": 0, "shift": 1}, None)
    )(params, xs)
    for i in range(5):
        one, t = f({"w": params["w"], "b": params["b"][i]}, xs[:, i])
        np.testing.assert_allclose(out["dot"][i], one["dot"], rtol=1e-12)
        np.testing.assert_allclose(out["shift"][:, i], one["shift"], rtol=1e-12)
        np.testing.assert_allclose(total, t, rtol=1e-12)
    check(lambda a, b: (a - b, a * b), (R(4, 2), R(2, 4)), (0, 1), out_axes=(1, -1))


def test_vmap_inside_compile_numba(mlp_case):
    """vmap of grad inside tg.compile: one compiled kernel, no loop over examples."""
    params, batch = mlp_case
    per_example = tg.vmap(tg.grad(_mlp_loss, **INTERP), in_axes=(None, 0))
    compiled = tg.compile(lambda p, b: per_example(p, b))
    ours = compiled(params, batch)
    expected = per_example(params, batch)
    for (dW, db), (eW, eb) in zip(ours, expected, strict=True):
        np.testing.assert_allclose(dW, eW, rtol=1e-10)
        np.testing.assert_allclose(db, eb, rtol=1e-10)
    assert "scan" not in [n.op for n in compiled.lower(params, batch).traced.nodes]


# ------------------------------------------------------- loops and branches


def _running(x):
    return tg.scan(lambda c, v: (c + v, c * v), x[0] * 0.0, x)[1]


def _from_constant_carry(x):  # the carry starts shared and becomes per-example
    return tg.scan(lambda c, v: (c * 0.5 + v, tg.sin(c)), np.zeros(()), x)


def _reads_example(x):  # the body reads a per-example value it closes over
    return tg.scan(lambda c, v: (c + v * x[0], c), np.zeros(()), np.arange(3.0))[1]


def _branch(x):  # a per-example predicate: both branches, then a select
    return tg.cond(tg.sum(x) > 0, lambda v: v * 2.0, lambda v: -tg.exp(v), x)


def _shared_branch(x, flag):  # a shared predicate: one cond over batched branches
    return tg.cond(flag > 0, lambda v: tg.sin(v) * 2.0, lambda v: v**2, x)


@pytest.mark.parametrize("fn", [_running, _from_constant_carry, _reads_example, _branch])
def test_loops_and_branches_are_batched(fn):
    xs = R(5, 4)
    check(fn, (xs,), 0, own_loops=0 if fn is _branch else 1)
    compiled = tg.compile(tg.vmap(fn), **INTERP)
    expected = loop_vmap(fn, 0, (xs,))
    for a, b in zip(
        *(v if isinstance(v, tuple) else (v,) for v in (compiled(xs), expected)), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12)

    def loss(x):
        out = tg.vmap(fn)(x)
        return tg.sum(tg.sum(out[0]) * out[1] if isinstance(out, tuple) else out**2)

    np.testing.assert_allclose(
        tg.grad(loss, **INTERP)(xs), numeric_grad(loss, [xs], 0), rtol=1e-6, atol=1e-8
    )


def test_shared_predicate_keeps_one_cond():
    xs = R(5, 4)
    for flag in (1.0, -1.0):
        check(_shared_branch, (xs, np.array(flag)), (0, None))
        ops = traced_ops(tg.vmap(_shared_branch, in_axes=(0, None)), xs, np.array(flag))
        assert ops.count("cond") == 1


def _halve_until_small(x):  # a per-example predicate: loop while any example goes on
    return tg.while_loop(lambda v: tg.sum(v * v) > 1.0, lambda v: v * 0.5, x)


def _halve_n_times(x, n):  # a shared predicate (the counter): one loop, batched body
    return tg.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5), (0, x))[1]


def test_while_loops_are_batched():
    xs = R(5, 4) * 3
    check(_halve_until_small, (xs,), 0)
    check(_halve_n_times, (xs, np.array(3)), (0, None))
    for fn, args, axes in [
        (_halve_until_small, (xs,), 0),
        (_halve_n_times, (xs, np.array(3)), (0, None)),
    ]:
        f = tg.vmap(fn, in_axes=axes)
        assert traced_ops(f, *args).count("while") == 1
        np.testing.assert_allclose(
            tg.compile(f, **INTERP)(*args), loop_vmap(fn, axes, args), rtol=1e-12
        )


def test_custom_vjp_is_batched_with_its_rule():
    """custom_vjp: function, forward and backward rules batched; the user's rule still
    gives the gradient, summed over the batch for a shared argument."""

    @tg.custom_vjp
    def scaled_mul(w, x):
        return w * x

    scaled_mul.defvjp(
        lambda w, x: (w * x, (w, x)), lambda res, g: (2.0 * g * res[1], 3.0 * g * res[0])
    )
    w, xs = R(3), R(5, 3)
    f = tg.vmap(scaled_mul, in_axes=(None, 0))
    check(scaled_mul, (w, xs), (None, 0))
    gw, gx = tg.grad(lambda w, X: tg.sum(f(w, X)), argnums=(0, 1), **INTERP)(w, xs)
    np.testing.assert_allclose(gw, 2.0 * xs.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(gx, 3.0 * np.broadcast_to(w, xs.shape), rtol=1e-12)
    per_example = tg.vmap(tg.grad(lambda w, x: tg.sum(scaled_mul(w, x)), **INTERP), (None, 0))
    np.testing.assert_allclose(per_example(w, xs), 2.0 * xs, rtol=1e-12)


def test_a_primitive_without_rule_runs_as_a_per_node_loop(monkeypatch):
    """A rule that gives up (NotImplementedError), like a primitive with none, leaves a
    scan over the batch of that one node: right values and gradients, compiled too."""

    def gives_up(args, dims, **attrs):
        raise NotImplementedError

    monkeypatch.setattr(tg.ops.table.tanh, "batch_rule", gives_up)
    w, xs = R(3, 2), R(5, 3)
    fn = lambda w, x: tg.sum(tg.tanh(x @ w) ** 2)
    f = tg.vmap(fn, in_axes=(None, 0))
    np.testing.assert_allclose(f(w, xs), loop_vmap(fn, (None, 0), (w, xs)), rtol=1e-12)
    graph = tg.trace(f, w, xs)
    assert batching.uses_loop_fallback(graph)
    assert [n.op for n in graph.nodes].count("scan") == 1
    per_example = tg.vmap(tg.grad(fn, **INTERP), in_axes=(None, 0))
    expected = loop_vmap(tg.grad(fn, **INTERP), (None, 0), (w, xs))
    np.testing.assert_allclose(per_example(w, xs), expected, rtol=1e-12)
    np.testing.assert_allclose(tg.compile(per_example)(w, xs), expected, rtol=1e-10)
    loss = lambda w: tg.sum(f(w, xs))
    np.testing.assert_allclose(
        tg.grad(loss, **INTERP)(w), numeric_grad(loss, [w], 0), rtol=1e-6, atol=1e-8
    )


def test_eager_tensors_record_a_batched_graph():
    import tracegrad.eager as torch

    w = torch.tensor(R(3, 2), requires_grad=True)
    xs = R(5, 3)
    out = tg.vmap(lambda w, x: tg.tanh(x @ w), in_axes=(None, 0))(w, xs)
    out.sum().backward()
    expected = xs.T @ (1 - np.tanh(xs @ w.detach().numpy()) ** 2)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12)
    for fn in (_running, _branch):  # a batched loop or branch is one compiled eager node
        x = torch.tensor(R(5, 4), requires_grad=True)
        (tg.vmap(fn)(x) ** 2).sum().backward()
        loss = lambda v, fn=fn: tg.sum(tg.vmap(fn)(v) ** 2)
        np.testing.assert_allclose(
            x.grad.numpy(), numeric_grad(loss, [x.detach().numpy()], 0), rtol=1e-6, atol=1e-8
        )


# ------------------------------------------------------------------- errors


def test_errors_as_jax():
    x, y = np.ones((3, 2)), np.ones((5, 2))
    with pytest.raises(
        ValueError,
        match=r"inconsistent sizes(.|\n)*size 3: axis 0 of argument "
        r"a of type f64\[3,2\](.|\n)*size 5: axis 0 of "
        r"argument b",
    ):
        tg.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match=r"2 axes had size 3"):
        tg.vmap(lambda a, b, c: a + b + c)(x, x, y)
    with pytest.raises(
        ValueError,
        match=r"along axis 2, which implies that its rank should be "
        r"at least 3, but is only 2 \(its shape is \(3, 2\)\)",
    ):
        tg.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match=r"len\(in_axes\)=1, len\(args\)=2"):
        tg.vmap(lambda a, b: a, in_axes=(0,))(x, x)
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        tg.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="got axis spec None but output was batched on axis 0"):
        tg.vmap(lambda a: a, out_axes=None)(x)
    with pytest.raises(ValueError, match="tree prefix"):
        tg.vmap(lambda a: a, in_axes=({"x": 0},))({"y": x})
    with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
        tg.vmap(lambda a: a)(1.0)
    with pytest.raises(ValueError, match="out of bounds"):
        tg.vmap(lambda a: a, out_axes=3)(x)
    assert issubclass(BatchingError, TypeError)  # the scan-based vmap raised TypeError


# ------------------------------------------------------------- Jacobian rows


def test_jacobian_rows_by_vmap_match_jacobian(jax_np):
    """jacrev as JAX builds it: one vmap of the pullback over the identity. The
    forward pass runs once (one sin node in the graph), not once per output."""
    params = {"w": R(3), "b": R(2)}
    x = R(3)

    def flat(p, x):
        return tg.concatenate([tg.sin(p["w"] * x), p["b"] * tg.sum(x**2)])

    rows = batching.jacobian_rows(flat, (params, x), (0, 1))
    expected = tg.jacobian(flat, argnums=(0, 1), **INTERP)(params, x)
    np.testing.assert_allclose(rows[0]["w"], expected[0]["w"], rtol=1e-12)
    np.testing.assert_allclose(rows[0]["b"], expected[0]["b"], rtol=1e-12)
    np.testing.assert_allclose(rows[1], expected[1], rtol=1e-12)
    if jax_np is None:  # JAX not installed: the checks above stand alone
        return
    jax, jnp = jax_np
    theirs = jax.jacrev(
        lambda p, x: jnp.concatenate([jnp.sin(p["w"] * x), p["b"] * jnp.sum(x**2)]), argnums=(0, 1)
    )(params, x)
    np.testing.assert_allclose(rows[1], np.asarray(theirs[1]), rtol=1e-12)
    ops = traced_ops(lambda p, x: batching.jacobian_rows(flat, (p, x), (0, 1), n_out=5), params, x)
    assert ops.count("sin") == 1 and "scan" not in ops
    assert batching.jacobian_rows(lambda v: v[:0], (x,), (0,)) is None


def test_empty_batch_and_axis_size():
    """A batch of 0 examples gives empty results of the right shape (JAX too); with
    no mapped argument, axis_size says how many copies to make."""
    w = R(3, 2)
    assert tg.vmap(lambda x, w: tg.tanh(x @ w), in_axes=(0, None))(np.ones((0, 3)), w).shape == (
        0,
        2,
    )
    assert tg.vmap(_running)(np.ones((0, 3))).shape == (0, 3)
    per_example = tg.vmap(tg.grad(lambda w, x: tg.sum(tg.tanh(x @ w)), **INTERP), (None, 0))
    assert per_example(w, np.ones((0, 3))).shape == (0, 3, 2)
    out = tg.vmap(lambda x: x * 2.0, in_axes=None, axis_size=3)(np.arange(2.0))
    np.testing.assert_array_equal(out, np.tile([0.0, 2.0], (3, 1)))
    with pytest.raises(ValueError, match="axis_size=4"):
        tg.vmap(lambda x: x, axis_size=4)(np.ones((3, 2)))


def test_docstring_examples():
    import doctest

    result = doctest.testmod(batching, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 8


# ------------------------------------------ every row of the op table, batched


def _op_cases():
    import pathlib
    import sys

    ops_dir = str(pathlib.Path(__file__).resolve().parents[1] / "ops")
    if ops_dir not in sys.path:
        sys.path.insert(0, ops_dir)
    import op_cases

    return op_cases.CASES


OP_CASES = _op_cases()


@pytest.mark.parametrize("mapped", ["all", "first"])
@pytest.mark.parametrize("case", OP_CASES, ids=[c.id for c in OP_CASES])
def test_every_op_table_row_batches_like_a_loop(case, mapped):
    """Each row of tests/ops/op_cases.py over a batch of 3 draws: every array operand
    mapped, or only the first (the others shared), against a loop over the examples."""
    import zlib

    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    samples = [case.draw(rng, "float64") for _ in range(3)]
    arrays = [k for k, v in enumerate(samples[0]) if isinstance(v, np.ndarray) and v.ndim]
    if not arrays:
        pytest.skip("no array operand to map")
    mapped_at = arrays if mapped == "all" else arrays[:1]
    args = [
        np.stack([s[k] for s in samples]) if k in mapped_at else v for k, v in enumerate(samples[0])
    ]
    in_axes = tuple(0 if k in mapped_at else None for k in range(len(args)))

    def fn(*operands):
        return case.prim(*operands, **case.attrs)

    ours = tg.vmap(fn, in_axes=in_axes)(*args)
    expected = loop_vmap(fn, in_axes, tuple(args))
    assert np.shape(ours) == np.shape(expected)
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)


def _spd(*shape):
    m = R(*shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize(
    "fn, args, in_axes",
    [
        (lambda a, b: tg.linalg.solve(a, b), (_spd(4, 3, 3), R(4, 3)), (0, 0)),
        (lambda a, b: tg.linalg.solve(a, b), (_spd(3, 3), R(4, 3)), (None, 0)),
        (lambda a, b: tg.linalg.solve(a, b), (_spd(4, 3, 3), R(3)), (0, None)),
        (lambda a, b: tg.linalg.solve(a, b), (_spd(2, 4, 3, 3), R(3, 2)), (1, None)),
        (lambda a, b: tg.linalg.solve(a, b), (_spd(3, 3), R(2, 3, 2, 4)), (None, 3)),
        (
            lambda a, b: tg.linalg.solve_triangular(a, b, lower=True),
            (_spd(4, 3, 3), R(3)),
            (0, None),
        ),
        (
            lambda a, b: tg.linalg.solve_triangular(a, b, trans=1),
            (_spd(3, 3), R(3, 2, 4)),
            (None, 2),
        ),
        (lambda a: tg.linalg.cholesky(a) @ tg.linalg.inv(a), (_spd(4, 2, 3, 3),), 0),
        (
            lambda a: tg.linalg.det(a) + tg.linalg.slogdet(a)[1],
            (np.moveaxis(_spd(4, 3, 3), 0, 1),),
            1,
        ),
    ],
)
def test_linalg_batched_without_loops(fn, args, in_axes):
    check(fn, args, in_axes, rtol=1e-10)
    if in_axes == (0, 0):  # per-example gradients through solve
        grad = tg.grad(lambda a, b: tg.sum(fn(a, b) ** 2), argnums=(0, 1), **INTERP)
        ours = tg.vmap(grad, in_axes=in_axes)(*args)
        for i in range(args[0].shape[0]):
            for got, want in zip(ours, grad(args[0][i], args[1][i]), strict=True):
                np.testing.assert_allclose(got[i], want, rtol=1e-10)


def test_keyword_arguments_are_mapped_over_axis_0(jax_np):
    xs, scale = R(4, 3), R(4)
    ours = tg.vmap(lambda x, scale: x * scale, in_axes=(0,))(xs, scale=scale)
    np.testing.assert_allclose(ours, xs * scale[:, None], rtol=1e-12)
    if jax_np is not None:
        jax, _ = jax_np
        theirs = jax.vmap(lambda x, scale: x * scale, in_axes=(0,))(xs, scale=scale)
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)


_SHARED_W = np.ones((3, 2))


def test_compiled_vmap_reads_globals_on_every_call():
    f = tg.compile(tg.vmap(lambda x: x @ _SHARED_W), **INTERP)
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(f(x), x @ np.ones((3, 2)))
    _SHARED_W[:] = 2.0
    try:
        np.testing.assert_allclose(f(x), x @ np.full((3, 2), 2.0))
    finally:
        _SHARED_W[:] = 1.0


def test_hessian_rows_by_vmap_of_grad():
    """jacobian_rows of a gradient: the Hessian, also compiled to one kernel."""

    def f(x):
        return tg.sum(tg.sin(x) * x[::-1]) + tg.sum(x**3)

    x = R(4)
    g = tg.grad(f, **INTERP)
    expected = tg.hessian(f, **INTERP)(x)
    np.testing.assert_allclose(
        batching.jacobian_rows(g, (x,), (0,), n_out=4)[0], expected, rtol=1e-12
    )
    compiled = tg.compile(lambda x: batching.jacobian_rows(g, (x,), (0,), n_out=4)[0])
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-10)
    assert "scan" not in [n.op for n in compiled.lower(x).traced.nodes]


def test_batch_of_compile_traces_once():
    """JAX's testBatchOfCompile: compile(vmap(compile(f))) traces f once, then hits."""
    side = []

    @tg.compile
    def f(x):
        side.append(None)
        return x + x

    g = tg.compile(tg.vmap(f), **INTERP)
    np.testing.assert_allclose(g(np.ones(2)), 2 * np.ones(2))
    assert len(side) == 1
    np.testing.assert_allclose(g(2 * np.ones(2)), 4 * np.ones(2))
    assert len(side) == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tg.ops.table.erf(x),
        lambda x: tg.ops.table.clamp_tensor(x, x[0] * 0.1, 0.5, has_lo=True, has_hi=True),
        lambda x: tg.ops.table.vector_norm(x, ord=2.0, axis=(1,), keepdims=False),
        lambda x: tg.ops.table.vector_norm(x, ord=3.0, axis=None, keepdims=True),
        lambda x: tg.ops.table.diagonal(x, offset=1, axis1=0, axis2=2),
        lambda x: tg.ops.table.diagonal_scatter_zeros(
            x[0, 0, :3], offset=-1, axis1=1, axis2=0, shape=(5, 4)
        ),
    ],
)
@pytest.mark.parametrize("in_axis", [0, 2])
def test_eager_surface_primitives_batched(fn, in_axis):
    x = np.abs(R(3, 4, 5, 4)) + 0.5 if in_axis == 0 else np.abs(R(3, 4, 3, 4)) + 0.5
    check(fn, (x,), in_axis)
    loss = lambda v: tg.sum(tg.vmap(fn, in_axes=in_axis)(v) ** 2)
    np.testing.assert_allclose(
        tg.grad(loss, **INTERP)(x), numeric_grad(loss, [x], 0), rtol=1e-5, atol=1e-7
    )
