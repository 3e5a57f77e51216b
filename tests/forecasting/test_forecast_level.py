"""The harmonic regression's smoothed daily level and its weighting by the noise of each step.

Simulations (numpy noise: they release nothing): a daily and weekly season whose level
shifts near the end, and a release whose every other step is much noisier than the rest.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecasting._harmonic import LEVEL_WARMUP, daily_level, effective_days, harmonic, step_variance

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


def _shrunk_release(seed: int, days: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth, release, stated R), 48 steps a day, of a release shrunk towards a prior that is
    the day before's release (OptStream's Algorithm 4 with a profile prior: y = λ z +
    (1 − λ) m): measured every 8th step, interpolated between, badly on two "ramps"."""
    rng = np.random.default_rng(seed)
    day, tau2 = 2 * DAY, 100.0  # tau2: the prior's stated variance
    t = np.arange((days + 1) * day)
    week = 2 * np.pi * t / (7 * day)
    season = 100.0 + 20.0 * np.sin(2 * np.pi * t / day) + 15.0 * np.cos(week)
    season += 10.0 * np.sin(week + 1.0)
    x = season + rng.normal(0.0, 1.0, t.size)
    step = t % day
    ramp = ((step > 8) & (step < 16)) | ((step > 32) & (step < 40))
    v = np.where(step % 8 == 0, 1.0, np.where(ramp, 5.0, 0.05) * tau2)  # measurement's
    lam = tau2 / (tau2 + v)  # weight of the day's measurement
    z = x + rng.normal(0.0, 1.0, t.size) * np.sqrt(v)
    y = z.copy()
    for d in range(1, days + 1):  # the prior: the day before, as released
        now, before = slice(d * day, (d + 1) * day), slice((d - 1) * day, d * day)
        y[now] = lam[now] * z[now] + (1.0 - lam[now]) * y[before]
    return x, y, lam * v  # R = λ v = (1 − λ) τ²


def test_weights_for_a_prior_shared_by_the_days_beat_the_per_step_inverse_variance():
    """A release shrunk towards the day before's: the weights of step_variance,
    1 / (R² / τ² + (σ² + R) / D), forecast the truth better than 1 / (σ² + R) and than none."""
    errs = {"new": [], "old": [], "none": []}
    day, days = 2 * DAY, 35
    for seed in range(6):
        x, y, r = _shrunk_release(30 + seed, days)
        hist, truth = y[: days * day, None], x[days * day :]
        r_hist = r[: days * day, None]
        new = harmonic(hist, day, day, noise_variance=r_hist.mean(0), noise_steps=r_hist)
        plain = harmonic(hist, day, day, noise_variance=r_hist.mean(0))
        with pytest.MonkeyPatch.context() as mp:  # the previous weights, 1 / (σ² + R_t)
            mp.setattr(
                "forecasting._harmonic.step_variance",
                lambda r_t, t, period, signal, days_eff: signal + r_t,
            )
            old = harmonic(hist, day, day, noise_variance=r_hist.mean(0), noise_steps=r_hist)
        for key, fc in (("new", new), ("old", old), ("none", plain)):
            errs[key].append(np.mean((fc[:, 0] - truth) ** 2))
    assert np.mean(errs["new"]) < 0.85 * np.mean(errs["old"])
    assert np.mean(errs["new"]) < 0.6 * np.mean(errs["none"])


def test_step_variance_is_flat_for_a_flat_noise_and_rises_with_the_prior_share():
    """Constant R: the same V at every step (no reweighting); within a day V rises faster than
    R (its square over the day's largest R), and D = (Σ w)² / Σ w² days."""
    t = np.arange(3 * DAY, dtype=np.float64)
    flat = step_variance(np.full(t.size, 4.0), t, DAY, 1.0, 10.0)
    assert np.allclose(flat, flat[0])
    r = np.tile(np.linspace(1.0, 100.0, DAY), 3)
    v = step_variance(r, t, DAY, 1.0, 10.0)
    assert v[DAY - 1] / v[0] > 2.0 * r[DAY - 1] / r[0]  # R² / τ² + (σ² + R) / D at both ends
    assert v[DAY - 1] == pytest.approx(100.0 + 101.0 / 10.0)
    assert effective_days(np.ones(4 * DAY), DAY) == pytest.approx(4.0)
    assert effective_days(np.r_[np.ones(DAY), np.zeros(3 * DAY)], DAY) == pytest.approx(1.0)


def test_auto_choice_weighs_the_measured_targets_most():
    """ "auto"'s backtest weights: mean 1, flat for a flat R, least where R is the day's most."""
    from forecasting._forecast import _choice_weights

    n, day = 10 * DAY, DAY
    flat = _choice_weights(np.full((n, 2), 3.0), [n - day, n - 2 * day], day, day)
    assert np.allclose(flat, 1.0)
    r = np.tile(np.linspace(1.0, 50.0, day), 10)[:, None]
    w = _choice_weights(r, [n - day, n - 2 * day, n - 3 * day], day, day)
    assert w.shape == (3, day, 1)
    assert w.mean() == pytest.approx(1.0)
    assert np.all(np.diff(w[0, :, 0]) < 0)  # R rises over the day: the weights fall
