"""Privacy audit of the Gaussian noise for (w, α) units (``mechanisms.wevent._gaussian``).

k = 4 samples of one window, each moved by α (L2 shift α√k), released with
:func:`gaussian_window_noise` at ρ = 0.5; the statistic is the sum of the outputs (the
Gaussian log-likelihood ratio is linear in it). Claimed: the tight ε of μ = √(2ρ) at δ = 1e-2
(:func:`gaussian_epsilon`, issue 27; 2.32 against 3.53 through Bun and Steinke 2016, Prop. 1.3).
The audit passes, and fails for noise under-calibrated by 3x (σ/3, i.e. ρ = 4.5 spent while 0.5
is claimed).
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit

from mechanisms import GaussianNoise
from mechanisms.wevent import gaussian_epsilon, gaussian_window_noise

N = 200_000
DELTA = 1e-2
RHO = 0.5


def _statistic(noise: GaussianNoise):
    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        return noise.release(np.tile(x, (n, 1)), bits).sum(axis=1)

    return statistic


@pytest.mark.statistical
def test_gaussian_window_noise_audit_passes_at_the_claimed_loss():
    noise = gaussian_window_noise(k=4, alpha=1.0, rho=RHO)
    claimed = gaussian_epsilon(RHO, DELTA)
    result = audit(_statistic(noise), np.zeros(4), np.ones(4), n=N, seed=71, delta=DELTA)
    assert result.passes(claimed), result


@pytest.mark.statistical
def test_gaussian_window_noise_audit_catches_under_noise():
    good = gaussian_window_noise(k=4, alpha=1.0, rho=RHO)
    bad = GaussianNoise(sigma=good.sigma / 3.0, granularity=good.granularity)
    claimed = gaussian_epsilon(RHO, DELTA)
    result = audit(_statistic(bad), np.zeros(4), np.ones(4), n=N, seed=71, delta=DELTA)
    assert not result.passes(claimed), result
