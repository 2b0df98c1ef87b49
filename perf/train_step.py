"""Issue 22's benchmark: one PyTorch-style training step, compiled and eager, against PyTorch.

For each model of examples/ (gpt_tiny, char_mlp, cnn_classifier; the example's own
`build`, `make_train_step` and batch size, float32) it times the per-step time of

- `tracegrad_compiled`: `tracegrad.compile(train_step)` (Numba backend by default),
- `tracegrad_eager`:    the same `train_step`, not compiled,
- `torch_eager`:        the example under real PyTorch (its `--torch` path, same weights),
- `torch_compile`:      `torch.compile(train_step)` (inductor); a failure is recorded as text,

and the first step's time (trace + compile included): tracegrad compiled in a fresh
process with an empty `TRACEGRAD_CACHE_DIR` (cold) and again in a fresh process on
that cache (warm), torch.compile in a fresh process with an empty inductor cache.

How it is run: one child process per (model, system), one after the other, so the
systems never share a process, a thread pool or a libgomp (see perf/README's issue-23
notes). Every child draws the same batches and starts from the same NumPy weights, so
the losses of all systems are compared step by step. A step is `train_step(x, y)`
plus `loss.item()`, on tensors made before the clock starts; the report gives the
median over the timed steps and the 10th-90th percentile spread. The 1-minute load
average is recorded before and after each child: this machine has 2 cores shared
with other work, so read the ratios with the load column.

In the compiled child the kernel call is wrapped with a timer (the time inside the
Numba kernel vs the whole step: the rest is tracegrad's per-call overhead, reading
inputs and writing parameters and optimizer state back), and a few more steps run
under cProfile, whose top entries outside the kernel go into the JSON.

    python perf/train_step.py                       # all models, writes perf/train_step.md/.json
    python perf/train_step.py --models char_mlp --steps 20 --out /tmp/ts
"""

from __future__ import annotations

import os
import sys

_OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _reexec_without_openblas_overrides() -> None:
    """As perf/run.py: unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE before numpy loads."""
    if os.environ.get("TRACEGRAD_PERF_ENV_READY"):
        return
    present = [v for v in _OPENBLAS_VARS if v in os.environ]
    if not present:
        return
    env = dict(
        os.environ,
        TRACEGRAD_PERF_ENV_READY="1",
        TRACEGRAD_PERF_UNSET_OPENBLAS=", ".join(f"{v}={os.environ[v]}" for v in present),
    )
    for v in present:
        del env[v]
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


