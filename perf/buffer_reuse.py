"""Workspace memory of every perf workload's kernel (issue 14: buffer reuse).

Prints one Markdown row per kernel (and per scan body, which is a kernel of its
own): the workspace bytes, the peak of bytes live at once (no placement of the
temporaries can need less), and the bytes one region per temporary would need.
Reads `Lowered.memory`, which comes from the generated source: no Numba compile,
about 10 s for all workloads.

    python perf/buffer_reuse.py                      # all workloads, float32 and float64
    python perf/buffer_reuse.py attention_4h_t64     # some
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tracegrad as tg  # noqa: E402 - after the sys.path line that makes perf/ importable as a script
from perf.workloads import WORKLOAD_NAMES, make_workload  # noqa: E402 - after the sys.path line that makes perf/ importable as a script


def rows(name: str, dtype: str):
    """(kernel label, MemoryReport) for the workload's kernel and its scan bodies."""
    w = make_workload(name, dtype)
    f = tg.value_and_grad(w.tracegrad_fn, argnums=tuple(range(len(w.params))), backend="interpret")
    memory = f.lower(*w.params, *w.data).memory
    yield "kernel", memory
    for k, body in enumerate(memory.loops):
        yield f"scan body {k}", body


def main(names) -> None:
    print("| workload | dtype | kernel | workspace (B) | peak live (B) | no reuse (B) |")
    print("|---|---|---|---:|---:|---:|")
    for name in names:
        for dtype in ("float32", "float64"):
            for label, m in rows(name, dtype):
                if m.no_reuse_bytes:
                    print(
                        f"| {name} | {dtype} | {label} | {m.total_workspace_bytes:,} | "
                        f"{m.peak_live_bytes:,} | {m.no_reuse_bytes:,} |"
                    )


if __name__ == "__main__":
    main(sys.argv[1:] or WORKLOAD_NAMES)
