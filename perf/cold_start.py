"""Cold start: import time and time to the first compiled result, in fresh processes.

    python perf/cold_start.py            # prints a table; --json for machine-readable output
    python perf/cold_start.py --workloads linreg_n1000,lstm_scan_t20 --out cold.json
                                         # + each workload's first call per compiler, fresh processes
    python perf/cold_start.py --demo-runs 0   # without the main demo's first-call rows

Each case runs in a new Python process:
  - "empty cache": TRACEGRAD_CACHE_DIR is a new empty folder, so the first
    `mlp_mnist_b128` value-and-grad call traces, differentiates, optimizes,
    generates code and compiles it with Numba;
  - "warm cache": the same folder again, now filled by the first run, so the
    first call should load the generated module and Numba's cached machine code;
  - "warm cache, kernel first": the same with TRACEGRAD_TIERED=0, so the first
    result waits for the kernel (Numba's import and its verified cache load);
  - "eager only": `import tracegrad.eager`, which must not import numba;
  - two "Numba floor" peers: the same fresh process loads a trivial cached
    njit function (one np.empty, one loop) instead, through plain `import numba`
    and through tracegrad's `runtime.numba_loader.import_numba` (which skips Numba's
    scipy.linalg probe). What the warm-cache row spends above the second is
    tracegrad's own cost.
For each it records `import numpy`, `import tracegrad` time, whether numba is in
sys.modules right after `import tracegrad`, and the time from the end of the
import (inputs already built) to the first result. The warm-cache row also
has `stages`: tracegrad's per-stage timings of that first call (index lookup,
import numba, Numba cache load, ...; the rest is the kernel's first call).
The main demo's rows (examples/eager_vs_traced.py, which the README's Quickstart
runs): its first `value_and_grad` call in fresh processes with empty caches,
alternating with jax.jit's first call of the same loss.
On a busy 2-core machine the kernel's first call can take ~80 ms instead of
~15: NumPy's OpenBLAS runs the GEMMs on 2 threads and waits for a time slice
when another process holds the second core (OPENBLAS_NUM_THREADS=1 avoids it);
the floor rows have no GEMM.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, logging
t0 = time.perf_counter()
t_start = t0
import numpy
t1 = time.perf_counter()
import {module}
t2 = time.perf_counter()
numba_at_import = "numba" in sys.modules
out = {{"import_numpy": t1 - t0, "import": t2 - t1, "numba_at_import": numba_at_import}}
if {compiled}:
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("tracegrad").addHandler(Keep())
    logging.getLogger("tracegrad").setLevel(logging.INFO)
    sys.path.insert(0, {root!r})
    from perf.workloads import make_workload
    w = make_workload("mlp_mnist_b128", "float32")
    args = [p.copy() for p in w.params] + [d.copy() for d in w.data]
    numba_before_call = "numba" in sys.modules
    t3 = time.perf_counter()
    vg = tracegrad.value_and_grad(w.tracegrad_fn, argnums=tuple(range(len(w.params))))
    value, grads = vg(*args)
    t4 = time.perf_counter()
    interpreted = vg.tier_info().interpreted_calls  # 1: the first result came from the interpreter
    vg.wait_kernels()
    kernel_ready = time.perf_counter() - t3
    lowered = vg.lower(*args)
    stages = dict(lowered.timings)
    if not interpreted:  # (tiered: the kernel's stages ran in the background, after it)
        stages["first kernel call and packing (the rest)"] = (t4 - t3) - sum(stages.values())
    stages.update({{"(of which) kernel " + k: v
                   for k, v in getattr(lowered.kernel, "timings", {{}}).items()}})
    out.update(first_result=t4 - t3, inputs=t3 - t2, value=float(value),
               process=(t1 - t0) + (t2 - t1) + (t4 - t3),
               interpreted=interpreted, kernel_ready=kernel_ready,
               numba_before_call=numba_before_call, log=records[-12:], stages=stages)
if {floor!r}:
    import numpy as np
    sys.path.insert(0, {floor_dir!r})
    t3 = time.perf_counter()
    if {floor!r} == "tracegrad":
        from tracegrad.runtime.numba_loader import import_numba
        import_numba()
    import tg_floor_probe
    tg_floor_probe.f(np.ones((4, 3), np.float32))
    out.update(first_result=time.perf_counter() - t3)
print("COLD_START_JSON " + json.dumps(out))
"""

