"""Every primitive the CUDA backend supports: values and gradients of a compiled
function called with GPU arrays equal the CPU path's (the NumPy interpreter).

Runs in Numba's CUDA simulator (tests/cuda/conftest.py); sizes are tiny because
the simulator runs each GPU thread as a Python thread.
"""

import numpy as np
import pytest

import tracegrad as tg

RNG = np.random.default_rng(0)


def _x(shape=(2, 3), lo=-2.0, hi=2.0, dtype="float32"):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def check(fn, *args, argnums=0, rtol=1e-5, atol=1e-6, grad=True):
    """value_and_grad (or compile, grad=False) on the GPU against the CPU path."""
    if grad:
        cpu = tg.value_and_grad(fn, argnums=argnums, backend="interpret")
        gpu = tg.value_and_grad(fn, argnums=argnums)
    else:
        cpu = tg.compile(fn, backend="interpret")
        gpu = tg.compile(fn)
    want = cpu(*args)
    got = gpu(*[tg.device_put(a) for a in args])
    want_leaves = _leaves(want)
    got_leaves = _leaves(got)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert isinstance(g, tg.DeviceArray), type(g)
        g = np.asarray(g)
        assert g.shape == np.shape(w) and g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _leaves(t)]
    return [tree]


UNARY = {  # name -> (function, input range)
    "abs": (tg.abs, (-2, 2)),
    "arccos": (tg.arccos, (-0.9, 0.9)),
    "arcsin": (tg.arcsin, (-0.9, 0.9)),
    "arctan": (tg.arctan, (-2, 2)),
    "cos": (tg.cos, (-3, 3)),
    "exp": (tg.exp, (-2, 2)),
    "expm1": (tg.expm1, (-1, 1)),
    "log": (tg.log, (0.1, 3)),
    "log1p": (tg.log1p, (-0.5, 2)),
    "neg": (tg.negative, (-2, 2)),
    "relu": (tg.relu, (-2, 2)),
    "sigmoid": (tg.sigmoid, (-4, 4)),
    "sin": (tg.sin, (-3, 3)),
    "sqrt": (tg.sqrt, (0.1, 3)),
    "tanh": (tg.tanh, (-2, 2)),
    "floor": (lambda x: tg.floor(x) * x, (-2, 2)),
    "sign": (lambda x: tg.sign(x) * x, (-2, 2)),
    "clip": (lambda x: tg.clip(x, -0.5, 0.7), (-2, 2)),
    "astype": (lambda x: tg.astype(tg.astype(x, "float64") * 2.0, "float32"), (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, (lo, hi) = UNARY[name]
    check(lambda x: tg.sum(fn(x)), _x(lo=lo, hi=hi), rtol=2e-5)


BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y + 3.0),
    "pow": lambda x, y: (x + 3.0) ** y,
    "maximum": tg.maximum,
    "minimum": tg.minimum,
    "arctan2": tg.arctan2,
    "remainder": lambda x, y: tg.remainder(x, 0.7) * y,
    "where_cmp": lambda x, y: tg.where(x < y, x * y, tg.where(x >= 0.5, x, y - x)),
    "compare_all": lambda x, y: tg.where(
        tg.logical_and(tg.logical_and(x <= y, tg.isfinite(x)), x == x),
        tg.full_like(x, 2.0) * x,
        y,
    ),
    "logical": lambda x, y: tg.where(
        tg.logical_or(tg.logical_and(x > 0, y > 0), tg.logical_not(x != y)), x, y
    ),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    check(lambda x, y: tg.sum(BINARY[name](x, y)), _x(), _x(), argnums=(0, 1))


def test_broadcasting_row_column_and_scalar():
    check(
        lambda x, r, c, s: tg.sum(tg.tanh(x * r + c) * s),
        _x((3, 4)),
        _x((4,)),
        _x((3, 1)),
        np.float32(1.5),
        argnums=(0, 1, 2, 3),
    )


@pytest.mark.parametrize(
    "op,axis,keepdims",
    [
        ("sum", None, False),
        ("sum", 0, False),
        ("sum", 1, True),
        ("mean", None, False),
        ("mean", (0, 2), False),
        ("max", None, False),
        ("max", 1, False),
        ("min", 0, True),
    ],
)
def test_reductions(op, axis, keepdims):
    red = getattr(tg, op)
    check(
        lambda x: tg.sum(tg.sin(red(x * 1.5, axis=axis, keepdims=keepdims))),
        _x((2, 3, 4), lo=0.5, hi=1.5),
    )


def test_an_op_the_backend_lacks_is_refused_by_name():
    # linear algebra has no CUDA form yet: a clear error naming the op, never a
    # silent run on the host
    x = tg.device_put(_x((2, 3), lo=0.5, hi=1.5))
    with pytest.raises(NotImplementedError, match="lacks op 'cholesky'"):
        tg.compile(lambda x: tg.linalg.cholesky(x @ x.T + 3.0 * tg.eye(2)))(x)


RUNNING_AND_CONCAT = {
    "prod_axis1": lambda z: tg.sum(tg.prod(z, axis=1) * 2.0),  # linrec, both directions
    "prod_axis0": lambda z: tg.sum(tg.prod(z, axis=0)),
    "cumsum": lambda z: tg.sum(tg.cumsum(z, axis=1) ** 2),
    "concatenate": lambda z: tg.sum(tg.concatenate([z, z[:, :2] * 3.0], axis=1) ** 2),
    "stack": lambda z: tg.sum(tg.stack([z, tg.sin(z)], axis=0) ** 2),
}


@pytest.mark.parametrize("name", sorted(RUNNING_AND_CONCAT))
def test_running_ops_and_concatenate(name):
    check(RUNNING_AND_CONCAT[name], _x((3, 4), lo=0.5, hi=1.5))


def test_reduction_with_several_chunks_is_deterministic():
    x = _x((4000,))
    f = tg.compile(lambda x: tg.sum(tg.exp(-x * x)))
    xd = tg.device_put(x)
    a, b = np.asarray(f(xd)), np.asarray(f(xd))
    assert a == b
    np.testing.assert_allclose(a, np.exp(-(x.astype("f8") ** 2)).sum(), rtol=1e-5)
    lowered_units = [u for u in _units(f, xd) if u.kind == "reduce"]
    assert lowered_units and lowered_units[0].after  # two passes


def _units(f, *args):  # the CUDA units of f's (one) GPU signature
    entry = next(e for k, e in f.entries.by_signature.items() if k[0] == "cuda")
    return entry.lowered.kernel.plan.units


def test_views_transpose_reshape_broadcast():
    check(
        lambda x, y: (
            tg.sum(tg.reshape(x.T, (6, 2)) * tg.broadcast_to(y, (6, 2)))
            + tg.sum(tg.transpose(x) ** 2)
        ),
        _x((2, 6)),
        _x((2,)),
        argnums=(0, 1),
    )


@pytest.mark.parametrize(
    "sa,sb",
    [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 3)), ((3, 4), (4,))],
)
def test_matmul(sa, sb):
    check(lambda a, b: tg.sum(tg.tanh(a @ b)), _x(sa), _x(sb), argnums=(0, 1), rtol=2e-5)


