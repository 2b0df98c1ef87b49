"""Forward mode (issue 13): a JVP rule per primitive and the forward-mode pass.

- every primitive of the rule table has a JVP rule, explicit or derived from its
  VJPs (diagonal for elementwise ops, transposition otherwise);
- every row of tests/ops/op_cases.py: the JVP against float64 central differences,
  against the VJP by the dot-product test <J t, g> == <t, J^T g>, the derived rule
  against the explicit one, and the rule run on recorded values (written in ops);
- loops, branches and custom rules; jvp of jvp, jvp of grad, grad of jvp;
- tg.jvp / tg.jacfwd against jax.jvp / jax.jacfwd on a dozen functions.

The table checks run the rules on plain arrays (NumPy mode) and the transforms
use the interpreter, so the default run compiles only a couple of kernels.
"""

from __future__ import annotations

import pathlib
import sys
import zlib

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import forward
from tracegrad.ir import interpret
from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "ops"))
from op_cases import CASES
from opkit import Rec, value

INTERP = dict(backend="interpret")

# Primitives whose jvp is written in the table (the rest are derived from their vjps).
EXPLICIT = {
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "where",
    "astype",
    "sum",
    "mean",
    "max",
    "min",
    "var",
    "logsumexp",
    "softmax",
    "log_softmax",
    "reshape",
    "broadcast_to",
    "transpose",
    "concatenate",
    "matmul",
    "addmm",
    "getitem",
    "index_add_zeros",
    "take_along_axis",
    "put_along_axis_add",
    "nll_loss",
    "cumsum",
    "linrec",
    "scan",
    "cond",
    "while",
    "call",
    "custom_vjp_call",
}


def _rng(case, salt=""):
    return np.random.default_rng(zlib.crc32((case.id + salt).encode()))


def _float_operands(args):
    return [
        i
        for i, a in enumerate(args)
        if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating)
    ]


def _apply_jvp(rule, args, tangents, out, attrs):
    """The rule's tangent as an array of the output's shape (None: zeros)."""
    t = rule(tuple(args), tuple(tangents), out, **attrs)
    if t is None:
        return np.zeros_like(out)
    t = value(t) if isinstance(t, Rec) else np.asarray(t)
    return np.broadcast_to(t, out.shape).astype(out.dtype)


# ------------------------------------------------------------ the rule table


def test_every_primitive_has_a_jvp_rule():
    missing = [name for name in EXPLICIT if REGISTRY[name].jvp is None]
    assert not missing, f"expected explicit jvp rules for {missing}"
    for name, prim in REGISTRY.items():
        rule = forward.jvp_rule(prim)
        assert callable(rule), name
        if prim.jvp is None:  # derived: by the kind of its Jacobian
            how = "_from_vjp" if prim.kind == "elementwise" else "_by_transposition"
            assert rule.__name__.endswith(how), (name, rule.__name__)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_jvp_against_finite_differences_and_the_vjp(case):
    """All float operands moved at once, then each alone (the others' tangents None)."""
    rng = _rng(case, "jvp")
    args = case.draw(rng, "float64")
    out = case.prim.impl(*args, **case.attrs)
    floats = _float_operands(args)
    assert floats, "the case has no floating operand"
    tangents_all = [
        rng.standard_normal(args[i].shape) if i in floats else None for i in range(len(args))
    ]
    g = rng.standard_normal(out.shape)
    rule = forward.jvp_rule(case.prim)
    for moved in [floats] + ([[i] for i in floats] if len(floats) > 1 else []):
        tangents = [tangents_all[i] if i in moved else None for i in range(len(args))]
        jt = _apply_jvp(rule, args, tangents, out, case.attrs)
        eps = 1e-6

        def at(s):
            shifted = [
                a + s * t if t is not None else a
                for a, t in zip(args, tangents, strict=True)  # noqa: B023 - at() runs in this iteration
            ]
            return case.prim.impl(*shifted, **case.attrs)

        numeric = (at(eps) - at(-eps)) / (2 * eps)
        np.testing.assert_allclose(
            jt,
            numeric,
            rtol=1e-5,
            atol=1e-6,
            err_msg=f"{case.id}: jvp vs finite differences, moved {moved}",
        )
        # <J t, g> == sum_i <t_i, vjp_i(g)>
        transposed = sum(
            np.vdot(
                T.sum_to_shape(case.prim.vjps[i](g, out, *args, **case.attrs), args[i].shape),
                tangents[i],
            )
            for i in moved
        )
        assert np.isclose(np.vdot(jt, g), transposed, rtol=1e-10, atol=1e-12), (moved,)


