"""``release_optstream(k="auto")`` at size: nothing O(nodes x leaves) (issue 15's 100,000 feeders).

The dense aggregation matrix of 100,000 feeders is 80 GB; the in-stream planner must work from
the sparse one (the planner densifies only trees of at most ``_MAX_BLUE_LEAVES`` leaves).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpstream
from postproc import Hierarchy


def _feeders(n_sub: int, per: int, days: int) -> tuple[pd.DataFrame, dict]:
    children = {"national": [f"s{i}" for i in range(n_sub)]}
    for i in range(n_sub):
        children[f"s{i}"] = [f"s{i}f{j}" for j in range(per)]
    leaves = [f for i in range(n_sub) for f in children[f"s{i}"]]
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    rng = np.random.default_rng(0)
    t = np.arange(idx.size)
    base = 50 + 30 * np.sin(2 * np.pi * t / 48)
    values = base[:, None] * rng.uniform(0.5, 2, len(leaves))[None, :]
    values = values + rng.uniform(0, 5, values.shape)
    return pd.DataFrame(values, index=idx, columns=leaves), children


def test_auto_release_of_a_large_tree_never_builds_the_dense_matrix(monkeypatch):
    def refuse(self):
        raise AssertionError("the dense aggregation matrix was built")

    monkeypatch.setattr(Hierarchy, "matrix", property(refuse))
    frame, children = _feeders(10, 20, 3)  # 200 feeders, 211 nodes
    out = dpstream.release_optstream(frame, epsilon=1.0, alpha=5.0, hierarchy=children, seed=1)
    assert out.shape == (frame.shape[0], 211)
    assert (out.to_numpy() >= 0).all()
    subs = [f"s{i}" for i in range(10)]
    np.testing.assert_allclose(out[subs].sum(axis=1), out["national"], rtol=1e-9)
    plans = out.attrs["plan"]
    assert len(plans) == 3 and all(p["k"] >= 1 for p in plans)


def test_the_guard_can_fail(monkeypatch):  # the property patch above really intercepts
    def refuse(self):
        raise AssertionError("the dense aggregation matrix was built")

    monkeypatch.setattr(Hierarchy, "matrix", property(refuse))
    with pytest.raises(AssertionError, match="dense aggregation matrix"):
        Hierarchy(children={"r": ["a", "b"]}).matrix  # noqa: B018
