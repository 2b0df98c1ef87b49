"""Issue 23: tracegrad's threads beside other libraries' thread pools, and its scaling.

    python perf/threads.py                      # every part, thread counts 1,2,4,8,16 up to the CPUs
    python perf/threads.py --parts spin,neighbours --rounds 40
    python perf/threads.py --no-torch-compile   # skip torch.compile (its compile takes minutes)

Writes perf/threads.md, perf/threads.json and perf/threads.png (or --out DIR). Every
measurement runs in a fresh child process with the environment it needs (thread
counts and libgomp's wait policy are fixed when a library loads). OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE are unset for the children (numpy's OpenBLAS picks its own kernel),
and the report says which BLAS kernel ran (threadpoolctl).

Parts:
- spin: CPU time the process burns in the 30 ms after one call returns, while its
  main thread sleeps: the busy-wait of a thread pool after its parallel region.
  Once with tracegrad's libgomp policy (TRACEGRAD_OMP_SPINCOUNT unset: 1000 spins),
  once with libgomp's own (`default`: 300,000), and with PyTorch imported first
  (its libgomp is then the one Numba's kernels run on).
- neighbours: a PyTorch eager step, a NumPy matmul and a jax.jit step, each timed
  right after a tracegrad compiled call (and an eager call), against the same step
  after one of its own: same process, interleaved rounds, the ratio of medians.
- scaling: elementwise_1M and mlp_mnist_b4096 compiled value_and_grad per thread
  count (TRACEGRAD_NUM_THREADS), and at the most threads, torch.compile's
  elementwise_1M and tracegrad's elementwise_1M in a process that also runs
  PyTorch and JAX steps between its calls ("in company").
- crossover: eager ufunc split and a compiled kernel's parallel variant against one
  thread per size: the smallest size at which k threads win, per k.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

IDLE = 0.03  # seconds of sleep after a call in the spin measurement


# ----------------------------------------------------------------------------- helpers


def cpus() -> int:
    from tracegrad.runtime import threads

    return threads.available_cpus()


def thread_counts(limit: int) -> list[int]:
    return [k for k in (1, 2, 4, 8, 16) if k <= limit] or [1]


def burnt_after(fn, reps: int = 9) -> float:
    """Median CPU ms the process uses in IDLE seconds after fn() returns."""
    out = []
    for _ in range(reps):
        fn()
        c0 = time.process_time()
        time.sleep(IDLE)
        out.append(time.process_time() - c0)
    return float(np.median(out)) * 1e3


def median_us(fn, n: int = 20) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e6


def blas_and_omp() -> dict:
    info = {}
    try:
        from threadpoolctl import threadpool_info

        info["pools"] = [
            {
                k: i.get(k)
                for k in (
                    "user_api",
                    "internal_api",
                    "version",
                    "architecture",
                    "num_threads",
                    "filepath",
                )
            }
            for i in threadpool_info()
        ]
    except ImportError:
        info["pools"] = "threadpoolctl not installed"
    try:
        with open("/proc/self/maps") as f:
            info["libgomp"] = sorted(
                {line.split(None, 5)[-1].strip() for line in f if "libgomp" in line and "/" in line}
            )
    except OSError:
        info["libgomp"] = []
    from tracegrad.runtime import threads

    info["omp_report"] = threads.omp_report()
    info["threads_in_process"] = len(os.listdir("/proc/self/task"))
    return info


def tracegrad_compiled(name: str = "elementwise_1M", dtype: str = "float32"):
    from perf.systems import prepare_tracegrad_compiled
    from perf.workloads import make_workload

    p = prepare_tracegrad_compiled(make_workload(name, dtype))
    p.call()
    p.settle()  # the parallel variant is in use
    return p.call


def tracegrad_eager(name: str = "elementwise_1M", dtype: str = "float32"):
    from perf.systems import prepare_tracegrad_eager
    from perf.workloads import make_workload

    p = prepare_tracegrad_eager(make_workload(name, dtype))
    p.call()
    return p.call


def torch_step(name: str = "elementwise_1M", dtype: str = "float32"):
    from perf.systems import prepare_torch_eager
    from perf.workloads import make_workload

    p = prepare_torch_eager(make_workload(name, dtype))
    p.call()
    return p.call


def torch_compiled(name: str = "elementwise_1M", dtype: str = "float32"):
    from perf.systems import prepare_torch_compile
    from perf.workloads import make_workload

    p = prepare_torch_compile(make_workload(name, dtype))
    p.call()
    return p.call


def jax_step(name: str = "elementwise_1M", dtype: str = "float32"):
    from perf.systems import prepare_jax
    from perf.workloads import make_workload

    p = prepare_jax(make_workload(name, dtype))
    p.call()
    return p.call


def numpy_matmul(n: int = 512):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    return lambda: a @ b


# ------------------------------------------------------------------------- child parts


def child_spin(opts) -> dict:
    if opts.torch_first:
        import torch  # noqa: F401  (its libgomp loads first)
    calls = {
        "tracegrad compiled elementwise_1M": tracegrad_compiled(),
        "tracegrad eager elementwise_1M": tracegrad_eager(),
    }
    for label, make in (
        ("torch eager elementwise_1M", torch_step),
        ("numpy matmul 512x512 f32", numpy_matmul),
        ("jax.jit elementwise_1M", jax_step),
    ):
        try:
            calls[label] = make()
        except Exception as exc:
            calls[label] = None
            print(f"  {label}: unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
    rows = {"nothing (baseline)": burnt_after(lambda: None)}
    for label, fn in calls.items():
        if fn is not None:
            rows[label] = burnt_after(fn)
    return {"burnt_ms": rows, "info": blas_and_omp()}


def child_neighbours(opts) -> dict:
    tg_compiled = tracegrad_compiled()
    tg_eager = tracegrad_eager()
    peers = {}
    for label, make in (
        ("torch eager elementwise_1M", torch_step),
        ("numpy matmul 512x512 f32", numpy_matmul),
        ("jax.jit elementwise_1M", jax_step),
    ):
        try:
            peers[label] = make()
        except Exception as exc:
            print(f"  {label}: unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
    before = {"itself": None, "tracegrad compiled": tg_compiled, "tracegrad eager": tg_eager}
    times = {p: {b: [] for b in before} for p in peers}
    for r in range(opts.rounds):
        order = list(before.items())
        order = order[r % len(order) :] + order[: r % len(order)]
        for peer, step in peers.items():
            for label, first in order:
                (first or step)()
                t = time.perf_counter()
                step()
                times[peer][label].append(time.perf_counter() - t)
    out = {}
    for peer, by in times.items():
        alone = float(np.median(by["itself"]))
        out[peer] = {
            label: {
                "median_us": float(np.median(ts)) * 1e6,
                "ratio": float(np.median(ts)) / alone,
                "p25_ratio": float(np.percentile(ts, 25)) / alone,
                "p75_ratio": float(np.percentile(ts, 75)) / alone,
            }
            for label, ts in by.items()
        }
    return {"steps": out, "info": blas_and_omp()}


def child_scaling(opts) -> dict:
    out = {"threads": int(os.environ.get("TRACEGRAD_NUM_THREADS", "0") or 0)}
    from tracegrad.runtime import threads

    out["limit"] = threads.get_num_threads()
    for name in ("elementwise_1M", "mlp_mnist_b4096"):
        call = tracegrad_compiled(name)
        out[name] = median_us(call, n=opts.calls)
    if opts.company:
        # the mixed process: PyTorch and JAX steps between tracegrad's calls
        call = tracegrad_compiled("elementwise_1M")
        peers = []
        for make in (torch_step, jax_step):
            try:
                peers.append(make())
            except Exception:
                pass
        alone, company = [], []
        for _ in range(opts.calls):
            t = time.perf_counter()
            call()
            alone.append(time.perf_counter() - t)
            for p in peers:
                p()
            t = time.perf_counter()
            call()
            company.append(time.perf_counter() - t)
        out["elementwise_1M after itself"] = float(np.median(alone)) * 1e6
        out["elementwise_1M after torch+jax steps"] = float(np.median(company)) * 1e6
        if opts.torch_compile:
            try:
                out["torch.compile elementwise_1M"] = median_us(torch_compiled(), n=opts.calls)
                out["tracegrad elementwise_1M (same process as torch.compile)"] = median_us(
                    call, n=opts.calls
                )
            except Exception as exc:
                out["torch.compile elementwise_1M"] = f"unavailable: {type(exc).__name__}"
    out["info"] = blas_and_omp()
    return out


def child_crossover(opts) -> dict:
    import tracegrad as tg
    from tracegrad.ops import parallel

    limit = cpus()
    ks = [k for k in thread_counts(limit) if k > 1]
    sizes = [1 << p for p in range(14, 23)]
    tanh = parallel.elementwise_impl(np.tanh)
    eager = {}
    for n in sizes:
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        row = {}
        for k in [1] + ks:
            tg.set_num_threads(k)
            saved = parallel.MIN_PARALLEL, parallel.GRAIN
            # the split forced at every size (k > 1), or never (k = 1)
            parallel.MIN_PARALLEL, parallel.GRAIN = (1, 1) if k > 1 else (1 << 62, 1 << 62)
            try:
                tanh(x)
                row[k] = median_us(lambda: tanh(x), n=opts.calls)  # noqa: B023 - median_us runs it in this iteration
            finally:
                parallel.MIN_PARALLEL, parallel.GRAIN = saved
        eager[n] = row
    tg.set_num_threads(None)
    # a compiled kernel's parallel variant against its serial variant, per size
    import numba

    compiled = {}
    for p in (16, 18, 20, 22):
        n = 1 << p
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        vg = tg.value_and_grad(lambda x: tg.sum(tg.tanh(x) * tg.sin(x) + tg.exp(-(x**2))))
        vg(x)
        kernel = vg.lower(x).kernel
        if kernel.parallel_source is None or not hasattr(kernel, "_serial_entry"):
            continue
        par, ser = kernel.entry.raw_entry, kernel._serial_entry
        row = {1: median_us(lambda: ser(x), n=opts.calls)}  # noqa: B023 - median_us runs it in this iteration
        for k in ks:
            numba.set_num_threads(k)
            row[k] = median_us(lambda: par(x), n=opts.calls)  # noqa: B023 - median_us runs it in this iteration
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        compiled[n] = row
    return {
        "eager": eager,
        "compiled": compiled,
        "min_parallel": parallel.MIN_PARALLEL,
        "grain": parallel.GRAIN,
    }


def idle_machine() -> None:
    """Children time the case of an idle machine: tracegrad's load following (fewer
    threads when other processes keep CPUs busy, ops/parallel.threads_now) is
    replaced by the thread limit, so that every call runs its parallel variant
    whatever the dev machine's other users are doing. --follow-load keeps it."""
    from tracegrad.ops import blas_threads, parallel
    from tracegrad.runtime import threads

    parallel.threads_now = blas_threads.threads_now = threads.get_num_threads


