"""Gaussian noise for (w, α) units under zCDP (Bun and Steinke 2016; Canonne et al. 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError, bit_source
from mechanisms.wevent import dp_to_zcdp, gaussian_gain, gaussian_window_noise, zcdp_to_dp


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
