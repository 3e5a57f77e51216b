"""Seasonal forecasters with a season of one period (a day): SARIMA, Holt-Winters, profile.

Day-ahead load forecasts are dominated by the daily cycle, which ARMA(1, 1) cannot represent
(it reverts to its mean within hours: 16 % MAPE on a real series against ~8 % for seasonal
models, issue 13). Each function here fits one model on ``values`` (the training window) and
returns the point forecasts of the next ``horizon`` steps, the forecast variance of a future
*observation* of the series (the caller subtracts a known measurement noise variance for
intervals on the truth), and whether the fit converged.

* ``sarima``: the multiplicative seasonal ARIMA(1, 0, 1)(1, 1, 0)_s with a constant,
  (1 − φB)(1 − ΦB^s)(1 − B^s) y_t = c + (1 + θB)β_t ([BJRL15] §9.1): the seasonal
  difference d_t = y_t − y_{t−s} (today minus the same time yesterday) follows a seasonal
  AR(1) times ARMA(1, 1). Written as a regression of d_t on d_{t−s} with ARMA(1, 1) errors it
  is a statsmodels ``ARIMA(d[s:], exog=d[:-s], order=(1, 0, 1), trend="c")`` with a
  two-dimensional state instead of the (2s + 2)-dimensional state of ``SARIMAX(order=(1, 0,
  1), seasonal_order=(1, 1, 0, s))``: the likelihood is exact given the first two seasons (the
  conditional likelihood of [BJRL15] §7.1.2 for the seasonal part), and a fit takes
  milliseconds instead of seconds (``bench/bench_forecast.py``). Forecasts of ``horizon <= s``
  steps need only observed seasonal lags: ŷ_{n+h} = y_{n+h−s} + d̂_{n+h}. It is fitted like
  ARMA(1, 1) (:mod:`forecasting._profile_mle`: c and Φ by GLS, σ² profiled, warm starts).
  With a release's noise v_t of known variance R, d_t carries v_t − v_{t−s} (variance 2R):
  the state-space model gets ``measurement_error=True`` with that variance fixed, treating it
  as white (its lag-s autocorrelation −1/2 is ignored, and the regressor d_{t−s} keeps its
  noise: an approximation, good while R is small against the variance of d).
  (The stationary seasonal AR on y itself, (1, 0, 0)_s, errs twice as much day-ahead on the
  bundled loads: its fitted Φ is ~0.3.)
* ``holt_winters``: additive Holt-Winters without trend (statsmodels
  ``holtwinters.ExponentialSmoothing(seasonal="add")``, smoothing weights and initial states
  by least squares). Its forecast variance is the one of the equivalent ETS(A, N, A) model,
  σ² (1 + Σ_{j=1}^{h−1} (α + γ·[j ≡ 0 mod s])²) ([HKOS08] Table 6.1, class 1), σ² the mean
  squared one-step error.
* ``profile``: the mean of the last 7 periods at the same time of day. Its forecast variance
  is the mean squared error of that rule over the training window (each day from the eighth
  on, predicted from the 7 days before it), the same for every step.

References
----------
[BJRL15] Box, Jenkins, Reinsel, Ljung. Time Series Analysis: Forecasting and Control, 5th ed.
[HKOS08] Hyndman, Koehler, Ord, Snyder. Forecasting with Exponential Smoothing: The State
         Space Approach, 2008.
"""

from __future__ import annotations

import numpy as np
from statsmodels.tsa.arima.model import ARIMA

from ._fit import _converged, _Quiet
from ._profile_mle import profile_fit

__all__ = ["PROFILE_PERIODS", "holt_winters", "min_history", "profile", "sarima"]

#: Periods averaged by the profile forecaster (issue 13: "the mean of the last 7 periods").
PROFILE_PERIODS = 7
#: Iteration limit of the noise-aware seasonal fit (as for ARMA + noise).
MAXITER = 500

Result = tuple[np.ndarray, np.ndarray, bool]


