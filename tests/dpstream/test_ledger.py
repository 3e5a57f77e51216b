"""SQLiteLedger: a persisted accountant (issue 11 §4): composes across opens and processes,
refuses overspends and other units, keeps a charge made by a release killed mid-way."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream import release_dft, release_laplace, release_optstream, release_pegasus
from dpstream._ledger import SQLiteLedger
from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    EventLevel,
    ParameterError,
    WAlphaIndistinguishability,
    WEvent,
)

UNIT = WAlphaIndistinguishability(w=4, alpha=1.0)


def _charges(path: Path) -> list[tuple[str, float]]:
    con = sqlite3.connect(path)
    try:
        return list(con.execute("SELECT label, epsilon FROM charges ORDER BY id"))
    finally:
        con.close()


def test_charges_persist_and_compose_across_opens(tmp_path):
    path = tmp_path / "budget.db"
    with SQLiteLedger(path, total=Budget(1.0, 1e-6), unit=UNIT) as ledger:
        ledger.charge(Budget(0.3), "first", unit=UNIT)
    with SQLiteLedger(path) as again:
        assert again.total == Budget(1.0, 1e-6)
        assert again.unit == UNIT
        assert again.remaining_epsilon == pytest.approx(0.7)
        assert [c.label for c in again.charges] == ["first"]
        again.charge(Budget(0.7, 1e-6), "second", unit=UNIT)  # exactly the rest: fits
        with pytest.raises(BudgetExceededError):
            again.charge(Budget(1e-9), "third")
    assert [label for label, _ in _charges(path)] == ["first", "second"]


def test_two_connections_cannot_both_spend_the_last_epsilon(tmp_path):
    path = tmp_path / "budget.db"
    first = SQLiteLedger(path, total=Budget(1.0))
    second = SQLiteLedger(path)  # opened before the first charge: its balance is stale
    first.charge(Budget(0.6), "a")
    with pytest.raises(BudgetExceededError):
        second.charge(Budget(0.6), "b")  # re-read under the write lock: refused
    second.charge(Budget(0.4), "c")
    assert [label for label, _ in _charges(path)] == ["a", "c"]
    with pytest.raises(BudgetExceededError):
        first.charge(Budget(0.1), "d")
    first.close()
    second.close()


def test_two_processes_race_for_the_last_epsilon(tmp_path):
    path = tmp_path / "budget.db"
    SQLiteLedger(path, total=Budget(1.0)).close()
    script = textwrap.dedent(
        f"""
        import sys
        from dpstream._ledger import SQLiteLedger
        from mechanisms import Budget, BudgetExceededError
        ledger = SQLiteLedger({str(path)!r})
        try:
            ledger.charge(Budget(0.75), sys.argv[1])
            print("charged")
        except BudgetExceededError:
            print("refused")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OPENBLAS_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, f"p{i}"], stdout=subprocess.PIPE, text=True, env=env
        )
        for i in range(2)
    ]
    outs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert outs == ["charged", "refused"]
    assert len(_charges(path)) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "no ledger"),
        ({"total": 1.0}, "must be a Budget"),
        ({"total": Budget(1.0), "unit": "w-event"}, "PrivacyUnit"),
    ],
)
def test_bad_arguments_are_refused(tmp_path, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        SQLiteLedger(tmp_path / "new.db", **kwargs)
    assert not (tmp_path / "new.db").exists()


def test_reopening_with_another_total_or_unit_is_refused(tmp_path):
    path = tmp_path / "budget.db"
    SQLiteLedger(path, total=Budget(1.0), unit=WEvent(w=48)).close()
    with pytest.raises(ParameterError, match="created with a total"):
        SQLiteLedger(path, total=Budget(2.0))
    with pytest.raises(ParameterError, match="one ledger per privacy unit"):
        SQLiteLedger(path, unit=EventLevel())
    SQLiteLedger(path, total=Budget(1.0), unit=WEvent(w=48)).close()  # the same: accepted


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not a database")
    with pytest.raises(ParameterError, match="not a dpstream ledger"):
        SQLiteLedger(path)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(ParameterError, match="not a dpstream ledger"):
        SQLiteLedger(other)


def _frame(n: int = 96, columns: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.uniform(0, 10, size=(n, columns)), columns=list("ab")[:columns])


@pytest.mark.parametrize(
    "release", [release_laplace, release_dft, release_pegasus, release_optstream]
)
def test_every_pipeline_charges_the_ledger_and_records_the_release(tmp_path, release):
    path = tmp_path / "budget.db"
    ledger = SQLiteLedger(path, total=Budget(1.0), unit=UNIT)
    extra = {"k": 2} if release in (release_dft, release_optstream) else {}
    out = release(_frame(), epsilon=0.4, w=4, alpha=1.0, seed=3, ledger=ledger, **extra)
    assert _charges(path) == [(release.__name__, 0.4)]
    record = out.attrs["privacy"]
    assert record["unit"] == "(w, alpha)" and record["epsilon"] == 0.4
    assert record["w"] == 4 and record["alpha"] == 1.0
    assert record["seeded"] is True and record["release"] is False
    assert record["mechanism"] == release.__name__.removeprefix("release_")
    # A second release of 0.4 fits, a third does not: refused before any draw, nothing charged.
    kwargs = {"epsilon": 0.4, "w": 4, "alpha": 1.0, "ledger": ledger, **extra}
    release(_frame(), **kwargs)
    with pytest.raises(BudgetExceededError):
        release(_frame(), **kwargs)
    assert len(_charges(path)) == 2


def test_a_pipeline_refuses_a_ledger_of_another_unit_before_any_draw(tmp_path):
    ledger = BudgetLedger(Budget(5.0), unit=EventLevel())
    with pytest.raises(ParameterError, match="privacy unit"):
        release_laplace(_frame(), alpha=1.0, epsilon=1.0, w=4, ledger=ledger)
    assert ledger.charges == ()
    with pytest.raises(ParameterError, match="'ledger' parameter of release_optstream"):
        release_optstream(_frame(), alpha=1.0, epsilon=1.0, w=4, k=2, ledger="budget.db")


def test_bad_input_charges_nothing(tmp_path):
    ledger = SQLiteLedger(tmp_path / "b.db", total=Budget(1.0))
    bad = _frame()
    bad.iloc[3, 0] = np.nan
    for release in (release_laplace, release_pegasus, release_optstream):
        with pytest.raises(ValueError):
            release(bad, epsilon=0.5, alpha=1.0, w=4, ledger=ledger)
    with pytest.raises((ValueError, TypeError)):  # a bad seed: refused before the charge
        release_laplace(_frame(), alpha=1.0, epsilon=0.5, w=4, seed="x", ledger=ledger)
    assert _charges(tmp_path / "b.db") == []


def test_a_release_killed_mid_way_keeps_its_charge(tmp_path):
    """Kill (SIGKILL) a release after its charge is committed and before it finishes: the
    ledger file is intact, holds the charge, and nothing was written."""
    path, out = tmp_path / "budget.db", tmp_path / "released.csv"
    SQLiteLedger(path, total=Budget(1.0), unit=WAlphaIndistinguishability(w=48, alpha=1.0)).close()
    script = textwrap.dedent(
        f"""
        import time
        import numpy as np, pandas as pd
        from dpstream import release_laplace
        from dpstream._ledger import SQLiteLedger
        frame = pd.DataFrame({{"a": np.ones(48 * 200)}})
        ledger = SQLiteLedger({str(path)!r})
        out = release_laplace(frame, epsilon=0.25, alpha=1.0, w=48, ledger=ledger,
                              progress=lambda n: time.sleep(60))  # mid-release: stalls
        out.to_csv({str(out)!r})
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 120
        while not _charges_or_none(path) and time.monotonic() < deadline:
            assert proc.poll() is None, "the release ended before it was killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover - only if the wait above failed
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    with SQLiteLedger(path) as ledger:
        assert [(c.label, c.budget.epsilon) for c in ledger.charges] == [("release_laplace", 0.25)]
        assert ledger.remaining_epsilon == 0.75
        ledger.charge(Budget(0.75), "after the crash")  # the file still works


def _charges_or_none(path: Path) -> list:
    try:
        return _charges(path)
    except sqlite3.OperationalError:  # locked by the writer for an instant
        return []


# -- one ledger (issue 15 §2): the store's accountant is this class on the store's table --


def test_a_ledger_file_of_before_periods_is_read_and_keeps_composing(tmp_path):
    """A file written before charges had a period: opened, migrated, its charges still count."""
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL,
            epsilon REAL NOT NULL, delta REAL NOT NULL, unit TEXT NOT NULL, created TEXT NOT NULL);
        INSERT INTO meta VALUES ('application', 'dpstream-ledger'), ('schema_version', '1'),
            ('total_epsilon', '1.0'), ('total_delta', '0.0'), ('unit', 'null'),
            ('created', '2026-01-01');
        INSERT INTO charges (label, epsilon, delta, unit, created)
            VALUES ('old release', 0.75, 0.0, 'null', '2026-01-01');
        """
    )
    con.commit()
    con.close()
    with SQLiteLedger(path) as ledger:
        assert ledger.remaining_epsilon == pytest.approx(0.25)
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.5), "too much")
        ledger.charge(Budget(0.25), "the rest")
    with SQLiteLedger(path) as ledger:
        assert [c.label for c in ledger.charges] == ["old release", "the rest"]


