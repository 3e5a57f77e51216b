"""Forecast errors against the real series: the paper's mean L1 error per forecast, and more.

[FV19] §6.1.3 (Fig. 6) scores each day-ahead forecast by its mean absolute (L1) error over the
48 steps, averaged over the days of a month and over trials; :func:`error_ratio` puts a
release's error next to the error of the same forecaster on the real data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError

from ._series import as_series

__all__ = ["error_ratio", "forecast_errors"]

_NEEDED = ("origin", "time", "forecast")


def _truth_at(truth: object, times: pd.Index, owner: str) -> np.ndarray:
    series = as_series(truth, "truth", owner)
    if not series.index.is_unique:
        raise DomainError(
            f"The 'truth' argument of {owner} must have unique time stamps. Drop duplicates."
        )
    try:
        values = series.reindex(times)
    except (TypeError, ValueError):
        raise DomainError(
            f"The 'truth' argument of {owner} must be indexed like the forecast times (same "
            "kind of time stamps)."
        ) from None
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError(f"The 'truth' argument of {owner} must hold numbers.") from None
    missing = int((~times.isin(series.index)).sum())
    if missing:
        raise DomainError(
            f"The 'truth' argument of {owner} must cover every forecast time; {missing} of "
            f"{times.size} are not in its index. Pass the real series over the forecast period."
        )
    bad = int((~np.isfinite(arr)).sum())
    if bad:
        raise DomainError(
            f"The 'truth' argument of {owner} must be finite at the forecast times; {bad} "
            "values are NaN or infinite."
        )
    return arr


def forecast_errors(forecasts: pd.DataFrame, truth: object) -> pd.DataFrame:
    """Score rolling forecasts against the real series, one row per forecast origin.

    Parameters
    ----------
    forecasts : pandas.DataFrame
        The output of :func:`forecasting.rolling_forecast` (columns ``origin``, ``time``,
        ``forecast``; ``lower``/``upper`` optional).
    truth : pandas.Series or array_like
        The real series, indexed by the same kind of time stamps as ``forecasts["time"]`` (an
        array: step positions), covering every forecast time.

    Returns
    -------
    pandas.DataFrame
        One row per origin, in order: ``origin``, ``steps`` (forecast steps scored), ``l1``
        (mean |forecast − truth| over the horizon, [FV19] §6.1.3), ``mape`` (mean
        |forecast − truth| / |truth|, in percent, over the steps where truth ≠ 0; NaN if
        there are none), ``rmse``, ``bias`` (mean forecast − truth) and, with intervals,
        ``coverage`` (share of the truth inside [lower, upper]).

    Raises
    ------
    ParameterError
        ``forecasts`` is not a frame with the needed columns, or is empty.
    DomainError
        ``truth`` does not cover every forecast time, is not finite there, or has duplicated
        time stamps.

    Examples
    --------
    >>> import pandas as pd
    >>> fc = pd.DataFrame({"origin": [0, 0], "time": [0, 1], "forecast": [10.0, 12.0]})
    >>> forecast_errors(fc, pd.Series([11.0, 12.0]))[["origin", "l1", "mape"]]
       origin   l1      mape
    0       0  0.5  4.545455
    """
    owner = "forecast_errors"
    if not isinstance(forecasts, pd.DataFrame) or not set(_NEEDED) <= set(forecasts.columns):
        got = list(forecasts.columns)[:8] if isinstance(forecasts, pd.DataFrame) else None
        raise ParameterError(
            f"The 'forecasts' parameter of {owner} must be a DataFrame with columns "
            f"{list(_NEEDED)} (the output of rolling_forecast). Got "
            + (f"columns {got}" if got is not None else type(forecasts).__name__)
            + " instead."
        )
    if forecasts.empty:
        raise ParameterError(f"The 'forecasts' parameter of {owner} must not be empty.")
    times = pd.Index(forecasts["time"])
    actual = _truth_at(truth, times, owner)
    predicted = forecasts["forecast"].to_numpy(dtype=np.float64)
    err = predicted - actual
    with np.errstate(divide="ignore", invalid="ignore"):
        ape = np.where(actual != 0.0, np.abs(err) / np.abs(actual), np.nan) * 100.0
    cols = {"_err": err, "_abs": np.abs(err), "_sq": err**2, "_ape": ape}
    if {"lower", "upper"} <= set(forecasts.columns):
        lower = forecasts["lower"].to_numpy(dtype=np.float64)
        upper = forecasts["upper"].to_numpy(dtype=np.float64)
        cols["_in"] = ((actual >= lower) & (actual <= upper)).astype(np.float64)
    work = pd.DataFrame(cols)
    work["origin"] = forecasts["origin"].to_numpy()
    grouped = work.groupby("origin", sort=False)
    out = pd.DataFrame(
        {
            "steps": grouped.size(),
            "l1": grouped["_abs"].mean(),
            "mape": grouped["_ape"].mean(),  # NaN entries (truth = 0) are skipped
            "rmse": np.sqrt(grouped["_sq"].mean()),
            "bias": grouped["_err"].mean(),
        }
    )
    if "_in" in work:
        out["coverage"] = grouped["_in"].mean()
    return out.rename_axis("origin").reset_index()


def error_ratio(errors: pd.DataFrame, reference: pd.DataFrame, *, metric: str = "l1") -> float:
    """Mean error of ``errors`` over the mean error of ``reference`` on their common origins.

    E.g. the forecast error on released data over the error of the same forecaster on the
    real data: 1 means privacy cost nothing in forecast accuracy.

    Parameters
    ----------
    errors, reference : pandas.DataFrame
        Outputs of :func:`forecast_errors` (columns ``origin`` and ``metric``).
    metric : str, default "l1"
        The column to compare (``l1``, ``mape``, ``rmse``).

    Raises
    ------
    ParameterError
        Missing columns, or no common origin.
    """
    owner = "error_ratio"
    for name, frame in (("errors", errors), ("reference", reference)):
        if not isinstance(frame, pd.DataFrame) or not {"origin", metric} <= set(frame.columns):
            raise ParameterError(
                f"The {name!r} parameter of {owner} must be a DataFrame with columns "
                f"['origin', {metric!r}] (the output of forecast_errors)."
            )
    common = pd.Index(errors["origin"]).intersection(pd.Index(reference["origin"]))
    if common.empty:
        raise ParameterError(
            f"The 'errors' and 'reference' parameters of {owner} must share forecast origins; "
            "they share none."
        )
    num = errors.set_index("origin").loc[common, metric].mean()
    den = reference.set_index("origin").loc[common, metric].mean()
    return float(num / den)
