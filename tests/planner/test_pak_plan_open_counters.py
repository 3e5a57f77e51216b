"""The PAK planner with an open suffix counter (``"unbounded"``, ``"unbounded_blt"``; issue 27
item 5): Eq. 16 and its mean-square form use the open counter's exact variance at step n − m,
and the prediction matches seeded releases as it does for the sized counters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import counter_end_variance, pak_release
from mechanisms.counting import OPEN_COUNTERS, unbounded_blt_variance, unbounded_kary_variance
from planner import model_prefix, pak_defaults, pak_mean_square_error, plan_pak, plan_pak_mse

DELTA = 2.0**-20
PUBLIC = {"n": 200_000, "bound": 36.0, "epsilon": 1.0, "delta": DELTA, "time_lag": 20_000}


def _open_variance(counter, t, bound):
    if counter == "unbounded":
        return float(unbounded_kary_variance(np.array([t]), epsilon=1.0, bound=bound)[0])
    return float(unbounded_blt_variance(t, epsilon=1.0, delta=DELTA, bound=bound)[0])


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_end_variance_is_the_open_counters_closed_form(counter):
    for t in (1, 48, 1000, 180_000, 10**7):
        got = counter_end_variance(counter, t, epsilon=1.0, bound=1.0, delta=DELTA)
        assert got == pytest.approx(_open_variance(counter, t, 1.0), rel=1e-12)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_defaults_plan_with_the_open_counter(counter):
    d = pak_defaults(**PUBLIC, counter=counter)
    assert d.counter == counter and d.model_plan.counter == counter
    assert d.release_parameters()["counter"] == counter
    # Eq. 16's counter term: the plan's error bound moves with the counter's variance; at the
    # same (r, λ, p, ε₁/ε, β) its terms are those of a plan whose counter has that variance
    t = d.model_plan.terms
    assert t is not None and math.isfinite(d.model_rmse)
    # the mean-square objective at the chosen setting is the documented sum with v = the
    # open counter's exact variance at n − m (bound 1, scaled by τ²): zero loss isolates it
    prefix = model_prefix(20_000, bound=36.0, mean=d.model_mean)
    kw = dict(n=200_000, bound=36.0, epsilon=1.0, delta=DELTA, lam=d.lam, p=d.p,
              beta_lt=d.beta_lt, loss=lambda tau: (0 * tau, 0 * tau))  # fmt: skip
    mine = pak_mean_square_error(prefix, r=d.r, eps1_share=d.eps1_share, counter=counter, **kw)
    tree = pak_mean_square_error(prefix, r=d.r, eps1_share=d.eps1_share, counter="binary_tree",
                                 **kw)  # fmt: skip
    v_open = _open_variance(counter, 180_000, 1.0)
    v_tree = counter_end_variance("binary_tree", 180_000, epsilon=1.0, bound=1.0)
    # MSE = E[2τ²/ε₂²] + E[τ²]·v: two counters share the τ law, so the difference is linear in v
    e_tau2 = (mine[0] - tree[0]) / (v_open - v_tree)
    base = mine[0] - e_tau2 * v_open  # E[2τ²/ε₂²] = E[τ²]·2/ε₂²
    eps2 = (1.0 - d.eps1_share) * 1.0
    assert base == pytest.approx(e_tau2 * 2.0 / eps2**2, rel=1e-9)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_plan_pak_accepts_the_open_counter(counter):
    prefix = model_prefix(20_000, bound=36.0, mean=1.0)
    plan = plan_pak(prefix, n=200_000, bound=36.0, epsilon=1.0, delta=DELTA, beta=0.02,
                    counter=counter)  # fmt: skip
    assert plan.counter == counter


@pytest.mark.slow
@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_mean_square_error_matches_simulation_on_zero_loss(counter):
    # as tests/planner/test_pak_defaults.py does for the sized counters: the noise's MSE,
    # 2τ²/ε₂² + τ²v over τ's law, against seeded releases of an all-zero suffix
    x = np.concatenate(
        [np.random.default_rng(2).exponential(1.0, 20_000).clip(0, 36), np.zeros(2_000)]
    )
    kw = dict(n=x.size, bound=36.0, epsilon=1.0, delta=DELTA, lam=0.85, p=0.005,
              beta_lt=0.004, counter=counter)  # fmt: skip
    mse = pak_mean_square_error(
        x[:20_000], r=1.5, eps1_share=0.85,
        loss=lambda t: (np.zeros_like(t), np.zeros_like(t)), **kw,
    )[0]  # fmt: skip
    errs = []
    for s in range(300):
        rel = pak_release(x, time_lag=20_000, seed=s, r=1.5, eps1_share=0.85,
                          **{k: v for k, v in kw.items() if k != "n"})  # fmt: skip
        errs.append(rel.prefix_sums[-1] - np.minimum(x[:20_000], rel.threshold).sum())
    assert np.mean(np.square(errs)) == pytest.approx(mse, rel=0.25)


@pytest.mark.parametrize("counter", OPEN_COUNTERS)
def test_plain_counter_plan_predicted_within_20_percent(counter):
    # values near B: the threshold does not pay, the plan keeps the plain open counter and its
    # RMSE is the counter's exact std at n (as test_pak_mse does for the sized counters)
    x = np.random.default_rng(0).uniform(50.0, 100.0, 2000)
    plan = plan_pak_mse(x[:300], n=x.size, bound=100.0, epsilon=1.0, delta=DELTA,
                        counter=counter)  # fmt: skip
    assert not plan.use_threshold and plan.counter == counter
    assert plan.rmse == pytest.approx(math.sqrt(_open_variance(counter, x.size, 100.0)))
    truth = math.fsum(x)
    err = [
        pak_release(x, bound=100.0, epsilon=1.0, delta=DELTA, time_lag=300, seed=s,
                    **plan.release_parameters()).prefix_sums[-1] - truth
        for s in range(200)
    ]  # fmt: skip
    real = float(np.sqrt(np.mean(np.square(err))))
    assert 0.8 <= real / plan.rmse <= 1.2, (counter, real, plan.rmse)
