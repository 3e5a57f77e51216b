"""Budgets, the ledger and composition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
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
