"""The w-event baselines: Laplace, DFT ([FV19] §6) and PeGaSus ([PGS17], [FV19] §7)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from mechanisms import ParameterError, WAlphaIndistinguishability, WEvent, bit_source
from mechanisms.wevent._baselines import (
    WEventDFT,
    WEventLaplace,
    WEventPegasus,
    _pack,
    dft_coefficient_count,
)


def periods(n=200, w=48, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(w)
    return 1000 + 300 * np.sin(2 * np.pi * t / w)[None, :] + rng.normal(0, 20, (n, w))


# -- Laplace -------------------------------------------------------------------------------------


def test_laplace_scale_is_w_delta_over_epsilon():
    m = WEventLaplace(epsilon=0.5, w=48, delta=10.0)
    assert m.noise.scale == pytest.approx(48 * 10 / 0.5, rel=1e-5)
    x = periods()
    noise = (m.release(x, bit_source(1)) - x).ravel()
    assert stats.kstest(noise, stats.laplace(scale=m.noise.scale).cdf).pvalue > 1e-6
    assert stats.kstest(noise, stats.laplace(scale=0.7 * m.noise.scale).cdf).pvalue < 1e-6


def test_laplace_guarantee_and_units():
    assert WEventLaplace(epsilon=1, w=4, delta=2.0).guarantee.unit == WAlphaIndistinguishability(
        w=4, alpha=2.0
    )
    g = WEventLaplace(epsilon=1, w=4, delta=2.0, alpha_unit=False).guarantee
    assert g.unit == WEvent(w=4) and g.budget.epsilon == 1


def test_release_keeps_shape_and_accepts_a_short_tail():
    m = WEventLaplace(epsilon=1, w=48, delta=1.0)
    assert m.release(np.ones((3, 2, 48)), bit_source(0)).shape == (3, 2, 48)
    assert m.release(np.ones((2, 5)), bit_source(0)).shape == (2, 5)
    with pytest.raises(ParameterError, match="1 <= L <= w = 48"):
        m.release(np.ones((2, 49)), bit_source(0))


@pytest.mark.parametrize(
    ("cls", "kwargs", "name"),
    [
        (WEventLaplace, {"epsilon": 0.0, "w": 4, "delta": 1.0}, "epsilon"),
        (WEventLaplace, {"epsilon": 1.0, "w": 0, "delta": 1.0}, "w"),
        (WEventLaplace, {"epsilon": 1.0, "w": 4, "delta": -1.0}, "delta"),
        (WEventDFT, {"epsilon": 1.0, "w": 4, "k": 5, "delta": 1.0}, "k"),
        (WEventDFT, {"epsilon": 1.0, "w": 4, "k": 0, "delta": 1.0}, "k"),
        (WEventDFT, {"epsilon": 1.0, "w": 4, "k": 2, "delta": 1.0, "streams": 0}, "streams"),
        (WEventPegasus, {"epsilon": 1.0, "w": 4, "delta": 1.0, "perturb_share": 1.0}, "perturb"),
        (WEventPegasus, {"epsilon": 1.0, "w": 4, "delta": 1.0, "smoother": "max"}, "smoother"),
        (WEventPegasus, {"epsilon": 1.0, "w": 4, "delta": 1.0, "threshold": -2.0}, "threshold"),
    ],
)
def test_parameters_are_validated(cls, kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}"):
        cls(**kwargs)


# -- DFT -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("streams", "pieces"), [(1, 2), (2, 4), (4, 8), (30, 48)])
def test_dft_noise_scale_covers_changes_spread_over_streams(streams, pieces):
    """√(k·w·P)·Δ/ε with P = min(2n, w) (stream, period) pieces ([FV19] Def. 3)."""
    m = WEventDFT(epsilon=0.5, w=48, k=10, delta=3.0, streams=streams)
    assert m.noise.scale == pytest.approx(math.sqrt(10 * 48 * pieces) * 3.0 / 0.5, rel=1e-4)
    assert "n streams" in m.guarantee.proof


def test_dft_noise_scale_covers_straddling_windows():
    m = WEventDFT(epsilon=0.5, w=48, k=10, delta=3.0)
    assert m.noise.scale == pytest.approx(math.sqrt(2 * 10 * 48) * 3.0 / 0.5, rel=1e-5)


def test_dft_without_noise_is_the_low_pass_projection():
    x = periods(n=20)
    m = WEventDFT(epsilon=1e12, w=48, k=25, delta=1.0)  # every frequency kept: identity
    np.testing.assert_allclose(m.release(x, bit_source(0)), x, atol=1e-6)
    m = WEventDFT(epsilon=1e12, w=48, k=3, delta=1.0)
    low = np.fft.rfft(x, axis=1)
    low[:, 3:] = 0
    np.testing.assert_allclose(m.release(x, bit_source(0)), np.fft.irfft(low, n=48), atol=1e-6)


@pytest.mark.parametrize("length", [1, 2, 5, 6, 47])
def test_dft_partial_period_is_reconstructed_exactly_when_every_frequency_is_kept(length):
    x = periods(n=4)[:, :length]  # the last periods of 4 streams
    m = WEventDFT(epsilon=1e12, w=48, k=48, delta=1.0, streams=4)
    np.testing.assert_allclose(m.release(x, bit_source(0)), x, atol=1e-6)


def test_dft_refuses_several_short_periods_of_one_stream():
    """Issue 11 §1, same class as the OptStream tail: 48 consecutive periods of one step would
    put 48 pieces in one window. Exact: their released coordinates move by 48Δ in L1, far above
    the calibrated √(2k'w)·Δ (P = 2 pieces per stream), so short periods come one per stream."""
    m = WEventDFT(epsilon=1.0, w=48, k=1, delta=1.0)
    l1 = 48 * abs(np.fft.rfft(np.ones(1), norm="ortho")[0].real)  # one Re F0 per 1-step period
    assert l1 > 4 * m.noise.scale * m.epsilon
    with pytest.raises(ParameterError, match="short period"):
        m.release(np.ones((48, 1)), bit_source(0))
    with pytest.raises(ParameterError, match="short period"):
        WEventDFT(epsilon=1.0, w=48, k=1, delta=1.0, streams=2).release(
            np.ones((2, 2, 5)), bit_source(0)
        )
    assert m.release(np.ones((1, 5)), bit_source(0)).shape == (1, 5)  # one tail: fine


def test_dft_noise_has_the_predicted_variance():
    m = WEventDFT(epsilon=1.0, w=48, k=10, delta=1.0)
    x = np.zeros((4000, 48))
    err = m.release(x, bit_source(3))
    # Re F0 once, Re and Im of F1..F_{k-1} twice (each with its conjugate mirror), var 2b² each
    predicted = (4 * 10 - 3) * 2 * m.noise.scale**2 / 48
    assert err.var() == pytest.approx(predicted, rel=0.05)


@settings(max_examples=200, deadline=None)
@given(
    length=st.integers(1, 48),
    k=st.integers(1, 48),
    dx=arrays(np.float64, 48, elements=st.floats(-1, 1)),
)
def test_dft_coefficient_l1_change_is_at_most_sqrt_k_times_l2(length, k, dx):
    """The sensitivity bound of WEventDFT: ‖Δq‖₁ ≤ √k'·‖Δx‖₂ for every change Δx."""
    d = dx[:length][None, :]
    kk = dft_coefficient_count(k, length)
    q = _pack(np.fft.rfft(d, axis=1, norm="ortho")[:, :kk], length)
    assert q.shape[1] == 2 * kk - 1 - (1 if length % 2 == 0 and kk - 1 == length // 2 else 0)
    assert np.abs(q).sum() <= math.sqrt(kk) * np.linalg.norm(d) * (1 + 1e-9) + 1e-12


def test_dft_bound_is_attained_by_a_straddling_change():
    """Two half-windows of Δ at the end of one period and the start of the next reach √(2kw)Δ."""
    w, k = 4, 2
    a = np.array([[0.0, 0.0, 1.0, 1.0]])
    b = np.array([[1.0, 1.0, 0.0, 0.0]])
    total = sum(np.abs(_pack(np.fft.rfft(p, norm="ortho")[:, :k], w)).sum() for p in (a, b))
    assert total == pytest.approx(math.sqrt(2 * k * w))


# -- PeGaSus -------------------------------------------------------------------------------------


def test_pegasus_groups_are_contiguous_and_start_in_the_period():
    m = WEventPegasus(epsilon=1.0, w=48, delta=1.0)
    g = m.groups(periods(n=50), bit_source(4))
    t = np.arange(48)
    assert (g <= t).all() and (g >= 0).all() and (g[:, 0] == 0).all()
    assert (np.diff(g, axis=1) >= 0).all()
    assert ((g == t) | (g == np.roll(g, 1, axis=1))).all()  # a group starts at its own step


def test_pegasus_grouper_follows_the_deviation():
    flat = np.full((100, 48), 500.0)
    m = WEventPegasus(epsilon=1.0, w=48, delta=1.0, threshold=1e6)
    assert (m.groups(flat, bit_source(5)) == 0).all()  # one group per period
    jumpy = np.tile(np.array([0.0, 1e9]), (100, 24))
    m = WEventPegasus(epsilon=1.0, w=48, delta=1.0, threshold=1.0)
    g = m.groups(jumpy, bit_source(6))
    # every group closes at its first query: groups are {t, t + 1}
    np.testing.assert_array_equal(g[0], np.repeat(np.arange(0, 48, 2), 2))


def test_pegasus_smoothers():
    x = np.full((200, 48), 1000.0)
    for smoother in ("median", "mean"):
        m = WEventPegasus(epsilon=1.0, w=48, delta=1.0, threshold=1e9, smoother=smoother)
        out = m.release(x, bit_source(7))
        err_last = np.abs(out[:, -1] - 1000).mean()
        err_first = np.abs(out[:, 0] - 1000).mean()
        assert err_last < err_first / 3  # smoothing over a 48-step group
    m = WEventPegasus(epsilon=1e9, w=48, delta=1.0, threshold=1e30, smoother="mean")
    np.testing.assert_allclose(
        m.release(periods(n=3), bit_source(0)),
        (np.cumsum(periods(n=3), axis=1) / np.arange(1, 49)),
        rtol=1e-6,
    )


def test_pegasus_budget_split_and_default_threshold():
    m = WEventPegasus(epsilon=2.0, w=48, delta=5.0)
    assert m.perturber.scale == pytest.approx(48 * 5 / 1.6, rel=1e-5)
    assert m.threshold == pytest.approx(5 * 48 * 5 / 0.4)
    d = 2 * 48 * 5
    assert m.threshold_noise.scale == pytest.approx(2 * d / 0.4, rel=1e-4)
    assert m.query_noise.scale == pytest.approx(4 * d / 0.4, rel=1e-4)
