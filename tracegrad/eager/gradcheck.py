"""Finite-difference gradient check in float64 (like torch.autograd.gradcheck).

`gradcheck(fn, inputs)` compares the Jacobian that eager backward computes
with central finite differences, entry by entry, and returns True or raises
`GradcheckError` listing the entries that disagree.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager.gradcheck import gradcheck  # also tracegrad.gradcheck
    >>> x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    >>> gradcheck(lambda t: (t.tanh() * t).sum(dim=0), (x,))
    True

`fn` may take eager tensors or NumPy arrays (arrays are handed to `fn` as
eager tensors, so functions written with tracegrad ops work unchanged) and may
return one tensor or a tuple of tensors.

Complex inputs and outputs are checked as PyTorch's gradcheck checks them: each
complex number is its two real coordinates (real part, imaginary part), so the
real Jacobian of (Re out, Im out) in (Re z, Im z) is compared entry by entry. The
analytical row of Re out comes from backward with grad_output 1, that of Im out
with grad_output 1j, each read as (Re z.grad, Im z.grad): this checks PyTorch's
conjugate Wirtinger convention (z.grad = dL/dx + i dL/dy for real L).

    >>> z = torch.randn(2, dtype=torch.complex128, requires_grad=True)
    >>> gradcheck(lambda t: (t * t.conj().exp()).sum(), (z,))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad.ops.core import TracegradError


class GradcheckError(TracegradError, RuntimeError):
    """Analytical and numerical Jacobians disagree (the message lists where)."""


def _eager():
    import tracegrad.eager as eager

    return eager


def _prepare(inputs) -> tuple[list, list[int]]:
    """float64 leaf copies of the differentiable inputs; the indices that are checked."""
    eager = _eager()
    Tensor = eager.Tensor
    if isinstance(inputs, (Tensor, np.ndarray)):
        inputs = (inputs,)
    prepared, checked = [], []
    any_requires_grad = any(isinstance(a, Tensor) and a.requires_grad for a in inputs)
    for i, a in enumerate(inputs):
        if isinstance(a, Tensor):
            inexact = a.is_floating_point() or a.is_complex()
            differentiable = a.requires_grad or (not any_requires_grad and inexact)
            if differentiable:
                data = a.detach().numpy()
                t = eager.tensor(data.astype(_wide(data.dtype)), requires_grad=True)
                prepared.append(t)
                checked.append(i)
            else:
                prepared.append(a)
        elif isinstance(a, np.ndarray) and a.dtype.kind in "fc":
            prepared.append(eager.tensor(a.astype(_wide(a.dtype)), requires_grad=True))
            checked.append(i)
        else:
            prepared.append(a)
    if not checked:
        raise ValueError("gradcheck expects at least one floating-point input that requires grad")
    return prepared, checked


def _wide(dtype: np.dtype) -> type:
    return np.complex128 if dtype.kind == "c" else np.float64


def _coords(t) -> int:
    """Real coordinates of a tensor: numel, twice that for complex ones."""
    return t.numel() * (2 if t.is_complex() else 1)


def _outputs(result) -> list:
    eager = _eager()
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    fixed = []
    for o in outs:
        if isinstance(o, np.ndarray):
            o = eager.tensor(o)
        if not isinstance(o, eager.Tensor):
            raise TypeError(f"gradcheck: fn must return tensors, got {type(o).__name__}")
        fixed.append(o)
    return fixed


def _numerical(fn, args: list, checked: list[int], eps: float) -> list:
    """J_num[out][inp] of shape (out coords, inp coords), by central differences (a
    complex input is perturbed along its real and then its imaginary parts)."""
    # Grad mode stays on: fn may itself call autograd.grad (second-order checks).
    base = _outputs(fn(*args))
    like = [(tuple(o.shape), o.dtype) for o in base]
    jac = [[np.zeros((_coords(o), _coords(args[i]))) for i in checked] for o in base]
    for col, i in enumerate(checked):
        data = args[i].detach().numpy()
        flat = data.reshape(-1)
        if not np.shares_memory(flat, data):  # must perturb the leaf's own memory
            raise AssertionError("gradcheck: prepared inputs must be C-contiguous")
        steps = (eps, 1j * eps) if data.dtype.kind == "c" else (eps,)
        for part, step in enumerate(steps):
            for k in range(flat.size):
                orig = flat[k]
                flat[k] = orig + step
                plus = _flat_values(fn(*args), like)
                flat[k] = orig - step
                minus = _flat_values(fn(*args), like)
                flat[k] = orig
                for r, (p, m) in enumerate(zip(plus, minus, strict=True)):
                    jac[r][col][:, part * flat.size + k] = (p - m) / (2 * eps)
    return jac


def _flat_values(result, like: list) -> list:
    out = []
    outs = _outputs(result)
    if len(outs) != len(like):
        raise AssertionError(
            "gradcheck: fn must return the same number of outputs when inputs are perturbed"
        )
    for o, (shape, dtype) in zip(outs, like, strict=True):
        if tuple(o.shape) != shape:
            raise AssertionError(
                "Expected `func` to return outputs with the same shape when inputs are "
                f"perturbed, but got: shapes {tuple(o.shape)} and {shape}."
            )
        if o.dtype != dtype:
            raise AssertionError(
                "Expected `func` to return outputs with the same dtype when inputs are "
                f"perturbed, but got: dtypes {o.dtype} and {dtype}."
            )
        v = o.detach().numpy().reshape(-1)
        out.append(np.concatenate([v.real, v.imag]) if v.dtype.kind == "c" else v.astype(float))
    return out


def _vjp_rows(eager, out, inputs, seed) -> list:
    """(Re, Im)-flattened gradients of `inputs` for grad_output `seed` (None: unused)."""
    grads = eager.autograd.grad(
        [out], inputs, [eager.tensor(seed.reshape(out.shape))], retain_graph=True, allow_unused=True
    )
    rows: list[np.ndarray | None] = []
    for g in grads:
        if g is None:
            rows.append(None)
            continue
        v = g.numpy().reshape(-1)
        rows.append(np.concatenate([v.real, v.imag]) if v.dtype.kind == "c" else v)
    return rows


def _check_backward_basics(fn, args: list, checked: list[int], jac: list, nondet_tol: float):
    """PyTorch's two extra checks of backward: a zero grad_output gives zero gradients
    ("backward not multiplied by grad_output"), and running backward again gives the
    same gradients up to nondet_tol ("Backward is not reentrant")."""
    eager = _eager()
    outs = _outputs(fn(*args))
    inputs = [args[i] for i in checked]
    for r, out in enumerate(outs):
        if not out.requires_grad or out.numel() == 0:
            continue
        dtype = out.numpy(force=True).dtype
        for row in _vjp_rows(eager, out, inputs, np.zeros(out.numel(), dtype)):
            if row is not None and np.any(row != 0):
                raise GradcheckError(
                    "backward not multiplied by grad_output: a zero grad_output for output "
                    f"{r} gave a nonzero gradient"
                )
        seed = np.zeros(out.numel(), dtype)
        seed[0] = 1
        for col, row in enumerate(_vjp_rows(eager, out, inputs, seed)):
            first = jac[r][col][0]
            got = np.zeros_like(first) if row is None else row
            if np.max(np.abs(got - first), initial=0.0) > nondet_tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient. The tolerance for nondeterminism "
                    f"was {nondet_tol}."
                )


def _analytical(fn, args: list, checked: list[int]) -> list:
    """J_ana[out][inp] from one eager backward per output coordinate (grad_output 1 for
    a real part, 1j for an imaginary part; a complex input's row is (Re, Im) of its grad)."""
    eager = _eager()
    outs = _outputs(fn(*args))
    inputs = [args[i] for i in checked]
    jac = [[np.zeros((_coords(o), _coords(t))) for t in inputs] for o in outs]
    for r, out in enumerate(outs):
        if not out.requires_grad:
            continue  # a constant output: its Jacobian is zero
        n = out.numel()
        dtype = out.numpy(force=True).dtype
        units = (1, 1j) if dtype.kind == "c" else (1,)
        for part, unit in enumerate(units):
            for j in range(n):
                seed = np.zeros(n, dtype=dtype)
                seed[j] = unit
                grads = eager.autograd.grad(
                    [out],
                    inputs,
                    [eager.tensor(seed.reshape(out.shape))],
                    retain_graph=True,
                    allow_unused=True,
                )
                for col, g in enumerate(grads):
                    if g is not None:
                        v = g.numpy().reshape(-1)
                        row = np.concatenate([v.real, v.imag]) if v.dtype.kind == "c" else v
                        jac[r][col][part * n + j, :] = row
    return jac


def gradcheck(
    fn: Callable[..., Any],
    inputs: Sequence[Any] | Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
) -> bool:
    """True if eager backward agrees with finite differences for every Jacobian entry.

    Float inputs are copied to float64 leaves (complex ones to complex128, checked as
    their real and imaginary coordinates, as PyTorch does); an entry passes when
    |analytical - numerical| <= atol + rtol * |numerical|. As PyTorch's, it also checks
    that backward is linear in grad_output (zero in, zero out) and repeatable (within
    nondet_tol).
    """
    args, checked = _prepare(inputs)
    numerical = _numerical(fn, args, checked, eps)
    analytical = _analytical(fn, args, checked)
    outs = _outputs(fn(*args))
    if not any(o.requires_grad for o in outs):
        if any(np.any(n != 0) for row in numerical for n in row):
            if not raise_exception:
                return False
            raise GradcheckError(
                "Numerical gradient for function expected to be zero (no output of the "
                "function requires grad, but changing the inputs changes the outputs)"
            )
        return True
    problems = []
    for r, (num_row, ana_row) in enumerate(zip(numerical, analytical, strict=True)):
        for col, (n, a) in enumerate(zip(num_row, ana_row, strict=True)):
            bad = np.abs(a - n) > atol + rtol * np.abs(n)
            bad |= np.isnan(a) != np.isnan(n)
            for out_i, in_i in zip(*np.nonzero(bad), strict=True):
                problems.append(
                    (r, checked[col], int(out_i), int(in_i), a[out_i, in_i], n[out_i, in_i])
                )
    if not problems:
        try:
            _check_backward_basics(fn, args, checked, analytical, nondet_tol)
        except GradcheckError:
            if not raise_exception:
                return False
            raise
        return True
    if not raise_exception:
        return False
    lines = [
        f"  output {r}[{o}] wrt input {i}[{k}]: analytical {a:.8g}, numerical {n:.8g}"
        for r, i, o, k, a, n in problems[:20]
    ]
    more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""

    def imag_row(p) -> bool:  # the entry of an imaginary part of a complex output
        out = outs[p[0]]
        return out.is_complex() and p[2] >= out.numel()

    first = next((p for p in problems if imag_row(p)), problems[0])
    where = (
        "While considering the imaginary part of complex outputs only, " if imag_row(first) else ""
    )
    raise GradcheckError(
        f"{where}Jacobian mismatch for output {first[0]} with respect to input {first[1]}: "
        f"{len(problems)} entr{'y' if len(problems) == 1 else 'ies'} differ "
        f"(eps={eps}, atol={atol}, rtol={rtol}):\n" + "\n".join(lines) + more
    )
