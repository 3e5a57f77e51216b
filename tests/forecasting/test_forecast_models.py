"""Issue 13 item 5: seasonal forecasters and "auto" in rolling_forecast.

Small clocks (a "day" of 12 steps on an integer index) keep the fits fast; the models and the
backtest do not depend on the day length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import half_hours, simulate_arma
from scipy.special import ndtri

from forecasting import MODELS, rolling_forecast
from forecasting._models import BACKTEST_PERIODS, auto_plan
from forecasting._seasonal import PROFILE_PERIODS, min_history
from mechanisms import ParameterError

DAY = 12
TRAIN = 16 * DAY


def _seasonal(days: int, *, seed: int, noise: float = 1.0) -> np.ndarray:
    """A daily cycle (12 steps) plus small AR(1) noise: what a load looks like."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY)
    cycle = 100.0 + 30.0 * np.sin(2 * np.pi * t / DAY) + 10.0 * np.cos(4 * np.pi * t / DAY)
    return cycle + simulate_arma(rng, t.size, phi=0.5, sigma=noise)


def _run(x, **kwargs):
    return rolling_forecast(x, train=TRAIN, horizon=DAY, steps_per_day=DAY, **kwargs)


def test_profile_is_the_mean_of_the_last_seven_days_with_its_in_window_error():
    x = _seasonal(20, seed=1)
    out = _run(x, model="profile", level=0.9)
    for origin, one in out.groupby("origin"):
        past = x[origin - PROFILE_PERIODS * DAY : origin].reshape(PROFILE_PERIODS, DAY)
        np.testing.assert_allclose(one["forecast"], past.mean(axis=0), rtol=1e-13)
        window = x[origin - TRAIN : origin]
        k = PROFILE_PERIODS * DAY
        rule = np.mean([window[k - j * DAY : TRAIN - j * DAY] for j in range(1, 8)], axis=0)
        sd = np.sqrt(np.mean((window[k:] - rule) ** 2))
        np.testing.assert_allclose(one["upper"] - one["forecast"], ndtri(0.95) * sd, rtol=1e-10)
    assert (out["model"] == "profile").all() and out["converged"].all()


@pytest.mark.parametrize("model", ["sarima", "holt-winters", "profile"])
def test_seasonal_models_beat_arma_on_a_daily_cycle(model):
    x = _seasonal(24, seed=2)
    truth = x
    errors = {}
    for name in ("arma", model):
        out = _run(x, model=name)
        pos = out["time"].to_numpy()
        errors[name] = np.mean(np.abs(out["forecast"].to_numpy() - truth[pos]))
    assert errors[model] < 0.5 * errors["arma"]


def test_sarima_and_holt_winters_intervals_cover_the_truth():
    x = _seasonal(40, seed=4)
    for model in ("sarima", "holt-winters"):
        out = _run(x, model=model, level=0.9)
        pos = out["time"].to_numpy()
        inside = (out["lower"] <= x[pos]) & (x[pos] <= out["upper"])
        assert 0.75 < inside.mean() <= 1.0, model


def test_auto_never_reads_the_evaluation_window():
    """Changing the day being forecast changes neither the choice nor the forecast."""
    x = _seasonal(22, seed=5)
    out = _run(x, model="auto", days=2)
    first = out["origin"].iloc[0]
    spoiled = x.copy()
    spoiled[first : first + DAY] = 1e4  # the first origin's evaluation window
    again = _run(spoiled, model="auto", days=2)
    one = out[out["origin"] == first]
    two = again[again["origin"] == first]
    np.testing.assert_array_equal(one["forecast"], two["forecast"])
    assert one["model"].iloc[0] == two["model"].iloc[0]
    # ... while the next origin, trained on it, does see it.
    nxt = out["origin"].iloc[-1]
    assert not np.allclose(
        out[out["origin"] == nxt]["forecast"], again[again["origin"] == nxt]["forecast"]
    )


