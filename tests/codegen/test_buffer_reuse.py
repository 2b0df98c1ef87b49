"""Workspace reuse (issue 14): liveness-based placement of a kernel's temporaries.

A wrong reuse is a silently wrong gradient, so the compiled checks run with
TRACEGRAD_POISON_FREED=1: a region is filled with NaN the moment its value is
dead, and a kernel that still reads it returns NaN or a wrong number, which the
comparison with the IR interpreter catches. The default run compiles ONE
function (module-level, shared); the allocator and the memory report are
checked without Numba; the perf workloads run under `-m slow`.
"""

from __future__ import annotations

import functools
import os
import random
import re

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen.memory import (
    MemoryReport,
    Placement,
    PlanMismatch,
    Workspace,
    check_disjoint,
    lifetimes,
    plan_offline,
)
from tracegrad.ir.interpret import interpret
from tracegrad.ops import table as T
from tracegrad.ops.core import bind

WS_LINE = r"^\s*(ws_\w+) = np\.empty\((\d+), np\.(\w+)\)"


# ------------------------------------------------------------- the allocator


def test_best_fit_splits_a_dead_region_for_smaller_values():
    ws = Workspace("ws_float64", "float64")  # 8 elements per 64 bytes
    a = ws.take(80)
    b = ws.take(8)
    ws.give_back(a, 80)
    c, d = ws.take(40), ws.take(24)  # two pieces of a's region
    assert (c, d) == (a, a + 40)
    assert ws.size == 88  # nothing new was needed
    assert ws.peak_live == 88 and ws.live == 72
    check_disjoint(
        [
            ("take", "w", a, 80),
            ("take", "w", b, 8),
            ("give_back", "w", a, 80),
            ("take", "w", c, 40),
            ("take", "w", d, 24),
        ]
    )


def test_best_fit_prefers_the_smallest_block_that_fits():
    ws = Workspace("ws_float64", "float64")
    big = ws.take(64)
    ws.take(8)  # stays live: no merging
    small = ws.take(16)
    ws.take(8)
    ws.give_back(big, 64)
    ws.give_back(small, 16)
    assert ws.take(16) == small  # not a piece of the big block
    assert ws.take(64) == big


def test_neighbouring_dead_regions_merge_into_one_block():
    ws = Workspace("ws_float64", "float64")
    regions = [ws.take(8) for _ in range(4)]
    for r in regions[1:3]:
        ws.give_back(r, 8)
    assert ws.take(16) == regions[1]  # two 8-element blocks, merged
    assert ws.size == 32


def test_growth_starts_at_a_free_block_on_the_end():
    ws = Workspace("ws_float32", "float32")  # 16 elements per 64 bytes
    ws.take(16)
    b = ws.take(16)
    ws.give_back(b, 16)
    assert ws.take(48) == b  # extends the dead tail in place
    assert ws.size == 64


def test_a_region_given_back_twice_is_an_error():
    ws = Workspace("ws_float64", "float64")
    a = ws.take(8)
    ws.give_back(a, 8)
    with pytest.raises(RuntimeError, match="given back twice"):
        ws.give_back(a, 8)


def test_check_disjoint_finds_an_overlap_of_live_regions():
    with pytest.raises(RuntimeError, match="overlaps live region 0\\+10"):
        check_disjoint([("take", "ws", 0, 10), ("take", "ws", 8, 4)])
    check_disjoint([("take", "ws", 0, 10), ("give_back", "ws", 0, 10), ("take", "ws", 8, 4)])
    check_disjoint([("take", "ws", 0, 10), ("take", "other", 8, 4)])  # other workspace


def _random_allocations(rng: random.Random, steps: int):
    """Random takes and give-backs of mixed sizes, as (kind, key, elements)."""
    live, program = [], []
    for k in range(steps):
        if live and rng.random() < 0.45:
            key, n = live.pop(rng.randrange(len(live)))
            program.append(("give_back", key, n))
        else:
            n = rng.choice([0, 1, 3, 8, 17, 64, 100, 256, 1000])
            live.append((k, n))
            program.append(("take", k, n))
    return program