def test_mlp_value_and_grad_float64():
    def loss(w1, w2, x):
        h = tg.maximum(x @ w1, 0.0)
        return tg.mean((h @ w2) ** 2)

    check(
        loss,
        _x((4, 5), dtype="f8"),
        _x((5, 2), dtype="f8"),
        _x((3, 4), dtype="f8"),
        argnums=(0, 1),
        rtol=1e-12,
        atol=1e-12,
    )


def test_forward_outputs_and_pytrees():
    got = check(
        lambda p, x: {"y": tg.tanh(x @ p["w"]) + p["b"], "n": tg.sum(x)},
        {"w": _x((3, 2)), "b": _x((2,))},
        _x((4, 3)),
        grad=False,
    )
    assert sorted(got) == ["n", "y"]


def test_outputs_are_fresh_buffers():
    x = tg.device_put(_x((3,)))
    y = tg.compile(lambda x: x)(x)  # the identity: a copy, never the caller's buffer
    assert y.data is not x.data
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_python_loop_stays_unrolled_on_the_gpu():
    # the CPU path rerolls these layers into a scan; the CUDA backend runs them unrolled
    def chain(w, h):
        for _ in range(6):
            h = tg.tanh(h @ w)
        return tg.sum(h * h)

    check(chain, _x((3, 3), lo=-0.5, hi=0.5), _x((2, 3)), argnums=(0, 1), rtol=2e-5)
    # equal layers are equal kernels: compiled once (sources differ only in comments/names)
    from tracegrad.codegen.cuda.runtime import canonical

    f = tg.value_and_grad(chain, argnums=(0, 1))
    f(tg.device_put(_x((3, 3))), tg.device_put(_x((2, 3))))
    units = [u for u in _units(f) if u.kind == "elementwise"]
    assert len({canonical(u.source, u.name) for u in units}) <= len(units) // 2


