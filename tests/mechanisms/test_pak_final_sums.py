"""pak_final_sums: Mechanism 1's final sum without building the tree, same distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mechanisms import pak_release
from mechanisms.pak._final_sums import pak_final_sums

PARAMS = {"bound": 10.0, "epsilon": 1.0, "delta": 1e-6, "time_lag": 2000}
BT = {"counter": "binary_tree"}  # pak_final_sums draws the paper's protocol (BT on the suffix)


def _stream(n=6000, seed=0):
    return np.minimum(np.random.default_rng(seed).exponential(1.5, n), 10.0)


class ZeroNoise:
    """Equal words: both geometrics of every discrete Laplace draw agree (K = 0)."""

    def random_raw(self, size):
        return np.full(int(size), 0xFFFF_FFFF_FFFF_F800, dtype=np.uint64)

    def spawn(self, n):
        return [ZeroNoise() for _ in range(n)]


def test_zero_noise_final_sum_equals_the_full_release_exactly():
    xs = _stream()
    rel = pak_release(xs, seed=ZeroNoise(), **PARAMS, **BT)
    finals, taus = pak_final_sums(xs, repetitions=3, seed=ZeroNoise(), **PARAMS)
    assert np.all(taus == rel.threshold)
    assert np.all(finals == rel.prefix_sums[-1])


@pytest.mark.statistical
def test_same_distribution_as_full_releases():
    xs = _stream(seed=1)
    full = np.array(
        [pak_release(xs, seed=1000 + i, **PARAMS, **BT).prefix_sums[-1] for i in range(300)]
    )
    fast, taus = pak_final_sums(xs, repetitions=3000, seed=7, **PARAMS)
    assert stats.ks_2samp(full, fast).pvalue > 1e-4
    # power: the same test tells a final sum with the tree noise halved apart
    truth = xs.sum()
    halved = truth + (fast - truth) * 0.5
    assert stats.ks_2samp(full, halved).pvalue < 1e-4
    assert taus.min() > 0 and taus.max() <= PARAMS["bound"]
