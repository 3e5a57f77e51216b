"""In-stream planning: window budgets, the rule, the variogram and the choice of k and shares."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from mechanisms.optstream._sampling import interpolation_matrix, sample_equal
from planner._roughness import kriging_bias, period_roughness, variogram
from planner._stream_plan import (
    default_candidates,
    plan_period,
    rule_k,
    share_grid,
    window_budget,
)


def _m(w: int, k: int) -> np.ndarray:
    mask = np.zeros((1, w), dtype=bool)
    mask[0, sample_equal(w, k)] = True
    return interpolation_matrix(mask)[0]


def _window_costs(plans: list[tuple[np.ndarray, float]], w: int) -> float:
    """Largest loss of any w consecutive steps: Σ over samples in the window of E_p/k_p."""
    cost = np.concatenate(
        [np.where(np.isin(np.arange(w), pos), budget / pos.size, 0.0) for pos, budget in plans]
    )
    return max(cost[s : s + w].sum() for s in range(cost.size - w + 1))


def test_window_budget_same_k_keeps_the_whole_budget():
    pos = sample_equal(48, 6)
    assert window_budget((pos, 1.0 / 6), pos, 1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("k_prev, k_next", [(2, 48), (48, 2), (4, 16), (6, 12), (1, 48), (48, 1)])
def test_window_budget_keeps_every_window_within_the_total(k_prev, k_next):
    w = 48
    prev, nxt = sample_equal(w, k_prev), sample_equal(w, k_next)
    budget = window_budget((prev, 1.0 / prev.size), nxt, 1.0)
    assert 0 < budget <= 1.0
    assert _window_costs([(prev, 1.0), (nxt, budget)], w) <= 1.0 + 1e-9
    # and it is tight: 1% more would overspend some window (unless capped by the total)
    if budget < 1.0 - 1e-9:
        assert _window_costs([(prev, 1.0), (nxt, budget * 1.01)], w) > 1.0


def test_window_budget_of_a_naive_switch_would_overspend():
    # the reason window_budget exists: k = 2 then k = 48 at full budget costs 1.48 ε
    w = 48
    assert _window_costs([(sample_equal(w, 2), 1.0), (sample_equal(w, 48), 1.0)], w) > 1.4


def test_kriging_bias_of_a_random_walk_is_the_brownian_bridge():
    # γ(h) = h/2 (unit increments): the error at λ between knots d apart has variance λ(1-λ)d
    w = 9
    gamma = (np.arange(w) / 2.0)[None, :]
    b = kriging_bias(gamma, _m(w, 3))[0]  # samples at 0, 4, 8
    expected = [0, 0.75, 1.0, 0.75, 0, 0.75, 1.0, 0.75, 0]
    np.testing.assert_allclose(b, expected, atol=1e-12)


def test_variogram_takes_the_known_noise_out():
    rng = np.random.default_rng(3)  # simulation only: nothing is released
    w, p = 48, 400
    walk = np.cumsum(rng.normal(0.0, 1.0, (p, w)), axis=1)  # γ(h) = h/2
    noise_sd = 3.0
    stats = None
    for i in range(p):
        noisy = walk[i] + rng.normal(0.0, noise_sd, w)
        s = period_roughness(noisy[None], np.full((1, w), noise_sd**2))
        stats = s if stats is None else stats + s
    g = variogram(stats)[0]
    np.testing.assert_allclose(g[[1, 4, 8, 16]], [0.5, 2.0, 4.0, 8.0], rtol=0.2)


def test_variogram_of_few_samples_falls_back_to_a_random_walk_to_the_sill():
    w = 48
    x = np.tile(np.sin(np.arange(w) / w * 2 * np.pi) * 10, (1, 1))
    s = np.zeros((1, w), dtype=bool)
    s[0, sample_equal(w, 4)] = True
    g = variogram(period_roughness(x, np.zeros((1, w)), s))
    assert g is not None and g[0, 0] == 0 and np.all(np.diff(g[0]) >= 0)
    assert g[0, 1] > 0  # short lags are never assumed smooth


def test_rule_k_is_data_independent_and_inside_the_candidates():
    assert rule_k(48) == 6
    assert rule_k(48) in default_candidates(48)
    assert 1 in default_candidates(48) and 48 in default_candidates(48)


def test_share_grid_has_equal_and_bottom_up():
    grid = share_grid(2)
    assert (0.5, 0.5) in grid and (0.0, 1.0) in grid
    assert all(abs(sum(g) - 1) < 1e-12 and g[-1] > 0 for g in grid)


def _plan(gamma, alpha, **kw):
    n = 1 if gamma is None else gamma.shape[0]
    return plan_period(
        gamma, matrix=np.eye(n), levels=[np.arange(n)], epsilon=1.0, alpha=alpha, w=48, **kw
    )


def test_plan_takes_every_value_when_the_noise_is_small():
    gamma = (np.arange(48) * 1e6)[None, :].astype(float)  # rough
    assert _plan(gamma, alpha=1.0).k == 48


def test_plan_takes_few_samples_when_the_noise_dominates():
    gamma = (np.arange(48) * 1.0)[None, :].astype(float)
    assert _plan(gamma, alpha=1e3).k <= 3


def test_plan_without_data_uses_the_rule():
    plan = _plan(None, alpha=1.0)
    assert plan.k == rule_k(48) and plan.basis == "rule"


def test_plan_prefers_gaussian_for_many_samples_at_the_users_delta():
    gamma = (np.arange(48) * 1e4)[None, :].astype(float)
    plan = _plan(gamma, alpha=1.0, noises=("laplace", "gaussian"), delta=1e-6)
    assert plan.noise == "gaussian" and plan.k >= 16


def test_plan_shares_follow_the_target():
    # national = a + b; the root target puts budget on the root, the leaf target on the leaves
    matrix = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    levels = [np.array([0]), np.array([1, 2])]
    gamma = np.tile(np.arange(48, dtype=float) * 100.0, (3, 1))
    kw = dict(matrix=matrix, levels=levels, epsilon=1.0, alpha=20.0, w=48)
    root = plan_period(gamma, target="root", **kw)
    leaves = plan_period(gamma, target="leaves", **kw)
    assert root.shares[0] > leaves.shares[0]
    assert leaves.shares == (0.0, 1.0)


def test_plan_rejects_a_bad_target():
    with pytest.raises(ParameterError, match="'target'"):
        _plan(None, alpha=1.0, target="national")


def test_node_errors_keep_each_nodes_interpolation_error_through_the_hierarchy():
    # Root = leaf 1 + leaf 2. The interpolation error is consistent across levels (the same
    # sampled steps), so Algorithm 4 cannot average it away: the root keeps its own B (from
    # its own variogram), and only the noise is combined across levels.
    from planner._stream_plan import _SQRT_2_PI, _node_errors

    s = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    noise = np.array([np.inf, 4.0, 9.0])[:, None]  # root level not measured (bottom-up)
    bias = np.array([[40.0], [10.0], [10.0]])  # root's B > ΣB of the leaves: correlated
    v = (noise + np.where(np.isfinite(noise), bias, 0.0))[None]
    err = _node_errors(v, s, np.where(np.isfinite(noise), bias, 40.0))[0]
    assert err[0] == pytest.approx(_SQRT_2_PI * np.sqrt(4.0 + 9.0 + 40.0))
    assert err[1] == pytest.approx(_SQRT_2_PI * np.sqrt(4.0 + 10.0))
    # the independent model puts the root at √(14 + 19) instead: far below √53
    old = _node_errors(v, s)[0]
    assert old[0] == pytest.approx(_SQRT_2_PI * np.sqrt(14.0 + 19.0))


def test_kriging_bias_is_one_kernel_for_every_node():
    # bias = γ @ K is the kriging identity 2 Σ_j m[t,j] γ(|t−j|) − (M Γ Mᵀ)_tt, node by node
    rng = np.random.default_rng(8)  # simulation only
    w = 48
    gamma = np.cumsum(rng.uniform(0.0, 5.0, (6, w)), axis=1)
    gamma[:, 0] = 0.0
    m = _m(w, 7)
    lag = np.abs(np.arange(w)[:, None] - np.arange(w)[None, :])
    g = gamma[:, lag]
    direct = 2.0 * (m[None] * g).sum(axis=2) - ((m[None] @ g) * m[None]).sum(axis=2)
    np.testing.assert_allclose(
        kriging_bias(gamma, m), np.maximum(direct, 0.0), rtol=1e-12, atol=1e-9
    )
