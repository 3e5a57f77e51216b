"""Privacy audit of the split period's measurement (dpstream.engine._subtree.measure_nodes).

A split period draws each group's noise from its own stream (an internal node alone, the leaf
children of a node together) with the level's calibration from ``SplitSpec.level_sizes``.
The audit runs the real function on a level of ``N`` leaves under one parent (one group: each
leaf is one run of the mechanism) for D and for its (w, α)-neighbour (every value of the
period moved by α), with ε_p of the equal-sampling split, and reduces each leaf's k noisy
samples to their log-likelihood ratio. It passes at ε_p; a twin whose spec claims a 4x larger
ε (4x less noise) fails at the same claim.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit

from dpstream.engine._subtree import SplitSpec, measure_nodes
from mechanisms.optstream._estimates import optstream_split, perturb_noise
from mechanisms.optstream._sampling import sample_equal_window
from postproc import FeatureSet

N = 100_000
W, K, ALPHA, EPS = 4, 2, 2.0, 1.0
BASE = np.array([50.0, 40.0, 45.0, 60.0])
NEIGHBOUR = BASE + ALPHA
FS = FeatureSet.from_breaks(W, [])  # singletons only: every unit of budget to Perturb
POS = sample_equal_window(W, K, W)
MASKS = np.zeros((2, W), dtype=bool)
MASKS[:, POS] = True
#: ε_p of the leaf level: two levels (ε/2 each), no feature queries, free sampler
EPS_P = optstream_split(EPS, sampling="equal", n_levels=2, has_features=False).perturb


def _spec(eps: float) -> SplitSpec:
    return SplitSpec(epsilon=eps, w=W, k=K, alpha=ALPHA, features=FS, level_sizes=(1, N))


def statistic(spec: SplitSpec):
    scale = perturb_noise(k=K, alpha=ALPHA, epsilon=EPS_P, n_nodes=N).scale

    def run(x, n, bits):
        est, _ = measure_nodes(
            np.broadcast_to(x, (n, W)).copy(),
            spec=spec,
            depths=np.ones(n, dtype=np.int64),
            rows=np.arange(1, n + 1),
            parent_rows=np.zeros(n, dtype=np.int64),
            is_leaf=np.ones(n, dtype=bool),
            stream=lambda row, kind: bits,
            masks=MASKS,
        )
        y = est[:, POS]  # the noisy samples (interpolation keeps them)
        return (np.abs(y - NEIGHBOUR[POS]) - np.abs(y - BASE[POS])).sum(axis=1) / scale

    return run


@pytest.mark.statistical
def test_split_measurement_audit_passes_at_epsilon_p():
    eps_p = EPS_P
    result = audit(statistic(_spec(EPS)), BASE, NEIGHBOUR, n=N, seed=71)
    assert result.passes(eps_p), result
    assert result.epsilon_lb > 0.5 * eps_p, result


@pytest.mark.statistical
def test_split_measurement_audit_fails_when_under_noised():
    eps_p = EPS_P
    result = audit(statistic(_spec(4 * EPS)), BASE, NEIGHBOUR, n=N, seed=71)
    assert not result.passes(eps_p), result
