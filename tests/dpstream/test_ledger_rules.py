"""The ledger's rules for charges tied to a period (issue 29 §2-3): δ is checked against the
total like ε, and the privacy unit is checked, on both charging paths (``charge(period=)`` and
the store's ``charge_store_period``)."""

from __future__ import annotations

import pytest

from dpstream._ledger import SQLiteLedger
from mechanisms import Budget, BudgetExceededError, EventLevel, ParameterError, WEvent

TOTAL = Budget(1.0, 1e-6)


@pytest.mark.parametrize("period", [None, 0, 7])
def test_a_delta_above_the_total_is_refused_with_or_without_a_period(tmp_path, period):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL) as ledger:
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.1, 2e-6), "too much δ", period=period)
        assert ledger.charges == ()
        ledger.charge(Budget(0.1, 1e-6), "all of δ", period=period)  # exactly the total fits
        assert ledger.spent_delta(period) == 1e-6
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.1, 1e-9), "one more δ", period=period)
        assert len(ledger.charges) == 1


def test_delta_adds_up_within_a_period_and_with_charges_tied_to_none(tmp_path):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL) as ledger:
        ledger.charge(Budget(0.1, 0.25e-6), "everything")  # no period: counts in every period
        ledger.charge(Budget(0.1, 0.5e-6), "day 0", period=0)
        ledger.charge(Budget(0.1, 0.2e-6), "day 0 again", period=0)  # 0.95e-6 in period 0
        with pytest.raises(BudgetExceededError, match="period 0"):
            ledger.charge(Budget(0.1, 0.1e-6), "day 0 once more", period=0)
        with pytest.raises(BudgetExceededError, match="period 1"):
            ledger.charge(Budget(0.1, 0.8e-6), "day 1", period=1)  # 0.25 + 0.8 > 1
        ledger.charge(Budget(0.1, 0.7e-6), "day 1", period=1)
        with pytest.raises(BudgetExceededError):  # no period: the worst period's 0.95 + 0.1
            ledger.charge(Budget(0.1, 0.1e-6), "everything again")


def test_the_store_path_refuses_a_delta_above_the_total(tmp_path):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL) as ledger:
        kwargs = {"period": 0, "span": 10, "store": "s"}
        with pytest.raises(BudgetExceededError):
            ledger.charge_store_period(Budget(0.1, 2e-6), "day", **kwargs)
        with pytest.raises(BudgetExceededError):
            ledger.charge_store_period(Budget(0.1, 2e-6), "day", dry=True, **kwargs)
        assert ledger.charge_store_period(Budget(0.1, 1e-6), "day", **kwargs)
        assert ledger.spent_delta(0) == 1e-6


@pytest.mark.parametrize("period", [None, 0])
def test_a_charge_of_another_unit_is_refused_with_or_without_a_period(tmp_path, period):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL, unit=WEvent(48)) as ledger:
        with pytest.raises(ParameterError, match="privacy unit"):
            ledger.charge(Budget(0.1), "event-level", unit=EventLevel(), period=period)
        with pytest.raises(ParameterError, match="privacy unit"):
            ledger.check(Budget(0.1), "event-level", unit=EventLevel(), period=period)
        assert ledger.charges == ()
        ledger.charge(Budget(0.1), "w-event", unit=WEvent(48), period=period)
        assert len(ledger.charges) == 1


def test_the_store_path_refuses_another_unit(tmp_path):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL, unit=WEvent(48)) as ledger:
        kwargs = {"period": 0, "span": 10, "store": "s"}
        for dry in (True, False):
            with pytest.raises(ParameterError, match="privacy unit"):
                ledger.charge_store_period(Budget(0.1), "day", unit=EventLevel(), dry=dry, **kwargs)
        assert ledger.charges == ()
        assert ledger.charge_store_period(Budget(0.1), "day", unit=WEvent(48), **kwargs)


def test_a_refused_charge_releases_the_write_lock(tmp_path):
    """A refusal rolls its transaction back: the next writer (another connection, no waiting)
    takes the lock at once. ``charge_store_period`` refuses inside its transaction; for
    ``charge`` the refusal under the lock is forced in test_ledger_forced_race.py."""
    import sqlite3

    path = tmp_path / "l.db"
    with SQLiteLedger(path, total=TOTAL) as ledger:
        ledger.charge(Budget(0.75), "a")
        for attempt in (
            lambda: ledger.charge(Budget(0.5), "b"),
            lambda: ledger.charge_store_period(Budget(0.5), "b", period=0, span=5, store="s"),
        ):
            with pytest.raises(BudgetExceededError):
                attempt()
            assert not ledger._con.in_transaction
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # raises 'database is locked' if it were held
            other.execute("ROLLBACK")
            other.close()


