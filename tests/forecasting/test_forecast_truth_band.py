"""Intervals for the truth from a forecast fitted on a release (forecasting._truth_band).

The release is simulated (numpy noise: a simulation, it releases nothing). In the *Berkson*
case the truth is the release plus an error independent of it, x = y + e (what a release
does that is a least-squares estimate with its error variances as weights, module notes):
the truth's forecast error has variance D + R, and the previous Minkowski band, √D + √R,
over-covers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtri

from forecasting import forecast
from forecasting._forecast import conformal_bounds
from forecasting._truth_band import conformal_probabilities, truth_bounds, truth_std
from mechanisms import ParameterError

DAY = 12


def _release(days: int, series: int, rng: np.random.Generator) -> np.ndarray:
    """(days·DAY, series): a daily cycle plus AR(1) noise, one column per series."""
    t = np.arange(days * DAY)
    cycle = 100 + 30 * np.sin(2 * np.pi * t / DAY) + 10 * np.cos(4 * np.pi * t / DAY)
    e = np.zeros((t.size, series))
    shocks = rng.normal(0.0, 2.0, (t.size, series))
    for i in range(1, t.size):
        e[i] = 0.6 * e[i - 1] + shocks[i]
    return cycle[:, None] + e


def _coverage(noise: str, draws: int = 8, series: int = 30, r: float = 7.0) -> float:
    """95 % coverage of the truth x = y + N(0, R) by bands fitted on y (Berkson)."""
    hits = total = 0
    for seed in range(draws):
        rng = np.random.default_rng(500 + seed)
        y = _release(30, series, rng)
        x = y + rng.normal(0.0, np.sqrt(r), y.shape)
        frame = pd.DataFrame(y[: 29 * DAY], columns=[f"s{j}" for j in range(series)])
        fc = forecast(
            frame, DAY, model="profile", level=0.95, noise_variance=r, noise=noise,
            steps_per_day=DAY,
        )  # fmt: skip
        iv = fc.interval(0.95)
        truth = x[29 * DAY :]
        inside = (iv["lower"].to_numpy() <= truth) & (truth <= iv["upper"].to_numpy())
        hits += int(inside.sum())
        total += inside.size
    return hits / total


def test_posterior_band_covers_a_berkson_truth_at_its_level():
    """8 × 30 series × 12 steps: 0.95 within a binomial window (the old bound over-covers)."""
    assert 0.93 <= _coverage("posterior") <= 0.97


def test_minkowski_band_over_covers_a_berkson_truth():
    """The previous default, √D + √R: about 0.99 here (R ≈ D), outside the window."""
    assert _coverage("correlated") > 0.975


def test_truth_std_adds_in_quadrature_or_by_minkowski():
    s, r = np.array([[3.0]]), np.array([[4.0]])
    assert truth_std(s, r, "posterior")[0, 0] == pytest.approx(5.0)
    assert truth_std(s, r, "correlated")[0, 0] == pytest.approx(7.0)
    y = pd.Series(_release(30, 1, np.random.default_rng(1))[:, 0])
    kw = {"model": "profile", "noise_variance": 9.0, "steps_per_day": DAY}
    post = forecast(y, DAY, **kw)
    mink = forecast(y, DAY, noise="correlated", **kw)
    np.testing.assert_allclose(post.std, np.hypot(post.scale[:, 0], 3.0))
    np.testing.assert_allclose(mink.std, mink.scale[:, 0] + 3.0)
    assert post.noise == "posterior" and mink.noise == "correlated"


def test_truth_bounds_without_noise_are_the_conformal_bounds():
    rng = np.random.default_rng(3)
    scores = rng.exponential(size=(200, 2)) - 1.0
    scale = rng.uniform(1, 2, (5, 2))
    lo, hi = truth_bounds(scores, scale, np.zeros((5, 2)), 0.9)
    q_lo, q_hi = conformal_bounds(scores, 0.9)
    np.testing.assert_allclose(lo, scale * q_lo)
    np.testing.assert_allclose(hi, scale * q_hi)


def test_truth_bounds_are_the_quantiles_of_the_sum():
    """Skewed scores plus Gaussian noise: the bounds against a large Monte Carlo of the sum."""
    rng = np.random.default_rng(4)
    scores = rng.exponential(size=(400, 1)) - 1.0
    scale, sd = np.array([[2.0]]), np.array([[1.5]])
    lo, hi = truth_bounds(scores, scale, sd, 0.95)
    p_lo, p_hi = conformal_probabilities(400, 0.95)
    draws = 2.0 * rng.choice(scores[:, 0], 400_000) + rng.normal(0.0, 1.5, 400_000)
    assert np.mean(draws <= lo[0, 0]) == pytest.approx(p_lo, abs=0.002)
    assert np.mean(draws <= hi[0, 0]) == pytest.approx(p_hi, abs=0.002)
    # Gaussian scores: the band tends to ± z √(s² + R)
    gauss = rng.standard_normal((20_000, 1))
    lo, hi = truth_bounds(gauss, scale, sd, 0.95)
    z = float(ndtri(0.975))
    assert hi[0, 0] == pytest.approx(z * np.hypot(2.0, 1.5), rel=0.03)
    assert lo[0, 0] == pytest.approx(-z * np.hypot(2.0, 1.5), rel=0.03)


def test_bad_noise_model_names_the_choices():
    y = pd.Series(_release(30, 1, np.random.default_rng(1))[:, 0])
    with pytest.raises(ParameterError, match="'noise'.*posterior"):
        forecast(y, DAY, noise="berkson", noise_variance=1.0, steps_per_day=DAY)