@pytest.mark.parametrize("case", [c for c in CASES if c.prim.jvp is not None], ids=lambda c: c.id)
def test_derived_rule_agrees_with_the_explicit_one(case):
    """The generic derivation (diagonal / transposition) is exact: it equals each
    hand-written rule, so primitives without one (linalg, eager's) are served right."""
    rng = _rng(case, "derived")
    args = case.draw(rng, "float64")
    out = case.prim.impl(*args, **case.attrs)
    tangents = [
        rng.standard_normal(a.shape) if i in _float_operands(args) else None
        for i, a in enumerate(args)
    ]
    explicit = _apply_jvp(case.prim.jvp, args, tangents, out, case.attrs)
    derived = _apply_jvp(forward.derived_jvp(case.prim), args, tangents, out, case.attrs)
    np.testing.assert_allclose(derived, explicit, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_jvp_rules_are_written_in_tracegrad_ops(case):
    """Run on recorded values (opkit.Rec refuses NumPy calls), the rule gives the
    same tangent as on arrays: it works on tracers and eager tensors alike."""
    rng = _rng(case, "rec")
    args = case.draw(rng, "float64")
    out = case.prim.impl(*args, **case.attrs)
    floats = _float_operands(args)
    tangents = [rng.standard_normal(a.shape) if i in floats else None for i, a in enumerate(args)]
    rule = forward.jvp_rule(case.prim)
    on_arrays = _apply_jvp(rule, args, tangents, out, case.attrs)
    rec_args = [Rec(a) if i in floats else a for i, a in enumerate(args)]
    rec_tangents = [None if t is None else Rec(t) for t in tangents]
    on_recs = _apply_jvp(rule, rec_args, rec_tangents, Rec(out), case.attrs)
    np.testing.assert_allclose(on_recs, on_arrays, rtol=1e-12, atol=1e-14)


def _linalg_cases():
    rng = np.random.default_rng(14)
    a = rng.standard_normal((4, 4))
    spd = a @ a.T + 4 * np.eye(4)
    lower = np.linalg.cholesky(spd)
    sym = rng.standard_normal((4, 4))
    b = rng.standard_normal(4)
    return [  # (primitive name, operands, tangents, attrs): rules derived by transposition
        ("cholesky", (spd,), (sym + sym.T,), {}),
        ("inv", (spd,), (a,), {}),
        ("det", (spd / 4,), (a,), {}),
        ("logabsdet", (spd,), (a,), {}),
        ("solve", (spd, b), (a, rng.standard_normal(4)), {}),
        ("triangular_solve", (lower, b), (np.tril(a), rng.standard_normal(4)), {"lower": True}),
    ]


@pytest.mark.parametrize(
    "name, args, tangents, attrs", _linalg_cases(), ids=[c[0] for c in _linalg_cases()]
)
def test_primitives_without_a_table_row_get_an_exact_derived_jvp(name, args, tangents, attrs):
    """Primitives added elsewhere (tracegrad/ops/linalg.py) and given only vjps."""
    if name not in REGISTRY:
        pytest.skip(f"no {name} primitive in this build")
    prim = REGISTRY[name]
    out = prim.impl(*args, **attrs)
    jt = _apply_jvp(forward.jvp_rule(prim), args, tangents, out, attrs)
    eps = 1e-6
    plus = prim.impl(*[a + eps * t for a, t in zip(args, tangents, strict=True)], **attrs)
    minus = prim.impl(*[a - eps * t for a, t in zip(args, tangents, strict=True)], **attrs)
    np.testing.assert_allclose(jt, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-7)
    g = np.random.default_rng(0).standard_normal(out.shape)
    transposed = sum(
        np.vdot(T.sum_to_shape(prim.vjps[i](g, out, *args, **attrs), a.shape), t)
        for i, (a, t) in enumerate(zip(args, tangents, strict=True))
    )
    assert np.isclose(np.vdot(jt, g), transposed, rtol=1e-10)


# ------------------------------------------------------------ the pass on the IR


def test_jvp_graph_signature_and_values():
    g = tg.trace(lambda x, y: (tg.sin(x) * y, tg.sum(y)), np.ones(3), np.ones(3))
    fwd = forward.jvp_graph(g, wrt=[0])
    assert [n.attrs["name"] for n in fwd.inputs] == ["x", "y", "t_x"]
    assert len(fwd.outputs) == 4  # two outputs, two tangents
    x, y, t = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 2.0])
    out0, out1, t0, t1 = interpret(fwd, x, y, t)
    np.testing.assert_allclose(out0, np.sin(x) * y)
    np.testing.assert_allclose(t0, np.cos(x) * y * t, rtol=1e-14)
    np.testing.assert_array_equal(t1, 0.0)  # sum(y) does not depend on x
    with pytest.raises(forward.ForwardModeError, match="floating-point"):
        forward.jvp_graph(tg.trace(lambda i: i * 2, np.arange(3)), wrt=[0])


