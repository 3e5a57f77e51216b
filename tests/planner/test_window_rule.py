"""The w-event window rule across two differently planned periods (:func:`planner.window_budget`)
against a brute-force oracle on arbitrary sample positions (issue 29: mutation target
``window_rule``): the budget returned keeps every window within the total and is the largest
that does (to the documented 10⁻¹² margin)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from planner._stream_plan import window_budget


def _worst_window(prev_pos, prev_cost, pos, budget, r) -> Fraction:
    """Largest cost of a window of r steps starting at step s of the previous period (s = 0:
    the previous period alone; s = r: the next alone), exactly."""
    k = len(pos)
    worst = Fraction(0)
    for s in range(0, r + 1):
        tail = sum(1 for j in prev_pos if j >= s)
        head = sum(1 for j in pos if j < s)
        cost = Fraction(prev_cost) * tail + (Fraction(budget) / k * head if k else 0)
        worst = max(worst, cost)
    return worst


def _cases(n: int, seed: int):
    rng = np.random.default_rng(seed)  # arbitrary positions: no release, a test oracle
    for _ in range(n):
        r = int(rng.integers(2, 30))
        k_prev, k = int(rng.integers(1, r + 1)), int(rng.integers(1, r + 1))
        prev = np.sort(rng.choice(r, k_prev, replace=False))
        pos = np.sort(rng.choice(r, k, replace=False))
        total = float(rng.choice([0.1, 1.0, 2.5]))
        prev_budget = total * float(rng.uniform(0.2, 1.0))
        yield r, prev, prev_budget / k_prev, pos, total


@pytest.mark.parametrize("seed", range(3))
def test_the_budget_keeps_every_window_within_the_total_and_is_the_largest(seed):
    for r, prev, prev_cost, pos, total in _cases(60, seed):
        budget = window_budget((prev, prev_cost), pos, total)
        assert 0.0 <= budget <= total
        assert _worst_window(prev, prev_cost, pos, budget, r) <= Fraction(total)
        if budget < total * (1 - 1e-11):  # limited by a straddling window: tight
            assert _worst_window(prev, prev_cost, pos, budget * (1 + 1e-9), r) > Fraction(total)


def test_no_previous_period_gives_the_total():
    assert window_budget(None, np.array([0, 3]), 0.7) == 0.7


def test_same_positions_and_cost_keep_the_total_up_to_the_margin():
    pos = np.array([0, 4, 8])
    budget = window_budget((pos, 1.0 / 3), pos, 1.0)
    assert 1.0 - 2e-12 < budget < 1.0


def test_a_previous_period_that_spent_everything_late_leaves_nothing_early():
    # previous samples at the end cost the whole total: a window starting there has no room
    # for the next period's first sample, so the next period can spend nothing
    budget = window_budget((np.array([9]), 1.0), np.array([0, 5]), 1.0)
    assert budget == 0.0


def test_the_straddling_window_decides_by_hand():
    # previous: samples at 6 and 8 at 0.4 each; next: samples at 0 and 8.
    # window from s = 7: previous {8} costs 0.4, next {0} costs b/2 -> b <= 1.2
    # window from s = 1..6: previous {6, 8} costs 0.8, next {0} costs b/2 -> b <= 0.4
    budget = window_budget((np.array([6, 8]), 0.4), np.array([0, 8]), 1.0)
    assert budget == pytest.approx(0.4, rel=1e-11)
    assert budget < 0.4


def _worst_window_costs(prev_pos, costs, pos, budget, r) -> Fraction:
    """As :func:`_worst_window` with one cost per earlier sample."""
    k = len(pos)
    worst = Fraction(0)
    for s in range(0, r + 1):
        spent = sum(
            (Fraction(c) for j, c in zip(prev_pos, costs, strict=True) if j >= s), Fraction(0)
        )
        head = sum(1 for j in pos if j < s)
        worst = max(worst, spent + (Fraction(budget) / k * head if k else 0))
    return worst


@pytest.mark.parametrize("seed", range(2))
def test_unsorted_lists_and_one_cost_per_earlier_sample(seed):
    """Positions in any order, as lists, and costs per sample (samples of several earlier
    periods): the same rule, the costs following their positions through the sort."""
    rng = np.random.default_rng(100 + seed)  # test oracle inputs
    for _ in range(40):
        r = int(rng.integers(3, 25))
        prev = rng.choice(r, int(rng.integers(1, r + 1)), replace=False)  # unsorted
        costs = rng.uniform(0.0, 1.0, prev.size)
        costs *= rng.uniform(0.2, 0.9) / costs.sum()  # the earlier samples alone fit the total
        pos = rng.choice(r, int(rng.integers(1, r + 1)), replace=False)
        total = 1.0
        budget = window_budget((prev.tolist(), costs.tolist()), pos.tolist(), total)
        assert budget == window_budget((prev, costs), pos, total)
        assert _worst_window_costs(prev, costs, pos, budget, r) <= Fraction(total)
        if 0 < budget < total * (1 - 1e-11):
            assert _worst_window_costs(prev, costs, pos, budget * (1 + 1e-9), r) > Fraction(total)
        shuffled = rng.permutation(prev.size)
        scalar = window_budget((prev[shuffled].tolist(), 0.1), pos[::-1].tolist(), total)
        assert scalar == window_budget((np.sort(prev), 0.1), np.sort(pos), total)
