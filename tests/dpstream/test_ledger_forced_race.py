"""The ledger's check under the write lock, with the race forced, not left to chance (issue 29 §1).

Two ledgers on one file are driven step by step through two seams of :class:`SQLiteLedger`:
``before_write`` runs after the unlocked pre-check of a charge and before its transaction
(``_persist``), ``under_lock`` after the balance was re-read and checked *under* the write lock
and before the insert. Forced interleavings:

* *stale pre-check*: A passes its pre-check, B spends the budget, then A writes: A must be
  refused under the lock (in one process, and with A in another process);
* *lock held*: A holds the write lock having checked its balance, B passes its own pre-check
  on the balance A has not yet written, then tries to write: B must wait for A and be refused
  (A in another process, synchronised by files, no sleeps deciding the order).

For ε and δ, global and per period. The meta-tests replay the same scenarios on ledgers with
the locked check removed, the balance not re-read under the lock, or the lock taken late
(``BEGIN`` instead of ``BEGIN IMMEDIATE``), and assert the scenario then *does* overspend: the
tests can fail.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import pytest

import dpstream._ledger as ledger_module
from dpstream._ledger import SQLiteLedger
from mechanisms import Budget, BudgetExceededError

TOTAL = Budget(1.0, 1e-6)
#: Two of these overspend the total: the ε one in ε, the δ one in δ only.
CHARGES = {"epsilon": Budget(0.75), "delta": Budget(0.25, 0.75e-6)}
CASES = [(kind, period) for kind in CHARGES for period in (None, 3)]
#: Deadlock guard for the file barriers (never reached when the code works; not a timing test).
_WAIT = 120.0


class HookedLedger(SQLiteLedger):
    """An SQLiteLedger with two one-shot seams (module notes)."""

    def __init__(self, *args, before_write=None, under_lock=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.before_write = before_write
        self.under_lock = under_lock

    def _persist(self, charge, *args, **kwargs):
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()
        super()._persist(charge, *args, **kwargs)

    def _check_now(self, budget, label, unit, period):
        super()._check_now(budget, label, unit, period)
        if self._con.in_transaction and self.under_lock is not None:
            hook, self.under_lock = self.under_lock, None
            hook()


# -- the mutants of the meta-tests (each a broken ledger the scenarios must expose) --

_REAL_CHECK_NOW = SQLiteLedger._check_now
_REAL_RELOAD = SQLiteLedger._reload


def _no_locked_check(self, budget, label, unit, period):
    if not self._con.in_transaction:  # the pre-check stays, the check under the lock goes
        _REAL_CHECK_NOW(self, budget, label, unit, period)


def _no_locked_reload(self, charges):
    if not self._con.in_transaction:  # the balance is not re-read under the lock
        _REAL_RELOAD(self, charges)


MUTANTS = {"no_locked_check": ("_check_now", _no_locked_check)}
MUTANTS["no_locked_reload"] = ("_reload", _no_locked_reload)


def _apply_mutant(monkeypatch, name):
    attr, func = MUTANTS[name]
    monkeypatch.setattr(SQLiteLedger, attr, func)


def _file_spend(path: Path) -> tuple[Fraction, Fraction, int]:
    """(ε, δ, rows) charged in the file, straight from SQL (exact sums of the stored floats)."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT epsilon, delta FROM charges").fetchall()
    finally:
        con.close()
    eps = sum((Fraction(e) for e, _ in rows), Fraction(0))
    dlt = sum((Fraction(d) for _, d in rows), Fraction(0))
    return eps, dlt, len(rows)


def _overspent(path: Path) -> bool:
    eps, dlt, _ = _file_spend(path)
    return eps > Fraction(TOTAL.epsilon) or dlt > Fraction(TOTAL.delta)


def _lock_is_free(path: Path) -> bool:
    """Another connection can take the write lock at once (nobody holds it)."""
    con = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def _stale_precheck(path: Path, kind: str, period: int | None) -> str:
    """In one process: A pre-checks, B charges and commits, A writes. Returns A's outcome."""
    SQLiteLedger(path, total=TOTAL).close()
    budget = CHARGES[kind]
    other = SQLiteLedger(path)
    first = HookedLedger(path, before_write=lambda: other.charge(budget, "B", period=period))
    try:
        first.charge(budget, "A", period=period)
        outcome = "charged"
    except BudgetExceededError:
        outcome = "refused"
    finally:
        assert not first._con.in_transaction  # a refusal inside the transaction rolled back
        first.close()
        other.close()
    return outcome


