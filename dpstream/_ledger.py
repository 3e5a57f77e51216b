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

A file is a ledger only if it says so (issue 31 §1): a ledger is created only where no file
exists (or by :meth:`SQLiteLedger.init`, ``dpstream ledger init``); an existing file that is empty
or has no ledger tables (a failed restore, ``: > budget.db``, a copy without its side files) is
refused, never initialised -- a fresh ledger would forget what was spent. Every ledger carries a
random ``id`` written at creation and, for a data set's ledger (issue 24 §2,
:mod:`dpstream._dataset`), the data set's name and fingerprint.

Budgets as users write them (issue 31 §5). Everything is accounted exactly
(:class:`fractions.Fraction`). A total is the decimal the user wrote: the shortest decimal that
reads back as the stored float (:func:`total_decimal`, ``repr``: ``--budget-epsilon 0.3`` is
3/10, not the double below it). A charge is the exact value of the float the noise was
calibrated with -- what was spent, never rounded down. The CLI and the store take a decimal ε
or δ and calibrate their noise to :func:`calibrated` (the largest float not above the
decimal), so a charge never exceeds the decimal written and three charges of
``--epsilon 0.1`` fit ``--budget-epsilon 0.3``; a Python caller passing the double 0.1
(slightly above 1/10) spends that double, and three of those do not fit 0.3. The file keeps
the floats (REAL columns, as before), so old files read the same; reports show a charge as
:func:`charged_decimal`, the shortest decimal not below it (0.1 for ``calibrated(0.1)``).

δ is accounted per period like ε (issue 24 §3): a period's (ε, δ) is its own charges plus every
charge tied to no period, each within the total; a store's 30 daily Gaussian periods against a
total (ε, δ) fit.
"""

from __future__ import annotations

import json
import math
import secrets
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
    DPStreamError,
    ParameterError,
    PrivacyUnit,
)

from ._files import CorruptFileError, classify_sqlite
from ._units_json import _describe, unit_from_json, unit_to_json

__all__ = [
    "CHARGES_TABLE",
    "SCHEMA_VERSION",
    "SQLiteLedger",
    "AlreadyReleasedError",
    "StaleStoreError",
    "calibrated",
    "charged_decimal",
    "total_decimal",
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
    " epsilon REAL NOT NULL, delta REAL NOT NULL, unit TEXT NOT NULL, created TEXT NOT NULL,"
    " store TEXT)"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    CHARGES_TABLE,
)
_PREFIX = "period "
_NO_PERIOD = "(no period) "


@contextmanager
def transaction(con: sqlite3.Connection, what: str | None = None) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception) on a connection opened
    with ``isolation_level=None``: the write lock is taken before anything is read.

    With ``what`` (e.g. "The store 'ops.db'"), a SQLite failure is raised as the typed one-line
    error of :func:`dpstream._files.classify_sqlite` (full disk, read-only, corrupt, busy)."""
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            _rollback(con)
            raise
        con.execute("COMMIT")
    except sqlite3.Error as exc:
        if what is None:
            raise
        _rollback(con)
        raise classify_sqlite(exc, what) from None


def total_decimal(value: float) -> Fraction:
    """A total as the user wrote it: the shortest decimal that reads back as ``value``."""
    return Fraction(repr(float(value)))


def charged_decimal(value: float) -> Fraction:
    """The decimal charged for noise calibrated to the float ``value``: the shortest decimal in
    ``[value, next float up)``, so never less than ``value`` (module notes)."""
    value = float(value)
    if value == 0.0:
        return Fraction(0)
    exact, upper = Fraction(value), Fraction(math.nextafter(value, math.inf))
    for digits in range(1, 30):
        scale = 10**digits
        candidate = Fraction(math.ceil(exact * scale), scale)
        if candidate < upper:
            return candidate
    return exact  # pragma: no cover - 17 significant digits always suffice


def calibrated(value: float | str | Fraction) -> float:
    """The float to calibrate noise to for a budget written as a decimal: the largest float not
    above it (a float given is read as its shortest decimal, ``repr``). Its
    :func:`charged_decimal` is the decimal itself, e.g. ``calibrated(0.1)`` is charged 0.1."""
    exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    out = float(exact)
    return math.nextafter(out, -math.inf) if Fraction(out) > exact else out


