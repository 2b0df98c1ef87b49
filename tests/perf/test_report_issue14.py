"""The issue-14 verdicts in perf/report.md: the right peers, the right threshold per size.

Built from hand-made `Result` rows (no timing): tracegrad compiled is judged against the
best of jax.jit / torch.compile / PyTorch eager only (NumPy by hand and HIPS autograd
never count), with a 0.5x target under 1 MFLOP and 1.0x above.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import report  # noqa: E402
from perf.bench import FRAMEWORK_PEERS, Result  # noqa: E402


def _rows(workload, flops, times):
    """Results as bench.run_workload leaves them: ratio_frameworks against the best framework."""
    rows = [Result(workload, "float32", key, median=t, flops=flops) for key, t in times.items()]
    frameworks = {r.system: r.median for r in rows if r.system in FRAMEWORK_PEERS}
    best = min(frameworks, key=frameworks.get)
    for r in rows:
        r.ratio_frameworks, r.best_framework = r.median / frameworks[best], best
    return rows


def _row_of(lines, workload):
    return next(line for line in lines if line.startswith(f"| `{workload}` |"))


def test_small_workload_needs_half_the_best_framework():
    results = _rows(
        "linreg_n1000",
        3e5,
        {
            "tracegrad_compiled": 60e-6,
            "torch_eager": 100e-6,
            "torch_compile": 300e-6,
            "jax": 110e-6,
            "numpy": 10e-6,
        },
    )
    row = _row_of(report.section_issue14(results), "linreg_n1000")
    assert "| yes |" in row and "PyTorch eager" in row and "0.60×" in row
    assert "≤ 0.5×" in row and "**FAIL**" in row  # NumPy by hand (10 µs) is not a framework peer


def test_large_workload_needs_at_most_the_best_framework():
    results = _rows(
        "lstm_scan_t20",
        9.6e7,
        {"tracegrad_compiled": 0.9e-3, "torch_eager": 5e-3, "torch_compile": 4e-3, "jax": 1e-3},
    )
    lines = report.section_issue14(results)
    row = _row_of(lines, "lstm_scan_t20")
    assert "| no |" in row and "jax.jit" in row and "0.90×" in row and "**pass**" in row
    summary = report.section_summary(results, [], [], lines)
    assert any("Issue 14" in s and "1 pass, 0 fail" in s for s in summary)


def test_missing_framework_is_not_a_pass():
    results = [Result("conv2d_b8_32px", "float64", "tracegrad_compiled", median=1e-3, flops=2e7)]
    row = _row_of(report.section_issue14(results), "conv2d_b8_32px")
    assert "n/a" in row and "**pass**" not in row


def test_cold_table_lists_every_compiler_and_failures():
    cold = {
        "workloads": {
            "columns": [
                "tracegrad, empty cache",
                "tracegrad, warm cache",
                "jax.jit",
                "torch.compile",
            ],
            "dtype": "float32",
            "note": "n",
            "rows": [
                {
                    "workload": "lstm_scan_t20",
                    "tracegrad, empty cache": {"first_result": 2.5, "import": 0.03, "status": "ok"},
                    "tracegrad, warm cache": {"first_result": 0.4, "status": "ok"},
                    "jax.jit": {"first_result": 1.1, "import": 1.0, "status": "ok"},
                    "torch.compile": {"status": "failed: TypeError: boom"},
                }
            ],
        }
    }
    row = _row_of(report.section_cold_workloads(cold), "lstm_scan_t20")
    assert (
        "2.50 s" in row
        and "400.00 ms" in row
        and "1.10 s" in row
        and "failed: TypeError: boom" in row
    )
