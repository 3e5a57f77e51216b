"""Calibrations valid only in a range (issue 11 §3): checked on both sides of each limit.

* The [NRS07] Laplace constants a = ε/2, b = ε/(2 ln(2/δ)) of the PAK threshold: the dilation
  property of Def. 2.5 holds with δ/2 only up to an ε that depends on δ (≈ 9.13 for
  δ = 9.5e-7); beyond it ``smoothing_parameters`` recalibrates b. Checked against an
  independent numerical integration, and the whole mechanism's exact privacy profile at the
  edge (and at ε = 17 with the old constants: the issue's measured δ = 2.35e-6).
* ``GaussianNoise.for_mechanism``: the analytic Gaussian mechanism (Balle and Wang 2018,
  Thm. 8), valid for every ε, where the classical formula fails (ε > 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from mechanisms import GaussianNoise, ParameterError, smoothing_parameters
from mechanisms.pak._quantile import laplace_dilation_delta

DELTA = 9.5e-7  # the δ of the issue's measurement
LOG = math.log(2.0 / DELTA)


def _nrs_b(eps: float) -> float:
    return eps / (2.0 * LOG)


def _edge(delta: float) -> float:
    """The ε where Lemma 2.9's b stops being admissible (dilation δ = δ/2)."""
    log = math.log(2.0 / delta)
    return optimize.brentq(
        lambda e: laplace_dilation_delta(e, e / (2.0 * log)) - delta / 2.0, 0.5, 200.0
    )


def _dilation_by_quadrature(eps: float, lam: float) -> float:
    """∫ (h(z) − e^{ε/2 + λ} h(e^λ z))₊ dz for h = ½e^{−|z|}: independent of the closed form."""

    def gap(z: float) -> float:
        return max(
            0.5 * math.exp(-z) - math.exp(eps / 2 + lam) * 0.5 * math.exp(-math.exp(lam) * z), 0.0
        )

    return 2.0 * integrate.quad(gap, 0.0, 200.0, limit=400, epsabs=1e-16, epsrel=1e-10)[0]


def _mechanism_delta(eps: float, a: float, b: float) -> float:
    """Exact δ(ε) of f + (S/a)·Z, Z ~ Laplace(1), over neighbour pairs: S(y) = e^λ S(x),
    |λ| <= b, |f(x) − f(y)| = shift <= min(S(x), S(y)) (S bounds both local sensitivities);
    hockey-stick divergence in both directions by quadrature, worst over a grid."""
    best = 0.0
    for lam in np.linspace(-b, b, 9):
        s1, s2 = 1.0 / a, math.exp(lam) / a
        for frac in (0.0, 0.5, 1.0):
            shift = frac * min(1.0, math.exp(lam))

            def p(z, s1=s1):
                return math.exp(-abs(z) / s1) / (2 * s1)

            def q(z, s2=s2, shift=shift):
                return math.exp(-abs(z - shift) / s2) / (2 * s2)

            for f, g in ((p, q), (q, p)):
                cuts = (-np.inf, -60 / a, 0.0, shift, 60 / a, np.inf)
                total = 0.0
                for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
                    if hi > lo:
                        total += integrate.quad(
                            lambda z, f=f, g=g: max(f(z) - math.exp(eps) * g(z), 0.0),
                            lo,
                            hi,
                            limit=400,
                            epsabs=1e-15,
                        )[0]
                best = max(best, total)
    return best


def test_the_edge_for_the_issues_delta():
    assert _edge(DELTA) == pytest.approx(9.13, abs=0.01)


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0, 9.0])
def test_below_the_edge_the_constants_are_nrs07s(eps):
    a, b = smoothing_parameters(eps, DELTA)
    assert a == eps / 2 and b == _nrs_b(eps)
    assert laplace_dilation_delta(eps, b) <= DELTA / 2