def _label(period: int | None, label: str) -> str:
    """A charge's in-memory label: the period (if any) rides in front of it. A label of a
    charge tied to no period that reads like one ("period 0: ...") is marked, so it is never
    taken for a period charge (it would then count in one period instead of every one)."""
    if period is None:
        return _NO_PERIOD + label if _period_of(label) is not None else label
    return f"{_PREFIX}{int(period)}: {label}"


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
        The ledger file. Created (atomically) only where no file exists, then ``total`` is
        required; an existing empty or table-less file is refused (module notes).
    total : mechanisms.Budget, optional
        The whole budget. Required to create the file; when reopening, omit it or give the
        stored one (anything else is a :class:`~mechanisms.ParameterError`).
    unit : mechanisms.PrivacyUnit, optional
        The privacy unit every charge must be made under (stored on creation; reopening
        with another unit is refused). None at creation: any unit is accepted.
    dataset, fingerprint : str, optional
        The data set this ledger accounts for and the fingerprint of its streams (recorded at
        creation; :mod:`dpstream._dataset`).
    readonly : bool, default False
        Open with a ``mode=ro`` URI (``dpstream ledger show``): nothing can be charged.

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

    __slots__ = (
        "_by_period",
        "_by_period_dlt",
        "_con",
        "_global",
        "_global_dlt",
        "_pending_meta",
        "_period",
        "meta",
        "path",
    )

    def __init__(
        self,
        path: str | Path,
        *,
        total: Budget | None = None,
        unit: PrivacyUnit | None = None,
        dataset: str | None = None,
        fingerprint: str | None = None,
        readonly: bool = False,
        _init_empty: bool = False,
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
        if not self.path.exists():
            if total is None or readonly:
                raise ParameterError(
                    f"There is no ledger at {str(path)!r}: give its total budget to create it "
                    "(the CLI's --budget-epsilon)."
                )
            meta = _new_meta(total, unit_text, dataset, fingerprint)
            create_file(self.path, _SCHEMA, meta, what=f"The ledger {str(path)!r}")
        elif _init_empty and self.path.stat().st_size == 0 and total is not None:
            meta = _new_meta(total, unit_text, dataset, fingerprint)
            create_file(self.path, _SCHEMA, meta, what=f"The ledger {str(path)!r}", replace=True)
        elif self.path.stat().st_size == 0:
            raise self._not_a_ledger("it is empty (0 bytes)")
        self._con = _connect(self.path, readonly=readonly)
        try:
            stored_total, stored_unit = self._open(total, unit_text, readonly=readonly)
        except BaseException:
            self._con.close()
            raise
        self._start(stored_total, stored_unit)

    @classmethod
    def init(
        cls,
        path: str | Path,
        *,
        total: Budget,
        unit: PrivacyUnit | None = None,
        dataset: str | None = None,
        fingerprint: str | None = None,
    ) -> SQLiteLedger:
        """Create a ledger explicitly (``dpstream ledger init``): where no file exists, or over
        an empty (0-byte) file the operator names on purpose. Any other file is refused."""
        if not isinstance(total, Budget):
            raise ParameterError(
                f"The 'total' parameter of {_OWNER}.init must be a Budget. Got {total!r}."
            )
        file = Path(path)
        if file.exists() and file.is_file() and file.stat().st_size > 0:
            raise ParameterError(
                f"The file {str(path)!r} already exists and is not empty: a ledger is created "
                "only in a new file."
            )
        return cls(
            file, total=total, unit=unit, dataset=dataset, fingerprint=fingerprint, _init_empty=True
        )

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
        ledger.meta = {}
        ledger._start(total, unit)
        return ledger

    def _start(self, total: Budget, unit: PrivacyUnit | None) -> None:
        self._by_period: dict[int, Fraction] = {}
        self._by_period_dlt: dict[int, Fraction] = {}
        self._global = Fraction(0)
        self._global_dlt = Fraction(0)
        self._period: int | None = None
        if not hasattr(self, "meta"):
            self.meta = {}
        self._pending_meta = None
        BudgetLedger.__init__(self, total, unit=unit)

    # -- file layout --

    def _open(
        self, total: Budget | None, unit_text: str, *, readonly: bool = False
    ) -> tuple[Budget, PrivacyUnit | None]:
        """Read and check the metadata; bring files of earlier versions up to date (an id, the
        ``store`` column). A file without the ledger's tables is refused, never initialised."""
        con = self._con
        what = f"The ledger {str(self.path)!r}"
        try:
            if not readonly:
                con.execute("BEGIN IMMEDIATE")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            if not {"meta", "charges"} <= tables:
                _rollback(con)
                raise self._not_a_ledger("it has no ledger tables")
            meta = dict(con.execute("SELECT key, value FROM meta"))
            if not readonly and meta.get("application") == _APPLICATION:
                cols = {row[1] for row in con.execute("PRAGMA table_info(charges)")}
                for col, kind in (("period", "INTEGER"), ("store", "TEXT")):
                    if col not in cols:  # files of before issues 15 and 31
                        con.execute(f"ALTER TABLE charges ADD COLUMN {col} {kind}")
                if "id" not in meta:
                    meta["id"] = secrets.token_hex(16)
                    con.execute("INSERT INTO meta (key, value) VALUES ('id', ?)", (meta["id"],))
            if not readonly:
                con.execute("COMMIT")
        except ParameterError:
            raise
        except sqlite3.Error as exc:
            _rollback(con)
            typed = classify_sqlite(exc, what)
            if isinstance(typed, CorruptFileError):
                raise self._not_a_ledger("it is not a SQLite database, or it is damaged") from None
            raise typed from None
        except BaseException:
            _rollback(con)
            raise
        if meta.get("application") != _APPLICATION:
            raise self._not_a_ledger("its tables are not a dpstream ledger's")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise ParameterError(
                f"The ledger {str(self.path)!r} has schema version "
                f"{meta.get('schema_version')!r}; this dpstream reads version {SCHEMA_VERSION}."
            )
        try:
            stored = Budget(float(meta["total_epsilon"]), float(meta["total_delta"]))
            stored_unit = unit_from_json(meta["unit"])
        except (KeyError, ValueError, TypeError):
            raise self._not_a_ledger("its metadata is incomplete") from None
        self.meta = meta
        if total is not None and total != stored:
            raise ParameterError(
                f"The ledger {str(self.path)!r} was created with a total of {stored}; got "
                f"{total}. Omit the total to use the file's."
            )
        if unit_text != json.dumps(None) and unit_text != meta["unit"]:
            raise ParameterError(
                f"The ledger {str(self.path)!r} accounts for "
                f"{_describe(stored_unit)}; got {_describe(unit_from_json(unit_text))}. "
                "Create one ledger per privacy unit."
            )
        return stored, stored_unit

    @property
    def id(self) -> str | None:
        """The random id written when the file was created (None: a store's own ledger)."""
        return self.meta.get("id")

    @property
    def dataset(self) -> str | None:
        """The data set this ledger accounts for (issue 24 §2), or None."""
        return self.meta.get("dataset") or None

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the data set's stream ids and hierarchy, or None."""
        return self.meta.get("fingerprint") or None

    def _not_a_ledger(self, reason: str = "it is not one") -> ParameterError:
        return ParameterError(
            f"The file {str(self.path)!r} is not a dpstream ledger: {reason}. If it was one (a "
            "failed restore or copy, a truncation, side files deleted), restore it from a backup "
            "with its side files: a new ledger in its place would forget what was spent and let "
            "the same data be released again. A ledger is created only in a new file "
            "('dpstream ledger init')."
        )

    def _rows(self) -> list[Charge]:
        rows = self._con.execute("SELECT period, label, epsilon, delta FROM charges ORDER BY id")
        return [Charge(_label(p, label), Budget(eps, dlt)) for p, label, eps, dlt in rows]

    def _reload(self, charges: list[Charge]) -> None:
        self._eps = Fraction(0)
        self._dlt = Fraction(0)
        self._charges = []
        self._by_period = {}
        self._by_period_dlt = {}
        self._global = Fraction(0)
        self._global_dlt = Fraction(0)
        for charge in charges:
            self._record(charge)

    # -- persistence hooks of BudgetLedger --

    def _restore(self) -> list[Charge]:
        return self._rows()

    def _record(self, charge: Charge) -> None:
        """Count a charge (as exact decimals): to its period, or (no period) to every period."""
        period = _period_of(charge.label)
        eps = Fraction(charge.budget.epsilon)
        dlt = Fraction(charge.budget.delta)
        if period is None:
            self._global += eps
            self._global_dlt += dlt
        else:
            self._by_period[period] = self._by_period.get(period, Fraction(0)) + eps
            self._by_period_dlt[period] = self._by_period_dlt.get(period, Fraction(0)) + dlt
        self._eps = self._global + max(self._by_period.values(), default=Fraction(0))
        self._dlt = self._global_dlt + max(self._by_period_dlt.values(), default=Fraction(0))
        self._charges.append(charge)

    def _persist(self, charge: Charge, store: str | None = None) -> None:
        """One transaction: take the write lock, re-read the balance (other processes'
        charges count), refuse an overspend, insert, commit. Raising records nothing."""
        period = _period_of(charge.label)
        label = charge.label.split(": ", 1)[1] if period is not None else charge.label
        with transaction(self._con, self._what()) as con:
            self._reload(self._rows())
            self._check_now(charge.budget, charge.label, None, period)
            self._insert(con, period, label, charge.budget, store)
            self._write_pending(con)

    def _insert(self, con, period, label, budget, store) -> None:
        con.execute(
            "INSERT INTO charges (period, label, epsilon, delta, unit, created, store) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                period,
                label,
                float(budget.epsilon),
                float(budget.delta),
                unit_to_json(self.unit),
                _now(),
                store,
            ),
        )

    def _what(self) -> str:
        return "The ledger" if self.path is None else f"The ledger {str(self.path)!r}"

    def _check_now(self, budget, label: str, unit, period: int | None) -> None:
        """:meth:`check` on the balance held in memory, in exact decimals."""
        if not isinstance(budget, Budget):
            BudgetLedger.check(self, budget, label, unit=unit)  # raises the ParameterError
        self.check_unit(unit, label or "the release")
        if period is None:
            spent, spent_dlt = self._eps, self._dlt
            where = ""
        else:
            spent = self._global + self._by_period.get(int(period), Fraction(0))
            spent_dlt = self._global_dlt + self._by_period_dlt.get(int(period), Fraction(0))
            where = f" for period {_period_name(period)}"
        eps = spent + Fraction(budget.epsilon)
        dlt = spent_dlt + Fraction(budget.delta)
        total_eps, total_dlt = total_decimal(self.total.epsilon), total_decimal(self.total.delta)
        if eps > total_eps or dlt > total_dlt:
            left = f"(ε={_dec(total_eps - spent)}, δ={_dec(total_dlt - spent_dlt)}{where})"
            raise BudgetExceededError(budget, left, label)

    @property
    def remaining_epsilon(self) -> float:
        """ε not yet charged (the worst period's), from the exact decimals."""
        return float(total_decimal(self.total.epsilon) - self._eps)

    @property
    def remaining_delta(self) -> float:
        """δ not yet charged (the worst period's), from the exact decimals."""
        return float(total_decimal(self.total.delta) - self._dlt)

    @property
    def remaining_text(self) -> str:
        # shown to 15 decimal places (a calibrated 0.1 leaves ~1e-17 of 0.1 unspent)
        left_eps = round(total_decimal(self.total.epsilon) - self._eps, 15)
        left_dlt = round(total_decimal(self.total.delta) - self._dlt, 15)
        return f"(ε={_dec(left_eps)}, δ={_dec(left_dlt)})"

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

    def spent_delta(self, period: int | None = None) -> float:
        """δ charged to ``period`` (as :meth:`spent` for ε)."""
        if period is None:
            return float(self._dlt)
        return float(self._global_dlt + self._by_period_dlt.get(int(period), Fraction(0)))

    def refresh(self) -> None:
        """Re-read the charges (made by this or any other process)."""
        self._reload(self._rows())

    def charge_store_period(
        self,
        budget: Budget,
        label: str,
        *,
        period: int,
        span: int,
        store: str,
        unit: PrivacyUnit | None = None,
        dry: bool = False,
    ) -> bool:
        """Charge a data set's ledger for one period released by a store (issue 24 §2).

        ``period`` is the period's first time stamp (an integer, ns for dates: the same key in
        every store of the data set), ``span`` its length in the same units and ``store`` the
        store's id. A period this store already charged (a killed run's charge) is not charged
        again (returns False); a period overlapping one released by *another* store is refused
        with :class:`AlreadyReleasedError` -- an emptied, lost or new store cannot release the
        same days twice. Otherwise charged like :meth:`charge` (returns True). ``dry``: check
        only (nothing written, no write lock taken).
        """
        period, span = int(period), int(span)
        if dry:
            self._reload(self._rows())
            return self._store_period(self._con, budget, label, period, span, store, unit, True)
        with transaction(self._con, self._what()) as con:
            self._reload(self._rows())
            charged = self._store_period(con, budget, label, period, span, store, unit, False)
        if charged:
            self._record(Charge(_label(period, label), budget))
        return charged

    def _store_period(self, con, budget, label, period, span, store, unit, dry) -> bool:
        self.check_unit(unit, label or "the release")
        rows = con.execute(
            "SELECT period, store, label FROM charges WHERE store IS NOT NULL "
            "AND period > ? AND period < ?",
            (period - span, period + span),
        ).fetchall()
        if any(p == period and s == store for p, s, _ in rows):
            return False
        others = [(s, lab) for _, s, lab in rows if s != store]
        if others:
            other, what = others[0]
            raise AlreadyReleasedError(
                f"The ledger {self._where()} records this period as released already, by "
                f"another store (id {other[:12]}, {what!r}). A period is released once: read it "
                "from that store (or its backup, 'dpstream store backup'). Nothing was released."
            )
        self._check_now(budget, label, None, period)
        if not dry:
            self._insert(con, period, label, budget, store)
            self._write_pending(con)
        return True

    def advance_store(self, store: str, current: str | None, pending: str | None, new: str) -> None:
        """Record that store ``store`` starts a job whose run token is ``new`` (issue 31 §1).

        The ledger keeps each store's latest run token: a store file whose token (``current``,
        or the ``pending`` one it wrote before a crash) is not the latest is an *older copy* of
        the store (``cp``, a restored backup) and is refused with :class:`StaleStoreError`: two
        copies of one store must never both release (the same days, drawn twice, under one
        store id)."""
        what = self._what()
        with transaction(self._con, what) as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS stores (id TEXT PRIMARY KEY, run TEXT NOT NULL,"
                " updated TEXT NOT NULL)"
            )
            row = con.execute("SELECT run FROM stores WHERE id = ?", (store,)).fetchone()
            if row is not None and row[0] not in (current, pending):
                raise StaleStoreError(
                    f"This store file (id {store[:12]}) is an older copy: the ledger "
                    f"{self._where()} has seen a later job of the same store. Releasing from "
                    "two copies would draw the same days twice. Use the newest file of the "
                    "store (the one the last job wrote), or a backup made after it."
                )
            con.execute(
                "INSERT OR REPLACE INTO stores (id, run, updated) VALUES (?, ?, ?)",
                (store, new, _now()),
            )

    def adopt(self, fingerprint: str, dataset: str | None) -> None:
        """Record the data set's fingerprint (and name) in a ledger that has none yet -- one
        made by ``dpstream ledger init`` or before issue 24 -- on its first release with
        known streams (:mod:`dpstream._dataset`). Written with the next charge, in its
        transaction (a release refused before its charge changes no file). A recorded
        fingerprint is never changed."""
        if self.fingerprint:
            return
        pending = {"fingerprint": fingerprint}
        if dataset and not self.dataset:
            pending["dataset"] = dataset
        self._pending_meta = pending
        self.meta.update(pending)

    def _write_pending(self, con) -> None:
        pending = getattr(self, "_pending_meta", None)
        if pending:
            con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(pending.items()))
            self._pending_meta = None

    def _where(self) -> str:
        name = f" of data set {self.dataset!r}" if self.dataset else ""
        return ("(a store's own)" if self.path is None else repr(str(self.path))) + name

    def entries(self) -> list[dict]:
        """Every charge as a row: id, period, label, epsilon and delta (the exact decimals
        charged, as text), created, store -- for ``dpstream ledger show``."""
        rows = self._con.execute(
            "SELECT id, period, label, epsilon, delta, created, store FROM charges ORDER BY id"
        ).fetchall()
        return [
            {
                "id": i,
                "period": p,
                "label": lab,
                "epsilon": _dec(charged_decimal(e)),
                "delta": _dec(charged_decimal(d)),
                "created": c,
                "store": st,
            }
            for i, p, lab, e, d, c, st in rows
        ]

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


