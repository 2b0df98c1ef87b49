"""Writing perf/report.md: machine description, tables, targets and PNG plots."""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import platform
import subprocess
from pathlib import Path

from perf.systems import SYSTEMS
from perf.workloads import MISSING_WORKLOADS, WORKLOAD_NAMES
from perf.workloads_models import SMALL_FLOPS

# Issue 4: compiled tracegrad's time as a ratio to the best peer, at most.
COMPILED_TARGETS = {
    "seed_scalar": 0.25,
    "mlp_small_b16": 0.5,
    "mlp_mnist_b128": 1.0,
    "elementwise_1M": 1.0,
    "tanh_chain_d50": 1.0,
}
COLD_COMPILE_TARGET_S = 1.5  # first call of mlp_mnist_b128, cold cache
WARM_FIRST_RESULT_TARGET_S = 0.25  # new process, warm disk cache, after `import tracegrad`
MEMORY_TARGET_WORKLOADS = ("tanh_chain_d50", "elementwise_1M")
# Issue 14: compiled tracegrad / best of (jax.jit, torch.compile, PyTorch eager), at most.
ISSUE14_TARGET = 1.0
ISSUE14_SMALL_TARGET = 0.5
# Issue 2: eager speed check workloads (seed, an MLP step, a large elementwise chain).
EAGER_CHECK_WORKLOADS = ("seed_scalar", "mlp_small_b16", "mlp_mnist_b128", "elementwise_1M")


# ---------------------------------------------------------------- formatting
def fmt_time(seconds) -> str:
    if seconds is None:
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n) -> str:
    if n is None:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fmt_ratio(r) -> str:
    return "–" if r is None else f"{r:.2f}×"


def passfail(ok) -> str:
    return "n/a" if ok is None else ("**pass**" if ok else "**FAIL**")


# ------------------------------------------------------------ machine facts
def _version(module: str) -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(module)
        except PackageNotFoundError:
            pass
        return getattr(importlib.import_module(module), "__version__", "?")
    except Exception:
        return "not installed"


def _lscpu() -> dict:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except Exception:
        return {}
    return {
        k.strip(): v.strip()
        for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)
    }


def blas_info() -> str:
    try:
        import numpy  # noqa: F401  (load its BLAS first)
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed: BLAS kernel not recorded"
    parts = []
    for i in threadpool_info():
        lib = os.path.basename(i.get("filepath", ""))
        if i.get("user_api") == "blas":
            parts.append(
                f"{i.get('internal_api')} {i.get('version')}, kernel **{i.get('architecture')}**, "
                f"{i.get('num_threads')} threads ({lib})"
            )
        else:
            parts.append(f"{i.get('internal_api')} {i.get('num_threads')} threads ({lib})")
    return "; ".join(parts) or "no BLAS/OpenMP pools found"


def machine_info() -> dict:
    cpu = _lscpu()
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu.get("Model name", platform.processor() or "?"),
        "cores": f"{os.cpu_count()} logical CPUs ({cpu.get('Core(s) per socket', '?')} cores/socket, "
        f"{cpu.get('Thread(s) per core', '?')} thread/core)",
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    for mod in (
        "numpy",
        "numba",
        "scipy",
        "torch",
        "jax",
        "jaxlib",
        "autograd",
        "matplotlib",
        "tracegrad",
    ):
        info[mod] = _version(mod)
    info["blas"] = blas_info()
    try:
        import torch

        info["torch threads"] = str(torch.get_num_threads())
    except Exception:
        pass
    threads = {
        v: os.environ[v]
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "XLA_FLAGS")
        if v in os.environ
    }
    info["thread settings"] = (
        ", ".join(f"{k}={v}" for k, v in threads.items())
        if threads
        else "library defaults (each uses all cores)"
    )
    unset = os.environ.get("TRACEGRAD_PERF_UNSET_OPENBLAS", "")
    info["OPENBLAS env"] = (
        f"unset for this benchmark process (were: {unset})"
        if unset
        else "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE were not set"
    )
    try:
        root = Path(__file__).resolve().parents[1]
        info["git commit"] = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except Exception:
        pass
    return info


# ------------------------------------------------------------------ lookups
def _index(results):
    return {(r.workload, r.dtype, r.system): r for r in results}


def _dtypes(results):
    return [d for d in ("float32", "float64") if any(r.dtype == d for r in results)]