JAX_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import jax
t2 = time.perf_counter()
sys.path.insert(0, {root!r})
from perf.systems import SYSTEMS
from perf.workloads import make_workload
w = make_workload("mlp_mnist_b128", "float32")
t3 = time.perf_counter()
prepared = SYSTEMS["jax"].prepare(w)
value, grads = prepared.to_numpy(prepared.call())
t4 = time.perf_counter()
print("COLD_START_JSON " + json.dumps({{"import_numpy": t1 - t0, "import": t2 - t1,
                                       "first_result": t4 - t3, "value": float(value)}}))
"""

FLOOR_SOURCE = """import numpy as np
from numba import njit, types


@njit((types.float32[:, ::1],), cache=True, nogil=True)
def f(x):
    out = np.empty(x.size, np.float32)
    acc = np.float32(0.0)
    for i in range(x.size):
        out[i] = x.flat[i] * np.float32(2.0)
        acc += out[i]
    return acc
"""


def _child_env(**extra: str) -> dict:
    """The environment of a timed child: this one's, with ROOT importable and Python's
    bytecode cache on, as a user's Python has it (PYTHONDONTWRITEBYTECODE=1 recompiles
    every imported module's source in every process: ~0.35 s of `import tracegrad`)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **extra,
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run_child(
    module: str, compiled: bool, cache_dir: str, floor: str = "", code: str = "", **extra: str
) -> dict:
    floor_dir = os.path.join(cache_dir, "floor")
    if code:
        pass
    elif module == "jax":
        code = JAX_CHILD.format(root=str(ROOT))
    else:
        code = CHILD.format(
            module=module, compiled=compiled, root=str(ROOT), floor=floor, floor_dir=floor_dir
        )
    env = _child_env(TRACEGRAD_CACHE_DIR=cache_dir, TRACEGRAD_LOG="1")
    env.pop("TRACEGRAD_BACKEND", None)  # its default settings (a named backend never tiers)
    env.pop("TRACEGRAD_TIERED", None)
    env.update(extra)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=600,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("COLD_START_JSON "):
            return {**json.loads(line[len("COLD_START_JSON ") :]), "status": "ok"}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": f"failed: {tail[:200]}"}