def test_tangent_nodes_are_forward_mode_not_a_double_vjp():
    """tanh(W @ x): the tangent half is two matmuls, a tanh' and adds: no transposes,
    no scatters (the double-VJP pass had both)."""
    W, x = np.ones((4, 3)), np.ones(3)
    fwd = forward.jvp_graph(tg.trace(lambda W, x: tg.tanh(W @ x), W, x))
    ops = sorted(n.op for n in fwd.nodes if n.tag == "jvp" and n.op != "const")
    assert ops == ["add", "matmul", "matmul", "mul", "mul", "sub"], ops  # t (1 - out^2)


def test_jvp_apply_on_eager_tensors_records_an_eager_graph():
    """The same rules run on eager tensors: grad of <J t, u> by eager backward."""
    torch = pytest.importorskip("tracegrad.eager")
    g = tg.trace(lambda x: tg.sin(x) * x, np.ones(3))
    x0, t0 = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -2.0])
    x = torch.tensor(x0, requires_grad=True)
    (out,), (tangent,) = forward.jvp_apply(g, [x], [torch.tensor(t0)])
    np.testing.assert_allclose(tangent.detach().numpy(), (np.cos(x0) * x0 + np.sin(x0)) * t0)
    tangent.sum().backward()
    expected = (-np.sin(x0) * x0 + 2 * np.cos(x0)) * t0  # d/dx of (x cos x + sin x) t
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_partial_eval_leaves_only_the_linear_part_per_call():
    """linearize's split: tanh and the matmul of the primal run once (known graph);
    the per-call graph has only tangent ops and reads the stored residuals."""
    W, x = np.ones((4, 3)), np.ones(3)
    g = tg.trace(lambda W, x: tg.tanh(W @ x) * 3.0, W, x)
    fwd = forward.jvp_graph(g, joint=False)
    known, linear = forward.partial_eval(fwd, unknown_inputs=[2, 3], unknown_outputs=[1])
    assert "tanh" in [n.op for n in known.nodes]
    assert "tanh" not in [n.op for n in linear.nodes]
    assert sum(n.op == "matmul" for n in linear.nodes) == 2  # tW @ x + W @ tx
    rng = np.random.default_rng(1)
    W, x, tW, tx = (rng.standard_normal(s) for s in [(4, 3), (3,), (4, 3), (3,)])
    out, *residuals = interpret(known, W, x)
    (tangent,) = interpret(linear, *residuals, tW, tx)
    np.testing.assert_allclose(out, np.tanh(W @ x) * 3.0)
    np.testing.assert_allclose(
        tangent, 3.0 * (1 - np.tanh(W @ x) ** 2) * (tW @ x + W @ tx), rtol=1e-12
    )


