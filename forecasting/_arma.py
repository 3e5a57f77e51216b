"""ARMA(p, q) with a constant, fitted by exact Gaussian maximum likelihood (statsmodels).

The model of [FV19] §6.1.3: x_t = c + Σ φ_i x_{t−i} + β_t + Σ θ_i β_{t−i}, β white noise,
ARMA(1, 1) by default. It is ``statsmodels.tsa.arima.model.ARIMA(order=(p, 0, q))``: a
state-space model with a stationary initialisation whose likelihood is computed by the Kalman
filter and maximised with L-BFGS (statsmodels' defaults: start parameters from its own
preliminary estimates, 50 iterations at most) [DK12] §7.

Faster fitting, never a worse likelihood (issue 16)
---------------------------------------------------
The ARMA(1, 1) of the paper (``order=(1, 0, 1)``, no measurement noise) is fitted by
:mod:`forecasting._profile_mle`: the mean and σ² are profiled out in closed form and the exact
likelihood of (φ, θ) is maximised by L-BFGS from statsmodels' own start values, from the
previous origin's optimum (``warm``) and from the best point of a coarse grid; the best optimum
is kept. The forecasts and intervals are statsmodels' (``ARIMA.filter(params)`` at that
optimum, ``cov_type="none"``: no parameter covariance, no smoother), and the reported
log-likelihood is statsmodels' ``llf`` there, so the comparison with statsmodels' default
``ARIMA(x, order=(1, 0, 1)).fit()`` is on the same function: ``tests/forecasting/
test_forecast_fast_fit.py`` checks llf >= statsmodels' at every origin of a month of real
loads (within 1e-6 relative), ``bench/bench_forecast.py`` measures the time (ratios). A warm
start alone is not safe (the likelihood has local optima: forecasts moved by up to 640 kW in
an earlier measurement), hence statsmodels' start and the grid as well. The forecasts differ
from statsmodels' default fit where its L-BFGS stops early along the flat direction of the
mean (our llf is then higher; e.g. 0.009 higher and forecasts up to 41 kW apart 48 steps ahead
on a 6 MW commercial load). Other orders and the noise-aware fit keep statsmodels' optimiser
(``cov_type="none"``, ``return_params=True`` + one filter pass).

Threads: every likelihood evaluation is a tiny dense computation, for which waking BLAS
threads only costs (4-13x in wall time on a loaded 2-core machine): :func:`one_blas_thread`
(threadpoolctl) limits BLAS to one thread around the fits, whatever the environment says.

References
----------
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[DK12] Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
"""

from __future__ import annotations

import numpy as np
from statsmodels.tsa.arima.model import ARIMA
from threadpoolctl import threadpool_limits

from mechanisms import DomainError
from mechanisms.core._validation import check_positive, check_probability

from ._fit import ArmaFit, _converged, _Quiet
from ._noise_aware import fit_noise_aware
from ._profile_mle import profile_fit
from ._series import as_series, check_order, series_values

__all__ = ["ArmaFit", "fit_arma", "min_train"]


def min_train(p: int, q: int) -> int:
    """Fewest observations a fit accepts: max(10, 3·(p + q + 1)) (≥ 3 per parameter)."""
    return max(10, 3 * (p + q + 1))


def one_blas_thread() -> threadpool_limits:
    """Context manager: BLAS limited to one thread (tiny solves; threads only contend)."""
    return threadpool_limits(limits=1, user_api="blas")


def _fit_fast(
    values: np.ndarray, warm: tuple[float, float] | None
) -> tuple[ArmaFit, object, tuple[float, float]]:
    """ARMA(1, 1) + constant by profile likelihood; statsmodels' filter at the optimum."""
    model = ARIMA(values, order=(1, 0, 1), trend="c")
    with _Quiet():
        start = np.asarray(model.start_params, dtype=np.float64)
    starts = [(float(start[1]), float(start[2]))] + ([warm] if warm is not None else [])
    params, _, converged = profile_fit(values, np.ones((1, values.size)), starts)
    with _Quiet():
        results = model.filter(params, cov_type="none")
    fit = ArmaFit(
        order=(1, 0, 1),
        mean=float(params[0]),
        ar=(float(params[1]),),
        ma=(float(params[2]),),
        sigma2=float(params[3]),
        noise_variance=0.0,
        loglike=float(results.llf),
        converged=converged,
        nobs=int(values.size),
    )
    return fit, results, (float(params[1]), float(params[2]))


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
    values: np.ndarray,
    order: tuple[int, int, int],
    noise_variance: float | None,
    warm: dict | None = None,
) -> tuple[ArmaFit, object]:
    """Fit plain ARMA (``noise_variance=None``) or ARMA + known noise; return (fit, results).

    ``warm`` (a dict, updated in place) carries the previous ARMA(1, 1) optimum of a rolling
    evaluation to the next origin's fit, as one more start value.
    """
    if noise_variance is None and order == (1, 0, 1):
        key = ("arma", values.size)
        fit, results, optimum = _fit_fast(values, None if warm is None else warm.get(key))
        if warm is not None:
            warm[key] = optimum
        return fit, results
    if noise_variance is None:
        return _fit_plain(values, order)
    return fit_noise_aware(values, order, noise_variance)


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
    with one_blas_thread():
        return fit_model(values, (p, d, q), noise_variance)[0]


def check_level(level: object, owner: str) -> float:
    """Return the interval coverage ``level`` in (0, 1)."""
    return check_probability(level, "level", owner, closed_low=False)
