"""Every primitive in the registry carries every rule, and the table covers every primitive."""

import re

import numpy as np
import pytest
from op_cases import CASES

from tracegrad.ops import table as T
from tracegrad.ops.core import REGISTRY

ARITY = {  # fixed-arity primitives: operands each vjp tuple must cover
    "add": 2,
    "sub": 2,
    "mul": 2,
    "div": 2,
    "pow": 2,
    "maximum": 2,
    "minimum": 2,
    "where": 3,
    "matmul": 2,
    "addmm": 3,
    "nll_loss": 2,
    "take_along_axis": 2,
    "put_along_axis_add": 2,
    "arctan2": 2,
    "remainder": 2,
    "linrec": 2,
    "triangular_solve": 2,
    "triangular_matmul": 2,
    "solve": 2,
    "clamp_tensor": 3,
    "lstsq": 2,
    "gammainc": 2,
    "gammaincc": 2,
    "betainc": 3,
    "random_gamma": 3,
    "complex": 2,
    "solve_general": 2,
}
VARIADIC = {"concatenate", "getitem", "index_add_zeros"}
# Structured control flow holds sub-graphs: no per-node codegen (the body graphs
# are compiled on their own) and no op_cases row; tests/compile/test_loops.py.
CONTROL = {"scan", "cond", "while", "call", "custom_vjp_call"}
KINDS = {"elementwise", "reduction", "shape", "matmul", "index", "other"}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_primitive_has_every_rule(name):
    prim = REGISTRY[name]
    assert callable(prim.impl), name
    assert callable(prim.shape_rule), name
    assert prim.kind in KINDS, (name, prim.kind)
    if name in CONTROL:
        assert isinstance(prim.vjps, T.PerOperand) and prim.codegen is None, name
        return
    assert prim.codegen is not None, f"{name} has no codegen"
    assert isinstance(prim.codegen, str) or callable(prim.codegen)
    if prim.nondiff:
        return
    assert prim.torch_name is not None, f"{name} has no torch_name"
    assert all(s == "out" or isinstance(s, int) for s in prim.saves), name
    if name in VARIADIC:
        assert isinstance(prim.vjps, T.PerOperand), name
        assert callable(prim.vjps[0]) and callable(prim.vjps[5])
    else:
        assert len(prim.vjps) == ARITY.get(name, 1), f"{name}: one vjp per operand"
        assert all(callable(v) for v in prim.vjps), name


# Differentiable, but not the derivative of their impl, so finite differences of the
# impl cannot check them: random_gamma's gradient in alpha is the implicit
# reparameterization one (JAX's), not the derivative of its rejection loop;
# tests/random/test_random_keys.py checks it against JAX and SciPy's gammainc.
NO_GRADIENT_YET = {"random_gamma"}
# Complex-valued primitives: op_cases draws real operands, so their rows (complex
# operands, JAX's transpose convention) live in tests/complex/test_complex_rules.py.
COMPLEX_ROWS = {"real", "imag", "conj", "complex", "fft", "eig", "solve_general", "det_general"}


def test_every_differentiable_primitive_has_an_op_case():
    covered = {c.prim.name for c in CASES}
    missing = [
        n
        for n, p in REGISTRY.items()
        if not p.nondiff and n not in covered and n not in CONTROL | NO_GRADIENT_YET | COMPLEX_ROWS
    ]
    assert not missing, f"add rows to tests/ops/op_cases.py for {missing}"


def test_elementwise_codegen_templates_name_each_operand():
    """Templates fill with str.format; string templates must use {0}..{n-1} only."""
    for name, prim in REGISTRY.items():
        if prim.kind != "elementwise" or not isinstance(prim.codegen, str):
            continue
        fields = {int(f) for f in re.findall(r"\{(\d+)\}", prim.codegen)}
        assert fields == set(range(len(prim.vjps))), (name, prim.codegen)


def test_attr_dependent_templates():
    assert T.clip.codegen(lo=0.0, hi=None) == "tg_maximum({0}, 0.0)"
    assert T.clip.codegen(lo=-1.0, hi=2.0) == "tg_minimum(tg_maximum({0}, -1.0), 2.0)"
    assert T.astype.codegen(dtype="float32") == "np.float32({0})"
    assert T.astype.codegen(dtype="bool") == "({0} != 0)"
    assert T.full_like.codegen(value=0, dtype=None) == "0"
    assert T.full_like.codegen(value=float("-inf"), dtype=None) == "-np.inf"
    assert T.full_like.codegen(value=1, dtype="bool") == "True"
    assert T.clip.codegen(lo=None, hi=float("inf")) == "tg_minimum({0}, np.inf)"


def test_math_helpers_used_by_templates_are_a_known_set():
    """The code generator's mathlib must define these (kept here so a new one is noticed)."""
    used = set()
    for prim in REGISTRY.values():
        if isinstance(prim.codegen, str):
            used |= set(re.findall(r"tg_\w+", prim.codegen))
    assert used <= {
        "tg_exp",
        "tg_log",
        "tg_log1p",
        "tg_sqrt",
        "tg_sin",
        "tg_cos",
        "tg_tanh",
        "tg_sigmoid",
        "tg_relu",
        "tg_sign",
        "tg_pow",
        "tg_maximum",
        "tg_minimum",
        "tg_where",
        "tg_isfinite",
    }, used


