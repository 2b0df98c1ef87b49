"""Smoke tests of perf/distributed_bench.py (issue 16's measurements).

Quick: the command line, the data layout (every worker count sees the same global
batches), the 64-worker paper model against a hand calculation, and a tiny
single-process run that writes a report. Slow: a quick run of every system,
Dask clusters and DDP included.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "perf" / "distributed_bench.py"


def _load():
    spec = importlib.util.spec_from_file_location("distributed_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load()


def _run(*args, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=str(ROOT),
    )


def test_help_names_the_arguments():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--rows", "--repeats", "--quick", "--systems", "--batch"):
        assert flag in proc.stdout


def test_a_batch_that_does_not_divide_the_rows_is_refused():
    proc = _run("--rows", "1000", "--batch", "300", "--systems", "tracegrad_1t")
    assert proc.returncode != 0 and "--batch must divide --rows" in proc.stderr


def test_every_worker_count_sees_the_same_global_batch():
    batch = 8
    for k in range(3):
        whole_x, whole_t = bench.worker_batch(k, 0, 1, batch)
        parts = [bench.worker_batch(k, w, 2, batch) for w in range(2)]
        np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), whole_x)
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), whole_t)
        assert whole_x.shape == (batch, 784) and whole_x.dtype == np.float32
        assert whole_t.shape == (batch, 1) and set(np.unique(whole_t)) <= set(range(10))
    assert not np.array_equal(
        bench.worker_batch(0, 0, 1, batch)[0], bench.worker_batch(1, 0, 1, batch)[0]
    )


def test_scaling_model_matches_a_hand_calculation():
    # P = 1 MB at 8 Gb/s: one message takes p = 1 ms; 64 workers: 6 tree levels,
    # ceil(log3 64) = 4 replicate rounds; hops of 0.1 ms; 1 ms of scheduler per task
    m = bench.scaling_model(
        64,
        compute_1=6.4,
        params_bytes=1e6,
        bandwidth_bps=8e9,
        call_1=0.010,
        call_2=0.015,
        task_s=1e-3,
        hop_s=1e-4,
    )
    assert m["compute"] == pytest.approx(0.1)
    assert m["dask_fixed"] == pytest.approx(0.010 + 6 * 0.005 + 125 * 1e-3)
    # parameters: 2 hops to the first worker + 4 rounds of 2 copies; gradients: 6 levels + 2 hops
    assert m["dask_comm"] == pytest.approx((2 + 8 + 6 + 2) * 1e-3 + 14 * 1e-4)
    assert m["star_comm"] == pytest.approx((2 + 8 + 128) * 1e-3 + 8 * 1e-4)
    assert m["ring_comm"] == pytest.approx(2 * 63 / 64 * 1e-3 + 126 * 1e-4)
    assert m["ring"] == pytest.approx(0.1 + m["ring_comm"])
    one = bench.scaling_model(1, 6.4, 1e6, 8e9, 0.010, 0.015)
    assert one["ring_comm"] == 0 and one["dask_fixed"] == pytest.approx(0.010)


def test_a_tiny_single_process_run_writes_a_report(tmp_path):
    out = tmp_path / "d.md"
    proc = _run(
        "--rows",
        "400",
        "--batch",
        "100",
        "--repeats",
        "2",
        "--calls",
        "1",
        "--systems",
        "tracegrad_1t",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| tracegrad, 1 process"))
    cells = [c.strip() for c in row.split("|")]
    assert float(cells[5]) > 0 and cells[7] == "1.00×"  # evaluations/s; its own baseline
    assert "Not computed: needs dask_1w and dask_2w" in text


@pytest.mark.slow
def test_quick_run_of_every_system(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "d.md"
    proc = _run("--quick", "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    for label in bench.LABELS.values():
        row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        assert "error" not in row, row
        agrees = float(row.split("|")[9])
        assert agrees < 1e-4, row  # every system computed the same loss and gradients
    assert "| 64 | 1 Gb/s |" in text and "| 64 | 10 Gb/s |" in text
    assert (
        "Every batch stayed on the worker that made it (one copy each, never moved): "
        "1 worker: True, 2 workers: True" in text
    )
