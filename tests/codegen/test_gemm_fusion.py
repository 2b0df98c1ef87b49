"""GEMM call sites (issue 14): what the kernels do around BLAS, and that it stays exact.

- `concat_tiled_scatters`: the backward of slices that tile an axis (an LSTM's gate
  slices z[:, :H], z[:, H:2H], ...) is one concatenate, not zero-filled scatters
  added together;
- `nt_relayout_choice`: a small C = A @ B.T (OpenBLAS's slow small-matrix layout)
  runs on a transposed copy of one operand.

Graph-level checks run on the NumPy interpreter (no compile). One function is
compiled for the default run (float64, checked against the interpreter of the
unrewritten graph and against finite differences); its float32 twin is slow.
"""

from __future__ import annotations

import numpy as np
import pytest
from codegen_helpers import GraphMaker

import tracegrad as tg
from tracegrad.codegen.structured import nt_relayout_choice
from tracegrad.ir.interpret import interpret
from tracegrad.passes.fuse import concat_tiled_scatters

H = 64


def lstm_like(x, W1, W2, a, b, c, d, e):
    """Gate slices of one GEMM (backward: a concatenate feeding dz @ W1.T, an
    (32, 64, 256) A @ B.T: copy A), a batch of (64, 16) @ (32, 16).T with one B
    (copy B once, before the batch loop) and a batch of (32, 16) @ (64, 16).T
    (copy each A), and e (32, 16) shared by that batch (copy it once)."""
    z = x @ W1
    i, f = tg.sigmoid(z[:, :H]), tg.sigmoid(z[:, H : 2 * H])
    g, o = tg.tanh(z[:, 2 * H : 3 * H]), tg.sigmoid(z[:, 3 * H :])
    h = o * tg.tanh(f * 0.5 + i * g)
    s = a @ tg.transpose(b)
    t = c @ tg.transpose(d, (0, 2, 1))
    u = e @ tg.transpose(d, (0, 2, 1))
    return tg.sum(tg.tanh(h @ W2)) + 0.1 * tg.sum(s * s) + tg.sum(tg.sin(t) * u)


def _args(dtype, seed=0):
    r = np.random.default_rng(seed)
    shapes = [
        (32, 64),
        (64, 4 * H),
        (H, 8),
        (2, 64, 16),
        (32, 16),
        (2, 32, 16),
        (2, 64, 16),
        (32, 16),
    ]
    return [(0.3 * r.standard_normal(s)).astype(dtype) for s in shapes]


ARGNUMS = (0, 1, 2, 3, 4, 5, 6, 7)
# compiled once (float64 below); the Numba backend whatever TRACEGRAD_BACKEND says
COMPILED = tg.value_and_grad(lstm_like, argnums=ARGNUMS, backend="numba")


def _reference(dtype):
    """Value and gradients from the interpreter of the graph as traced (optimize=False:
    no rewrite at all)."""
    ref = tg.value_and_grad(lstm_like, argnums=ARGNUMS, backend="interpret", optimize=False)
    return ref(*_args(dtype))


def _check_compiled(dtype, rtol):
    args = _args(dtype)
    value, grads = COMPILED(*args)
    want_value, want_grads = _reference(dtype)
    np.testing.assert_allclose(value, want_value, rtol=rtol)
    for got, want in zip(grads, want_grads, strict=True):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    return value, grads, COMPILED.lower(*args).source


def test_compiled_gates_and_nt_products_match_the_unrewritten_graph_float64(skylakex_blas):
    _, _, source = _check_compiled("float64", 1e-12)
    # the paths under test are really taken by this kernel
    assert "concatenate[axis=1]" in source
    assert "index_add_zeros" not in source
    lines = source.splitlines()
    copies = [i for i, line in enumerate(lines) if "copied transposed" in line]
    inside = [i for i in copies if lines[i].startswith(" " * 8)]  # in a batch loop
    # A of x @ W1 backward, c's per batch element, e's and b's once for the batch
    assert sum("A copied" in lines[i] for i in copies) >= 3
    assert any("B copied" in lines[i] and i not in inside for i in copies)
    assert any("A copied" in lines[i] and i not in inside for i in copies)
    assert any("A copied" in lines[i] for i in inside)
    # in a batch loop the copy is a call to the module's one run-time-sized function
    # (inlined constant-size copies made LLVM take 3x longer on a 4-head attention)
    assert all("_relayout_" in lines[i + 1] for i in inside)
    assert sum(line.startswith("def ") and "_relayout_" in line for line in lines) == 1


def test_compiled_gradients_match_finite_differences_float64():
    args = _args("float64", seed=1)
    _, grads = COMPILED(*args)
    loss = tg.compile(lstm_like, backend="interpret")
    r = np.random.default_rng(2)
    eps = 1e-6
    for k, arg in enumerate(args):
        for _ in range(2):  # directional derivatives along random directions
            d = r.standard_normal(arg.shape)
            plus = [a + eps * d if j == k else a for j, a in enumerate(args)]
            minus = [a - eps * d if j == k else a for j, a in enumerate(args)]
            fd = (float(loss(*plus)) - float(loss(*minus))) / (2 * eps)
            assert np.isclose(np.sum(grads[k] * d), fd, rtol=1e-6, atol=1e-8), (k, fd)


@pytest.mark.slow
def test_compiled_float32_matches_the_unrewritten_graph():
    _check_compiled("float32", 2e-5)


