"""Deep graphs: repeated loops are shared (outlined) and repeated statement
runs are folded back into loops (reroll), and the results stay exact."""

from __future__ import annotations

from codegen_helpers import GraphMaker, assert_matches_interpreter

from tracegrad.codegen import build_kernel
from tracegrad.codegen.reroll import reroll


def tanh_chain(depth, width=8, batch=4, dtype="float64"):
    gm = GraphMaker("tanh_chain")
    h = gm.input((batch, width), dtype, "h")
    ws = [gm.input((width, width), dtype, f"w{i}") for i in range(depth)]
    outs = []
    for w in ws:
        h = gm.op("tanh", gm.op("matmul", h, w))
        outs.append(gm.op("sum", gm.op("mul", h, h), axis=0, keepdims=False))
    return gm.output(gm.op("sum", h, axis=None, keepdims=False), *outs)


def test_deep_chain_is_outlined_and_rolled(rng):
    graph = tanh_chain(12)
    kernel = build_kernel(graph)
    src = kernel.source
    assert "_loop" in src and "tg_noinline(" in src  # one shared loop function
    assert "folded into a loop" in src and "for rep in range(" in src
    arrays = [rng.standard_normal(n.shape) * 0.5 for n in graph.inputs]
    assert_matches_interpreter(kernel, graph, arrays, "float64")


def test_reroll_folds_only_identical_call_runs():
    lines = [f"    f(ws_f, {10 * i}, w{i}_f)" for i in range(8)] + [
        "    x = 1",
        "    f(ws_f, 0, w0_f)",
    ]
    out, tables = reroll(lines, lambda name: "types.float64[::1]")
    assert any(line.strip().startswith("for rep in range(8)") for line in out)
    assert tables == ["_R0 = np.array([0, 10, 20, 30, 40, 50, 60, 70], np.int64)"]
    assert "    x = 1" in out and out[-1] == "    f(ws_f, 0, w0_f)"
    # too short a run stays as it is
    short = [f"    f(ws_f, {i})" for i in range(5)]
    assert reroll(short, lambda name: "t")[0] == short