@pytest.mark.parametrize(("kind", "period"), CASES)
def test_a_stale_precheck_is_refused_under_the_lock(tmp_path, kind, period):
    path = tmp_path / "l.db"
    assert _stale_precheck(path, kind, period) == "refused"
    eps, dlt, rows = _file_spend(path)
    assert rows == 1 and (eps, dlt) == (
        Fraction(CHARGES[kind].epsilon),
        Fraction(CHARGES[kind].delta),
    )
    assert _lock_is_free(path)  # the refused charge released the write lock
    with SQLiteLedger(path) as again:  # and the ledger still works: the rest fits
        rest = Budget(0.25) if kind == "epsilon" else Budget(0.5, 0.2e-6)
        again.charge(rest, "the rest", period=period)
        assert not _overspent(path)


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
@pytest.mark.parametrize(("kind", "period"), [("epsilon", None), ("delta", 3)])
def test_meta_the_stale_precheck_scenario_catches_a_ledger_without_the_locked_check(
    tmp_path, monkeypatch, mutant, kind, period
):
    _apply_mutant(monkeypatch, mutant)
    path = tmp_path / "l.db"
    assert _stale_precheck(path, kind, period) == "charged"
    assert _overspent(path)  # 1.5 of a 1.0 budget: what the real ledger must prevent


def test_the_balance_is_checked_while_the_write_lock_is_held(tmp_path):
    """Under the lock (after the re-read and the check, before the insert) nobody else can
    take the write lock: two writers cannot both pass the check on the same balance."""
    path = tmp_path / "l.db"
    SQLiteLedger(path, total=TOTAL).close()
    seen = []
    with HookedLedger(path, under_lock=lambda: seen.append(_lock_is_free(path))) as ledger:
        ledger.charge(Budget(0.5), "A")
    assert seen == [False]
    assert _lock_is_free(path)


def test_meta_a_late_lock_is_caught(tmp_path, monkeypatch):
    """``BEGIN`` (deferred) instead of ``BEGIN IMMEDIATE``: the balance is read without the
    write lock, and the test above sees it."""
    real = ledger_module.transaction.__wrapped__

    def deferred(con, what=None):
        execute = con.execute

        class Deferred:  # the connection, with BEGIN IMMEDIATE made BEGIN
            def __getattr__(self, name):
                return getattr(con, name)

            def execute(self, sql, *args):
                return execute("BEGIN" if sql == "BEGIN IMMEDIATE" else sql, *args)

        return real(Deferred(), what)

    from contextlib import contextmanager

    monkeypatch.setattr(ledger_module, "transaction", contextmanager(deferred))
    path = tmp_path / "l.db"
    SQLiteLedger(path, total=TOTAL).close()
    seen = []
    with HookedLedger(path, under_lock=lambda: seen.append(_lock_is_free(path))) as ledger:
        ledger.charge(Budget(0.5), "A")
    assert seen == [True]


def test_a_global_charge_between_a_store_period_check_and_its_charge_counts(tmp_path):
    """The store path (``charge_store_period``): its dry check is stale once another process
    has charged; the charge re-reads under the lock and is refused."""
    path = tmp_path / "l.db"
    SQLiteLedger(path, total=TOTAL).close()
    with SQLiteLedger(path) as a, SQLiteLedger(path) as b:
        assert a.charge_store_period(Budget(0.75), "day", period=0, span=10, store="s", dry=True)
        b.charge(Budget(0.75), "a query over everything")
        with pytest.raises(BudgetExceededError):
            a.charge_store_period(Budget(0.75), "day", period=0, span=10, store="s")
        assert not a._con.in_transaction
    assert not _overspent(path) and _lock_is_free(path)


