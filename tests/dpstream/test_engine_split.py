"""One period split into subtrees (dpstream.engine._subtree): the same release in one process,
for any cut, and on Dask; workers read their own data (no large task graph)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import feeder_tree

from dpstream import ReleaseStore
from dpstream.engine._subtree import (
    SplitSpec,
    _streams,
    _weights,
    choose_cut,
    level_scores,
    measure_nodes,
    release_split,
    sample_masks,
    split_client,
)
from dpstream.store._source import ParquetLeaves, release_parquet_to_store, scan_parquet
from mechanisms import DomainError, ParameterError
from mechanisms.core._random import bit_source
from mechanisms.optstream._estimates import optstream_split
from mechanisms.optstream._sampling import null_rate_threshold, sample_l1
from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._split import node_depths


def _children(regions: int = 2, subs: int = 3, feeders: int = 4) -> dict:
    return feeder_tree(regions, subs, feeders)


CH = _children()
H = Hierarchy(children=CH)
FS = FeatureSet.default(48)
SPEC = SplitSpec(
    epsilon=1.0,
    w=48,
    k=10,
    alpha=1.0,
    features=FS,
    level_sizes=tuple(len(level) for level in H.levels),
)


class Table:
    """An in-memory source (tests in one process only: Dask would ship it in the graph)."""

    def __init__(self, values: dict):
        self.values = values

    def __call__(self, leaves):
        return np.stack([self.values[leaf] for leaf in leaves])


def _leaf_values(seed: int = 0, steps: int = 48) -> dict:
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    return {
        leaf: rng.gamma(2.0, 1.0) * (1.2 + np.sin(t / 7.0 + i)) + rng.gamma(1.0, 0.3, steps)
        for i, leaf in enumerate(H.leaves)
    }


def _one_process(spec, source, *, ordinal, seed):
    """The reference: every node measured at once (same streams, each level's L1 score over
    all its nodes at once), Algorithm 4 on the whole hierarchy with project_consistent."""
    leaves = source(H.leaves)
    values = np.asarray(H.sparse_matrix @ leaves)
    depth = node_depths(H)
    is_leaf = np.ones(depth.size, dtype=bool)
    is_leaf[H.parent[H.parent >= 0]] = False
    stream = _streams(seed, ordinal, None)
    masks = sample_masks(spec, lambda tp, i: level_scores(values, depth, tp, i), stream)
    est, var = measure_nodes(
        values,
        spec=spec,
        depths=depth,
        rows=np.arange(depth.size),
        parent_rows=H.parent,
        is_leaf=is_leaf,
        stream=stream,
        masks=masks,
    )
    wts = _weights(spec, est, var, depth, masks)
    return project_consistent(est, hierarchy=H, features=spec.features, weights=wts).values[0]


def _spec(**change) -> SplitSpec:
    return SplitSpec(**{**{f: getattr(SPEC, f) for f in SPEC.__slots__}, **change})


@pytest.mark.parametrize(
    ("weights", "sampling"), [("variance", "equal"), ("noise", "equal"), ("variance", "l1")]
)
def test_split_equals_the_one_process_release_for_every_cut(weights, sampling):
    spec = _spec(weights=weights, sampling=sampling)
    src = Table(_leaf_values(1))
    ref = _one_process(spec, src, ordinal=5, seed=9)
    scale = np.abs(ref).max()
    for cut in (1, 2):
        got = release_split(spec, H, src, ordinal=5, seed=9, cut=cut)
        assert np.abs(got - ref).max() <= 1e-9 * scale
    assert (ref == 0).any()  # the non-negativity was active


def test_seeded_streams_are_keyed_by_period_and_seed():
    src = Table(_leaf_values(2))
    a = release_split(SPEC, H, src, ordinal=1, seed=3, cut=1)
    assert np.array_equal(a, release_split(SPEC, H, src, ordinal=1, seed=3, cut=1))
    assert not np.allclose(a, release_split(SPEC, H, src, ordinal=2, seed=3, cut=1))
    assert not np.allclose(a, release_split(SPEC, H, src, ordinal=1, seed=4, cut=1))
    secure = release_split(SPEC, H, src, ordinal=1, seed=None, cut=2)
    leaves = [H.index(n) for n in H.leaves]
    assert secure.min() >= 0 and np.allclose(H.sparse_matrix @ secure[leaves], secure)


def test_the_charge_comes_after_every_read_and_before_any_draw():
    events = []

    class Counting(Table):
        def __call__(self, leaves):
            events.append("read")
            return super().__call__(leaves)

    release_split(
        SPEC, H, Counting(_leaf_values()), ordinal=0, seed=1, cut=2,
        charge=lambda: events.append("charge"),
    )  # fmt: skip
    assert events == ["read"] * 6 + ["charge"]


def test_choose_cut_and_bad_cuts():
    assert choose_cut(H, 1) == 2  # 2 regions < 4 subtrees per worker; 6 substations
    h = Hierarchy(children=_children(regions=8))
    assert choose_cut(h, 2) == 1 and choose_cut(h, 3) == 2
    flat = Hierarchy(children={"N": ["a", "b"]})
    assert choose_cut(flat, 2) == 0
    for bad in (0, 3, 1.5, True):
        with pytest.raises(ParameterError, match="'cut'"):
            choose_cut(H, 2, bad)
    with pytest.raises(ParameterError, match="'hierarchy'"):
        release_split(SPEC, flat, Table({}), ordinal=0, seed=1)
    with pytest.raises(ParameterError, match="'weights'"):
        _spec(weights="paper")
    with pytest.raises(ParameterError, match="'sampling'"):
        _spec(sampling="svt")
    with pytest.raises(ParameterError, match="'seed'"):
        release_split(SPEC, H, Table({}), ordinal=0, seed=bit_source(1))


def test_the_store_refuses_a_cut_it_cannot_honour(tmp_path):
    path = tmp_path / "in.parquet"
    _parquet(path, days=1)
    with ReleaseStore(tmp_path / "s.db") as store:
        with pytest.raises(ParameterError, match="'cut'"):
            release_parquet_to_store(
                store, path, epsilon=1.0, alpha=1.0, k="auto", hierarchy=CH, cut=1
            )
        with pytest.raises(ParameterError, match="'cut'"):
            release_parquet_to_store(store, path, epsilon=1.0, alpha=1.0, k=10, hierarchy=CH, cut=3)
        with pytest.raises(ParameterError, match="'seed'"):
            release_parquet_to_store(
                store, path, epsilon=1.0, alpha=1.0, k=10, hierarchy=CH, cut=1, seed=bit_source(2)
            )
        assert store.ordinals() == set() and store.config is None


def _parquet(path, days: int = 2, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    idx = pd.date_range("2024-01-01", periods=48 * days, freq="30min")
    frames = [
        pd.DataFrame({"unique_id": leaf, "ds": idx, "y": rng.gamma(2.0, 1.0, idx.size)})
        for leaf in H.leaves
    ]
    pd.concat(frames).to_parquet(path)


def test_dask_threads_equal_one_process(tmp_path):
    path = tmp_path / "in.parquet"
    _parquet(path)
    scan = scan_parquet(path, None, "test")
    src = ParquetLeaves(
        scan=scan, start=scan.stamps[0], stop=scan.stamps[47], w=48, bound=None, owner="test"
    )
    ref = release_split(SPEC, H, src, ordinal=0, seed=7, cut=1)
    with split_client(n_workers=2, processes=False) as client:
        got = release_split(SPEC, H, src, ordinal=0, seed=7, client=client)  # cut 2 here
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


def test_a_source_holding_data_would_be_a_large_graph():
    """The guard has teeth: data shipped with the tasks makes Dask warn (an error here)."""
    big = Table({leaf: np.zeros(48) for leaf in H.leaves})
    big.ballast = np.zeros(2_000_000)  # 16 MB carried by every task
    with split_client(n_workers=1, processes=False) as client:
        with pytest.raises(UserWarning, match="[Ll]arge graph"):
            release_split(SPEC, H, big, ordinal=0, seed=1, client=client)


@pytest.fixture(scope="module")
def scheduler():
    """A running cluster of two worker processes, reached by address."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


