"""Planning ToPS: the predicted range-query error of θ and the leaf size ([ToPS21])."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import (
    DomainError,
    ParameterError,
    tops_candidates,
    tops_kappa,
    tops_leaf_size,
    tops_noise,
    tops_perturb,
    tops_release,
    tops_scores,
)
from mechanisms.tops._variance import mean_query_units, public_queries
from planner import plan_tops, tops_range_error
from planner._tops_plan import release_draws

B = 50.0


def _prefix(seed: int = 0, n: int = 10_000) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, n).clip(0, B)


def test_noise_units_match_the_inverse_normal_matrix():
    # Brute force: Var of the consistent sum over the complete leaves of each query is
    # v·xᵀ(AᵀA)⁻¹x; average over the same public queries.
    r, g, f, levels = 96, 2, 4, 4  # 64 leaves of 2 steps cover r
    sizes = [f ** (levels - 1 - h) for h in range(levels)]
    a = np.vstack([np.kron(np.eye(s), np.ones(sizes[0] // s)) for s in sizes])
    inv = np.linalg.inv(a.T @ a)
    i, j = public_queries(r, 300)
    ref = []
    for lo, hi in zip(-(-i // g), (j + 1) // g, strict=True):
        x = np.zeros(sizes[0])
        x[lo:hi] = 1.0
        ref.append(x @ inv @ x)
    assert mean_query_units(r, g, f, levels, 300) == pytest.approx(np.mean(ref))


def test_terms_and_their_monotonicity_in_theta():
    x = _prefix()
    kw = {"prefix": x, "horizon": 2**16, "epsilon_perturb": 0.5}
    errs = [tops_range_error(t, **kw) for t in (1.0, 2.0, 4.0, 8.0, 16.0)]
    assert all(e.leaf_size == tops_leaf_size(2**16, 0.5) for e in errs)
    noise = [e.noise for e in errs]
    bias = [e.bias for e in errs]
    assert noise == sorted(noise) and bias == sorted(bias, reverse=True)
    assert errs[-1].bias == 0.0  # θ above every prefix value: nothing truncated
    for e in errs:
        assert e.mse == pytest.approx(e.noise + e.partial + e.bias**2)
    v = tops_noise(threshold=8.0, epsilon=0.5, levels=errs[3].levels, tree_size=1).variance
    assert errs[3].noise / v == pytest.approx(
        mean_query_units(2**16, errs[3].leaf_size, 16, errs[3].levels)
    )


def test_bias_is_the_mean_excess_times_the_rms_query_length():
    x = _prefix(1)
    e = tops_range_error(2.0, prefix=x, horizon=1000, epsilon_perturb=1.0)
    i, j = public_queries(1000, 4096)
    assert e.bias == pytest.approx(
        np.maximum(x - 2.0, 0).mean() * np.sqrt(np.mean((j - i + 1.0) ** 2))
    )


@pytest.mark.statistical
@pytest.mark.parametrize(("eps", "theta"), [(1.0, 5.0), (1.0, 9.0), (0.05, 5.0), (0.05, 2.0)])
def test_predicted_mse_matches_the_realised_mse(eps, theta):
    r = 2**14
    x = _prefix(2, r + 10_000)
    prefix, suffix = x[:10_000], x[10_000:]
    truth = np.concatenate([[0.0], np.cumsum(suffix)])
    pred = tops_range_error(theta, prefix=prefix, horizon=r, epsilon_perturb=eps)
    errs = []
    for s in range(30):
        rel = tops_perturb(suffix, threshold=theta, bound=B, epsilon=eps, seed=s)
        q = np.sort(np.random.default_rng(1000 + s).integers(0, r, size=(100, 2)), axis=1)
        errs += [rel.range_sum(int(i), int(j)) - (truth[j + 1] - truth[i]) for i, j in q]
    ratio = np.mean(np.square(errs)) / pred.mse
    assert 1 / 1.5 < ratio < 1.5, ratio


def test_plan_evaluates_every_candidate_and_reports_the_optimizer_peak():
    x = _prefix(3)
    plan = plan_tops(x, bound=B, horizon=2**16, epsilon_perturb=1.0, candidates=200, draws=4)
    grid = tops_candidates(B, 200)
    assert np.array_equal(plan.candidates, grid) and plan.mse.shape == (200,)
    assert plan.best.mse == plan.mse.min() and plan.best.threshold in grid
    kappa = tops_kappa(time_lag=x.size, horizon=2**16, epsilon_perturb=1.0)
    assert plan.kappa == kappa
    assert plan.optimizer_threshold == grid[np.argmax(tops_scores(x, grid, kappa))]
    assert plan.private is False
    # the best θ lies in the upper tail of the data, well below the bound
    assert np.quantile(x, 0.99) < plan.best.threshold < B / 2


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"threshold": 0.0}, ParameterError),
        ({"threshold": math.inf}, ParameterError),
        ({"prefix": [1.0, math.nan]}, DomainError),
        ({"prefix": []}, DomainError),
        ({"horizon": 0}, ParameterError),
        ({"epsilon_perturb": 0.0}, ParameterError),
        ({"fanout": 1}, ParameterError),
        ({"leaf_size": 0}, ParameterError),
        ({"queries": 0}, ParameterError),
    ],
)
def test_bad_inputs(kwargs, error):
    args = {"threshold": 1.0, "prefix": [1.0, 2.0], "horizon": 100, "epsilon_perturb": 1.0}
    args.update(kwargs)
    with pytest.raises(error):
        tops_range_error(args.pop("threshold"), **args)


def test_plan_bad_bound_and_candidates():
    with pytest.raises(ParameterError):
        plan_tops([1.0], bound=0.0, horizon=10, epsilon_perturb=1.0)
    with pytest.raises(ParameterError):
        plan_tops([1.0], bound=1.0, horizon=10, epsilon_perturb=1.0, candidates=[2.0])


# -- the release's own rule (issue 23) ---------------------------------------------------------


def test_release_draws_run_the_release_rule():
    # one draw seeded s is the release's own θ, g and L at seed s: the release reads the prefix
    # first, draws θ (and the shape statistic) and only then perturbs the later steps
    x = _prefix(4, 6000 + 2**13)
    kw = {"bound": B, "epsilon_threshold": 0.5, "epsilon_perturb": 1.0}
    for seed in (0, 1, 2):
        rel = tops_release(x, **kw, time_lag=6000, seed=seed)
        run = release_draws(x[:6000], horizon=2**13, **kw, draws=1, seed=seed)
        assert run.thresholds[0] == rel.threshold
        assert (run.leaf_sizes[0], run.levels[0]) == (rel.leaf_size, rel.levels)
        assert run.scores[0] == rel.threshold_release.score
    many = release_draws(x[:6000], horizon=2**13, **kw, draws=12, seed=0)
    assert many.thresholds.size == 12 and np.unique(many.thresholds).size > 1
    assert many.shape in set(zip(many.leaf_sizes.tolist(), many.levels.tolist(), strict=True))


def test_plan_predicts_the_mean_error_over_the_rule_runs():
    x = _prefix(5)
    plan = plan_tops(x, bound=B, horizon=2**15, epsilon_perturb=0.2, epsilon_threshold=0.1,
                     draws=10, queries=500, candidates=256)  # fmt: skip
    runs = release_draws(x, bound=B, horizon=2**15, epsilon_threshold=0.1, epsilon_perturb=0.2,
                         draws=10, candidates=256)  # fmt: skip
    assert np.array_equal(plan.release.thresholds, runs.thresholds)  # seed 0 by default
    errs = [
        tops_range_error(t, prefix=x, horizon=2**15, epsilon_perturb=0.2, leaf_size=g,
                         levels=lv, queries=500)  # fmt: skip
        for t, g, lv in zip(runs.thresholds, runs.leaf_sizes, runs.levels, strict=True)
    ]
    assert plan.release_mse == pytest.approx(np.mean([e.mse for e in errs]))
    assert plan.release_terms[2] == pytest.approx(np.mean([e.bias**2 for e in errs]))
    assert plan.release_mse >= plan.best.mse  # the grid's least error bounds every run's
    frame = plan.to_frame()
    assert frame["released_share"].sum() == pytest.approx(1.0)
    assert "release: expected MSE" in plan.summary()
    # a smaller ε_θ spreads the rule's θ: its expected error cannot be told from one θ
    wide = plan_tops(x, bound=B, horizon=2**15, epsilon_perturb=0.2, epsilon_threshold=0.002,
                     draws=10, queries=500, candidates=256)  # fmt: skip
    assert np.std(wide.release.thresholds) > np.std(plan.release.thresholds)


@pytest.mark.statistical
@pytest.mark.parametrize(("eps_t", "eps_r"), [(1.0, 1.0), (0.1, 0.2)])
def test_plan_matches_the_release_realised_mse(eps_t, eps_r):
    # the release with its defaults, 30 seeds, against plan_tops' release_mse over the same
    # public queries (an i.i.d. stream: the prefix stands for the later steps)
    m, r = 4000, 2**13
    x = _prefix(6, m + r)
    plan = plan_tops(x[:m], bound=B, horizon=r, epsilon_perturb=eps_r, epsilon_threshold=eps_t,
                     draws=16, queries=1000)  # fmt: skip
    i, j = public_queries(r, 1000)
    truth = np.concatenate([[0.0], np.cumsum(x[m:])])
    errs = []
    for s in range(30):
        rel = tops_release(x, bound=B, epsilon_threshold=eps_t, epsilon_perturb=eps_r,
                           time_lag=m, seed=100 + s)  # fmt: skip
        v = np.concatenate([[0.0], np.cumsum(rel.values)])
        errs.append(np.mean((v[j + 1] - v[i] - (truth[j + 1] - truth[i])) ** 2))
    ratio = np.mean(errs) / plan.release_mse
    assert 1 / 1.3 < ratio < 1.3, ratio


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"draws": 0}, "draws"), ({"epsilon_threshold": 0.0}, "epsilon_threshold"),
     ({"threshold_score": "nope"}, "threshold_score"), ({"shape_share": 1.5}, "shape_share")],
)  # fmt: skip
def test_plan_bad_rule_arguments(kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}' parameter of plan_tops"):
        plan_tops(_prefix(7, 500), bound=B, horizon=4096, epsilon_perturb=1.0, **kwargs)


def test_release_draws_pass_on_rule_options_only():
    from mechanisms import Budget, BudgetLedger

    x = _prefix(8, 500)
    kw = {"bound": B, "horizon": 4096, "epsilon_threshold": 1.0, "epsilon_perturb": 1.0}
    with pytest.raises(ParameterError, match="rule options of release_draws"):
        release_draws(x, **kw, ledger=BudgetLedger(Budget(10.0)))  # a simulation charges nothing
    with pytest.raises(DomainError):
        release_draws(np.append(x, B + 1.0), **kw)  # refused, not clamped as a stream would
    paper = release_draws(x, **kw, draws=4, threshold_score="paper", shape_rule="paper")
    assert set(paper.scores) == {"paper"}
