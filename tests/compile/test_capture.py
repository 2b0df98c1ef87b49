"""tracegrad.compile of PyTorch-style code (issue 22): modules, losses, backward and
optimizer steps captured into one static graph; guards, graph breaks, explain.

Every value is checked against the same program run eagerly (and against PyTorch
where it is installed)."""

import threading
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.capture.breaks import GraphBreakError, GraphBreakWarning

nn = torch.nn
F = torch.nn.functional
I = {"backend": "interpret"}


def mlp(seed=0, act=None):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), act or nn.Tanh(), nn.Linear(8, 3))


def batch(seed, n=5):
    rng = np.random.default_rng(seed)
    return (
        torch.tensor(rng.standard_normal((n, 6)).astype(np.float32)),
        torch.tensor(rng.integers(0, 3, n)),
    )


def params_of(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def grads_of(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


def close(a, b, rtol=1e-6, atol=1e-7):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def test_issue_example_loss_and_backward_equal_eager():
    model = mlp()
    x, t = batch(1)
    step = tg.compile(lambda x, t: F.cross_entropy(model(x), t), **I)
    loss = step(x, t)
    assert type(loss).__name__ == "Tensor" and loss.grad_fn.name() == "CompiledFunctionBackward"
    loss.backward()
    compiled = grads_of(model)
    model.zero_grad()
    eager_loss = F.cross_entropy(model(x), t)
    eager_loss.backward()
    assert float(loss) == pytest.approx(float(eager_loss), rel=1e-6)
    close(compiled, grads_of(model))
    assert step.cache_info().traces == 1


def test_compile_module_behaves_like_the_module():
    model = mlp()
    fast = tg.compile(model, **I)
    x, _ = batch(2)
    np.testing.assert_allclose(fast(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert [p is q for p, q in zip(fast.parameters(), model.parameters(), strict=True)] == [
        True
    ] * 4
    assert list(fast.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    assert isinstance(fast, nn.Module) and fast._orig_mod is model
    assert fast.eval() is fast and not model.training  # reaches the original
    fast(x).sum()  # eval mode: a second trace
    assert fast.cache_info().traces == 2
    assert "training changed to False" in fast.trace_reasons[-1]


def test_eager_torch_compile_is_tracegrad_compile():
    model = mlp()
    fast = torch.compile(model, backend="interpret", mode="max-autotune", dynamic=False)
    x, _ = batch(3)
    np.testing.assert_allclose(fast(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)


def _train(compiled, make_opt, steps=5, clip=None, seed=0):
    model = mlp(seed)
    opt = make_opt(model.parameters())

    def train_step(x, t):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss

    step = tg.compile(train_step, fullgraph=True, **I) if compiled else train_step
    losses = [float(step(*batch(10 + k))) for k in range(steps)]
    return losses, params_of(model), step, opt


@pytest.mark.parametrize(
    "name, make_opt, clip",
    [
        ("sgd momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), None),
        (
            "sgd nesterov wd",
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
            1.0,
        ),
        ("adam", lambda p: torch.optim.Adam(p, lr=1e-2), None),
        ("adamw clip", lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1), 0.5),
        ("adam amsgrad", lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True), None),
        ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True), None),
        ("adagrad", lambda p: torch.optim.Adagrad(p, lr=1e-1, lr_decay=0.01), None),
        ("adadelta", lambda p: torch.optim.Adadelta(p, lr=1.0, weight_decay=1e-3), None),
    ],
)
def test_training_step_is_one_graph_equal_to_eager_step_for_step(name, make_opt, clip):
    eager_losses, eager_params, _, eager_opt = _train(False, make_opt, clip=clip)
    losses, params, step, opt = _train(True, make_opt, clip=clip)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    close(params, eager_params)
    assert step.cache_info() == (1, 4), step.trace_reasons  # one trace, then cache hits
    for (_p, s), (_pe, se) in zip(opt.state.items(), eager_opt.state.items(), strict=True):
        assert sorted(s) == sorted(se)
        for key in s:
            np.testing.assert_allclose(
                np.asarray(s[key]), np.asarray(se[key]), rtol=1e-6, atol=1e-7
            )
    graph = step.entries.values().__next__()[0].graph
    ops = {n.op for n in graph.nodes}
    assert {"addmm", "tanh", "sqrt" if "sgd" not in name else "mul"} <= ops  # fwd, bwd, update


def test_training_step_against_pytorch():
    real = pytest.importorskip("torch")
    losses, params, _, _ = _train(True, lambda p: torch.optim.AdamW(p, lr=1e-2), clip=1.0)
    model = mlp()
    ref = real.nn.Sequential(real.nn.Linear(6, 8), real.nn.Tanh(), real.nn.Linear(8, 3))
    with real.no_grad():
        for p, q in zip(ref.parameters(), model.parameters(), strict=True):
            p.copy_(real.tensor(q.detach().numpy()))
    opt = real.optim.AdamW(ref.parameters(), lr=1e-2)
    ref_losses = []
    for k in range(5):
        x, t = batch(10 + k)
        opt.zero_grad()
        loss = real.nn.functional.cross_entropy(ref(real.tensor(x.numpy())), real.tensor(t.numpy()))
        loss.backward()
        real.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
        ref_losses.append(loss.item())
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    close(params, [p.detach().numpy() for p in ref.parameters()], rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ guards


def test_guards_retrace_only_when_they_must():
    model = mlp()
    f = tg.compile(lambda x: model(x).sum(), **I)
    x, _ = batch(4)
    f(x)
    with torch.no_grad():
        model[0].weight.mul_(2.0)  # in place: read on the next call, no retrace
    np.testing.assert_allclose(float(f(x)), float(model(x).sum()), rtol=1e-6)
    model.load_state_dict(mlp(seed=5).state_dict())  # copies in place: no retrace
    np.testing.assert_allclose(float(f(x)), float(model(x).sum()), rtol=1e-6)
    assert f.cache_info().traces == 1
    setattr(model, "2", nn.Linear(8, 3))  # a swapped submodule
    np.testing.assert_allclose(float(f(x)), float(model(x).sum()), rtol=1e-6)
    assert "submodule" in f.trace_reasons[-1]
    model.eval()
    f(x)
    assert "training changed to False" in f.trace_reasons[-1]
    model.double()  # a dtype change
    xd = torch.tensor(x.numpy().astype(np.float64))
    np.testing.assert_allclose(float(f(xd)), float(model(xd).sum()), rtol=1e-12)
    f(torch.ones(2, 6, dtype=torch.float64))  # a new shape
    assert f.cache_info().traces == 5
    model[0].weight.requires_grad_(False)
    f(xd)
    assert "requires_grad" in f.trace_reasons[-1]
    before = f.cache_info().traces
    f(xd)
    assert f.cache_info().traces == before


def test_a_python_value_the_function_reads_retraces_when_it_changes():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, t):
        opt.zero_grad()
        F.cross_entropy(model(x), t).backward()
        opt.step()

    f = tg.compile(step, **I)
    f(*batch(1))
    opt.param_groups[0]["lr"] = 0.05  # a schedule: lr is an input, no retrace
    before = params_of(model)
    x, t = batch(2)
    f(x, t)
    assert f.cache_info().traces == 1
    ref = mlp()
    for p, v in zip(ref.parameters(), before, strict=True):
        p.data = torch.tensor(v)
    F.cross_entropy(ref(x), t).backward()
    close(
        params_of(model),
        [v - 0.05 * p.grad.numpy() for v, p in zip(before, ref.parameters(), strict=True)],
    )
    opt.param_groups[0]["weight_decay"] = 0.1  # another hyperparameter: a constant, retraced
    f(x, t)
    assert f.cache_info().traces == 2 and "hyperparameters" in f.trace_reasons[-1]


def test_a_learning_rate_schedule_matches_eager_without_retracing():
    def run(compiled):
        model = mlp()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)

        def step(x, t):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), t)
            loss.backward()
            opt.step()
            return loss

        f = tg.compile(step, **I) if compiled else step
        losses = []
        for k in range(6):
            losses.append(float(f(*batch(50 + k))))
            sched.step()
        return losses, params_of(model), f

    eager_losses, eager_params, _ = run(False)
    losses, params, f = run(True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    close(params, eager_params)
    assert f.cache_info().traces == 1


def test_tracing_leaves_the_users_objects_as_they_were():
    model = mlp()
    x, t = batch(1)
    x_before = x.numpy().copy()
    f = tg.compile(lambda x: model(x).sum(), **I)
    before = params_of(model)
    f.lower(x)  # traces only
    close(params_of(model), before, rtol=0, atol=0)
    assert all(type(p._data) is np.ndarray and p.grad is None for p in model.parameters())
    np.testing.assert_array_equal(x.numpy(), x_before)


# ------------------------------------------------------------------ breaks and explain


def _with_item(model):
    def f(x):
        h = model(x)
        if h.sum().item() > 0:  # needs a value: a graph break
            return h * 2.0
        return h - 1.0

    return f


def test_graph_break_gives_eager_values_and_names_the_line():
    model = mlp()
    x, _ = batch(6)
    f = tg.compile(_with_item(model), **I)
    with pytest.warns(GraphBreakWarning, match=r"test_capture\.py:\d+") as record:
        out = f(x)
    assert "if h.sum().item() > 0" in str(record[0].message)
    np.testing.assert_allclose(out.detach().numpy(), _with_item(model)(x).detach().numpy())
    out.sum().backward()  # the eager call's graph
    assert model[0].weight.grad is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        f(-x)  # the same signature: no new warning, still right
    np.testing.assert_allclose(f(-x).detach().numpy(), _with_item(model)(-x).detach().numpy())


def test_fullgraph_raises_at_a_break():
    f = tg.compile(_with_item(mlp()), fullgraph=True, **I)
    with pytest.raises(GraphBreakError, match=r"(?s)fullgraph=True.*test_capture\.py.*item"):
        f(batch(6)[0])


@pytest.mark.parametrize(
    "body, reason",
    [
        (lambda h: print(h), "printing a tensor"),
        (lambda h: h.numpy(), "numpy()"),
        (lambda h: torch.manual_seed(3), "manual_seed"),
    ],
)
def test_other_breaks(body, reason):
    def f(x):
        h = x * 2.0
        body(h.detach())
        return h + 1.0

    report = tg.explain(f, torch.ones(3))
    assert report.graph_break_count == 1 and reason in report.break_reasons[0].reason
    np.testing.assert_allclose(report.out.numpy(), [3.0, 3.0, 3.0])


def test_explain_lists_graphs_and_breaks():
    model = mlp()
    report = tg.explain(lambda x: model(x).relu().sum(), batch(1)[0])
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert "addmm" in report.ops_per_graph[0] and "Graph Count: 1" in str(report)
    broken = tg.explain(_with_item(model), batch(1)[0])
    assert broken.graph_break_count == 1
    assert "Break Reason 1" in str(broken) and "item" in str(broken)


# ------------------------------------------------------------------ autograd through it


def test_second_order_through_a_compiled_module():
    model = mlp(act=nn.Tanh())
    fast = tg.compile(model, **I)
    x = torch.tensor(
        np.random.default_rng(0).standard_normal((3, 6)), dtype=torch.float32, requires_grad=True
    )
    (gx,) = torch.autograd.grad(fast(x).pow(2).sum(), x, create_graph=True)
    gx.sum().backward()
    compiled = x.grad.numpy().copy(), grads_of(model)
    x.grad = None
    model.zero_grad()
    (ge,) = torch.autograd.grad(model(x).pow(2).sum(), x, create_graph=True)
    ge.sum().backward()
    np.testing.assert_allclose(gx.detach().numpy(), ge.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled[0], x.grad.numpy(), rtol=1e-4, atol=1e-6)
    close(compiled[1], grads_of(model), rtol=1e-4, atol=1e-6)


def test_threads_calling_one_compiled_module():
    model = mlp()
    fast = tg.compile(model, **I)
    inputs = [batch(20 + k)[0] for k in range(4)]
    expected = [model(x).detach().numpy() for x in inputs]
    results, errors = {}, []

    def worker(k):
        try:
            for _ in range(10):
                results[k] = fast(inputs[k]).detach().numpy()
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for k in range(4):
        np.testing.assert_allclose(results[k], expected[k], rtol=1e-6)
    assert fast.cache_info().traces == 1


def test_backward_into_an_arguments_grad_runs_eagerly():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def f(w):
        (w * w).sum().backward()
        return w.grad * 1.0

    with pytest.warns(GraphBreakWarning, match="argument"):
        out = tg.compile(f, **I)(w)
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0])


