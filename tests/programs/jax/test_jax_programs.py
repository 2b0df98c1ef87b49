"""JAX's examples, vendored with only their import lines changed,
against JAX itself (issue 26). advi.py: ADVI on a funnel density, a Monte Carlo ELBO
whose keys come from random.key(t) of the traced step index, split and vmapped over, a
jitted momentum step with grad of a jitted objective, and mesh_eval jitted with
static_argnums=(0, 1, 2, 4). mnist_classifier_fromscratch.py: its MLP, loss (with
jax.scipy.special.logsumexp), accuracy and jitted SGD step on a list of (w, b) pairs,
on synthetic data (its MNIST download is stubbed)."""

import numpy as np
import pytest

from tests.programs.jax._load import load_program

RTOL = 1e-8


@pytest.fixture
def jax_x64():
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)  # float64, as tracegrad computes
    yield jax
    jax.config.update("jax_enable_x64", old)


def _advi_main(advi, num_samples, steps, num_ticks):
    """advi.py's __main__ block (sizes through num_samples, the loop's length and
    mesh_eval's num_ticks; no plotting), recording what its callback shows."""
    jit, grad, vmap, random, jnp = advi.jit, advi.grad, advi.vmap, advi.random, advi.jnp

    @jit
    def objective(params, t):
        rng = random.key(t)
        return -advi.batch_elbo(advi.funnel_log_density, rng, params, num_samples)

    x_limits = (-2, 2)
    y_limits = (-4, 2)
    target_dist = lambda x, _: jnp.exp(advi.funnel_log_density(x))
    approx_dist = lambda x, params: jnp.exp(advi.diag_gaussian_logpdf(x, *params))
    shown = []

    def callback(params, t):
        shown.append(objective(params, t))
        shown.extend(advi.mesh_eval(target_dist, x_limits, y_limits, 1, num_ticks))
        shown.extend(advi.mesh_eval(approx_dist, x_limits, y_limits, params, num_ticks))
        rngs = random.split(random.key(t), num_samples)
        shown.append(vmap(advi.diag_gaussian_sample, in_axes=(0, None, None))(rngs, *params))

    D = 2
    init_params = (jnp.zeros(D), jnp.zeros(D))
    opt_init, opt_update, get_params = advi.optimizers.momentum(step_size=0.1, mass=0.9)
    opt_state = opt_init(init_params)

    @jit
    def update(i, opt_state):
        params = get_params(opt_state)
        gradient = grad(objective)(params, i)
        return opt_update(i, gradient, opt_state)

    for t in range(steps):
        opt_state = update(t, opt_state)
        params = get_params(opt_state)
        callback(params, t)
    return [np.asarray(p) for p in params], [np.asarray(s) for s in shown]


@pytest.mark.slow  # JAX's side compiles ~10 programs: 13 s here at load 12 (tracegrad's: 2.5 s)
def test_advi_matches_jax(jax_x64):
    ours = _advi_main(load_program("advi", "tracegrad"), num_samples=8, steps=2, num_ticks=5)
    theirs = _advi_main(load_program("advi", "jax"), num_samples=8, steps=2, num_ticks=5)
    assert len(ours[1]) == len(theirs[1]) == 2 * 8
    for i, (a, b) in enumerate(zip(ours[1], theirs[1], strict=True)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg=f"callback value {i}")
    for a, b in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg="final params")
    assert not np.allclose(ours[0][0], 0)  # it moved


def _mnist_main(mnist, layer_sizes, steps, batch_size=16, num_train=64):
    """mnist_classifier_fromscratch.py's __main__ block on synthetic data (the sizes
    through init_random_params' layer_sizes; MNIST itself is not downloaded)."""
    jit, grad = mnist.jit, mnist.grad
    rng = np.random.RandomState(1)
    train_images = rng.randn(num_train, layer_sizes[0])
    train_labels = np.eye(layer_sizes[-1])[rng.randint(0, layer_sizes[-1], num_train)]
    param_scale, step_size = 0.1, 0.001
    num_complete_batches, leftover = divmod(num_train, batch_size)
    num_batches = num_complete_batches + bool(leftover)

    def data_stream():
        rng = np.random.RandomState(0)
        while True:
            perm = rng.permutation(num_train)
            for i in range(num_batches):
                batch_idx = perm[i * batch_size : (i + 1) * batch_size]
                yield train_images[batch_idx], train_labels[batch_idx]

    batches = data_stream()

    @jit
    def update(params, batch):
        grads = grad(mnist.loss)(params, batch)
        return [
            (w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads, strict=True)
        ]

    params = mnist.init_random_params(param_scale, layer_sizes, rng=np.random.RandomState(0))
    shown = []
    for _ in range(steps):
        params = update(params, next(batches))
        shown.append(mnist.loss(params, (train_images, train_labels)))
        shown.append(mnist.accuracy(params, (train_images, train_labels)))
    return [np.asarray(a) for wb in params for a in wb], [np.asarray(s) for s in shown]


@pytest.mark.slow  # JAX's side: its compiles take seconds at this machine's load
def test_mnist_classifier_fromscratch_matches_jax(jax_x64):
    sizes = [12, 16, 16, 10]
    ours = _mnist_main(load_program("mnist_classifier_fromscratch", "tracegrad"), sizes, 6)
    theirs = _mnist_main(load_program("mnist_classifier_fromscratch", "jax"), sizes, 6)
    for i, (a, b) in enumerate(zip(ours[1], theirs[1], strict=True)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg=f"loss/accuracy {i}")
    for i, (a, b) in enumerate(zip(ours[0], theirs[0], strict=True)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg=f"parameter {i}")
