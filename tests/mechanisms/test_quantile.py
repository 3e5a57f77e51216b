"""Empirical λp-quantile and its smooth sensitivity ([PAK19] §IV-C, [NRS07] §3.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import (
    DomainError,
    ParameterError,
    empirical_quantile,
    quantile_rank,
    smooth_sensitivity_quantile,
)
from mechanisms.pak._quantile import _smooth_sensitivity_quantile_reference as reference


def _close(fast: float, ref: float) -> bool:
    return abs(fast - ref) <= 1e-12 * max(abs(ref), 1e-300)


# -- known answers -------------------------------------------------------------------------


def test_smooth_sensitivity_hand_computed_example():
    # sorted padded x = [0, .2, .5, .9, 1], P = 2. k=0: max(.4, .3) = .4; k=1: .7; k=2: .9;
    # k=3: 1. With e^-b = 1/2: max(.4, .35, .225, .125) = .4.
    values = [0.9, 0.2, 0.5]
    assert smooth_sensitivity_quantile(values, 2, math.log(2.0), 0.0, 1.0) == pytest.approx(0.4)
    # With e^-b = 0.8: max(.4, .7·.8, .9·.64, 1·.512) = .576 (the k = 2 term wins).
    got = smooth_sensitivity_quantile(values, 2, math.log(1.25), 0.0, 1.0)
    assert got == pytest.approx(0.576)


def test_smooth_sensitivity_of_all_equal_values_is_the_padding_gap():
    # x_1..x_m = c: only pairs reaching the padding differ. Best: j = m+1 (upper) and i = P
    # at distance k = m − P, or i = 0 (lower) and j = P at k = P − 1.
    m, rank, b = 10, 7, 0.3
    got = smooth_sensitivity_quantile(np.full(m, 0.25), rank, b, 0.0, 1.0)
    expected = max(0.75 * math.exp(-b * (m - rank)), 0.25 * math.exp(-b * (rank - 1)))
    assert got == pytest.approx(expected, rel=1e-14)


# -- fast == reference -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_fast_algorithm_matches_the_definition_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 120))
    kind = seed % 4
    if kind == 0:
        values = rng.random(m)
    elif kind == 1:
        values = rng.exponential(0.1, m).clip(0, 1)
    elif kind == 2:
        values = np.round(rng.random(m) * 4) / 4  # many ties, values at the bounds
    else:
        values = rng.choice([0.0, 1.0], m)  # only the bounds
    rank = int(rng.integers(1, m + 1))
    b = float(10 ** rng.uniform(-5, 2))
    fast = smooth_sensitivity_quantile(values, rank, b, 0.0, 1.0)
    assert _close(fast, reference(values, rank, b, 0.0, 1.0))


@pytest.mark.parametrize(
    ("values", "rank", "b"),
    [
        ([0.5], 1, 0.1),  # m = 1
        ([0.0], 1, 1e-9),  # m = 1 at the lower bound, tiny b
        ([1.0], 1, 50.0),  # m = 1 at the upper bound, large b
        ([0.3] * 50, 1, 0.05),  # all equal, P = 1
        ([0.3] * 50, 50, 0.05),  # all equal, P = m
        ([0.0] * 25 + [1.0] * 25, 25, 0.01),  # bounds only, P at the jump
        ([0.0] * 25 + [1.0] * 25, 26, 0.01),
        (list(np.linspace(0, 1, 64)), 1, 1e-7),
        (list(np.linspace(0, 1, 64)), 64, 700.0),  # e^-bk underflows everywhere but k = 0
    ],
)
def test_fast_algorithm_matches_the_definition_on_adversarial_inputs(values, rank, b):
    assert _close(
        smooth_sensitivity_quantile(values, rank, b, 0.0, 1.0), reference(values, rank, b, 0.0, 1.0)
    )


def test_fast_algorithm_matches_the_definition_with_a_shifted_domain():
    rng = np.random.default_rng(5)
    values = rng.uniform(-3.0, 2.0, 90)
    for rank in (1, 17, 45, 90):
        fast = smooth_sensitivity_quantile(values, rank, 0.2, -3.0, 2.0)
        assert _close(fast, reference(values, rank, 0.2, -3.0, 2.0))


@pytest.mark.parametrize("rank", [1, 1000, 3990, 4000])
def test_fast_algorithm_survives_underflow_of_the_smoothing_factor(rank):
    # b·k reaches ~2000: e^{-bk} underflows to 0 for most pairs. A search comparing the
    # underflowed products would see false ties and miss the maximum (regression).
    rng = np.random.default_rng(11)
    values = rng.exponential(1.0, 4000).clip(0, 20)
    fast = smooth_sensitivity_quantile(values, rank, 0.5, 0.0, 20.0)
    assert _close(fast, reference(values, rank, 0.5, 0.0, 20.0))


# -- invariants (hypothesis) ------------------------------------------------------------------

_values = st.lists(
    st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=30
)


def _order_statistic(values, rank):
    return float(np.sort(values)[rank - 1])


@settings(max_examples=150, deadline=None)
@given(values=_values, data=st.data(), b=st.floats(1e-4, 5.0))
def test_smooth_sensitivity_bounds_the_local_sensitivity(values, data, b):
    rank = data.draw(st.integers(1, len(values)))
    ss = smooth_sensitivity_quantile(values, rank, b, 0.0, 1.0)
    base = _order_statistic(values, rank)
    local = 0.0
    for i in range(len(values)):
        for replacement in (0.0, 1.0):  # the extremes move an order statistic the most
            other = list(values)
            other[i] = replacement
            local = max(local, abs(_order_statistic(other, rank) - base))
    assert ss >= local - 1e-15


@settings(max_examples=150, deadline=None)
@given(
    values=_values,
    data=st.data(),
    b=st.floats(1e-4, 5.0),
    replacement=st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0])),
)
def test_smooth_sensitivity_is_b_smooth_between_neighbours(values, data, b, replacement):
    rank = data.draw(st.integers(1, len(values)))
    i = data.draw(st.integers(0, len(values) - 1))
    neighbour = list(values)
    neighbour[i] = replacement
    ss = smooth_sensitivity_quantile(values, rank, b, 0.0, 1.0)
    ss_n = smooth_sensitivity_quantile(neighbour, rank, b, 0.0, 1.0)
    assert ss <= math.exp(b) * ss_n * (1 + 1e-12)
    assert ss_n <= math.exp(b) * ss * (1 + 1e-12)


def test_smooth_sensitivity_decreases_with_the_smoothing_constant():
    values = np.random.default_rng(2).random(200)
    got = [smooth_sensitivity_quantile(values, 190, b, 0.0, 1.0) for b in (0.01, 0.1, 1.0)]
    assert got[0] >= got[1] >= got[2]


# -- the empirical quantile -------------------------------------------------------------------


def test_quantile_rank_follows_pak_definition_exactly():
    # (1 − 0.05)·200 = 190 exactly: the 191st value is the first with 190 values below it.
    assert quantile_rank(200, 0.05) == 191
    assert quantile_rank(1000, 0.0123) == math.ceil(1000 - 12.3) + 1 == 989
    assert quantile_rank(10, 0.1) == 10  # q·m = 1: the maximum


def test_quantile_rank_rejects_q_below_one_over_m():
    with pytest.raises(ParameterError, match="q·m >= 1"):
        quantile_rank(100, 0.009)


def test_empirical_quantile_is_the_smallest_value_with_enough_values_below():
    rng = np.random.default_rng(4)
    values = rng.random(500)
    q = 0.07
    result = empirical_quantile(values, q)
    below = np.array([(values < v).sum() for v in values])
    pak = values[below >= (1 - q) * values.size].min()  # [PAK19] §IV definition, literally
    assert result.value == pak
    assert result.rank == quantile_rank(500, q)


def test_empirical_quantile_keeps_a_fixed_rank_with_ties():
    # Ties: PAK's min-over-values would move to the next distinct value; we keep rank P.
    values = [1.0, 1.0, 1.0, 1.0, 2.0]
    result = empirical_quantile(values, 0.4)  # P = ⌈0.6·5⌉ + 1 = 4
    assert (result.rank, result.value) == (4, 1.0)


@pytest.mark.parametrize(("gamma", "q"), [(1.0, 0.005), (0.2, 0.05), (3.0, 0.3)])
def test_empirical_quantile_of_exponential_sample_matches_fact_1(gamma, q):
    # [PAK19] Fact 1, Eq. 1: the q-quantile of Exp(γ) is −ln(q)/γ.
    values = np.random.default_rng(8).exponential(1 / gamma, 400_000)
    got = empirical_quantile(values, q).value
    assert got == pytest.approx(-math.log(q) / gamma, rel=0.03)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"rank": 0}, ParameterError),
        ({"rank": 4}, ParameterError),
        ({"smoothing": 0.0}, ParameterError),
        ({"smoothing": math.inf}, ParameterError),
        ({"lower": 1.0}, ParameterError),
        ({"upper": math.nan}, ParameterError),
        ({"values": [0.1, 2.0, 0.3]}, DomainError),
        ({"values": [0.1, math.nan, 0.3]}, DomainError),
        ({"values": []}, DomainError),
    ],
)
def test_smooth_sensitivity_rejects_bad_arguments(kwargs, error):
    args = {"values": [0.1, 0.2, 0.3], "rank": 2, "smoothing": 0.1, "lower": 0.0, "upper": 1.0}
    args.update(kwargs)
    with pytest.raises(error):
        smooth_sensitivity_quantile(**args)
