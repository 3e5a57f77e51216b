"""Inverse planning: ε from an error target, forward errors per level (issue 23 item 2)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest

from mechanisms import ParameterError
from planner import (
    epsilon_curve,
    level_names,
    optstream_forward,
    plan_epsilon,
    solve_epsilon,
    tops_forward,
)
from planner._inverse import tops_length_errors
from planner._tops_plan import release_draws


def test_solve_epsilon_inverts_a_known_curve():
    # error = 30/ε: the target 3 is met at ε = 10 exactly
    eps, value, ok, count = solve_epsilon(lambda e: 30.0 / e, 3.0)
    assert ok and eps == pytest.approx(10.0, rel=1e-3) and value <= 3.0 * (1 + 1e-9)
    assert count < 40


def test_solve_epsilon_unreachable_and_already_met():
    # a floor of 1 (e.g. clipping bias): 0.5 is never met; the best at ε_max is returned
    eps, value, ok, _ = solve_epsilon(lambda e: 1.0 + 1.0 / e, 0.5, epsilon_max=10.0)
    assert not ok and eps == 10.0 and value == pytest.approx(1.1)
    eps, value, ok, _ = solve_epsilon(lambda e: 1.0 / e, 1e6, epsilon_min=0.01)
    assert ok and eps == 0.01 and value == pytest.approx(100.0)


def test_solve_epsilon_meets_the_target_across_a_step():
    # a step function (the best candidate changes with ε): the returned ε meets the target
    def step(e):
        return 4.0 if e < 2.0 else 1.0

    eps, value, ok, _ = solve_epsilon(step, 2.0)
    assert ok and value <= 2.0 and 2.0 <= eps < 2.01


def test_solve_epsilon_validates():
    with pytest.raises(ParameterError, match="'target' parameter"):
        solve_epsilon(lambda e: 1.0 / e, -1.0)
    with pytest.raises(ParameterError, match="epsilon_min"):
        solve_epsilon(lambda e: 1.0 / e, 1.0, epsilon_min=5.0, epsilon_max=1.0)


def _hierarchy_history(days: int = 14, seed: int = 0):
    """Two leaves and their sum, a daily cycle plus noise (N = 3 nodes: root first)."""
    rng = np.random.default_rng(seed)
    t = np.arange(48 * days)
    a = 1000 + 300 * np.sin(2 * np.pi * t / 48) + rng.normal(0, 30, t.size)
    b = 600 + 200 * np.cos(2 * np.pi * t / 48) + rng.normal(0, 30, t.size)
    values = np.c_[a + b, a, b]
    matrix = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    return values, matrix, np.array([0, 1, 1])


def test_level_names():
    assert level_names(np.zeros(3)) == ["all"]
    assert level_names(np.array([0, 1, 1])) == ["root", "leaves"]
    assert level_names(np.array([0, 1, 2])) == ["root", "level 1", "leaves"]


def test_optstream_forward_per_level_and_monotone_in_epsilon():
    values, matrix, depth = _hierarchy_history()
    fwd = functools.partial(optstream_forward, values, alpha=50.0, matrix=matrix, depth=depth)
    plans = [fwd(epsilon=e) for e in (0.2, 1.0, 5.0)]
    assert set(plans[0].errors) == {"root", "leaves"}
    for lvl in ("root", "leaves"):
        maes = [p.errors[lvl]["mae"] for p in plans]
        assert maes[0] > maes[1] > maes[2] > 0
    # MAPE is MAE over the node's mean load, averaged over the level
    p = plans[1]
    assert p.errors["root"]["mape"] == pytest.approx(p.errors["root"]["mae"] / values[:, 0].mean())
    assert p.level == "leaves" and p.predicted == p.errors["leaves"]["mape"]
    assert sum(p.parameters["shares"].values()) == pytest.approx(1.0)


def test_plan_epsilon_meets_each_level_target():
    values, matrix, depth = _hierarchy_history()
    fwd = functools.partial(optstream_forward, values, alpha=50.0, matrix=matrix, depth=depth)
    for level, target in (("root", 0.02), ("leaves", 0.05)):
        plan = plan_epsilon(functools.partial(fwd, level=level), target=target)
        assert plan.reachable and plan.level == level and plan.metric == "mape"
        assert plan.predicted == pytest.approx(target, rel=1e-3)
        # the forward prediction at the returned ε agrees
        again = fwd(epsilon=plan.epsilon, level=level)
        assert again.errors[level]["mape"] == pytest.approx(plan.predicted, rel=1e-9)
    # a looser target needs less ε
    loose = plan_epsilon(functools.partial(fwd, level="root"), target=0.04)
    tight = plan_epsilon(functools.partial(fwd, level="root"), target=0.02)
    assert loose.epsilon < tight.epsilon


def test_plan_epsilon_target_on_mae_and_on_a_node():
    values, matrix, depth = _hierarchy_history()
    fwd = functools.partial(
        optstream_forward, values, alpha=50.0, matrix=matrix, depth=depth,
        node_names=("total", "a", "b"), level="a",
    )  # fmt: skip
    plan = plan_epsilon(fwd, target=20.0, metric="mae")
    assert plan.level == "a" and plan.errors["a"]["mae"] == pytest.approx(20.0, rel=1e-3)


def test_unreachable_optstream_target_returns_the_best_at_epsilon_max():
    values, matrix, depth = _hierarchy_history()
    fwd = functools.partial(optstream_forward, values, alpha=50.0, matrix=matrix, depth=depth)
    plan = plan_epsilon(fwd, target=1e-4, epsilon_max=2.0)
    assert not plan.reachable and plan.epsilon == 2.0 and plan.predicted > 1e-4
    assert plan.as_dict()["reachable"] is False


def test_optstream_forward_validates_before_work():
    values, matrix, depth = _hierarchy_history()
    with pytest.raises(ParameterError, match="'level' parameter"):
        optstream_forward(values, epsilon=1.0, alpha=50.0, matrix=matrix, depth=depth,
                          level="nowhere")  # fmt: skip
    with pytest.raises(ParameterError, match="'history' argument"):
        optstream_forward(values[:10], epsilon=1.0, alpha=50.0)
    with pytest.raises(ParameterError, match="'alpha' parameter"):
        optstream_forward(values, epsilon=1.0, alpha=-1.0)


def test_epsilon_curve_long_frame():
    values, matrix, depth = _hierarchy_history()
    fwd = functools.partial(optstream_forward, values, alpha=50.0, matrix=matrix, depth=depth)
    frame = epsilon_curve(fwd, [0.5, 1.0, 2.0])
    assert set(frame.columns) == {"epsilon", "level", "metric", "predicted"}
    assert len(frame) == 3 * 2 * 2
    root = frame[(frame.level == "root") & (frame.metric == "mae")]["predicted"].to_numpy()
    assert np.all(np.diff(root) < 0)


def test_inverse_optstream_held_out_release_meets_the_target():
    # Plan on one fortnight, release the next at the returned ε: the realised relative error
    # of the leaves lies within 0.7-1.2x the target (3 seeded trials).
    import dpstream

    values, matrix, depth = _hierarchy_history(days=28, seed=4)
    history, held = values[: 48 * 14], values[48 * 14 :]
    fwd = functools.partial(optstream_forward, history, alpha=50.0, matrix=matrix, depth=depth)
    plan = plan_epsilon(functools.partial(fwd, level="leaves"), target=0.05)
    index = pd.RangeIndex(held.shape[0])
    frame = pd.DataFrame(held[:, 1:], index=index, columns=["a", "b"])
    past = pd.DataFrame(history[:, 1:], index=pd.RangeIndex(history.shape[0]), columns=["a", "b"])
    errs = []
    for seed in range(3):
        out = dpstream.release_optstream(
            frame, epsilon=plan.epsilon, alpha=50.0, hierarchy={"total": ["a", "b"]},
            history=past, prior=False, target="leaves", seed=seed,
        )  # fmt: skip
        rel = (out[["a", "b"]] - frame).abs().mean() / frame.abs().mean()
        errs.append(float(rel.mean()))
    assert 0.7 <= np.mean(errs) / 0.05 <= 1.2


def _exp_prefix(m: int = 4000, seed: int = 1) -> np.ndarray:
    return np.minimum(np.random.default_rng(seed).exponential(5.0, m), 100.0)


def test_tops_forward_terms_and_unreachable_floor():
    x = _exp_prefix()
    fwd = functools.partial(tops_forward, x, range_length=500, horizon=20_000, bound=100.0,
                            draws=8)  # fmt: skip
    plan = fwd(epsilon=1.0)
    p = plan.parameters
    mse = p["noise"] + p["partial"] + p["bias"] ** 2
    assert plan.predicted == pytest.approx(math.sqrt(mse))
    # the release's rule, run on the prefix with the same seed: the bias term is the root mean
    # square over its runs of L·mean((x − θ)⁺) over the prefix
    runs = release_draws(x, bound=100.0, horizon=20_000, epsilon_threshold=1.0,
                         epsilon_perturb=1.0, draws=p["draws"], seed=0)  # fmt: skip
    bias = [500 * np.maximum(x - t, 0).mean() for t in runs.thresholds]
    assert p["bias"] == pytest.approx(math.sqrt(np.mean(np.square(bias))))
    assert p["threshold"] == pytest.approx(np.median(runs.thresholds))
    assert (p["leaf_size"], p["levels"]) == runs.shape
    assert fwd(epsilon=4.0).predicted < plan.predicted
    inv = plan_epsilon(fwd, target=plan.predicted / 2)
    assert inv.reachable and inv.epsilon > 1.0
    assert inv.predicted == pytest.approx(plan.predicted / 2, rel=1e-2)
    # a range of L steps over a prefix with values near B: far below the bias, unreachable
    none = plan_epsilon(fwd, target=1e-6, epsilon_max=10.0)
    assert not none.reachable and none.predicted > 1e-6


def test_tops_length_errors_noise_falls_with_epsilon_and_grows_with_theta():
    x = _exp_prefix()
    lo = tops_length_errors(x, thresholds=np.array([5.0, 20.0]), horizon=20_000,
                            range_length=300, epsilon=1.0)  # fmt: skip
    hi = tops_length_errors(x, thresholds=np.array([5.0]), horizon=20_000, range_length=300,
                            epsilon=4.0)  # fmt: skip
    assert lo[1][1]["noise"] > lo[0][1]["noise"] > hi[0][1]["noise"]
    assert lo[1][1]["bias"] < lo[0][1]["bias"]
