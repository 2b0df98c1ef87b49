"""The CUDA backend: the same optimized joint graph as the CPU path, emitted as
numba.cuda kernels.

Planning is shared: `passes/fuse.py` labels the fused groups (elementwise
chains and their trailing reductions) for both backends; this package only
decides how each unit runs on the GPU and emits it:

  plan.py        graph -> units (fused elementwise kernels with their full
                 reductions, other reductions, GEMMs, copies) with the layout of
                 every value (views are strides, no copies). Pure Python.
  plan_ops.py    the other ops' units: scan, softmax/logsumexp rows, gathers
                 (take_along_axis, nll_loss), cumsum/linrec, concatenate.
  kernel_text.py layouts, units, loads through strides, literals, block trees.
  prelude.py     the kernels' math: device functions for the templates' helpers.
  runtime.py     loads numba.cuda, compiles kernel sources (cached in memory by
                 canonical text), launches them; GEMMs through CuPy/cuBLAS on a
                 real GPU or a tiled numba.cuda kernel otherwise.

Ops it lacks raise `NotImplementedError` naming the op; nothing runs on the
host behind the caller's back. Nothing here is imported by `import tracegrad`.
"""

from __future__ import annotations


def build_cuda_kernel(graph):
    """The kernel contract (`kernel(*device arrays) -> tuple of DeviceArray`)
    for an optimized graph."""
    from tracegrad.codegen.cuda.runtime import CudaKernel

    return CudaKernel(graph)
