"""pak_defaults: Mechanism 1's local parameters from public inputs only (issue 14 item 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError, best_counter, pak_release
from planner import (
    PAPER_DEFAULTS,
    PakDefaults,
    model_prefix,
    pak_defaults,
    pak_mean_square_error,
    plan_pak,
)

PUBLIC = {"n": 200_000, "bound": 36.0, "epsilon": 1.0, "delta": 2.0**-20, "time_lag": 20_000}


@pytest.fixture(scope="module")
def defaults():
    return pak_defaults(**PUBLIC)


def test_defaults_are_public_and_follow_the_default_counter(defaults):
    assert isinstance(defaults, PakDefaults) and defaults.private is True
    assert defaults.counter == best_counter(180_000, epsilon=1.0, bound=1.0, delta=2.0**-20)
    assert defaults.model_mean == pytest.approx(36.0 / (4 * math.log(20_001)))
    d = defaults
    assert 1.0 <= d.r <= 3.0 and 0.5 < d.lam <= 1.0 and 0.3 <= d.eps1_share < 1.0
    assert 0.0 < d.p <= 0.005 and 0.0 < d.beta_lt < 0.02
    t = d.model_plan.terms  # λ is Eq. 16's optimum on the model prefix (r, ε₁/ε: its MSE's)
    assert t.lam == d.lam
    assert d.model_plan.counter == d.counter


def test_deterministic(defaults):
    assert pak_defaults(**PUBLIC).release_parameters() == defaults.release_parameters()


def test_choice_does_not_depend_on_the_scale_of_the_model():
    # every term of Eq. 16 scales with μ under the model (the clip at B does not bind, the
    # smooth sensitivity's pairs reaching B are damped): μ/8 gives the same setting
    m = PUBLIC["time_lag"]
    defaults = pak_defaults(**PUBLIC, objective="eq16")
    small = plan_pak(
        model_prefix(m, bound=36.0, mean=defaults.model_mean / 8), n=200_000, bound=36.0,
        epsilon=1.0, delta=2.0**-20, beta=0.02,
    )  # fmt: skip
    assert small.terms.r == pytest.approx(defaults.r, rel=0.02)
    assert small.terms.lam == pytest.approx(defaults.lam, rel=0.02)
    assert small.terms.eps1_share == pytest.approx(defaults.eps1_share, rel=0.02)


def test_model_prefix_is_the_exponential_quantiles():
    y = model_prefix(999, bound=10.0, mean=1.0)  # the largest is ln(1000) ≈ 6.9 < 10
    assert y.size == 999 and np.all(np.diff(y) > 0) and y.max() == pytest.approx(math.log(1000))
    assert y[499] == pytest.approx(math.log(2.0))  # the median of Exp(1)
    assert model_prefix(999, bound=2.0, mean=1.0).max() == 2.0  # clipped to B


def test_tree_bound_gives_the_papers_counter():
    d = pak_defaults(**PUBLIC, counter=None)
    assert d.counter == "binary_tree" and d.release_parameters()["counter"] == "binary_tree"
    assert d.model_plan.counter is None


def test_release_parameters_run_mechanism_1(defaults):
    x = np.random.default_rng(4).exponential(2.0, 30_000).clip(0, 36.0)
    rel = pak_release(
        x, bound=36.0, epsilon=1.0, delta=2.0**-20, time_lag=20_000, seed=1,
        **defaults.threshold_parameters(),
    )  # fmt: skip
    assert rel.parameters.r == defaults.r and rel.parameters.lam == defaults.lam
    assert rel.privacy.parameters["counter"] == defaults.counter


def test_paper_defaults_are_pak_releases_defaults():
    import inspect

    sig = inspect.signature(pak_release).parameters
    assert {k: sig[k].default for k in PAPER_DEFAULTS} == PAPER_DEFAULTS


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"time_lag": 200_000}, "time_lag"),
        ({"time_lag": 1}, "time_lag"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"bound": -1.0}, "bound"),
        ({"n": 1}, "'n'"),
        ({"noise": "cauchy"}, "noise"),
    ],
)
def test_bad_public_inputs_raise_named_errors(change, match):
    with pytest.raises(ParameterError, match=match) as info:
        pak_defaults(**{**PUBLIC, **change})
    assert "pak_defaults" in str(info.value)


def test_mse_objective_keeps_eq16_quantile_and_minimises_on_the_grid(defaults):
    from planner import R_GRID, SHARE_GRID
    from planner._pak_defaults import _model_loss

    eq16 = pak_defaults(**PUBLIC, objective="eq16")
    assert defaults.objective == "mse" and eq16.objective == "eq16"
    assert (defaults.lam, defaults.p, defaults.beta_lt) == (eq16.lam, eq16.p, eq16.beta_lt)
    assert (eq16.r, eq16.eps1_share) == (eq16.model_plan.terms.r, eq16.model_plan.terms.eps1_share)
    assert math.isnan(eq16.model_rmse) and math.isfinite(defaults.model_rmse)
    assert defaults.r in R_GRID and defaults.eps1_share in SHARE_GRID
    prefix = model_prefix(PUBLIC["time_lag"], bound=36.0, mean=defaults.model_mean)
    kw = dict(
        n=200_000, bound=36.0, epsilon=1.0, delta=2.0**-20, lam=defaults.lam, p=defaults.p,
        beta_lt=defaults.beta_lt, counter=defaults.counter,
        loss=_model_loss(200_000, defaults.model_mean),
    )  # fmt: skip
    best = pak_mean_square_error(prefix, r=R_GRID, eps1_share=defaults.eps1_share, **kw)
    assert math.sqrt(best.min()) == pytest.approx(defaults.model_rmse)
    assert R_GRID[int(np.argmin(best))] == defaults.r
    for share in SHARE_GRID[np.abs(SHARE_GRID - defaults.eps1_share) > 0.005][::7]:
        other = pak_mean_square_error(prefix, r=R_GRID, eps1_share=share, **kw)
        assert other.min() >= best.min()


def test_mean_square_error_matches_simulation_on_zero_loss():
    # all-zero model loss: the MSE is the noise's, 2τ²/ε₂² + τ²v averaged over τ's law;
    # check it against seeded releases of an all-zero suffix with the same prefix.
    from planner._pak_defaults import _noise_quantiles

    z = _noise_quantiles("laplace")
    assert abs(z.mean()) < 1e-12 and np.mean(np.abs(z)) == pytest.approx(1.0, rel=0.02)
    assert _noise_quantiles("laplace", 0.01).min() > np.log(2 * 0.01)  # Z > G⁻¹(β_lt)
    x = np.concatenate(
        [np.random.default_rng(2).exponential(1.0, 20_000).clip(0, 36), np.zeros(30_000)]
    )
    kw = dict(n=x.size, bound=36.0, epsilon=1.0, delta=2.0**-20, lam=0.85, p=0.005,
              beta_lt=0.004, counter="kary_tree_consistent")  # fmt: skip
    mse = pak_mean_square_error(
        x[:20_000], r=1.5, eps1_share=0.85,
        loss=lambda t: (np.zeros_like(t), np.zeros_like(t)), **kw,
    )[0]  # fmt: skip
    prefix_clip = lambda t: np.minimum(x[:20_000], t).sum()  # noqa: E731
    errs = []
    for s in range(300):
        rel = pak_release(x, time_lag=20_000, seed=s, r=1.5, eps1_share=0.85,
                          **{k: v for k, v in kw.items() if k != "n"})  # fmt: skip
        errs.append(rel.prefix_sums[-1] - prefix_clip(rel.threshold))
    assert np.mean(np.square(errs)) == pytest.approx(mse, rel=0.25)


def test_bad_objective_is_refused():
    with pytest.raises(ParameterError, match="objective"):
        pak_defaults(**PUBLIC, objective="rmse")


def test_threshold_does_not_pay_where_it_is_at_b_and_costs_more(defaults):
    # PUBLIC's prefix of 20,000 at ε₁ ≈ 0.3: the smooth sensitivity is the padding at B's, the
    # model's θ is B in > 99 % of releases, and in the rest a positive θ below the quantile
    # clips the model's values: the whole law's mean square is above the plain counter's, so
    # the default keeps ε₁ (the plain counter) and says so; the setting stays reachable
    d = defaults
    assert d.at_bound >= 0.99 and d.threshold_rmse > d.plain_rmse and not d.threshold
    assert d.release_parameters() == {"threshold": False, "noise": "laplace",
                                      "counter": d.counter}  # fmt: skip
    assert d.threshold_parameters()["r"] == d.r and "threshold" not in d.threshold_parameters()
    # the whole law at the chosen setting, integrated independently (a fine grid of u)
    y = model_prefix(20_000, bound=36.0, mean=d.model_mean)
    from mechanisms import pak_threshold_calibration

    cal = pak_threshold_calibration(y, bound=36.0, epsilon=d.eps1_share, delta=2.0**-20,
                                    lam=d.lam, p=d.p, beta_lt=d.beta_lt)  # fmt: skip
    u = (np.arange(2_000_000) + 0.5) / 2_000_000
    z = np.where(u < 0.5, np.log(2 * u), -np.log(2 * (1 - u)))
    theta = np.clip(d.r * (cal.tau_prime + cal.scale * z), 0.0, 36.0)
    theta[theta <= 0.0] = 36.0  # the guard
    assert float(np.mean(theta >= 36.0)) == pytest.approx(d.at_bound, abs=2e-4)


def test_threshold_pays_with_a_long_prefix():
    # the docstring's example: a long prefix, the model's θ well below B: the verdict is not
    # taken (the model's scale would decide it) and the threshold stays
    d = pak_defaults(n=500_000, bound=36.0, epsilon=1.0, delta=2.0**-20, time_lag=82_423)
    assert d.threshold and d.at_bound < 0.01 and d.threshold_rmse < d.plain_rmse
    assert d.release_parameters() == d.threshold_parameters()