@pytest.mark.parametrize("backend", ["interpret", "numba"])
def test_linearize_matches_jvp(rng, backend):
    W = rng.standard_normal((5, 3))

    def f(x, w):
        return {"y": tg.tanh(W @ x) * w, "s": rnn(x, w)}

    x, w = rng.standard_normal(3), np.array(0.4)
    out, f_jvp = tg.linearize(f, x, w, backend=backend)
    np.testing.assert_allclose(out["y"], np.tanh(W @ x) * w, rtol=1e-12)
    for _ in range(2):  # the stored residuals serve every call
        t = (rng.standard_normal(3), np.array(rng.standard_normal()))
        got = f_jvp(*t)
        expected = tg.jvp(f, (x, w), t, **INTERP)[1]
        for k in ("y", "s"):
            np.testing.assert_allclose(got[k], expected[k], rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------ loops, branches, custom rules


def central(f, primals, tangents, eps=1e-6):
    plus = f(*[p + eps * t for p, t in zip(primals, tangents, strict=True)])
    minus = f(*[p - eps * t for p, t in zip(primals, tangents, strict=True)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def rnn(x, w):
    def body(c, xt):
        c = tg.tanh(c * w + xt)
        return c, c * 2.0

    c, ys = tg.scan(body, x[0] * 0.0, x)
    return tg.sum(ys) + c


def fori(x):
    return tg.fori_loop(0, 3, lambda i, c: tg.sin(c) * x, x)


def while_sum(x):
    return tg.while_loop(lambda c: c[1] < 3, lambda c: (tg.sin(c[0]) + x, c[1] + 1), (x, 0))[0]


def branch(x):
    return tg.cond(tg.sum(x) > 0, lambda a: tg.sin(a) * 2.0, lambda a: tg.cos(a), x)


@pytest.mark.parametrize(
    "fn, nargs",
    [(rnn, 2), (fori, 1), (while_sum, 1), (branch, 1)],
    ids=["scan", "fori_loop", "while_loop", "cond"],
)
def test_control_flow_jvp_against_finite_differences(rng, fn, nargs):
    primals = [rng.standard_normal(5), np.array(0.7)][:nargs]
    tangents = [rng.standard_normal(np.shape(p)) for p in primals]
    out, tangent = tg.jvp(fn, tuple(primals), tuple(tangents), **INTERP)
    np.testing.assert_allclose(out, fn(*primals), rtol=1e-12)
    np.testing.assert_allclose(tangent, central(fn, primals, tangents), rtol=1e-6, atol=1e-8)
    # jacfwd: the loop's tangent pass vmapped over the basis (batched loop bodies)
    jac = tg.jacfwd(fn, **INTERP)(*primals)
    basis = np.eye(primals[0].size)
    numeric = np.stack(
        [central(fn, primals, [e] + [0 * p for p in primals[1:]]) for e in basis], axis=-1
    )
    np.testing.assert_allclose(jac, numeric, rtol=1e-6, atol=1e-8)


def test_loops_and_branches_jvp_compiled(rng):
    """Numba: scan, while and cond JVPs in one kernel, against central differences."""

    def combo(x, w):
        return rnn(x, w) + tg.sum(while_sum(x) * branch(x))

    x, w = rng.standard_normal(5), np.array(0.7)
    t = (rng.standard_normal(5), np.array(0.2))
    out, tangent = tg.jvp(combo, (x, w), t)
    np.testing.assert_allclose(out, combo(x, w), rtol=1e-12)
    np.testing.assert_allclose(tangent, central(combo, [x, w], list(t)), rtol=1e-6)


def test_scan_jvp_is_one_forward_scan_over_the_body_jvp(rng):
    """One scan computes the primal and its tangent (the double VJP had four, one of
    them reversed, storing every step's carry); its carry gains the tangent carry."""
    x, w = rng.standard_normal(5), np.array(0.7)
    tg.jvp(rnn, (x, w), (x, w), **INTERP)
    lowered = tg.transforms._CACHE[rnn][("jvp", False, "interpret")].lower((x, w), (x, w))
    scans = [n for n in lowered.traced.nodes if n.op == "scan"]
    assert len(scans) == 1 and not scans[0].attrs["reverse"]
    assert scans[0].attrs["n_carry"] == 2  # carry and tangent carry
    assert lowered.scan_residual_bytes == 0


def test_while_loop_has_forward_mode_though_not_reverse(rng):
    x, t = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(
        tg.jvp(while_sum, (x,), (t,), **INTERP)[1],
        central(while_sum, [x], [t]),
        rtol=1e-6,
        atol=1e-8,
    )
    with pytest.raises(Exception, match="while_loop"):
        tg.grad(lambda x: tg.sum(while_sum(x)), **INTERP)(x)


def test_custom_jvp_rule_is_used_in_forward_mode(rng):
    @tg.custom_jvp
    def f(x):
        return tg.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return tg.sin(x), 2.0 * t  # deliberately not cos(x) t

    x, t = rng.standard_normal(3), rng.standard_normal(3)
    out, tangent = tg.jvp(f, (x,), (t,), **INTERP)
    np.testing.assert_allclose(out, np.sin(x))
    np.testing.assert_allclose(tangent, 2.0 * t)
    np.testing.assert_allclose(tg.jacfwd(f, **INTERP)(x), 2.0 * np.eye(3))


def test_custom_vjp_forward_mode_transposes_the_bwd_rule(rng):
    @tg.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (10.0 * g * res[1], g * res[0]))
    x, y, tx, ty = (rng.standard_normal(3) for _ in range(4))
    _, tangent = tg.jvp(f, (x, y), (tx, ty), **INTERP)
    np.testing.assert_allclose(tangent, 10.0 * y * tx + x * ty, rtol=1e-12)


# ------------------------------------------------------------ higher order


def f_vec(x):
    return tg.sin(x) * tg.exp(x[::-1]) + tg.sum(x**3) * tg.softmax(x, axis=0)


def loss(x):
    return tg.sum(tg.tanh(x) * x[::-1]) + tg.logsumexp(x) * tg.sum(x**2)


def test_jvp_of_jvp(rng):
    x, t, s = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)

    def inner(x):
        return tg.jvp(f_vec, (x,), (t,), **INTERP)[1]

    _, second = tg.jvp(inner, (x,), (s,), **INTERP)
    np.testing.assert_allclose(second, central(inner, [x], [s]), rtol=1e-6, atol=1e-8)


def test_jvp_of_grad_is_a_hessian_vector_product(rng):
    x, t = rng.standard_normal(5), rng.standard_normal(5)
    _, hvp = tg.jvp(tg.grad(loss, **INTERP), (x,), (t,), **INTERP)
    np.testing.assert_allclose(hvp, tg.hessian(loss, **INTERP)(x) @ t, rtol=1e-10, atol=1e-12)


def test_forward_over_reverse_through_a_scan(rng):
    """jvp of grad of a scan: scans over the JVPs of the history and backward bodies."""

    def loss_rnn(x, w):
        return tg.sum(rnn(x, w) ** 2)

    x, t, w = rng.standard_normal(5), rng.standard_normal(5), np.array(0.7)
    _, hvp = tg.jvp(lambda x: tg.grad(loss_rnn, **INTERP)(x, w), (x,), (t,), **INTERP)
    np.testing.assert_allclose(
        hvp, tg.hessian(loss_rnn, **INTERP)(x, w) @ t, rtol=1e-10, atol=1e-12
    )


def test_forward_module_doctests():
    import doctest

    result = doctest.testmod(forward)
    assert result.attempted and not result.failed


def test_grad_of_jvp(rng):
    x, t = rng.standard_normal(4), rng.standard_normal(4)

    def q(x):
        return tg.sum(tg.jvp(f_vec, (x,), (t,), **INTERP)[1] ** 2)

    g = tg.grad(q, **INTERP)(x)
    numeric = np.array([central(q, [x], [e]) for e in np.eye(4)])
    np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)


