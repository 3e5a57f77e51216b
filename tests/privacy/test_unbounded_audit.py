"""Audit of the open-stream pure-ε counter (``mechanisms.counting._unbounded``) at its ε, for a
step of the first epoch and for a step of a later epoch (every node the step lies in).

k = 3: the epochs 1 | 2-4 | 5-13 (a stream of 1 step for step 1, of 13 for step 5). Step 1
is epoch 0's only leaf: one block, read back by o₁. Step 5 is the first leaf of epoch 2 (9
steps, 3 levels): it lies in the blocks (0, 1], (0, 3], (0, 9] of that tree and in no other
released node, and o_{4+p} − o₄ (p = 1, 3, 9: positions with a single balanced digit) reads
each back exactly (module notes of ``_unbounded`` and ``_kary``). Statistic: the Laplace
log-likelihood ratio of those blocks, Σ (|o − c| − |o − c'|) with c, c' the true in-epoch
prefix sums on D and D' (the scale drops out); its top value has likelihood ratio
e^{L·B/b} = e^{ε·L·B/(L·B + γ)} < e^ε.
Twin: ε × 4 in the blocks' noise (``kary_noise`` patched), claimed at the same ε.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.counting import _kary, _unbounded

EPSILON = 1.0
BOUND = 1.0
N_STEPS = 13
RUNS = 4_000  # fast tier (the twin is caught at ε̂ ≈ 3.5); the slow tier: 20,000
RUNS_SLOW = 20_000
#: step → (the outputs reading its blocks, the output holding the closed epochs' totals)
READS = {1: ((1,), None), 5: ((5, 7, 13), 4)}


def _stream(step: int, value: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=N_STEPS) / 4.0 * BOUND
    d[step - 1] = value
    return d[: max(READS[step][0])]  # the steps the statistic reads (step 1: epoch 0 only)


def _statistic_for(step: int):
    reads, base = READS[step]
    c0 = np.cumsum(_stream(step, 0.0))
    c1 = np.cumsum(_stream(step, BOUND))

    def statistic(data, n, bits):
        out = np.empty(n)
        for r in range(n):
            rel = _unbounded._unbounded_release(
                data, epsilon=EPSILON, bound=BOUND, bits=bits, fanout=3
            )
            o = rel.prefix_sums
            off = 0.0 if base is None else o[base - 1]
            c_off = 0.0 if base is None else c0[base - 1]  # closed epochs: same data on D, D'
            out[r] = sum(
                abs(o[t - 1] - off - (c0[t - 1] - c_off))
                - abs(o[t - 1] - off - (c1[t - 1] - c_off))
                for t in reads
            )
        return out

    return statistic


def _weak(monkeypatch):
    real = _kary.kary_noise

    def weak(n, *, epsilon, bound, fanout):
        return real(n, epsilon=4.0 * epsilon, bound=bound, fanout=fanout)

    monkeypatch.setattr(_kary, "kary_noise", weak)


@pytest.mark.statistical
@pytest.mark.parametrize("step", [1, 5])
def test_unbounded_audit_passes_at_the_claimed_epsilon(step):
    x, y = sample_pair(
        _statistic_for(step), _stream(step, 0.0), _stream(step, BOUND), n=RUNS, seed=13
    )
    assert audit_samples(x, y).passes(EPSILON)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("step", [1, 5])
def test_unbounded_audit_passes_at_the_claimed_epsilon_with_more_runs(step):
    x, y = sample_pair(
        _statistic_for(step), _stream(step, 0.0), _stream(step, BOUND), n=RUNS_SLOW, seed=14
    )
    assert audit_samples(x, y).passes(EPSILON)


@pytest.mark.statistical
@pytest.mark.parametrize("step", [1, 5])
def test_unbounded_audit_fails_for_an_under_noised_twin(monkeypatch, step):
    _weak(monkeypatch)
    x, y = sample_pair(
        _statistic_for(step), _stream(step, 0.0), _stream(step, BOUND), n=RUNS, seed=13
    )
    assert not audit_samples(x, y).passes(EPSILON)