def _workloads(results):
    names = {r.workload for r in results}
    return [w for w in WORKLOAD_NAMES if w in names] + sorted(names - set(WORKLOAD_NAMES))


def _systems(results):
    keys = {r.system for r in results}
    return [k for k in SYSTEMS if k in keys]


# ----------------------------------------------------------------- sections
def section_machine(info: dict, argv: list, settings) -> list[str]:
    lines = ["## Machine and method", ""]
    lines += [f"- **{k}**: {v}" for k, v in info.items()]
    lines += [
        f"- **command**: `python perf/run.py {' '.join(argv)}`",
        f"- **timing**: {settings.repeats} interleaved rounds; in each round every system runs one "
        f"batch of calls (~{settings.batch_seconds * 1e3:.0f} ms), starting system rotating; the "
        "time is the median over rounds of (batch time / calls); tracegrad compiled is timed "
        "after its background build of the multi-core variant of big loops has finished (its "
        "first call returns at once with the one-core kernel). Every system's value and "
        "gradients were checked against a float64 NumPy reference before timing (relative "
        "tolerance 2e-3 for float32, 1e-8 for float64); a system that fails the check is "
        "reported and not timed.",
        "- **first call**: wall time of the first value-and-grad call after setup (includes "
        "tracing and compiling for tracegrad compiled, torch.compile and jax.jit; "
        + (
            "tracegrad's disk cache starts empty in a fresh temporary TRACEGRAD_CACHE_DIR, so this is a "
            "cold compile; "
            if os.environ.get("TRACEGRAD_PERF_COLD_TRACEGRAD")
            else "tracegrad's disk cache was the given --cache-dir, filled before this run, so this is a "
            "warm-cache first call (trace + index hit + Numba cache load; the cold-start table has cold "
            "ones); "
        )
        + (
            "torch inductor's on-disk cache also starts empty (TORCHINDUCTOR_CACHE_DIR)."
            if os.environ.get("TRACEGRAD_PERF_COLD_INDUCTOR")
            else f"torch inductor's on-disk cache was the given TORCHINDUCTOR_CACHE_DIR "
            f"(`{os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'its default')}`, possibly warm from earlier "
            "runs or the cold-start table), so torch.compile's first call here may be faster than a cold "
            "one; the cold-start table has cold ones). PyTorch's dynamo caches per "
            "code object, so the float64 run of a workload recompiles rather than compiling afresh."
        ),
        "- **peak memory**: bytes allocated at peak during one call above what was live before it. "
        "Method per system: tracemalloc for NumPy, HIPS autograd and tracegrad (numpy and Numba's "
        "runtime both allocate through traced allocators); torch's profiler (running sum of its "
        "allocator's events) for PyTorch; XLA's `memory_analysis()` (temp + output buffers of the "
        "compiled program) for JAX. The methods count allocator bytes, not RSS; they are close "
        "but not identical across systems.",
        "- **noise**: this is a 2-core machine shared with other processes (the load column is the "
        "mean 1-minute load average while that workload was timed). Multi-threaded libraries "
        "(OpenBLAS in numpy, PyTorch's OpenMP pool, XLA) suffer most when a core is taken, because "
        "each parallel region waits for its slowest thread. Interleaving spreads the noise across "
        "systems; the fastest round is shown beside the median as a less load-sensitive figure. "
        "Before each batch the harness idles briefly so the previous system's spinning worker "
        "threads go to sleep, then makes one untimed call so the system's own threads (and the "
        "idle virtual CPU they run on) are awake: the timed batch is a loop's steady state.",
        "- **× best peer**: time divided by the fastest peer (PyTorch eager, torch.compile, "
        "jax.jit, HIPS autograd, NumPy by hand) on the same workload in the same run. Issue 4's "
        "verdicts use the best autodiff library instead (NumPy by hand excluded), as its "
        "orientation table does; see the targets section.",
        "",
    ]
    return lines