def test_auto_picks_seasonal_models_on_a_cycle_and_arma_without_one():
    cycle = _run(_seasonal(24, seed=6), model="auto")
    assert (cycle.groupby("origin")["model"].first() != "arma").all()
    rng = np.random.default_rng(7)
    plain = simulate_arma(rng, 24 * DAY, phi=0.9, theta=0.3, mean=50.0, sigma=1.0)
    chosen = _run(plain, model="auto").groupby("origin")["model"].first()
    assert (chosen == "arma").mean() >= 0.5


def test_auto_records_its_backtest_and_matches_the_chosen_model():
    x = _seasonal(20, seed=8)
    out = _run(x, model="auto", days=2)
    meta = out.attrs["forecasting"]
    assert meta["model"] == "auto" and meta["period"] == DAY
    days, candidates = auto_plan(TRAIN, DAY, DAY)
    assert meta["auto"]["backtest_days"] == days == BACKTEST_PERIODS
    assert meta["auto"]["candidates"] == list(candidates) == [
        "arma", "sarima", "holt-winters", "profile"
    ]  # fmt: skip
    for origin, one in out.groupby("origin"):
        alone = _run(x[: origin + DAY], model=one["model"].iloc[0])
        alone = alone[alone["origin"] == origin]
        np.testing.assert_allclose(one["forecast"], alone["forecast"], rtol=1e-6)


def test_auto_with_a_short_window_keeps_the_models_that_fit():
    assert auto_plan(96, 48, 48) == (1, ("arma",))  # one backtest day of 48 steps: ARMA only
    days, names = auto_plan(1344, 48, 48)
    assert days == 7 and names == ("arma", "sarima", "holt-winters", "profile")
    assert "sarima" not in auto_plan(1344, 60, 48)[1]  # horizon > a day
    assert min_history("profile", 48) == 8 * 48


def test_noise_aware_intervals_for_the_truth_are_narrower():
    x = _seasonal(20, seed=9) + np.random.default_rng(10).normal(0.0, 3.0, 20 * DAY)
    for model in ("sarima", "holt-winters", "profile"):
        truth = _run(x, model=model, noise_variance=9.0, days=2)
        release = _run(x, model=model, noise_variance=9.0, days=2, interval="release")
        np.testing.assert_array_equal(truth["forecast"], release["forecast"])
        width_t = (truth["upper"] - truth["lower"]).to_numpy()
        width_r = (release["upper"] - release["lower"]).to_numpy()
        assert (width_t < width_r).all(), model
        assert truth.attrs["forecasting"]["model"] == f"{model} + noise"
        if model != "sarima":  # same fit: the truth's variance is the release's minus R
            z = ndtri(0.975)
            np.testing.assert_allclose((width_r / 2 / z) ** 2 - (width_t / 2 / z) ** 2, 9.0)


def test_datetime_index_uses_its_day_as_the_season():
    x = half_hours(np.tile(np.sin(2 * np.pi * np.arange(48) / 48) * 50 + 500, 12))
    out = rolling_forecast(x, model="profile", train=9 * 48)
    assert out.attrs["forecasting"]["period"] == 48
    np.testing.assert_allclose(out["forecast"], x.iloc[:48].to_numpy()[out["step"] - 1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "ets"}, "'model' parameter of rolling_forecast must be one of"),
        ({"model": None}, "'model' parameter of rolling_forecast must be one of"),
        ({"model": "sarima", "train": 2 * DAY}, "'train' parameter .* at least 34 steps"),
        ({"model": "profile", "train": 7 * DAY}, "'train' parameter .* at least 96 steps"),
        ({"model": "holt-winters", "train": DAY + 5}, "'train' parameter .* at least 24 steps"),
        ({"model": "sarima", "horizon": DAY + 1}, "'horizon' parameter .* at most one day"),
    ],
)
def test_bad_model_settings(kwargs, match):
    x = pd.Series(_seasonal(20, seed=11))
    settings = {"train": TRAIN, "horizon": DAY, "steps_per_day": DAY, **kwargs}
    with pytest.raises(ParameterError, match=match):
        rolling_forecast(x, **settings)


def test_models_are_listed():
    assert MODELS == ("arma", "sarima", "holt-winters", "profile", "auto")
