"""The fixed-k split's subtree tasks carry public scalars only (issue 22): each subtree object
builds its structure where it runs, from the hierarchy scattered once per worker, so the task
graph does not grow with the subtrees."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pytest
from _tree_helpers import feeder_tree

from dpstream.engine import _subtree
from dpstream.engine._subtree import SplitSpec, release_split, split_client
from postproc import FeatureSet, Hierarchy
from postproc._split import subtrees

_children = feeder_tree


class _Source:
    """Each leaf's day from its name (a few bytes pickled, as a file's path)."""

    def __call__(self, leaves):
        return np.stack(
            [np.random.default_rng(zlib.crc32(x.encode())).gamma(2.0, 1.0, 48) for x in leaves]
        )


def _spec(tree: Hierarchy) -> SplitSpec:
    return SplitSpec(
        epsilon=1.0, w=48, k=10, alpha=1.0, features=FeatureSet.default(48),
        level_sizes=tuple(len(lv) for lv in tree.levels),
    )  # fmt: skip


def test_fixed_k_subtrees_are_built_where_they_run_so_no_graph_is_large():
    """With Dask's large-graph threshold at 64 kB (an error under filterwarnings), a tree whose
    old per-subtree task structure pickles to about 80 kB releases without a warning, equal
    to the one-process split; shipping one such structure in a task does warn. (A task is
    about 22 kB whatever the tree: the feature set's cached w-by-parts matrix.)"""
    import dask
    import distributed  # noqa: F401  (its config loaded first: set() restores what it found)

    tree = Hierarchy(children=_children(2, 20, 160))  # 6,442 nodes, two subtrees at cut 1
    spec = _spec(tree)
    ref = release_split(spec, tree, _Source(), ordinal=0, seed=3, cut=1)
    maps, rows = subtrees(tree, 1)
    old = (maps[0], rows[0], tree.parent[rows[0]])
    assert len(pickle.dumps(old)) > 65_536  # above the threshold: it would warn
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "64kB"}):
        with split_client(n_workers=2, processes=False) as client:
            got = release_split(spec, tree, _Source(), ordinal=0, seed=3, cut=1, client=client)
            with pytest.raises(UserWarning, match="[Ll]arge graph"):
                client.submit(len, old).result()
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()
    assert not _subtree._STRUCTURE  # dropped once every subtree was built


def test_fixed_k_tasks_do_not_grow_with_the_subtree(monkeypatch):
    got: dict = {}
    init = _subtree.SubtreeRelease.__init__

    def spy(self, task, hierarchy):
        got[len(hierarchy.nodes)] = len(pickle.dumps(task))
        init(self, task, hierarchy)

    monkeypatch.setattr(_subtree.SubtreeRelease, "__init__", spy)
    for feeders in (20, 40):
        tree = Hierarchy(children=_children(2, 10, feeders))
        release_split(_spec(tree), tree, _Source(), ordinal=0, seed=1, cut=1)
    small, large = (got[n] for n in sorted(got))
    assert large <= small + 16 and large < 30_000  # an int's bytes, not nodes
