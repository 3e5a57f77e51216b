"""ToPS (issue 23, item 4): the shape statistic is bought only when it can resolve the error it
is weighed against, and the released θ is lifted to the least predicted error under the
score's own tail model (``mechanisms/tops/_shape.py``, ``_threshold.py`` module notes)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import (
    Budget,
    BudgetLedger,
    ToPSStream,
    bit_source,
    tops_release,
    tops_scores,
    tops_threshold,
)
from mechanisms.tops._shape import (
    RESOLUTION,
    leaf_candidates,
    public_error,
    shape_errors,
    shape_resolution,
)
from mechanisms.tops._threshold import (
    _select,
    implied_scale,
    local_slope,
    mean_square_length,
    mse_index,
    tops_candidates,
    tops_kappa,
)
from planner import plan_tops

M = 1 << 16


def _daily(n: int, seed: int = 0, period: int = 1440, bound: float = 20.0) -> np.ndarray:
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return np.clip(3.0 + 2.0 * np.sin(2 * np.pi * t / period) + rng.exponential(0.5, n), 0, bound)


# -- the statistic's resolution ρ (public) ---------------------------------------------------


@pytest.mark.parametrize(
    ("horizon", "eps_r", "eps_theta", "buy"),
    [
        (1 << 20, 0.05, 0.01, False),  # ρ = 1.04
        (1 << 20, 0.05, 0.05, True),  # ρ = 0.042
        (1 << 20, 1.0, 1.0, True),
        (456_133, 0.05, 0.01, False),  # ρ = 1.31
        (456_133, 0.05, 0.02, False),  # ρ = 0.33
        (456_133, 0.05, 0.05, True),  # ρ = 0.053
        (456_133, 0.05, 0.1, True),
        (456_133, 1.0, 1.0, True),
    ],
)
def test_resolution_decides_the_benchmark_settings(horizon, eps_r, eps_theta, buy):
    rho = shape_resolution(
        time_lag=M, horizon=horizon, epsilon_perturb=eps_r, fanout=16, epsilon=eps_theta / 4
    )
    assert (rho <= RESOLUTION) is buy
    # away from the line by at least 1.9x either way: the decision is not knife-edge
    assert max(rho / RESOLUTION, RESOLUTION / rho) > 1.9


def test_resolution_is_the_floor_over_the_least_public_error_and_falls_as_one_over_eps2():
    sizes = leaf_candidates(M, 1 << 20)
    kw = {"time_lag": M, "horizon": 1 << 20, "epsilon_perturb": 0.05, "fanout": 16}
    rho = [shape_resolution(**kw, epsilon=e) for e in (0.01, 0.02)]
    assert rho[0] == pytest.approx(4.0 * rho[1])
    from mechanisms.tops._shape import deviation_sensitivity

    b = deviation_sensitivity(sizes, M, 1.0) / 0.01
    public = shape_errors(
        horizon=1 << 20, epsilon=0.05, threshold=1.0, fanout=16, sizes=sizes,
        smoothing=np.zeros(sizes.size),
    )  # fmt: skip
    assert rho[0] == pytest.approx(8.0 * b * b / min(e.mse for e in public))
    # θ cancels: the public terms at θ = 3 are 9× those at θ = 1
    at3 = shape_errors(
        horizon=1 << 20, epsilon=0.05, threshold=3.0, fanout=16, sizes=sizes,
        smoothing=np.zeros(sizes.size),
    )  # fmt: skip
    assert min(e.mse for e in at3) == pytest.approx(9.0 * public_error(
        horizon=1 << 20, epsilon_perturb=0.05, fanout=16, sizes=sizes))  # fmt: skip


def test_skipped_statistic_gives_theta_all_of_epsilon_and_draws_nothing_for_the_shape():
    x = _daily(30_000, 3)
    ledger = BudgetLedger(Budget(1.0))
    kw = {"bound": 20.0, "epsilon_threshold": 0.4, "epsilon_perturb": 0.8, "time_lag": 8192}
    s = ToPSStream(**kw, horizon=x.size - 8192, seed=4, ledger=ledger)
    assert s.shape_resolution > RESOLUTION and s.epsilon_shape == 0.0
    s.extend(x)
    rel = s.release()
    shape = rel.shape_release
    assert rel.shape_rule == "smoothing" and not shape.statistic
    assert shape.epsilon == 0.0 and shape.noise is None and shape.guarantee is None
    assert np.isnan(shape.deviation).all() and shape.resolution == s.shape_resolution
    assert rel.threshold_release.epsilon == 0.4  # the whole ε_θ: nothing else read the prefix
    assert [c.budget for c in ledger.charges] == [Budget(0.8)]  # max(ε_θ, ε_r), as before
    # the shape is the least public error at the released θ (D = 0), post-processing of θ
    sizes = leaf_candidates(8192, x.size - 8192)
    public = shape_errors(
        horizon=x.size - 8192, epsilon=0.8, threshold=rel.threshold, fanout=16, sizes=sizes,
        smoothing=np.zeros(sizes.size),
    )  # fmt: skip
    best = min(public, key=lambda e: e.mse)
    assert (rel.leaf_size, rel.levels) == (best.leaf_size, best.levels)
    # the selection consumed the bits first, at the full ε_θ, and nothing was drawn for the
    # shape: the same seed replays the θ selection and then the tree's noise
    bits = bit_source(4)
    grid = tops_candidates(20.0)
    kappa = tops_kappa(time_lag=8192, horizon=x.size - 8192, epsilon_perturb=0.8)
    sel = _select(
        x[:8192], grid, kappa, 0.4, "laplace", bits, correction="overshoot", score="scale_free"
    )
    assert sel.score == "scale_free" and sel.index == sel.selected  # no overshoot correction
    assert sel.selected == rel.threshold_release.selected
    # after the scale-free score the "mse" default releases the selection as is (no lift)
    assert rel.threshold_release.index == sel.index
    again = tops_release(x, **kw, seed=4)
    assert again.threshold == rel.threshold and np.array_equal(again.values, rel.values)


def test_bought_statistic_splits_epsilon_theta_to_its_sum():
    x = _daily(30_000, 3)
    s = ToPSStream(
        bound=20.0, epsilon_threshold=1.0, epsilon_perturb=0.8, time_lag=8192,
        horizon=x.size - 8192, seed=4,
    )  # fmt: skip
    assert s.shape_resolution <= RESOLUTION
    s.extend(x)
    rel = s.release()
    assert rel.shape_release.statistic
    total = rel.threshold_release.epsilon + rel.shape_release.epsilon
    assert total == pytest.approx(1.0) and rel.shape_release.epsilon == pytest.approx(0.25)


# -- the lift to the least predicted error ---------------------------------------------------


@pytest.mark.parametrize("c", [0.5, 60.0, 1000.0])
def test_implied_scale_inverts_the_exponential_peak(c):
    kappa = 5.0
    theta = c * np.log(M / (kappa * c))  # where m·e^{−θ/c}/c = κ
    assert implied_scale(theta, kappa, M) == pytest.approx(c, rel=1e-9)
    # no exponential tail peaks above m/(κe): no scale
    assert np.isnan(implied_scale(M / (kappa * np.e) * 1.01, kappa, M))
    assert np.isnan(implied_scale(1.0, 0.0, M))


def test_mean_square_length_is_the_metric_of_sorted_uniform_pairs():
    for r in (1, 2, 7, 40):
        a, b = np.meshgrid(np.arange(r), np.arange(r))
        exact = float(((np.abs(a - b) + 1.0) ** 2).mean())
        assert mean_square_length(r) == pytest.approx(exact, rel=1e-12)


def test_mse_index_is_the_argmin_of_the_model_and_never_moves_down():
    grid = tops_candidates(1440.0, 1440)
    kappa, n, l2 = 5.0, 4.7e4, mean_square_length(1 << 20)
    for sel in (200, 314, 400, 900):
        j = mse_index(grid, kappa, sel, time_lag=M, noise=n, length2=l2)
        assert j >= sel
        t1, c = grid[sel], implied_scale(grid[sel], kappa, M)
        up = grid[sel:]
        model = n * up**2 + l2 * (kappa * c * c / M * np.exp(-(up - t1) / c)) ** 2
        assert j == sel + int(np.argmin(model))
    # a prohibitive noise cost keeps the selection; a negligible one lifts it
    assert mse_index(grid, kappa, 314, time_lag=M, noise=1e12, length2=l2) == 314
    assert mse_index(grid, kappa, 314, time_lag=M, noise=1e-6, length2=l2) > 600
    # no model scale (θ above m/(κe)): released as selected
    assert mse_index(grid, 1e3, 1000, time_lag=M, noise=n, length2=l2) == 1000


def test_lift_moves_the_peak_towards_the_least_error_on_an_exponential_tail():
    # whole-minute durations ⌊Exp(60)⌋ ≤ 1440 (the score's own model): the score peaks far
    # below the θ of least predicted error; the lift lands near it (planner, exact prefix)
    rng = np.random.default_rng(11)
    x = np.minimum(np.floor(rng.exponential(60.0, M)), 1440.0)
    r = 1 << 20
    grid = tops_candidates(1440.0, 256)
    kappa = tops_kappa(time_lag=M, horizon=r, epsilon_perturb=0.05)
    plan = plan_tops(
        x,
        bound=1440.0,
        horizon=r,
        epsilon_perturb=0.05,
        leaf_size=4096,
        queries=500,
        candidates=256,
    )
    peak = int(np.searchsorted(grid, plan.optimizer_threshold))
    n = public_error(horizon=r, epsilon_perturb=0.05, fanout=16, sizes=leaf_candidates(M, r))
    lifted = grid[mse_index(grid, kappa, peak, time_lag=M, noise=n, length2=mean_square_length(r))]
    best = plan.best.threshold
    assert abs(lifted - best) < 0.25 * abs(plan.optimizer_threshold - best)
    mse = dict(zip(plan.candidates.tolist(), plan.mse.tolist(), strict=True))
    assert mse[lifted] < 0.5 * mse[plan.optimizer_threshold]


def test_stream_default_releases_the_lifted_selection_deterministically():
    rng = np.random.default_rng(12)
    x = np.minimum(np.floor(rng.exponential(60.0, 8192 + 50_000)), 1440.0)
    kw = {"bound": 1440.0, "epsilon_threshold": 1.0, "epsilon_perturb": 1.0, "time_lag": 8192}
    lifted = tops_release(x, **kw, seed=9, shape_rule="paper")
    plain = tops_release(x, **kw, seed=9, shape_rule="paper", threshold_correction="overshoot")
    th, base = lifted.threshold_release, plain.threshold_release
    assert th.correction == "mse" and th.selected == base.selected
    assert th.score == base.score == "paper"  # "auto": c·ln(m/K₀) = 357 fits under B = 1440
    n = public_error(horizon=50_000, epsilon_perturb=1.0, fanout=16,
                     sizes=np.array([lifted.leaf_size]), levels=lifted.levels)  # fmt: skip
    want = mse_index(
        th.candidates, local_slope(base), base.index, time_lag=8192, noise=n,
        length2=mean_square_length(50_000),
    )  # fmt: skip
    assert th.index == want >= base.index and th.threshold == th.candidates[want]
    assert tops_release(x, **kw, seed=9, shape_rule="paper").threshold == lifted.threshold


def test_stream_default_does_not_lift_a_scale_free_selection():
    rng = np.random.default_rng(12)
    x = np.minimum(np.floor(rng.exponential(60.0, 8192 + 50_000)), 1440.0)
    kw = {"bound": 1440.0, "epsilon_threshold": 1.0, "epsilon_perturb": 1.0, "time_lag": 8192}
    kw |= {"shape_rule": "paper", "threshold_score": "scale_free", "seed": 9}
    default, plain = tops_release(x, **kw), tops_release(x, **kw, threshold_correction="none")
    assert default.threshold_release.score == "scale_free"
    assert default.threshold_release.index == plain.threshold_release.index
    # the same stream under the paper's score is lifted (the test above): the lift is the
    # score's, not the stream's
    lifted = tops_release(x, **(kw | {"threshold_score": "paper"}))
    unlifted = tops_release(x, **(kw | {"threshold_score": "paper"}), threshold_correction="none")
    assert lifted.threshold > unlifted.threshold


# -- the scale-free score --------------------------------------------------------------------


def test_scale_free_selection_does_not_depend_on_the_units():
    rng = np.random.default_rng(13)
    x = np.minimum(rng.exponential(2.0, M), 30.0)
    kw = {"horizon": 1 << 20, "epsilon_perturb": 0.05, "epsilon": 0.05}
    for seed in range(5):
        one = tops_threshold(x, bound=30.0, score="scale_free", seed=seed, **kw)
        big = tops_threshold(x * 60.0, bound=1800.0, score="scale_free", seed=seed, **kw)
        assert one.score == big.score == "scale_free" and one.index == big.index
    # the paper's score is not: κθ grows with the units while the counts do not
    paper = [tops_threshold(x * a, bound=30.0 * a, seed=1, **kw).index for a in (1.0, 60.0)]
    assert paper[0] != paper[1]


@pytest.mark.parametrize("scale", [0.7, 60.0])
def test_scale_free_peak_is_the_paper_peak_at_the_true_scale(scale):
    # on an exponential tail the paper's score with c = the tail's scale and the scale-free
    # score (no c) peak at the same θ, c·ln(m/K₀)
    rng = np.random.default_rng(14)
    x = rng.exponential(scale, M)
    grid = tops_candidates(40.0 * scale, 4096)
    kappa = tops_kappa(time_lag=M, horizon=1 << 20, epsilon_perturb=0.05, c=scale)
    free = grid[np.argmax(tops_scores(x, grid, kappa, score="scale_free", c=scale))]
    paper = grid[np.argmax(tops_scores(x, grid, kappa, c=scale))]
    assert abs(free - paper) <= 0.05 * paper
    k0 = kappa * scale
    assert abs(free - scale * np.log(M / k0)) <= 0.1 * free


def test_scale_free_falls_back_to_the_paper_score_where_its_tilt_outweighs_the_prefix():
    # m = 200: the tilt's range over the grid (≈ 409) exceeds m/2, where ln θ would pull θ
    # towards the smallest candidate
    x = np.random.default_rng(15).exponential(1.0, 200)
    kw = {"bound": 20.0, "epsilon": 1.0, "horizon": 500, "epsilon_perturb": 1.0, "fanout": 4}
    th = tops_threshold(x, score="scale_free", seed=3, **kw)
    assert th.score == "paper"
    assert th.index == tops_threshold(x, seed=3, **kw).index
    assert th.privacy.parameters["score"] == "paper"


def test_scale_free_guard_keeps_the_paper_score_on_a_prefix_mostly_of_zeros():
    # durations with 90 % zeros: the ln θ tilt would reward θ → θ₁ more than the 6,500
    # positive values cost; the guard's released count sees too few of them and the paper's
    # score is used (its θ stays in the tail)
    rng = np.random.default_rng(16)
    x = np.minimum(np.floor(rng.exponential(60.0, M)), 1440.0)
    kw = {"bound": 1440.0, "horizon": 1 << 20, "epsilon_perturb": 0.05, "score": "scale_free"}
    dense = tops_threshold(x, epsilon=0.01, seed=2, **kw)
    assert dense.score == "scale_free" and dense.threshold > 200.0
    y = np.where(rng.random(M) < 0.9, 0.0, x)
    sparse = tops_threshold(y, epsilon=0.01, seed=2, **kw)
    assert sparse.score == "paper" and sparse.threshold > 60.0
    truth = np.count_nonzero(y > sparse.candidates[0])
    assert abs(sparse.positives - truth) < 10_000  # Laplace scale 1/(0.1·0.01) = 1,000
    # the tilt's range the count is held against (public)
    from mechanisms.tops._threshold import GUARD_RATIO, tilt_range

    rng_ = tilt_range(sparse.kappa, 60.0, M, sparse.candidates)
    assert sparse.positives < GUARD_RATIO * rng_ < dense.positives


def test_auto_score_uses_the_paper_score_where_its_c_fits_under_the_bound():
    from mechanisms.tops._threshold import auto_score

    for bound, want in ((36.0, "scale_free"), (100.0, "scale_free"), (1440.0, "paper")):
        for eps_r in (0.05, 1.0):
            kappa = tops_kappa(time_lag=M, horizon=1 << 20, epsilon_perturb=eps_r)
            k0 = kappa * 60.0
            assert bool(60.0 * np.log(M / k0) > bound) == (want == "scale_free")
            assert auto_score(kappa=kappa, c=60.0, time_lag=M, bound=bound) == want
            s = ToPSStream(
                bound=bound, epsilon_threshold=0.1, epsilon_perturb=eps_r, time_lag=M,
                horizon=1 << 20, seed=1,
            )  # fmt: skip
            assert s.score == want
    # c in the values' units: the same data in kW with c = 1 kW keeps the paper's score
    kappa = tops_kappa(time_lag=M, horizon=1 << 20, epsilon_perturb=0.05, c=1.0)
    assert auto_score(kappa=kappa, c=1.0, time_lag=M, bound=36.0) == "paper"
