"""The store's accountant: :class:`dpstream.SQLiteLedger` on the store's ``charges`` table.

Accounting per period ([FV19] Def. 2-3, §5.1; Kellaris et al. 2014 Thm. 3): a stream released
period by period with a mechanism whose every window of w steps costs at most ε is w-event
(or (w, α)) ε-private however many periods follow -- that is why an operator can release every
day. What must never happen is a *second* release of the same period (fresh noise on the same
values composes sequentially: 2ε for every window that meets it). So the ledger's total is the
per-window ε of the store's configuration, and a charge belongs to a period: the spend of a
period is the sum of its charges plus any charge not tied to a period (sequential with
everything), and every period's spend must stay within the total. A second release of a
stored period is refused here even if the store's own check were bypassed.

The implementation is :class:`dpstream._ledger.SQLiteLedger` (one SQLite ledger for dpstream:
charges committed under ``BEGIN IMMEDIATE`` before they count, other processes' charges re-read
under the lock); this module only names it on a connection.

Issue 24 §2: a store also charges its *data set's* ledger (:mod:`dpstream._dataset`), first,
with the period's first time stamp as the key and the store's id: a period released by another
store of the same data set (an emptied, lost or new store file) is refused there, before the
store's own charge and before any draw.
"""

from __future__ import annotations

import sqlite3

from mechanisms import Budget

from .._ledger import SQLiteLedger

__all__ = ["StoreLedger"]


class StoreLedger(SQLiteLedger):
    """:class:`~dpstream.SQLiteLedger` in an open store's ``charges`` table.

    ``remaining_epsilon`` is what the worst period has left (0 once any period is fully
    released); :meth:`spent` gives one period's spend; :meth:`charge` takes ``period=``.
    With a data set's ledger attached (:meth:`attach`), a period's charge and check go to it
    first (keyed by the period's first time stamp and the store's id).
    """

    __slots__ = ("_dataset", "_grid", "_owns", "_store_id", "_store_name", "before_charge")

    def __init__(
        self, con: sqlite3.Connection, total: Budget, *, unit=None, name: str = "the store"
    ) -> None:
        self._con = con
        self.path = None
        self.meta = {}
        self._dataset = None
        self._grid = None
        self._owns = False
        self._store_id = None
        self._store_name = name
        #: Called before every charge (the store writes a new store's configuration then).
        self.before_charge = None
        self._start(total, unit)

    def attach(self, dataset: SQLiteLedger, *, grid, store_id: str, owns: bool) -> None:
        """Charge ``dataset`` (the data set's ledger) for every period first; ``owns``: close it
        with the store."""
        self._dataset, self._grid, self._store_id, self._owns = dataset, grid, store_id, owns

    @property
    def dataset_ledger(self) -> SQLiteLedger | None:
        """The data set's ledger this store charges (None: none attached)."""
        return self._dataset

    def _what(self) -> str:
        return f"The store {self._store_name!r}"

    def _key(self, period: int) -> tuple[int, int]:
        return self._grid.start(int(period)), self._grid.w * self._grid.step

    def check(self, budget, label="", *, unit=None, period=None) -> None:
        if self._dataset is not None and period is not None:
            key, span = self._key(period)
            self._dataset.charge_store_period(
                budget, self._tag(label), period=key, span=span, store=self._store_id,
                unit=unit, dry=True,
            )  # fmt: skip
        SQLiteLedger.check(self, budget, label, unit=unit, period=period)

    def charge(self, budget, label="", *, unit=None, period=None) -> None:
        if self.before_charge is not None:
            self.before_charge()
        if self._dataset is not None and period is not None:
            SQLiteLedger.check(self, budget, label, unit=unit, period=period)  # own balance
            key, span = self._key(period)
            self._dataset.charge_store_period(
                budget, self._tag(label), period=key, span=span, store=self._store_id, unit=unit
            )
        SQLiteLedger.charge(self, budget, label, unit=unit, period=period)

    def _tag(self, label: str) -> str:
        return f"store {self._store_name}: {label}"

    def close_dataset(self) -> None:
        """Close the data set's ledger if the store opened it."""
        if self._dataset is not None and self._owns:
            self._dataset.close()
        self._dataset = None

    def __repr__(self) -> str:
        return (
            f"StoreLedger(total={self.total} per window, periods charged="
            f"{len(self._by_period)}, worst period spent ε={float(self._eps):g})"
        )
