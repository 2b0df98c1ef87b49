"""Smoke runs of the examples at their smallest settings, each in a fresh process.

Each run checks the example's own claims in its output (gradients agree,
the tracing error is raised, files are written), not just its exit code.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, timeout: float = 120) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def number_after(text: str, label: str) -> float:
    match = re.search(re.escape(label) + r"\s*([-+0-9.eE]+|nan)", text)
    assert match, f"{label!r} not in output"
    return float(match.group(1))


def test_eager_vs_traced(tmp_path):
    short = run_example("eager_vs_traced.py", "--quick", "--out", str(tmp_path / "short"))
    assert len(short.splitlines()) <= 45  # the story fits one screen
    assert "IR before AD" not in short and "Timing: median" in short
    assert (tmp_path / "short" / "ir_joint.txt").read_text().startswith("graph ")
    out = run_example(
        "eager_vs_traced.py", "--quick", "--show-ir", "--show-source", "--out", str(tmp_path)
    )
    assert number_after(out, "max |eager - compiled| over all gradients:") < 1e-4
    assert number_after(out, "max |eager - compile(mlp_loss) on eager tensors|:") < 1e-4
    for section in (
        "IR before AD",
        "IR after AD",
        "IR after optimization",
        "Generated kernel source",
        "Timing: median",
    ):
        assert section in out
    assert re.search(r"backward graph: \d+ nodes", out)
    written = {p.name for p in tmp_path.iterdir()}
    assert {
        "eager_backward_graph.dot",
        "eager_graph_of_compiled_function.dot",
        "ir_traced.dot",
        "ir_joint.dot",
        "ir_optimized.dot",
    } <= written
    assert (tmp_path / "ir_joint.dot").read_text().startswith("digraph")


def test_control_flow():
    out = run_example("control_flow.py", "--quick")
    assert "TracingError" in out and "tracegrad.where" in out
    diffs = [
        float(d) for d in re.findall(r"max \|compiled - eager if-version\| = ([0-9.e+-]+)", out)
    ]
    assert len(diffs) == 2 and max(diffs) < 1e-5
    naive, safe = out.split("naive where", 1)[1].split("safe  where", 1)
    assert "nan" in naive.lower() and "nan" not in safe.lower()


def test_train_mlp(tmp_path):
    out = run_example("train_mlp.py", "--quick", "--out", str(tmp_path))
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.startswith(("eager ", "compiled "))
    }
    assert {"eager", "compiled"} <= set(rows)
    assert number_after(out, "max |eager - compiled| loss over the run:") < 1e-3
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "train_mlp.png").read_bytes()[:4] == b"\x89PNG"
    else:
        assert "skipped the PNG" in out


def test_checkpointing():
    out = run_example("checkpointing.py", "--quick")
    rows = [line.split("|") for line in out.splitlines() if re.match(r"\s*\d+\s+\d+ \|", line)]
    assert len(rows) == 2
    for row in rows:
        assert float(row[-1]) == 0.0 or float(row[-1]) < 1e-6  # same gradients
    peaks_plain = [float(r[1].split()[0]) for r in rows]
    peaks_ckpt = [float(r[1].split()[2]) for r in rows]
    assert peaks_ckpt[-1] < peaks_plain[-1]  # checkpointing saves memory at depth 64


@pytest.mark.slow  # ~7 s of cold compiles; tests/compile/test_loops.py checks the same claims
def test_loops(tmp_path):
    out = run_example("loops.py", "--quick", "--out", str(tmp_path))
    assert number_after(out, "max |unrolled - scan| over gradients:") < 1e-5
    assert number_after(out, "max |scan compiled - eager| over gradients:") < 1e-5
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+) \(.*?\)\s+(\d+)\s+(\d+) \(", out, re.M)
    assert len(rows) == 2
    (_, u1, _, s1, k1), (_, u2, _, s2, k2) = rows
    assert int(u2) > int(u1) and (s1, k1) == (s2, k2)  # unrolled grows, scan does not
    assert "cond gradient 0.0000, naive where gradient nan" in out
    assert "\n    body = graph scan_body_step(" in out
    assert (tmp_path / "loops_scan_joint.dot").read_text().startswith("digraph")


def test_cnn_classifier():
    out = run_example("cnn_classifier.py", "--quick")
    losses = [float(v) for v in re.findall(r"^epoch\s+\d+\s+loss ([0-9.]+)", out, re.M)]
    assert len(losses) == 4
    assert losses[-1] < 0.5 * losses[0]  # the loss falls
    final = number_after(out, "final held-out accuracy:")
    assert final > 0.9  # chance is 1/3
    assert number_after(out, "reloaded from torch.save: accuracy") == final
    for layer in (
        "Conv2d(1, 8, kernel_size=(3, 3)",
        "MaxPool2d(kernel_size=2",
        "Flatten(",
        "Linear(in_features=64, out_features=32",
    ):
        assert layer in out


@pytest.mark.slow  # ~40 s of cold CNN compiles in a subprocess; tests/compile/test_conv.py
# checks the compiled conv/pool/cross-entropy ops against eager and PyTorch by default
def test_cnn_classifier_compiled():
    """The same CNN as a pure function under tg.value_and_grad: it learns, and its
    losses equal the eager script's model step by step from the same weights."""
    out = run_example("cnn_classifier_compiled.py", "--quick", "--compare-steps", "4")
    losses = [float(v) for v in re.findall(r"^epoch\s+\d+\s+loss ([0-9.]+)", out, re.M)]
    assert len(losses) == 4 and losses[-1] < 0.5 * losses[0]
    assert number_after(out, "final held-out accuracy:") > 0.9  # chance is 1/3
    assert number_after(out, "max |compiled - eager| loss over the steps:") < 1e-4
    if importlib.util.find_spec("torch") is not None:
        assert number_after(out, "max |compiled - PyTorch| loss over the steps:") < 1e-4
    for row in ("tracegrad compiled", "tracegrad eager"):
        assert re.search(rf"^  {row} +[0-9.]+ ms", out, re.M), row
    assert re.search(r"first step \(trace \+ compile\): [0-9.]+ s", out)


