"""Gradients proven by random programs over every differentiable primitive.

What runs where:
  - hypothesis programs (float64, 3x the profile's max_examples: 300 in CI,
    9000 with --hypothesis-profile=thorough; plus 1x with up to 14 steps):
    compiled side through
    `backend="interpret"` (the same traced, differentiated and optimized
    joint graph, run by the NumPy interpreter: no Numba compile per example).
    Checks: compiled value == NumPy value; compiled grads == eager grads
    (rtol 1e-10); compiled grads == float64 central differences; eager ==
    finite differences via `tracegrad.gradcheck`.
  - hypothesis programs in float32 (the profile's max_examples): eager and
    compiled agree at float32 tolerance and keep float32.
  - a fixed set of themed programs through Numba kernels (float64 and
    float32), which together use every op of the generator: the same checks,
    plus non-contiguous / negative-stride / read-only inputs giving identical
    results (float32: the elementwise and reductions themes by default, the
    other seven under `slow`). Every check also asserts that no input array was mutated. Kernels are cached on disk, so a second
    run only loads them.
  - second order (hypothesis, interpreter): compiled grad of grad == eager
    double backward == finite differences of the gradient (Hessian-vector
    products); slow: the same for each themed program through Numba.
  - slow: 40 more seeded programs through Numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rel_programs import APPLY, DrawChooser, Program, RngChooser, generate

import tracegrad as tg
import tracegrad.eager as E

RTOL_MODES = 1e-10  # eager vs compiled, float64


@st.composite
def programs(draw, max_steps=6):
    return generate(DrawChooser(draw), max_steps)


# ------------------------------------------------------------------ oracles


def central_differences(program: Program, inputs: list, k: int, eps: float = 1e-6) -> np.ndarray:
    """d program / d inputs[k] by float64 central differences on the NumPy path."""
    args = [np.array(x, dtype=np.float64) for x in inputs]
    x = args[k]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        hi = float(program(*args))
        x[i] = old - eps
        lo = float(program(*args))
        x[i] = old
        grad[i] = (hi - lo) / (2 * eps)
    return grad


def eager_value_and_grads(program: Program, inputs: list):
    tensors = [E.tensor(x, requires_grad=True) for x in inputs]
    out = program(*tensors)
    out.backward()
    grads = [
        t.grad.numpy() if t.grad is not None else np.zeros_like(x)
        for t, x in zip(tensors, inputs, strict=True)
    ]
    return out.detach().numpy(), grads


def compiled_value_and_grads(program: Program, inputs: list, backend: str):
    argnums = tuple(range(len(inputs)))
    vg = tg.value_and_grad(lambda *xs: program(*xs), argnums=argnums, backend=backend)
    value, grads = vg(*inputs)
    return vg, value, list(grads)


def assert_agree(actual, expected, rtol, what, program):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    # atol scaled to the array: gradients that cancel to ~0 keep only absolute digits
    atol = rtol * max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(
        actual, expected, rtol=rtol, atol=atol, err_msg=f"{what}\n{program!r}"
    )


def check_float64(program: Program, backend: str = "interpret"):
    inputs = program.inputs
    originals = [x.copy() for x in inputs]
    reference = float(program(*inputs))
    _, value, grads = compiled_value_and_grads(program, inputs, backend)
    eager_value, eager_grads = eager_value_and_grads(program, inputs)
    for x, x0 in zip(
        inputs, originals, strict=True
    ):  # neither mode may write into the caller's arrays
        np.testing.assert_array_equal(x, x0, err_msg=f"an input was mutated\n{program!r}")
    assert_agree(value, reference, 1e-12, "compiled value vs NumPy", program)
    assert_agree(eager_value, reference, 1e-12, "eager value vs NumPy", program)
    for k, (g, ge, x) in enumerate(zip(grads, eager_grads, inputs, strict=True)):
        assert g.dtype == np.float64 and g.shape == x.shape, (g.dtype, g.shape, x.shape)
        assert_agree(g, ge, RTOL_MODES, f"grad {k}: compiled vs eager", program)
        assert_agree(
            g,
            central_differences(program, inputs, k),
            1e-5,
            f"grad {k}: compiled vs finite differences",
            program,
        )
    tensors = [E.tensor(x, requires_grad=True) for x in inputs]
    assert tg.gradcheck(lambda *ts: program(*ts), tensors)
    return grads


def check_float32(program: Program, backend: str = "interpret", grads64=None):
    inputs32, program32 = program.with_dtype(np.float32)
    _, value, grads = compiled_value_and_grads(program32, inputs32, backend)
    eager_value, eager_grads = eager_value_and_grads(program32, inputs32)
    assert np.asarray(value).dtype == np.float32
    assert_agree(value, eager_value, 1e-4, "float32 value: compiled vs eager", program)
    if grads64 is None:
        grads64 = compiled_value_and_grads(program, program.inputs, "interpret")[2]
    for k, (g, ge, g64) in enumerate(zip(grads, eager_grads, grads64, strict=True)):
        assert g.dtype == np.float32 and ge.dtype == np.float32, (g.dtype, ge.dtype)
        assert_agree(g, ge, 1e-4, f"float32 grad {k}: compiled vs eager", program)
        assert_agree(g, g64, 1e-3, f"float32 grad {k} vs float64", program)


# -------------------------------------------------------- hypothesis programs


@settings(max_examples=3 * settings.default.max_examples)
@given(programs())
def test_random_programs_float64_eager_compiled_and_finite_differences(program):
    check_float64(program)


@given(programs(max_steps=14))
def test_long_random_programs_float64(program):
    check_float64(program)


@given(programs())
def test_random_programs_float32_eager_and_compiled_agree(program):
    check_float32(program)


@given(programs())
def test_random_programs_spelled_with_numpy_functions_are_captured_while_tracing(program):
    """np.exp(x), np.sum(x, axis=...), x.mean(), np.take_along_axis, x[idx], ... on
    tracers record the same graph as tracegrad's own functions: same value and gradients,
    and nothing is silently computed on concrete values (that would zero a gradient)."""
    inputs = program.inputs
    argnums = tuple(range(len(inputs)))
    spelled = tg.value_and_grad(
        lambda *xs: program(*xs, numpy_spelling=True), argnums=argnums, backend="interpret"
    )
    value, grads = spelled(*inputs)
    _, ref_value, ref_grads = compiled_value_and_grads(program, inputs, "interpret")
    assert_agree(value, ref_value, 1e-12, "NumPy spelling: value", program)
    for k, (g, r) in enumerate(zip(grads, ref_grads, strict=True)):
        assert_agree(g, r, 1e-12, f"NumPy spelling: grad {k}", program)
    assert_agree(
        program(*inputs, numpy_spelling=True),
        ref_value,
        1e-12,
        "NumPy spelling on plain arrays",
        program,
    )


def test_generator_reaches_every_op():
    """The property tests above are only as good as the ops they draw."""
    seen = set()
    for seed in range(400):
        seen |= generate(RngChooser(seed)).ops()
    assert seen == set(APPLY), sorted(set(APPLY) - seen)


# --------------------------------------------- fixed programs through Numba

# theme -> (generators to draw from, ops the program must contain)
THEMES = {
    "elementwise": (
        ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "neg"],
        {"exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "neg"},
    ),
    "scalars": (
        ["scalar"] * 6 + ["tanh"],
        {"add_scalar", "scale", "rsub_scalar", "rdiv_scalar", "pow_scalar", "rpow_scalar"},
    ),
    "kinks": (
        ["relu", "abs", "times_sign", "maximum", "minimum", "where", "clip"],
        {"relu", "abs", "times_sign", "maximum", "minimum", "where_gt", "clip"},
    ),
    "arithmetic": (
        ["add", "sub", "mul", "div", "pow", "broadcast_to"],
        {"add", "sub", "mul", "div", "pow", "broadcast_to"},
    ),
    "reductions": (
        ["sum", "mean", "var", "logsumexp", "max", "min", "broadcast_to"],
        {"sum", "mean", "var", "logsumexp", "max", "min", "add_ramp"},
    ),
    "softmax": (
        ["softmax", "log_softmax", "take_along_axis", "exp"],
        {"softmax", "log_softmax", "take_along_axis"},
    ),
    "shapes": (
        ["reshape", "transpose", "expand_squeeze", "broadcast_to", "concatenate", "stack", "tanh"],
        {"reshape", "transpose", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack"},
    ),
    "matmul": (["matmul", "matmul", "matmul", "tanh", "add"], {"matmul", "matmul_op", "gram"}),
    "indexing": (["getitem", "getitem", "take_along_axis", "mul"], {"getitem", "take_along_axis"}),
}


def themed_program(theme: str) -> Program:
    """The first seeded program of a theme that contains all the theme's ops."""
    generators, required = THEMES[theme]
    for seed in range(2000):
        prog = generate(RngChooser(seed), max_steps=2, only=generators, first=tuple(generators))
        if required <= prog.ops() and any(x.ndim >= 2 and x.size >= 4 for x in prog.inputs):
            return prog
    raise AssertionError(f"no seed gives a {theme} program with all of {sorted(required)}")


