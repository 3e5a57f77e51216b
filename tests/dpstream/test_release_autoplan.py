"""release_optstream(k="auto"): plans from released measurements only, prior, shares, Gaussian."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpstream
from dpstream.pipelines import _autoplan as ap
from dpstream.pipelines._frames import prepare_frame, to_periods
from mechanisms import ParameterError
from mechanisms.optstream._sampling import sample_equal
from mechanisms.wevent import gaussian_rho

HIER = {"total": ["a", "b"]}


def _frame(days: int = 6, extra: int = 0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # the data, not noise
    t = np.arange(48 * days + extra)
    base = 100 + 40 * np.sin(2 * np.pi * t / 48)
    idx = pd.date_range("2016-01-01", periods=t.size, freq="30min")
    return pd.DataFrame(
        {"a": base + rng.uniform(0, 10, t.size), "b": 0.5 * base + rng.uniform(0, 5, t.size)},
        index=idx,
    )


def _cfg(frame, **kw):
    sf = prepare_frame(frame, owner="test", hierarchy=HIER)
    args = dict(epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
                level_shares=None, prior=True)  # fmt: skip
    args.update(kw)
    return sf, ap._config(hierarchy=sf.hierarchy, nodes=sf.nodes, **args)


def test_auto_is_the_default_and_records_a_plan_per_period():
    frame = _frame(days=5, extra=10)
    out = dpstream.release_optstream(frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=1)
    plans = out.attrs["plan"]
    assert len(plans) == 6  # 5 days + the tail
    assert plans[0]["basis"] == "rule" and plans[1]["basis"] == "released"
    # planned blind, the first period has no prediction; every planned one has
    assert plans[0]["predicted"] is None
    assert all(np.isfinite(p["predicted"]) and p["predicted"] > 0 for p in plans[1:])
    assert plans[-1]["k"] == min(plans[-2]["k"], 10)  # the tail keeps the full period's plan
    assert (out >= 0).all().all()
    np.testing.assert_allclose(out["total"], out["a"] + out["b"], atol=1e-6)
    assert out.attrs["measurements"].shape == (frame.shape[0], 3)


def test_plans_and_release_are_recomputed_from_the_measurements_alone():
    # Privacy: the plans, priors and post-processing read the data only through the
    # measurements released by the private step (post-processing, [FV19] Theorem 3).
    frame = _frame(days=6)
    out = dpstream.release_optstream(frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=2)
    sf, cfg = _cfg(frame)
    plans, priors = ap.replan(out.attrs["measurements"], cfg)
    starts = [sf.index[i * 48] for i in range(len(plans))]
    assert ap.records(plans, priors, starts) == out.attrs["plan"]
    # ... and so is the released frame.
    meas = out.attrs["measurements"]
    measured = [
        ap.as_measurement(meas[i * 48 : (i + 1) * 48].T, p, cfg) for i, p in enumerate(plans)
    ]
    released = ap.post_process_periods(measured, plans, priors, sf.hierarchy)
    np.testing.assert_allclose(np.concatenate([r.T for r in released]), out.to_numpy(), atol=1e-9)


def test_changed_earlier_private_values_with_the_same_measurements_change_nothing():
    frame = _frame(days=6)
    out = dpstream.release_optstream(frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=3)
    meas = out.attrs["measurements"]
    sf, cfg = _cfg(frame)
    other = frame.copy()
    other.iloc[:96] = other.iloc[:96] * 3.0 + 50.0  # different private values, days 0-1
    of = prepare_frame(other, owner="test", hierarchy=HIER)
    periods = to_periods(of.values, 48)

    def same_measurements(i, vals, plan):
        return ap.as_measurement(meas[i * 48 : (i + 1) * 48].T, plan, cfg)

    _, plans, priors = ap.run_periods(
        periods.full, periods.tail, cfg, history=None, measure=same_measurements
    )
    assert ap.records(plans, priors, [sf.index[i * 48] for i in range(6)]) == out.attrs["plan"]


def test_every_window_stays_within_epsilon():
    frame = _frame(days=8, seed=4)
    for alpha in (0.5, 50.0):
        out = dpstream.release_optstream(frame, epsilon=1.0, alpha=alpha, hierarchy=HIER, seed=5)
        cost = np.concatenate(
            [
                np.where(np.isin(np.arange(48), sample_equal(48, p["k"])), p["budget"] / p["k"], 0)
                for p in out.attrs["plan"]
            ]
        )
        worst = max(cost[s : s + 48].sum() for s in range(cost.size - 47))
        assert worst <= 1.0 + 1e-9


def test_history_is_read_and_labelled():
    frame = _frame(days=3)
    history = _frame(days=4, seed=9)
    history.index = history.index - pd.Timedelta(days=4)
    out = dpstream.release_optstream(
        frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=1, history=history
    )
    assert out.attrs["plan"][0]["basis"] == "history"
    assert out.attrs["plan"][0]["prior_periods"] == 4


def test_gaussian_noise_is_accounted_in_zcdp():
    frame = _frame(days=3)
    out = dpstream.release_optstream(
        frame, epsilon=1.0, alpha=0.5, hierarchy=HIER, seed=1, noise="gaussian", delta=1e-6
    )
    rho = gaussian_rho(1.0, 1e-6)  # tight: composed Gaussians are one Gaussian
    assert all(p["noise"] == "gaussian" and p["budget"] <= rho for p in out.attrs["plan"])
    assert all(p["epsilon_dp"] <= 1.0 for p in out.attrs["plan"])  # (ε, δ) = (1, 1e-6)
    np.testing.assert_allclose(out["total"], out["a"] + out["b"], atol=1e-6)


def test_bottom_up_spends_nothing_on_the_root():
    frame = _frame(days=3)
    out = dpstream.release_optstream(
        frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=1, level_shares="bottom-up"
    )
    assert all(p["shares"] == [0.0, 1.0] for p in out.attrs["plan"])
    np.testing.assert_allclose(out["total"], out["a"] + out["b"], atol=1e-6)


def test_an_aggregate_summed_from_its_leaves_gets_no_prior_of_its_own():
    # Bottom-up: the total is the sum of its leaves' estimates every period, so a prior on it
    # would count the leaves' days twice; with its own measurements (equal shares) it has one.
    frame = _frame(days=5)
    for shares, root_prior in (("bottom-up", False), ("equal", True)):
        out = dpstream.release_optstream(
            frame, epsilon=1.0, alpha=5.0, hierarchy=HIER, seed=3, level_shares=shares
        )
        sf, cfg = _cfg(frame, level_shares=shares)
        _, priors = ap.replan(out.attrs["measurements"], cfg)
        later = [p for p in priors if p is not None]
        assert len(later) == 3  # from the third period on
        total = sf.hierarchy.index("total")
        for prior in later:
            assert np.isfinite(prior.variance[total]).all() == root_prior
            leaves = [sf.hierarchy.index(x) for x in ("a", "b")]
            assert np.isfinite(prior.variance[leaves]).all()
        np.testing.assert_allclose(out["total"], out["a"] + out["b"], atol=1e-6)


def test_the_papers_settings_stay_reachable():
    frame = _frame(days=2)
    out = dpstream.release_optstream(frame, alpha=1.0, epsilon=1.0, k=10, sampling="l1", seed=1)
    assert "plan" not in out.attrs and out.shape == frame.shape


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"noise": "cauchy"}, "'noise'"),
        ({"noise": "gaussian"}, "'delta'"),
        ({"target": "national"}, "'target'"),
        ({"level_shares": (0.7, 0.7)}, "'level_shares'"),
        ({"sampling": "l1"}, "'k'"),
        ({"prior": "yes"}, "'prior'"),
        ({"delta": 2.0}, "'delta'"),
    ],
)
def test_bad_auto_parameters_raise_before_any_draw(kw, match):
    with pytest.raises(ParameterError, match=match):
        dpstream.release_optstream(_frame(days=1), epsilon=1.0, alpha=5.0, hierarchy=HIER, **kw)
