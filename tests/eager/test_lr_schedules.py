"""Issue 26's added learning-rate schedules (OneCycleLR, CosineAnnealingWarmRestarts,
ConstantLR, PolynomialLR, MultiplicativeLR, SequentialLR) give PyTorch's learning rates (and OneCycle's
momentum / beta1) step by step, with two parameter groups; by hand without torch."""

import math

import numpy as np
import pytest

import tracegrad.eager as tg

SCHEDULES = {
    "OneCycleLR cos": ("SGD", lambda S, o: S.OneCycleLR(o, max_lr=[0.5, 0.1], total_steps=12)),
    "OneCycleLR linear three_phase adam": (
        "Adam",
        lambda S, o: S.OneCycleLR(
            o, 0.3, epochs=3, steps_per_epoch=4, anneal_strategy="linear", three_phase=True
        ),
    ),
    "OneCycleLR no momentum": (
        "SGD",
        lambda S, o: S.OneCycleLR(o, 1.0, total_steps=12, pct_start=0.5, cycle_momentum=False),
    ),
    "CosineAnnealingWarmRestarts": (
        "SGD",
        lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
    ),
    "ConstantLR": ("SGD", lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=4)),
    "PolynomialLR": ("SGD", lambda S, o: S.PolynomialLR(o, total_iters=6, power=2.0)),
    "MultiplicativeLR": (
        "SGD",
        lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 1.0),
    ),
    "SequentialLR warmup cosine": (
        "Adam",
        lambda S, o: S.SequentialLR(
            o,
            [S.LinearLR(o, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(o, T_max=6)],
            milestones=[3],
        ),
    ),
    "SequentialLR three": (
        "SGD",
        lambda S, o: S.SequentialLR(
            o,
            [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, 0.9), S.StepLR(o, 2)],
            milestones=[2, 6],
        ),
    ),
}


def _run(L, case, steps=11):
    opt_name, make = SCHEDULES[case]
    a, b = L.zeros(2, requires_grad=True), L.zeros(3, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.2}]
    kw = {"momentum": 0.9} if opt_name == "SGD" else {}
    opt = getattr(L.optim, opt_name)(groups, lr=0.1, **kw)
    sched = make(L.optim.lr_scheduler, opt)
    rows = []
    for _ in range(steps):
        opt.step()
        sched.step()
        rows.append(
            [sched.get_last_lr()[i] for i in range(2)]
            + [g.get("momentum", g.get("betas", (0,))[0]) for g in opt.param_groups]
        )
    return np.array(rows)


@pytest.mark.parametrize("case", list(SCHEDULES))
def test_schedule_matches_pytorch(case):
    rt = pytest.importorskip("torch")
    np.testing.assert_allclose(_run(tg, case), _run(rt, case), rtol=1e-12, atol=1e-15)


def test_one_cycle_by_hand():
    w = tg.zeros(1, requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = tg.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.2)
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0 / 25)  # starts at max_lr / div
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(9):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[1] == pytest.approx(1.0)  # the peak at pct_start * total - 1 = step 1
    assert lrs[-1] == pytest.approx(1.0 / 25 / 1e4)  # the end: initial_lr / final_div
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        sched.step()
        sched.step()


def test_warm_restarts_by_hand():
    w = tg.zeros(1, requires_grad=True)
    opt = tg.optim.SGD([w], lr=1.0)
    sched = tg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    lrs = []
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([(1 + math.cos(math.pi / 2)) / 2, 1.0, 0.5, 1.0])