def test_periods_compose_in_parallel_and_unperiod_charges_with_everything(tmp_path):
    """The store's accounting, on a plain ledger file: one implementation for both."""
    with SQLiteLedger(tmp_path / "l.db", total=Budget(1.0)) as ledger:
        ledger.charge(Budget(0.75), "day 0", period=0)
        ledger.charge(Budget(0.75), "day 1", period=1)  # another window: its own budget
        assert ledger.spent(0) == ledger.spent(1) == 0.75 and ledger.spent() == 0.75
        with pytest.raises(BudgetExceededError, match="period 0"):
            ledger.charge(Budget(0.5), "day 0 again", period=0)
        ledger.charge(Budget(0.25), "a query over everything")  # no period: every period
        ledger.charge(Budget(0.25), "day 2", period=2)  # 0.25 + 0.25 fits ...
        with pytest.raises(BudgetExceededError, match="period 2"):
            ledger.charge(Budget(0.75), "day 2 more", period=2)  # ... 0.5 + 0.75 does not
    with SQLiteLedger(tmp_path / "l.db") as again:  # restored with its periods
        assert again.spent(1) == 1.0 and again.spent(2) == 0.5 and again.remaining_epsilon == 0.0


def test_the_store_ledger_is_the_sqlite_ledger(tmp_path):
    from dpstream.store import ReleaseStore, StoreLedger

    idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    with ReleaseStore(tmp_path / "ops.db") as store:
        store.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy={"t": ["a", "b"]}, seed=1)
        assert isinstance(store.ledger, StoreLedger) and isinstance(store.ledger, SQLiteLedger)
        view = SQLiteLedger.on_connection(store._con, Budget(1.0), unit=store.ledger.unit)
        assert [c.label for c in view.charges] == [c.label for c in store.ledger.charges]
        assert view.spent(0) == view.spent(1) == 1.0
        with pytest.raises(BudgetExceededError):  # the same table, the same refusals
            view.charge(Budget(0.1), "again", period=1)