def test_jvp_with_pytrees_aux_and_integer_arguments(rng):
    def f(p, k):
        return {"a": p["w"] * k, "s": tg.sum(p["w"] * p["b"])}, "aux"

    p = {"w": rng.standard_normal(3), "b": rng.standard_normal(3)}
    tp = {"w": rng.standard_normal(3), "b": rng.standard_normal(3)}
    k = np.arange(3)
    out, tangent, aux = tg.jvp(f, (p, k), (tp, np.zeros(3, np.int64)), has_aux=True, **INTERP)
    assert aux == "aux"
    np.testing.assert_allclose(tangent["a"], tp["w"] * k)
    np.testing.assert_allclose(tangent["s"], np.sum(tp["w"] * p["b"] + p["w"] * tp["b"]))


def test_jvp_and_aux_basic():
    """Ported from JAX's tests/api_test.py (test_jvp_and_aux_basic)."""
    fun = lambda x: (x**3, [x**2])
    primals, tangents, aux = tg.jvp(fun, (3.0,), (4.0,), has_aux=True, **INTERP)
    expected_primals, expected_tangents = tg.jvp(lambda x: x**3, (3.0,), (4.0,), **INTERP)
    np.testing.assert_allclose(primals, expected_primals)
    np.testing.assert_allclose(tangents, expected_tangents)
    np.testing.assert_allclose(tangents, 3 * 3.0**2 * 4.0)
    np.testing.assert_allclose(aux, [3.0**2])


