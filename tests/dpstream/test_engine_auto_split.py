"""The default release (k="auto") split into subtrees inside a period (issue 22.2): the same
release as the whole tree planned and measured in one process, for any cut, on Dask and
through the store; small trees refused or released whole."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import DayTable, daily_loads, feeder_tree

from dpstream import ReleaseStore
from dpstream.engine._auto_split import (
    AutoSplit,
    measure_auto_nodes,
    release_auto_whole,
)
from dpstream.engine._subtree import _streams, split_client
from dpstream.pipelines._autoplan import _config, new_planner
from dpstream.pipelines._period_steps import as_measurement, history_measurements
from dpstream.store._source import ParquetLeaves, release_parquet_to_store, scan_parquet
from mechanisms import DomainError, ParameterError
from planner._stream_plan import PeriodPlan
from postproc import Hierarchy
from postproc._split import node_depths

W = 48


_children = feeder_tree


CH = _children()  # 72 leaves: the planner treats every node on its own (> 64)
H = Hierarchy(children=CH)


def _loads(days: int, seed: int = 0) -> np.ndarray:
    return daily_loads(len(H.leaves), W, days, seed)


def _cfg(tree=H, **kw):
    opts = {"epsilon": 1.0, "alpha": 0.5, "w": W, "delta": None, "noise": "laplace",
            "target": "all", "level_shares": None, "prior": True, **kw}  # fmt: skip
    return _config(hierarchy=tree, nodes=tree.nodes, **opts)


def Table(loads: np.ndarray, day: int) -> DayTable:  # noqa: N802 (was a class)
    return DayTable(loads, day, H.leaves, W)


def _whole(cfg, loads, days, seed, history=None):
    planner = new_planner(cfg)
    planner.add_history(history_measurements(history, W))
    out = []
    for d in range(days):
        vals = np.asarray(H.sparse_matrix @ loads[:, d * W : (d + 1) * W])
        out.append(release_auto_whole(planner, cfg, H, vals, ordinal=d, seed=seed)[:2])
    return out


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"level_shares": (0.0, 0.3, 0.0, 0.7), "target": "leaves"},  # share-0 levels both sides
        pytest.param({"noise": "auto", "delta": 1e-6}, marks=pytest.mark.slow),
    ],
)
def test_split_equals_the_whole_release_for_every_cut(kw):
    cfg, loads = _cfg(**kw), _loads(3, seed=1)
    ref = _whole(cfg, loads, 3, seed=9)
    assert ref[0][1].basis == "rule" and ref[-1][1].basis == "released"  # planned, with a prior
    for cut in (1, 2):
        split = AutoSplit(cfg, H, cut=cut)
        for d, (want, plan) in enumerate(ref):
            got, got_plan, _ = split.release(Table(loads, d), ordinal=d, seed=9)
            assert (got_plan.k, got_plan.shares, got_plan.noise) == (
                plan.k,
                plan.shares,
                plan.noise,
            )
            assert got_plan.budget == pytest.approx(plan.budget, rel=1e-12)
            assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
    assert any((out == 0).any() for out, _ in ref)  # the non-negativity was active


def test_seeded_streams_are_keyed_and_unseeded_runs_are_consistent():
    cfg, loads = _cfg(), _loads(1, seed=2)
    a = AutoSplit(cfg, H, cut=1).release(Table(loads, 0), ordinal=0, seed=3)[0]
    b = AutoSplit(cfg, H, cut=2).release(Table(loads, 0), ordinal=0, seed=3)[0]
    c = AutoSplit(cfg, H, cut=1).release(Table(loads, 0), ordinal=1, seed=3)[0]
    assert np.allclose(a, b, rtol=0, atol=1e-9 * np.abs(a).max()) and not np.allclose(a, c)
    secure = AutoSplit(cfg, H).release(Table(loads, 0), ordinal=0)[0]
    leaves = [H.index(n) for n in H.leaves]
    assert secure.min() >= 0 and np.allclose(H.sparse_matrix @ secure[leaves], secure)


def test_the_charge_comes_after_every_read_and_before_any_draw(monkeypatch):
    import dpstream.engine._auto_split as mod

    events = []
    real = mod.measure_auto_nodes

    def spy(*a, **k):
        events.append("draw")
        return real(*a, **k)

    monkeypatch.setattr(mod, "measure_auto_nodes", spy)

    class Counting(DayTable):
        def __call__(self, leaves):
            events.append("read")
            return super().__call__(leaves)

    AutoSplit(_cfg(), H, cut=2).release(
        Counting(_loads(1), 0, H.leaves, W),
        ordinal=0,
        seed=1,
        charge=lambda: events.append("charge"),
    )
    assert events[:7] == ["read"] * 6 + ["charge"] and set(events[7:]) == {"draw"}


def test_small_trees_are_planned_whole_and_refused_here():
    small = Hierarchy(children=_children(feeders=4))  # 24 leaves: the levels are combined
    with pytest.raises(ParameterError, match="more than 64 leaves"):
        AutoSplit(_cfg(small), small, cut=1)
    flat = Hierarchy(children={"N": [f"m{i}" for i in range(80)]})
    with pytest.raises(ParameterError, match="'hierarchy'"):
        AutoSplit(_cfg(flat), flat)


def test_bad_values_read_by_a_subtree_stop_before_the_charge():
    loads = _loads(1)
    loads[5, 3] = -1.0
    charged = []

    class Checked(DayTable):
        def __call__(self, leaves):
            x = super().__call__(leaves)
            if (x < 0).any():
                raise DomainError("The INPUT must hold non-negative loads.")
            return x

    with pytest.raises(DomainError):
        AutoSplit(_cfg(), H, cut=1).release(
            Checked(loads, 0, H.leaves, W), ordinal=0, seed=1, charge=lambda: charged.append(1)
        )
    assert charged == []


def test_split_measurement_has_the_whole_release_noise():
    """The split draws each node group from its own stream, with each level's noise calibrated
    for the whole level: the spread of its samples is the variance the whole release states
    (and it can fail: a noise calibrated for one subtree's level would be smaller)."""
    cfg = _cfg()
    plan = PeriodPlan(
        k=6, noise="laplace", shares=(0.1, 0.1, 0.2, 0.6), budget=1.0, predicted=0.0,
        predicted_nodes=np.zeros(len(H.nodes)), variances=np.ones((len(H.nodes), W)),
        sample_variance=np.ones(len(H.nodes)), basis="released",
    )  # fmt: skip
    level = node_depths(H)
    is_leaf = level == 3
    values = np.full((len(H.nodes), W), 100.0)
    pos = plan.positions(W)
    draws = np.concatenate(
        [
            measure_auto_nodes(
                values, plan, cfg=cfg, level=level, level_sizes=(1, 2, 6, 72),
                rows=np.arange(level.size), parent_rows=H.parent, is_leaf=is_leaf,
                stream=_streams(s, 0, None),
            )[is_leaf][:, pos] - 100.0
            for s in range(60)
        ]
    )  # fmt: skip
    stated = as_measurement(np.zeros((len(H.nodes), W)), plan, cfg).noise[is_leaf][0, pos[0]]
    ratio = draws.var() / stated  # 25,920 Laplace draws: the ratio's sd is about 0.016
    assert 0.92 < ratio < 1.08
    assert abs(draws.mean()) < 0.05 * np.sqrt(stated)


# -- Parquet, the store, Dask ---------------------------------------------------------------


def _parquet(path, loads: np.ndarray, start: str = "2024-01-01") -> None:
    idx = pd.date_range(start, periods=loads.shape[1], freq="30min")
    frames = [
        pd.DataFrame({"unique_id": leaf, "ds": idx, "y": loads[i]})
        for i, leaf in enumerate(H.leaves)
    ]
    pd.concat(frames).to_parquet(path)


def _leaves(path, day: int) -> ParquetLeaves:
    scan = scan_parquet(path, None, "test")
    return ParquetLeaves(
        scan=scan, start=scan.stamps[W * day], stop=scan.stamps[W * day + W - 1], w=W,
        bound=None, owner="test",
    )  # fmt: skip


def test_dask_threads_equal_one_process(tmp_path):
    path = tmp_path / "in.parquet"
    loads = _loads(2, seed=4)
    _parquet(path, loads)
    cfg = _cfg()
    ref = _whole(cfg, loads, 2, seed=7)
    with split_client(n_workers=2, processes=False) as client:
        split = AutoSplit(cfg, H, client=client, n_workers=2)
        for d in range(2):
            got = split.release(_leaves(path, d), ordinal=d, seed=7)[0]
            assert np.abs(got - ref[d][0]).max() <= 1e-9 * np.abs(ref[d][0]).max()


def test_a_source_holding_data_would_be_a_large_graph():
    """The guard has teeth: data shipped with the subtree objects makes Dask warn."""
    big = Table(_loads(1), 0)
    big.ballast = np.zeros(2_000_000)  # 16 MB carried by every call
    with split_client(n_workers=1, processes=False) as client:
        split = AutoSplit(_cfg(), H, client=client, n_workers=1)
        with pytest.raises(UserWarning, match="[Ll]arge graph"):
            split.release(big, ordinal=0, seed=1)


def _plans(store) -> list[dict]:
    """The stored plan record of every period, in time order."""
    rows = store._con.execute("SELECT plan FROM periods ORDER BY ordinal").fetchall()
    return [json.loads(r[0]) for r in rows]


def _read(store, days) -> list[np.ndarray]:
    got = store.read(sorted(store.ordinals()))
    return [got.iloc[W * d : W * (d + 1)][list(H.nodes)].to_numpy().T for d in range(days)]


def test_store_split_day_by_day_equals_the_whole_release(tmp_path):
    """Three days through the store, split (cut 1, this process), released in two runs: the
    planners are rebuilt from the store between them; equal to the whole release, and each
    day is charged what the store's whole k="auto" day is charged."""
    path = tmp_path / "in.parquet"
    loads = _loads(3, seed=5)
    _parquet(path, loads)
    kw = {"epsilon": 1.0, "alpha": 0.5, "hierarchy": CH, "seed": 11}
    first = tmp_path / "first.parquet"
    _parquet(first, loads[:, :W])
    with ReleaseStore(tmp_path / "split.db") as store:
        assert release_parquet_to_store(store, first, cut=1, **kw) == [0]  # k="auto": default
        assert release_parquet_to_store(store, path, cut=1, **kw) == [0, 1, 2]
        got = _read(store, 3)
        plans = _plans(store)
        spent = [store.ledger.spent(o) for o in range(3)]
    ref = _whole(_cfg(epsilon=1.0), loads, 3, seed=11)
    for d in range(3):
        assert np.abs(got[d] - ref[d][0]).max() <= 1e-9 * np.abs(ref[d][0]).max()
    with ReleaseStore(tmp_path / "whole.db") as store:
        release_parquet_to_store(store, path, **kw)  # engine local, no cut: whole periods
        assert [store.ledger.spent(o) for o in range(3)] == spent
    assert spent[0] > 0 and [p["period"] for p in plans] == [0, 1, 2]
    assert plans[1]["planned_on"] == "1 stored period(s)"  # rebuilt from the first run


@pytest.mark.slow
def test_store_history_is_the_planner_history(tmp_path):
    path = tmp_path / "in.parquet"
    loads = _loads(4, seed=6)
    _parquet(path, loads[:, 2 * W :], start="2024-01-03")
    idx = pd.date_range("2024-01-01", periods=4 * W, freq="30min")
    hist = pd.DataFrame(loads[:, : 2 * W].T, index=idx[: 2 * W], columns=list(H.leaves))
    hist_nodes = np.asarray(H.sparse_matrix @ loads[:, : 2 * W]).T
    scan = scan_parquet(path, None, "t")
    assert scan.stamps[0] == idx[2 * W]
    with ReleaseStore(tmp_path / "s.db") as store:
        release_parquet_to_store(
            store, path, epsilon=1.0, alpha=0.5, hierarchy=CH, seed=2, cut=2, history=hist
        )
        got = _read(store, 2)
    planner = new_planner(_cfg())
    planner.add_history(history_measurements(hist_nodes, W))
    for d in range(2):
        vals = np.asarray(H.sparse_matrix @ loads[:, (2 + d) * W : (3 + d) * W])
        want, plan, _ = release_auto_whole(planner, _cfg(), H, vals, ordinal=d, seed=2)
        assert plan.basis == "history" or d > 0
        # the prior's variance floor binds here (noise-free history): every part's is the
        # whole tree's (the parts' floor sums added before each plan)
        assert np.abs(got[d] - want).max() <= 1e-9 * np.abs(want).max()


def test_store_refuses_a_cut_for_a_small_tree(tmp_path):
    small = _children(feeders=4)
    path = tmp_path / "in.parquet"
    rng = np.random.default_rng(0)
    leaves = [x for s in small.values() for x in s if x not in small]
    idx = pd.date_range("2024-01-01", periods=W, freq="30min")
    pd.concat(
        [pd.DataFrame({"unique_id": x, "ds": idx, "y": rng.gamma(2.0, 1.0, W)}) for x in leaves]
    ).to_parquet(path)
    with ReleaseStore(tmp_path / "s.db") as store:
        with pytest.raises(ParameterError, match="'cut'.*more than 64 leaves"):
            release_parquet_to_store(store, path, epsilon=1.0, alpha=1.0, hierarchy=small, cut=1)
        assert store.ordinals() == set() and store.config is None


# -- SQLite: workers read their leaves with SQL (issue 22.3) ---------------------------------


def _sqlite(path, loads: np.ndarray) -> None:
    import sqlite3

    idx = pd.date_range("2024-01-01", periods=loads.shape[1], freq="30min")
    frame = pd.concat(
        [
            pd.DataFrame({"unique_id": leaf, "ds": idx, "y": loads[i]})
            for i, leaf in enumerate(H.leaves)
        ]
    ).sample(frac=1.0, random_state=0)  # rows in any order
    with sqlite3.connect(path) as con:
        frame.to_sql("readings", con, index=False)


def test_sqlite_leaves_read_what_parquet_leaves_read(tmp_path):
    from dpstream.store._source import SQLiteLeaves, scan_sqlite

    loads = _loads(2, seed=8)
    _parquet(tmp_path / "in.parquet", loads)
    _sqlite(tmp_path / "in.db", loads)
    scan = scan_sqlite(tmp_path / "in.db", None, "test")
    assert sorted(scan.leaves) == sorted(H.leaves) and len(scan.stamps) == 2 * W
    names = list(H.leaves[3:40])
    for day in range(2):
        src = SQLiteLeaves(
            path=scan.path, table=scan.table, start=scan.raw[W * day],
            stop=scan.raw[W * day + W - 1], w=W, bound=None, owner="test",
        )  # fmt: skip
        assert np.array_equal(src(names), _leaves(tmp_path / "in.parquet", day)(names))
    bad = SQLiteLeaves(path=scan.path, table=scan.table, start=scan.raw[0], stop=scan.raw[W - 2],
                       w=W, bound=None, owner="test")  # fmt: skip
    with pytest.raises(DomainError, match="distinct time stamps"):
        bad(names)
    high = SQLiteLeaves(path=scan.path, table=scan.table, start=scan.raw[0], stop=scan.raw[W - 1],
                        w=W, bound=1e-3, owner="test")  # fmt: skip
    with pytest.raises(DomainError, match="declared bound"):
        high(names)


def test_store_split_from_sqlite_equals_the_whole_release(tmp_path):
    loads = _loads(2, seed=9)
    _sqlite(tmp_path / "in.db", loads)
    with ReleaseStore(tmp_path / "s.db") as store:
        got = release_parquet_to_store(
            store, tmp_path / "in.db", epsilon=1.0, alpha=0.5, hierarchy=CH, seed=4, cut=1
        )
        assert got == [0, 1]
        got = _read(store, 2)
    ref = _whole(_cfg(), loads, 2, seed=4)
    for d in range(2):
        assert np.abs(got[d] - ref[d][0]).max() <= 1e-9 * np.abs(ref[d][0]).max()


def test_cli_default_release_splits_the_day_and_equals_the_whole_release(tmp_path, capsys):
    import json

    from dpstream.cli import main

    path, tree = tmp_path / "in.parquet", tmp_path / "tree.json"
    loads = _loads(1, seed=10)
    _parquet(path, loads)
    tree.write_text(json.dumps(CH))
    args = ["release", "optstream", str(path), "--epsilon", "1", "--alpha", "0.5"]
    args += ["--hierarchy", str(tree), "--store", str(tmp_path / "s.db"), "--seed", "3"]
    assert main([*args, "--out", str(tmp_path / "o.parquet"), "--cut", "2"]) == 0  # k auto
    got = pd.read_parquet(tmp_path / "o.wide.parquet").set_index("ds")[list(H.nodes)]
    want = _whole(_cfg(), loads, 1, seed=3)[0][0]
    assert np.abs(got.to_numpy().T - want).max() <= 1e-9 * np.abs(want).max()
    capsys.readouterr()


def test_the_split_store_records_what_the_whole_store_records(tmp_path):
    """Privacy: the same record and the same charges whether a day is split or not."""
    path = tmp_path / "in.parquet"
    _parquet(path, _loads(1, seed=12))
    kw = {"epsilon": 0.7, "alpha": 0.5, "hierarchy": CH, "delta": 1e-6, "noise": "auto", "seed": 1}
    records, charges, plans = [], [], []
    for name, extra in (("whole", {}), ("split", {"cut": 1})):
        with ReleaseStore(tmp_path / f"{name}.db") as store:
            release_parquet_to_store(store, path, **kw, **extra)
            record = store.privacy_record().to_dict()
            assert record["parameters"].pop("store") == f"{name}.db"  # the one difference
            records.append(record)
            charges.append(store.ledger.spent(0))
            plans.append(_plans(store)[0])
    assert records[0] == records[1] and charges[0] == charges[1] > 0
    same = ("k", "noise", "shares", "basis", "prior_periods", "period", "start", "planned_on")
    assert {f: plans[0][f] for f in same} == {f: plans[1][f] for f in same}
    assert plans[0]["budget"] == pytest.approx(plans[1]["budget"], rel=1e-12)


@pytest.fixture(scope="module")
def scheduler():
    """A running cluster of two worker processes, reached by address."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


@pytest.mark.slow  # a cluster of worker processes (the threads test is the fast tier)
def test_store_dask_processes_split_the_default_day_and_small_trees_fall_back(tmp_path, scheduler):
    path = tmp_path / "in.parquet"
    loads = _loads(2, seed=13)
    _parquet(path, loads)
    kw = {"epsilon": 1.0, "alpha": 0.5, "seed": 5}
    with ReleaseStore(tmp_path / "a.db") as store:
        release_parquet_to_store(
            store, path, engine="dask", scheduler=scheduler, hierarchy=CH, **kw
        )
        got = _read(store, 2)
    ref = _whole(_cfg(), loads, 2, seed=5)
    for d in range(2):
        assert np.abs(got[d] - ref[d][0]).max() <= 1e-9 * np.abs(ref[d][0]).max()
    # at most 64 leaves: planned whole, each period on a worker (the store's own bits)
    small = {k: v for k, v in CH.items() if not k.startswith("r1")}
    small["N"] = ["r0"]
    for s in small["r0"]:
        small[s] = small[s][:8]
    leaves = [x for s in small["r0"] for x in small[s]]
    rows = [H.leaves.index(x) for x in leaves]
    sub = tmp_path / "small.parquet"
    idx = pd.date_range("2024-01-01", periods=2 * W, freq="30min")
    pd.concat(
        [
            pd.DataFrame({"unique_id": x, "ds": idx, "y": loads[r]})
            for x, r in zip(leaves, rows, strict=True)
        ]
    ).to_parquet(sub)
    out = []
    for name, engine in (("d", "dask"), ("l", "local")):
        with ReleaseStore(tmp_path / f"{name}.db") as store:
            release_parquet_to_store(
                store, sub, engine=engine, scheduler=scheduler if engine == "dask" else None,
                hierarchy=small, **kw,
            )  # fmt: skip
            out.append(store.read(store.ordinals()).to_numpy())
    assert np.array_equal(out[0], out[1])


def test_parquet_store_history_whole_equals_the_in_memory_store(tmp_path):
    """``history=`` of release_parquet_to_store without a split: the store's whole period, as
    the in-memory store releases it from the same history (the same per-period bits)."""
    loads = _loads(3, seed=14)
    path = tmp_path / "in.parquet"
    _parquet(path, loads[:, 2 * W :], start="2024-01-03")
    idx = pd.date_range("2024-01-01", periods=3 * W, freq="30min")
    hist = pd.DataFrame(loads[:, : 2 * W].T, index=idx[: 2 * W], columns=list(H.leaves))
    frame = pd.DataFrame(loads[:, 2 * W :].T, index=idx[2 * W :], columns=list(H.leaves))
    kw = {"epsilon": 1.0, "alpha": 0.5, "hierarchy": CH, "seed": 6, "history": hist}
    with ReleaseStore(tmp_path / "p.db") as store:
        release_parquet_to_store(store, path, **kw)
        got = store.read(store.ordinals())
        assert _plans(store)[0]["basis"] == "history"
    with ReleaseStore(tmp_path / "m.db") as store:
        want = store.release_optstream(frame, **kw)
    np.testing.assert_array_equal(got[list(H.nodes)].to_numpy(), want[list(H.nodes)].to_numpy())


class _RandomSource:
    """A source that makes each leaf's day from its name (a few bytes pickled, as a file's
    path: Dask ships no data)."""

    def __init__(self, tree: Hierarchy, day: int):
        self.day = day

    def __call__(self, leaves):
        import zlib

        return np.stack(
            [
                np.random.default_rng([self.day, zlib.crc32(x.encode())]).gamma(2.0, 1.0, W)
                for x in leaves
            ]
        )


_random_source = _RandomSource


def test_subtree_objects_are_built_where_they_run_so_no_graph_is_large():
    """Issue 22: a subtree object's task carries public scalars only and the object builds
    its structure on its worker (the hierarchy scattered once per worker, outside the
    graph). With Dask's large-graph threshold at 8 kB (an error under filterwarnings), a
    tree whose subtree structures pickle to 34 kB each releases without a warning, equal to
    the whole release; shipping one such structure in a task does warn (the guard bites)."""
    import dask

    from planner._stream_planner import subtree_config
    from postproc._split import subtrees

    tree = Hierarchy(children=_children(2, 10, 40))  # 823 nodes, two subtrees
    cfg = _cfg(tree)
    planner = new_planner(cfg)
    vals = np.asarray(tree.sparse_matrix @ _random_source(tree, 0)(tree.leaves))
    ref = release_auto_whole(planner, cfg, tree, vals, ordinal=0, seed=3)[0]
    maps, rows = subtrees(tree, 1)
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "8kB"}):
        with split_client(n_workers=2, processes=False) as client:
            split = AutoSplit(cfg, tree, cut=1, client=client, n_workers=2)
            got = split.release(_random_source(tree, 0), ordinal=0, seed=3)[0]
            old = (maps[0], rows[0], tree.parent[rows[0]], subtree_config(cfg, rows[0]))
            with pytest.raises(UserWarning, match="[Ll]arge graph"):
                client.submit(len, old).result()
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


def test_messages_to_a_subtree_do_not_grow_with_it(monkeypatch):
    """The largest pickled task and the largest argument of every call to a subtree object
    are the same for subtrees of 211 and of 411 nodes (what grows is only what comes back:
    the released values and the store's record)."""
    import pickle

    from dpstream.engine import _auto_split

    def sizes(feeders: int) -> dict:
        got: dict = {}
        init = _auto_split.SubtreeAuto.__init__

        def spy(self, task, hierarchy):
            got["task"] = max(got.get("task", 0), len(pickle.dumps(task)))
            init(self, task, hierarchy)

        monkeypatch.setattr(_auto_split.SubtreeAuto, "__init__", spy)
        tree = Hierarchy(children=_children(2, 10, feeders))
        split = AutoSplit(_cfg(tree), tree, cut=1)
        monkeypatch.undo()
        inner = split.call

        def call(method, args, only=None):
            size = max(len(pickle.dumps(a)) for a in args)
            got[method] = max(got.get(method, 0), size)
            return inner(method, args, only)

        split.call = call
        for day in range(2):
            split.release(_random_source(tree, day), ordinal=day, seed=2)
        return got

    small, large = sizes(20), sizes(40)
    assert small.keys() == large.keys() and {"task", "plan", "load", "descend"} <= small.keys()
    for key, size in small.items():
        assert large[key] <= size + 16, (key, size, large[key])  # an int's bytes, not nodes
    assert small["task"] < 2_000
