"""The tree solver of the fast path: exact two passes, sparse updates, active set, at size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _pp_helpers import nnls_reference, random_features, random_hierarchy, random_instance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._nonneg import _Period, _project, solve_tree
from postproc._problem import build_problem
from postproc._tree import FeatureTree, HierarchyLayout, TreeFactor

REGIONS = Hierarchy(children={"FR": ["r0", "r1"], "r0": ["a", "b", "c"], "r1": ["d", "e"]})


def _dense_reduced_solve(h, fs, weights, rhs, free):
    """Reference: ``M_FF x_F = r_F`` with the dense normal matrix ``M = A^T diag(W) A``."""
    a = np.kron(h.matrix, fs.matrix)
    m = a.T @ (weights.reshape(-1)[:, None] * a)
    f = free.reshape(-1)
    x = np.zeros(f.size)
    if f.any():
        x[f] = np.linalg.solve(m[np.ix_(f, f)], rhs.reshape(-1)[f])
    return x.reshape(free.shape)


def _chain_hierarchy(rng, n_nodes):
    """Trees with single-child chains and leaves at several depths."""
    parent = [max(0, i - 1 - int(rng.integers(0, 2))) for i in range(1, n_nodes)]
    children: dict[str, list[str]] = {}
    for child, par in enumerate(parent, start=1):
        children.setdefault(f"n{par}", []).append(f"n{child}")
    return Hierarchy(children=children) if children else Hierarchy.single("n0")


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(0, 3),
    st.floats(0.0, 0.9),
    st.booleans(),
)
def test_two_passes_solve_the_reduced_normal_equations_exactly(
    seed, n_nodes, w, extra, held, chains
):
    # Any weights (spanning 6 orders of magnitude), any set of leaf-steps held at 0: the up and
    # down passes return M_FF^{-1} r_F, and an update from another free set gives the same.
    rng = np.random.default_rng(seed)
    h = _chain_hierarchy(rng, n_nodes) if chains else random_hierarchy(rng, n_nodes)
    fs = random_features(rng, w, extra)
    n, p, leaves = len(h.nodes), fs.n_parts, len(h.leaves)
    weights = 10.0 ** rng.uniform(-3, 3, (n, p))
    free = rng.random((leaves, w)) >= held
    b = rng.normal(0, 10, (n, 2, w))  # two right-hand sides at every node
    rhs = np.stack([h.matrix.T @ b[:, r] for r in range(2)], axis=1)  # A_H^T b: (L, 2, w)
    factor = TreeFactor(HierarchyLayout(h), FeatureTree(fs), weights, free)
    got = factor.solve(b)
    for r in range(2):
        ref = _dense_reduced_solve(h, fs, weights, rhs[:, r], free)
        scale = max(np.abs(ref).max(), 1e-300)
        np.testing.assert_allclose(got[:, r], ref, rtol=0, atol=1e-8 * scale)
    # a sparse update (only changed leaves, their parents and ancestors) == a fresh factor
    start = TreeFactor(HierarchyLayout(h), FeatureTree(fs), weights, rng.random((leaves, w)) > 0.5)
    start.update(free)
    np.testing.assert_allclose(start.solve(b), got, rtol=1e-9, atol=1e-9 * np.abs(got).max())


def test_separable_weights_give_the_old_kronecker_path():
    # The previous exact path (dense Kronecker factors + block principal pivoting) and the new
    # one agree, bounds included.
    rng = np.random.default_rng(11)
    fs = FeatureSet.default(48)
    _, c, weights = random_instance(rng, REGIONS, fs, 4, 30.0, "separable")
    new = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights)
    old = project_consistent(c, hierarchy=REGIONS, features=fs, weights=weights, method="dense")
    assert new.n_active.min() > 10 and new.separable and old.separable
    np.testing.assert_array_equal(new.n_active, old.n_active)
    np.testing.assert_allclose(new.values, old.values, rtol=0, atol=1e-9 * old.values.max())


zero_heavy = st.tuples(
    st.integers(0, 2**32 - 1),  # seed
    st.integers(1, 8),  # hierarchy nodes
    st.integers(1, 8),  # w
    st.integers(0, 2),  # extra features
    st.floats(0.5, 0.95),  # share of true zeros
    st.sampled_from([1.0, 10.0, 100.0]),  # noise relative to a signal in [0, 1]
    st.sampled_from(["paper", "separable", "general", "wide"]),
)


def _zero_heavy(params):
    seed, n_nodes, w, extra, zeros, noise, kind = params
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng, n_nodes)
    fs = random_features(rng, w, extra)
    x = rng.uniform(0, 1, (1, len(h.leaves), w))
    x[rng.random(x.shape) < zeros] = 0.0  # low-signal leaves: most steps at the bound
    truth = h.matrix @ x @ fs.matrix.T
    c = truth + rng.normal(0, noise, truth.shape)
    n, p = truth.shape[1:]
    if kind == "paper":
        weights = np.broadcast_to(fs.paper_weights(), (n, p)).copy()
    elif kind == "separable":
        weights = np.outer(rng.uniform(0.2, 5, n), rng.uniform(0.2, 5, p))
    elif kind == "general":
        weights = rng.uniform(0.2, 5, (n, p))
    else:
        weights = 10.0 ** rng.uniform(-3, 3, (n, p))
    return h, fs, c, weights


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zero_heavy)
def test_active_set_is_optimal_on_zero_heavy_leaves(params):
    h, fs, c, weights = _zero_heavy(params)
    r = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    assert r.kkt["stationarity"] <= 1e-9 and r.kkt["dual"] <= 1e-9
    assert r.kkt["primal"] == 0.0 and r.kkt["complementarity"] <= 1e-9
    ref = nnls_reference(c[0], weights, h, fs)
    leaf_rows = [h.index(leaf) for leaf in h.leaves]
    scale = max(np.abs(ref).max(), 1e-3 * np.abs(c).max(), 1e-12)
    np.testing.assert_allclose(r.values[0, leaf_rows], ref, rtol=0, atol=1e-8 * scale)
    # the tree's own active set, also where a small separable problem pivots densely by default
    problem = build_problem(c, hierarchy=h, features=fs, weights=weights)
    x = solve_tree(problem, dense_small=False)["x"]
    kkt = problem.kkt(x)
    assert kkt["stationarity"] <= 1e-9 and kkt["dual"] <= 1e-9 and kkt["primal"] == 0.0
    np.testing.assert_allclose(problem.steps(x)[0, leaf_rows], ref, rtol=0, atol=1e-8 * scale)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zero_heavy)
def test_active_set_agrees_with_cvxpy_on_zero_heavy_leaves(params):
    h, fs, c, weights = _zero_heavy(params)
    fast = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    slow = project_consistent(c, hierarchy=h, features=fs, weights=weights, method="cvxpy")
    scale = max(np.abs(fast.values).max(), 1e-3 * np.abs(c).max(), 1e-12)
    assert np.abs(fast.values - slow.values).max() <= 1e-6 * scale
    assert np.all(fast.objective <= slow.objective * (1 + 1e-9) + 1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zero_heavy)
def test_projected_newton_fallback_converges_alone(params):
    # The fallback of the active-set loop (Bertsekas' projected Newton) reaches the optimum by
    # itself from the clipped unconstrained point.
    h, fs, c, weights = _zero_heavy(params)
    problem = build_problem(c, hierarchy=h, features=fs, weights=weights)
    lay, ft = HierarchyLayout(h), FeatureTree(fs)
    free = np.ones((len(h.leaves), fs.w), dtype=bool)
    factor = TreeFactor(lay, ft, weights, free)
    b = ((weights * c[0]) @ fs.matrix)[:, None, :]
    x0 = factor.solve(b)[:, 0]
    period = _Period(lay, ft, weights, c[0])
    x, _ = _project(period, factor, x0, float(problem.gradient_scale()[0]), 1000)
    kkt = problem.kkt(x[None])
    assert max(kkt.values()) <= 1e-9
    ref = nnls_reference(c[0], weights, h, fs)
    scale = max(np.abs(ref).max(), 1e-3 * np.abs(c).max(), 1e-12)
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-8 * scale)


def test_a_large_hierarchy_never_builds_the_dense_aggregation_matrix():
    # 4 levels, 3,000 feeders, non-separable weights (the old path refused above 4096
    # leaf-steps): solved with A_H kept sparse, consistent and non-negative.
    rng = np.random.default_rng(3)
    children = {"nat": [f"r{r}" for r in range(3)]}
    for s in range(30):
        children.setdefault(f"r{s % 3}", []).append(f"s{s}")
    for f in range(3000):
        children.setdefault(f"s{f % 30}", []).append(f"f{f}")
    h = Hierarchy(children=children)
    fs = FeatureSet.from_breaks(4, [(0, 2, 4), (0, 4)])
    x = rng.uniform(0, 1, (2, 3000, 4)) * (rng.random((2, 3000, 4)) < 0.3)
    a_h = h.sparse_matrix
    steps = np.stack([a_h @ xb for xb in x])
    c = steps @ fs.matrix.T + rng.normal(0, 1.0, (2, len(h.nodes), fs.n_parts))
    weights = rng.uniform(0.1, 10, (2, len(h.nodes), fs.n_parts))
    r = project_consistent(c, hierarchy=h, features=fs, weights=weights)
    assert h._matrix is None  # the dense N x L matrix was never formed
    assert max(r.kkt.values()) <= 1e-9 and r.n_active.min() > 1000 and not r.separable
    assert (r.values >= 0).all()
    leaves = [h.index(f) for f in h.leaves]
    np.testing.assert_allclose(
        r.values[:, 0], r.values[:, leaves].sum(axis=1), rtol=1e-12, atol=1e-9
    )


def test_release_optstream_accepts_100_feeders_with_default_weights():
    # Issue 15 item 4: 100 feeders x 48 steps = 4800 leaf-steps with the default ("variance",
    # non-separable) weights used to be refused by the dense fast path.
    import dpstream

    rng = np.random.default_rng(0)
    idx = pd.date_range("2016-02-01", periods=96, freq="30min", name="time")
    feeders = [f"f{i}" for i in range(100)]
    level = rng.uniform(5, 50, 100)  # low-signal feeders: many released steps at 0
    frame = pd.DataFrame(rng.uniform(0, 1, (96, 100)) * level, index=idx, columns=feeders)
    hierarchy = {"national": ["north", "south"], "north": feeders[:50], "south": feeders[50:]}
    out = dpstream.release_optstream(frame, epsilon=1.0, hierarchy=hierarchy, alpha=10.0, seed=4)
    assert out.shape == (96, 103)
    assert (out.to_numpy() >= 0).all()
    assert (out[feeders].to_numpy() == 0).any()  # bounds active: the active set ran
    for parent, kids in hierarchy.items():
        np.testing.assert_allclose(out[parent], out[kids].sum(axis=1), rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("n_leaves", [1, 2])
def test_tiny_hierarchies(n_leaves):
    h = Hierarchy.single("s") if n_leaves == 1 else Hierarchy(children={"T": ["a", "b"]})
    fs = FeatureSet.from_breaks(2, [(0, 2)])
    c = -np.ones((1, len(h.nodes), 3))  # every estimate negative: everything at 0
    r = project_consistent(c, hierarchy=h, features=fs)
    np.testing.assert_array_equal(r.values, 0.0)
    assert r.n_active[0] == 2 * n_leaves and max(r.kkt.values()) == 0.0


def test_dense_reference_path_explicit_and_on_demand_columns_agree(monkeypatch):
    """The previous exact path (method="dense") keeps its two ways of forming K = M^{-1} for
    non-separable weights, and both agree with the tree solver."""
    import postproc._fast as fast

    rng = np.random.default_rng(5)
    fs = FeatureSet.from_breaks(12, [(0, 4, 12), (0, 12)])
    _, c, w = random_instance(rng, REGIONS, fs, 6, 40.0, "general")
    tree = project_consistent(c, hierarchy=REGIONS, features=fs, weights=w)
    for cut in (-1, 10**9):
        monkeypatch.setattr(fast, "_EXPLICIT_PERIODS", cut)
        dense = project_consistent(c, hierarchy=REGIONS, features=fs, weights=w, method="dense")
        assert max(dense.kkt.values()) < 1e-8 and dense.n_active.sum() > 0
        np.testing.assert_allclose(dense.values, tree.values, atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_hierarchy_sparse_matrix_parent_and_index(seed, n_nodes):
    h = random_hierarchy(np.random.default_rng(seed), n_nodes)
    dense = np.zeros((len(h.nodes), len(h.leaves)))  # rows: each node's leaves, by walking up
    for j, leaf in enumerate(h.leaves):
        i = h.index(leaf)
        while i >= 0:
            dense[i, j] = 1.0
            i = int(h.parent[i])
    np.testing.assert_array_equal(h.sparse_matrix.toarray(), dense)
    np.testing.assert_array_equal(h.matrix, dense)
    for parent, kids in h.children.items():
        assert all(h.parent[h.index(k)] == h.index(parent) for k in kids)
    assert [h.index(n) for n in h.nodes] == list(range(len(h.nodes)))
