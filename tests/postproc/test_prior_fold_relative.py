"""postproc.PriorState with relative folded weights (FOLD_RELATIVE, the default since issue 22):
a folded period's weight is kept relative to a reference measurement of its node and weighed
at the current σ̂², so a period measured like the reference counts exactly as in
``profile_prior`` of every period, whatever σ̂² was when it was folded."""

from __future__ import annotations

import numpy as np
import pytest

import postproc._prior as prior_module
from mechanisms import ParameterError
from postproc import profile_prior
from postproc._prior import PriorState


def _month(rng, p=28, n=1500, w=8, sigma2=1.0, noise=None):
    """p released periods of n nodes: a profile + day deviations of variance sigma2, noise at
    every other step. ``noise`` None: its variance varies by period (as the planner's k and
    shares may); a number: every period's (a plan kept from day to day)."""
    mu = rng.normal(10.0, 3.0, (n, w))
    sampled = np.zeros((n, w), dtype=bool)
    sampled[:, ::2] = True
    out = []
    for _ in range(p):
        s2 = rng.uniform(2.0, 8.0) if noise is None else float(noise)
        day = mu + rng.normal(0.0, np.sqrt(sigma2), (n, w))
        y = day + np.where(sampled, rng.normal(0.0, np.sqrt(s2), (n, w)), 0.0)
        var = np.where(sampled, s2, 0.0)
        error = np.where(sampled, s2, s2 * 0.5 + sigma2)
        out.append((y, var, sampled, error))
    return out


def _fed(periods, **kw):
    n, w = periods[0][0].shape
    st = PriorState(n, w, days=56, **kw)
    for y, var, sampled, error in periods:
        st.add(y, var, sampled, error, np.ones(n, dtype=bool))
    return st


def _exact(periods):
    stacked = [np.stack(a) for a in zip(*periods, strict=True)]
    return profile_prior(*stacked[:3], days=56, error=stacked[3])


def test_relative_weights_are_the_default_and_checked():
    assert prior_module.FOLD_RELATIVE is True
    st = PriorState(3, 8)
    assert st.relative is True and st.linear is False
    assert st.export()[1]["relative"] is True
    assert PriorState(3, 8, linear=True).relative is False  # the opt-in correction is of absolute
    with pytest.raises(ParameterError, match="'relative' parameter of PriorState"):
        PriorState(3, 8, relative=1)
    with pytest.raises(ParameterError, match="'relative' and 'linear' parameters"):
        PriorState(3, 8, relative=True, linear=True)


def test_the_module_constant_switches_it_off(monkeypatch):
    monkeypatch.setattr(prior_module, "FOLD_RELATIVE", False)
    st = PriorState(3, 8)
    assert st.relative is False
    assert "relative" not in st.export()[1]


