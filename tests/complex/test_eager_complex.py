"""Complex tensors in eager mode, PyTorch's conventions (issue 26).

`z.grad` is PyTorch's conjugate Wirtinger gradient (dL/dx + i dL/dy for a real
loss): the engine conjugates complex gradients into and out of each node of the
one rule table (whose rules are JAX's), so eager and compiled gradients are
conjugates of each other. Checked against torch where it is installed, with
tracegrad.gradcheck (which checks complex functions as PyTorch's gradcheck does),
and PyTorch's test/autograd/test_complex.py ported with its assertions.
"""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.eager.gradcheck import gradcheck

ZN = np.array([1 + 2j, 3 - 1j, -0.5 + 0.2j])
WN = np.array([0.3 - 1.1j, -1.2 + 0.4j, 0.8 + 0.9j])
XN = np.array([0.7, -1.3, 0.4])


# ---------------------------------------------------------------- dtypes


def test_complex_dtypes_and_names():
    assert torch.cfloat is torch.complex64 and torch.cdouble is torch.complex128
    assert repr(torch.complex64) == "torch.complex64"
    assert torch.complex128.is_complex and not torch.complex128.is_floating_point
    z = torch.tensor([1 + 2j])
    assert z.dtype == torch.complex64  # the default complex dtype, as in PyTorch
    assert z.is_complex() and torch.is_complex(z) and not z.is_floating_point()
    assert torch.zeros(2, dtype=torch.cdouble).dtype == torch.complex128


def test_promotion_follows_pytorch():
    f32, f64 = torch.ones(2), torch.ones(2, dtype=torch.float64)
    assert (f32 * 1j).dtype == torch.complex64
    assert (f64 * 1j).dtype == torch.complex128
    assert (torch.ones(2, dtype=torch.int64) * 1j).dtype == torch.complex64
    # a 0-d complex128 with a 1-d float32 keeps float32's precision (ATen's rule)
    assert (f32 * torch.tensor(1j, dtype=torch.complex128)).dtype == torch.complex64
    assert (torch.tensor([1j]) + f64).dtype == torch.complex128
    z = torch.tensor(ZN)
    assert z.abs().dtype == torch.float64 and z.real.dtype == torch.float64
    assert z.angle().dtype == torch.float64


def test_repr_matches_pytorch():
    assert repr(torch.tensor([1 + 2j, 3.5 - 1j])) == "tensor([1.0000+2.j, 3.5000-1.j])"
    assert repr(torch.tensor([1 + 2j], dtype=torch.complex128)) == (
        "tensor([1.+2.j], dtype=torch.complex128)"
    )
    z = torch.tensor(np.array([1 + 2j, -0.5 - 3j]), requires_grad=True)
    assert repr(z * 2) == (
        "tensor([ 2.+4.j, -1.-6.j], dtype=torch.complex128, grad_fn=<MulBackward0>)"
    )
    assert repr(torch.tensor(1 + 1j)) == "tensor(1.+1.j)"


def test_complex_real_imag_views_and_helpers():
    z = torch.tensor(ZN)
    np.testing.assert_array_equal(z.real.numpy(), ZN.real)
    np.testing.assert_array_equal(z.imag.numpy(), ZN.imag)
    np.testing.assert_array_equal(z.conj().numpy(), np.conj(ZN))
    np.testing.assert_array_equal(torch.view_as_real(z).numpy(), np.stack([ZN.real, ZN.imag], -1))
    back = torch.view_as_complex(torch.view_as_real(z))
    np.testing.assert_array_equal(back.numpy(), ZN)
    c = torch.complex(torch.tensor(XN), torch.tensor(XN * 2))
    assert c.dtype == torch.complex128
    np.testing.assert_array_equal(c.numpy(), XN + 2j * XN)
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex"):
        _ = torch.ones(2).imag
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        torch.view_as_complex(torch.ones(3, dtype=torch.float64))