@pytest.mark.parametrize("seed", range(5))
def test_random_programs_never_overlap_and_reach_at_least_the_peak(seed):
    rng = random.Random(seed)
    ws = Workspace("ws_float64", "float64")
    offsets, events, live, peak = {}, [], 0, 0
    for kind, key, n in _random_allocations(rng, 400):
        if kind == "take":
            offsets[key] = ws.take(n)
            live += n
            peak = max(peak, live)
        else:
            ws.give_back(offsets[key], n)
            live -= n
        events.append((kind, "ws", offsets[key], n))
        assert 0 <= offsets[key] and offsets[key] + n <= ws.size
    check_disjoint(events)
    assert ws.peak_live == peak <= ws.size

    # the offline plan of the same lifetimes is disjoint too, and no bigger than needed
    plan = plan_offline(events, {"ws": np.dtype("float64")})["ws"]
    replay, taken = [], {}
    for kind, _, offset, n in events:
        if kind == "take":
            taken[offset, n] = taken.get((offset, n), []) + [plan.next("ws", n)]
            replay.append(("take", "ws", taken[offset, n][-1], n))
        else:
            replay.append(("give_back", "ws", taken[offset, n].pop(), n))
    check_disjoint(replay)
    assert peak <= plan.size


def test_offline_plan_does_not_strand_space_behind_a_long_lived_value():
    # small values die, a long-lived one is placed above them, then a big value
    # arrives: placed in program order it cannot use the small ones' space
    events = [
        ("take", "w", 0, 16),
        ("take", "w", 16, 16),
        ("take", "w", 32, 8),
        ("give_back", "w", 0, 16),
        ("give_back", "w", 16, 16),
        ("take", "w", 40, 40),
        ("give_back", "w", 32, 8),
        ("give_back", "w", 40, 40),
    ]
    ws = Workspace("w", "float64")
    a, b = ws.take(16), ws.take(16)
    ws.take(8)
    ws.give_back(a, 16)
    ws.give_back(b, 16)
    ws.take(40)
    assert ws.size == 80  # online: the big value goes above c
    plan = plan_offline(events, {"w": np.dtype("float64")})["w"]
    assert plan.size == 48  # the peak: big value + c
    assert [r[0] for r in lifetimes(events)["w"]] == [16, 16, 8, 40]


def test_a_plan_that_does_not_match_the_emission_is_refused():
    plan = Placement(8, [(0, 8)])
    assert plan.next("ws", 8) == 0
    with pytest.raises(PlanMismatch):
        plan.next("ws", 8)


# ------------------------------------------- the memory report (no Numba)


def _layers(w, x, depth):
    h = x
    for _ in range(depth):
        h = tg.tanh(h @ w) * 0.5 + h
    return tg.sum(h * h)


def _memory(fn, *args) -> MemoryReport:
    f = tg.value_and_grad(fn, argnums=tuple(range(len(args) - 1)), backend="interpret")
    return f.lower(*args).memory


def test_a_deep_chain_reuses_its_workspace():
    w, x = np.ones((32, 32)), np.ones((16, 32))
    shallow = _memory(lambda w, x: _layers(w, x, 3), w, x)
    deep = _memory(lambda w, x: _layers(w, x, 12), w, x)
    assert deep.no_reuse_bytes > 3 * shallow.no_reuse_bytes
    # reverse mode keeps each layer's activations, so the peak grows, but the
    # workspace stays close to it instead of growing with every temporary
    assert deep.peak_live_bytes <= deep.total_workspace_bytes <= 1.1 * deep.peak_live_bytes + 1024
    assert deep.total_workspace_bytes < 0.6 * deep.no_reuse_bytes


@pytest.mark.parametrize("name", ["attention_4h_t64", "lstm_scan_t20", "conv2d_b8_32px"])
def test_perf_workloads_need_no_more_than_their_peak_of_live_bytes(name):
    """Where reuse by exact size fell short (perf/buffer_reuse.md: attention_4h_t64
    needed 1.55x its peak, the LSTM's backward body 1.62x, conv2d 1.01x), every
    kernel now fits its peak of live bytes, up to the 64-byte alignment."""
    from perf.workloads import make_workload

    w = make_workload(name, "float32")
    f = tg.value_and_grad(w.tracegrad_fn, argnums=tuple(range(len(w.params))), backend="interpret")
    mem = f.lower(*w.params, *w.data).memory
    kernels = [mem, *mem.loops]
    assert any(m.no_reuse_bytes for m in kernels)
    for m in kernels:
        assert (
            m.peak_live_bytes <= m.total_workspace_bytes <= m.peak_live_bytes + 64 * m.temporaries
        )