@pytest.mark.slow  # a cluster of worker processes (the threads test above is the fast tier)
def test_store_dask_splits_the_period_and_equals_one_process(tmp_path, scheduler):
    path = tmp_path / "in.parquet"
    _parquet(path, days=2, seed=3)
    kw = {"epsilon": 1.0, "alpha": 1.0, "k": 10, "sampling": "equal", "hierarchy": CH, "seed": 11}
    with ReleaseStore(tmp_path / "a.db") as store:
        release_parquet_to_store(store, path, engine="dask", scheduler=scheduler, **kw)
        got = store.read(store.ordinals())
        assert store.ledger.spent(0) > 0 and store.ledger.spent(1) > 0
    scan = scan_parquet(path, None, "test")
    for day in range(2):
        src = ParquetLeaves(
            scan=scan,
            start=scan.stamps[48 * day],
            stop=scan.stamps[48 * day + 47],
            w=48,
            bound=None,
            owner="test",
        )
        ref = release_split(SPEC, H, src, ordinal=day, seed=11, cut=2)
        block = got.iloc[48 * day : 48 * (day + 1)][list(H.nodes)].to_numpy().T
        assert np.abs(block - ref).max() <= 1e-9 * np.abs(ref).max()


def test_bad_values_read_by_a_subtree_stop_before_the_charge(tmp_path):
    path = tmp_path / "in.parquet"
    _parquet(path, days=1)
    frame = pd.read_parquet(path)
    frame.loc[frame.index[5], "y"] = -1.0
    frame.to_parquet(path)
    charged = []
    scan = scan_parquet(path, None, "test")
    src = ParquetLeaves(
        scan=scan, start=scan.stamps[0], stop=scan.stamps[47], w=48, bound=None, owner="test"
    )
    with pytest.raises(DomainError):
        release_split(SPEC, H, src, ordinal=0, seed=1, cut=1, charge=lambda: charged.append(1))
    assert charged == []