def test_softmax_cross_entropy_written_with_max_exp_sum_log():
    def xent(w, x, y):
        z = x @ w
        z = z - tg.max(z, axis=1, keepdims=True)
        return -tg.sum(y * (z - tg.log(tg.sum(tg.exp(z), axis=1, keepdims=True)))) / 3.0

    y = np.eye(4, dtype="f4")[[0, 2, 3]]
    args = (_x((5, 4)), _x((3, 5)), y)
    check(xent, *args, argnums=(0, 1))
    # the row reductions (max, sum over axis 1) run in their groups' kernels, a block a row
    f = tg.value_and_grad(xent, argnums=(0, 1))
    f(*[tg.device_put(a) for a in args])
    kinds = [u.kind for u in _units(f)]
    from tracegrad.placement import is_simulated

    if is_simulated():  # (on a GPU, 3 rows are too few for a block each)
        assert kinds.count("rows") >= 2, kinds


def test_value_and_gradient_of_an_elementwise_sum_run_in_one_kernel():
    # issue 24's elementwise workload: the forward sum and the backward dx share one
    # grid-stride loop (read x, write dx) plus a second pass over the blocks' partials
    fn = lambda x: tg.sum(tg.tanh(x) * tg.sin(x) + tg.exp(-x * x))
    x = _x((700,))
    check(fn, x)
    f = tg.value_and_grad(fn)
    f(tg.device_put(x))
    units = _units(f)
    assert [u.kind for u in units] == ["elementwise"]
    assert len(units[0].after) == 1  # the partials' pass


ROW_AND_INDEX = {
    "softmax": lambda z: tg.sum(tg.softmax(z, axis=-1) * z),
    "log_softmax_axis0": lambda z: tg.sum(tg.log_softmax(z, axis=0) * z),
    "logsumexp": lambda z: tg.sum(tg.logsumexp(z, axis=1)) + tg.logsumexp(z * 2.0),
    "getitem_slices": lambda z: tg.sum(tg.softmax(z, axis=-1)[:, 1:3] * 2.0),
    "getitem_int_step_none": lambda z: tg.sum(z[1, ::-2] * z[None, 0, 1:][..., :2].sum()),
}


@pytest.mark.parametrize("name", sorted(ROW_AND_INDEX))
def test_row_ops_and_basic_indexing(name):
    check(ROW_AND_INDEX[name], _x((3, 4)))


GATHERS = {
    "cross_entropy": lambda z, y: tg.cross_entropy(z, y),
    "cross_entropy_sum": lambda z, y: tg.cross_entropy(z * 2.0, y, reduction="sum"),
    "take_along_axis": lambda z, y: tg.sum(tg.take_along_axis(z, y[:, None], axis=1) ** 2),
    "take_along_axis_repeats": lambda z, y: tg.sum(
        tg.take_along_axis(z, np.array([[0, 1], [3, 3], [1, 0], [2, 2], [0, 0]]), axis=1) * 3.0
    ),
}


@pytest.mark.parametrize("name", sorted(GATHERS))
def test_gathers_along_an_axis(name):
    # (the integer labels go to the GPU too; the gradient of repeated indices is summed
    # per output element in index order: deterministic, no atomics)
    check(GATHERS[name], _x((5, 4)), np.array([0, 3, 1, 1, 2]))


