"""Figs. 5 and 6: what is drawn, and that the figures render to PNG without pyplot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _fc_helpers import half_hours, simulate_arma
from matplotlib.figure import Figure

from forecasting import plot_forecast, plot_forecast_errors, rolling_forecast
from mechanisms import DomainError, ParameterError


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(2)
    truth = half_hours(100 + simulate_arma(rng, 4 * 48, phi=0.9, sigma=2.0))
    released = truth + rng.normal(0, 5, truth.size)
    return truth, released, rolling_forecast(released, train=96, horizon=48)


def test_fig5_draws_history_truth_release_and_forecast(case, tmp_path):
    truth, released, fc = case
    origin = fc["origin"].iloc[-1]
    fig = plot_forecast(truth, fc, released=released, origin=origin, history=48, title="x")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:4] == ["real", "real (forecast day)", "released", "forecast"]
    real, day, rel, forecast = ax.get_lines()[:4]
    assert len(real.get_xdata()) == 48 and len(rel.get_xdata()) == 48
    np.testing.assert_array_equal(forecast.get_ydata(), fc[fc["origin"] == origin]["forecast"])
    np.testing.assert_array_equal(day.get_ydata(), truth.loc[origin:].iloc[:48])
    assert len(ax.collections) == 1  # the interval band
    path = tmp_path / "fig5.png"
    fig.savefig(path)
    assert path.stat().st_size > 5000


def test_fig5_on_given_axes_and_errors(case):
    truth, _, fc = case
    ax = Figure().add_subplot()
    assert plot_forecast(truth, fc, ax=ax) is ax.figure
    with pytest.raises(ParameterError, match="'origin'"):
        plot_forecast(truth, fc, origin=pd.Timestamp("2020-01-01"))
    with pytest.raises(ParameterError, match="output of rolling_forecast"):
        plot_forecast(truth, fc.drop(columns="forecast"))
    with pytest.raises(DomainError, match="must contain the origin"):
        plot_forecast(truth.iloc[:10], fc)


def test_fig6_bars_per_method_and_month(tmp_path):
    table = pd.DataFrame(
        {
            "month": ["Feb"] * 3 + ["Jun"] * 3,
            "method": ["OptStream", "Real", "Laplace"] * 2,
            "l1": [2.0, 1.0, 3.0, 20.0, 10.0, 30.0],
        }
    )
    fig = plot_forecast_errors(table, title="ε = 1")
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["Real", "OptStream", "Laplace"]
    assert [bar.get_height() for bar in ax.containers[0]] == [1.0, 10.0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Feb", "Jun"]
    fig.savefig(tmp_path / "fig6.png")
    linear = plot_forecast_errors(table, log=False, reference=None, order=["Laplace"])
    assert [c.get_label() for c in linear.axes[0].containers] == ["Laplace"]
    with pytest.raises(ParameterError, match="columns"):
        plot_forecast_errors(table.drop(columns="l1"))
    with pytest.raises(ParameterError, match="empty"):
        plot_forecast_errors(table.iloc[:0])
