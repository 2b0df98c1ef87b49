"""Run the tracegrad benchmark suite and write perf/report.md with its plots.

    python perf/run.py                 # everything: all workloads, float32 and float64, sweeps, cold start
    python perf/run.py --quick         # float32 only, short timing, small sweeps: under a minute
    python perf/run.py --systems tracegrad_eager,numpy --workloads seed_scalar --out /tmp/r

Every workload runs on every system in this one process, timed in interleaved
rounds. Systems whose library is missing are listed as such in the report.
If OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (this machine sets them for
old OpenBLAS builds), this script re-runs itself without them, so numpy's
current OpenBLAS picks its best kernel; the report records the kernel used.
"""

from __future__ import annotations

import os
import sys

_OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def _threads_from_argv(argv) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


def _reexec_with_benchmark_environment() -> None:
    """Thread counts and OpenBLAS overrides must be fixed before numpy/torch/jax load.

    - OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: unset both, for this benchmark process only;
    - --threads N: every library's thread pool (OpenMP, OpenBLAS, MKL, Numba, XLA) gets N threads.
    """
    if os.environ.get("TRACEGRAD_PERF_ENV_READY"):
        return
    env = dict(os.environ, TRACEGRAD_PERF_ENV_READY="1")
    present = [v for v in _OPENBLAS_VARS if v in os.environ]
    if present:
        env["TRACEGRAD_PERF_UNSET_OPENBLAS"] = ", ".join(f"{v}={os.environ[v]}" for v in present)
        for v in present:
            del env[v]
    threads = _threads_from_argv(sys.argv[1:])
    if threads:
        env.update({v: threads for v in _THREAD_VARS})
        if threads == "1":
            env["XLA_FLAGS"] = (
                env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
            ).strip()
    if present or threads:
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


if __name__ == "__main__":
    _reexec_with_benchmark_environment()

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench, report  # noqa: E402
from perf.systems import SYSTEMS  # noqa: E402
from perf.workloads import WORKLOAD_NAMES  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="float32 only, short timing, small sweeps (< 1 min)"
    )
    p.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma list of: {', '.join(SYSTEMS)}"
    )
    p.add_argument(
        "--workloads",
        default=",".join(WORKLOAD_NAMES),
        help=f"comma list of: {', '.join(WORKLOAD_NAMES)}",
    )
    p.add_argument(
        "--dtypes", default=None, help="comma list (default: float32,float64; --quick: float32)"
    )
    p.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent),
        help="folder for report.md and the PNGs (default: perf/)",
    )
    p.add_argument(
        "--no-sweeps", action="store_true", help="skip the compiled-vs-eager size sweeps"
    )
    p.add_argument(
        "--no-cold-start", action="store_true", help="skip the cold-start subprocess runs"
    )
    p.add_argument(
        "--cold-start", action="store_true", help="run the cold-start cases even with --quick"
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="TRACEGRAD_CACHE_DIR for this run (default: a fresh temporary folder, "
        "so first calls are cold compiles)",
    )
    p.add_argument("--repeats", type=int, default=None, help="interleaved rounds")
    p.add_argument(
        "--brisk",
        action="store_true",
        help="full run with shorter timing (7 rounds of ~20 ms batches): all workloads in ~15 min",
    )
    p.add_argument(
        "--cold-from",
        default=None,
        help="JSON written by `perf/cold_start.py --out` earlier: use its cold-start tables "
        "instead of measuring them now (workloads in --cold-workloads are still measured "
        "and added)",
    )
    p.add_argument(
        "--merge-results",
        default=None,
        help="comma list of results.json of earlier runs (e.g. the float32 half): their rows join "
        "this run's report, except those this run measures again",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: write the report from --merge-results and --cold-from",
    )
    p.add_argument(
        "--cold-workloads",
        default=None,
        help="comma list of workloads for the fresh-process cold-start table "
        "(default: the timed workloads; 'none' for none)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for every library (OpenMP, OpenBLAS, MKL, Numba, torch, XLA); "
        "default: each library's own choice (all cores)",
    )
    args = p.parse_args(argv)
    args.systems = [s for s in args.systems.split(",") if s]
    args.workloads = [w for w in args.workloads.split(",") if w]
    bad = [s for s in args.systems if s not in SYSTEMS] + [
        w for w in args.workloads if w not in WORKLOAD_NAMES
    ]
    if bad:
        p.error(f"unknown system/workload: {', '.join(bad)}")
    args.dtypes = (
        args.dtypes.split(",")
        if args.dtypes
        else (["float32"] if args.quick else ["float32", "float64"])
    )
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started = time.perf_counter()
    own_cache = args.cache_dir is None
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="tracegrad-perf-cache-")
    os.environ["TRACEGRAD_CACHE_DIR"] = cache_dir
    if own_cache:
        os.environ["TRACEGRAD_PERF_COLD_TRACEGRAD"] = "1"
    if not args.quick and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        # cold torch.compile too: inductor keeps an on-disk cache of its own
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "torchinductor")
        os.environ["TRACEGRAD_PERF_COLD_INDUCTOR"] = "1"  # (torch sets the variable above itself)
    os.environ.setdefault("TRACEGRAD_LOG", "1")  # stage times for the compile breakdown
    if args.threads:
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    settings = bench.QUICK if args.quick else (bench.BRISK if args.brisk else bench.FULL)
    if args.repeats:
        settings = bench.Settings(**{**settings.__dict__, "repeats": args.repeats})
    load_before = bench.load_average()
    uptime_before = _uptime()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", flush=True)

    print(
        f"tracegrad perf: systems={args.systems} workloads={args.workloads} dtypes={args.dtypes} "
        f"cache={cache_dir}",
        flush=True,
    )
    try:
        results = []
        for dtype in [] if args.report_only else args.dtypes:
            for name in args.workloads:
                results += bench.run_workload(name, dtype, args.systems, settings, log=log)
        if args.merge_results:
            results = _merged(args.merge_results, results)
        sweeps = {}
        if not args.no_sweeps and {"tracegrad_eager", "tracegrad_compiled"} <= set(args.systems):
            sweeps = bench.run_sweeps("float32", settings, args.quick, log=log)
        cold = None
        want_cold = args.cold_start or not (args.quick or args.no_cold_start)
        if want_cold and "tracegrad_compiled" in args.systems:
            cold = _cold_start(args, log)
    finally:
        if own_cache:
            shutil.rmtree(cache_dir, ignore_errors=True)
    notes = []
    if args.threads:
        notes.append(
            f"Every library's thread pool was pinned to {args.threads} thread(s) for this run "
            "(`--threads`): a per-core comparison that is far less sensitive to other processes "
            "on this shared 2-core machine than the default all-cores run."
        )
    if args.quick:
        notes.append(
            "Quick run (`--quick`): float32 only, short timing batches; numbers are noisier "
            "than a full run."
        )
    info = report.machine_info()
    info["load average (1 min) before / after"] = (
        f"{load_before:.2f} / {bench.load_average():.2f} on {os.cpu_count()} CPUs "
        "(other processes on this machine share the cores; see the noise note)"
        if load_before is not None
        else "unknown"
    )
    uptime_after = _uptime()
    info["uptime before / after"] = f"`{uptime_before}` / `{uptime_after}`"
    if args.merge_results:
        import json

        for i, path in enumerate(args.merge_results.split(",")):
            earlier = json.loads(Path(path).read_text())
            info[f"merged run {i + 1}"] = (
                f"rows from `perf/run.py {' '.join(earlier.get('argv', []))}` on {earlier.get('date', '?')}, "
                "uptime before / after: "
                + " / ".join(f"`{u}`" for u in earlier.get("uptime", ["?"]))
            )
    path = report.write_report(
        Path(args.out),
        results,
        sweeps,
        cold,
        info,
        argv,
        settings,
        time.perf_counter() - started,
        notes,
    )
    _save_raw(
        Path(args.out),
        results,
        sweeps,
        cold,
        {"argv": argv, "uptime": [uptime_before, uptime_after], "date": info["date"]},
    )
    print(f"wrote {path} in {time.perf_counter() - started:.1f} s")
    for line in _summary(results):
        print(line)
    return 0


