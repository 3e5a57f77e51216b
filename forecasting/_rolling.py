"""Rolling-origin evaluation: refit every day on the last four weeks, forecast the next day.

The protocol of [FV19] §6.1.3 (Figs. 5 and 6): at each day boundary of a month, an ARMA(1, 1)
is trained on the previous four weeks of half-hours (1,344 steps) of a series (real or
released) and forecasts the next 48 steps, which are then scored against the real next day
(:func:`forecasting.forecast_errors`). Beyond the paper (issue 13), the same protocol runs the
seasonal forecasters of :mod:`forecasting._seasonal` and ``model="auto"``, which picks one per
origin by a backtest inside the training window (:mod:`forecasting._models`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy.special import ndtri

from mechanisms import DomainError, ParameterError
from mechanisms.core._validation import check_integer, check_positive

from ._arma import check_level, min_train, one_blas_thread
from ._models import MODELS, Backtest, forecast_once
from ._seasonal import min_history
from ._series import Clock, check_order, prepare_series

__all__ = ["INTERVALS", "MODELS", "forecast_origins", "rolling_forecast"]

#: What the forecast intervals cover: the true (noise-free) value, or a future released value.
INTERVALS = ("truth", "release")


def rolling_forecast(
    series: object,
    *,
    model: str = "arma",
    order: tuple[int, int, int] = (1, 0, 1),
    train: int = 1344,
    horizon: int = 48,
    days: int | None = None,
    noise_variance: float | None = None,
    level: float = 0.95,
    interval: str = "truth",
    steps_per_day: int = 48,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Forecast ``horizon`` steps from every day boundary, each from the last ``train`` steps.

    Parameters
    ----------
    series : pandas.Series or array_like
        One series (real or released), finite, with a regular ``DatetimeIndex`` (its step must
        divide a day) or an integer index of consecutive step numbers (an array: positions).
    model : {"arma", "sarima", "holt-winters", "profile", "auto"}, default "arma"
        The forecaster, refitted at every origin. "arma": ARMA(``order``) with a constant, the
        paper's model. "sarima": seasonal ARIMA(1, 0, 1)(1, 1, 0) with a season of one day
        (needs ``horizon`` <= steps per day). "holt-winters": additive Holt-Winters with a daily
        season. "profile": the mean of the last 7 days at the same time of day (see
        :mod:`forecasting._seasonal`). "auto": at each origin, the one of these four with the
        least squared error on a backtest over the last (up to) 7 days *of the training
        window* (:mod:`forecasting._models`; the evaluation window is never read); the
        ``model`` column says which.
    order : tuple (p, 0, q), default (1, 0, 1)
        ARMA order with a constant ([FV19] §6.1.3: ARMA(1, 1)), for "arma" (and "auto").
    train : int, default 1344
        Steps of history each model is fitted on (four weeks of half-hours).
    horizon : int, default 48
        Steps forecast from each origin (one day of half-hours).
    days : int, optional
        Number of origins, from the first; None: every origin the series allows.
    noise_variance : float, optional
        Known variance R of white noise in ``series`` (a release's noise, see
        :func:`laplace_noise_variance`, :func:`estimate_noise_variance`): fit ARMA + noise
        (:mod:`forecasting._noise_aware`) instead of plain ARMA, and SARIMA + noise (its state
        space with R as a fixed measurement variance); Holt-Winters and the profile keep their
        fit and their intervals drop R. None (default): no noise, the paper's model.
    level : float, default 0.95
        Coverage of the Gaussian forecast intervals, in (0, 1).
    interval : {"truth", "release"}, default "truth"
        With ``noise_variance``: intervals for the true value, or for a future released value
        (adds R). Plain ARMA knows no noise: its intervals are for the series itself.
    steps_per_day : int, default 48
        Day length of an integer index (day boundaries at labels divisible by it); a
        ``DatetimeIndex`` uses its midnights.
    progress : callable, optional
        Called with 1 after each origin.

    Returns
    -------
    pandas.DataFrame
        One row per forecast step, origin by origin: ``origin`` (time stamp of the first
        forecast step, a day boundary), ``step`` (1..horizon), ``time`` (its time stamp, from
        the series' index), ``forecast``, ``lower``, ``upper`` (the interval), ``converged``
        (whether that origin's fit converged) and ``model`` (the model fitted at that origin:
        ``model``, or the choice of "auto"). ``attrs["forecasting"]`` records the settings.

    Raises
    ------
    ParameterError
        Bad model, order, train, horizon, days, noise_variance, level or interval; a ``train``
        too short for ``model`` (SARIMA: two days + 10 steps, Holt-Winters: two days, profile:
        eight days) or, for SARIMA, a ``horizon`` longer than a day.
    DomainError
        Not one series; NaN/inf values; an irregular, unsorted or non-time index; fewer than
        ``train + horizon`` values (a horizon longer than the data); no day boundary with
        ``train`` steps before it and ``horizon`` after it; more ``days`` than origins.

    Notes
    -----
    Origins are the day boundaries t with t >= ``train`` and t + ``horizon`` <= len(series):
    the first is the first day boundary after ``train`` steps of history, and every forecast
    has the series' own values to be scored against. Each origin is fitted afresh on
    ``series[t − train : t]``. The ARMA(1, 1) and SARIMA fits start from statsmodels' start
    values, from a grid and from the previous origin's optimum and keep the best likelihood
    (:mod:`forecasting._arma`); all fits run with one BLAS thread (threadpoolctl).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> idx = pd.date_range("2016-01-01", periods=4 * 48, freq="30min")
    >>> t = np.arange(idx.size)
    >>> y = pd.Series(100 + 10 * np.sin(2 * np.pi * t / 48) + np.cos(t), index=idx)
    >>> out = rolling_forecast(y, train=96, horizon=48)
    >>> out.groupby("origin").size().to_dict()
    {Timestamp('2016-01-03 00:00:00'): 48, Timestamp('2016-01-04 00:00:00'): 48}
    """
    owner = "rolling_forecast"
    if not isinstance(model, str) or model not in MODELS:
        raise ParameterError(
            f"The 'model' parameter of {owner} must be one of {list(MODELS)}. Got {model!r} "
            "instead."
        )
    p, d, q = check_order(order, owner)
    train = check_integer(train, "train", owner, minimum=min_train(p, q))
    horizon = check_integer(horizon, "horizon", owner)
    if days is not None:
        days = check_integer(days, "days", owner)
    if noise_variance is not None:
        noise_variance = check_positive(noise_variance, "noise_variance", owner, allow_zero=True)
    level = check_level(level, owner)
    if interval not in INTERVALS:
        raise ParameterError(
            f"The 'interval' parameter of {owner} must be one of {list(INTERVALS)}. "
            f"Got {interval!r} instead."
        )
    values, clock = prepare_series(series, name="series", owner=owner, steps_per_day=steps_per_day)
    period = clock.period
    _check_model(model, train=train, horizon=horizon, period=period, owner=owner)
    origins = _origins(values.size, clock, train=train, horizon=horizon, days=days, owner=owner)

    # Intervals for the truth leave the measurement noise out; without noise there is none.
    drop = noise_variance if (noise_variance is not None and interval == "truth") else 0.0
    common = {"period": period, "order": (p, d, q), "noise_variance": noise_variance}
    warm: dict = {}  # previous origins' optima: one more start value for the next fit
    chooser = None
    if model == "auto":
        chooser = Backtest(values, train=train, horizon=horizon, warm=warm, **common)
    z = ndtri(0.5 + level / 2.0)
    steps = np.arange(horizon)
    parts = []
    with one_blas_thread():
        for origin in origins:
            name = model if chooser is None else chooser.choose(origin)
            mean, var, converged = forecast_once(
                name, values[origin - train : origin], horizon=horizon, warm=warm, **common
            )
            # Intervals omit the uncertainty of the estimated parameters (as statsmodels').
            half = z * np.sqrt(np.maximum(var - drop, 0.0))
            parts.append((origin, mean, mean - half, mean + half, converged, name))
            if progress is not None:
                progress(1)
    positions = (origins[:, None] + steps[None, :]).reshape(-1)
    out = pd.DataFrame(
        {
            "origin": clock.times(np.repeat(origins, horizon)),
            "step": np.tile(steps + 1, origins.size),
            "time": clock.times(positions),
            "forecast": np.concatenate([part[1] for part in parts]),
            "lower": np.concatenate([part[2] for part in parts]),
            "upper": np.concatenate([part[3] for part in parts]),
            "converged": np.repeat([part[4] for part in parts], horizon),
            "model": np.repeat([part[5] for part in parts], horizon),
        }
    )
    label = "ARMA" if model == "arma" else model
    out.attrs["forecasting"] = {
        "model": label + (" + noise" if noise_variance is not None else ""),
        "order": (p, d, q),
        "train": train,
        "horizon": horizon,
        "period": period,
        "noise_variance": noise_variance,
        "level": level,
        "interval": interval,
    }
    if chooser is not None:
        out.attrs["forecasting"]["auto"] = {
            "candidates": list(chooser.candidates),
            "backtest_days": chooser.days,
            "backtest_train": chooser.window,
            "criterion": "mean squared error on the backtest days inside the training window",
        }
    return out


