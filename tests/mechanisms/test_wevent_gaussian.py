"""Gaussian noise for (w, α) units under zCDP (Bun and Steinke 2016; Canonne et al. 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError, bit_source
from mechanisms.wevent import (
    dp_to_zcdp,
    gaussian_epsilon,
    gaussian_gain,
    gaussian_rho,
    gaussian_window_noise,
    zcdp_to_dp,
)
from mechanisms.wevent._gaussian import _DISCRETE_SLACK, _ETA


def test_zcdp_conversion_is_bun_steinke_prop_1_3():
    rho, delta = 0.1, 1e-5
    assert zcdp_to_dp(rho, delta) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e5)))


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-6), (1.0, 1e-6), (5.0, 1e-9)])
def test_dp_to_zcdp_inverts_the_conversion_from_below(eps, delta):
    rho = dp_to_zcdp(eps, delta)
    assert zcdp_to_dp(rho, delta) <= eps
    assert zcdp_to_dp(rho * 1.001, delta) > eps


def test_window_noise_calibration():
    noise = gaussian_window_noise(k=16, alpha=2.0, rho=0.5)
    l2 = 2.0 * 4.0
    assert noise.sigma >= l2 / math.sqrt(2 * 0.5)  # ρ = Δ₂²/(2σ²) with Δ₂ = α√k
    assert noise.sigma <= l2 * (1 + 1e-6) / math.sqrt(2 * 0.5)
    draws = noise.sample(200_000, bit_source(3))
    assert np.std(draws) == pytest.approx(noise.sigma, rel=0.01)
    # a test that can fail: the scale x 1.3 is rejected
    assert abs(np.std(draws) - 1.3 * noise.sigma) > 0.2 * noise.sigma


def test_gaussian_beats_laplace_only_for_many_samples():
    assert gaussian_gain(k=48, epsilon=1.0, delta=1e-6) > 1.5
    assert gaussian_gain(k=4, epsilon=1.0, delta=1e-6) < 1.0


def test_bad_delta():
    with pytest.raises(ParameterError, match="'delta'"):
        dp_to_zcdp(1.0, 1.5)


@pytest.mark.parametrize("eps, delta", [(0.01, 1e-6), (0.1, 1e-6), (1.0, 1e-6), (5.0, 1e-9)])
def test_tight_rho_is_the_analytic_gaussian_curve_and_inverts(eps, delta):
    from scipy.stats import norm

    rho = gaussian_rho(eps, delta)
    assert rho > dp_to_zcdp(eps, delta)  # tighter than [BS16] Prop. 1.3
    mu = math.sqrt(2 * rho)
    # μ-GDP profile ([DRS22] Cor. 2.13) at the calibrated ε (the discrete margin removed)
    e = eps - _DISCRETE_SLACK
    curve = norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
    assert curve <= delta
    assert curve >= delta * (1 - 1e-6)  # the largest such μ: nothing left on the table
    assert gaussian_epsilon(rho, delta) <= eps
    assert gaussian_epsilon(rho * 1.001, delta) > eps


def test_tight_conversion_at_one_and_a_millionth():
    # σ/Δ 5.35 (zCDP) → 4.23 (analytic curve): 21% less noise on every Gaussian window
    assert 1 / math.sqrt(2 * dp_to_zcdp(1.0, 1e-6)) == pytest.approx(5.35, abs=0.005)
    assert 1 / math.sqrt(2 * gaussian_rho(1.0, 1e-6)) == pytest.approx(4.23, abs=0.005)


def test_discrete_against_rounded_gaussian_ratio_is_within_eta():
    # |ln p(x)/r(x)| = |ln ∫_{-1/2}^{1/2} exp(-(2at + t²)/(2s²)) dt| (normalisers equal to
    # e^{-2π²s²}) for s = 2²⁴ (the smallest σ in lattice units) and |a| <= 40 s
    s = 2.0**24
    nodes, weights = np.polynomial.legendre.leggauss(24)
    t, wt = nodes / 2, weights / 2
    worst = 0.0
    for a in np.linspace(0, 40 * s, 81):
        f_minus_1 = float(wt @ np.expm1(-(2 * a * t + t * t) / (2 * s * s)))
        worst = max(worst, abs(math.log1p(f_minus_1)))
    assert worst <= _ETA
    assert worst >= _ETA / 2  # the constant is not loose by more than 2x


def test_window_noise_refuses_too_many_coordinates():
    with pytest.raises(ParameterError, match="'n_nodes'"):
        gaussian_window_noise(k=48, alpha=1.0, rho=0.5, n_nodes=1 << 20)
