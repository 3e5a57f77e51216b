"""Input checks shared by the forecasting functions: one series, a regular clock, day boundaries.

A series is a :class:`pandas.Series` with a ``DatetimeIndex`` or an integer index (consecutive
step numbers), or a 1-D array (its positions are the step numbers). Every rule breaks with a
typed error that names the argument and the rule, never the data values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError
from mechanisms.core._validation import check_integer, check_stream

__all__ = ["Clock", "as_series", "check_order", "prepare_series", "series_values"]

#: Largest AR or MA order accepted (ARMA models of daily loads rarely need more than 2).
MAX_LAG = 10
_DAY = pd.Timedelta(days=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Clock:
    """The time stamps of a series and the positions at which its days begin."""

    index: pd.Index
    """The series' index (a ``DatetimeIndex`` or consecutive integers)."""
    day_starts: np.ndarray
    """Positions ``p`` (ascending) whose time stamp starts a day."""
    period: int
    """Steps per day (the season of the seasonal forecasters)."""

    def times(self, positions: np.ndarray) -> pd.Index:
        """Time stamps of ``positions`` (all inside the series)."""
        return self.index[positions]


def check_order(order: object, owner: str) -> tuple[int, int, int]:
    """Return ``order`` as ``(p, 0, q)`` ints; ARMA only (d = 0), 0 <= p, q <= MAX_LAG."""
    rule = f"a tuple (p, 0, q) of ints with 0 <= p, q <= {MAX_LAG} (an ARMA order, d = 0)"
    try:
        p, d, q = order  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ParameterError(
            f"The 'order' parameter of {owner} must be {rule}. Got {order!r} instead."
        ) from None
    try:
        p = check_integer(p, "order", owner, minimum=0, maximum=MAX_LAG)
        q = check_integer(q, "order", owner, minimum=0, maximum=MAX_LAG)
        d = check_integer(d, "order", owner, minimum=0, maximum=0)
    except ParameterError:
        raise ParameterError(
            f"The 'order' parameter of {owner} must be {rule}. Got {order!r} instead. "
            "Difference the series yourself for d > 0."
        ) from None
    return p, d, q


def as_series(series: object, name: str, owner: str) -> pd.Series:
    if isinstance(series, pd.DataFrame):
        if series.shape[1] != 1:
            raise DomainError(
                f"The {name!r} argument of {owner} must be one series; got a frame with "
                f"{series.shape[1]} columns. Pass one column, e.g. frame['rural']."
            )
        series = series.iloc[:, 0]
    if isinstance(series, pd.Series):
        return series
    arr = np.asarray(series)
    if arr.ndim != 1:
        raise DomainError(
            f"The {name!r} argument of {owner} must be one-dimensional. Got an array of shape "
            f"{arr.shape}. Pass one series at a time."
        )
    return pd.Series(arr)


def series_values(series: pd.Series, name: str, owner: str) -> np.ndarray:
    try:
        raw = np.asarray(series.to_numpy(), dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError(
            f"The {name!r} argument of {owner} must hold numbers; some entries are not numeric."
        ) from None
    bad = int((~np.isfinite(raw)).sum())
    if bad:
        raise DomainError(
            f"The {name!r} argument of {owner} must hold finite numbers only; {bad} entries are "
            "NaN or infinite. Impute them first (e.g. series.interpolate())."
        )
    return check_stream(raw, name, owner)


def _clock(index: pd.Index, name: str, owner: str, steps_per_day: int) -> Clock:
    n = len(index)
    period = steps_per_day
    if not index.is_unique or not index.is_monotonic_increasing:
        raise DomainError(
            f"The index of {name!r} in {owner} must be strictly increasing (sorted, no duplicated "
            "stamps). Sort it and drop duplicates first."
        )
    if isinstance(index, pd.DatetimeIndex):
        if n >= 2:
            gaps = index[1:] - index[:-1]
            step = gaps[0]
            if not (gaps == step).all():
                raise DomainError(
                    f"The index of {name!r} in {owner} must be regular (one constant step); "
                    f"{int((gaps != step).sum())} gaps differ from the first. Resample it first."
                )
            if _DAY % step != pd.Timedelta(0):
                raise DomainError(
                    f"The step of {name!r} in {owner} must divide one day (e.g. 30 min). Got "
                    f"{step}."
                )
            period = int(_DAY // step)
        starts = np.flatnonzero(index == index.normalize())
    elif pd.api.types.is_integer_dtype(index.dtype):
        labels = np.asarray(index, dtype=np.int64)
        if n >= 2 and not (np.diff(labels) == 1).all():
            raise DomainError(
                f"The integer index of {name!r} in {owner} must number consecutive steps (stride "
                "1). Use a DatetimeIndex for other clocks, or reset the index."
            )
        starts = np.flatnonzero(labels % steps_per_day == 0)
    else:
        raise DomainError(
            f"The index of {name!r} in {owner} must be a DatetimeIndex or integer step numbers. "
            f"Got a {type(index).__name__} of dtype {index.dtype}."
        )
    return Clock(index=index, day_starts=starts, period=period)


def prepare_series(
    series: object, *, name: str, owner: str, steps_per_day: int = 48
) -> tuple[np.ndarray, Clock]:
    """Validate one series; return its values (read-only float64) and its clock.

    ``steps_per_day`` places the day boundaries of an integer index (label % steps_per_day ==
    0); a ``DatetimeIndex`` has its own (midnights).
    """
    steps_per_day = check_integer(steps_per_day, "steps_per_day", owner)
    frame = as_series(series, name, owner)
    values = series_values(frame, name, owner)
    return values, _clock(frame.index, name, owner, steps_per_day)