def _check_model(model: str, *, train: int, horizon: int, period: int, owner: str) -> None:
    """Data-independent rules of each model (the period comes from the index, not the data)."""
    if model in ("arma", "auto"):  # "auto" drops the candidates a short window cannot fit
        return
    need = min_history(model, period)
    if train < need:
        raise ParameterError(
            f"The 'train' parameter of {owner} must be at least {need} steps for "
            f"model={model!r} (a day is {period} steps). Got {train} instead."
        )
    if model == "sarima" and horizon > period:
        raise ParameterError(
            f"The 'horizon' parameter of {owner} must be at most one day ({period} steps) for "
            f"model='sarima' (its forecasts use the values one day earlier). Got {horizon} "
            "instead."
        )


def _origins(
    n: int, clock: Clock, *, train: int, horizon: int, days: int | None, owner: str
) -> np.ndarray:
    """Positions of the forecast origins (see :func:`rolling_forecast`, Notes)."""
    if n < train + horizon:
        raise DomainError(
            f"The 'series' argument of {owner} must hold at least train + horizon = "
            f"{train} + {horizon} = {train + horizon} values. Got {n}: the horizon is longer "
            "than the data after the training window. Pass a longer series or lower "
            "train/horizon."
        )
    starts = clock.day_starts
    origins = starts[(starts >= train) & (starts + horizon <= n)]
    if origins.size == 0:
        raise DomainError(
            f"The 'series' argument of {owner} has no day boundary with train = {train} steps "
            f"before it and horizon = {horizon} steps after it. Start or end the series on day "
            "boundaries, or lower train/horizon."
        )
    if days is not None:
        if days > origins.size:
            raise DomainError(
                f"The 'days' parameter of {owner} asks for {days} origins; the series allows "
                f"{origins.size} (each needs train = {train} steps before it and horizon = "
                f"{horizon} after it). Lower days or pass a longer series."
            )
        origins = origins[:days]
    return origins


def forecast_origins(
    series: object,
    *,
    train: int = 1344,
    horizon: int = 48,
    days: int | None = None,
    steps_per_day: int = 48,
) -> pd.Index:
    """Time stamps of the origins :func:`rolling_forecast` would use (same arguments).

    Examples
    --------
    >>> import pandas as pd
    >>> y = pd.Series(1.0, index=pd.date_range("2016-01-01", periods=5 * 48, freq="30min"))
    >>> [str(t.date()) for t in forecast_origins(y, train=96, horizon=48)]
    ['2016-01-03', '2016-01-04', '2016-01-05']
    """
    owner = "forecast_origins"
    train = check_integer(train, "train", owner)
    horizon = check_integer(horizon, "horizon", owner)
    if days is not None:
        days = check_integer(days, "days", owner)
    values, clock = prepare_series(series, name="series", owner=owner, steps_per_day=steps_per_day)
    origins = _origins(values.size, clock, train=train, horizon=horizon, days=days, owner=owner)
    return clock.times(origins)
