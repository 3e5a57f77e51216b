"""pak_defaults: Mechanism 1's local parameters from public inputs only (issue 14 item 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError, best_counter, pak_release
from planner import PAPER_DEFAULTS, PakDefaults, model_prefix, pak_defaults, plan_pak

PUBLIC = {"n": 200_000, "bound": 36.0, "epsilon": 1.0, "delta": 2.0**-20, "time_lag": 20_000}


@pytest.fixture(scope="module")
def defaults():
    return pak_defaults(**PUBLIC)


def test_defaults_are_public_and_follow_the_default_counter(defaults):
    assert isinstance(defaults, PakDefaults) and defaults.private is True
    assert defaults.counter == best_counter(180_000, epsilon=1.0, bound=1.0, delta=2.0**-20)
    assert defaults.model_mean == pytest.approx(36.0 / math.log(200_000))
    d = defaults
    assert 1.0 <= d.r <= 2.5 and 0.5 < d.lam <= 1.0 and 0.1 <= d.eps1_share < 1.0
    assert 0.0 < d.p <= 0.005 and 0.0 < d.beta_lt < 0.02
    t = d.model_plan.terms  # the chosen setting is Eq. 16's optimum on the model prefix
    assert (t.r, t.lam, t.eps1_share) == (d.r, d.lam, d.eps1_share)
    assert d.model_plan.counter == d.counter


def test_deterministic(defaults):
    assert pak_defaults(**PUBLIC).release_parameters() == defaults.release_parameters()


def test_choice_does_not_depend_on_the_scale_of_the_model(defaults):
    # every term of Eq. 16 scales with μ under the model: μ/8 gives the same setting
    m = PUBLIC["time_lag"]
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
        **defaults.release_parameters(),
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
