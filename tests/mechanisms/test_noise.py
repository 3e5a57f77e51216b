"""The secure lattice noise module: lattice property, calibration, variance, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import (
    GaussianNoise,
    LaplaceNoise,
    ParameterError,
    SecureBits,
    bit_source,
    discrete_gaussian,
    discrete_laplace,
    lattice_granularity,
    uniform_open,
)
from mechanisms.core._noise import _gaussian_delta


def test_lattice_granularity_is_a_power_of_two_below_the_scale():
    for scale in [1e-6, 0.3, 1.0, 7.5, 1e9]:
        gamma = lattice_granularity(scale)
        assert math.frexp(gamma)[0] == 0.5
        assert gamma <= scale * 2.0**-24 < 2 * gamma


def test_lattice_granularity_grows_with_magnitude_so_lattice_points_are_exact():
    gamma = lattice_granularity(1.0, magnitude=3.6e10)
    assert 3.6e10 / gamma < 2.0**50


def test_release_outputs_lie_on_the_lattice_whatever_the_input():
    noise = LaplaceNoise(sensitivity=1.0, epsilon=0.5)
    values = np.array([0.1, 1 / 3, math.pi, 1e3 + 1e-9])
    out = noise.release(values, bit_source(3))
    k = out / noise.granularity
    np.testing.assert_array_equal(k, np.round(k))


def test_scale_accounts_for_the_rounding():
    noise = LaplaceNoise(sensitivity=2.0, epsilon=0.25)
    assert noise.scale == pytest.approx((2.0 + noise.granularity) / 0.25, rel=0, abs=0)
    assert noise.scale > 2.0 / 0.25


def test_laplace_sample_matches_continuous_laplace():
    noise = LaplaceNoise(sensitivity=1.0, epsilon=1.0)
    draws = noise.sample(100_000, bit_source(11))
    assert stats.kstest(draws, stats.laplace(scale=noise.scale).cdf).pvalue > 1e-4
    for wrong in (0.7, 1.3):
        assert stats.kstest(draws, stats.laplace(scale=wrong * noise.scale).cdf).pvalue < 1e-6


def test_laplace_variance_is_exact():
    noise = LaplaceNoise(sensitivity=1.0, epsilon=1.0)
    assert noise.variance == pytest.approx(2 * noise.scale**2, rel=1e-12)
    draws = noise.sample(400_000, bit_source(5))
    # Var of the sample variance of Laplace: (mu4 - sigma^4)/N, mu4 = 24 b^4.
    se = math.sqrt((24 - 4) * noise.scale**4 / draws.size)
    assert abs(draws.var() - noise.variance) < 5 * se


def test_discrete_laplace_has_the_right_pmf_for_small_t():
    t = 1.5
    k = discrete_laplace(bit_source(2), 200_000, t)
    q = math.exp(-1 / t)
    for value in (0, 1, -1, 3):
        expected = (1 - q) / (1 + q) * q ** abs(value)
        observed = np.mean(k == value)
        assert abs(observed - expected) < 5 * math.sqrt(expected / k.size)


def test_discrete_gaussian_moments():
    sigma = 3.0
    k = discrete_gaussian(bit_source(8), 200_000, sigma)
    np.testing.assert_array_equal(k, np.round(k))
    assert abs(k.mean()) < 0.05
    assert k.var() == pytest.approx(sigma**2, rel=0.02)


def test_gaussian_noise_matches_normal_and_rejects_wrong_sigma():
    noise = GaussianNoise(sigma=2.0)
    draws = noise.sample(100_000, bit_source(4))
    assert stats.kstest(draws, stats.norm(scale=2.0).cdf).pvalue > 1e-4
    for wrong in (0.7, 1.3):
        assert stats.kstest(draws, stats.norm(scale=2.0 * wrong).cdf).pvalue < 1e-6


def test_gaussian_mechanism_calibration():
    # Analytic Gaussian mechanism (Balle and Wang 2018, Thm. 8) at Δ + γ: the smallest σ whose
    # exact δ is at most 1e-6; below the classical √(2 ln(1.25/δ))/ε (only proven for ε < 1).
    noise = GaussianNoise.for_mechanism(sensitivity=1.0, epsilon=0.5, delta=1e-6)
    u = noise.sigma / (1.0 + noise.granularity)
    assert _gaussian_delta(0.5, u) <= 1e-6 < _gaussian_delta(0.5, u * (1.0 - 1e-6))
    assert noise.sigma < math.sqrt(2 * math.log(1.25 / 1e-6)) / 0.5


def test_explicit_granularity_must_be_a_power_of_two():
    assert LaplaceNoise(sensitivity=1.0, epsilon=1.0, granularity=2.0**-10).granularity == 2.0**-10
    with pytest.raises(ParameterError, match="power of two"):
        LaplaceNoise(sensitivity=1.0, epsilon=1.0, granularity=0.3)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_epsilon_is_rejected_with_the_template(bad):
    with pytest.raises(ParameterError, match="'epsilon' parameter of LaplaceNoise must be"):
        LaplaceNoise(sensitivity=1.0, epsilon=bad)


def test_seeded_sources_are_reproducible_and_secure_source_is_not():
    a = LaplaceNoise(sensitivity=1.0, epsilon=1.0).sample(5, bit_source(7))
    b = LaplaceNoise(sensitivity=1.0, epsilon=1.0).sample(5, bit_source(7))
    np.testing.assert_array_equal(a, b)
    s1 = SecureBits().random_raw(4)
    s2 = SecureBits().random_raw(4)
    assert s1.dtype == np.uint64 and not np.array_equal(s1, s2)


def test_uniform_open_never_hits_the_ends():
    u = uniform_open(bit_source(1), 1_000_000)
    assert u.min() > 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.002


def test_bit_source_passes_sources_through_and_spawns():
    src = bit_source(1)
    assert bit_source(src) is src
    children = src.spawn(2)
    assert not np.array_equal(children[0].random_raw(3), children[1].random_raw(3))
    assert len(SecureBits().spawn(3)) == 3


def _discrete_gaussian_bins(sigma: float, edges: np.ndarray) -> np.ndarray:
    """Exact probabilities of the discrete Gaussian N_ℤ(0, σ²) on [edges[i], edges[i+1])."""
    k = np.arange(-math.ceil(40 * sigma), math.ceil(40 * sigma) + 1)
    pmf = np.exp(-(k.astype(np.float64) ** 2) / (2 * sigma * sigma))
    pmf /= pmf.sum()
    return np.histogram(k, bins=edges, weights=pmf)[0]


@pytest.mark.parametrize(("sigma", "width"), [(1.5, 1), (40.7, 8), (2.0**24 + 0.5, 2**21)])
def test_discrete_gaussian_pmf_chi_square_rejects_a_wrong_sigma(sigma, width):
    # [CKS20] Alg. 3 must give exactly N_ℤ(0, σ²): a chi-square test against the exact pmf
    # (bins of ``width`` integers out to ±4σ, two open tails) accepts σ and rejects σ·(1 ± 0.05).
    draws = discrete_gaussian(bit_source(21), 400_000, sigma)
    inner = np.arange(
        -math.ceil(4 * sigma / width) * width, math.ceil(4 * sigma / width) * width + 1, width
    )
    edges = np.concatenate([[-np.inf], inner - 0.5, [np.inf]])
    observed = np.histogram(draws, bins=edges)[0]

    def pvalue(s: float) -> float:
        if s > 1e6:  # the pmf's bins at lattice σ: the normal's, to a relative 1e-12
            expected = np.diff(stats.norm(scale=s).cdf(edges))
        else:
            expected = _discrete_gaussian_bins(s, edges)
        return stats.chisquare(observed, expected / expected.sum() * draws.size).pvalue

    assert pvalue(sigma) > 1e-4
    for wrong in (0.95, 1.05):
        assert pvalue(sigma * wrong) < 1e-6
