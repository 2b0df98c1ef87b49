"""Forward mode (issue 13): tg.jacfwd and tg.jvp before and after per-primitive JVP rules.

"Before" is tracegrad/transforms.py as it was before forward mode (the double
VJP: jvp by transposing the pullback), loaded from git (`--before REV`, default
the commit before forward mode landed); "after" is the current tracegrad. Each
case runs in this process with an empty kernel cache directory:

    python perf/forward_mode.py                      # interpreter and Numba
    python perf/forward_mode.py --backend interpret  # no Numba compiles (quick)

Cases: jacfwd of a wide-output function (400 outputs, 8 and 32 inputs:
tanh(W x) feeding sin(V h) * h + exp(-h^2)), and jvp of an RNN written with
tg.scan (200 steps of tanh(Wh h + x_t)). Reported: first call (trace, autodiff,
passes, codegen and Numba compile), the median of 30 later calls, and the node
counts of the traced and optimized graphs. The machine is shared: run it twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
BEFORE = "dc34618~1"  # the commit before the forward-mode commits


def load_before(rev: str):
    """tracegrad/transforms.py at `rev`, as a module using today's tracegrad."""
    source = subprocess.run(
        ["git", "show", f"{rev}:tracegrad/transforms.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = pathlib.Path(tempfile.mkdtemp()) / "transforms_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("transforms_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(call, repeats: int = 30) -> tuple[float, float]:
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times) if times else float("nan")


def wait_for_background(lowered) -> None:
    kernel = getattr(lowered, "kernel", None)
    if hasattr(kernel, "wait_parallel"):
        kernel.wait_parallel()


def jacfwd_case(tg, module, n_in: int, backend: str) -> str:
    rng = np.random.default_rng(0)
    W, V = rng.standard_normal((400, n_in)), rng.standard_normal((400, 400)) / 20
    x = rng.standard_normal(n_in)

    def wide(x):
        h = tg.tanh(W @ x)
        return tg.sin(V @ h) * h + tg.exp(-(h**2))

    jf = module.jacfwd(wide, backend=backend)
    first, _ = timed(lambda: jf(x), repeats=0)
    lowered = jf.lower(x)
    wait_for_background(lowered)
    _, median = timed(lambda: jf(x))
    return (
        f"first call {first:7.3f} s, median call {median * 1e3:8.3f} ms, traced "
        f"{len(lowered.traced.nodes):5d} nodes, optimized {len(lowered.optimized.nodes):4d}"
    )


def scan_jvp_case(tg, module, backend: str) -> str:
    rng = np.random.default_rng(0)
    Wh = rng.standard_normal((16, 16)) / 4
    xs, h0, txs = rng.standard_normal((200, 16)), np.zeros(16), rng.standard_normal((200, 16))

    def rnn(h0, xs):
        def body(h, x):
            h = tg.tanh(Wh @ h + x)
            return h, tg.sum(h * h)

        return tg.scan(body, h0, xs)[1]

    first, _ = timed(lambda: module.jvp(rnn, (h0, xs), (h0, txs), backend=backend), repeats=0)
    compiled = module._CACHE[rnn][("jvp", False, backend)]
    lowered = compiled.lower((h0, xs), (h0, txs))
    wait_for_background(lowered)
    _, median = timed(lambda: compiled((h0, xs), (h0, txs)))
    scans = [n for n in lowered.optimized.nodes if n.op == "scan"]
    return (
        f"first call {first:7.3f} s, median call {median * 1e3:8.3f} ms, traced "
        f"{len(lowered.traced.nodes):5d} nodes, optimized {len(lowered.optimized.nodes):4d}, "
        f"{len(scans)} scans, residuals {lowered.scan_residual_bytes} bytes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=BEFORE, help="git revision of the old transforms")
    parser.add_argument("--backend", choices=["interpret", "numba", "both"], default="both")
    args = parser.parse_args()
    os.environ["TRACEGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="tg-forward-mode-")
    import tracegrad as tg
    import tracegrad.transforms as after

    before = load_before(args.before)
    backends = ["interpret", "numba"] if args.backend == "both" else [args.backend]
    for backend in backends:
        for label, module in (("before", before), ("after", after)):
            for n_in in (8, 32):
                print(
                    f"{backend:9s} {label:6s} jacfwd 400x{n_in:<3d} "
                    f"{jacfwd_case(tg, module, n_in, backend)}",
                    flush=True,
                )
            print(
                f"{backend:9s} {label:6s} jvp scan x200  {scan_jvp_case(tg, module, backend)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
