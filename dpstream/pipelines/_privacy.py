"""The accountant and the privacy record of a pipeline release (issue 11 §4).

Every pipeline takes ``ledger=`` (a :class:`mechanisms.BudgetLedger`, e.g. the persisted
:class:`dpstream._ledger.SQLiteLedger`), charges it the whole release's budget under the
release's privacy unit after every input is validated and before any noise is drawn, and
returns a frame whose ``attrs["privacy"]`` holds :meth:`mechanisms.PrivacyRecord.to_dict`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mechanisms import (
    Budget,
    BudgetLedger,
    ParameterError,
    PrivacyGuarantee,
    PrivacyRecord,
    PrivacyUnit,
)

__all__ = ["attach_record", "charge_release", "check_ledger", "release_record"]


def check_ledger(ledger: object, owner: str) -> BudgetLedger | None:
    """Validate the ``ledger`` argument (None: the release is charged to a fresh ledger)."""
    if ledger is not None and not isinstance(ledger, BudgetLedger):
        raise ParameterError(
            f"The 'ledger' parameter of {owner} must be a BudgetLedger or None. Got "
            f"{type(ledger).__name__} instead."
        )
    return ledger


def charge_release(
    ledger: BudgetLedger | None, budget: Budget, unit: PrivacyUnit, owner: str
) -> None:
    """Charge ``budget`` under ``unit`` (a fresh ledger of exactly ``budget`` when None).

    Call after validation and before the first draw. Raises
    :class:`~mechanisms.BudgetExceededError` (overspend) or
    :class:`~mechanisms.ParameterError` (a unit that is not the ledger's); nothing is
    charged then.
    """
    target = BudgetLedger(budget, unit=unit) if ledger is None else ledger
    target.charge(budget, owner, unit=unit)


def release_record(
    *,
    unit: PrivacyUnit,
    budget: Budget,
    proof: str,
    mechanism: str,
    parameters: dict[str, Any],
    bound: float | None,
    seeded: bool,
) -> PrivacyRecord:
    """The public record of a pipeline release."""
    return PrivacyRecord.from_guarantee(
        PrivacyGuarantee(unit=unit, budget=budget, proof=proof),
        mechanism=mechanism,
        parameters=parameters,
        bound=bound,
        seeded=seeded,
    )


def attach_record(result: pd.DataFrame | pd.Series, record: PrivacyRecord) -> None:
    """Put the record in ``result.attrs["privacy"]`` (a dict: one release)."""
    result.attrs["privacy"] = record.to_dict()
