"""The two paths agree: fast (closed form + active set) vs cvxpy + OSQP, and solver errors."""

from __future__ import annotations

import numpy as np
import pytest
from _pp_helpers import random_features, random_hierarchy, random_instance
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import SolverError
from postproc import OSQP_SETTINGS, FeatureSet, Hierarchy, project_consistent

REGIONS = Hierarchy(children={"FR": ["r0", "r1"], "r0": ["a", "b", "c"], "r1": ["d", "e"]})


def _relative_gap(fast, slow, estimates):
    scale = max(np.abs(fast.values).max(), 1e-3 * np.abs(estimates).max(), 1e-12)
    return np.abs(fast.values - slow.values).max() / scale


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 6),
    st.integers(1, 8),
    st.integers(0, 2),
    st.sampled_from([0.5, 5.0, 40.0]),
    st.sampled_from(["paper", "separable", "general"]),
)
def test_fast_and_cvxpy_agree_on_random_hierarchies(seed, n_nodes, w, extra, noise, kind):
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng, n_nodes)
    fs = random_features(rng, w, extra)
    _, c, weights = random_instance(rng, h, fs, 2, noise, kind)
    fast = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    slow = project_consistent(c, hierarchy=h, features=fs, weights=weights, method="cvxpy")
    assert slow.status == ("optimal", "optimal")
    assert _relative_gap(fast, slow, c) <= 1e-6
    np.testing.assert_allclose(slow.objective, fast.objective, rtol=1e-6, atol=1e-9)
    # the fast path is the exact optimum: OSQP can only be (slightly) worse
    assert np.all(fast.objective <= slow.objective * (1 + 1e-9) + 1e-12)


@pytest.mark.parametrize("kind", ["paper", "general"])
def test_agree_on_the_default_features_with_many_active_bounds(kind):
    rng = np.random.default_rng(7)
    fs = FeatureSet.default(48)
    _, c, weights = random_instance(rng, REGIONS, fs, 3, 30.0, kind)
    fast = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights)
    slow = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights, method="cvxpy")
    assert fast.n_active.min() > 10  # the bounds matter here
    assert fast.separable == (kind == "paper")
    np.testing.assert_array_equal(fast.n_active, slow.n_active)
    assert _relative_gap(fast, slow, c) <= 1e-6
    assert slow.kkt["stationarity"] <= 1e-6 and slow.kkt["dual"] <= 1e-6
    assert (slow.polish == 1).all()


def test_large_values_are_whitened():
    # Loads in the 1e6 range, weights spanning ~1e-4..1: OSQP still agrees (whitening).
    rng = np.random.default_rng(8)
    fs = FeatureSet.default(48)
    truth, c, _ = random_instance(rng, REGIONS, fs, 1, 2.0, "paper")
    c = c * 1e5
    weights = np.outer(rng.uniform(1e-2, 1, len(REGIONS.nodes)), fs.paper_weights())
    fast = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights)
    slow = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights, method="cvxpy")
    assert _relative_gap(fast, slow, c) <= 1e-6


def test_osqp_failure_raises_solver_error_with_status():
    rng = np.random.default_rng(9)
    fs = FeatureSet.default(48)
    _, c, _ = random_instance(rng, REGIONS, fs, 1, 30.0, "paper")
    with pytest.raises(SolverError, match="did not solve period 0") as info:
        project_consistent(
            c,
            hierarchy=REGIONS,
            features=fs,
            method="cvxpy",
            osqp_settings={"max_iter": 2, "polishing": False},
        )
    assert info.value.status == "user_limit"


def test_osqp_settings_are_explicit():
    assert OSQP_SETTINGS["polishing"] is True
    assert OSQP_SETTINGS["eps_abs"] == OSQP_SETTINGS["eps_rel"] == 1e-9
    with pytest.raises(TypeError):
        OSQP_SETTINGS["eps_abs"] = 1.0  # read-only
