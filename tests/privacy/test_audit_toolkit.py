"""Tests of the audit toolkit itself: exact bounds, no selection bias, and power.

Tumult Core's "more noise" check once compared against the wrong scale and could not fail;
every branch of our helpers is made to fire here at least once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _audit import (
    audit,
    audit_samples,
    clopper_pearson,
    epsilon_lower_bound,
    ks_scale_test,
)
from scipy import stats

EPSILON = 1.0
N = 100_000


def toy_laplace(scale: float):
    """x + Lap(scale) with numpy (a toy mechanism, never a release path)."""

    def statistic(x: float, n: int, bits) -> np.ndarray:
        return x + np.random.Generator(bits).laplace(0.0, scale, n)

    return statistic


def toy_leaky(scale: float, leak: float):
    """x + Lap(scale), except that with probability ``leak`` it publishes x + 1000."""

    def statistic(x: float, n: int, bits) -> np.ndarray:
        rng = np.random.Generator(bits)
        out = x + rng.laplace(0.0, scale, n)
        return np.where(rng.random(n) < leak, x + 1000.0, out)

    return statistic


# -- exact pieces ------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 50), (1, 50), (17, 50), (49, 50), (50, 50), (3, 1000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    lo, hi = clopper_pearson(k, n, 0.01)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.99, method="exact")
    assert float(lo) == pytest.approx(ci.low, abs=1e-12)
    assert float(hi) == pytest.approx(ci.high, abs=1e-12)


def test_clopper_pearson_closed_forms_at_the_ends():
    n, alpha = 200, 1e-3
    lo0, hi0 = clopper_pearson(0, n, alpha)
    lon, hin = clopper_pearson(n, n, alpha)
    assert lo0 == 0.0 and hin == 1.0
    assert float(hi0) == pytest.approx(1.0 - (alpha / 2) ** (1.0 / n), rel=1e-10)
    assert float(lon) == pytest.approx((alpha / 2) ** (1.0 / n), rel=1e-10)


def test_clopper_pearson_is_vectorised_and_ordered():
    k = np.arange(0, 101)
    lo, hi = clopper_pearson(k, 100, 1e-3)
    assert lo.shape == hi.shape == (101,)
    assert np.all(lo <= k / 100) and np.all(k / 100 <= hi)
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)


def test_epsilon_lower_bound_formula_and_delta():
    assert float(epsilon_lower_bound(0.3, 0.1)) == pytest.approx(math.log(3.0))
    assert float(epsilon_lower_bound(0.3, 0.1, delta=0.1)) == pytest.approx(math.log(2.0))
    assert float(epsilon_lower_bound(0.05, 0.1, delta=0.05)) == -math.inf
    assert float(epsilon_lower_bound(0.01, 0.1, delta=0.05)) == -math.inf


def test_audit_samples_rejects_mismatched_samples():
    with pytest.raises(ValueError, match="same size"):
        audit_samples(np.zeros(10), np.zeros(12))


# -- validity: the bound is not biased by the event selection ----------------------------------


@pytest.mark.statistical
def test_identical_distributions_give_no_evidence():
    # ε = 0 mechanism: with the selection on a separate half, ε_lb ≤ 0 (each w.p. ≥ 1 − α).
    for seed in range(10):
        rng = np.random.default_rng(seed)
        x, y = rng.laplace(size=20_000), rng.laplace(size=20_000)
        result = audit_samples(x, y)
        assert result.epsilon_lb <= 0.0, result


@pytest.mark.statistical
def test_bound_uses_only_the_held_out_half():
    # A selection half screaming "huge ε" cannot raise the bound if the held-out half is null.
    rng = np.random.default_rng(7)
    n = 20_000
    x, y = rng.laplace(size=n), rng.laplace(size=n)
    x[: n // 2] += 5.0
    result = audit_samples(x, y)
    assert result.epsilon_lb <= 0.0, result
    assert result.count_num <= result.n_holdout == n // 2
    # ... while the same shift in the held-out half is found.
    x2, y2 = rng.laplace(size=n), rng.laplace(size=n)
    x2 += 5.0
    assert audit_samples(x2, y2).epsilon_lb > 3.0


# -- power: pass on a correct toy mechanism, fail on under-noised ones ---------------------------


@pytest.mark.statistical
def test_correct_toy_laplace_passes():
    result = audit(toy_laplace(1.0 / EPSILON), 0.0, 1.0, n=N, seed=11)
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.8 * EPSILON, result  # tight, not vacuous


@pytest.mark.statistical
def test_over_noised_toy_laplace_passes():
    result = audit(toy_laplace(1.3 / EPSILON), 0.0, 1.0, n=N, seed=11)
    assert result.passes(EPSILON), result


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("scale", "shift"),
    [(0.5 / EPSILON, 1.0), (0.7 / EPSILON, 1.0), (1.0 / EPSILON, 1.5)],
    ids=["scale-halved", "scale-x0.7", "sensitivity-underestimated"],
)
def test_under_noised_toy_laplace_fails(scale, shift):
    result = audit(toy_laplace(scale), 0.0, shift, n=N, seed=11)
    assert not result.passes(EPSILON), result


@pytest.mark.statistical
def test_delta_is_accounted():
    # A leak of probability 0.01 is within δ = 0.02 but not within δ = 0.001.
    stat = toy_leaky(1.0 / EPSILON, leak=0.01)
    assert audit(stat, 0.0, 1.0, n=N, seed=3, delta=0.02).passes(EPSILON)
    result = audit(stat, 0.0, 1.0, n=N, seed=3, delta=1e-3)
    assert not result.passes(EPSILON), result


# -- the Kolmogorov–Smirnov scale check --------------------------------------------------------


def laplace_family(s: float):
    return stats.laplace(scale=s)


@pytest.mark.statistical
def test_scale_check_accepts_the_true_scale():
    x = np.random.default_rng(5).laplace(0.0, 2.0, N)
    assert ks_scale_test(x, laplace_family, 2.0).check() == []


@pytest.mark.statistical
def test_scale_check_less_noise_branch_fires():
    # Samples at 0.7 × the claim: the "less noise" alternative must be that very scale.
    x = np.random.default_rng(5).laplace(0.0, 0.7 * 2.0, N)
    result = ks_scale_test(x, laplace_family, 2.0)
    assert result.p_smaller > 1e-3
    assert any("smaller scale" in f for f in result.check())
    assert any("true scale" in f for f in result.check())


@pytest.mark.statistical
def test_scale_check_more_noise_branch_fires():
    # The branch Tumult's copy-paste bug disabled: samples at 1.3 × the claim.
    x = np.random.default_rng(5).laplace(0.0, 1.3 * 2.0, N)
    result = ks_scale_test(x, laplace_family, 2.0)
    assert result.p_larger > 1e-3
    assert any("larger scale" in f for f in result.check())
    assert any("true scale" in f for f in result.check())


def test_scale_check_rejects_bad_factors():
    with pytest.raises(ValueError, match="factors"):
        ks_scale_test(np.zeros(3), laplace_family, 1.0, factors=(1.3, 0.7))
