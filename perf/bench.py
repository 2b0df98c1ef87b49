"""Measuring: verify every system, then time them interleaved, round-robin.

One `Result` per workload x system. Systems are timed in rounds: each round
times one batch of calls per system, with the starting system rotating, so slow
drifts of the machine (thermal, other processes) hit every system alike. The
reported time is the median over rounds of the per-call time within a batch.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import signal
import statistics
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field

from perf import systems as sysmod
from perf.workloads import compare, make_workload, reference


@dataclass
class Settings:
    repeats: int = 15  # rounds
    batch_seconds: float = 0.04  # target wall time of one batch of calls
    max_calls: int = 20000  # cap on calls per batch
    warmup_calls: int = 2
    cooldown: float = 0.12  # idle seconds before each batch: lets the previous system's
    #                               spinning thread pools (OpenBLAS, OpenMP, XLA) go to sleep


QUICK = Settings(repeats=5, batch_seconds=0.01, warmup_calls=1, cooldown=0.02)
FULL = Settings()
# many workloads in one run (issue 14): fewer, shorter rounds; medians still stable to a few percent
BRISK = Settings(repeats=7, batch_seconds=0.02, warmup_calls=1, cooldown=0.05)

# Issue 14's verdict compares tracegrad compiled with the best of these (the frameworks people use).
FRAMEWORK_PEERS = ("torch_eager", "torch_compile", "jax")


@dataclass
class Result:
    workload: str
    dtype: str
    system: str
    status: str = "ok"  # ok | unavailable | mismatch | error
    detail: str = ""
    median: float | None = None  # seconds per value-and-grad call
    samples: list = field(default_factory=list)
    calls_per_batch: int = 0
    setup_time: float | None = None
    first_call: float | None = None  # seconds: first call after setup (trace + compile)
    peak_bytes: int | None = None
    memory_method: str = ""
    stages: dict = field(default_factory=dict)  # compile stage -> seconds (tracegrad compiled)
    ratio: float | None = None  # median / best peer's median
    ratio_library: float | None = None  # median / best autodiff library's (peers without NumPy)
    best: float | None = None  # fastest round (less sensitive to other processes' load)
    load: float | None = None  # mean 1-minute load average over the timing rounds
    ratio_frameworks: float | None = None  # median / best of FRAMEWORK_PEERS' medians
    best_framework: str = ""  # which of FRAMEWORK_PEERS was fastest
    flops: float | None = None  # the workload's estimated FLOPs per value-and-grad call
    description: str = ""  # the workload's one-line description


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ----------------------------------------------------------- stage-time capture
class StageCapture(logging.Handler):
    """Collects tracegrad's TRACEGRAD_LOG=1 records emitted during one call.

    Stage times are taken from record attributes `stage` + `seconds` (or `ms`)
    when the logger provides them, else parsed from messages like
    "trace: 12.3 ms" / "numba compile took 0.41 s".
    """

    PATTERN = re.compile(
        r"(?P<stage>trace|tracing|autodiff|ad|vjp|passes|pass|optimi[sz]e|codegen|numba|compile|"
        r"cache|load|import)\b[^0-9\n]*?(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|µs|us)\b",
        re.IGNORECASE,
    )
    CANON = {
        "tracing": "trace",
        "trace": "trace",
        "autodiff": "AD",
        "ad": "AD",
        "vjp": "AD",
        "passes": "passes",
        "pass": "passes",
        "optimize": "passes",
        "optimise": "passes",
        "fuse": "passes: fuse",
        "codegen": "codegen",
        "numba": "numba",
        "compile": "numba",
        "cache": "cache",
        "load": "cache",
        "import": "cache",
    }
    UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def _stages_one_per_record(self) -> dict:
        out: dict = {}
        for rec in self.records:
            stage, seconds = self._from_attrs(rec)
            if stage is None:
                stage, seconds = self._from_message(rec.getMessage())
            if stage is not None:
                out[stage] = out.get(stage, 0.0) + seconds
        return out

    @staticmethod
    def _from_attrs(rec):
        stage = getattr(rec, "stage", None)
        if stage is None:
            return None, None
        if hasattr(rec, "seconds"):
            return str(stage), float(rec.seconds)
        if hasattr(rec, "ms"):
            return str(stage), float(rec.ms) / 1e3
        return None, None

    def _from_message(self, msg):
        m = self.PATTERN.search(msg)
        if not m:
            return None, None
        return self.CANON.get(m["stage"].lower(), m["stage"]), float(m["num"]) * self.UNITS[
            m["unit"]
        ]

    def stages(self) -> dict:
        """Stage times from records; a summary line "f: trace 1.2 ms, autodiff 3.4 ms, ..." wins."""
        for rec in reversed(self.records):
            pairs = self.SUMMARY.findall(rec.getMessage())
            if len(pairs) >= 2:
                return {self.CANON.get(k.lower(), k): float(v) * self.UNITS[u] for k, v, u in pairs}
        return self._stages_one_per_record()

    SUMMARY = re.compile(r"(\w+) (\d+(?:\.\d+)?) (ms|s|us|µs)\b")

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self.records]


def capture_tracegrad_log():
    logger = logging.getLogger("tracegrad")
    handler = StageCapture()
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    return logger, handler


# ------------------------------------------------------------------- one system
def _short_error(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.split('/')[-1]}:{frames[-1].lineno}" if frames else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}{where}"[:300]


FIRST_CALL_LIMIT_S = 300  # a setup + first call slower than this is reported, not waited for


class FirstCallTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise FirstCallTimeout(f"setup + first call took over {FIRST_CALL_LIMIT_S} s")


def _arm_timeout(seconds: int) -> None:
    """SIGALRM guard (main thread, POSIX only); 0 disarms."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)


