"""The privacy record every released output carries: what was protected, at what cost, how.

A :class:`PrivacyRecord` holds only public facts (the unit, ε, δ, w, α, the bound, the
mechanism's name and its public parameters, whether a seed was used, the dpstream version):
never anything computed from the data. It travels with a release as ``.privacy`` on a release
object, in ``DataFrame.attrs["privacy"]``, as a JSON sidecar next to a written file and in the
report's ``results.json``; :meth:`PrivacyRecord.to_dict` is the one serialisation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any

from ._errors import ParameterError
from ._units import (
    EventLevel,
    LocalDP,
    PrivacyGuarantee,
    PrivacyUnit,
    WAlphaIndistinguishability,
    WEvent,
)

__all__ = ["PrivacyRecord", "dpstream_version", "unit_kind"]

#: The unit names of records, one word each.
UNIT_KINDS = ("event", "w-event", "(w, alpha)", "local")


def dpstream_version() -> str:
    """The installed dpstream version ("unknown" when run from a source tree not installed)."""
    try:
        return metadata.version("dpstream")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout without install
        return "unknown"


def unit_kind(unit: PrivacyUnit) -> str:
    """The record's name of a privacy unit: one of :data:`UNIT_KINDS`."""
    if isinstance(unit, WAlphaIndistinguishability):
        return "(w, alpha)"
    if isinstance(unit, WEvent):
        return "w-event"
    if isinstance(unit, EventLevel):
        return "event"
    if isinstance(unit, LocalDP):
        return "local"
    raise ParameterError(f"Unknown privacy unit {unit!r}.")  # pragma: no cover


def _public(value: Any) -> Any:
    """A JSON-able copy of a public parameter (numbers, strings, tuples, None)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # numpy scalar
        return _public(value.item())
    if isinstance(value, list | tuple):
        return [_public(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _public(v) for k, v in value.items()}
    raise ParameterError(
        "A privacy record holds public scalars, strings and lists only; "
        f"got {type(value).__name__}."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyRecord:
    """The public description of one release's privacy guarantee.

    Examples
    --------
    >>> from mechanisms import Budget, WAlphaIndistinguishability
    >>> rec = PrivacyRecord.from_guarantee(
    ...     PrivacyGuarantee(WAlphaIndistinguishability(48, 50.0), Budget(1.0), "[FV19] Thm. 9"),
    ...     mechanism="optstream", parameters={"k": 6}, seeded=False)
    >>> rec.unit, rec.epsilon, rec.w, rec.alpha
    ('(w, alpha)', 1.0, 48, 50.0)
    """

    unit: str
    """The neighbour relation: "event", "w-event", "(w, alpha)" or "local"."""
    epsilon: float
    """Privacy loss ε of the whole release."""
    delta: float
    """Privacy loss δ (0 for pure ε-DP)."""
    mechanism: str
    """The mechanism's name (e.g. "optstream", "pak-mechanism-1", "binary-tree")."""
    proof: str = ""
    """The theorem or argument that proves the guarantee."""
    w: int | None = None
    """Window length in steps (w-event and (w, α) units)."""
    alpha: float | None = None
    """Largest change of one value hidden per step ((w, α) unit), in the values' units."""
    bound: float | None = None
    """Public bound B of the values (event-level and local releases)."""
    parameters: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    """Public parameters of the mechanism (never values computed from the data)."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, **not a release**."""
    version: str = field(default_factory=dpstream_version)
    """dpstream version that made the release."""

    def __post_init__(self) -> None:
        if self.unit not in UNIT_KINDS:
            raise ParameterError(
                f"The 'unit' parameter of PrivacyRecord must be one of {UNIT_KINDS}. "
                f"Got {self.unit!r}."
            )
        object.__setattr__(self, "parameters", MappingProxyType(_public(dict(self.parameters))))

    @classmethod
    def from_guarantee(
        cls,
        guarantee: PrivacyGuarantee,
        *,
        mechanism: str,
        parameters: dict[str, Any] | None = None,
        bound: float | None = None,
        seeded: bool,
    ) -> PrivacyRecord:
        """The record of a release whose mechanism declared ``guarantee``."""
        unit = guarantee.unit
        return cls(
            unit=unit_kind(unit),
            epsilon=float(guarantee.budget.epsilon),
            delta=float(guarantee.budget.delta),
            mechanism=mechanism,
            proof=guarantee.proof,
            w=getattr(unit, "w", None),
            alpha=getattr(unit, "alpha", None),
            bound=None if bound is None else float(bound),
            parameters=dict(parameters or {}),
            seeded=bool(seeded),
        )

    def describe(self) -> str:
        """The guarantee in plain words, for a terminal or a report."""
        if self.unit == "(w, alpha)":
            hidden = (
                f"any change of up to {self.alpha:g} (in the data's units) of one individual's "
                f"value per step, within any {self.w} consecutive steps, is hidden"
            )
        elif self.unit == "w-event":
            hidden = f"any changes within {self.w} consecutive steps are hidden"
        elif self.unit == "event":
            within = "" if self.bound is None else f" (values in [0, {self.bound:g}])"
            hidden = f"any single value of the stream{within} is hidden"
        else:
            hidden = "each reported value is private on its own (local DP)"
        loss = f"ε = {self.epsilon:g}" + (f", δ = {self.delta:g}" if self.delta else "")
        tail = " Seeded: an experiment, not a release." if self.seeded else ""
        return f"{self.mechanism}: {hidden}; privacy loss {loss}.{tail}"

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON-able data (the one serialisation)."""
        return {
            "unit": self.unit,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "w": self.w,
            "alpha": self.alpha,
            "bound": self.bound,
            "mechanism": self.mechanism,
            "parameters": dict(self.parameters),
            "proof": self.proof,
            "seeded": self.seeded,
            "release": not self.seeded,
            "version": self.version,
            "guarantee": self.describe(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