def section_tables(results) -> list[str]:
    idx = _index(results)
    lines = ["## Results", ""]
    for dtype in _dtypes(results):
        lines += [f"### {dtype}", "", "Median time per value-and-grad call (× best peer):", ""]
        keys = _systems(results)
        lines.append("| workload | " + " | ".join(SYSTEMS[k].label for k in keys) + " |")
        lines.append("|---" * (len(keys) + 1) + "|")
        for w in _workloads(results):
            cells = []
            for k in keys:
                r = idx.get((w, dtype, k))
                if r is None:
                    cells.append("")
                elif r.status != "ok":
                    cells.append(r.status)
                else:
                    cells.append(f"{fmt_time(r.median)} ({fmt_ratio(r.ratio)})")
            lines.append(f"| `{w}` | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Details:",
            "",
            "| workload | system | status | median / call | × best peer | fastest round | first call | "
            "peak memory | memory method | load |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for w in _workloads(results):
            for k in keys:
                r = idx.get((w, dtype, k))
                if r is None:
                    continue
                status = (r.status if not r.detail else f"{r.status}: {r.detail}").replace(
                    "|", "\\|"
                )
                lines.append(
                    f"| `{w}` | {SYSTEMS[k].label} | {status} | {fmt_time(r.median)} | "
                    f"{fmt_ratio(r.ratio)} | {fmt_time(r.best)} | {fmt_time(r.first_call)} | "
                    f"{fmt_bytes(r.peak_bytes)} | {r.memory_method if r.status == 'ok' else ''} | "
                    f"{'' if r.load is None else f'{r.load:.1f}'} |"
                )
        lines.append("")
    return lines


def section_targets(results, cold) -> list[str]:
    idx = _index(results)
    lines = [
        "## Targets from issue 4 (compiled tracegrad)",
        "",
        "The issue's targets are ratios to the best peer, and its orientation table names the "
        "peers: the autodiff libraries (PyTorch eager, torch.compile, jax.jit, HIPS autograd; e.g. "
        "JAX, about 11 µs, is the best peer on `seed_scalar`). The verdict uses them. The last two "
        "columns are a stricter reading that also counts the hand-written NumPy forward+backward "
        "as a peer.",
        "",
        "| workload | dtype | target (× best peer) | × best library | result | "
        "× best incl. NumPy by hand | stricter result |",
        "|---|---|---|---|---|---|---|",
    ]
    for dtype in _dtypes(results):
        for w, target in COMPILED_TARGETS.items():
            r = idx.get((w, dtype, "tracegrad_compiled"))
            if r is None:
                continue
            ok_lib = None if r.ratio_library is None else r.ratio_library <= target
            ok_all = None if r.ratio is None else r.ratio <= target
            measured = fmt_ratio(r.ratio_library) if r.status == "ok" else r.status
            lines.append(
                f"| `{w}` | {dtype} | ≤ {target}× | {measured} | {passfail(ok_lib)} | "
                f"{fmt_ratio(r.ratio)} | {passfail(ok_all)} |"
            )
    lines += ["", "| other target | measured | result |", "|---|---|---|"]
    r = idx.get(("mlp_mnist_b128", "float32", "tracegrad_compiled"))
    if r is not None and os.environ.get("TRACEGRAD_PERF_COLD_TRACEGRAD"):
        ok = None if r.status != "ok" else r.first_call <= COLD_COMPILE_TARGET_S
        lines.append(
            f"| cold first call of `mlp_mnist_b128` (f32) ≤ {COLD_COMPILE_TARGET_S} s | "
            f"{fmt_time(r.first_call) if r.status == 'ok' else r.status} | {passfail(ok)} |"
        )
    elif cold:  # this run's cache was warm: judge the fresh-process empty-cache run (numba's import included)
        row = next((x for x in cold.get("rows", []) if x["case"] == "empty cache"), {})
        first = row.get("first_result")
        ok = None if first is None else first <= COLD_COMPILE_TARGET_S
        lines.append(
            f"| cold first call of `mlp_mnist_b128` (f32) ≤ {COLD_COMPILE_TARGET_S} s (fresh process, "
            f"empty cache, Numba's import included) | {fmt_time(first)} | {passfail(ok)} |"
        )
    for w in MEMORY_TARGET_WORKLOADS:
        for dtype in _dtypes(results):
            c, t = idx.get((w, dtype, "tracegrad_compiled")), idx.get((w, dtype, "torch_eager"))
            if c is None or t is None:
                continue
            ok = None
            if c.peak_bytes is not None and t.peak_bytes is not None:
                ok = c.peak_bytes <= t.peak_bytes
            lines.append(
                f"| peak memory of `{w}` ({dtype}) ≤ PyTorch eager's | "
                f"{fmt_bytes(c.peak_bytes)} vs {fmt_bytes(t.peak_bytes)} | {passfail(ok)} |"
            )
    for dtype in _dtypes(results):
        c, n = (
            idx.get(("elementwise_1M", dtype, "tracegrad_compiled")),
            idx.get(("elementwise_1M", dtype, "numpy")),
        )
        if c is not None and n is not None:
            ok = None if (c.median is None or n.median is None) else c.median <= n.median
            lines.append(
                f"| elementwise math vectorizes: `elementwise_1M` ({dtype}) compiled faster than "
                f"NumPy's SIMD ufuncs | {fmt_time(c.median)} vs {fmt_time(n.median)} | {passfail(ok)} |"
            )
    if cold:
        for row in cold.get("rows", []):
            if row["case"] == "warm cache":
                ok = (
                    None
                    if row.get("first_result") is None
                    else row["first_result"] <= WARM_FIRST_RESULT_TARGET_S
                )
                lines.append(
                    f"| warm-cache first `mlp_mnist_b128` result ≤ {WARM_FIRST_RESULT_TARGET_S} s after "
                    f"import | {fmt_time(row.get('first_result'))} | {passfail(ok)} |"
                )
                kernel_log = _kernel_log_line(row)
                compiled_again = None
                if "numba compile" in kernel_log or "cache load" in kernel_log:
                    compiled_again = "numba compile" in kernel_log
                lines.append(
                    f"| warm cache: no Numba compilation in the new process | "
                    f"{'–' if compiled_again is None else ('compiled' if compiled_again else 'cache load')} "
                    f"(tracegrad's log) | {passfail(None if compiled_again is None else not compiled_again)} |"
                )
                nb = row.get("numba_at_import")
                lines.append(
                    f"| `import tracegrad` does not import numba | "
                    f"{'numba imported' if nb else ('not imported' if nb is False else '–')} | "
                    f"{passfail(None if nb is None else not nb)} |"
                )
    lines.append("")
    return lines


def is_small(flops) -> bool | None:
    return None if flops is None else flops < SMALL_FLOPS


def issue14_target(flops) -> float:
    return ISSUE14_SMALL_TARGET if is_small(flops) else ISSUE14_TARGET


RATIO_COLUMNS = (
    "tracegrad_compiled",
    "tracegrad_eager",
    "torch_eager",
    "torch_compile",
    "jax",
    "autograd",
    "numpy",
)


def section_issue14(results) -> list[str]:
    """Every workload: tracegrad compiled against the best of jax.jit / torch.compile / PyTorch eager."""
    idx = _index(results)
    compiled = [r for r in results if r.system == "tracegrad_compiled"]
    if not compiled:
        return []
    keys = [k for k in RATIO_COLUMNS if any(r.system == k for r in results)]
    lines = [
        "## Targets from issue 14: every workload against the frameworks",
        "",
        f"Target: tracegrad compiled ≤ {ISSUE14_TARGET}× the best of jax.jit / torch.compile / PyTorch "
        f"eager on every workload, and ≤ {ISSUE14_SMALL_TARGET}× on the small ones. **Small** means "
        f"under {SMALL_FLOPS / 1e6:g} MFLOP per value-and-grad call, by the workload's own estimate "
        '(`extra["flops"]` in perf/workloads*.py: 3× the forward pass, a multiply-add counted as 2). '
        "All ratios below divide by that best framework's median in the same run (same process, "
        "interleaved rounds), so they hold even though the machine's absolute speed drifts.",
        "",
        "| workload | dtype | MFLOP | small | best framework | its time | tracegrad compiled | "
        "× best | target | verdict | "
        + " | ".join(f"{SYSTEMS[k].label} ×" for k in keys[1:])
        + " |",
        "|---" * (10 + len(keys) - 1) + "|",
    ]
    for dtype in _dtypes(results):
        for w in _workloads(results):
            r = idx.get((w, dtype, "tracegrad_compiled"))
            if r is None:
                continue
            best = idx.get((w, dtype, r.best_framework)) if r.best_framework else None
            target = issue14_target(r.flops)
            ok = None if r.ratio_frameworks is None else r.ratio_frameworks <= target
            mflop = "–" if r.flops is None else f"{r.flops / 1e6:.3g}"
            small = {None: "?", True: "yes", False: "no"}[is_small(r.flops)]
            others = []
            for k in keys[1:]:
                o = idx.get((w, dtype, k))
                others.append(
                    ""
                    if o is None
                    else (fmt_ratio(o.ratio_frameworks) if o.status == "ok" else o.status)
                )
            mine = f"{fmt_time(r.median)}" if r.status == "ok" else r.status
            lines.append(
                f"| `{w}` | {dtype} | {mflop} | {small} | "
                f"{SYSTEMS[r.best_framework].label if best else '–'} | "
                f"{fmt_time(best.median) if best else '–'} | {mine} | {fmt_ratio(r.ratio_frameworks)} | "
                f"≤ {target}× | {passfail(ok)} | " + " | ".join(others) + " |"
            )
    lines.append("")
    lines += [
        f"- **{name}: missing**, not measured: {reason}."
        for name, reason in MISSING_WORKLOADS.items()
    ]
    lines.append("")
    return lines


def section_workloads(results) -> list[str]:
    """What each workload computes (its description and FLOP estimate)."""
    seen = {}
    for r in results:
        seen.setdefault(r.workload, r)
    if not seen:
        return []
    lines = [
        "## Workloads",
        "",
        "Every system computes the value and the gradient of every parameter; "
        "its result is checked against the hand-written NumPy reference (float64) before timing.",
        "",
        "| workload | MFLOP per call | what it computes |",
        "|---|---|---|",
    ]
    for w in _workloads(results):
        r = seen[w]
        mflop = "–" if r.flops is None else f"{r.flops / 1e6:.3g}"
        lines.append(f"| `{w}` | {mflop} | {r.description.replace('|', '/')} |")
    lines.append("")
    return lines


def section_cold_workloads(cold) -> list[str]:
    table = (cold or {}).get("workloads")
    if not table:
        return []
    cols = table["columns"]
    uptime = table.get("uptime") or []
    lines = [
        f"## Cold first call of every workload ({table['dtype']}, fresh processes)",
        "",
        table["note"]
        + (
            f" Machine load (`uptime`) when the table started / ended: `{uptime[0]}` / "
            f"`{uptime[-1]}`."
            if uptime
            else ""
        ),
        "",
        "| workload | " + " | ".join(cols) + " | import tracegrad / jax / torch |",
        "|---" * (len(cols) + 2) + "|",
    ]
    for row in table["rows"]:
        cells = []
        for c in cols:
            cell = row.get(c, {})
            text = (
                fmt_time(cell.get("first_result")) if cell.get("first_result") is not None else "–"
            )
            if cell.get("status", "ok") != "ok":
                text += f" ({cell['status'][:90]})".replace("|", "/")
            cells.append(text)
        imports = " / ".join(
            fmt_time(row.get(c, {}).get("import")) for c in (cols[0], cols[2], cols[3])
        )
        lines.append(f"| `{row['workload']}` | " + " | ".join(cells) + f" | {imports} |")
    lines.append("")
    return lines


def section_eager(results) -> list[str]:
    idx = _index(results)
    lines = [
        "## Eager speed check (issue 2)",
        "",
        "tracegrad eager must be within 2× of PyTorch eager and faster than HIPS autograd.",
        "",
        "| workload | dtype | tracegrad eager | PyTorch eager | ÷ torch (≤ 2) | HIPS autograd | "
        "÷ autograd (< 1) |",
        "|---|---|---|---|---|---|---|",
    ]
    for dtype in _dtypes(results):
        for w in EAGER_CHECK_WORKLOADS:
            e = idx.get((w, dtype, "tracegrad_eager"))
            if e is None:
                continue
            t, a = idx.get((w, dtype, "torch_eager")), idx.get((w, dtype, "autograd"))
            cells = []
            for peer, limit, strict in ((t, 2.0, False), (a, 1.0, True)):
                if e.median is None or peer is None or peer.median is None:
                    cells += [fmt_time(peer.median) if peer else "–", "n/a"]
                    continue
                q = e.median / peer.median
                ok = q < limit if strict else q <= limit
                cells += [fmt_time(peer.median), f"{q:.2f} {passfail(ok)}"]
            etext = fmt_time(e.median) if e.status == "ok" else e.status
            lines.append(f"| `{w}` | {dtype} | {etext} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _tally(table_lines, first_verdict_only: bool) -> tuple[int, int, int, list[str]]:
    """Count pass / FAIL / n/a verdicts in table rows; name the rows that failed."""
    passed = failed = unknown = 0
    failures = []
    for line in table_lines:
        if not line.startswith("| ") or line.startswith("| workload") or line.startswith("| other"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        verdicts = [
            ("pass" if "**pass**" in c else "FAIL" if "**FAIL**" in c else "n/a")
            for c in cells
            if "**pass**" in c or "**FAIL**" in c or c == "n/a"
        ]
        if first_verdict_only:
            verdicts = verdicts[:1]
        passed += verdicts.count("pass")
        failed += verdicts.count("FAIL")
        unknown += verdicts.count("n/a")
        if "FAIL" in verdicts:
            failures.append(" ".join(cells[:2]) if cells[0].startswith("`") else cells[0])
    return passed, failed, unknown, failures


def section_summary(results, target_lines, eager_lines, issue14_lines=()) -> list[str]:
    lines = ["## Summary", ""]
    for title, table, first in (
        (
            "Issue 14 targets (compiled tracegrad vs best of jax.jit / torch.compile / "
            "PyTorch eager; ≤ 0.5× when small)",
            issue14_lines,
            True,
        ),
        ("Issue 4 targets (compiled tracegrad, vs best peer)", target_lines, True),
        ("Issue 2 eager checks (vs PyTorch eager and HIPS autograd)", eager_lines, False),
    ):
        if not table:
            continue
        passed, failed, unknown, failures = _tally(table, first)
        text = f"- **{title}**: {passed} pass, {failed} fail, {unknown} not measurable"
        if failures:
            text += ". Failing: " + "; ".join(failures)
        lines.append(text)
    not_ok = sorted(
        {
            f"{SYSTEMS[r.system].label} {r.status} on {r.workload}/{r.dtype}"
            for r in results
            if r.status != "ok"
        }
    )
    fallbacks = sorted({f"{r.workload}/{r.dtype}" for r in results if "IR interpreter" in r.detail})
    if not_ok:
        lines.append(f"- **Not timed** ({len(not_ok)}): " + "; ".join(not_ok))
    if fallbacks:
        lines.append(
            "- **tracegrad compiled ran on the IR interpreter** (Numba kernel failed to build) on: "
            + ", ".join(fallbacks)
        )
    lines.append("")
    return lines


def _kernel_log_line(row) -> str:
    """tracegrad's log line about building the kernel (says cache hit/miss, compile or load)."""
    logs = row.get("log") or []
    return next(
        (m for m in reversed(logs) if "numba compile" in m or "cache load" in m),
        next((m for m in reversed(logs) if "numba" in m), ""),
    )


def section_cold(cold) -> list[str]:
    if not cold:
        return []
    lines = [
        "## Cold start (perf/cold_start.py)",
        "",
        cold.get("note", ""),
        "",
        "| case | import tracegrad | numba imported by `import tracegrad` | first `mlp_mnist_b128` "
        "result after import | status |",
        "|---|---|---|---|---|",
    ]
    for row in cold.get("rows", []):
        nb = row.get("numba_at_import")
        # tracegrad's own log line about the kernel: says whether the disk cache hit
        kernel_log = _kernel_log_line(row)
        status = row.get("status", "") + (f"; log: `{kernel_log[:200]}`" if kernel_log else "")
        lines.append(
            f"| {row['case']} | {fmt_time(row.get('import'))} | "
            f"{'–' if nb is None else ('yes' if nb else 'no')} | {fmt_time(row.get('first_result'))} | "
            f"{status.replace('|', '/')} |"
        )
    lines.append("")
    return lines


PIPELINE = (
    "trace",
    "AD",
    "passes",
    "passes: fuse",
    "codegen (emit source)",
    "import numba",
    "numba compile / cache load",
    "codegen other",
)


def _stage_order(rows) -> list[str]:
    """Stages in pipeline order, unknown names after them."""
    seen = {s for r in rows for s in r.stages}
    return [s for s in PIPELINE if s in seen] + sorted(seen - set(PIPELINE))


def section_stages(results) -> list[str]:
    rows = [r for r in results if r.system == "tracegrad_compiled" and r.first_call is not None]
    if not rows:
        return []
    stages = _stage_order(rows)
    lines = ["## Compile time by stage (tracegrad compiled, first call)", ""]
    if not stages:
        lines += [
            "No stage times were found in the `tracegrad` logger's records (TRACEGRAD_LOG=1). "
            "Only the total first-call time is shown.",
            "",
        ]
    lines.append("| workload | dtype | first call | " + " | ".join(stages) + " | unaccounted |")
    lines.append("|---" * (len(stages) + 4) + "|")
    for r in rows:
        known = sum(r.stages.values())
        lines.append(
            f"| `{r.workload}` | {r.dtype} | {fmt_time(r.first_call)} | "
            + " | ".join(fmt_time(r.stages.get(s)) for s in stages)
            + f" | {fmt_time(max(0.0, r.first_call - known))} |"
        )
    lines += ["", "![compile time by stage](compile_stages.png)", ""]
    return lines


def section_sweeps(sweeps) -> list[str]:
    if not sweeps:
        return []
    lines = [
        "## Where static graphs pay off: compiled vs eager against problem size",
        "",
        "![speedup of compiled over eager](speedup_vs_size.png)",
        "",
    ]
    for title, sweep in sweeps.items():
        pairs = sweep["pairs"]
        head = " | ".join(f"{SYSTEMS[e].label} | {SYSTEMS[c].label} | speedup" for e, c in pairs)
        lines += [f"**{title}**", "", f"| size | {head} |", "|---" * (1 + 3 * len(pairs)) + "|"]
        for row in sweep["rows"]:
            cells = []
            for e, c in pairs:
                te, tc = row.get(e), row.get(c)
                sp = (
                    f"{te / tc:.2f}×"
                    if te and tc
                    else (row.get(f"{c}_status") or row.get(f"{e}_status") or "–")
                )
                cells += [fmt_time(te), fmt_time(tc), sp]
            lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def section_missing(results) -> list[str]:
    missing = {}
    for r in results:
        if r.status != "ok":
            missing.setdefault((r.system, r.status, r.detail), []).append(f"{r.workload}/{r.dtype}")
    if not missing:
        return []
    lines = ["## Systems not timed", ""]
    for (system, status, detail), where in missing.items():
        lines.append(f"- **{SYSTEMS[system].label}** ({status}) on {', '.join(where)}: {detail}")
    lines.append("")
    return lines


# -------------------------------------------------------------------- plots
def plot_times(results, path: Path, stamp: str = "") -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    dtypes, workloads, keys = _dtypes(results), _workloads(results), _systems(results)
    idx = _index(results)
    if not dtypes:
        return False
    fig, axes = plt.subplots(
        len(dtypes), 1, figsize=(max(12, 0.8 * len(workloads)), 4.8 * len(dtypes)), squeeze=False
    )
    width = 0.8 / max(1, len(keys))
    colors = plt.get_cmap("tab10")
    for ax, dtype in zip(axes[:, 0], dtypes, strict=True):
        for j, key in enumerate(keys):
            xs, ys = [], []
            for i, w in enumerate(workloads):
                r = idx.get((w, dtype, key))
                if r is not None and r.median:
                    xs.append(i + (j - (len(keys) - 1) / 2) * width)
                    ys.append(r.median * 1e6)
            ax.bar(xs, ys, width, label=SYSTEMS[key].label, color=colors(j))
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(workloads)), workloads, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("µs per value-and-grad call (log)")
        ax.set_title(f"Time per call, {dtype} (lower is better)")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0, 0].legend(ncol=len(keys), fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.08))
    _stamp(fig, stamp)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