def test_backward_of_complex_outputs_raises_pytorchs_errors():
    z = torch.tensor(ZN, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"^grad can be implicitly created only for real scalar outputs but got "
        r"torch.complex128",
    ):
        (z * z).sum().backward()
    with pytest.raises(RuntimeError, match=r"^grad can be implicitly created only for scalar"):
        (z * z).backward()
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        torch.autograd.grad((z * z).sum(), z)
    # an explicit grad_output is fine (PyTorch's convention: dL/d conj(out))
    (z * 2).backward(torch.tensor(np.ones(3, complex)))
    np.testing.assert_allclose(z.grad.numpy(), np.full(3, 2 + 0j))


def test_integer_requires_grad_message_names_complex():
    with pytest.raises(RuntimeError, match="floating point and complex dtype"):
        torch.tensor([1, 2], requires_grad=True)
    assert torch.tensor([1j], requires_grad=True).requires_grad


# ------------------------------------------------------------ against torch

LOSSES = {
    "abs": lambda m, z, w, x: (z * w).abs().sum(),
    "real_exp": lambda m, z, w, x: (z.exp() * w).real.sum(),
    "imag_div": lambda m, z, w, x: (z.sin() / w).imag.sum(),
    "angle": lambda m, z, w, x: (z * w).angle().sum(),
    "abs2_log_sqrt": lambda m, z, w, x: ((z.log() + w.sqrt()).abs() ** 2).sum(),
    "view_as_real_complex": lambda m, z, w, x: (
        (m.view_as_real(z * x) ** 2).sum() + (m.complex(x, x * x) * w).abs().mean()
    ),
    "conj_tanh_cos": lambda m, z, w, x: (
        (z.conj() * z.tanh()).real.sum() + (w.cos() * z).imag.mean()
    ),
    "pow": lambda m, z, w, x: ((z**2.5 + z**w).abs()).sum(),
    "matmul": lambda m, z, w, x: (
        (z.reshape(3, 1) @ w.reshape(1, 3)).abs().sum() + (m.outer(z, x) @ w).real.sum()
    ),
    "sum_mean_broadcast": lambda m, z, w, x: (
        (z.reshape(3, 1) * w).mean(0).abs().sum() + (z * 1j + x).sum().real
    ),
    # 0-d complex intermediates (their gradients are NumPy scalars), var, vdot, mH, sigmoid
    "zero_d": lambda m, z, w, x: z.mean().abs() + m.dot(z, w).abs() ** 2 + z.prod().real,
    "var_vdot": lambda m, z, w, x: z.var() + m.vdot(z, w).imag + (z * x).std(),
    "mH_sigmoid": lambda m, z, w, x: (m.outer(z, w).mH @ z).abs().sum() + z.sigmoid().real.sum(),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_values_and_gradients_match_torch(name):
    real_torch = pytest.importorskip("torch")
    loss = LOSSES[name]
    results = []
    for m in (torch, real_torch):
        z = m.tensor(ZN, requires_grad=True)
        w = m.tensor(WN, requires_grad=True)
        x = m.tensor(XN, requires_grad=True)
        out = loss(m, z, w, x)
        out.backward()
        grads = [None if t.grad is None else t.grad.numpy() for t in (z, w, x)]
        results.append((out.detach().numpy(), grads))
    (mine, my_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    for a, b in zip(my_grads, their_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_grad_of_grad_matches_torch():
    real_torch = pytest.importorskip("torch")
    results = []
    for m in (torch, real_torch):
        z = m.tensor(ZN, requires_grad=True)
        loss = (z * z.exp()).abs().sum()
        (g,) = m.autograd.grad(loss, z, create_graph=True)
        (gg,) = m.autograd.grad((g * g.conj()).real.sum(), z)
        results.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10)


# ------------------------------------------------- eager vs compiled (conj relation)


# written with tracegrad's NumPy-named functions, which take eager tensors and tracers
SHARED_LOSSES = {
    "abs": lambda z, w, x: tg.sum(tg.abs(z * w)),
    "real_exp": lambda z, w, x: tg.sum(tg.real(tg.exp(z) * w)) + tg.sum(x * x),
    "angle_log": lambda z, w, x: tg.sum(tg.angle(z * w) * tg.abs(tg.log(z))),
    "conj_tanh": lambda z, w, x: tg.sum(tg.real(tg.conj(z) * tg.tanh(z))) + tg.mean(tg.imag(w * z)),
    "matmul_complex_of_real": lambda z, w, x: (
        tg.sum(tg.abs(tg.reshape(z, (3, 1)) @ tg.reshape(w * x, (1, 3))))
        + tg.sum(tg.imag(x * (2 - 1j)))
    ),
}


@pytest.mark.parametrize("name", list(SHARED_LOSSES))
def test_eager_grad_is_conj_of_compiled_grad(name):
    """PyTorch's z.grad = conj(JAX's grad): the same rule table serves both modes."""
    loss = SHARED_LOSSES[name]
    z, w, x = (torch.tensor(v, requires_grad=True) for v in (ZN, WN, XN))
    loss(z, w, x).backward()
    compiled = tg.grad(loss, argnums=(0, 1, 2), backend="interpret")(ZN, WN, XN)
    for t, g in zip((z, w, x), compiled, strict=True):
        eager_grad = np.zeros_like(g) if t.grad is None else t.grad.numpy()
        assert eager_grad.dtype == g.dtype
        np.testing.assert_allclose(eager_grad, np.conj(g), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- gradcheck


def test_gradcheck_complex_inputs_and_outputs():
    z = torch.tensor(ZN, requires_grad=True)
    x = torch.tensor(XN, requires_grad=True)
    assert gradcheck(lambda t: (t * t.conj().exp()).sum(), (z,))
    assert gradcheck(
        lambda t, x: (
            t * x,
            (t.abs() * x).sum(),
            t.angle(),
            torch.view_as_real(t * t),
            torch.complex(x, x * x),
        ),
        (z, x),
    )
    assert gradcheck(lambda t: t.exp() * t.sin() / (1 + t), (z,))


def test_gradcheck_catches_a_wrong_complex_convention():
    """A custom Function returning JAX's gradient (the conjugate) fails gradcheck."""

    class AbsJaxConvention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z.abs()

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            return g * z.conj() / z.abs()  # PyTorch's is g * z / |z|

    z = torch.tensor(ZN, requires_grad=True)
    with pytest.raises(tg.GradcheckError if hasattr(tg, "GradcheckError") else RuntimeError):
        gradcheck(AbsJaxConvention.apply, (z,))


# ------------------------------------------- PyTorch test/autograd/test_complex.py


def test_view_func_for_complex_views():
    # case 1: both parent and child have view_func
    x = torch.randn(2, 2, 2, dtype=torch.double, requires_grad=True)
    y = x.detach().requires_grad_(True)

    x0 = x.clone()
    x1 = torch.view_as_complex(x0)
    x2 = torch.view_as_real(x1)
    x2.mul_(2)
    x2.sum().abs().backward()

    y0 = y.clone()
    y0.mul_(2)
    y0.sum().abs().backward()

    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy())

    # case 2: parent has view_func but child does not
    x = torch.randn(2, 2, 2, dtype=torch.double, requires_grad=True)
    y = x.detach().requires_grad_(True)

    def fn(a):
        b = a.clone()
        b1 = torch.view_as_complex(b)
        b2 = b1.reshape(b1.numel())
        return b2

    x0 = fn(x)
    x0.mul_(2)
    x0.sum().abs().backward()

    y0 = fn(y)
    y1 = y0.mul(2)
    y1.sum().abs().backward()

    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy())

    # case 3: parent does not have a view_func but child does
    x = torch.randn(10, dtype=torch.cdouble, requires_grad=True)
    y = x.detach().requires_grad_(True)

    def fn3(a, dim0_size=5):
        b = a.clone()
        b1 = b.reshape(dim0_size, 2)
        b2 = torch.view_as_real(b1)
        return b2

    x0 = fn3(x)
    x0.mul_(2)
    x0.sum().abs().backward()

    y0 = fn3(y)
    y1 = y0.mul(2)
    y1.sum().abs().backward()

    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy())


