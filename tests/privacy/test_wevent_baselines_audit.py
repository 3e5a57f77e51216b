"""Privacy audits of the w-event baselines (``mechanisms.wevent._baselines``).

Each audit runs the mechanism on neighbouring inputs (w-event / (w, α) neighbours: values
within one window of w steps move by at most Δ), reduces each output to its privacy-loss
statistic, and lower-bounds ε (``_audit.py``). Each passes at the claimed ε and fails for an
under-noised variant with the same N and seed.

* Laplace: one period of w = 3, every value shifted by Δ.
* DFT: the *straddling* window (the last w/2 steps of one period and the first w/2 of the
  next), where [FV19] §6's √k·Δ₂ calibration under-noises by √2: the audit catches it. A
  change *spread over 8 streams* of a level (one stream per step, [FV19] Def. 3), where the
  one-stream calibration under-noises by 1.6x, is checked exactly (too many coordinates for
  a statistical audit to have power).
* PeGaSus: the perturber (as Laplace) and the grouper (one AboveThreshold decision made
  visible by the group of the next step).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _audit import audit

from mechanisms import LaplaceNoise
from mechanisms.wevent._baselines import WEventDFT, WEventLaplace, WEventPegasus

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


# DFT on a level of 8 streams ([FV19] Def. 3: one stream changes per step, maybe a different
# one each step): stream i changes steps 2i, 2i + 1 of one period of w = 16, with the signs
# that maximise the L1 change of its k = 4 released coefficients. The one-stream calibration
# √(2kw)·Δ under-noises this by 1.6x; streams=8 (√(k·w·min(16, w))·Δ) covers it.
SW, SK, NS = 16, 4, 8


def _spread_change() -> np.ndarray:
    out = np.zeros((NS, SW))
    for i in range(NS):
        best = 0.0
        for signs in itertools.product([-1.0, 1.0], repeat=2):
            piece = np.zeros(SW)
            piece[2 * i : 2 * i + 2] = signs
            c = np.fft.rfft(piece, norm="ortho")[:SK]
            l1 = np.abs(c.real).sum() + np.abs(c.imag[1:]).sum()
            if l1 > best:
                best, out[i] = l1, piece
    return out


SPREAD = _spread_change()


def test_spread_change_exceeds_the_one_stream_calibration_and_streams_covers_it():
    """Exact, not statistical: the L1 change of the released coordinates of all 8 streams
    against each calibration's sensitivity (scale·ε, rounding included). A statistical audit
    has no power here: 56 coordinates spread the loss (measured ε_lb = 1.1 at a true 3.2)."""
    assert ((SPREAD != 0).sum(axis=0) == 1).all()  # every step: exactly one stream moves
    coef = np.fft.rfft(SPREAD, axis=1, norm="ortho")[:, :SK]
    l1 = np.abs(coef.real).sum() + np.abs(coef.imag[:, 1:]).sum()
    one = WEventDFT(epsilon=2.0, w=SW, k=SK, delta=1.0)
    many = WEventDFT(epsilon=2.0, w=SW, k=SK, delta=1.0, streams=NS)
    assert l1 > 1.5 * one.noise.scale * one.epsilon  # true loss 1.6 ε with streams=1
    assert l1 <= many.noise.scale * many.epsilon


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
