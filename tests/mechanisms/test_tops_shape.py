"""ToPS tree shape by predicted range-query error, smoother included (issue 14, item 4), and the
threshold's overshoot correction."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms import Budget, BudgetLedger, ToPSStream, bit_source, tops_release, tops_threshold
from mechanisms.tops._shape import (
    leaf_candidates,
    partial_errors,
    posterior_square,
    release_deviation,
    shape_errors,
)
from mechanisms.tops._threshold import GATE, overshoot_index, tops_candidates, tops_kappa
from planner import plan_tops_shape, tops_range_error

B = 20.0


def _daily(n: int, seed: int = 0, period: int = 1440) -> np.ndarray:
    """A stream with a slow cycle plus noise: smoothing error grows fast with the leaf size."""
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return np.clip(3.0 + 2.0 * np.sin(2 * np.pi * t / period) + rng.exponential(0.5, n), 0, B)


def test_candidates_are_powers_of_two_with_sixteen_prefix_blocks():
    assert leaf_candidates(65_536, 456_133).tolist() == [2**k for k in range(13)]
    assert leaf_candidates(1000, 30).tolist() == [1, 2, 4, 8, 16]
    assert leaf_candidates(20, 10**6).tolist() == [1]


def test_partial_errors_brute_force():
    x = np.random.default_rng(1).uniform(0, 3, 37)
    a, d = partial_errors(x, np.array([1, 2, 4, 8, 32]))
    for n, g in enumerate([1, 2, 4, 8]):
        hs = [
            sum(x[k * g + t] - x[(k - 1) * g : k * g].mean() for t in range(p))
            for k in range(1, x.size // g)
            for p in range(g)
        ]
        assert a[n] == pytest.approx(np.mean(np.abs(hs)))
        assert d[n] == pytest.approx(np.mean(np.square(hs)))
    assert np.isnan(a[4]) and np.isnan(d[4])  # fewer than two blocks of 32


def test_deviation_sensitivity_bounds_every_neighbour_and_is_tight():
    # Brute force over prefixes of 0/θ and every single replacement: |ΔA|₁ ≤ Δ, with equality.
    theta, m = 1.0, 32
    sizes = leaf_candidates(m, 10**6)
    base = np.random.default_rng(2).choice([0.0, theta], size=m)
    _, noise = release_deviation(base, theta, sizes, 1.0, bit_source(0))
    worst = 0.0
    for x in (base, np.zeros(m)):
        ref = partial_errors(x, sizes)[0]
        for k, v in itertools.product(range(m), (0.0, theta)):
            y = x.copy()
            y[k] = v
            worst = max(worst, float(np.abs(partial_errors(y, sizes)[0] - ref).sum()))
    assert worst <= noise.sensitivity + 1e-12
    assert worst == pytest.approx(noise.sensitivity)


def test_posterior_square_matches_numerical_integration():
    b = 2.0
    grid = np.linspace(0.0, 200.0, 400_001)
    for y in (-5.0, 0.0, 1.0, 4.0, 30.0):
        w = np.exp(-np.abs(grid - y) / b)
        assert posterior_square(np.array([y]), b)[0] == pytest.approx(
            np.sum(grid**2 * w) / np.sum(w), rel=1e-3
        )


def test_no_noise_means_no_pruning_and_large_noise_means_large_leaves():
    x = _daily(20_000)
    sizes = leaf_candidates(x.size, 100_000)
    d = partial_errors(x, sizes)[1]
    kw = {"horizon": 100_000, "threshold": 8.0, "fanout": 16, "sizes": sizes, "smoothing": d}
    quiet = min(shape_errors(epsilon=1e6, **kw), key=lambda e: e.mse)
    loud = min(shape_errors(epsilon=1e-3, **kw), key=lambda e: e.mse)
    assert quiet.leaf_size == 1
    assert loud.leaf_size > 64
    # the smoothing term is the measured 2·D(g), and every term is non-negative
    for e in shape_errors(epsilon=0.1, **kw):
        assert e.smoothing == 2.0 * d[list(sizes).index(e.leaf_size)]
        assert min(e.noise, e.partial_noise, e.smoothing) >= 0.0


def test_stream_defers_the_shape_and_splits_epsilon_theta():
    # ε_θ = 1: the statistic's share 0.25 resolves the smoothing error (ρ ≤ RESOLUTION), so it
    # is bought (at ε_θ = 0.4 it is not: test_tops_budget_split.py)
    x = _daily(30_000, 3)
    ledger = BudgetLedger(Budget(1.0))
    s = ToPSStream(
        bound=B,
        epsilon_threshold=1.0,
        epsilon_perturb=0.8,
        time_lag=8192,
        horizon=x.size - 8192,
        seed=4,
        ledger=ledger,
    )
    assert s.leaf_size is None and s.levels is None
    s.extend(x[:8000])
    assert s.leaf_size is None
    s.extend(x[8000:])
    rel = s.release()
    shape = rel.shape_release
    assert rel.shape_rule == "smoothing" and rel.privacy.parameters["shape_rule"] == "smoothing"
    assert (rel.leaf_size, rel.levels) == (shape.leaf_size, shape.levels)
    assert shape.leaf_size in shape.sizes and shape.epsilon == pytest.approx(0.25)
    assert rel.threshold_release.epsilon == pytest.approx(0.75)
    assert rel.guarantee.budget == Budget(1.0) and [c.budget for c in ledger.charges] == [
        Budget(1.0)
    ]
    paper = tops_release(
        x, bound=B, epsilon_threshold=1.0, epsilon_perturb=0.8, time_lag=8192, seed=4,
        shape_rule="paper",
    )  # fmt: skip
    assert paper.shape_release is None and paper.shape_rule == "paper"
    assert paper.threshold_release.epsilon == 1.0
    given = tops_release(
        x, bound=B, epsilon_threshold=1.0, epsilon_perturb=0.8, time_lag=8192, seed=4,
        leaf_size=64,
    )  # fmt: skip
    assert given.shape_rule == "given" and given.shape_release is None


@pytest.mark.statistical
@pytest.mark.parametrize(("eps", "factor"), [(0.05, 0.8), (1.0, 1.1)])
def test_rule_beats_the_paper_rule_and_its_prediction_holds(eps, factor):
    # A slowly varying stream: the paper's θ²g²/36 overstates the smoother's error, which
    # matters where noise pushes to large leaves (ε = 0.05); at ε = 1 both pick small leaves.
    x = _daily(2**17 + 2**15, 5, period=4096)
    m = 2**15
    suffix = x[m:]
    r = suffix.size
    truth = np.concatenate([[0.0], np.cumsum(suffix)])
    err = {"smoothing": [], "paper": []}
    pred = []
    for s in range(12):
        q = np.sort(np.random.default_rng(100 + s).integers(0, r, size=(100, 2)), axis=1)
        for rule in err:
            rel = tops_release(
                x, bound=B, epsilon_threshold=eps, epsilon_perturb=eps, time_lag=m, seed=s,
                shape_rule=rule,
            )  # fmt: skip
            err[rule] += [
                rel.range_sum(m + int(i), m + int(j)) - (truth[j + 1] - truth[i]) for i, j in q
            ]
            if rule == "smoothing":
                pred.append(
                    tops_range_error(
                        rel.threshold, prefix=x[:m], horizon=r, epsilon_perturb=eps,
                        leaf_size=rel.leaf_size, levels=rel.levels,
                    ).mse
                )  # fmt: skip
    mse = {k: float(np.mean(np.square(v))) for k, v in err.items()}
    assert mse["smoothing"] < factor * mse["paper"], mse
    assert 1 / 1.5 < np.mean(pred) / mse["smoothing"] < 1.5, (np.mean(pred), mse)


def test_first_block_term_is_the_prior_error_of_block_zero():
    # issue 23: block 0 is predicted by θ/2; a uniform random query starts p steps into it
    # with probability 1 − (1 − g/r)², off by p·(θ/2 − μ); F₀ takes (θ/2 − μ)² ≤ θ²/4.
    # Brute force over every query [i, j] of a small horizon with μ = 0 (the bound is tight)
    from mechanisms.tops._shape import first_block_error

    r, g, theta = 200, 16, 3.0
    i, j = np.triu_indices(r)  # i ≤ j, each pair of distinct draws twice, i = j once
    weight = np.where(i == j, 1.0, 2.0) / r**2
    err2 = np.where(i < g, (i * theta / 2.0) ** 2, 0.0)
    # (F₀ takes p uniform in block 0: exact as g/r → 0, 2 % high at g/r = 0.08)
    assert first_block_error(g, r, theta) == pytest.approx(float(err2 @ weight), rel=0.04)
    assert first_block_error(g, r, theta) >= float(err2 @ weight)
    assert first_block_error(1, r, theta) == 0.0
    # it grows like g³/r: the rule no longer takes huge leaves on a short horizon
    kw = {"horizon": 1 << 20, "epsilon": 1.0, "threshold": 470.0, "fanout": 16}
    sizes = np.array([256, 4096])
    errs = shape_errors(sizes=sizes, smoothing=np.zeros(2), levels=2, **kw)
    assert errs[1].first_block > 100 * errs[0].first_block > 0
    assert all(e.mse == pytest.approx(e.noise + e.partial_noise + e.smoothing + e.first_block)
               for e in errs)  # fmt: skip


def test_plan_tops_shape_table_and_best():
    x = _daily(16_384, 6)
    plan = plan_tops_shape(x, threshold=6.0, horizon=50_000, epsilon_perturb=0.2, fanouts=(4, 16))
    t = plan.table
    assert set(t.fanout) == {4, 16} and set(t.leaf_size) == set(2 ** np.arange(11))
    assert np.all(np.diff(t.mse) >= 0) and plan.best == tuple(
        int(v) for v in t.iloc[0][["leaf_size", "fanout", "levels"]]
    )
    assert np.allclose(t.mse, t.noise + t.partial_noise + t.smoothing + t.first_block + t.bias2)
    assert plan.private is False and "g=" in plan.summary()


# -- the threshold's overshoot correction ----------------------------------------------------


def test_overshoot_correction_is_monotone_and_vanishes_at_large_epsilon():
    grid = tops_candidates(36.0)
    kappa = 8.8
    assert [overshoot_index(grid, kappa, 1e6, j) for j in (0, 100, 1023)] == [0, 100, 1023]
    released = [overshoot_index(grid, kappa, 0.05, j) for j in range(1024)]
    assert all(a <= b for a, b in itertools.pairwise(released))  # post-processing keeps order
    assert all(r <= j for j, r in enumerate(released))  # it only ever lowers θ
    # ... and never below 2/(εκ) (the spread guard)
    assert all(r == j or grid[r] >= 2 / (0.05 * kappa) for j, r in enumerate(released))
    assert released[50] == 50  # θ = 1.76 < 2/(εκ) = 4.5: left alone
    # identifiable: a shift of about 1/(εκ) = 2.27 kW; not identifiable: no change
    assert grid[300] - grid[released[300]] == pytest.approx(1 / (0.05 * kappa), abs=0.1)
    lam = 0.01 * kappa
    vague = [overshoot_index(grid, kappa, 0.01, j) for j in range(1024)]
    for j, t in enumerate(vague):  # moved only onto candidates where the tail fits below B
        assert t == j or lam * (36.0 - grid[t]) >= GATE
    assert vague[-1] == 1023  # a selection at the top is left alone


@pytest.mark.statistical
def test_correction_removes_the_upward_drift_where_identifiable():
    x = np.random.default_rng(7).exponential(1.0, 20_000).clip(0, 30.0)
    kw = {"bound": 30.0, "epsilon": 0.05, "horizon": 200_000, "epsilon_perturb": 0.05}
    grid = tops_candidates(30.0)
    kappa = tops_kappa(time_lag=x.size, horizon=200_000, epsilon_perturb=0.05)
    from mechanisms import tops_scores

    star = grid[np.argmax(tops_scores(x, grid, kappa))]
    raw = [tops_threshold(x, **kw, correction="none", seed=s).threshold for s in range(150)]
    fixed = [tops_threshold(x, **kw, seed=s) for s in range(150)]
    assert np.mean(raw) - star > 1.5  # the drift this corrects
    assert abs(np.mean([f.threshold for f in fixed]) - star) < 0.35 * (np.mean(raw) - star)
    assert all(f.threshold <= grid[f.selected] for f in fixed)
