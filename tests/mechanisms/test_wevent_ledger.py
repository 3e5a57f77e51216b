"""``ledger=`` on the w-event building blocks: charged once, after validation, before any draw."""

from __future__ import annotations

import numpy as np
import pytest
from _recording_bits import RecordingBits

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    ParameterError,
    WAlphaIndistinguishability,
    optstream_estimates,
)
from mechanisms.core._random import bit_source
from mechanisms.wevent import WEventDFT, WEventLaplace, WEventPegasus

W = 8
VALUES = np.linspace(1.0, 5.0, 3 * W).reshape(1, 3, W).repeat(2, axis=0)  # (B=2, N=3, r=w)


def _mechanisms():
    return [
        WEventLaplace(epsilon=0.5, w=W, delta=1.0),
        WEventDFT(epsilon=0.5, w=W, delta=1.0, k=3),
        WEventPegasus(epsilon=0.5, w=W, delta=1.0),
    ]


@pytest.mark.parametrize("mech", _mechanisms(), ids=lambda m: type(m).__name__)
def test_release_charges_its_guarantee_once(mech):
    ledger = BudgetLedger(Budget(1.0), unit=mech.guarantee.unit)
    out = mech.release(VALUES[0], bit_source(1), ledger=ledger)
    assert out.shape == VALUES[0].shape
    assert [c.budget for c in ledger.charges] == [mech.guarantee.budget]
    other = BudgetLedger(Budget(1.0), unit=WAlphaIndistinguishability(w=W + 1, alpha=1.0))
    bits = RecordingBits(refuse=True)
    with pytest.raises(ParameterError, match="privacy unit"):
        mech.release(VALUES[0], bits, ledger=other)
    assert bits.words == 0 and other.charges == ()


@pytest.mark.parametrize("mech", _mechanisms(), ids=lambda m: type(m).__name__)
def test_release_over_budget_draws_nothing(mech):
    bits = RecordingBits(refuse=True)
    ledger = BudgetLedger(Budget(0.25))
    with pytest.raises(BudgetExceededError):
        mech.release(VALUES[0], bits, ledger=ledger)
    assert bits.words == 0 and ledger.charges == ()


@pytest.mark.parametrize("mech", _mechanisms(), ids=lambda m: type(m).__name__)
def test_release_rejects_a_bad_ledger_and_a_bad_period_before_charging(mech):
    with pytest.raises(ParameterError, match="'ledger'"):
        mech.release(VALUES[0], RecordingBits(refuse=True), ledger="ledger")
    ledger = BudgetLedger(Budget(1.0))
    with pytest.raises(ParameterError):
        mech.release(np.ones((2, W + 1)), RecordingBits(refuse=True), ledger=ledger)
    assert ledger.charges == ()


def test_optstream_estimates_charges_once_with_its_unit():
    unit = WAlphaIndistinguishability(w=W, alpha=1.0)
    ledger = BudgetLedger(Budget(2.0), unit=unit)
    est = optstream_estimates(
        VALUES, epsilon=1.0, k=2, alpha=1.0, sampling="equal", seed=3, ledger=ledger
    )
    assert [c.budget for c in ledger.charges] == [est.guarantee.budget] == [Budget(1.0)]
    assert est.guarantee.unit == unit
    # the same seed without a ledger gives the same release: charging draws nothing
    same = optstream_estimates(VALUES, epsilon=1.0, k=2, alpha=1.0, sampling="equal", seed=3)
    np.testing.assert_array_equal(est.estimates, same.estimates)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"k": 0}, ParameterError),
        ({"epsilon": -1.0}, ParameterError),
        ({"ledger": "ledger"}, ParameterError),
        ({"ledger": BudgetLedger(Budget(0.5))}, BudgetExceededError),
    ],
)
def test_optstream_estimates_bad_input_draws_and_charges_nothing(change, error):
    bits = RecordingBits(refuse=True)
    ledger = BudgetLedger(Budget(10.0))
    args = dict(epsilon=1.0, k=2, alpha=1.0, sampling="l1", seed=bits, ledger=ledger)
    args.update(change)
    with pytest.raises(error):
        optstream_estimates(VALUES, **args)
    assert bits.words == 0 and ledger.charges == ()
    if isinstance(args["ledger"], BudgetLedger):
        assert args["ledger"].charges == ()
