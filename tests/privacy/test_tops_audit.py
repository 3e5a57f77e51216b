"""Audits of ToPS ([ToPS21]): the threshold optimizer and the perturber, each with an
under-noised twin that must fail.

Threshold optimizer (``tops_threshold``, ε-DP). Two public candidates θ = 1, 2 with c huge
(κ ≈ 0), so q(1) = −m₁ and q(2) = 0 with m₁ = #{v > 1}. D has m₁ = 2, the neighbour D' moves one
of those values below 1 (m₁ = 1): the scores move by one, monotonically. Statistic: the chosen
index. Report-noisy-max: P[pick θ = 1] = P[Z₁ − Z₂ > m₁]; at ε = 1 the ratio of D' to D is
≈ 2.0 (loss 0.71). Exponential mechanism: e^{−εm₁}/(1 + e^{−εm₁}), ratio ≈ 2.3 (loss 0.82).
Twin: the selection run with ε × 3 while ε is claimed (noise too small): loss ≈ 2.5 and 2.95.

Perturber (``ToPSStream`` with a public θ: ε_r-DP). F = 2, g = 1, horizon 2: a tree of L = 2
levels (two leaves and a root) per two steps. A stream of 2N steps runs N independent trees
through the real code path (fresh noise drawn and projected per tree), i.e. N i.i.d. samples of
one tree's release. D: zeros; D': the first step of every tree at θ = B. Statistic: the sum of
the released nodes containing the changed step (leaf + root) = (Aᵀy)₀, which the consistent
release determines exactly (normal equations AᵀA·x̂ = Aᵀy): shift L·θ = 2θ against two nodes of
Laplace noise of scale Lθ/ε. Twin: ε_r not split over the L levels (scale θ/ε): loss 2ε.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit_samples

from mechanisms import ToPSStream, bit_source, tops_candidates, tops_kappa, tops_threshold
from mechanisms.tops._threshold import _select

EPSILON = 1.0
N_THRESHOLD = 20_000
N_TREES = 20_000


# -- threshold optimizer ---------------------------------------------------------------------


def prefix(above: int) -> np.ndarray:
    """20 values: ``above`` of them at 1.5 (> θ₁ = 1), the rest at 0.5."""
    x = np.full(20, 0.5)
    x[:above] = 1.5
    return x


KW = {
    "bound": 2.0,
    "horizon": 1000,
    "epsilon_perturb": 1.0,
    "c": 1e12,  # κ ≈ 1e-10: q(θ) = −m_θ up to a negligible public tilt
    "candidates": [1.0, 2.0],
}


def choices(
    x: np.ndarray, n: int, seed: int, *, method: str, epsilon: float, score: str = "paper"
) -> np.ndarray:
    """``n`` selections by the mechanism's own selection code (``_select``: scores + draw),
    skipping only the public validation of ``tops_threshold`` (pinned equal below)."""
    bits = bit_source(seed)
    grid = tops_candidates(2.0, KW["candidates"])
    kappa = tops_kappa(time_lag=x.size, horizon=1000, epsilon_perturb=1.0, c=KW["c"])
    out = [_select(x, grid, kappa, epsilon, method, bits, c=KW["c"], score=score) for _ in range(n)]
    # the scale-free score's guard decides the score used, which is public: part of the statistic
    return np.array([t.index + 2 * (t.score == "scale_free") for t in out], dtype=float)


@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_draw_path_is_the_public_path(method):
    x = prefix(2)
    bits = bit_source(7)
    public = [
        tops_threshold(x, epsilon=EPSILON, method=method, seed=bits, **KW).index for _ in range(200)
    ]
    assert public == choices(x, 200, 7, method=method, epsilon=EPSILON).tolist()
    assert 0 < sum(public) < 200


def test_setup_scores_differ_by_one():
    from mechanisms import tops_scores

    s_d = tops_scores(prefix(2), np.array([1.0, 2.0]), 0.0)
    s_dp = tops_scores(prefix(1), np.array([1.0, 2.0]), 0.0)
    assert s_d.tolist() == [-2.0, 0.0] and s_dp.tolist() == [-1.0, 0.0]


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_threshold_audit_passes_at_claimed_epsilon(method):
    out_d = choices(prefix(2), N_THRESHOLD, 1, method=method, epsilon=EPSILON)
    out_dp = choices(prefix(1), N_THRESHOLD, 2, method=method, epsilon=EPSILON)
    result = audit_samples(out_d, out_dp)
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.4, result  # the statistic has power


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_threshold_audit_fails_when_under_noised(method):
    out_d = choices(prefix(2), N_THRESHOLD, 3, method=method, epsilon=3 * EPSILON)
    out_dp = choices(prefix(1), N_THRESHOLD, 4, method=method, epsilon=3 * EPSILON)
    result = audit_samples(out_d, out_dp)
    assert not result.passes(EPSILON), result


# The scale-free score (issue 23): the same counts with the public tilt K₀ln(m/K₀)·ln θ, K₀ = κc
# unit-free (here K₀ ≈ 1.71, tilt ≈ 4.2·ln θ: q = (−m₁, −2.9)); one value moved below θ = 1
# still moves q(1) by one and q(2) not at all. Its guard, the count of values above θ₁ = 1
# (2 in D, 1 in D') at ε/10, is released first and decides the score (scale-free when the
# count is ≥ 2·2.9, else the paper's): the statistic is (index, score used), and both branches
# occur. The selection gets 9ε/10. Twin: ε × 3.


def test_scale_free_setup_takes_both_branches_of_its_guard():
    runs = [
        tops_threshold(prefix(2), epsilon=EPSILON, seed=s, score="scale_free", **KW)
        for s in range(40)
    ]
    assert {t.score for t in runs} == {"scale_free", "paper"}  # the guard's two branches
    assert all(t.positives is not None for t in runs)
    bits = bit_source(5)
    public = [
        tops_threshold(prefix(2), epsilon=EPSILON, seed=bits, score="scale_free", **KW)
        for _ in range(50)
    ]
    assert choices(
        prefix(2), 50, 5, method="laplace", epsilon=EPSILON, score="scale_free"
    ).tolist() == [t.index + 2 * (t.score == "scale_free") for t in public]


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["laplace"])  # the score is the same for both methods
def test_scale_free_threshold_audit_passes_at_claimed_epsilon(method):
    kw = {"method": method, "epsilon": EPSILON, "score": "scale_free"}
    result = audit_samples(
        choices(prefix(2), N_THRESHOLD, 31, **kw), choices(prefix(1), N_THRESHOLD, 32, **kw)
    )
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.4, result  # the statistic has power


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["laplace"])  # the score is the same for both methods
def test_scale_free_threshold_audit_fails_when_under_noised(method):
    kw = {"method": method, "epsilon": 3 * EPSILON, "score": "scale_free"}
    result = audit_samples(
        choices(prefix(2), N_THRESHOLD, 33, **kw), choices(prefix(1), N_THRESHOLD, 34, **kw)
    )
    assert not result.passes(EPSILON), result


# -- perturber -------------------------------------------------------------------------------


def tree_statistics(changed: bool, seed: int, *, epsilon: float, trees: int = N_TREES):
    """(Aᵀy)₀ = leaf₀ + root of ``trees`` independent two-leaf trees."""
    values = np.zeros(2 * trees)
    if changed:
        values[0::2] = 1.0  # θ = B = 1
    stream = ToPSStream(
        bound=1.0,
        epsilon_threshold=1.0,
        epsilon_perturb=epsilon,
        time_lag=0,
        horizon=2,
        fanout=2,
        leaf_size=1,
        levels=2,
        threshold=1.0,
        seed=seed,
    )
    stream.extend(values)
    rel = stream.release()
    assert rel.levels == 2 and rel.tree_size == 2
    return rel.nodes[0][0::2] + rel.nodes[1]


def test_perturber_statistic_without_noise_is_the_shift():
    quiet = tree_statistics(True, 1, epsilon=1e9, trees=50)
    quiet -= tree_statistics(False, 1, epsilon=1e9, trees=50)
    assert np.allclose(quiet, 2.0, atol=1e-6)  # L·θ


@pytest.mark.statistical
def test_perturber_audit_passes_at_claimed_epsilon():
    result = audit_samples(
        tree_statistics(False, 11, epsilon=EPSILON), tree_statistics(True, 12, epsilon=EPSILON)
    )
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.3, result


@pytest.mark.statistical
def test_perturber_audit_fails_without_splitting_epsilon_over_levels():
    levels = 2
    result = audit_samples(
        tree_statistics(False, 13, epsilon=levels * EPSILON),
        tree_statistics(True, 14, epsilon=levels * EPSILON),
    )
    assert not result.passes(EPSILON), result


# -- shape rule (the smoother's variation statistic) -------------------------------------------
#
# ``release_deviation`` releases (A(g))_g of the prefix clipped to θ with Laplace noise of its L1
# sensitivity (mechanisms.tops._shape). m = 32, θ = 1: candidates g ∈ {1, 2}, A(1) ≡ 0, so the
# whole sensitivity Δ = 1.5·(2 − 1)/(2·15) = 0.05 sits on A(2). D: zeros; D': a 1 at the first
# step of block 1, which moves A(2) by exactly Δ (tight: test_tops_shape). Statistic: the
# released A(2). Twin: the noise of 3ε while ε is claimed.


def deviations(changed: bool, n: int, seed: int, *, epsilon: float) -> np.ndarray:
    from mechanisms.tops._shape import leaf_candidates, release_deviation

    x = np.zeros(32)
    if changed:
        x[2] = 1.0
    sizes = leaf_candidates(32, 10**6)
    bits = bit_source(seed)
    return np.array([release_deviation(x, 1.0, sizes, epsilon, bits)[0][1] for _ in range(n)])


def test_shape_statistic_without_noise_moves_by_the_sensitivity():
    from mechanisms.tops._shape import leaf_candidates, partial_errors, release_deviation

    sizes = leaf_candidates(32, 10**6)
    x = np.zeros(32)
    y = x.copy()
    y[2] = 1.0
    shift = np.abs(partial_errors(y, sizes)[0] - partial_errors(x, sizes)[0]).sum()
    noise = release_deviation(x, 1.0, sizes, 1.0, bit_source(0))[1]
    assert shift == pytest.approx(noise.sensitivity) and noise.sensitivity == pytest.approx(0.05)


@pytest.mark.statistical
def test_shape_audit_passes_at_claimed_epsilon():
    result = audit_samples(
        deviations(False, N_THRESHOLD, 21, epsilon=EPSILON),
        deviations(True, N_THRESHOLD, 22, epsilon=EPSILON),
    )
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.4, result


@pytest.mark.statistical
def test_shape_audit_fails_when_under_noised():
    result = audit_samples(
        deviations(False, N_THRESHOLD, 23, epsilon=3 * EPSILON),
        deviations(True, N_THRESHOLD, 24, epsilon=3 * EPSILON),
    )
    assert not result.passes(EPSILON), result
