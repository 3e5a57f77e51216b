"""ARMA fits: parameter recovery, identical forecasts with the fast options, validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import half_hours, simulate_arma
from statsmodels.tsa.arima.model import ARIMA

import dpstream
from forecasting import ArmaFit, fit_arma, min_train, rolling_forecast
from forecasting._arma import fit_model
from mechanisms import DomainError, ParameterError


@pytest.mark.statistical
def test_simulated_arma11_recovers_its_parameters():
    rng = np.random.default_rng(20190701)
    x = simulate_arma(rng, 4000, phi=0.7, theta=0.4, mean=50.0, sigma=2.0)
    fit = fit_arma(x)
    assert isinstance(fit, ArmaFit) and fit.converged and fit.order == (1, 0, 1)
    # Standard errors at n = 4000: φ ≈ 0.015, θ ≈ 0.018, σ² ≈ 0.09, μ ≈ 0.19: 3 SE bounds.
    assert abs(fit.ar[0] - 0.7) < 0.05
    assert abs(fit.ma[0] - 0.4) < 0.06
    assert abs(fit.sigma2 - 4.0) < 0.3
    assert abs(fit.mean - 50.0) < 0.6
    assert fit.noise_variance == 0.0 and fit.nobs == 4000


@pytest.mark.statistical
def test_wrong_model_is_detected_by_the_fit():
    """An AR(1) fitted as ARMA(1, 1) gets θ ≈ 0: the fit distinguishes the two models."""
    rng = np.random.default_rng(7)
    x = simulate_arma(rng, 4000, phi=0.6, theta=0.0)
    fit = fit_arma(x)
    assert abs(fit.ma[0]) < 0.07 and abs(fit.ar[0] - 0.6) < 0.07


@pytest.mark.parametrize("order", [(0, 0, 0), (2, 0, 0), (0, 0, 2), (2, 0, 1)])
def test_other_orders(order):
    rng = np.random.default_rng(1)
    fit = fit_arma(simulate_arma(rng, 600, phi=0.5, mean=3.0), order=order)
    assert len(fit.ar) == order[0] and len(fit.ma) == order[2]
    assert abs(fit.mean - 3.0) < 0.5


def test_forecasts_are_statsmodels_at_a_likelihood_at_least_its_default_fit():
    """Issue 16: statsmodels' forecasts and intervals at our optimum, whose log-likelihood
    (statsmodels' own ``llf``) is at least that of statsmodels' default ``.fit()``."""
    real = dpstream.load_regional()["commercial"]["2016-05-04":"2016-06-03"]
    out = rolling_forecast(real, days=3, level=0.9)
    values = real.to_numpy()
    warm: dict = {}
    for i, (origin, one) in enumerate(out.groupby("origin", sort=True)):
        o = 1344 + 48 * i
        assert real.index[o] == origin
        fit, results = fit_model(values[o - 1344 : o], (1, 0, 1), None, warm)
        params = [fit.mean, fit.ar[0], fit.ma[0], fit.sigma2]
        pred = ARIMA(values[o - 1344 : o], order=(1, 0, 1)).filter(params).get_forecast(48)
        np.testing.assert_allclose(one["forecast"], pred.predicted_mean, rtol=1e-12, atol=0)
        ci = pred.conf_int(alpha=0.1)
        np.testing.assert_allclose(one["lower"], ci[:, 0], rtol=1e-10)
        np.testing.assert_allclose(one["upper"], ci[:, 1], rtol=1e-10)
        default = ARIMA(values[o - 1344 : o], order=(1, 0, 1)).fit()
        assert fit.loglike >= default.llf - 1e-6 * abs(default.llf)
        assert fit.loglike == pytest.approx(results.llf, rel=1e-12)


def test_non_convergence_is_reported_not_raised():
    """ARMA(2, 2) on a noisy random walk hits statsmodels' 50 iterations: a flag, no warning."""
    rng = np.random.default_rng(1)
    walk = np.cumsum(rng.normal(size=300)) + rng.normal(0.0, 1.0, 300)
    assert fit_arma(walk, order=(2, 0, 2)).converged is False  # filterwarnings = error
    assert fit_arma(walk, order=(1, 0, 1)).converged is True
    series = np.r_[walk, np.zeros(12)]  # one origin, at 300, trained on ``walk``
    out = rolling_forecast(series, order=(2, 0, 2), train=300, horizon=12, steps_per_day=12)
    assert len(out) == 12 and not out["converged"].any()


def test_series_and_array_agree():
    rng = np.random.default_rng(5)
    x = simulate_arma(rng, 300, phi=0.8, mean=10.0)
    assert fit_arma(x) == fit_arma(half_hours(x)) == fit_arma(pd.DataFrame({"a": x}))


@pytest.mark.parametrize(
    "order", [(1, 1, 1), (1, 0), (-1, 0, 1), (11, 0, 0), (1.5, 0, 1), "ARMA", None, (1, 0, True)]
)
def test_bad_order(order):
    with pytest.raises(ParameterError, match="'order' parameter of fit_arma must be a tuple"):
        fit_arma(np.arange(50.0), order=order)


def test_too_short_nan_and_shape():
    assert min_train(1, 1) == 10 and min_train(3, 3) == 21
    with pytest.raises(DomainError, match="at least 10 values"):
        fit_arma(np.ones(9))
    x = np.linspace(0, 1, 100)
    x[[3, 7]] = np.nan
    with pytest.raises(DomainError, match="2 entries are NaN") as info:
        fit_arma(x)
    assert "0.0303" not in str(info.value)
    with pytest.raises(DomainError, match="one-dimensional"):
        fit_arma(np.ones((20, 2)))
    with pytest.raises(DomainError, match="one series"):
        fit_arma(pd.DataFrame({"a": np.ones(20), "b": np.ones(20)}))
    with pytest.raises(DomainError, match="must hold numbers"):
        fit_arma(["a"] * 20)
    with pytest.raises(ParameterError, match="noise_variance"):
        fit_arma(np.arange(50.0), noise_variance=-1.0)
