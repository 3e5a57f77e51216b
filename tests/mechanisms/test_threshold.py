"""The PAK threshold: constants, κ (Eq. 11), τ' (Eq. 6), the release (Eq. 12), τ_max (Eq. 13)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import (
    DomainError,
    ParameterError,
    empirical_quantile,
    noise_quantile,
    pak_kappa,
    pak_tau_max,
    pak_threshold,
    pak_threshold_calibration,
    smooth_sensitivity_quantile,
    smoothing_parameters,
)
from mechanisms.core._random import bit_source
from mechanisms.pak._threshold import _release_threshold

DELTA_PAK = 2.0**-20  # [PAK19] §VI-A/B


# -- smoothing constants and noise quantiles ---------------------------------------------------


def test_smoothing_parameters_are_nrs07_laplace_constants():
    a, b = smoothing_parameters(1.0, DELTA_PAK, "laplace")
    assert a == 0.5
    assert b == pytest.approx(1.0 / (2.0 * (21 * math.log(2.0))))  # ln(2/2^-20) = 21 ln 2


def test_smoothing_parameters_gaussian_uses_the_conservative_nrs07_constants():
    a, b = smoothing_parameters(0.5, 1e-6, "gaussian")
    log_term = math.log(2e6)
    assert a == pytest.approx(0.5 / (5.0 * math.sqrt(2.0 * log_term)))
    assert b == pytest.approx(0.5 / (4.0 * (1.0 + log_term)))
    assert b < 0.5 / (2.0 * log_term)  # the smaller of the two quoted values: safe


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1])
def test_smoothing_parameters_need_a_positive_delta(delta):
    with pytest.raises(ParameterError, match="'delta'"):
        smoothing_parameters(1.0, delta)


def test_noise_quantile_matches_closed_forms():
    for beta in (0.001, 0.006, 0.2):
        assert noise_quantile(1 - beta, "laplace") == pytest.approx(-math.log(2 * beta))
    assert noise_quantile(0.975, "gaussian") == pytest.approx(1.959963984540054)
    with pytest.raises(ParameterError, match="'noise'"):
        noise_quantile(0.5, "cauchy")


# -- κ, Eq. 11 ---------------------------------------------------------------------------------


def test_kappa_hand_computed_with_pak_section_vi_b_constants():
    # [PAK19] §VI-B: ε = 1, δ = 2^-20, Laplace, a = ε/√(−ln δ), b = min(1, ε/(−2 ln δ));
    # β_lt = 0.3·β with β = 0.02 (Table I, m = 50,000). By hand:
    # −ln δ = 13.862944, a = 0.2685791, b = 0.0360674, e^b − 1 = 0.0367257,
    # G⁻¹(1 − 0.006) = −ln 0.012 = 4.4228486, bracket = 1 − 0.0367257·4.4228486/0.2685791
    # = 0.3952167, κ = 2.530258.
    a = 1.0 / math.sqrt(20 * math.log(2.0))
    b = min(1.0, 1.0 / (2 * 20 * math.log(2.0)))
    assert (a, b) == (pytest.approx(0.2685791, rel=1e-6), pytest.approx(0.0360674, rel=1e-5))
    assert pak_kappa(a=a, b=b, beta_lt=0.006) == pytest.approx(2.530258, rel=1e-5)


def test_kappa_hand_computed_with_the_release_constants():
    # NRS07 Laplace at ε₁ = 1, δ = 2^-20: a = 0.5, b = 1/(42 ln 2) = 0.0343499,
    # e^b − 1 = 0.0349466, bracket = 1 − 0.0349466·4.4228486/0.5 = 0.6908719, κ = 1.447445.
    a, b = smoothing_parameters(1.0, DELTA_PAK)
    assert pak_kappa(a=a, b=b, beta_lt=0.006) == pytest.approx(1.447445, rel=1e-5)


def test_kappa_raises_when_the_bracket_is_not_positive():
    # NRS07's Gaussian constants at ε₁ = 0.85, δ = 2^-20 give a = 0.0315: infeasible.
    a, b = smoothing_parameters(0.85, DELTA_PAK, "gaussian")
    with pytest.raises(ParameterError, match="bracket"):
        pak_kappa(a=a, b=b, beta_lt=0.004, noise="gaussian")
    with pytest.raises(ParameterError, match="bracket"):
        pak_kappa(a=0.1, b=1.0, beta_lt=0.01)


@pytest.mark.parametrize("beta_lt", [0.0, 0.6, 1.0, math.nan])
def test_kappa_rejects_beta_lt_outside_zero_half(beta_lt):
    with pytest.raises(ParameterError, match="'beta_lt'"):
        pak_kappa(a=0.5, b=0.01, beta_lt=beta_lt)


def test_tau_max_is_eq_13_times_r():
    got = pak_tau_max(
        quantile=3.0, smooth_sensitivity=0.2, a=0.5, kappa=1.5, beta_lt=0.01, beta_rt=0.05, r=2.0
    )
    expected = 2.0 * (3.0 + 1.5 * 0.2 / 0.5 * (-math.log(0.02) - math.log(0.1)))
    assert got == pytest.approx(expected)


# -- calibration (what an auditor checks) ------------------------------------------------------

KW = {"bound": 50.0, "epsilon": 0.85, "delta": DELTA_PAK, "lam": 0.85, "p": 0.05, "beta_lt": 0.01}


def _prefix(seed: int, m: int = 4000) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, m).clip(0, 50.0)


def test_calibration_is_eq_6_with_the_public_constants():
    prefix = _prefix(0)
    cal = pak_threshold_calibration(prefix, **KW)
    a, b = smoothing_parameters(0.85, DELTA_PAK)
    kappa = pak_kappa(a=a, b=b, beta_lt=0.01)
    q = empirical_quantile(prefix, 0.85 * 0.05)
    ss = smooth_sensitivity_quantile(prefix, q.rank, b, 0.0, 50.0)
    assert (cal.a, cal.b, cal.kappa, cal.rank) == (a, b, kappa, q.rank)
    assert cal.quantile == q.value and cal.smooth_sensitivity == ss
    assert cal.smooth_bound == max(kappa * ss, cal.floor) + cal.granularity
    assert cal.smooth_bound == pytest.approx(kappa * ss, rel=1e-6)  # floor, γ negligible here
    assert cal.tau_prime == pytest.approx(q.value + cal.smooth_bound / a * -math.log(0.02))
    assert cal.scale == cal.smooth_bound / a
    assert abs(cal.center - cal.tau_prime) <= cal.granularity / 2
    assert math.frexp(cal.granularity)[0] == 0.5  # a power of two
    assert cal.floor == 2.0**24 * cal.granularity


def test_lattice_is_public_it_does_not_depend_on_the_data():
    spread = pak_threshold_calibration(_prefix(1), **KW)
    constant = pak_threshold_calibration(np.full(4000, 3.0), **KW)
    assert spread.smooth_sensitivity != constant.smooth_sensitivity
    assert spread.granularity == constant.granularity
    assert spread.floor == constant.floor


def test_smooth_bound_floor_keeps_the_noise_positive_on_degenerate_data():
    # All-equal data and m large: SS underflows towards 0; the public floor takes over.
    cal = pak_threshold_calibration(np.zeros(100_000), **KW)
    assert cal.smooth_sensitivity < cal.floor
    assert cal.smooth_bound == cal.floor + cal.granularity


# -- the release -------------------------------------------------------------------------------


def _draws(noise: str, n: int = 3000):
    # NRS07's Gaussian constants only give κ > 0 for tiny δ (a = ε/(5√(2 ln(2/δ)))).
    kw = dict(KW, noise=noise) if noise == "laplace" else dict(KW, noise=noise, delta=1e-40)
    cal = pak_threshold_calibration(_prefix(2, 2000), **kw)
    bits = bit_source(123)
    out = np.array([_release_threshold(cal, bits, clip=False).unclipped for _ in range(n)])
    return cal, out


@pytest.mark.statistical
@pytest.mark.parametrize(("noise", "dist"), [("laplace", stats.laplace), ("gaussian", stats.norm)])
def test_released_threshold_is_center_plus_scaled_noise(noise, dist):
    cal, out = _draws(noise)
    z = (out - cal.center) / cal.scale
    assert np.allclose(out / cal.granularity, np.rint(out / cal.granularity))  # on the lattice
    assert stats.kstest(z, dist.cdf).pvalue > 1e-4
    # Power: the same draws are clearly not noise of scale ×1.3 or ×0.7.
    assert stats.kstest(z / 1.3, dist.cdf).pvalue < 1e-4
    assert stats.kstest(z / 0.7, dist.cdf).pvalue < 1e-4


@pytest.mark.statistical
def test_threshold_falls_below_the_quantile_with_probability_beta_lt():
    # Eq. 8: the offset and the noise share the scale, so Pr[τ < x̂_λp] = β_lt = 0.01.
    cal, out = _draws("laplace", n=4000)
    rate = float(np.mean(out < cal.quantile))
    assert abs(rate - 0.01) < 4 * math.sqrt(0.01 * 0.99 / out.size)


def test_threshold_multiplies_by_r_then_clips_to_the_bound():
    prefix = _prefix(3)
    rel1 = pak_threshold(prefix, **KW, seed=9)
    rel2 = pak_threshold(prefix, **KW, r=1.7, seed=9)
    assert rel2.unclipped == pytest.approx(1.7 * rel1.unclipped)
    low = prefix.clip(0, 1.0)  # B = 1: x̂_λp = 1 and τ' > 1
    tiny = pak_threshold(low, **dict(KW, bound=1.0), seed=9, r=3.0)
    assert tiny.unclipped > 1.0 and tiny.threshold == 1.0 and tiny.clipped
    free = pak_threshold(low, **dict(KW, bound=1.0), seed=9, r=3.0, clip=False)
    assert free.threshold == free.unclipped == tiny.unclipped


def test_threshold_release_reports_public_parameters_and_guarantee():
    rel = pak_threshold(_prefix(4), **KW, seed=1)
    assert rel.time_lag == 4000 and rel.rank == quantile_rank_for(4000)
    assert (rel.guarantee.budget.epsilon, rel.guarantee.budget.delta) == (0.85, DELTA_PAK)
    assert not hasattr(rel, "tau_max") and not hasattr(rel, "scale")  # analysis only (§2)
    assert 0.0 <= rel.threshold <= 50.0
    assert rel.privacy.seeded and rel.privacy.unit == "event" and rel.privacy.delta == DELTA_PAK


def test_threshold_analysis_is_returned_only_on_request():
    prefix = _prefix(4)
    rel, info = pak_threshold(prefix, **KW, seed=1, analysis=True, beta_rt=0.05)
    assert rel == pak_threshold(prefix, **KW, seed=1)
    assert info.scale == info.calibration.scale > 0 and info.tau_max > info.calibration.quantile
    with pytest.raises(ParameterError, match="analysis=True"):
        pak_threshold(prefix, **KW, seed=1, beta_rt=0.05)


def quantile_rank_for(m: int) -> int:
    return math.ceil((1 - 0.85 * 0.05) * m) + 1


@pytest.mark.statistical
def test_tau_max_bounds_the_threshold_with_probability_beta_rt():
    prefix = _prefix(5, 2000)
    taus = [pak_threshold(prefix, **KW, beta_rt=0.05, seed=s, analysis=True) for s in range(400)]
    exceed = np.mean([t.unclipped > a.tau_max for t, a in taus])
    assert exceed <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 400)
    assert exceed > 0.0  # τ_max is a quantile of τ, not a loose bound


def test_threshold_on_exponential_data_tracks_the_quantile():
    # Large m: SS is small, τ ≈ r·(x̂_λp + small offset) with x̂_λp ≈ −ln(λp) (Fact 1).
    prefix = np.random.default_rng(6).exponential(1.0, 200_000).clip(0, 50.0)
    rel = pak_threshold(prefix, **KW, seed=2)
    assert rel.threshold == pytest.approx(-math.log(0.85 * 0.05), rel=0.1)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"bound": 0.0}, ParameterError),
        ({"epsilon": -1.0}, ParameterError),
        ({"delta": 0.0}, ParameterError),
        ({"lam": 0.0}, ParameterError),
        ({"lam": 1.2}, ParameterError),
        ({"p": 1.0}, ParameterError),
        ({"beta_lt": 0.7}, ParameterError),
        ({"r": 0.9}, ParameterError),
        ({"noise": "cauchy"}, ParameterError),
        ({"clip": 1}, ParameterError),
        ({"beta_rt": 0.0}, ParameterError),
        ({"prefix": np.full(10, 1.0)}, ParameterError),  # λp·m < 1
        ({"prefix": np.array([1.0, 60.0] * 100)}, DomainError),
        ({"prefix": np.array([1.0, math.inf] * 100)}, DomainError),
    ],
)
def test_threshold_rejects_bad_arguments(change, error):
    args = dict(KW, prefix=_prefix(7, 200))
    args.update(change)
    with pytest.raises(error):
        pak_threshold(**args, seed=0)
