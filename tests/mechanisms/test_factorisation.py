"""The square-root factorisation counter ([FHU23]; ``mechanisms.counting._factorisation``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import DomainError, ParameterError
from mechanisms.counting import _factorisation as fac
from mechanisms.counting._factorisation import (
    SqrtFactorisationCounter,
    sqrt_coefficients,
    sqrt_factorisation_noise,
    sqrt_factorisation_release,
    sqrt_factorisation_variance,
)


def _toeplitz(coef: np.ndarray) -> np.ndarray:
    n = coef.size
    i, j = np.indices((n, n))
    return np.where(i >= j, coef[np.clip(i - j, 0, n - 1)], 0.0)


def test_coefficients_are_the_central_binomials_over_powers_of_four():
    coef = sqrt_coefficients(12)
    expected = [math.comb(2 * j, j) / 4**j for j in range(12)]
    np.testing.assert_allclose(coef, expected, rtol=1e-15)


def test_the_square_of_c_is_the_prefix_sum_matrix():
    c = _toeplitz(sqrt_coefficients(64))
    np.testing.assert_allclose(c @ c, np.tril(np.ones((64, 64))), atol=1e-13)


def test_calibration_meets_the_analytic_gaussian_at_the_inflated_sensitivity():
    cal = fac._calibrate(1024, 1.0, 1e-6, 1.0)
    coef = sqrt_coefficients(1024)
    exact = cal.units_bound * math.sqrt(float(coef @ coef))
    assert cal.sensitivity_units >= exact + math.sqrt(1024)  # the rounding of y is paid for
    assert cal.sensitivity_units <= exact * 1.001
    assert 2**24 <= cal.sigma_units < 2**25  # the sampler's proven range
    from mechanisms.core._noise import _gaussian_delta

    assert _gaussian_delta(1.0, cal.sigma_units / cal.sensitivity_units) <= 1e-6


@pytest.mark.parametrize("n", [1, 7, 1024, 1 << 14])
def test_every_n_lands_sigma_in_the_sampler_range(n):
    for eps, dlt, bound in [(0.01, 1e-9, 1e-3), (1.0, 1e-6, 1.0), (10.0, 0.1, 1e6)]:
        cal = fac._calibrate(n, eps, dlt, bound)
        assert 2**24 <= cal.sigma_units < 2**25
        # integers of C·u and of the noise stay exact doubles
        assert cal.units_bound * sqrt_coefficients(n).sum() + 64 * cal.sigma_units < 2**50


def test_the_variance_known_answer_of_the_issue():
    # issue 27: the square root calibrated with the analytic Gaussian at (1, 1e-6) has
    # worst-step variance 191 at n = 2^10 and 308 at 2^14 (bound 1; ours adds the rounding)
    for n, worst in [(1 << 10, 191.0), (1 << 14, 308.0)]:
        var = sqrt_factorisation_variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
        assert var[-1] == pytest.approx(worst, rel=0.005)
        assert np.all(np.diff(var) > 0)


@pytest.mark.statistical
def test_the_exact_variance_matches_1000_seeded_releases():
    n = 1 << 12
    x = np.random.default_rng(0).uniform(0.0, 1.0, n)
    truth = np.cumsum(x)
    err = np.stack(
        [
            sqrt_factorisation_release(x, epsilon=1.0, delta=1e-6, bound=1.0, seed=s).prefix_sums
            - truth
            for s in range(1000)
        ]
    )
    var = sqrt_factorisation_variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
    ratio = (err**2).mean(axis=0) / var
    # chi-square with 1000 dof per step: ±4.5 sd is ±0.2; the mean over steps is tighter
    assert np.all(np.abs(ratio - 1.0) < 0.25)
    assert abs(float(np.mean((err**2).mean(axis=0)) / var.mean()) - 1.0) < 0.08
    assert abs(float(err.mean())) < 0.1 * math.sqrt(var.mean())


def test_streaming_draws_the_same_noise_as_the_batch():
    x = np.random.default_rng(1).uniform(0.0, 3.0, 5000)  # crosses a block of 4096 draws
    rel = sqrt_factorisation_release(x, epsilon=0.5, delta=1e-8, bound=3.0, seed=5)
    counter = SqrtFactorisationCounter(5000, epsilon=0.5, delta=1e-8, bound=3.0, seed=5)
    sums = np.array([counter.push(v) for v in x])
    gamma = rel.noise.granularity
    # equal up to one lattice step per coordinate of y where the two roundings differ
    np.testing.assert_allclose(sums, rel.prefix_sums, rtol=0, atol=8 * gamma * 100)
    assert counter.variance() == pytest.approx(float(rel.variance[-1]), rel=1e-12)


def test_released_encoding_is_on_the_lattice():
    rel = sqrt_factorisation_release(np.ones(100), epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    units = rel.encoded / rel.noise.granularity
    assert np.array_equal(units, np.rint(units))


def test_bad_inputs_are_refused_before_any_draw():
    with pytest.raises(ParameterError, match="'delta'"):
        sqrt_factorisation_release([1.0], epsilon=1.0, delta=0.0, bound=1.0, seed=0)
    with pytest.raises(ParameterError, match="'epsilon'"):
        sqrt_factorisation_noise(4, epsilon=-1.0, delta=1e-6, bound=1.0)
    with pytest.raises(ParameterError, match="'bound'"):
        SqrtFactorisationCounter(4, epsilon=1.0, delta=1e-6, bound=0.0)
    with pytest.raises(DomainError, match="'values'"):
        sqrt_factorisation_release([2.0], epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    counter = SqrtFactorisationCounter(1, epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    counter.push(0.5)
    with pytest.raises(ParameterError, match="sized for n=1"):
        counter.push(0.5)


def test_push_clamps_out_of_range_values_and_refuses_nan():
    # a private value outside [0, B] is clamped, never an error (an error would reveal it)
    for cls in (SqrtFactorisationCounter,):
        a = cls(3, epsilon=1.0, delta=1e-6, bound=1.0, seed=4)
        b = cls(3, epsilon=1.0, delta=1e-6, bound=1.0, seed=4)
        assert a.push(5.0) == b.push(1.0)
        assert a.push(-2.0) == b.push(0.0)
        with pytest.raises(DomainError, match="NaN"):
            a.push(float("nan"))
        with pytest.raises(DomainError, match="real number"):
            a.push("1")
