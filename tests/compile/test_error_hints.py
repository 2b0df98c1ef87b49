"""Error hints fit the cause (issue 15): an eager op on a tracer, a `while` or an `if`
on a traced value, item assignment on a tracer, a vector output to grad."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.eager as torch

INTERP = dict(backend="interpret")


def test_eager_op_inside_grad_points_to_the_tg_op():
    """compile captures eager ops (tracegrad.capture); grad traces tracegrad's own ops
    and says so, pointing at the tg op."""

    def f(x):
        return torch.tanh(x).sum()

    np.testing.assert_allclose(
        np.asarray(tg.compile(lambda x: torch.tanh(x), **INTERP)(np.ones(2)).detach().numpy()),
        np.tanh(np.ones(2)),
    )
    with pytest.raises(
        tg.TracegradError,
        match=r"(?s)tracegrad.eager's tanh\(\) got a traced "
        r"value.*tracegrad.compile.*tg\.tanh\(x\)",
    ):
        tg.grad(f, **INTERP)(np.ones(2))


def test_data_dependent_while_points_to_while_loop():
    def f(x):
        while tg.sum(x) < 10:
            x = x * 2
        return x

    with pytest.raises(tg.TracingError, match=r"(?s)tracegrad\.while_loop.*tracegrad\.fori_loop"):
        tg.compile(f, **INTERP)(np.ones(2))


def test_data_dependent_if_points_to_cond_and_where():
    def f(x):
        if tg.sum(x) > 0:
            return x
        return -x

    with pytest.raises(tg.TracingError, match=r"(?s)tracegrad\.cond\(.*tracegrad\.where"):
        tg.compile(f, **INTERP)(np.ones(2))


def test_item_assignment_on_a_tracer_points_to_where():
    def f(x):
        x[0] = 1.0
        return x

    with pytest.raises(
        tg.TracingError, match=r"(?s)item assignment.*tracegrad\.where\(mask, v, x\)"
    ) as info:
        tg.compile(f, **INTERP)(np.ones(2))
    assert __file__ in str(info.value)


def test_vector_output_to_grad_points_to_jacobian():
    with pytest.raises(TypeError, match="tracegrad.jacobian"):
        tg.grad(lambda x: x * 2, **INTERP)(np.ones(3))
