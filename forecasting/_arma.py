"""ARMA(p, q) with a constant, fitted by exact Gaussian maximum likelihood (statsmodels).

The model of [FV19] §6.1.3: x_t = c + Σ φ_i x_{t−i} + β_t + Σ θ_i β_{t−i}, β white noise,
ARMA(1, 1) by default. It is ``statsmodels.tsa.arima.model.ARIMA(order=(p, 0, q))``: a
state-space model with a stationary initialisation whose likelihood is computed by the Kalman
filter and maximised with L-BFGS (statsmodels' defaults: start parameters from its own
preliminary estimates, 50 iterations at most) [DK12] §7.

Faster fitting, same forecasts
------------------------------
Of the options statsmodels offers, two leave the optimisation untouched and skip work a
forecast does not need; they are verified to give bit-identical forecasts and forecast
variances (``tests/forecasting/test_forecast_arma.py``, ``bench/bench_forecast.py``):

* ``cov_type="none"``: no covariance matrix of the parameter estimates (the default, "opg",
  differentiates the likelihood of every observation by complex step);
* ``return_params=True`` then ``model.filter(params)``: one Kalman filter pass at the optimum
  instead of the filter + smoother that builds the default results object.

Together they save ~15 % (``bench/bench_forecast.py``): the L-BFGS search itself (~50
likelihood evaluations per fit) is the cost, and nothing that changes it is identical.

Rejected because they change the forecasts (measured on a month of daily origins of the
bundled regional loads): ``low_memory=True`` (forecast variances become NaN); a warm start
from the previous origin's parameters (the likelihood has local optima: forecasts moved by up
to 640 kW); ``concentrate_scale=True`` (up to 7 kW); another optimiser (``method="nm"``: up to
85 kW); ``method="innovations_mle"`` (up to 39 kW, and 3x slower).
Not a statsmodels option but the largest speed-up on a busy machine: one BLAS thread
(``OPENBLAS_NUM_THREADS=1``), since each likelihood evaluation solves a 2 x 2 Lyapunov
equation and waking BLAS threads for it cost 4-13x in wall time here (the scripts and the
benchmark set it).

References
----------
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[DK12] Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri
from statsmodels.tsa.arima.model import ARIMA

from mechanisms import DomainError
from mechanisms.core._validation import check_positive, check_probability

from ._fit import ArmaFit, _converged, _Quiet
from ._noise_aware import fit_noise_aware
from ._series import as_series, check_order, series_values

__all__ = ["ArmaFit", "fit_arma", "min_train"]


def min_train(p: int, q: int) -> int:
    """Fewest observations a fit accepts: max(10, 3·(p + q + 1)) (≥ 3 per parameter)."""
    return max(10, 3 * (p + q + 1))


def _fit_plain(values: np.ndarray, order: tuple[int, int, int]) -> tuple[ArmaFit, object]:
    """statsmodels' default fit, minus the parameter covariance and the smoother."""
    model = ARIMA(values, order=order, trend="c")
    with _Quiet() as caught:
        params = model.fit(cov_type="none", return_params=True)
        results = model.filter(params, cov_type="none")
    p, _, q = order
    fit = ArmaFit(
        order=order,
        mean=float(params[0]),
        ar=tuple(float(v) for v in params[1 : 1 + p]),
        ma=tuple(float(v) for v in params[1 + p : 1 + p + q]),
        sigma2=float(params[-1]),
        noise_variance=0.0,
        loglike=float(results.llf),
        converged=_converged(caught),
        nobs=int(values.size),
    )
    return fit, results


def fit_model(
    values: np.ndarray, order: tuple[int, int, int], noise_variance: float | None
) -> tuple[ArmaFit, object]:
    """Fit plain ARMA (``noise_variance=None``) or ARMA + known noise; return (fit, results)."""
    if noise_variance is None:
        return _fit_plain(values, order)
    return fit_noise_aware(values, order, noise_variance)


def forecast_model(
    results: object, horizon: int, level: float, measurement_variance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point forecasts and central ``level`` Gaussian intervals for ``horizon`` steps.

    The intervals use the forecast variance of the observation equation minus
    ``measurement_variance`` (0: intervals for a future observation; R: for the noise-free
    state). They do not include the uncertainty of the estimated parameters (statsmodels
    neither).
    """
    pred = results.get_forecast(horizon)  # type: ignore[attr-defined]
    mean = np.asarray(pred.predicted_mean, dtype=np.float64)
    var = np.asarray(pred.var_pred_mean, dtype=np.float64) - measurement_variance
    half = ndtri(0.5 + level / 2.0) * np.sqrt(np.maximum(var, 0.0))
    return mean, mean - half, mean + half


def fit_arma(
    series: object,
    *,
    order: tuple[int, int, int] = (1, 0, 1),
    noise_variance: float | None = None,
) -> ArmaFit:
    """Fit an ARMA(p, q) with a constant by exact maximum likelihood ([FV19] §6.1.3).

    Parameters
    ----------
    series : pandas.Series or array_like
        One series of finite numbers, at least :func:`min_train` values.
    order : tuple (p, 0, q), default (1, 0, 1)
        AR and MA orders (d must be 0: ARMA, as in the paper).
    noise_variance : float, optional
        Known variance R ≥ 0 of white measurement noise added to the ARMA process (e.g. the
        noise of a private release): the fit is then ARMA + noise (see
        :func:`forecasting.rolling_forecast`). None (default): plain ARMA.

    Returns
    -------
    ArmaFit

    Raises
    ------
    ParameterError
        A bad order or noise variance.
    DomainError
        Not one series, NaN/inf values, fewer than :func:`min_train` values.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.zeros(2000)
    >>> e = rng.normal(size=2000)
    >>> for t in range(1, 2000):
    ...     x[t] = 0.7 * x[t - 1] + e[t] + 0.4 * e[t - 1]
    >>> fit = fit_arma(10.0 + x)
    >>> round(fit.ar[0], 1), round(fit.ma[0], 1), round(fit.mean)
    (0.7, 0.4, 10)
    """
    owner = "fit_arma"
    p, d, q = check_order(order, owner)
    if noise_variance is not None:
        noise_variance = check_positive(noise_variance, "noise_variance", owner, allow_zero=True)
    values = series_values(as_series(series, "series", owner), "series", owner)
    need = min_train(p, q)
    if values.size < need:
        raise DomainError(
            f"The 'series' argument of {owner} must hold at least {need} values for an "
            f"ARMA({p}, {q}). Got {values.size}."
        )
    return fit_model(values, (p, d, q), noise_variance)[0]


def check_level(level: object, owner: str) -> float:
    """Return the interval coverage ``level`` in (0, 1)."""
    return check_probability(level, "level", owner, closed_low=False)
