"""Audit of the BLT counter at its claimed (ε, δ): step 1 moves the longest column of C (c
itself); statistic: the published encoding projected on c, in units of σ (the likelihood
ratio under Gaussian noise). Under-noised twin: σ/4 at the same claim."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.counting import _blt

EPSILON = 1.0
DELTA = 2.0**-20
BOUND = 1.0
N_STEPS = 16
RUNS = 10_000


def _stream(value: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=N_STEPS) / 4.0 * BOUND
    d[0] = value
    return d


def _statistic(data, n, bits):
    coef = _blt.blt_strategy(N_STEPS).coefficients(N_STEPS)
    out = np.empty(n)
    for r in range(n):
        rel = _blt._blt_release(data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits)
        out[r] = float(coef @ rel.encoded) / rel.noise.sigma
    return out


@pytest.mark.statistical
def test_blt_audit_passes_at_the_claimed_epsilon_delta():
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
def test_blt_audit_fails_for_an_under_noised_twin(monkeypatch):
    real = _blt._calibrate

    @functools.lru_cache(maxsize=4)
    def quarter(n, epsilon, delta, bound, strategy):
        cal = real(n, epsilon, delta, bound, strategy)
        return dataclasses.replace(cal, sigma_units=cal.sigma_units / 4.0)

    monkeypatch.setattr(_blt, "_calibrate", quarter)
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
