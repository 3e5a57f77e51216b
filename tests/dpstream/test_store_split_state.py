"""A k="auto" release split into subtrees saves each part's planner state in the store (issue
22): day by day through the store (one run a day) equals one planner over every day past the
look-backs, the state is loaded (not replayed), and a backup continues identically."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import feeder_tree

import planner._stream_planner as sp
from dpstream import ReleaseStore
from dpstream.engine._auto_split import AutoSplit, release_auto_whole
from dpstream.pipelines import _autoplan
from dpstream.pipelines._autoplan import _config, new_planner
from dpstream.store._source import release_parquet_to_store
from postproc import Hierarchy

W = 48
DAYS = 7


_children = feeder_tree


CH = _children()  # 72 leaves (> 64: the split applies)
H = Hierarchy(children=CH)
KW = {"epsilon": 1.0, "alpha": 0.5, "hierarchy": CH, "seed": 11, "cut": 1}


def _loads(days: int, seed: int = 5) -> np.ndarray:
    """(L, days * W): daily profiles whose level changes from day to day (the prior's
    weights and the variogram's sums matter)."""
    rng = np.random.default_rng(seed)
    t = np.arange(W * days)
    scale = rng.gamma(2.0, 1.0, len(H.leaves))[:, None]
    level = 1.0 + 0.3 * (t // W % 3)
    return scale * level * (1.2 + np.sin(2 * np.pi * t / W))[None] + rng.gamma(
        1.0, 0.3, (scale.size, t.size)
    )


def _day_file(path, loads: np.ndarray, day: int):
    idx = pd.date_range("2024-01-01", periods=loads.shape[1], freq="30min")[day * W : (day + 1) * W]
    frames = [
        pd.DataFrame({"unique_id": leaf, "ds": idx, "y": loads[i, day * W : (day + 1) * W]})
        for i, leaf in enumerate(H.leaves)
    ]
    pd.concat(frames).to_parquet(path)
    return path


@pytest.fixture
def short_look_backs(monkeypatch):
    """Variogram look-back 2, prior 4 (planner and store), the prior holding its last 2
    released periods: 7 days go past every look-back and fold held periods."""
    for mod in (sp, _autoplan):
        monkeypatch.setattr(mod, "LOOKBACK", 2)
        monkeypatch.setattr(mod, "PRIOR_DAYS", 4)
    from postproc._prior import PriorState

    init = PriorState.__init__

    def recent(self, *a, **kw):
        init(self, *a, **{**kw, "recent": 2})

    monkeypatch.setattr(PriorState, "__init__", recent)


def _reference(loads: np.ndarray, days: int) -> list[np.ndarray]:
    """One planner over every day, the whole tree in one process (the split's streams)."""
    cfg = _config(
        hierarchy=H, nodes=H.nodes, epsilon=1.0, alpha=0.5, w=W, delta=None, noise="laplace",
        target="all", level_shares=None, prior=True,
    )  # fmt: skip
    planner = new_planner(cfg)
    out = []
    for d in range(days):
        vals = np.asarray(H.sparse_matrix @ loads[:, d * W : (d + 1) * W])
        out.append(release_auto_whole(planner, cfg, H, vals, ordinal=d, seed=11)[0])
    return out


def _daily(tmp_path, store_path, loads, days, first: int = 0) -> list[np.ndarray]:
    """One run (one opening of the store) per day; each day's released (N, w)."""
    out = []
    for d in range(first, days):
        with ReleaseStore(store_path) as store:
            got = release_parquet_to_store(store, _day_file(tmp_path / f"d{d}.parquet", loads, d),
                                           **KW)  # fmt: skip
            assert got == [d]
            frame = store.read([d])
        out.append(frame[list(H.nodes)].to_numpy().T)
    return out


def _no_replay(monkeypatch):
    """Replaying a stored period into the split's planners fails the test."""
    real = AutoSplit.rebuild

    def rebuild(self, history, items, carried=None, gap=False):
        items = list(items)
        assert not items, "the split replayed stored periods instead of loading its state"
        return real(self, history, items, carried, gap)

    monkeypatch.setattr(AutoSplit, "rebuild", rebuild)


def _close(got, want) -> None:
    for g, x in zip(got, want, strict=True):
        assert np.abs(g - x).max() <= 1e-9 * np.abs(x).max()


def test_split_day_by_day_loads_its_state_and_equals_one_planner(
    tmp_path, short_look_backs, monkeypatch
):
    loads = _loads(DAYS)
    _no_replay(monkeypatch)
    got = _daily(tmp_path, tmp_path / "s.db", loads, DAYS)
    _close(got, _reference(loads, DAYS))
    with ReleaseStore(tmp_path / "s.db") as store:
        rows = store._con.execute("SELECT DISTINCT cut, root, ordinal FROM split_state").fetchall()
        assert store._planner_state() is None  # the whole tree's state is not the split's
    assert sorted(rows) == [(1, "", DAYS - 1), (1, "r0", DAYS - 1), (1, "r1", DAYS - 1)]


def test_replaying_the_store_instead_drifts(tmp_path, short_look_backs, monkeypatch):
    # the guard above can fail: without the saved states (an older store) the split
    # rebuilds its planners from the last 4 stored periods, which is not one planner over 7
    loads = _loads(DAYS)
    real = AutoSplit.load_saved

    def never(self, store, last, *, history=False):
        assert real(self, store, last, history=history)  # there is a state to load ...
        self.top_planner = new_planner(self.top_cfg)  # ... but it is replayed instead
        self.top_held = {}
        self.each("reset")
        return False

    monkeypatch.setattr(AutoSplit, "load_saved", never)
    got = _daily(tmp_path, tmp_path / "s.db", loads, DAYS)
    want = _reference(loads, DAYS)
    assert max(np.abs(g - x).max() for g, x in zip(got, want, strict=True)) > 1e-6


def test_a_backup_continues_identically_and_an_older_store_replays(
    tmp_path, short_look_backs, monkeypatch
):
    loads = _loads(DAYS)
    first = _daily(tmp_path, tmp_path / "s.db", loads, 5)
    with ReleaseStore(tmp_path / "s.db") as store:
        store.backup(tmp_path / "copy.db")
    with monkeypatch.context() as m:
        _no_replay(m)
        a = _daily(tmp_path, tmp_path / "s.db", loads, DAYS, first=5)
        b = _daily(tmp_path, tmp_path / "copy.db", loads, DAYS, first=5)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    want = _reference(loads, DAYS)
    _close([*first, *b], want)
    # a store of before the saved states (the table emptied): replayed, within the look-back
    # the same release (4 periods stored, the prior's look-back)
    old = tmp_path / "old.db"
    _daily(tmp_path, old, loads, 4)
    with ReleaseStore(old) as store:
        with store._con:
            store._con.execute("DELETE FROM split_state")
    calls = []
    real = AutoSplit.rebuild
    monkeypatch.setattr(AutoSplit, "rebuild", lambda s, *a: calls.append(1) or real(s, *a))
    _close(_daily(tmp_path, old, loads, 5, first=4), want[4:5])
    assert calls == [1]


def test_a_part_without_its_state_replays_every_part(tmp_path, short_look_backs, monkeypatch):
    loads = _loads(4)
    _daily(tmp_path, tmp_path / "s.db", loads, 3)
    with ReleaseStore(tmp_path / "s.db") as store:
        with store._con:
            store._con.execute("DELETE FROM split_state WHERE root = 'r1'")
    calls = []
    real = AutoSplit.rebuild
    monkeypatch.setattr(AutoSplit, "rebuild", lambda s, *a: calls.append(1) or real(s, *a))
    got = _daily(tmp_path, tmp_path / "s.db", loads, 4, first=3)
    _close(got, _reference(loads, 4)[3:])  # 3 stored periods: within every look-back
    assert calls == [1]


def _count_replays(monkeypatch) -> list:
    calls = []
    real = AutoSplit.rebuild

    def rebuild(self, history, items, carried=None, gap=False):
        items = list(items)
        calls.append(len(items))
        return real(self, history, items, carried, gap)

    monkeypatch.setattr(AutoSplit, "rebuild", rebuild)
    return calls


def _runs(tmp_path, store_path, loads, plan) -> list[np.ndarray]:
    """One run per (day, cut) of ``plan`` (cut None: the whole period, no split)."""
    out = []
    for d, cut in plan:
        with ReleaseStore(store_path) as store:
            f = _day_file(tmp_path / f"d{d}.parquet", loads, d)
            release_parquet_to_store(store, f, **{**KW, "cut": cut})
            out.append(store.read([d])[list(H.nodes)].to_numpy().T)
    return out


def test_held_periods_released_whole_and_a_changed_cut(tmp_path, short_look_backs, monkeypatch):
    # days 0-1 whole (their records are the whole tree's, in node order), then split: day 2
    # replays (no split state yet), day 3 loads it and reads its held day 1 from a whole
    # record (the rows picked from the whole array), equal to replaying (within every
    # look-back, the replay is exact); day 4 at another cut replays
    loads = _loads(5)
    plan = [(0, None), (1, None), (2, 1), (3, 1)]
    calls = _count_replays(monkeypatch)
    got = _runs(tmp_path, tmp_path / "a.db", loads, plan)
    assert calls == [2]  # day 2 replayed days 0-1; day 3 loaded
    monkeypatch.setattr(AutoSplit, "load_saved", lambda self, *a, **k: False)
    want = _runs(tmp_path, tmp_path / "b.db", loads, plan)
    assert calls == [2, 2, 3]
    _close(got[2:], want[2:])
    monkeypatch.undo()
    calls = _count_replays(monkeypatch)
    _runs(tmp_path, tmp_path / "a.db", loads, [(4, 2)])
    assert calls == [4]


@pytest.fixture(scope="module")
def scheduler():
    """A running cluster of two worker processes, reached by address."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


@pytest.mark.slow  # a cluster of worker processes
def test_dask_workers_load_their_state_from_the_store_file(tmp_path, monkeypatch, scheduler):
    # worker processes (the default look-backs: a patch here would not reach them) read
    # their states and held rows from the store file: every day after the first is loaded,
    # none replayed, and equal to one planner over the days
    loads = _loads(3)
    calls = _count_replays(monkeypatch)
    out = []
    for d in range(3):
        with ReleaseStore(tmp_path / "s.db") as store:
            f = _day_file(tmp_path / f"d{d}.parquet", loads, d)
            kw = {**KW, "cut": None}
            release_parquet_to_store(store, f, engine="dask", scheduler=scheduler, **kw)
            out.append(store.read([d])[list(H.nodes)].to_numpy().T)
    assert calls == [0]  # the first day only (nothing stored)
    _close(out, _reference(loads, 3))


def test_a_day_skipped_loads_the_state_and_starts_the_window_afresh(
    tmp_path, short_look_backs, monkeypatch
):
    loads = _loads(4)
    _no_replay(monkeypatch)
    got = _runs(tmp_path, tmp_path / "s.db", loads, [(0, 1), (1, 1), (3, 1)])
    cfg = _config(
        hierarchy=H, nodes=H.nodes, epsilon=1.0, alpha=0.5, w=W, delta=None, noise="laplace",
        target="all", level_shares=None, prior=True,
    )  # fmt: skip
    planner = new_planner(cfg)
    want = []
    for d in (0, 1, 3):
        if d == 3:
            planner.previous = None  # no window of w steps straddles the skipped day
        vals = np.asarray(H.sparse_matrix @ loads[:, d * W : (d + 1) * W])
        want.append(release_auto_whole(planner, cfg, H, vals, ordinal=d, seed=11)[0])
    _close(got, want)
