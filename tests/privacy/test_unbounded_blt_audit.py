"""Audit of the open-stream Gaussian counter (``UnboundedBLTCounter``, time-invariant BLT) at
its claimed (ε, δ) for a stated horizon: step 1 moves the longest column of C (c itself, of
which the first N_STEPS coordinates are observed: 80% of its norm); statistic: the published
encoding projected on those coordinates of c, in units of σ (the likelihood ratio under
Gaussian noise). Under-noised twin: σ/5 at the same claim (the observed 80% of the column
makes it about the σ/4 twin of the sized BLT's audit, which sees its whole column)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.core._random import BitSource
from mechanisms.counting import _open_blt

EPSILON = 1.0
DELTA = 2.0**-20
BOUND = 1.0
N_STEPS = 256
HORIZON = 1 << 20
RUNS = 8_000


def _stream(value: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=N_STEPS) / 4.0 * BOUND
    d[0] = value
    return d


def _statistic(data, n, bits: BitSource):
    coef = _open_blt.open_strategy().coefficients(N_STEPS)
    out = np.empty(n)
    for r in range(n):
        rel = _open_blt.unbounded_blt_release(
            data, epsilon=EPSILON, delta=DELTA, bound=BOUND, horizon=HORIZON, seed=bits
        )
        out[r] = float(coef @ rel.encoded) / rel.noise.sigma
    return out


@pytest.mark.statistical
def test_unbounded_blt_audit_passes_at_the_claimed_epsilon_delta():
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=13)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
def test_unbounded_blt_audit_fails_for_an_under_noised_twin(monkeypatch):
    real = _open_blt._calibrate

    @functools.lru_cache(maxsize=4)
    def fifth(epsilon, delta, bound, horizon):
        cal = real(epsilon, delta, bound, horizon)
        return dataclasses.replace(cal, sigma_units=cal.sigma_units / 5.0)

    monkeypatch.setattr(_open_blt, "_calibrate", fifth)
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=13)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
