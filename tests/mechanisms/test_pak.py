"""PAK Mechanism 1 end to end ([PAK19] §III-C): structure, budget, accuracy, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    DomainError,
    ParameterError,
    binary_tree_final_sums,
    binary_tree_release,
    pak_release,
    pak_threshold,
)

DELTA = 2.0**-20
B = 100.0


def test_recording_bits_records_draws():  # the helper above must be able to fail the tests
    bits = RecordingBits()
    pak_release(np.zeros(600), bound=B, epsilon=1.0, delta=DELTA, time_lag=300, p=0.05, seed=bits)
    assert bits.words > 0


def _stream(seed: int = 0, n: int = 20_000) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, n).clip(0, B)


# the paper's protocol: BT on the suffix (the default counter is "auto", tested below)
KW = {
    "bound": B, "epsilon": 1.0, "delta": DELTA, "time_lag": 5000, "p": 0.05,
    "counter": "binary_tree",
}  # fmt: skip


# -- structure ---------------------------------------------------------------------------------


def test_prefix_sums_are_withheld_before_the_time_lag():
    x = _stream()
    rel = pak_release(x, **KW, seed=1)
    assert rel.prefix_sums.shape == (x.size,) and rel.time_lag == 5000
    assert np.isnan(rel.prefix_sums[:4999]).all() and np.isnan(rel.variance[:4999]).all()
    assert np.isfinite(rel.prefix_sums[4999:]).all() and (rel.variance[4999:] > 0).all()
    assert not rel.prefix_sums.flags.writeable


def test_suffix_is_released_prefix_sum_plus_bt_of_the_clipped_suffix():
    x = _stream()
    rel = pak_release(x, **KW, seed=2)
    c_m = rel.prefix_sums[4999]
    assert np.allclose(rel.prefix_sums[5000:], c_m + rel.tree.prefix_sums)
    assert rel.tree.bound == rel.threshold and rel.tree.epsilon == 1.0 and rel.tree.n == 15000
    assert rel.prefix_noise.scale == pytest.approx(rel.threshold / rel.epsilon2, rel=1e-6)
    assert rel.epsilon1 == pytest.approx(0.85) and rel.epsilon2 == pytest.approx(0.15)
    assert np.allclose(rel.variance[5000:], rel.prefix_noise.variance + rel.tree.variance)


def test_threshold_is_the_threshold_mechanism_on_the_prefix_with_eps1():
    x = _stream()
    rel = pak_release(x, **KW, seed=3)
    th = pak_threshold(
        x[:5000], bound=B, epsilon=0.85, delta=DELTA, lam=0.85, p=0.05, beta_lt=0.004, r=1.5, seed=3
    )  # same seed: its draws come first
    assert rel.threshold == th.threshold == rel.threshold_release.threshold


def test_range_sum_indexes_input_steps_like_prefix_sums():
    # One rule (issue 12): i, j are input steps, as prefix_sums; m = 5000 steps are withheld.
    x = _stream()
    rel = pak_release(x, **KW, seed=4)
    m = 5000
    assert rel.range_sum(m, m + 9) == pytest.approx(rel.prefix_sums[5009] - rel.prefix_sums[4999])
    assert rel.range_sum(m + 10, m + 2000) == pytest.approx(
        rel.prefix_sums[7000] - rel.prefix_sums[5009]
    )
    assert rel.range_sum(m, m + 9) == pytest.approx(rel.tree.range_sum(0, 9))  # c(σ, m) cancels
    assert rel.range_sum(m, 19999) == pytest.approx(rel.tree.prefix_sums[-1])
    assert rel.range_sum(m + 3, m + 3) == pytest.approx(rel.tree.range_sum(3, 3))
    # the standard error is the tree's, on the same (shifted) range
    assert rel.range_sum(m + 3, m + 700).std_error == rel.tree.range_sum(3, 700).std_error > 0
    for bad in [(0, 9), (m - 1, m + 5), (m, 20000), (-1, 5), (m + 6, m + 5), (20000, 20000)]:
        with pytest.raises(ParameterError, match="input steps"):
            rel.range_sum(*bad)
    with pytest.raises(ParameterError, match="must be an int"):
        rel.range_sum(m + 0.5, m + 3)


def test_same_seed_same_release():
    x = _stream()
    a = pak_release(x, **KW, seed=5)
    b = pak_release(x, **KW, seed=5)
    assert np.array_equal(a.prefix_sums, b.prefix_sums, equal_nan=True)


def test_threshold_false_is_plain_bt_over_the_whole_stream():
    x = _stream(n=3000)
    rel = pak_release(x, **dict(KW, time_lag=1000, delta=0.0), threshold=False, seed=6)
    bt = binary_tree_release(x, epsilon=1.0, bound=B, seed=6)
    assert rel.time_lag == 0 and rel.threshold == B and rel.threshold_release is None
    assert np.array_equal(rel.prefix_sums, bt.prefix_sums)
    assert rel.guarantee.budget == Budget(1.0, 0.0)
    assert rel.range_sum(0, 10) == bt.range_sum(0, 10)


def test_threshold_at_the_bound_still_withholds_and_clips_to_b():
    # Uniform data on [0, B]: the λp-quantile is near B, so r·τ is clipped to B.
    x = np.random.default_rng(7).uniform(0, B, 4000)
    rel = pak_release(x, **dict(KW, time_lag=2000), r=2.0, seed=7)
    assert rel.threshold == B and rel.time_lag == 2000
    assert np.isnan(rel.prefix_sums[0])


def test_guarantee_and_ledger_charge_the_total_once():
    ledger = BudgetLedger(Budget(2.0, 1e-5))
    rel = pak_release(_stream(), **KW, seed=8, ledger=ledger)
    assert rel.guarantee.budget == Budget(1.0, DELTA)
    assert len(ledger.charges) == 1 and ledger.charges[0].budget == Budget(1.0, DELTA)


# -- accuracy ----------------------------------------------------------------------------------


@pytest.mark.statistical
def test_mechanism_1_beats_bt_with_b_on_a_light_tailed_stream():
    # [PAK19] §VII-A in miniature: MAE of c(σ, n) over 300 seeded runs, Exp(1) data, B = 100.
    x = _stream(11)
    truth = float(x.sum())
    pak = [abs(pak_release(x, **KW, seed=s).prefix_sums[-1] - truth) for s in range(300)]
    bt = np.abs(binary_tree_final_sums(x, epsilon=1.0, bound=B, repetitions=300, seed=0) - truth)
    assert np.mean(bt) / np.mean(pak) > 3.0


@pytest.mark.statistical
def test_reported_variance_matches_the_noise_given_tau():
    # All-zero stream: no clipping bias, so the error is pure noise of the reported variance.
    x = np.zeros(3000)
    z2 = []
    for s in range(400):
        rel = pak_release(x, **dict(KW, time_lag=1500), seed=s)
        z2.append(rel.prefix_sums[-1] ** 2 / rel.variance[-1])
    assert np.mean(z2) == pytest.approx(1.0, abs=0.3)


# -- validation: nothing drawn, nothing charged ------------------------------------------------


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"values": [1.0, math.nan] * 3000}, DomainError),
        ({"values": [1.0, math.inf] * 3000}, DomainError),
        ({"values": [1.0, -math.inf] * 3000}, DomainError),
        ({"values": [1.0, B + 1] * 3000}, DomainError),
        ({"values": [1.0, -0.5] * 3000}, DomainError),
        ({"values": []}, DomainError),
        ({"values": [1.0]}, DomainError),
        ({"values": np.ones((2, 3000))}, DomainError),
        ({"time_lag": 6000}, ParameterError),  # m ≥ n
        ({"time_lag": 7000}, ParameterError),
        ({"time_lag": 0}, ParameterError),
        ({"time_lag": 2.5}, ParameterError),
        ({"time_lag": 10}, ParameterError),  # λ·p·m < 1
        ({"epsilon": 0.0}, ParameterError),
        ({"epsilon": -1.0}, ParameterError),
        ({"epsilon": math.inf}, ParameterError),
        ({"delta": 1.0}, ParameterError),
        ({"delta": -1e-9}, ParameterError),
        ({"delta": 0.0}, ParameterError),  # threshold needs δ > 0
        ({"bound": 0.0}, ParameterError),
        ({"lam": 0.0}, ParameterError),
        ({"lam": 1.5}, ParameterError),
        ({"p": 0.0}, ParameterError),
        ({"p": 1.0}, ParameterError),
        ({"r": 0.5}, ParameterError),
        ({"r": math.nan}, ParameterError),
        ({"beta_lt": 0.0}, ParameterError),
        ({"beta_lt": 0.9}, ParameterError),
        ({"eps1_share": 1.0}, ParameterError),
        ({"eps1_share": 0.0}, ParameterError),
        ({"noise": "cauchy"}, ParameterError),
        ({"noise": "gaussian"}, ParameterError),  # κ ≤ 0 with NRS07's Gaussian constants
        ({"threshold": "yes"}, ParameterError),
        ({"ledger": "ledger"}, ParameterError),
        ({"ledger": BudgetLedger(Budget(0.5, 1e-3))}, BudgetExceededError),
    ],
)
def test_bad_input_raises_before_any_draw_or_charge(change, error):
    bits = RecordingBits()
    ledger = BudgetLedger(Budget(10.0, 0.5))
    args = dict(KW, values=_stream(n=6000), ledger=ledger, seed=bits)
    args.update(change)
    with pytest.raises(error):
        pak_release(**args)
    assert bits.words == 0 and bits.spawned == 0
    assert ledger.charges == ()
    if isinstance(args["ledger"], BudgetLedger):
        assert args["ledger"].charges == ()


# -- the default counter (issue 14): the best for the unit, named in the record ---------------


def test_default_counter_is_the_best_for_the_unit_and_the_record_names_it():
    from mechanisms import best_counter, counter_variance

    x = _stream()
    kw = {k: v for k, v in KW.items() if k != "counter"}
    rel = pak_release(x, **kw, seed=12)
    best = best_counter(15_000, epsilon=1.0, bound=1.0, delta=DELTA)
    # with δ the square-root factorisation's Gaussian noise ([FHU23], issue 27) beats the pure-ε
    # k-ary tree + least squares at the last step; the suffix is then (ε, δ), in parallel with
    # the threshold's (ε, δ) on the disjoint prefix: the release stays (ε, δ)
    assert best == "sqrt_factorisation"
    assert (
        counter_variance(best, 15_000, epsilon=1.0, bound=1.0, delta=DELTA)[-1]
        < (counter_variance("kary_tree_consistent", 15_000, epsilon=1.0, bound=1.0)[-1])
    )
    assert rel.counter.counter == best and rel.tree is None
    assert rel.privacy.parameters["counter"] == best
    assert rel.guarantee.budget.epsilon == 1.0 and rel.guarantee.budget.delta == DELTA
    paper = pak_release(x, **KW, seed=12)
    assert paper.privacy.parameters["counter"] == "binary_tree"
    assert rel.threshold == paper.threshold  # the prefix part draws the same bits first
    exact = counter_variance(best, 15_000, epsilon=1.0, bound=rel.threshold, delta=DELTA)
    np.testing.assert_allclose(rel.variance[5000:], rel.prefix_noise.variance + exact)
    assert rel.variance[-1] < paper.variance[-1] / 3
    plain = pak_release(x, **dict(kw, delta=0.0), threshold=False, seed=12)
    assert plain.counter.counter == best_counter(20_000, epsilon=1.0, bound=1.0)
    assert plain.privacy.parameters["counter"] == plain.counter.counter
    assert plain.guarantee.budget == Budget(1.0, 0.0)


@pytest.mark.statistical
def test_default_counter_variance_matches_the_noise_given_tau():
    # All-zero stream (no clipping bias): the default counter's stated variance is the noise's
    x = np.zeros(3000)
    kw = {k: v for k, v in KW.items() if k != "counter"}
    z2 = []
    for s in range(400):
        rel = pak_release(x, **dict(kw, time_lag=1500), seed=s)
        z2.append(rel.prefix_sums[-1] ** 2 / rel.variance[-1])
    assert rel.counter.counter != "binary_tree"
    assert np.mean(z2) == pytest.approx(1.0, abs=0.3)
