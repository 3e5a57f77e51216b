"""Privacy units as short JSON texts: how a ledger file stores the unit it accounts for."""

from __future__ import annotations

import json

from mechanisms import (
    EventLevel,
    LocalDP,
    ParameterError,
    PrivacyUnit,
    WAlphaIndistinguishability,
    WEvent,
)

__all__ = ["unit_from_json", "unit_to_json"]

_OWNER = "SQLiteLedger"


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


def _describe(unit: PrivacyUnit | None) -> str:
    return "any privacy unit" if unit is None else unit.describe()