# ------------------------------------------------------------------ randomness and state


def test_dropout_and_randn_follow_manual_seed_as_eager_mode_does():
    drop = nn.Dropout(0.5)

    def f(x):
        return drop(x) + torch.randn(4) * 0.1

    x = torch.ones(4)
    fast = tg.compile(f, **I)
    torch.manual_seed(7)
    eager = [f(x).numpy() for _ in range(3)]
    torch.manual_seed(7)
    compiled = [fast(x).numpy() for _ in range(3)]
    for a, b in zip(eager, compiled, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(compiled[0], compiled[1])  # a fresh draw every call
    assert fast.cache_info().traces == 1
    drop.eval()
    np.testing.assert_allclose(
        fast(x).numpy() - torch.randn(4).numpy() * 0, fast(x).numpy(), atol=1.0
    )  # eval: a retrace, dropout off
    assert "training changed" in fast.trace_reasons[-1]


def test_batchnorm_running_stats_update_as_in_eager_mode():
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))

    eager, compiled = build(), build()
    fast = tg.compile(compiled, **I)
    for k in range(3):
        x, _ = batch(30 + k, n=8)
        np.testing.assert_allclose(
            fast(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-5, atol=1e-6
        )
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(
            getattr(compiled[1], name).numpy(), getattr(eager[1], name).numpy(), rtol=1e-6
        )
    assert fast.cache_info().traces == 1


def test_closed_over_tensor_changed_in_place_is_read_each_call():
    W = torch.ones(3, requires_grad=True)
    f = tg.compile(lambda x: (x * W).sum(), **I)
    x = torch.tensor([1.0, 2.0, 3.0])
    f(x).backward()
    np.testing.assert_allclose(W.grad.numpy(), [1.0, 2.0, 3.0])
    with torch.no_grad():
        W.mul_(3.0)
    assert float(f(x)) == pytest.approx(18.0)
    assert f.cache_info().traces == 1


def test_compiled_module_in_an_eager_training_loop_traces_once():
    """The README's three lines: forward compiled, loss/backward/step eager around it;
    .grad going from None to a tensor and back (zero_grad) never retraces."""
    eager_model, model = mlp(), mlp()
    fast = tg.compile(model, **I)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager_model, model)]
    for k in range(4):
        x, t = batch(40 + k)
        for net, opt in zip((eager_model, fast), opts, strict=True):
            if k % 2:
                opt.zero_grad()  # every other step: accumulate into existing grads
            F.cross_entropy(net(x), t).backward()
            opt.step()
    close(params_of(model), params_of(eager_model))
    assert fast.cache_info().traces == 1, fast.trace_reasons


