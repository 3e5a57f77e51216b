"""Private time-lag heuristics ([PAK19] §VI-B) and g of Eq. 5."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mechanisms import ParameterError
from planner import (
    TimeLag,
    max_quantile_count,
    quantile_failure_probability,
    time_lag_heuristic,
)

PAPER = {"epsilon": 1.0, "delta": 2.0**-20, "beta": 0.02, "p_max": 0.005}


def test_criterion2_known_answer_section_vi_b():
    # β = 0.02, δ = 2⁻²⁰, ε = 1, p_max = 0.005, Laplace, a = ε/√(−ln δ), b = min(1, ε/(−2 ln δ))
    lag = time_lag_heuristic(**PAPER)
    assert isinstance(lag, TimeLag)
    assert lag.criterion2_bound == pytest.approx(82_422.21, abs=0.01)
    assert lag.criterion2 == 82_423  # smallest integer m > 82,422.21 (paper: "m > 80,000")
    assert lag.m == max(lag.criterion1, lag.criterion2) == 82_423
    assert lag.private is True


def test_criterion2_closed_form_of_the_paper():
    log_d = 20 * math.log(2)
    a, b = 1 / math.sqrt(log_d), 1 / (2 * log_d)
    g = -math.log(2 * 0.02)
    kappa = 1 / (1 - math.expm1(b) * g / a)
    paper = 20 * kappa * log_d**1.5 * math.exp(-1) * g / (-0.005 * math.log(0.005))
    assert time_lag_heuristic(**PAPER).criterion2_bound == pytest.approx(paper, rel=1e-12)


def test_criterion1_formula_not_the_papers_20000():
    # The formula g(0.5, p_max, m) < β gives ~3,000, not the 20,000 of the text (documented).
    lag = time_lag_heuristic(**PAPER)
    assert lag.criterion1 == 3_231
    assert quantile_failure_probability(0.5, 0.005, 3_230) >= 0.02
    for m in (3_231, 3_600, 4_000, 10_000, 20_000):
        assert quantile_failure_probability(0.5, 0.005, m) < 0.02


def test_criterion2_grows_as_epsilon_shrinks():
    ms = [time_lag_heuristic(**{**PAPER, "epsilon": e}).criterion2 for e in (2.0, 1.0, 0.5)]
    assert ms[0] < ms[1] < ms[2]


@pytest.mark.parametrize("m", [100, 1_000, 40_000])
@pytest.mark.parametrize("lam", [0.5, 0.85, 1.0])
def test_g_is_the_binomial_cdf_of_eq5(m, lam):
    p = 0.005
    expected = stats.binom.cdf(math.floor(lam * p * m), m, p)
    assert quantile_failure_probability(lam, p, m) == pytest.approx(expected, rel=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    beta_qt=st.floats(1e-6, 0.4),
    m=st.integers(1_000, 500_000),
    p=st.floats(1e-3, 0.01),
)
def test_max_quantile_count_meets_eq5(beta_qt, m, p):
    k = float(max_quantile_count(beta_qt, m, p))
    assert 0.0 <= k <= p * m
    if k >= 1:  # the largest admissible integer count satisfies g <= β_qt ...
        assert stats.binom.cdf(math.floor(k), m, p) <= beta_qt * (1 + 1e-9)
    if k < p * m:  # ... and one more value does not
        assert stats.binom.cdf(math.floor(k) + 1, m, p) > beta_qt * (1 - 1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p_max": 1.0}, "p_max"),
        ({"p_max": 0.0}, "p_max"),
        ({"beta": 1.0}, "beta"),
        ({"delta": 0.0}, "delta"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"noise": "cauchy"}, "noise"),
    ],
)
def test_bad_public_inputs(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        time_lag_heuristic(**{**PAPER, **kwargs})
