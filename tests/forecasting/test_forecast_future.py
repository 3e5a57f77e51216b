"""Issue 28: forecasting.forecast past the end of the series, many series, intervals, exog.

Small clocks keep it fast: an integer index with a "day" of 12 steps (weeks of 84) for the
model tests; half-hours only where the time stamps are the point. Simulations use numpy noise
(they release nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting import FORECAST_MODELS, Forecast, forecast
from forecasting._harmonic import _ar1_remainder
from mechanisms import DomainError, ParameterError

DAY = 12


def _load(days: int, *, seed: int, day: int = DAY, weekend: float = 25.0, ar: float = 0.6):
    """Daily cycle, a weekend dip (a weekly season) and AR(1) noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * day)
    dow = (t // day) % 7
    cycle = 100 + 30 * np.sin(2 * np.pi * t / day) + 10 * np.cos(4 * np.pi * t / day)
    e = np.zeros(t.size)
    shocks = rng.normal(0.0, 2.0, t.size)
    for i in range(1, t.size):
        e[i] = ar * e[i - 1] + shocks[i]
    return cycle - weekend * (dow >= 5) + e


def _int_series(values: np.ndarray, name: str = "y") -> pd.Series:
    return pd.Series(values, index=pd.RangeIndex(values.size), name=name)


def test_forecast_starts_after_the_end_of_a_half_hourly_series():
    idx = pd.date_range("2016-01-04", periods=21 * 48, freq="30min", name="time")
    y = pd.Series(_load(21, seed=1, day=48), index=idx, name="load")
    fc = forecast(y, 48, level=(0.8, 0.95))
    assert isinstance(fc, Forecast)
    assert fc.mean.index[0] == pd.Timestamp("2016-01-25 00:00")
    assert fc.mean.index[-1] == pd.Timestamp("2016-01-25 23:30")
    frame = fc.to_frame()
    assert list(frame.columns) == ["unique_id", "ds", "mean", "lo-80", "hi-80", "lo-95", "hi-95"]
    assert (frame["unique_id"] == "load").all() and len(frame) == 48
    assert (frame["lo-95"] < frame["lo-80"]).all() and (frame["lo-80"] < frame["mean"]).all()
    assert (frame["mean"] < frame["hi-80"]).all() and (frame["hi-80"] < frame["hi-95"]).all()
    iv = fc.interval(0.9)
    assert list(iv.columns) == ["lower", "upper"] and (iv["lower"] < iv["upper"]).all()
    text = fc.summary()
    assert "Forecast" in text and "48" in text and max(map(len, text.splitlines())) <= 64


def test_weekly_season_is_learnt():
    """The weekend dip: the weekly models forecast it, the daily profile cannot."""
    y = _int_series(_load(35, seed=2))
    hist = y.iloc[: 33 * DAY]  # day 33 is a Saturday (day 0 a Monday)
    weekly = forecast(hist, 2 * DAY, model="harmonic", steps_per_day=DAY)
    daily = forecast(hist, 2 * DAY, model="profile", steps_per_day=DAY)
    truth = y.to_numpy()[33 * DAY :]  # Saturday and Sunday
    err_w = np.mean(np.abs(weekly.mean.to_numpy() - truth))
    err_d = np.mean(np.abs(daily.mean.to_numpy() - truth))
    assert err_w < 0.5 * err_d


@pytest.mark.parametrize("model", [m for m in FORECAST_MODELS if m not in ("mstl", "sarimax")])
def test_every_fast_model_forecasts_the_seasons(model):
    y = _int_series(_load(30, seed=3))
    fc = forecast(y.iloc[: 29 * DAY], DAY, model=model, steps_per_day=DAY)
    truth = y.to_numpy()[29 * DAY :]
    assert np.isfinite(fc.mean.to_numpy()).all() and (fc.std.to_numpy() > 0).all()
    assert np.mean(np.abs(fc.mean.to_numpy() - truth)) < 15.0  # the daily swing is ±40
    expected = fc.models["y"]
    regressions = ("harmonic", "log-harmonic", "harmonic-mix")
    assert expected == model or (model == "auto" and expected in regressions)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mstl", "sarimax"])
def test_statsmodels_models_forecast_the_seasons(model):
    y = _int_series(_load(30, seed=3))
    fc = forecast(y.iloc[: 29 * DAY], DAY, model=model, steps_per_day=DAY)
    truth = y.to_numpy()[29 * DAY :]
    assert np.mean(np.abs(fc.mean.to_numpy() - truth)) < 15.0


def test_wide_and_long_frames_give_the_same_forecasts():
    a, b = _load(21, seed=4), _load(21, seed=5) * 2
    idx = pd.date_range("2016-01-04", periods=a.size, freq="2h")  # 12 steps a day
    wide = pd.DataFrame({"a": a, "b": b}, index=idx)
    long = wide.rename_axis("ds").reset_index().melt("ds", var_name="unique_id", value_name="y")
    f_wide = forecast(wide, DAY)
    f_long = forecast(long, DAY)
    pd.testing.assert_frame_equal(f_wide.mean, f_long.mean, check_names=False)
    one = forecast(wide["b"], DAY)
    np.testing.assert_allclose(one.mean.to_numpy(), f_wide.mean["b"].to_numpy(), rtol=1e-9)
    out = f_long.to_frame()
    assert sorted(out["unique_id"].unique()) == ["a", "b"] and len(out) == 2 * DAY


def test_exogenous_regressor_is_used():
    """A synthetic temperature drives the load: with it the error is far smaller."""
    rng = np.random.default_rng(6)
    n = 30 * DAY
    temp = np.cumsum(rng.normal(0, 1.0, n))  # a wandering weather series
    y = _load(30, seed=6) + 4.0 * temp
    hist, h = 29 * DAY, DAY
    z = pd.DataFrame({"temp": temp})
    series = _int_series(y)
    with_z = forecast(
        series.iloc[:hist], h, model="harmonic", exog=z.iloc[:hist], future_exog=z.iloc[hist:],
        steps_per_day=DAY,
    )  # fmt: skip
    without = forecast(series.iloc[:hist], h, model="harmonic", steps_per_day=DAY)
    truth = y[hist:]
    err_z = np.mean(np.abs(with_z.mean.to_numpy() - truth))
    err_0 = np.mean(np.abs(without.mean.to_numpy() - truth))
    assert err_z < 0.5 * err_0
    # The same regressor through the models that remove its effect first.
    prof = forecast(
        series.iloc[:hist], h, model="weekly-profile", exog=temp[:hist], future_exog=temp[hist:],
        steps_per_day=DAY,
    )  # fmt: skip
    assert np.mean(np.abs(prof.mean.to_numpy() - truth)) < err_0


def test_noise_aware_ar1_undoes_the_attenuation():
    """White noise of known R attenuates the lag-1 autocorrelation; subtracting R restores φ."""
    rng = np.random.default_rng(7)
    n, phi = 20_000, 0.8
    u = np.zeros(n)
    for i in range(1, n):
        u[i] = phi * u[i - 1] + rng.normal()
    r = 1.0  # var(u) = 1 / (1 − φ²) ≈ 2.78
    y = (u + rng.normal(0, np.sqrt(r), n))[:, None]
    # Forecast of u_{n+h} from the filtered state decays like φ^h with the corrected φ.
    f = _ar1_remainder(y, 3, np.array([r]))[:, 0]
    assert f[1] / f[0] == pytest.approx(phi, abs=0.04)
    g = _ar1_remainder(y, 3, np.zeros(1))[:, 0]
    assert g[1] / g[0] < phi - 0.1  # attenuated: φ var(u) / (var(u) + R) ≈ 0.59


def test_intervals_for_the_truth_cover_it():
    """White release noise (noise="white"): 95 % intervals for the truth cover ≈ 95 %."""
    hits, total = 0, 0
    r = 36.0
    for seed in range(12):
        x = _load(30, seed=100 + seed)
        rng = np.random.default_rng(200 + seed)
        y = _int_series(x + rng.normal(0, np.sqrt(r), x.size))
        fc = forecast(
            y.iloc[: 29 * DAY], DAY, model="harmonic", level=0.95, noise_variance=r,
            noise="white", steps_per_day=DAY,
        )  # fmt: skip
        assert fc.target == "truth"
        iv = fc.interval(0.95)
        truth = x[29 * DAY :]
        hits += int(((iv["lower"] <= truth) & (truth <= iv["upper"])).sum())
        total += truth.size
        plain = forecast(y.iloc[: 29 * DAY], DAY, model="harmonic", steps_per_day=DAY)
        assert (fc.std.to_numpy() < plain.std.to_numpy()).all()  # R removed
        corr = forecast(
            y.iloc[: 29 * DAY], DAY, model="harmonic", noise_variance=r, steps_per_day=DAY
        )
        assert (corr.std.to_numpy() > plain.std.to_numpy()).all()  # R added (posterior)
    assert 0.85 <= hits / total <= 0.995


def test_noise_variance_per_step_and_per_series():
    a, b = _load(21, seed=8), _load(21, seed=9)
    wide = pd.DataFrame({"a": a, "b": b})
    per_step = pd.Series(np.linspace(1.0, 9.0, a.size), index=wide.index)
    f1 = forecast(wide, DAY, noise_variance=per_step, steps_per_day=DAY)
    per_series = pd.Series({"a": 4.0, "b": 9.0})
    f2 = forecast(wide, DAY, noise_variance=per_series, steps_per_day=DAY)
    f3 = forecast(wide, DAY, noise_variance={"a": 4.0, "b": 9.0}, steps_per_day=DAY)
    pd.testing.assert_frame_equal(f2.std, f3.std)
    assert f1.target == f2.target == "truth"
    with pytest.raises(ParameterError, match="'noise_variance'"):
        forecast(wide, DAY, noise_variance=-1.0, steps_per_day=DAY)
    with pytest.raises(ParameterError, match="'noise_variance'"):
        forecast(wide, DAY, noise_variance={"a": 1.0}, steps_per_day=DAY)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"horizon": 0}, ParameterError, "'horizon'"),
        ({"model": "prophet"}, ParameterError, "'model'"),
        ({"level": 1.5}, ParameterError, "'level'"),
        ({"level": ()}, ParameterError, "'level'"),
        ({"noise": "pink"}, ParameterError, "'noise'"),
        ({"exog": np.zeros(21 * DAY)}, ParameterError, "'exog' and 'future_exog'"),
        ({"exog": np.zeros(5), "future_exog": np.zeros(DAY)}, ParameterError, "one row per"),
        ({"hierarchy": {"t": ["y", "z"]}}, ParameterError, "'hierarchy'"),
        ({"history": "loads.csv"}, ParameterError, "'history'"),
    ],
)
def test_bad_parameters_are_refused(kwargs, error, match):
    args = {"history": _int_series(_load(21, seed=10)), "horizon": DAY, "steps_per_day": DAY}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        forecast(**args)