class StaleStoreError(DPStreamError):
    """A store file older than the one its data set's ledger saw last (a copy, a backup)."""


class AlreadyReleasedError(DPStreamError):
    """A data set's ledger records the period as released by another store (issue 24 §2)."""


def _dec(value: Fraction) -> str:
    """A decimal as text: exact when it has at most 17 decimal places, else 12 significant
    digits (a double's exact binary value, e.g. a calibrated 0.1, shows as 0.1)."""
    value = Fraction(value)
    den, places = value.denominator, 0
    for p in (2, 5):
        n = 0
        while den % p == 0:
            den //= p
            n += 1
        places = max(places, n)
    if den != 1 or places > 17:  # not a short decimal: 12 significant digits
        return f"{float(value):.12g}"
    whole = value.numerator * 10**places // value.denominator
    sign, body = ("-" if whole < 0 else ""), str(abs(whole)).rjust(places + 1, "0")
    if not places:
        return f"{sign}{body}"
    return f"{sign}{body[:-places]}.{body[-places:]}".rstrip("0").rstrip(".")


def _period_name(period: int) -> str:
    """A period key as a reader knows it: a store's ordinal, or (a data set's ledger) the
    period's first time stamp in ns since the epoch, shown as a UTC date."""
    if abs(int(period)) >= 10**15:
        stamp = datetime.fromtimestamp(int(period) / 1e9, UTC)
        return stamp.strftime("%Y-%m-%d %H:%M:%S")
    return str(int(period))


