"""Every *Release, *Plan and *Fit answers to_frame() and summary() (issue 12: one shape).

The stream releases (BT, Laplace, PAK, ToPS, ToPL) are pinned in
``tests/mechanisms/test_results.py``; here every other result class of the toolkit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mechanisms
from forecasting import ArmaFit, fit_arma
from planner import plan_optstream, plan_pak, plan_tops
from postproc import FeatureSet, Hierarchy, project_consistent

B = 10.0


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(0).exponential(1.0, 4000).clip(0, B)


def _check(result, frame_rows=None):
    frame = result.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) > 0
    if frame_rows is not None:
        assert len(frame) == frame_rows
    text = result.summary()
    lines = text.splitlines()
    assert 6 <= len(lines) <= 30 and max(map(len, lines)) <= 64, text
    return frame, text


def test_threshold_releases(x):
    pak = mechanisms.pak_release(x, bound=B, epsilon=1.0, delta=1e-6, time_lag=2000, seed=1)
    frame, text = _check(pak.threshold_release, 1)
    assert frame["threshold τ (released)"].iloc[0] == pak.threshold
    # analysis-only values computed from the prefix are never shown
    assert "scale" not in " ".join(frame.columns) and "tau_max" not in text
    tops = mechanisms.tops_release(
        x, bound=B, epsilon_threshold=1.0, epsilon_perturb=1.0, time_lag=2000, seed=2
    )
    th = tops.threshold_release
    frame, text = _check(th, th.candidates.size)
    assert frame["chosen"].sum() == 1 and frame.loc[frame["chosen"], "threshold"].item() == (
        tops.threshold
    )
    assert "privacy:" in text


def test_topl_plan_and_distribution_fit(x):
    topl = mechanisms.topl_release(x, bound=B, epsilon=1.0, time_lag=500, seed=3)
    frame, _ = _check(topl.plan, topl.plan.candidates.size)
    assert frame.loc[frame["chosen"], "threshold"].item() == topl.threshold
    frame, text = _check(topl.fit, topl.fit.probabilities.size)
    assert frame["probability"].sum() == pytest.approx(1.0)
    assert "EMS" in text


def test_plans_say_they_are_not_private(x):
    pak = plan_pak(x[:2000], n=x.size, bound=B, epsilon=1.0, delta=1e-6, beta=0.02)
    frame, text = _check(pak, 1)
    assert frame["error_bound"].iloc[0] == pak.error_bound
    assert "not a private release" in text
    tops = plan_tops(x[:2000], bound=B, horizon=2000, epsilon_perturb=1.0)
    frame, text = _check(tops, tops.candidates.size)
    assert frame.loc[frame["best"], "threshold"].item() == tops.best.threshold
    assert "not a private release" in text
    history = np.abs(np.sin(np.arange(96 * 4) / 7.0)) * 50
    opt = plan_optstream(history, epsilon=1.0, alpha=5.0, w=48)
    frame, text = _check(opt, len(opt.candidates))
    assert frame.index.name == "k" and frame.loc[opt.k, "chosen"]
    assert "not a private release" in text


def test_consistent_release_frame_is_wide_and_time_indexed():
    h = Hierarchy(children={"all": ["a", "b"]})
    fs = FeatureSet.default(w=4)
    est = np.random.default_rng(1).uniform(0, 5, size=(2, 3, fs.n_parts))
    rel = project_consistent(est, hierarchy=h, features=fs)
    stamps = pd.date_range("2024-01-01", periods=8, freq="30min")
    frame = rel.to_frame(index=stamps)
    assert list(frame.columns) == list(h.nodes) and frame.index.equals(stamps)
    np.testing.assert_allclose(frame["all"], frame["a"] + frame["b"], rtol=1e-9, atol=1e-9)
    _check(rel, 8)
    with pytest.raises(mechanisms.ParameterError, match="one label per step"):
        rel.to_frame(index=stamps[:3])


def test_arma_fit_frame_names_the_parameters():
    rng = np.random.default_rng(2)
    e = rng.normal(size=700)
    y = np.empty(700)
    y[0] = 10.0
    for t in range(1, 700):
        y[t] = 10.0 + 0.6 * (y[t - 1] - 10.0) + e[t] + 0.3 * e[t - 1]
    fit = fit_arma(y)
    assert isinstance(fit, ArmaFit)
    frame, text = _check(fit)
    assert list(frame.index) == ["mean", "ar.L1", "ma.L1", "sigma2", "noise_variance"]
    assert frame.loc["ar.L1", "estimate"] == fit.ar[0]
    assert "ARMA(1, 1)" in text