def min_history(model: str, period: int) -> int:
    """Fewest training steps a model accepts at season length ``period``."""
    return {
        "arma": 10,
        "sarima": 2 * period + 10,  # two seasons of lags, then >= 10 steps for 5 parameters
        "holt-winters": 2 * period,  # statsmodels' estimated initial states need two seasons
        "profile": (PROFILE_PERIODS + 1) * period,  # 7 to average, >= 1 to measure the error
    }[model]


def sarima(
    values: np.ndarray,
    horizon: int,
    period: int,
    noise_variance: float | None,
    warm: dict | None,
) -> Result:
    """Seasonal ARIMA(1, 0, 1)(1, 1, 0)_period, ``horizon <= period`` (see the module notes)."""
    n = values.size
    diff = values[period:] - values[:-period]  # d_t = y_t − y_{t−s}
    y, lag = diff[period:], diff[:-period]
    future_lag = diff[diff.size - period : diff.size - period + horizon]
    if noise_variance is not None:
        from statsmodels.tsa.statespace.sarimax import SARIMAX

        model = SARIMAX(y, exog=lag, order=(1, 0, 1), trend="c", measurement_error=True)
        fixed = {"var.measurement_error": 2.0 * noise_variance}  # var(v_t − v_{t−s})
        with _Quiet() as caught, model.fix_params(fixed):
            params = model.fit(cov_type="none", disp=False, maxiter=MAXITER, return_params=True)
        converged = _converged(caught)
    else:
        model = ARIMA(y, exog=lag, order=(1, 0, 1), trend="c")
        with _Quiet():
            start = np.asarray(model.start_params, dtype=np.float64)
        key = ("sarima", n)
        starts = [(float(start[2]), float(start[3]))]
        if warm is not None and key in warm:
            starts.append(warm[key])
        params, _, converged = profile_fit(y, np.vstack([np.ones(y.size), lag]), starts)
        if warm is not None:
            warm[key] = (float(params[2]), float(params[3]))
    with _Quiet():
        results = model.filter(params, cov_type="none")
        pred = results.get_forecast(horizon, exog=future_lag)
    mean = values[n - period : n - period + horizon] + np.asarray(pred.predicted_mean)
    return mean, np.asarray(pred.var_pred_mean, dtype=np.float64), converged


def holt_winters(values: np.ndarray, horizon: int, period: int) -> Result:
    """Additive Holt-Winters without trend; ETS(A, N, A) forecast variances."""
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    model = ExponentialSmoothing(
        values, trend=None, seasonal="add", seasonal_periods=period,
        initialization_method="heuristic",
    )  # fmt: skip
    with _Quiet() as caught:
        res = model.fit()
    alpha = float(res.params["smoothing_level"])
    gamma = float(res.params["smoothing_seasonal"])
    sigma2 = float(res.sse) / values.size
    j = np.arange(1, horizon)
    c = alpha + gamma * (j % period == 0)  # [HKOS08] Table 6.1, class 1 (ETS(A, N, A))
    var = sigma2 * (1.0 + np.r_[0.0, np.cumsum(c**2)])
    mean = np.asarray(res.forecast(horizon), dtype=np.float64)
    return mean, var, _converged(caught) and bool(res.mle_retvals.success)


def profile(values: np.ndarray, horizon: int, period: int) -> Result:
    """Mean of the last PROFILE_PERIODS periods at the same time of day."""
    k, n = PROFILE_PERIODS, values.size
    days = values[n - k * period :].reshape(k, period)
    phase = np.arange(horizon) % period  # step h (0-based) falls at phase h of a day
    mean = days.mean(axis=0)[phase]
    # In-window error of the same rule: every step t >= k·period predicted by the k days
    # before it (a moving average over lags period, 2·period, ..., k·period).
    lags = np.stack([values[k * period - j * period : n - j * period] for j in range(1, k + 1)])
    err = values[k * period :] - lags.mean(axis=0)
    var = np.full(horizon, float(np.mean(err**2)))
    return mean, var, True