@pytest.mark.parametrize("eps", [9.2, 17.0, 100.0])
def test_above_the_edge_b_is_recalibrated_to_the_admissible_limit(eps):
    a, b = smoothing_parameters(eps, DELTA)
    assert a == eps / 2 and b < _nrs_b(eps)
    assert laplace_dilation_delta(eps, _nrs_b(eps)) > DELTA / 2  # the old b is not admissible
    assert DELTA / 2 * (1 - 1e-6) <= laplace_dilation_delta(eps, b) <= DELTA / 2  # tight


def test_b_is_monotone_in_epsilon_across_the_edge():
    bs = [smoothing_parameters(e, DELTA)[1] for e in np.linspace(1.0, 40.0, 80)]
    assert all(x < y for x, y in zip(bs[:-1], bs[1:], strict=True))


@pytest.mark.parametrize("eps", [1.0, 9.131, 17.0])
def test_closed_form_dilation_matches_quadrature_and_grows_with_lambda(eps):
    b = _nrs_b(eps)
    lams = np.linspace(b / 10, b, 10)
    closed = [laplace_dilation_delta(eps, lam) for lam in lams]
    quad = [_dilation_by_quadrature(eps, lam) for lam in lams]
    np.testing.assert_allclose(closed, quad, rtol=1e-6, atol=1e-13)  # δ-scale agreement
    assert all(x <= y for x, y in zip(closed[:-1], closed[1:], strict=True))


def test_mechanism_delta_at_the_edge_and_beyond():
    """Numerical check of the whole mechanism's δ: within δ at the edge and with the
    recalibrated b at ε = 17; above δ (the issue's 2.35e-6) with the old b at ε = 17."""
    edge = _edge(DELTA)
    a, b = smoothing_parameters(edge, DELTA)
    assert _mechanism_delta(edge, a, b) <= DELTA
    a, b = smoothing_parameters(17.0, DELTA)
    assert _mechanism_delta(17.0, a, b) <= DELTA
    old = _mechanism_delta(17.0, 8.5, _nrs_b(17.0))
    assert old == pytest.approx(2.35e-6, rel=0.02) and old > 2 * DELTA


def test_dilation_rejects_b_above_half_epsilon():
    with pytest.raises(ParameterError, match="'smoothing'"):
        laplace_dilation_delta(1.0, 0.6)


# -- the analytic Gaussian mechanism -------------------------------------------------------------


def _bw18_delta(eps: float, sigma: float, sens: float) -> float:
    """[BW18] Thm. 8 with scipy.stats.norm (independent of the module's helper)."""
    return stats.norm.cdf(sens / (2 * sigma) - eps * sigma / sens) - math.exp(eps) * stats.norm.cdf(
        -sens / (2 * sigma) - eps * sigma / sens
    )


@pytest.mark.parametrize(
    ("eps", "delta"),
    [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-5), (2.0, 1e-6), (8.0, 1e-6), (20.0, 1e-6), (30.0, 1e-9)],
)
def test_analytic_gaussian_is_tight_on_both_sides_of_epsilon_one(eps, delta):
    noise = GaussianNoise.for_mechanism(sensitivity=3.0, epsilon=eps, delta=delta)
    sens = 3.0 + noise.granularity  # the lattice rounding is in the sensitivity
    assert _bw18_delta(eps, noise.sigma, sens) <= delta * (1 + 1e-6)
    assert _bw18_delta(eps, noise.sigma * (1 - 1e-5), sens) > delta  # smallest σ
    classical = sens * math.sqrt(2 * math.log(1.25 / delta)) / eps
    if eps < 1:
        assert noise.sigma < classical  # the classical formula holds, and is loose
    elif eps >= 20:
        assert _bw18_delta(eps, classical, sens) > delta  # the classical σ is not private here


@pytest.mark.parametrize("delta", [0.0, 1.0, 2.0])
def test_analytic_gaussian_needs_delta_in_0_1(delta):
    with pytest.raises(ParameterError, match="'delta'"):
        GaussianNoise.for_mechanism(sensitivity=1.0, epsilon=1.0, delta=delta)