if __name__ == "__main__":
    _reexec_without_openblas_overrides()

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
for _p in (str(ROOT), str(EXAMPLES)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

MODELS = ("gpt_tiny", "char_mlp", "cnn_classifier")
SYSTEMS = ("tracegrad_compiled", "tracegrad_eager", "torch_eager", "torch_compile")
LABELS = {
    "tracegrad_compiled": "tracegrad.compile",
    "tracegrad_eager": "tracegrad eager",
    "torch_eager": "PyTorch eager",
    "torch_compile": "torch.compile",
}
# the batch each example trains with: gpt_tiny/char_mlp's `batches` defaults (8 x 32
# tokens, 32 contexts) and cnn_classifier's training loop (32 images of 8x8; its
# `batches` helper for tests defaults to 16)
BATCH = {"gpt_tiny": 8, "char_mlp": 32, "cnn_classifier": 32}
TARGETS = {
    "compiled / tracegrad eager": 0.5,
    "compiled / torch.compile": 1.0,
    "first step, GPT, cold cache (s)": 5.0,
}


def load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ------------------------------------------------------------ one system, one process


def _example(model: str, system: str):
    from _common import load_example

    return load_example(model, "torch" if system.startswith("torch") else "tracegrad")


def _batches(example, model: str, n: int) -> list:
    return example.batches(n, seed=0, batch_size=BATCH[model])


class _KernelTimer:
    """Wraps a compiled entry's kernel: the seconds spent inside it."""

    def __init__(self, fn):
        self.fn, self.seconds, self.calls = fn, 0.0, 0

    def __call__(self, *args):
        t0 = time.perf_counter()
        try:
            return self.fn(*args)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def _wrap_kernels(compiled_fn) -> list:
    """Put a _KernelTimer around every captured entry's kernel (forward and backward
    kernels too where the entry was split); [] when the layout is not the one known here."""
    timers = []
    entries = getattr(compiled_fn, "entries", None)
    if entries is None:
        return timers
    for candidates in entries.values():
        for entry in candidates if isinstance(candidates, list) else [candidates]:
            aot = getattr(entry, "aot", None)
            holders = (
                [entry.kernel]
                if aot is None and getattr(entry, "kernel", None) is not None
                else ([aot.forward, aot.backward] if aot is not None else [])
            )
            for holder in holders:  # capture's tiered holders: time the built kernel inside
                if getattr(holder, "kernel", None) is not None:
                    holder.kernel = _KernelTimer(holder.kernel)
                    timers.append(holder.kernel)
    return timers


def _profile_outside_kernel(step, data, timers, n: int) -> dict:
    """cProfile over n steps: total, time in the kernel(s), top functions by own time."""
    import cProfile
    import pstats

    for t in timers:
        t.seconds = 0.0
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for x, y in data[:n]:
        step(x, y).item()
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():
        rows.append((tt, ct, nc, f"{Path(file).name}:{line}({func})"))
    rows.sort(reverse=True)
    return {
        "steps": n,
        "total_s": total,
        "kernel_s": sum(t.seconds for t in timers),
        "top_own_time": [
            {"function": r[3], "own_s": r[0], "cumulative_s": r[1], "calls": r[2]}
            for r in rows[:12]
        ],
    }


def measure(
    model: str,
    system: str,
    steps: int = 30,
    warmup: int = 5,
    backend: str | None = None,
    profile_steps: int = 0,
    threads: int | None = None,
) -> dict:
    """Build `model` under `system`, run 1 + warmup + steps training steps on the same
    batches every system sees, and return the times and losses (seconds)."""
    result = {
        "model": model,
        "system": system,
        "batch": BATCH[model],
        "status": "ok",
        "load_before": load_avg(),
        "pid": os.getpid(),
    }
    t_import = time.perf_counter()
    example = _example(model, system)
    torch = example.torch
    result["import_s"] = time.perf_counter() - t_import
    if system.startswith("torch"):
        torch.manual_seed(0)
        if threads:
            torch.set_num_threads(threads)
        result["torch_threads"] = torch.get_num_threads()
    model_, opt = example.build(seed=0)
    step = example.make_train_step(model_, opt)
    compiled_fn = None
    if system == "tracegrad_compiled":
        import tracegrad as tg

        compiled_fn = step = tg.compile(step, backend=backend)
        result["backend"] = backend or os.environ.get("TRACEGRAD_BACKEND", "numba")
    elif system == "torch_compile":
        step = torch.compile(step)
    data = [
        (torch.tensor(x), torch.tensor(y))
        for x, y in _batches(example, model, 1 + warmup + steps + profile_steps)
    ]
    losses, times, timers = [], [], []
    try:
        for i, (x, y) in enumerate(data[: 1 + warmup + steps]):
            t0 = time.perf_counter()
            loss = step(x, y).item()
            times.append(time.perf_counter() - t0)
            losses.append(loss)
            if i == warmup and compiled_fn is not None:  # (a retrace in warm-up makes a new entry)
                if hasattr(compiled_fn, "wait_kernels"):  # its steps ran eagerly until now
                    t_wait = time.perf_counter()
                    compiled_fn.wait_kernels()
                    result["kernel_wait_s"] = time.perf_counter() - t_wait
                timers = _wrap_kernels(compiled_fn)
    except Exception as exc:  # torch.compile on this machine, or a capture failure
        import traceback

        result.update(
            status="failed",
            error=f"{type(exc).__name__}: {exc}"[:4000],
            traceback=traceback.format_exc()[-6000:],
            losses=losses,
            step_times=times,
        )
        return result
    timed = np.array(times[1 + warmup :])
    result.update(
        first_step_s=times[0],
        losses=losses,
        step_times=times,
        median_s=float(np.median(timed)),
        p10_s=float(np.percentile(timed, 10)),
        p90_s=float(np.percentile(timed, 90)),
        min_s=float(timed.min()),
        timed_steps=len(timed),
        warmup=warmup,
    )
    if compiled_fn is not None:
        info = compiled_fn.cache_info() if hasattr(compiled_fn, "cache_info") else None
        result["cache_info"] = repr(info)
        result["trace_reasons"] = list(getattr(compiled_fn, "trace_reasons", []))
        if timers:
            per_step = [t.seconds for t in timers]
            calls = sum(t.calls for t in timers)
            # the timers ran over the timed steps; their share of those steps
            result["kernel_s_per_step"] = sum(per_step) / max(1, len(timed))
            result["kernel_calls_per_step"] = calls / max(1, len(timed))
            result["mean_step_after_first_s"] = float(np.mean(timed))
            result["kernel_share"] = result["kernel_s_per_step"] / result["mean_step_after_first_s"]
        if profile_steps:
            result["profile"] = _profile_outside_kernel(
                step, data[1 + warmup + steps :], timers, profile_steps
            )
    result["load_after"] = load_avg()
    return result


# --------------------------------------------------------------------- the driver


def _run_child(
    model: str, system: str, args, env_extra: dict, label: str, steps: int, profile_steps: int = 0
) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        out = f.name
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        model,
        system,
        "--json",
        out,
        "--steps",
        str(steps),
        "--warmup",
        str(args.warmup),
        "--profile-steps",
        str(profile_steps),
    ]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
        env_extra = {**env_extra, **{v: str(args.threads) for v in _THREAD_VARS}}
    env = dict(
        os.environ,
        **env_extra,
        PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLES), os.environ.get("PYTHONPATH", "")]),
    )
    load_before = load_avg()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        rc, _stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, _stdout, stderr = "timeout", exc.stdout or "", f"timed out after {args.timeout} s"
    wall = time.perf_counter() - t0
    try:
        result = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        result = {
            "model": model,
            "system": system,
            "status": "failed",
            "error": f"child exit {rc}: {str(stderr)[-3000:]}",
        }
    finally:
        Path(out).unlink(missing_ok=True)
    result.update(
        run=label,
        threads=_pass_name(args.threads),
        child_wall_s=wall,
        child_load_before=load_before,
        child_load_after=load_avg(),
        child_stderr_tail=(stderr[-1500:] if isinstance(stderr, str) else ""),
    )
    return result


