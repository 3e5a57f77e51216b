"""The release lattice against its rule, the Gaussian variance and the calibration's guard loop
(issue 29 §5-7): every ε and sensitivity, magnitudes included, not only ε = 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError
from mechanisms.core import _noise
from mechanisms.core._noise import GaussianNoise, LaplaceNoise, lattice_granularity

EPSILONS = [0.01, 0.1, 1.0, 10.0]
SENSITIVITIES = [1e-3, 0.3, 1.0, 7.0, 1e3, 1e6]
MAGNITUDES = [0.0, 1e-3, 1.0, 1e6, 1e12]


def _floor_log2(x: float) -> int:
    """⌊log₂ x⌋ exactly, from the binary exponent (no log rounding)."""
    mantissa, exp = math.frexp(x)  # x = mantissa·2^exp, mantissa in [0.5, 1)
    return exp - 1


def _ceil_log2(x: float) -> int:
    mantissa, exp = math.frexp(x)
    return exp - 1 if mantissa == 0.5 else exp


def _rule(scale: float, magnitude: float) -> float:
    """γ = 2^(⌊log₂ scale⌋ − 24), raised so that magnitude/γ ≤ 2⁵⁰ (the docstring's rule)."""
    exponent = _floor_log2(scale) - 24
    if magnitude > 0:
        exponent = max(exponent, _ceil_log2(magnitude) - 50)
    return 2.0**exponent


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("sensitivity", SENSITIVITIES)
def test_laplace_lattice_follows_its_rule_at_every_epsilon(epsilon, sensitivity):
    for magnitude in MAGNITUDES:
        noise = LaplaceNoise(sensitivity=sensitivity, epsilon=epsilon, magnitude=magnitude)
        gamma = noise.granularity
        assert gamma == _rule(sensitivity / epsilon, magnitude)  # from Δ/ε, not Δ·ε
        assert math.frexp(gamma)[0] == 0.5  # a power of two
        assert noise.scale == (sensitivity + gamma) / epsilon  # rounding in the sensitivity
        if magnitude > 0:
            assert magnitude / gamma <= 2.0**50  # every reachable lattice point is exact
        t = noise.scale / gamma  # the sampler's t: the range docs/privacy.md proves
        assert t < 2.0**25 + 1.0 / epsilon
        if magnitude == 0 or _ceil_log2(magnitude) - 50 <= _floor_log2(sensitivity / epsilon) - 24:
            assert 2.0**24 <= (sensitivity / epsilon) / gamma < 2.0**25


def test_a_large_magnitude_coarsens_the_lattice_below_2_24_steps_per_scale():
    """Δ = 10⁻³ with magnitude 10⁶ (issue 29 §5): scale/γ ≈ 2²⁰·⁰³ at ε = 1, the range the
    extended proof of docs/privacy.md covers; far coarser still at ε = 10 and magnitude 10¹²."""
    noise = LaplaceNoise(sensitivity=1e-3, epsilon=1.0, magnitude=1e6)
    assert noise.granularity == 2.0**-30
    assert 2.0**20 < noise.scale / noise.granularity < 2.0**21
    coarse = LaplaceNoise(sensitivity=1e-3, epsilon=10.0, magnitude=1e12)
    assert coarse.granularity == 2.0**-10
    assert coarse.scale / coarse.granularity < 1.0


@pytest.mark.parametrize("sigma", [1e-3, 0.7, 1.0, 3.0, 1e6])
@pytest.mark.parametrize("magnitude", MAGNITUDES)
def test_gaussian_lattice_follows_its_rule(sigma, magnitude):
    noise = GaussianNoise(sigma=sigma, magnitude=magnitude)
    assert noise.granularity == _rule(sigma, magnitude)
    assert noise.sigma / noise.granularity < 2.0**25


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("sensitivity", [1e-3, 1.0, 1e6])
def test_gaussian_mechanism_lattice_and_sigma_follow_their_rule(epsilon, sensitivity):
    factor = _noise._analytic_gaussian_factor(epsilon, 1e-6)
    for magnitude in (0.0, 1e9):
        noise = GaussianNoise.for_mechanism(
            sensitivity=sensitivity, epsilon=epsilon, delta=1e-6, magnitude=magnitude
        )
        gamma = _rule(sensitivity * factor, magnitude)
        assert noise.granularity == gamma
        assert noise.sigma == (sensitivity + gamma) * factor


@pytest.mark.parametrize(
    ("scale", "magnitude"), [(0.0, 0.0), (-1.0, 0.0), (math.nan, 0.0), (1.0, -1.0), (math.inf, 0)]
)
def test_lattice_granularity_validates_its_arguments(scale, magnitude):
    with pytest.raises(ParameterError, match="lattice_granularity"):
        lattice_granularity(scale, magnitude)


def test_magnitude_must_be_non_negative_and_zero_is_allowed():
    with pytest.raises(ParameterError, match="magnitude"):
        LaplaceNoise(sensitivity=1.0, epsilon=1.0, magnitude=-1.0)
    with pytest.raises(ParameterError, match="magnitude"):
        GaussianNoise(sigma=1.0, magnitude=-1.0)
    assert LaplaceNoise(sensitivity=1.0, epsilon=1.0, magnitude=0.0).granularity == 2.0**-24
    assert GaussianNoise(sigma=1.0, magnitude=0.0).granularity == 2.0**-24


@pytest.mark.parametrize("sigma", [0.5, 3.0, 1e6])
def test_gaussian_variance_is_sigma_squared(sigma):
    noise = GaussianNoise(sigma=sigma)
    assert noise.variance == sigma * sigma


def test_gaussian_variance_matches_the_draws():
    noise = GaussianNoise(sigma=3.0)
    draws = noise.sample(200_000, np.random.PCG64(29))
    # sample variance of 2·10⁵ normal draws: relative sd √(2/n) = 0.3 %
    assert abs(draws.var() / noise.variance - 1.0) < 0.02
    wrong = 3.0 * 2.0  # σ·2 for σ²: 6 against 9, 33 % off
    assert abs(draws.var() / wrong - 1.0) > 0.3


@pytest.mark.parametrize("epsilon", [0.01, 1.0, 1e6])
def test_the_analytic_gaussian_factor_is_the_smallest_that_holds(epsilon):
    """Both bracket loops are reached (ε = 0.01: u ≫ 1 doubles ``hi``; ε = 10⁶: u < 10⁻³
    halves ``lo``), and the result is the root to within the 10⁻⁹ nudge."""
    delta = 1e-6
    u = _noise._analytic_gaussian_factor(epsilon, delta)
    assert _noise._gaussian_delta(epsilon, u) <= delta
    assert _noise._gaussian_delta(epsilon, u / (1.0 + 1.5e-9)) > delta  # the nudge is 1e-9
    assert (u > 1.0) if epsilon == 0.01 else True
    assert (u < 1e-3) if epsilon == 1e6 else True


def test_the_floating_point_guard_loop_raises_sigma_until_delta_holds(monkeypatch):
    """A root finder that stops short of the root (here 10⁻⁷ below it): the guard loop raises
    u in steps of 10⁻⁹ until δ holds in floating point, and stops as soon as it does."""
    import scipy.optimize

    real = scipy.optimize.brentq
    calls = []

    def short(f, a, b, **kwargs):
        root = real(f, a, b, **kwargs)
        calls.append(root)
        return root * (1.0 - 1e-7)

    monkeypatch.setattr(scipy.optimize, "brentq", short)
    epsilon, delta = 1.0, 1e-6
    u = _noise._analytic_gaussian_factor(epsilon, delta)
    assert calls, "the patched root finder was not used"
    assert _noise._gaussian_delta(epsilon, u) <= delta
    assert _noise._gaussian_delta(epsilon, u / (1.0 + 1e-9)) > delta  # one step less fails
    assert u < calls[0] * (1.0 + 2e-9)


def test_cks_acceptance_rate_is_at_least_0_445_at_every_sigma():
    """[CKS20] Alg. 3's exact acceptance rate A(σ) = Σ_y DLap_t(y)·exp(−(|y| − σ²/t)²/(2σ²)),
    t = ⌊σ⌋ + 1, on a grid of σ from 10⁻⁶ to 80 (a coarse lattice gives small σ/γ): at least
    0.445, the figure docs/privacy.md's bound for σ/γ < 64 uses (minimum near σ = 0.30)."""
    sigmas = np.concatenate([np.logspace(-6, 2, 300), np.arange(0.05, 80.0, 0.37)])
    rates = []
    for sigma in sigmas:
        t = math.floor(sigma) + 1.0
        q = math.exp(-1.0 / t)
        y = np.arange(-int(60 * t + 50), int(60 * t + 50) + 1)
        dlap = (1.0 - q) / (1.0 + q) * np.exp(-np.abs(y) / t)
        accept = np.exp(-((np.abs(y) - sigma * sigma / t) ** 2) / (2.0 * sigma * sigma))
        rates.append(float((dlap * accept).sum()))
    assert min(rates) >= 0.445
    assert min(rates) < 0.446  # the minimum is where the docs say, not far above
    assert abs(float(sigmas[int(np.argmin(rates))]) - 0.30) < 0.03
