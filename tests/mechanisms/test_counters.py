"""The counting family: one interface, exact variances, the BLT factorisation, ``counter=`` in
Mechanism 1 and in the planner (issue 14)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import (
    COUNTERS,
    KaryTreeCounter,
    ParameterError,
    SmoothBinaryCounter,
    best_counter,
    bit_source,
    counter_variance,
    kary_tree_release,
    pak_release,
    smooth_binary_release,
)
from mechanisms.counting import (
    counter_release,
    smooth_binary_shape,
    zcdp_rho,
    zcdp_to_epsilon,
)
from mechanisms.counting._smooth import smooth_binary_noise


def _empirical_variance(counter: str, n: int, runs: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).integers(0, 5, size=n) / 4.0
    truth = np.cumsum(x)
    bits = bit_source(seed)
    err = np.empty((runs, n))
    for r in range(runs):
        rel = counter_release(x, counter=counter, epsilon=1.0, delta=1e-6, bound=1.0, bits=bits)
        err[r] = rel.prefix_sums - truth
    return (err**2).mean(axis=0)


@settings(max_examples=3, derandomize=True)
@given(st.sampled_from(COUNTERS), st.integers(2, 40))
def test_stated_variance_matches_the_empirical_one(counter, n):
    stated = counter_variance(counter, n, epsilon=1.0, bound=1.0, delta=1e-6)
    emp = _empirical_variance(counter, n, runs=3000, seed=n)
    ratio = emp / stated
    assert 0.88 < ratio.mean() < 1.12
    # power: a variance off by 30% is rejected
    assert not 0.88 < (emp / (1.3 * stated)).mean() < 1.12


@pytest.mark.parametrize("counter", COUNTERS)
def test_every_counter_matches_its_variance_at_n_33(counter):
    stated = counter_variance(counter, 33, epsilon=1.0, bound=1.0, delta=1e-6)
    emp = _empirical_variance(counter, 33, runs=3000, seed=5)
    assert 0.88 < (emp / stated).mean() < 1.12


def test_smooth_binary_shape_minimises_k_times_h():
    for n in (1, 2, 5, 100, 10**4, 10**6):
        h, k = smooth_binary_shape(n)
        assert math.comb(h, k) >= n
        for hh in range(1, 40):
            for kk in range(1, hh + 1):
                if math.comb(hh, kk) >= n:
                    assert kk * hh >= k * h


def test_smooth_binary_leaves_and_nodes():
    n = 3000
    x = np.random.default_rng(4).integers(0, 5, size=n) / 4.0
    rel = smooth_binary_release(x, epsilon=1.0, delta=1e-6, bound=1.0, seed=2)
    p = rel.leaves
    assert np.all(np.diff(p) > 0) and p[-1] < 2**rel.height
    assert np.all(np.bitwise_count(p) == rel.bits)
    # every released node's true part is the sum of the steps whose leaf it covers
    end = rel.node_ends << rel.node_levels
    start = end - (np.int64(1) << rel.node_levels)
    s = np.concatenate([[0.0], np.cumsum(x)])
    truth = s[np.searchsorted(p, end, side="right")] - s[np.searchsorted(p, start, side="right")]
    resid = rel.node_values - truth
    assert abs(resid.var() / rel.noise.variance - 1.0) < 0.1
    assert np.all(
        np.abs(resid / rel.noise.granularity - np.rint(resid / rel.noise.granularity)) < 1e-6
    )
    # each step's leaf lies in at most H released nodes (one per level): the sensitivity
    for t in (0, n // 2, n - 1):
        q = int(p[t])
        inside = (start < q) & (q <= end)
        assert np.unique(rel.node_levels[inside]).size == inside.sum() <= rel.height


def test_zcdp_conversion_helpers():
    rho = zcdp_rho(1.0, 2.0**-20)
    assert zcdp_to_epsilon(rho, 2.0**-20) <= 1.0
    assert zcdp_to_epsilon(rho * 1.001, 2.0**-20) > 1.0


def test_smooth_binary_is_calibrated_by_the_analytic_gaussian():
    # issue 27 §3: σ from [BW18] Thm. 8 at (ε, δ) for the node vector's L2 sensitivity, not the
    # zCDP conversion ([BS16] Prop. 1.3), which needs a larger σ
    from mechanisms.core._noise import _gaussian_delta

    noise, sens, r, h, k = smooth_binary_noise(1000, epsilon=1.0, delta=2.0**-20, bound=3.0)
    assert sens >= 3.0 * math.sqrt(h)
    assert _gaussian_delta(1.0, noise.sigma / sens) <= 2.0**-20
    assert _gaussian_delta(1.0, noise.sigma / sens * 0.999) > 2.0**-20  # the smallest σ
    zcdp_sigma = sens / math.sqrt(2.0 * zcdp_rho(1.0, 2.0**-20))
    assert noise.sigma < 0.85 * zcdp_sigma
    assert sens**2 / (2.0 * noise.sigma**2) == pytest.approx(r, rel=1e-12)  # the zCDP it gives
    rel = smooth_binary_release(np.ones(1000), epsilon=1.0, delta=2.0**-20, bound=3.0, seed=1)
    assert rel.guarantee.budget.epsilon == 1.0 and rel.guarantee.budget.delta == 2.0**-20


@pytest.mark.parametrize("n", [1, 5, 700, 70_000])
def test_kary_streaming_equals_batch_with_a_seed(n):
    x = np.random.default_rng(n).uniform(0, 2, n)
    ref = kary_tree_release(x, epsilon=0.5, bound=2.0, seed=9)
    counter = KaryTreeCounter(n, epsilon=0.5, bound=2.0, seed=9)
    out = np.array([counter.push(v) for v in x])
    assert np.array_equal(out, ref.prefix_sums)
    assert counter.variance() == pytest.approx(ref.variance[-1])


def test_kary_digits_cover_each_prefix_exactly():
    from mechanisms.counting._kary import _digits, kary_levels

    for k in (3, 5, 7):
        n = 400
        levels = kary_levels(n, k)
        digits = _digits(np.arange(1, n + 1), k, levels)
        for t in range(1, n + 1):
            cover = np.zeros(n + k**levels, dtype=int)
            pos = 0
            for h in reversed(range(levels)):
                d, size = int(digits[h, t - 1]), k**h
                assert abs(d) <= (k - 1) // 2 and pos % size == 0
                lo, hi = (pos, pos + d * size) if d >= 0 else (pos + d * size, pos)
                assert lo >= 0
                cover[lo:hi] += 1 if d > 0 else -1
                pos += d * size
            assert pos == t
            assert np.array_equal(cover[:t], np.ones(t)) and not cover[t:].any()


def test_kary_least_squares_matches_its_variance_and_is_unbiased():
    n = 200
    x = np.random.default_rng(8).uniform(0, 1, n)
    bits = bit_source(8)
    err = np.array(
        [
            counter_release(
                x, counter="kary_tree_consistent", epsilon=1.0, bound=1.0, bits=bits
            ).prefix_sums
            - np.cumsum(x)
            for _ in range(3000)
        ]
    )
    stated = counter_variance("kary_tree_consistent", n, epsilon=1.0, bound=1.0)
    ratio = (err**2).mean(axis=0) / stated
    assert 0.9 < ratio.mean() < 1.1
    assert np.abs(err.mean(axis=0)).max() < 4.0 * math.sqrt(stated.max() / 3000)


def test_kary_fanout_validation():
    with pytest.raises(ParameterError, match="'fanout' parameter of kary_tree_release"):
        kary_tree_release(np.ones(10), epsilon=1.0, bound=1.0, fanout=4)


def test_range_variance_kary_is_exact():
    runs, n, (i, j) = 3000, 40, (7, 29)
    bits = bit_source(3)
    diffs = []
    for _ in range(runs):
        rel = counter_release(np.zeros(n), counter="kary_tree", epsilon=1.0, bound=1.0, bits=bits)
        diffs.append(rel.prefix_sums[j] - rel.prefix_sums[i - 1])
    assert 0.9 < np.var(diffs) / rel.range_variance(i, j) < 1.1


@pytest.mark.parametrize("n", [1, 5, 700, 70_000])
def test_smooth_binary_streaming_equals_batch_with_a_seed(n):
    x = np.random.default_rng(n).uniform(0, 2, n)
    ref = smooth_binary_release(x, epsilon=0.5, delta=1e-6, bound=2.0, seed=9)
    counter = SmoothBinaryCounter(n, epsilon=0.5, delta=1e-6, bound=2.0, seed=9)
    out = np.array([counter.push(v) for v in x])
    assert np.array_equal(out, ref.prefix_sums)
    assert counter.variance() == pytest.approx(ref.variance[-1])


def test_best_counter_follows_delta_and_the_variances():
    from mechanisms import counter_end_variance

    v_bt = counter_variance("binary_tree", 4095, epsilon=1.0, bound=1.0)
    v_sm = counter_variance("smooth_binary", 4095, epsilon=1.0, bound=1.0, delta=1e-3)
    assert v_sm.max() < v_bt.max()  # smooth: the same error everywhere
    assert np.all(v_sm == v_sm[0])
    # pure ε: the k-ary tree with negative digits on average ([APT24]: ~4x below Honaker's)
    # and its least-squares estimate below that
    assert best_counter(4095, epsilon=1.0, bound=1.0, at="mean") == "kary_tree_consistent"
    v_k = counter_variance("kary_tree", 4095, epsilon=1.0, bound=1.0)
    v_on = counter_variance("binary_tree_online", 4095, epsilon=1.0, bound=1.0)
    v_ls = counter_variance("kary_tree_consistent", 4095, epsilon=1.0, bound=1.0)
    assert v_k.mean() < v_on.mean() / 3.0
    assert v_ls.mean() < 0.8 * v_k.mean()
    # at a power of two the BT's last prefix is a single node: the LS estimate wins there
    assert best_counter(4096, epsilon=1.0, bound=1.0) == "binary_tree_consistent"
    # only counters valid at δ compete: with δ = 0 the Gaussian one never does
    assert best_counter(3, epsilon=1.0, bound=1.0) != "smooth_binary"
    # with a δ the Gaussian counters compete; the square root ([FHU23]) beats the smooth
    # binary mechanism ([AP23]) by ~5x at n = 10^4 (bench/bench_factorisation.py)
    assert best_counter(10**4, epsilon=1.0, bound=1.0, delta=0.3) == "sqrt_factorisation"
    assert counter_end_variance(
        "sqrt_factorisation", 10**4, epsilon=1.0, bound=1.0, delta=0.3
    ) < counter_end_variance("smooth_binary", 10**4, epsilon=1.0, bound=1.0, delta=0.3)


def test_counter_validation_names_the_rule():
    with pytest.raises(ParameterError, match="'counter' parameter of counter_variance"):
        counter_variance("fenwick", 10, epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="needs a 'delta'"):
        counter_variance("smooth_binary", 10, epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="'counter' parameter of pak_release"):
        pak_release(
            np.ones(100),
            bound=1.0,
            epsilon=1.0,
            delta=0.0,
            time_lag=50,
            threshold=False,
            counter="smooth_binary",
        )


def test_pak_release_through_each_counter():
    x = np.random.default_rng(3).uniform(0, 10, 6000)
    base = pak_release(
        x, bound=10.0, epsilon=1.0, delta=1e-6, time_lag=2000, seed=4, counter="binary_tree"
    )
    for counter in COUNTERS:
        rel = pak_release(
            x, bound=10.0, epsilon=1.0, delta=1e-6, time_lag=2000, seed=4, counter=counter
        )
        assert rel.counter.counter == counter
        assert rel.threshold == base.threshold  # the prefix part draws the same bits first
        assert rel.guarantee.budget.epsilon <= 1.0 + 1e-12
        assert np.allclose(rel.variance[2000:], rel.prefix_noise.variance + rel.counter.variance)
        rs = rel.range_sum(2000, 2999)
        assert math.isfinite(rs.estimate) and rs.std_error > 0
    cons = pak_release(
        x,
        bound=10.0,
        epsilon=1.0,
        delta=1e-6,
        time_lag=2000,
        seed=4,
        counter="binary_tree_consistent",
    )
    # the same noisy nodes, a better estimate
    assert np.array_equal(cons.tree.nodes[0], base.tree.nodes[0])
    assert cons.variance[-1] < base.variance[-1]
    auto = pak_release(
        x, bound=10.0, epsilon=1.0, delta=1e-6, time_lag=2000, seed=4, counter="auto"
    )
    assert auto.counter.counter == best_counter(4000, epsilon=1.0, bound=1.0, delta=1e-6)


def test_range_variance_smooth_binary_is_exact():
    runs, n, (i, j) = 3000, 40, (7, 29)
    bits = bit_source(3)
    x = np.zeros(n)
    diffs = []
    for _ in range(runs):
        rel = counter_release(
            x, counter="smooth_binary", epsilon=1.0, delta=1e-6, bound=1.0, bits=bits
        )
        diffs.append(rel.prefix_sums[j] - rel.prefix_sums[i - 1])
    stated = rel.range_variance(i, j)
    assert 0.9 < np.var(diffs) / stated < 1.1


def test_planner_follows_the_counter():
    from planner import plan_pak

    x = np.random.default_rng(6).exponential(2.0, 20000).clip(0, 50)
    kw = dict(n=200_000, bound=50.0, epsilon=1.0, delta=2.0**-20, beta=0.02)
    paper = plan_pak(x, counter=None, **kw)
    tree = plan_pak(x, counter="binary_tree", **kw)
    cons = plan_pak(x, counter="binary_tree_consistent", **kw)
    smooth = plan_pak(x, counter="smooth_binary", **kw)
    assert paper.counter is None and smooth.counter == "smooth_binary"
    assert tree.baseline_error_bound == paper.baseline_error_bound
    assert cons.improvement_factor > tree.improvement_factor
    # here the threshold does not pay (plain release of all n steps): the IF follows the
    # counters' exact variances at step n
    assert not smooth.use_threshold and not tree.use_threshold
    v_tree = counter_variance("binary_tree", 200_000, epsilon=1.0, bound=50.0)[-1]
    v_smooth = counter_variance("smooth_binary", 200_000, epsilon=1.0, bound=50.0, delta=2.0**-20)[
        -1
    ]
    assert smooth.improvement_factor / tree.improvement_factor == pytest.approx(
        math.sqrt(v_tree / v_smooth)
    )
    assert smooth.release_parameters()["counter"] == "smooth_binary"


def test_auto_counter_is_the_best_for_the_budget():
    x = np.ones(1000)
    pure = counter_release(x, counter="auto", epsilon=1.0, bound=1.0, bits=bit_source(1))
    assert pure.counter == best_counter(1000, epsilon=1.0, bound=1.0)
    assert pure.guarantee.budget.delta == 0.0
    approx = counter_release(
        x, counter="auto", epsilon=1.0, bound=1.0, delta=0.01, bits=bit_source(1)
    )
    assert approx.counter == best_counter(1000, epsilon=1.0, bound=1.0, delta=0.01)
    if approx.counter == "smooth_binary":
        assert approx.guarantee.budget.delta == 0.01


@pytest.mark.parametrize("n", [1, 2, 7, 1023, 4096, 50_001])
@pytest.mark.parametrize(("eps", "bound", "delta"), [(1.0, 1.0, 0.0), (0.3, 36.0, 2.0**-20)])
def test_counter_end_variance_is_the_last_exact_variance(n, eps, bound, delta):
    from mechanisms import counter_end_variance
    from mechanisms.counting._counters import _APPROXIMATE

    for name in COUNTERS + ("auto",):
        if name in _APPROXIMATE and delta == 0.0:  # the Gaussian counters need a δ
            continue
        full = counter_variance(name, n, epsilon=eps, bound=bound, delta=delta)
        end = counter_end_variance(name, n, epsilon=eps, bound=bound, delta=delta)
        assert end == full[-1]  # the same arithmetic, memoised units or not


def test_matrix_factorisation_counters_are_registered_and_continual():
    from mechanisms.counting._counters import _APPROXIMATE, _BATCH_ONLY

    for name in ("sqrt_factorisation", "blt"):
        assert name in COUNTERS and name in _APPROXIMATE and name not in _BATCH_ONLY
    # with a δ the Gaussian factorisations win (away from powers of two, where the BT's last
    # prefix is one node); pure ε never picks them
    for n in (1000, 10_000):
        best = best_counter(n, epsilon=1.0, bound=1.0, delta=1e-6, at="max", release="continual")
        assert best in ("sqrt_factorisation", "blt")
        assert best_counter(n, epsilon=1.0, bound=1.0) not in _APPROXIMATE
        assert best_counter(n, epsilon=1.0, bound=1.0, release="continual") not in (
            "binary_tree_consistent",
            "kary_tree_consistent",
        )
    # a stream longer than a factorisation's constants (2^26, 2^24 steps): the others compete
    from mechanisms.counting import _counters

    limits = {"sqrt_factorisation": 999, "blt": 999}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_counters, "_MAX_LENGTH", limits)
        best = best_counter(1000, epsilon=1.0, bound=1.0, delta=1e-6, at="max")
    assert best not in limits
    with pytest.raises(ParameterError, match="'at' parameter of best_counter"):
        best_counter(10, epsilon=1.0, bound=1.0, at="median")
    with pytest.raises(ParameterError, match="'release' parameter of best_counter"):
        best_counter(10, epsilon=1.0, bound=1.0, release="online")


@pytest.mark.parametrize("counter", ["sqrt_factorisation", "blt"])
def test_factorisation_range_variance_is_exact(counter):
    n, i, j = 64, 9, 40
    x = np.random.default_rng(3).uniform(0, 1, n)
    rel = counter_release(
        x, counter=counter, epsilon=1.0, bound=1.0, delta=1e-6, bits=bit_source(0)
    )
    assert rel.counter == counter
    from mechanisms import counter_end_variance

    assert rel.variance[-1] == pytest.approx(
        counter_end_variance(counter, n, epsilon=1.0, bound=1.0, delta=1e-6)
    )
    diffs = []
    for s in range(2000):
        r = counter_release(
            x, counter=counter, epsilon=1.0, bound=1.0, delta=1e-6, bits=bit_source(s)
        )
        diffs.append(r.prefix_sums[j] - (r.prefix_sums[i - 1] if i else 0.0))
    assert 0.88 < np.var(diffs) / rel.range_variance(i, j) < 1.12
    # the whole prefix is the range from 0
    assert rel.range_variance(0, n - 1) == pytest.approx(float(rel.variance[-1]), rel=1e-9)
