"""Larger and odd shapes on the CUDA backend (simulator): GEMM tiles cut by the
edges, broadcast batches, reductions with several chunks per output over leading
axes, long rows. Slower, so in CI's second pass only."""

import pytest
from test_cuda_primitives import (
    _x,
    check,
)  # (tests/cuda is on sys.path: pytest's rootdir-less import)

import tracegrad as tg

pytestmark = pytest.mark.numba_pass


@pytest.mark.parametrize(
    "sa,sb",
    [((9, 7), (7, 10)), ((2, 1, 5, 3), (4, 3, 6)), ((17,), (17, 5)), ((3, 17), (17,))],
)
def test_gemm_edges_and_broadcast_batches(sa, sb):
    check(lambda a, b: tg.sum(tg.sin(a @ b)), _x(sa), _x(sb), argnums=(0, 1), rtol=3e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape,op,axis",
    [((300, 3), "sum", 0), ((3, 300, 2), "max", 1), ((40, 50), "mean", None), ((6, 70), "min", 1)],
)
def test_reductions_with_several_chunks(shape, op, axis):
    red = getattr(tg, op)
    check(lambda x: tg.sum(tg.tanh(red(x * x, axis=axis))), _x(shape), rtol=3e-5, atol=1e-5)


def test_long_rows_and_wide_broadcasts():
    check(lambda z: tg.sum(tg.softmax(z, axis=-1) * z), _x((2, 200)), rtol=3e-5)
    check(lambda a, b: tg.sum(tg.exp(-((a + b) ** 2))), _x((50, 1)), _x((1, 40)), argnums=(0, 1))
