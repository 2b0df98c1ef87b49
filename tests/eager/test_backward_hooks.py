"""Module.register_full_backward_hook / register_full_backward_pre_hook (issue 26) against
PyTorch: what the hooks see (grad_input per positional tensor argument, grad_output),
replacing grad_input / grad_output, the order of the calls, handles' remove(), modules
whose input needs no gradient, and a Grad-CAM-style capture of a conv layer's gradient."""

import numpy as np
import pytest

import tracegrad.eager as tg

R = np.random.default_rng(3)
X = R.standard_normal((2, 3))
STATE = {
    "0.weight": R.standard_normal((2, 3)),
    "0.bias": R.standard_normal(2),
    "2.weight": R.standard_normal((1, 2)),
    "2.bias": R.standard_normal(1),
}


def _trace(L, case):
    L.manual_seed(0)
    lin = L.nn.Linear(3, 2).double()
    seq = L.nn.Sequential(lin, L.nn.Tanh(), L.nn.Linear(2, 1).double())
    seq.load_state_dict({k: L.tensor(v) for k, v in STATE.items()})
    log = []

    def hook(m, gi, go):
        log.append(("full", type(m).__name__, [None if g is None else g.numpy().copy() for g in gi],
                    [g.numpy().copy() for g in go]))  # fmt: skip
        if case == "replace input":
            return (gi[0] * 2,)

    def pre(m, go):
        log.append(("pre", type(m).__name__, [g.numpy().copy() for g in go]))
        if case == "replace output":
            return (go[0] * 3,)

    h1 = lin.register_full_backward_hook(hook)
    h2 = lin.register_full_backward_pre_hook(pre)
    seq[2].register_full_backward_hook(hook)
    x = L.tensor(X, requires_grad=case != "no input grad")
    seq(x).sum().backward()
    out = [log, lin.weight.grad.numpy().copy(), None if x.grad is None else x.grad.numpy().copy()]
    h1.remove()
    h2.remove()
    lin.weight.grad = None
    seq(x).sum().backward()  # removed: not called again
    out.append(len(log))
    return out


def _same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    else:
        assert a == b


@pytest.mark.parametrize("case", ["plain", "replace input", "replace output", "no input grad"])
def test_backward_hooks_match_pytorch(case):
    rt = pytest.importorskip("torch")
    _same(_trace(tg, case), _trace(rt, case))


def test_grad_cam_style_capture():
    """Grad-CAM reads a conv layer's output gradient through a full backward hook."""
    tg.manual_seed(0)
    conv = tg.nn.Conv2d(1, 2, 3)
    model = tg.nn.Sequential(conv, tg.nn.ReLU(), tg.nn.Flatten(), tg.nn.Linear(2 * 4 * 4, 3))
    grads = {}

    def keep(m, grad_input, grad_output):
        grads["out"] = grad_output[0]

    conv.register_full_backward_hook(keep)
    x = tg.randn(1, 1, 6, 6, requires_grad=True)
    y = model(x)
    y[0, 1].backward()
    assert tuple(grads["out"].shape) == (1, 2, 4, 4)
    x2 = tg.randn(1, 1, 6, 6)  # an input without grad: the hook still sees grad_output
    grads.clear()
    model(x2)[0, 1].backward()
    assert tuple(grads["out"].shape) == (1, 2, 4, 4)
