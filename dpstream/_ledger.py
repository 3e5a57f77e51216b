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
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from mechanisms import (
    Budget,
    BudgetLedger,
    Charge,
    EventLevel,
    LocalDP,
    ParameterError,
    PrivacyUnit,
    WAlphaIndistinguishability,
    WEvent,
)

__all__ = ["SCHEMA_VERSION", "SQLiteLedger", "unit_from_json", "unit_to_json"]

#: Version of the file's tables; stored in the file, checked on open.
SCHEMA_VERSION = 1
_APPLICATION = "dpstream-ledger"
_OWNER = "SQLiteLedger"
#: Seconds a charge waits for another process's charge to commit.
_LOCK_TIMEOUT = 30.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS charges ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL,"
    " epsilon REAL NOT NULL, delta REAL NOT NULL, unit TEXT NOT NULL, created TEXT NOT NULL)",
)


def unit_to_json(unit: PrivacyUnit | None) -> str:
    """A privacy unit as a short JSON text (the file's representation)."""
    if unit is None:
        return json.dumps(None)
    if isinstance(unit, WAlphaIndistinguishability):
        data = {"kind": "(w, alpha)", "w": unit.w, "alpha": unit.alpha}
    elif isinstance(unit, WEvent):
        data = {"kind": "w-event", "w": unit.w}
    elif isinstance(unit, EventLevel):
        data = {"kind": "event"}
    elif isinstance(unit, LocalDP):
        data = {"kind": "local"}
    else:
        raise ParameterError(
            f"The 'unit' parameter of {_OWNER} must be a PrivacyUnit (EventLevel(), WEvent(w), "
            f"WAlphaIndistinguishability(w, alpha), LocalDP()). Got {unit!r} instead."
        )
    return json.dumps(data, sort_keys=True)


def unit_from_json(text: str) -> PrivacyUnit | None:
    """Inverse of :func:`unit_to_json`."""
    data = json.loads(text)
    if data is None:
        return None
    kind = data["kind"]
    if kind == "(w, alpha)":
        return WAlphaIndistinguishability(w=int(data["w"]), alpha=float(data["alpha"]))
    if kind == "w-event":
        return WEvent(w=int(data["w"]))
    if kind == "event":
        return EventLevel()
    if kind == "local":
        return LocalDP()
    raise ValueError(kind)


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

    __slots__ = ("_con", "path")

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
        super().__init__(stored_total, unit=stored_unit)

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
        rows = self._con.execute("SELECT label, epsilon, delta FROM charges ORDER BY id")
        return [Charge(label, Budget(eps, dlt)) for label, eps, dlt in rows]

    def _reload(self, charges: list[Charge]) -> None:
        self._eps = Fraction(0)
        self._dlt = Fraction(0)
        self._charges = []
        for charge in charges:
            self._record(charge)

    # -- persistence hooks of BudgetLedger --

    def _restore(self) -> list[Charge]:
        return self._rows()

    def _persist(self, charge: Charge) -> None:
        """One transaction: take the write lock, re-read the balance (other processes'
        charges count), refuse an overspend, insert, commit. Raising records nothing."""
        con = self._con
        try:
            con.execute("BEGIN IMMEDIATE")
            self._reload(self._rows())
            BudgetLedger.check(self, charge.budget, charge.label)
            con.execute(
                "INSERT INTO charges (label, epsilon, delta, unit, created) VALUES (?, ?, ?, ?, ?)",
                (
                    charge.label,
                    float(charge.budget.epsilon),
                    float(charge.budget.delta),
                    unit_to_json(self.unit),
                    _now(),
                ),
            )
            con.execute("COMMIT")
        except BaseException:
            _rollback(con)
            raise

    def check(self, budget: Budget, label: str = "", *, unit: PrivacyUnit | None = None) -> None:
        """As :meth:`mechanisms.BudgetLedger.check`, on the file's current balance."""
        self._reload(self._rows())
        super().check(budget, label, unit=unit)

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
        where = repr(str(self.path))
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


def _describe(unit: PrivacyUnit | None) -> str:
    return "any privacy unit" if unit is None else unit.describe()
