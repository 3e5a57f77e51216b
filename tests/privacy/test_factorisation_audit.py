"""Audit of the square-root factorisation counter at its claimed (ε, δ).

Neighbours: D with σ(1) = 0 and D' with σ(1) = B (step 1 moves the longest column of C, the
whole coefficient vector c). Statistic: the published noisy encoding projected on c, in units of
σ -- under Gaussian noise and a shift along c this is the likelihood-ratio statistic, the most
powerful one. Under-noised twin: σ divided by 4 at the same claimed (ε, δ).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.counting import _factorisation as fac

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
    coef = fac.sqrt_coefficients(N_STEPS)
    out = np.empty(n)
    for r in range(n):
        rel = fac._sqrt_release(data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits)
        out[r] = float(coef @ rel.encoded) / rel.noise.sigma
    return out


@pytest.mark.statistical
def test_sqrt_factorisation_audit_passes_at_the_claimed_epsilon_delta():
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
def test_sqrt_factorisation_audit_fails_for_an_under_noised_twin(monkeypatch):
    real = fac._calibrate

    @functools.lru_cache(maxsize=4)
    def quarter(n, epsilon, delta, bound):
        cal = real(n, epsilon, delta, bound)
        return dataclasses.replace(cal, sigma_units=cal.sigma_units / 4.0)

    monkeypatch.setattr(fac, "_calibrate", quarter)
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