NUMBA_STAGES = ("import numba", "numba compile / cache load", "codegen+numba")


def plot_stages(results, path: Path, stamp: str = "") -> bool:
    """Stacked stage times: all stages in seconds (left), tracegrad's own stages in ms (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r.system == "tracegrad_compiled" and r.first_call is not None]
    if not rows:
        return False
    stages = _stage_order(rows) + ["unaccounted"]
    labels = [f"{r.workload}\n{r.dtype}" for r in rows]
    colors = {s: plt.get_cmap("tab10")(j) for j, s in enumerate(stages)}
    colors["unaccounted"] = "0.75"

    def value(r, stage):
        if stage == "unaccounted":
            return max(0.0, r.first_call - sum(r.stages.values()))
        return r.stages.get(stage, 0.0)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    panels = (
        (axes[0], stages, 1.0, "seconds (whole first call)", "all stages"),
        (
            axes[1],
            [s for s in stages if s not in NUMBA_STAGES and s != "unaccounted"],
            1e3,
            "milliseconds",
            "without Numba (tracegrad's own stages)",
        ),
    )
    for ax, shown, scale, unit, title in panels:
        bottom = [0.0] * len(rows)
        for stage in shown:
            vals = [value(r, stage) * scale for r in rows]
            ax.bar(labels, vals, bottom=bottom, label=stage, color=colors[stage])
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_ylabel(unit)
        ax.set_title(f"tracegrad cold compile by stage: {title}", fontsize=10)
        ax.tick_params(axis="x", labelsize=6)
        if shown:
            ax.legend(fontsize=7)
    if not _stage_order(rows):
        axes[0].text(0.5, 0.9, "no stage times reported", transform=axes[0].transAxes, ha="center")
    _stamp(fig, stamp)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_sweeps(sweeps, path: Path, stamp: str = "") -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not sweeps:
        return False
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5.5 * len(sweeps), 4), squeeze=False)
    for ax, (title, sweep) in zip(axes[0], sweeps.items(), strict=True):
        for (eager, compiled), style in zip(sweep["pairs"], ("o-", "s--"), strict=True):
            pts = [
                (row["size"], row[eager] / row[compiled])
                for row in sweep["rows"]
                if row.get(eager) and row.get(compiled)
            ]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    style,
                    label=f"{SYSTEMS[compiled].label} over {SYSTEMS[eager].label}",
                )
        ax.axhline(1.0, color="0.5", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("elements" if "elementwise" in title else "batch (width = 2 × batch)")
        ax.set_ylabel("speedup (eager time / compiled time)")
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no verified pair of results", transform=ax.transAxes, ha="center")
    _stamp(fig, stamp)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _stamp(fig, stamp: str) -> None:
    """Mark the figure with the date and machine it was measured on."""
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.text(0.995, 0.005, stamp, ha="right", va="bottom", fontsize=7, color="0.35")


def _try_plot(fn, *args) -> str | None:
    try:
        return None if fn(*args) else "nothing to plot"
    except Exception as exc:  # a missing matplotlib must not lose the tables
        return f"{type(exc).__name__}: {exc}"


# ------------------------------------------------------------------- report
def section_loops(loops_md: Path) -> list[str]:
    """Compile time against loop length, from perf/loop_compile.py's own report."""
    if not loops_md.exists():
        return []
    body = loops_md.read_text().split("\n", 1)[1].strip()
    return ["## Compile time against loop length (perf/loop_compile.py, issue 12)", "", body, ""]


