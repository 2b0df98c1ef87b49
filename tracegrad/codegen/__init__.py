"""Code generation: IR graph -> Numba kernel, cached on disk as a real .py file.

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph(name="square")
    >>> x = g.add_input(Aval((3,), np.dtype("float64")), "x")
    >>> g.outputs.append(g.new_node("mul", (x, x), {}, x.aval))
    >>> k = build_kernel(g)
    >>> k(np.array([1.0, 2.0, 3.0]))
    (array([1., 4., 9.]),)

Importing this package does not import Numba; `build_kernel` does.
Set TRACEGRAD_LOG=1 to log codegen time, Numba compile time and cache hits.

How a graph becomes a kernel (one module each; imports run one way, down this
list's layers, and tests/reliability/test_layering.py keeps it so):

  planning, shared by both backends (no code written here):
  passes/fuse.py   groups elementwise chains (+ broadcasts, + a trailing
                   reduction) into fusion groups: one loop nest each.
  plan.py          the groups and other nodes as units in dependency order
                   (`schedule`), each stored value's lifetime over them, loop
                   structure (`coalesce`), scan bodies' graphs, `ir_hash`.
  memory.py        offsets from those lifetimes: best-fit placement in one
                   workspace per dtype, an offline plan, the overlap check, and
                   the MemoryReport that `Lowered.memory` shows.
  access.py        views (reshape, broadcast_to, transpose, basic indexing) as
                   index arithmetic (offset and strides), never copies.

  emission for the CPU (Numba):
  emit.py          the Emitter: temporaries at the planned offsets, outputs in
                   their own arrays; the registry of structured emitters.
  fused.py         a fusion group -> loop nest over scalars, dims merged where
                   every access is contiguous; reductions accumulate in
                   registers (float64 for float32 sums).
  structured.py    matmul (BLAS gemm via intrinsics.tg_gemm, transposes as
  linalg_emit.py   flags), softmax family, argmax, var, gather/scatter,
                   concatenate, advanced indexing; LAPACK-backed linalg.
  mathlib.py       exp/log/tanh/sigmoid/sin/cos as straight-line source,
                   expanded in place so loops vectorize (accuracy: see there).
  generate.py      the module: one @njit function for the whole graph (one
                   dispatch per call); nodes without code generation run
                   their NumPy impl between njit segments. Loop bodies that
                   repeat 4+ times become one shared noinline function, and
                   runs of repeated calls are folded back into loops
                   (reroll.py), which keeps deep nets' compile time in check.
  loops.py         scan nodes: the body's kernel called from one njit loop.
  kernel.py        `build_kernel`/`Kernel`/`load_indexed`: generate, cache,
                   compile, load (the top of the CPU backend).

  emission for the GPU: cuda/ (numba.cuda kernels from the same plan; see there).

  around them:
  cache.py         the module is a real, hash-named .py file in the cache dir
                   (written once, verified before import) so Numba's own
                   cache=True works across processes.
  index.py         second cache level: a key of the *traced* graph (plus what
                   is done with it and the pipeline's own source) -> the
                   module's name, so a warm process loads the module without
                   autodiff, passes or code generation (`load_indexed`).
  runtime.py       imports Numba for the kernels without the scipy.linalg
                   import Numba's BLAS probe would do (~0.1-0.17 s).
  background.py, shape_generic.py: builds off the caller's thread, and one
                   kernel for graphs that differ only in literals (above kernel.py).

Big loops (>= 2**18 elements) get a parallel (prange) variant, compiled in a
background thread from the kernel's first call and swapped in when ready
(TRACEGRAD_PARALLEL=sync|0).
Measured numbers are in perf/mathlib_bench.py and perf/codegen_latency.py.
"""

from __future__ import annotations

from typing import Any

from tracegrad.codegen.kernel import (
    _GENERATE_LOCK,
    _MODULE_USERS,
    _PENDING_RELEASES,
    Kernel,
    _calls_blas,
    _generate,
    _load,
    _load_aware,
    build_kernel,
    load_indexed,
    parallel_mode,
    release_pending_modules,
    report_for,
)

__all__ = ["build_kernel", "Kernel"]

_PLANNING = ("ir_hash", "widened_float16")


def __getattr__(name: str) -> Any:
    """`ir_hash` and `widened_float16` (plan.py), imported when first asked for:
    importing this package stays free of the graph passes."""
    if name in _PLANNING:
        from tracegrad.codegen import plan

        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
