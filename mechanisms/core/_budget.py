"""Privacy budgets as values: validated on construction, split exactly, charged to a ledger.

Budgets are checked when built (ε > 0 and finite, 0 ≤ δ < 1). A ledger keeps its accounts
in exact rationals (``fractions.Fraction`` of the binary floats given), as Tumult Core does, so a
thousand charges of 0.001 against a total of 1 neither overspend nor get refused by rounding.

Composition rules (Dwork and Roth 2014, Thm. 3.16; McSherry 2009, Thm. 4 for parallel):

* sequential: mechanisms on the same data add up, (Σε, Σδ);
* parallel: mechanisms on disjoint parts of the stream cost the maximum, (max ε, max δ);
* w-window (Kellaris et al. 2014, Thm. 3): a stream of per-step mechanisms is w-event ε-DP with
  ε the largest sum of per-step losses over any w consecutive steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ._errors import BudgetExceededError, ParameterError
from ._validation import check_integer, check_positive, check_probability

if TYPE_CHECKING:
    from ._units import PrivacyUnit

__all__ = [
    "Budget",
    "BudgetLedger",
    "Charge",
    "compose_parallel",
    "compose_sequential",
    "compose_w_window",
]

_SHARE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Budget:
    """A privacy loss (ε, δ): validated, immutable, composable."""

    epsilon: float
    """ε > 0, finite."""
    delta: float = 0.0
    """0 ≤ δ < 1."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon", "Budget"))
        object.__setattr__(self, "delta", check_probability(self.delta, "delta", "Budget"))

    def split(
        self, shares: Sequence[float], delta_shares: Sequence[float] | None = None
    ) -> tuple[Budget | None, ...]:
        """Split ε by ``shares`` (and δ by ``delta_shares``, default the same shares).

        Shares must be non-negative and sum to one (within 1e-9). A zero ε-share yields
        ``None`` in its place: that part gets no budget and must release nothing. The parts are
        rounded down (by at most a few ulps) so that their exact sum never exceeds the whole:
        charging every part to a ledger of this budget always fits.
        """
        eps_sh = _check_shares(shares, "shares")
        dlt_sh = eps_sh if delta_shares is None else _check_shares(delta_shares, "delta_shares")
        if len(dlt_sh) != len(eps_sh):
            raise ParameterError(
                "The 'delta_shares' parameter of Budget.split must have as many entries as "
                f"'shares' ({len(eps_sh)}). Got {len(dlt_sh)} instead."
            )
        eps = _round_down_to_fit([self.epsilon * e for e in eps_sh], self.epsilon)
        dlt = _round_down_to_fit([self.delta * d for d in dlt_sh], self.delta)
        return tuple(
            None if share == 0 else Budget(e, d)
            for share, e, d in zip(eps_sh, eps, dlt, strict=True)
        )

    def __str__(self) -> str:
        return f"(ε={self.epsilon:g}, δ={self.delta:g})"


def _round_down_to_fit(parts: list[float], total: float) -> list[float]:
    """Round the parts down, if needed, so that their exact (rational) sum is at most ``total``.

    Splitting a float by float shares rounds each product to nearest; the exact sum of the
    parts can then exceed the total by a few ulps (or by up to 1e-9 of it, the tolerance on
    the shares) and a ledger would (rightly) refuse the last charge. Rounding down, as Tumult
    Core does for every float conversion, never overspends: when the parts overshoot, each is
    scaled by ``total / sum`` exactly and rounded down to a double, so every part is at most
    its exact scaled value and those sum to ``total``. (One pass: lowering every part by an
    ulp until they fit took millions of passes for an overshoot of 1e-9.)
    """
    exact = [Fraction(x) for x in parts]
    whole = sum(exact, Fraction(0))
    if whole <= Fraction(total):
        return parts
    ratio = Fraction(total) / whole
    out = []
    for x in exact:
        y = x * ratio
        f = float(y)
        out.append(math.nextafter(f, 0.0) if Fraction(f) > y else f)
    return out


def _check_shares(shares: Sequence[float], name: str) -> tuple[float, ...]:
    vals = tuple(float(s) for s in shares)
    if not vals or any(not np.isfinite(s) or s < 0 for s in vals):
        raise ParameterError(
            f"The {name!r} parameter of Budget.split must be non-negative finite floats. "
            f"Got {list(shares)!r} instead."
        )
    if abs(sum(vals) - 1.0) > _SHARE_TOLERANCE:
        raise ParameterError(
            f"The {name!r} parameter of Budget.split must sum to 1. Got a sum of "
            f"{sum(vals)!r} instead. Normalise the shares."
        )
    return vals


def compose_sequential(*budgets: Budget) -> Budget:
    """Budget of running every mechanism on the same data: (Σε, Σδ)."""
    if not budgets:
        raise ParameterError("compose_sequential needs at least one Budget. Got none.")
    eps = sum((Fraction(b.epsilon) for b in budgets), Fraction(0))
    dlt = sum((Fraction(b.delta) for b in budgets), Fraction(0))
    return Budget(float(eps), float(dlt))