def test_numba_themes_together_use_every_op():
    used = set().union(*(themed_program(t).ops() for t in THEMES))
    assert used == set(APPLY), sorted(set(APPLY) - used)


def awkward_layouts(x: np.ndarray) -> dict:
    """The same values as non-contiguous, negative-stride and read-only arrays."""
    out = {}
    if x.ndim:
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        out["strided"] = wide[..., ::2]
        flipped = np.ascontiguousarray(x[..., ::-1])
        out["negative stride"] = flipped[..., ::-1]
    if x.ndim >= 2:
        out["fortran"] = np.asfortranarray(x)
    ro = x.copy()
    ro.setflags(write=False)
    out["read-only"] = ro
    return out


# float32 kernels differ from float64 ones in the math library's lanes and in the
# float64 accumulators of reductions: those two themes run in float32 by default; the
# other float32 themes repeat float64's graphs in another dtype (slow: one compile each)
FLOAT32_DEFAULT_THEMES = {"elementwise", "reductions"}
THEMED_CASES = [
    pytest.param(
        theme,
        dtype,
        id=f"{theme}-{dtype}",
        marks=() if dtype == "float64" or theme in FLOAT32_DEFAULT_THEMES else pytest.mark.slow,
    )
    for theme in sorted(THEMES)
    for dtype in ("float64", "float32")
]


