"""Forecast errors: known answers, alignment by time stamp, the ratio to the real-data error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import half_hours, simulate_arma

from forecasting import error_ratio, forecast_errors, rolling_forecast
from mechanisms import DomainError, ParameterError


def _frame(origins, times, forecast, lower=None, upper=None):
    out = pd.DataFrame({"origin": origins, "time": times, "forecast": forecast})
    if lower is not None:
        out["lower"], out["upper"] = lower, upper
    return out


def test_known_answer():
    fc = _frame(
        [0, 0, 0, 3, 3, 3],
        [0, 1, 2, 3, 4, 5],
        [10.0, 12.0, 9.0, 5.0, 5.0, 5.0],
        lower=[9, 9, 9, 0, 0, 0],
        upper=[11, 11, 11, 5.5, 5.5, 5.5],
    )
    truth = pd.Series([10.0, 10.0, 10.0, 4.0, 6.0, 5.0, 99.0])
    out = forecast_errors(fc, truth)
    assert list(out.columns) == ["origin", "steps", "l1", "mape", "rmse", "bias", "coverage"]
    assert list(out["origin"]) == [0, 3] and list(out["steps"]) == [3, 3]
    np.testing.assert_allclose(out["l1"], [1.0, 2.0 / 3.0])  # (0 + 2 + 1)/3, (1 + 1 + 0)/3
    np.testing.assert_allclose(out["mape"], [10.0, 100 * (1 / 4 + 1 / 6) / 3])
    np.testing.assert_allclose(out["rmse"], [np.sqrt(5 / 3), np.sqrt(2 / 3)])
    np.testing.assert_allclose(out["bias"], [1 / 3, 0.0])
    np.testing.assert_allclose(out["coverage"], [1.0, 2 / 3])  # truth 6 > 5.5


def test_truth_is_matched_by_time_stamp_not_position():
    idx = pd.date_range("2016-01-01", periods=6, freq="30min")
    fc = _frame([idx[2]] * 2, idx[2:4], [1.0, 2.0])
    truth = pd.Series([0, 0, 1.0, 2.0, 0, 0], index=idx)
    assert forecast_errors(fc, truth)["l1"].iloc[0] == 0.0
    assert forecast_errors(fc, truth.iloc[::-1])["l1"].iloc[0] == 0.0  # order does not matter
    assert forecast_errors(fc, truth.shift(1))["l1"].iloc[0] == 1.0


def test_mape_skips_zero_truth():
    fc = _frame([0, 0, 5], [0, 1, 2], [1.0, 3.0, 1.0])
    out = forecast_errors(fc, [0.0, 2.0, 0.0])
    assert out["mape"].iloc[0] == 50.0 and np.isnan(out["mape"].iloc[1])
    assert "coverage" not in out


def test_errors_of_a_rolling_forecast():
    rng = np.random.default_rng(8)
    y = half_hours(simulate_arma(rng, 4 * 48, phi=0.9, mean=100.0))
    fc = rolling_forecast(y, train=96, horizon=48)
    out = forecast_errors(fc, y)
    assert len(out) == 2 and (out["steps"] == 48).all()
    first = fc[fc["origin"] == out["origin"].iloc[0]]
    manual = np.abs(first["forecast"].to_numpy() - y.iloc[96:144].to_numpy()).mean()
    assert out["l1"].iloc[0] == pytest.approx(manual, rel=1e-12)
    assert error_ratio(out, out) == 1.0


def test_error_ratio_uses_common_origins():
    a = pd.DataFrame({"origin": [1, 2, 3], "l1": [2.0, 4.0, 100.0], "mape": [1.0, 1.0, 1.0]})
    b = pd.DataFrame({"origin": [1, 2], "l1": [1.0, 2.0], "mape": [2.0, 2.0]})
    assert error_ratio(a, b) == 2.0
    assert error_ratio(a, b, metric="mape") == 0.5
    with pytest.raises(ParameterError, match="share none"):
        error_ratio(a, b.assign(origin=[7, 8]))
    with pytest.raises(ParameterError, match="columns \\['origin', 'rmse'\\]"):
        error_ratio(a, b, metric="rmse")


def test_bad_forecasts():
    with pytest.raises(ParameterError, match="columns \\['origin', 'time', 'forecast'\\]"):
        forecast_errors(pd.DataFrame({"time": [0], "forecast": [1.0]}), [1.0])
    with pytest.raises(ParameterError, match="Got list instead"):
        forecast_errors([1.0], [1.0])
    with pytest.raises(ParameterError, match="must not be empty"):
        forecast_errors(_frame([], [], []), [1.0])


def test_bad_truth():
    fc = _frame([0, 0], [0, 1], [1.0, 2.0])
    with pytest.raises(DomainError, match="1 of 2 are not in its index"):
        forecast_errors(fc, [1.0])
    with pytest.raises(DomainError, match="1 values are NaN") as info:
        forecast_errors(fc, [1.0, np.nan, 7.25])
    assert "7.25" not in str(info.value)
    with pytest.raises(DomainError, match="unique time stamps"):
        forecast_errors(fc, pd.Series([1.0, 2.0, 3.0], index=[0, 1, 1]))
    idx = pd.date_range("2016-01-01", periods=2, freq="30min")
    with pytest.raises(DomainError, match="2 of 2 are not in its index"):
        forecast_errors(fc, pd.Series([1.0, 2.0], index=idx))