def _shorten(message: str, limit: int = 160) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    if "IR interpreter" in line:  # the kernel did not compile: these times are not Numba's
        return "warning: Numba kernel failed, ran on the IR interpreter (" + line[:limit] + ")"
    return "warning: " + line[:limit]


def prepare_and_verify(workload, key: str, ref) -> tuple[Result, object]:
    """Set up one system, run its first call (timed), and check it against the reference."""
    res = Result(workload.name, workload.dtype, key)
    system = sysmod.SYSTEMS[key]
    log_handler = None
    try:
        _arm_timeout(FIRST_CALL_LIMIT_S)
        if key == "tracegrad_compiled":
            logger, log_handler = capture_tracegrad_log()
        t0 = time.perf_counter()
        prepared = system.prepare(workload)
        res.setup_time = time.perf_counter() - t0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            out = prepared.call()
            res.first_call = time.perf_counter() - t0 + (res.setup_time if system.compiled else 0.0)
        value, grads = prepared.to_numpy(out)
        # e.g. "Numba could not compile the kernel ...; running it with the IR interpreter"
        res.detail = "; ".join(
            dict.fromkeys(
                _shorten(str(w.message))
                for w in caught
                if issubclass(w.category, RuntimeWarning) and key.startswith("tracegrad")
            )
        )
    except sysmod.Unavailable as exc:
        res.status, res.detail = "unavailable", str(exc)
        return res, None
    except Exception as exc:  # a system that crashes is reported, never timed
        res.status, res.detail = "error", _short_error(exc)
        return res, None
    finally:
        _arm_timeout(0)
        if log_handler is not None:
            logging.getLogger("tracegrad").removeHandler(log_handler)
            res.stages = log_handler.stages()
    if prepared.stages is not None:  # the structured API beats parsing log text
        try:
            res.stages = prepared.stages() or res.stages
        except Exception as exc:
            res.detail = f"stage times unavailable: {_short_error(exc)}"
    problem = compare(workload, value, grads, ref)
    if problem:
        res.status, res.detail = "mismatch", problem
        return res, None
    return res, prepared


def _time_batch(call, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t0) / n


def calibrate(prepared, settings: Settings) -> int:
    for _ in range(settings.warmup_calls):
        prepared.call()
    n = 1
    while True:
        per_call = _time_batch(prepared.call, n)
        if per_call * n >= settings.batch_seconds / 4 or n >= settings.max_calls:
            break
        n *= 4
    return max(1, min(settings.max_calls, int(settings.batch_seconds / max(per_call, 1e-9))))


def run_interleaved(ready: dict, results: dict, settings: Settings) -> None:
    """Round-robin timing of every verified system; fills median and samples."""
    keys = list(ready)
    for key in keys:
        if ready[key].settle is not None:
            ready[key].settle()
        results[key].calls_per_batch = calibrate(ready[key], settings)
    loads = []
    for r in range(settings.repeats):
        loads.append(load_average())
        order = keys[r % len(keys) :] + keys[: r % len(keys)] if keys else []
        for key in order:
            gc.collect()
            time.sleep(settings.cooldown)
            # One untimed call wakes this system's threads (and the idle vCPU they run on:
            # after the cooldown a thread-pool hand-off costs ~10 ms more on this VM), so
            # the timed batch is the steady state of a loop, for every system alike.
            ready[key].call()
            results[key].samples.append(_time_batch(ready[key].call, results[key].calls_per_batch))
    loads = [x for x in loads if x is not None]
    for key in keys:
        results[key].median = statistics.median(results[key].samples)
        results[key].best = min(results[key].samples)
        results[key].load = statistics.mean(loads) if loads else None