def test_report_fields_are_consistent_with_the_generated_source():
    from tracegrad.codegen import _generate

    f = tg.value_and_grad(_mixed, argnums=(0, 1, 2), backend="interpret")
    lowered = f.lower(*_mixed_args())
    mem = lowered.memory
    source = _generate(lowered.optimized, "kernel_check").source
    in_source: dict[str, int] = {}
    for _, n, dtype in re.findall(WS_LINE, source, re.MULTILINE):
        in_source[dtype] = in_source.get(dtype, 0) + int(n) * np.dtype(dtype).itemsize
    top = mem  # the top-level kernel's workspaces: the scan body is reported apart
    assert top.workspace_bytes == in_source
    assert set(top.workspace_bytes) >= {"float64", "bool"}  # mixed dtypes
    assert top.peak_live_bytes <= top.total_workspace_bytes <= top.no_reuse_bytes
    assert top.temporaries >= 10
    assert top.output_bytes == sum(
        np.dtype(o.dtype).itemsize * o.size for o in lowered.optimized.outputs
    )
    assert len(top.loops) == sum(n.op == "scan" for n in lowered.optimized.nodes) >= 1
    assert all(body.total_workspace_bytes <= body.no_reuse_bytes for body in top.loops)
    assert "workspace" in repr(lowered) and "peak live" in repr(lowered)


# ----------------------------- one compiled kernel, poisoned, vs the interpreter


def _mixed(w1, b1, w2, x, labels):
    """Many temporaries of mixed sizes and dtypes: GEMMs (one accumulating onto
    the broadcast bias, as nn.Linear's addmm), broadcasting, a bool
    mask, reductions over either axis, a transposed view read late, a float32
    branch, log_softmax, and a scan with enough work around it that the kernel
    is cut into Numba segments around the loop."""
    h = tg.tanh(bind(T.addmm, b1, x, w1))  # (64, 128): bias, then GEMM with beta=1
    g = tg.where(h > 0, h, 0.5 * h)  # bool temporary
    col = tg.sum(g, axis=0)  # (128,)
    row = tg.max(g, axis=1, keepdims=True)  # (64, 1)
    z = g - row + col * 1e-3  # broadcasting both ways
    zt = tg.transpose(z)  # view of z
    c = tg.cumsum(zt, axis=1)  # copies the view
    narrow = tg.astype(tg.astype(z, "float32") * 2.0, "float64")
    carry, ys = tg.scan(
        lambda cy, xt: (tg.tanh(cy @ w2 + xt), tg.sum(cy * cy, axis=1)),
        z[:8],
        tg.reshape(narrow, (8, 8, 128)),
    )
    logp = tg.log_softmax(carry @ w2.T, axis=1)  # (8, 128)
    pick = tg.take_along_axis(logp, labels[:, None], axis=1)
    return tg.mean(c * zt) + tg.sum(ys) * 1e-2 - tg.mean(pick) + tg.sum(tg.exp(-tg.abs(zt[:, :4])))


def _mixed_args():
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((32, 128)) * 0.3,
        rng.standard_normal(128) * 0.1,
        rng.standard_normal((128, 128)) * 0.1,
        rng.standard_normal((64, 32)),
        rng.integers(0, 128, 8),
    )


@functools.cache
def _poisoned(fn):
    """(optimized graph, kernel built with dead regions poisoned, args)."""
    from tracegrad.codegen import build_kernel

    args = _mixed_args()
    f = tg.value_and_grad(fn, argnums=(0, 1, 2), backend="interpret")
    graph = f.lower(*args).optimized
    old = os.environ.get("TRACEGRAD_POISON_FREED")
    os.environ["TRACEGRAD_POISON_FREED"] = "1"
    try:
        kernel = build_kernel(graph)
    finally:
        if old is None:
            del os.environ["TRACEGRAD_POISON_FREED"]
        else:
            os.environ["TRACEGRAD_POISON_FREED"] = old
    return graph, kernel, args


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.numba_pass
def test_compiled_kernel_with_poisoned_dead_regions_equals_the_interpreter():
    graph, kernel, args = _poisoned(_mixed)
    assert "poisoned: dead from here on" in kernel.source  # the check is armed
    assert re.search(r"tg_gemm\(.*, 1\.0, ws_float64", kernel.source)  # beta=1 into a temporary
    assert len(set(re.findall(r"def (kernel_\w+_s\d+)\(", kernel.source))) >= 2  # segments
    _assert_same(kernel(*args), interpret(graph, *args))


