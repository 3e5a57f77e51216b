"""A privacy accountant persisted in a SQLite file: one budget across runs and processes.

:class:`SQLiteLedger` is a :class:`mechanisms.BudgetLedger` whose charges live in a file the
user names (``dpstream release ... --ledger budget.db``). It is created once with its total
budget and privacy unit; every later open reads them back, so releases made by separate runs,
or by two processes at once, compose sequentially against one total (Dwork and Roth 2014,
Thm. 3.16) and an overspend is refused.

Durability (issue 11 §4): a charge is one SQLite transaction, opened with ``BEGIN IMMEDIATE``
(the write lock is taken before the balance is read, so two processes cannot both spend the
last ε), committed before the release draws any noise. A release killed after its charge keeps
the charge (nothing is released without it), and a charge never half-exists: SQLite's rollback
journal makes the commit atomic. Standard library ``sqlite3`` only (DB-API habits: one
connection, parameterised SQL, the schema version stored in the file).

One implementation for both ledgers of dpstream (issue 15 §2). A charge may belong to a
*period* (the release store's key of a released w-period): the spend of a period is its own
charges plus every charge tied to no period, and every period's spend must stay within the
total ([FV19] §5.1; Kellaris et al. 2014 Thm. 3: a stream released period by period, every
window of w steps within ε, is w-event ε-private however many periods follow). Charges tied to
no period compose sequentially with everything (Dwork and Roth 2014, Thm. 3.16), so a ledger
file whose charges carry no period -- every ``--ledger`` file -- is the plain sequential
accountant. :class:`dpstream.store.StoreLedger` is this class on the release store's own
connection and ``charges`` table (:meth:`SQLiteLedger.on_connection`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    Charge,
    ParameterError,
    PrivacyUnit,
)

from ._units_json import _describe, unit_from_json, unit_to_json

__all__ = [
    "CHARGES_TABLE",
    "SCHEMA_VERSION",
    "SQLiteLedger",
    "transaction",
    "unit_from_json",
    "unit_to_json",
]

#: Version of the file's tables; stored in the file, checked on open.
SCHEMA_VERSION = 1
_APPLICATION = "dpstream-ledger"
_OWNER = "SQLiteLedger"
#: Seconds a charge waits for another process's charge to commit.
_LOCK_TIMEOUT = 30.0

#: The charges table of every dpstream ledger (a ledger file's, a release store's).
CHARGES_TABLE = (
    "CREATE TABLE IF NOT EXISTS charges ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, period INTEGER, label TEXT NOT NULL,"
    " epsilon REAL NOT NULL, delta REAL NOT NULL, unit TEXT NOT NULL, created TEXT NOT NULL)"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    CHARGES_TABLE,
)
_PREFIX = "period "


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception) on a connection opened
    with ``isolation_level=None``: the write lock is taken before anything is read."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        _rollback(con)
        raise
    con.execute("COMMIT")


def _label(period: int | None, label: str) -> str:
    """A charge's in-memory label: the period (if any) rides in front of it."""
    return label if period is None else f"{_PREFIX}{int(period)}: {label}"


def _period_of(label: str) -> int | None:
    if label.startswith(_PREFIX) and ": " in label:
        head = label[len(_PREFIX) : label.index(": ")]
        if head.lstrip("-").isdigit():
            return int(head)
    return None


