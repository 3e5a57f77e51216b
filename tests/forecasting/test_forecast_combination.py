"""Issue 28: the forecast combination ``harmonic-mix`` and its backtest without extra fits."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting import forecast
from forecasting._forecast import _backtest
from forecasting._multi import AUTO_CANDIDATES, COMBINATIONS, point_forecast

DAY = 12


def _load(days: int, seed: int) -> np.ndarray:
    """A multiplicative daily season on a drifting level, a weekend dip and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY)
    level = 100 + 0.3 * t / DAY
    cycle = 1 + 0.4 * np.sin(2 * np.pi * t / DAY) + 0.1 * np.cos(4 * np.pi * t / DAY)
    weekend = 1 - 0.2 * (((t // DAY) % 7) >= 5)
    return level * cycle * weekend + rng.normal(0.0, 3.0, t.size)


def test_harmonic_mix_is_the_mean_of_its_members():
    y = pd.Series(_load(30, seed=1), name="y")
    args = {"steps_per_day": DAY}
    mix = forecast(y, DAY, model="harmonic-mix", **args).mean.to_numpy()
    parts = [
        forecast(y, DAY, model=k, **args).mean.to_numpy() for k in COMBINATIONS["harmonic-mix"]
    ]
    np.testing.assert_allclose(mix, np.mean(parts, axis=0), rtol=1e-12)
    assert "harmonic-mix" in AUTO_CANDIDATES


def test_combination_backtest_is_the_mean_of_its_members_errors():
    """The shortcut (mean of the members' errors) equals refitting the combination."""
    values = np.column_stack([_load(30, seed=2), _load(30, seed=3)])
    noise = np.full(values.shape, 4.0)
    n = values.shape[0]
    bounds = [n - DAY - j * DAY for j in range(6)]
    r = noise.mean(axis=0)
    shortcut = _backtest(values, noise, list(AUTO_CANDIDATES), bounds, DAY, DAY, None, r)
    direct = _backtest(values, noise, ["harmonic-mix"], bounds, DAY, DAY, None, r)
    np.testing.assert_allclose(shortcut["harmonic-mix"], direct["harmonic-mix"], rtol=1e-9)
    for k in COMBINATIONS["harmonic-mix"]:  # and it is not a copy of one member
        assert not np.allclose(shortcut["harmonic-mix"], shortcut[k])


def test_the_mean_is_never_worse_than_the_worse_member():
    """|mean of two errors| <= the larger |error|, step by step ([BG69]'s premise)."""
    values = np.column_stack([_load(30 + d, seed=4 + d)[: 30 * DAY] for d in range(3)])
    train, truth = values[: 29 * DAY], values[29 * DAY :]
    members = [
        point_forecast(k, train, DAY, DAY, None, None, None) for k in ("log-harmonic", "harmonic")
    ]
    mix = point_forecast("harmonic-mix", train, DAY, DAY, None, None, None)
    worse = np.maximum(*(np.abs(p - truth) for p in members))
    assert (np.abs(mix - truth) <= worse + 1e-9).all()
    assert np.mean(np.abs(mix - truth)) <= max(np.mean(np.abs(p - truth)) for p in members)