def test_measure_nodes_draws_each_group_from_its_own_stream():
    """A group's draws do not depend on which other nodes are measured in the same call."""
    values = np.asarray(H.sparse_matrix @ Table(_leaf_values())(H.leaves))
    depth = node_depths(H)
    is_leaf = np.ones(depth.size, dtype=bool)
    is_leaf[H.parent[H.parent >= 0]] = False
    rows = np.arange(depth.size)
    masks = np.zeros((4, 48), dtype=bool)
    masks[:, ::5] = True
    kw = {"spec": SPEC, "stream": _streams(4, 0, None), "masks": masks}
    whole, _ = measure_nodes(
        values, depths=depth, rows=rows, parent_rows=H.parent, is_leaf=is_leaf, **kw
    )
    part = np.flatnonzero(np.isin(H.parent, [H.index("r1s2")]) | (rows == H.index("r0")))
    some, _ = measure_nodes(
        values[part],
        depths=depth[part],
        rows=part,
        parent_rows=H.parent[part],
        is_leaf=is_leaf[part],
        **kw,
    )
    assert np.array_equal(some, whole[part])
    assert bit_source(None) is not None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_l1_sampler_is_sample_l1_on_each_level(seed):
    """Each level's sample set is Algorithm 3 (sample_l1) on the level's values with the
    level's own bits: the split SVT is the audited sampler, its score summed in parts."""
    spec = _spec(sampling="l1")
    values = np.asarray(H.sparse_matrix @ Table(_leaf_values(seed))(H.leaves))
    depth = node_depths(H)
    stream = _streams(seed, 3, None)
    halves = [depth < 3, depth == 3]  # the score of the leaves' level added in two parts

    def scores(tp, i):
        return sum(level_scores(values[m], depth[m], tp, i) for m in halves)

    masks = sample_masks(spec, scores, stream)
    eps_s = optstream_split(1.0, sampling="l1", n_levels=4).sample
    theta = null_rate_threshold(w=48, k=10, epsilon=eps_s, alpha=1.0)
    for level in range(4):
        x = values[depth == level][None]
        ref = sample_l1(x, k=10, epsilon=eps_s, alpha=1.0, theta=theta, bits=stream(level, 2))
        assert np.array_equal(masks[level], ref[0])
        assert masks[level].sum() == 10


