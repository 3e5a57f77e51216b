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
    """

    __slots__ = ()

    def __init__(self, con: sqlite3.Connection, total: Budget, *, unit=None) -> None:
        self._con = con
        self.path = None
        self._start(total, unit)

    def __repr__(self) -> str:
        return (
            f"StoreLedger(total={self.total} per window, periods charged="
            f"{len(self._by_period)}, worst period spent ε={float(self._eps):g})"
        )
