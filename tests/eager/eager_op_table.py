"""One table of eager ops, shared by the gradcheck tests and the PyTorch cross-check.

Each entry: (id, fn(M, *tensors), input shapes, domain). `M` is the module
(`tracegrad.eager` or `torch`), so one lambda runs in both libraries.
domain: "any" (standard normal), "pos" (0.5..2), "away" (|x| in 0.3..2, away from kinks).
"""

from __future__ import annotations

import numpy as np

OPS = [
    # arithmetic, with broadcasting and Python scalars on either side
    ("add", lambda M, a, b: a + b, [(3, 4), (4,)], "any"),
    ("add_scalar_left", lambda M, a: 2.5 + a, [(3,)], "any"),
    ("sub", lambda M, a, b: a - b, [(2, 3), (2, 1)], "any"),
    ("rsub", lambda M, a: 1.0 - a, [(3,)], "any"),
    ("mul", lambda M, a, b: a * b, [(2, 1, 3), (4, 1)], "any"),
    ("mul_scalar_left", lambda M, a: 3.0 * a, [(3,)], "any"),
    ("div", lambda M, a, b: a / b, [(2, 3), (3,)], "pos"),
    ("rdiv", lambda M, a: 2.0 / a, [(3,)], "pos"),
    ("pow_scalar", lambda M, a: a**3, [(2, 3)], "any"),
    ("pow_half", lambda M, a: a**0.5, [(4,)], "pos"),
    ("pow_tensor", lambda M, a, b: a**b, [(2, 3), (3,)], "pos"),
    ("rpow", lambda M, a: 2.0**a, [(3,)], "any"),
    ("neg", lambda M, a: -a, [(3,)], "any"),
    ("neg_fn", lambda M, a: M.neg(a), [(2, 2)], "any"),
    ("abs", lambda M, a: M.abs(a), [(5,)], "away"),
    # elementwise functions
    ("exp", lambda M, a: M.exp(a), [(2, 3)], "any"),
    ("log", lambda M, a: M.log(a), [(2, 3)], "pos"),
    ("sqrt", lambda M, a: M.sqrt(a), [(2, 3)], "pos"),
    ("sin", lambda M, a: a.sin(), [(4,)], "any"),
    ("cos", lambda M, a: a.cos(), [(4,)], "any"),
    ("tanh", lambda M, a: M.tanh(a), [(2, 3)], "any"),
    ("sigmoid", lambda M, a: M.sigmoid(a), [(2, 3)], "any"),
    ("relu", lambda M, a: M.relu(a), [(6,)], "away"),
    ("maximum", lambda M, a, b: M.maximum(a, b), [(3, 4), (4,)], "any"),
    ("minimum", lambda M, a, b: M.minimum(a, b), [(3, 1), (1, 4)], "any"),
    ("clamp", lambda M, a: M.clamp(a, -0.5, 0.5), [(8,)], "away"),
    ("clamp_min", lambda M, a: a.clamp(min=0.1), [(8,)], "away"),
    ("where", lambda M, a, b: M.where(a > 0, a, b), [(3, 4), (4,)], "away"),
    ("where_scalar", lambda M, a: M.where(a > 0, a, 0.0), [(3, 4)], "away"),
    ("square", lambda M, a: M.square(a), [(3,)], "any"),
    # matmul
    ("matmul_mm", lambda M, a, b: a @ b, [(3, 4), (4, 2)], "any"),
    ("matmul_mv", lambda M, a, b: M.matmul(a, b), [(3, 4), (4,)], "any"),
    ("matmul_dot", lambda M, a, b: a @ b, [(4,), (4,)], "any"),
    ("matmul_vm", lambda M, a, b: a @ b, [(4,), (4, 2)], "any"),
    ("matmul_batched", lambda M, a, b: a @ b, [(2, 3, 4), (2, 4, 5)], "any"),
    ("matmul_bcast", lambda M, a, b: a @ b, [(2, 3, 4), (4, 5)], "any"),
    ("mm", lambda M, a, b: M.mm(a, b), [(2, 3), (3, 2)], "any"),
    # reductions
    ("sum_all", lambda M, a: a.sum(), [(3, 4)], "any"),
    ("sum_dim", lambda M, a: M.sum(a, dim=1), [(3, 4)], "any"),
    ("sum_keepdim", lambda M, a: a.sum(dim=0, keepdim=True), [(3, 4)], "any"),
    ("sum_dims", lambda M, a: a.sum(dim=(0, 2)), [(2, 3, 4)], "any"),
    ("mean_all", lambda M, a: a.mean(), [(3, 4)], "any"),
    ("mean_dim", lambda M, a: M.mean(a, dim=-1, keepdim=True), [(3, 4)], "any"),
    ("max_all", lambda M, a: a.max(), [(3, 4)], "any"),
    ("min_all", lambda M, a: M.min(a), [(3, 4)], "any"),
    ("max_dim", lambda M, a: M.max(a, dim=1).values, [(3, 4)], "any"),
    ("max_dim_keep", lambda M, a: a.max(dim=0, keepdim=True)[0], [(3, 4)], "any"),
    ("min_dim", lambda M, a: a.min(1).values, [(3, 4)], "any"),
    ("var_all", lambda M, a: a.var(), [(3, 4)], "any"),
    ("var_dim", lambda M, a: M.var(a, dim=1), [(3, 4)], "any"),
    ("var_biased", lambda M, a: a.var(dim=0, unbiased=False, keepdim=True), [(3, 4)], "any"),
    ("logsumexp", lambda M, a: M.logsumexp(a, dim=1), [(3, 4)], "any"),
    ("softmax", lambda M, a: M.softmax(a, dim=1), [(3, 4)], "any"),
    ("log_softmax", lambda M, a: a.log_softmax(dim=-1), [(3, 4)], "any"),
    # shape ops
    ("reshape", lambda M, a: a.reshape(4, 3), [(3, 4)], "any"),
    ("reshape_infer", lambda M, a: M.reshape(a, (-1,)), [(3, 4)], "any"),
    ("view", lambda M, a: a.view(2, 6), [(3, 4)], "any"),
    ("transpose", lambda M, a: a.transpose(0, 1), [(3, 4)], "any"),
    ("transpose3", lambda M, a: M.transpose(a, 0, 2), [(2, 3, 4)], "any"),
    ("T", lambda M, a: a.T, [(3, 4)], "any"),
    ("t", lambda M, a: a.t(), [(3, 4)], "any"),
    ("permute", lambda M, a: a.permute(2, 0, 1), [(2, 3, 4)], "any"),
    ("squeeze", lambda M, a: a.squeeze(), [(3, 1, 4)], "any"),
    ("squeeze_dim", lambda M, a: a.squeeze(1), [(3, 1, 4)], "any"),
    ("unsqueeze", lambda M, a: a.unsqueeze(0), [(3, 4)], "any"),
    ("unsqueeze_neg", lambda M, a: M.unsqueeze(a, -1), [(3, 4)], "any"),
    ("expand", lambda M, a: a.expand(3, 4), [(1, 4)], "any"),
    ("expand_new", lambda M, a: a.expand(2, 3, -1), [(3, 4)], "any"),
    ("flatten", lambda M, a: a.flatten(), [(2, 3, 4)], "any"),
    ("flatten_part", lambda M, a: M.flatten(a, 1), [(2, 3, 4)], "any"),
    ("cat", lambda M, a, b: M.cat([a, b], dim=0), [(2, 3), (4, 3)], "any"),
    ("cat_dim1", lambda M, a, b: M.cat([a, b, a], dim=1), [(2, 3), (2, 1)], "any"),
    ("stack", lambda M, a, b: M.stack([a, b]), [(2, 3), (2, 3)], "any"),
    ("stack_dim1", lambda M, a, b: M.stack([a, b], dim=1), [(2, 3), (2, 3)], "any"),
    # indexing
    ("index_int", lambda M, a: a[1], [(3, 4)], "any"),
    ("index_slice", lambda M, a: a[1:], [(3, 4)], "any"),
    ("index_step", lambda M, a: a[::2, 1:3], [(5, 4)], "any"),
    ("index_none", lambda M, a: a[None], [(3, 4)], "any"),
    ("index_mixed", lambda M, a: a[0, 1:], [(3, 4)], "any"),
    ("index_tensor", lambda M, a: a[M.tensor([0, 2, 0])], [(3, 4)], "any"),
    ("index_mask", lambda M, a: a[a > 0], [(3, 4)], "away"),
    ("index_ellipsis", lambda M, a: a[..., 1], [(2, 3, 4)], "any"),
    # compositions
    ("mlp_layer", lambda M, x, w, b: M.relu(x @ w + b).sum(dim=1), [(4, 3), (3, 5), (5,)], "away"),
    ("seed_z", lambda M, x, y: x * y + x**2, [(1,), (1,)], "any"),
]


