"""Audit of the smooth binary counter (``mechanisms.counting._smooth``) at its claimed (ε, δ).

Neighbours: D with σ(i) = 0 and D' with σ(i) = B, for step i = 1. Statistic:
the sum, in lattice units, of the released noisy nodes that contain step i's leaf — under
independent Gaussian noise of one σ and equal shifts B on each of those nodes this is the
likelihood-ratio statistic, so the most powerful one. (A step lies in at most H released
nodes; the calibration assumes all H.)

Under-noised twin: the same release path with σ divided by 4 (``smooth_binary_noise``
patched), claimed at the same (ε, δ): the audit must catch it. The tree counters' estimates
are post-processing of the BT nodes audited in ``test_tree_audit.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.counting import _smooth

EPSILON = 1.0
DELTA = 2.0**-20
BOUND = 1.0
N_STEPS = 16
RUNS = 20_000


def _stream(i: int, value: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=N_STEPS) / 4.0 * BOUND
    d[i - 1] = value
    return d


def _statistic_for(i: int):
    def statistic(data, n, bits):
        out = np.empty(n)
        for r in range(n):
            rel = _smooth._smooth_release(
                data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits
            )
            q = int(rel.leaves[i - 1])
            end = rel.node_ends << rel.node_levels
            inside = (end - (np.int64(1) << rel.node_levels) < q) & (q <= end)
            out[r] = float(rel.node_values[inside].sum()) / rel.noise.sigma
        return out

    return statistic


@pytest.mark.statistical
def test_smooth_binary_audit_passes_at_the_claimed_epsilon_delta():
    # step 1: its leaf lies in the most released nodes (every level), the largest shift
    x, y = sample_pair(_statistic_for(1), _stream(1, 0.0), _stream(1, BOUND), n=RUNS, seed=11)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
def test_smooth_binary_audit_fails_for_an_under_noised_twin(monkeypatch):
    real = _smooth.smooth_binary_noise

    def quarter(n, **kw):
        noise, sens, rho, h, k = real(n, **kw)
        weak = _smooth.GaussianNoise(
            sigma=noise.sigma / 4.0, magnitude=noise.magnitude, granularity=noise.granularity
        )
        return weak, sens, rho, h, k

    monkeypatch.setattr(_smooth, "smooth_binary_noise", quarter)
    x, y = sample_pair(_statistic_for(1), _stream(1, 0.0), _stream(1, BOUND), n=RUNS, seed=11)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
