"""A function that draws from numpy.random while traced (HIPS autograd's black-box SVI
samples with `rs.randn` inside the objective) is traced again on every call, as HIPS
autograd and JAX's un-jitted grad run it afresh: its draws are never frozen into a
cached graph (issue 26)."""

import warnings

import numpy as np
import pytest

import tracegrad as tg


def test_a_closed_over_random_state_draws_afresh_each_call():
    rs = np.random.RandomState(0)
    g = tg.grad(lambda x: tg.sum(x * rs.randn(3)))
    with pytest.warns(RuntimeWarning, match="drew from a RandomState while it was traced"):
        first = g(np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # warned once per function
        second = g(np.ones(3))
    ref = np.random.RandomState(0)
    np.testing.assert_array_equal(first, ref.randn(3))
    np.testing.assert_array_equal(second, ref.randn(3))


def test_global_numpy_random_and_generators_too():
    h = tg.value_and_grad(lambda x: tg.sum(x * np.random.randn(2)))
    np.random.seed(1)
    with pytest.warns(RuntimeWarning, match="numpy.random"):
        (_, a), (_, b) = h(np.ones(2)), h(np.ones(2))
    np.random.seed(1)
    np.testing.assert_array_equal(np.concatenate([a, b]), np.random.randn(4))

    gen = np.random.default_rng(5)

    def draw(x):
        return tg.sum(x * gen.normal(size=2))

    with pytest.warns(RuntimeWarning, match="Generator"):
        c, d = tg.grad(draw)(np.ones(2)), tg.grad(draw)(np.ones(2))
    ref = np.random.default_rng(5)
    np.testing.assert_array_equal(np.concatenate([c, d]), ref.normal(size=4))


def test_a_pure_function_is_still_traced_once():
    rs = np.random.RandomState(0)
    noise = rs.randn(3)  # drawn outside: a constant of the function
    g = tg.grad(lambda x: tg.sum(x * noise), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        g(np.ones(3))
        g(np.ones(3))
    assert g.entries.traces == 1


def test_jit_traces_once_as_jax_does():
    """jax.jit freezes a NumPy draw made while tracing into the compiled program; so does
    tracegrad.jit (only the differentiating transforms run the function afresh)."""
    rs = np.random.RandomState(0)
    f = tg.jit(lambda x: x * rs.randn(3), backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        first, second = f(np.ones(3)), f(np.ones(3))
    np.testing.assert_array_equal(first, second)
    assert f.entries.traces == 1
