"""``forecast``: the steps after the end of one or many series, with calibrated intervals.

The operator who released today forecasts tomorrow (issue 28): :func:`forecast` fits a model
on the whole history of every series (a Series, a wide frame, or a long frame
``unique_id, ds, y``) and forecasts the ``horizon`` steps after its last time stamp. Point
forecasts come from :mod:`forecasting._multi`; the intervals come from the same model's own
errors on a backtest *inside* the history: the model is refitted at the B =
:data:`INTERVAL_DAYS` boundaries b_j = n − horizon − (j − 1)·s (s steps per day) and forecasts
``horizon`` steps from each, and the mean squared error at each step ahead (smoothed over
:data:`SMOOTH_STEPS` neighbouring steps) is the forecast variance of that step. This is the
empirical forecast-error variance of a rolling origin ([HA21] §5.10), not a model's theoretical
variance, so it holds the model's misspecification as well (the issue's peers' theoretical
intervals cover 0.85 where 0.95 is asked).

With ``noise_variance`` (the variance R_t of the release's error at each step, e.g. the squared
standard errors ``dpstream.std_errors`` states), the backtest errors are against the release
y = x + v, and the intervals are for the truth x. Which variances add is derived in
:mod:`forecasting._truth_band` (``noise=``): ``"posterior"`` (default; the release is a
least-squares estimate whose error is orthogonal to the released values, as OptStream's
Algorithm 4 is: the backtest's variance plus R), ``"white"`` (noise independent of the truth:
minus R) or ``"correlated"`` (any dependence: Minkowski's bound, √D + √R). R is that of the
same step of the day, averaged over the last 7 days.

The intervals are split-conformal ([AB23] §1) in the shape of the backtest's errors: the
residuals actual − forecast over the smoothed RMS of their step ahead, pooled over the steps
(:attr:`Forecast.scores`), give the lower and upper quantiles q_lo, q_hi (with the
finite-sample correction, :func:`conformal_bounds`), and without R the band is
[ŷ + q_lo·s_h, ŷ + q_hi·s_h] (s_h the RMS of step h). With R ("posterior") its ends are the
quantiles of s_h·q + N(0, R) (:func:`forecasting._truth_band.truth_bounds`); "correlated" adds
z·√R on each side. For Gaussian errors q = ±z and this is the Gaussian band; a spiky load (a
household: appliances switching on) has errors skewed upwards and heavy-tailed, where the
Gaussian band covered 0.91 of the truth at 95 % (``docs/results/forecast_peers.md``).

``model="auto"`` chooses, per series, the candidate (:data:`forecasting._multi.AUTO_CANDIDATES`)
with the least mean absolute percentage error on the backtest (|error| / |actual|, the actual
floored at :data:`forecasting._multi.LOG_OFFSET` × the series' mean) over the last
:data:`CHOICE_DAYS` boundaries, all inside the history. The percentage error is the loss the
forecasts are judged by (issue 28); a point forecast should be chosen for its loss ([Gne11]):
by the absolute error (the previous rule) "auto" kept the harmonic regressions on a household,
at 1.3 × the percentage error of a seasonal naive forecast. One candidate is a forecast
combination, ``harmonic-mix`` (the mean of the additive and multiplicative harmonic
regressions, [BG69]); its backtest errors are the mean of its members' errors, so it costs no
extra fit. With ``noise_variance`` the backtest's targets are released values, and where a
released value is mostly the release's prior (a profile of the earlier days: OptStream's
Algorithm 4, [FV19]) it shares the prior's error with the released past, so a forecast that
repeats that error scores well against it and badly against the truth. The choice weighs
each target by 1 / V_t, the variance of the harmonic regressions' weights
(:func:`forecasting._harmonic.step_variance`: R_t² / τ²_d + R_t / B over the B boundaries),
mean 1: the targets the release measured count most. (Unweighted, "auto" on the national
release, 3 seeds × 28 origins, scored 11.09 % against the truth while each harmonic
regression alone scored 10.35-10.45 %; weighted, 10.55 %: ``docs/results/forecast_peers.md``.)

References
----------
[HA21] Hyndman, Athanasopoulos. Forecasting: Principles and Practice, 3rd ed., 2021.
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[AB23] Angelopoulos, Bates. Conformal Prediction: A Gentle Introduction. Foundations and
       Trends in Machine Learning 16(4), 2023.
[Gne11] Gneiting. Making and Evaluating Point Forecasts. JASA 106(494), 2011.
[BG69] Bates, Granger. The Combination of Forecasts. Operational Research Quarterly 20(4), 1969.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.linalg
from scipy.special import ndtri

from mechanisms import DomainError, ParameterError
from mechanisms.core._results import summary_text
from mechanisms.core._validation import check_integer

from ._arma import one_blas_thread
from ._harmonic import step_variance
from ._multi import AUTO_CANDIDATES, COMBINATIONS, LOG_OFFSET, MODELS, min_history, point_forecast
from ._series import _clock
from ._truth_band import NOISE_MODELS, conformal_probabilities, truth_bounds, truth_std

__all__ = ["CHOICE_DAYS", "INTERVAL_DAYS", "Forecast", "conformal_bounds", "forecast"]

#: Backtest boundaries whose errors give the forecast variances (at most).
INTERVAL_DAYS = 21
#: The most recent backtest boundaries on which "auto" chooses.
CHOICE_DAYS = 21
#: Backtest loss of "auto": "relative" (|error| / |actual|, floored) or "absolute".
CHOICE_LOSS = "relative"
#: Width of the moving average smoothing the backtest variances over the steps ahead.
SMOOTH_STEPS = 5
#: Smallest fraction of the backtest variance kept after removing R (a floor, never 0).
MIN_SHARE = 0.05
_OWNER = "forecast"


@dataclass(frozen=True, slots=True, kw_only=True)
class Forecast:
    """Forecasts of the steps after the history, with their standard deviations.

    Column names follow Nixtla's statsforecast in :meth:`to_frame` (``unique_id, ds, mean,
    lo-80, hi-80, ...``), so a forecaster's code moves over unchanged.
    """

    mean: pd.DataFrame | pd.Series
    """Point forecasts, indexed by the future time stamps (one column per series)."""
    std: pd.DataFrame | pd.Series
    """Forecast standard deviation of each step (of the truth when the noise is known)."""
    levels: tuple[float, ...]
    """Interval levels of :meth:`to_frame` (fractions, e.g. 0.8 and 0.95)."""
    models: dict[str, str]
    """The model fitted to each series ("auto": its choice)."""
    target: str
    """"truth" (noise variance given: intervals for the true values) or "series"."""
    samples: np.ndarray | None = field(default=None, repr=False)
    """Simulated paths (n_sim, horizon, series) when intervals come from a simulation
    (reconciliation where non-negativity binds), else None (Gaussian intervals)."""
    correlation: np.ndarray | None = field(default=None, repr=False)
    """Correlation across series of the backtest errors (used by the reconciliation's
    simulation), or None."""
    scores: np.ndarray | None = field(default=None, repr=False)
    """Backtest residuals (actual − forecast) over :attr:`scale`, pooled over the steps ahead
    (N, series): their empirical quantiles shape the intervals (module notes), or None
    (Gaussian intervals)."""
    scale: np.ndarray | None = field(default=None, repr=False)
    """Standard deviation of the model's error per step (horizon, series), or None."""
    noise_sd: np.ndarray | None = field(default=None, repr=False)
    """Release error's standard deviation added on both sides (horizon, series), or None."""
    coherent: bool = False
    """Whether the forecasts were reconciled to a hierarchy (:func:`forecasting.reconcile`)."""
    noise: str = "posterior"
    """How :attr:`noise_sd` combines with the model term (:mod:`forecasting._truth_band`):
    "posterior" in quadrature, "correlated" added (Minkowski), "white" (none left)."""

    def _frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        mean, std = self.mean, self.std
        if isinstance(mean, pd.Series):
            return mean.to_frame(), std.to_frame()  # type: ignore[union-attr]
        return mean, std  # type: ignore[return-value]

    def interval(self, level: float = 0.95) -> pd.DataFrame:
        """Lower and upper bounds of the central ``level`` interval (columns lower, upper).

        The quantiles of :attr:`samples` (reconciled forecasts); else the split-conformal
        quantiles of the backtest :attr:`scores` times :attr:`scale`, convolved with the
        release's error N(0, :attr:`noise_sd`²) (or widened by z·:attr:`noise_sd`,
        "correlated"; :mod:`forecasting._truth_band`); else Gaussian, mean ± z·std ([HA21]
        §5.5). For many series the columns are (bound, series):
        ``fc.interval(0.95)["lower"]`` is a frame.
        """
        level = _check_levels(level, "interval")[0]
        mean, std = self._frames()
        if self.samples is not None:
            lo = np.quantile(self.samples, (1.0 - level) / 2.0, axis=0)
            hi = np.quantile(self.samples, (1.0 + level) / 2.0, axis=0)
            lower = pd.DataFrame(lo, index=mean.index, columns=mean.columns)
            upper = pd.DataFrame(hi, index=mean.index, columns=mean.columns)
        elif self.scores is not None:
            centre = mean.to_numpy()
            if self.noise == "correlated":  # Minkowski on each side
                q_lo, q_hi = conformal_bounds(self.scores, level)
                z = float(ndtri(0.5 + level / 2.0))
                lo = centre + self.scale * q_lo[None, :] - z * self.noise_sd
                hi = centre + self.scale * q_hi[None, :] + z * self.noise_sd
            else:  # quantiles of s·q + N(0, R): [_truth_band Eq. 2]
                off_lo, off_hi = truth_bounds(self.scores, self.scale, self.noise_sd, level)
                lo, hi = centre + off_lo, centre + off_hi
            lower = pd.DataFrame(lo, index=mean.index, columns=mean.columns)
            upper = pd.DataFrame(hi, index=mean.index, columns=mean.columns)
        else:
            half = std * float(ndtri(0.5 + level / 2.0))
            lower, upper = mean - half, mean + half
        if isinstance(self.mean, pd.Series):
            return pd.DataFrame({"lower": lower.iloc[:, 0], "upper": upper.iloc[:, 0]})
        return pd.concat({"lower": lower, "upper": upper}, axis=1)

    def to_frame(self) -> pd.DataFrame:
        """Long frame ``unique_id, ds, mean, lo-80, hi-80, ...`` (Nixtla's column names)."""
        mean, _ = self._frames()
        long = {
            "unique_id": np.repeat(mean.columns.to_numpy(dtype=object), len(mean)),
            "ds": np.tile(mean.index.to_numpy(), mean.shape[1]),
            "mean": mean.to_numpy().T.reshape(-1),
        }
        for level in self.levels:
            bounds = self.interval(level)
            lo = bounds["lower"].to_numpy().reshape(len(mean), -1).T.reshape(-1)
            hi = bounds["upper"].to_numpy().reshape(len(mean), -1).T.reshape(-1)
            long[f"lo-{_pct(level)}"] = lo
            long[f"hi-{_pct(level)}"] = hi
        out = pd.DataFrame(long)
        out["unique_id"] = out["unique_id"].astype(str)
        return out

    def summary(self) -> str:
        """A short text table: horizon, series, models, levels, target, mean width."""
        mean, std = self._frames()
        chosen = pd.Series(self.models).value_counts()
        rows = [
            ("series", mean.shape[1]),
            ("horizon (steps)", len(mean)),
            ("first step", str(mean.index[0])),
            ("last step", str(mean.index[-1])),
            ("models", ", ".join(f"{k} {v}" for k, v in chosen.items())),
            ("levels", ", ".join(_pct(v) for v in self.levels)),
            ("intervals for", "the true values" if self.target == "truth" else "the series"),
            ("coherent", self.coherent),
            ("mean std of a step", float(np.mean(std.to_numpy()))),
        ]
        return summary_text("Forecast", rows, result=self)