CHILDREN = {
    "spin": child_spin,
    "neighbours": child_neighbours,
    "scaling": child_scaling,
    "crossover": child_crossover,
}


# ------------------------------------------------------------------------------ driver


def run_child(part: str, env: dict, args: list[str], timeout: float = 1800) -> dict:
    full = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        full.pop(v, None)
    full.update(env)
    full["PYTHONPATH"] = ROOT + os.pathsep + full.get("PYTHONPATH", "")
    full.setdefault("JAX_PLATFORMS", "cpu")
    full.setdefault("TRACEGRAD_PARALLEL", "sync")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", part] + args
    t0 = time.time()
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["env"] = env
    result["seconds"] = round(time.time() - t0, 1)
    return result


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--parts", default="spin,neighbours,scaling,crossover")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of the neighbour steps")
    parser.add_argument("--calls", type=int, default=20, help="timed calls per median")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each child")
    parser.add_argument("--max-threads", type=int, default=None)
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false")
    parser.add_argument("--torch-first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--company", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--follow-load",
        action="store_true",
        help="keep tracegrad's load following (default: time an idle machine)",
    )
    parser.add_argument("--out", default=os.path.join(ROOT, "perf"))
    opts = parser.parse_args()
    if opts.child:
        if not opts.follow_load:
            idle_machine()
        result = CHILDREN[opts.child](opts)
        print(json.dumps(result, default=str))
        return

    limit = opts.max_threads or cpus()
    counts = thread_counts(limit)
    common = ["--rounds", str(opts.rounds), "--calls", str(opts.calls)]
    if opts.follow_load:
        common.append("--follow-load")
    if not opts.torch_compile:
        common.append("--no-torch-compile")
    cache = os.path.join(ROOT, ".tracegrad-cache-perf-threads")
    base_env = {"TRACEGRAD_CACHE_DIR": cache}
    results: dict = {
        "cpus": limit,
        "os_cpu_count": os.cpu_count(),
        "counts": counts,
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_average(),
        "parts": {},
    }
    parts = opts.parts.split(",")
    policies = {
        "tracegrad (spin 1000)": {},
        "libgomp default (300000)": {"TRACEGRAD_OMP_SPINCOUNT": "default"},
    }
    if "spin" in parts:
        rows = []
        for rep in range(opts.repeats):
            for label, env in policies.items():
                for torch_first in (False, True):
                    args = common + (["--torch-first"] if torch_first else [])
                    r = run_child("spin", {**base_env, **env}, args)
                    r.update(policy=label, torch_first=torch_first, repeat=rep, load=load_average())
                    rows.append(r)
                    print(
                        "spin",
                        label,
                        "torch first" if torch_first else "tracegrad first",
                        json.dumps(r.get("burnt_ms", r.get("error")))[:300],
                        flush=True,
                    )
        results["parts"]["spin"] = rows
    if "neighbours" in parts:
        rows = []
        for rep in range(opts.repeats):
            for label, env in policies.items():
                r = run_child("neighbours", {**base_env, **env}, common)
                r.update(policy=label, repeat=rep, load=load_average())
                rows.append(r)
                print(
                    "neighbours",
                    label,
                    json.dumps(
                        {
                            p: {b: round(v["ratio"], 2) for b, v in by.items()}
                            for p, by in r.get("steps", {}).items()
                        }
                    )
                    if "steps" in r
                    else r,
                    flush=True,
                )
        results["parts"]["neighbours"] = rows
    if "scaling" in parts:
        rows = []
        for rep in range(opts.repeats):
            for k in counts:
                args = common + (["--company"] if k == counts[-1] else [])
                if k != counts[-1] or rep > 0:
                    args = [a for a in args if a != "--no-torch-compile"] + ["--no-torch-compile"]
                r = run_child("scaling", {**base_env, "TRACEGRAD_NUM_THREADS": str(k)}, args)
                r.update(repeat=rep, load=load_average())
                rows.append(r)
                print(
                    "scaling",
                    k,
                    {
                        a: (round(b) if isinstance(b, float) else b)
                        for a, b in r.items()
                        if a not in ("info", "env")
                    },
                    flush=True,
                )
        results["parts"]["scaling"] = rows
    if "crossover" in parts:
        r = run_child("crossover", base_env, common)
        r["load"] = load_average()
        results["parts"]["crossover"] = r
        print("crossover", json.dumps(r)[:600], flush=True)
    results["load_after"] = load_average()
    os.makedirs(opts.out, exist_ok=True)
    with open(os.path.join(opts.out, "threads.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    write_report(results, opts.out)


# ------------------------------------------------------------------------------ report


def _fmt(v, digits=0):
    return f"{v:.{digits}f}" if isinstance(v, (int, float)) else str(v)


def write_report(results: dict, out: str) -> None:
    lines = [
        "# Threads beside other libraries, and scaling (perf/threads.py)",
        "",
        f"Run {results['started']} on {results['cpus']} usable CPUs "
        f"(os.cpu_count {results['os_cpu_count']}); load average "
        f"{_fmt(results['load_before'], 1)} before, {_fmt(results['load_after'], 1)} after. "
        f"Every row comes from a fresh child process; repeats are separate processes.",
        "",
    ]
    parts = results["parts"]
    info = None
    if "spin" in parts:
        rows = [r for r in parts["spin"] if "burnt_ms" in r]
        info = rows[0]["info"] if rows else None
        labels = list(rows[0]["burnt_ms"]) if rows else []
        lines += [
            "## Busy-wait after a call returns (spin)",
            "",
            f"CPU ms the whole process uses in the {int(IDLE * 1e3)} ms after one call "
            f"returns, while its main thread sleeps (median of 9). Anything above the "
            f"baseline is a thread pool spinning after its parallel region.",
            "",
            "| libgomp policy | loaded first | repeat | load | " + " | ".join(labels) + " |",
            "|---|---|---|---|" + "---|" * len(labels),
        ]
        for r in rows:
            lines.append(
                f"| {r['policy']} | {'PyTorch' if r['torch_first'] else 'tracegrad'} | "
                f"{r['repeat']} | {_fmt(r['load'], 1)} | "
                + " | ".join(_fmt(r["burnt_ms"].get(k), 2) for k in labels)
                + " |"
            )
        lines += [""]
        for r in rows[:4]:
            rep = r["info"].get("omp_report", {})
            lines.append(
                f"- {r['policy']}, {'PyTorch' if r['torch_first'] else 'tracegrad'} "
                f"first: {rep.get('why', '?')}; libgomp files mapped: "
                f"{', '.join(os.path.basename(p) for p in r['info'].get('libgomp', []))}"
            )
        lines.append("")
    if "neighbours" in parts:
        rows = [r for r in parts["neighbours"] if "steps" in r]
        lines += [
            "## Neighbours: a step right after a tracegrad call, against the same step after "
            "one of its own",
            "",
            "Same process, interleaved rounds; ratio of medians (p25-p75 of the per-round "
            "times over the median after itself in brackets). The target is 1.2 or less.",
            "",
            "| libgomp policy | repeat | load | step | after itself (us) | after tracegrad "
            "compiled | after tracegrad eager |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            for peer, by in r["steps"].items():
                c, e = by["tracegrad compiled"], by["tracegrad eager"]
                lines.append(
                    f"| {r['policy']} | {r['repeat']} | {_fmt(r['load'], 1)} | {peer} | "
                    f"{_fmt(by['itself']['median_us'])} | {c['ratio']:.2f} "
                    f"({c['p25_ratio']:.2f}-{c['p75_ratio']:.2f}) | {e['ratio']:.2f} "
                    f"({e['p25_ratio']:.2f}-{e['p75_ratio']:.2f}) |"
                )
        lines.append("")
    if "scaling" in parts:
        rows = [r for r in parts["scaling"] if "elementwise_1M" in r]
        lines += [
            "## Scaling: compiled value_and_grad per thread limit (TRACEGRAD_NUM_THREADS)",
            "",
            "| threads | repeat | load | elementwise_1M (us) | mlp_mnist_b4096 (us) |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['threads']} | {r['repeat']} | {_fmt(r['load'], 1)} | "
                f"{_fmt(r['elementwise_1M'])} | {_fmt(r['mlp_mnist_b4096'])} |"
            )
        for r in rows:
            if "elementwise_1M after torch+jax steps" in r:
                lines += [
                    "",
                    f"- {r['threads']} threads, repeat {r['repeat']}: elementwise_1M "
                    f"{_fmt(r['elementwise_1M after itself'])} us after itself, "
                    f"{_fmt(r['elementwise_1M after torch+jax steps'])} us right after a "
                    f"PyTorch and a JAX step (in company)",
                ]
                if "torch.compile elementwise_1M" in r:
                    lines.append(
                        f"- torch.compile elementwise_1M {_fmt(r['torch.compile elementwise_1M'])}"
                        f" us; tracegrad in the same process "
                        f"{_fmt(r.get('tracegrad elementwise_1M (same process as torch.compile)'))} us"
                    )
        lines.append("")
    if "crossover" in parts and "eager" in parts["crossover"]:
        c = parts["crossover"]
        ks = sorted({int(k) for row in c["eager"].values() for k in row})
        lines += [
            "## Crossover: k threads against one, per size (us)",
            "",
            "Eager ufunc split (tanh, float32), split forced at every size:",
            "",
            "| elements | " + " | ".join(f"{k} thr" for k in ks) + " |",
            "|---|" + "---|" * len(ks),
        ]
        for n, row in c["eager"].items():
            lines.append(
                f"| {int(n):,} | "
                + " | ".join(_fmt(row.get(str(k), row.get(k))) for k in ks)
                + " |"
            )
        lines += [
            "",
            f"(tracegrad splits from MIN_PARALLEL = {c['min_parallel']:,} elements, one "
            f"thread per GRAIN = {c['grain']:,} elements at most.)",
            "",
            "Compiled elementwise value_and_grad, serial variant (1) against the parallel "
            "variant on k Numba threads:",
            "",
            "| elements | " + " | ".join(f"{k} thr" for k in ks) + " |",
            "|---|" + "---|" * len(ks),
        ]
        for n, row in c["compiled"].items():
            lines.append(
                f"| {int(n):,} | "
                + " | ".join(_fmt(row.get(str(k), row.get(k))) for k in ks)
                + " |"
            )
        lines.append("")
    if info:
        lines += [
            "## Libraries",
            "",
            "- BLAS / OpenMP pools (threadpoolctl): "
            + (
                "; ".join(
                    f"{p.get('internal_api')} {p.get('version')} "
                    f"{p.get('architecture') or ''} {p.get('num_threads')} threads "
                    f"({os.path.basename(str(p.get('filepath')))})"
                    for p in info["pools"]
                )
                if isinstance(info["pools"], list)
                else info["pools"]
            ),
            "",
        ]
    with open(os.path.join(out, "threads.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(results, out)


def plot(results: dict, out: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    parts = results["parts"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    rows = [r for r in parts.get("scaling", []) if "elementwise_1M" in r]
    for name, marker in (("elementwise_1M", "o"), ("mlp_mnist_b4096", "s")):
        by = {}
        for r in rows:
            by.setdefault(r["threads"], []).append(r[name])
        if by:
            ks = sorted(by)
            axes[0].plot(ks, [np.median(by[k]) / 1e3 for k in ks], marker=marker, label=name)
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("TRACEGRAD_NUM_THREADS")
    axes[0].set_ylabel("ms per value_and_grad (median)")
    axes[0].set_title(f"scaling ({results['cpus']} CPUs here)")
    axes[0].legend()
    spin = [r for r in parts.get("spin", []) if "burnt_ms" in r and not r["torch_first"]]
    if spin:
        labels = [k for k in spin[0]["burnt_ms"] if k != "nothing (baseline)"]
        width = 0.38
        for i, policy in enumerate(dict.fromkeys(r["policy"] for r in spin)):
            vals = [
                np.median([r["burnt_ms"].get(k, np.nan) for r in spin if r["policy"] == policy])
                for k in labels
            ]
            axes[1].bar(np.arange(len(labels)) + i * width, vals, width, label=policy)
        axes[1].set_xticks(np.arange(len(labels)) + width / 2)
        axes[1].set_xticklabels(
            [k.replace(" elementwise_1M", "\nelementwise_1M") for k in labels], fontsize=7
        )
        axes[1].set_ylabel(f"CPU ms burnt in {int(IDLE * 1e3)} ms idle after a call")
        axes[1].set_title("busy-wait after a call (tracegrad loaded first)")
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "threads.png"), dpi=110)


if __name__ == "__main__":
    main()