def _median_row(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        return rows[-1]
    out = dict(ok[0])
    for key in ("import_numpy", "import", "first_result", "kernel_ready", "process"):
        vals = [r[key] for r in ok if r.get(key) is not None]
        if vals:
            out[key] = statistics.median(vals)
    out["status"] = f"ok (median of {len(ok)})" if len(ok) > 1 else "ok"
    return out


def measure(runs: int = 3, log=print) -> dict:
    """Run the cold-start cases; `runs` warm-cache repeats (median)."""
    cache_dir = tempfile.mkdtemp(prefix="tracegrad-cold-start-")
    try:
        rows = []
        _run_child("tracegrad", False, cache_dir)  # Python's bytecode cache, as a user has it
        cold = _run_child("tracegrad", True, cache_dir)
        rows.append({"case": "empty cache", **cold})
        log(f"  cold start, empty cache: {cold}")
        warm, kernel_first, jax_runs = [], [], []
        for _ in range(runs):  # alternating, so that load changes hit all alike
            warm.append(_run_child("tracegrad", True, cache_dir))
            kernel_first.append(_run_child("tracegrad", True, cache_dir, TRACEGRAD_TIERED="0"))
            jax_runs.append(_run_child("jax", True, cache_dir))
        rows.append({"case": "warm cache", **_median_row(warm)})
        log(f"  cold start, warm cache: {rows[-1]}")
        rows.append({"case": KERNEL_FIRST, **_median_row(kernel_first)})
        log(f"  cold start, warm cache, kernel first: {rows[-1]}")
        if any(r.get("status") == "ok" for r in jax_runs):
            rows.append({"case": "jax.jit (no persistent cache)", **_median_row(jax_runs)})
            log(f"  cold start, jax.jit: {rows[-1]}")
        eager = _run_child("tracegrad.eager", False, cache_dir)
        rows.append({"case": "eager only (`import tracegrad.eager`)", **eager})
        log(f"  cold start, eager only: {eager}")
        floor_dir = Path(cache_dir) / "floor"
        floor_dir.mkdir(mode=0o700)
        (floor_dir / "tg_floor_probe.py").write_text(FLOOR_SOURCE)
        _run_child("tracegrad", False, cache_dir, floor="numba")  # fills Numba's cache
        for how, label in (
            ("numba", "plain `import numba`"),
            ("tracegrad", "tracegrad's import_numba"),
        ):
            floor = [_run_child("tracegrad", False, cache_dir, floor=how) for _ in range(runs)]
            rows.append(
                {"case": f"Numba floor: trivial cached njit, {label}", **_median_row(floor)}
            )
            log(f"  cold start, numba floor ({how}): {rows[-1]}")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    note = (
        "Each row is a new Python process. `first result` is the time from the end of "
        "`import tracegrad` (inputs already built) to the first `mlp_mnist_b128` value and "
        "gradients, float32; the import column excludes `import numpy`. Warm cache: the same "
        "TRACEGRAD_CACHE_DIR as the empty-cache run, after it filled it. The Numba floor rows "
        "load a trivial cached njit function instead: Numba's own import and first-dispatch "
        "cost. By default tracegrad's first result comes from the NumPy interpreter while "
        "the kernel builds or loads in the background (`kernel ready`: from the call to the "
        "kernel in use). `kernel first`: the warm cache with TRACEGRAD_TIERED=0, so the first "
        "result waits for Numba's import and the kernel's cache load. jax.jit: the same "
        "workload's first `jax.jit(value_and_grad)` result (import jax apart), run alternately "
        "with the warm-cache rows. Children run with Python's bytecode cache on "
        "(PYTHONDONTWRITEBYTECODE removed), as a user's Python."
    )
    return {"rows": rows, "note": note, "ratios": ratios(rows)}


def ratios(rows: list[dict]) -> dict:
    """tracegrad's `import tracegrad` + first result over jax.jit's first result (its
    import apart), measured in the same run: the number to quote from a busy machine."""
    by_case = {r["case"]: r for r in rows if r.get("first_result") is not None}
    jax_row = by_case.get("jax.jit (no persistent cache)")
    if jax_row is None:
        return {}
    out = {}
    for case in ("empty cache", "warm cache", KERNEL_FIRST):
        r = by_case.get(case)
        if r is not None:
            out[f"{case}: (import + first result) / jax.jit first result"] = (
                r["import"] + r["first_result"]
            ) / jax_row["first_result"]
            if r.get("kernel_ready") is not None:
                out[f"{case}: (import + kernel ready) / jax.jit first result"] = (
                    r["import"] + r["kernel_ready"]
                ) / jax_row["first_result"]
    return out


KERNEL_FIRST = "warm cache, kernel first (TRACEGRAD_TIERED=0)"

# ------------------------------------------------- the main demo's first compiled call
DEMO_CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, {examples!r})
import {module}
from eager_vs_traced import PARAM_NAMES, make_problem, mlp_loss
arrays = make_problem(32, n_in=8, n_hidden=64)  # the demo's defaults
inputs = [arrays[k] for k in (*PARAM_NAMES, "x", "y")]
if {module!r} == "jax":
    import jax, jax.numpy as jnp
    def loss(w1, b1, w2, b2, x, y):
        return jnp.mean(((jnp.tanh(x @ w1 + b1) @ w2 + b2) - y) ** 2)
    vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    t0 = time.perf_counter()
    value, grads = vg(*inputs)
    value = float(value); grads = [np.asarray(g) for g in grads]
    interpreted = None
else:
    import tracegrad as tg
    vg = tg.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))
    t0 = time.perf_counter()
    value, grads = vg(*inputs)
    interpreted = vg.tier_info().interpreted_calls
t1 = time.perf_counter()
print("COLD_START_JSON " + json.dumps({{"first_result": t1 - t0, "value": float(value),
                                       "interpreted": interpreted}}))
