"""ARMA + known measurement noise: parameters, error reduction, intervals, noise variances."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import simulate_arma
from scipy.special import ndtri

import dpstream
from forecasting import (
    estimate_noise_variance,
    fit_arma,
    forecast_errors,
    laplace_noise_variance,
    rolling_forecast,
)
from mechanisms import DomainError, ParameterError, WEventLaplace


@pytest.mark.statistical
def test_noise_aware_fit_undoes_the_attenuation_of_ar1():
    """AR(1) + noise: plain AR(1) halves φ (signal/noise mix); knowing R recovers φ and σ²."""
    rng = np.random.default_rng(12)
    x = simulate_arma(rng, 2000, phi=0.9, mean=20.0)
    y = x + rng.normal(0.0, 2.0, x.size)  # R = 4 vs var(x) = 1/(1 - 0.81) = 5.3
    plain = fit_arma(y, order=(1, 0, 0))
    aware = fit_arma(y, order=(1, 0, 0), noise_variance=4.0)
    assert plain.ar[0] < 0.6  # attenuated (0.44 here)
    assert abs(aware.ar[0] - 0.9) < 0.04 and abs(aware.sigma2 - 1.0) < 0.25
    assert aware.noise_variance == 4.0 and aware.converged
    assert aware.loglike > plain.loglike  # same data, the right model fits better


def _paired_errors(reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """L1 errors of 5-step forecasts of the *true* AR(1) from AR(1) + N(0, 4) noise."""
    plain, aware = [], []
    for rep in range(reps):
        rng = np.random.default_rng(seed + rep)
        x = simulate_arma(rng, 205, phi=0.9, mean=50.0)
        y = x + rng.normal(0.0, 2.0, x.size)
        common = {"order": (1, 0, 0), "train": 200, "horizon": 5, "steps_per_day": 200}
        plain.append(forecast_errors(rolling_forecast(y, **common), x)["l1"].iloc[0])
        fc = rolling_forecast(y, noise_variance=4.0, **common)
        aware.append(forecast_errors(fc, x)["l1"].iloc[0])
    return np.array(plain), np.array(aware)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("reps", "t_min"), [(20, 2.0), pytest.param(200, 4.0, marks=pytest.mark.slow)]
)
def test_noise_aware_forecasts_reduce_the_error_on_simulated_ar1_plus_noise(reps, t_min):
    """Seeded paired replications; one-sided paired t-test (t = 3.3 for 20 here)."""
    plain, aware = _paired_errors(reps, seed=1000)
    diff = plain - aware
    t_stat = diff.mean() / diff.std(ddof=1) * np.sqrt(diff.size)
    assert aware.mean() < 0.9 * plain.mean()  # 1.42 vs 1.81 for 20 here
    assert t_stat > t_min


def test_zero_noise_is_plain_arma():
    """R = 0 is the plain model in another parametrisation: the same forecasts, to 1e-4."""
    rng = np.random.default_rng(5)
    x = simulate_arma(rng, 500, phi=0.8, theta=0.3, mean=10.0)
    common = {"train": 400, "horizon": 20, "steps_per_day": 100}
    a = rolling_forecast(x, **common)
    b = rolling_forecast(x, noise_variance=0.0, **common)
    np.testing.assert_allclose(b["forecast"], a["forecast"], rtol=1e-4)
    np.testing.assert_allclose(b["upper"], a["upper"], rtol=1e-4)


def test_intervals_for_the_truth_and_for_a_release():
    """Release intervals add R to the forecast variance: w_rel² − w_truth² = (2 z)² R."""
    rng = np.random.default_rng(9)
    x = simulate_arma(rng, 250, phi=0.7, mean=5.0) + rng.normal(0.0, 1.5, 250)
    common = {"order": (1, 0, 0), "train": 200, "horizon": 10, "steps_per_day": 50}
    truth = rolling_forecast(x, noise_variance=2.25, level=0.9, **common)
    release = rolling_forecast(x, noise_variance=2.25, level=0.9, interval="release", **common)
    np.testing.assert_array_equal(truth["forecast"], release["forecast"])
    w_t = truth["upper"] - truth["lower"]
    w_r = release["upper"] - release["lower"]
    np.testing.assert_allclose(w_r**2 - w_t**2, (2 * ndtri(0.95)) ** 2 * 2.25, rtol=1e-8)
    assert (w_t > 0).all()


def test_laplace_noise_variance_is_the_release_variance():
    assert laplace_noise_variance(1.0) == WEventLaplace(epsilon=1.0, w=48, delta=1.0).noise.variance
    assert laplace_noise_variance(0.1, w=48, alpha=2.0) == pytest.approx(
        2 * 960.0**2, rel=1e-4
    )  # + lattice rounding
    with pytest.raises(ParameterError, match="'epsilon' parameter of laplace_noise_variance"):
        laplace_noise_variance(0.0)


@pytest.mark.statistical
def test_estimated_noise_variance_of_release_laplace_matches_the_formula():
    """17,520 draws: the sample variance of Laplace is within ~2 % (SE), allow 8 %."""
    got = estimate_noise_variance(
        lambda s: dpstream.release_laplace(s, alpha=1.0, epsilon=1.0, seed=4), level=5000.0
    )
    assert got == pytest.approx(laplace_noise_variance(1.0), rel=0.08)
    half = estimate_noise_variance(
        lambda s: dpstream.release_laplace(s, alpha=1.0, epsilon=2.0, seed=4), level=5000.0
    )
    assert half == pytest.approx(got / 4, rel=0.08)  # scale ∝ 1/ε, variance ∝ 1/ε²


def test_estimate_noise_variance_sees_only_the_public_stream():
    seen = []

    def release(series: pd.Series) -> pd.DataFrame:
        seen.append(series)
        return pd.DataFrame({"public": series + 3.0})

    assert estimate_noise_variance(release, level=10.0, periods=2) == pytest.approx(9.0)
    assert len(seen[0]) == 96 and (seen[0] == 10.0).all()
    assert seen[0].index[0] == pd.Timestamp("2016-01-04") and seen[0].index.freqstr == "30min"


def test_estimate_noise_variance_bad_input():
    with pytest.raises(ParameterError, match="must be a callable"):
        estimate_noise_variance(3.0, level=1.0)
    with pytest.raises(ParameterError, match="'level'"):
        estimate_noise_variance(lambda s: s, level=-1.0)
    with pytest.raises(DomainError, match="must return 96 finite values"):
        estimate_noise_variance(lambda s: s.iloc[:10], level=1.0, periods=2)
    with pytest.raises(DomainError, match="finite"):
        estimate_noise_variance(lambda s: s * np.nan, level=1.0, periods=2)
