"""tracegrad.random: JAX's keys and samplers, bit for bit (issue 26).

Threefry-2x32 against the Random123 known-answer vectors; keys, split, fold_in and the
samplers against jax.random (where installed) in float32 and float64; the same code
under vmap over split keys, under jit and under grad (draws are constants)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.random as R
from tracegrad.ops import special as S

INTERP = dict(backend="interpret")


LOGITS = np.log(np.arange(1.0, 11.0)).reshape(2, 5)
X = np.arange(12.0).reshape(3, 4)
RANDINT_BOUNDS = [(0, 10), (-100, 100), (3, 100_000), (5, 5), (-5, 2**31 + 7), (-(2**40), 2**40)]
RANDINT64_BOUNDS = [(0, 10), (-100, 100), (3, 2**40), (-(2**62), 2**62)]
COV = np.array([[2.0, 0.5], [0.5, 1.0]])


def _draws(r, key, dtype):
    """The draws compared, written once for both libraries (`r` is jax.random or
    tracegrad.random; `key` is PRNGKey(3))."""
    logits = LOGITS.astype(dtype)
    return {
        "uniform": r.uniform(key, (50,), dtype),
        "uniform_bounds": r.uniform(key, (7,), dtype, -2.0, 3.0),
        "bernoulli": r.bernoulli(key, dtype(0.3), (40,)),
        "categorical": r.categorical(key, logits),
        "categorical_shape": r.categorical(key, logits, shape=(3, 2)),
        "categorical_axis0": r.categorical(key, logits.T, axis=0),
        "normal": r.normal(key, (200,), dtype),
        "truncated_normal": r.truncated_normal(key, -1.0, 2.0, (50,), dtype),
        "exponential": r.exponential(key, (50,), dtype),
        "gumbel": r.gumbel(key, (50,), dtype),
        "laplace": r.laplace(key, (50,), dtype),
        "logistic": r.logistic(key, (50,), dtype),
        "cauchy": r.cauchy(key, (50,), dtype),
        "multivariate_normal": r.multivariate_normal(
            key, np.ones(2, dtype), COV.astype(dtype), (5,), dtype
        ),
        "lognormal": r.lognormal(key, 0.5, (20,), dtype),
        "pareto": r.pareto(key, 2.0, (20,), dtype),
        "weibull_min": r.weibull_min(key, 1.5, 2.0, (20,), dtype),
        "maxwell": r.maxwell(key, (20,), dtype),
        "rayleigh": r.rayleigh(key, 1.5, (20,), dtype),
        "triangular": r.triangular(key, -1.0, 0.5, 2.0, (20,), dtype),
        "orthogonal": r.orthogonal(key, 3, (2,), dtype),
        "orthogonal_wide": r.orthogonal(key, 2, (), dtype, m=4),
        "geometric": r.geometric(key, dtype(0.3), (30,)),
        "gamma": r.gamma(key, np.array([0.05, 0.3, 1.0, 2.5, 7.0], dtype), dtype=dtype),
        "loggamma": r.loggamma(key, np.array([0.05, 0.3, 1.0, 2.5, 7.0], dtype), dtype=dtype),
        "beta": r.beta(key, 2.0, 3.0, (20,), dtype),
        "dirichlet": r.dirichlet(key, np.array([0.5, 1.0, 2.0], dtype), (6,), dtype),
        "chisquare": r.chisquare(key, 3.0, (20,), dtype),
        "t": r.t(key, 4.0, (20,), dtype),
        "choice_p": r.choice(key, 10, (2, 3), p=(np.arange(1.0, 11.0) / 55).astype(dtype)),
        "choice_p_no_replace": r.choice(
            key, 10, (4,), replace=False, p=(np.arange(1.0, 11.0) / 55).astype(dtype)
        ),
    }


def _integers(r, key, int32, int64):
    out = {f"randint{b}": r.randint(key, (64,), *b, int32) for b in RANDINT_BOUNDS}
    out.update({f"randint64{b}": r.randint(key, (64,), *b, int64) for b in RANDINT64_BOUNDS})
    out["choice"] = r.choice(key, X[0] * 1.5, (5,))
    out["choice_no_replace"] = r.choice(key, 10, (5,), replace=False)
    out["choice_axis1"] = r.choice(key, X, (2,), axis=1)
    out["rademacher"] = r.rademacher(key, (10,), int64)
    out["permutation"] = r.permutation(key, 10)
    out["permutation_axis1"] = r.permutation(key, X, axis=1)
    out["permutation_rows"] = r.permutation(key, X)
    k = r.PRNGKey(7)
    out["split"] = r.split(k)
    out["split5"] = r.split(k, 5)
    out["split23"] = r.split(k, (2, 3))
    for data in (0, 1, 12345, 2**32 - 1):
        out[f"fold_in{data}"] = r.fold_in(k, data)
    return out


@pytest.fixture(scope="module")
def jax_ref():
    """jax.random's draws with jax_enable_x64 on, all in one jax.jit (one compile, not
    one per draw, which cost ten times as long)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        jr = jax.random

        def everything(k1, k3):
            ref = {np.dtype(dt).name: _draws(jr, k3, dt) for dt in DTYPES}
            ref["int"] = _integers(jr, k1, jnp.int32, jnp.int64)
            ref["keys"] = [jr.key_data(jr.PRNGKey(s)) for s in SEEDS]
            ref["bits"] = jr.bits(jr.PRNGKey(7), (3, 4), dtype=np.uint32)
            return ref

        yield jax.tree_util.tree_map(np.asarray, jax.jit(everything)(jr.PRNGKey(1), jr.PRNGKey(3)))
    finally:
        jax.config.update("jax_enable_x64", old)


