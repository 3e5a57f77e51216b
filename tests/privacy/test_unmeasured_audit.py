"""Privacy audits of OptStream with unmeasured readings (issue 25, ``missing="unmeasured"``).

The missingness pattern is public (``docs/privacy.md``, "Missing readings"): D and D' share it,
the gap lies *inside* the window, and D' moves every observed value by α ([FV19] Def. 3).
Each audit runs the real code path with the ``observed`` mask, passes at the claimed ε and fails
for an under-noised twin with the same N and seed (as ``test_optstream_audit.py``):

* perturbation with a gap at a sampled step (w = 6, k = 3, samples 0, 2, 5; step 2 missing):
  the released estimates at the observed samples, Laplace kα/ε; the twin α/ε fails;
* the L1 sampler with a gap of four steps after the kink: the index of the first adaptive
  sample; ΔL = 2α(w − k) passes, ΔL = 2α (one value's worth) fails.

Measured (this file's seeds): perturbation ε_lb = 0.60 (twin 1.91) at N = 100,000; sampler
ε_lb ≈ 0 (twin 1.23) at N = 30,000.
"""

from __future__ import annotations

import numpy as np
import pytest
from _audit import audit

from mechanisms import optstream_estimates, perturb_noise
from mechanisms.optstream._sampling import sample_l1

N = 100_000
EPS = 1.0
ALPHA = 2.0
W, K = 6, 3  # equally spaced samples at steps 0, 2 and 5
GAP = 2  # a sampled step whose reading is missing
BASE = np.array([50.0, 40.0, np.nan, 60.0, 55.0, 45.0])
NEIGHBOUR = BASE + ALPHA  # every observed value moved by α; the gap stays a gap
OBSERVED = ~np.isnan(BASE)
KEPT = [0, W - 1]  # the observed samples


def perturbation(under):
    """The estimates at the observed samples; LLR against the true (or twin's) scale."""

    def statistic(x, n, bits):
        if under is None:  # the real path, all budget to Perturb, the public mask
            est = optstream_estimates(
                np.broadcast_to(x, (n, 1, W)),
                epsilon=EPS,
                k=K,
                alpha=ALPHA,
                sampling="equal",
                features=[[[t] for t in range(W)]],
                windows="aligned",
                seed=bits,
                observed=np.broadcast_to(OBSERVED, (n, 1, W)),
            )
            y = est.estimates[:, 0, KEPT]
            scale = perturb_noise(k=K, alpha=ALPHA, epsilon=EPS).scale
        else:
            y = under.release(np.broadcast_to(x[KEPT], (n, len(KEPT))), bits)
            scale = under.scale
        return (np.abs(y - NEIGHBOUR[KEPT]) - np.abs(y - BASE[KEPT])).sum(axis=1) / scale

    return statistic


@pytest.mark.statistical
def test_unmeasured_perturbation_audit_passes_at_epsilon():
    result = audit(perturbation(None), BASE, NEIGHBOUR, n=N, seed=51)
    assert result.passes(EPS), result
    assert result.epsilon_lb > 0.4 * EPS, result  # two of three samples moved: ~2ε/3


@pytest.mark.statistical
def test_unmeasured_perturbation_audit_fails_under_noised():
    under = perturb_noise(k=1, alpha=ALPHA, epsilon=EPS)  # one value's calibration
    result = audit(perturbation(under), BASE, NEIGHBOUR, n=N, seed=51)
    assert not result.passes(EPS), result


def test_unmeasured_estimates_ignore_the_gap_and_the_sample_there():
    est = optstream_estimates(
        BASE[None, None, :],
        epsilon=1e6,  # almost no noise: the line through the observed samples 0 and 5
        k=K,
        alpha=ALPHA,
        sampling="equal",
        features=[[[t] for t in range(W)]],
        seed=1,
        observed=OBSERVED[None, None, :],
    )
    line = BASE[0] + (BASE[5] - BASE[0]) * np.arange(W) / 5
    np.testing.assert_allclose(est.estimates[0, 0, :W], line, atol=1e-3)


# -- the L1 sampler (SVT) with a gap -----------------------------------------------------------

SW, SK = 24, 2
NS = 30_000  # the sampler's loop over steps is the slow part; the twin still shows ε_lb ≈ 1.2
FLAT = np.full(SW, 100.0)
KINKED = np.concatenate([[100.0 + ALPHA], np.full(SW - 1, 100.0 - ALPHA)])
SOBS = np.ones(SW, dtype=bool)
SOBS[5:9] = False  # four missing readings inside the window
THETA = 20 * ALPHA


def sampler(alpha_for_noise):
    def statistic(x, n, bits):
        mask = sample_l1(
            np.broadcast_to(np.where(SOBS, x, 0.0), (n, 1, SW)),
            k=SK,
            epsilon=EPS,
            alpha=alpha_for_noise,
            theta=THETA,
            bits=bits,
            observed=np.broadcast_to(SOBS, (n, 1, SW)),
        )
        return np.argmax(mask[:, 1:], axis=1).astype(float)

    return statistic


@pytest.mark.statistical
def test_unmeasured_sampler_audit_passes_at_epsilon():
    result = audit(sampler(ALPHA), FLAT, KINKED, n=NS, seed=53)
    assert result.passes(EPS), result


@pytest.mark.statistical
def test_unmeasured_sampler_audit_fails_when_delta_l_is_one_value():
    result = audit(sampler(ALPHA / (SW - SK)), FLAT, KINKED, n=NS, seed=53)
    assert not result.passes(EPS), result


def test_a_bad_observed_mask_is_refused_before_any_draw():
    from mechanisms import ParameterError

    class NoDraws:
        def random_raw(self, *a, **k):
            raise AssertionError("drew")

        def spawn(self, n):
            raise AssertionError("spawned")

    x = np.broadcast_to(np.nan_to_num(BASE), (1, 1, W))
    for bad in (OBSERVED, OBSERVED[None, None, :].astype(int)):
        with pytest.raises(ParameterError, match="'observed' parameter"):
            optstream_estimates(x, epsilon=EPS, k=K, alpha=ALPHA, seed=NoDraws(), observed=bad)
