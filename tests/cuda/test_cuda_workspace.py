"""The CUDA backend's temporaries share the CPU path's memory planning
(codegen/memory.py through cuda/plan.place_temporaries): one workspace per dtype, a
region reused once its buffer is dead. Values still equal the CPU path's. In Numba's
CUDA simulator, like every test here."""

import numpy as np

import tracegrad as tg
from tracegrad.codegen.cuda.plan import place_temporaries, unit_buffers


def chain(w, x):
    h = x
    for _ in range(6):
        h = tg.tanh(h @ w)
    return tg.sum(h * h)


def test_a_deep_chain_reuses_dead_temporaries_and_keeps_its_values():
    w = np.linspace(-0.4, 0.4, 64, dtype="float32").reshape(8, 8)
    x = np.linspace(-1.0, 1.0, 32, dtype="float32").reshape(4, 8)
    want = tg.value_and_grad(chain, argnums=(0, 1), backend="interpret")(w, x)
    f = tg.value_and_grad(chain, argnums=(0, 1))
    got = f(tg.device_put(w), tg.device_put(x))
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=2e-5)
    for g, v in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(np.asarray(g), v, rtol=2e-5, atol=1e-6)
    kernel = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda").lowered.kernel
    plan = kernel.plan
    sizes, where = place_temporaries(plan)
    returned = {lay.buf for lay in plan.outputs}
    temps = [n for n, b in plan.buffers.items() if b.kind == "temp" and n not in returned]
    no_reuse = sum(plan.buffers[n].size * 4 for n in temps)
    assert kernel.workspace_bytes == sizes["float32"] * 4
    assert kernel.workspace_bytes < no_reuse / 2  # (the forward's activations die early)
    # two temporaries share memory only if no unit needs both (their lives are disjoint)
    lives = {}
    for p, unit in enumerate(plan.units):
        for name in unit_buffers(unit) & set(where):
            lives.setdefault(name, [p, p])[1] = p
    for a in where:
        for b in where:
            if a < b and where[a][0] == where[b][0]:
                (_, oa), (_, ob) = where[a], where[b]
                overlap = oa < ob + plan.buffers[b].size and ob < oa + plan.buffers[a].size
                if overlap:
                    assert lives[a][1] < lives[b][0] or lives[b][1] < lives[a][0], (a, b)