@pytest.mark.parametrize("seed", [2, 5])
def test_a_plan_kept_from_day_to_day_folds_exactly(seed):
    """Every period measured alike: the folded periods are weighted as profile_prior weighs
    them (to rounding), where absolute frozen weights bias σ̂² low."""
    periods = _month(np.random.default_rng(seed), noise=4.0)
    exact = _exact(periods)
    relative = _fed(periods, recent=7)
    absolute = _fed(periods, recent=7, relative=False)
    held = _fed(periods, recent=len(periods))  # nothing folded
    got = relative.prior()
    np.testing.assert_allclose(got.variance, exact.variance, rtol=1e-9)
    np.testing.assert_allclose(got.mean, exact.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(relative.sigma2, held.sigma2, rtol=1e-9)
    # the absolute frozen weights are measurably off on the same data (the test can fail)
    assert abs(absolute.sigma2.mean() / held.sigma2.mean() - 1.0) > 0.02


def test_a_varying_plan_stays_closer_to_the_exact_prior_than_frozen_weights():
    periods = _month(np.random.default_rng(2))  # the noise varies by period
    exact = _exact(periods)
    held = _fed(periods, recent=len(periods))
    np.testing.assert_allclose(held.prior().variance.mean(), exact.variance.mean(), rtol=1e-9)
    sigma = {}
    for name, kw in (("relative", {}), ("absolute", {"relative": False})):
        st = _fed(periods, recent=7, **kw)
        sigma[name] = abs(st.sigma2.mean() / held.sigma2.mean() - 1.0)
    assert sigma["relative"] < 0.5 * sigma["absolute"]


def test_export_and_restore_keep_the_reference():
    periods = _month(np.random.default_rng(3), p=14, n=40)
    st = _fed(periods[:12], recent=3)
    arrays, scalars = st.export()
    assert scalars["relative"] is True and {"vref", "eref"} <= set(arrays)
    held = [(h[0], h[1], h[2], h[3], h[4]) for h in st._held]
    back = PriorState.restore(arrays, scalars, held)
    assert back.relative is True
    np.testing.assert_array_equal(back.vref, st.vref)
    for y, var, sampled, error in periods[12:]:
        for s in (st, back):
            s.add(y, var, sampled, error, np.ones(40, dtype=bool))
    np.testing.assert_array_equal(st.prior().mean, back.prior().mean)
    np.testing.assert_array_equal(st.prior().variance, back.prior().variance)


def test_a_state_saved_before_relative_weights_keeps_folding_absolute():
    """A saved state without the flag (older code) that folded has absolute frozen sums:
    restored, it goes on as it was (mixing the two kinds of sums would be wrong)."""
    periods = _month(np.random.default_rng(4), p=14, n=40)
    old = _fed(periods[:12], recent=3, relative=False)
    arrays, scalars = old.export()
    assert "relative" not in scalars
    held = [(h[0], h[1], h[2], h[3], h[4]) for h in old._held]
    back = PriorState.restore(arrays, scalars, held)
    assert back.relative is False
    for y, var, sampled, error in periods[12:]:
        for s in (old, back):
            s.add(y, var, sampled, error, np.ones(40, dtype=bool))
    np.testing.assert_array_equal(old.prior().mean, back.prior().mean)


def test_a_state_saved_before_relative_weights_and_any_fold_takes_them_up():
    """Without the flag but with nothing folded yet (older code, fewer than recent + 1
    periods) the sums are the same under both rules: restored, it folds relative weights,
    as a state that never was saved."""
    periods = _month(np.random.default_rng(5), p=14, n=40)
    old = _fed(periods[:3], recent=3, relative=False)
    arrays, scalars = old.export()
    assert "relative" not in scalars and not arrays["g"].any()
    held = [(h[0], h[1], h[2], h[3], h[4]) for h in old._held]
    back = PriorState.restore(arrays, scalars, held)
    assert back.relative is True
    fresh = _fed(periods[:3], recent=3)
    for y, var, sampled, error in periods[3:]:
        for s in (fresh, back):
            s.add(y, var, sampled, error, np.ones(40, dtype=bool))
    np.testing.assert_array_equal(fresh.prior().mean, back.prior().mean)
    np.testing.assert_array_equal(fresh.prior().variance, back.prior().variance)


def _first_unlike(rng, p, n=400, w=8):
    """The first period noisier (planned without a prior), the rest alike (one plan)."""
    periods = _month(rng, p=p, n=n, w=w, noise=4.0)
    first = _month(rng, p=1, n=n, w=w, noise=16.0)[0]
    return [first, *periods[1:]]


def test_the_first_period_is_held_and_the_month_folds_exactly():
    """HOLD_FIRST: the first period, measured unlike the rest, is held past the recent ones
    (weighted exactly), so a month whose later days share one plan is profile_prior's to
    rounding, where folding the first period at a frozen relative weight is not."""
    periods = _first_unlike(np.random.default_rng(6), p=28)
    exact = _exact(periods)
    held = _fed(periods, recent=7)
    assert held.hold_first is True and held._pinned is not None
    np.testing.assert_allclose(held.prior().variance, exact.variance, rtol=1e-9)
    np.testing.assert_allclose(held.prior().mean, exact.mean, rtol=1e-9, atol=1e-9)
    folded = _fed(periods, recent=7, hold_first=False)
    assert np.abs(folded.prior().variance / exact.variance - 1.0).max() > 1e-4


def test_the_held_first_period_leaves_the_look_back_as_the_exact_window_drops_it():
    periods = _first_unlike(np.random.default_rng(7), p=12)
    n, w = periods[0][0].shape
    st = PriorState(n, w, days=10, recent=3)
    for i, (y, var, sampled, error) in enumerate(periods[:11]):
        st.add(y, var, sampled, error, np.ones(n, dtype=bool))
        assert (st._pinned is not None) == (3 <= i < 10)
    stacked = [np.stack(a) for a in zip(*periods[1:11], strict=True)]  # periods 2..11
    exact = profile_prior(*stacked[:3], days=10, error=stacked[3])
    np.testing.assert_allclose(st.prior().variance, exact.variance, rtol=1e-9)
    np.testing.assert_allclose(st.prior().mean, exact.mean, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("cut", [1, 5, 9])  # first among the held / pinned / dropped
def test_export_and_restore_keep_the_first_period(cut):
    periods = _first_unlike(np.random.default_rng(8), p=14, n=30)
    kw = {"days": 8, "recent": 3}
    st = PriorState(30, 8, **kw)
    for y, var, sampled, error in periods[:cut]:
        st.add(y, var, sampled, error, np.ones(30, dtype=bool))
    arrays, scalars = st.export()
    held = [(h[0], h[1], h[2], h[3], h[4]) for h in st._held]
    back = PriorState.restore(arrays, scalars, held)
    assert (back._first is None) == (st._first is None)
    assert (back._pinned is None) == (st._pinned is None)
    for y, var, sampled, error in periods[cut:]:
        for s in (st, back):
            s.add(y, var, sampled, error, np.ones(30, dtype=bool))
    np.testing.assert_array_equal(st.prior().mean, back.prior().mean)
    np.testing.assert_array_equal(st.prior().variance, back.prior().variance)


def test_hold_first_is_checked_and_switchable(monkeypatch):
    assert prior_module.HOLD_FIRST is True
    with pytest.raises(ParameterError, match="'hold_first' parameter of PriorState"):
        PriorState(3, 8, hold_first="yes")
    monkeypatch.setattr(prior_module, "HOLD_FIRST", False)
    assert PriorState(3, 8).hold_first is False
    assert "hold_first" not in PriorState(3, 8).export()[1]
