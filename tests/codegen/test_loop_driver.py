"""The Python driver around loops (codegen/generate.py): the views that unpack a scan's
packed result and the zeros its backward loop starts from are plain NumPy lines, not
generic `_numpy` calls, and they give the interpreter's values as C-contiguous arrays."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg

# One scan kernel compile (~4 s): CI's Numba pass runs it; the default run checks
# loop semantics on the interpreter (tests/compile/test_loops.py).
pytestmark = pytest.mark.numba_pass


def model(w, xs):
    def step(c, x):
        c = np.tanh(c * w + x)
        return c, (c * 2.0, c[::-1])

    c, (ys, rev) = tg.scan(step, np.zeros(4), xs)
    # int, None, stepped and reversed slices of the stacked outputs
    return (
        np.sum(ys[::2, 1:] ** 2)
        + np.sum(ys[-1, ::-1] * c)
        + np.sum(rev[None, 3, :2])
        + np.sum(ys.reshape(2, -1)[1] * 0.5)
    )


@pytest.fixture(scope="module")
def compiled():
    return tg.value_and_grad(model, argnums=(0, 1), backend="numba")


def inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(4), rng.standard_normal((6, 4))


@pytest.mark.parametrize("seed", [0, 1])
def test_driver_matches_the_interpreter_and_finite_differences(compiled, seed):
    w, xs = inputs(seed)
    value, (gw, gxs) = compiled(w, xs)
    ref_value, (ref_gw, ref_gxs) = tg.value_and_grad(model, argnums=(0, 1), backend="interpret")(
        w, xs
    )
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(gw, ref_gw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gxs, ref_gxs, rtol=1e-10, atol=1e-12)
    assert gw.flags.c_contiguous and gxs.flags.c_contiguous

    # and both against central differences of the compiled value
    def central(arg, index, h=1e-6):
        shift = np.zeros_like(arg)
        shift[index] = h
        plus = [w, xs]
        minus = [w, xs]
        k = 0 if arg is w else 1
        plus[k], minus[k] = arg + shift, arg - shift
        return (compiled(*plus)[0] - compiled(*minus)[0]) / (2 * h)

    for index in [(0,), (3,)]:
        np.testing.assert_allclose(gw[index], central(w, index), rtol=1e-6, atol=1e-8)
    for index in [(0, 0), (2, 1), (5, 3)]:
        np.testing.assert_allclose(gxs[index], central(xs, index), rtol=1e-6, atol=1e-8)


def test_the_driver_spells_views_and_zeros_in_numpy(compiled):
    source = compiled.lower(*inputs(0)).source
    driver = source[source.index("def _numpy(") :]
    lines = driver.splitlines()
    views = [
        (comment, code)
        for comment, code in zip(lines, lines[1:], strict=False)
        if comment.lstrip().startswith("# %")
        and comment.split("=")[1].split("[")[0].strip() in ("getitem", "reshape", "broadcast_to")
    ]
    assert len(views) >= 8, driver
    for comment, code in views:
        assert "_numpy(" not in code and "np." in code, (comment, code)
