"""Audits of the new counters: the smooth binary counter (``mechanisms.counting._smooth``) at its
claimed (ε, δ), and the k-ary tree with negative digits (``_kary``, end of file) at its ε.

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


# -- the k-ary tree with negative digits ([APT24]) ----------------------------------------
#
# n = 4, k = 3: L = 2 levels; step 1 lies in the blocks (0, 1] (level 0) and (0, 3] (level 1),
# and o₁ = c(σ, 1) + η₀₀, o₃ = c(σ, 3) + η₁₀ read them back exactly (module notes of _kary).
# Statistic: the log-likelihood ratio of those two Laplace blocks, Σ (|o − c| − |o − c'|) with
# c, c' the true prefix sums on D and D' (the scale drops out). Its top value has likelihood
# ratio e^{2B/b} = e^{ε·2B/(2B + γ)} < e^ε: tight. Twin: ε × 4 in the noise.

K_STEPS = 4


def _kary_statistic(data, n, bits):
    from mechanisms.counting import _kary

    c0 = np.cumsum(_stream_k(0.0))
    c1 = np.cumsum(_stream_k(BOUND))
    out = np.empty(n)
    for r in range(n):
        rel = _kary._kary_release(data, epsilon=EPSILON, bound=BOUND, bits=bits, fanout=3)
        o = rel.prefix_sums
        out[r] = sum(abs(o[t] - c0[t]) - abs(o[t] - c1[t]) for t in (0, 2))
    return out


def _stream_k(first: float) -> np.ndarray:
    d = np.array([0.0, 0.5, 0.25, 1.0]) * BOUND
    d[0] = first
    return d


@pytest.mark.statistical
def test_kary_audit_passes_at_the_claimed_epsilon():
    x, y = sample_pair(_kary_statistic, _stream_k(0.0), _stream_k(BOUND), n=RUNS, seed=12)
    assert audit_samples(x, y).passes(EPSILON)


@pytest.mark.statistical
def test_kary_audit_fails_for_an_under_noised_twin(monkeypatch):
    from mechanisms.counting import _kary

    real = _kary.kary_noise

    def weak(n, *, epsilon, bound, fanout):
        return real(n, epsilon=4.0 * epsilon, bound=bound, fanout=fanout)

    monkeypatch.setattr(_kary, "kary_noise", weak)
    x, y = sample_pair(_kary_statistic, _stream_k(0.0), _stream_k(BOUND), n=RUNS, seed=12)
    assert not audit_samples(x, y).passes(EPSILON)
