"""Smoke test of perf/train_step.py (issue 22's training-step benchmark): its code path on
the character MLP, two steps, on the NumPy interpreter backend, in this process.

It times nothing against a target; it checks that `measure` returns the fields the
report reads, that the compiled and eager losses agree, and that the report has its
tables and ratios.
"""

import json

from perf import train_step as ts


def test_train_step_report_has_its_fields():
    rows = [
        ts.measure(
            "char_mlp",
            "tracegrad_compiled",
            steps=2,
            warmup=1,
            backend="interpret",
            profile_steps=1,
        ),
        ts.measure("char_mlp", "tracegrad_eager", steps=2, warmup=1),
    ]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        for key in (
            "first_step_s",
            "median_s",
            "p10_s",
            "p90_s",
            "losses",
            "step_times",
            "load_before",
        ):
            assert key in r, key
        assert len(r["losses"]) == len(r["step_times"]) == 4 and r["timed_steps"] == 2
    compiled, eager = rows
    assert compiled["backend"] == "interpret"
    assert "profile" in compiled and compiled["profile"]["top_own_time"]
    for r, label in zip(rows, ("cold cache", ""), strict=True):
        r.update(run=label, child_wall_s=0.0, child_load_before=1.0, child_load_after=1.0)
    summary = ts.summarize(rows, ["char_mlp"])
    s = summary["char_mlp"]
    assert s["compiled / tracegrad eager"] > 0
    assert s["compiled / torch.compile"] is None  # not run here
    assert s["loss max rel diff, compiled vs tracegrad eager"] < 1e-5
    info = {"load average (1 min) at start / end": "1.00 / 1.00"}
    md = ts.report_markdown(rows, summary, info)
    assert "## Per-step time" in md and "## Ratios (same run) and targets" in md
    assert "| `char_mlp` | 32 |" in md and "load average" in md
    assert "## Where the compiled step's time goes" in md
    json.dumps({"summary": summary, "results": rows}, default=str)