DTYPES = (np.float32, np.float64)
SEEDS = (0, 42, -1, 2**40 + 5)


@pytest.mark.parametrize(
    "key, count, expected",
    [  # Random123's known-answer tests for threefry2x32_20 (as in JAX's random_test.py)
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry_known_answers(key, count, expected):
    k0, k1, x0, x1 = (np.uint32(v) for v in key + count)
    got = [int(S.threefry2x32(k0, k1, x0, x1, word=w)) for w in (0, 1, 2)]
    assert got == [expected[0], expected[1], expected[0] ^ expected[1]]


def _core(r, key):
    """A few draws of each kind, for the default run (the full comparison is slow)."""
    return {
        "split": r.split(key, 3),
        "fold_in": r.fold_in(key, 12345),
        "uniform32": r.uniform(key, (8,), np.float32),
        "uniform64": r.uniform(key, (8,), np.float64),
        "bernoulli": r.bernoulli(key, 0.3, (8,)),
        "categorical": r.categorical(key, LOGITS),
        "randint": r.randint(key, (8,), -5, 100, np.int32),
        "normal": r.normal(key, (8,), np.float64),
    }


def test_core_draws_are_jaxs():
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        theirs = jax.tree_util.tree_map(
            np.asarray, jax.jit(lambda k: _core(jax.random, k))(jax.random.PRNGKey(5))
        )
        np.testing.assert_array_equal(R.PRNGKey(-1), jax.random.key_data(jax.random.PRNGKey(-1)))
    finally:
        jax.config.update("jax_enable_x64", old)
    ours = _core(R, R.PRNGKey(5))
    for name in ours:
        if name == "normal":  # SciPy's erfinv, not XLA's
            np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-12)
        else:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


@pytest.mark.slow  # JAX compiles every sampler once: ~30 s on a loaded machine
def test_keys_split_fold_in_bits_are_jaxs(jax_ref):
    for seed, theirs in zip(SEEDS, jax_ref["keys"], strict=True):
        np.testing.assert_array_equal(R.PRNGKey(seed), theirs)
    np.testing.assert_array_equal(R.bits(R.PRNGKey(7), (3, 4)), jax_ref["bits"])


@pytest.mark.slow
def test_integer_draws_split_and_fold_in_are_jaxs(jax_ref):
    ours = _integers(R, R.PRNGKey(1), np.int32, np.int64)
    assert ours.keys() == jax_ref["int"].keys()
    for name, theirs in jax_ref["int"].items():
        np.testing.assert_array_equal(ours[name], theirs, err_msg=name)


EXACT = (
    "uniform",
    "bernoulli",
    "categorical",
    "categorical_shape",
    "categorical_axis0",
    "choice_p",
    "choice_p_no_replace",
    "geometric",
    "triangular",
)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_samplers_are_jaxs(jax_ref, dtype):
    ours, theirs = _draws(R, R.PRNGKey(3), dtype), jax_ref[np.dtype(dtype).name]
    for name in EXACT:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    # with bounds, XLA fuses floats * (hi - lo) + lo into one FMA: 1 ulp apart
    ulp = np.finfo(dtype).eps
    np.testing.assert_allclose(ours["uniform_bounds"], theirs["uniform_bounds"], atol=8 * ulp)
    # normal and truncated_normal: SciPy's erfinv, not XLA's polynomial; gumbel and
    # exponential: NumPy's log/log1p, not XLA's (a few ulp)
    rtol = 1e-5 if dtype == np.float32 else 1e-12  # (laplace near -1: log1p's ulps)
    for name in (
        "normal",
        "truncated_normal",
        "exponential",
        "gumbel",
        "laplace",
        "logistic",
        "cauchy",
        "multivariate_normal",
        "lognormal",
        "pareto",
        "weibull_min",
        "maxwell",
        "rayleigh",
        "orthogonal",
        "orthogonal_wide",
        "gamma",
        "loggamma",
        "beta",
        "dirichlet",
        "chisquare",
        "t",
    ):
        assert ours[name].dtype == dtype, name
        np.testing.assert_allclose(ours[name], theirs[name], rtol=rtol, atol=rtol, err_msg=name)


def test_draws_have_the_right_distribution():
    z = R.normal(R.PRNGKey(0), (20_000,))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.02
    u = R.uniform(R.PRNGKey(1), (20_000,), minval=2.0, maxval=4.0)
    assert u.min() >= 2.0 and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.02
    counts = np.bincount(R.categorical(R.PRNGKey(2), np.log([0.2, 0.3, 0.5]), shape=(20_000,)))
    np.testing.assert_allclose(counts / 20_000, [0.2, 0.3, 0.5], atol=0.015)
    r = R.randint(R.PRNGKey(3), (5000,), -3, 4)
    assert r.dtype == np.int64 and set(np.unique(r)) == set(range(-3, 4))


def test_gamma_family_moments_and_transforms():
    """Marsaglia-Tsang gamma variates (one key per element, JAX's loop): moments, the
    same draws under jit and vmap, and their gradient in alpha."""
    g = R.gamma(R.PRNGKey(0), np.array([0.3, 2.5]), (4000, 2))
    np.testing.assert_allclose(g.mean(0), [0.3, 2.5], rtol=0.06)
    np.testing.assert_allclose(g.var(0), [0.3, 2.5], rtol=0.12)
    d = R.dirichlet(R.PRNGKey(1), np.array([1.0, 2.0, 3.0]), (2000,))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    f = lambda k: R.beta(k, 2.0, 0.5, (3,))
    keys = R.split(R.PRNGKey(2), 3)
    np.testing.assert_array_equal(tg.jit(f, **INTERP)(keys[0]), f(keys[0]))
    np.testing.assert_array_equal(tg.vmap(f)(keys), np.stack([f(k) for k in keys]))
    # d(sample)/d(alpha) by implicit reparameterization: the cdf level P(alpha, z) stays
    # put, so density(z) dz/dalpha = -dP/dalpha (SciPy's gammainc, central differences)
    import scipy.special as sp
    import scipy.stats as ss

    key, alpha = R.PRNGKey(3), np.array([0.4, 1.0, 3.5, 20.0])
    z = R.gamma(key, alpha)
    dz = tg.grad(lambda a: tg.sum(R.gamma(key, a)))(alpha)
    dP = (sp.gammainc(alpha + 1e-6, z) - sp.gammainc(alpha - 1e-6, z)) / 2e-6
    np.testing.assert_allclose(ss.gamma.pdf(z, alpha) * dz, -dP, rtol=1e-6, atol=1e-9)
    dlog = tg.grad(lambda a: tg.sum(R.loggamma(key, a)))(alpha)
    np.testing.assert_allclose(dlog, dz / z, rtol=1e-10)


@pytest.mark.slow  # JAX compiles each gamma gradient op by op: ~10 s here
def test_gamma_gradients_are_jaxs():
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        jr, jnp = jax.random, jax.numpy
        alpha = np.array([0.3, 1.0, 2.5, 7.0])
        cases = [
            (lambda r, a: r.gamma(r.PRNGKey(1), a).sum(), alpha),
            (lambda r, a: r.loggamma(r.PRNGKey(1), a).sum(), alpha),
            (lambda r, a: r.beta(r.PRNGKey(2), a[0], a[1], (4,)).sum(), alpha[:2]),
            (lambda r, a: r.dirichlet(r.PRNGKey(2), a)[0], alpha[:3]),
            (lambda r, a: r.chisquare(r.PRNGKey(4), a, (3,)).sum(), alpha[2]),
        ]
        for i, (f, a) in enumerate(cases):
            ours = tg.grad(lambda a, f=f: f(R, a))(a)
            theirs = jax.grad(lambda a, f=f: f(jr, a))(jnp.asarray(a))
            np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-8, err_msg=str(i))
    finally:
        jax.config.update("jax_enable_x64", old)