def compose_parallel(*budgets: Budget) -> Budget:
    """Budget of running each mechanism on a disjoint part of the data: (max ε, max δ)."""
    if not budgets:
        raise ParameterError("compose_parallel needs at least one Budget. Got none.")
    return Budget(max(b.epsilon for b in budgets), max(b.delta for b in budgets))


def compose_w_window(step_epsilons: Sequence[float], w: int) -> float:
    """Largest total ε spent in any ``w`` consecutive steps (w-event privacy, Kellaris et al.).

    ``step_epsilons[t]`` is the loss of the mechanism that reads step t only. The stream is
    w-event ε-DP with the returned ε.
    """
    w = check_integer(w, "w", "compose_w_window")
    eps = np.asarray(step_epsilons, dtype=np.float64)
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ParameterError(
            "The 'step_epsilons' parameter of compose_w_window must be a non-empty 1-D "
            "sequence of non-negative finite floats."
        )
    csum = np.concatenate([[0.0], np.cumsum(eps)])
    width = min(w, eps.size)
    return float(np.max(csum[width:] - csum[:-width]))


class Charge(NamedTuple):
    """One entry of a ledger."""

    label: str
    budget: Budget


class BudgetLedger:
    """Charges budgets against a total and refuses to overspend (sequential composition).

    Examples
    --------
    >>> ledger = BudgetLedger(Budget(1.0, 1e-6))
    >>> ledger.charge(Budget(0.9, 1e-6), "threshold")
    >>> ledger.remaining_epsilon
    0.09999999999999998
    """

    __slots__ = ("_charges", "_eps", "_dlt", "total", "unit")

    def __init__(self, total: Budget, *, unit: PrivacyUnit | None = None) -> None:
        if not isinstance(total, Budget):
            raise ParameterError(
                f"The 'total' parameter of BudgetLedger must be a Budget. Got {total!r} instead."
            )
        from ._units import PrivacyUnit  # _units imports Budget from here

        if unit is not None and not isinstance(unit, PrivacyUnit):
            raise ParameterError(
                "The 'unit' parameter of BudgetLedger must be a PrivacyUnit (EventLevel(), "
                f"WEvent(w), WAlphaIndistinguishability(w, alpha), LocalDP()). Got {unit!r}."
            )
        self.total = total
        self.unit = unit
        self._eps = Fraction(0)
        self._dlt = Fraction(0)
        self._charges: list[Charge] = []
        for charge in self._restore():
            self._record(charge)

    # -- persistence hooks (a subclass stores charges, e.g. dpstream's SQLite ledger) --

    def _restore(self) -> list[Charge]:
        """Charges made before this object existed (none for an in-memory ledger)."""
        return []

    def _persist(self, charge: Charge) -> None:
        """Make ``charge`` durable before it counts; raise to refuse it (nothing recorded)."""

    def _record(self, charge: Charge) -> None:
        self._eps += Fraction(charge.budget.epsilon)
        self._dlt += Fraction(charge.budget.delta)
        self._charges.append(charge)

    def check_unit(self, unit: PrivacyUnit | None, owner: str = "release") -> None:
        """Refuse a release whose unit is not the ledger's (a budget only composes within one
        unit: ε under event-level DP and ε under (w, α)-indistinguishability are not the same
        currency). A ledger built without a unit accepts any."""
        if self.unit is None or unit is None:
            return
        if unit != self.unit:
            raise ParameterError(
                f"The privacy unit of {owner} ({unit.describe()}) is not the ledger's "
                f"({self.unit.describe()}). Create one ledger per privacy unit."
            )

    def check(self, budget: Budget, label: str = "", *, unit: PrivacyUnit | None = None) -> None:
        """Raise what :meth:`charge` would raise, and charge nothing (validation before work)."""
        if not isinstance(budget, Budget):
            raise ParameterError(
                f"The 'budget' parameter of BudgetLedger.charge must be a Budget. Got {budget!r}."
            )
        self.check_unit(unit, label or "the release")
        eps = self._eps + Fraction(budget.epsilon)
        dlt = self._dlt + Fraction(budget.delta)
        if eps > Fraction(self.total.epsilon) or dlt > Fraction(self.total.delta):
            raise BudgetExceededError(budget, self.remaining_text, label)

    def charge(self, budget: Budget, label: str = "", *, unit: PrivacyUnit | None = None) -> None:
        """Record ``budget`` as spent, or raise :class:`BudgetExceededError` (or a
        :class:`ParameterError` for a unit that is not the ledger's) and record nothing."""
        self.check(budget, label, unit=unit)
        charge = Charge(label, budget)
        self._persist(charge)
        self._record(charge)

    @property
    def remaining_epsilon(self) -> float:
        """ε not yet charged (rounded down to a double)."""
        return float(Fraction(self.total.epsilon) - self._eps)

    @property
    def remaining_delta(self) -> float:
        """δ not yet charged."""
        return float(Fraction(self.total.delta) - self._dlt)

    @property
    def remaining_text(self) -> str:
        return f"(ε={self.remaining_epsilon:g}, δ={self.remaining_delta:g})"

    @property
    def charges(self) -> tuple[Charge, ...]:
        """Every successful charge, in order."""
        return tuple(self._charges)

    def __repr__(self) -> str:
        return f"BudgetLedger(total={self.total}, remaining={self.remaining_text})"
