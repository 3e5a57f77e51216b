"""Range sums of L steps: the counters' mean range variance and PAK planned for it (issue 23)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError, counter_variance, pak_release
from mechanisms.core._random import bit_source
from mechanisms.counting._counters import counter_release
from planner import pak_forward, pak_rmse_quantile, plan_pak_mse
from planner._pak_range import (
    RANGE_COUNTERS,
    best_range_counter,
    counter_range_variance,
    range_starts,
)

DELTA = 1e-6


def _simulated(counter: str, n: int, length: int, first: int, reps: int) -> float:
    """Monte Carlo of the counter's noise: mean squared range error over the public ranges."""
    starts = range_starts(first, n, length, queries=50)
    seeds = np.random.SeedSequence(23).spawn(reps)
    total = 0.0
    for seq in seeds:
        rel = counter_release(
            np.zeros(n), counter=counter, epsilon=1.0, bound=1.0, bits=bit_source(seq),
            delta=DELTA,
        )  # fmt: skip
        c = np.concatenate(([0.0], rel.prefix_sums))
        total += float(np.mean((c[starts + length] - c[starts]) ** 2))
    return total / reps


@pytest.mark.parametrize("counter", ["binary_tree", "kary_tree", "sqrt_factorisation"])
def test_mean_range_variance_matches_monte_carlo_of_the_noise(counter):
    """The position-averaged variance is that of the counter's simulated noise (400 runs: a
    ±7 % window is > 4 standard errors of the mean square), and differs by more than that
    window from the sum of the two prefixes' variances (the ranges' noise is correlated:
    the test can tell the exact covariance from ignoring it)."""
    n, length, first = 256, 24, 40
    predicted = counter_range_variance(
        counter, n, length, epsilon=1.0, bound=1.0, delta=DELTA, first=first, queries=50
    )
    simulated = _simulated(counter, n, length, first, reps=400)
    assert simulated == pytest.approx(predicted, rel=0.07)
    var = np.concatenate(([0.0], counter_variance(counter, n, epsilon=1.0, bound=1.0, delta=DELTA)))
    starts = range_starts(first, n, length, queries=50)
    assert float(np.mean(var[starts + length] + var[starts])) > 1.3 * predicted


@pytest.mark.parametrize("counter", ["sqrt_factorisation", "blt", "unbounded_blt"])
def test_vectorised_factorisation_ranges_equal_each_range(counter):
    """The factorisations' closed form equals CounterRelease.range_variance range by range,
    at another ε and bound than the memoised ratio's (the ratio does not depend on them)."""
    n, length, first = 700, 33, 5
    got = counter_range_variance(
        counter, n, length, epsilon=0.3, bound=7.0, delta=DELTA, first=first, queries=40
    )
    rel = counter_release(
        np.zeros(n), counter=counter, epsilon=0.3, bound=7.0, bits=bit_source(1), delta=DELTA
    )
    each = [
        rel.range_variance(int(a), int(a) + length - 1) for a in range_starts(first, n, length, 40)
    ]
    assert got == pytest.approx(float(np.mean(each)), rel=1e-9)


def test_range_inputs_are_checked():
    with pytest.raises(ParameterError, match="'counter' parameter"):
        counter_range_variance("binary_tree_consistent", 100, 10, epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="'range_length' parameter"):
        counter_range_variance("binary_tree", 100, 95, epsilon=1.0, bound=1.0, first=10)
    with pytest.raises(ParameterError, match="No range"):
        range_starts(10, 100, 95)
    assert best_range_counter(4096, 64, epsilon=1.0, delta=0.0) in ("binary_tree", "kary_tree")
    assert best_range_counter(4096, 64, epsilon=1.0, delta=DELTA) in RANGE_COUNTERS


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(5)
    return np.minimum(rng.exponential(5.0, 6_000), 100.0)


@pytest.mark.statistical
def test_range_plan_predicts_its_releases(stream):
    """plan_pak_mse(range_length=L): the RMSE over the plan's public ranges of 20 seeded
    releases is within ±15 % of the prediction (over 200 ranges and 20 releases the sampling
    error is a few %), and c(σ, m)'s Laplace noise is out of the range error."""
    m, length, n = 1500, 100, stream.size
    plan = plan_pak_mse(stream[:m], n=n, bound=100.0, epsilon=1.0, delta=DELTA,
                        range_length=length, queries=200)  # fmt: skip
    assert plan.quantity == f"range sum of {length} steps" and plan.counter in RANGE_COUNTERS
    assert plan.rmse == pytest.approx(min(plan.threshold_rmse, plan.plain_rmse))
    starts = m + range_starts(0, n - m, length, 200)
    sums = np.concatenate(([0.0], np.cumsum(stream)))
    truth = sums[starts + length] - sums[starts]
    mse = []
    for seed in range(20):
        rel = pak_release(stream, bound=100.0, epsilon=1.0, delta=DELTA, time_lag=m, seed=seed,
                          **plan.release_parameters())  # fmt: skip
        c = np.concatenate(([0.0], rel.prefix_sums))
        mse.append(np.mean((c[starts + length] - c[starts] - truth) ** 2))
    realised = math.sqrt(float(np.mean(mse)))
    assert realised == pytest.approx(plan.rmse, rel=0.15)
    total = plan_pak_mse(stream[:m], n=n, bound=100.0, epsilon=1.0, delta=DELTA,
                         counter=plan.counter)  # fmt: skip
    assert total.quantity == f"c(σ, {n})" and total.range_length is None


def test_pak_forward_ranges_and_prefix_sums(stream):
    """With horizon = n: L <= n − m plans range sums; L > n − m is the prefix sum c(σ, L) of
    before (the same numbers as without horizon); --releases is refused for range sums before
    any planning."""
    m, n, x = 1500, stream.size, stream[:1500]
    common = {"bound": 100.0, "delta": DELTA, "epsilon": 1.0}
    ranges = pak_forward(x, range_length=100, horizon=n, queries=100, **common)
    assert ranges.parameters["quantity"] == "range sum of 100 steps"
    assert ranges.parameters["range_length"] == 100 and ranges.metric == "rmse"
    long = pak_forward(x, range_length=n - 1000, horizon=n, **common)
    legacy = pak_forward(x, range_length=n - 1000, **common)
    assert long.predicted == legacy.predicted
    assert long.parameters["quantity"] == f"c(σ, {n - 1000})"
    with pytest.raises(ParameterError, match="'releases' parameter of pak_forward"):
        pak_forward(x, range_length=100, horizon=n, releases=30, **common)
    with pytest.raises(ParameterError, match="'range_length' parameter of pak_forward"):
        pak_forward(x, range_length=n + 1, horizon=n, **common)
    plan = plan_pak_mse(x, n=n, bound=100.0, epsilon=1.0, delta=DELTA, range_length=100,
                        queries=100)  # fmt: skip
    with pytest.raises(ParameterError, match="'plan' argument of pak_rmse_quantile"):
        pak_rmse_quantile(x, plan, releases=30, confidence=0.9)
    with pytest.raises(ParameterError, match="'counter' parameter of plan_pak_mse"):
        plan_pak_mse(x, n=n, bound=100.0, epsilon=1.0, delta=DELTA, range_length=100,
                     counter="binary_tree_consistent")  # fmt: skip
    assert m == x.size
