"""Audits of the lattice noise in ``mechanisms.core._noise``.

* Tumult-style scale checks: 100,000 draws; a Kolmogorov–Smirnov test accepts the true scale
  (p ≥ 1e-6) and rejects the scale × 0.7 and × 1.3. The draws are lattice-valued while the
  reference law is continuous; with γ = 2⁻²⁴·scale the largest CDF jump is ~γ/(2·scale) ≈ 3e-8,
  far below the KS resolution 1/√N ≈ 3e-3, so the continuous reference is exact for the test.
* Privacy audits (see ``_audit.py``): neighbouring scalars at distance Δ, the real noise passes
  at its ε (and δ), under-noised variants with the same N and seed fail.
* Floating-point safety: every output is an exact multiple of the granularity γ.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit, ks_scale_test
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mechanisms import GaussianNoise, LaplaceNoise, bit_source

N = 100_000
N_SLOW = 4_000_000


def released(noise):
    """Statistic: one release of the scalar ``x`` per run, through the noise's own sampler."""

    def statistic(x: float, n: int, bits) -> np.ndarray:
        return noise.release(np.full(n, x), bits)

    return statistic


def laplace(s: float):
    return stats.laplace(scale=s)


def normal(s: float):
    return stats.norm(scale=s)


# -- Tumult-style scale checks -----------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 1.0), (100.0, 0.1), (0.01, 5.0)])
def test_laplace_noise_scale(sensitivity, epsilon):
    noise = LaplaceNoise(sensitivity=sensitivity, epsilon=epsilon)
    draws = noise.sample(N, bit_source(1))
    assert ks_scale_test(draws, laplace, noise.scale).check() == []


@pytest.mark.statistical
def test_laplace_release_is_centred_on_the_snapped_value():
    noise = LaplaceNoise(sensitivity=1.0, epsilon=0.5, magnitude=1e6)
    x = 123456.789
    centre = np.rint(x / noise.granularity) * noise.granularity
    out = noise.release(np.full(N, x), bit_source(2))
    assert ks_scale_test(out - centre, laplace, noise.scale).check() == []


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [1.0, 37.5])
def test_gaussian_noise_scale(sigma):
    noise = GaussianNoise(sigma=sigma)
    draws = noise.sample(N, bit_source(3))
    assert ks_scale_test(draws, normal, sigma).check() == []


# -- privacy audits: Laplace -------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 1.0), (100.0, 0.5)])
def test_laplace_audit_passes_at_claimed_epsilon(sensitivity, epsilon):
    noise = LaplaceNoise(sensitivity=sensitivity, epsilon=epsilon)
    result = audit(released(noise), 0.3, 0.3 + sensitivity, n=N, seed=10)
    assert result.passes(epsilon), result
    assert result.epsilon_lb > 0.85 * epsilon, result  # the audit is tight, not vacuous


@pytest.mark.statistical
@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 1.0), (100.0, 0.5)])
def test_laplace_audit_fails_with_scale_halved(sensitivity, epsilon):
    noise = LaplaceNoise(sensitivity=sensitivity, epsilon=2.0 * epsilon)
    result = audit(released(noise), 0.3, 0.3 + sensitivity, n=N, seed=10)
    assert not result.passes(epsilon), result


@pytest.mark.statistical
def test_laplace_audit_fails_with_sensitivity_underestimated():
    # Calibrated for Δ = 1, but the neighbours are 1.6 apart.
    noise = LaplaceNoise(sensitivity=1.0, epsilon=1.0)
    result = audit(released(noise), 0.3, 1.9, n=N, seed=10)
    assert not result.passes(1.0), result


# A coarse explicit lattice makes the rounding visible: γ = 1 and Δ = 1.25, neighbours 0.4
# and 1.65 snap to 0 and 2, two lattice steps (= Δ + 0.75γ) apart.
COARSE = {"granularity": 1.0, "epsilon": 1.0}


@pytest.mark.statistical
def test_coarse_lattice_audit_passes_when_rounding_is_accounted():
    noise = LaplaceNoise(sensitivity=1.25, **COARSE)  # scale (Δ + γ)/ε = 2.25
    result = audit(released(noise), 0.4, 1.65, n=N, seed=12)
    assert result.passes(1.0), result