@pytest.mark.parametrize(
    ("corrupt", "rule"),
    [
        (lambda f: pd.concat([f, f.iloc[:1]]), "duplicated"),
        (lambda f: f.iloc[1:], "ragged"),
        (lambda f: f.assign(y=f.y.where(f.index != f.index[3])), "finite"),
        (lambda f: f.assign(y=f.y * 1e6), r"\[0, 1000\]"),
    ],
)
def test_the_long_reader_checks_what_prepare_frame_checks(tmp_path, corrupt, rule):
    path = tmp_path / "in.parquet"
    _parquet(path, days=1)
    corrupt(pd.read_parquet(path).reset_index(drop=True)).to_parquet(path)
    scan = scan_parquet(path, None, "test")
    src = ParquetLeaves(
        scan=scan, start=scan.stamps[0], stop=scan.stamps[47], w=48, bound=1000.0, owner="t"
    )
    with pytest.raises(DomainError, match=rule):
        src(H.leaves[:12])
    good = tmp_path / "good.parquet"
    _parquet(good, days=1)
    frame = pd.read_parquet(good)
    scan = scan_parquet(good, None, "test")
    src = ParquetLeaves(
        scan=scan, start=scan.stamps[0], stop=scan.stamps[47], w=48, bound=1000.0, owner="t"
    )
    leaves = list(H.leaves[5:9])
    want = frame.pivot(index="ds", columns="unique_id", values="y")[leaves].to_numpy().T
    assert np.array_equal(src(leaves), want)


def test_cli_cut_splits_the_day_and_equals_release_split(tmp_path, capsys):
    import json

    from dpstream.cli import main

    path, tree = tmp_path / "in.parquet", tmp_path / "tree.json"
    _parquet(path, days=1, seed=5)
    tree.write_text(json.dumps(CH))
    args = ["release", "optstream", str(path), "--epsilon", "1", "--alpha", "1", "--k", "10"]
    args += ["--hierarchy", str(tree), "--store", str(tmp_path / "s.db"), "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "o.parquet"), "--cut", "1"]) == 0
    got = pd.read_parquet(tmp_path / "o.wide.parquet")
    scan = scan_parquet(path, None, "test")
    src = ParquetLeaves(
        scan=scan, start=scan.stamps[0], stop=scan.stamps[47], w=48, bound=None, owner="t"
    )
    ref = release_split(_spec(sampling="l1"), H, src, ordinal=0, seed=3, cut=2)
    block = got.set_index("ds")[list(H.nodes)].to_numpy().T
    assert np.abs(block - ref).max() <= 1e-9 * np.abs(ref).max()
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "p.parquet"), "--cut", "3"]) == 2
    assert "'--cut' option of dpstream release optstream" in capsys.readouterr().err


def test_a_stalled_active_set_is_gathered_and_solved_in_one_process(monkeypatch):
    """The fallback of the split active set: the whole problem solved here, leaves pushed back."""
    import postproc._split as split_mod
    from dpstream.engine._subtree import SubtreeRelease

    src = Table(_leaf_values(4))
    ref = _one_process(SPEC, src, ordinal=2, seed=8)
    monkeypatch.setattr(split_mod, "_CHANCES", 0)
    monkeypatch.setattr(SubtreeRelease, "infeasible", lambda self, x_tol, g_tol: 1)  # a stall
    monkeypatch.setattr(SubtreeRelease, "swap", lambda self: None)
    got = release_split(SPEC, H, src, ordinal=2, seed=8, cut=2)
    assert (ref == 0).any()
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()
