"""Memory of the distributed elimination (issue 22.3): while the subtrees' summaries travel a
subtree keeps no array it will recompute before reading it (the leaf-steps in a data solve,
the half-gradient in any solve), so a worker holding many subtrees holds fewer (L, w) arrays
of each; the solution is the one-process fast path's, bitwise the same as before."""

from __future__ import annotations

import numpy as np
import pytest
from _pp_helpers import fanout_tree

from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._split import SubtreeSolver, TopTree, node_depths, solve_split, subtrees


@pytest.mark.parametrize("features", [FeatureSet.from_breaks(8, []), FeatureSet.default(8)])
def test_summaries_travel_without_the_arrays_recomputed_after(features):
    h = fanout_tree([3, 4, 6])
    rng = np.random.default_rng(5)
    a = h.sparse_matrix
    truth = rng.gamma(1.0, 1.0, size=(len(h.leaves), features.w))
    exact = (a @ truth) @ features.matrix.T
    c = exact + 3.0 * rng.normal(size=exact.shape) * np.sqrt(np.asarray(a.sum(axis=1)))
    v = rng.uniform(0.5, 3.0, size=exact.shape)
    maps, rows = subtrees(h, 1)
    solvers = [SubtreeSolver(Hierarchy(children=m), features, c[r], 1 / v[r])
               for m, r in zip(maps, rows, strict=True)]  # fmt: skip
    top_rows = np.flatnonzero(node_depths(h) < 1)
    top = TopTree(h, 1, features, c[top_rows], 1 / v[top_rows])
    seen = []

    def call(method, args):
        out = [getattr(s, method)(*x) for s, x in zip(solvers, args, strict=True)]
        if method == "summary":
            for s, (rhs,) in zip(solvers, args, strict=True):
                seen.append(rhs)
                assert s.g is None  # set again by the gradient before it is read
                assert (s.x is None) == (rhs == "data")  # a residual's down pass adds to x
        return out

    info = solve_split(top, call)
    assert info["iterations"] > 1 and {"data", "residual"} <= set(seen)  # the active set ran
    out = np.empty((len(h.nodes), features.w))
    vals = [s.node_values() for s in solvers]
    for val, r in zip(vals, rows, strict=True):
        out[r] = val
    out[top_rows] = top.sums(np.stack([val[0] for val in vals]))
    ref = project_consistent(c, hierarchy=h, features=features, variances=v).values[0]
    assert np.abs(out - ref).max() <= 1e-9 * np.abs(ref).max()
    assert (ref == 0).mean() > 0.1
