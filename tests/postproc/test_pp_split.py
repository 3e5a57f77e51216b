"""The distributed elimination (postproc._split) equals the one-process exact path."""

from __future__ import annotations

import numpy as np
import pytest
from _pp_helpers import fanout_tree

from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._split import SubtreeSolver, TopTree, node_depths, solve_split, subtrees


def _problem(h: Hierarchy, fs: FeatureSet, seed: int, noise: float):
    rng = np.random.default_rng(seed)
    a = h.sparse_matrix
    truth = rng.gamma(1.0, 1.0, size=(len(h.leaves), fs.w))
    exact = (a @ truth) @ fs.matrix.T
    sd = np.sqrt(np.asarray(a.sum(axis=1)))
    c = exact + noise * rng.normal(size=exact.shape) * sd
    v = rng.uniform(0.5, 3.0, size=exact.shape)
    return c, v


def _split(h: Hierarchy, fs: FeatureSet, cut: int, c: np.ndarray, v: np.ndarray):
    maps, rows = subtrees(h, cut)
    trees = [Hierarchy(children=m) for m in maps]
    top_rows = np.flatnonzero(node_depths(h) < cut)
    solvers = [SubtreeSolver(t, fs, c[r], 1 / v[r]) for t, r in zip(trees, rows, strict=True)]
    top = TopTree(h, cut, fs, c[top_rows], 1 / v[top_rows])

    def call(method, args):
        return [getattr(s, method)(*a) for s, a in zip(solvers, args, strict=True)]

    info = solve_split(top, call)
    out = np.empty((len(h.nodes), fs.w))
    vals = [s.node_values() for s in solvers]
    for val, r in zip(vals, rows, strict=True):
        out[r] = val
    out[top_rows] = top.sums(np.stack([val[0] for val in vals]))
    return out, info


def test_subtrees_hold_every_node_below_the_cut_in_their_own_bfs_order():
    h = fanout_tree([2, 3, 2])
    maps, rows = subtrees(h, 2)
    assert len(maps) == 6
    below = np.sort(np.concatenate(rows))
    assert np.array_equal(below, np.flatnonzero(node_depths(h) >= 2))
    for m, r in zip(maps, rows, strict=True):
        assert Hierarchy(children=m).nodes == tuple(h.nodes[i] for i in r)


@pytest.mark.parametrize("cut", [1, 2])
@pytest.mark.parametrize("noise", [0.05, 3.0])  # non-negative optimum / many leaf-steps at 0
def test_split_elimination_equals_the_one_process_fast_path(cut, noise):
    h = fanout_tree([3, 4, 5])
    fs = FeatureSet.default(8)
    c, v = _problem(h, fs, seed=cut, noise=noise)
    ref = project_consistent(c, hierarchy=h, features=fs, variances=v).values[0]
    got, info = _split(h, fs, cut, c, v)
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()
    if noise > 1:
        assert info["iterations"] > 1 and (ref == 0).mean() > 0.2  # the active set ran
    a = h.sparse_matrix
    leaves = [h.index(n) for n in h.leaves]
    assert np.abs(a @ got[leaves] - got).max() <= 1e-9 * np.abs(got).max()  # consistent
    assert got.min() >= 0.0


def test_top_sums_are_the_subtree_roots_sums():
    h = fanout_tree([2, 2, 2])
    fs = FeatureSet.default(4)
    shape = (3, fs.n_parts)
    top = TopTree(h, 2, fs, np.zeros(shape), np.ones(shape))
    vals = np.arange(8.0).reshape(4, 2)
    sums = top.sums(vals)
    assert np.allclose(sums, [[12, 16], [2, 4], [10, 12]])
