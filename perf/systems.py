"""The systems under test: how each one turns a Workload into a value-and-grad call.

`SYSTEMS[key].prepare(workload)` returns a `Prepared` whose `call()` runs one
value-and-gradient evaluation (the thing we time) and whose `to_numpy(result)`
turns that call's result into `(value, [grads])` for checking against the
NumPy reference. A system whose library is missing raises `Unavailable` with
the reason, and the report lists it as such.

Memory is measured per system with the most honest method available:
  - tracemalloc for everything whose buffers come from numpy or Numba's runtime
    (both go through Python's traced allocators);
  - torch's profiler (allocator events, peak of the running sum) for torch;
  - XLA's compiled memory analysis (temp + output buffers) for jax.
"""

from __future__ import annotations

import gc
import importlib
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


class Unavailable(Exception):
    """The system cannot run here (library missing, or a feature not built yet)."""


@dataclass
class Prepared:
    call: Callable[[], Any]
    to_numpy: Callable[[Any], tuple]
    memory_method: str = "tracemalloc"
    peak_memory: Callable[[], int] | None = None  # overrides the method's default measurement
    stages: Callable[[], dict] | None = None  # compile-stage seconds of the first call
    settle: Callable[[], None] | None = None  # wait for background work before timing


@dataclass
class System:
    key: str
    label: str
    is_peer: bool
    prepare: Callable
    compiled: bool = False


def _require(module: str):
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install
        raise Unavailable(f"{module} not importable: {type(exc).__name__}: {exc}") from None


def _np(x) -> np.ndarray:
    return np.asarray(x)


# ------------------------------------------------------------------- tracegrad
def prepare_tracegrad_eager(w) -> Prepared:
    _require("tracegrad")
    tge = _require("tracegrad.eager")
    for attr in ("tensor", "from_numpy"):
        if not hasattr(tge, attr):
            raise Unavailable(f"tracegrad.eager.{attr} not implemented yet")
    leaves = [tge.tensor(p.copy(), requires_grad=True) for p in w.params]
    if w.eager_fn is not None:  # PyTorch's spelling (F.relu, F.cross_entropy), as a user writes it
        fn, raw = w.eager_fn, (w.torch_data(w.data) if w.torch_data else w.data)
    else:
        fn, raw = w.tracegrad_fn, w.data
    data = [tge.from_numpy(np.array(d, copy=True)) for d in raw]

    def call():
        for p in leaves:
            p.grad = None
        loss = fn(*leaves, *data)
        loss.backward()
        return loss, [p.grad for p in leaves]

    def to_numpy(result):
        loss, grads = result
        return loss.item(), [g.numpy() for g in grads]

    return Prepared(call, to_numpy)


def prepare_tracegrad_compiled(w) -> Prepared:
    tg = _require("tracegrad")
    try:
        value_and_grad = tg.value_and_grad
    except (AttributeError, ImportError) as exc:
        raise Unavailable(f"tracegrad.value_and_grad not available: {exc}") from None
    n = len(w.params)
    vg = value_and_grad(w.tracegrad_fn, argnums=tuple(range(n)))
    args = [p.copy() for p in w.params] + [d.copy() for d in w.data]

    def call():
        return vg(*args)

    def to_numpy(result):
        value, grads = result
        return _np(value), [_np(g) for g in grads]

    def stages() -> dict:
        # tracegrad's Lowered records stage times; its kernel splits codegen further
        lowered = vg.lower(*args)
        out = dict(lowered.timings or {})
        kernel_times = getattr(lowered.kernel, "timings", None) or {}
        total_key = next((k for k in out if k.startswith("codegen")), None)
        if kernel_times and total_key:
            total = out.pop(total_key)
            out.update(kernel_times)
            out["codegen other"] = max(0.0, total - sum(kernel_times.values()))
        return {STAGE_NAMES.get(k, k): v for k, v in out.items()}

    def settle() -> None:
        # Big loops get a prange variant compiled in a background thread after the first
        # call (which returns at once with the serial kernel); time the steady state.
        kernel = vg.lower(*args).kernel
        if hasattr(kernel, "wait_parallel"):
            kernel.wait_parallel(timeout=120)

    return Prepared(call, to_numpy, stages=stages, settle=settle)


STAGE_NAMES = {
    "autodiff": "AD",
    "fuse": "passes: fuse",
    "passes": "passes",
    "codegen": "codegen (emit source)",
    "import_numba": "import numba",
    "load_compile": "numba compile / cache load",
}


# ----------------------------------------------------------------------- numpy
def prepare_numpy(w) -> Prepared:
    params = [p.copy() for p in w.params]
    data = [d.copy() for d in w.data]
    fn = w.numpy_value_and_grad
    return Prepared(lambda: fn(params, data), lambda r: (_np(r[0]), [_np(g) for g in r[1]]))