_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "TRACEGRAD_NUM_THREADS",
)


def _pass_name(threads) -> str:
    return f"{threads} thread(s) per library" if threads else "all cores (each library's default)"


def run_all(args, log=print) -> list:
    results = []
    for model in args.models:
        cache = tempfile.mkdtemp(prefix="tracegrad-train-step-cache-")
        inductor = tempfile.mkdtemp(prefix="tracegrad-train-step-inductor-")
        try:
            plan = []
            for system in args.systems:
                if system == "tracegrad_compiled":
                    plan.append(
                        (
                            system,
                            {"TRACEGRAD_CACHE_DIR": cache},
                            "cold cache",
                            args.steps,
                            args.profile_steps,
                        )
                    )
                    plan.append(
                        (system, {"TRACEGRAD_CACHE_DIR": cache}, "warm cache", args.warm_steps, 0)
                    )
                elif system == "torch_compile":
                    plan.append(
                        (
                            system,
                            {"TORCHINDUCTOR_CACHE_DIR": inductor},
                            "empty inductor cache",
                            args.steps,
                            0,
                        )
                    )
                else:
                    plan.append((system, {}, "", args.steps, 0))
            for system, env, label, steps, prof in plan:
                log(f"{model:15s} {system:19s} {label:21s} load {load_avg():.2f} ...")
                r = _run_child(model, system, args, env, label, steps, prof)
                log(
                    f"{'':15s} -> {r['status']}: first step {_fmt(r.get('first_step_s'))}, "
                    f"median {_fmt(r.get('median_s'))} (child {r['child_wall_s']:.1f} s)"
                    + (f"  {r.get('error', '')[:200]}" if r["status"] != "ok" else "")
                )
                results.append(r)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(inductor, ignore_errors=True)
    return results