def run_workload(
    name: str, dtype: str, keys: list[str], settings: Settings, log=print
) -> list[Result]:
    workload = make_workload(name, dtype)
    ref = reference(workload)
    results, ready = {}, {}
    for key in keys:
        res, prepared = prepare_and_verify(workload, key, ref)
        res.flops = workload.extra.get("flops")
        res.description = workload.description
        results[key] = res
        note = f"first call {res.first_call:.3f}s" if res.first_call is not None else res.detail
        log(f"  {workload.label:28s} {key:20s} {res.status:11s} {note}")
        if prepared is not None:
            ready[key] = prepared
    gc.collect()
    gc.freeze()  # the libraries' millions of objects would make every gc.collect() slow
    t0 = time.perf_counter()
    run_interleaved(ready, results, settings)
    t1 = time.perf_counter()
    for key, prepared in ready.items():
        results[key].peak_bytes, results[key].memory_method = sysmod.measure_peak_memory(prepared)
    log(
        f"  {workload.label:28s} timed in {t1 - t0:.1f} s, memory measured in {time.perf_counter() - t1:.1f} s"
    )
    peers = {k: r.median for k, r in results.items() if r.median and sysmod.SYSTEMS[k].is_peer}
    best = min(peers.values()) if peers else None
    libraries = [t for k, t in peers.items() if k != "numpy"]
    best_library = min(libraries) if libraries else None
    frameworks = {
        k: results[k].median for k in FRAMEWORK_PEERS if k in results and results[k].median
    }
    best_framework = min(frameworks, key=frameworks.get) if frameworks else ""
    for res in results.values():
        if res.median and best_framework:
            res.ratio_frameworks = res.median / frameworks[best_framework]
            res.best_framework = best_framework
        if res.median and best:
            res.ratio = res.median / best
        if res.median and best_library:
            res.ratio_library = res.median / best_library
    ready.clear()
    gc.collect()
    return list(results.values())


# --------------------------------------------------------------- size sweeps
SWEEPS = {
    "elementwise chain": (
        "elementwise",
        [{"n": n} for n in (100, 1_000, 10_000, 100_000, 1_000_000)],
        lambda s: s["n"],
    ),
    "MLP (batch = width/2)": (
        "mlp",
        [{"batch": b, "sizes": (2 * b, 2 * b, 2 * b, 10)} for b in (4, 16, 64, 128, 256)],
        lambda s: s["batch"],
    ),
}


def run_sweeps(dtype: str, settings: Settings, quick: bool, log=print) -> dict:
    """Speedup of tracegrad compiled over tracegrad eager against problem size."""
    out = {}
    pairs = [("tracegrad_eager", "tracegrad_compiled"), ("torch_eager", "torch_compile")]
    if quick:
        pairs = pairs[:1]
    for title, (builder, sizes, xval) in SWEEPS.items():
        if quick:
            sizes = sizes[1::3]  # two sizes: a small and a large problem
        rows = []
        for size in sizes:
            workload = make_workload(builder, dtype, **size)
            ref = reference(workload)
            results, ready = {}, {}
            for pair in pairs:
                for key in pair:
                    res, prepared = prepare_and_verify(workload, key, ref)
                    results[key] = res
                    if prepared is not None:
                        ready[key] = prepared
            gc.collect()
            gc.freeze()
            run_interleaved(ready, results, settings)
            row = {"size": xval(size), "label": workload.name}
            for eager, compiled in pairs:
                e, c = results[eager], results[compiled]
                row[eager] = e.median
                row[compiled] = c.median
                row[f"{compiled}_first"] = c.first_call
                row[f"{compiled}_status"] = c.status if c.status != "ok" else ""
                row[f"{eager}_status"] = e.status if e.status != "ok" else ""
            log(
                f"  sweep {workload.name:28s} "
                + " ".join(
                    f"{k}={v * 1e6:.1f}us"
                    for k, v in row.items()
                    if isinstance(v, float) and "first" not in k
                )
            )
            rows.append(row)
        out[title] = {"pairs": pairs, "rows": rows}
    return out