@pytest.mark.parametrize(
    "label", ["period 0: a query over everything", "period 7: x", "period 5 release", "a: b"]
)
def test_a_charge_tied_to_no_period_counts_in_every_period_whatever_its_label(tmp_path, label):
    """A label that reads like a period ("period 0: ...") must not turn a charge tied to no
    period into a charge of that period (it counted in period 0 only: 0.75 + 0.75 of 1.0 was
    then accepted in period 1)."""
    path = tmp_path / "l.db"
    with SQLiteLedger(path, total=TOTAL) as ledger:
        ledger.charge(Budget(0.75), label)
        assert ledger.spent(1) == ledger.spent(0) == 0.75
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.75), "day 1", period=1)
        assert label in ledger.charges[0].label
    with SQLiteLedger(path) as again:  # read back from the file: still tied to no period
        assert again.spent(1) == 0.75
        with pytest.raises(BudgetExceededError):
            again.charge(Budget(0.75), "day 3", period=3)


def test_refresh_reads_other_connections_charges_and_close_closes(tmp_path):
    import sqlite3

    path = tmp_path / "l.db"
    with SQLiteLedger(path, total=TOTAL) as a, SQLiteLedger(path) as b:
        b.charge(Budget(0.25, 0.5e-6), "by b", period=2)
        b.charge(Budget(0.25), "by b, no period")
        assert a.spent() == 0.0  # a's balance is as of its last read
        a.refresh()
        assert a.spent(2) == 0.5 and a.spent(0) == 0.25 and a.spent_delta(2) == 0.5e-6
        assert [c.label for c in a.charges] == ["period 2: by b", "by b, no period"]
    with pytest.raises(sqlite3.ProgrammingError):  # closed on leaving the block
        a._con.execute("SELECT 1")


# -- budgets as users write them (issue 31 §5), pinned for the mutation target "ledger" --


def test_decimal_totals_and_charges():
    import math
    from fractions import Fraction

    from dpstream._ledger import calibrated, charged_decimal, total_decimal

    assert total_decimal(0.3) == Fraction(3, 10) and total_decimal(1e-6) == Fraction(1, 10**6)
    for text in ("0.1", "0.3", "1e-6", "2.5"):
        c = calibrated(text)
        assert Fraction(c) <= Fraction(text) < Fraction(math.nextafter(c, math.inf))
        assert charged_decimal(c) == Fraction(text)  # charged the decimal written, no more
    assert calibrated(0.5) == 0.5 and calibrated(Fraction(1, 4)) == 0.25  # exact: unchanged
    assert charged_decimal(0.0) == 0
    value = 0.1  # the double above 1/10
    assert Fraction(value) <= charged_decimal(value) < Fraction(math.nextafter(value, math.inf))
    assert charged_decimal(0.1) == Fraction("0.10000000000000001")  # never below the double


def test_three_calibrated_tenths_fit_three_tenths_and_three_doubles_do_not(tmp_path):
    from dpstream._ledger import calibrated

    with SQLiteLedger(tmp_path / "a.db", total=Budget(0.3)) as ledger:
        for _ in range(3):
            ledger.charge(Budget(calibrated("0.1")), "a tenth")
    with SQLiteLedger(tmp_path / "b.db", total=Budget(0.3)) as ledger:
        ledger.charge(Budget(0.1), "a double")
        ledger.charge(Budget(0.1), "a double")
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.1), "a double")


def test_period_names_are_ordinals_or_utc_dates():
    from dpstream._ledger import _period_name

    assert _period_name(5) == "5" and _period_name(-3) == "-3"
    assert _period_name(10**15 - 1) == str(10**15 - 1)
    assert _period_name(1451606400 * 10**9) == "2016-01-01 00:00:00"  # ns since the epoch


def test_exact_decimals_as_text():
    from fractions import Fraction

    from dpstream._ledger import _dec

    assert _dec(Fraction(1, 10)) == "0.1" and _dec(Fraction(3, 4)) == "0.75"
    assert _dec(Fraction(-1, 8)) == "-0.125" and _dec(Fraction(7)) == "7"
    assert _dec(Fraction(1, 10**6)) == "0.000001" and _dec(Fraction(0)) == "0"
    assert _dec(Fraction(1, 3)) == "0.333333333333"  # no short decimal: 12 digits
    assert _dec(Fraction(0.1)) == "0.1"  # a double's 55 places: 12 significant digits


def test_a_folder_is_not_a_ledger(tmp_path):
    with pytest.raises(ParameterError, match="folder"):
        SQLiteLedger(tmp_path, total=TOTAL)


def test_a_store_period_already_charged_by_the_same_store_is_not_charged_again(tmp_path):
    with SQLiteLedger(tmp_path / "l.db", total=TOTAL) as ledger:
        kwargs = {"period": 10, "span": 5, "store": "s1"}
        assert ledger.charge_store_period(Budget(0.5), "day", **kwargs) is True
        assert ledger.charge_store_period(Budget(0.5), "day", **kwargs) is False  # a rerun
        assert ledger.spent(10) == 0.5 and len(ledger.charges) == 1
        assert ledger.charge_store_period(Budget(0.5), "day", dry=True, **kwargs) is False


def test_long_exact_decimals_keep_every_place_up_to_17():
    from fractions import Fraction

    from dpstream._ledger import _dec

    assert _dec(Fraction(1, 10**9)) == "0.000000001"
    assert _dec(Fraction(123, 10**17)) == "0.00000000000000123"
    assert _dec(Fraction(1, 10**18)) == "1e-18"  # 18 places: 12 significant digits
