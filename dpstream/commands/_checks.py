"""Validation of CLI options, with messages in CLI terms ('--epsilon', not a Python parameter).

Every check runs before any input is read, any budget charged or any noise drawn (issue 11 §5).
Messages follow the house template: "The '--epsilon' option of dpstream release laplace must be
a float in (0, inf). Got -1 instead."
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager

from mechanisms import DomainError, ParameterError

__all__ = ["cli_terms", "option_float", "option_int", "option_probability"]

_PYTHON_NAME = re.compile(r"The '([A-Za-z_]\w*)' (?:parameter|argument) of [A-Za-z_][\w.]*")
_PYTHON_INDEX = re.compile(r"The index of '([A-Za-z_]\w*)' in [A-Za-z_][\w.]*")


@contextmanager
def cli_terms(
    command: str, arguments: Mapping[str, str], options: Collection[str] = ()
) -> Iterator[None]:
    """Re-word the library's typed errors raised inside the block in CLI terms.

    "The 'time_lag' parameter of pak_release ..." becomes "The '--time-lag' option of
    dpstream release pak ..." for names in ``options``; names in ``arguments`` (e.g.
    ``{"frame": "INPUT"}``) become "INPUT of dpstream release pak"; other names are "the
    internal setting 'q' of dpstream release pak". Other errors pass unchanged.
    """

    def word(match: re.Match) -> str:
        name = match.group(1)
        if name in arguments:
            return f"{arguments[name]} of {command}"
        if name in options:
            return f"The '--{name.replace('_', '-')}' option of {command}"
        return f"The internal setting {name!r} of {command}"

    def index(match: re.Match) -> str:
        return f"The time stamps of {arguments.get(match.group(1), 'INPUT')} of {command}"

    try:
        yield
    except (ParameterError, DomainError) as exc:
        text = _PYTHON_INDEX.sub(index, _PYTHON_NAME.sub(word, str(exc), count=1), count=1)
        text = _PYTHON_NAME.sub("It", text)  # a nested library message: its subject is ours
        if text == str(exc):
            raise
        raise type(exc)(text) from None


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


def check_input_length(frame, w: int, command: str) -> None:
    """INPUT has readings, and at least one period of ``w`` steps of them (``command``'s
    terms)."""
    if frame.shape[0] == 0:
        raise DomainError(
            f"INPUT of {command} has no readings (no rows after its header). "
            "Pass a file with at least one period of --w steps."
        )
    if frame.shape[0] < w:
        raise ParameterError(
            f"The '--w' option of {command} must be at most the number of steps of INPUT "
            f"({frame.shape[0]}). Got {w} instead."
        )