@pytest.mark.statistical
def test_coarse_lattice_audit_fails_when_rounding_is_not_accounted():
    noise = LaplaceNoise(sensitivity=0.25, **COARSE)  # scale Δ/ε = 1.25: γ left out
    assert noise.scale == pytest.approx(1.25)
    result = audit(released(noise), 0.4, 1.65, n=N, seed=12)
    assert not result.passes(1.0), result


# -- privacy audits: Gaussian ------------------------------------------------------------------
# The analytic calibration (Balle and Wang 2018, Thm. 8: the smallest σ with δ(ε) = δ) is
# tight, but violations of a small δ live in tails of probability ~δ. At N = 1e5 the audit
# detects σ/3; σ/2 needs N = 4e6 (slow tier: ε_lb = 1.48 against 0.66 at σ).

G_EPS, G_DELTA = 0.9, 1e-5


def gaussian(divisor: float) -> GaussianNoise:
    noise = GaussianNoise.for_mechanism(sensitivity=1.0, epsilon=G_EPS, delta=G_DELTA)
    return GaussianNoise(sigma=noise.sigma / divisor)


@pytest.mark.statistical
def test_gaussian_audit_passes_at_claimed_epsilon_delta():
    result = audit(released(gaussian(1.0)), 0.3, 1.3, n=N, seed=13, delta=G_DELTA)
    assert result.passes(G_EPS), result


@pytest.mark.statistical
def test_gaussian_audit_fails_with_sigma_divided_by_3():
    result = audit(released(gaussian(3.0)), 0.3, 1.3, n=N, seed=13, delta=G_DELTA)
    assert not result.passes(G_EPS), result


@pytest.mark.slow
@pytest.mark.statistical
def test_gaussian_audit_slow_fails_with_sigma_halved():
    assert audit(released(gaussian(1.0)), 0.3, 1.3, n=N_SLOW, seed=14, delta=G_DELTA).passes(G_EPS)
    result = audit(released(gaussian(2.0)), 0.3, 1.3, n=N_SLOW, seed=14, delta=G_DELTA)
    assert not result.passes(G_EPS), result


@pytest.mark.slow
@pytest.mark.statistical
def test_laplace_audit_slow_detects_epsilon_25_percent_high():
    # Scale × 0.8 is invisible at N = 1e5; at 4e6 the bound is within ~1% of the truth.
    real = audit(released(LaplaceNoise(sensitivity=1.0, epsilon=1.0)), 0.3, 1.3, n=N_SLOW, seed=15)
    assert real.passes(1.0) and real.epsilon_lb > 0.97, real
    weak = audit(released(LaplaceNoise(sensitivity=1.0, epsilon=1.25)), 0.3, 1.3, n=N_SLOW, seed=15)
    assert not weak.passes(1.0), weak


# -- floating-point safety: outputs on the lattice ---------------------------------------------


def _on_lattice(out: np.ndarray, gamma: float) -> bool:
    k = out / gamma
    return bool(np.all(np.isfinite(k)) and np.all(k == np.rint(k)) and np.all(k * gamma == out))


@settings(max_examples=40, deadline=None)
@given(
    x=st.floats(-1e6, 1e6, allow_nan=False),
    sensitivity=st.floats(1e-3, 1e3),
    epsilon=st.floats(1e-2, 10.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_laplace_outputs_lie_on_the_lattice(x, sensitivity, epsilon, seed):
    noise = LaplaceNoise(sensitivity=sensitivity, epsilon=epsilon, magnitude=1e6)
    gamma = noise.granularity
    assert gamma == 2.0 ** np.round(np.log2(gamma))  # a power of two
    bits = bit_source(seed)
    assert _on_lattice(noise.release(np.array([x, x + sensitivity] * 50), bits), gamma)
    assert _on_lattice(noise.sample(100, bits), gamma)


@settings(max_examples=20, deadline=None)
@given(
    x=st.floats(-1e6, 1e6, allow_nan=False),
    sigma=st.floats(1e-2, 1e3),
    seed=st.integers(0, 2**32 - 1),
)
def test_gaussian_outputs_lie_on_the_lattice(x, sigma, seed):
    noise = GaussianNoise(sigma=sigma, magnitude=1e6)
    assert _on_lattice(noise.release(np.full(100, x), bit_source(seed)), noise.granularity)


def test_lattice_check_can_fail():
    gamma = LaplaceNoise(sensitivity=1.0, epsilon=1.0).granularity
    assert not _on_lattice(np.array([0.0, 0.3 * gamma]), gamma)
    assert _on_lattice(np.array([0.0, -7.0 * gamma]), gamma)
