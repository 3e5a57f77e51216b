"""The harmonic regression's smoothed daily level and its weighting by the noise of each step.

Simulations (numpy noise: they release nothing): a daily and weekly season whose level
shifts near the end, and a release whose every other step is much noisier than the rest.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecasting._harmonic import LEVEL_WARMUP, daily_level, harmonic

DAY = 24


def _season(days: int) -> np.ndarray:
    t = np.arange(days * DAY)
    return 100.0 + 20.0 * np.sin(2 * np.pi * t / DAY) + 8.0 * np.cos(2 * np.pi * t / (7 * DAY))


def test_the_level_follows_a_recent_shift():
    """Load up 15 % for the last 5 days: with the level step the next day is forecast near it."""
    rng = np.random.default_rng(3)
    days = 42
    x = _season(days + 1)
    x[(days - 5) * DAY :] *= 1.15
    y = (x + rng.normal(0.0, 2.0, x.size))[:, None]
    hist, truth = y[: days * DAY], x[days * DAY :]
    with_level = harmonic(hist, DAY, DAY)[:, 0]
    without = harmonic(hist, DAY, DAY, level=False)[:, 0]
    err_with = np.mean(np.abs(with_level - truth))
    err_without = np.mean(np.abs(without - truth))
    assert err_with < 0.5 * err_without


def test_the_level_ignores_noise_around_a_steady_season():
    """No shift: the chosen level is small against the noise of one step."""
    rng = np.random.default_rng(4)
    sd = 5.0
    resid = rng.normal(0.0, sd, size=(40 * DAY, 6))
    level = daily_level(resid, DAY)
    assert level.shape == (6,)
    # a = 1 would give the last day's mean, sd / √24 ≈ 1; the smoothing keeps far less
    assert np.all(np.abs(level) < 0.6 * sd / np.sqrt(DAY))


def test_the_level_needs_its_warm_up_days():
    """Too few whole days for the one-day-ahead errors: no level (zeros)."""
    resid = np.full((LEVEL_WARMUP * DAY, 2), 3.0)
    assert np.array_equal(daily_level(resid, DAY), np.zeros(2))


def test_known_noise_per_step_weighs_the_regression():
    """Every other step 20x noisier (known R_t): weighted least squares forecasts better."""
    errs = {"gls": [], "ols": []}
    for seed in range(4):
        rng = np.random.default_rng(10 + seed)
        days = 28
        x = _season(days + 1)
        r_t = np.where(np.arange(x.size) % 2 == 0, 1.0, 400.0)
        y = (x + rng.normal(0.0, 1.0, x.size) * np.sqrt(r_t))[:, None]
        hist, truth = y[: days * DAY], x[days * DAY :]
        r_hist = r_t[: days * DAY, None]
        gls = harmonic(hist, DAY, DAY, noise_variance=r_hist.mean(0), noise_steps=r_hist)
        ols = harmonic(hist, DAY, DAY, noise_variance=r_hist.mean(0))
        errs["gls"].append(np.mean((gls[:, 0] - truth) ** 2))
        errs["ols"].append(np.mean((ols[:, 0] - truth) ** 2))
    assert np.mean(errs["gls"]) < 0.5 * np.mean(errs["ols"])


def test_noise_steps_of_zero_change_nothing():
    """R_t = 0 everywhere is the unweighted fit (no series is reweighted)."""
    y = (_season(30) + np.random.default_rng(5).normal(0.0, 1.0, 30 * DAY))[:, None]
    a = harmonic(y, DAY, DAY, noise_steps=np.zeros_like(y))
    b = harmonic(y, DAY, DAY)
    assert a == pytest.approx(b, rel=0, abs=1e-9)