def test_vmap_over_split_keys_equals_a_loop():
    keys = R.split(R.PRNGKey(0), 4)

    def draw(k):
        k1, k2 = R.split(k)
        return R.normal(k1, (3,)) + R.uniform(k2, (3,)), R.fold_in(k, 5)

    batched = tg.vmap(draw)(keys)
    for i in range(4):
        one = draw(keys[i])
        np.testing.assert_array_equal(batched[0][i], one[0])
        np.testing.assert_array_equal(batched[1][i], one[1])


def test_jit_equals_eager_and_keys_are_inputs():
    def f(key, mu):
        return R.normal(key, (5,)) * 2.0 + mu, R.split(key)

    g = tg.jit(f, **INTERP)
    for seed in (0, 9):  # one trace serves every key: the key is a uint32 input
        out, keys = g(R.PRNGKey(seed), 1.0)
        ref_out, ref_keys = f(R.PRNGKey(seed), 1.0)
        np.testing.assert_array_equal(out, ref_out)
        np.testing.assert_array_equal(keys, ref_keys)
    seeded = tg.jit(lambda s: R.normal(R.PRNGKey(s), (2,)), **INTERP)
    np.testing.assert_array_equal(seeded(np.int64(2**40 + 5)), R.normal(R.PRNGKey(2**40 + 5), (2,)))
    folded = tg.jit(lambda k, i: R.fold_in(k, i), **INTERP)
    np.testing.assert_array_equal(folded(R.PRNGKey(3), np.int64(-7)), R.fold_in(R.PRNGKey(3), -7))


