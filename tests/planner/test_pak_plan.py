"""plan_pak: Table I trends, constraints at the optimum, fallback to BT, errors, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import DomainError, ParameterError, pak_kappa, pak_release
from planner import BETA_KEYS, PakPlan, plan_pak, quantile_failure_probability

N_TRIPS = 25_000_000
BOUND = 1440.0
# the paper's protocol (Table I): Eq. 16 with the tree bound, released with the paper's BT
PAPER = {
    "n": N_TRIPS, "bound": BOUND, "epsilon": 1.0, "delta": 2.0**-20, "beta": 0.02,
    "counter": None,
}  # fmt: skip


@pytest.fixture(scope="module")
def plans(trips):
    return {m: plan_pak(trips[:m], **PAPER) for m in (10_000, 40_000, 60_000, 100_000)}


def test_if_is_one_when_m_is_too_small(plans):
    # Table I, first row: no setting beats BT, the plan says so with Table I's parameters
    plan = plans[10_000]
    assert not plan.use_threshold
    assert plan.improvement_factor == 1.0 and plan.error_bound == plan.baseline_error_bound
    assert (plan.r, plan.lam, plan.p, plan.eps1_share) == (1.0, 1.0, 0.005, 0.0)
    assert plan.beta_shares == {"qt": 0.0, "lt": 0.0, "lap": 1.0, "out": 0.0, "rt": 0.0}
    assert plan.terms is not None and plan.terms.error_bound >= plan.baseline_error_bound
    assert plan.release_parameters() == {
        "threshold": False, "noise": "laplace", "counter": "binary_tree"
    }  # fmt: skip


def test_table_i_trend_if_grows_with_m(plans):
    ifs = [plans[m].improvement_factor for m in sorted(plans)]
    assert ifs == sorted(ifs) and ifs[-1] > 3.0
    shares = [plans[m].beta_shares["lap"] for m in (40_000, 60_000, 100_000)]
    assert shares[-1] > shares[0]  # more of β goes to the Laplace term as m grows (Table I)
    for m in (40_000, 60_000, 100_000):
        plan = plans[m]
        assert plan.use_threshold
        assert 1.0 <= plan.r <= 2.5 and 0.7 <= plan.lam <= 1.0 and 0.7 <= plan.eps1_share < 1.0


@pytest.mark.parametrize("m", [40_000, 60_000, 100_000])
def test_constraints_hold_at_the_optimum(plans, m):
    plan = plans[m]
    shares = plan.beta_shares
    assert set(shares) == set(BETA_KEYS)
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(v > 0 for v in shares.values())
    beta = plan.beta_values
    assert quantile_failure_probability(plan.lam, plan.p, m) <= beta["qt"]  # Eq. 5
    assert plan.p <= 0.005 and plan.lam <= 1.0 and plan.r >= 1.0
    t = plan.terms
    assert t.kappa > 0 and t.kappa == pytest.approx(
        pak_kappa(a=t.a, b=t.b, beta_lt=beta["lt"])
    )  # Eq. 11
    assert plan.error_bound == pytest.approx(t.laplace_error_bound + t.outlier_error_bound)
    assert plan.improvement_factor == pytest.approx(plan.baseline_error_bound / plan.error_bound)
    assert plan.private is False and "analysis only" in plan.note


def test_plan_is_deterministic(trips):
    first = plan_pak(trips[:40_000], **PAPER)
    second = plan_pak(trips[:40_000].copy(), **PAPER)
    assert first == second


def test_tnc_and_slsqp_agree(plans, trips):
    # another scipy method on the same objective lands on (nearly) the same optimum
    slsqp = plan_pak(trips[:60_000], **PAPER, method="SLSQP")
    assert slsqp.error_bound == pytest.approx(plans[60_000].error_bound, rel=0.02)


def test_plan_runs_mechanism_1(plans, trips):
    plan = plans[40_000]
    values = trips[:50_000]
    rel = pak_release(
        values, bound=BOUND, epsilon=1.0, delta=2.0**-20, time_lag=40_000, seed=1,
        **plan.release_parameters(),
    )  # fmt: skip
    assert rel.parameters.lam == plan.lam and rel.parameters.r == plan.r
    assert np.isnan(rel.prefix_sums[:39_999]).all() and np.isfinite(rel.prefix_sums[-1])


def test_plan_fields(plans):
    plan = plans[60_000]
    assert isinstance(plan, PakPlan)
    row = plan.as_row()
    assert list(row)[:11] == [
        "m", "IF", "r", "λ", "p", "ε₁/ε", "β_qt/β", "β_lt/β", "β_lap/β", "β_out/β", "β_rt/β",
    ]  # fmt: skip
    assert plan.epsilon_threshold == pytest.approx(plan.eps1_share)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"p_max": 1.0}, ParameterError, "p_max"),
        ({"p_max": 1.5}, ParameterError, "p_max"),
        ({"beta": 1.0}, ParameterError, "beta"),
        ({"beta": 0.7}, ParameterError, "beta"),
        ({"n": 1_000}, ParameterError, "smaller than n"),
        ({"n": 2_000}, ParameterError, "smaller than n"),
        ({"epsilon": 0.0}, ParameterError, "epsilon"),
        ({"delta": 1.0}, ParameterError, "delta"),
        ({"noise": "cauchy"}, ParameterError, "noise"),
        ({"method": "nelder-mead"}, ParameterError, "method"),
    ],
)
def test_bad_inputs_give_clear_errors(trips, kwargs, error, match):
    with pytest.raises(error, match=match):
        plan_pak(trips[:2_000], **{**PAPER, **kwargs})


@pytest.mark.parametrize("bad", [-1.0, 1441.0, np.nan])
def test_prefix_outside_the_bound_is_refused_without_values(trips, bad):
    prefix = trips[:2_000].copy()
    prefix[7] = bad
    with pytest.raises(DomainError) as info:
        plan_pak(prefix, **PAPER)
    assert str(bad) not in str(info.value).replace("[0, 1440]", "")


def test_old_alpha_names_warn_and_point_to_error_bound(plans):
    # issue 12: α is the (w, α) unit's word; the error bound is `error_bound`
    plan = plans[60_000]
    with pytest.warns(DeprecationWarning, match="'alpha' attribute of PakPlan.*'error_bound'"):
        assert plan.alpha == plan.error_bound
    with pytest.warns(DeprecationWarning, match="'baseline_error_bound'"):
        assert plan.baseline_alpha == plan.baseline_error_bound
    t = plan.terms
    with pytest.warns(DeprecationWarning, match="ErrorTerms.*'error_bound'"):
        assert t.alpha == t.error_bound
    with pytest.warns(DeprecationWarning, match="'laplace_error_bound'"):
        assert t.alpha_lap == t.laplace_error_bound
    with pytest.warns(DeprecationWarning, match="'outlier_error_bound'"):
        assert t.alpha_out == t.outlier_error_bound
    row = plan.as_row()
    assert row["error_bound"] == plan.error_bound and "alpha" not in row
