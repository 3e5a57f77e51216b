"""The quantile of the RMSE of N PAK releases under the plan's model (issue 23, inverse)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import chi2

from mechanisms import ParameterError, counter_end_variance, pak_threshold_calibration
from mechanisms.pak import mechanism_threshold
from planner import empirical_loss, pak_forward, pak_rmse_quantile, plan_pak_mse

DELTA = 2.0**-20


@pytest.fixture(scope="module")
def light():
    x = np.minimum(np.random.default_rng(11).exponential(5.0, 60_000), 1000.0)
    return x[:6_000], x.size


@pytest.fixture(scope="module")
def plan(light):
    prefix, n = light
    p = plan_pak_mse(prefix, n=n, bound=1000.0, epsilon=1.0, delta=DELTA)
    assert p.use_threshold
    return p


def test_plain_counter_is_a_scaled_chi_square():
    # a prefix too short for the quantile (m·p_max < 2): the plan is the plain counter. (At
    # m = 2,000 values near B the threshold is released at B but for the draw r·τ ≤ 0, which
    # pak_release's guard also runs at B: Mechanism 1 then beats the plain counter by its
    # shorter suffix, so a long prefix no longer makes the plan plain.)
    x = np.full(300, 50.0)
    p = plan_pak_mse(x, n=20_000, bound=60.0, epsilon=1.0, delta=DELTA)
    assert not p.use_threshold
    rmse, q90 = pak_rmse_quantile(x, p, releases=30, confidence=0.9)
    assert rmse == pytest.approx(p.rmse, rel=1e-12)
    assert q90 == pytest.approx(p.rmse * math.sqrt(chi2.ppf(0.9, 30) / 30), rel=1e-12)


def test_threshold_plan_moments_and_limits(light, plan):
    prefix, _ = light
    rmse, q50 = pak_rmse_quantile(prefix, plan, releases=30, confidence=0.5)
    assert rmse == pytest.approx(plan.rmse, rel=1e-9)  # the same mean square as the plan
    qs = [pak_rmse_quantile(prefix, plan, releases=30, confidence=q)[1] for q in (0.5, 0.9, 0.99)]
    assert qs[0] < rmse < qs[1] < qs[2]
    # many releases: the RMSE of N releases converges to the plan's RMSE
    assert pak_rmse_quantile(prefix, plan, releases=10**6, confidence=0.9)[1] == pytest.approx(
        rmse, rel=0.01
    )


@pytest.mark.parametrize("share", [None, 0.97])  # the plan's ε₁/ε; 0.97: Laplace dominates
def test_quantile_matches_a_simulation_of_the_model(light, plan, share):
    prefix, n = light
    if share is not None:
        plan = dataclasses.replace(plan, eps1_share=share)
    m, eps = prefix.size, plan.epsilon
    cal = pak_threshold_calibration(
        prefix, bound=1000.0, epsilon=plan.eps1_share * eps, delta=DELTA, lam=plan.lam,
        p=plan.p, beta_lt=plan.beta_lt,
    )  # fmt: skip
    v = counter_end_variance(plan.counter, n - m, epsilon=eps, bound=1.0, delta=DELTA)
    rng = np.random.default_rng(5)
    runs, releases = 20_000, 30
    tau = mechanism_threshold(plan.r * (cal.tau_prime + cal.scale * rng.laplace(
        size=(runs, releases))), 1000.0)  # pak_release's θ (guarded)  # fmt: skip
    mean, lvar = empirical_loss(prefix, n, known=m)(tau)
    err = (
        -mean
        + rng.laplace(size=tau.shape) * tau / ((1.0 - plan.eps1_share) * eps)
        + rng.standard_normal(tau.shape) * np.sqrt(tau**2 * v + lvar)
    )
    realised = np.sqrt(np.mean(err**2, axis=1))
    for q in (0.5, 0.9, 0.95):
        got = pak_rmse_quantile(prefix, plan, releases=releases, confidence=q)[1]
        assert got == pytest.approx(np.quantile(realised, q), rel=0.03)


def test_forward_and_inverse_use_the_quantile(light, plan):
    prefix, n = light
    kw = {"range_length": n, "bound": 1000.0, "delta": DELTA}
    plain = pak_forward(prefix, epsilon=1.0, **kw)
    sure = pak_forward(prefix, epsilon=1.0, releases=30, confidence=0.9, **kw)
    assert plain.predicted == pytest.approx(plan.rmse)
    assert (plain.metric, sure.metric) == ("rmse", "rmse_quantile")
    assert sure.predicted == pytest.approx(
        pak_rmse_quantile(prefix, plan, releases=30, confidence=0.9)[1]
    )
    assert sure.errors["range"]["rmse"] == pytest.approx(plan.rmse)
    assert sure.predicted > plain.predicted  # plan_epsilon then needs a larger ε
    assert sure.errors["range"]["rmse_quantile"] == sure.predicted  # what plan_epsilon reads


@pytest.mark.parametrize(
    ("kw", "name"),
    [({"releases": 0}, "releases"), ({"releases": True}, "releases"),
     ({"releases": 30, "confidence": 1.0}, "confidence"),
     ({"releases": 30, "confidence": 0.0}, "confidence")],
)  # fmt: skip
def test_bad_arguments_are_refused(light, plan, kw, name):
    prefix, _ = light
    kw = {"confidence": 0.9, **kw}
    with pytest.raises(ParameterError, match=f"'{name}' parameter of pak_rmse_quantile"):
        pak_rmse_quantile(prefix, plan, **kw)


def test_rare_low_threshold_does_not_inflate_the_quantile():
    # the household minutes' plan at the inverse's 150 cell (ε = 1.515, m = 50,000): its τ law
    # reaches low thresholds with a tiny probability that dominates E[e⁴] but is almost never
    # seen in 30 releases; the quantile must follow the simulated RMSE of 30 releases
    from dpstream.datasets import HOUSEHOLD_MINUTES_BOUND, household_minutes_stream

    x = np.asarray(household_minutes_stream(), dtype=np.float64)
    bound, prefix, n, eps = float(HOUSEHOLD_MINUTES_BOUND), x[:50_000], x.size, 1.515
    plan = plan_pak_mse(prefix, n=n, bound=bound, epsilon=eps, delta=DELTA)
    assert plan.use_threshold
    cal = pak_threshold_calibration(
        prefix, bound=bound, epsilon=plan.eps1_share * eps, delta=DELTA, lam=plan.lam,
        p=plan.p, beta_lt=plan.beta_lt,
    )  # fmt: skip
    v = counter_end_variance(plan.counter, n - prefix.size, epsilon=eps, bound=1.0, delta=DELTA)
    rng = np.random.default_rng(8)
    tau = mechanism_threshold(plan.r * (cal.tau_prime + cal.scale * rng.laplace(
        size=(20_000, 30))), bound)  # pak_release's θ (guarded)  # fmt: skip
    mean, lvar = empirical_loss(prefix, n, known=prefix.size)(tau)
    err = (
        -mean
        + rng.laplace(size=tau.shape) * tau / ((1.0 - plan.eps1_share) * eps)
        + rng.standard_normal(tau.shape) * np.sqrt(tau**2 * v + lvar)
    )
    simulated = np.quantile(np.sqrt(np.mean(err**2, axis=1)), 0.9)
    got = pak_rmse_quantile(prefix, plan, releases=30, confidence=0.9)[1]
    assert got == pytest.approx(simulated, rel=0.03)
