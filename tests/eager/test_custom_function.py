"""Custom autograd functions (torch.autograd.Function) in tracegrad.eager.

Every case is a function of the module `M` (tracegrad.eager or torch): it runs the
same code, checks what can be derived by hand, and returns values, gradients, node
names and error texts. `test_case` runs it under tracegrad.eager alone;
`test_case_matches_torch` runs it under real PyTorch too and compares the returns
(values to 1e-5, texts exactly). Cases come from PyTorch's tutorials ("Extending
torch.autograd", "Double Backward with Custom Functions", LegendrePolynomial3 in
"Learning PyTorch with examples") and from the Function tests of PyTorch's
test/test_autograd.py (named after them).
"""

from __future__ import annotations

import contextlib
import gc
import math
import warnings

import numpy as np
import pytest

import tracegrad.eager as tg
from tracegrad.eager.gradcheck import GradcheckError

RNG = np.random.default_rng(13)
A33 = RNG.standard_normal((3, 3))
B33 = RNG.standard_normal((3, 3))
V5 = RNG.standard_normal(5)
W45 = RNG.standard_normal((4, 5))
X25 = RNG.standard_normal((2, 5))
BIAS4 = RNG.standard_normal(4)


def _err(fn):
    """(exception class name, message) of what fn raises, or None."""
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return None


def _t(M, a, grad=True, dtype=None):
    return M.tensor(np.array(a), dtype=dtype or M.float64, requires_grad=grad)


def _np(value):
    """Tensors of either library as arrays, recursively; other values unchanged."""
    if isinstance(value, (list, tuple)):
        return type(value)(_np(v) for v in value)
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().numpy().copy()
    return value


@contextlib.contextmanager
def _young_gc():
    """gc.collect() inside scans only objects made inside (torch's are frozen first)."""
    gc.freeze()  # (kept frozen afterwards: unfreezing made the next test's setup
    yield  # collect and freeze the whole heap again, ~3 s each with torch loaded)


def _name(node) -> str | None:
    return None if node is None else node.name().split("::")[-1]


# ==================================================================== tutorials


def case_legendre_training(M):
    """ "Learning PyTorch with examples": fit sin(x) with a + b * P3(c + d x), P3 a custom
    Function (200 of the tutorial's 2000 steps)."""

    class LegendrePolynomial3(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input**3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input**2 - 1)

    dtype = M.float
    x = M.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = M.sin(x)
    a = M.full((), 0.0, dtype=dtype, requires_grad=True)
    b = M.full((), -1.0, dtype=dtype, requires_grad=True)
    c = M.full((), 0.0, dtype=dtype, requires_grad=True)
    d = M.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    losses = []
    for _ in range(200):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with M.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    assert losses[-1] < 0.4 * losses[0] and all(np.diff(losses) < 0)
    assert (
        _name(y_pred.grad_fn.next_functions[1][0].next_functions[1][0])
        == "LegendrePolynomial3Backward"
    )
    return np.array(losses), [a, b, c, d]


def _linear_function(M):
    class LinearFunction(M.autograd.Function):
        @staticmethod
        def forward(input, weight, bias):
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight, bias)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    return LinearFunction