def make_inputs(shapes, domain, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in shapes:
        if domain == "pos":
            a = rng.uniform(0.5, 2.0, shape)
        elif domain == "away":
            a = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            a = rng.standard_normal(shape)
        arrays.append(np.asarray(a, dtype=dtype))
    return arrays


# ------------------------------------------------ shared by the linalg cross-checks


def float64_leaves(T, arrays):
    """float64 leaf tensors of module T (tracegrad.eager or torch)."""
    return [T.tensor(a, dtype=T.float64, requires_grad=True) for a in arrays]


def weighted_backward(T, fn, arrays, create_graph=False):
    """(value, grad_fn name, grads of a weighted sum of fn's output[, second
    derivatives of sum(grad**2)]) in module T, for comparing two libraries."""
    leaves = float64_leaves(T, arrays)
    out = fn(T, *leaves)
    weights = T.tensor(
        np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)), dtype=T.float64
    )
    grads = T.autograd.grad((out * weights).sum(), leaves, create_graph=create_graph)
    second = None
    if create_graph:  # d/dx of sum(grad * grad): double backward through every vjp rule
        second = T.autograd.grad(sum((g * g).sum() for g in grads), leaves)
        second = [s.detach().numpy() for s in second]
    return (out.detach().numpy(), out.grad_fn.name(), [g.detach().numpy() for g in grads], second)
