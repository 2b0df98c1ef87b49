"""HIPS autograd's examples that use scipy.stats, vendored with only their import lines
changed, against the original library (issue 26): Gaussian process regression, black-box
stochastic variational inference, and the Bayesian neural net built on it.

Each test runs the example's own functions the way its `__main__` block does (the plots
left out), at tiny sizes through the parameters the example exposes (n_data, num_samples,
layer_sizes, num_iters, maxiter), under tracegrad and under HIPS autograd, and compares
values, gradients and the optimizer's path in float64 to 1e-8."""

import warnings

import numpy as np
import pytest

from tests.programs.hips._load import load_pair

RTOL = 1e-8


def close(a, b, what=""):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=1e-10, err_msg=what)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # tracegrad's note that the SVI objective draws
        warnings.filterwarnings("ignore", ".*drew from", RuntimeWarning)
        yield


def test_gaussian_process_regression():
    from scipy.optimize import minimize

    runs = {}
    for backend, gp in load_pair("gaussian_process").items():
        D = 1
        num_params, predict, log_marginal_likelihood = gp.make_gp_funs(
            gp.rbf_covariance, num_cov_params=D + 1
        )
        X, y = gp.build_toy_dataset(D=D, n_data=10)
        objective = lambda params: -log_marginal_likelihood(params, X, y)  # noqa: B023
        init_params = 0.1 * np.random.RandomState(0).randn(num_params)
        value, grad = gp.value_and_grad(objective)(init_params)
        path = []
        result = minimize(
            gp.value_and_grad(objective),
            init_params,
            jac=True,
            method="CG",
            callback=lambda p: path.append((np.array(p), -objective(p))),  # noqa: B023
            options={"maxiter": 4},
        )
        plot_xs = np.reshape(np.linspace(-7, 7, 30), (30, 1))
        pred_mean, pred_cov = predict(result.x, X, y, plot_xs)
        runs[backend] = (value, grad, path, result.x, pred_mean, pred_cov)
    ours, theirs = runs["tracegrad"], runs["autograd"]
    close(ours[0], theirs[0], "objective")
    close(ours[1], theirs[1], "gradient")
    assert len(ours[2]) == len(theirs[2]) >= 3
    for (p, ll), (q, mm) in zip(ours[2], theirs[2], strict=True):
        close(p, q, "CG iterate")
        close(ll, mm, "log likelihood")
    for a, b, what in zip(ours[3:], theirs[3:], ("params", "pred_mean", "pred_cov"), strict=True):
        close(a, b, what)


def _svi_run(svi, D, log_density, num_samples, num_iters, init):
    objective, gradient, unpack_params = svi.black_box_variational_inference(
        log_density, D, num_samples=num_samples
    )
    bounds = []

    def callback(params, t, g):  # the example's callback, without the plot
        bounds.append(-objective(params, t))
        mean, log_std = unpack_params(params)
        bounds.append(svi.mvn.pdf(np.zeros(D), mean, np.diag(np.exp(2 * log_std))))
        bounds.append(np.array(g))

    final = svi.adam(gradient, init, step_size=0.1, num_iters=num_iters, callback=callback)
    return final, bounds


def test_black_box_svi():
    runs = {}
    for backend, svi in load_pair("black_box_svi").items():
        D = 2

        def log_density(x, t, svi=svi):  # the example's target, from its __main__ block
            mu, log_sigma = x[:, 0], x[:, 1]
            sigma_density = svi.norm.logpdf(log_sigma, 0, 1.35)
            mu_density = svi.norm.logpdf(mu, 0, svi.np.exp(log_sigma))
            return sigma_density + mu_density

        init = np.concatenate([-1 * np.ones(D), -5 * np.ones(D)])
        runs[backend] = _svi_run(svi, D, log_density, num_samples=50, num_iters=6, init=init)
    (ours, our_trace), (theirs, their_trace) = runs["tracegrad"], runs["autograd"]
    assert len(our_trace) == len(their_trace) == 18
    for i, (a, b) in enumerate(zip(our_trace, their_trace, strict=True)):
        close(a, b, f"callback value {i}")
    close(ours, theirs, "final variational parameters")
    assert not np.allclose(ours, init)  # it moved


def test_bayesian_neural_net():
    runs = {}
    for backend, bnn in load_pair("bayesian_neural_net").items():
        np_ = bnn.np
        rbf = lambda x, np_=np_: np_.exp(-(x**2))  # the example's nonlinearity
        num_weights, predictions, logprob = bnn.make_nn_funs(
            layer_sizes=[1, 5, 5, 1], L2_reg=0.1, noise_variance=0.01, nonlinearity=rbf
        )
        inputs, targets = bnn.build_toy_dataset(n_data=8)
        log_posterior = lambda weights, t: logprob(weights, inputs, targets)  # noqa: B023
        objective, gradient, unpack_params = bnn.black_box_variational_inference(
            log_posterior, num_weights, num_samples=5
        )
        trace = []

        def callback(params, t, g):  # the example's callback, without the plot
            trace.append(-objective(params, t))  # noqa: B023
            rs = np.random.RandomState(0)
            mean, log_std = unpack_params(params)  # noqa: B023
            sample_weights = rs.randn(3, num_weights) * np.exp(log_std) + mean  # noqa: B023
            plot_inputs = np.linspace(-8, 8, num=20)
            trace.append(predictions(sample_weights, np.expand_dims(plot_inputs, 1)))  # noqa: B023

        rs = np.random.RandomState(0)
        init = np.concatenate([rs.randn(num_weights), -5 * np.ones(num_weights)])
        final = bnn.adam(gradient, init, step_size=0.1, num_iters=4, callback=callback)
        runs[backend] = (final, trace)
    (ours, our_trace), (theirs, their_trace) = runs["tracegrad"], runs["autograd"]
    assert len(our_trace) == len(their_trace) == 8
    for i, (a, b) in enumerate(zip(our_trace, their_trace, strict=True)):
        close(a, b, f"callback value {i}")
    close(ours, theirs, "final variational parameters")
