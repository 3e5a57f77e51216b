"""Privacy audit of the split default release's measurement
(dpstream.engine._auto_split.measure_auto_nodes).

The split k="auto" period draws each group's noise from its own stream (an internal node
alone, the leaf children of a node together), with each level's noise calibrated for the whole
level's node count (``level_sizes``) at the plan's budget times the level's share. The audit
runs the real function on a level of ``N`` leaves under one parent (one group: each leaf is one
run of the mechanism) for D and for its (w, α)-neighbour (every value of the period moved by
α), and reduces each leaf's k noisy samples to their log-likelihood ratio. It passes at the
level's ε (budget x share, [FV19] Theorem 13); a twin whose plan claims a 4x larger budget
(4x less noise) fails at the same claim.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit

from dpstream.engine._auto_split import measure_auto_nodes
from dpstream.pipelines._autoplan import _config
from mechanisms.optstream._estimates import perturb_noise
from planner._stream_plan import PeriodPlan

N = 100_000
W, K, ALPHA, EPS = 4, 2, 2.0, 1.0
SHARES = (0.5, 0.5)
BASE = np.array([50.0, 40.0, 45.0, 60.0])
NEIGHBOUR = BASE + ALPHA
EPS_LEVEL = EPS * SHARES[1]  # the leaf level's ε per window
CFG = _config(
    epsilon=EPS, alpha=ALPHA, w=W, delta=None, noise="laplace", target="all",
    level_shares=None, hierarchy=None, nodes=["x"], prior=False,
)  # fmt: skip


def _plan(budget: float) -> PeriodPlan:
    return PeriodPlan(
        k=K, noise="laplace", shares=SHARES, budget=budget, predicted=0.0,
        predicted_nodes=np.zeros(N), variances=np.ones((N, W)), sample_variance=np.ones(N),
        basis="released",
    )  # fmt: skip


def statistic(plan: PeriodPlan):
    pos = plan.positions(W)
    scale = perturb_noise(k=K, alpha=ALPHA, epsilon=EPS_LEVEL, n_nodes=N).scale

    def run(x, n, bits):
        est = measure_auto_nodes(
            np.broadcast_to(x, (n, W)).copy(),
            plan,
            cfg=CFG,
            level=np.ones(n, dtype=np.int64),
            level_sizes=(1, N),
            rows=np.arange(1, n + 1),
            parent_rows=np.zeros(n, dtype=np.int64),
            is_leaf=np.ones(n, dtype=bool),
            stream=lambda row, kind: bits,
        )
        y = est[:, pos]  # the noisy samples (interpolation keeps them)
        return (np.abs(y - NEIGHBOUR[pos]) - np.abs(y - BASE[pos])).sum(axis=1) / scale

    return run


@pytest.mark.statistical
def test_split_auto_measurement_audit_passes_at_the_level_epsilon():
    result = audit(statistic(_plan(EPS)), BASE, NEIGHBOUR, n=N, seed=73)
    assert result.passes(EPS_LEVEL), result
    assert result.epsilon_lb > 0.5 * EPS_LEVEL, result


@pytest.mark.statistical
def test_split_auto_measurement_audit_fails_when_under_noised():
    result = audit(statistic(_plan(4 * EPS)), BASE, NEIGHBOUR, n=N, seed=73)
    assert not result.passes(EPS_LEVEL), result
