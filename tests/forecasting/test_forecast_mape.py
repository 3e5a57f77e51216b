"""Issue 28: spiky loads. The MAPE-optimal profile, "auto" by percentage error, conformal bands.

Small clocks (a "day" of 12 steps) and numpy simulations (they release nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import forecast
from forecasting._forecast import conformal_bounds
from forecasting._multi import relative_median

DAY = 12


def _spiky(days: int, *, seed: int, day: int = DAY) -> np.ndarray:
    """A household: a low base load, appliances switching on at random times (large spikes)."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * day)
    base = 120 + 20 * np.sin(2 * np.pi * t / day)
    busy = np.isin(t % day, [3, 4, 8, 9, 10])  # the hours when spikes are likely
    spikes = rng.random(t.size) < np.where(busy, 0.5, 0.1)
    return base * rng.lognormal(0.0, 0.1, t.size) + spikes * rng.uniform(400, 1500, t.size)


def _smooth(days: int, *, seed: int, day: int = DAY) -> np.ndarray:
    """A regional load: daily and weekly seasons (a weekend dip) and small AR(1) noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * day)
    e = np.zeros(t.size)
    for i in range(1, t.size):
        e[i] = 0.6 * e[i - 1] + rng.normal(0.0, 2.0)
    weekend = ((t // day) % 7) >= 5
    return 100 + 30 * np.sin(2 * np.pi * t / day) - 25 * weekend + e


def _series(values: np.ndarray) -> pd.Series:
    return pd.Series(values, index=pd.RangeIndex(values.size), name="y")


def _mape(forecasts: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(forecasts - truth) / truth))


def test_relative_median_minimises_the_empirical_mape():
    rng = np.random.default_rng(0)
    samples = rng.lognormal(5.0, 1.0, size=(9, 4))
    point = relative_median(samples)
    grid = np.linspace(samples.min(), samples.max(), 20001)
    for j in range(samples.shape[1]):
        loss = np.abs(grid[:, None] - samples[None, :, j]) / samples[None, :, j]
        best = loss.sum(axis=1).min()
        mine = np.sum(np.abs(point[j] - samples[:, j]) / samples[:, j])
        assert mine <= best + 1e-12  # no point of the grid does better
        assert point[j] in samples[:, j]  # a sample (the loss is piecewise linear)
        assert point[j] <= np.median(samples[:, j])  # 1/y weights pull it down


def test_relative_median_known_answer():
    # weights 1/x: 1, 1/2, 1/4, 1/8; half of the total (15/16) is reached at x = 1
    assert relative_median(np.array([[8.0], [1.0], [4.0], [2.0]]))[0] == 1.0
    # equal weights pass half only at the middle sample of three
    assert relative_median(np.array([[5.0], [5.0], [5.0]]))[0] == 5.0


def test_mape_profile_beats_the_mean_models_on_a_spiky_load():
    errs = {"mape-profile": [], "profile": [], "harmonic": []}
    for seed in range(4):
        y = _spiky(30, seed=seed)
        hist, truth = _series(y[: 29 * DAY]), y[29 * DAY :]
        for model in errs:
            fc = forecast(hist, DAY, model=model, steps_per_day=DAY)
            errs[model].append(_mape(fc.mean.to_numpy(), truth))
    mean = {k: np.mean(v) for k, v in errs.items()}
    assert mean["mape-profile"] < 0.6 * min(mean["profile"], mean["harmonic"])


def test_auto_chooses_by_percentage_error_inside_the_history():
    spiky = [forecast(_series(_spiky(29, seed=s)), DAY, steps_per_day=DAY) for s in range(3)]
    assert all(fc.models["y"] == "mape-profile" for fc in spiky)
    smooth = [forecast(_series(_smooth(29, seed=s)), DAY, steps_per_day=DAY) for s in range(3)]
    regressions = ("harmonic", "log-harmonic", "harmonic-mix")  # not the profile
    assert all(fc.models["y"] in regressions for fc in smooth)
    # only the history is read: a different future leaves the forecast unchanged
    y = _spiky(31, seed=7)
    a = forecast(_series(y[: 29 * DAY]), DAY, steps_per_day=DAY)
    y[29 * DAY :] *= 3.0
    b = forecast(_series(y[: 29 * DAY]), DAY, steps_per_day=DAY)
    np.testing.assert_array_equal(a.mean.to_numpy(), b.mean.to_numpy())


def test_conformal_bounds_are_order_statistics_with_the_finite_sample_correction():
    scores = np.arange(1.0, 40.0)[:, None]  # N = 39: (N + 1) · 0.975 = 39, (N + 1) · 0.025 = 1
    lo, hi = conformal_bounds(scores, 0.95)
    assert (lo[0], hi[0]) == (1.0, 39.0)
    lo, hi = conformal_bounds(scores, 0.5)  # (N + 1) · 0.75 = 30, (N + 1) · 0.25 = 10
    assert (lo[0], hi[0]) == (10.0, 30.0)
    lo, hi = conformal_bounds(np.arange(1.0, 10.0)[:, None], 0.95)  # too few: the extremes
    assert (lo[0], hi[0]) == (1.0, 9.0)
    gauss = np.random.default_rng(1).standard_normal((200_000, 1))
    lo, hi = conformal_bounds(gauss, 0.95)
    assert abs(lo[0] + 1.96) < 0.03 and abs(hi[0] - 1.96) < 0.03


def test_intervals_follow_skewed_errors_and_cover_a_spiky_load():
    """Spikes go up only: the band reaches further above the forecast than below it."""
    hits, total = 0, 0
    for seed in range(12):
        y = _spiky(36, seed=100 + seed)
        hist, truth = _series(y[: 35 * DAY]), y[35 * DAY :]
        fc = forecast(hist, DAY, model="mape-profile", level=0.95, steps_per_day=DAY)
        iv = fc.interval(0.95)
        mean = fc.mean.to_numpy()
        above, below = iv["upper"].to_numpy() - mean, mean - iv["lower"].to_numpy()
        assert np.mean(above) > 3.0 * np.mean(below)
        hits += int(((iv["lower"] <= truth) & (truth <= iv["upper"])).sum())
        total += truth.size
        narrow = fc.interval(0.8)
        assert (narrow["upper"] <= iv["upper"]).all() and (narrow["lower"] >= iv["lower"]).all()
    assert 0.88 <= hits / total <= 0.995


def test_known_noise_widens_both_sides_of_the_conformal_band():
    y = _series(_spiky(30, seed=3))
    plain = forecast(y, DAY, model="mape-profile", steps_per_day=DAY).interval(0.95)
    noisy = forecast(
        y, DAY, model="mape-profile", noise_variance=400.0, noise="correlated",
        steps_per_day=DAY,
    ).interval(0.95)  # fmt: skip
    # "correlated" (Minkowski): z·√R added on each side
    np.testing.assert_allclose(noisy["upper"] - plain["upper"], 1.959964 * 20.0, rtol=1e-5)
    np.testing.assert_allclose(plain["lower"] - noisy["lower"], 1.959964 * 20.0, rtol=1e-5)
    # "posterior" (default, the quantiles of the sum): wider on the whole, inside Minkowski's
    post = forecast(y, DAY, model="mape-profile", noise_variance=400.0, steps_per_day=DAY)
    band = post.interval(0.95)
    width = (band["upper"] - band["lower"]).mean()
    assert (plain["upper"] - plain["lower"]).mean() < width
    assert width < (noisy["upper"] - noisy["lower"]).mean()
    assert ((band["upper"] < noisy["upper"]) & (band["lower"] > noisy["lower"])).all()


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_to_frame_uses_the_conformal_bands(level):
    fc = forecast(_series(_spiky(30, seed=5)), DAY, level=level, steps_per_day=DAY)
    frame = fc.to_frame()
    iv = fc.interval(level)
    pct = f"{100 * level:g}"
    np.testing.assert_allclose(frame[f"lo-{pct}"], iv["lower"])
    np.testing.assert_allclose(frame[f"hi-{pct}"], iv["upper"])
