"""The Laplace baseline: per-value noise of scale B/ε, cumulated."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import (
    Budget,
    DomainError,
    EventLevel,
    LaplaceRelease,
    ParameterError,
    binary_tree_release,
    laplace_prefix_sums,
)


class RefusingBits:
    """A bit source that fails the test if any bits are drawn."""

    def random_raw(self, size: int) -> np.ndarray:
        raise AssertionError("bits were drawn")

    def spawn(self, n_children: int) -> list:
        raise AssertionError("spawn was called")


class ConstantBits:
    """Zero-noise probe: both geometric draws of every discrete Laplace are equal, so K = 0."""

    def random_raw(self, size: int) -> np.ndarray:
        # Equal words give equal geometric draws G1 = G2 (here both 0), so K = 0.
        return np.full(int(size), 0xFFFF_FFFF_FFFF_F800, dtype=np.uint64)

    def spawn(self, n_children: int) -> list:
        return [ConstantBits() for _ in range(n_children)]


def test_zero_noise_probe_gives_the_exact_cumulative_sum():
    xs = [3.0, 0.0, 1.0, 4.0]
    rel = laplace_prefix_sums(xs, epsilon=1.0, bound=4.0, seed=ConstantBits())
    np.testing.assert_array_equal(rel.values, xs)
    np.testing.assert_array_equal(rel.prefix_sums, [3.0, 3.0, 4.0, 8.0])


def test_scale_variance_and_guarantee():
    rel = laplace_prefix_sums(np.ones(10), epsilon=0.5, bound=2.0, seed=1)
    assert isinstance(rel, LaplaceRelease)
    assert rel.scale == rel.noise.scale == (2.0 + rel.noise.granularity) / 0.5
    np.testing.assert_array_equal(rel.variance, np.arange(1, 11) * rel.noise.variance)
    np.testing.assert_array_equal(rel.prefix_sums, np.cumsum(rel.values))
    assert rel.guarantee.unit == EventLevel() and rel.guarantee.budget == Budget(0.5)
    assert rel.range_sum(2, 5) == rel.prefix_sums[5] - rel.prefix_sums[1]
    assert rel.range_sum(0, 0) == rel.prefix_sums[0]
    with pytest.raises(ParameterError):
        rel.range_sum(3, 2)
    with pytest.raises(ValueError):
        rel.prefix_sums[0] = 1.0


def test_seeded_release_is_reproducible_and_seeds_differ():
    a = laplace_prefix_sums(np.ones(5), epsilon=1.0, bound=1.0, seed=4).prefix_sums
    b = laplace_prefix_sums(np.ones(5), epsilon=1.0, bound=1.0, seed=4).prefix_sums
    c = laplace_prefix_sums(np.ones(5), epsilon=1.0, bound=1.0, seed=5).prefix_sums
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bt_beats_laplace_on_long_streams_and_not_on_short_ones():
    long_bt = binary_tree_release(np.zeros(10_000), epsilon=1.0, bound=1.0, seed=0)
    long_lap = laplace_prefix_sums(np.zeros(10_000), epsilon=1.0, bound=1.0, seed=0)
    assert long_bt.variance[-1] < long_lap.variance[-1] / 10
    short_bt = binary_tree_release(np.zeros(4), epsilon=1.0, bound=1.0, seed=0)
    short_lap = laplace_prefix_sums(np.zeros(4), epsilon=1.0, bound=1.0, seed=0)
    assert short_bt.variance[0] > short_lap.variance[0]


@pytest.mark.statistical
def test_final_sum_error_matches_stated_variance():
    n, runs = 100, 2000
    xs = np.random.default_rng(2).uniform(0.0, 1.0, n)
    truth = laplace_prefix_sums(xs, epsilon=1.0, bound=1.0, seed=ConstantBits()).prefix_sums[-1]
    seeds = np.random.SeedSequence(99).spawn(runs)
    rels = [laplace_prefix_sums(xs, epsilon=1.0, bound=1.0, seed=s) for s in seeds]
    errors = np.array([r.prefix_sums[-1] for r in rels]) - truth
    stated = rels[0].variance[-1]
    se = stated * math.sqrt((2.0 + 3.0 / n) / runs)  # excess kurtosis of a sum of n Laplace
    assert abs(np.mean(errors**2) - stated) < 4 * se
    assert abs(np.mean(errors**2) - 1.3 * stated) > 4 * se  # the test has power
    assert abs(np.mean(errors)) < 4 * math.sqrt(stated / runs)


@pytest.mark.parametrize(
    ("values", "eps", "bound", "error"),
    [
        ([1.0, math.nan], 1.0, 1.0, DomainError),
        ([math.inf], 1.0, 1.0, DomainError),
        ([-0.5], 1.0, 1.0, DomainError),
        ([1.5], 1.0, 1.0, DomainError),
        ([], 1.0, 1.0, DomainError),
        ([0.5], 0.0, 1.0, ParameterError),
        ([0.5], -1.0, 1.0, ParameterError),
        ([0.5], 1.0, 0.0, ParameterError),
        ([0.5], 1.0, math.nan, ParameterError),
    ],
)
def test_bad_input_raises_before_any_bits_are_drawn(values, eps, bound, error):
    with pytest.raises(error):
        laplace_prefix_sums(values, epsilon=eps, bound=bound, seed=RefusingBits())


def test_the_refusing_probe_does_refuse():
    with pytest.raises(AssertionError, match="bits were drawn"):
        laplace_prefix_sums([0.5], epsilon=1.0, bound=1.0, seed=RefusingBits())
