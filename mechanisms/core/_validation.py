"""Validation at the public boundary, with one message template.

The template follows scikit-learn's ``_param_validation``: "The 'epsilon' parameter of
plan_pak must be a float in (0, inf). Got -1 instead." Data checks say which rule the data
broke and how many entries broke it, never the values themselves.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ._errors import DomainError, ParameterError

__all__ = [
    "check_fraction",
    "check_integer",
    "check_positive",
    "check_probability",
    "check_stream",
]


def _bad(name: str, owner: str, rule: str, value: object, hint: str = "") -> ParameterError:
    msg = f"The {name!r} parameter of {owner} must be {rule}. Got {value!r} instead."
    if hint:
        msg += " " + hint
    return ParameterError(msg)


def _as_real(value: object, name: str, owner: str, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _bad(name, owner, rule, value)
    out = float(value)
    if not math.isfinite(out):
        raise _bad(name, owner, rule, value)
    return out


def check_positive(value: object, name: str, owner: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    rule = "a float in [0, inf)" if allow_zero else "a float in (0, inf)"
    out = _as_real(value, name, owner, rule)
    if out < 0 or (out == 0 and not allow_zero):
        raise _bad(name, owner, rule, value)
    return out


def check_probability(
    value: object, name: str, owner: str, *, closed_low: bool = True, closed_high: bool = False
) -> float:
    """Return ``value`` if it lies in the interval [0, 1) (ends configurable)."""
    lo = "[" if closed_low else "("
    hi = "]" if closed_high else ")"
    rule = f"a float in {lo}0, 1{hi}"
    out = _as_real(value, name, owner, rule)
    ok_low = out >= 0 if closed_low else out > 0
    ok_high = out <= 1 if closed_high else out < 1
    if not (ok_low and ok_high):
        raise _bad(name, owner, rule, value)
    return out


def check_fraction(value: object, name: str, owner: str) -> float:
    """Return ``value`` if it lies in the open interval (0, 1)."""
    return check_probability(value, name, owner, closed_low=False, closed_high=False)


def check_integer(
    value: object, name: str, owner: str, *, minimum: int = 1, maximum: int | None = None
) -> int:
    """Return ``value`` as an int if it is an integer in [minimum, maximum]."""
    upper = "inf" if maximum is None else str(maximum)
    rule = f"an int in [{minimum}, {upper}]"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise _bad(name, owner, rule, value)
    out = int(value)
    if out < minimum or (maximum is not None and out > maximum):
        raise _bad(name, owner, rule, value)
    return out


def check_stream(
    values: object,
    name: str,
    owner: str,
    *,
    bound: float | None = None,
    lower: float = 0.0,
    min_length: int = 1,
) -> np.ndarray:
    """Return ``values`` as a read-only 1-D float64 copy after checking its domain.

    Rules: one-dimensional, at least ``min_length`` entries, every entry finite and, when
    ``bound`` is given, inside ``[lower, bound]``. The error names the rule and the number of
    offending entries, never their values (a message that depends on private values leaks them).
    """
    arr = np.array(values, dtype=np.float64, copy=True)
    if arr.ndim != 1:
        raise DomainError(
            f"The {name!r} argument of {owner} must be one-dimensional. Got an array of "
            f"shape {arr.shape}. Pass one stream at a time."
        )
    if arr.size < min_length:
        raise DomainError(
            f"The {name!r} argument of {owner} must hold at least {min_length} value(s). "
            f"Got {arr.size}."
        )
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int((~finite).sum())
        raise DomainError(
            f"The {name!r} argument of {owner} must hold finite numbers only; {bad} entries "
            "are NaN or infinite. Remove or impute them before releasing."
        )
    if bound is not None:
        outside = int(((arr < lower) | (arr > bound)).sum())
        if outside:
            raise DomainError(
                f"The {name!r} argument of {owner} must lie in [{lower:g}, {bound:g}] (the "
                f"declared bound); {outside} entries lie outside. Clip the data to the bound "
                "or declare a larger public bound."
            )
    arr.setflags(write=False)
    return arr