def test_inplace_ops_and_views_of_intermediates_are_functionalized():
    def f(x, w):
        h = x @ w
        h.add_(0.5)
        v = h.view(-1)
        v.mul_(2.0)  # through a view: h changes too
        h[:, 0] = 0.0  # item assignment on an intermediate
        t = h.t()
        t.add_(1.0)  # through a transposed view
        return (h * h).sum() + v.sum()

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((3, 4)))
    w = torch.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    expected = f(x, w)
    expected.backward()
    grad = w.grad.numpy().copy()
    w.grad = None
    out = tg.compile(f, fullgraph=True, **I)(x, w)
    out.backward()
    assert float(out) == pytest.approx(float(expected), rel=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), grad, rtol=1e-12)


@pytest.mark.numba
def test_numba_kernels_replace_the_eager_tier():
    """With Numba, a captured step runs eagerly while its kernel builds in the background,
    then the kernel: the same losses throughout."""
    eager_losses, eager_params, _, _ = _train(False, lambda p: torch.optim.Adam(p, lr=1e-2))
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, t):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss

    step = tg.compile(train_step, backend="numba")
    losses = [float(step(*batch(10)))]
    assert step.wait_kernels(timeout=600)
    losses += [float(step(*batch(10 + k))) for k in range(1, 5)]
    entry = step.entries.values().__next__()[0]
    assert entry.eager_tier is None and entry.kernel.kernel is not None
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    close(params_of(model), eager_params, rtol=1e-4, atol=1e-6)


