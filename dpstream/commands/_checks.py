"""Validation of CLI options, with messages in CLI terms ('--epsilon', not a Python parameter).

Every check runs before any input is read, any budget charged or any noise drawn (issue 11 §5).
Messages follow the house template: "The '--epsilon' option of dpstream release laplace must be
a float in (0, inf). Got -1 instead."
"""

from __future__ import annotations

import math

from mechanisms import ParameterError

__all__ = ["option_float", "option_int", "option_probability"]


def _bad(option: str, command: str, rule: str, value: object) -> ParameterError:
    shown = f"{value:g}" if isinstance(value, float) else repr(value)
    return ParameterError(
        f"The {option!r} option of {command} must be {rule}. Got {shown} instead."
    )


def option_float(
    value: float | None,
    option: str,
    command: str,
    *,
    allow_zero: bool = False,
    maximum: float | None = None,
) -> float | None:
    """A finite float in (0, maximum] ([0, ...] with ``allow_zero``); None passes through."""
    if value is None:
        return None
    low = "[0" if allow_zero else "(0"
    high = "inf)" if maximum is None else f"{maximum:g}]"
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok or (maximum is not None and value > maximum):
        raise _bad(option, command, f"a float in {low}, {high}", float(value))
    return float(value)


def option_probability(value: float | None, option: str, command: str) -> float | None:
    """A float in (0, 1); None passes through."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 < value < 1):
        raise _bad(option, command, "a float in (0, 1)", float(value))
    return float(value)


def option_int(
    value: int | None,
    option: str,
    command: str,
    *,
    minimum: int = 1,
    maximum: int | None = None,
) -> int | None:
    """An int in [minimum, maximum]; None passes through."""
    if value is None:
        return None
    if value < minimum or (maximum is not None and value > maximum):
        upper = "inf" if maximum is None else str(maximum)
        raise _bad(option, command, f"an int in [{minimum}, {upper}]", int(value))
    return int(value)
