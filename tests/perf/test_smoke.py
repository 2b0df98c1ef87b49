"""Smoke test of the benchmark harness: a tiny quick run writes a report with its table.

It times nothing against a target; it checks that `perf/run.py` runs end to end on
tracegrad and the NumPy reference and writes `report.md` with the results table.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_report(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [
        sys.executable,
        str(ROOT / "perf" / "run.py"),
        "--quick",
        "--no-sweeps",
        "--no-cold-start",
        "--systems",
        "tracegrad_eager,tracegrad_compiled,numpy",
        "--workloads",
        "seed_scalar",
        "--repeats",
        "2",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = (tmp_path / "report.md").read_text()
    assert "# tracegrad performance report" in report
    assert "| workload | NumPy by hand |" not in report  # systems keep their registry order
    header = "| workload | tracegrad eager | tracegrad compiled | NumPy by hand |"
    assert header in report
    row = next(line for line in report.splitlines() if line.startswith("| `seed_scalar` |"))
    numpy_cell = row.split("|")[4]
    assert "µs" in numpy_cell and "1.00×" in numpy_cell  # the only peer is its own best peer
    assert "## Targets from issue 4" in report
    assert "## Eager speed check (issue 2)" in report
