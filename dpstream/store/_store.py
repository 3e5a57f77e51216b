"""``ReleaseStore``: the operator's daily job -- a release store in one SQLite file.

Why SQLite. The store is a file the user names, created on first use, written by one job at a
time, and its one hard requirement is atomicity: a period is released *with* its budget charge and
its plan, or not at all, and a run killed at any instant leaves whole periods only. SQLite gives
exactly that from the standard library (a transaction per period, ``with con:``; a killed
process's journal is rolled back on the next open) with no dependency to install. DuckDB would
be the better *query* engine for a year of 100,000 feeders (columnar, reads Parquet), but the
store never scans values by column: it writes one period and reads periods back by key. So each
period's released values are one BLOB -- the (nodes × steps) float64 array, exact to the bit,
38 MB for 100,000 feeders × 48 steps, ~14 GB for a year, well within SQLite's limits -- keyed by
the period's ordinal; configuration, plans and the ledger are small rows beside it. Exports to
Parquet/CSV (wide or long) go through :meth:`ReleaseStore.read`.

Schema (version in the ``meta`` table): ``meta(key, value)`` holds ``schema_version`` and the
``config`` JSON; ``periods(ordinal, start, n_steps, plan, seeded, released_at, data, measured)``
one row per released period (``measured``: with k="auto", the period's measurements -- the
estimates before post-processing, their noise variances and sampled masks -- and the arrays of
its plan, an ``.npz`` without pickles, committed in the same transaction as the values: what
the in-stream planner of the next periods reads); ``planner_state`` that planner's running sums
after the last period released with them (replaced in the period's transaction, issue 22);
``charges`` the ledger
(:data:`dpstream._ledger.CHARGES_TABLE`, :class:`~dpstream.store._ledger.StoreLedger`).
Version 1 stores (before issue 15) are refused with a message naming the version.

Two jobs on one store (issue 15 §3). A release holds the store's *job lock* from before it
reads which periods are stored until its last period is committed; a second job fails at once
with :class:`StoreBusyError` (or waits ``lock_timeout`` seconds for it). The lock is SQLite's
own: an ``EXCLUSIVE`` transaction held open on a sidecar file ``STORE.lock``. Why not the store
file: a write transaction held for the whole job would make the per-period commits impossible
(a killed run must keep its whole periods). Why not a lock row in the store: a job killed with
SIGKILL leaves the row behind, and telling a stale row from a live job needs process ids
(wrong across hosts and containers). SQLite's file lock is an operating-system lock, released
by the kernel when the holder dies, so kill-and-resume needs no clean-up, and it works wherever
SQLite works (POSIX and Windows). Readers (``read``, ``periods``, ``python -m dpstream.store``)
never take it. Short transactions (a charge, a period) wait up to 30 s for another writer
(``busy_timeout``), and charges re-read the ledger under ``BEGIN IMMEDIATE``.

Files an operator handles (issue 31). A file is a store only if it says so: a store is created
(atomically, :func:`dpstream._ledger.create_file`) only where no file exists, or by
:meth:`ReleaseStore.init` (``dpstream store init``); an existing file that is empty or has no
store tables is refused, never initialised (a new store would release every period again).
Every store carries a random ``id`` written at creation, and the data set whose ledger it charges
(:mod:`dpstream._dataset`). *Self-contained main file*: the WAL is checkpointed
(``wal_checkpoint(TRUNCATE)``) after every committed period, when a job starts and ends, and on
close, so when no job runs the main file holds every committed period and the side files
``STORE-wal``, ``STORE-shm``, ``STORE.lock`` and ``STORE.lock-journal`` may be deleted (never
while a job runs). A *pending-commit mark* (the ``running`` row of ``meta``) is committed and
checkpointed before each period's commit and removed by that commit (checkpointed next): a
store whose main file carries the mark but has no ``-wal`` beside it (copied alone, or its WAL
deleted, after a job killed in that window) is refused -- the period committed only to the
lost WAL would otherwise be released again. Outside that window the main file alone is
complete, so a copy of it (``cp``) after a killed job returns every stored period as stored.
(Why not one mark for the whole job: SQLite deletes the WAL when the last connection closes --
any reader, ``sqlite3`` included -- so "marked and no WAL" would refuse complete stores after
every killed job. Charges need no mark: each is committed to the data set's ledger first,
which knows the store's id, so a charge lost with a WAL is never charged twice.)
``dpstream store backup`` (:meth:`ReleaseStore.backup`, SQLite's backup API) makes a consistent
copy at any time. *One history per store*: every job that releases into a store with a data
set's ledger gives the store a new run token, recorded first as pending in the store, then in
the ledger (``SQLiteLedger.advance_store``), then as the store's current token; the ledger
refuses a store file whose token is not the latest it saw -- an older copy or backup of a store
that has released since (two copies of one store id would otherwise both draw the days the
other lacks). Failures are told apart (:mod:`dpstream._files`): a full disk, a read-only
file, a damaged file and a busy lock are four different one-line errors; a read-only store
(``readonly=True``, a ``mode=ro`` URI, chosen by itself when the file cannot be written) still
returns its stored periods.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import Budget, DPStreamError, ParameterError

from .._files import FileBusyError, classify_sqlite
from .._ledger import CHARGES_TABLE, create_file, transaction
from ._ledger import StoreLedger

__all__ = ["ReleaseStore", "StoreBusyError"]

SCHEMA_VERSION = 2
_APPLICATION = "dpstream-store"
#: Seconds a short transaction (a charge, a period) waits for another writer.
_BUSY_TIMEOUT = 30.0

#: A period's measurements larger than this are written in parts (a zero-length ``measured``
#: in ``periods``, its bytes in ``measured_parts``): SQLite refuses a value above
#: SQLITE_MAX_LENGTH (10⁹ bytes by default), which a million-node day's record exceeds once
#: its plan's variances no longer deflate (issue 22). A module constant so a test can lower it.
MEASURED_PART_BYTES = 1 << 28

_PARTS_TABLE = """CREATE TABLE IF NOT EXISTS measured_parts (
    ordinal INTEGER NOT NULL,
    part INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (ordinal, part)
)"""

#: The k="auto" planner's streaming state after the last period released with it (issue 22,
#: :mod:`dpstream.store._planner_state`): its bytes in parts of at most MEASURED_PART_BYTES, all
#: rows replaced in the transaction that commits the period (``ordinal``: that period).
_STATE_TABLE = """CREATE TABLE IF NOT EXISTS planner_state (
    part INTEGER PRIMARY KEY,
    ordinal INTEGER NOT NULL,
    data BLOB NOT NULL
)"""

#: The planners' streaming states of a k="auto" period released split into subtrees (issue 22,
#: :mod:`dpstream.store._planner_state`): one per part (``root``: the subtree root's name; ""
#: the nodes above the cut), keyed by the ``cut``, in parts of at most MEASURED_PART_BYTES,
#: all rows replaced in the transaction that commits the period (``ordinal``: that period).
_SPLIT_STATE_TABLE = """CREATE TABLE IF NOT EXISTS split_state (
    cut INTEGER NOT NULL,
    root TEXT NOT NULL,
    part INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (cut, root, part)
)"""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS periods (
    ordinal INTEGER PRIMARY KEY,
    start TEXT NOT NULL,
    n_steps INTEGER NOT NULL,
    plan TEXT NOT NULL,
    seeded INTEGER NOT NULL,
    released_at TEXT NOT NULL,
    data BLOB NOT NULL,
    measured BLOB
)""",
    CHARGES_TABLE,
    _PARTS_TABLE,
    _STATE_TABLE,
    _SPLIT_STATE_TABLE,
)


