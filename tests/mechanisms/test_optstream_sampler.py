"""OptStream's L1 sampler ([FV19] Algorithm 3) pinned where noise cannot blur it (issue 29:
mutation target ``optstream_sampler``): the forced tail and the always-accept path exactly, the
SVT's calibration by formula, and seeded golden sample sets (recorded on commit 4b6238b)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms.optstream._sampling import (
    l1_score,
    l1_sensitivity,
    null_rate_threshold,
    sample_equal,
    sample_equal_window,
    sample_l1,
    svt_noises,
)


def _walk() -> np.ndarray:
    rng = np.random.default_rng(5)  # test data, nothing released
    return np.cumsum(rng.normal(0.0, 1.0, (3, 2, 16)), axis=2)


def _sets(mask: np.ndarray) -> list[list[int]]:
    return [np.flatnonzero(row).tolist() for row in mask]


@pytest.mark.parametrize(("r", "k"), [(16, 5), (10, 2), (8, 7), (5, 3)])
def test_a_threshold_never_reached_samples_step_0_and_the_forced_tail(r, k):
    """No query answers yes: Alg. 3 l. 8-9 add every step once r − 1 − i <= k − |S|, so the
    set is {0} and the last k − 1 steps, exactly."""
    x = np.zeros((2, 1, r))
    mask = sample_l1(x, k=k, epsilon=1.0, alpha=1.0, theta=1e12, bits=np.random.PCG64(1))
    assert _sets(mask) == [[0, *range(r - k + 1, r)]] * 2


@pytest.mark.parametrize(("r", "k"), [(16, 5), (10, 2), (8, 7)])
def test_a_threshold_always_reached_samples_the_first_k_steps(r, k):
    x = np.zeros((2, 1, r))
    mask = sample_l1(x, k=k, epsilon=1.0, alpha=1.0, theta=-1e12, bits=np.random.PCG64(1))
    assert _sets(mask) == [list(range(k))] * 2


def test_k_of_one_or_at_least_r_needs_no_query():
    x = np.zeros((1, 1, 6))
    one = sample_l1(x, k=1, epsilon=1.0, alpha=1.0, theta=0.0, bits=np.random.PCG64(1))
    every = sample_l1(x, k=9, epsilon=1.0, alpha=1.0, theta=0.0, bits=np.random.PCG64(1))
    assert _sets(one) == [[0]] and _sets(every) == [list(range(6))]


@pytest.mark.parametrize(
    ("epsilon", "theta", "expected"),
    [
        (20.0, 1.0, [[0, 3, 6, 8, 10], [0, 2, 5, 8, 10], [0, 1, 4, 6, 8]]),
        (5.0, 3.0, [[0, 3, 6, 8, 12], [0, 1, 5, 8, 10], [0, 1, 5, 6, 8]]),
        (20.0, -1.0, [[0, 1, 3, 4, 6], [0, 1, 2, 3, 5], [0, 1, 2, 4, 5]]),
    ],
)
def test_seeded_golden_sample_sets(epsilon, theta, expected):
    mask = sample_l1(
        _walk(), k=5, epsilon=epsilon, alpha=0.05, theta=theta, bits=np.random.PCG64(29)
    )
    assert _sets(mask) == expected


def test_seeded_golden_with_an_observed_mask_and_a_short_period():
    x = _walk()
    rng = np.random.default_rng(5)
    rng.normal(0.0, 1.0, (3, 2, 16))  # the walk's draws
    observed = rng.random((3, 2, 16)) > 0.2
    mask = sample_l1(
        x, k=5, epsilon=20.0, alpha=0.05, theta=1.0, bits=np.random.PCG64(29), observed=observed
    )
    assert _sets(mask) == [[0, 3, 6, 8, 10], [0, 5, 8, 10, 11], [0, 1, 5, 6, 8]]
    short = sample_l1(
        x[:, :, :10], k=4, epsilon=20.0, alpha=0.05, theta=1.0, bits=np.random.PCG64(29), window=16
    )
    assert _sets(short) == [[0, 3, 6, 8], [0, 2, 5, 8], [0, 1, 4, 6]]


def test_svt_noises_are_calibrated_as_algorithm_3_says():
    """ρ ~ Lap(2(ΔL + γ)/ε_s), μ ~ Lap(4k(ΔL + γ)/ε_s) on one lattice, ΔL = 2α(w − k)."""
    w, k, eps, alpha = 48, 6, 1.0, 2.0
    delta_l = l1_sensitivity(w, k, alpha)
    assert delta_l == 2.0 * alpha * (w - k) == 168.0
    rho, mu = svt_noises(w=w, k=k, epsilon=eps, alpha=alpha)
    assert rho.granularity == mu.granularity
    gamma = rho.granularity
    assert rho.scale == pytest.approx(2.0 * (delta_l + gamma) / eps, rel=1e-15)
    assert mu.scale == pytest.approx(4.0 * k * (delta_l + gamma) / eps, rel=1e-15)
    assert 2.0**23 <= (2.0 * delta_l / eps) / gamma < 2.0**25


def test_null_rate_threshold_by_formula():
    _, mu = svt_noises(w=48, k=6, epsilon=1.0, alpha=2.0)
    assert null_rate_threshold(w=48, k=6, epsilon=1.0, alpha=2.0) == pytest.approx(
        mu.scale * math.log(48 / 12), rel=1e-15
    )
    assert null_rate_threshold(w=12, k=6, epsilon=1.0, alpha=2.0) == 0.0  # w <= 2k
    assert null_rate_threshold(w=13, k=6, epsilon=1.0, alpha=2.0) > 0.0


def test_sample_equal_and_its_window_pattern():
    assert sample_equal(10, 4).tolist() == [0, 3, 6, 9]
    assert sample_equal(10, 1).tolist() == [0]
    assert sample_equal(5, 9).tolist() == [0, 1, 2, 3, 4]
    assert sample_equal(2, 2).tolist() == [0, 1]
    assert sample_equal_window(10, 4, 10).tolist() == [0, 3, 6, 9]
    assert sample_equal_window(7, 4, 10).tolist() == [0, 3, 6]
    assert sample_equal_window(1, 4, 10).tolist() == [0]
    for r, w in [(0, 4), (5, 4)]:
        with pytest.raises(ValueError, match="1 <= r <= window"):
            sample_equal_window(r, 2, w)


def test_l1_score_by_hand_with_an_observed_gate():
    # one period, one node: x = 0, 4, 0, 0 ; segment [0, 3]: line 0 -> 0, |4 - 0| at step 1
    x = np.array([[[0.0, 4.0, 0.0, 0.0]]])
    tp = np.array([0])
    assert l1_score(x, tp, 3).tolist() == [4.0]
    assert l1_score(x, tp, 1).tolist() == [0.0]  # no interior step
    hide_1 = np.array([[[True, False, True, True]]])
    assert l1_score(x, tp, 3, hide_1).tolist() == [0.0]
    hide_end = np.array([[[True, True, True, False]]])  # an end point unobserved: no term
    assert l1_score(x, tp, 3, hide_end).tolist() == [0.0]
    # segment [1, 3]: line 4 -> 0 gives 2 at step 2, |2 - 0| = 2
    assert l1_score(x, np.array([1]), 3).tolist() == [2.0]


def test_reconstruct_observed_holds_a_single_sample_exactly():
    """A node whose only usable sample is step 0 holds it everywhere, exactly (weights 1); a
    node with none gets 0 and infinite weight; a node observing both samples interpolates."""
    from mechanisms.optstream._sampling import reconstruct_observed

    mask = np.array([[True, False, False, True, False, False]])  # samples at steps 0 and 3
    noisy = np.array([[[0.1, 7.0], [2.0, 5.0], [1.0, 4.0]]])  # (B, n, k): three nodes
    observed = np.ones((1, 3, 6), dtype=bool)
    observed[0, 0, 3] = False  # node 0 did not observe step 3: only its step-0 sample counts
    observed[0, 2, [0, 3]] = False  # node 2 observed neither sampled step
    est, wts = reconstruct_observed(mask, noisy, observed)
    assert est[0, 0].tolist() == [0.1] * 6  # exactly: no (1 - λ)·v + λ·v rounding
    assert wts[0, 0].tolist() == [1.0] * 6
    np.testing.assert_allclose(est[0, 1], [2.0, 3.0, 4.0, 5.0, 5.0, 5.0], rtol=1e-15)
    np.testing.assert_allclose(wts[0, 1], [1.0, 5 / 9, 5 / 9, 1.0, 1.0, 1.0], rtol=1e-15)
    assert est[0, 2].tolist() == [0.0] * 6 and np.isinf(wts[0, 2]).all()
