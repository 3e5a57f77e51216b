"""Audits of the binary-tree (BT) counter in ``mechanisms.counting._tree``.

Neighbours: a base stream D with σ(i) = 0 and D' with σ(i) = B, for a position i early (1), in
the middle and late (n). Values above B are not a neighbour here: the BT release refuses them
(``DomainError``) before drawing anything; clipping belongs to the PAK audit.

Statistic. Changing σ(i) shifts by B every node containing i (one per level: L = ⌊log₂ n⌋ + 1
nodes when n is a power of two). The most powerful statistic is the log-likelihood ratio of
those nodes, Σₕ (|yₕ − a'ₕ| − |yₕ − aₕ|) with aₕ, a'ₕ the true node sums on D and D' (the scale
is a common factor and drops out). It is computed exactly, in integer units of the lattice γ.
Its top value, reached when every node lands below aₕ (probability 2^−L on D), has likelihood
ratio exactly e^ε. The final prefix sum alone, or the plain sum of the nodes, has too little
power: at n = 8 and N = 20,000 the sum of the nodes does not catch a halved scale.

Under-noised variants, run through the same code path with a larger ε than claimed:
the scale halved (ε × 2), and the paper's node count log₂ n instead of ⌊log₂ n⌋ + 1
(ε × L/(L − 1); [PAK19] §II-D's "B log₂ n / ε", which the module notes say undercounts).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _audit import audit, audit_samples

from mechanisms import (
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_release,
    bit_source,
    dyadic_cover,
)

EPSILON = 1.0
BOUND = 1.0
N_FAST = 10_000
N_SLOW = 100_000


def positions(n: int) -> tuple[int, int, int]:
    """The audited steps: early, middle, late."""
    return (1, n // 2 + 1, n)


def base_stream(n: int) -> np.ndarray:
    """D: fixed values in [0, B] on a 1/8 grid (exact on the lattice), 0 at the audited steps
    (so one D serves every position)."""
    d = np.random.default_rng(n).integers(0, 9, size=n) / 8.0 * BOUND
    d[[i - 1 for i in positions(n)]] = 0.0
    return d


def containing_nodes(i: int, n: int) -> list[tuple[int, int]]:
    """(level, index) of the complete nodes that contain step i (1-based)."""
    out = []
    for h in range(n.bit_length()):
        k = (i - 1) >> h
        if k < n >> h:
            out.append((h, k))
    return out


def neighbour(n: int, i: int) -> np.ndarray:
    """D': D with σ(i) = B."""
    d_prime = base_stream(n)
    d_prime[i - 1] = BOUND
    return d_prime


def _audited_nodes(n: int) -> list[tuple[int, int]]:
    return sorted({node for i in positions(n) for node in containing_nodes(i, n)})


@functools.cache
def _node_units(n: int, epsilon: float, runs: int, stream: bytes, tag: int) -> np.ndarray:
    """``runs`` BT releases of one stream; the noisy nodes containing an audited step, in
    integer units of γ (exact), one row per run, columns in ``_audited_nodes(n)`` order."""
    values = np.frombuffer(stream, dtype=np.float64)
    bits = bit_source(np.random.SeedSequence([n, runs, tag]))
    cols = _audited_nodes(n)
    out = np.empty((runs, len(cols)), dtype=np.int64)
    for r in range(runs):
        rel = binary_tree_release(values, epsilon=epsilon, bound=BOUND, seed=bits)
        gamma = rel.noise.granularity
        out[r] = [round(rel.nodes[h][k] / gamma) for h, k in cols]
    out.setflags(write=False)
    return out


def llr_statistic(units: np.ndarray, n: int, i: int, gamma: float) -> np.ndarray:
    """Σ over the nodes containing i of |y − a'| − |y − a|, in exact lattice units."""
    d = base_stream(n)
    cols = _audited_nodes(n)
    total = np.zeros(units.shape[0], dtype=np.int64)
    for h, k in containing_nodes(i, n):
        a = round(d[k << h : (k + 1) << h].sum() / gamma)
        a_prime = a + round(BOUND / gamma)
        y = units[:, cols.index((h, k))]
        total += np.abs(y - a_prime) - np.abs(y - a)
    return total.astype(np.float64)


