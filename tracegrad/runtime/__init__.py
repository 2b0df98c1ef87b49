"""The native runtime: what compiled kernels and eager mode's fast paths run on.

Below the rule table (`tracegrad.ops` imports it; it imports only `tracegrad.config`):

- `numba_loader`: imports Numba once, lazily, with SciPy's BLAS probe controlled;
- `cache`: the on-disk kernel cache (source files named by their hash, verified
  before import), and `numba_cache`: Numba's own cached machine code, verified
  the same way before it is unpickled;
- `intrinsics`: Numba intrinsics the generated kernels call (GEMM, views);
- `mathlib`: the scalar math helpers of generated kernels (exp, tanh, ...);
- `eager_math`: eager mode's Numba kernels, loaded in the background.

The code generator (`tracegrad.codegen`) writes kernels against these pieces.
"""
