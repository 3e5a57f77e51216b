"""Forecasting on released data: rolling-origin evaluation ([FV19] §6.1.3, issues 5, 13, 16).

Forecasters fit ARMA models to a private release instead of the real stream; this package
measures what that costs. :func:`rolling_forecast` refits an ARMA(1, 1) with a constant
(statsmodels) at every day boundary on the previous four weeks and forecasts the next day;
:func:`forecast_errors` scores the forecasts against the real series (mean L1 error per
forecast as in the paper, MAPE, ...) and :func:`error_ratio` compares with the forecast error on
real data. Beyond the paper, ``model=`` adds seasonal forecasters with a daily season
(SARIMA, Holt-Winters, the mean profile of the last 7 days) and "auto", chosen per origin by
a backtest inside the training window; a release's noise variance is public, and
``noise_variance=`` fits ARMA (and SARIMA) + known measurement noise
(:mod:`forecasting._noise_aware`) with intervals for the true values. :func:`plot_forecast`
and :func:`plot_forecast_errors` draw Figs. 5 and 6.

Forecasting past the end of a series (issue 28): :func:`forecast` fits a model with daily
and weekly seasons (harmonic regressions and their mean, MSTL, SARIMAX with Fourier terms,
Holt-Winters, profiles; "auto" by backtest), optionally with regressors and the release's
known noise, to one or many series (Series, wide or long frames; Dask when given a client)
and returns a :class:`Forecast` with intervals calibrated on a backtest inside the history;
:func:`reconcile` makes the forecasts of a hierarchy coherent (``postproc``'s projection).

Imports mechanisms (errors, validation, the Laplace noise law), numpy, scipy, pandas,
statsmodels, threadpoolctl and matplotlib; never dpstream (a release to measure is passed in
as a callable or as data).

References
----------
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[DK12] Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
"""

from ._arma import ArmaFit, fit_arma, min_train
from ._coherent import reconcile
from ._forecast import Forecast, forecast
from ._metrics import error_ratio, forecast_errors
from ._multi import MODELS as FORECAST_MODELS
from ._noise_aware import estimate_noise_variance, laplace_noise_variance
from ._plots import plot_forecast, plot_forecast_errors
from ._rolling import INTERVALS, MODELS, forecast_origins, rolling_forecast

__all__ = [
    "INTERVALS",
    "MODELS",
    "FORECAST_MODELS",
    "ArmaFit",
    "Forecast",
    "error_ratio",
    "estimate_noise_variance",
    "fit_arma",
    "forecast",
    "forecast_errors",
    "forecast_origins",
    "laplace_noise_variance",
    "min_train",
    "plot_forecast",
    "plot_forecast_errors",
    "reconcile",
    "rolling_forecast",
]
