"""The store's accountant: a :class:`mechanisms.BudgetLedger` over the store's ``charges`` table.

Accounting per period ([FV19] Def. 2-3, §5.1; Kellaris et al. 2014 Thm. 3): a stream released
period by period with a mechanism whose every window of w steps costs at most ε is w-event
(or (w, α)) ε-private however many periods follow -- that is why an operator can release every
day. What must never happen is a *second* release of the same period (fresh noise on the same
values composes sequentially: 2ε for every window that meets it). So the ledger's total is the
per-window ε of the store's configuration, and a charge belongs to a period: the spend of a
period is the sum of its charges plus any charge not tied to a period (sequential with
everything), and every period's spend must stay within the total. A second release of a
stored period is refused here even if the store's own check were bypassed.

``remaining_epsilon`` is what the worst period has left (0 once any period is fully released);
:meth:`StoreLedger.spent` gives one period's spend.
"""

from __future__ import annotations

import sqlite3
from fractions import Fraction

from mechanisms import Budget, BudgetExceededError, BudgetLedger
from mechanisms.core._budget import Charge

__all__ = ["StoreLedger"]

_PREFIX = "period "


def _label(period: int | None, label: str) -> str:
    return label if period is None else f"{_PREFIX}{int(period)}: {label}"


def _period_of(label: str) -> int | None:
    if label.startswith(_PREFIX) and ": " in label:
        head = label[len(_PREFIX) : label.index(": ")]
        if head.lstrip("-").isdigit():
            return int(head)
    return None


class StoreLedger(BudgetLedger):
    """A ledger persisted in the store's SQLite ``charges`` table, accounting per period.

    Charges go through :meth:`charge` with ``period=`` (the period's ordinal). A charge is
    durable (committed) before it counts and before any draw of that period (hook
    ``_persist``); on opening, every committed charge is restored (hook ``_restore``).
    """

    __slots__ = ("_con", "_by_period", "_global", "_period")

    def __init__(self, con: sqlite3.Connection, total: Budget, *, unit=None) -> None:
        self._con = con
        self._by_period: dict[int, Fraction] = {}
        self._global = Fraction(0)
        self._period: int | None = None
        super().__init__(total, unit=unit)

    def _restore(self) -> list[Charge]:
        rows = self._con.execute(
            "SELECT period, label, epsilon, delta FROM charges ORDER BY id"
        ).fetchall()
        return [Charge(_label(p, lab), Budget(e, d)) for p, lab, e, d in rows]

    def _persist(self, charge: Charge) -> None:
        period = _period_of(charge.label)
        label = charge.label.split(": ", 1)[1] if period is not None else charge.label
        with self._con:  # one transaction: the charge is committed before it counts
            self._con.execute(
                "INSERT INTO charges (period, label, epsilon, delta, at) "
                "VALUES (?, ?, ?, ?, datetime('now'))",
                (period, label, charge.budget.epsilon, charge.budget.delta),
            )

    def _record(self, charge: Charge) -> None:
        period = _period_of(charge.label)
        eps = Fraction(charge.budget.epsilon)
        if period is None:
            self._global += eps
        else:
            self._by_period[period] = self._by_period.get(period, Fraction(0)) + eps
        self._eps = self._global + max(self._by_period.values(), default=Fraction(0))
        self._dlt += Fraction(charge.budget.delta)
        self._charges.append(charge)

    def __repr__(self) -> str:
        return (
            f"StoreLedger(total={self.total} per window, periods charged="
            f"{len(self._by_period)}, worst period spent ε={float(self._eps):g})"
        )

    def spent(self, period: int) -> float:
        """ε charged to ``period`` (its own charges plus those tied to no period)."""
        return float(self._global + self._by_period.get(int(period), Fraction(0)))

    def check(self, budget: Budget, label: str = "", *, unit=None, period: int | None = None):
        """Raise what :meth:`charge` would: the period's spend (or, for a charge tied to no
        period, the worst period's) plus ``budget`` must stay within the total."""
        if period is None:
            period = self._period
        if period is None:
            super().check(budget, label, unit=unit)
            return
        super().check_unit(unit, label or "the release")
        if not isinstance(budget, Budget):
            super().check(budget, label, unit=unit)  # raises the ParameterError
        spent = self._global + self._by_period.get(int(period), Fraction(0))
        eps = spent + Fraction(budget.epsilon)
        dlt = self._dlt + Fraction(budget.delta)
        if eps > Fraction(self.total.epsilon) or dlt > Fraction(self.total.delta):
            remaining = float(Fraction(self.total.epsilon) - spent)
            raise BudgetExceededError(budget, f"(ε={remaining:g} for period {period})", label)

    def charge(self, budget: Budget, label: str = "", *, unit=None, period: int | None = None):
        """Charge ``budget`` to ``period`` (None: to every period), or raise and record nothing."""
        self._period = None if period is None else int(period)
        try:
            super().charge(budget, _label(self._period, label), unit=unit)
        finally:
            self._period = None