def test_compiled_gradient_matches_the_unoptimized_graph_and_finite_differences():
    _, kernel, args = _poisoned(_mixed)
    _, *grads = kernel(*args)
    joint = tg.value_and_grad(_mixed, argnums=(0, 1, 2), backend="interpret").lower(*args).joint
    _assert_same(kernel(*args), interpret(joint, *args))  # before passes and fusion
    rng = np.random.default_rng(1)
    for k, g in enumerate(grads):
        d = rng.standard_normal(args[k].shape)
        # loose: the float32 branch rounds at ~1e-7 relative, and max/abs/where
        # have kinks (the tight checks are the two interpreter comparisons above)
        eps = 1e-4
        plus = list(args)
        minus = list(args)
        plus[k] = args[k] + eps * d
        minus[k] = args[k] - eps * d
        fd = (_mixed(*plus) - _mixed(*minus)) / (2 * eps)
        np.testing.assert_allclose(np.sum(g * d), fd, rtol=1e-3, atol=1e-6)


# ------------------------------------------------------------------ slow runs

SMALL_WORKLOADS = [
    "mlp_small_b16",
    "mlp_layernorm_b64",
    "attention_1h_t64",
    "attention_4h_t64",
    "lstm_scan_t20",
    "rnn_scan_t100",
    "conv2d_b8_32px",
    "softmax_reg_n256",
]
# full size: the LSTM's backward body copies a GEMM operand into a scratch region
FULL_WORKLOADS = ["lstm_scan_t20", "mlp_mnist_b128"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,full", [(n, False) for n in SMALL_WORKLOADS] + [(n, True) for n in FULL_WORKLOADS]
)
def test_workloads_poisoned_equal_the_interpreter(name, full, monkeypatch):
    from perf.workloads import make_small_workload, make_workload
    from tracegrad.codegen import build_kernel

    w = (make_workload if full else make_small_workload)(name, "float64")
    args = [np.ascontiguousarray(a) for a in list(w.params) + list(w.data)]
    f = tg.value_and_grad(w.tracegrad_fn, argnums=tuple(range(len(w.params))), backend="interpret")
    graph = f.lower(*args).optimized
    monkeypatch.setenv("TRACEGRAD_POISON_FREED", "1")
    kernel = build_kernel(graph)
    _assert_same(kernel(*args), interpret(graph, *args))


@pytest.mark.slow
def test_poisoning_catches_a_lifetime_that_ends_too_early(monkeypatch):
    """The check can fail: end every value's lifetime one unit early and the
    poisoned kernel's results differ from the interpreter's."""
    from tracegrad.codegen import build_kernel
    from tracegrad.codegen import generate as gen_module

    real = gen_module.storage_lifetimes

    def too_short(graph, groups, units):
        return {root: p - 1 for root, p in real(graph, groups, units).items()}

    monkeypatch.setattr(gen_module, "storage_lifetimes", too_short)
    monkeypatch.setenv("TRACEGRAD_POISON_FREED", "1")
    args = _mixed_args()
    f = tg.value_and_grad(lambda w, x: _layers(w, x, 4), argnums=(0,), backend="interpret")
    graph = f.lower(args[2], np.ones((16, 128))).optimized
    kernel = build_kernel(graph)
    got = kernel(args[2], np.ones((16, 128)))
    want = interpret(graph, args[2], np.ones((16, 128)))
    assert any(not np.allclose(g, w, equal_nan=False) for g, w in zip(got, want, strict=True))


