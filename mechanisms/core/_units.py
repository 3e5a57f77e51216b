"""Privacy units: what a mechanism protects, stated as data, not in comments.

A mechanism declares its :class:`PrivacyGuarantee`: the unit (who the neighbours are), the
loss (a :class:`~mechanisms.Budget`) and the theorem that proves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._budget import Budget
from ._validation import check_integer, check_positive

__all__ = [
    "EventLevel",
    "LocalDP",
    "PrivacyGuarantee",
    "PrivacyUnit",
    "WAlphaIndistinguishability",
    "WEvent",
]


class PrivacyUnit:
    """Base class of the neighbour relations dpstream knows."""

    __slots__ = ()

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class EventLevel(PrivacyUnit):
    """Event-level DP: neighbouring streams differ in one value (PAK Def. 2, Hamming distance 1),
    each value anywhere in the declared domain [0, B]."""

    def describe(self) -> str:
        return "event-level: any single value of the stream may be replaced"


@dataclass(frozen=True, slots=True)
class WEvent(PrivacyUnit):
    """w-event DP (Kellaris et al. 2014; OptStream Def. 2): neighbours may differ in any values
    that fall within one window of ``w`` consecutive steps."""

    w: int
    """Window length in steps, w ≥ 1."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "w", check_integer(self.w, "w", "WEvent"))

    def describe(self) -> str:
        return f"w-event: any values within {self.w} consecutive steps may change"


@dataclass(frozen=True, slots=True)
class WAlphaIndistinguishability(PrivacyUnit):
    """(w, α)-indistinguishability (OptStream §5.1, Def. 5): neighbours differ only within
    ``w`` consecutive steps, and by at most α in each value (an L∞ bound per step)."""

    w: int
    """Window length in steps, w ≥ 1."""
    alpha: float
    """Largest change of one value, α > 0, in the values' units."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "w", check_integer(self.w, "w", "WAlphaIndistinguishability"))
        object.__setattr__(
            self, "alpha", check_positive(self.alpha, "alpha", "WAlphaIndistinguishability")
        )

    def describe(self) -> str:
        return (
            f"(w, α)-indistinguishability: within {self.w} steps, each value moves ≤ {self.alpha:g}"
        )


@dataclass(frozen=True, slots=True)
class LocalDP(PrivacyUnit):
    """Local DP: every report is private on its own; the server never sees a raw value."""

    def describe(self) -> str:
        return "local: each reported value is private by itself"


@dataclass(frozen=True, slots=True)
class PrivacyGuarantee:
    """What a release protects, what it costs, and where that is proved."""

    unit: PrivacyUnit
    """The neighbour relation."""
    budget: Budget
    """The privacy loss (ε, δ)."""
    proof: str
    """The theorem or argument that proves it (paper and number)."""

    def __str__(self) -> str:
        return f"{self.budget} under {self.unit.describe()} [{self.proof}]"