def _new_meta(total: Budget, unit_text: str, dataset, fingerprint) -> list[tuple[str, str]]:
    return [
        ("application", _APPLICATION),
        ("schema_version", str(SCHEMA_VERSION)),
        ("total_epsilon", repr(float(total.epsilon))),
        ("total_delta", repr(float(total.delta))),
        ("unit", unit_text),
        ("created", _now()),
        ("id", secrets.token_hex(16)),
        ("dataset", dataset or ""),
        ("fingerprint", fingerprint or ""),
    ]


def create_file(
    path: Path,
    schema: tuple[str, ...],
    meta: list[tuple[str, str]],
    *,
    what: str,
    replace: bool = False,
    wal: bool = False,
) -> bool:
    """Create a SQLite file with its tables and ``meta`` rows *atomically*: built under a
    temporary name in the same folder, then linked into place (:func:`os.link` fails if the
    name exists, so two creators never both win, and no empty file is ever visible at
    ``path``). ``replace``: an empty file the operator named on purpose is replaced. Returns
    False when another process created the file first."""
    import os
    import tempfile

    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ParameterError(f"{what} must be in an existing folder: {str(folder)!r} is not one.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=folder)
    except OSError as exc:
        from ._files import classify_os

        raise (classify_os(exc, what) or exc) from None
    os.close(fd)
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            if wal:
                con.execute("PRAGMA journal_mode=WAL")
            con.execute("BEGIN IMMEDIATE")
            for sql in schema:
                con.execute(sql)
            con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
            con.execute("COMMIT")
            if wal:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()
        os.chmod(tmp, 0o644)
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: rename (not atomic vs a creator)
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    except sqlite3.Error as exc:
        raise classify_sqlite(exc, what) from None
    finally:
        for side in ("", "-wal", "-shm", "-journal"):
            Path(tmp + side).unlink(missing_ok=True)


def _connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    try:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        # The rollback journal with synchronous=FULL (SQLite's default) makes a commit durable.
        if readonly and not Path(f"{path}-journal").exists():
            # (a hot journal left by a killed writer must be rolled back: a read-write
            # connection does that on its first read; nothing else is written)
            con = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=_LOCK_TIMEOUT,
                isolation_level=None,
            )
        else:
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