def _cold_start(args, log) -> dict:
    """The cold-start tables: measured now in fresh processes, or read from --cold-from (+ additions)."""
    import json

    from perf import cold_start

    names = (
        args.workloads
        if args.cold_workloads is None
        else [w for w in args.cold_workloads.split(",") if w and w != "none"]
    )
    if args.cold_from:
        cold = json.loads(Path(args.cold_from).read_text())
        cold["note"] = (
            cold.get("note", "") + f" (measured earlier by `perf/cold_start.py`, read from "
            f"`{Path(args.cold_from).name}`)"
        )
        if args.cold_workloads is None:
            return cold
    else:
        cold = cold_start.measure(runs=1 if (args.quick or args.brisk) else 3, log=log)
    if names:
        more = cold_start.measure_workloads(names, log=log)
        if "workloads" in cold:
            cold["workloads"]["rows"] += more["rows"]
        else:
            cold["workloads"] = more
    return cold


def _merged(paths: str, results: list) -> list:
    """Earlier runs' rows (comma list of results.json) followed by this run's; later ones win on a tie."""
    import dataclasses
    import json

    fields = {f.name for f in dataclasses.fields(bench.Result)}
    merged = {}
    for path in paths.split(","):
        for row in json.loads(Path(path).read_text())["results"]:
            r = bench.Result(**{k: v for k, v in row.items() if k in fields})
            merged[(r.workload, r.dtype, r.system)] = r
    for r in results:
        merged[(r.workload, r.dtype, r.system)] = r
    return list(merged.values())


def _uptime() -> str:
    """`uptime`'s line: the machine's load when the run started and ended (recorded in the report)."""
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:
        return f"uptime unavailable: {exc}"


def _save_raw(out_dir: Path, results, sweeps, cold, run_info: dict) -> None:
    """The measurements behind the report, as JSON (results.json beside report.md)."""
    import dataclasses
    import json

    raw = {
        "results": [dataclasses.asdict(r) for r in results],
        "sweeps": sweeps,
        "cold_start": cold,
        **run_info,
    }
    (out_dir / "results.json").write_text(json.dumps(raw, indent=1, default=str))


def _summary(results):
    yield f"{'workload':16s} {'dtype':8s} {'system':20s} {'median':>12s} {'x best peer':>11s}  status"
    for r in results:
        med = report.fmt_time(r.median)
        yield (
            f"{r.workload:16s} {r.dtype:8s} {r.system:20s} {med:>12s} {report.fmt_ratio(r.ratio):>11s}  "
            f"{r.status} {r.detail[:80]}"
        )


if __name__ == "__main__":
    sys.exit(main())
