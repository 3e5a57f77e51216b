"""plan_optstream: k chosen from history, predictions checked against realised releases."""

from __future__ import annotations

import numpy as np
import pytest

import dpstream
from mechanisms import ParameterError
from planner import plan_optstream


def test_smooth_history_needs_few_samples_and_rough_history_many():
    t = np.arange(48 * 20)
    smooth = 1000 + 300 * np.sin(2 * np.pi * t / 48)
    rough = smooth + np.random.default_rng(0).normal(0, 200, t.size)
    eps, alpha = 1.0, 5.0
    assert (
        plan_optstream(smooth, epsilon=eps, alpha=alpha).k
        < plan_optstream(rough, epsilon=eps, alpha=alpha).k
    )


def test_more_noise_means_fewer_samples():
    regional = dpstream.load_regional().loc["2016-01"].to_numpy()
    ks = [plan_optstream(regional, epsilon=1.0, alpha=a, n_levels=2).k for a in (1, 10, 50, 100)]
    assert ks == sorted(ks, reverse=True) and ks[0] > ks[-1]


def test_laplace_prediction_and_k_equal_w_agree():
    # k = w: every step is a sample with scale w·α·h/ε; bias 0; the normal approximation of
    # E|Laplace(b)| is b·2/sqrt(pi), 12.8% above the exact b.
    x = np.full(48 * 4, 500.0)
    plan = plan_optstream(x, epsilon=2.0, alpha=3.0, n_levels=2, candidates=[48])
    assert plan.predicted_laplace == pytest.approx(48 * 3.0 * 2 / 2.0)
    assert plan.bias[0] == pytest.approx(0.0, abs=1e-9)
    assert plan.predicted[0] == pytest.approx(plan.predicted_laplace * 2 / np.sqrt(np.pi), rel=1e-9)


@pytest.mark.statistical
@pytest.mark.parametrize("alpha", [10.0, 50.0])
def test_prediction_matches_realised_error_on_held_out_month(alpha):
    frame = dpstream.load_regional()
    hierarchy = dpstream.regional_hierarchy()
    plan = plan_optstream(frame.loc["2016-01"].to_numpy(), epsilon=1.0, alpha=alpha, n_levels=2)
    feb = frame.loc["2016-02"]
    errors = []
    for seed in range(3):
        out = dpstream.release_optstream(
            feb[hierarchy["national"]], epsilon=1.0, alpha=alpha, hierarchy=hierarchy,
            seed=seed, **plan.release_parameters(),
        )  # fmt: skip
        errors.append(float((out - feb[out.columns]).abs().to_numpy().mean()))
    predicted = float(plan.predicted[plan.candidates == plan.k][0])
    # Post-processing only helps and February differs from January: within 25%.
    assert 0.75 * predicted < np.mean(errors) < 1.25 * predicted
    assert plan.predicted_gain > 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"history": np.ones(10)}, "history"),
        ({"history": np.full(96, np.nan)}, "finite"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"alpha": -1.0}, "alpha"),
        ({"candidates": [49]}, "candidates"),
        ({"w": 1}, "'w'"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"history": np.ones(96), "epsilon": 1.0, "alpha": 1.0} | kwargs
    with pytest.raises(ParameterError, match=match):
        plan_optstream(**args)
