"""Run by test_fork.py in a fresh process: start a child with multiprocessing
(start method argv[1]) in the middle of some tracegrad work (argv[2]), and
report whether the child finished with correct results.

    python fork_child.py fork|spawn|forkserver parallel_build|eager_pool|parallel_kernel|captured_step

Prints "OK ..." and exits 0, or prints "HANG"/"FAIL ..." and exits 1. The
parent waits for the child at most CHILD_TIMEOUT seconds.
"""

import multiprocessing as mp
import os
import sys

import numpy as np

CHILD_TIMEOUT = 60
BIG = 1 << 18  # >= the code generator's parallel threshold and the eager pool's


def small_loss(x):
    import tracegrad as tg

    return tg.sum(tg.tanh(x) * x)


def big_loss(x):
    import tracegrad as tg

    return tg.sum(tg.exp(-x) * x)


def child_work(queue):
    """In the child: a new compiled function (Numba load or compile), the big one
    (whatever variant the parent had), and a large eager op (the thread pool)."""
    try:
        import tracegrad as tg
        import tracegrad.eager as torch

        x = np.linspace(-1.0, 1.0, 5)
        v, g = tg.value_and_grad(small_loss)(x)
        assert abs(v - np.sum(np.tanh(x) * x)) < 1e-12
        xb = np.linspace(-1.0, 1.0, BIG)
        vb, gb = tg.value_and_grad(big_loss)(xb)
        assert np.allclose(gb, np.exp(-xb) * (1 - xb), rtol=1e-10)
        t = torch.tensor(np.linspace(0.0, 1.0, BIG, dtype=np.float32))
        y = (t * t + t).sin()
        assert np.allclose(y.numpy(), np.sin(t.numpy() ** 2 + t.numpy()), rtol=1e-5)
        queue.put("ok")
    except BaseException as exc:  # report, never hang the parent on a missing message
        queue.put(f"{type(exc).__name__}: {exc}")


_CAPTURED: dict = {}  # the parent's captured training step, inherited by a forked child


def captured_step():
    """A PyTorch-style training step and its tracegrad.compile capture."""
    import tracegrad as tg
    import tracegrad.eager as torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x = torch.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4))
    return model, opt, step, tg.compile(step), x, torch.ones(3, 1)


def child_captured(queue):
    """In the child: the inherited captured step, from the inherited weights and
    momentum, against the eager step from the same state."""
    try:
        import copy

        model, opt, step, compiled, x, y = _CAPTURED["step"]
        model_state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
        got = [compiled(x, y).item() for _ in range(3)]
        got_w = [p.detach().numpy().copy() for p in model.parameters()]
        model.load_state_dict(model_state)
        opt.load_state_dict(opt_state)
        want = [step(x, y).item() for _ in range(3)]
        assert np.allclose(got, want, rtol=1e-5), (got, want)
        for a, p in zip(got_w, model.parameters(), strict=True):
            assert np.allclose(a, p.detach().numpy(), rtol=1e-5, atol=1e-6)
        queue.put("ok")
    except BaseException as exc:  # report, never hang the parent on a missing message
        queue.put(f"{type(exc).__name__}: {exc}")


def main(method: str, scenario: str) -> int:
    import tracegrad as tg
    from tracegrad.ops import parallel

    # Use the pool whatever the machine's load (its heuristic would keep a busy
    # machine serial, and then there would be no pool to inherit).
    parallel.threads_now = lambda: max(2, parallel.THREADS)
    if parallel.THREADS < 2:
        parallel.THREADS = 2
    xb = np.linspace(-1.0, 1.0, BIG)
    note = ""
    if scenario == "parallel_build":
        # The first call returns with the serial kernel; the parallel variant's
        # (slow) Numba compile runs in a background thread while we fork.
        f = tg.value_and_grad(big_loss)
        f(xb)
        kernel = f.lower(xb).kernel
        # started by the kernel's first call; start it here in case another entry (a
        # shape-generic template, under load) answered that call
        getattr(kernel, "_start_parallel", lambda: None)()
        thread = getattr(kernel, "_parallel_thread", None)
        note = f"build_in_flight={thread is not None and thread.is_alive()}"
    elif scenario == "eager_pool":
        import tracegrad.eager as torch

        t = torch.tensor(np.linspace(0.0, 1.0, BIG, dtype=np.float32))
        for _ in range(3):
            t = (t * 1.0001 + 0.5).tanh()
        note = f"pool={parallel._pool is not None}"
    elif scenario == "parallel_kernel":
        os.environ["TRACEGRAD_PARALLEL"] = "sync"
        f = tg.value_and_grad(big_loss)
        f(xb)  # runs the parallel (prange) variant: Numba's threading layer starts
        f(xb)
        note = f"parallel={f.lower(xb).kernel.parallel_source is not None}"
    elif scenario == "captured_step":
        _CAPTURED["step"] = captured_step()
        model, opt, step, compiled, x, y = _CAPTURED["step"]
        for _ in range(2):  # traced, and its kernel building in the background (Numba)
            compiled(x, y)
        note = f"traces={len(compiled.trace_reasons)}"
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    ctx = mp.get_context(method)
    queue = ctx.Queue()
    target = child_captured if scenario == "captured_step" else child_work
    proc = ctx.Process(target=target, args=(queue,))
    proc.start()
    proc.join(CHILD_TIMEOUT)
    if proc.is_alive():
        proc.kill()
        proc.join()
        print("HANG", note, flush=True)
        return 1
    result = queue.get(timeout=10) if not queue.empty() else f"no result (exit {proc.exitcode})"
    if result != "ok" or proc.exitcode != 0:
        print("FAIL", result, proc.exitcode, note, flush=True)
        return 1
    print("OK", note, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