# --------------------------------------------------------------------- the report


def _fmt(s) -> str:
    if s is None:
        return "-"
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"


def _pick(results: list, model: str, system: str, run: str | None = None) -> dict | None:
    for r in results:
        if r["model"] == model and r["system"] == system and (run is None or r.get("run") == run):
            return r
    return None


def _steady(results, model, system):
    """The row whose steady-state steps are reported: tracegrad compiled's cold-cache
    child (the one with the full number of timed steps)."""
    return _pick(results, model, system, "cold cache" if system == "tracegrad_compiled" else None)


def _ratio(a: dict | None, b: dict | None):
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return None
    return a["median_s"] / b["median_s"]


def _loss_diff(a: dict | None, b: dict | None):
    """Max relative difference of two children's losses over the steps both ran."""
    if not a or not b or not a.get("losses") or not b.get("losses"):
        return None
    n = min(len(a["losses"]), len(b["losses"]))
    x, y = np.array(a["losses"][:n]), np.array(b["losses"][:n])
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-12)))


def summarize(results: list, models) -> dict:
    """Per model: the ratios and the targets, the losses' agreement, first steps."""
    out = {}
    for m in models:
        comp, eager = (
            _steady(results, m, "tracegrad_compiled"),
            _steady(results, m, "tracegrad_eager"),
        )
        warm = _pick(results, m, "tracegrad_compiled", "warm cache")
        tc, te = _steady(results, m, "torch_compile"), _steady(results, m, "torch_eager")
        out[m] = {
            "compiled / tracegrad eager": _ratio(comp, eager),
            "compiled / torch.compile": _ratio(comp, tc),
            "compiled / PyTorch eager": _ratio(comp, te),
            "first step cold (s)": comp.get("first_step_s") if comp else None,
            "first step warm (s)": warm.get("first_step_s") if warm else None,
            "torch.compile first step (s)": tc.get("first_step_s") if tc else None,
            "loss max rel diff, compiled vs tracegrad eager": _loss_diff(comp, eager),
            "loss max rel diff, warm-cache compiled vs tracegrad eager": _loss_diff(warm, eager),
            "loss max rel diff, tracegrad eager vs PyTorch eager": _loss_diff(eager, te),
            "loss max rel diff, torch.compile vs PyTorch eager": _loss_diff(tc, te),
            "kernel share of compiled step": comp.get("kernel_share") if comp else None,
        }
    return out


def _cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    if r.get("status") != "ok":
        return "**failed** (below)"
    return f"{_fmt(r['median_s'])} ({_fmt(r['p10_s'])}-{_fmt(r['p90_s'])})"


def _r(x, target=None) -> str:
    if x is None:
        return "-"
    s = f"{x:.3g}×"
    if target is not None:
        s += " ✓" if x <= target else " ✗"
    return s


HEADER = """# Issue 22: one training step, compiled and eager (`perf/train_step.py`)

tracegrad.compile(train_step), the same train_step eager, the example under PyTorch eager
and torch.compile(train_step), for the three PyTorch-style models of examples/ (float32, the
examples' weights and batches). One child process per (model, system), run one after the other.

"""


