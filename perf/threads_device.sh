#!/usr/bin/env bash
# Issue 23 on a many-core machine that has numba, numpy, torch, jax and scipy installed
# and no network: installs nothing, runs perf/threads.py from this checkout and writes
# its table (threads.md, threads.json, threads.png) to $OUT (default perf/), with the
# machine's description beside it.
#   bash perf/threads_device.sh            # about 10-15 minutes on 16 cores
#   QUICK=1 bash perf/threads_device.sh    # one repeat, fewer rounds, no torch.compile
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$ROOT/perf}"
mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export JAX_PLATFORMS=cpu
export TRACEGRAD_CACHE_DIR="${TRACEGRAD_CACHE_DIR:-$(mktemp -d)}"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE   # perf/threads.py unsets them for its children too
ARGS=()
if [ "${QUICK:-0}" = 1 ]; then
  ARGS=(--repeats 1 --rounds 15 --calls 10 --no-torch-compile)
fi
{
  echo "machine: $(nproc) CPUs, $(python3 -c 'import platform; print(platform.processor() or platform.machine())')"
  grep -m1 "model name" /proc/cpuinfo || true
  python3 -c 'import sys, numpy, numba; print("python", sys.version.split()[0], "numpy", numpy.__version__, "numba", numba.__version__)'
  python3 -c 'import torch; print("torch", torch.__version__, torch.get_num_threads(), "threads")' || true
  python3 -c 'import jax; print("jax", jax.__version__)' || true
} > "$OUT/threads_machine.txt" 2>&1
python3 "$ROOT/perf/threads.py" --out "$OUT" "${ARGS[@]}" 2>&1 | tee "$OUT/threads_log.txt"
cat "$OUT/threads.md"
