"""Each system in a process of its own: the steady-state ratios without the other
libraries' thread pools in the process.

perf/run.py times every system in one process, interleaved. That is the report's
method, and a fair one for a user who runs several libraries side by side; but
on 2 cores the pools then take CPU from each other: OpenBLAS's workers spin for
about 0.1 s after each threaded call (tracegrad cannot shorten that when NumPy
was imported first, see runtime/threads.py), and XLA's Eigen pool spins too, so
whichever system runs next pays for the last one's threads. This script
re-measures chosen workloads with one system per fresh process. Processes
alternate in rounds (tracegrad, jax, torch, tracegrad, ...), so drift in the
machine's load reaches every system alike; each process prepares, waits for
background builds, warms up and times `--batches` batches. A system's number is
the median over rounds of each process's median batch.

    python perf/isolated.py gp_nll_n256:float64,attention_4h_t64:float32 --rounds 3

It writes nothing unless `--out FILE` is given (a Markdown table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
SYSTEM_KEYS = ("tracegrad_compiled", "jax", "torch_compile", "torch_eager")


def _child(spec: str, key: str, batches: int) -> dict:
    """Runs in the fresh process: the per-call seconds of each timed batch."""
    sys.path.insert(0, ROOT)
    from perf import systems, workloads

    name, dtype = spec.split(":")
    prepared = systems.SYSTEMS[key].prepare(workloads.make_workload(name, dtype))
    prepared.call()
    if prepared.settle is not None:
        prepared.settle()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:  # warm up for half a second
        prepared.call()
    calls = max(1, int(0.02 / max((time.perf_counter() - start) / 50, 1e-6)))
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            prepared.call()
        per_call.append((time.perf_counter() - t0) / calls)
    return {"median": statistics.median(per_call), "min": min(per_call)}


def _spawn(spec: str, key: str, batches: int) -> dict | None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    }
    proc = subprocess.run(
        [sys.executable, __file__, "--child", spec, key, str(batches)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"  {spec} {key}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def measure(specs: list[str], keys: list[str], rounds: int, batches: int) -> dict:
    """{spec: {key: (median of process medians, min of process mins)}}."""
    out: dict = {}
    for spec in specs:
        runs: dict = {k: [] for k in keys}
        for r in range(rounds):
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
                got = _spawn(spec, key, batches)
                if got is not None:
                    runs[key].append(got)
        out[spec] = {
            k: (statistics.median(g["median"] for g in v), min(g["min"] for g in v))
            for k, v in runs.items()
            if v
        }
        _print_row(spec, out[spec])
    return out


def _ratios(row: dict) -> tuple[float, str] | None:
    peers = {k: v[0] for k, v in row.items() if k != "tracegrad_compiled"}
    if "tracegrad_compiled" not in row or not peers:
        return None
    best = min(peers, key=lambda k: peers[k])
    return row["tracegrad_compiled"][0] / peers[best], best


def _print_row(spec: str, row: dict) -> None:
    cells = " ".join(f"{k} {v[0] * 1e3:.3f} ms" for k, v in row.items())
    ratio = _ratios(row)
    tail = f" | tracegrad / best peer ({ratio[1]}) {ratio[0]:.2f}x" if ratio else ""
    print(f"{spec}: {cells}{tail}", flush=True)


def markdown(result: dict, keys: list[str]) -> str:
    head = "| workload | " + " | ".join(keys) + " | tracegrad / best peer |"
    rule = "|---" * (len(keys) + 2) + "|"
    rows = []
    for spec, row in result.items():
        cells = [f"{row[k][0] * 1e3:.3f} ms" if k in row else "n/a" for k in keys]
        ratio = _ratios(row)
        rows.append(
            f"| `{spec}` | "
            + " | ".join(cells)
            + (f" | {ratio[0]:.2f}× ({ratio[1]}) |" if ratio else " | n/a |")
        )
    return "\n".join([head, rule, *rows]) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workloads", help="name:dtype[,name:dtype...]")
    p.add_argument("--systems", default=",".join(SYSTEM_KEYS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=25)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    keys = args.systems.split(",")
    result = measure(args.workloads.split(","), keys, args.rounds, args.batches)
    if args.out:
        with open(args.out, "w") as f:
            f.write(markdown(result, keys))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    else:
        sys.exit(main())