def test_meta_the_store_period_scenario_catches_a_stale_balance(tmp_path, monkeypatch):
    _apply_mutant(monkeypatch, "no_locked_reload")
    path = tmp_path / "l.db"
    SQLiteLedger(path, total=TOTAL).close()
    with SQLiteLedger(path) as a, SQLiteLedger(path) as b:
        a.charge_store_period(Budget(0.75), "day", period=0, span=10, store="s", dry=True)
        b.charge(Budget(0.75), "a query over everything")
        a.charge_store_period(Budget(0.75), "day", period=0, span=10, store="s")
    assert _overspent(path)


# -- across processes: A in a child process, B here, synchronised by files --

_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import test_ledger_forced_race as t
    from mechanisms import BudgetExceededError

    path, sync, scenario, kind, period, mutant = sys.argv[2:8]
    period = None if period == "none" else int(period)
    sync = Path(sync)
    if mutant != "none":
        attr, func = t.MUTANTS[mutant]
        setattr(t.SQLiteLedger, attr, func)

    def signal_and_wait(mine, theirs):
        (sync / mine).touch()
        deadline = time.monotonic() + t._WAIT
        while not (sync / theirs).exists():
            if time.monotonic() > deadline:
                raise SystemExit("barrier timed out")
            time.sleep(0.002)

    hook = lambda: signal_and_wait("a_ready", "b_done")
    kwargs = {"before_write": hook} if scenario == "stale" else {"under_lock": hook}
    ledger = t.HookedLedger(path, **kwargs)
    try:
        ledger.charge(t.CHARGES[kind], "A", period=period)
        print("charged")
    except BudgetExceededError:
        print("refused")
    """
)


def _wait_for(file: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + _WAIT
    while not file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            raise AssertionError(f"child did not reach the barrier: {out!r} {err!r}")
        time.sleep(0.002)


def _cross_process(tmp_path: Path, scenario: str, kind: str, period, mutant: str = "none"):
    """Returns (A's outcome, B's outcome). ``stale``: A (child) pre-checks, B charges, A writes.
    ``locked``: A (child) holds the write lock after its check; B pre-checks on the balance A
    has not written yet, then tries to write (it waits for A's commit)."""
    path, sync = tmp_path / "l.db", tmp_path / "sync"
    sync.mkdir()
    SQLiteLedger(path, total=TOTAL).close()
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OPENBLAS_NUM_THREADS": "1"}
    here = str(Path(__file__).parent)
    args = [str(path), str(sync), scenario, kind, "none" if period is None else str(period)]
    budget = CHARGES[kind]
    # B is opened before A starts (opening reads the file under the lock A will hold)
    b = HookedLedger(path, before_write=lambda: (sync / "b_done").touch())
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, here, *args, mutant],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_for(sync / "a_ready", child)
        if scenario == "stale":
            b.before_write = None
            b.charge(budget, "B", period=period)
            (sync / "b_done").touch()
            b_outcome = "charged"
        else:
            try:
                b.charge(budget, "B", period=period)
                b_outcome = "charged"
            except BudgetExceededError:
                b_outcome = "refused"
            assert not b._con.in_transaction
        out, err = child.communicate(timeout=_WAIT)
    finally:
        b.close()
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    return out.strip(), b_outcome


@pytest.mark.parametrize("scenario", ["stale", "locked"])
@pytest.mark.parametrize(("kind", "period"), [("epsilon", None), ("delta", 3)])
def test_two_processes_forced_race_spend_at_most_the_total(tmp_path, scenario, kind, period):
    a, b = _cross_process(tmp_path, scenario, kind, period)
    # stale: B charged first, A is refused; locked: A holds the lock and charges, B is refused
    assert (a, b) == (("refused", "charged") if scenario == "stale" else ("charged", "refused"))
    assert not _overspent(tmp_path / "l.db") and _file_spend(tmp_path / "l.db")[2] == 1
    assert _lock_is_free(tmp_path / "l.db")


@pytest.mark.parametrize(
    ("scenario", "mutant"), [("stale", "no_locked_check"), ("locked", "no_locked_reload")]
)
def test_meta_the_two_process_race_catches_a_ledger_without_the_locked_check(
    tmp_path, monkeypatch, scenario, mutant
):
    _apply_mutant(monkeypatch, mutant)  # in B (here) and, through argv, in A
    a, b = _cross_process(tmp_path, scenario, "epsilon", None, mutant)
    assert (a, b) == ("charged", "charged")
    assert _overspent(tmp_path / "l.db")