def test_cnn_classifier_model_matches_pytorch(load_example):
    """The script's model code under tracegrad and under real PyTorch (its --torch
    imports), same weights and batches: the first-step loss and every parameter gradient
    agree, and so do the parameters after 5 Adam steps."""
    rt = pytest.importorskip("torch")
    import numpy as np

    ours = load_example("cnn_classifier", "tracegrad")
    theirs = load_example("cnn_classifier", "torch")
    assert ours.torch.__name__ == "tracegrad.eager" and theirs.torch is rt
    ours.torch.manual_seed(0)
    model = ours.SmallCNN(3)
    model_rt = theirs.SmallCNN(3)
    model_rt.load_state_dict({k: rt.tensor(v.numpy()) for k, v in model.state_dict().items()})
    opt = ours.optim.Adam(model.parameters(), lr=1e-2)
    opt_rt = theirs.optim.Adam(model_rt.parameters(), lr=1e-2)
    crit, crit_rt = ours.nn.CrossEntropyLoss(), theirs.nn.CrossEntropyLoss()
    x, y = ours.make_images(64, seed=3)
    for step in range(6):
        xb, yb = x[(step * 16) % 64 :][:16], y[(step * 16) % 64 :][:16]
        loss = crit(model(ours.torch.tensor(xb)), ours.torch.tensor(yb))
        loss_rt = crit_rt(model_rt(rt.tensor(xb)), rt.tensor(yb))
        opt.zero_grad()
        opt_rt.zero_grad()
        loss.backward()
        loss_rt.backward()
        tol = 1e-5 if step == 0 else 1e-4
        np.testing.assert_allclose(loss.item(), loss_rt.item(), rtol=tol)
        grads_rt = {n: p.grad.numpy() for n, p in model_rt.named_parameters()}
        for name, p in model.named_parameters():
            np.testing.assert_allclose(
                p.grad.numpy(),
                grads_rt[name],
                rtol=tol,
                atol=tol * np.abs(grads_rt[name]).max(),
                err_msg=name,
            )
        opt.step()
        opt_rt.step()
    for name, p in model_rt.named_parameters():
        np.testing.assert_allclose(
            dict(model.named_parameters())[name].detach().numpy(),
            p.detach().numpy(),
            rtol=1e-4,
            atol=1e-5,
            err_msg=name,
        )


@pytest.mark.slow  # a 2-process LocalCluster per worker count; tests/distributed has the quick check
def test_distributed_training():
    pytest.importorskip("dask.distributed")
    out = run_example("distributed_training.py", "--quick", timeout=300)
    assert number_after(out, "max |distributed - single-process| loss over all epochs:") < 1e-10
    assert re.search(r"^\s+2\s+[0-9.]+$", out, re.M)  # seconds per epoch with 2 workers


def test_pytorch_style_compiled(tmp_path, monkeypatch):
    """The PyTorch-style training step, eager and under torch.compile: the same losses
    and parameters, one trace, both graphs written (on the interpreter, to stay short)."""
    monkeypatch.setenv("TRACEGRAD_BACKEND", "interpret")
    out = run_example("pytorch_style_compiled.py", "--quick", "--out", str(tmp_path))
    assert number_after(out, "max relative loss difference:") < 1e-5
    assert number_after(out, "over all parameters after 5 steps:") < 1e-5
    assert number_after(out, "traces:") == 1
    assert re.search(r"one static graph.*\d+ inputs \(batch, parameters, AdamW state\)", out)
    assert (tmp_path / "pytorch_style_static_graph.dot").read_text().startswith("digraph")
    assert (tmp_path / "pytorch_style_eager_graph.dot").read_text().startswith("digraph")