# ----------------------------------------------------------------------- torch
def _torch_setup(w):
    torch = _require("torch")
    leaves = [torch.from_numpy(p.copy()).requires_grad_() for p in w.params]
    raw = w.torch_data(w.data) if w.torch_data else w.data
    data = [torch.from_numpy(np.ascontiguousarray(d)) for d in raw]
    return torch, leaves, data


def _torch_peak_memory(torch, call) -> Callable[[], int]:
    """Peak of the running sum of allocator events during one call (torch profiler)."""

    def measure() -> int:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = call()
            del result
        events = sorted(
            (e for e in prof.events() if e.cpu_memory_usage), key=lambda e: e.time_range.start
        )
        running = peak = 0
        for e in events:
            running += e.cpu_memory_usage
            peak = max(peak, running)
        return peak

    return measure


def prepare_torch_eager(w) -> Prepared:
    torch, leaves, data = _torch_setup(w)
    fn = w.torch_fn

    def call():
        for p in leaves:
            p.grad = None
        loss = fn(*leaves, *data)
        loss.backward()
        return loss, [p.grad for p in leaves]

    return Prepared(
        call,
        lambda r: (r[0].item(), [g.numpy() for g in r[1]]),
        memory_method="torch profiler",
        peak_memory=_torch_peak_memory(torch, call),
    )


def prepare_torch_compile(w) -> Prepared:
    torch, leaves, data = _torch_setup(w)
    # dynamo caches per code object: without a reset, a workload would reuse (or turn dynamic)
    # the graphs of an earlier workload built from the same function, hiding its compile time
    torch._dynamo.reset()
    compiled = torch.compile(w.torch_compile_fn or w.torch_fn)

    def call():
        loss = compiled(*leaves, *data)
        grads = torch.autograd.grad(loss, leaves)
        return loss, grads

    return Prepared(
        call,
        lambda r: (r[0].item(), [g.numpy() for g in r[1]]),
        memory_method="torch profiler",
        peak_memory=_torch_peak_memory(torch, call),
    )


# ------------------------------------------------------------------------- jax
def prepare_jax(w) -> Prepared:
    jax = _require("jax")
    jax.config.update("jax_enable_x64", True)  # float64 workloads; explicit f32 arrays stay f32
    n = len(w.params)
    raw = w.peer_data(w.data) if w.peer_data else w.data
    args = [jax.device_put(p) for p in w.params] + [jax.device_put(d) for d in raw]
    vg = jax.jit(jax.value_and_grad(w.jax_fn, argnums=tuple(range(n))))

    def call():
        return jax.block_until_ready(vg(*args))

    def peak_memory() -> int:
        analysis = vg.lower(*args).compile().memory_analysis()
        return int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)

    return Prepared(
        call,
        lambda r: (_np(r[0]), [_np(g) for g in r[1]]),
        memory_method="XLA memory_analysis (temp+output)",
        peak_memory=peak_memory,
    )


# -------------------------------------------------------------------- autograd
def prepare_autograd(w) -> Prepared:
    autograd = _require("autograd")
    params = [p.copy() for p in w.params]
    raw = w.peer_data(w.data) if w.peer_data else w.data
    data = [d.copy() for d in raw]
    fn = w.autograd_fn
    vg = autograd.value_and_grad(lambda ps: fn(ps, *data))
    return Prepared(lambda: vg(params), lambda r: (_np(r[0]), [_np(g) for g in r[1]]))


SYSTEMS: dict[str, System] = {
    s.key: s
    for s in [
        System("tracegrad_eager", "tracegrad eager", False, prepare_tracegrad_eager),
        System(
            "tracegrad_compiled",
            "tracegrad compiled",
            False,
            prepare_tracegrad_compiled,
            compiled=True,
        ),
        System("numpy", "NumPy by hand", True, prepare_numpy),
        System("torch_eager", "PyTorch eager", True, prepare_torch_eager),
        System("torch_compile", "torch.compile", True, prepare_torch_compile, compiled=True),
        System("jax", "jax.jit", True, prepare_jax, compiled=True),
        System("autograd", "HIPS autograd", True, prepare_autograd),
    ]
}


def tracemalloc_peak(call: Callable[[], Any]) -> int:
    """Bytes allocated at peak during one call, above what was live before it."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = call()
        peak = tracemalloc.get_traced_memory()[1]
        del result
    finally:
        if started:
            tracemalloc.stop()
    return max(0, peak - base)


def measure_peak_memory(prepared: Prepared) -> tuple[int | None, str]:
    try:
        if prepared.peak_memory is not None:
            return prepared.peak_memory(), prepared.memory_method
        return tracemalloc_peak(prepared.call), "tracemalloc"
    except Exception as exc:  # memory is a side measurement: report, don't die
        return None, f"{prepared.memory_method} failed: {type(exc).__name__}: {exc}"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out