@pytest.mark.numba_pass
@pytest.mark.parametrize("theme, dtype", THEMED_CASES)
def test_themed_program_through_numba(theme, dtype):
    program = themed_program(theme)
    if dtype == "float64":
        check_float64(program, backend="numba")
        inputs, prog = program.inputs, program
    else:
        check_float32(program, backend="numba")
        inputs, prog = program.with_dtype(np.float32)
    vg, value, grads = compiled_value_and_grads(prog, inputs, "numba")
    copies = [x.copy() for x in inputs]
    for layout in ("strided", "negative stride", "fortran", "read-only"):
        variants = [awkward_layouts(x).get(layout, x) for x in inputs]
        before = [v.copy() for v in variants]
        value2, grads2 = vg(*variants)
        np.testing.assert_array_equal(value2, value, err_msg=layout)
        for g2, g in zip(grads2, grads, strict=True):
            np.testing.assert_array_equal(g2, g, err_msg=layout)
        for v, b in zip(variants, before, strict=True):
            np.testing.assert_array_equal(v, b, err_msg=f"{layout} input was mutated")
    for x, c in zip(inputs, copies, strict=True):
        np.testing.assert_array_equal(x, c, err_msg="input was mutated")
    assert vg.cache_info().traces == 1  # layouts convert; they never retrace


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_seeded_program_through_numba(seed):
    program = generate(RngChooser(50_000 + seed), max_steps=8)
    check_float64(program, backend="numba")


# ------------------------------------------------------------- second order


def hessian_vector_products(program: Program, inputs: list, directions: list, backend: str):
    """(compiled H v, eager H v, finite differences of the compiled gradient along v)."""
    n = len(inputs)
    argnums = tuple(range(n))
    grad = tg.grad(lambda *xs: program(*xs), argnums=argnums, backend=backend)

    def directional(*xs):
        total = 0.0
        for g, v in zip(grad(*xs), directions, strict=True):
            total = total + tg.sum(g * v)
        return total

    compiled = tg.grad(directional, argnums=argnums, backend=backend)(*inputs)
    tensors = [E.tensor(x, requires_grad=True) for x in inputs]
    first = E.autograd.grad(program(*tensors), tensors, create_graph=True, allow_unused=True)
    total = 0.0
    for g, v in zip(first, directions, strict=True):
        if g is not None:
            total = total + (g * E.tensor(v)).sum()
    if isinstance(total, float) or not total.requires_grad:  # a constant gradient
        eager = [np.zeros_like(x) for x in inputs]
    else:
        second = E.autograd.grad(total, tensors, allow_unused=True)
        eager = [
            np.zeros_like(x) if s is None else s.numpy()
            for s, x in zip(second, inputs, strict=True)
        ]
    eps = 1e-6
    plus = grad(*[x + eps * v for x, v in zip(inputs, directions, strict=True)])
    minus = grad(*[x - eps * v for x, v in zip(inputs, directions, strict=True)])
    numeric = [(p - m) / (2 * eps) for p, m in zip(plus, minus, strict=True)]
    return list(compiled), eager, numeric


@given(programs(max_steps=5))
def test_random_programs_second_order_eager_compiled_and_finite_differences(program):
    """grad of grad (compiled, traced through) == eager double backward == finite
    differences of the gradient, as Hessian-vector products."""
    rng = np.random.default_rng(len(program.steps))
    directions = [rng.uniform(-1, 1, x.shape) for x in program.inputs]
    compiled, eager, numeric = hessian_vector_products(
        program, program.inputs, directions, "interpret"
    )
    for k, (c, e, fd) in enumerate(zip(compiled, eager, numeric, strict=True)):
        assert_agree(c, e, 1e-9, f"H v {k}: compiled vs eager", program)
        assert_agree(c, fd, 1e-4, f"H v {k}: compiled vs finite differences", program)


@pytest.mark.slow
@pytest.mark.parametrize("theme", sorted(THEMES))
def test_themed_program_second_order_through_numba(theme):
    program = themed_program(theme)
    rng = np.random.default_rng(0)
    directions = [rng.uniform(-1, 1, x.shape) for x in program.inputs]
    compiled, eager, numeric = hessian_vector_products(program, program.inputs, directions, "numba")
    for k, (c, e, fd) in enumerate(zip(compiled, eager, numeric, strict=True)):
        assert_agree(c, e, 1e-9, f"H v {k}: compiled vs eager", program)
        assert_agree(c, fd, 1e-4, f"H v {k}: compiled vs finite differences", program)
