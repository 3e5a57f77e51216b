"""Point forecasters of :func:`forecasting.forecast`: many series, daily and weekly seasons.

Every model maps the training values ``(n, m)`` (m series on one clock), the horizon, the
steps per day s, the known noise variance R of each series and optional regressors to the
``(horizon, m)`` point forecasts. Intervals are not the models' business: they come from the
errors of the same model on a backtest inside the training window (:mod:`forecasting._forecast`).

* ``harmonic``: dynamic harmonic regression, daily + weekly Fourier terms, a smoothed daily
  level (exponential smoothing of the daily mean residual, so that the level follows the
  recent days as MSTL's does), AR(1) remainder, weighted by the release's noise of each step
  when it is known, vectorised over the series (:mod:`forecasting._harmonic`);
  ``log-harmonic`` the same on log(max(y, 0) + c), c = :data:`LOG_OFFSET` × the series' mean
  (multiplicative seasons, a forecast of the median: [HA21] §3.1 and §5.6; the noise variance
  enters by the delta method, R / (mean y + c)²).
* ``harmonic-mix``: the equal-weight mean of ``log-harmonic`` and ``harmonic``, a forecast
  combination ([HA21] §13.4; [BG69]: the mean of two forecasts whose errors are not perfectly
  correlated has a smaller error variance than the worse of them, and often than both; equal
  weights, not weights estimated from a short backtest, are the robust choice, [CMVW16]). The
  additive and the multiplicative seasons are each right part of the time on a load (the
  multiplicative one at the peaks, the additive one where a release's noise sits near zero);
  ``auto`` backtests the mean as a candidate of its own, from its members' backtest errors
  (the error of a mean is the mean of the errors), so it costs no extra fit.
* ``mstl``: statsmodels' ``MSTL(periods=(s, 7s))`` ([BHK21] Alg. 1) per series; the trend is
  carried flat from its last value, each season repeats its last cycle (as statsforecast's
  MSTL does), and the remainder is the noise-aware AR(1) of :mod:`forecasting._harmonic`.
* ``sarimax``: regression on daily and weekly Fourier terms with ARMA(1, 1) errors ([HA21]
  §10.5 and §12.1), statsmodels' ``SARIMAX`` on the regression residuals, with the release's
  noise as a fixed measurement error when R is known ([DK12] §3.4).
* ``holt-winters`` and ``profile``: the daily-season models of :mod:`forecasting._seasonal`.
* ``weekly-profile``: the mean of the last (up to 4) weeks at the same time of the week.
* ``mape-profile``: at each time of day, the point that minimises the MAPE of the last
  :data:`MAPE_DAYS` days at that time, i.e. the median of their empirical distribution
  reweighted by 1/y (the β-median with β = −1, the optimal point forecast under the absolute
  percentage error, [Gne11] §3). Spiky, heteroscedastic loads (a household:
  appliances switch on at varying times) are far from their mean most of the time, and the
  percentage error punishes an over-forecast of a quiet hour most; this is the forecast that
  loss asks for. Values below :data:`LOG_OFFSET` × the series' mean are floored there (a
  release may be near zero or negative) so that the weights stay finite.

Regressors (``exog``) enter the harmonic regression directly; the other models forecast
y − Zγ̂, γ̂ from the harmonic regression of y on the Fourier terms and Z (so that the effect of
a regressor is not confused with the seasons), and add Z_future γ̂ back.

References
----------
[BHK21] Bandara, Hyndman, Bergmeir. MSTL: A Seasonal-Trend Decomposition Algorithm for Time
        Series with Multiple Seasonal Patterns, 2021.
[HA21]  Hyndman, Athanasopoulos. Forecasting: Principles and Practice, 3rd ed., 2021.
[DK12]  Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
[Gne11] Gneiting. Making and Evaluating Point Forecasts. JASA 106(494), 746–762, 2011.
[BG69]  Bates, Granger. The Combination of Forecasts. Operational Research Quarterly 20(4),
        451–468, 1969.
[CMVW16] Claeskens, Magnus, Vasnev, Wang. The forecast combination puzzle: A simple
        theoretical explanation. International Journal of Forecasting 32(3), 754–762, 2016.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ._fit import _Quiet
from ._harmonic import _ar1_remainder, design, harmonic
from ._seasonal import holt_winters, profile

__all__ = [
    "AUTO_CANDIDATES", "COMBINATIONS", "MODELS", "min_history", "point_forecast",
    "relative_median",
]  # fmt: skip

#: Models of :func:`forecasting.forecast` ("auto" chooses among :data:`AUTO_CANDIDATES`).
MODELS = (
    "auto", "harmonic", "log-harmonic", "harmonic-mix", "mstl", "sarimax", "holt-winters",
    "profile", "weekly-profile", "mape-profile",
)  # fmt: skip
#: The candidates of "auto": fast ones (numpy only), so that its backtest stays cheap. (With
#: the profiles as well, the backtest's choice cost 0.5 point of MAPE on the bundled releases:
#: ``bench/bench_forecast_peers.py``.)
AUTO_CANDIDATES = ("log-harmonic", "harmonic", "harmonic-mix", "mape-profile")
#: Forecast combinations: the equal-weight mean of their members' forecasts (module notes).
COMBINATIONS = {"harmonic-mix": ("log-harmonic", "harmonic")}
#: Offset of "log-harmonic", as a share of the series' mean: log(max(y, 0) + c·mean).
LOG_OFFSET = 0.05
#: Weeks averaged by "weekly-profile" (at most).
PROFILE_WEEKS = 4
#: Days of history "mstl" and "sarimax" fit (the last 8 weeks at most).
MAX_DAYS = 56
#: Days whose values at the same time of day "mape-profile" weighs.
MAPE_DAYS = 7


def min_history(model: str, period: int) -> int:
    """Fewest training steps each model accepts (s steps per day)."""
    return {
        "harmonic": 14 * period,
        "log-harmonic": 14 * period,
        "harmonic-mix": 14 * period,
        "mstl": 14 * period,  # two cycles of the weekly season
        "sarimax": 14 * period,
        "holt-winters": 2 * period,
        "profile": 8 * period,
        "weekly-profile": 7 * period,
        "mape-profile": MAPE_DAYS * period,
    }[model]


def point_forecast(
    model: str,
    values: np.ndarray,
    horizon: int,
    period: int,
    noise: np.ndarray | None,
    exog: np.ndarray | None,
    future_exog: np.ndarray | None,
    noise_steps: np.ndarray | None = None,
) -> np.ndarray:
    """(horizon, m) point forecasts of ``model`` fitted on ``values`` (n, m).

    ``noise`` is the release's noise variance per series (m,), ``noise_steps`` per step (n, m)
    (the harmonic regressions weigh the steps by it), both optional.
    """
    if model in COMBINATIONS:
        members = COMBINATIONS[model]
        args = (values, horizon, period, noise, exog, future_exog, noise_steps)
        return sum(point_forecast(k, *args) for k in members) / len(members)
    if model == "harmonic":
        return harmonic(
            values, horizon, period, noise_variance=noise, noise_steps=noise_steps, exog=exog,
            future_exog=future_exog,
        )  # fmt: skip
    if model == "log-harmonic":
        # Multiplicative seasons: the harmonic regression of log(y + c); exp back (a median).
        offset = LOG_OFFSET * np.maximum(np.abs(values).mean(axis=0), 1e-12)
        shifted = np.maximum(values, 0.0) + offset
        spread = np.mean(shifted, axis=0) ** 2
        log_noise = None if noise is None else noise / spread  # delta method
        log_steps = None if noise_steps is None else noise_steps / spread
        logs = harmonic(
            np.log(shifted), horizon, period, noise_variance=log_noise, noise_steps=log_steps,
            exog=exog, future_exog=future_exog,
        )  # fmt: skip
        return np.exp(logs) - offset
    effect = 0.0
    if exog is not None:
        values, effect = _remove_exog(values, exog, future_exog, period)
    n, m = values.shape
    r = np.zeros(m) if noise is None else noise
    if model == "weekly-profile":
        weeks = min(PROFILE_WEEKS, n // (7 * period))
        cycles = values[n - weeks * 7 * period :].reshape(weeks, 7 * period, m).mean(axis=0)
        out = cycles[np.arange(horizon) % (7 * period)]  # whole weeks back: same phase
    elif model == "mape-profile":
        floor = LOG_OFFSET * np.maximum(np.abs(values).mean(axis=0), 1e-12)
        cycles = values[n - MAPE_DAYS * period :].reshape(MAPE_DAYS, period, m)
        out = relative_median(np.maximum(cycles, floor))[np.arange(horizon) % period]
    elif model == "profile":
        out = np.column_stack([profile(values[:, j], horizon, period)[0] for j in range(m)])
    elif model == "holt-winters":
        out = np.column_stack([holt_winters(values[:, j], horizon, period)[0] for j in range(m)])
    elif model == "mstl":
        out = np.column_stack(
            [_mstl(values[-MAX_DAYS * period :, j], horizon, period, r[j]) for j in range(m)]
        )
    elif model == "sarimax":
        out = np.column_stack(
            [_sarimax(values[-MAX_DAYS * period :, j], horizon, period, r[j]) for j in range(m)]
        )
    else:  # pragma: no cover - validated by the caller
        raise AssertionError(model)
    return out + effect


def relative_median(samples: np.ndarray) -> np.ndarray:
    """The β-median, β = −1, of positive ``samples`` along axis 0 ([Gne11] §3).

    The smallest sample x_(i) whose weights 1/x up to it reach half their total: the minimiser
    of Σ_k |x − x_k| / x_k, the empirical MAPE of the point x.
    """
    ordered = np.sort(samples, axis=0)
    cum = np.cumsum(1.0 / ordered, axis=0)
    first = np.argmax(cum >= 0.5 * cum[-1:], axis=0)
    return np.take_along_axis(ordered, first[None], axis=0)[0]


def _remove_exog(
    values: np.ndarray, exog: np.ndarray, future_exog: np.ndarray, period: int
) -> tuple[np.ndarray, np.ndarray]:
    """(y − Z γ̂, Z_future γ̂) with γ̂ from the regression of y on the Fourier terms and Z."""
    n = values.shape[0]
    x = design(np.arange(n, dtype=np.float64), period)
    z = np.vstack([exog, future_exog])
    z = z - exog.mean(axis=0)
    full = np.hstack([x, z[:n]])
    gram = full.T @ full
    gram[np.diag_indices_from(gram)] += 1e-8 * np.trace(gram) / gram.shape[0]
    coef = scipy.linalg.solve(gram, full.T @ values, assume_a="pos")
    gamma = coef[x.shape[1] :]
    return values - z[:n] @ gamma, z[n:] @ gamma


def _mstl(y: np.ndarray, horizon: int, period: int, noise: float) -> np.ndarray:
    from statsmodels.tsa.seasonal import MSTL

    with _Quiet():
        res = MSTL(y, periods=(period, 7 * period)).fit()
    # (n, 2); statsmodels drops the weekly season when the history holds two weeks or less
    seasonal = np.asarray(res.seasonal, dtype=np.float64).reshape(y.size, -1)
    steps = np.arange(horizon)
    out = np.full(horizon, float(np.asarray(res.trend)[-1]))
    for col, length in enumerate((period, 7 * period)[: seasonal.shape[1]]):
        last = seasonal[-length:, col]
        out += last[steps % length]
    remainder = np.asarray(res.resid, dtype=np.float64)[:, None]
    return out + _ar1_remainder(remainder, horizon, np.array([noise]))[:, 0]


def _sarimax(y: np.ndarray, horizon: int, period: int, noise: float) -> np.ndarray:
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    n = y.size
    t = np.arange(n + horizon, dtype=np.float64)
    x = design(t, period, daily=6, weekly=12)
    coef, *_ = np.linalg.lstsq(x[:n], y, rcond=None)
    resid = y - x[:n] @ coef
    model = SARIMAX(resid, order=(1, 0, 1), trend="n", measurement_error=noise > 0)
    with _Quiet():
        if noise > 0:
            with model.fix_params({"var.measurement_error": noise}):
                params = model.fit(disp=False, cov_type="none", return_params=True, maxiter=200)
        else:
            params = model.fit(disp=False, cov_type="none", return_params=True, maxiter=200)
        pred = model.filter(params, cov_type="none").forecast(horizon)
    return x[n:] @ coef + np.asarray(pred, dtype=np.float64)