"""


def measure_demo(runs: int = 5, log=print) -> dict:
    """The main demo's (examples/eager_vs_traced.py, the README Quickstart) first compiled
    call, `value_and_grad(mlp_loss)` on its default 32 x 8 -> 64 -> 1 problem, in fresh
    processes each with a new empty TRACEGRAD_CACHE_DIR, alternating with jax.jit's first
    call of the same loss (median of `runs`)."""
    examples = str(ROOT / "examples")
    ours, theirs = [], []
    for _ in range(runs):
        cache_dir = tempfile.mkdtemp(prefix="tracegrad-cold-demo-")
        try:
            code = DEMO_CHILD.format(examples=examples, module="tracegrad")
            ours.append(
                _run_child("tracegrad", True, cache_dir, code=code, TRACEGRAD_EXIT_WAIT="0")
            )
            code = DEMO_CHILD.format(examples=examples, module="jax")
            theirs.append(_run_child("jax", True, cache_dir, code=code))
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    rows = [
        {"case": "main demo, empty cache", **_median_row(ours)},
        {"case": "main demo, jax.jit", **_median_row(theirs)},
    ]
    for row in rows:
        log(f"  cold start, {row['case']}: {row}")
    ratio = None
    if all(r.get("first_result") for r in rows):
        ratio = rows[0]["first_result"] / rows[1]["first_result"]
    return {"rows": rows, "ratio to jax.jit": ratio}


# ------------------------------------------------- every workload, every compiler
WORKLOAD_CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy
import {module}
t1 = time.perf_counter()
from perf import systems
from perf.workloads import compare, make_workload
w = make_workload({name!r}, {dtype!r})
t2 = time.perf_counter()
prepared = systems.SYSTEMS[{key!r}].prepare(w)
result = prepared.call()
t3 = time.perf_counter()
value, grads = prepared.to_numpy(result)
problem = compare(w, value, grads)
t4 = time.perf_counter()
prepared.call()
t5 = time.perf_counter()
print("COLD_START_JSON " + json.dumps({{"import": t1 - t0, "first_result": t3 - t2, "second_call": t5 - t4,
                                       "status": "ok" if problem is None else "mismatch: " + problem}}))
"""

COMPILERS = (  # (column, system key, module imported before the clock starts)
    ("tracegrad, empty cache", "tracegrad_compiled", "tracegrad"),
    ("tracegrad, warm cache", "tracegrad_compiled", "tracegrad"),
    ("jax.jit", "jax", "jax"),
    ("torch.compile", "torch_compile", "torch"),
)
CHILD_TIMEOUT_S = 300


def _run_workload_child(name: str, dtype: str, key: str, module: str, env: dict) -> dict:
    code = WORKLOAD_CHILD.format(root=str(ROOT), module=module, name=name, dtype=dtype, key=key)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"status": f"timeout: no result within {CHILD_TIMEOUT_S} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("COLD_START_JSON "):
            return json.loads(line[len("COLD_START_JSON ") :])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": f"failed: {tail[:200]}"}


