"""PAK's Mechanism 1 with an open suffix counter, ``counter="unbounded"`` (pure ε, [CSS11] §4
epochs of k-ary trees) or ``"unbounded_blt"`` (a time-invariant BLT, Gaussian at (ε, δ)): issue
27 item 5. The release is Mechanism 1's with the counter's prefix sums; its variances and range
standard errors are the open counter's exact ones at bound τ; a longer stream releases the same
prefix with the same bits; every draw comes from the bit source passed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits

from mechanisms import Budget, DomainError, ParameterError, pak_release
from mechanisms.counting import (
    OPEN_COUNTERS,
    best_counter,
    counter_end_variance,
    counter_variance,
    unbounded_blt_range_variance,
    unbounded_blt_release,
    unbounded_blt_variance,
    unbounded_kary_range_variance,
    unbounded_kary_release,
    unbounded_kary_variance,
)
from mechanisms.counting._counters import counter_release
from mechanisms.pak._mechanism1 import _suffix_release

B, EPS, DELTA, M = 36.0, 1.0, 2.0**-20, 1000
#: Table I's parameters with r = 1: τ well below B on this stream (clipping matters).
TABLE_I = {"r": 1.0, "lam": 0.85, "p": 0.005, "eps1_share": 0.85, "beta_lt": 0.004}


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(4).exponential(1.0, 3000).clip(0.0, B)


def _release(values, counter, seed, **kw):
    return pak_release(
        values, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, seed=seed, counter=counter,
        **{**TABLE_I, **kw},
    )  # fmt: skip


def _step_variance(counter, steps, tau):
    if counter == "unbounded":
        return unbounded_kary_variance(steps, epsilon=EPS, bound=tau)
    return unbounded_blt_variance(steps, epsilon=EPS, delta=DELTA, bound=tau)


def _range_variance(counter, first, last, tau):
    if counter == "unbounded":
        return unbounded_kary_range_variance(first, last, epsilon=EPS, bound=tau)
    return unbounded_blt_range_variance(first, last, epsilon=EPS, delta=DELTA, bound=tau)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_the_suffix_is_the_open_counters_release_at_bound_tau(counter):
    # PAK's regime (as tests/privacy/test_pak_audit.py): 8000 prefix values in [0, B/10], so
    # τ ≈ B/10 and the suffix counter runs at bound τ
    m, bound = 8000, 1.0
    v = np.random.default_rng(4).uniform(0.0, 0.1, m + 500)
    kw = dict(bound=bound, epsilon=EPS, delta=DELTA, time_lag=m, counter=counter, r=1.0,
              lam=0.5, p=0.1, beta_lt=0.05, eps1_share=0.5)  # fmt: skip
    rel = pak_release(v, seed=5, **kw)
    assert rel.counter.counter == counter and rel.privacy.parameters["counter"] == counter
    assert rel.guarantee.budget == Budget(EPS, DELTA)  # parallel: (ε₁ + ε₂, δ) | counter
    tau = rel.threshold
    assert tau < bound / 4  # the threshold clips: the counter runs at bound τ, not B
    np.testing.assert_array_equal(pak_release(v, seed=5, **kw).prefix_sums, rel.prefix_sums)
    # noise variances: Laplace c(σ, m) plus the open counter's exact variance at bound τ
    steps = np.arange(1, v.size - m + 1)
    expect = rel.prefix_noise.variance + _step_variance(counter, steps, tau)
    np.testing.assert_allclose(rel.variance[m:], expect, rtol=1e-12)
    assert np.isnan(rel.variance[: m - 1]).all()
    # the released suffix is c(σ, m) plus the counter's sums of the clipped suffix: with the
    # counter's noise removed (its exact std at most a few τ), it tracks Σ min(σ, τ)
    clipped = np.cumsum(np.minimum(v[m:], tau))
    err = rel.prefix_sums[m:] - rel.prefix_sums[m - 1] - clipped
    assert np.all(np.abs(err) < 8 * np.sqrt(_step_variance(counter, steps, tau)) + 1e-9)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_range_sum_std_error_is_the_exact_range_variance(x, counter):
    rel = _release(x, counter, 6)
    for i, j in ((M, M), (M, 2999), (M + 7, M + 300), (1500, 2999), (2047, 2048)):
        got = rel.range_sum(i, j)
        var = _range_variance(counter, i - M + 1, j - M + 1, rel.threshold)
        assert got.std_error == pytest.approx(math.sqrt(var), rel=1e-12)
        assert got.estimate == pytest.approx(rel.prefix_sums[j] - rel.prefix_sums[i - 1])
    # not the Cauchy–Schwarz bound: shared blocks / coefficients cancel
    i, j = 1500, 1600
    bound = (math.sqrt(rel.variance[i - 1]) + math.sqrt(rel.variance[j])) ** 2
    assert rel.range_sum(i, j).std_error ** 2 < 0.5 * bound


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_range_std_error_matches_seeded_releases(counter):
    # the suffix holds zeros: the released range sum is pure noise; standardised by its
    # std_error it has variance 1 (exact variances; τ varies from run to run)
    x = np.concatenate([np.random.default_rng(1).exponential(1.0, M).clip(0, B), np.zeros(400)])
    z = []
    for s in range(200):
        rel = _release(x, counter, 100 + s)
        got = rel.range_sum(M + 37, M + 250)
        z.append(got.estimate / got.std_error)
    assert np.var(z) == pytest.approx(1.0, abs=0.3)  # sampling sd ≈ 0.11
    assert abs(np.mean(z)) < 0.2


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_a_longer_stream_releases_the_same_prefix(x, counter):
    short = _release(x[:2000], counter, 9)
    long = _release(x, counter, 9)
    np.testing.assert_array_equal(short.prefix_sums[M - 1 :], long.prefix_sums[M - 1 : 2000])
    assert short.threshold == long.threshold


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_suffix_release_draws_from_the_bits_passed_and_matches_the_counter(counter):
    v = np.random.default_rng(0).uniform(0.0, 2.0, 300)
    delta = DELTA if counter == "unbounded_blt" else 0.0
    bits = RecordingBits(3)
    rel = _suffix_release(v, counter, EPS, delta, 2.0, bits)
    assert bits.words + bits.spawned > 0  # the open counters draw (or spawn) from ``bits``
    ref = (
        unbounded_kary_release(v, epsilon=EPS, bound=2.0, seed=RecordingBits(3))
        if counter == "unbounded"
        else unbounded_blt_release(v, epsilon=EPS, delta=DELTA, bound=2.0, seed=RecordingBits(3))
    )
    np.testing.assert_array_equal(rel.prefix_sums, ref.prefix_sums)
    np.testing.assert_allclose(rel.variance, ref.variance, rtol=1e-12)
    same = counter_release(v, counter=counter, epsilon=EPS, bound=2.0, bits=RecordingBits(3),
                           delta=delta)  # fmt: skip
    np.testing.assert_array_equal(same.prefix_sums, rel.prefix_sums)


def test_unbounded_blt_needs_delta_and_is_refused_before_any_draw():
    v = np.full(64, 1.0)
    with pytest.raises(ParameterError, match="'counter' parameter of pak_release.*delta"):
        pak_release(v, bound=2.0, epsilon=1.0, delta=0.0, time_lag=1, threshold=False,
                    counter="unbounded_blt", seed=RecordingBits(refuse=True))  # fmt: skip
    with pytest.raises(DomainError, match="'values'"):  # bad data: typed, nothing drawn
        pak_release(np.full(64, 3.0), bound=2.0, epsilon=1.0, delta=1e-6, time_lag=8,
                    counter="unbounded", seed=RecordingBits(refuse=True))  # fmt: skip


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_plain_counter_without_threshold(counter):
    v = np.random.default_rng(2).uniform(0.0, 2.0, 200)
    rel = pak_release(v, bound=2.0, epsilon=EPS, delta=DELTA, time_lag=1, threshold=False,
                      counter=counter, seed=4)  # fmt: skip
    assert rel.time_lag == 0 and rel.counter.counter == counter
    budget = Budget(EPS, DELTA) if counter == "unbounded_blt" else Budget(EPS)
    assert rel.guarantee.budget == budget
    np.testing.assert_allclose(
        rel.variance, _step_variance_at(counter, np.arange(1, 201), 2.0), rtol=1e-12
    )


def _step_variance_at(counter, steps, bound):
    if counter == "unbounded":
        return unbounded_kary_variance(steps, epsilon=EPS, bound=bound)
    return unbounded_blt_variance(steps, epsilon=EPS, delta=DELTA, bound=bound)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_exact_variances_through_the_counter_interface(counter):
    delta = DELTA if counter == "unbounded_blt" else 0.0
    var = counter_variance(counter, 500, epsilon=EPS, bound=3.0, delta=delta)
    np.testing.assert_allclose(var, _step_variance_at_bound3(counter), rtol=1e-12)
    end = counter_end_variance(counter, 500, epsilon=EPS, bound=3.0, delta=delta)
    assert end == pytest.approx(var[-1], rel=1e-12)


def _step_variance_at_bound3(counter):
    steps = np.arange(1, 501)
    if counter == "unbounded":
        return unbounded_kary_variance(steps, epsilon=EPS, bound=3.0)
    return unbounded_blt_variance(steps, epsilon=EPS, delta=DELTA, bound=3.0)


def test_auto_never_chooses_an_open_counter():
    for n in (100, 10_000):
        for delta in (0.0, DELTA):
            assert best_counter(n, epsilon=EPS, bound=1.0, delta=delta) not in OPEN_COUNTERS