def case_extending_linear_function(M):
    """ "Extending torch.autograd": LinearFunction (setup_context style, needs_input_grad),
    with and without bias, inside an nn.Module with Parameters."""
    LinearFunction = _linear_function(M)
    x, w, b = _t(M, X25, grad=False), _t(M, W45), _t(M, BIAS4)
    out = LinearFunction.apply(x, w, b)
    np.testing.assert_allclose(_np(out), X25 @ W45.T + BIAS4, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(_np(w.grad), np.ones((2, 4)).T @ X25, rtol=1e-12)
    no_bias = LinearFunction.apply(x, w, None)
    seen = []

    class Linear(M.nn.Module):
        def __init__(self, input_features, output_features, bias=True):
            super().__init__()
            self.weight = M.nn.Parameter(M.tensor(W45.astype(np.float32)))
            self.bias = M.nn.Parameter(M.tensor(BIAS4.astype(np.float32))) if bias else None

        def forward(self, input):
            return LinearFunction.apply(input, self.weight, self.bias)

    assert M.autograd.gradcheck(LinearFunction.apply, (_t(M, X25), w, b), eps=1e-6, atol=1e-4)
    layer = Linear(5, 4)
    inp = M.tensor(X25.astype(np.float32), requires_grad=True)
    layer(inp).pow(2).sum().backward()
    seen.append(out.grad_fn.next_functions)
    return (
        out,
        w.grad,
        b.grad,
        no_bias,
        no_bias.requires_grad,
        layer.weight.grad,
        layer.bias.grad,
        inp.grad,
        [_name(n) for n, _ in seen[0]],
        _name(out.grad_fn),
        type(out.grad_fn).__name__,
    )


def case_extending_mul_constant(M):
    """MulConstant: a Python number argument gets a None gradient; next_functions lists
    the tensor arguments only."""

    class MulConstant(M.autograd.Function):
        @staticmethod
        def forward(tensor, constant):
            return tensor * constant

        @staticmethod
        def setup_context(ctx, inputs, output):
            tensor, constant = inputs
            ctx.constant = constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    x = _t(M, V5)
    y = MulConstant.apply(x, 2.5)
    (y * y).sum().backward()
    np.testing.assert_allclose(_np(x.grad), 2 * 2.5 * 2.5 * V5, rtol=1e-12)
    return y, x.grad, len(y.grad_fn.next_functions), y.grad_fn.constant


def case_extending_my_cube(M):
    """MyCube: two outputs (the second is the derivative, saved) so the backward is
    differentiable; grad and grad of grad."""

    class MyCube(M.autograd.Function):
        @staticmethod
        def forward(x):
            result = x**3
            dx = 3 * x**2
            return result, dx

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            result, dx = output
            ctx.save_for_backward(x, dx)

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            result = grad_output * dx + grad_dx * 6 * x
            return result

    def my_cube(x):
        result, dx = MyCube.apply(x)
        return result

    x = _t(M, V5)
    (g,) = M.autograd.grad(my_cube(x).sum(), x, create_graph=True)
    (gg,) = M.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(_np(g), 3 * V5**2, rtol=1e-12)
    np.testing.assert_allclose(_np(gg), 6 * V5, rtol=1e-12)
    assert M.autograd.gradcheck(my_cube, (x,))
    assert M.autograd.gradgradcheck(my_cube, (x,))
    return g, gg, _name(MyCube.apply(x)[1].grad_fn)


def case_double_backward_tutorial(M):
    """ "Double Backward with Custom Functions": saving inputs, saving outputs, saving
    intermediate results as extra outputs, and a backward that is itself a Function."""

    class Square(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return grad_out * 2 * x

    class Exp(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = M.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            (result,) = ctx.saved_tensors
            return result * grad_out

    class Sinh(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = M.exp(x)
            expnegx = M.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += _grad_out_exp * expx
            grad_input -= _grad_out_negexp * expnegx
            return grad_input

    def sinh(x):
        return Sinh.apply(x)[0]

    class CubeBackward(M.autograd.Function):
        @staticmethod
        def forward(ctx, grad_out, x):
            ctx.save_for_backward(x, grad_out)
            return grad_out * 3 * x**2

        @staticmethod
        def backward(ctx, grad_out):
            x, sav_grad_out = ctx.saved_tensors
            dx = grad_out * sav_grad_out * 6 * x
            dgrad_out = grad_out * 3 * x**2
            return dgrad_out, dx

    class Cube(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return CubeBackward.apply(grad_out, x)

    x = M.tensor(A33[:2, :2] * 0.5 + 0.1, dtype=M.double, requires_grad=True)
    for fn in (Square.apply, Exp.apply, sinh, Cube.apply):
        assert M.autograd.gradcheck(fn, x)
        assert M.autograd.gradgradcheck(fn, x)
    (g,) = M.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    exp_node = g.grad_fn.next_functions[0][0] or g.grad_fn.next_functions[1][0]
    (gc_,) = M.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    return (
        g,
        _name(exp_node),
        gc_,
        _name(gc_.grad_fn),
        M.autograd.grad(gc_.sum(), x)[0],
        M.autograd.grad(sinh(x).sum(), x)[0],
    )


def case_double_backward_tutorial_bad_sinh(M):
    """The tutorial's SinhBad saves intermediates that are not outputs: first
    derivatives are right, gradgradcheck fails (no graph behind the intermediates)."""

    class SinhBad(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = M.exp(x)
            expnegx = M.exp(-x)
            ctx.expx = expx
            ctx.expnegx = expnegx
            return (expx - expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            expx = ctx.expx
            expnegx = ctx.expnegx
            grad_input = grad_out * (expx + expnegx) / 2
            return grad_input

    x = M.tensor(A33[0] * 0.5, dtype=M.double, requires_grad=True)
    assert M.autograd.gradcheck(SinhBad.apply, x)
    failed = _err(lambda: M.autograd.gradgradcheck(SinhBad.apply, x))
    assert failed is not None
    (g,) = M.autograd.grad(SinhBad.apply(x).sum(), x)
    np.testing.assert_allclose(_np(g), np.cosh(A33[0] * 0.5), rtol=1e-12)
    return g


# ================================================================== test_autograd


def _function_test(M, cls):
    x = _t(M, A33)
    y = _t(M, B33)
    result = cls.apply(x, 2, y)
    go = M.ones((), dtype=M.float64, requires_grad=True)
    result.sum().backward(go, create_graph=True)
    np.testing.assert_allclose(_np(x.grad), B33 + 1, rtol=1e-12)
    np.testing.assert_allclose(_np(y.grad), A33 + 2, rtol=1e-12)
    assert x.grad.grad_fn is not None and y.grad.grad_fn is not None
    return x, y


def case_test_function(M):
    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, tensor1, pyscalar, tensor2):
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

        @staticmethod
        def backward(ctx, grad_output):
            var1, var2 = ctx.saved_tensors
            assert isinstance(var1, M.Tensor) and isinstance(grad_output, M.Tensor)
            return (
                grad_output + grad_output * var2,
                None,
                grad_output * ctx.pyscalar + grad_output * var1,
            )

    x, y = _function_test(M, MyFunction)
    # the first gradients were recorded: differentiate them again
    (gx,) = M.autograd.grad(x.grad.sum(), y, retain_graph=True)
    np.testing.assert_allclose(_np(gx), np.ones((3, 3)))
    return x.grad, y.grad, gx


def case_test_once_differentiable(M):
    from_module = M.autograd.function.once_differentiable
    grad_modes = []

    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, tensor1, pyscalar, tensor2):
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(tensor1, tensor2)
            return tensor1 + pyscalar * tensor2 + tensor1 * tensor2

        @staticmethod
        @from_module
        def backward(ctx, grad_output):
            grad_modes.append(M.is_grad_enabled())
            t1, t2 = ctx.saved_tensors
            return (
                grad_output + grad_output * t2,
                None,
                grad_output * ctx.pyscalar + grad_output * t1,
            )

    x, y = _function_test(M, MyFunction)
    node = x.grad.grad_fn
    while _name(node) not in ("Error", None) and node.next_functions:
        node = next(n for n, _ in node.next_functions if n is not None)
    twice = _err(lambda: x.grad.sum().backward())
    # with plain grad_outputs nothing is recorded: the gradient does not require grad
    x2 = _t(M, A33)
    (g,) = M.autograd.grad(MyFunction.apply(x2, 2, y).sum(), x2, create_graph=True)
    return grad_modes, _name(node), twice, g.requires_grad, g


def case_test_function_returns_input(M):
    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    grads = []
    for shape in [(1,), ()]:
        v = M.ones(shape, requires_grad=True)
        out = MyFunction.apply(v)
        assert out is not v and out.grad_fn is not None
        out.backward()
        grads.append(v.grad.clone())
        with M.no_grad():
            v.grad.zero_()
        MyFunction.apply(v.clone()).backward()
        grads.append(v.grad.clone())
    with M.no_grad():
        plain = MyFunction.apply(v)
    return grads, plain is v, plain.requires_grad


def case_test_function_returns_undefined_tensor(M):
    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return None

    x = M.ones(1, requires_grad=True)
    MyFunction.apply(x).backward()
    assert x.grad is None
    MyFunction.apply(x**2).backward()
    assert x.grad is None
    MyFunction.apply(x).sum().backward()
    assert x.grad is None
    return M.autograd.grad(MyFunction.apply(x), x, allow_unused=True)[0]


def case_materialize_grads(M):
    """Outputs that get no gradient: zeros (materialized, the default) or None after
    set_materialize_grads(False); integer outputs get integer zeros."""
    seen = []

    class Two(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3, (x > 0).long()

        @staticmethod
        def backward(ctx, g1, g2, g3):
            seen.append(_np((g1, g2, g3)))
            total = None
            for g, k in ((g1, 2), (g2, 3)):
                if g is not None:
                    total = g * k if total is None else total + g * k
            return total, None

    x = _t(M, V5)
    for materialize in (True, False):
        a, b, idx = Two.apply(x, materialize)
        assert not idx.requires_grad
        b.sum().backward()
    return seen, x.grad


def case_test_set_materialize_non_diff_grads(M):
    seen = []

    class Func(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out0 = x.clone()
            out1 = x.clone()
            ctx.mark_non_differentiable(out1)
            ctx._materialize_non_diff_grads = False
            return out0, out1

        @staticmethod
        def backward(ctx, g0, g1):
            seen.append(g1)
            return g0

    a = M.tensor(1.0, requires_grad=True)
    out = Func.apply(a)[0]
    out.backward()
    assert seen == [None]
    return a.grad


def case_test_legacy_function(M):
    class MyFunction(M.autograd.Function):
        def forward(self, x):
            return x

        def backward(self, grad_output):
            return grad_output

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = MyFunction()
    assert any("should not be instantiated" in str(w.message) for w in caught)
    return _err(lambda: f(M.randn(3, 4)))


def case_test_custom_function_exception(M):
    class SimulateBackwardError(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            return input.clone()

        @staticmethod
        @M.autograd.function.once_differentiable
        def backward(ctx, input):
            raise Exception("Simulate error on backward pass")

    t1 = _t(M, A33)
    t2 = _t(M, B33)
    tmp = (t1 + t2) * (t1 + t2)
    t3 = SimulateBackwardError.apply(tmp)
    return _err(lambda: t3.sum().backward())


def case_test_custom_function_non_tensor_inputs_outputs(M):
    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, t1, t2, scale, t3):
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 *= scale
            t5 *= scale
            ctx.scale = scale
            ctx.save_for_backward(t1, t2, t3)
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        @M.autograd.function.once_differentiable
        def backward(ctx, *grads):
            assert len(grads) == 7
            assert grads[0] is None and grads[2] is None
            assert grads[3] is None and grads[5] is None
            scale = ctx.scale
            var1, var2, var3 = ctx.saved_tensors
            return (
                grads[1] * scale + grads[4] * var2 * scale + grads[6],
                grads[1] * var3 * scale + grads[4] * var1 * scale,
                None,
                grads[1] * var2 * scale + grads[4] * scale,
            )

    t1 = _t(M, V5)
    t2 = _t(M, V5[::-1].copy())
    t3 = _t(M, V5 * 0.5, grad=False)
    scale = 3
    res = MyFunction.apply(t1, t2, scale, t3)
    assert res[0] == scale and res[2] is None and res[3] is True and res[5] == "bar"
    np.testing.assert_allclose(_np(res[1]), (V5 + V5[::-1] * V5 * 0.5) * 3, rtol=1e-12)
    M.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
    assert t3.grad is None

    def foo(t1, t2, t3):
        res = MyFunction.apply(t1, t2, scale, t3)
        return res[1], res[4], res[6]

    assert M.autograd.gradcheck(foo, (t1, t2, t3))
    return [res[i] for i in (1, 4, 6)], t1.grad, t2.grad


def case_test_custom_function_no_tensors(M):
    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, t1, t2, scale, t3):
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 *= scale
            t5 *= scale
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        @M.autograd.function.once_differentiable
        def backward(ctx, *args):
            return (args[0], args[1], None, args[2])

    return list(MyFunction.apply(0.25, 0.5, 3, 0.75))


def case_gradient_count_and_type_errors(M):
    """backward returning too few / too many gradients, a gradient for a non-tensor
    argument, a non-tensor gradient, a gradient of the wrong shape (test_invalid_gradients),
    trailing Nones (test_too_many_grads) and a broadcastable gradient (summed)."""

    def make(backward, nargs=1):
        def forward(ctx, *args):
            return args[0] * 2

        return type(
            "Fn" + str(nargs),
            (M.autograd.Function,),
            {"forward": staticmethod(forward), "backward": staticmethod(backward)},
        )

    x = _t(M, V5)
    y = _t(M, V5)
    errors = [
        _err(lambda: make(lambda ctx, g: g, 2).apply(x, y).sum().backward()),
        _err(lambda: make(lambda ctx, g: (g, g)).apply(x).sum().backward()),
        _err(lambda: make(lambda ctx, g: (g, g), 2).apply(x, 2).sum().backward()),
        _err(lambda: make(lambda ctx, g: 3).apply(x).sum().backward()),
        _err(lambda: make(lambda ctx, g: [g]).apply(x).sum().backward()),
        _err(lambda: make(lambda ctx, g: M.ones(10, dtype=M.float64)).apply(x).sum().backward()),
    ]
    make(lambda ctx, g: (g, None, None)).apply(x).sum().backward()
    too_many = x.grad.clone()
    z = _t(M, V5)
    make(lambda ctx, g: M.ones(3, 5, dtype=M.float64)).apply(z).sum().backward()
    np.testing.assert_allclose(_np(z.grad), np.full(5, 3.0))
    w = M.tensor(V5.astype(np.float32), requires_grad=True)
    make(lambda ctx, g: g.double()).apply(w).sum().backward()
    return errors, too_many, z.grad, str(w.grad.dtype)


def case_saved_tensor_version_errors(M):
    """An in-place change of a saved input (leaf or not) or a saved output between
    forward and backward raises PyTorch's version-counter error."""

    class Save(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    class SaveOut(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    leaf = M.tensor(V5.astype(np.float32), requires_grad=True)
    nonleaf = leaf.clone()
    out_nonleaf = Save.apply(nonleaf)
    out_leaf = Save.apply(leaf)
    with M.no_grad():
        nonleaf.add_(1)
        leaf.add_(1)
    r = SaveOut.apply(leaf)
    with M.no_grad():
        r.mul_(2)
    return (
        _err(lambda: out_nonleaf.sum().backward()),
        _err(lambda: out_leaf.sum().backward()),
        _err(lambda: r.sum().backward()),
    )


def case_freed_saved_tensors(M):
    """Saved tensors are freed by backward: a second backward (or reading saved_tensors,
    test_naughty_autograd_function_stashing_ctx) raises; retain_graph keeps them; a
    function that saves nothing can be run twice."""
    saved_ctx = []

    class Id(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, grad_x):
            saved_ctx.append(ctx)
            (x,) = ctx.saved_tensors
            return grad_x * x

    class Plain(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    p = _t(M, V5)
    loss = Id.apply(p).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    second = _err(lambda: loss.backward())
    stashed = _err(lambda: saved_ctx[0].saved_tensors)
    q = _t(M, V5)
    out = Plain.apply(q).sum()
    out.backward()
    out.backward()
    return second, stashed, p.grad, q.grad


def case_mark_dirty(M):
    """An in-place forward (mark_dirty): the input itself is returned with this call as
    grad_fn, its version bumped once by the op and once by mark_dirty
    (test_return_duplicate_inplace, test_return_leaf_inplace; dirty leaf and
    not-returned errors)."""

    class DoubleInplace(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x

        @staticmethod
        def backward(ctx, grad1, grad2):
            return grad1 * 2 + grad2 * 2

    def inplace_fn(x):
        a, b = DoubleInplace.apply(x.clone())
        assert a is b
        return a + b

    x = _t(M, A33)
    assert M.autograd.gradcheck(inplace_fn, [x])
    assert M.autograd.gradgradcheck(inplace_fn, [x])

    class Inplace(M.autograd.function.InplaceFunction):
        @staticmethod
        def forward(ctx, a, b):
            ctx.mark_dirty(a)
            return a.add_(b), b + 2

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a, grad_a + grad_b

    xi = _t(M, A33, grad=False)
    yi = _t(M, B33)
    q, p = Inplace.apply(xi, yi)
    assert q is xi and q.grad_fn.__class__ is Inplace._backward_cls and q.requires_grad
    q.sum().backward()

    class AddOne(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class NotReturned(AddOne):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x * 2

    leaf = _t(M, V5)
    base = leaf * 1
    before = base._version
    out = AddOne.apply(base)
    bumped = base._version - before
    (out * out).sum().backward()
    dirty_leaf = _t(M, V5)
    error = _err(lambda: AddOne.apply(dirty_leaf))
    return (
        q,
        yi.grad,
        out is base,
        bumped,
        _name(out.grad_fn),
        leaf.grad,
        error,
        dirty_leaf._version,
        _err(lambda: NotReturned.apply(leaf * 1)),
    )


def case_mark_dirty_view(M):
    """mark_dirty on a view of a non-leaf: the base's history goes through the view's
    update (PyTorch's CopySlices)."""

    class Triple(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(3)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    leaf = _t(M, A33)
    base = leaf * 1
    Triple.apply(base[1])
    (base * base).sum().backward()
    expected = 2 * A33 * np.array([[1.0], [9.0], [1.0]])
    np.testing.assert_allclose(_np(leaf.grad), expected, rtol=1e-12)
    return base, leaf.grad


def case_mark_non_differentiable(M):
    """test_mark_non_differentiable, _mixed and _none, and test_dep_nograd."""

    class Mask(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            output = input > 0
            ctx.mark_non_differentiable(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return (grad_output * 0).to(M.double)

    x = _t(M, A33)
    mask = Mask.apply(x)
    assert not mask.requires_grad
    x.masked_fill(mask, 0).sum().backward()
    seen = []

    class Mixed(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            a = input + 1
            b = input + 2
            ctx.mark_non_differentiable(a)
            return a, b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            seen.append(_np((grad_a, grad_b)))
            return grad_b

    y = _t(M, A33)
    a, b = Mixed.apply(y)
    assert not a.requires_grad and b.requires_grad
    b.sum().backward()

    class NoneGrad(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            output = input.clone()
            ctx.mark_non_differentiable(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return None

    z = _t(M, A33)
    r = NoneGrad.apply(z * z)
    (r * z).sum().backward()

    class F1(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            out = M.zeros(input.size(), dtype=M.float64)
            ctx.mark_non_differentiable(out)
            return input, out

        @staticmethod
        def backward(ctx, grad_output, ignored):
            return grad_output

    class F2(M.autograd.Function):
        @staticmethod
        def forward(ctx, input, ignored):
            return input

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None

    w = _t(M, V5)
    p, q = F1.apply(w)
    q = q + 1
    assert p.requires_grad and not q.requires_grad
    c = F2.apply(p, q)
    c.backward(M.ones(c.size(), dtype=M.float64))
    return x.grad, seen, y.grad, z.grad, w.grad


def case_multi_output_hooks(M):
    """Several outputs: tensor hooks and retain_grad per output (test_return_leaf), node
    pre-hooks see every output's gradient, post-hooks the input gradients, autograd.grad
    with respect to outputs."""
    log = []

    class Two(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = _t(M, V5)
    a, b = Two.apply(x)
    a.register_hook(lambda g: g * 10)
    b.retain_grad()
    (a + b).sum().backward()
    hooked, retained = x.grad.clone(), b.grad
    a, b = Two.apply(x)
    a.grad_fn.register_prehook(lambda gos: log.append(("pre", _np(gos))) or (gos[0] * 2, gos[1]))
    b.grad_fn.register_hook(lambda gis, gos: log.append(("post", _np(gis), _np(gos))))
    (a + 2 * b).sum().backward()
    a, b = Two.apply(x)
    wrt_outputs = M.autograd.grad((a * b).sum(), [a, b])

    class Identity(M.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a, a + b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a + grad_b, grad_b

    called = []
    u = _t(M, A33)
    v = _t(M, B33)
    q, p = Identity.apply(u, v)
    q.register_hook(lambda g: called.append(_np(g)))
    (q + p + u).sum().backward()
    return (
        hooked,
        retained,
        log,
        wrt_outputs,
        u.grad,
        v.grad,
        called,
        _name(a.grad_fn),
        _name(b.grad_fn),
        len(a.grad_fn.next_functions),
    )


def case_no_grad_and_needs_input_grad(M):
    """Under no_grad forward runs but records nothing (test_no_grad_python_function,
    test_no_grad_input); needs_input_grad follows requires_grad of each argument."""
    seen = []

    class MyOp(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            seen.append(ctx.needs_input_grad)
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            return g, None, g

    x = M.ones(5, 5, requires_grad=True)
    with M.no_grad():
        y = MyOp.apply(x, 2, M.ones(5, 5))
    assert not y.requires_grad and y.grad_fn is None
    MyOp.apply(x, 2, M.ones(5, 5))
    MyOp.apply(M.ones(5, 5), 2, M.ones(5, 5))
    z = MyOp.apply(M.ones(5, 5), 2, M.ones(5, 5))
    return seen, z.requires_grad, z.grad_fn is None


def case_setup_context(M):
    """test_custom_function_setup_context_simple / _multi_output / _multi_input."""

    class MySquare(M.autograd.Function):
        @staticmethod
        def forward(x):
            return x**2

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, gO):
            (x,) = ctx.saved_tensors
            return gO * 2 * x

    class MySquareMulti(M.autograd.Function):
        @staticmethod
        def forward(x):
            two_x = x.item() * 2
            return x**2, two_x

        @staticmethod
        def setup_context(ctx, inputs, output):
            _, two_x = output
            ctx.two_x = two_x

        @staticmethod
        @M.autograd.function.once_differentiable
        def backward(ctx, gO, _):
            return gO * ctx.two_x

    class MyReshape(M.autograd.Function):
        @staticmethod
        def forward(x, shape, scale_forward, scale_backward=11):
            return x.reshape(shape) * scale_forward

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, shape, scale_forward, scale_backward = inputs
            ctx.scale_backward = scale_backward
            ctx.x_shape = x.shape

        @staticmethod
        def backward(ctx, gO):
            return gO.reshape(ctx.x_shape) * ctx.scale_backward, None, None, None

    x = M.tensor(0.75, dtype=M.float64, requires_grad=True)
    (g1,) = M.autograd.grad(MySquare.apply(x), x)
    y, two_x = MySquareMulti.apply(x)
    (g2,) = M.autograd.grad(y, x)
    w = _t(M, np.arange(24.0))
    (g3,) = M.autograd.grad(MyReshape.apply(w, (3, 8), 7).sum(), w)
    (g4,) = M.autograd.grad(
        MyReshape.apply(w, shape=(6, 4), scale_forward=-1, scale_backward=2).sum(), w
    )
    return g1, two_x, g2, g3, g4


def case_save_none_and_intermediate(M):
    """test_save_none_for_backward; a saved intermediate (neither input nor output) has
    no history; saved inputs are the input tensors themselves."""
    seen = []

    class MyFn(M.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.input = input
            ctx.save_for_backward(None, input, None, input.exp())
            return input * input

        @staticmethod
        def backward(ctx, grad_output):
            n1, input, n2, e = ctx.saved_tensors
            seen.append((n1 is None, n2 is None, input is ctx.input, e.requires_grad))
            return 2 * input * grad_output

    x = _t(M, A33)
    y = MyFn.apply(x)
    y.sum().backward()
    bad = _err(
        lambda: type(
            "Bad",
            (MyFn,),
            {"forward": staticmethod(lambda ctx, i: (ctx.save_for_backward(i, 3), i * 1)[1])},
        ).apply(x)
    )
    return seen, x.grad, bad


def case_custom_autograd_repeated_grad_grad(M):
    """test_custom_autograd_repeated_grad_grad and test_custom_autograd_no_early_free."""

    def mult1(x):  # x.prod(dim=-1).prod(dim=-1) for the last two sizes 2 x 2
        p = x[..., 0] * x[..., 1]
        return p[..., 0] * p[..., 1]

    class Mult(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = mult1(x)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            return (grad_output * y)[:, None, None] / x

    def check(x, y):
        (gy,) = M.autograd.grad(y[0], x, create_graph=True)
        (ggy_1,) = M.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
        (gy,) = M.autograd.grad(y[0], x, create_graph=True)
        (ggy_2,) = M.autograd.grad(gy[0, 0, 0], x, retain_graph=True)
        assert ggy_1[0, 0, 1].item() == ggy_2[0, 0, 1].item()
        return ggy_1

    x = M.ones(2, 2, 2, dtype=M.float64).requires_grad_()
    with M.no_grad():
        x.mul_(M.tensor(A33[:2, :2] + 2.0, dtype=M.float64)[:, None, :])
    reference = check(x, mult1(x))
    custom = check(x, Mult.apply(x))
    np.testing.assert_allclose(_np(custom), _np(reference), rtol=1e-12)

    class Double(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x**2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            x, _ = ctx.saved_tensors
            return grad_output * 2 * x

    class Double2(Double):
        @staticmethod
        def backward(ctx, grad_output):
            x, y = ctx.saved_tensors
            return grad_output * 2 * y / x

    t = M.tensor(2.0, dtype=M.float64).requires_grad_()
    for fn in (Double.apply, Double2.apply):
        assert M.autograd.gradcheck(fn, t)
        assert M.autograd.gradgradcheck(fn, t)
        y = fn(t)
        M.autograd.grad(y, t, create_graph=True)
        M.autograd.grad(y, t)
    return custom


def case_simple_reentrant(M):
    """test_simple_reentrant: a backward that runs its own backward."""
    y_data = M.tensor(B33[:2, :2], dtype=M.float64)

    class Reenter(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with M.enable_grad():
                ctx.x = x.detach().requires_grad_()
                ctx.y = y_data.clone().requires_grad_()
                ctx.output_var = ctx.x * ctx.y
            return ctx.output_var.detach()

        @staticmethod
        def backward(ctx, grad_output):
            with M.enable_grad():
                ctx.output_var.sum().backward()
            return ctx.x.grad * grad_output

    x = _t(M, A33[:2, :2])
    out = Reenter.apply(x)
    out.sum().backward()
    np.testing.assert_allclose(_np(x.grad), B33[:2, :2], rtol=1e-12)
    return x.grad


def case_node_api(M):
    """grad_fn is `<Name>Backward`, of the class `_backward_cls`, and is the ctx (its
    attributes, saved_tensors, needs_input_grad); vjp is an alias of backward; jvp
    raises; defining both backward and vjp raises; FunctionCtx works alone."""

    class Scale(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            ctx.inputs = "user value"  # a name the node also uses internally
            ctx.save_for_backward(x)
            return x * k

        @staticmethod
        def vjp(ctx, g):
            assert ctx.inputs == "user value"
            return g * ctx.k, None

    class Both(Scale):
        @staticmethod
        def backward(ctx, g):
            return g, None

    class NoBackward(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = _t(M, V5)
    y = Scale.apply(x, 4.0)
    node = y.grad_fn
    facts = [
        node.name(),
        type(node).__name__,
        isinstance(node, Scale._backward_cls),
        node._forward_cls is Scale,
        node.k,
        node.needs_input_grad,
        node.saved_tensors[0] is x,
        _name(node.next_functions[0][0]),
        repr(y).split("grad_fn=")[1],
        M.autograd.Function.vjp is M.autograd.Function.backward,
    ]
    by_hand = node.apply(M.ones(5, dtype=M.float64))  # PyTorch: the user's backward
    y.sum().backward()
    ctx = M.autograd.function.FunctionCtx()
    ctx.save_for_backward(x)
    ctx.mark_non_differentiable(x)
    return (
        facts,
        by_hand,
        x.grad,
        _err(lambda: Scale.jvp(None, None)),
        _err(lambda: Both.apply(x, 1.0).sum().backward()),
        _err(lambda: NoBackward.apply(x).sum().backward()),
        ctx.to_save[0] is x,
        ctx.non_differentiable[0] is x,
        _err(lambda: ctx.materialize_grads),
        _err(lambda: ctx.saved_tensors),
    )


def case_saved_tensors_hooks(M):
    """saved_tensors_hooks pack and unpack the tensors a custom function saves."""
    packed = []

    class Square(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = _t(M, V5)
    with M.autograd.graph.saved_tensors_hooks(
        lambda t: packed.append(1) or t * 10, lambda p: p / 10
    ):
        y = Square.apply(x)
    y.sum().backward()
    return len(packed), x.grad


def case_test_autograd_python_custom_function_inplace(M):
    """test_autograd_python_custom_function_inplace: in-place Functions with one and two
    outputs, an in-place op on the output afterwards, a view as the dirty input, a
    dirty tensor that is not an input (a warning; an error for a view), and a dirty
    input that is also saved."""
    bw_called = [0]

    class MyAdder(M.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, grad):
            bw_called[0] += 1
            return grad, grad

    class MyAdderBad(M.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            c = 3 * a
            c.add_(b)
            ctx.mark_dirty(c)
            return c

        @staticmethod
        def backward(ctx, grad):
            grad = 3 * grad
            return grad, grad

    class MyBadAdder(M.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a, a + b

        @staticmethod
        def backward(ctx, ga, gab):
            bw_called[0] += 1
            return ga + gab, ga + gab

    class DirtyView(M.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            out = inp.clone().view_as(inp)
            ctx.mark_dirty(out)
            return out

        @staticmethod
        def backward(ctx, gO):
            return gO

    class SaveDirty(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    a = M.ones(2, requires_grad=True)
    b = M.ones(2, requires_grad=True)
    MyAdder.apply(a.clone(), b).sum().backward()
    c = MyAdder.apply(a.clone(), b)
    c += 2
    c.sum().backward()
    MyAdder.apply(a.clone().view_as(a), b).sum().backward()
    c, d = MyBadAdder.apply(a.clone(), b)
    c += 2
    (c * d).sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bad = MyAdderBad.apply(a.clone(), b)
    bad.sum().backward()
    x = _t(M, V5)
    y = SaveDirty.apply(x * 1)
    saved_is_output = y.grad_fn.saved_tensors[0].grad_fn is y.grad_fn
    y.sum().backward()
    return (
        bw_called[0],
        a.grad,
        b.grad,
        [str(w.message).split(" (Triggered")[0] for w in caught],
        _err(lambda: MyBadAdder.apply(a.clone().view_as(a), b)),
        _err(lambda: DirtyView.apply(a.clone())),
        _err(lambda: MyAdder.apply(a.view_as(a), b)),
        saved_is_output,
        x.grad,
    )


def case_test_grad_mode_restored_reentrant(M):
    """test_grad_mode_restored_reentrant: autograd.grad inside backward, grad mode
    restored afterwards, with and without create_graph; test_custom_function_error's
    missing forward."""
    modes = []

    class MyFunction(M.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        def backward(ctx, go):
            original = M.is_grad_enabled()
            with M.enable_grad():
                foo = M.tensor(V5[:3], requires_grad=True)
                (grad,) = M.autograd.grad(foo**3, foo, grad_outputs=go)
            modes.append((original, M.is_grad_enabled()))
            return grad

    class BadFw(M.autograd.Function):
        @staticmethod
        def backward(ctx, foo):
            return foo

    inp = M.tensor(V5[:3] + 1, requires_grad=True)
    MyFunction.apply(inp).sum().backward()
    MyFunction.apply(inp).sum().backward(create_graph=True)
    return modes, inp.grad, _err(lambda: BadFw.apply(inp))


def case_test_custom_function_saving_mutated_view_no_leak(M):
    """A dirty view that is also saved is kept without a reference cycle."""
    import weakref

    class Test(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            pass

    def scope():
        x = M.tensor(1.0, requires_grad=True).clone()
        x = x.view_as(x)
        Test.apply(x)
        return weakref.ref(x)

    gc.collect()
    gc.disable()
    try:
        ref = scope()
        return ref() is None
    finally:
        gc.enable()


def case_single_output_node_hooks(M):
    """Node pre-hooks and post-hooks on a one-output Function (the engine's own hook
    path), with a non-tensor argument between two tensors."""
    log = []

    class Mul(M.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            ctx.save_for_backward(a, b)
            ctx.k = k
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b * ctx.k, None, g * a * ctx.k

    a = _t(M, V5)
    b = _t(M, V5[::-1].copy())
    y = Mul.apply(a, 2.0, b)
    y.grad_fn.register_prehook(lambda gos: log.append(("pre", _np(gos))) or (gos[0] * 3,))
    y.grad_fn.register_hook(lambda gis, gos: log.append(("post", _np(gis), _np(gos))))
    y.sum().backward()
    return log, a.grad, b.grad, len(y.grad_fn.next_functions)


def case_pytorch_docstring_examples(M):
    """The examples in PyTorch's FunctionCtx docstrings: save_for_backward with a
    non-tensor on ctx and a saved intermediate (once_differentiable), the sort example
    of mark_non_differentiable, and both set_materialize_grads examples."""
    once = M.autograd.function.once_differentiable

    class Func(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            w = x * z
            out = x * y + y * z + w * y
            ctx.save_for_backward(x, y, w, out)
            ctx.z = z
            return out

        @staticmethod
        @once
        def backward(ctx, grad_out):
            x, y, w, out = ctx.saved_tensors
            z = ctx.z
            gx = grad_out * (y + y * z)
            gy = grad_out * (x + z + w)
            gz = None
            return gx, gy, gz

    a = M.tensor(1.0, requires_grad=True, dtype=M.double)
    b = M.tensor(2.0, requires_grad=True, dtype=M.double)
    d = Func.apply(a, b, 4)
    d.backward()

    class Sort(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            sorted, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x, idx)
            return sorted, idx

        @staticmethod
        @once
        def backward(ctx, g1, g2):
            x, idx = ctx.saved_tensors
            grad_input = M.zeros_like(x)
            grad_input.index_add_(0, idx, g1)
            return grad_input

    x = _t(M, V5)
    values, idx = Sort.apply(x)
    (values * M.arange(5, dtype=M.float64)).sum().backward()
    np.testing.assert_allclose(_np(x.grad)[np.argsort(V5)], np.arange(5.0))
    assert M.autograd.gradcheck(lambda t: Sort.apply(t)[0], (x,))

    class SimpleFunc(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone(), x.clone()

        @staticmethod
        @once
        def backward(ctx, g1, g2):
            return g1 + g2

    class NoMaterialize(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x.clone(), x.clone()

        @staticmethod
        @once
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            grad_input = M.zeros_like(x)
            if g1 is not None:
                grad_input += g1
            if g2 is not None:
                grad_input += g2
            return grad_input

    s = M.tensor(1.0, requires_grad=True)
    SimpleFunc.apply(s)[0].backward()
    m = M.tensor(1.0, requires_grad=True)
    NoMaterialize.apply(m)[0].backward()
    return d, a.grad, b.grad, values, idx, idx.requires_grad, x.grad, s.grad, m.grad


def case_clear_saved_tensors_and_boxed_grads(M):
    """PyTorch 2.x's class flags: clear_saved_tensors_on_access (saved_tensors readable
    once) and boxed_grads_call (backward gets one list of gradients)."""
    seen = []

    class Clear(M.autograd.Function):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            seen.append(_err(lambda: ctx.saved_tensors))
            return g * x

    class Boxed(M.autograd.Function):
        boxed_grads_call = True

        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, grads):
            seen.append((type(grads).__name__, len(grads)))
            g1 = grads.pop(0)
            g2 = grads.pop(0)
            return g1 * 2 + g2 * 3

    x = _t(M, V5)
    y = Clear.apply(x)
    y.sum().backward(retain_graph=True)
    again = _err(lambda: y.sum().backward())
    a, b = Boxed.apply(x)
    (a + b).sum().backward()
    return seen, again, x.grad


def case_test_custom_function_local_inplace(M):
    """test_custom_function_local_inplace: the output is a view of a temporary, changed
    in place or not; the node is still the Function's."""

    class MyFn(M.autograd.Function):
        @staticmethod
        def forward(ctx, inp, inplace):
            view = inp.clone()[:3]
            if inplace:
                view += 2
            return view

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    base = _t(M, np.arange(10.0))
    names = [MyFn.apply(base, inplace).grad_fn.__class__.__name__ for inplace in (False, True)]
    out = MyFn.apply(base, True)
    # its backward returns a [3] gradient for the [10] input: PyTorch's shape error
    return names, out, _err(lambda: out.sum().backward())


def case_test_custom_function_cycle(M):
    """test_custom_function_cycle: a cycle through a ctx attribute (metadata dict holding
    the output) is collected by gc, with and without backward."""
    import weakref

    class MyFn(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, metadata):
            x = x.clone()
            ctx.meta = metadata
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, gO):
            (x,) = ctx.saved_tensors
            assert x.item() == 3.5 and ctx.meta["foo"].item() == 3.5
            return gO * x, None

    def get_refs(with_backward):
        a = M.tensor(3.5, requires_grad=True)
        metadata = {}
        out = MyFn.apply(a, metadata)
        metadata["foo"] = out
        if with_backward:
            out.sum().backward()
            assert a.grad.item() == 3.5
        return weakref.ref(out)

    alive = []
    for with_backward in (False, True):
        gc.disable()
        try:
            ref = get_refs(with_backward)
            alive.append(ref() is not None)
        finally:
            gc.enable()
        gc.collect()
        alive.append(ref() is not None)
    assert alive == [True, False, True, False]
    return alive


def case_test_custom_function_save_for_forward(M):
    """test_custom_function_save_for_forward without forward AD: a vjp-only Function that
    also calls save_for_forward, backward and gradcheck."""

    class Func(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z):
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(x, y)
            ctx.z = z
            ctx.prod = x * y
            return z * ctx.prod

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            x_p, y_p = ctx.saved_tensors
            return ctx.z * (y_p * x_t + x_p * y_t)

        @staticmethod
        def vjp(ctx, grad_out):
            x, y = ctx.saved_tensors
            z = ctx.z
            return z * grad_out * y, z * grad_out * x, None

    a = M.tensor(1.0, requires_grad=True, dtype=M.double)
    b = M.tensor(2.0, requires_grad=True, dtype=M.double)
    out = Func.apply(a, b, 4)
    out.backward()
    assert M.autograd.gradcheck(Func.apply, (a, b, 4))
    bad = _err(lambda: M.autograd.function.FunctionCtx().save_for_forward(a, 3))
    return out, a.grad, b.grad, bad


def case_test_hook_closure_cycle(M):
    """test_hook_closure_cycle (custom Function): a hook whose closure holds the node
    survives gc and fires on every backward."""
    import weakref

    class Identity(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Sentinel:
        pass

    results = []
    for use_tensor_hook in (True, False):
        count = [0]

        def scope():
            a = M.tensor(1.0, requires_grad=True)
            b = Identity.apply(a)
            grad_fn_b = b.grad_fn
            obj = Sentinel()

            def hook(*args):
                grad_fn_b, obj  # noqa: B018 - the closure holds both
                count[0] += 1  # noqa: B023 - scope() runs in this iteration

            if use_tensor_hook:  # noqa: B023 - scope() runs in this iteration
                b.register_hook(hook)
            else:
                b.grad_fn.register_hook(hook)
            return b.clone(), weakref.ref(obj)

        gc.disable()
        try:
            out, ref = scope()
            out.backward(retain_graph=True)
            gc.collect()
            out.backward(retain_graph=True)
            results.append((count[0], ref() is not None))
            del out
            gc.collect()
            results.append(ref() is None)
        finally:
            gc.enable()
    return results


def case_input_returned_as_is_is_a_view(M):
    """An input returned as it is becomes a view of the input (`_base`); changing it or
    its base in place and then using it raises PyTorch's error (the view logic would
    override the custom backward); using it before the change is fine."""

    class Id(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def runtime_error(fn):
        try:
            fn()
        except RuntimeError as exc:
            return str(exc)
        return None

    leaf = M.ones(3, requires_grad=True)
    x = leaf.clone()
    r = Id.apply(x)
    facts = [r._base is x, r is x]
    facts.append(runtime_error(lambda: r.add_(1)))
    x = leaf.clone()
    r = Id.apply(x)
    x.mul_(2)
    facts.append(runtime_error(lambda: r * 1))
    facts.append(runtime_error(lambda: r.grad_fn))
    x = leaf.clone()
    r = Id.apply(x)
    with M.no_grad():
        r.mul_(2)
    facts.append(runtime_error(lambda: r * 1))
    x = leaf.clone()
    r = Id.apply(x)
    z = r + 1
    x.mul_(2)
    z.sum().backward()  # r was used before the change: PyTorch allows it

    class Alias(M.autograd.Function):  # a view made inside forward
        @staticmethod
        def forward(ctx, x):
            return x[1:]

        @staticmethod
        def backward(ctx, g):
            return M.cat([M.zeros(1, dtype=g.dtype), g * 3])

    x = leaf.clone()
    v = Alias.apply(x)
    facts.append(_name(v.grad_fn))
    v.sum().backward()
    x.mul_(2)
    facts.append(runtime_error(lambda: v * 1))
    v = Alias.apply(leaf.clone())
    facts.append(runtime_error(lambda: v.add_(1)))
    return facts, leaf.grad


CASES = [value for key, value in sorted(globals().items()) if key.startswith("case_")]
IDS = [c.__name__[len("case_") :] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case(case):
    with _young_gc():
        case(tg)


def _assert_same(ours, theirs, path="result"):
    if isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), (path, ours, theirs)
        for i, (o, t) in enumerate(zip(ours, theirs, strict=True)):
            _assert_same(o, t, f"{path}[{i}]")
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), (path, ours)
        assert ours.shape == theirs.shape, (path, ours.shape, theirs.shape)
        assert ours.dtype.kind == theirs.dtype.kind, (path, ours.dtype, theirs.dtype)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-6), (path, ours, theirs)
    else:
        assert ours == theirs, (path, ours, theirs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_matches_torch(case):
    torch = pytest.importorskip("torch")
    with _young_gc():
        ours = _np(case(tg))
        theirs = _np(case(torch))
    _assert_same(ours, theirs)


# ========================================================= tracegrad-only checks


def test_multi_output_nodes_stand_for_one_call():
    """The one documented difference: each differentiable output of a multi-output
    call has its own node, of the same class, sharing the call's ctx and edges."""

    class Two(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.tag = "shared"
            ctx.save_for_backward(x)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = tg.tensor(V5, requires_grad=True)
    a, b = Two.apply(x)
    assert a.grad_fn is not b.grad_fn
    assert type(a.grad_fn) is type(b.grad_fn) is Two._backward_cls
    assert a.grad_fn.tag == b.grad_fn.tag == "shared"
    assert a.grad_fn.saved_tensors[0] is x and b.grad_fn.needs_input_grad == (True,)
    assert a.grad_fn.next_functions == b.grad_fn.next_functions
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(5, 5.0))

    class SaveSecond(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            e = x.exp()
            ctx.save_for_backward(e)
            return x * 2, e

        @staticmethod
        def backward(ctx, g, ge):
            (e,) = ctx.saved_tensors
            seen.append(type(e.grad_fn))  # its output was dropped: the node is made again
            return g * 2 + ge * e

    seen = []
    first = SaveSecond.apply(x)[0]
    (g,) = tg.autograd.grad(first.sum(), x, create_graph=True)
    assert seen == [SaveSecond._backward_cls]
    np.testing.assert_allclose(g.detach().numpy(), np.full(5, 2.0))
    (gg,) = tg.autograd.grad(g.sum(), x)  # through the saved output: 0 * exp(x)
    np.testing.assert_allclose(gg.numpy(), np.zeros(5))


def test_graph_is_freed_without_cycles():
    """A call that saves its own output keeps no reference cycle: the graph dies with
    its last tensor (reference counting alone, as for built-in ops)."""
    import weakref

    class Exp(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r, x)
            return r, x * 2

        @staticmethod
        def backward(ctx, g, g2):
            r, _ = ctx.saved_tensors
            return g * r + 2 * g2

    gc.disable()
    try:
        x = tg.tensor(V5, requires_grad=True)
        a, b = Exp.apply(x)
        refs = [weakref.ref(a.grad_fn), weakref.ref(b.grad_fn), weakref.ref(a.grad_fn._primary)]
        del a, b
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_gradcheck_float64_custom_functions():
    """float64 finite differences for a custom function with a tensor, a number and
    a tensor argument and two outputs, first and second order."""

    class Affine(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, w):
            ctx.k = k
            ctx.save_for_backward(x, w)
            return x * w + k, (x * x).sum()

        @staticmethod
        def backward(ctx, g, gs):
            x, w = ctx.saved_tensors
            return g * w + 2 * x * gs, None, g * x

    x = tg.tensor(A33, requires_grad=True)
    w = tg.tensor(B33, requires_grad=True)
    assert tg.autograd.gradcheck(lambda x, w: Affine.apply(x, 1.5, w), (x, w))
    assert tg.autograd.gradgradcheck(lambda x, w: Affine.apply(x, 1.5, w), (x, w))

    class Wrong(Affine):
        @staticmethod
        def backward(ctx, g, gs):
            x, w = ctx.saved_tensors
            return g * w, None, g * x  # forgets the second output

    with pytest.raises(GradcheckError):
        tg.autograd.gradcheck(lambda x, w: Wrong.apply(x, 1.5, w), (x, w))


def test_anomaly_mode_names_the_custom_node():
    class Bad(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = tg.tensor(V5, requires_grad=True)
    with tg.autograd.detect_anomaly():
        y = Bad.apply(x)
        with pytest.raises(RuntimeError, match="Function 'BadBackward' returned nan values"):
            y.sum().backward()


def test_graph_drawing_shows_custom_nodes_and_saved_tensors():
    from tracegrad.viz.eager import eager_graph

    class Exp(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    x = tg.tensor(V5, requires_grad=True)
    y = Exp.apply(x)
    assert y.grad_fn.saved_tensors_info == [("saved_tensors[0]", (5,), "float64")]
    dot = eager_graph(y.sum(), {"x": x}).to_dot()
    assert "ExpBackward" in dot and "saved_tensors[0]" in dot


def test_module_doctests():
    import doctest

    from tracegrad.eager import function

    result = doctest.testmod(function)
    assert result.attempted >= 5 and result.failed == 0


def test_traced_arguments_are_refused():
    """Under tracegrad.grad the arguments are tracers: the custom backward would be
    silently ignored (the gradient of the traced forward used instead), so apply
    refuses them and points to tracegrad.custom_vjp."""
    import tracegrad

    class StraightThrough(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x > 0) * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    def f(x):
        return tracegrad.sum(StraightThrough.apply(x) * x)

    with pytest.raises(
        TypeError,
        match=r"StraightThrough.apply: argument 0 is a traced value "
        r"\(float64\[3\].*tracegrad.custom_vjp",
    ):
        tracegrad.grad(f)(np.array([1.0, -2.0, 3.0]))
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    f(x).backward()  # eager: the custom backward is used, d/dx [ste(x) * x] = ste(x) + x
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -2.0, 4.0])