def measure_workloads(
    names, dtype: str = "float32", log=print, inductor_dir: str | None = None
) -> dict:
    """First value-and-grad result of each workload in fresh processes, per compiler.

    tracegrad runs twice on one new TRACEGRAD_CACHE_DIR per workload: empty (trace,
    autodiff, codegen, Numba compile), then warm (index + Numba cache load). jax.jit
    runs without a persistent compilation cache (JAX's default). torch.compile gets one
    TORCHINDUCTOR_CACHE_DIR, empty when the table starts and shared by its rows
    (`inductor_dir`, default a new temporary folder): every row's graphs miss inductor's
    cache, and only the first row pays for building inductor's shared C++ prefix. The
    clock starts after the library's import and the inputs are built; the import is
    timed apart."""
    root_dir = tempfile.mkdtemp(prefix="tracegrad-cold-workloads-")
    base = _child_env()
    base.pop("TRACEGRAD_LOG", None)
    base.pop("TRACEGRAD_BACKEND", None)  # default settings (a named backend never tiers)
    uptime_before = _uptime()
    inductor_dir = inductor_dir or str(Path(root_dir) / "inductor")
    inductor_was_empty = not (Path(inductor_dir).exists() and any(Path(inductor_dir).iterdir()))
    rows = []
    try:
        for name in names:
            work = Path(root_dir) / name
            work.mkdir()
            env = {
                **base,
                "TRACEGRAD_CACHE_DIR": str(work / "tracegrad"),
                "TORCHINDUCTOR_CACHE_DIR": inductor_dir,
            }
            row = {"workload": name, "dtype": dtype}
            for column, key, module in COMPILERS:
                row[column] = _run_workload_child(name, dtype, key, module, env)
            log(
                f"  cold first call {name}: "
                + ", ".join(
                    f"{c} {r.get('first_result', float('nan')):.2f}s {r['status'][:40]}"
                    for c, r in ((c, row[c]) for c, _, _ in COMPILERS)
                )
            )
            rows.append(row)
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)
    note = (
        "Each cell is a new Python process. `first result`: from after the library's import "
        "(inputs built) to the first value and gradients, float32, checked against the NumPy "
        "reference. tracegrad: empty = a new empty TRACEGRAD_CACHE_DIR (trace, autodiff, "
        "passes, codegen, Numba compile, and Numba's import, which `import tracegrad` defers); "
        "warm = a second process on that same folder (index hit, Numba cache load). jax.jit: "
        "no persistent compilation cache (JAX's default), so every process compiles. "
        "torch.compile: one TORCHINDUCTOR_CACHE_DIR for the whole table, "
        + (
            "empty when the table started"
            if inductor_was_empty
            else "NOT empty when the table started"
        )
        + ", so every row's graphs are compiled (dynamo + AOTAutograd + inductor + the C++ compiler); "
        "only the first row also built inductor's shared C++ prefix. `import` is the library's "
        "import time in that process."
    )
    return {
        "rows": rows,
        "columns": [c for c, _, _ in COMPILERS],
        "dtype": dtype,
        "note": note,
        "uptime": [uptime_before, _uptime()],
    }


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:
        return f"uptime unavailable: {exc}"


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=3, help="warm-cache repeats (median)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--workloads",
        default="",
        help="comma list: also time each workload's first call in fresh processes "
        "(tracegrad empty/warm cache, jax.jit, torch.compile)",
    )
    p.add_argument(
        "--only-workloads",
        action="store_true",
        help="skip the mlp_mnist_b128 empty/warm/eager/Numba-floor rows",
    )
    p.add_argument(
        "--demo-runs",
        type=int,
        default=5,
        help="fresh processes for the main demo's first compiled call (0: skip it)",
    )
    p.add_argument(
        "--inductor-dir",
        default=None,
        help="TORCHINDUCTOR_CACHE_DIR for the --workloads table (default: a new temporary folder)",
    )
    p.add_argument(
        "--out",
        default="",
        help="write the result as JSON to this file (perf/run.py --cold-from reads it)",
    )
    args = p.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    result = (
        {"rows": [], "note": ""} if args.only_workloads else measure(args.runs, log=lambda m: None)
    )
    if args.demo_runs > 0 and not args.only_workloads:
        result["demo"] = measure_demo(args.demo_runs, log=lambda m: None)
    if names:
        result["workloads"] = measure_workloads(names, log=print, inductor_dir=args.inductor_dir)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{'case':40s} {'import numpy':>12s} {'import':>9s} {'numba?':>7s} {'first result':>13s} "
        f"{'kernel ready':>13s}  status"
    )
    for r in result["rows"]:

        def ms(key):
            return f"{r[key] * 1e3:.0f} ms" if r.get(key) is not None else "-"  # noqa: B023 - ms() runs in this iteration

        nb = r.get("numba_at_import")
        print(
            f"{r['case']:40s} {ms('import_numpy'):>12s} {ms('import'):>9s} "
            f"{'-' if nb is None else ('yes' if nb else 'no'):>7s} {ms('first_result'):>13s} "
            f"{ms('kernel_ready'):>13s}  {r['status']}"
        )
    print(result["note"])
    for what, ratio in result.get("ratios", {}).items():
        print(f"{what}: {ratio:.2f}x")
    for r in result.get("rows", []):
        if r.get("process") is not None:
            print(
                f"{r['case']}: whole process to the first result (import numpy and "
                f"tracegrad included): {r['process'] * 1e3:.0f} ms"
            )
    demo = result.get("demo")
    if demo:
        for r in demo["rows"]:
            first = r.get("first_result")
            print(
                f"{r['case']}: first value-and-grad call "
                f"{'-' if first is None else f'{first * 1e3:.1f} ms'} ({r['status']})"
            )
        if demo.get("ratio to jax.jit") is not None:
            print(f"main demo: tracegrad / jax.jit first call: {demo['ratio to jax.jit']:.2f}x")
    warm = next((r for r in result["rows"] if r["case"] == "warm cache"), {})
    if warm.get("stages"):
        print(
            "warm cache, first call by stage: "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in warm["stages"].items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
