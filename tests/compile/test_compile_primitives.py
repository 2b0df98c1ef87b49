"""Every primitive of the rule table through value_and_grad (interpreter backend).

Rows come from the ops' OpInfo-style table (tests/ops/op_cases.py): for each
row the compiled value matches NumPy, gradients match float64 central
differences, float32 keeps float32 with float32 tolerance, and (where the row
allows) grad of grad matches differences of the first gradient.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ops.core import REGISTRY, bind

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "ops"))
from compile_helpers import assert_close, numeric_grad
from op_cases import CASES

FLOAT_KINDS = ("n", "p", "a", "d", "u", "spd", "prob")


def _is_float_spec(spec) -> bool:
    return isinstance(spec, tuple) and spec and spec[0] in FLOAT_KINDS


def make_problem(case, dtype, seed=0):
    """(f, diff_args): f(*diff_args) = sum(prim(*operands) * W), with non-float operands baked in."""
    rng = np.random.default_rng(seed)
    operands = case.draw(rng, dtype)
    diff_pos = [i for i, s in enumerate(case.operands) if _is_float_spec(s)]
    out = np.asarray(bind(case.prim, *operands, **case.attrs))
    weights = rng.uniform(0.5, 1.5, out.shape).astype(out.dtype)

    def f(*diff):
        ops = list(operands)
        for i, d in zip(diff_pos, diff, strict=True):
            ops[i] = d
        return tg.sum(bind(case.prim, *ops, **case.attrs) * weights)

    return f, [operands[i] for i in diff_pos]


DIFF_CASES = [c for c in CASES if not c.prim.nondiff and any(_is_float_spec(s) for s in c.operands)]


@pytest.mark.parametrize("case", DIFF_CASES, ids=[c.id for c in DIFF_CASES])
def test_value_and_grad_float64_matches_finite_differences(case):
    f, args = make_problem(case, "float64")
    argnums = tuple(range(len(args)))
    value, grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*args)
    assert_close(value, f(*args), rtol=1e-12, what="value")
    assert value.dtype == np.float64 and value.shape == ()
    for k, g in enumerate(grads):
        assert g.dtype == np.float64
        assert_close(g, numeric_grad(f, args, k), rtol=1e-5, atol=1e-7, what=f"grad {k}")


@pytest.mark.parametrize(
    "case",
    [c for c in DIFF_CASES if "float32" in c.dtypes],
    ids=[c.id for c in DIFF_CASES if "float32" in c.dtypes],
)
def test_value_and_grad_float32_keeps_dtype(case):
    f, args32 = make_problem(case, "float32")
    argnums = tuple(range(len(args32)))
    value, grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*args32)
    args64 = [a.astype(np.float64) for a in args32]
    value64, grads64 = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*args64)
    for g, a in zip(grads, args32, strict=True):
        assert g.dtype == np.float32 and g.shape == a.shape
    assert_close(value, value64, rtol=2e-5, atol=1e-5, what="value")
    for g, g64 in zip(grads, grads64, strict=True):
        assert_close(g, g64, rtol=2e-4, atol=2e-5, what="grad")


ORDER2 = [c for c in DIFF_CASES if c.order2]


@pytest.mark.parametrize("case", ORDER2, ids=[c.id for c in ORDER2])
def test_grad_of_grad_matches_differences_of_grad(case):
    f, args = make_problem(case, "float64", seed=1)
    x = args[0]
    rest = args[1:]
    v = np.random.default_rng(2).uniform(0.5, 1.5, x.shape)
    inner = tg.grad(f, argnums=0, backend="interpret")

    def directional(x, *rest):  # <grad f(x), v>
        return tg.sum(inner(x, *rest) * v)

    second = tg.grad(directional, argnums=0, backend="interpret")(x, *rest)
    first = lambda x, *rest: float(np.sum(inner(x, *rest) * v))
    assert_close(
        second,
        numeric_grad(first, [x, *rest], 0, eps=1e-5),
        rtol=1e-4,
        atol=1e-6,
        what="grad of grad",
    )


def test_every_differentiable_primitive_has_a_compiled_gradient_case():
    covered = {c.prim.name for c in DIFF_CASES}
    differentiable = {name for name, p in REGISTRY.items() if not p.nondiff}
    # scan, cond and while hold sub-graphs: tests/compile/test_loops.py covers them
    assert differentiable - covered <= {
        "astype",
        "scan",
        "cond",
        "while",
        "call",
        "custom_vjp_call",
        "random_gamma",  # implicit reparameterization, not its impl's derivative: tests/random
        # complex-valued (op_cases draws real operands): tests/complex/test_complex_rules.py,
        # test_fft.py, test_eig.py compare their gradients with jax and torch
        "real",
        "imag",
        "conj",
        "complex",
        "fft",
        "eig",
        "solve_general",
        "det_general",
    }, differentiable - covered


def test_interpreter_agrees_with_numpy_for_every_case():
    from tracegrad.ir import interpret, verify

    for case in CASES:
        for dtype in case.dtypes:
            operands = case.draw(np.random.default_rng(3), dtype)
            arrays = [o for o in operands if isinstance(o, np.ndarray)]
            positions = [i for i, o in enumerate(operands) if isinstance(o, np.ndarray)]

            def fn(*xs):
                ops = list(operands)  # noqa: B023 - fn is traced in this iteration
                for i, x in zip(positions, xs, strict=True):  # noqa: B023 - fn is traced in this iteration
                    ops[i] = x
                return bind(case.prim, *ops, **case.attrs)  # noqa: B023 - fn is traced in this iteration

            graph = verify(tg.trace(fn, *arrays))
            (out,) = interpret(graph, *arrays)
            expected = np.asarray(bind(case.prim, *operands, **case.attrs))
            assert out.dtype == expected.dtype, case.id
            np.testing.assert_allclose(out, expected, rtol=1e-6, err_msg=case.id)


@pytest.mark.parametrize("case", DIFF_CASES, ids=[c.id for c in DIFF_CASES])
def test_compiled_gradients_equal_eager_gradients(case):
    import tracegrad.eager as eager

    f, args = make_problem(case, "float64")
    argnums = tuple(range(len(args)))
    value, grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*args)
    tensors = [eager.tensor(a, requires_grad=True) for a in args]
    out = f(*tensors)
    out.backward()
    assert_close(value, out.detach().numpy(), rtol=1e-12, what="value")
    for g, t in zip(grads, tensors, strict=True):
        assert_close(g, t.grad.numpy(), rtol=1e-10, atol=1e-12, what="grad")


@pytest.mark.slow
@pytest.mark.parametrize("case", DIFF_CASES, ids=[c.id for c in DIFF_CASES])
def test_numba_kernels_equal_interpreter_for_every_case(case):
    """Every row through generated kernels (slow: one Numba compile per row)."""
    for dtype in case.dtypes:
        f, args = make_problem(case, dtype)
        argnums = tuple(range(len(args)))
        value, grads = tg.value_and_grad(f, argnums=argnums)(*args)
        ref_value, ref_grads = tg.value_and_grad(f, argnums=argnums, backend="interpret")(*args)
        tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-4, atol=1e-5)
        assert value.dtype == ref_value.dtype
        assert_close(value, ref_value, **tol, what=f"{dtype} value")
        for g, r in zip(grads, ref_grads, strict=True):
            assert g.dtype == r.dtype
            assert_close(g, r, **tol, what=f"{dtype} grad")


@pytest.mark.parametrize("case", DIFF_CASES, ids=[c.id for c in DIFF_CASES])
def test_every_stage_verifies(case):
    from tracegrad.ir import verify

    f, args = make_problem(case, "float32")
    lowered = tg.value_and_grad(f, argnums=tuple(range(len(args))), backend="interpret").lower(
        *args
    )
    for stage in (lowered.traced, lowered.joint, lowered.optimized):
        verify(stage)
    assert any(n.tag == "bwd" for n in lowered.joint.nodes)
    assert not any(n.tag == "bwd" for n in lowered.traced.nodes)
