"""The CUDA backend: the same optimized joint graph as the CPU path, emitted as
numba.cuda kernels.

Planning is shared: `passes/fuse.py` labels the fused groups (elementwise
chains and their trailing reductions) for both backends; this package only
decides how each unit runs on the GPU and emits it:

  plan.py     graph -> units (fused elementwise kernels, reductions, GEMMs,
              copies) with the layout of every value (views are strides, no
              copies), and the CUDA source of each kernel. Pure Python.
  runtime.py  loads numba.cuda, compiles kernel sources (cached in memory by
              source text), launches them, GEMMs through CuPy/cuBLAS on a real
              GPU or a tiled numba.cuda kernel otherwise.

Ops it lacks raise `NotImplementedError` naming the op; nothing runs on the
host behind the caller's back. Nothing here is imported by `import tracegrad`.
"""

from __future__ import annotations


def build_cuda_kernel(graph):
    """The kernel contract (`kernel(*device arrays) -> tuple of DeviceArray`)
    for an optimized graph."""
    from tracegrad.codegen.cuda.runtime import CudaKernel

    return CudaKernel(graph)
