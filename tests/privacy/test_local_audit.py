"""Audits of the local-DP reports: Square Wave ([SW20]) and Duchi / Piecewise / Hybrid ([HM19]).

Neighbours are the two extreme inputs of one user: v = 0 and v = 1 for Square Wave, t = −1 and
t = 1 for the mean mechanisms. The statistic is the report itself; the audit's threshold events
{x ≤ s} include the tight ones (Square Wave: s = b, one window against the other's background;
Piecewise and Hybrid: s = −1, the window [−C, −1] of t = −1), whose probability ratio is exactly
e^ε. Every audit passes at the claimed ε (and is tight: ε_lb > 0.8ε), and an under-noised
variant run with the same N and seed through the same sampler fails:

* Square Wave built for 2ε (a b too small and a p too large for ε);
* Square Wave with the window probability of e^{1.5ε} (p too large, b right);
* Piecewise with C = (e^ε + 1)/(e^ε − 1) (e^ε where e^{ε/2} belongs; density ratio e^{1.5ε}),
  alone and inside the Hybrid Mechanism;
* Duchi and Hybrid built for 2ε.

A wrong α is *not* a privacy bug (HM is a data-independent mixture of two ε-LDP mechanisms):
the audit passes for α = 1 and α = 0.5 at ε, which documents that α only trades variance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _audit import audit

from mechanisms import DuchiMechanism, HybridMechanism, PiecewiseMechanism, SquareWave
from mechanisms.local._hybrid import _hybrid_sample, _piecewise_sample
from mechanisms.local._square_wave import _N_CELLS, _square_wave_sample

N = 100_000
N_SLOW = 2_000_000
EPS = 1.0


def reports(mechanism):
    """Statistic: one report of the scalar input per run, through the mechanism's sampler."""

    def statistic(x: float, n: int, bits) -> np.ndarray:
        return mechanism.report(np.full(n, x), bits)

    return statistic


def sampler(fn):
    """Statistic from a raw sampler ``fn(values, bits)`` (for miscalibrated variants)."""

    def statistic(x: float, n: int, bits) -> np.ndarray:
        return fn(np.full(n, x), bits)

    return statistic


# -- Square Wave -------------------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_square_wave_audit_passes_at_claimed_epsilon(eps):
    result = audit(reports(SquareWave(epsilon=eps)), 0.0, 1.0, n=N, seed=61)
    assert result.passes(eps), result
    assert result.epsilon_lb > 0.8 * eps, result


@pytest.mark.statistical
def test_square_wave_audit_fails_when_built_for_twice_epsilon():
    result = audit(reports(SquareWave(epsilon=2.0 * EPS)), 0.0, 1.0, n=N, seed=61)
    assert not result.passes(EPS), result


@pytest.mark.statistical
def test_square_wave_audit_fails_with_a_too_large_window_probability():
    sw = SquareWave(epsilon=EPS)
    cells = 2 * sw.half_width + 1
    wrong = cells * math.exp(1.5 * EPS) / (cells * math.exp(1.5 * EPS) + _N_CELLS)
    assert wrong > sw.p_window
    result = audit(
        sampler(lambda v, bits: _square_wave_sample(v, sw.half_width, wrong, bits)),
        0.0,
        1.0,
        n=N,
        seed=61,
    )
    assert not result.passes(EPS), result


@pytest.mark.statistical
def test_square_wave_audit_at_interior_neighbours():
    # Windows that overlap (|v − v'| < 2b). The best threshold event is {x ≤ v' − b}: ratio
    # 1 + (e^ε − 1)(v' − v)/v' (the background [−b, v − b] dilutes the window's e^ε).
    sw = SquareWave(epsilon=2.0)
    v, v_prime = 0.3, 0.5
    result = audit(reports(sw), v, v_prime, n=N, seed=62)
    assert result.passes(2.0), result
    best = math.log(1 + math.expm1(2.0) * (v_prime - v) / v_prime)
    assert result.epsilon_lb > 0.9 * best, result


# -- Piecewise, Duchi, Hybrid ------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize(
    "mechanism",
    [
        PiecewiseMechanism(epsilon=EPS),
        DuchiMechanism(epsilon=EPS),
        HybridMechanism(epsilon=EPS),
        HybridMechanism(epsilon=0.5),  # Duchi only
        HybridMechanism(epsilon=2.0),
    ],
    ids=["pm", "duchi", "hm", "hm-0.5", "hm-2"],
)
def test_mean_mechanism_audit_passes_at_claimed_epsilon(mechanism):
    result = audit(reports(mechanism), -1.0, 1.0, n=N, seed=63)
    assert result.passes(mechanism.epsilon), result
    assert result.epsilon_lb > 0.8 * mechanism.epsilon, result


@pytest.mark.statistical
@pytest.mark.parametrize(
    "mechanism",
    [DuchiMechanism(epsilon=2 * EPS), HybridMechanism(epsilon=2 * EPS)],
    ids=["duchi", "hm"],
)
def test_mean_mechanism_audit_fails_when_built_for_twice_epsilon(mechanism):
    result = audit(reports(mechanism), -1.0, 1.0, n=N, seed=63)
    assert not result.passes(EPS), result


def _wrong_c(eps: float) -> float:
    """C computed with e^ε instead of e^{ε/2}: coth(ε/2) < coth(ε/4)."""
    return (math.exp(eps) + 1) / (math.exp(eps) - 1)


@pytest.mark.statistical
def test_piecewise_audit_fails_with_the_wrong_c():
    pm = PiecewiseMechanism(epsilon=EPS)
    c = _wrong_c(EPS)
    assert c < pm.c
    result = audit(
        sampler(lambda t, bits: _piecewise_sample(t, c, pm.p_window, pm.granularity, bits)),
        -1.0,
        1.0,
        n=N,
        seed=64,
    )
    assert not result.passes(EPS), result


@pytest.mark.statistical
def test_hybrid_audit_fails_with_the_wrong_c_in_its_piecewise_part():
    hm = HybridMechanism(epsilon=EPS)
    broken = PiecewiseMechanism(epsilon=EPS)
    object.__setattr__(broken, "c", _wrong_c(EPS))  # test-only: a miscalibrated component
    result = audit(
        sampler(lambda t, bits: _hybrid_sample(t, hm.alpha, broken, hm.duchi, bits)),
        -1.0,
        1.0,
        n=N,
        seed=65,
    )
    assert not result.passes(EPS), result


@pytest.mark.statistical
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_hybrid_with_another_alpha_is_still_private(alpha):
    hm = HybridMechanism(epsilon=EPS)
    result = audit(
        sampler(lambda t, bits: _hybrid_sample(t, alpha, hm.piecewise, hm.duchi, bits)),
        -1.0,
        1.0,
        n=N,
        seed=66,
    )
    assert result.passes(EPS), result


# -- full-size tier ----------------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize(
    "mechanism",
    [SquareWave(epsilon=EPS), PiecewiseMechanism(epsilon=EPS), HybridMechanism(epsilon=EPS)],
    ids=["sw", "pm", "hm"],
)
def test_local_audits_full_size(mechanism):
    lo, hi = (0.0, 1.0) if isinstance(mechanism, SquareWave) else (-1.0, 1.0)
    result = audit(reports(mechanism), lo, hi, n=N_SLOW, seed=67)
    assert result.passes(EPS), result
    assert result.epsilon_lb > 0.95 * EPS, result