def test_scratch_regions_are_placed_recorded_and_reused():
    from tracegrad.codegen.emit import Emitter

    g = tg.trace(lambda x: x * 2.0, np.ones(4))
    em = Emitter(g, "k")
    region = em.scratch("float64", 100)
    other = em.scratch("float64", 8)
    assert region[1] + 100 <= other[1] or other[1] + 8 <= region[1]  # both live: disjoint
    em.release_scratch(region)
    again = em.scratch("float64", 50)
    assert again[1] == region[1]  # the dead one, reused
    assert [e[0] for e in em.region_events] == ["take", "take", "give_back", "take"]
    report = em.memory_report()
    assert report.peak_live_bytes == 108 * 8 and report.no_reuse_bytes == 158 * 8


def test_a_wrong_plan_falls_back_to_the_placement_made_while_emitting(monkeypatch, caplog):
    """generate's second pass refuses offsets planned for other regions (PlanMismatch)
    and keeps the first pass's module, which check_disjoint has verified."""
    from tracegrad.codegen import _generate
    from tracegrad.codegen.emit import Emitter

    f = tg.value_and_grad(lambda w, x: _layers(w, x, 2), argnums=(0,), backend="interpret")
    graph = f.lower(np.ones((32, 32)), np.ones((16, 32))).optimized
    plain = _generate(graph, "kernel_plan").source
    monkeypatch.setattr(
        Emitter,
        "better_placement",
        lambda self: (
            None
            if self.plan is not None
            else {name: Placement(8, [(0, 1)]) for name in self.workspaces}
        ),
    )
    with caplog.at_level("WARNING", logger="tracegrad"):
        emitted = _generate(graph, "kernel_plan")
    assert "planned placement not used" in caplog.text
    assert emitted.source == plain


def _random_value_and_grad_program(seed: int):
    """A random value-and-grad program over values of mixed shapes (all broadcastable
    to one base shape): elementwise ops, broadcasting binaries, keepdims reductions,
    transposed views, softmax; the loss sums every value, so all stay live a while."""
    rng = random.Random(seed)
    base = (rng.choice([4, 16, 33]), rng.choice([8, 24]), rng.choice([1, 5, 12]))
    shapes = [tuple(d if rng.random() < 0.7 else 1 for d in base) for _ in range(3)]
    unary = [
        tg.tanh,
        tg.sin,
        lambda v: v * v,
        lambda v: tg.exp(tg.tanh(v)),
        lambda v: tg.softmax(v, axis=-1),
    ]
    binary = [
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: a - b * 0.5,
        lambda a, b: tg.where(a > 0, a, b),
    ]
    reduce = [tg.sum, tg.mean, tg.max]
    steps = []
    for _ in range(rng.randint(6, 14)):
        kind = rng.choice(["unary", "binary", "binary", "reduce", "view"])
        steps.append((kind, rng.randrange(10**6), rng.randrange(10**6), rng.randrange(3)))

    def program(*xs):
        values = list(xs)
        for kind, i, j, axis in steps:
            a, b = values[i % len(values)], values[j % len(values)]
            if kind == "unary":
                values.append(unary[i % len(unary)](a))
            elif kind == "binary":
                values.append(binary[j % len(binary)](a, b))
            elif kind == "reduce":
                values.append(reduce[i % len(reduce)](a, axis=axis, keepdims=True))
            else:  # a transposed view, read by an elementwise op, transposed back
                values.append(tg.transpose(tg.tanh(tg.transpose(a, (2, 0, 1)) * 1.5), (1, 2, 0)))
        return sum(tg.sum(v * (0.5 + 0.1 * k)) for k, v in enumerate(values[len(xs) :]))

    np_rng = np.random.default_rng(seed)
    return program, [np_rng.uniform(-1.5, 1.5, s) for s in shapes]


@pytest.mark.slow
def test_random_programs_poisoned_equal_the_interpreter(monkeypatch):
    from tracegrad.codegen import build_kernel

    monkeypatch.setenv("TRACEGRAD_POISON_FREED", "1")
    reused = 0
    for seed in range(8):
        program, args = _random_value_and_grad_program(seed)
        f = tg.value_and_grad(program, argnums=(0, 1, 2), backend="interpret")
        lowered = f.lower(*args)
        kernel = build_kernel(lowered.optimized)
        _assert_same(kernel(*args), interpret(lowered.optimized, *args))
        reused += lowered.memory.total_workspace_bytes < lowered.memory.no_reuse_bytes
    assert reused >= 2  # the programs do exercise reuse (4 of the 8 today)
