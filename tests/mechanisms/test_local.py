"""Local-DP reports: Square Wave ([SW20]) and Duchi / Piecewise / Hybrid ([HM19]).

Formulas against the papers, the lattice (floating-point safety), unbiasedness and the stated
variances (statistical, seeded, with a power check: the same test rejects a variance 5 % off),
the exact integer sampler, and bad inputs (typed errors before any bit is drawn).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mechanisms import (
    HYBRID_SWITCH_EPSILON,
    DomainError,
    DuchiMechanism,
    HybridMechanism,
    ParameterError,
    PiecewiseMechanism,
    SquareWave,
    bit_source,
    square_wave_b,
)
from mechanisms.local._randomizers import uniform_ints

N = 200_000


def test_recording_bits_records_draws():  # the helper must be able to fail the tests below
    bits = RecordingBits()
    HybridMechanism(epsilon=1.0).report([0.5], bits)
    SquareWave(epsilon=1.0).report([0.5], bits)
    assert bits.words > 0


def _z_mean(x: np.ndarray, mean: float) -> float:
    return float((x.mean() - mean) / (x.std() / math.sqrt(x.size)))


def _z_variance(errors: np.ndarray, variance: float) -> float:
    """z-score of the mean squared error (known mean 0) against ``variance``."""
    sq = errors**2
    se = sq.std() / math.sqrt(sq.size)
    if se <= 1e-12 * variance:  # constant squared error (Duchi at t = 0): compare exactly
        return 0.0 if sq[0] == pytest.approx(variance, rel=1e-12) else math.inf
    return float((sq.mean() - variance) / se)


def _check_mean_and_variance(reports: np.ndarray, truth: float, variance: float) -> None:
    err = reports - truth
    assert abs(_z_mean(reports, truth)) < 4.5
    assert abs(_z_variance(err, variance)) < 4.5
    # Power: the same test rejects the variance 5 % off either way.
    assert abs(_z_variance(err, 1.05 * variance)) > 4.5
    assert abs(_z_variance(err, 0.95 * variance)) > 4.5


# -- Square Wave: formulas ------------------------------------------------------------------------


def test_square_wave_b_matches_the_paper_formula():
    for eps in (0.05, 0.5, 1.0, 2.0, 4.0):
        e = math.exp(eps)
        assert square_wave_b(eps) == pytest.approx(
            (eps * e - e + 1) / (2 * e * (e - 1 - eps)), rel=1e-12
        )
    assert square_wave_b(1.0) == pytest.approx(1.0 / (2.0 * math.e * (math.e - 2.0)), rel=1e-14)


def test_square_wave_b_is_stable_near_zero_and_decreasing():
    assert square_wave_b(1e-9) == pytest.approx(0.5, abs=1e-8)
    below, above = square_wave_b(0.01 - 1e-12), square_wave_b(0.01 + 1e-12)
    assert below == pytest.approx(above, rel=1e-9)  # the series and the closed form agree
    grid = np.geomspace(1e-6, 40.0, 200)
    b = np.array([square_wave_b(e) for e in grid])
    assert np.all(np.diff(b) < 0) and b[0] < 0.5
    assert square_wave_b(30.0) == pytest.approx(29.0 / (2.0 * math.exp(30.0)), rel=1e-9)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 20.0])
def test_square_wave_densities_are_a_distribution_with_ratio_e_eps(eps):
    sw = SquareWave(epsilon=eps)
    assert sw.p / sw.q == pytest.approx(math.exp(eps), rel=1e-12)
    assert 2 * sw.b_lattice * sw.p + sw.q == pytest.approx(1.0, rel=1e-12)
    assert sw.p_window == pytest.approx(2 * sw.b_lattice * sw.p, rel=1e-12)
    assert abs(sw.b_lattice - sw.b) <= sw.granularity / 2
    assert sw.b_lattice == (sw.half_width + 0.5) * sw.granularity


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50),
    st.floats(0.01, 30.0),
    st.integers(0, 2**32 - 1),
)
def test_square_wave_reports_lie_on_the_lattice_inside_the_domain(values, eps, seed):
    sw = SquareWave(epsilon=eps)
    y = sw.report(values, bit_source(seed))
    cells = y / sw.granularity
    assert np.array_equal(cells, np.rint(cells))
    assert (y >= -sw.b_lattice).all() and (y <= 1.0 + sw.b_lattice).all()


@pytest.mark.statistical
@pytest.mark.parametrize(("eps", "v"), [(1.0, 0.3), (0.3, 0.0), (2.5, 1.0)])
def test_square_wave_window_probability_and_unbiased_estimate(eps, v):
    sw = SquareWave(epsilon=eps)
    y = sw.report(np.full(N, v), bit_source(11))
    k = round(v / sw.granularity)
    in_window = np.abs(np.rint(y / sw.granularity) - k) <= sw.half_width
    z = (in_window.mean() - sw.p_window) / math.sqrt(sw.p_window * (1 - sw.p_window) / N)
    assert abs(z) < 4.5
    assert abs(_z_mean(y, float(sw.mean(v)))) < 4.5
    _check_mean_and_variance(sw.estimate(y), v, float(sw.variance(v)))


@pytest.mark.statistical
def test_square_wave_outside_reports_are_uniform_on_the_rest():
    sw = SquareWave(epsilon=1.0)
    v = 0.6
    y = sw.report(np.full(N, v), bit_source(12))
    cells = np.rint(y / sw.granularity).astype(np.int64)
    k, w = round(v / sw.granularity), sw.half_width
    out = cells[np.abs(cells - k) > w]
    # The N cells outside the window, numbered 0..N − 1 left to right: uniform.
    idx = np.where(out < k, out + w, out - w - 1)
    u = (idx + 0.5) * sw.granularity
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    assert stats.kstest(u**1.1, "uniform").pvalue < 1e-6  # power


@pytest.mark.statistical
def test_square_wave_transition_matrix_matches_monte_carlo():
    sw = SquareWave(epsilon=1.5)
    bins, out_bins = 8, 12
    m, edges = sw.transition_matrix(bins, out_bins)
    assert m.shape == (out_bins, bins) and edges.size == out_bins + 1
    assert np.allclose(m.sum(axis=0), 1.0, atol=1e-12)
    rng = np.random.default_rng(1013)  # not the bit source's seed: PCG64(s) is default_rng(s)
    bits = bit_source(13)
    for i in (0, 3, 7):
        v = (i + rng.uniform(0.0, 1.0, N)) / bins
        counts = np.histogram(sw.report(v, bits), bins=edges)[0]
        expected = m[:, i] * N
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert stats.chi2.sf(chi2, out_bins - 1) > 1e-4
        # Power: the matrix of the neighbouring input bin is rejected.
        wrong = m[:, i + 1 if i < bins - 1 else i - 1] * N
        assert stats.chi2.sf(float(((counts - wrong) ** 2 / wrong).sum()), out_bins - 1) < 1e-6


# -- Duchi / Piecewise / Hybrid: formulas -------------------------------------------------------


def test_hybrid_alpha_follows_the_paper():
    assert HybridMechanism(epsilon=0.5).alpha == 0.0
    assert HybridMechanism(epsilon=HYBRID_SWITCH_EPSILON).alpha == 0.0
    assert HybridMechanism(epsilon=1.0).alpha == pytest.approx(1.0 - math.exp(-0.5), rel=1e-14)
    assert HybridMechanism(epsilon=3.0).alpha == pytest.approx(1.0 - math.exp(-1.5), rel=1e-14)


def test_piecewise_and_duchi_constants():
    for eps in (0.2, 1.0, 4.0):
        pm, du = PiecewiseMechanism(epsilon=eps), DuchiMechanism(epsilon=eps)
        h = math.exp(eps / 2)
        assert pm.c == pytest.approx((h + 1) / (h - 1), rel=1e-12)
        assert du.output == pytest.approx((math.exp(eps) + 1) / (math.exp(eps) - 1), rel=1e-12)
        assert pm.p_window == pytest.approx(h / (h + 1), rel=1e-14)
        # window mass p·(C − 1) and outside mass p/e^ε·(C + 1) add up to one
        outside = pm.density / math.exp(eps) * (pm.c + 1)
        assert pm.density * (pm.c - 1) == pytest.approx(pm.p_window, rel=1e-12)
        assert pm.density * (pm.c - 1) + outside == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("eps", [0.7, 1.0, 2.0, 5.0])
def test_hybrid_variance_is_the_papers_constant_above_the_switch(eps):
    hm = HybridMechanism(epsilon=eps)
    h, e = math.exp(eps / 2), math.exp(eps)
    paper = (h + 3) / (3 * h * (h - 1)) + (e + 1) ** 2 / (h * (e - 1) ** 2)
    assert np.allclose(hm.variance(np.linspace(-1, 1, 11)), paper, rtol=1e-10)
    assert hm.max_variance == pytest.approx(paper, rel=1e-10)


def test_hybrid_below_the_switch_is_duchi():
    hm = HybridMechanism(epsilon=0.4)
    assert hm.max_variance == pytest.approx(hm.duchi.output**2)
    a = hm.report(np.linspace(-1, 1, 50), bit_source(3))
    b = DuchiMechanism(epsilon=0.4).report(np.linspace(-1, 1, 50), bit_source(3))
    assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=50),
    st.floats(0.01, 30.0),
    st.integers(0, 2**32 - 1),
)
def test_hybrid_reports_are_lattice_points_or_plus_minus_d(t, eps, seed):
    hm = HybridMechanism(epsilon=eps)
    y = hm.report(t, bit_source(seed))
    gamma, c, d = hm.piecewise.granularity, hm.piecewise.c, hm.duchi.output
    duchi = np.abs(y) == d
    pm = y[~duchi]
    assert np.array_equal(pm / gamma, np.rint(pm / gamma))
    assert (np.abs(pm) <= c + gamma).all()


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [0.4, 1.0, 2.0])
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.5, 1.0])
def test_hybrid_is_unbiased_with_the_stated_variance(eps, t):
    hm = HybridMechanism(epsilon=eps)
    y = hm.report(np.full(N, t), bit_source(int(100 * eps + 10 * t + 50)))
    _check_mean_and_variance(y, t, float(hm.variance(t)))


@pytest.mark.statistical
@pytest.mark.parametrize("mech", [PiecewiseMechanism(epsilon=1.0), DuchiMechanism(epsilon=1.0)])
@pytest.mark.parametrize("t", [-0.8, 0.0, 1.0])
def test_components_are_unbiased_with_the_stated_variance(mech, t):
    y = mech.report(np.full(N, t), bit_source(21))
    _check_mean_and_variance(y, t, float(mech.variance(t)))


# -- the exact integer sampler ------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("m", [3, 7, 16, 1000])
def test_uniform_ints_are_uniform(m):
    x = uniform_ints(bit_source(5), 100_000, m)
    assert x.min() >= 0 and x.max() < m
    counts = np.bincount(x, minlength=m)
    assert stats.chisquare(counts).pvalue > 1e-4


class _TopWordFirst:
    """Bit source whose first word is 2⁶⁴ − 1 (rejected for every m not a power of two)."""

    def __init__(self) -> None:
        self.first = True
        self.inner = np.random.PCG64(0)

    def random_raw(self, size: int) -> np.ndarray:
        raw = self.inner.random_raw(size)
        if self.first:
            raw[0] = np.uint64(2**64 - 1)
            self.first = False
        return raw


def test_uniform_ints_reject_the_top_words():
    x = uniform_ints(_TopWordFirst(), 4, 3)
    # 2⁶⁴ − 1 ≡ 0 (mod 3) would be accepted by a plain modulo; it must have been redrawn.
    ref = np.random.PCG64(0).random_raw(5)
    assert x[1] == int(ref[1]) % 3 and x[0] == int(ref[4]) % 3


# -- bad inputs: typed errors, nothing drawn ----------------------------------------------------


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), 50.5, True, "1"])
@pytest.mark.parametrize("cls", [SquareWave, PiecewiseMechanism, DuchiMechanism, HybridMechanism])
def test_bad_epsilon_is_a_parameter_error(cls, eps):
    with pytest.raises(ParameterError, match="'epsilon' parameter"):
        cls(epsilon=eps)


@pytest.mark.parametrize(
    ("mech", "bad"),
    [
        (SquareWave(epsilon=1.0), [0.2, 1.5]),
        (SquareWave(epsilon=1.0), [0.2, -0.1]),
        (SquareWave(epsilon=1.0), [np.nan]),
        (HybridMechanism(epsilon=1.0), [0.0, 1.01]),
        (PiecewiseMechanism(epsilon=1.0), [-1.2]),
        (DuchiMechanism(epsilon=1.0), [np.inf]),
        (HybridMechanism(epsilon=1.0), [[0.0, 0.1]]),
        (HybridMechanism(epsilon=1.0), []),
    ],
)
def test_bad_report_inputs_raise_before_drawing(mech, bad):
    bits = RecordingBits()
    with pytest.raises(DomainError) as info:
        mech.report(bad, bits)
    assert bits.words == 0
    assert "1.5" not in str(info.value) and "1.01" not in str(info.value)  # no data in messages
