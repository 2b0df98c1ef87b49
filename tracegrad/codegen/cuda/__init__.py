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
  runtime.py     loads numba.cuda, compiles kernel sources (modules in the disk
                 cache, compiled once per process per canonical text), launches
                 them; GEMMs through CuPy/cuBLAS on a real GPU or a tiled
                 numba.cuda kernel otherwise.
  disk.py        plans (units, launch configurations) in the disk cache, found
                 from the traced graph's index key by a warm process.

Ops it lacks raise `NotImplementedError` naming the op; nothing runs on the
host behind the caller's back. Nothing here is imported by `import tracegrad`.
"""

from __future__ import annotations

import logging

log = logging.getLogger("tracegrad")


def build_cuda_kernel(graph, index_key: str | None = None, in_types=None):
    """The kernel contract (`kernel(*device arrays) -> tuple of DeviceArray`)
    for an optimized graph. With `index_key` (the traced graph's, codegen/index.py)
    and `in_types` (its inputs' (shape, dtype)s), the plan is recorded in the disk
    cache for `load_cuda_indexed` (disk.py)."""
    from tracegrad.codegen.cuda.runtime import CudaKernel

    kernel = CudaKernel(graph)
    if index_key is not None and in_types is not None:
        from tracegrad.codegen.cuda import disk

        what = disk.write(index_key, kernel.plan, graph.name, in_types)
        log.info("cuda %s: plan %s", graph.name, what)
    return kernel


def load_cuda_indexed(index_key: str, in_types, graph_factory, label: str = "f"):
    """The CUDA kernel whose plan the disk cache records for the traced graph's
    `index_key` (no autodiff, passes or planning; kernel modules from their verified
    files), or None (reason logged). `graph_factory` rebuilds the optimized graph if
    an error message needs it."""
    from tracegrad.codegen.cuda import disk
    from tracegrad.codegen.cuda.runtime import STATS, CudaKernel

    plan, name = disk.read(index_key, in_types)  # (name: why not, without a plan)
    if plan is None:
        log.info("cuda %s: plan index miss (%s)", label, name)
        return None
    kernel = CudaKernel(plan=plan, graph_factory=graph_factory, name=name, n_inputs=len(in_types))
    STATS["plans_loaded"] += 1
    log.info("cuda %s: plan loaded from the disk cache (%d units)", label, len(plan.units))
    return kernel