TORCH_NAMES = [  # (primitive, operands, attrs, PyTorch's node name), checked against torch 2.13
    (T.pow_, (np.ones(2), 2.0), {}, "PowBackward0"),
    (T.pow_, (np.ones(2), np.ones(2)), {}, "PowBackward1"),
    (T.pow_, (2.0, np.ones(2)), {}, "PowBackward2"),
    (T.sub, (1.0, np.ones(2)), {}, "RsubBackward1"),
    (T.sub, (np.ones(2), 1.0), {}, "SubBackward0"),
    (T.sum_, (np.ones(2),), {"axis": None}, "SumBackward0"),
    (T.sum_, (np.ones(2),), {"axis": 0}, "SumBackward1"),
    (T.mean, (np.ones(2),), {"axis": None}, "MeanBackward0"),
    (T.mean, (np.ones(2),), {"axis": 0}, "MeanBackward1"),
    (T.max_, (np.ones(2),), {"axis": None}, "MaxBackward1"),
    (T.max_, (np.ones(2),), {"axis": 0}, "MaxBackward0"),
    (T.matmul, (np.ones(3), np.ones(3)), {}, "DotBackward0"),
    (T.matmul, (np.ones((2, 3)), np.ones(3)), {}, "MvBackward0"),
    (T.matmul, (np.ones(3), np.ones((3, 2))), {}, "SqueezeBackward4"),
    (T.matmul, (np.ones((2, 3)), np.ones((3, 2))), {}, "MmBackward0"),
    (T.matmul, (np.ones((4, 2, 3)), np.ones((4, 3, 2))), {}, "UnsafeViewBackward0"),
    (T.transpose, (np.ones((2, 3, 4)),), {"axes": (1, 0, 2)}, "TransposeBackward0"),
    (T.transpose, (np.ones((2, 3, 4)),), {"axes": (2, 0, 1)}, "PermuteBackward0"),
    (T.transpose, (np.ones((2, 3)),), {"axes": (1, 0)}, "PermuteBackward0"),  # x.T
    (T.getitem, (np.ones((3, 4)),), {"spec": (0, ("slice", 0, 4, 1))}, "SelectBackward0"),
    (
        T.getitem,
        (np.ones((3, 4)),),
        {"spec": (("slice", 1, 3, 1), ("slice", 0, 4, 1))},
        "SliceBackward0",
    ),
    (T.getitem, (np.ones((3, 4)),), {"spec": (0, ("slice", 1, 3, 1))}, "SliceBackward0"),
    (T.getitem, (np.ones((3, 4)),), {"spec": (("slice", 1, 3, 1), 0)}, "SelectBackward0"),
    (
        T.getitem,
        (np.ones((3, 4)),),
        {"spec": (None, ("slice", 0, 3, 1), ("slice", 0, 4, 1))},
        "UnsqueezeBackward0",
    ),
    (T.getitem, (np.ones(3),), {"spec": (("slice", 0, 3, 1),)}, "SliceBackward0"),  # x[:]
    (
        T.getitem,
        (np.ones((3, 4)), np.array([0])),
        {"spec": (("array", 0), ("slice", 0, 4, 1))},
        "IndexBackward0",
    ),
    (T.take_along_axis, (np.ones((3, 4)), np.zeros((3, 1), int)), {"axis": 1}, "GatherBackward0"),
    (T.clip, (np.ones(2),), {"lo": 0.0, "hi": None}, "ClampBackward1"),
    (T.astype, (np.ones(2),), {"dtype": "float32"}, "ToCopyBackward0"),
]


@pytest.mark.parametrize(
    "prim, operands, attrs, expected", TORCH_NAMES, ids=[f"{t[0].name}-{t[3]}" for t in TORCH_NAMES]
)
def test_torch_node_names(prim, operands, attrs, expected):
    assert prim.node_name(*operands, **attrs) == expected


def test_torch_node_names_match_real_torch():
    torch = pytest.importorskip("torch")
    x = torch.ones(3, 4, requires_grad=True)
    real = {
        "x**2": (x**2, T.pow_.node_name(np.ones((3, 4)), 2)),
        "x[0]": (x[0], T.getitem.node_name(np.ones((3, 4)), spec=(0, ("slice", 0, 4, 1)))),
        "x.T": (x.T, T.transpose.node_name(np.ones((3, 4)), axes=(1, 0))),
        "x.max()": (x.max(), T.max_.node_name(np.ones((3, 4)), axis=None)),
        "x.softmax(1)": (x.softmax(1), T.softmax.node_name(np.ones((3, 4)), axis=1)),
        "x.logsumexp(1)": (x.logsumexp(1), T.logsumexp.node_name(np.ones((3, 4)), axis=1)),
        "x.var(1)": (x.var(1), T.var.node_name(np.ones((3, 4)), axis=1)),
        "x.sigmoid()": (x.sigmoid(), T.sigmoid.node_name(np.ones((3, 4)))),
        "x.relu()": (x.relu(), T.relu.node_name(np.ones((3, 4)))),
        "torch.cat": (torch.cat([x, x]), T.concatenate.node_name(np.ones((3, 4)), axis=0)),
        "x.sign()": (x.sign(), T.sign.node_name(np.ones((3, 4)))),
        "where": (torch.where(x > 0, x, 0.0), T.where.node_name(np.ones(1), np.ones(1), 0.0)),
    }
    for label, (t, ours) in real.items():
        assert type(t.grad_fn).__name__ == ours, label