class StoreBusyError(FileBusyError):
    """Another job is releasing into the same store (its job lock is held)."""


@contextmanager
def idle_job_lock(path: Path) -> Iterator[bool]:
    """Hold the job lock of the store at ``path`` for the block if no job holds it (taken
    without waiting): yields True, or False when a job is running (or the lock file cannot
    be opened)."""
    try:
        lock = sqlite3.connect(path.with_name(path.name + ".lock"), timeout=0, isolation_level=None)
    except sqlite3.Error:
        yield False
        return
    try:
        lock.execute("BEGIN EXCLUSIVE")
    except sqlite3.Error:
        lock.close()
        yield False
        return
    try:
        yield True
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


class ReleaseStore:
    """A release store: configuration, released periods, plans and the ledger in one file.

    Parameters
    ----------
    path : str or Path
        The store's file, created (with its schema) where no file exists; an existing file
        must be a store (an empty or table-less one is refused, module notes).
    readonly : bool, default False
        Open with a ``mode=ro`` URI: read periods, release nothing new. Chosen automatically
        when the file or its folder cannot be written.
    ledger : SQLiteLedger or path, optional
        The data set's ledger to charge (issue 24 §2). Default: the store's recorded data set,
        or the one its streams are known as, or a new one (:mod:`dpstream._dataset`).
    dataset : str, optional
        The data set's name (its ledger ``$DPSTREAM_HOME/ledgers/NAME.db``).
    new_dataset : bool, default False
        These streams are a new data set although a data set with the same streams is known.

    Notes
    -----
    One connection per store, parameterised SQL, a transaction per unit of work. The store's
    configuration (mechanism, unit, ε, α, w, k, sampler, weights, hierarchy, time grid) is fixed
    by its first release; a release with another configuration is refused
    (:class:`~mechanisms.ParameterError`). Use
    :meth:`release_optstream` to release; a period already in the store is returned as stored
    and nothing is drawn or charged.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    >>> frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    >>> with tempfile.TemporaryDirectory() as d, ReleaseStore(f"{d}/ops.db") as store:
    ...     kw = {"epsilon": 1.0, "alpha": 1.0, "hierarchy": {"t": ["a", "b"]}}
    ...     first = store.release_optstream(frame, seed=1, **kw)
    ...     again = store.release_optstream(frame, seed=2, **kw)
    ...     bool(first.equals(again)), len(store.periods())
    (True, 2)
    """

    def __init__(
        self,
        path: str | Path,
        *,
        readonly: bool = False,
        ledger: object = None,
        dataset: str | None = None,
        new_dataset: bool = False,
        _terms: dict | None = None,
    ) -> None:
        file = Path(path)
        if file.exists() and file.is_dir():
            raise ParameterError(
                "The 'path' parameter of ReleaseStore must be a file. Got a directory "
                f"{str(file)!r}."
            )
        if not file.parent.is_dir():
            raise ParameterError(
                f"The 'path' parameter of ReleaseStore must be in an existing directory. Got "
                f"{str(file)!r}."
            )
        self.path = file
        self._what = f"The store {file.name!r}"
        self._ledger: StoreLedger | None = None
        self._dataset_ledger = ledger
        self._dataset = dataset
        self._new_dataset = bool(new_dataset)
        # A new store's configuration (and its data set binding) is written with its first
        # charge, not before: a release refused before it (another store released its days,
        # an overspend) leaves the store as it was (issue 24).
        self._pending_config: dict | None = None
        self._pending_meta: dict[str, str] = {}
        self._terms = _terms or {
            "dataset": "dataset=",
            "ledger": "ledger=",
            "new_dataset": "new_dataset=True",
        }
        self.readonly = bool(readonly)
        if not file.exists():
            if self.readonly:
                raise ParameterError(f"There is no store at {str(file)!r} (nothing to read).")
            create_file(file, _SCHEMA, _new_meta(), what=self._what, wal=True)
        elif file.stat().st_size == 0:
            raise self._not_a_store("it is empty (0 bytes)")
        wal_present = Path(f"{file}-wal").exists()
        if not self.readonly and not _writable(file):
            self.readonly = True  # a read-only file or mount: read what it holds
        self._con = self._connect()
        try:
            self._open(file, wal_present)
            self._clear_stale_mark()
        except sqlite3.DatabaseError as exc:
            self._con.close()
            if classify_sqlite(exc, "").__class__.__name__ == "CorruptFileError":
                raise self._not_a_store("it is not a SQLite database, or it is damaged") from None
            raise classify_sqlite(exc, self._what) from None
        except BaseException:
            self._con.close()
            raise

    @classmethod
    def init(cls, path: str | Path, **kwargs) -> ReleaseStore:
        """Create a store explicitly (``dpstream store init``): where no file exists, or over
        an empty (0-byte) file the operator names on purpose. Any other file is refused."""
        file = Path(path)
        if file.exists():
            if not file.is_file() or file.stat().st_size > 0:
                raise ParameterError(
                    f"The file {str(path)!r} already exists and is not empty: a store is "
                    "created only in a new file."
                )
            create_file(
                file, _SCHEMA, _new_meta(), what=f"The store {file.name!r}", wal=True, replace=True
            )
        return cls(file, **kwargs)

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.readonly:
                # isolation_level=None: explicit transactions, as the ledger.
                return sqlite3.connect(
                    f"{self.path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    timeout=_BUSY_TIMEOUT,
                    isolation_level=None,
                )
            return sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None)
        except sqlite3.Error as exc:
            raise classify_sqlite(exc, self._what) from None

    def _not_a_store(self, reason: str) -> ParameterError:
        return ParameterError(
            f"The file {str(self.path)!r} is not a dpstream store: {reason}. If it was one (a "
            "failed restore or copy, a truncation, side files deleted), restore it from a backup "
            "with its side files: a new store in its place would release every period again. "
            "A store is created only in a new file ('dpstream store init')."
        )

    def _open(self, file: Path, wal_present: bool = True) -> None:
        """Journal, tables, version, identity and the job-running mark (one transaction)."""
        con = self._con
        if not self.readonly:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            meta = dict(con.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
            version = meta.get("schema_version")
            if version is not None and version != str(SCHEMA_VERSION):
                raise ParameterError(
                    f"The store {file.name!r} has schema version {version}; this dpstream reads "
                    f"version {SCHEMA_VERSION}. Use a matching dpstream."
                )
            if not {"meta", "periods", "charges"} <= tables:
                raise self._not_a_store("it has no store tables")
            if version is None:
                raise ParameterError(
                    f"The store {file.name!r} has schema version {version}; this dpstream reads "
                    f"version {SCHEMA_VERSION}. Use a matching dpstream."
                )
            if meta.get("application", _APPLICATION) != _APPLICATION:
                raise self._not_a_store(f"it is a {meta['application']!r} file")
            if "running" in meta and not wal_present and not self.readonly:
                raise ParameterError(
                    f"The store {file.name!r} was copied (or its side file "
                    f"{file.name + '-wal'!r} deleted) while a job was releasing into it: periods "
                    "that job committed may be missing from this file. Use the original store "
                    "with its side files, or a copy made by 'dpstream store backup'; the data "
                    "set's ledger refuses to release its periods again."
                )
            if not self.readonly:
                cols = {row[1] for row in con.execute("PRAGMA table_info(charges)")}
                if "store" not in cols:  # stores of before issue 31
                    con.execute("ALTER TABLE charges ADD COLUMN store TEXT")
                con.execute(_PARTS_TABLE)  # stores of before the parts (issue 22)
                con.execute(_STATE_TABLE)  # and of before the saved planner state
                con.execute(_SPLIT_STATE_TABLE)  # and of before the split's saved states
                for key, value in _new_meta():
                    if key not in meta:  # an id for stores made before issue 31
                        con.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                        meta[key] = value
                con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        self.meta = meta

    def _clear_stale_mark(self) -> None:
        """Remove the job-running mark of a job that is no longer running (killed): under the
        job lock (taken without waiting; a live job holds it), after a checkpoint that moved
        its committed periods into the main file. Readers do this too, so the WAL that SQLite
        deletes when the last connection closes never takes a stale mark's reason with it."""
        if self.readonly:
            return
        running = self._con.execute("SELECT 1 FROM meta WHERE key = 'running'").fetchone()
        if running is None:
            return
        with idle_job_lock(self.path) as idle:
            if idle:  # else a job is running: its mark stays
                self.checkpoint()
                self._mark_running(False)
                self.meta.pop("running", None)

    @property
    def id(self) -> str:
        """The store's random id, written at its creation."""
        return self.meta["id"]

    def checkpoint(self) -> None:
        """Move every committed transaction from the WAL into the main file (module notes)."""
        if self.readonly:
            return
        try:
            self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            raise classify_sqlite(exc, self._what) from None

    def backup(self, dest: str | Path) -> Path:
        """A consistent copy of the store at ``dest`` (a new file), made with SQLite's backup
        API while jobs may run: self-contained (no side files needed), without the job-running
        mark (the copy is a committed state), with the store's id (it is the same store: the
        data set's ledger knows its periods)."""
        target = Path(dest)
        if target.exists():
            raise ParameterError(
                f"The backup destination {str(dest)!r} exists: name a new file (a backup never "
                "overwrites)."
            )
        if not target.parent.is_dir():
            raise ParameterError(
                f"The backup destination {str(dest)!r} must be in an existing folder."
            )
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".new", dir=target.parent)
        os.close(fd)
        try:
            out = sqlite3.connect(tmp, isolation_level=None)
            try:
                self._con.backup(out)
                out.execute("DELETE FROM meta WHERE key = 'running'")
                out.execute("PRAGMA journal_mode=WAL")
                out.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                out.close()
            os.replace(tmp, target)
        except sqlite3.Error as exc:
            raise classify_sqlite(exc, f"The backup {target.name!r}") from None
        finally:
            for side in ("", "-wal", "-shm", "-journal"):
                Path(tmp + side).unlink(missing_ok=True)
        return target

    # -- context manager ------------------------------------------------------------------

    def close(self) -> None:
        """Checkpoint (the main file then holds every committed period) and close."""
        try:
            if not self.readonly:
                try:
                    self._clear_stale_mark()
                    self.checkpoint()
                except DPStreamError:
                    pass  # closing must not fail; the WAL still holds what was committed
            if self._ledger is not None:
                self._ledger.close_dataset()
        finally:
            self._con.close()

    def __enter__(self) -> ReleaseStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReleaseStore({str(self.path)!r}, periods={len(self.periods())})"

    # -- configuration ----------------------------------------------------------------------

    @property
    def config(self) -> dict | None:
        """The store's configuration (public parameters), or None before its first release
        (during a new store's first release: the configuration it will write with its first
        charge)."""
        stored = self._stored_config()
        return self._pending_config if stored is None else stored

    def _stored_config(self) -> dict | None:
        row = self._con.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        return None if row is None else json.loads(row[0])

    def _write_pending(self) -> None:
        """Write a new store's configuration and data set binding (one transaction), just
        before its first charge: nothing is written for a release refused before it."""
        if self._pending_config is None:
            return
        config = json.dumps(self._pending_config, sort_keys=True)
        with transaction(self._con, self._what):
            if self._stored_config() is None:
                self._con.execute("INSERT INTO meta VALUES ('config', ?)", (config,))
                self._con.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)", list(self._pending_meta.items())
                )
        self._pending_config, self._pending_meta = None, {}

    def _drop_pending(self) -> None:
        """Forget a configuration never written (a refused first release) and its ledger."""
        if self._ledger is not None:
            self._ledger.close_dataset()
        self._ledger, self._pending_config, self._pending_meta = None, None, {}
        for key in ("ledger_id", "dataset"):
            self.meta.pop(key, None)

    def _check_config(self, config: dict) -> None:
        """Refuse a configuration that is not the store's (nothing written)."""
        stored = self._stored_config()
        if stored is None:
            fresh = json.loads(json.dumps(config))
            if self._pending_config is not None and self._pending_config != fresh:
                self._drop_pending()  # an earlier, refused first release's: not the store's
            return
        fresh = json.loads(json.dumps(config))
        diff = sorted(k for k in set(stored) | set(fresh) if stored.get(k) != fresh.get(k))
        if diff:
            shown = ", ".join(
                f"{k}: store {_short(stored.get(k))} vs now {_short(fresh.get(k))}"
                for k in diff[:4]
            )
            raise ParameterError(
                f"The configuration of this release differs from the store {self.path.name!r} "
                f"({shown}). A store holds one configuration (its privacy guarantee covers all "
                "its periods): release with the store's settings."
            )

    def _fix_config(self, config: dict) -> dict:
        """Fix the configuration on first use -- written with the first charge (or period),
        so a first release refused before it leaves nothing; refuse a different one
        afterwards."""
        self._check_config(config)
        stored = self._stored_config()
        if stored is None:
            fresh = json.loads(json.dumps(config))
            self._pending_config = fresh
            if self._ledger is None and not self.readonly:
                # the data set's ledger first: a release it refuses fixes nothing in the store
                try:
                    self._ledger = self._make_ledger(fresh)
                except BaseException:
                    self._pending_config, self._pending_meta = None, {}
                    raise
            return fresh
        return stored

    @property
    def ledger(self) -> StoreLedger | None:
        """The store's accountant (None before its first release)."""
        if self._ledger is None:
            cfg = self.config
            if cfg is None:
                return None
            self._ledger = self._make_ledger(cfg)
        return self._ledger

    def _make_ledger(self, cfg: dict) -> StoreLedger:
        from mechanisms import WAlphaIndistinguishability, WEvent

        w = int(cfg["w"])
        unit = (
            WEvent(w=w)
            if cfg["alpha"] is None
            else WAlphaIndistinguishability(w=w, alpha=float(cfg["alpha"]))
        )
        total = Budget(cfg["epsilon"], cfg.get("delta") or 0.0)
        ledger = StoreLedger(self._con, total, unit=unit, name=self.path.name)
        ledger.before_charge = self._write_pending
        if not self.readonly:
            self._attach_dataset(ledger, cfg, total, unit)
        return ledger

    def _attach_dataset(self, ledger: StoreLedger, cfg: dict, total: Budget, unit) -> None:
        """Find (or create) the data set's ledger and attach it (issue 24 §2; module notes of
        :mod:`dpstream._dataset`): the one given, the store's recorded data set, the data set
        its streams are known as, or a new one with the store's per-window budget."""
        from .._dataset import open_dataset_ledger
        from .._ledger import SQLiteLedger
        from ._grid import Grid

        given = self._dataset_ledger
        owns = not isinstance(given, SQLiteLedger)
        if not owns:
            dataset = given
        else:
            tree = cfg.get("hierarchy") or {}
            leaves = [n for n in cfg["nodes"] if n not in tree]
            dataset = open_dataset_ledger(
                streams=leaves,
                hierarchy=tree or None,
                total=total,
                unit=unit,
                dataset=self._dataset or self.meta.get("dataset") or None,
                ledger=given,
                new_dataset=self._new_dataset,
                seeded=bool(cfg.get("seeded")),
                owner="ReleaseStore",
                terms=self._terms,
            )
        if dataset is None:
            return
        recorded = self.meta.get("ledger_id")
        if recorded and dataset.id and recorded != dataset.id:
            if owns:
                dataset.close()
            raise ParameterError(
                f"The store {self.path.name!r} was charged to the ledger with id {recorded[:12]}; "
                f"{str(dataset.path)!r} is another ledger (id {dataset.id[:12]}). Restore the "
                "data set's ledger (its releases compose with this store's), or name it."
            )
        if not recorded and dataset.id:
            binding = {"ledger_id": dataset.id, "dataset": dataset.dataset or ""}
            if self._stored_config() is None:  # a new store: written with its first charge
                self._pending_meta.update(binding)
            else:
                with transaction(self._con, self._what):
                    for key, value in binding.items():
                        self._con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            self.meta.update(binding)
        try:
            self._advance_run(dataset)
        except BaseException:
            if owns:
                dataset.close()
            raise
        ledger.attach(dataset, grid=Grid.from_config(cfg), store_id=self.id, owns=owns)

    def _advance_run(self, dataset) -> None:
        """One history per store (module notes): a new run token, written to the store as
        pending, then recorded by the data set's ledger (which refuses an older copy of the
        store), then made the store's current token."""
        new = secrets.token_hex(16)
        rows = dict(self._con.execute("SELECT key, value FROM meta WHERE key LIKE 'run%'"))
        current, pending = rows.get("run"), rows.get("run_next")  # now, not when opened
        with transaction(self._con, self._what):
            self._con.execute("INSERT OR REPLACE INTO meta VALUES ('run_next', ?)", (new,))
        self.checkpoint()
        dataset.advance_store(self.id, current, pending, new)
        with transaction(self._con, self._what):
            self._con.execute("INSERT OR REPLACE INTO meta VALUES ('run', ?)", (new,))
            self._con.execute("DELETE FROM meta WHERE key = 'run_next'")
        self.checkpoint()
        self.meta["run"] = new
        self.meta.pop("run_next", None)

    def privacy_record(self):
        """The :class:`mechanisms.PrivacyRecord` of the store's releases (None before the first):
        one configuration, every period released once, so every window of w steps of the
        stored stream costs at most the configured ε ([FV19] §5.1, Theorem 13)."""
        cfg = self.config
        if cfg is None:
            return None
        from mechanisms import PrivacyRecord

        keys = ("k", "sampling", "theta", "weights", "shares", "noise", "target", "prior")
        params = {key: cfg.get(key) for key in keys}
        params["store"] = self.path.name
        return PrivacyRecord(
            unit="w-event" if cfg["alpha"] is None else "(w, alpha)",
            epsilon=float(cfg["epsilon"]),
            delta=float(cfg.get("delta") or 0.0),
            mechanism="optstream",
            proof="[FV19] Theorems 6, 8, 9 and 13 per period; each period released once "
            "(the store's ledger, one charge per period)",
            w=int(cfg["w"]),
            alpha=cfg["alpha"],
            bound=cfg["bound"],
            parameters=params,
            seeded=bool(cfg["seeded"]),
        )

    # -- periods ----------------------------------------------------------------------------

    def periods(self) -> pd.DataFrame:
        """One row per released period: ordinal, start, n_steps, seeded, released_at and the
        plan's fields (k, sampling, theta, weights, predicted_laplace_mae, ...)."""
        rows = self._con.execute(
            "SELECT ordinal, start, n_steps, seeded, released_at, plan FROM periods "
            "ORDER BY ordinal"
        ).fetchall()
        recs = [
            {
                "ordinal": o,
                "start": s,
                "n_steps": n,
                "seeded": bool(sd),
                "released_at": at,
                **json.loads(plan),
            }
            for o, s, n, sd, at, plan in rows
        ]
        return pd.DataFrame.from_records(
            recs, columns=None if recs else ["ordinal", "start", "n_steps", "seeded"]
        )

    def ordinals(self) -> set[int]:
        """Ordinals of the released periods."""
        return {r[0] for r in self._con.execute("SELECT ordinal FROM periods")}

    def _get(self, ordinal: int, n_nodes: int) -> np.ndarray | None:
        row = self._con.execute(
            "SELECT n_steps, data FROM periods WHERE ordinal = ?", (int(ordinal),)
        ).fetchone()
        if row is None:
            return None
        return np.frombuffer(row[1], dtype="<f8").reshape(n_nodes, int(row[0])).copy()

    def _put(
        self,
        ordinal: int,
        start: str,
        values: np.ndarray,
        plan: dict,
        seeded: bool,
        measured: bytes | None = None,
        state: bytes | None = None,
        split_state=None,
    ):
        """Commit one released period with its plan and (k="auto") measurements: one
        transaction; a period already there is kept. ``state``: the whole planner's state
        after the period; ``split_state``: an iterable of ``(cut, root, data)``, the split
        planners' states (:mod:`dpstream.store._planner_state`; ``data`` the bytes or an
        iterable of their parts, :meth:`_put_split_state`), read inside the transaction one
        at a time."""
        data = np.ascontiguousarray(values, dtype="<f8")
        self._write_pending()  # (charged already; a no-op unless a new store's first period)
        self._mark_running(True)  # in the main file before the period's commit (module notes)
        # the blobs are written in place (incremental blob I/O into zeroblobs): bound as
        # parameters, SQLite copied each twice while building the row (2.4 GB at 1M meters)
        blobs = {"data": memoryview(data.reshape(-1)).cast("B")}
        parts = []
        if measured is not None:
            view = memoryview(measured).cast("B")
            if view.nbytes > MEASURED_PART_BYTES:  # in parts: a zero-length marker in the row
                size = MEASURED_PART_BYTES
                parts = [view[i : i + size] for i in range(0, view.nbytes, size)]
                view = view[:0]
            blobs["measured"] = view
        with transaction(self._con, self._what):
            cur = self._con.execute(
                "INSERT OR IGNORE INTO periods VALUES (?, ?, ?, ?, ?, datetime('now'), "
                f"zeroblob(?), {'zeroblob(?)' if measured is not None else '?'})",
                (
                    int(ordinal),
                    start,
                    int(data.shape[1]),
                    json.dumps(plan, sort_keys=True),
                    int(seeded),
                    blobs["data"].nbytes,
                    None if measured is None else blobs["measured"].nbytes,
                ),
            )
            if cur.rowcount:  # inserted (a period already there is kept)
                for column, view in blobs.items():
                    if view.nbytes:
                        with self._con.blobopen("periods", column, int(ordinal)) as blob:
                            blob.write(view)
                for i, part in enumerate(parts):
                    part_cur = self._con.execute(
                        "INSERT INTO measured_parts VALUES (?, ?, zeroblob(?))",
                        (int(ordinal), i, part.nbytes),
                    )
                    with self._con.blobopen("measured_parts", "data", part_cur.lastrowid) as blob:
                        blob.write(part)
                if state is not None or split_state is not None:  # replace the last ones
                    self._con.execute("DELETE FROM planner_state")
                    self._con.execute("DELETE FROM split_state")
                for cut, root, blob_bytes in split_state or ():
                    self._put_split_state(int(cut), str(root), int(ordinal), blob_bytes)
                if state is not None:  # the planner after this period (replaces the last)
                    sv, size = memoryview(state).cast("B"), MEASURED_PART_BYTES
                    for i in range(0, max(sv.nbytes, 1), size):
                        self._con.execute(
                            "INSERT INTO planner_state VALUES (?, ?, zeroblob(?))",
                            (i // size, int(ordinal), sv[i : i + size].nbytes),
                        )
                        with self._con.blobopen("planner_state", "data", i // size) as blob:
                            blob.write(sv[i : i + size])
            self._con.execute("DELETE FROM meta WHERE key = 'running'")  # with the period
        self.checkpoint()  # the main file holds the period (module notes)

    def _put_split_state(self, cut: int, root: str, ordinal: int, data) -> None:
        """One part's saved planner state (inside :meth:`_put`'s transaction), in parts:
        ``data`` is its bytes, or an iterable of its consecutive parts of at most
        ``MEASURED_PART_BYTES`` each (fetched one at a time from where the part runs, so
        this process never holds a whole state)."""
        if isinstance(data, bytes | bytearray | memoryview | np.ndarray):
            sv, size = memoryview(data).cast("B"), MEASURED_PART_BYTES
            data = (sv[i : i + size] for i in range(0, max(sv.nbytes, 1), size))
        for part, chunk in enumerate(data):
            chunk = memoryview(chunk).cast("B")
            cur = self._con.execute(
                "INSERT INTO split_state VALUES (?, ?, ?, ?, zeroblob(?))",
                (cut, root, part, ordinal, chunk.nbytes),
            )
            with self._con.blobopen("split_state", "data", cur.lastrowid) as blob:
                blob.write(chunk)

    def _measured(self, before: int, n: int) -> list[tuple[int, dict, bytes]]:
        """The last ``n`` stored periods before ordinal ``before`` that carry measurements:
        ``(ordinal, plan record, measured blob)`` in time order."""
        rows = self._con.execute(
            "SELECT ordinal, plan, measured FROM periods WHERE ordinal < ? AND measured IS NOT "
            "NULL ORDER BY ordinal DESC LIMIT ?",
            (int(before), int(n)),
        ).fetchall()
        return [(o, json.loads(plan), self._whole(o, blob)) for o, plan, blob in reversed(rows)]

    def _planner_state(self, after: int | None = None) -> tuple[int, bytes] | None:
        """The saved k="auto" planner state: ``(ordinal of its last period, bytes)``, or None
        (none saved: a store of before it, or periods released without it; or, given
        ``after``, one saved after another period: its bytes are then not read)."""
        if self._con.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'planner_state'"
        ).fetchone() is None:  # an older store opened read-only
            return None
        if after is not None:
            row = self._con.execute("SELECT MIN(ordinal) FROM planner_state").fetchone()
            if row[0] is None or int(row[0]) != int(after):
                return None
        rows = self._con.execute("SELECT ordinal, data FROM planner_state ORDER BY part").fetchall()
        if not rows or len({o for o, _ in rows}) != 1:
            return None
        return int(rows[0][0]), b"".join(d for _, d in rows)

    def _measured_at(self, ordinals: list[int]) -> dict[int, bytes]:
        """The measurement blobs of the stored periods ``ordinals`` (those that have them)."""
        out = {}
        for o in ordinals:
            row = self._con.execute(
                "SELECT measured FROM periods WHERE ordinal = ? AND measured IS NOT NULL",
                (int(o),),
            ).fetchone()
            if row is not None:
                out[int(o)] = self._whole(o, row[0])
        return out

    def _whole(self, ordinal: int, blob: bytes) -> bytes:
        """A period's measurements: the row's blob, or (zero-length there) its parts joined."""
        if len(blob):
            return blob
        parts = self._con.execute(
            "SELECT data FROM measured_parts WHERE ordinal = ? ORDER BY part", (int(ordinal),)
        ).fetchall()
        return b"".join(p[0] for p in parts)

    @contextmanager
    def job_lock(self, timeout: float = 0.0) -> Iterator[None]:
        """Hold the store's job lock (module notes) for the block, or raise
        :class:`StoreBusyError` after ``timeout`` seconds (0: at once). A read-only store takes
        no lock (nothing can be written: a release that needs a new period fails with
        :class:`~dpstream._files.ReadOnlyError`)."""
        if not isinstance(timeout, int | float) or not 0 <= timeout < float("inf"):
            raise ParameterError(
                "The 'lock_timeout' parameter of ReleaseStore must be a float in [0, inf). "
                f"Got {timeout!r} instead."
            )
        if self.readonly:
            yield
            return
        lock_file = self.path.with_name(self.path.name + ".lock")
        try:
            con = sqlite3.connect(lock_file, timeout=float(timeout), isolation_level=None)
        except sqlite3.Error as exc:
            raise classify_sqlite(exc, f"{self._what} (its lock file {lock_file.name!r})") from None
        try:
            con.execute("BEGIN EXCLUSIVE")
        except sqlite3.Error as exc:
            con.close()
            typed = classify_sqlite(exc, f"{self._what} (its lock file {lock_file.name!r})")
            if isinstance(typed, FileBusyError):
                raise StoreBusyError(
                    f"The store {self.path.name!r} is busy: another job is releasing into it (it "
                    f"holds {lock_file.name!r}; waited {float(timeout):g} s). Run one job at a "
                    "time per store, or give a lock timeout to wait for it."
                ) from None
            raise typed from None
        try:
            yield
        finally:
            try:
                con.execute("ROLLBACK")
            finally:
                con.close()

    def _mark_running(self, running: bool) -> None:
        """Set (checkpointed) or clear the mark "a commit may live only in the WAL"."""
        with transaction(self._con, self._what):
            if running:
                self._con.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('running', ?)",
                    (json.dumps({"pid": os.getpid(), "since": _now()}),),
                )
            else:
                self._con.execute("DELETE FROM meta WHERE key = 'running'")
        self.checkpoint()

    def read(self, ordinals=None) -> pd.DataFrame:
        """The released values of ``ordinals`` (default all), as a wide frame (time index, one
        column per node), in time order."""
        cfg = self.config
        if cfg is None:
            return pd.DataFrame()
        from ._grid import Grid

        grid = Grid.from_config(cfg)
        keys = sorted(self.ordinals() if ordinals is None else ordinals)
        blocks = [self._get(o, len(cfg["nodes"])) for o in keys]
        if any(b is None for b in blocks):
            raise ParameterError(
                "The 'ordinals' parameter of ReleaseStore.read names periods "
                "that are not in the store."
            )
        if not blocks:
            return pd.DataFrame(columns=cfg["nodes"])
        values = np.concatenate([b.T for b in blocks], axis=0)
        index = grid.index_of(keys, [b.shape[1] for b in blocks])
        return pd.DataFrame(values, index=index, columns=cfg["nodes"])

    # -- releasing ----------------------------------------------------------------------------

    def release_optstream(self, frame, **kwargs) -> pd.DataFrame:
        """Release the periods of ``frame`` not yet in the store with OptStream; return every
        period of ``frame`` (stored ones exactly as stored). See
        :func:`dpstream.store.release_to_store` for the parameters."""
        from ._release import release_to_store

        return release_to_store(self, frame, **kwargs)


def _new_meta() -> list[tuple[str, str]]:
    return [
        ("schema_version", str(SCHEMA_VERSION)),
        ("application", _APPLICATION),
        ("id", secrets.token_hex(16)),
        ("created", _now()),
    ]


def _writable(file: Path) -> bool:
    """The store and its folder (side files) can be written."""
    folder = file.parent if str(file.parent) else Path(".")
    return os.access(file, os.W_OK) and os.access(folder, os.W_OK)


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
