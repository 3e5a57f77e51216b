"""The prior from earlier releases: one more weighted term of Algorithm 4, empirical Bayes."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from postproc import FeatureSet, Hierarchy, merge_prior, profile_prior, project_consistent


def _problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    h = Hierarchy(children={"total": ["a", "b"]})
    fs = FeatureSet.from_breaks(6, [])
    c = rng.uniform(0.0, 10.0, (3, 3, 6))
    v = rng.uniform(0.5, 4.0, (3, 3, 6))
    f = rng.uniform(0.0, 10.0, (3, 6))
    tau2 = rng.uniform(0.5, 4.0, (3, 6))
    return h, fs, c, v, f, tau2


def test_prior_is_the_extra_weighted_term_of_the_objective():
    # Stacking the prior as extra estimates: the same optimum as folding it in.
    h, fs, c, v, f, tau2 = _problem()
    with_prior = project_consistent(
        c, hierarchy=h, features=fs, variances=v, prior_mean=f, prior_variances=tau2
    )
    merged_c, merged_w = merge_prior(c, 1.0 / v, f, tau2)
    direct = project_consistent(merged_c, hierarchy=h, features=fs, weights=merged_w)
    np.testing.assert_allclose(with_prior.values, direct.values, rtol=1e-10, atol=1e-10)
    # Optimality of the objective WITH the extra term: half-gradient vanishes where x > 0.
    x = with_prior.values[:, 1:, :]  # leaves (a, b) per step
    y = with_prior.values
    grad = (y - c) / v + (y - f[None]) / tau2[None]  # (B, N, w)
    g_leaf = grad[:, 1:, :] + grad[:, :1, :]  # d/dx_leaf: the leaf and the total
    assert np.all(np.abs(np.where(x > 1e-9, g_leaf, 0.0)) < 1e-7)
    assert np.all(np.where(x <= 1e-9, g_leaf, 0.0) >= -1e-7)


def test_prior_keeps_consistency_and_non_negativity_on_both_solvers():
    h, fs, c, v, f, tau2 = _problem(1)
    c = c - 6.0  # many negative estimates
    out = {
        m: project_consistent(
            c, hierarchy=h, features=fs, variances=v, prior_mean=f - 8.0, prior_variances=tau2,
            method=m,
        ).values
        for m in ("fast", "cvxpy")
    }  # fmt: skip
    for vals in out.values():
        assert vals.min() >= -1e-9
        np.testing.assert_allclose(vals[:, 0], vals[:, 1] + vals[:, 2], atol=1e-7)
    np.testing.assert_allclose(out["fast"], out["cvxpy"], atol=1e-4)


def test_prior_with_tiny_variance_wins_and_huge_variance_changes_nothing():
    h, fs, c, v, f, tau2 = _problem(2)
    f = np.abs(f)
    f[0] = f[1] + f[2]  # a consistent forecast
    strong = project_consistent(
        c,
        hierarchy=h,
        features=fs,
        variances=v,
        prior_mean=f,
        prior_variances=np.full_like(f, 1e-9),
    )
    np.testing.assert_allclose(strong.values, np.broadcast_to(f, strong.values.shape), atol=1e-5)
    weak = project_consistent(
        c,
        hierarchy=h,
        features=fs,
        variances=v,
        prior_mean=f,
        prior_variances=np.full_like(f, 1e12),
    )
    none = project_consistent(c, hierarchy=h, features=fs, variances=v)
    np.testing.assert_allclose(weak.values, none.values, atol=1e-6)


def test_prior_arguments_are_validated():
    h, fs, c, v, f, tau2 = _problem()
    with pytest.raises(ParameterError, match="both or neither"):
        project_consistent(c, hierarchy=h, features=fs, variances=v, prior_mean=f)
    with pytest.raises(ParameterError, match="'prior_variances'"):
        project_consistent(
            c, hierarchy=h, features=fs, variances=v, prior_mean=f, prior_variances=-tau2
        )
    with pytest.raises(ParameterError, match="'prior_mean'"):
        project_consistent(
            c, hierarchy=h, features=fs, variances=v, prior_mean=f[:, :3], prior_variances=tau2
        )


def test_profile_prior_estimates_the_forecast_error_variance():
    # Days = a fixed profile + N(0, τ²) deviations, measured with known noise s² at some steps.
    rng = np.random.default_rng(5)  # simulation only
    p, w, tau, s = 60, 48, 3.0, 5.0
    profile = 50 + 20 * np.sin(np.arange(w) / w * 2 * np.pi)
    truth = profile[None, None, :] + rng.normal(0, tau, (p, 1, w))
    meas = truth + rng.normal(0, s, truth.shape)
    sampled = np.zeros(truth.shape, dtype=bool)
    sampled[:, :, ::4] = True
    prior = profile_prior(meas, np.full(truth.shape, s * s), sampled, days=28)
    # forecast error = day deviation + noise of the 28-day mean: τ² + (τ² + s²)/28
    expected = tau**2 + (tau**2 + s**2) / 28
    assert prior.variance[0, 0] == pytest.approx(expected, rel=0.35)
    np.testing.assert_allclose(prior.mean[0], profile, atol=4.0)
    assert profile_prior(meas[:1], np.ones((1, 1, w)), sampled[:1]) is None


def test_profile_prior_weighs_public_days_more_and_predicts_its_error():
    # 28 noise-free public days, then 28 released days with noise s >> τ: the forecast must stay
    # near the public days' profile (the equal mean would move towards the noise) and its
    # predicted error variance must match the realised one.
    rng = np.random.default_rng(11)  # simulation only
    w, tau, s, reps = 24, 2.0, 40.0, 300
    profile = 30 + 10 * np.cos(np.arange(w) / w * 2 * np.pi)
    sq, pred, eq = [], [], []
    for _ in range(reps):
        truth = profile[None, None, :] + rng.normal(0, tau, (57, 1, w))
        noise = np.zeros(truth[:56].shape)
        noise[28:] = s * s
        meas = truth[:56] + rng.normal(0, 1, noise.shape) * np.sqrt(noise)
        prior = profile_prior(meas, noise, np.ones(noise.shape, dtype=bool), days=56)
        sq.append(((prior.mean[0] - truth[56, 0]) ** 2).mean())
        pred.append(prior.variance[0].mean())
        eq.append(((meas.mean(axis=0)[0] - truth[56, 0]) ** 2).mean())
    assert np.mean(sq) < 0.5 * np.mean(eq)
    assert np.mean(pred) == pytest.approx(np.mean(sq), rel=0.2)


def _drifting_days(rng, p, w, *, tau, s, walk):
    """Days = profile + a level that walks from day to day + N(0, τ²), measured with noise s."""
    profile = 40 + 15 * np.sin(np.arange(w) / w * 2 * np.pi)
    level = np.cumsum(rng.normal(0, walk, p))
    truth = profile[None, None, :] + level[:, None, None] + rng.normal(0, tau, (p, 1, w))
    meas = truth + rng.normal(0, s, truth.shape)
    return truth, meas


def test_backtest_agrees_with_the_moments_on_exchangeable_days():
    rng = np.random.default_rng(22)  # simulation only
    p, w, tau, s = 40, 48, 3.0, 4.0
    ratios = []
    for _ in range(40):
        truth, meas = _drifting_days(rng, p, w, tau=tau, s=s, walk=0.0)
        noise = np.full(meas.shape, s * s)
        sampled = np.zeros(meas.shape, dtype=bool)
        sampled[:, :, ::3] = True
        bt = profile_prior(meas, noise, sampled, days=p)
        mo = profile_prior(meas, noise, sampled, days=p, calibration="moments")
        ratios.append(bt.variance[0, 0] / mo.variance[0, 0])
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.15)


def test_an_aggregate_gets_a_prior_only_from_its_own_periods():
    rng = np.random.default_rng(23)  # simulation only
    p, w = 8, 6
    meas = rng.uniform(10.0, 20.0, (p, 2, w))
    noise = np.full(meas.shape, 4.0)
    sampled = np.ones(meas.shape, dtype=bool)
    own = np.ones((p, 2), dtype=bool)
    own[:5, 0] = False  # node 0 measured in its own right in the last 3 periods only
    prior = profile_prior(meas, noise, sampled, independent=own, days=p)
    alone = profile_prior(meas[5:, :1], noise[5:, :1], sampled[5:, :1], days=p)
    np.testing.assert_allclose(prior.mean[0], alone.mean[0], rtol=1e-12)
    np.testing.assert_allclose(prior.variance[0], alone.variance[0], rtol=1e-12)
    own[:7, 0] = False  # one period of its own: no prior (τ² = ∞, weight 0)
    none = profile_prior(meas, noise, sampled, independent=own, days=p)
    assert np.isinf(none.variance[0]).all() and np.isfinite(none.variance[1]).all()
    np.testing.assert_allclose(none.mean[1], prior.mean[1])


def test_an_infinite_prior_variance_is_no_prior():
    h, fs, c, v, f, tau2 = _problem(3)
    tau2 = tau2.copy()
    tau2[0] = np.inf  # no prior on the total
    with_inf = project_consistent(
        c, hierarchy=h, features=fs, variances=v, prior_mean=f, prior_variances=tau2
    )
    merged_c, merged_w = merge_prior(c, 1.0 / v, f, tau2)
    np.testing.assert_allclose(merged_w[:, 0], 1.0 / v[:, 0])
    np.testing.assert_allclose(merged_c[:, 0], c[:, 0])
    direct = project_consistent(merged_c, hierarchy=h, features=fs, weights=merged_w)
    np.testing.assert_allclose(with_inf.values, direct.values, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"calibration": "loo"}, "'calibration'"),
        ({"independent": np.ones((3, 1), dtype=bool)}, "'independent'"),
        ({"shrink": "yes"}, "'shrink'"),
        ({"period": 5}, "'period'"),
        ({"period": 6.0}, "'period'"),
        ({"min_predecessors": 0}, "'min_predecessors'"),
    ],
)
def test_profile_prior_options_are_validated(kw, match):
    x = np.ones((4, 2, 6))
    with pytest.raises(ParameterError, match=match):
        profile_prior(x, x, x > 0, **kw)


def test_a_noisy_profile_is_shrunk_towards_its_smooth_part_and_a_known_one_kept():
    # Strong privacy, no public history: the released periods' noise swamps the daily shape of
    # a small, near-zero node; the forecast shrunk towards the smooth part errs far less than
    # the raw profile (and is what Algorithm 4's non-negativity sees).
    rng = np.random.default_rng(31)  # simulation only
    p, w, s, reps = 14, 48, 60.0, 100
    profile = 20 + 10 * np.sin(np.arange(w) / w * 2 * np.pi)  # Wh, say
    raw_err, shrunk_err = [], []
    for _ in range(reps):
        truth = np.maximum(profile[None, None, :] + rng.normal(0, 3, (p, 1, w)), 0.0)
        meas = truth + rng.laplace(0, s / np.sqrt(2), truth.shape)
        noise = np.full(truth.shape, s * s)
        sampled = np.ones(truth.shape, dtype=bool)
        shrunk = profile_prior(meas, noise, sampled, days=p)
        raw = profile_prior(meas, noise, sampled, days=p, shrink=False)
        raw_err.append(np.abs(raw.mean[0] - profile).mean())
        shrunk_err.append(np.abs(shrunk.mean[0] - profile).mean())
        np.testing.assert_array_equal(shrunk.variance, raw.variance)  # not claimed smaller
    assert np.mean(shrunk_err) < 0.6 * np.mean(raw_err)
    # the same profile every day, measured without noise: the profile is known, nothing moves
    same = np.broadcast_to(profile[None, None, :], truth.shape).copy()
    clean = profile_prior(same, np.zeros(same.shape), sampled, days=p)
    np.testing.assert_allclose(clean.mean[0], profile, rtol=1e-9)


def test_profile_prior_in_blocks_of_nodes_is_the_same(monkeypatch):
    # Large trees are taken in blocks of nodes (memory: 22 GB -> 4.8 GB at 100,000 feeders x 56
    # periods); every step is per node, so the blocks change nothing but rounding.
    import postproc._prior as module

    rng = np.random.default_rng(41)  # simulation only
    x = rng.normal(100, 30, (20, 300, 48))
    v = rng.uniform(1, 400, x.shape)
    s = rng.random(x.shape) < 0.3
    own = rng.random((20, 300)) < 0.8
    kw = dict(days=28, independent=own, error=1.5 * v, calibration="backtest")
    whole = profile_prior(x, v, s, **kw)
    monkeypatch.setattr(module, "_CHUNK_NUMBERS", 20 * 48 * 37)  # blocks of 37 nodes
    blocks = profile_prior(x, v, s, **kw)
    np.testing.assert_allclose(blocks.mean, whole.mean, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(blocks.variance, whole.variance, rtol=1e-12)


def test_the_sampled_steps_only_moments_equal_the_dense_ones(monkeypatch):
    """Issue 22.1: with the pipeline's masks (the same sampled steps for every node of a
    period) step 1 reads the sampled steps only; it equals the dense form to rounding."""
    import postproc._prior as pp

    rng = np.random.default_rng(7)
    p_, n, w = 9, 40, 48
    x = 50 + 10 * np.sin(np.arange(w) / 5)[None, None] + rng.normal(0, 3, (p_, n, w))
    sampled = np.zeros((p_, n, w), dtype=bool)
    for q in range(p_):
        sampled[q][:, np.linspace(0, w - 1, (2, 6, 12, 48)[q % 4]).astype(int)] = True
    noise = np.where(sampled, rng.uniform(1, 4, (p_, n, 1)), rng.uniform(5, 9, (p_, n, 1)))
    own = rng.uniform(size=(p_, n)) > 0.2
    kw = dict(error=noise * 1.5, independent=own, days=28)
    fast = pp.profile_prior(x, noise, sampled, **kw)
    monkeypatch.setattr(pp, "_columns", lambda rs: None)  # the dense form
    dense = pp.profile_prior(x, noise, sampled, **kw)
    np.testing.assert_allclose(fast.mean, dense.mean, rtol=1e-10)
    np.testing.assert_allclose(fast.variance, dense.variance, rtol=1e-10)
