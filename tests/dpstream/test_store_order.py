"""The order of a store's safety steps (issue 29's mutation survivors of issue 31's code).

* A release of several periods is checked whole against the data set's ledger *before* the
  first period is drawn: a period another store released refuses the whole call, so the new
  periods before it are neither released nor charged (``StoreLedger.check``).
* The data set's ledger a store opened is closed with the store (``close_dataset``).
* A period's commit is preceded by the committed "running" mark in the main file, removed by
  the commit itself (``ReleaseStore._put``): a copy of the main file alone taken inside that
  window is recognised (``test_store_faults.py``) only if the mark was there first.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from dpstream._dataset import ledger_path
from dpstream._ledger import AlreadyReleasedError, SQLiteLedger
from dpstream.store import ReleaseStore

TREE = {"t": ["a", "b"]}
KW = {"epsilon": 1.0, "alpha": 10.0, "k": 10, "hierarchy": TREE, "seed": 3}


def _frame(days: int) -> pd.DataFrame:
    idx = pd.date_range("2016-01-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200.0 + t % 5}, idx)


def test_a_period_released_elsewhere_refuses_the_whole_call_before_any_draw(tmp_path):
    frame = _frame(3)
    with ReleaseStore(tmp_path / "first.db", dataset="meters") as first:
        first.release_optstream(frame.iloc[96:], **KW)  # the last day, released by one store
    with SQLiteLedger(ledger_path("meters")) as book:
        before = len(book.entries())
    with ReleaseStore(tmp_path / "second.db", dataset="meters") as second:
        with pytest.raises(AlreadyReleasedError):
            second.release_optstream(frame, **KW)  # days 0 and 1 are new, day 2 is not
        assert second.ordinals() == set()  # nothing drawn for the new days either
        assert second.ledger.spent(0) == 0 and second.ledger.spent(1) == 0
    with SQLiteLedger(ledger_path("meters")) as book:
        assert len(book.entries()) == before  # and nothing charged to the data set


def test_the_data_set_ledger_a_store_opened_is_closed_with_it(tmp_path):
    store = ReleaseStore(tmp_path / "ops.db", dataset="meters")
    store.release_optstream(_frame(1), **KW)
    book = store.ledger.dataset_ledger
    book._con.execute("SELECT 1")  # open while the store is
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        book._con.execute("SELECT 1")


def test_the_running_mark_is_committed_before_the_period_and_cleared_with_it(tmp_path):
    with ReleaseStore(tmp_path / "ops.db") as store:
        statements: list[str] = []
        store._con.set_trace_callback(statements.append)
        store.release_optstream(_frame(1), **KW)
        store._con.set_trace_callback(None)
    flat = [" ".join(s.split()) for s in statements]
    mark = next(i for i, s in enumerate(flat) if s.startswith("INSERT OR REPLACE INTO meta"))
    period = next(i for i, s in enumerate(flat) if s.startswith("INSERT OR IGNORE INTO periods"))
    assert "'running'" in flat[mark] or "running" in flat[mark]
    assert any(s.startswith("COMMIT") for s in flat[mark:period])  # the mark committed first
    clear = next(i for i, s in enumerate(flat) if i > period and s.startswith("DELETE FROM meta"))
    commit = next(i for i, s in enumerate(flat) if i > period and s.startswith("COMMIT"))
    assert clear < commit  # removed in the period's own transaction
    with sqlite3.connect(f"file:{tmp_path / 'ops.db'}?mode=ro", uri=True) as con:
        assert con.execute("SELECT 1 FROM meta WHERE key = 'running'").fetchone() is None


def test_a_data_set_ledger_given_by_the_caller_stays_open_after_the_store(tmp_path):
    from mechanisms import Budget
    from mechanisms.core._units import WAlphaIndistinguishability

    unit = WAlphaIndistinguishability(w=48, alpha=10.0)
    with SQLiteLedger(tmp_path / "book.db", total=Budget(2.0), unit=unit) as book:
        with ReleaseStore(tmp_path / "ops.db", ledger=book) as store:
            store.release_optstream(_frame(1), **KW)
            assert store.ledger.dataset_ledger is book
        book._con.execute("SELECT 1")  # the caller's: not closed by the store
        assert len(book.entries()) == 1


def test_a_refused_table_less_file_is_not_left_locked(tmp_path):
    from mechanisms import ParameterError

    path = tmp_path / "not_a_ledger.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE other (x)")
    con.close()
    with pytest.raises(ParameterError) as refused:
        SQLiteLedger(path)
    assert "ledger" in str(refused.value)
    # the refusal released its write lock at once (the exception still holds its frames)
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
