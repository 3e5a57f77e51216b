"""postproc.PriorState: the profile prior as running sums, O(N w) whatever the look-back
(issue 22.1)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from postproc import profile_prior
from postproc._prior import PriorState


def _periods(rng, p, n, w, *, k=6, history=0, tau=3.0):
    """p periods of n nodes: a profile + day deviations, the first ``history`` noise-free at
    every step, the others with noise at k equally spaced sampled steps that varies by
    period (as the planner's k and shares do)."""
    profile = 50 + 20 * np.sin(np.arange(w) / w * 2 * np.pi)
    level = rng.uniform(0.5, 2.0, (1, n, 1))
    truth = level * profile[None, None, :] + rng.normal(0, tau, (p, n, w))
    noise = np.zeros((p, n, w))
    sampled = np.ones((p, n, w), dtype=bool)
    error = np.zeros((p, n, w))
    for q in range(history, p):
        s2 = rng.uniform(4.0, 60.0)
        noise[q] = s2
        sampled[q] = False
        sampled[q][:, :: w // k] = True
        error[q] = s2 * (1.0 + (~sampled[q]) * rng.uniform(0.5, 2.0))
    meas = truth + rng.normal(0, 1, truth.shape) * np.sqrt(noise)
    return meas, noise, sampled, error


def _state(meas, noise, sampled, error, *, history, own=None, **kw):
    p, n, w = meas.shape
    st = PriorState(n, w, **kw)
    for q in range(p):
        o = np.ones(n, dtype=bool) if own is None else own[q]
        st.add(meas[q], noise[q], sampled[q], error[q], o, public=q < history)
    return st


@pytest.mark.parametrize("history", [0, 5])
def test_with_few_released_periods_the_state_is_profile_prior(history):
    rng = np.random.default_rng(3)
    meas, noise, sampled, error = _periods(rng, history + 6, 4, 24, history=history)
    own = np.ones(meas.shape[:2], dtype=bool)
    own[: history + 2, 0] = False  # a node without some periods of its own
    st = _state(meas, noise, sampled, error, history=history, own=own, days=56, recent=7)
    # a whole period, and a shorter tail (with history only: without, profile_prior's moments
    # guard max(cnt, 1) on weights normalised by the block's largest differs from Σg·x/Σg
    # when a node's summed weight is below 1; the state has no block)
    for r in (24, 10) if history else (24,):
        got = st.prior(r, period=24)
        want = profile_prior(
            [a[:, :r] for a in meas], [a[:, :r] for a in noise], [a[:, :r] for a in sampled],
            days=56, error=[a[:, :r] for a in error], independent=own, period=24,
        )  # fmt: skip
        np.testing.assert_allclose(got.mean, want.mean, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got.variance, want.variance, rtol=1e-9)
        assert got.n_periods == want.n_periods


def test_folded_periods_stay_close_to_profile_prior():
    # 30 released periods, 7 held: the frozen weights move the forecast by little against its
    # own error (an approximation, measured on the 30-trial tables).
    rng = np.random.default_rng(4)
    meas, noise, sampled, error = _periods(rng, 30, 6, 24)
    st = _state(meas, noise, sampled, error, history=0, days=56, recent=7)
    got = st.prior(period=24)
    want = profile_prior(meas, noise, sampled, days=56, error=error, period=24)
    err = np.sqrt(want.variance)
    assert np.abs(got.mean - want.mean).max() < 0.1 * err.min()
    np.testing.assert_allclose(got.variance, want.variance, rtol=0.25)
    # and without holding any period the forecast still tracks it
    none = _state(meas, noise, sampled, error, history=0, days=56, recent=0).prior(period=24)
    assert np.abs(none.mean - want.mean).max() < 0.3 * err.min()


def test_the_state_size_does_not_grow_with_the_look_back():
    rng = np.random.default_rng(5)
    meas, noise, sampled, error = _periods(rng, 70, 5, 24, history=10)
    sizes = {d: _state(meas, noise, sampled, error, history=10, days=d).nbytes for d in (7, 56)}
    assert sizes[7] == sizes[56]
    # forgetting keeps the total weight at the look-back
    st = _state(meas, noise, sampled, error, history=10, days=7)
    np.testing.assert_allclose(st.count, 7.0, rtol=1e-9)


def test_prior_state_arguments_are_validated():
    with pytest.raises(ParameterError, match="'days' parameter of PriorState"):
        PriorState(3, 24, days=1)
    with pytest.raises(ParameterError, match="'recent' parameter of PriorState"):
        PriorState(3, 24, recent=-1)
    assert PriorState(3, 24).prior() is None