def test_as_identity():
    # view_as_real and view_as_complex behavior should be like an identity
    def func(z):
        z_ = torch.view_as_complex(z)
        z_select = torch.select(z_, z_.dim() - 1, 0)
        z_select_real = torch.view_as_real(z_select)
        return z_select_real.sum()

    z = torch.randn(10, 2, 2, dtype=torch.double, requires_grad=True)
    assert gradcheck(func, [z])
    func(z).backward()

    z1 = z.detach().clone().requires_grad_(True)
    torch.select(z1, z1.dim() - 2, 0).sum().backward()

    np.testing.assert_allclose(z.grad.numpy(), z1.grad.numpy())


def test_compiled_eager_code_with_complex_tensors_matches_eager():
    """tg.compile of PyTorch-style code (the captured path) keeps PyTorch's gradient
    convention: its compiled backward (JAX's vjp) is conjugated like an eager node."""

    @tg.compile(backend="interpret")
    def f(a, b):
        return (a * b).abs().sum() + (a.conj() * b).real.sum()

    b = torch.tensor(WN)
    a = torch.tensor(ZN, requires_grad=True)
    out = f(a, b)
    out.backward()
    a2 = torch.tensor(ZN, requires_grad=True)
    ((a2 * b).abs().sum() + (a2.conj() * b).real.sum()).backward()
    np.testing.assert_allclose(
        out.item(), ((ZN * WN).__abs__().sum() + (np.conj(ZN) * WN).real.sum())
    )
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-12)


