"""Issue 16 item 3: the fast ARMA(1, 1) / SARIMA fits are statsmodels' likelihood, never worse.

The profile likelihood of :mod:`forecasting._profile_mle` must be statsmodels' exact
likelihood maximised over the regression coefficients and σ²; every origin of a month of
rolling fits must reach a log-likelihood at least that of statsmodels' default ``.fit()``
(within 1e-6 relative). Speed is measured in ``bench/bench_forecast.py``, not here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import threadpoolctl
from _fc_helpers import simulate_arma
from statsmodels.tsa.arima.model import ARIMA

import dpstream
import forecasting._models as models_module
from forecasting import rolling_forecast
from forecasting._arma import fit_model
from forecasting._profile_mle import profile_fit, profile_loglike
from forecasting._seasonal import sarima

TRAIN, DAY = 1344, 48


def _default_fit(y, exog=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' convergence warnings
        return ARIMA(y, exog=exog, order=(1, 0, 1)).fit()


@pytest.mark.parametrize(
    ("phi", "theta"), [(0.9, 0.3), (0.5, -0.4), (0.99, 0.95), (-0.6, 0.8), (0.2, 0.0), (0.9, -0.97)]
)
def test_profile_loglike_is_statsmodels_exact_likelihood_at_its_optimum(phi, theta):
    rng = np.random.default_rng(3)
    y = simulate_arma(rng, 700, phi=0.8, theta=0.3, mean=40.0, sigma=2.0)
    lag = simulate_arma(rng, 700, phi=0.5, mean=5.0)
    for exog, sm_exog in ((np.ones((1, 700)), None), (np.vstack([np.ones(700), lag]), lag)):
        loglike, beta, sigma2 = profile_loglike(y, exog, phi, theta)
        model = ARIMA(y, exog=sm_exog, order=(1, 0, 1), trend="c")
        params = np.r_[beta, phi, theta, sigma2]
        assert loglike == pytest.approx(model.loglike(params), rel=1e-10)
        # β (GLS) and σ² are the maximisers: moving either lowers statsmodels' likelihood.
        for i in range(params.size):
            if i in (beta.size, beta.size + 1):
                continue  # φ, θ: fixed in the profile
            for step in (-1e-3, 1e-3):
                moved = params.copy()
                moved[i] *= 1.0 + step
                assert model.loglike(moved) < loglike


@pytest.mark.parametrize("region", ["rural", "commercial"])
def test_a_month_of_rolling_arma_fits_is_never_worse_than_statsmodels_default(region):
    """Every origin of February 2016 (29 fits, warm starts as in rolling_forecast)."""
    series = dpstream.load_regional()[region]["2016-01-04":"2016-02-29 23:30"].to_numpy()
    warm: dict = {}
    worst = np.inf
    for origin in range(TRAIN, series.size - DAY + 1, DAY):
        values = series[origin - TRAIN : origin]
        fit, results = fit_model(values, (1, 0, 1), None, warm)
        default = _default_fit(values)
        worst = min(worst, (fit.loglike - default.llf) / abs(default.llf))
        assert fit.converged
        assert fit.loglike == pytest.approx(results.llf, rel=1e-12)  # statsmodels' llf
    assert worst >= -1e-6


def test_sarima_fits_are_never_worse_than_statsmodels_default_on_the_same_model():
    """The seasonal model as statsmodels states it: ARIMA(d[s:], exog=d[:-s]), d = y − y_{−s}."""
    series = dpstream.load_regional()["urban"]["2016-05-01":"2016-06-10 23:30"].to_numpy()
    warm: dict = {}
    for origin in range(TRAIN, TRAIN + 8 * DAY, DAY):
        values = series[origin - TRAIN : origin]
        sarima(values, DAY, DAY, None, warm)
        optimum = warm["sarima", TRAIN]
        diff = values[DAY:] - values[:-DAY]
        y, lag = diff[DAY:], diff[:-DAY]
        default = _default_fit(y, lag)
        ours, *_ = profile_loglike(y, np.vstack([np.ones(y.size), lag]), *optimum)
        assert ours >= default.llf - 1e-6 * abs(default.llf)


def test_a_bad_start_is_rescued_by_the_other_starts():
    """A warm start far from the optimum (another basin) cannot make the fit worse."""
    rng = np.random.default_rng(8)
    y = simulate_arma(rng, 1000, phi=0.9, theta=0.4, mean=10.0)
    ones = np.ones((1, y.size))
    good, good_ll, _ = profile_fit(y, ones, [(0.9, 0.4)])
    for start in [(-0.9, -0.9), (0.999, -0.999), (0.0, 0.0)]:
        params, loglike, converged = profile_fit(y, ones, [start])
        assert converged and loglike >= good_ll - 1e-8 * abs(good_ll)
        np.testing.assert_allclose(params[1:3], good[1:3], atol=1e-4)


def test_fits_run_with_one_blas_thread(monkeypatch):
    """threadpoolctl limits BLAS inside rolling_forecast, whatever the environment says."""
    seen = []
    real_once = models_module.forecast_once

    def spy(*args, **kwargs):
        seen.extend(
            info["num_threads"]
            for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas"
        )
        return real_once(*args, **kwargs)

    monkeypatch.setattr(models_module, "forecast_once", spy)
    import forecasting._rolling as rolling_module

    monkeypatch.setattr(rolling_module, "forecast_once", spy)
    x = simulate_arma(np.random.default_rng(1), 200, phi=0.5, mean=3.0)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        rolling_forecast(x, train=100, horizon=10, steps_per_day=50)
    assert seen and set(seen) == {1}
