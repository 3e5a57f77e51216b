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
    BltCounter,
    ParameterError,
    best_counter,
    bit_source,
    blt_release,
    counter_variance,
    pak_release,
)
from mechanisms.counting import (
    blt_factorization,
    counter_release,
    zcdp_rho,
    zcdp_to_epsilon,
)
from mechanisms.counting._blt import blt_noise


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


def test_blt_factorisation_is_exact_on_dense_matrices():
    n = 50
    fact = blt_factorization(n)
    c, ell = fact.coefficients(n)
    idx = np.subtract.outer(np.arange(n), np.arange(n))
    lower = idx >= 0
    L = np.where(lower, ell[np.clip(idx, 0, None)], 0.0)
    C = np.where(lower, c[np.clip(idx, 0, None)], 0.0)
    assert np.allclose(L @ C, np.tril(np.ones((n, n))), atol=1e-9)
    # sensitivity: the largest column norm of C is the first column's, ‖c‖₂
    assert np.linalg.norm(C, axis=0).max() == pytest.approx(fact.sensitivity_units(n))
    assert np.argmax(np.linalg.norm(C, axis=0)) == 0
    # variance: the squared row norms of L
    assert np.allclose((L**2).sum(axis=1), fact.variance_units(n))


def test_blt_noise_calibration_and_zcdp_conversion():
    rho = zcdp_rho(1.0, 2.0**-20)
    assert zcdp_to_epsilon(rho, 2.0**-20) <= 1.0
    assert zcdp_to_epsilon(rho * 1.001, 2.0**-20) > 1.0
    fact = blt_factorization(1000)
    noise, sens, r = blt_noise(1000, epsilon=1.0, delta=2.0**-20, bound=3.0, factorization=fact)
    assert r == rho
    assert sens >= 3.0 * fact.sensitivity_units(1000)
    assert sens**2 / (2.0 * noise.sigma**2) == pytest.approx(rho, rel=1e-12)
    rel = blt_release(np.ones(1000), epsilon=1.0, delta=2.0**-20, bound=3.0, seed=1)
    assert rel.guarantee.budget.epsilon <= 1.0 and rel.guarantee.budget.delta == 2.0**-20


def test_blt_streaming_equals_batch_with_a_seed():
    x = np.random.default_rng(2).uniform(0, 2, 700)
    ref = blt_release(x, epsilon=0.5, delta=1e-6, bound=2.0, seed=9)
    counter = BltCounter(700, epsilon=0.5, delta=1e-6, bound=2.0, seed=9)
    out = np.array([counter.push(v) for v in x])
    assert np.array_equal(out, ref.prefix_sums)
    assert counter.variance() == pytest.approx(ref.variance[-1])


def test_blt_beats_the_tree_and_best_counter_follows_delta():
    v_bt = counter_variance("binary_tree", 4096, epsilon=1.0, bound=1.0)
    v_blt = counter_variance("blt", 4096, epsilon=1.0, bound=1.0, delta=2.0**-20)
    assert v_blt.max() < v_bt.max() and v_blt.mean() < v_bt.mean()
    assert best_counter(4095, epsilon=1.0, bound=1.0, delta=2.0**-20, at="mean") == "blt"
    assert best_counter(4096, epsilon=1.0, bound=1.0) in (
        "binary_tree_online",
        "binary_tree_consistent",
    )


def test_counter_validation_names_the_rule():
    with pytest.raises(ParameterError, match="'counter' parameter of counter_variance"):
        counter_variance("fenwick", 10, epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="needs a 'delta'"):
        counter_variance("blt", 10, epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="'counter' parameter of pak_release"):
        pak_release(
            np.ones(100),
            bound=1.0,
            epsilon=1.0,
            delta=0.0,
            time_lag=50,
            threshold=False,
            counter="blt",
        )


def test_pak_release_through_each_counter():
    x = np.random.default_rng(3).uniform(0, 10, 6000)
    base = pak_release(x, bound=10.0, epsilon=1.0, delta=1e-6, time_lag=2000, seed=4)
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
    assert auto.counter.counter == "blt"


def test_blt_range_variance_is_exact():
    rel = counter_release(
        np.zeros(64), counter="blt", epsilon=1.0, delta=1e-6, bound=1.0, bits=bit_source(1)
    )
    _, ell = rel.blt.factorization.coefficients(64)
    n = 64
    idx = np.subtract.outer(np.arange(n), np.arange(n))
    L = np.where(idx >= 0, ell[np.clip(idx, 0, None)], 0.0)
    i, j = 10, 40
    row = L[j] - L[i - 1]
    assert rel.range_variance(i, j) == pytest.approx(float(row @ row) * rel.blt.noise.variance)


def test_planner_follows_the_counter():
    from planner import plan_pak

    x = np.random.default_rng(6).exponential(2.0, 20000).clip(0, 50)
    kw = dict(n=200_000, bound=50.0, epsilon=1.0, delta=2.0**-20, beta=0.02)
    paper = plan_pak(x, **kw)
    tree = plan_pak(x, counter="binary_tree", **kw)
    cons = plan_pak(x, counter="binary_tree_consistent", **kw)
    blt = plan_pak(x, counter="blt", **kw)
    assert paper.counter is None and blt.counter == "blt"
    assert tree.baseline_error_bound == paper.baseline_error_bound
    assert blt.improvement_factor > cons.improvement_factor > tree.improvement_factor
    assert blt.release_parameters()["counter"] == "blt"