class SQLiteLedger(BudgetLedger):
    """A :class:`~mechanisms.BudgetLedger` whose charges are kept in a SQLite file.

    Parameters
    ----------
    path : str or pathlib.Path
        The ledger file. Created on first use (then ``total`` is required).
    total : mechanisms.Budget, optional
        The whole budget. Required to create the file; when reopening, omit it or give the
        stored one (anything else is a :class:`~mechanisms.ParameterError`).
    unit : mechanisms.PrivacyUnit, optional
        The privacy unit every charge must be made under (stored on creation; reopening
        with another unit is refused). None at creation: any unit is accepted.

    Raises
    ------
    ParameterError
        A missing file without ``total``; a total or unit that differs from the file's; a file
        that is not a dpstream ledger or of another schema version.

    Notes
    -----
    *Privacy*: sequential composition over every charge in the file (Dwork and Roth 2014,
    Thm. 3.16); the balance is re-read under the write lock at each charge, so charges by
    other processes count. Charges are durable before they count (``_persist``): a release
    that dies after its charge has spent it.

    Examples
    --------
    >>> import tempfile, os
    >>> from mechanisms import Budget
    >>> path = os.path.join(tempfile.mkdtemp(), "budget.db")
    >>> ledger = SQLiteLedger(path, total=Budget(1.0))
    >>> ledger.charge(Budget(0.25), "first release")
    >>> ledger.close()
    >>> SQLiteLedger(path).remaining_epsilon
    0.75
    """

    __slots__ = ("_by_period", "_con", "_global", "_period", "path")

    def __init__(
        self,
        path: str | Path,
        *,
        total: Budget | None = None,
        unit: PrivacyUnit | None = None,
    ) -> None:
        if not isinstance(path, str | Path) or not str(path):
            raise ParameterError(
                f"The 'path' parameter of {_OWNER} must be a file path. Got {path!r} instead."
            )
        if total is not None and not isinstance(total, Budget):
            raise ParameterError(
                f"The 'total' parameter of {_OWNER} must be a Budget or None. Got {total!r}."
            )
        unit_text = unit_to_json(unit)
        self.path = Path(path)
        if self.path.is_dir():
            raise ParameterError(
                f"The 'path' parameter of {_OWNER} must be a file, not a folder. Got {str(path)!r}."
            )
        exists = self.path.is_file() and self.path.stat().st_size > 0
        if not exists and total is None:
            raise ParameterError(
                f"There is no ledger at {str(path)!r}: give its total budget to create it "
                "(the CLI's --budget-epsilon)."
            )
        self._con = _connect(self.path)
        try:
            stored_total, stored_unit = self._open(total, unit_text)
        except BaseException:
            self._con.close()
            raise
        self._start(stored_total, stored_unit)

    @classmethod
    def on_connection(
        cls, con: sqlite3.Connection, total: Budget, *, unit: PrivacyUnit | None = None
    ) -> SQLiteLedger:
        """The ledger kept in the ``charges`` table (:data:`CHARGES_TABLE`) of an open
        connection (``isolation_level=None``) -- the release store's. Its owner created the
        table and fixes ``total`` and ``unit`` (the store's configuration)."""
        ledger = cls.__new__(cls)
        ledger._con = con
        ledger.path = None
        ledger._start(total, unit)
        return ledger

    def _start(self, total: Budget, unit: PrivacyUnit | None) -> None:
        self._by_period: dict[int, Fraction] = {}
        self._global = Fraction(0)
        self._period: int | None = None
        BudgetLedger.__init__(self, total, unit=unit)

    # -- file layout --

    def _open(self, total: Budget | None, unit_text: str) -> tuple[Budget, PrivacyUnit | None]:
        """Create the tables and metadata (first use), or read and check them."""
        con = self._con
        try:
            con.execute("BEGIN IMMEDIATE")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            if not tables:
                if total is None:  # an empty file, e.g. made by a failed create
                    raise ParameterError(
                        f"There is no ledger at {str(self.path)!r}: give its total budget to "
                        "create it (the CLI's --budget-epsilon)."
                    )
                for sql in _SCHEMA:
                    con.execute(sql)
                tables = {"meta", "charges"}
                con.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("application", _APPLICATION),
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("total_epsilon", repr(float(total.epsilon))),
                        ("total_delta", repr(float(total.delta))),
                        ("unit", unit_text),
                        ("created", _now()),
                    ],
                )
            meta = dict(con.execute("SELECT key, value FROM meta"))
            if "charges" in tables:  # files of before issue 15: add the (nullable) period
                cols = {row[1] for row in con.execute("PRAGMA table_info(charges)")}
                if "period" not in cols:
                    con.execute("ALTER TABLE charges ADD COLUMN period INTEGER")
            con.execute("COMMIT")
        except sqlite3.DatabaseError:
            _rollback(con)
            raise self._not_a_ledger() from None
        except BaseException:
            _rollback(con)
            raise
        if meta.get("application") != _APPLICATION:
            raise self._not_a_ledger()
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise ParameterError(
                f"The ledger {str(self.path)!r} has schema version "
                f"{meta.get('schema_version')!r}; this dpstream reads version {SCHEMA_VERSION}."
            )
        try:
            stored = Budget(float(meta["total_epsilon"]), float(meta["total_delta"]))
            stored_unit = unit_from_json(meta["unit"])
        except (KeyError, ValueError, TypeError):
            raise self._not_a_ledger() from None
        if total is not None and total != stored:
            raise ParameterError(
                f"The ledger {str(self.path)!r} was created with a total of {stored}; got "
                f"{total}. Omit the total to use the file's, or name a new ledger file."
            )
        if unit_text != json.dumps(None) and unit_text != meta["unit"]:
            raise ParameterError(
                f"The ledger {str(self.path)!r} accounts for "
                f"{_describe(stored_unit)}; got {_describe(unit_from_json(unit_text))}. "
                "Create one ledger per privacy unit."
            )
        return stored, stored_unit

    def _not_a_ledger(self) -> ParameterError:
        return ParameterError(
            f"The file {str(self.path)!r} is not a dpstream ledger (a SQLite file written by "
            "SQLiteLedger). Name a new file to create one."
        )

    def _rows(self) -> list[Charge]:
        rows = self._con.execute("SELECT period, label, epsilon, delta FROM charges ORDER BY id")
        return [Charge(_label(p, label), Budget(eps, dlt)) for p, label, eps, dlt in rows]

    def _reload(self, charges: list[Charge]) -> None:
        self._eps = Fraction(0)
        self._dlt = Fraction(0)
        self._charges = []
        self._by_period = {}
        self._global = Fraction(0)
        for charge in charges:
            self._record(charge)

    # -- persistence hooks of BudgetLedger --

    def _restore(self) -> list[Charge]:
        return self._rows()

    def _record(self, charge: Charge) -> None:
        """Count a charge: to its period, or (no period) to every period."""
        period = _period_of(charge.label)
        eps = Fraction(charge.budget.epsilon)
        if period is None:
            self._global += eps
        else:
            self._by_period[period] = self._by_period.get(period, Fraction(0)) + eps
        self._eps = self._global + max(self._by_period.values(), default=Fraction(0))
        self._dlt += Fraction(charge.budget.delta)
        self._charges.append(charge)

    def _persist(self, charge: Charge) -> None:
        """One transaction: take the write lock, re-read the balance (other processes'
        charges count), refuse an overspend, insert, commit. Raising records nothing."""
        period = _period_of(charge.label)
        label = charge.label.split(": ", 1)[1] if period is not None else charge.label
        with transaction(self._con) as con:
            self._reload(self._rows())
            self._check_now(charge.budget, charge.label, None, period)
            con.execute(
                "INSERT INTO charges (period, label, epsilon, delta, unit, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    period,
                    label,
                    float(charge.budget.epsilon),
                    float(charge.budget.delta),
                    unit_to_json(self.unit),
                    _now(),
                ),
            )

    def _check_now(self, budget, label: str, unit, period: int | None) -> None:
        """:meth:`check` on the balance held in memory."""
        if period is None:
            BudgetLedger.check(self, budget, label, unit=unit)
            return
        self.check_unit(unit, label or "the release")
        if not isinstance(budget, Budget):
            BudgetLedger.check(self, budget, label, unit=unit)  # raises the ParameterError
        spent = self._global + self._by_period.get(int(period), Fraction(0))
        eps = spent + Fraction(budget.epsilon)
        dlt = self._dlt + Fraction(budget.delta)
        if eps > Fraction(self.total.epsilon) or dlt > Fraction(self.total.delta):
            remaining = float(Fraction(self.total.epsilon) - spent)
            raise BudgetExceededError(budget, f"(ε={remaining:g} for period {period})", label)

    def check(
        self,
        budget: Budget,
        label: str = "",
        *,
        unit: PrivacyUnit | None = None,
        period: int | None = None,
    ) -> None:
        """As :meth:`mechanisms.BudgetLedger.check`, on the file's current balance: the
        period's spend (for a charge tied to no period, the worst period's) plus ``budget``
        must stay within the total."""
        self._reload(self._rows())
        self._check_now(budget, label, unit, self._period if period is None else int(period))

    def charge(
        self,
        budget: Budget,
        label: str = "",
        *,
        unit: PrivacyUnit | None = None,
        period: int | None = None,
    ) -> None:
        """Charge ``budget`` to ``period`` (None: to every period), or raise and record nothing."""
        self._period = None if period is None else int(period)
        try:
            BudgetLedger.charge(self, budget, _label(self._period, label), unit=unit)
        finally:
            self._period = None

    def spent(self, period: int | None = None) -> float:
        """ε charged to ``period`` (its own charges plus those tied to no period); with no
        period, the worst period's (everything, for a ledger without periods)."""
        if period is None:
            return float(self._eps)
        return float(self._global + self._by_period.get(int(period), Fraction(0)))

    def refresh(self) -> None:
        """Re-read the charges (made by this or any other process)."""
        self._reload(self._rows())

    def close(self) -> None:
        """Close the file (charges already made are committed)."""
        self._con.close()

    def __enter__(self) -> SQLiteLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "a connection" if self.path is None else repr(str(self.path))
        return f"SQLiteLedger({where}, total={self.total}, remaining={self.remaining_text})"


def _connect(path: Path) -> sqlite3.Connection:
    try:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        # The rollback journal with synchronous=FULL (SQLite's default) makes a commit durable.
        con = sqlite3.connect(path, timeout=_LOCK_TIMEOUT, isolation_level=None)
    except sqlite3.Error as exc:
        raise ParameterError(
            f"The ledger file {str(path)!r} cannot be opened ({exc}). Check the folder exists "
            "and is writable."
        ) from None
    return con


def _rollback(con: sqlite3.Connection) -> None:
    if con.in_transaction:
        con.execute("ROLLBACK")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