def test_grad_treats_draws_as_constants():
    key = R.PRNGKey(1)
    z = R.normal(key, (4,))

    def loss(mu, sigma):
        return tg.sum((R.normal(key, (4,)) * sigma + mu) ** 2)

    g_mu, g_sigma = tg.grad(loss, argnums=(0, 1))(0.5, 2.0)
    x = z * 2.0 + 0.5
    np.testing.assert_allclose(g_mu, np.sum(2 * x), rtol=1e-12)
    np.testing.assert_allclose(g_sigma, np.sum(2 * x * z), rtol=1e-12)
    # samplers with parameters differentiate through them (reparameterized draws)
    g_s = tg.grad(lambda s: tg.sum(R.lognormal(key, s, (4,))))(0.7)
    np.testing.assert_allclose(g_s, np.sum(z * np.exp(0.7 * z)), rtol=1e-12)
    # the reparameterised draw differentiates through a traced key-dependent program
    keys = R.split(key, 3)
    per_key = tg.vmap(tg.grad(lambda s, k: tg.sum(R.normal(k, (2,)) * s)), in_axes=(None, 0))
    np.testing.assert_allclose(
        per_key(1.5, keys), [R.normal(keys[i], (2,)).sum() for i in range(3)], rtol=1e-12
    )


def test_a_batch_of_keys_without_vmap_is_a_clear_error():
    with pytest.raises(tg.TracegradError, match=r"(?s)normal|uniform.*vmap"):
        R.normal(R.split(R.PRNGKey(0), 3), (2,))
    with pytest.raises(tg.TracegradError, match="uint32"):
        R.split(np.array([0, 1]))


@pytest.mark.numba_pass
def test_numba_kernels_give_the_same_draws():
    def f(key):
        k1, k2 = R.split(key)
        return R.normal(k1, (6,), np.float32), R.uniform(k2, (6,)), R.randint(key, (6,), 0, 9)

    g = tg.jit(f, backend="numba")
    g(R.PRNGKey(4))
    if hasattr(g, "wait_kernels"):
        g.wait_kernels()
    for ours, ref in zip(g(R.PRNGKey(4)), f(R.PRNGKey(4)), strict=True):
        np.testing.assert_array_equal(ours, ref)
    # the bits are computed inside the fused loop (mathlib's tg_threefry helpers), not
    # by the NumPy impl between kernel segments
    source = tg.jit(lambda k: R.uniform(k, (64,)), backend="numba").lower(R.PRNGKey(0)).source
    assert "threefry2x32" in source and "NumPy: no code generation" not in source