def test_every_elementwise_primitive_has_a_case_here():
    # the rule table's elementwise ops all have a CUDA form (the CPU templates, with
    # runtime.PRELUDE's math); each must appear in a case above
    from tracegrad.ops.core import REGISTRY

    seen: set = set()
    x = _x()
    for fn, _ in UNARY.values():
        seen |= {n.op for n in tg.trace(lambda x: fn(x), x).nodes}  # noqa: B023
    for fn in BINARY.values():
        seen |= {n.op for n in tg.trace(fn, x, x).nodes}
    from tracegrad.codegen.cuda.plan import cuda_template
    from tracegrad.ir.graph import Node

    wanted = {k for k, p in REGISTRY.items() if p.kind == "elementwise"}
    # the rest have no CUDA form, and the planner refuses them by name
    # (complex values run on the CPU interpreter: tracegrad.compiler._has_complex)
    refused = {"threefry2x32", "real", "imag", "conj", "complex"}
    assert wanted - seen == refused
    node = Node(0, "threefry2x32", (x, x, x, x), {"word": 32}, (2,), np.dtype("uint32"))
    assert cuda_template(node) is None
    z = Node(1, "input", (), {}, (2,), np.dtype("complex64"))
    assert cuda_template(Node(2, "real", (z,), {}, (2,), np.dtype("float32"))) is None


def test_scan_runs_its_body_per_step_forward_and_backward():
    xs = np.linspace(0, 1, 24).reshape(3, 2, 4).astype("f4")

    def f(w, h):
        def body(h, x):
            h = tg.tanh(h @ w + x)
            return h, tg.sum(h)

        h, ys = tg.scan(body, h, xs)
        return tg.sum(h) + tg.sum(ys * ys)

    check(f, _x((4, 4), lo=-0.5, hi=0.5), _x((2, 4)), argnums=(0, 1), rtol=2e-5, atol=1e-5)
    check(
        lambda c: tg.fori_loop(0, 3, lambda i, c: c * 0.5 + tg.astype(i, "float32"), c),
        np.ones(3, "f4"),
        grad=False,
    )


def test_while_loop_and_cond_read_their_predicate_on_the_host():
    x = np.array([0.5, 1.0], "f4")
    check(lambda x: tg.while_loop(lambda c: tg.sum(c) < 10.0, lambda c: c * 2.0, x), x, grad=False)
    g = lambda x: tg.sum(tg.cond(tg.sum(x) > 1.0, lambda x: tg.sin(x) * 2.0, lambda x: x - 1.0, x))
    check(g, x)  # the true branch
    check(g, x * 0.1)  # the false one


@pytest.mark.parametrize(
    "name", ["exp", "expm1", "floor", "relu", "sign", "tanh", "sigmoid", "log", "sqrt", "abs"]
)
def test_edge_values_match_numpy(name):
    # inf, nan, overflow, huge: the CUDA helpers' guards give NumPy's values
    x = np.array([-1.5, 2.5, 800.0, -np.inf, np.inf, np.nan, 1e20, 0.0, -0.0], "f8")
    fn = getattr(tg, name)
    with np.errstate(all="ignore"):
        want = tg.compile(fn, backend="interpret")(x)
    got = np.asarray(tg.compile(fn)(tg.device_put(x)))
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_addmm_from_captured_code():
    # addmm (bias + a @ b) comes from PyTorch-style code (nn.Linear); a hand-built graph
    from tracegrad.codegen.cuda import build_cuda_kernel
    from tracegrad.ir.graph import Graph
    from tracegrad.ir.interpret import interpret
    from tracegrad.ops.core import Aval

    g = Graph()
    bias = g.add_input(Aval((5,), np.dtype("f4")))
    a = g.add_input(Aval((3, 4), np.dtype("f4")))
    b = g.add_input(Aval((4, 5), np.dtype("f4")))
    g.outputs.append(g.new_node("addmm", (bias, a, b), {}, Aval((3, 5), np.dtype("f4"))))
    args = (_x((5,)), _x((3, 4)), _x((4, 5)))
    (got,) = build_cuda_kernel(g)(*[tg.device_put(x) for x in args])
    np.testing.assert_allclose(np.asarray(got), interpret(g, *args)[0], rtol=1e-5, atol=1e-6)


def test_transforms_of_compiled_functions_run_on_the_gpu():
    x = np.array([0.3, -0.7, 1.1])
    f = lambda x: tg.sum(tg.sin(x) ** 3)
    for t in (
        lambda: tg.grad(lambda x: tg.sum(tg.grad(f)(x))),  # grad of grad
        lambda: tg.jacobian(lambda x: tg.sin(x) * x),
        lambda: tg.hessian(f),
        lambda: tg.compile(tg.vmap(lambda x: tg.sum(x * x))),
    ):
        got = t()(tg.device_put(x))
        assert isinstance(got, tg.DeviceArray)
        np.testing.assert_allclose(np.asarray(got), t()(x), rtol=1e-12, atol=1e-12)