def test_jvp_of_grad_of_indexing():
    """Ported from JAX's tests (testJVPOfGradOfIndexing): an integer index argument
    with a zero tangent; grad scatters, the tangent of a constant gradient is zero."""
    x = np.ones((3, 4), np.float32)
    i = np.ones((3,), np.int32)
    f = lambda x, i: tg.sum(x[i])
    primals, tangents = tg.jvp(tg.grad(f, **INTERP), (x, i), (x, np.zeros_like(i)), **INTERP)
    expected = np.broadcast_to(np.array([0, 3, 0], dtype=np.float32)[:, None], (3, 4))
    np.testing.assert_allclose(primals, expected)
    assert primals.dtype == np.float32
    np.testing.assert_allclose(tangents, np.zeros_like(x))


def test_jacfwd_of_an_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs"):
        tg.jacfwd(lambda x: x * 2.0, **INTERP)(np.arange(3))


def test_jacfwd_of_a_wide_output_compiled(rng):
    """Numba: one primal and one tangent pass per input element, equal to jacrev."""
    W = rng.standard_normal((40, 3))

    def wide(x):
        h = tg.tanh(W @ x)
        return tg.sin(h) * h

    x = rng.standard_normal(3)
    jf = tg.jacfwd(wide)
    np.testing.assert_allclose(jf(x), tg.jacobian(wide, **INTERP)(x), rtol=1e-12, atol=1e-14)
    traced = jf.lower(x).traced
    assert sum(n.op == "tanh" for n in traced.nodes) == 1  # the primal runs once


def test_jacfwd_is_one_batched_tangent_pass(rng):
    """The tangent pass is vmapped over the identity (JAX's jacfwd): the graph does
    not grow with the input size, and W @ t over the basis is one matrix product."""
    W = rng.standard_normal((7, 9))
    sizes = {}
    for n in (3, 9):

        def f(x):
            return tg.tanh(W[:, :n] @ x) * 2.0  # noqa: B023 - f is traced in this iteration

        x = rng.standard_normal(n)
        jf = tg.jacfwd(f, **INTERP)
        h = np.tanh(W[:, :n] @ x)
        np.testing.assert_allclose(jf(x), 2 * (1 - h**2)[:, None] * W[:, :n], rtol=1e-12)
        traced = jf.lower(x).traced
        sizes[n] = len(traced.nodes)
        assert [m.shape for m in traced.nodes if m.op == "matmul"][-1] == (n, 7)
    assert sizes[3] == sizes[9], sizes


# ------------------------------------------------------------ against JAX


def _jax_pairs():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(3)
    M = rng.standard_normal((4, 3))
    idx = np.array([[0, 2], [1, 1], [3, 0]])

    def rnn_jax(x, w):
        def body(c, xt):
            c = jnp.tanh(c * w + xt)
            return c, c * 2.0

        c, ys = jax.lax.scan(body, x[0] * 0.0, x)
        return jnp.sum(ys) + c

    return (
        jax,
        [  # (name, tracegrad fn, jax fn, argument shapes)
            (
                "sin_mul_rev",
                lambda x: tg.sin(x) * x[::-1] + x**2 * tg.sum(x),
                lambda x: jnp.sin(x) * x[::-1] + x**2 * jnp.sum(x),
                [(4,)],
            ),
            (
                "softmax_matmul",
                lambda x: tg.softmax(M @ x, axis=0),
                lambda x: jax.nn.softmax(M @ x, axis=0),
                [(3,)],
            ),
            (
                "log_softmax_rows",
                lambda x: tg.log_softmax(x, axis=1),
                lambda x: jax.nn.log_softmax(x, axis=1),
                [(2, 3)],
            ),
            (
                "logsumexp_var",
                lambda x: tg.logsumexp(x, axis=0) * tg.var(x, axis=0, ddof=1),
                lambda x: jax.scipy.special.logsumexp(x, axis=0) * jnp.var(x, axis=0, ddof=1),
                [(3, 2)],
            ),
            (
                "max_min",
                lambda x: tg.max(x, axis=1) - tg.min(x) * x[:, 0],
                lambda x: jnp.max(x, axis=1) - jnp.min(x) * x[:, 0],
                [(3, 4)],
            ),
            (
                "cumsum_cumprod",
                lambda x: tg.cumsum(x, axis=0) + tg.cumprod(x, axis=0),
                lambda x: jnp.cumsum(x, axis=0) + jnp.cumprod(x, axis=0),
                [(5,)],
            ),
            (
                "concat_index",
                lambda x: tg.concatenate([x[[2, 0, 2]], tg.exp(x[1:])], axis=0),
                lambda x: jnp.concatenate([x[jnp.array([2, 0, 2])], jnp.exp(x[1:])], axis=0),
                [(4,)],
            ),
            (
                "where_maximum_clip",
                lambda x: tg.where(x > 0, tg.maximum(x, 0.3), tg.clip(x, -0.5, 1.0)),
                lambda x: jnp.where(x > 0, jnp.maximum(x, 0.3), jnp.clip(x, -0.5, 1.0)),
                [(6,)],
            ),
            (
                "take_along_axis",
                lambda x: tg.take_along_axis(x, idx, axis=1) ** 2,
                lambda x: jnp.take_along_axis(x, idx, axis=1) ** 2,
                [(3, 4)],
            ),
            (
                "batched_matmul",
                lambda a, b: tg.tanh(a @ b),
                lambda a, b: jnp.tanh(a @ b),
                [(2, 3, 4), (4, 2)],
            ),
            (
                "special_functions",
                lambda x, y: tg.arctan2(x, y) + tg.expm1(x) * tg.log1p(y**2),
                lambda x, y: jnp.arctan2(x, y) + jnp.expm1(x) * jnp.log1p(y**2),
                [(3,), (3,)],
            ),
            (
                "sort",
                lambda x: tg.sort(x) * np.arange(5.0),
                lambda x: jnp.sort(x) * jnp.arange(5.0),
                [(5,)],
            ),
            ("scan_rnn", rnn, rnn_jax, [(5,), ()]),
        ],
    )


