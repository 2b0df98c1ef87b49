"""The benchmark workloads, each written once per idiom.

Every workload has:
  - `params`: the arrays we differentiate with respect to;
  - `data`: arrays that feed the loss but get no gradient (inputs, targets);
  - `tracegrad_fn(*params, *data)`: the loss written ONCE with tracegrad ops; the
    same function runs in eager mode (on `tracegrad.eager` tensors) and compiled
    mode (`tracegrad.value_and_grad`);
  - `numpy_value_and_grad(params, data)`: a hand-written forward + backward in
    plain NumPy; it is also the reference every other system is checked against;
  - `torch_fn`, `jax_fn`, `autograd_fn`: the peers, each in its own idiom.

Only numpy is imported here; tracegrad, torch, jax and autograd are imported by
the functions that need them, so building a workload costs nothing.

    >>> w = make_workload("seed_scalar", "float32")
    >>> value, grads = w.numpy_value_and_grad(w.params, w.data)
    >>> float(value), [float(g[0]) for g in grads]
    (10.0, [7.0, 2.0])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

WORKLOAD_NAMES = (
    "seed_scalar",
    "mlp_small_b16",
    "mlp_mnist_b128",
    "elementwise_1M",
    "tanh_chain_d50",
    "rnn_scan_t100",
    # issue 14: models people differentiate (perf/workloads_models.py)
    "linreg_n1000",
    "logreg_l2_n1000",
    "softmax_reg_n256",
    "mlp_layernorm_b64",
    "attention_1h_t64",
    "attention_4h_t64",
    "conv2d_b8_32px",
    "lstm_scan_t20",
    "mlp_mnist_b1",
    "mlp_mnist_b4096",
)


def _gp_missing_reason() -> str | None:
    """Why the GP workload (perf/gp_nll_workload.py, written by the linalg work) cannot run, or None."""
    import importlib.util

    if importlib.util.find_spec("perf.gp_nll_workload") is None:
        return "perf/gp_nll_workload.py does not exist"
    try:
        import tracegrad

        linalg = tracegrad.linalg
    except Exception as exc:
        return f"tracegrad.linalg failed: {type(exc).__name__}: {exc}"
    if not hasattr(linalg, "cholesky"):
        return "tracegrad.linalg.cholesky does not exist"
    return None


# workloads asked for but not measurable here: name -> reason (the report lists them)
MISSING_WORKLOADS = {
    name: reason for name, reason in [("gp_nll_n256", _gp_missing_reason())] if reason
}
WORKLOAD_NAMES += tuple(name for name in ("gp_nll_n256",) if name not in MISSING_WORKLOADS)


@dataclass
class Workload:
    name: str
    dtype: str
    params: list
    data: list
    tracegrad_fn: Callable
    numpy_value_and_grad: Callable
    torch_fn: Callable  # torch_fn(*param_tensors, *data_tensors) -> 0-d loss
    jax_fn: Callable  # jax_fn(*params, *data) -> scalar
    autograd_fn: Callable  # autograd_fn(params_list, *data) -> scalar
    description: str = ""
    torch_data: Callable = None  # numpy data -> the data list torch_fn expects
    peer_data: Callable = None  # numpy data -> the data list jax/autograd expect
    eager_fn: Callable = (
        None  # tracegrad eager's own spelling, on torch_data (default: tracegrad_fn)
    )
    torch_compile_fn: Callable = None  # what torch.compile gets, where torch_fn does not compile
    extra: dict = field(default_factory=dict)  # "flops": estimated FLOPs of one value-and-grad call

    @property
    def label(self) -> str:
        return f"{self.name} ({self.dtype})"


def make_workload(name: str, dtype: str = "float32", seed: int = 0, **size) -> Workload:
    """Build one workload with deterministic random inputs."""
    builders = {
        "seed_scalar": seed_scalar,
        "mlp_small_b16": lambda dt, rng: mlp(
            dt, rng, batch=16, sizes=(32, 64, 64, 10), name="mlp_small_b16"
        ),
        "mlp_mnist_b128": lambda dt, rng: mlp(
            dt, rng, batch=128, sizes=(784, 256, 256, 10), name="mlp_mnist_b128"
        ),
        "elementwise_1M": lambda dt, rng: elementwise(dt, rng, n=1_000_000, name="elementwise_1M"),
        "rnn_scan_t100": lambda dt, rng: rnn_scan(dt, rng, steps=100, name="rnn_scan_t100"),
        "tanh_chain_d50": lambda dt, rng: tanh_chain(
            dt, rng, depth=50, batch=32, width=64, name="tanh_chain_d50"
        ),
        **_model_builders(),
        # sized variants, used by the size sweeps
        "elementwise": lambda dt, rng: elementwise(dt, rng, **size),
        "mlp": lambda dt, rng: mlp(dt, rng, **size),
    }
    return builders[name](np.dtype(dtype).name, np.random.default_rng(seed))


def _model_builders() -> dict:
    """The issue-14 workloads, built in perf/workloads_models.py."""
    from perf import workloads_models as m

    mnist = (784, 256, 256, 10)
    return {
        "linreg_n1000": m.linear_regression,
        "logreg_l2_n1000": m.logistic_regression,
        "softmax_reg_n256": m.softmax_regression,
        "mlp_layernorm_b64": m.mlp_layernorm,
        "attention_1h_t64": lambda dt, rng: m.attention(dt, rng, heads=1),
        "attention_4h_t64": lambda dt, rng: m.attention(dt, rng, heads=4),
        "conv2d_b8_32px": m.conv_net,
        "lstm_scan_t20": m.lstm_scan,
        "mlp_mnist_b1": lambda dt, rng: mlp(dt, rng, batch=1, sizes=mnist, name="mlp_mnist_b1"),
        "mlp_mnist_b4096": lambda dt, rng: mlp(
            dt, rng, batch=4096, sizes=mnist, name="mlp_mnist_b4096"
        ),
        "gp_nll_n256": lambda dt, rng: _gp_workload(dt, n=256),
    }


def _gp_workload(dtype: str, n: int, name: str | None = None) -> Workload:
    """perf/gp_nll_workload.py's Workload; its FLOP estimate is the forward's, ours counts 3x that."""
    from perf.gp_nll_workload import make_gp_workload

    w = make_gp_workload(dtype, n=n)
    w.extra["flops"] = 3 * w.extra["flops"]
    w.name = name or w.name
    return w


def make_small_workload(name: str, dtype: str = "float64", seed: int = 0) -> Workload:
    """The same workload (same code, same name) at a tiny size, for unit tests.

    >>> w = make_small_workload("attention_4h_t64")
    >>> [p.shape for p in w.params]
    [(4, 4), (4, 4), (4, 4), (4, 4)]
    """
    from perf import workloads_models as m

    tiny_mlp = (6, 5, 5, 3)
    builders = {
        "seed_scalar": seed_scalar,
        "mlp_small_b16": lambda dt, rng: mlp(dt, rng, batch=4, sizes=tiny_mlp, name=name),
        "mlp_mnist_b128": lambda dt, rng: mlp(dt, rng, batch=4, sizes=tiny_mlp, name=name),
        "mlp_mnist_b1": lambda dt, rng: mlp(dt, rng, batch=1, sizes=tiny_mlp, name=name),
        "mlp_mnist_b4096": lambda dt, rng: mlp(
            dt, rng, batch=4, sizes=tiny_mlp, name=name
        ),  # same kernel
        "elementwise_1M": lambda dt, rng: elementwise(dt, rng, n=50, name=name),
        "tanh_chain_d50": lambda dt, rng: tanh_chain(dt, rng, depth=3, batch=2, width=4, name=name),
        "rnn_scan_t100": lambda dt, rng: rnn_scan(dt, rng, steps=4, batch=2, width=3, name=name),
        "linreg_n1000": lambda dt, rng: m.linear_regression(dt, rng, n=12, d=3, name=name),
        "logreg_l2_n1000": lambda dt, rng: m.logistic_regression(dt, rng, n=12, d=3, name=name),
        "softmax_reg_n256": lambda dt, rng: m.softmax_regression(dt, rng, n=6, d=4, k=3, name=name),
        "mlp_layernorm_b64": lambda dt, rng: m.mlp_layernorm(
            dt, rng, batch=4, sizes=tiny_mlp, name=name
        ),
        "attention_1h_t64": lambda dt, rng: m.attention(
            dt, rng, heads=1, batch=2, seq=3, dim=4, name=name
        ),
        "attention_4h_t64": lambda dt, rng: m.attention(
            dt, rng, heads=2, batch=2, seq=3, dim=4, name=name
        ),
        "conv2d_b8_32px": lambda dt, rng: m.conv_net(
            dt, rng, batch=2, c_in=2, size=5, c_out=3, classes=3, name=name
        ),
        "lstm_scan_t20": lambda dt, rng: m.lstm_scan(
            dt, rng, steps=3, batch=2, n_in=3, hidden=4, name=name
        ),
        **_small_extra_builders(),
    }
    return builders[name](np.dtype(dtype).name, np.random.default_rng(seed))


def _small_extra_builders() -> dict:
    """Tiny sizes of workloads defined outside this file (present only when their module is)."""
    if "gp_nll_n256" in MISSING_WORKLOADS:
        return {}
    return {"gp_nll_n256": lambda dt, rng: _gp_workload(dt, n=8, name="gp_nll_n256")}


# ------------------------------------------------------------------ seed_scalar
def seed_scalar(dtype: str, rng) -> Workload:
    x = np.array([2.0], dtype)
    y = np.array([3.0], dtype)

    def tracegrad_fn(x, y):
        import tracegrad as tg

        return tg.sum(x * y + x**2)

    def numpy_value_and_grad(params, data):
        x, y = params
        z = x * y + x**2
        return z.sum(), [y + 2 * x, x.copy()]

    def torch_fn(x, y):
        return (x * y + x**2).sum()

    def jax_fn(x, y):
        return (x * y + x**2).sum()

    def autograd_fn(params):
        x, y = params
        return (x * y + x**2).sum()

    return Workload(
        "seed_scalar",
        dtype,
        [x, y],
        [],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        "z = x*y + x**2 on shape (1,), grads x, y",
        extra={"flops": 3 * 5},
    )


# ------------------------------------------------------------------------ mlp
def mlp(
    dtype: str, rng, batch: int, sizes=(784, 256, 256, 10), name: str | None = None
) -> Workload:
    """ReLU MLP with softmax cross-entropy on integer targets."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        params.append(
            (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(dtype)
        )
        params.append((rng.standard_normal(fan_out) * 0.1).astype(dtype))
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    targets = rng.integers(0, sizes[-1], size=batch).astype(np.int64)
    n_layers = len(sizes) - 1
    scale = -1.0 / batch

    def tracegrad_fn(*args):
        import tracegrad as tg

        weights, (h, t_col) = args[:-2], args[-2:]
        for i in range(n_layers):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < n_layers - 1:
                h = _tg_relu(h)
        logp = tg.log_softmax(h, axis=1)
        picked = tg.take_along_axis(logp, t_col, axis=1)
        return tg.sum(picked) * scale

    def numpy_value_and_grad(params, data):
        h, t_col = data
        t = t_col[:, 0]
        acts, pres = [h], []
        for i in range(n_layers):
            z = acts[-1] @ params[2 * i] + params[2 * i + 1]
            pres.append(z)
            acts.append(np.maximum(z, 0) if i < n_layers - 1 else z)
        logits = acts[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        rows = np.arange(len(t))
        value = -logp[rows, t].sum() / len(t)
        g = np.exp(logp)
        g[rows, t] -= 1
        g /= len(t)
        grads = [None] * len(params)
        for i in reversed(range(n_layers)):
            if i < n_layers - 1:
                g = g * (pres[i] > 0)
            grads[2 * i] = acts[i].T @ g
            grads[2 * i + 1] = g.sum(axis=0)
            if i > 0:
                g = g @ params[2 * i].T
        return value, grads

    def pytorch_style(*args, F):
        weights, (h, t) = args[:-2], args[-2:]
        for i in range(n_layers):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < n_layers - 1:
                h = F.relu(h)
        return F.cross_entropy(h, t)

    def torch_fn(*args):
        import torch.nn.functional as F

        return pytorch_style(*args, F=F)

    def eager_fn(*args):  # the same code under `import tracegrad.eager as torch`
        import tracegrad.eager.nn.functional as F

        return pytorch_style(*args, F=F)

    def jax_fn(*args):
        import jax
        import jax.numpy as jnp

        weights, (h, t) = args[:-2], args[-2:]
        for i in range(n_layers):
            h = h @ weights[2 * i] + weights[2 * i + 1]
            if i < n_layers - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.take_along_axis(logp, t[:, None], axis=1).mean()

    def autograd_fn(params, h, t):
        import autograd.numpy as anp
        from autograd.scipy.special import logsumexp

        for i in range(n_layers):
            h = anp.dot(h, params[2 * i]) + params[2 * i + 1]
            if i < n_layers - 1:
                h = anp.maximum(h, 0.0)
        logp = h - logsumexp(h, axis=1, keepdims=True)
        return -anp.mean(logp[anp.arange(len(t)), t])

    name = name or f"mlp_b{batch}_" + "x".join(map(str, sizes))
    return Workload(
        name,
        dtype,
        params,
        [x, targets[:, None].copy()],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"batch {batch}, {'->'.join(map(str, sizes))}, ReLU, softmax cross-entropy",
        torch_data=lambda d: [d[0], d[1][:, 0].copy()],
        peer_data=lambda d: [d[0], d[1][:, 0].copy()],
        eager_fn=eager_fn,
        extra={"batch": batch, "sizes": sizes, "flops": _mlp_flops(batch, sizes)},
    )


def _mlp_flops(batch: int, sizes) -> int:
    """One value-and-grad call: 3x the forward's matmuls (2 per multiply-add) and bias/ReLU."""
    return 3 * sum(
        2 * batch * a * b + 2 * batch * b for a, b in zip(sizes[:-1], sizes[1:], strict=True)
    )


def _tg_relu(h):
    import tracegrad as tg

    relu = getattr(tg, "relu", None)
    return relu(h) if relu is not None else tg.maximum(h, 0.0)


# ----------------------------------------------------------------- elementwise
def elementwise(dtype: str, rng, n: int = 1_000_000, name: str | None = None) -> Workload:
    """sum(tanh(x)*sin(x) + exp(-x**2)), gradient for x."""
    x = rng.standard_normal(n).astype(dtype)

    def tracegrad_fn(x):
        import tracegrad as tg

        return tg.sum(tg.tanh(x) * tg.sin(x) + tg.exp(-(x**2)))

    def numpy_value_and_grad(params, data):
        (x,) = params
        t, s, e = np.tanh(x), np.sin(x), np.exp(-x * x)
        value = (t * s + e).sum()
        grad = (1 - t * t) * s + t * np.cos(x) - 2 * x * e
        return value, [grad]

    def torch_fn(x):
        import torch

        return (torch.tanh(x) * torch.sin(x) + torch.exp(-(x**2))).sum()

    def jax_fn(x):
        import jax.numpy as jnp

        return jnp.sum(jnp.tanh(x) * jnp.sin(x) + jnp.exp(-(x**2)))

    def autograd_fn(params):
        import autograd.numpy as anp

        (x,) = params
        return anp.sum(anp.tanh(x) * anp.sin(x) + anp.exp(-(x**2)))

    return Workload(
        name or f"elementwise_{n}",
        dtype,
        [x],
        [],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"sum(tanh(x)*sin(x) + exp(-x**2)) on {n:,} values",
        extra={"n": n, "flops": 3 * 8 * n},
    )


# ------------------------------------------------------------------ tanh chain
def tanh_chain(
    dtype: str, rng, depth: int = 50, batch: int = 32, width: int = 64, name: str | None = None
) -> Workload:
    """h = tanh(h @ W_i) for `depth` matrices, loss h.sum(); grads of every W_i."""
    weights = [
        (rng.standard_normal((width, width)) * (1.2 / np.sqrt(width))).astype(dtype)
        for _ in range(depth)
    ]
    x = rng.standard_normal((batch, width)).astype(dtype)

    def tracegrad_fn(*args):
        import tracegrad as tg

        h = args[-1]
        for w in args[:-1]:
            h = tg.tanh(h @ w)
        return tg.sum(h)

    def numpy_value_and_grad(params, data):
        hs = [data[0]]
        for w in params:
            hs.append(np.tanh(hs[-1] @ w))
        g = np.ones_like(hs[-1])
        grads = [None] * len(params)
        for i in reversed(range(len(params))):
            g = g * (1 - hs[i + 1] * hs[i + 1])
            grads[i] = hs[i].T @ g
            if i > 0:
                g = g @ params[i].T
        return hs[-1].sum(), grads

    def torch_fn(*args):
        import torch

        h = args[-1]
        for w in args[:-1]:
            h = torch.tanh(h @ w)
        return h.sum()

    def jax_fn(*args):
        import jax.numpy as jnp

        h = args[-1]
        for w in args[:-1]:
            h = jnp.tanh(h @ w)
        return h.sum()

    def autograd_fn(params, h):
        import autograd.numpy as anp

        for w in params:
            h = anp.tanh(anp.dot(h, w))
        return anp.sum(h)

    return Workload(
        name or f"tanh_chain_d{depth}",
        dtype,
        weights,
        [x],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"batch {batch}, h = tanh(h @ W_i) for {depth} {width}x{width} matrices, loss h.sum()",
        extra={
            "depth": depth,
            "flops": 3 * depth * (2 * batch * width * width + 2 * batch * width),
        },
    )


# ------------------------------------------------------------------ RNN (scan)
def rnn_scan(
    dtype: str, rng, steps: int = 100, batch: int = 16, width: int = 32, name: str | None = None
) -> Workload:
    """h = tanh(h @ W + x_t @ U) for `steps` steps, loss sum(h_T^2); grads of W and U.
    tracegrad writes it with tg.scan (one loop in the kernel), JAX with lax.scan,
    PyTorch and autograd with a Python loop."""
    W = (rng.standard_normal((width, width)) * (0.9 / np.sqrt(width))).astype(dtype)
    U = (rng.standard_normal((width, width)) * (0.9 / np.sqrt(width))).astype(dtype)
    xs = rng.standard_normal((steps, batch, width)).astype(dtype)
    h0 = np.zeros((batch, width), dtype)

    def tracegrad_fn(W, U, xs, h0):
        import tracegrad as tg

        h, _ = tg.scan(lambda h, x: (tg.tanh(h @ W + x @ U), None), h0, xs)
        return tg.sum(h * h)

    def numpy_value_and_grad(params, data):
        W, U = params
        xs, h0 = data
        hs = [h0]
        for x in xs:
            hs.append(np.tanh(hs[-1] @ W + x @ U))
        g = 2 * hs[-1]
        gW, gU = np.zeros_like(W), np.zeros_like(U)
        for t in reversed(range(len(xs))):
            g = g * (1 - hs[t + 1] * hs[t + 1])
            gW += hs[t].T @ g
            gU += xs[t].T @ g
            g = g @ W.T
        return (hs[-1] * hs[-1]).sum(), [gW, gU]

    def torch_fn(W, U, xs, h0):
        import torch

        h = h0
        for t in range(xs.shape[0]):
            h = torch.tanh(h @ W + xs[t] @ U)
        return (h * h).sum()

    def jax_fn(W, U, xs, h0):
        import jax
        import jax.numpy as jnp

        h, _ = jax.lax.scan(lambda h, x: (jnp.tanh(h @ W + x @ U), None), h0, xs)
        return jnp.sum(h * h)

    def autograd_fn(params, xs, h0):
        import autograd.numpy as anp

        W, U = params
        h = h0
        for x in xs:
            h = anp.tanh(anp.dot(h, W) + anp.dot(x, U))
        return anp.sum(h * h)

    return Workload(
        name or f"rnn_scan_t{steps}",
        dtype,
        [W, U],
        [xs, h0],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"RNN, batch {batch}, width {width}, {steps} steps: tg.scan / lax.scan / Python loop",
        extra={
            "steps": steps,
            "flops": 3 * steps * (4 * batch * width * width + 3 * batch * width),
        },
    )


# -------------------------------------------------------------- verification
def reference(workload: Workload):
    """The NumPy value and grads, computed in float64 from the same inputs."""
    p64 = [p.astype(np.float64) for p in workload.params]
    d64 = [
        d.astype(np.float64) if np.issubdtype(d.dtype, np.floating) else d for d in workload.data
    ]
    value, grads = workload.numpy_value_and_grad(p64, d64)
    return float(value), [np.asarray(g, np.float64) for g in grads]


def tolerance(dtype: str) -> float:
    """Allowed error relative to the largest magnitude of each reference array."""
    return 2e-3 if np.dtype(dtype) == np.float32 else 1e-8


def compare(workload: Workload, value, grads, ref=None) -> str | None:
    """None if `value` and `grads` match the float64 reference, else a short reason."""
    ref_value, ref_grads = ref if ref is not None else reference(workload)
    tol = tolerance(workload.dtype)
    value = float(np.asarray(value).reshape(()))
    if not np.isfinite(value) or abs(value - ref_value) > tol * max(1.0, abs(ref_value)):
        return f"value {value!r} != reference {ref_value!r}"
    if len(grads) != len(ref_grads):
        return f"{len(grads)} gradients, expected {len(ref_grads)}"
    for i, (g, r) in enumerate(zip(grads, ref_grads, strict=True)):
        g = np.asarray(g)
        if g.shape != r.shape:
            return f"grad {i} has shape {g.shape}, expected {r.shape}"
        if g.dtype != np.dtype(workload.dtype):
            return f"grad {i} has dtype {g.dtype}, expected {workload.dtype}"
        err = float(np.max(np.abs(g.astype(np.float64) - r))) if r.size else 0.0
        scale = max(1e-30, float(np.max(np.abs(r))) if r.size else 1.0)
        if not err <= tol * scale:
            return f"grad {i}: max abs error {err:.3g} > {tol:g} x {scale:.3g}"
    return None
