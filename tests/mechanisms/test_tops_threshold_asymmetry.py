"""The ToPS threshold's asymmetry guard (issue 23): no downward correction when ε·κ·c < STEEP."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ToPSStream, tops_candidates, tops_kappa, tops_threshold
from mechanisms.tops._threshold import DEFAULT_C, STEEP, overshoot_index

# whole-minute durations (B = 1,440, grid of 1,024) as in bench/bench_tops_authors.py --stream
# minutes: m = 65,536, r = 2^20, ε_r = 0.05
_MINUTES = {"time_lag": 65_536, "horizon": 1 << 20, "epsilon_perturb": 0.05}


def _released(grid, kappa, eps, c=DEFAULT_C):
    return np.array([overshoot_index(grid, kappa, eps, j, c=c) for j in range(grid.size)])


def test_tiny_selection_budget_releases_the_selection():
    grid = tops_candidates(1440.0)
    kappa = tops_kappa(**_MINUTES)
    eps = 0.0075  # the selection's share of ε_θ = 0.01 (1/4 goes to the shape statistic)
    assert eps * kappa * DEFAULT_C < STEEP
    assert np.array_equal(_released(grid, kappa, eps), np.arange(grid.size))
    # without the guard (a c that makes εκc large) the same selections are moved down by
    # ≈ 1/(εκ) = 26.5 minutes: what lost 3.3× to the authors' code
    moved = _released(grid, kappa, eps, c=1e6)
    assert grid[300] - grid[moved[300]] == pytest.approx(1 / (eps * kappa), abs=2.0)


def test_guard_leaves_the_identifiable_settings_unchanged():
    # every other cell of bench_tops_authors: εκc ≥ STEEP, so the correction is exactly the
    # one without the guard (same released index for every selection)
    household = {"time_lag": 65_536, "horizon": 456_133}
    cells = [
        (1440.0, _MINUTES, 0.75 * 0.05),
        (1440.0, {**_MINUTES, "epsilon_perturb": 1.0}, 0.75),
        (36.0, {**household, "epsilon_perturb": 1.0}, 0.75),
        (36.0, {**household, "epsilon_perturb": 0.05}, 0.75 * 0.05),
        (36.0, {**household, "epsilon_perturb": 0.05}, 0.75 * 0.1),
    ]
    for bound, kw, eps in cells:
        grid = tops_candidates(bound)
        kappa = tops_kappa(**kw)
        assert eps * kappa * DEFAULT_C >= STEEP
        got = _released(grid, kappa, eps)
        assert np.array_equal(got, _released(grid, kappa, eps, c=1e6))
        assert np.any(got < np.arange(grid.size))  # and the correction does act there
    # the household cells at ε_θ = 0.01 and 0.02 (εκc < STEEP): the identifiability gate and the
    # spread guard already released every selection as is, so they do not change either
    grid = tops_candidates(36.0)
    kappa = tops_kappa(**household, epsilon_perturb=0.05)
    for eps in (0.75 * 0.01, 0.75 * 0.02):
        assert eps * kappa * DEFAULT_C < STEEP
        assert np.array_equal(_released(grid, kappa, eps, c=1e6), np.arange(grid.size))


def test_guard_is_unit_free_and_reaches_the_release_paths():
    x = np.random.default_rng(3).exponential(1.0, 20_000).clip(0.0, 30.0)
    kw = {"bound": 30.0, "horizon": 200_000, "epsilon_perturb": 0.05}
    # κ·c does not depend on c (κ ∝ 1/c): the guard reads the same whatever the units' c
    kc = [tops_kappa(time_lag=x.size, horizon=200_000, epsilon_perturb=0.05, c=c) * c
          for c in (0.1, 1.0, 60.0, 1e4)]  # fmt: skip
    assert kc == pytest.approx([kc[0]] * 4)
    big, tiny = 2.0 * STEEP / kc[0], 0.5 * STEEP / kc[0]  # εκc = 2·STEEP and STEEP/2
    # c = 1 (the data's tail scale): the identifiability gate and the spread guard let the
    # correction act at both budgets, so only the asymmetry guard tells them apart
    moved = [tops_threshold(x, **kw, epsilon=big, c=1.0, seed=s) for s in range(20)]
    kept = [tops_threshold(x, **kw, epsilon=tiny, c=1.0, seed=s) for s in range(20)]
    assert sum(t.index < t.selected for t in moved) >= 15
    assert all(t.index == t.selected for t in kept)
    kappa = kc[0]  # κ at c = 1
    unguarded = [overshoot_index(t.candidates, kappa, tiny, t.selected, c=1e6) for t in kept]
    assert sum(u < t.selected for u, t in zip(unguarded, kept, strict=True)) >= 15
    for eps, corrected in ((big, True), (tiny, False)):
        stream = ToPSStream(
            bound=30.0, epsilon_threshold=eps, epsilon_perturb=0.05, time_lag=x.size,
            horizon=200_000, c=1.0, seed=5, threshold_correction="overshoot", shape_rule="paper",
        )  # fmt: skip
        stream.extend(x)
        rel = stream.threshold_release
        assert rel.epsilon == pytest.approx(eps)
        assert (rel.index < rel.selected) is corrected
