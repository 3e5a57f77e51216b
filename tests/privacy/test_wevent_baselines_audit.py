"""Privacy audits of the w-event baselines (``mechanisms._wevent_baselines``).

Each audit runs the mechanism on neighbouring inputs (w-event / (w, α) neighbours: values
within one window of w steps move by at most Δ), reduces each output to its privacy-loss
statistic, and lower-bounds ε (``_audit.py``). Each passes at the claimed ε and fails for an
under-noised variant with the same N and seed.

* Laplace: one period of w = 3, every value shifted by Δ.
* DFT: the *straddling* window (the last w/2 steps of one period and the first w/2 of the
  next), where [FV19] §6's √k·Δ₂ calibration under-noises by √2: the audit catches it.
* PeGaSus: the perturber (as Laplace) and the grouper (one AboveThreshold decision made
  visible by the group of the next step).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _audit import audit

from mechanisms import LaplaceNoise
from mechanisms._wevent_baselines import WEventDFT, WEventLaplace, WEventPegasus

N = 200_000


def loss_statistic(shift: np.ndarray):
    """Laplace privacy-loss statistic towards a neighbour shifted by ``shift`` (per coordinate):
    Σ sign(s)·clip(y·sign(s), 0, |s|)/|s|-weighted, monotone in the log-likelihood ratio."""
    sign = np.sign(shift)
    mag = np.abs(shift)

    def reduce(y: np.ndarray) -> np.ndarray:
        return np.sum(np.clip(y * sign, 0.0, mag), axis=1)

    return reduce


# -- Laplace -------------------------------------------------------------------------------------


def laplace_statistic(mech):
    reduce = loss_statistic(np.ones(3))

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        return reduce(mech.release(np.tile(x, (n, 1)), bits))

    return statistic


@pytest.mark.statistical
def test_laplace_audit_passes_at_claimed_epsilon():
    mech = WEventLaplace(epsilon=1.0, w=3, delta=1.0)
    result = audit(laplace_statistic(mech), np.zeros(3), np.ones(3), n=N, seed=41)
    assert result.passes(1.0), result


@pytest.mark.statistical
def test_laplace_audit_fails_with_per_value_sensitivity():
    """Sensitivity Δ instead of w·Δ (event-level calibration): true loss 3ε."""
    mech = WEventLaplace(epsilon=1.0, w=3, delta=1.0)
    object.__setattr__(mech, "noise", LaplaceNoise(sensitivity=1.0, epsilon=1.0))
    result = audit(laplace_statistic(mech), np.zeros(3), np.ones(3), n=N, seed=41)
    assert not result.passes(1.0), result


# -- DFT -----------------------------------------------------------------------------------------

W, K = 4, 2
STRADDLE = np.array([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])  # steps 2..5 of two periods


def dft_statistic(mech):
    coef = np.fft.rfft(STRADDLE, axis=1, norm="ortho")[:, :K]
    shift = np.concatenate([coef.real, coef.imag[:, 1:]], axis=1).ravel()  # released coords
    reduce = loss_statistic(shift)

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        out = mech.release(np.tile(x, (n, 1, 1)), bits)  # (n, 2 periods, W)
        c = np.fft.rfft(out, axis=2, norm="ortho")[:, :, :K]  # recover the noisy coefficients
        coords = np.concatenate([c.real, c.imag[:, :, 1:]], axis=2).reshape(n, -1)
        return reduce(coords)

    return statistic


@pytest.mark.statistical
def test_dft_straddling_audit_passes_at_claimed_epsilon():
    mech = WEventDFT(epsilon=2.0, w=W, k=K, delta=1.0)
    result = audit(dft_statistic(mech), np.zeros((2, W)), STRADDLE, n=N, seed=42)
    assert result.passes(2.0), result


@pytest.mark.statistical
def test_dft_straddling_audit_fails_with_the_papers_sqrt_k_calibration():
    """[FV19] §6: Laplace √k·Δ₂/ε per coefficient (Δ₂ = √w·Δ in the orthonormal basis): the
    straddling window loses √2·ε."""
    mech = WEventDFT(epsilon=2.0, w=W, k=K, delta=1.0)
    paper = LaplaceNoise(sensitivity=math.sqrt(K * W), epsilon=2.0)
    object.__setattr__(mech, "noise", paper)
    result = audit(dft_statistic(mech), np.zeros((2, W)), STRADDLE, n=N, seed=42)
    assert not result.passes(2.0), result


# -- PeGaSus -------------------------------------------------------------------------------------


def perturber_statistic(mech):
    reduce = loss_statistic(np.ones(3))

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        return reduce(mech.perturber.release(np.tile(x, (n, 1)), bits))

    return statistic


@pytest.mark.statistical
def test_pegasus_perturber_audit():
    mech = WEventPegasus(epsilon=1.25, w=3, delta=1.0)  # ε_p = 1
    ok = audit(perturber_statistic(mech), np.zeros(3), np.ones(3), n=N, seed=43)
    assert ok.passes(1.0), ok
    object.__setattr__(mech, "perturber", LaplaceNoise(sensitivity=1.0, epsilon=1.0))
    bad = audit(perturber_statistic(mech), np.zeros(3), np.ones(3), n=N, seed=43)
    assert not bad.passes(1.0), bad


def grouper_statistic(mech):
    """Whether the group of step 0 closed at step 1 (visible as a new group at step 2)."""

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        return (mech.groups(np.tile(x, (n, 1)), bits)[:, 2] == 2).astype(float)

    return statistic


@pytest.mark.statistical
def test_pegasus_grouper_audit():
    """dev({x0, x1}) moves from 0 to 2Δ (both values change): the grouper's decision is an
    AboveThreshold comparison; it passes at ε_g and fails when its noise is 50× too small."""
    d, d_prime = np.array([0.0, 0.0, 0.0]), np.array([1.0, -1.0, 0.0])
    mech = WEventPegasus(epsilon=1.0, w=3, delta=1.0, perturb_share=0.5, threshold=1.0)
    ok = audit(grouper_statistic(mech), d, d_prime, n=N, seed=44)
    assert ok.passes(0.5), ok
    for name in ("threshold_noise", "query_noise"):
        noise = getattr(mech, name)
        weak = LaplaceNoise(sensitivity=noise.scale * 0.5 / 50, epsilon=0.5)
        object.__setattr__(mech, name, weak)
    bad = audit(grouper_statistic(mech), d, d_prime, n=N, seed=44)
    assert not bad.passes(0.5), bad
