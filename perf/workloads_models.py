"""The model workloads of issue 14: what people actually differentiate.

Each builder returns a `perf.workloads.Workload`: the loss written once with
tracegrad ops (`tracegrad_fn`, run eagerly and compiled), a hand-written NumPy
forward + backward (the reference every system is checked against), and the
peers in their own idioms (PyTorch's `F.*` functions, JAX with `jax.nn` / `lax`,
HIPS autograd with `autograd.numpy`).

`extra["flops"]` is an estimate of the floating-point operations of one
value-and-grad call: 3x the forward pass (the backward of a matmul is two
matmuls), counting a multiply-add as 2 and an elementwise op as 1. The report
calls a workload *small* when it is under `SMALL_FLOPS`.

    >>> from perf.workloads import make_workload
    >>> w = make_workload("linreg_n1000", "float64")
    >>> value, (gw, gb) = w.numpy_value_and_grad(w.params, w.data)
    >>> gw.shape, gb.shape, w.extra["flops"] < SMALL_FLOPS
    ((50,), (), True)
"""

from __future__ import annotations

import numpy as np

from perf.workloads import Workload

SMALL_FLOPS = 1e6  # "small": under 1 MFLOP per value-and-grad call


# ------------------------------------------------------------------ helpers
def _cross_entropy_np(logits, t):
    """Mean softmax cross-entropy on integer targets and its gradient for the logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(t))
    g = np.exp(logp)
    g[rows, t] -= 1
    return -logp[rows, t].mean(), g / len(t)


def _tg_cross_entropy(logits, t_col):
    import tracegrad as tg

    logp = tg.log_softmax(logits, axis=1)
    return -tg.mean(tg.take_along_axis(logp, t_col, axis=1))


def _jax_cross_entropy(logits, t):
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits, axis=1)
    return -jnp.take_along_axis(logp, t[:, None], axis=1).mean()


def _autograd_cross_entropy(logits, t):
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    return -anp.mean(logp[anp.arange(len(t)), t])


def _targets_1d(data):
    """Integer targets are stored as a column (for take_along_axis); peers take them flat."""
    return [d[:, 0].copy() if d.ndim == 2 and d.dtype.kind == "i" else d for d in data]


def _init(rng, shape, dtype, fan_in):
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(dtype)


# ------------------------------------------------------- linear regression
def linear_regression(
    dtype: str, rng, n: int = 1000, d: int = 50, name: str = "linreg_n1000"
) -> Workload:
    """Mean squared error of X @ w + b against y; grads of w and the scalar b."""
    X = rng.standard_normal((n, d)).astype(dtype)
    y = (X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)).astype(dtype)
    w = np.full(d, 0.01, dtype)
    b = np.array(0.5, dtype)

    def tracegrad_fn(w, b, X, y):
        import tracegrad as tg

        return tg.mean((X @ w + b - y) ** 2)

    def numpy_value_and_grad(params, data):
        (w, b), (X, y) = params, data
        r = X @ w + b - y
        return (r * r).mean(), [X.T @ r * (2 / n), np.asarray(r.sum() * (2 / n))]

    def torch_fn(w, b, X, y):
        import torch.nn.functional as F

        return F.mse_loss(X @ w + b, y)

    def jax_fn(w, b, X, y):
        import jax.numpy as jnp

        return jnp.mean((X @ w + b - y) ** 2)

    def autograd_fn(params, X, y):
        import autograd.numpy as anp

        w, b = params
        return anp.mean((anp.dot(X, w) + b - y) ** 2)

    return Workload(
        name,
        dtype,
        [w, b],
        [X, y],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"mean((X @ w + b - y)**2), X {n}x{d}, grads w and scalar b",
        extra={"flops": 3 * (2 * n * d + 4 * n)},
    )


# ----------------------------------------------------- logistic regression
def logistic_regression(
    dtype: str, rng, n: int = 1000, d: int = 50, lam: float = 1e-2, name: str = "logreg_l2_n1000"
) -> Workload:
    """Binary cross-entropy with logits plus an L2 penalty (lam/2)|w|^2."""
    X = rng.standard_normal((n, d)).astype(dtype)
    y = (X @ rng.standard_normal(d) + rng.standard_normal(n) > 0).astype(dtype)
    w = (0.1 * rng.standard_normal(d)).astype(dtype)
    b = np.array(0.0, dtype)
    half_lam = 0.5 * lam

    def tracegrad_fn(w, b, X, y):
        import tracegrad as tg

        z = X @ w + b
        return tg.mean(tg.logaddexp(0.0, z) - y * z) + half_lam * tg.sum(w * w)

    def numpy_value_and_grad(params, data):
        (w, b), (X, y) = params, data
        z = X @ w + b
        value = (np.logaddexp(0.0, z) - y * z).mean() + half_lam * (w * w).sum()
        dz = (1 / (1 + np.exp(-z)) - y) / n
        return value, [X.T @ dz + lam * w, np.asarray(dz.sum())]

    def torch_fn(w, b, X, y):
        import torch.nn.functional as F

        return F.binary_cross_entropy_with_logits(X @ w + b, y) + half_lam * (w * w).sum()

    def jax_fn(w, b, X, y):
        import jax
        import jax.numpy as jnp

        z = X @ w + b
        return jnp.mean(jax.nn.softplus(z) - y * z) + half_lam * jnp.sum(w * w)

    def autograd_fn(params, X, y):
        import autograd.numpy as anp

        w, b = params
        z = anp.dot(X, w) + b
        return anp.mean(anp.logaddexp(0.0, z) - y * z) + half_lam * anp.sum(w * w)

    return Workload(
        name,
        dtype,
        [w, b],
        [X, y],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"logistic regression, X {n}x{d}, BCE with logits + {lam:g}/2 |w|^2",
        extra={"flops": 3 * (2 * n * d + 8 * n + 2 * d)},
    )


# ------------------------------------------------------ softmax regression
def softmax_regression(
    dtype: str, rng, n: int = 256, d: int = 50, k: int = 10, name: str = "softmax_reg_n256"
) -> Workload:
    """Multinomial logistic regression: cross-entropy of X @ W + b on integer labels."""
    X = rng.standard_normal((n, d)).astype(dtype)
    t = rng.integers(0, k, size=n).astype(np.int64)
    W = _init(rng, (d, k), dtype, d)
    b = np.zeros(k, dtype)

    def tracegrad_fn(W, b, X, t_col):
        return _tg_cross_entropy(X @ W + b, t_col)

    def numpy_value_and_grad(params, data):
        (W, b), (X, t_col) = params, data
        value, g = _cross_entropy_np(X @ W + b, t_col[:, 0])
        return value, [X.T @ g, g.sum(axis=0)]

    def torch_fn(W, b, X, t):
        import torch.nn.functional as F

        return F.cross_entropy(X @ W + b, t)

    def jax_fn(W, b, X, t):
        return _jax_cross_entropy(X @ W + b, t)

    def autograd_fn(params, X, t):
        import autograd.numpy as anp

        W, b = params
        return _autograd_cross_entropy(anp.dot(X, W) + b, t)

    return Workload(
        name,
        dtype,
        [W, b],
        [X, t[:, None].copy()],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"softmax regression, X {n}x{d}, {k} classes, cross-entropy",
        torch_data=_targets_1d,
        peer_data=_targets_1d,
        extra={"flops": 3 * (2 * n * d * k + 6 * n * k)},
    )


# ------------------------------------------------------ MLP with LayerNorm
def mlp_layernorm(
    dtype: str,
    rng,
    batch: int = 64,
    sizes=(64, 128, 128, 10),
    eps: float = 1e-5,
    name: str = "mlp_layernorm_b64",
) -> Workload:
    """Linear -> LayerNorm (affine) -> ReLU per hidden layer, then a linear head and cross-entropy."""
    n_hidden = len(sizes) - 2
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        params += [
            _init(rng, (fan_in, fan_out), dtype, fan_in),
            (0.1 * rng.standard_normal(fan_out)).astype(dtype),
        ]
        if i < n_hidden:
            params += [
                (1 + 0.1 * rng.standard_normal(fan_out)).astype(dtype),
                (0.1 * rng.standard_normal(fan_out)).astype(dtype),
            ]
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    t = rng.integers(0, sizes[-1], size=batch).astype(np.int64)

    def layers(params):
        """(W, b, gamma, beta) per hidden layer, then (W, b) of the head."""
        out = [params[4 * i : 4 * i + 4] for i in range(n_hidden)]
        return out, params[4 * n_hidden :]

    def tracegrad_fn(*args):
        import tracegrad as tg

        hidden, (Wo, bo) = layers(args[:-2])
        h, t_col = args[-2:]
        for W, b, gamma, beta in hidden:
            z = h @ W + b
            mu = tg.mean(z, axis=-1, keepdims=True)
            var = tg.var(z, axis=-1, keepdims=True)
            h = tg.relu((z - mu) / tg.sqrt(var + eps) * gamma + beta)
        return _tg_cross_entropy(h @ Wo + bo, t_col)

    def numpy_value_and_grad(params, data):
        hidden, (Wo, bo) = layers(params)
        h, t_col = data
        saved = []
        for W, b, gamma, beta in hidden:
            z = h @ W + b
            zc = z - z.mean(axis=-1, keepdims=True)
            inv_std = 1 / np.sqrt((zc * zc).mean(axis=-1, keepdims=True) + eps)
            xhat = zc * inv_std
            pre = xhat * gamma + beta
            saved.append((h, xhat, inv_std, pre))
            h = np.maximum(pre, 0)
        value, g = _cross_entropy_np(h @ Wo + bo, t_col[:, 0])
        grads = [h.T @ g, g.sum(axis=0)]
        g = g @ Wo.T
        for (W, _b, gamma, _beta), (h_in, xhat, inv_std, pre) in zip(
            reversed(hidden), reversed(saved), strict=True
        ):
            g = g * (pre > 0)
            dgamma, dbeta = (g * xhat).sum(axis=0), g.sum(axis=0)
            dx = g * gamma
            dz = inv_std * (
                dx
                - dx.mean(axis=-1, keepdims=True)
                - xhat * (dx * xhat).mean(axis=-1, keepdims=True)
            )
            grads = [h_in.T @ dz, dz.sum(axis=0), dgamma, dbeta] + grads
            g = dz @ W.T
        return value, grads

    def pytorch_style(*args, F):
        hidden, (Wo, bo) = layers(args[:-2])
        h, t = args[-2:]
        for W, b, gamma, beta in hidden:
            h = F.relu(F.layer_norm(h @ W + b, (W.shape[1],), gamma, beta, eps))
        return F.cross_entropy(h @ Wo + bo, t)

    def torch_fn(*args):
        import torch.nn.functional as F

        return pytorch_style(*args, F=F)

    def eager_fn(*args):  # the same code under `import tracegrad.eager as torch`
        import tracegrad.eager.nn.functional as F

        return pytorch_style(*args, F=F)

    def jax_fn(*args):
        import jax

        hidden, (Wo, bo) = layers(args[:-2])
        h, t = args[-2:]
        for W, b, gamma, beta in hidden:
            z = h @ W + b
            mu = z.mean(axis=-1, keepdims=True)
            var = z.var(axis=-1, keepdims=True)
            h = jax.nn.relu((z - mu) * jax.lax.rsqrt(var + eps) * gamma + beta)
        return _jax_cross_entropy(h @ Wo + bo, t)

    def autograd_fn(params, h, t):
        import autograd.numpy as anp

        hidden, (Wo, bo) = layers(params)
        for W, b, gamma, beta in hidden:
            z = anp.dot(h, W) + b
            zc = z - anp.mean(z, axis=-1, keepdims=True)
            var = anp.mean(zc * zc, axis=-1, keepdims=True)
            h = anp.maximum(zc / anp.sqrt(var + eps) * gamma + beta, 0.0)
        return _autograd_cross_entropy(anp.dot(h, Wo) + bo, t)

    matmul = sum(2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    return Workload(
        name,
        dtype,
        params,
        [x, t[:, None].copy()],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"batch {batch}, {'->'.join(map(str, sizes))}, Linear-LayerNorm-ReLU, cross-entropy",
        torch_data=_targets_1d,
        peer_data=_targets_1d,
        eager_fn=eager_fn,
        extra={"flops": 3 * (matmul + 10 * batch * sum(sizes[1:-1]))},
    )


# ---------------------------------------------------------------- attention
def attention(
    dtype: str,
    rng,
    heads: int = 1,
    batch: int = 8,
    seq: int = 64,
    dim: int = 64,
    name: str | None = None,
) -> Workload:
    """Self-attention softmax(Q K^T / sqrt(d_head)) V with an output projection, MSE to a target.

    tracegrad, JAX and autograd spell the heads with reshape + transpose; PyTorch
    uses F.scaled_dot_product_attention, as a PyTorch user writes it."""
    dh = dim // heads
    Wq, Wk, Wv, Wo = (_init(rng, (dim, dim), dtype, dim) for _ in range(4))
    x = rng.standard_normal((batch, seq, dim)).astype(dtype)
    target = rng.standard_normal((batch, seq, dim)).astype(dtype)
    scale = float(1.0 / np.sqrt(dh))  # a Python float keeps float32 float32
    count = batch * seq * dim

    def tracegrad_fn(Wq, Wk, Wv, Wo, x, target):
        import tracegrad as tg

        def split(a):  # (B, T, D) -> (B, H, T, dh)
            return (
                tg.transpose(tg.reshape(a, (batch, seq, heads, dh)), (0, 2, 1, 3))
                if heads > 1
                else a
            )

        q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
        a = tg.softmax(q @ tg.swapaxes(k, -1, -2) * scale, axis=-1)
        o = a @ v
        if heads > 1:
            o = tg.reshape(tg.transpose(o, (0, 2, 1, 3)), (batch, seq, dim))
        return tg.mean((o @ Wo - target) ** 2)

    def numpy_value_and_grad(params, data):
        (Wq, Wk, Wv, Wo), (x, target) = params, data

        def split(a):
            return a.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3)

        def merge(a):
            return a.transpose(0, 2, 1, 3).reshape(batch, seq, dim)

        q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
        s = q @ k.swapaxes(-1, -2) * scale
        a = np.exp(s - s.max(axis=-1, keepdims=True))
        a /= a.sum(axis=-1, keepdims=True)
        o = merge(a @ v)
        r = o @ Wo - target
        dout = 2 * r / count
        x2 = x.reshape(-1, dim)
        dWo = o.reshape(-1, dim).T @ dout.reshape(-1, dim)
        do = split(dout @ Wo.T)
        da = do @ v.swapaxes(-1, -2)
        dv = a.swapaxes(-1, -2) @ do
        ds = a * (da - (da * a).sum(axis=-1, keepdims=True)) * scale
        dq, dk = ds @ k, ds.swapaxes(-1, -2) @ q
        grads = [x2.T @ merge(d).reshape(-1, dim) for d in (dq, dk, dv)] + [dWo]
        return (r * r).mean(), grads

    def torch_fn(Wq, Wk, Wv, Wo, x, target):
        import torch.nn.functional as F

        def split(a):
            return a.view(batch, seq, heads, dh).transpose(1, 2)

        o = F.scaled_dot_product_attention(split(x @ Wq), split(x @ Wk), split(x @ Wv))
        return F.mse_loss(o.transpose(1, 2).reshape(batch, seq, dim) @ Wo, target)

    def jax_fn(Wq, Wk, Wv, Wo, x, target):
        import jax
        import jax.numpy as jnp

        def split(a):
            return a.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3)

        q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
        a = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) * scale, axis=-1)
        o = (a @ v).transpose(0, 2, 1, 3).reshape(batch, seq, dim)
        return jnp.mean((o @ Wo - target) ** 2)

    def autograd_fn(params, x, target):
        import autograd.numpy as anp

        Wq, Wk, Wv, Wo = params

        def split(a):
            return anp.transpose(anp.reshape(a, (batch, seq, heads, dh)), (0, 2, 1, 3))

        q, k, v = split(anp.dot(x, Wq)), split(anp.dot(x, Wk)), split(anp.dot(x, Wv))
        s = anp.matmul(q, anp.swapaxes(k, -1, -2)) * scale
        e = anp.exp(s - anp.max(s, axis=-1, keepdims=True))
        o = anp.matmul(e / anp.sum(e, axis=-1, keepdims=True), v)
        o = anp.reshape(anp.transpose(o, (0, 2, 1, 3)), (batch, seq, dim))
        return anp.mean((anp.dot(o, Wo) - target) ** 2)

    name = name or (f"attention_{heads}h_t{seq}")
    flops = (
        4 * 2 * batch * seq * dim * dim
        + 2 * 2 * batch * seq * seq * dim
        + 5 * batch * heads * seq * seq
    )
    return Workload(
        name,
        dtype,
        [Wq, Wk, Wv, Wo],
        [x, target],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"{heads}-head self-attention, batch {batch}, {seq} tokens, width {dim}, "
        "output projection, MSE to a target (PyTorch: F.scaled_dot_product_attention)",
        extra={"flops": 3 * flops},
    )


# ------------------------------------------------------------- convolution
def conv_net(
    dtype: str,
    rng,
    batch: int = 8,
    c_in: int = 3,
    size: int = 32,
    c_out: int = 16,
    k: int = 3,
    classes: int = 10,
    name: str = "conv2d_b8_32px",
) -> Workload:
    """Conv 3x3 (valid) + bias -> tanh -> global average pool -> linear -> cross-entropy.

    tracegrad has no convolution primitive: its version builds the im2col matrix from
    k*k shifted slices (tg.stack) and does one matmul, as a NumPy user would.
    PyTorch uses F.conv2d, JAX lax.conv_general_dilated; autograd the same im2col."""
    x = rng.standard_normal((batch, c_in, size, size)).astype(dtype)
    t = rng.integers(0, classes, size=batch).astype(np.int64)
    K = _init(rng, (c_out, c_in, k, k), dtype, c_in * k * k)
    bias = (0.1 * rng.standard_normal(c_out)).astype(dtype)
    Wfc = _init(rng, (c_out, classes), dtype, c_out)
    bfc = np.zeros(classes, dtype)
    out = size - k + 1
    offsets = [(i, j) for i in range(k) for j in range(k)]

    def tracegrad_fn(K, bias, Wfc, bfc, x, t_col):
        import tracegrad as tg

        cols = tg.stack(
            [x[:, :, i : i + out, j : j + out] for i, j in offsets], axis=2
        )  # B, C, k*k, H', W'
        cols = tg.reshape(cols, (batch, c_in * k * k, out * out))
        z = tg.reshape(K, (c_out, c_in * k * k)) @ cols + tg.reshape(bias, (c_out, 1))
        pooled = tg.mean(tg.tanh(z), axis=2)  # B, c_out
        return _tg_cross_entropy(pooled @ Wfc + bfc, t_col)

    def numpy_value_and_grad(params, data):
        (K, bias, Wfc, bfc), (x, t_col) = params, data
        cols = np.stack([x[:, :, i : i + out, j : j + out] for i, j in offsets], axis=2)
        cols = cols.reshape(batch, c_in * k * k, out * out)
        K2 = K.reshape(c_out, -1)
        h = np.tanh(K2 @ cols + bias[:, None])
        pooled = h.mean(axis=2)
        value, g = _cross_entropy_np(pooled @ Wfc + bfc, t_col[:, 0])
        dpooled = g @ Wfc.T
        dz = (dpooled[:, :, None] / (out * out)) * (1 - h * h)
        dK = np.einsum("bop,bcp->oc", dz, cols).reshape(K.shape)
        return value, [dK, dz.sum(axis=(0, 2)), pooled.T @ g, g.sum(axis=0)]

    def pytorch_style(K, bias, Wfc, bfc, x, t, F):
        pooled = F.conv2d(x, K, bias).tanh().mean(dim=(2, 3))
        return F.cross_entropy(pooled @ Wfc + bfc, t)

    def torch_fn(*args):
        import torch.nn.functional as F

        return pytorch_style(*args, F=F)

    def eager_fn(*args):  # the same code under `import tracegrad.eager as torch`
        import tracegrad.eager.nn.functional as F

        return pytorch_style(*args, F=F)

    def jax_fn(K, bias, Wfc, bfc, x, t):
        import jax
        import jax.numpy as jnp

        z = jax.lax.conv_general_dilated(x, K, (1, 1), "VALID") + bias[:, None, None]
        pooled = jnp.tanh(z).mean(axis=(2, 3))
        return _jax_cross_entropy(pooled @ Wfc + bfc, t)

    def autograd_fn(params, x, t):
        import autograd.numpy as anp

        K, bias, Wfc, bfc = params
        cols = anp.stack([x[:, :, i : i + out, j : j + out] for i, j in offsets], axis=2)
        cols = anp.reshape(cols, (batch, c_in * k * k, out * out))
        h = anp.tanh(anp.matmul(anp.reshape(K, (c_out, -1)), cols) + anp.reshape(bias, (c_out, 1)))
        return _autograd_cross_entropy(anp.dot(anp.mean(h, axis=2), Wfc) + bfc, t)

    conv = 2 * batch * c_out * c_in * k * k * out * out
    return Workload(
        name,
        dtype,
        [K, bias, Wfc, bfc],
        [x, t[:, None].copy()],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"conv {c_in}->{c_out} {k}x{k} on batch {batch} of {size}x{size}, tanh, average pool, "
        "linear, cross-entropy (tracegrad: im2col from shifted slices + matmul; "
        "PyTorch: F.conv2d; JAX: lax.conv_general_dilated)",
        torch_data=_targets_1d,
        peer_data=_targets_1d,
        eager_fn=eager_fn,
        extra={"flops": 3 * (conv + 4 * batch * c_out * out * out)},
    )


# --------------------------------------------------------------- LSTM scan
def lstm_scan(
    dtype: str,
    rng,
    steps: int = 20,
    batch: int = 32,
    n_in: int = 32,
    hidden: int = 64,
    name: str | None = None,
) -> Workload:
    """One LSTM layer over `steps` steps, loss sum(h_T^2); grads of Wx, Wh, b (gates i, f, g, o).

    tracegrad with tg.scan, JAX with lax.scan, PyTorch eager with torch.lstm (what
    nn.LSTM runs: one fused C++ loop), torch.compile and autograd with a Python loop
    over the cell (torch.compile of torch.lstm fails in float32, see torch_loop_fn)."""
    H = hidden
    Wx = _init(rng, (n_in, 4 * H), dtype, n_in)
    Wh = _init(rng, (H, 4 * H), dtype, H)
    b = (0.1 * rng.standard_normal(4 * H)).astype(dtype)
    xs = rng.standard_normal((steps, batch, n_in)).astype(dtype)
    h0 = np.zeros((batch, H), dtype)

    def tracegrad_fn(Wx, Wh, b, xs, h0):
        import tracegrad as tg

        def cell(carry, x):
            h, c = carry
            z = x @ Wx + h @ Wh + b
            i, f, o = tg.sigmoid(z[:, :H]), tg.sigmoid(z[:, H : 2 * H]), tg.sigmoid(z[:, 3 * H :])
            c = f * c + i * tg.tanh(z[:, 2 * H : 3 * H])
            return (o * tg.tanh(c), c), None

        (h, _), _ = tg.scan(cell, (h0, h0), xs)
        return tg.sum(h * h)

    def numpy_value_and_grad(params, data):
        (Wx, Wh, b), (xs, h0) = params, data
        sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
        h, c, tape = h0, h0, []
        for x in xs:
            z = x @ Wx + h @ Wh + b
            i, f, g, o = (
                sig(z[:, :H]),
                sig(z[:, H : 2 * H]),
                np.tanh(z[:, 2 * H : 3 * H]),
                sig(z[:, 3 * H :]),
            )
            c_new = f * c + i * g
            tape.append((x, h, c, i, f, g, o, np.tanh(c_new)))
            h, c = o * np.tanh(c_new), c_new
        dh, dc = 2 * h, np.zeros_like(c)
        dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
        for x, h_prev, c_prev, i, f, g, o, tc in reversed(tape):
            dc = dc + dh * o * (1 - tc * tc)
            dz = np.concatenate(
                [
                    dc * g * i * (1 - i),
                    dc * c_prev * f * (1 - f),
                    dc * i * (1 - g * g),
                    dh * tc * o * (1 - o),
                ],
                axis=1,
            )
            dWx += x.T @ dz
            dWh += h_prev.T @ dz
            db += dz.sum(axis=0)
            dh, dc = dz @ Wh.T, dc * f
        return (h * h).sum(), [dWx, dWh, db]

    def torch_fn(Wx, Wh, b, xs, h0):
        import torch

        state = (h0[None], h0[None])
        _, h, _ = torch.lstm(
            xs, state, [Wx.t(), Wh.t(), b, torch.zeros_like(b)], True, 1, 0.0, True, False, False
        )  # biases, layers, dropout, train, bidir, batch_first
        return (h * h).sum()

    def torch_loop_fn(Wx, Wh, b, xs, h0):
        # torch.compile of torch.lstm fails in float32 (TypeError: expected Tensor() for op:
        # torch.ops.aten.mkldnn_rnn_layer.default, torch 2.13 CPU): compiled users write the cell
        import torch

        h = c = h0
        for t in range(xs.shape[0]):
            i, f, g, o = (xs[t] @ Wx + h @ Wh + b).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return (h * h).sum()

    def jax_fn(Wx, Wh, b, xs, h0):
        import jax
        import jax.numpy as jnp

        def cell(carry, x):
            h, c = carry
            i, f, g, o = jnp.split(x @ Wx + h @ Wh + b, 4, axis=1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

        (h, _), _ = jax.lax.scan(cell, (h0, h0), xs)
        return jnp.sum(h * h)

    def autograd_fn(params, xs, h0):
        import autograd.numpy as anp

        Wx, Wh, b = params
        sig = lambda a: 0.5 * (anp.tanh(0.5 * a) + 1)  # noqa: E731
        h = c = h0
        for x in xs:
            z = anp.dot(x, Wx) + anp.dot(h, Wh) + b
            c = sig(z[:, H : 2 * H]) * c + sig(z[:, :H]) * anp.tanh(z[:, 2 * H : 3 * H])
            h = sig(z[:, 3 * H :]) * anp.tanh(c)
        return anp.sum(h * h)

    per_step = 2 * batch * (n_in + H) * 4 * H + 12 * batch * H
    return Workload(
        name or f"lstm_scan_t{steps}",
        dtype,
        [Wx, Wh, b],
        [xs, h0],
        tracegrad_fn,
        numpy_value_and_grad,
        torch_fn,
        jax_fn,
        autograd_fn,
        f"LSTM, batch {batch}, {n_in} inputs, {H} hidden, {steps} steps, loss sum(h_T^2): "
        "tg.scan / lax.scan / torch.lstm (nn.LSTM's kernel) / Python loop (torch.compile, autograd)",
        torch_compile_fn=torch_loop_fn,
        extra={"flops": 3 * steps * per_step, "steps": steps},
    )
