"""Audit of a w-event baseline across a partial last period, through the public ``release_dft``.

Issue 11 §1 asked for every w-event path to be checked on windows straddling the last full
period and the tail. Laplace and PeGaSus have losses linear in the changed values, so the
period boundary cannot matter; DFT's bound goes through one L2 norm per (stream, period)
piece, so a straddling window costs up to √P more than an aligned one (P = 2 pieces for one
stream, :class:`mechanisms.WEventDFT`). Here w = 4, k = 2 and T = 6 (one period and a tail of
2 steps); the neighbour moves steps 2..5 by +α (the last two steps of the period, the whole
tail). The L1 change of the released coefficients is 2 + √2 = 3.41 against the calibrated
√(k'·w·P)·α = 4 (loss 0.85ε), and 1.21ε for the aligned-window calibration √(k'·w)·α of
[FV19] §6 (P = 1), which the audit must catch.

Every column of the frame is an independent run; the statistic is the Laplace loss statistic
of the coefficients recomputed from the released values (truncation at 0 never binds here).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from _audit import audit

import dpstream
import mechanisms.wevent._baselines as baselines

EPS, ALPHA, W, K = 1.0, 1.0, 4, 2
BASE = np.array([100.0, 90.0, 95.0, 110.0, 105.0, 102.0])
CHANGE = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0]) * ALPHA
N = 200_000


def _coords(y: np.ndarray) -> np.ndarray:
    """Released coordinates: Re F0, Re F1, Im F1 of the period; Re F0, Re F1 of the tail."""
    head = np.fft.rfft(y[..., :W], axis=-1, norm="ortho")[..., :K]
    tail = np.fft.rfft(y[..., W:], axis=-1, norm="ortho")[..., :K]
    return np.concatenate([head.real, head.imag[..., 1:], tail.real], axis=-1)


SHIFT = _coords(BASE + CHANGE) - _coords(BASE)


def dft_statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
    frame = pd.DataFrame(np.repeat(x[:, None], n, axis=1), columns=[f"s{i}" for i in range(n)])
    out = dpstream.release_dft(frame, epsilon=EPS, w=W, k=K, alpha=ALPHA, seed=bits).to_numpy()
    d = _coords(out.T) - _coords(BASE)
    return np.clip(d * np.sign(SHIFT), 0.0, np.abs(SHIFT)).sum(axis=1)


def test_the_straddling_change_is_below_the_calibration_and_above_the_aligned_one():
    l1 = np.abs(SHIFT).sum()
    assert l1 == pytest.approx(2 + math.sqrt(2))
    assert l1 <= math.sqrt(K * W * 2) * ALPHA and l1 > 1.2 * math.sqrt(K * W) * ALPHA


@pytest.mark.statistical
def test_dft_tail_audit_passes_at_epsilon():
    result = audit(dft_statistic, BASE, BASE + CHANGE, n=N, seed=71)
    assert result.passes(EPS), result


@pytest.mark.statistical
def test_dft_tail_audit_fails_with_the_aligned_window_calibration(monkeypatch):
    original = baselines.WEventDFT.__post_init__

    def aligned_only(self):  # [FV19] §6: √k·Δ₂ per coefficient, P = 1 piece
        original(self)
        kk = baselines.dft_coefficient_count(self.k, self.w)
        sens = math.sqrt(kk * self.w) * self.delta
        object.__setattr__(self, "noise", baselines._laplace(sens, self.epsilon, 2 * kk - 1, 0.0))

    monkeypatch.setattr(baselines.WEventDFT, "__post_init__", aligned_only)
    result = audit(dft_statistic, BASE, BASE + CHANGE, n=N, seed=71)
    assert not result.passes(EPS), result
