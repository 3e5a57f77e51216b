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
    """Validate the ``ledger`` argument (None: the data set's ledger; False: none)."""
    if ledger is not None and ledger is not False and not isinstance(ledger, BudgetLedger):
        raise ParameterError(
            f"The 'ledger' parameter of {owner} must be a BudgetLedger, None (the data set's "
            f"ledger) or False (none: a throwaway experiment). Got {type(ledger).__name__} "
            "instead."
        )
    return ledger


def charge_release(
    ledger: BudgetLedger | None,
    budget: Budget,
    unit: PrivacyUnit,
    owner: str,
    *,
    frame: Any = None,
    seeded: bool = False,
) -> dict | None:
    """Charge ``budget`` under ``unit`` to the data set's ledger of ``frame``'s streams
    (:func:`dpstream._dataset.account_release`: ``ledger`` None, a ledger, or False).

    Call after validation and before the first draw. Returns the record's ``ledger`` entry.
    Raises :class:`~mechanisms.BudgetExceededError` (overspend) or
    :class:`~mechanisms.ParameterError` (a unit that is not the ledger's, a ledger of other
    streams); nothing is charged then.
    """
    from dpstream._dataset import account_release

    tree = None
    if frame is not None and frame.hierarchy is not None:
        tree = dict(frame.hierarchy.children)
    return account_release(
        ledger,
        streams=None if frame is None else _ids(frame),
        hierarchy=tree,
        budget=budget,
        unit=unit,
        seeded=seeded,
        owner=owner,
    )


def _ids(frame: Any) -> list[str] | None:
    """A prepared frame's stream ids (its leaves); None for an unnamed Series."""
    if frame.is_series and frame.series_name is None:
        return None
    return [str(leaf) for leaf in frame.leaves]


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


def attach_record(
    result: pd.DataFrame | pd.Series, record: PrivacyRecord, ledger: dict | None = None
) -> None:
    """Put the record in ``result.attrs["privacy"]`` (a dict: one release), with the ledger
    that paid for it (``charge_release``'s entry) under ``"ledger"``."""
    result.attrs["privacy"] = record.to_dict()
    if ledger is not None:
        result.attrs["privacy"]["ledger"] = ledger