def _draw(shapes, rng):
    return tuple(rng.standard_normal(s) for s in shapes)


def test_jvp_matches_jax_and_jacfwd_matches_jacrev():
    """jax.jvp (jitted: one XLA compile per function) on all, tracegrad's reverse-mode
    jacobian for jacfwd (a separate path: tangent passes sharing one primal)."""
    jax, pairs = _jax_pairs()
    rng = np.random.default_rng(11)
    for name, ours, theirs, shapes in pairs:
        primals, tangents = _draw(shapes, rng), _draw(shapes, rng)
        out, tangent = tg.jvp(ours, primals, tangents, **INTERP)
        j_out, j_tangent = jax.jit(lambda p, t: jax.jvp(theirs, p, t))(primals, tangents)  # noqa: B023 - jitted and run in this iteration
        np.testing.assert_allclose(out, np.asarray(j_out), rtol=1e-12, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(
            tangent, np.asarray(j_tangent), rtol=1e-10, atol=1e-12, err_msg=name
        )
        argnums = tuple(range(len(shapes)))
        jac = tg.jacfwd(ours, argnums=argnums, **INTERP)(*primals)
        rev = tg.jacobian(ours, argnums=argnums, **INTERP)(*primals)
        for a, b in zip(jac, rev, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    "which",
    [
        "sin_mul_rev",
        "max_min",
        "batched_matmul",
        *[
            pytest.param(n, marks=pytest.mark.slow)
            for n in (
                "softmax_matmul",
                "log_softmax_rows",
                "logsumexp_var",
                "cumsum_cumprod",
                "concat_index",
                "where_maximum_clip",
                "take_along_axis",
                "special_functions",
                "sort",
                "scan_rnn",
            )
        ],
    ],
)
def test_jacfwd_matches_jax(which):
    jax, pairs = _jax_pairs()
    name, ours, theirs, shapes = next(p for p in pairs if p[0] == which)
    primals = _draw(shapes, np.random.default_rng(zlib.crc32(name.encode())))
    argnums = tuple(range(len(shapes)))
    jac = tg.jacfwd(ours, argnums=argnums, **INTERP)(*primals)
    j_jac = jax.jit(jax.jacfwd(theirs, argnums=argnums))(*primals)
    for a, b in zip(jac, j_jac, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-12, err_msg=name)


def test_forward_over_reverse_matches_jax(rng):
    jax, _ = _jax_pairs()
    jnp = jax.numpy

    def loss_jax(x):
        return jnp.sum(jnp.tanh(x) * x[::-1]) + jax.scipy.special.logsumexp(x) * jnp.sum(x**2)

    x, t = rng.standard_normal(5), rng.standard_normal(5)
    ours = tg.jvp(tg.grad(loss, **INTERP), (x,), (t,), **INTERP)[1]
    theirs = jax.jit(lambda x, t: jax.jvp(jax.grad(loss_jax), (x,), (t,))[1])(x, t)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-10, atol=1e-12)