def tree_audit(n: int, i: int, *, epsilon: float, runs: int, tag: int = 0):
    """Audit the BT release run at ``epsilon`` on D and D' = D with σ(i) = B."""
    d, d_prime = base_stream(n), neighbour(n, i)
    gamma = binary_tree_noise(n, epsilon=epsilon, bound=BOUND).granularity
    units_d = _node_units(n, epsilon, runs, d.tobytes(), 2 * tag)  # shared by the positions
    units_dp = _node_units(n, epsilon, runs, d_prime.tobytes(), 2 * tag + 1 + 2 * i)
    return audit_samples(llr_statistic(units_d, n, i, gamma), llr_statistic(units_dp, n, i, gamma))


def test_containing_nodes_matches_the_tree():
    # Every step of a power-of-two tree lies in one node per level; the covers agree.
    assert containing_nodes(1, 8) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert containing_nodes(8, 8) == [(0, 7), (1, 3), (2, 1), (3, 0)]
    assert containing_nodes(12, 12) == [(0, 11), (1, 5), (2, 2)]  # [1..8] only at level 3
    for i in range(1, 13):
        for h, k in containing_nodes(i, 12):
            assert k << h < i <= (k + 1) << h
    assert set(dyadic_cover(8, 8)) <= set(containing_nodes(8, 8))


def test_llr_statistic_separates_the_neighbours_without_noise():
    n, i, gamma = 8, 5, 2.0**-20
    cols = _audited_nodes(n)
    exact = [
        [round(s[k << h : (k + 1) << h].sum() / gamma) for h, k in cols]
        for s in (base_stream(n), neighbour(n, i))
    ]
    stat = llr_statistic(np.array(exact, dtype=np.int64), n, i, gamma)
    top = 4 * round(BOUND / gamma)
    assert stat.tolist() == [top, -top]  # D at +L·B, D' at −L·B: the extreme ratio


# -- fast tier: n = 8 (L = 4), N = 10,000 -----------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("i", [1, 5, 8], ids=["early", "middle", "late"])
def test_tree_audit_passes_at_claimed_epsilon(i):
    result = tree_audit(8, i, epsilon=EPSILON, runs=N_FAST)
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.3 * EPSILON, result  # the statistic has power


@pytest.mark.statistical
def test_tree_audit_fails_with_scale_halved():
    result = tree_audit(8, 5, epsilon=2.0 * EPSILON, runs=N_FAST)
    assert not result.passes(EPSILON), result


@pytest.mark.statistical
def test_final_sums_audit():
    # The vectorised final-sum path draws its own noise: c(σ, n) moves by B under a change,
    # with noise of scale (L·B + γ)/ε, so its own loss is ε/L. Real passes, ε × 2 fails.
    # n = 7, L = 3: c(σ, 7) = [1..4] + [5..6] + [7]; step 6 lies in [5..6].
    d = np.array([0.5, 0.25, 1.0, 0.0, 0.125, 0.0, 0.75])
    d_prime = d.copy()
    d_prime[5] = BOUND

    def final(eps):
        def statistic(x, runs, bits):
            return binary_tree_final_sums(x, epsilon=eps, bound=BOUND, repetitions=runs, seed=bits)

        return statistic

    claim = EPSILON / 3
    real = audit(final(EPSILON), d, d_prime, n=1_000_000, seed=21)
    assert real.passes(claim), real
    weak = audit(final(2 * EPSILON), d, d_prime, n=1_000_000, seed=21)
    assert not weak.passes(claim), weak


# -- slow tier: n = 64 (L = 7) and n = 12, and the paper's node count ----------------------------


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize(("n", "i"), [(64, 1), (64, 33), (64, 64), (12, 12)])
def test_tree_audit_slow(n, i):
    real = tree_audit(n, i, epsilon=EPSILON, runs=N_SLOW, tag=1)
    assert real.passes(EPSILON), real
    weak = tree_audit(n, i, epsilon=2.0 * EPSILON, runs=N_SLOW, tag=1)
    assert not weak.passes(EPSILON), weak


@pytest.mark.slow
@pytest.mark.statistical
def test_tree_audit_slow_detects_the_papers_node_count():
    # Noise for log₂ 8 = 3 levels while a step lies in 4 nodes: true loss 4/3·ε.
    result = tree_audit(8, 1, epsilon=EPSILON * 4 / 3, runs=N_SLOW, tag=2)
    assert not result.passes(EPSILON), result
