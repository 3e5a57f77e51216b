"""Audit of the BLT counter (``mechanisms.counting._blt``) at its claimed (ε, δ).

Neighbours: D with σ(1) = 0 and D' with σ(1) = B (step 1: the longest column of C, the
largest L2 shift). Statistic: the released prefix sums ŝ = L·y are decoded back to the encoder
outputs y = L⁻¹ŝ (``lfilter`` with the decoder's filter swapped), and projected on the shift
direction c = C e₁: T = ⟨y, c⟩/‖c‖, a 1-D Gaussian whose mean moves by B‖c‖ between D and D' —
the likelihood-ratio statistic of the Gaussian mechanism, so the most powerful one.

Under-noised twin: the same release path with σ divided by 4 (``blt_noise`` patched), claimed
at the same (ε, δ): the audit must catch it. The tree counters' estimates are post-processing
of the BT nodes audited in ``test_tree_audit.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit_samples, sample_pair
from scipy.signal import lfilter

from mechanisms.counting import _blt

EPSILON = 1.0
DELTA = 2.0**-20
BOUND = 1.0
N_STEPS = 16
RUNS = 20_000


def _stream(first: float) -> np.ndarray:
    d = np.random.default_rng(1).integers(0, 5, size=N_STEPS) / 4.0 * BOUND
    d[0] = first
    return d


def _statistic(data, n, bits):
    fact = _blt.blt_factorization(N_STEPS)
    c, _ = fact.coefficients(N_STEPS)
    bl, al = fact.decoder_filter()
    out = np.empty(n)
    for r in range(n):
        rel = _blt._blt_release(data, epsilon=EPSILON, delta=DELTA, bound=BOUND, bits=bits)
        y = lfilter(al, bl, rel.prefix_sums)  # L⁻¹ŝ: the noisy encoder outputs
        out[r] = float(np.dot(y, c)) / float(np.linalg.norm(c))
    return out


@pytest.mark.statistical
def test_blt_audit_passes_at_the_claimed_epsilon_delta():
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)


@pytest.mark.statistical
def test_blt_audit_fails_for_an_under_noised_twin(monkeypatch):
    real = _blt.blt_noise

    def quarter(n, **kw):
        noise, sens, rho = real(n, **kw)
        weak = _blt.GaussianNoise(
            sigma=noise.sigma / 4.0, magnitude=noise.magnitude, granularity=noise.granularity
        )
        return weak, sens, rho

    monkeypatch.setattr(_blt, "blt_noise", quarter)
    x, y = sample_pair(_statistic, _stream(0.0), _stream(BOUND), n=RUNS, seed=11)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
