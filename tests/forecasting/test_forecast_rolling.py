"""Rolling-origin forecasts: origins on day boundaries, alignment with time stamps, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import half_hours, simulate_arma
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.tsa.arima.model import ARIMA

from forecasting import INTERVALS, forecast_origins, rolling_forecast
from forecasting._arma import fit_model
from mechanisms import DomainError, ParameterError

TRAIN = 96  # two days of half-hours: small fits keep this file fast
H = 48


@pytest.fixture(scope="module")
def load():
    """Five days of a daily-cycle load plus ARMA noise, from 2016-03-01 13:00 (not midnight)."""
    rng = np.random.default_rng(11)
    t = np.arange(5 * 48)
    x = 500 + 80 * np.sin(2 * np.pi * t / 48) + simulate_arma(rng, t.size, phi=0.8, sigma=5.0)
    return half_hours(x, start="2016-03-01 13:00")


def test_origins_are_the_day_boundaries_after_train_steps(load):
    out = rolling_forecast(load, train=TRAIN, horizon=H)
    origins = pd.DatetimeIndex(out["origin"].unique())
    # Midnights at positions 22, 70, 118, 166, 214; >= 96 and 48 steps left: 118 and 166.
    assert list(origins) == [pd.Timestamp("2016-03-04"), pd.Timestamp("2016-03-05")]
    assert (origins == origins.normalize()).all()
    assert list(forecast_origins(load, train=TRAIN, horizon=H)) == list(origins)
    assert len(out) == 2 * H and list(out.columns) == [
        "origin", "step", "time", "forecast", "lower", "upper", "converged", "model"
    ]  # fmt: skip
    assert (out["model"] == "arma").all()


def test_forecasts_align_with_their_time_stamps(load):
    out = rolling_forecast(load, train=TRAIN, horizon=H, level=0.8)
    values = load.to_numpy()
    warm: dict = {}
    for origin, one in out.groupby("origin"):
        o = load.index.get_loc(origin)
        assert list(one["time"]) == list(load.index[o : o + H])
        assert list(one["step"]) == list(range(1, H + 1))
        assert (one["time"] - origin == pd.to_timedelta(np.arange(H) * 30, unit="min")).all()
        # statsmodels' forecast at the parameters fitted on exactly the 96 steps before o
        # (same warm start as the rolling fit), and never a worse fit than statsmodels' own.
        fit, results = fit_model(values[o - TRAIN : o], (1, 0, 1), None, warm)
        np.testing.assert_allclose(one["forecast"], results.forecast(H), rtol=1e-12)
        default = ARIMA(values[o - TRAIN : o], order=(1, 0, 1)).fit()
        assert fit.loglike >= default.llf - 1e-6 * abs(default.llf)
        np.testing.assert_allclose(one["forecast"], default.forecast(H), rtol=1e-4)
        assert (one["lower"] < one["forecast"]).all() and (one["forecast"] < one["upper"]).all()
    # The same values on another clock: same forecasts, times shifted by exactly one day.
    shifted = pd.Series(values, index=load.index + pd.Timedelta(days=1))
    moved = rolling_forecast(shifted, train=TRAIN, horizon=H, level=0.8)
    np.testing.assert_array_equal(moved["forecast"], out["forecast"])
    assert (moved["time"] - out["time"] == pd.Timedelta(days=1)).all()


def test_a_level_shift_is_forecast_at_the_right_times():
    """Forecasts follow the *last* observations: a jump just before an origin shows up there."""
    x = np.r_[np.full(120, 100.0), np.full(24 + 96, 300.0)]  # jump 12 h before Jan 4
    x = x + np.random.default_rng(2).normal(0, 1, x.size)
    out = rolling_forecast(half_hours(x), train=3 * 48, horizon=12)
    first = out[out["origin"] == out["origin"].iloc[0]]
    assert first["origin"].iloc[0] == pd.Timestamp("2016-01-04")
    assert first["forecast"].iloc[0] > 250  # continues at the new level, not the old mean


def test_days_counts_origins(load):
    assert rolling_forecast(load, train=TRAIN, horizon=H, days=1)["origin"].nunique() == 1
    with pytest.raises(DomainError, match="asks for 3 origins; the series allows 2"):
        rolling_forecast(load, train=TRAIN, horizon=H, days=3)


def test_integer_index_and_arrays():
    rng = np.random.default_rng(4)
    x = simulate_arma(rng, 100, phi=0.5, mean=20.0)
    out = rolling_forecast(x, train=40, horizon=10, steps_per_day=20)
    assert list(out["origin"].unique()) == [40, 60, 80]
    assert list(out["time"].iloc[:3]) == [40, 41, 42]
    labelled = pd.Series(x[5:], index=pd.RangeIndex(5, 100))  # labels 5..99
    out2 = rolling_forecast(labelled, train=40, horizon=10, steps_per_day=20)
    assert list(out2["origin"].unique()) == [60, 80]  # 40 has only 35 steps before it here


def test_time_zone_aware_index_uses_local_midnights():
    idx = pd.date_range("2016-03-01", periods=4 * 48, freq="30min", tz="Europe/Paris")
    y = pd.Series(np.random.default_rng(0).normal(100, 1, idx.size), index=idx)
    out = rolling_forecast(y, train=TRAIN, horizon=24)
    assert [t.hour for t in out["origin"].unique()] == [0, 0]
    assert str(out["time"].dt.tz) == "Europe/Paris"


def test_noise_variance_and_interval_are_recorded(load):
    out = rolling_forecast(load, train=TRAIN, horizon=6, days=1, noise_variance=25.0)
    meta = out.attrs["forecasting"]
    assert meta["model"] == "ARMA + noise" and meta["noise_variance"] == 25.0
    assert meta["interval"] == "truth" and INTERVALS == ("truth", "release")


@settings(max_examples=30, deadline=None)
@given(
    offset=st.integers(0, 47),
    days=st.integers(3, 9),
    train=st.integers(10, 150),
    horizon=st.integers(1, 100),
)
def test_origin_rule(offset, days, train, horizon):
    """Origins: every midnight t with t >= train and t + horizon <= n, one day apart."""
    n = days * 48
    idx = pd.date_range("2016-01-01", periods=n, freq="30min") + pd.Timedelta(minutes=30 * offset)
    y = pd.Series(1.0, index=idx)
    midnights = [p for p in range(n) if idx[p] == idx[p].normalize()]
    expected = [idx[p] for p in midnights if p >= train and p + horizon <= n]
    if not expected:
        with pytest.raises(DomainError):
            forecast_origins(y, train=train, horizon=horizon)
        return
    got = forecast_origins(y, train=train, horizon=horizon)
    assert list(got) == expected
    assert (got[1:] - got[:-1] == pd.Timedelta(days=1)).all()


# -- bad input ---------------------------------------------------------------------------------


def test_nan_gives_a_count_not_values(load):
    bad = load.copy()
    bad.iloc[[10, 20, 30]] = np.nan
    with pytest.raises(DomainError, match="3 entries are NaN or infinite") as info:
        rolling_forecast(bad, train=TRAIN)
    assert str(round(load.iloc[11], 1)) not in str(info.value)
    bad.iloc[10] = np.inf
    with pytest.raises(DomainError, match="finite numbers only"):
        rolling_forecast(bad, train=TRAIN)


def test_too_short_and_horizon_longer_than_the_data(load):
    with pytest.raises(DomainError, match=r"at least train \+ horizon = 96 \+ 200 = 296"):
        rolling_forecast(load, train=TRAIN, horizon=200)
    with pytest.raises(DomainError, match="horizon is longer than the data"):
        rolling_forecast(load.iloc[:100], train=TRAIN, horizon=H)
    with pytest.raises(DomainError, match="no day boundary"):
        rolling_forecast(load.iloc[:150], train=TRAIN, horizon=40)  # no midnight in [96, 110]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda s: s.iloc[::-1], "strictly increasing"),
        (lambda s: pd.concat([s.iloc[:10], s.iloc[9:]]), "strictly increasing"),
        (lambda s: s.drop(s.index[50]), "must be regular"),
        (lambda s: s.set_axis(s.index.astype(str)), "DatetimeIndex or integer"),
        (lambda s: s.set_axis(np.arange(len(s)) * 0.5), "DatetimeIndex or integer"),
        (lambda s: s.set_axis(np.arange(len(s)) * 2), "stride 1"),
        (
            lambda s: s.set_axis(pd.date_range("2016-01-01", periods=len(s), freq="7min")),
            "must divide one day",
        ),
        (lambda s: pd.DataFrame({"a": s, "b": s}), "one series"),
        (lambda s: np.c_[s.to_numpy(), s.to_numpy()], "one-dimensional"),
    ],
)
def test_bad_series(load, mutate, match):
    with pytest.raises(DomainError, match=match):
        rolling_forecast(mutate(load), train=TRAIN)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"train": 5}, "'train' parameter of rolling_forecast must be an int in \\[10, inf\\]"),
        ({"train": 1344.0}, "'train'"),
        ({"horizon": 0}, "'horizon'"),
        ({"days": 0}, "'days'"),
        ({"order": (1, 1, 1)}, "'order'"),
        ({"noise_variance": -1.0}, "'noise_variance'"),
        ({"noise_variance": float("nan")}, "'noise_variance'"),
        ({"level": 1.0}, "'level'"),
        ({"level": 0.0}, "'level'"),
        ({"interval": "both"}, "'interval'"),
        ({"steps_per_day": 0}, "'steps_per_day'"),
    ],
)
def test_bad_parameters(load, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        rolling_forecast(load, **{"train": TRAIN, **kwargs})