def write_report(
    out_dir: Path,
    results,
    sweeps,
    cold,
    info: dict,
    argv: list,
    settings,
    total_seconds: float,
    notes: list[str] = (),
) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    problems = {}
    stamp = f"tracegrad perf/run.py · {info['date']} · {info['cpu']} · {os.cpu_count()} CPUs"
    for name, fn, arg in (
        ("time_per_call.png", plot_times, results),
        ("compile_stages.png", plot_stages, results),
        ("speedup_vs_size.png", plot_sweeps, sweeps),
    ):
        err = _try_plot(fn, arg, out_dir / name, stamp)
        if err:
            problems[name] = err
    lines = [
        "# tracegrad performance report",
        "",
        f"Generated by `perf/run.py` on {info['date']}, machine: {info['cpu']}, {info['cores']}. "
        f"Total run time {total_seconds:.0f} s.",
        "",
    ]
    lines += [f"> {n}" for n in notes] + ([""] if notes else [])
    targets, eager, issue14 = (
        section_targets(results, cold),
        section_eager(results),
        section_issue14(results),
    )
    lines += section_summary(results, targets, eager, issue14)
    lines += section_machine(info, argv, settings)
    lines += section_tables(results)
    if "time_per_call.png" not in problems:
        lines += ["![time per call by workload and system](time_per_call.png)", ""]
    lines += issue14
    lines += section_cold_workloads(cold)
    lines += section_workloads(results)
    lines += targets
    lines += eager
    lines += section_stages(results)
    lines += section_sweeps(sweeps)
    lines += section_cold(cold)
    lines += section_loops(Path(__file__).resolve().parent / "loops.md")
    lines += section_missing(results)
    if problems:
        lines += ["## Plots not drawn", ""] + [f"- {k}: {v}" for k, v in problems.items()] + [""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
