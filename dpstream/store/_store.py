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
the in-stream planner of the next periods reads); ``charges`` the ledger
(:data:`dpstream._ledger.CHARGES_TABLE`, :class:`~dpstream.store._ledger.StoreLedger`).
Version 1 stores (before issue 15) are refused with a message: start a new store.

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
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import Budget, DPStreamError, ParameterError

from .._ledger import CHARGES_TABLE, transaction
from ._ledger import StoreLedger

__all__ = ["ReleaseStore", "StoreBusyError"]

SCHEMA_VERSION = 2
#: Seconds a short transaction (a charge, a period) waits for another writer.
_BUSY_TIMEOUT = 30.0

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
)


class StoreBusyError(DPStreamError):
    """Another job is releasing into the same store (its job lock is held)."""


class ReleaseStore:
    """A release store: configuration, released periods, plans and the ledger in one file.

    Parameters
    ----------
    path : str or Path
        The store's file, created (with its schema) on first use.

    Notes
    -----
    One connection per store, parameterised SQL, a transaction per unit of work. The store's
    configuration (mechanism, unit, ε, α, w, k, sampler, weights, hierarchy, time grid) is fixed
    by its first release; a release with another configuration is refused
    (:class:`~mechanisms.ParameterError`): start a new store. Use
    :meth:`release_optstream` to release; a period already in the store is returned as stored
    and nothing is drawn or charged.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    >>> frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    >>> with tempfile.TemporaryDirectory() as d, ReleaseStore(f"{d}/ops.db") as store:
    ...     first = store.release_optstream(frame, epsilon=1.0, hierarchy={"t": ["a", "b"]}, seed=1)
    ...     again = store.release_optstream(frame, epsilon=1.0, hierarchy={"t": ["a", "b"]}, seed=2)
    ...     bool(first.equals(again)), len(store.periods())
    (True, 2)
    """

    def __init__(self, path: str | Path) -> None:
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
        # isolation_level=None: explicit transactions (BEGIN IMMEDIATE ... COMMIT), as the ledger.
        self._con = sqlite3.connect(file, timeout=_BUSY_TIMEOUT, isolation_level=None)
        try:
            self._open(file)
        except sqlite3.DatabaseError:
            self._con.close()
            raise ParameterError(
                f"The 'path' parameter of ReleaseStore names a file that is not a dpstream store "
                f"(not an SQLite database): {file.name!r}. Name a new file or an existing store."
            ) from None
        except ParameterError:
            self._con.close()
            raise
        self._ledger: StoreLedger | None = None

    def _open(self, file: Path) -> None:
        """Journal, schema and version check (one transaction)."""
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        with transaction(self._con):
            if self._con.execute("SELECT 1 FROM sqlite_master WHERE name='periods'").fetchone():
                self._con.execute(_SCHEMA[0])  # an existing store: its version decides below
            else:
                for sql in _SCHEMA:
                    self._con.execute(sql)
            row = self._con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._con.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) != SCHEMA_VERSION:
                raise ParameterError(
                    f"The store {file.name!r} has schema version {row[0]}; this dpstream reads "
                    f"version {SCHEMA_VERSION}. Use a matching dpstream or a new store."
                )

    # -- context manager ------------------------------------------------------------------

    def close(self) -> None:
        """Close the store's connection."""
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
        """The store's configuration (public parameters), or None before its first release."""
        row = self._con.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        return None if row is None else json.loads(row[0])

    def _check_config(self, config: dict) -> None:
        """Refuse a configuration that is not the store's (nothing written)."""
        stored = self.config
        if stored is None:
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
                "its periods): release with the store's settings, or start a new store."
            )

    def _fix_config(self, config: dict) -> dict:
        """Write the configuration on first use; refuse a different one afterwards."""
        self._check_config(config)
        stored = self.config
        if stored is None:
            with transaction(self._con):
                self._con.execute(
                    "INSERT INTO meta VALUES ('config', ?)", (json.dumps(config, sort_keys=True),)
                )
            return json.loads(json.dumps(config))
        return stored

    @property
    def ledger(self) -> StoreLedger | None:
        """The store's accountant (None before its first release)."""
        cfg = self.config
        if cfg is None:
            return None
        if self._ledger is None:
            from mechanisms import WAlphaIndistinguishability, WEvent

            w = int(cfg["w"])
            unit = (
                WEvent(w=w)
                if cfg["alpha"] is None
                else WAlphaIndistinguishability(w=w, alpha=float(cfg["alpha"]))
            )
            total = Budget(cfg["epsilon"], cfg.get("delta") or 0.0)
            self._ledger = StoreLedger(self._con, total, unit=unit)
        return self._ledger

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
    ):
        """Commit one released period with its plan and (k="auto") measurements: one
        transaction; a period already there is kept."""
        data = np.ascontiguousarray(values, dtype="<f8")
        with transaction(self._con):
            self._con.execute(
                "INSERT OR IGNORE INTO periods VALUES (?, ?, ?, ?, ?, datetime('now'), ?, ?)",
                (
                    int(ordinal),
                    start,
                    int(data.shape[1]),
                    json.dumps(plan, sort_keys=True),
                    int(seeded),
                    data.tobytes(),
                    measured,
                ),
            )

    def _measured(self, before: int, n: int) -> list[tuple[int, dict, bytes]]:
        """The last ``n`` stored periods before ordinal ``before`` that carry measurements:
        ``(ordinal, plan record, measured blob)`` in time order."""
        rows = self._con.execute(
            "SELECT ordinal, plan, measured FROM periods WHERE ordinal < ? AND measured IS NOT "
            "NULL ORDER BY ordinal DESC LIMIT ?",
            (int(before), int(n)),
        ).fetchall()
        return [(o, json.loads(plan), blob) for o, plan, blob in reversed(rows)]

    @contextmanager
    def job_lock(self, timeout: float = 0.0) -> Iterator[None]:
        """Hold the store's job lock (module notes) for the block, or raise
        :class:`StoreBusyError` after ``timeout`` seconds (0: at once)."""
        if not isinstance(timeout, int | float) or not 0 <= timeout < float("inf"):
            raise ParameterError(
                "The 'lock_timeout' parameter of ReleaseStore must be a float in [0, inf). "
                f"Got {timeout!r} instead."
            )
        lock_file = self.path.with_name(self.path.name + ".lock")
        con = sqlite3.connect(lock_file, timeout=float(timeout), isolation_level=None)
        try:
            con.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError:
            con.close()
            raise StoreBusyError(
                f"The store {self.path.name!r} is busy: another job is releasing into it (it "
                f"holds {lock_file.name!r}; waited {float(timeout):g} s). Run one job at a time "
                "per store, or give a lock timeout to wait for it."
            ) from None
        try:
            yield
        finally:
            con.execute("ROLLBACK")
            con.close()

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


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