def test_item_assignment_on_a_new_tensor_is_captured_without_a_break():
    """makemore's `idx = torch.roll(idx, 1, 1); idx[:, 0] = blank` inside a compiled step:
    the write is functional in the graph (no break), roll's result is new memory (not a
    view of idx: concatenate never is), and the caller's tensors are untouched."""

    def shift(idx, x):
        rolled = torch.roll(idx, 1, 1)
        rolled[:, 0] = 9
        joined = torch.cat([x, x], dim=1)
        joined[:, 0] = -1.0  # written into the new tensor, never into x
        return rolled, joined, x.sum()

    idx = torch.tensor(np.arange(12).reshape(3, 4))
    x = torch.tensor(np.linspace(0.0, 1.0, 6).reshape(3, 2))
    want = shift(idx.clone(), x.clone())
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphBreakWarning)
        got = tg.compile(shift, fullgraph=True)(idx, x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(idx.numpy(), np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(x.numpy(), np.linspace(0.0, 1.0, 6).reshape(3, 2))


@pytest.mark.parametrize(
    "make_view",
    [
        lambda x: x.t().reshape(-1),  # a copy in eager mode and PyTorch
        lambda x: x.t().reshape(3, 2),  # the same shape: a view
        lambda x: x[0].reshape(-1),  # a contiguous row: a view
        lambda x: x[:, 1:].reshape(-1),  # a strided block: a copy
        lambda x: x.reshape(3, 2).t().reshape(-1),  # a copy again
        lambda x: x.reshape(3, 2)[1:].reshape(-1),  # contiguous rows: a view
    ],
)
def test_in_place_write_into_a_reshaped_view_matches_eager(make_view):
    """Inside a capture tensors have no strides; reshape is a view exactly where eager
    mode's (NumPy's) reshape is, so a write into it reaches the base only then."""

    def f(x):
        y = make_view(x)
        y[0] = 5.0
        return x.sum() * 10 + y.sum()

    x = torch.tensor(np.arange(6.0).reshape(2, 3))
    want = f(x.clone()).item()
    assert tg.compile(f, **I)(x.clone()).item() == want
