"""Audit of Mechanism 1's guarded threshold θ (``mechanisms.pak.mechanism_threshold``, issue 23).

θ = B where the released r·τ ≤ 0, else r·τ clipped to [B·2⁻³⁰, B]: a function of the released τ
and the public B, so it is post-processing of the (ε₁, δ)-DP threshold. The audit checks it
statistically on the draws the release makes (the calibration once per prefix, the mechanism's
own draw code N times, then the guard, as ``test_threshold_audit.py`` does for τ itself;
``test_guarded_statistic_is_the_release_path`` pins that this is what ``pak_release`` uses).

Set-up built so the guard fires often: m = 1000 values, the P − 1 lowest at 0 and the rest at
B/2 (x̂_λp = B/2, LS = SS = B/2, as in ``test_threshold_audit.py``) with β_lt = 0.5, so the
offset G⁻¹(1 − β_lt) is 0, κ = 1, τ' = x̂_λp and the noise scale is S/a ≈ B: r·τ ≤ 0 in ~60 % of
the draws. Neighbour: the P-th value moved across the quantile to 0 (τ' = 0: the guard fires
in ~68 %). Predicted loss a·|Δτ'|/S = 0.5 ≤ ε = 1; the twin with the noise scale ÷ 3 has 1.5,
and its excess lives just above 0, next to where the guard folds the lower tail into B.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit_samples
from test_threshold_audit import draws  # the threshold's own draws and its twin

from mechanisms import bit_source, pak_release
from mechanisms.pak import _threshold, mechanism_threshold
from mechanisms.pak._threshold import pak_threshold_calibration

EPSILON, DELTA, BOUND = 1.0, 1e-6, 1.0
PARAMS = {"bound": BOUND, "epsilon": EPSILON, "delta": DELTA, "lam": 0.5, "p": 0.1, "beta_lt": 0.5}
M = 1000
N_FAST = 60_000
N_SLOW = 300_000


def prefixes() -> tuple[np.ndarray, np.ndarray]:
    """D (x̂_λp = B/2, LS = SS = B/2) and D' (its quantile value moved to 0)."""
    rank = pak_threshold_calibration(np.zeros(M), **PARAMS).rank
    d = np.zeros(M)
    d[rank - 1 :] = 0.5
    d_prime = d.copy()
    d_prime[rank - 1] = 0.0
    return d, d_prime


def guarded_draws(prefix: np.ndarray, n: int, seed: int, *, divide_scale: float = 1.0):
    """``n`` guarded thresholds θ from the mechanism's own draw code (``divide_scale``: the
    under-noised twin, as in ``test_threshold_audit.py``)."""
    cal = pak_threshold_calibration(prefix, **PARAMS)
    return mechanism_threshold(draws(cal, n, seed, divide_scale=divide_scale), BOUND)


def test_setup_makes_the_guard_fire():
    d, d_prime = prefixes()
    cal, cal_p = (pak_threshold_calibration(x, **PARAMS) for x in (d, d_prime))
    assert cal.kappa == pytest.approx(1.0) and cal.offset == pytest.approx(0.0, abs=1e-12)
    assert (cal.tau_prime, cal_p.tau_prime) == pytest.approx((0.5, 0.0), abs=1e-6)
    assert cal.scale == pytest.approx(1.0, rel=1e-6) and cal_p.scale == pytest.approx(1.0)
    theta = guarded_draws(d_prime, 2_000, seed=3)
    assert 0.6 < float(np.mean(theta == BOUND)) < 0.8  # Pr[r·τ ≤ 0] + Pr[r·τ ≥ B] = 0.5 + 0.18
    assert theta.min() > 0.0  # nothing at (or raised to) ~0


def test_guarded_statistic_is_the_release_path():
    d, _ = prefixes()
    x = np.concatenate([d, np.full(40, 0.3)])
    cal = pak_threshold_calibration(d, bound=BOUND, epsilon=0.5, delta=DELTA, lam=0.5, p=0.1,
                                    beta_lt=0.5)  # fmt: skip
    fired = 0
    for seed in range(12):
        rel = pak_release(x, bound=BOUND, epsilon=EPSILON, delta=DELTA, time_lag=M, seed=seed,
                          lam=0.5, p=0.1, beta_lt=0.5, r=1.0, eps1_share=0.5)  # fmt: skip
        released = _threshold._release_threshold(cal, bit_source(seed), clip=False).unclipped
        assert rel.threshold_release.unclipped == released
        assert rel.threshold == float(mechanism_threshold(released, BOUND))
        assert rel.threshold_fallback == (released <= 0.0)
        fired += rel.threshold_fallback
    assert 0 < fired < 12


@pytest.fixture(scope="module")
def base_draws() -> np.ndarray:
    return guarded_draws(prefixes()[0], N_FAST, seed=1)


@pytest.mark.statistical
def test_guard_audit_passes_at_claimed_epsilon_delta(base_draws):
    out_dp = guarded_draws(prefixes()[1], N_FAST, seed=2)
    result = audit_samples(base_draws, out_dp, delta=DELTA)
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.15, result  # it sees the predicted 0.5: it has power


@pytest.mark.statistical
def test_guard_audit_fails_with_scale_divided_by_3():
    d, d_prime = prefixes()
    out_d = guarded_draws(d, N_FAST, seed=1, divide_scale=3.0)
    out_dp = guarded_draws(d_prime, N_FAST, seed=2, divide_scale=3.0)
    result = audit_samples(out_d, out_dp, delta=DELTA)
    assert not result.passes(EPSILON), result


@pytest.mark.slow
@pytest.mark.statistical
def test_guard_audit_slow_end_to_end_thresholds():
    # N_SLOW thresholds through pak_release's whole path (prefix and a short suffix): the
    # released θ, at ε₁ = ε/2 (a = 0.25, predicted loss 0.25 ≤ ε)
    d, d_prime = prefixes()

    def thetas(prefix, seed, n):
        x = np.concatenate([prefix, np.zeros(2)])
        bits = bit_source(seed)
        return np.array([
            pak_release(x, bound=BOUND, epsilon=EPSILON, delta=DELTA, time_lag=M, seed=bits,
                        lam=0.5, p=0.1, beta_lt=0.5, r=1.0, eps1_share=0.5,
                        counter="binary_tree").threshold
            for _ in range(n)
        ])  # fmt: skip

    result = audit_samples(thetas(d, 1, N_SLOW // 10), thetas(d_prime, 2, N_SLOW // 10),
                           delta=DELTA)  # fmt: skip
    assert result.passes(EPSILON), result
    big = audit_samples(guarded_draws(d, N_SLOW, seed=5), guarded_draws(d_prime, N_SLOW, seed=6),
                        delta=DELTA)  # fmt: skip
    assert big.passes(EPSILON) and big.epsilon_lb > 0.3, big
    twin = audit_samples(
        guarded_draws(d, N_SLOW, seed=5, divide_scale=3.0),
        guarded_draws(d_prime, N_SLOW, seed=6, divide_scale=3.0),
        delta=DELTA,
    )
    assert not twin.passes(EPSILON) and twin.epsilon_lb > 1.2, twin  # predicted 1.5
