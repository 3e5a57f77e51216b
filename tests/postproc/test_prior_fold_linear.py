"""postproc.PriorState with FOLD_LINEAR (opt-in, issue 22): the frozen weights of folded
periods corrected to first order in σ², so the running sums track the exact prior
(``profile_prior`` of every period) where the frozen ones drift (σ̂² biased low)."""

from __future__ import annotations

import numpy as np
import pytest

import postproc._prior as prior_module
from mechanisms import ParameterError
from postproc import profile_prior
from postproc._prior import PriorState


def _month(rng, p=28, n=1500, w=8, sigma2=1.0):
    """p released periods of n nodes: a profile + day deviations of variance sigma2, noise at
    every other step whose variance varies by period (as the planner's k and shares do)."""
    mu = rng.normal(10.0, 3.0, (n, w))
    sampled = np.zeros((n, w), dtype=bool)
    sampled[:, ::2] = True
    out = []
    for _ in range(p):
        s2 = rng.uniform(2.0, 8.0)
        day = mu + rng.normal(0.0, np.sqrt(sigma2), (n, w))
        y = day + np.where(sampled, rng.normal(0.0, np.sqrt(s2), (n, w)), 0.0)
        noise = np.where(sampled, s2, 0.0)
        error = np.where(sampled, s2, s2 * 0.5 + sigma2)
        out.append((y, noise, sampled, error))
    return mu, out


def _fed(periods, **kw):
    n, w = periods[0][0].shape
    st = PriorState(n, w, days=56, **kw)
    for y, noise, sampled, error in periods:
        st.add(y, noise, sampled, error, np.ones(n, dtype=bool))
    return st


def test_the_correction_is_off_by_default_and_exports_as_before():
    assert prior_module.FOLD_LINEAR is False
    st = PriorState(3, 8)
    assert st.linear is False
    assert "linear" not in st.export()[1]
    assert st.nbytes == PriorState(3, 8, linear=False).nbytes
    with pytest.raises(ParameterError, match="'linear' parameter of PriorState"):
        PriorState(3, 8, linear=1)


def test_the_module_constant_switches_it_on(monkeypatch):
    monkeypatch.setattr(prior_module, "FOLD_LINEAR", True)
    st = PriorState(3, 8)
    assert st.linear is True
    assert st.nbytes > PriorState(3, 8, linear=False).nbytes  # its 15 derivative sums


def test_before_any_fold_it_is_the_frozen_state_bitwise():
    _, periods = _month(np.random.default_rng(1), p=6, n=50)
    a = _fed(periods, recent=7).prior()
    b = _fed(periods, recent=7, linear=True).prior()
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.variance, b.variance)


def test_folded_periods_track_the_exact_prior_where_frozen_weights_drift():
    rng = np.random.default_rng(2)
    _, periods = _month(rng)
    stacked = [np.stack(a) for a in zip(*periods, strict=True)]
    exact = profile_prior(*stacked[:3], days=56, error=stacked[3])
    held = _fed(periods, recent=len(periods))  # nothing folded: profile_prior to rounding
    frozen = _fed(periods, recent=7, relative=False)  # session 7's absolute frozen weights
    linear = _fed(periods, recent=7, linear=True)
    tau = {k: s.prior().variance.mean() for k, s in (("frozen", frozen), ("linear", linear))}
    ref = exact.variance.mean()
    np.testing.assert_allclose(held.prior().variance.mean(), ref, rtol=1e-9)
    # the frozen weights bias σ̂² (and τ²) low; the first-order correction removes it
    assert abs(tau["frozen"] / ref - 1.0) > 0.03
    assert abs(tau["linear"] / ref - 1.0) < 0.01
    sigma = {k: s.sigma2.mean() / held.sigma2.mean() - 1.0 for k, s in
             (("frozen", frozen), ("linear", linear))}  # fmt: skip
    assert sigma["frozen"] < -0.05  # measured -0.10 (seeds 2, 5, 7)
    assert abs(sigma["linear"]) < 0.03  # -0.013, -0.014, -0.003
    gap = {k: np.abs(s.prior().mean - exact.mean).mean() for k, s in
           (("frozen", frozen), ("linear", linear))}  # fmt: skip
    assert gap["linear"] < 0.5 * gap["frozen"]


def test_export_and_restore_keep_the_correction():
    _, periods = _month(np.random.default_rng(3), p=14, n=40)
    st = _fed(periods[:12], recent=3, linear=True)
    arrays, scalars = st.export()
    assert scalars["linear"] is True
    held = [(h[0], h[1], h[2], h[3], h[4]) for h in st._held]
    back = PriorState.restore(arrays, scalars, held)
    assert back.linear is True
    for y, noise, sampled, error in periods[12:]:
        for s in (st, back):
            s.add(y, noise, sampled, error, np.ones(40, dtype=bool))
    np.testing.assert_array_equal(st.prior().mean, back.prior().mean)
    np.testing.assert_array_equal(st.prior().variance, back.prior().variance)