@pytest.mark.slow
def test_compiled_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)

    def jax_fn(x, W1, W2, a, b, c, d, e):
        z = x @ W1
        i, f = jax.nn.sigmoid(z[:, :H]), jax.nn.sigmoid(z[:, H : 2 * H])
        g, o = jnp.tanh(z[:, 2 * H : 3 * H]), jax.nn.sigmoid(z[:, 3 * H :])
        h = o * jnp.tanh(f * 0.5 + i * g)
        s = a @ b.T
        t = c @ jnp.transpose(d, (0, 2, 1))
        u = e @ jnp.transpose(d, (0, 2, 1))
        return jnp.sum(jnp.tanh(h @ W2)) + 0.1 * jnp.sum(s * s) + jnp.sum(jnp.sin(t) * u)

    args = _args("float64")
    value, grads = COMPILED(*args)
    want_value, want_grads = jax.value_and_grad(jax_fn, argnums=ARGNUMS)(*args)
    np.testing.assert_allclose(value, float(want_value), rtol=1e-12)
    for got, want in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-12)


# ------------------------------------------------ the rewrite, on hand-built graphs


def _scatter(gm, piece, shape, starts_stops, axis):
    spec = tuple(
        ("slice", *starts_stops, 1) if d == axis else ("slice", 0, n, 1)
        for d, n in enumerate(shape)
    )
    return gm.op("index_add_zeros", piece, spec=spec, shape=shape)


def _pieces_graph(cuts, axis=1, shape=(3, 6), reuse_interior=False):
    gm = GraphMaker()
    pieces = []
    for start, stop in cuts:
        pshape = tuple(stop - start if d == axis else n for d, n in enumerate(shape))
        pieces.append(_scatter(gm, gm.input(pshape), shape, (start, stop), axis))
    total = pieces[0]
    for p in pieces[1:]:
        total = gm.op("add", total, p)
    if reuse_interior:  # the first partial sum is also returned: computed anyway
        first = gm.op("add", pieces[0], pieces[1])
        total = gm.op("add", first, pieces[2])
        return gm.output(total, gm.op("exp", first))
    return gm.output(gm.op("exp", total))


def _inputs(graph, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal(n.shape).astype(n.dtype) for n in graph.inputs]


def test_tiling_scatters_become_one_concatenate_in_slice_order():
    graph = _pieces_graph([(4, 6), (0, 1), (1, 4)])  # out of order, like reverse mode's
    new = concat_tiled_scatters(graph)
    ops = [n.op for n in new.nodes]
    assert ops.count("concatenate") == 1 and "index_add_zeros" not in ops and "add" not in ops
    cat = next(n for n in new.nodes if n.op == "concatenate")
    ins = [n.id for n in graph.inputs]
    assert [i.id for i in cat.inputs] == [ins[1], ins[2], ins[0]]
    arrays = _inputs(graph)
    np.testing.assert_array_equal(interpret(new, *arrays)[0], interpret(graph, *arrays)[0])


def test_tiling_along_axis_0_of_a_3d_array():
    graph = _pieces_graph([(0, 2), (2, 5)], axis=0, shape=(5, 2, 3))
    new = concat_tiled_scatters(graph)
    assert [n.op for n in new.nodes].count("concatenate") == 1
    arrays = _inputs(graph, seed=3)
    np.testing.assert_array_equal(interpret(new, *arrays)[0], interpret(graph, *arrays)[0])


@pytest.mark.parametrize(
    "cuts",
    [
        [(0, 2), (3, 6)],  # a gap: column 2 stays zero
        [(0, 4), (3, 6)],  # an overlap: column 3 adds up
        [(0, 6)],
    ],
)  # one piece: nothing to join
def test_scatters_that_do_not_tile_stay(cuts):
    graph = _pieces_graph(cuts)
    assert concat_tiled_scatters(graph) is graph


def test_scatters_along_different_axes_stay():
    gm = GraphMaker()
    a, b = gm.input((2, 4)), gm.input((4, 2))
    pa = gm.op("index_add_zeros", a, spec=(("slice", 0, 2, 1), ("slice", 0, 4, 1)), shape=(4, 4))
    pb = gm.op("index_add_zeros", b, spec=(("slice", 0, 4, 1), ("slice", 2, 4, 1)), shape=(4, 4))
    graph = gm.output(gm.op("add", pa, pb))
    assert concat_tiled_scatters(graph) is graph


def test_a_partial_sum_read_elsewhere_is_not_folded_into_the_concatenate():
    graph = _pieces_graph([(0, 1), (1, 4), (4, 6)], reuse_interior=True)
    new = concat_tiled_scatters(graph)
    assert "concatenate" not in [n.op for n in new.nodes]
    arrays = _inputs(graph, seed=4)
    for got, want in zip(interpret(new, *arrays), interpret(graph, *arrays), strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------ which NT products get a copy


@pytest.mark.parametrize(
    "m, n, k, choice",
    [
        (32, 64, 256, "a"),  # LSTM backward dz @ Wh.T: A is the small one
        (8, 256, 64, "a"),
        (64, 32, 256, "b"),  # B no bigger than A
        (128, 256, 10, "b"),  # a short k, small B: a classifier head's g @ W.T
        (4096, 256, 10, None),  # the same head at batch 4096: NT as fast as NN
        (32, 64, 4, None),  # k below 8: not measured, left alone
        (128, 256, 16, "b"),  # B tiny (4096 elements)
        (32, 32, 256, None),  # m*n small: BLAS's NT kernel is fine there
        (128, 256, 256, None),  # big: the general kernels, NT within 15%
        (4096, 256, 256, None),
    ],
)
def test_nt_relayout_choice(m, n, k, choice):
    assert nt_relayout_choice(m, n, k) == choice
