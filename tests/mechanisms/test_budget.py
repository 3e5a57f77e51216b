"""Budgets, the ledger and composition."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    Charge,
    EventLevel,
    LocalDP,
    ParameterError,
    PrivacyGuarantee,
    WAlphaIndistinguishability,
    WEvent,
    compose_parallel,
    compose_sequential,
    compose_w_window,
)


@pytest.mark.parametrize(
    ("eps", "delta"),
    [(0, 0), (-1, 0), (float("nan"), 0), (float("inf"), 0), (1, -0.1), (1, 1.0), (1, float("nan"))],
)
def test_invalid_budgets_are_rejected(eps, delta):
    with pytest.raises(ParameterError):
        Budget(eps, delta)


def test_split_is_exact_and_validated():
    first, second = Budget(1.0, 1e-6).split([0.85, 0.15], delta_shares=[1.0, 0.0])
    assert first == Budget(0.85, 1e-6)
    assert second.epsilon == pytest.approx(0.15) and second.delta == 0.0
    with pytest.raises(ParameterError, match="sum to 1"):
        Budget(1.0).split([0.5, 0.4])
    with pytest.raises(ParameterError):
        Budget(1.0).split([1.2, -0.2])
    assert Budget(1.0).split([1.0, 0.0])[1] is None


def test_sequential_and_parallel_composition():
    a, b = Budget(0.3, 1e-7), Budget(0.5, 2e-7)
    assert compose_sequential(a, b) == Budget(0.8, 3e-7)
    assert compose_parallel(a, b) == Budget(0.5, 2e-7)
    with pytest.raises(ParameterError):
        compose_sequential()


def test_w_window_composition_is_the_largest_window_sum():
    assert compose_w_window([0.1, 0.2, 0.3, 0.0, 0.4], 2) == pytest.approx(0.5)
    assert compose_w_window([0.1, 0.2], 5) == pytest.approx(0.3)
    with pytest.raises(ParameterError):
        compose_w_window([0.1], 0)


def test_ledger_refuses_to_overspend_and_records_nothing_then():
    ledger = BudgetLedger(Budget(1.0, 1e-6))
    ledger.charge(Budget(0.6, 1e-6), "threshold")
    with pytest.raises(BudgetExceededError) as info:
        ledger.charge(Budget(0.5), "sums")
    assert info.value.requested == Budget(0.5)
    assert len(ledger.charges) == 1
    with pytest.raises(BudgetExceededError):
        ledger.charge(Budget(0.1, 1e-9), "delta overspent")
    ledger.charge(Budget(0.4), "sums")
    assert ledger.remaining_epsilon == 0.0


@given(st.integers(min_value=1, max_value=200), st.floats(min_value=1e-3, max_value=10))
def test_a_split_always_fits_its_ledger_exactly(k, total):
    ledger = BudgetLedger(Budget(total, 1e-6))
    for part in Budget(total, 1e-6).split([1.0 / k] * k):
        ledger.charge(part)
    assert 0 <= ledger.remaining_epsilon <= 1e-9 * total


def test_ledger_is_exact_and_refuses_a_float_overspend():
    # 5 x float(0.2) exceeds 1 by 5.5e-17 in exact arithmetic: the ledger says so.
    ledger = BudgetLedger(Budget(1.0))
    for _ in range(4):
        ledger.charge(Budget(0.2))
    with pytest.raises(BudgetExceededError):
        ledger.charge(Budget(0.2))


def test_units_validate_and_describe():
    assert "w-event" in WEvent(48).describe()
    assert "α" in WAlphaIndistinguishability(48, 2.5).describe()
    with pytest.raises(ParameterError):
        WEvent(0)
    with pytest.raises(ParameterError):
        WAlphaIndistinguishability(48, 0.0)
    g = PrivacyGuarantee(unit=EventLevel(), budget=Budget(1.0), proof="[PAK19] §III-C")
    assert "event-level" in str(g) and "PAK19" in str(g)
    assert "local" in LocalDP().describe()


# -- issue 29: what the mutants of _budget.py showed untested --


@pytest.mark.parametrize(
    "delta_shares",
    [[1.0, 0.5, -0.5], [float("nan"), 0.5, 0.5], [float("inf"), 0.0, 0.0], [0.5, 0.5], []],
)
def test_split_refuses_delta_shares_that_could_overspend_delta(delta_shares):
    # [1, .5, -.5] sums to 1: accepted, its parts' δ would sum to 1.5x the whole
    with pytest.raises(ParameterError, match="delta_shares"):
        Budget(1.0, 1e-6).split([0.5, 0.5, 0.0], delta_shares=delta_shares)


@pytest.mark.parametrize("shares", [[0.5, 0.5 + 2e-9], [0.5, 0.5 - 2e-9], [-0.0001, 1.0001], []])
def test_split_shares_must_sum_to_one_within_1e9_and_be_non_negative(shares):
    with pytest.raises(ParameterError, match="'shares'"):
        Budget(1.0).split(shares)


def test_split_accepts_a_sum_within_the_tolerance_and_never_overspends():
    parts = Budget(1.0, 1e-6).split([0.5, 0.5 + 0.5e-9])
    assert sum(Fraction(p.epsilon) for p in parts) <= 1
    assert sum(Fraction(p.delta) for p in parts) <= Fraction(1e-6)


#: A share: zero, or at least 1e-6 (a subnormal share makes a zero part, refused as a Budget).
_SHARE = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1.0))


@given(
    st.lists(_SHARE, min_size=1, max_size=8).filter(lambda v: sum(v) > 0.01),
    st.lists(_SHARE, min_size=8, max_size=8).filter(lambda v: sum(v) > 0.01),
    st.floats(min_value=1e-3, max_value=10.0),
    st.floats(min_value=0.0, max_value=0.5),
)
def test_split_parts_are_the_shares_and_sum_to_at_most_the_whole(raw, raw_dlt, eps, delta):
    shares = [s / sum(raw) for s in raw]
    dlt_raw = raw_dlt[: len(raw)]
    if sum(dlt_raw) == 0:
        dlt_raw = [1.0] + [0.0] * (len(raw) - 1)
    dshares = [s / sum(dlt_raw) for s in dlt_raw]
    if abs(sum(shares) - 1.0) > 1e-9 or abs(sum(dshares) - 1.0) > 1e-9:
        return  # normalisation rounding: not a split the function must accept
    whole = Budget(eps, delta)
    parts = whole.split(shares, delta_shares=dshares)
    assert len(parts) == len(shares)
    given_parts = [p for p in parts if p is not None]
    assert [p is None for p in parts] == [s == 0 for s in shares]
    assert sum(Fraction(p.epsilon) for p in given_parts) <= Fraction(eps)
    assert sum(Fraction(p.delta) for p in given_parts) <= Fraction(delta)
    for part, s, d in zip(parts, shares, dshares, strict=True):
        if part is not None:
            assert part.epsilon == pytest.approx(eps * s, rel=1e-12, abs=1e-300)
            assert part.delta == pytest.approx(delta * d, rel=1e-12, abs=1e-300)


def test_split_rounds_down_by_ulps_only_when_needed():
    # 0.1 + 0.2 + 0.7 of 1.0: the products' exact sum exceeds 1, the parts are lowered
    parts = Budget(1.0).split([0.1, 0.2, 0.7])
    assert sum(Fraction(p.epsilon) for p in parts) <= 1
    assert [p.epsilon for p in parts] == pytest.approx([0.1, 0.2, 0.7], rel=1e-15)
    # an exact split is left alone
    assert [p.epsilon for p in Budget(1.0).split([0.25, 0.75])] == [0.25, 0.75]


@pytest.mark.parametrize(
    "losses", [[0.1, -0.1, 0.2], [0.1, float("nan")], [float("inf")], [], [[0.1, 0.2]]]
)
def test_w_window_composition_refuses_negative_or_non_finite_losses(losses):
    # a negative loss would hide the cost of its window's other steps
    with pytest.raises(ParameterError, match="step_epsilons"):
        compose_w_window(losses, 2)


@pytest.mark.parametrize("w", [0, -1, 1.5, "2"])
def test_w_window_composition_refuses_a_bad_window(w):
    with pytest.raises(ParameterError):
        compose_w_window([0.1, 0.2], w)


def test_w_window_composition_finds_the_window_wherever_it_is():
    assert compose_w_window([0.4, 0.1, 0.1, 0.1], 2) == pytest.approx(0.5)  # the first window
    assert compose_w_window([0.1, 0.1, 0.1, 0.4], 2) == pytest.approx(0.5)  # the last window
    assert compose_w_window([0.1, 0.1, 0.1, 0.4], 1) == pytest.approx(0.4)
    assert compose_w_window([0.1, 0.1, 0.1, 0.4], 4) == pytest.approx(0.7)
    assert compose_w_window([0.3], 3) == pytest.approx(0.3)


def test_composition_values_exactly():
    a, b = Budget(0.25, 1e-7), Budget(0.5, 3e-7)
    assert compose_sequential(a, b, a) == Budget(1.0, float(Fraction(1e-7) * 2 + Fraction(3e-7)))
    assert compose_parallel(a, b) == Budget(0.5, 3e-7)
    assert compose_parallel(Budget(0.5), Budget(0.25, 1e-6)) == Budget(0.5, 1e-6)
    with pytest.raises(ParameterError):
        compose_parallel()


def test_ledger_checks_units_and_types_and_check_charges_nothing():
    ledger = BudgetLedger(Budget(1.0, 1e-6), unit=WEvent(4))
    with pytest.raises(ParameterError, match="privacy unit"):
        ledger.check(Budget(0.1), "x", unit=EventLevel())
    with pytest.raises(ParameterError, match="privacy unit"):
        ledger.charge(Budget(0.1), "x", unit=EventLevel())
    with pytest.raises(ParameterError, match="must be a Budget"):
        ledger.charge(0.1, "x")  # type: ignore[arg-type]
    ledger.check(Budget(1.0, 1e-6), "all of it")
    assert ledger.charges == () and ledger.remaining_epsilon == 1.0
    ledger.charge(Budget(0.25, 0.5e-6), "a", unit=WEvent(4))
    ledger.charge(Budget(0.25), "b")  # no unit given: accepted
    assert ledger.remaining_epsilon == 0.5 and ledger.remaining_delta == 0.5e-6
    assert [c.label for c in ledger.charges] == ["a", "b"]
    assert "ε=0.5" in ledger.remaining_text and "δ=5e-07" in ledger.remaining_text
    with pytest.raises(ParameterError):
        BudgetLedger(1.0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        BudgetLedger(Budget(1.0), unit="w-event")  # type: ignore[arg-type]


def test_a_persisted_ledger_counts_the_charges_it_restores():
    class Restored(BudgetLedger):
        __slots__ = ()

        def _restore(self):
            return [Charge("earlier run", Budget(0.75, 0.5e-6))]

    ledger = Restored(Budget(1.0, 1e-6))
    assert ledger.remaining_epsilon == 0.25 and ledger.remaining_delta == 0.5e-6
    assert [c.label for c in ledger.charges] == ["earlier run"]
    with pytest.raises(BudgetExceededError):
        ledger.charge(Budget(0.5))