def conformal_bounds(scores: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Split-conformal lower and upper quantiles of ``scores`` (N, m) for a central ``level``.

    The ⌊(N + 1)·a⌋-th and ⌈(N + 1)·(1 − a)⌉-th order statistics, a = (1 − level) / 2
    ([AB23] §1, the finite-sample correction of split conformal prediction, each
    tail at a), clipped to the smallest and largest score when N is too small.
    """
    lo, hi = conformal_probabilities(scores.shape[0], level)
    upper = np.quantile(scores, hi, axis=0, method="inverted_cdf")
    lower = np.quantile(scores, lo, axis=0, method="inverted_cdf") if lo > 0 else scores.min(0)
    return lower, upper


def _pct(level: float) -> str:
    return f"{100.0 * level:.10g}"


def _check_levels(level: object, owner: str) -> tuple[float, ...]:
    raw = [level] if np.isscalar(level) else level
    try:
        values = tuple(float(v) for v in raw)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        values = ()
    if not values or not all(np.isfinite(v) and 0.0 < v < 1.0 for v in values):
        raise ParameterError(
            f"The 'level' parameter of {owner} must be a fraction in (0, 1) or a sequence of "
            f"them (e.g. (0.8, 0.95)). Got {level!r} instead."
        )
    return tuple(sorted(set(values)))


def _as_wide(history: object) -> tuple[pd.DataFrame, bool]:
    """(wide frame, single) from a Series, a wide frame or a long frame unique_id, ds, y."""
    if isinstance(history, pd.Series):
        name = "y" if history.name is None else str(history.name)
        return history.to_frame(name), True
    if not isinstance(history, pd.DataFrame):
        raise ParameterError(
            f"The 'history' parameter of {_OWNER} must be a pandas Series, a wide DataFrame "
            "(one column per series) or a long DataFrame (unique_id, ds, y). Got "
            f"{type(history).__name__} instead."
        )
    if {"unique_id", "ds", "y"} <= set(map(str, history.columns)):
        if history.duplicated(["unique_id", "ds"]).any():
            raise DomainError(
                f"The 'history' argument of {_OWNER} (a long frame) repeats some (unique_id, "
                "ds) pairs. Drop the duplicates first."
            )
        wide = history.pivot(index="ds", columns="unique_id", values="y").sort_index()
        if wide.isna().to_numpy().any():
            raise DomainError(
                f"The 'history' argument of {_OWNER} (a long frame) must give every series "
                "the same time stamps; some series lack some stamps. Forecast such series in "
                "separate calls, or fill the gaps first."
            )
        wide.columns = [str(c) for c in wide.columns]
        wide.index.name = "ds"
        return wide, False
    if history.shape[1] == 0:
        raise DomainError(f"The 'history' argument of {_OWNER} has no columns.")
    wide = history.copy()
    wide.columns = [str(c) for c in wide.columns]
    return wide, False


def _values(frame: pd.DataFrame, name: str) -> np.ndarray:
    try:
        arr = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError(
            f"The {name!r} argument of {_OWNER} must hold numbers; some entries are not numeric."
        ) from None
    if not np.isfinite(arr).all():
        raise DomainError(
            f"The {name!r} argument of {_OWNER} must hold finite numbers only; some entries are "
            "NaN or infinite. Impute them first (e.g. frame.interpolate())."
        )
    return arr


def _future_index(index: pd.Index, horizon: int) -> pd.Index:
    if isinstance(index, pd.DatetimeIndex):
        step = index[1] - index[0]
        return pd.DatetimeIndex(
            [index[-1] + step * (i + 1) for i in range(horizon)], name=index.name or "ds"
        )
    start = int(index[-1]) + 1
    return pd.RangeIndex(start, start + horizon, name=index.name or "ds")


def _noise(noise_variance: object, wide: pd.DataFrame) -> np.ndarray | None:
    """R per step and series (n, m), or None."""
    if noise_variance is None:
        return None
    n, m = wide.shape
    rule = (
        "a number >= 0, a Series of them per series (indexed by the series' names) or per "
        "step (indexed like the history), a frame per step and series, or a mapping series -> "
        "number or Series"
    )
    out: np.ndarray | None = None
    try:
        if np.isscalar(noise_variance):
            out = np.full((n, m), float(noise_variance))  # type: ignore[arg-type]
        elif isinstance(noise_variance, pd.DataFrame):
            frame = noise_variance.copy()
            frame.columns = [str(c) for c in frame.columns]
            frame = frame.reindex(index=wide.index, columns=wide.columns)
            out = frame.to_numpy(dtype=np.float64)
        elif isinstance(noise_variance, pd.Series):
            if noise_variance.index.equals(wide.index) or (
                len(noise_variance) >= n and wide.index.isin(noise_variance.index).all()
            ):
                per_step = noise_variance.reindex(wide.index).to_numpy(dtype=np.float64)
                out = np.repeat(per_step[:, None], m, axis=1)
            else:
                named = noise_variance.rename(index=str).reindex(wide.columns)
                out = np.repeat(named.to_numpy(dtype=np.float64)[None, :], n, axis=0)
        elif isinstance(noise_variance, Mapping):
            cols = []
            for c in wide.columns:
                v = noise_variance.get(c)
                if isinstance(v, pd.Series):
                    cols.append(v.reindex(wide.index).to_numpy(dtype=np.float64))
                else:
                    cols.append(np.full(n, np.nan if v is None else float(v)))
            out = np.column_stack(cols)
    except (TypeError, ValueError):
        out = None
    if out is None or not np.isfinite(out).all() or (out < 0).any():
        raise ParameterError(
            f"The 'noise_variance' parameter of {_OWNER} must be {rule}, covering every step "
            "and series of the history, finite and >= 0. Got something else (missing steps or "
            "series, negative or non-finite values)."
        )
    return out


def _exog(exog: object, future_exog: object, wide: pd.DataFrame, horizon: int):
    if exog is None and future_exog is None:
        return None, None
    if exog is None or future_exog is None:
        raise ParameterError(
            f"The 'exog' and 'future_exog' parameters of {_OWNER} go together: the regressors "
            "over the history and over the horizon. Pass both or neither."
        )
    past = exog.to_frame() if isinstance(exog, pd.Series) else exog
    future = future_exog.to_frame() if isinstance(future_exog, pd.Series) else future_exog
    if isinstance(past, pd.DataFrame) and not isinstance(past.index, pd.RangeIndex):
        if not wide.index.isin(past.index).all():
            raise ParameterError(
                f"The 'exog' parameter of {_OWNER} must cover every time stamp of the history."
            )
        past = past.loc[wide.index]
    z = np.asarray(past, dtype=np.float64)
    zf = np.asarray(future, dtype=np.float64)
    z = z[:, None] if z.ndim == 1 else z
    zf = zf[:, None] if zf.ndim == 1 else zf
    if z.shape[0] != len(wide) or zf.shape[0] != horizon or z.shape[1] != zf.shape[1]:
        raise ParameterError(
            f"The 'exog' and 'future_exog' parameters of {_OWNER} must have one row per step of "
            f"the history ({len(wide)}) and of the horizon ({horizon}), with the same columns. "
            f"Got shapes {z.shape} and {zf.shape}."
        )
    if not (np.isfinite(z).all() and np.isfinite(zf).all()):
        raise ParameterError(
            f"The 'exog' and 'future_exog' parameters of {_OWNER} must be finite numbers."
        )
    return z, zf


def forecast(
    history: object,
    horizon: int,
    *,
    model: str = "auto",
    level: float | Sequence[float] = (0.8, 0.95),
    exog: object = None,
    future_exog: object = None,
    noise_variance: object = None,
    noise: str = "posterior",
    hierarchy: Mapping[str, Sequence[str]] | None = None,
    steps_per_day: int = 48,
    client: object = None,
    seed: object = None,
) -> Forecast:
    """Forecast the ``horizon`` steps after the end of every series, with intervals.

    Parameters
    ----------
    history : Series, DataFrame
        One series (a Series), many on one clock (a wide frame, one column per series) or a
        long frame with columns ``unique_id, ds, y`` (Nixtla's). The index (or ``ds``) is a
        regular DatetimeIndex whose step divides a day, or consecutive integers.
    horizon : int
        Steps to forecast (48: the next day of half-hours).
    model : str, default "auto"
        One of :data:`forecasting.FORECAST_MODELS`: ``"harmonic"`` (daily + weekly Fourier
        regression, smoothed daily level, AR(1) remainder), ``"log-harmonic"`` (the same on
        the log), ``"harmonic-mix"`` (the mean of the two: a forecast combination, [BG69]),
        ``"mstl"`` (statsmodels MSTL, daily + weekly),
        ``"sarimax"`` (Fourier terms + ARMA(1, 1) errors), ``"holt-winters"``, ``"profile"``
        (mean of the last 7 days), ``"weekly-profile"`` (mean of the last 4 weeks),
        ``"mape-profile"`` (per time of day, the point of least percentage error over the
        last 7 days: spiky loads), or ``"auto"`` (per series, the least backtest percentage
        error among the fast ones).
    level : float or sequence of float, default (0.8, 0.95)
        Interval levels (fractions) of :meth:`Forecast.to_frame`.
    exog, future_exog : DataFrame or array, optional
        Regressors shared by the series (temperature, a working-day flag, ...): one row per
        step of the history and of the horizon, same columns. Both or neither.
    noise_variance : float, Series, DataFrame or mapping, optional
        Known variance R of the release's noise: one number, per series, per step (e.g. with
        ``k="auto"`` it varies by period), or per step and series (e.g. the squared standard
        errors of the release). The models then fit the noise (the AR(1) remainder's
        coefficient and filter; the harmonic regressions weigh each step by 1 / (σ² + R_t))
        and the intervals are for the true values.
    noise : {"posterior", "correlated", "white"}, default "posterior"
        How the release's error relates to the forecast's (:mod:`forecasting._truth_band`):
        "posterior" for a release whose error is orthogonal to the released values (OptStream:
        Algorithm 4's least squares weighted by the error variances), "white" for noise
        independent of the truth (Laplace, w-event baselines), "correlated" for any
        dependence (Minkowski's bound; conservative).
    hierarchy : mapping parent -> children, optional
        Reconcile the forecasts of every node (:func:`forecasting.reconcile`): children sum to
        their parent, nothing negative, intervals by simulation.
    steps_per_day : int, default 48
        Steps per day of an integer index (a DatetimeIndex has its own).
    client : dask.distributed.Client, optional
        Forecast blocks of series in parallel on its workers.
    seed : int, optional
        Seed of the reconciliation's simulation (a simulation, it releases nothing).

    Returns
    -------
    Forecast
        ``.mean`` (future time stamps), ``.std``, ``.interval(level)``, ``.to_frame()``,
        ``.summary()``.

    Raises
    ------
    ParameterError
        Bad horizon, model, level, exog/future_exog, noise_variance or hierarchy.
    DomainError
        NaN/inf values; an irregular, unsorted or non-time index; a history too short for
        the model and its backtest (the model's fewest steps plus ``horizon``).

    Notes
    -----
    Intervals come from the model's errors on a backtest inside the history, split-conformal
    (module notes);
    *Privacy*: a forecast of a release is post-processing ([FV19] Theorem 3) and spends no
    budget; forecasts of private data are as private as that data.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> idx = pd.date_range("2016-01-04", periods=28 * 48, freq="30min")
    >>> t = np.arange(idx.size)
    >>> y = pd.Series(100 + 10 * np.sin(2 * np.pi * t / 48) + np.cos(t), index=idx, name="load")
    >>> fc = forecast(y, 48)
    >>> str(fc.mean.index[0]), fc.to_frame().columns.tolist()[:4]
    ('2016-02-01 00:00:00', ['unique_id', 'ds', 'mean', 'lo-80'])
    """
    horizon = check_integer(horizon, "horizon", _OWNER)
    if not isinstance(model, str) or model not in MODELS:
        raise ParameterError(
            f"The 'model' parameter of {_OWNER} must be one of {list(MODELS)}. Got {model!r} "
            "instead."
        )
    levels = _check_levels(level, _OWNER)
    if noise not in NOISE_MODELS:
        raise ParameterError(
            f"The 'noise' parameter of {_OWNER} must be one of {list(NOISE_MODELS)}. Got "
            f"{noise!r} instead."
        )
    steps_per_day = check_integer(steps_per_day, "steps_per_day", _OWNER)
    wide, single = _as_wide(history)
    if hierarchy is not None:
        from ._coherent import check_hierarchy

        check_hierarchy(hierarchy, list(wide.columns), _OWNER)
    values = _values(wide, "history")
    clock = _clock(wide.index, "history", _OWNER, steps_per_day)
    period = clock.period
    z, zf = _exog(exog, future_exog, wide, horizon)
    r_steps = _noise(noise_variance, wide)
    n = values.shape[0]
    names = (model,) if model != "auto" else AUTO_CANDIDATES
    fits = [m for m in names if min_history(m, period) + horizon <= n]
    if not fits:
        need = min(min_history(m, period) for m in names) + horizon
        raise DomainError(
            f"The 'history' argument of {_OWNER} must hold at least {need} steps for "
            f"model={model!r} and horizon={horizon} (the model's fewest steps, plus the "
            f"horizon for the backtest of its intervals; a day is {period} steps). Got {n}."
        )
    args = (fits, horizon, period, z, zf, noise == "white")
    if client is None:
        with one_blas_thread():
            mean, scale, noise_sd, chosen, corr, scores = _forecast_block(values, r_steps, *args)
    else:
        mean, scale, noise_sd, chosen, corr, scores = _on_dask(client, values, r_steps, args)
    index = _future_index(wide.index, horizon)
    mean_f = pd.DataFrame(mean, index=index, columns=wide.columns)
    std_f = pd.DataFrame(truth_std(scale, noise_sd, noise), index=index, columns=wide.columns)
    out = Forecast(
        mean=mean_f.iloc[:, 0] if single else mean_f,
        std=std_f.iloc[:, 0] if single else std_f,
        levels=levels,
        models=dict(zip(wide.columns, chosen, strict=True)),
        target="series" if r_steps is None else "truth",
        correlation=corr,
        scores=scores,
        scale=scale,
        noise_sd=noise_sd,
        noise=noise,
    )
    if hierarchy is not None:
        from ._coherent import reconcile

        out = reconcile(out, hierarchy, seed=seed)
    return out


def _on_dask(client, values, noise, args):
    """Blocks of columns on the client's workers (pure function of numpy arrays)."""
    m = values.shape[1]
    workers = max(1, len(getattr(client, "scheduler_info", lambda: {})().get("workers", {})))
    blocks = np.array_split(np.arange(m), min(m, 2 * workers))
    futures = [
        client.submit(
            _forecast_block_threads,
            values[:, b],
            None if noise is None else noise[:, b],
            *args,
            pure=False,
        )
        for b in blocks
    ]
    parts = client.gather(futures)
    mean, scale, noise_sd = (np.hstack([p[i] for p in parts]) for i in range(3))
    chosen = [c for p in parts for c in p[3]]
    corr = scipy.linalg.block_diag(*[p[4] for p in parts])  # blocks apart: no cross terms
    scores = np.hstack([p[5] for p in parts])
    return mean, scale, noise_sd, chosen, corr, scores


def _forecast_block_threads(*args):
    with one_blas_thread():
        return _forecast_block(*args)


def _forecast_block(
    values: np.ndarray,
    noise: np.ndarray | None,
    models: list[str],
    horizon: int,
    period: int,
    z: np.ndarray | None,
    zf: np.ndarray | None,
    white: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]:
    """(mean, scale, noise sd (h, m), model per series, error correlation (m, m), scores)."""
    n, m = values.shape
    r_series = None if noise is None else noise[-28 * period :].mean(axis=0)
    bounds = [n - horizon - j * period for j in range(INTERVAL_DAYS)]
    errors = _backtest(values, noise, models, bounds, horizon, period, z, r_series)
    if len(models) == 1:
        choice = np.zeros(m, dtype=int)
    else:
        depth = min(CHOICE_DAYS, *(errors[k].shape[0] for k in models))
        # |error| / |actual| (floored): the percentage error the forecasts are judged by
        floor = LOG_OFFSET * np.maximum(np.abs(values).mean(axis=0), 1e-12)
        actual = np.stack([values[b : b + horizon] for b in bounds[:depth]])
        denom = np.maximum(np.abs(actual), floor) if CHOICE_LOSS == "relative" else 1.0
        wts = 1.0 if noise is None else _choice_weights(noise, bounds[:depth], horizon, period)
        loss = np.stack(
            [np.mean(wts * np.abs(errors[k][:depth]) / denom, axis=(0, 1)) for k in models]
        )
        choice = np.argmin(loss, axis=0)
    mean = np.empty((horizon, m))
    scale = np.empty((horizon, m))
    noise_sd = np.zeros((horizon, m))
    depth = min(errors[k].shape[0] for k in models)
    chosen_errs = np.empty((depth, horizon, m))
    for i, k in enumerate(models):
        cols = np.flatnonzero(choice == i)
        if cols.size == 0:
            continue
        sub_noise = None if r_series is None else r_series[cols]
        steps = None if noise is None else noise[:, cols]
        mean[:, cols] = point_forecast(k, values[:, cols], horizon, period, sub_noise, z, zf, steps)
        scale[:, cols], noise_sd[:, cols] = _spread(
            errors[k][:, :, cols], noise, cols, n, horizon, period, white
        )
        chosen_errs[:, :, cols] = errors[k][:depth, :, cols]
    return (
        mean, scale, noise_sd, [models[i] for i in choice], _correlation(chosen_errs),
        _scores(chosen_errs),
    )  # fmt: skip


def _choice_weights(noise: np.ndarray, bounds: list[int], horizon: int, period: int) -> np.ndarray:
    """Weights (B, h, m) of the backtest's targets in "auto"'s choice: 1 / V_t, mean 1.

    V_t = R_t² / τ²_d + R_t / B (:func:`forecasting._harmonic.step_variance`, σ² = 0, the B
    boundaries as the days): where the released target is mostly the release's prior it
    shares the prior's error with the released past, and a forecast that repeats that error
    would score well against it (module notes); those targets count least.
    """
    n, m = noise.shape
    t = np.arange(n, dtype=np.float64)
    targets = np.asarray(bounds)[:, None] + np.arange(horizon)[None, :]  # (B, h)
    out = np.empty((len(bounds), horizon, m))
    for j in range(m):
        v = step_variance(noise[:, j], t, period, 0.0, float(len(bounds)))[targets]
        pos = v > 0
        if not pos.any():
            out[:, :, j] = 1.0
            continue
        w = 1.0 / np.where(pos, v, v[pos].min())
        out[:, :, j] = w / w.mean()
    return out


def _backtest(
    values: np.ndarray,
    noise: np.ndarray | None,
    models: Sequence[str],
    bounds: list[int],
    horizon: int,
    period: int,
    z: np.ndarray | None,
    r_series: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """Errors forecast − value (B, h, m) of each model from the ``bounds`` inside the history.

    A combination (:data:`forecasting._multi.COMBINATIONS`) whose members are backtested too
    takes the mean of their errors (the error of a mean of forecasts): no extra fit.
    """
    m = values.shape[1]
    errors: dict[str, np.ndarray] = {}
    for k in sorted(models, key=lambda k: k in COMBINATIONS):  # members first
        usable = [b for b in bounds if b >= min_history(k, period)]
        parts = COMBINATIONS.get(k, ())
        if parts and all(p in errors and errors[p].shape[0] == len(usable) for p in parts):
            errors[k] = sum(errors[p] for p in parts) / len(parts)
            continue
        errs = np.empty((len(usable), horizon, m))
        for i, b in enumerate(usable):
            fz = None if z is None else z[b : b + horizon]
            pred = point_forecast(
                k, values[:b], horizon, period, r_series, None if z is None else z[:b], fz,
                None if noise is None else noise[:b],
            )  # fmt: skip
            errs[i] = pred - values[b : b + horizon]
        errors[k] = errs
    return errors


def _scores(errs: np.ndarray) -> np.ndarray:
    """Residuals actual − forecast over their smoothed RMS per step ahead, pooled: (B·h, m)."""
    rms = np.sqrt(_smooth(np.mean(errs**2, axis=0)))
    rms[rms == 0] = 1.0
    return (-errs / rms[None]).reshape(-1, errs.shape[2])


def _correlation(errs: np.ndarray) -> np.ndarray:
    """Correlation across series of the backtest errors, standardised per step ahead."""
    m = errs.shape[2]
    if m == 1:
        return np.ones((1, 1))
    scale = np.sqrt(np.mean(errs**2, axis=0))
    scale[scale == 0] = 1.0
    flat = (errs / scale).reshape(-1, m)
    corr = (flat.T @ flat) / flat.shape[0]
    d = np.sqrt(np.diag(corr))
    d[d == 0] = 1.0
    return corr / np.outer(d, d)


def _smooth(sq: np.ndarray) -> np.ndarray:
    """Moving average of (h, m) over :data:`SMOOTH_STEPS` steps ahead (edges repeated)."""
    if sq.shape[0] < SMOOTH_STEPS:
        return sq
    kernel = np.ones(SMOOTH_STEPS) / SMOOTH_STEPS
    pad = SMOOTH_STEPS // 2
    padded = np.pad(sq, ((pad, pad), (0, 0)), mode="edge")
    return np.column_stack(
        [np.convolve(padded[:, j], kernel, mode="valid") for j in range(sq.shape[1])]
    )


def _spread(
    errs: np.ndarray,
    noise: np.ndarray | None,
    cols: np.ndarray,
    n: int,
    horizon: int,
    period: int,
    white: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(model error sd, release error sd) per step ahead (h, m), for the truth when R given.

    The backtest RMS per step ahead, smoothed; with R (:mod:`forecasting._truth_band`) the
    "posterior" and "correlated" cases keep it and return √R beside it (the interval combines
    the two), the "white" case subtracts R from its square.
    """
    sq = _smooth(np.mean(errs**2, axis=0))  # (h, m)
    if noise is None:
        return np.sqrt(sq), np.zeros_like(sq)
    if not white:  # Var(ŷ − x) = D + R, or <= (√D + √R)²: combined by the interval
        days = min(7, n // period)
        phase = np.arange(horizon) % period
        pos = n - days * period + phase[None, :] + period * np.arange(days)[:, None]
        r = noise[pos][:, :, cols].mean(axis=0)  # (h, m): R at the same step of the day
        return np.sqrt(sq), np.sqrt(r)
    b = n - horizon - period * np.arange(errs.shape[0])
    targets = b[:, None] + np.arange(horizon)[None, :]  # (B, h) positions
    r = noise[targets][:, :, cols].mean(axis=0)  # (h, m)
    return np.sqrt(np.maximum(sq - r, MIN_SHARE * sq)), np.zeros_like(sq)