def report_markdown(results: list, summary: dict, info: dict, title: str | None = None) -> str:
    models = list(summary)
    lines = [f"## Pass: {title}" if title else "## Run", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += [
        "",
        "### Per-step time",
        "",
        "Median over the timed steps after warm-up, with the 10th-90th percentile in brackets. "
        "One child process per system, run one after the other; a step is `train_step(x, y)` "
        "and `loss.item()`.",
        "",
        "| model | batch | " + " | ".join(LABELS[s] for s in SYSTEMS) + " | load (1 min) during |",
        "| --- | --- | " + " | ".join("---" for _ in SYSTEMS) + " | --- |",
    ]
    for m in models:
        rows = [_steady(results, m, s) for s in SYSTEMS]
        loads = [
            x
            for r in rows
            if r
            for x in (r.get("child_load_before"), r.get("child_load_after"))
            if x is not None
        ]
        batch = BATCH[m]
        lines.append(
            f"| `{m}` | {batch} | "
            + " | ".join(_cell(r) for r in rows)
            + (f" | {min(loads):.1f}-{max(loads):.1f} |" if loads else " | - |")
        )
    lines += [
        "",
        "### Ratios (same run) and targets",
        "",
        "| model | compiled / tracegrad eager (≤ 0.5) | compiled / torch.compile (≤ 1.0) | "
        "compiled / PyTorch eager | first step, empty cache | first step, warm cache | "
        "torch.compile first step | kernel share of compiled step |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in models:
        s = summary[m]
        first = s["first step cold (s)"]
        first_cell = _fmt(first) + (
            (" ✓" if first <= 5.0 else " ✗ (target ≤ 5 s)")
            if (m == "gpt_tiny" and first is not None)
            else ""
        )
        share = s["kernel share of compiled step"]
        lines.append(
            f"| `{m}` | {_r(s['compiled / tracegrad eager'], 0.5)} | "
            f"{_r(s['compiled / torch.compile'], 1.0)} | {_r(s['compiled / PyTorch eager'])} | "
            f"{first_cell} | {_fmt(s['first step warm (s)'])} | "
            f"{_fmt(s['torch.compile first step (s)'])} | "
            f"{'-' if share is None else f'{100 * share:.0f} %'} |"
        )
    lines += [
        "",
        "### Losses: the same batches and weights in every child",
        "",
        "| model | compiled vs tracegrad eager | warm-cache compiled vs eager | "
        "tracegrad eager vs PyTorch eager | torch.compile vs PyTorch eager |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m in models:
        s = summary[m]
        keys = [
            "loss max rel diff, compiled vs tracegrad eager",
            "loss max rel diff, warm-cache compiled vs tracegrad eager",
            "loss max rel diff, tracegrad eager vs PyTorch eager",
            "loss max rel diff, torch.compile vs PyTorch eager",
        ]
        lines.append(
            f"| `{m}` | " + " | ".join("-" if s[k] is None else f"{s[k]:.1e}" for k in keys) + " |"
        )
    lines += [
        "",
        "(maximum relative difference of the per-step losses over every step both children ran)",
    ]
    prof = [r for r in results if r.get("profile")]
    if prof:
        lines += ["", "### Where the compiled step's time goes", ""]
        for r in prof:
            p = r["profile"]
            if r.get("kernel_note"):
                lines += [
                    f"`{r['model']}`: kernel timer: {r['kernel_note']}. Under cProfile ({p['steps']} "
                    f"steps): {_fmt(p['total_s'] / p['steps'])} per step. Top own time:",
                    "",
                    "| function | own per step | calls per step |",
                    "| --- | --- | --- |",
                ]
            else:
                lines += [
                    f"`{r['model']}`: kernel calls per step {r.get('kernel_calls_per_step', 0):.1f}; "
                    f"time in the kernel(s) {_fmt(r.get('kernel_s_per_step'))} of the mean step "
                    f"{_fmt(r.get('mean_step_after_first_s'))} (median {_fmt(r['median_s'])}) of the timed steps, i.e. "
                    f"{100 * (r.get('kernel_share') or 0):.0f} % (timer around the kernel call, no "
                    f"profiler). Under cProfile ({p['steps']} steps, which inflates Python time): "
                    f"{_fmt(p['total_s'] / p['steps'])} per step, kernel "
                    f"{_fmt(p['kernel_s'] / p['steps'])}. Top own time:",
                    "",
                    "| function | own per step | calls per step |",
                    "| --- | --- | --- |",
                ]
            for row in p["top_own_time"][:8]:
                lines.append(
                    f"| `{row['function']}` | {_fmt(row['own_s'] / p['steps'])} | "
                    f"{row['calls'] / p['steps']:.0f} |"
                )
            lines.append("")
    failed = [r for r in results if r.get("status") != "ok"]
    if failed:
        lines += ["", "### Failures", ""]
        for r in failed:
            lines += [
                f"`{r['model']}` / {LABELS.get(r['system'], r['system'])} ({r.get('run', '')}):",
                "",
                "```",
                str(r.get("error", ""))[:3000],
                "```",
                "",
            ]
    return "\n".join(lines) + "\n"


def machine_info(args, load_start, load_end, wall) -> dict:
    import importlib.metadata as md

    versions = []
    for pkg in ("numpy", "numba", "torch", "jax"):
        try:
            versions.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            versions.append(f"{pkg} missing")
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        + ", ".join(versions),
        "load average (1 min) at start / end": f"{load_start:.2f} / {load_end:.2f} on {os.cpu_count()} "
        "CPUs (other work shares the cores: ratios move with it)",
        "threads": _pass_name(args.threads),
        "timing": f"{args.warmup} warm-up steps, then {args.steps} timed steps per child "
        f"(warm-cache tracegrad child: {args.warm_steps}); every library on all cores",
        "tracegrad backend": args.backend or os.environ.get("TRACEGRAD_BACKEND", "numba (default)"),
        "OpenBLAS overrides unset": os.environ.get(
            "TRACEGRAD_PERF_UNSET_OPENBLAS", "none were set"
        ),
        "run time": f"{wall:.0f} s",
    }


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--steps", type=int, default=30, help="timed steps per child")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--warm-steps", type=int, default=3, help="steps in the warm-cache child")
    p.add_argument("--profile-steps", type=int, default=10, help="cProfile'd compiled steps")
    p.add_argument("--backend", default=None, help="tracegrad backend (default: numba)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for every library in the children (OMP/OpenBLAS/MKL/Numba/tracegrad "
        "variables, torch.set_num_threads); default: each library's own (all cores)",
    )
    p.add_argument(
        "--merge",
        default=None,
        help="train_step.json of an earlier pass (e.g. all cores): its rows join this report",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    p.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent),
        help="folder for train_step.md / train_step.json",
    )
    p.add_argument("--child", nargs=2, metavar=("MODEL", "SYSTEM"), help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.systems = [s for s in args.systems.split(",") if s]
    bad = [m for m in args.models if m not in MODELS] + [
        s for s in args.systems if s not in SYSTEMS
    ]
    if bad:
        p.error(f"unknown model/system: {', '.join(bad)}")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        model, system = args.child
        r = measure(
            model, system, args.steps, args.warmup, args.backend, args.profile_steps, args.threads
        )
        Path(args.json).write_text(json.dumps(r, default=str))
        return 0
    started, load_start = time.perf_counter(), load_avg() or 0.0
    results = run_all(
        args, log=lambda m: print(f"[{time.perf_counter() - started:6.1f}s] {m}", flush=True)
    )
    info = machine_info(args, load_start, load_avg() or 0.0, time.perf_counter() - started)
    passes = {_pass_name(args.threads): info}
    if args.merge:
        earlier = json.loads(Path(args.merge).read_text())
        for r in earlier["results"]:
            r.setdefault("threads", _pass_name(None))
        results = [
            r for r in earlier["results"] if r["threads"] != _pass_name(args.threads)
        ] + results
        passes = {**earlier.get("passes", {_pass_name(None): earlier["info"]}), **passes}
    summary = {
        p: summarize([r for r in results if r.get("threads", _pass_name(None)) == p], args.models)
        for p in passes
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = "\n".join(
        report_markdown(
            [r for r in results if r.get("threads", _pass_name(None)) == p],
            summary[p],
            passes[p],
            title=p,
        )
        for p in passes
    )
    (out / "train_step.md").write_text(HEADER + md)
    (out / "train_step.json").write_text(
        json.dumps(
            {
                "info": info,
                "passes": passes,
                "summary": summary,
                "targets": TARGETS,
                "results": results,
            },
            indent=1,
            default=str,
        )
    )
    print((out / "train_step.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