def test_bad_histories_are_refused():
    y = _int_series(_load(21, seed=11))
    with pytest.raises(DomainError, match="at least"):
        forecast(y.iloc[: 10 * DAY], DAY, model="harmonic", steps_per_day=DAY)
    bad = y.copy()
    bad.iloc[5] = np.nan
    with pytest.raises(DomainError, match="finite"):
        forecast(bad, DAY, steps_per_day=DAY)
    long = pd.DataFrame({"unique_id": ["a", "a"], "ds": [0, 0], "y": [1.0, 2.0]})
    with pytest.raises(DomainError, match="repeats"):
        forecast(long, DAY)
    shuffled = y.iloc[::-1]
    with pytest.raises(DomainError, match="increasing"):
        forecast(shuffled, DAY, steps_per_day=DAY)


def test_dask_client_gives_the_same_forecasts():
    distributed = pytest.importorskip("distributed")
    wide = pd.DataFrame({f"s{i}": _load(21, seed=20 + i) for i in range(4)})
    local = forecast(wide, DAY, steps_per_day=DAY)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=":0") as client:  # fmt: skip
        remote = forecast(wide, DAY, steps_per_day=DAY, client=client)
    pd.testing.assert_frame_equal(local.mean, remote.mean)
    pd.testing.assert_frame_equal(local.std, remote.std)