def test_random_complex_tensors_follow_pytorch():
    torch.manual_seed(0)
    z = torch.randn(20000, dtype=torch.cfloat)
    assert z.dtype == torch.complex64
    d = z.numpy()
    assert abs(d.real.var() - 0.5) < 0.03 and abs(d.imag.var() - 0.5) < 0.03
    r = torch.rand(20000, dtype=torch.cdouble).numpy()
    assert 0 <= r.real.min() and r.real.max() < 1 and 0 <= r.imag.min() and r.imag.max() < 1
    assert abs(r.imag.mean() - 0.5) < 0.02


def test_grad_output_of_the_other_kind_raises_pytorchs_error():
    z = torch.tensor(ZN, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"^For complex Tensors, both grad_output and output are required to have the same "
        r"dtype. Mismatch in dtype: grad_output\[0\] has a dtype of torch.float64 and output\[0\] "
        r"has a dtype of torch.complex128.",
    ):
        (z * 2).backward(torch.ones(3, dtype=torch.float64))
    x = torch.tensor(XN, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad_output\\[0\\] has a dtype of torch.complex128"):
        (x * 2).backward(torch.tensor(np.ones(3, complex)))


def test_gradgradcheck_complex_functions():
    """Second derivatives through the conjugating nodes (create_graph records the conj
    ops), checked as PyTorch's gradgradcheck does (complex grad_outputs)."""
    z = torch.tensor(np.array([1 + 2j, 0.5 - 0.7j]), requires_grad=True)
    x = torch.tensor(np.array([0.3, -1.1]), requires_grad=True)
    check = torch.autograd.gradgradcheck
    assert check(lambda t: t.exp() * t.sin(), (z,))
    assert check(lambda t: (t * t.conj()).real.sum() + t.abs().sum(), (z,))
    assert check(lambda t, x: torch.view_as_real(t * x), (z, x))
    assert check(lambda t: torch.fft.fft(t * t), (z,))
    assert check(lambda t: t.angle() * t.abs(), (z,))
