"""Audits of the matrix-factorisation counters at their claimed (ε, δ): the square root
([FHU23]), the BLT sized for n ([DMRST24]) and the open-stream BLT (``UnboundedBLTCounter``, a
stated horizon of 2²⁰).

Neighbours: D with σ(1) = 0 and D' with σ(1) = B (step 1 moves the longest column of C, the
whole coefficient vector c). Statistic: the published noisy encoding projected on c, in units of
σ -- under Gaussian noise and a shift along c this is the likelihood-ratio statistic, the most
powerful one. Under-noised twin: σ divided by 4 at the same claimed (ε, δ); by 5 for the open
counter, whose audit observes the first 256 coordinates of its infinite column (80% of its
norm), which makes σ/5 about as strong a twin as σ/4 with the whole column.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import NamedTuple

import numpy as np
import pytest
from _audit import audit_samples, sample_pair

from mechanisms.counting import _blt, _open_blt
from mechanisms.counting import _factorisation as fac

EPSILON = 1.0
DELTA = 2.0**-20
BOUND = 1.0


class Case(NamedTuple):
    module: ModuleType  # holds the ``_calibrate`` the twin under-noises
    release: object  # (data, bits) -> a release with ``encoded`` and ``noise``
    coef: object  # () -> the observed coordinates of c
    steps: int
    runs: int
    divisor: float
    seed: int


def _sqrt(data, bits):
    return fac._sqrt_release(data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits)


def _sized_blt(data, bits):
    return _blt._blt_release(data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits)


def _open(data, bits):
    return _open_blt.unbounded_blt_release(
        data, epsilon=EPSILON, delta=DELTA, bound=BOUND, horizon=1 << 20, seed=bits
    )


CASES = {
    "sqrt_factorisation": Case(fac, _sqrt, lambda: fac.sqrt_coefficients(16), 16, 10_000, 4, 11),
    "blt": Case(
        _blt, _sized_blt, lambda: _blt.blt_strategy(16).coefficients(16), 16, 10_000, 4, 11
    ),
    "unbounded_blt": Case(
        _open_blt, _open, lambda: _open_blt.open_strategy().coefficients(256), 256, 8_000, 5, 13
    ),
}


def _stream(case: Case, value: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=case.steps) / 4.0 * BOUND
    d[0] = value
    return d


def _samples(case: Case):
    coef = case.coef()

    def statistic(data, n, bits):
        out = np.empty(n)
        for r in range(n):
            rel = case.release(data, bits)
            out[r] = float(coef @ rel.encoded) / rel.noise.sigma
        return out

    return sample_pair(
        statistic, _stream(case, 0.0), _stream(case, BOUND), n=case.runs, seed=case.seed
    )


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(CASES))
def test_audit_passes_at_the_claimed_epsilon_delta(name):
    x, y = _samples(CASES[name])
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(CASES))
def test_audit_fails_for_an_under_noised_twin(name, monkeypatch):
    case = CASES[name]
    real = case.module._calibrate

    def under(*args):
        cal = real(*args)
        return dataclasses.replace(cal, sigma_units=cal.sigma_units / case.divisor)

    monkeypatch.setattr(case.module, "_calibrate", under)
    x, y = _samples(case)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
