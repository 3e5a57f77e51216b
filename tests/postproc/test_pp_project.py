"""project_consistent: known answers, optimality (KKT), consistency, Theorem 12, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from _pp_helpers import (
    nnls_reference,
    random_features,
    random_hierarchy,
    random_instance,
    tree_blue,
    weighted_norm,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanisms import DomainError, ParameterError
from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._fast import _KronFactor, separable_factors

REGIONS = Hierarchy(children={"FR": ["r0", "r1"], "r0": ["a", "b", "c"], "r1": ["d", "e"]})
TWO = FeatureSet.from_breaks(2, [(0, 2)])  # {0}, {1}, {0, 1}


def _check_consistent(result, hierarchy, features):
    values, parts = result.values, result.parts
    for parent, kids in hierarchy.children.items():
        idx = [hierarchy.index(k) for k in kids]
        np.testing.assert_allclose(
            values[:, hierarchy.index(parent)], values[:, idx].sum(axis=1), rtol=1e-12, atol=1e-9
        )
    np.testing.assert_allclose(parts, values @ features.matrix.T, rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(parts[..., : features.w], values)
    assert (values >= 0).all() and (parts >= 0).all()


# -- known answers ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["fast", "cvxpy"])
def test_consistent_input_is_a_fixed_point_fv19_example_3(method):
    # The truth of Example 3 ([FV19] §3.4) with exact feature answers is feasible and has
    # objective 0, so post-processing must return it unchanged.
    x = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18], dtype=float)
    fs = FeatureSet(
        w=12, partitions=[[[t] for t in range(12)], [range(0, 4), range(4, 9), range(9, 12)]]
    )
    c = (fs.matrix @ x)[None, :]
    r = project_consistent(c, hierarchy=Hierarchy.single("wifi"), features=fs, method=method)
    np.testing.assert_allclose(r.stream("wifi"), x, rtol=1e-8)
    np.testing.assert_allclose(r.parts[0, 0, 12:], [68, 306, 130], rtol=1e-8)


@pytest.mark.parametrize("method", ["fast", "cvxpy"])
def test_hand_solved_unconstrained_case(method):
    # min (x1-1)^2 + (x2-2)^2 + (x1+x2-6)^2: the gap 3 is shared equally -> (2, 3), total 5.
    r = project_consistent(
        [[1.0, 2.0, 6.0]],
        hierarchy=Hierarchy.single("s"),
        features=TWO,
        weights=np.ones(3),
        method=method,
    )
    np.testing.assert_allclose(r.parts[0, 0], [2.0, 3.0, 5.0], rtol=1e-8)
    assert r.n_active[0] == 0


@pytest.mark.parametrize("method", ["fast", "cvxpy"])
def test_hand_solved_bound_case(method):
    # min (x1+5)^2 + (x2-1)^2 + (x1+x2)^2, x >= 0. Unconstrained (-11/3, 7/3) is infeasible;
    # with x1 = 0: x2 = 1/2, multiplier of x1 = (0+5) + (0+1/2) = 5.5 >= 0.
    r = project_consistent(
        [[-5.0, 1.0, 0.0]],
        hierarchy=Hierarchy.single("s"),
        features=TWO,
        weights=np.ones(3),
        method=method,
    )
    np.testing.assert_allclose(r.parts[0, 0], [0.0, 0.5, 0.5], atol=1e-9)
    assert r.n_active[0] == 1
    np.testing.assert_allclose(r.objective, [25 + 0.25 + 0.25], rtol=1e-8)


def test_hierarchy_hand_solved():
    # total observed 4 on each step, a and b observed 1 each: equal weights share the gap 2
    # between the three measurements of each step -> a = b = 5/3, total 10/3.
    h = Hierarchy(children={"T": ["a", "b"]})
    fs = FeatureSet.from_breaks(1, [])
    r = project_consistent([[[4.0], [1.0], [1.0]]], hierarchy=h, features=fs, weights=[1.0])
    np.testing.assert_allclose(r.node("T"), [[10 / 3]])
    np.testing.assert_allclose(r.node("a"), [[5 / 3]])


def test_variances_are_inverse_weights_and_mapping_input():
    rng = np.random.default_rng(1)
    fs = FeatureSet.default(48)
    _, c, w = random_instance(rng, REGIONS, fs, 3, 20.0, "general")
    r1 = project_consistent(c, hierarchy=REGIONS, features=fs, weights=w)
    r2 = project_consistent(c, hierarchy=REGIONS, features=fs, variances=1.0 / w)
    mapping = {node: c[:, i, :] for i, node in enumerate(REGIONS.nodes)}
    r3 = project_consistent(mapping, hierarchy=REGIONS, features=fs, weights=w)
    np.testing.assert_allclose(r1.values, r2.values, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(r1.values, r3.values)
    assert r1.values.shape == (3, len(REGIONS.nodes), 48)
    assert r1.stream("d").shape == (3 * 48,)
    with pytest.raises(ValueError):
        r1.values[0, 0, 0] = 1.0


def test_per_period_weights_are_grouped():
    rng = np.random.default_rng(2)
    fs = FeatureSet.default(48)
    _, c, w = random_instance(rng, REGIONS, fs, 4, 20.0, "separable")
    w3 = np.stack([w, 2 * w, w, np.sqrt(w)])  # the 3rd period shares the 1st one's weights
    r = project_consistent(c, hierarchy=REGIONS, features=fs, weights=w3)
    for b in range(4):
        rb = project_consistent(c[b], hierarchy=REGIONS, features=fs, weights=w3[b])
        np.testing.assert_allclose(r.values[b], rb.values[0], rtol=1e-10, atol=1e-9)
    assert r.separable


def test_dense_factor_explicit_and_on_demand_columns_agree(monkeypatch):
    """Non-separable weights: K = M^{-1} formed once (shared by many periods) or its columns
    solved only where the bounds need them (one period per weight matrix): same optimum."""
    import postproc._fast as fast

    rng = np.random.default_rng(5)
    fs = FeatureSet.from_breaks(12, [(0, 4, 12), (0, 12)])
    _, c, w = random_instance(rng, REGIONS, fs, 6, 40.0, "general")
    out = {}
    for label, cut in (("explicit", -1), ("on demand", 10**9)):
        monkeypatch.setattr(fast, "_EXPLICIT_PERIODS", cut)
        out[label] = project_consistent(c, hierarchy=REGIONS, features=fs, weights=w)
        assert max(out[label].kkt.values()) < 1e-8
    assert out["explicit"].n_active.sum() > 0  # the pivoting ran
    np.testing.assert_allclose(out["explicit"].values, out["on demand"].values, atol=1e-8)


def test_separability_detection():
    fs = FeatureSet.default(48)
    n, p = len(REGIONS.nodes), fs.n_parts
    paper = np.broadcast_to(fs.paper_weights(), (n, p))
    assert separable_factors(np.array(paper)) is not None
    rng = np.random.default_rng(3)
    assert separable_factors(rng.uniform(1, 2, (n, p))) is None


def test_kronecker_closed_form_is_the_tree_blue_along_each_axis():
    # [HRMS10]: unconstrained optimum = weighted tree BLUE along the time-feature tree for
    # each node, then along the hierarchy for each step (separable weights u v^T).
    rng = np.random.default_rng(4)
    fs = random_features(rng, 7, 2)
    h = REGIONS
    u, v = rng.uniform(0.5, 3, len(h.nodes)), rng.uniform(0.5, 3, fs.n_parts)
    c = rng.normal(0, 5, (1, len(h.nodes), fs.n_parts))
    x0 = _KronFactor(h.matrix, fs.matrix, u, v).unconstrained(c)[0]
    along_t = np.array([tree_blue(row, v, fs.parent)[: fs.w] for row in c[0]])  # (N, w)
    parent = np.full(len(h.nodes), -1)
    for par, kids in h.children.items():
        for k in kids:
            parent[h.index(k)] = h.index(par)
    leaf_rows = [h.index(leaf) for leaf in h.leaves]
    ref = np.array([tree_blue(col, u, parent)[leaf_rows] for col in along_t.T]).T
    np.testing.assert_allclose(x0, ref, rtol=1e-9, atol=1e-9)


# -- properties on random hierarchies (hypothesis) ----------------------------------------

instances = st.tuples(
    st.integers(0, 2**32 - 1),  # seed
    st.integers(1, 7),  # hierarchy nodes
    st.integers(1, 9),  # w
    st.integers(0, 3),  # extra features
    st.integers(1, 3),  # periods
    st.sampled_from([0.5, 5.0, 40.0]),  # noise level (40: many bounds active)
    st.sampled_from(["paper", "separable", "general"]),
)


def _build(params):
    seed, n_nodes, w, extra, periods, noise, kind = params
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng, n_nodes)
    fs = random_features(rng, w, extra)
    truth, c, weights = random_instance(rng, h, fs, periods, noise, kind)
    return h, fs, truth, c, weights


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances)
def test_fast_path_satisfies_kkt_and_consistency(params):
    h, fs, _, c, weights = _build(params)
    r = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    _check_consistent(r, h, fs)
    # stationarity on free leaf-steps, multipliers >= 0 on active ones, primal feasibility,
    # complementary slackness — all relative to the problem's scale.
    assert r.kkt["stationarity"] <= 1e-9
    assert r.kkt["dual"] <= 1e-9
    assert r.kkt["primal"] == 0.0
    assert r.kkt["complementarity"] <= 1e-9
    # and it is the optimum found by an independent solver (scipy's Lawson-Hanson NNLS)
    for b in range(c.shape[0]):
        ref = nnls_reference(c[b], weights, h, fs)
        scale = max(np.abs(ref).max(), 1e-3 * np.abs(c[b]).max(), 1e-12)
        leaf_rows = [h.index(leaf) for leaf in h.leaves]
        np.testing.assert_allclose(r.values[b, leaf_rows], ref, rtol=0, atol=1e-8 * scale)


@settings(max_examples=60, deadline=None)
@given(instances)
def test_theorem_12_error_bound(params):
    # [FV19] Theorem 12: ||x* - x||_λ <= 2 ||c̃ - x||_λ for the truth x (feasible). Being a
    # projection onto a convex set that contains x, the optimum satisfies it with factor 1.
    h, fs, truth, c, weights = _build(params)
    r = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    after = weighted_norm(r.parts - truth, weights)
    before = weighted_norm(c - truth, weights)
    assert np.all(after <= 2 * before + 1e-9)
    assert np.all(after <= before * (1 + 1e-9) + 1e-9)


def test_theorem_12_check_has_power():
    # The bound needs a feasible reference: measured from the (infeasible) estimates
    # themselves, the distance grows from 0. So the checks above can fail.
    c = np.array([[[-5.0, 1.0, -4.0]]])
    w = np.ones((1, 3))
    r = project_consistent(c, hierarchy=Hierarchy.single("s"), features=TWO, weights=w[0])
    after, before = weighted_norm(r.parts - c, w)[0], weighted_norm(c - c, w)[0]
    assert after > 2 * before + 1.0


# -- bad input ----------------------------------------------------------------------------


def _ok():
    fs = FeatureSet.default(48)
    return np.ones((2, len(REGIONS.nodes), fs.n_parts)), fs


def test_nan_estimates_raise_domain_error():
    c, fs = _ok()
    c[1, 2, 3] = np.nan
    with pytest.raises(DomainError, match="1 entries are NaN"):
        project_consistent(c, hierarchy=REGIONS, features=fs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"estimates": np.ones((2, 3, 53))}, "must have shape"),
        ({"estimates": np.ones((2, 8, 52))}, "must have shape"),
        ({"estimates": np.ones(53)}, "must have shape"),
        ({"estimates": "abc"}, "numeric array"),
        ({"weights": np.ones(52)}, "one of the shapes"),
        ({"weights": -np.ones(53)}, r"in \(0, inf\)"),
        ({"weights": np.zeros((8, 53))}, r"in \(0, inf\)"),
        ({"variances": np.full(53, np.inf)}, r"in \(0, inf\)"),
        ({"weights": np.ones(53), "variances": np.ones(53)}, "at most one"),
        ({"method": "scs"}, "'method' parameter"),
        ({"max_iter": 0}, "'max_iter' parameter"),
        ({"hierarchy": {"FR": ["a"]}}, "must be a Hierarchy"),
        ({"features": [[0]]}, "must be a FeatureSet"),
    ],
)
def test_bad_parameters_raise(kwargs, match):
    c, fs = _ok()
    args = {"estimates": c, "hierarchy": REGIONS, "features": fs, **kwargs}
    with pytest.raises(ParameterError, match=match):
        project_consistent(args.pop("estimates"), **args)


def test_mapping_with_unknown_or_missing_names_raises():
    c, fs = _ok()
    mapping = {node: c[:, i] for i, node in enumerate(REGIONS.nodes)}
    with pytest.raises(ParameterError, match="not in the hierarchy, e.g. 'zz'"):
        project_consistent({**mapping, "zz": c[:, 0]}, hierarchy=REGIONS, features=fs)
    del mapping["e"]
    with pytest.raises(ParameterError, match="missing, e.g. 'e'"):
        project_consistent(mapping, hierarchy=REGIONS, features=fs)
    mapping["e"] = c[0, 0]
    with pytest.raises(ParameterError, match="same shape"):
        project_consistent(mapping, hierarchy=REGIONS, features=fs)


def test_non_separable_weights_too_large_for_dense_path_raise():
    # The previous exact path (method="dense") still refuses; the fast path (tree solver) no
    # longer has a size limit (see test_pp_tree.py).
    h = Hierarchy(children={"T": [f"l{i}" for i in range(90)]})
    fs = FeatureSet.default(48)
    rng = np.random.default_rng(5)
    w = rng.uniform(1, 2, (91, fs.n_parts))
    with pytest.raises(ParameterError, match="not separable"):
        project_consistent(
            np.ones((1, 91, fs.n_parts)), hierarchy=h, features=fs, weights=w, method="dense"
        )


@pytest.mark.parametrize("method", ["fast", "dense", "cvxpy"])
def test_solves_run_with_one_blas_thread_whatever_the_environment(monkeypatch, method):
    """Library-level thread control (issue 16): the solvers see one BLAS thread."""
    import threadpoolctl

    import postproc._project as project

    seen = []
    solver = {"fast": "solve_tree", "dense": "solve_fast", "cvxpy": "solve_cvxpy"}[method]
    real = getattr(project, solver)

    def spy(*args, **kwargs):
        seen.extend(
            info["num_threads"]
            for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas"
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(project, solver, spy)
    h = Hierarchy(children={"total": ["a", "b"]})
    fs = FeatureSet.from_breaks(1, [])
    est = np.random.default_rng(0).uniform(0, 5, (2, 3, 1))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        project_consistent(est, hierarchy=h, features=fs, weights=[1.0], method=method)
    assert seen and set(seen) == {1}
