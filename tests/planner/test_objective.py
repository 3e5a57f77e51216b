"""The objective of Eq. 16: gradient, data terms, exact evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from mechanisms import smooth_sensitivity_quantile
from planner import PakObjective, bt_error

N_TRIPS = 25_000_000
BOUND = 1440.0


@pytest.fixture(scope="module")
def objective(trips):
    return PakObjective(
        np.sort(trips[:50_000]), n=N_TRIPS, bound=BOUND, epsilon=1.0, delta=2.0**-20,
        beta=0.02, p_max=0.005,
    )  # fmt: skip


def test_baseline_is_eq3_with_constant():
    expected = 1440 / 1.0 * math.sqrt(8 * math.log(50)) * math.log2(25e6) ** 1.5
    assert bt_error(n=N_TRIPS, bound=1440.0, epsilon=1.0, beta=0.02) == pytest.approx(expected)


@pytest.mark.parametrize(
    "z",
    [
        [1.5, math.log(0.0045), 0.8, 0.0, 0.0, 0.0, 0.0],
        [2.3, math.log(0.003), 0.6, -1.0, 0.5, -2.0, 0.3],
        [1.1, math.log(0.0049), 0.95, 0.4, -0.7, -4.0, -1.0],
    ],
)
def test_analytic_gradient_matches_finite_differences(objective, z):
    z = np.array(z)
    _, grad = objective.value_and_grad(z)
    num = optimize.approx_fprime(z, objective.value, 1e-6)
    assert np.allclose(grad, num, rtol=1e-3, atol=1e-3 * np.abs(grad).max())


def test_a_wrong_gradient_would_be_caught(objective):
    # the check above has power: a gradient with one wrong sign fails it
    z = np.array([1.5, math.log(0.0045), 0.8, 0.0, 0.0, 0.0, 0.0])
    _, grad = objective.value_and_grad(z)
    grad = grad.copy()
    grad[2] *= -1
    num = optimize.approx_fprime(z, objective.value, 1e-6)
    assert not np.allclose(grad, num, rtol=1e-3, atol=1e-3 * np.abs(grad).max())


@pytest.mark.parametrize("b", [0.005, 0.03, 0.3])
def test_sensitivity_profile_equals_the_mechanisms_function(trips, b):
    xs = np.sort(trips[:3_000])
    xs[2_990:] = xs[2_990]  # ties at the top
    obj = PakObjective(xs, n=10**6, bound=BOUND, epsilon=1.0, delta=1e-6, beta=0.02, p_max=0.01)
    for rank in (obj.profiles.lo, 2_985, 2_995, 3_000):
        got, _ = obj.profiles.ss(rank, b)
        assert got == pytest.approx(smooth_sensitivity_quantile(xs, rank, b, 0.0, BOUND), rel=1e-12)


def test_relaxation_is_exact_at_integer_counts(objective):
    z = np.array([1.7, math.log(0.005), 0.85, 0.0, 0.0, 0.0, 0.0])
    r, p, share, betas = objective.decode(z)
    lam = objective.lam_from(z)
    exact = objective.exact(r=r, lam=lam, p=p, share=share, betas=betas)
    # the relaxed objective at the same integer count and the same β split
    x_hat, _, ss, _, _ = objective._data_terms(exact.count, exact.b)
    assert x_hat == exact.x_hat
    assert ss == pytest.approx(exact.smooth_sensitivity, rel=1e-12)
    assert exact.g <= betas[0]  # Eq. 5 holds at the reported λ
    assert exact.error_bound == pytest.approx(exact.laplace_error_bound + exact.outlier_error_bound)


def test_infeasible_kappa_gives_a_large_value(objective):
    z = np.array([1.5, math.log(0.005), 0.8, 0.0, -10.0, 0.0, 0.0])  # β_lt tiny: κ ≤ 0
    f, g = objective.value_and_grad(z)
    assert f >= 1e5 * objective.baseline_error_bound and not g.any()
