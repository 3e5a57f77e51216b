"""Mechanism 1's guard on the released threshold (issue 23): r·τ ≤ 0 runs at B, not at ~0.

The stream is built to make the released threshold small: its quantile sits a few ranks below
the top, next to values at B, so the smooth sensitivity is of the order of B and the noise
scale S/a many times B; with β_lt = 0.5 (no offset) r·τ ≤ 0 in about half the releases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import Budget, BudgetLedger, ParameterError, pak_release
from mechanisms.pak import MIN_THRESHOLD, mechanism_threshold
from mechanisms.pak._final_sums import pak_final_sums

BOUND, EPS, DELTA, M = 10.0, 1.0, 1e-6, 400
LOCAL = {"lam": 0.5, "p": 0.05, "beta_lt": 0.5, "r": 1.0, "eps1_share": 0.5}


def small_threshold_stream() -> np.ndarray:
    """m prefix values at 1 but the top 5 at B, then 4,000 suffix values at 5 (sum 20,000)."""
    prefix = np.ones(M)
    prefix[-5:] = BOUND
    return np.concatenate([prefix, np.full(4_000, 5.0)])


def release(seed: int, **kw):
    return pak_release(small_threshold_stream(), bound=BOUND, epsilon=EPS, delta=DELTA,
                       time_lag=M, seed=seed, counter="binary_tree", **LOCAL, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def fired_seed() -> int:
    """A seed whose released r·τ is ≤ 0 (the guard fires)."""
    for seed in range(40):
        if release(seed).threshold_release.unclipped <= 0.0:
            return seed
    raise AssertionError("no seed in 0..39 released r·τ ≤ 0: the set-up lost its purpose")


def test_mechanism_threshold_rules():
    got = mechanism_threshold([-5.0, 0.0, 1e-12, 2.5, 10.0, 99.0], BOUND)
    np.testing.assert_array_equal(got, [BOUND, BOUND, BOUND, 2.5, BOUND, BOUND])
    paper = mechanism_threshold([-5.0, 0.0, 2.5, 99.0], BOUND, guard=False)
    np.testing.assert_array_equal(paper, [BOUND * MIN_THRESHOLD] * 2 + [2.5, BOUND])
    assert mechanism_threshold(3.0, BOUND).shape == ()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"guard": 1}, "'guard' parameter of mechanism_threshold must be a bool"),
        ({"bound": 0.0}, "'bound' parameter of mechanism_threshold"),
        ({"unclipped": [1.0, math.nan]}, "'unclipped' parameter of mechanism_threshold"),
    ],
)
def test_mechanism_threshold_validates(kwargs, match):
    args = {"unclipped": [1.0], "bound": BOUND, **kwargs}
    with pytest.raises(ParameterError, match=match):
        mechanism_threshold(args.pop("unclipped"), args.pop("bound"), **args)


def test_pak_release_guard_is_validated_before_any_charge():
    ledger = BudgetLedger(Budget(10.0, 1e-3))
    with pytest.raises(ParameterError, match="'guard' parameter of pak_release must be a bool"):
        pak_release(small_threshold_stream(), bound=BOUND, epsilon=EPS, delta=DELTA,
                    time_lag=M, seed=0, ledger=ledger, guard="yes")  # fmt: skip
    assert ledger.remaining_epsilon == 10.0 and not ledger.charges


def test_guard_runs_the_release_at_b_where_the_threshold_is_at_most_0(fired_seed):
    guarded = release(fired_seed)
    paper = release(fired_seed, guard=False)
    # the same draw of τ; the guard only changes what is done with it
    assert guarded.threshold_release.unclipped == paper.threshold_release.unclipped <= 0.0
    assert guarded.threshold_fallback and not paper.threshold_fallback
    assert guarded.threshold == BOUND and paper.threshold == BOUND * MIN_THRESHOLD
    assert guarded.privacy.parameters["guard"] is True
    assert paper.privacy.parameters["guard"] is False
    # unguarded every suffix value is clipped to ~0: the total loses the suffix's whole sum;
    # guarded nothing is clipped (all values ≤ B) and the error is the noise at bound B
    truth = float(small_threshold_stream().sum())
    assert paper.prefix_sums[-1] - truth == pytest.approx(-(truth - 0.0), rel=0.05)
    noise_sd = math.sqrt(float(guarded.variance[-1]))
    assert abs(guarded.prefix_sums[-1] - truth) < 6.0 * noise_sd < truth
    # the variance stated is that of the noise at the threshold used
    assert guarded.variance[-1] > 1e6 * paper.variance[-1]


def test_guard_changes_nothing_when_the_threshold_is_positive():
    for seed in range(40):
        guarded = release(seed)
        if guarded.threshold_release.unclipped > 0.0:
            paper = release(seed, guard=False)
            np.testing.assert_array_equal(guarded.prefix_sums, paper.prefix_sums)
            assert guarded.threshold == paper.threshold and not guarded.threshold_fallback
            return
    raise AssertionError("no seed in 0..39 released r·τ > 0")


def test_budget_is_unchanged_by_the_guard(fired_seed):
    spent = []
    for guard in (True, False):
        ledger = BudgetLedger(Budget(10.0, 1e-3))
        pak_release(small_threshold_stream(), bound=BOUND, epsilon=EPS, delta=DELTA,
                    time_lag=M, seed=fired_seed, ledger=ledger, guard=guard,
                    counter="binary_tree", **LOCAL)  # fmt: skip
        spent.append((10.0 - ledger.remaining_epsilon, 1e-3 - ledger.remaining_delta))
    assert spent[0] == spent[1] == pytest.approx((EPS, DELTA))


def test_final_sums_follow_the_guard():
    x = small_threshold_stream()
    kw = {"bound": BOUND, "epsilon": EPS, "delta": DELTA, "time_lag": M, "repetitions": 60}
    _, guarded = pak_final_sums(x, seed=4, **kw, **LOCAL)
    _, paper = pak_final_sums(x, seed=4, **kw, **LOCAL, guard=False)
    tiny = BOUND * MIN_THRESHOLD
    assert np.any(paper == tiny) and not np.any(guarded == tiny)
    np.testing.assert_array_equal(guarded[paper != tiny], paper[paper != tiny])
    assert np.all(guarded[paper == tiny] == BOUND)
