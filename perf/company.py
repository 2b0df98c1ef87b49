"""Issue 23, "ourselves in company": each workload's tracegrad median in the full mixed
benchmark process (every system, every workload, interleaved: perf/run.py) against the
same workload run alone (a fresh process with tracegrad compiled only).

    python perf/company.py                         # every workload, float32 and float64
    python perf/company.py --workloads gp_nll_n256,mlp_layernorm_b64 --dtypes float32
    python perf/company.py --quick                 # short timing (a smoke run, not a result)

Writes perf/company.md and perf/company.json (or --out DIR). The target is a ratio
(mixed / alone) of 1.2 or less for every row. Run it on an idle machine: the two
medians come from different processes, minutes apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 1.2
SYSTEM = "tracegrad_compiled"


def run_benchmark(out: Path, workloads: list[str], dtypes: str, systems: str | None, quick: bool):
    """perf/run.py in a fresh process; its results.json rows."""
    cmd = [sys.executable, str(HERE / "run.py"), "--out", str(out), "--no-sweeps"]
    cmd += ["--no-cold-start", "--workloads", ",".join(workloads), "--dtypes", dtypes]
    cmd += ["--quick"] if quick else ["--brisk"]
    if systems:
        cmd += ["--systems", systems]
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "results.json").read_text())["results"]


def medians(rows: list[dict]) -> dict[tuple[str, str], float]:
    return {
        (r["workload"], r["dtype"]): r["median"]
        for r in rows
        if r["system"] == SYSTEM and r.get("status") == "ok"
    }


def main(argv=None) -> None:
    sys.path.insert(0, str(HERE.parent))
    from perf.workloads import WORKLOAD_NAMES

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workloads", default=",".join(WORKLOAD_NAMES))
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(HERE))
    args = p.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    out = Path(args.out)
    scratch = Path(tempfile.mkdtemp(prefix="tracegrad-company-"))  # each run's report.md
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    mixed = medians(run_benchmark(scratch / "mixed", workloads, args.dtypes, None, args.quick))
    alone: dict[tuple[str, str], float] = {}
    for w in workloads:
        rows = run_benchmark(scratch / f"alone-{w}", [w], args.dtypes, SYSTEM, args.quick)
        alone.update(medians(rows))
    table = []
    for key in sorted(mixed.keys() & alone.keys()):
        ratio = mixed[key] / alone[key]
        table.append(
            {
                "workload": key[0],
                "dtype": key[1],
                "mixed_us": mixed[key] * 1e6,
                "alone_us": alone[key] * 1e6,
                "ratio": ratio,
                "pass": ratio <= TARGET,
            }
        )
    result = {
        "date": started,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "quick": args.quick,
        "rows": table,
    }
    (out / "company.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# Ourselves in company (perf/company.py)",
        "",
        f"Run {started}; load average {load_before:.1f} before, {result['load_after']:.1f} "
        f"after{' (--quick: a smoke run, not a result)' if args.quick else ''}. "
        f"tracegrad compiled's median in perf/run.py's full mixed process (every system "
        f"and workload, interleaved) over its median alone in a fresh process. "
        f"Target: {TARGET} or less.",
        "",
        "| workload | dtype | mixed (us) | alone (us) | ratio | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in table:
        verdict = "pass" if r["pass"] else "FAIL"
        lines.append(
            f"| {r['workload']} | {r['dtype']} | {r['mixed_us']:.1f} | {r['alone_us']:.1f} "
            f"| {r['ratio']:.2f} | {verdict} |"
        )
    missing = sorted(set(mixed) ^ set(alone))
    if missing:
        lines += ["", f"Measured in one process only: {missing}"]
    (out / "company.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
