"""The store's k="auto" planner with public history (issue 22): the history block of the
variogram's look-back leaves oldest first (``HISTORY_FADE``) across daily runs, each loading
the state the previous run saved, as in memory."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import plan_in_memory

import planner._stream_planner as sp
from dpstream import ReleaseStore
from dpstream.pipelines import _autoplan

H = {"total": ["a", "b", "c"]}
KW = {"epsilon": 1.0, "alpha": 5.0, "hierarchy": H, "k": "auto", "seed": 11}
L = 4  # the variogram's look-back here: the history block fades over 3 daily runs
DAYS = 6


@pytest.fixture(autouse=True)
def short_look_backs(monkeypatch):
    for mod in (sp, _autoplan):
        monkeypatch.setattr(mod, "LOOKBACK", L)
        monkeypatch.setattr(mod, "PRIOR_DAYS", L)


def loads(days: int) -> pd.DataFrame:
    """Smooth days, then rough ones: the history block's oldest days are the roughest."""
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    rng = np.random.default_rng(3)
    rough = np.where(t // 48 < 2, 30.0, 2.0)  # the first two (history) days: rough
    base = 500 + 80 * np.sin(2 * np.pi * t / 48)
    return pd.DataFrame(
        {name: base * f + rough * rng.standard_normal(t.size) for name, f in
         (("a", 1.0), ("b", 0.6), ("c", 0.3))},
        index=idx,
    )  # fmt: skip


def in_memory(frame, history) -> np.ndarray:
    from dpstream.pipelines._period_steps import post_process_periods

    _, sf, measured, plans, priors = plan_in_memory(frame, H, KW["seed"], history)
    out = [post_process_periods([m], [p], [q], sf.hierarchy)[0]
           for m, p, q in zip(measured, plans, priors, strict=True)]  # fmt: skip
    return np.maximum(np.concatenate([r.T for r in out]), 0.0)


def _saved_keys(store) -> set[str]:
    ordinal, blob = store._planner_state()
    with np.load(io.BytesIO(bytes(blob)), allow_pickle=False) as z:
        return {k[2:] for k in z.files if k.startswith("a_")} | set(
            json.loads(str(z["meta"]))["scalars"]
        )


@pytest.mark.parametrize("fade", ["periods", "lowrank"])
@pytest.mark.parametrize("every_day", [True, False], ids=["history-daily", "history-once"])
def test_the_history_fade_across_daily_runs_equals_in_memory(
    tmp_path, every_day, fade, monkeypatch
):
    # "lowrank" at rank 1 of the 4 nodes: its (L, 1) profiles and (1, N) weights are saved
    monkeypatch.setattr(sp, "HISTORY_FADE", fade)
    monkeypatch.setattr(sp, "HISTORY_RANK", 1)
    frame = loads(L + DAYS)
    history, days = frame.iloc[: 48 * L], frame.iloc[48 * L :]
    want = in_memory(days, history)
    got, keys = [], []
    for d in range(DAYS):
        with ReleaseStore(tmp_path / "s.db") as store:  # one run (one opening) per day
            kw = {"history": history} if every_day or d == 0 else {}
            got.append(store.release_optstream(days.iloc[48 * d : 48 * (d + 1)], **KW, **kw))
            keys.append(_saved_keys(store))
    np.testing.assert_allclose(pd.concat(got).to_numpy(), want, rtol=0, atol=1e-9)
    # the history's shares were saved while it was in the look-back, and only then
    assert ["moment_prev_squares" in k for k in keys] == [d < L - 1 for d in range(DAYS)]
    assert ["moment_prev_profiles" in k for k in keys] == [
        d < L - 1 and fade == "lowrank" for d in range(DAYS)
    ]


def test_a_store_saved_with_the_periods_shares_fades_by_them_under_lowrank(tmp_path, monkeypatch):
    # day 1 run by session 12's code ((L, N) shares saved), the next days by the rank-r
    # default: the saved state keeps its own fade, as the in-memory "periods" release
    monkeypatch.setattr(sp, "HISTORY_RANK", 1)
    frame = loads(L + DAYS)
    history, days = frame.iloc[: 48 * L], frame.iloc[48 * L :]
    monkeypatch.setattr(sp, "HISTORY_FADE", "periods")
    want = in_memory(days, history)
    got = []
    for d in range(DAYS):
        with ReleaseStore(tmp_path / "s.db") as store:
            kw = {"history": history} if d == 0 else {}
            got.append(store.release_optstream(days.iloc[48 * d : 48 * (d + 1)], **KW, **kw))
        monkeypatch.setattr(sp, "HISTORY_FADE", "lowrank")
    np.testing.assert_allclose(pd.concat(got).to_numpy(), want, rtol=0, atol=1e-9)
    assert np.abs(in_memory(days, history) - want).max() > 1e-6  # (lowrank plans otherwise)


@pytest.mark.parametrize("fade", ["periods", "lowrank"])
def test_the_history_fade_changes_this_release(fade, monkeypatch):
    # the test above can fail: the saved shares matter here (the mean rate plans otherwise)
    monkeypatch.setattr(sp, "HISTORY_FADE", fade)
    monkeypatch.setattr(sp, "HISTORY_RANK", 1)
    frame = loads(L + DAYS)
    history, days = frame.iloc[: 48 * L], frame.iloc[48 * L :]
    faded = in_memory(days, history)
    monkeypatch.setattr(sp, "HISTORY_FADE", "mean")
    assert np.abs(in_memory(days, history) - faded).max() > 1e-6


@pytest.mark.parametrize("fade", ["periods", "lowrank"])
def test_a_split_store_fades_the_history_as_the_whole_planner(tmp_path, fade, monkeypatch):
    # the split engine (cut 2, this process): each part saves and loads its history shares
    # across three runs, one day each; equal to one whole planner (the shares are per node;
    # "lowrank": every part factors them over the whole tree's profiles, the sum of the
    # parts' Gram matrices)
    monkeypatch.setattr(sp, "HISTORY_FADE", fade)
    monkeypatch.setattr(sp, "HISTORY_RANK", 2)
    from _tree_helpers import daily_loads, feeder_tree

    from dpstream.engine._auto_split import release_auto_whole
    from dpstream.pipelines._autoplan import _config, new_planner
    from dpstream.pipelines._period_steps import history_measurements
    from dpstream.store._source import release_parquet_to_store
    from postproc import Hierarchy

    w, days = 48, 3
    ch = feeder_tree()  # 72 leaves: planned node by node, splittable
    tree = Hierarchy(children=ch)
    loads = daily_loads(len(tree.leaves), w, L + days, seed=4)
    loads[:, : 2 * w] *= 1.0 + 0.5 * np.sin(np.arange(2 * w) / 1.5)  # rough oldest history
    idx = pd.date_range("2024-01-01", periods=(L + days) * w, freq="30min")
    hist = pd.DataFrame(loads[:, : L * w].T, index=idx[: L * w], columns=list(tree.leaves))
    kw = {"epsilon": 1.0, "alpha": 0.5, "hierarchy": ch, "seed": 5, "cut": 2, "history": hist}
    with ReleaseStore(tmp_path / "s.db") as store:
        for d in range(days):  # one run per day, each reading the parts' saved states
            path = tmp_path / f"day{d}.parquet"
            y = loads[:, (L + d) * w : (L + d + 1) * w]
            pd.concat(
                [
                    pd.DataFrame(
                        {"unique_id": x, "ds": idx[(L + d) * w : (L + d + 1) * w], "y": y[i]}
                    )
                    for i, x in enumerate(tree.leaves)
                ]  # fmt: skip
            ).to_parquet(path)
            release_parquet_to_store(store, path, **kw)
        got = store.read(sorted(store.ordinals()))
    cfg = _config(
        hierarchy=tree, nodes=tree.nodes, epsilon=1.0, alpha=0.5, w=w, delta=None,
        noise="laplace", target="all", level_shares=None, prior=True,
    )  # fmt: skip
    planner = new_planner(cfg)
    planner.add_history(
        history_measurements(np.asarray(tree.sparse_matrix @ loads[:, : L * w]).T, w)
    )
    assert planner._moment is not None
    assert (planner._moment.profiles is not None) == (fade == "lowrank")
    for d in range(days):
        vals = np.asarray(tree.sparse_matrix @ loads[:, (L + d) * w : (L + d + 1) * w])
        want = release_auto_whole(planner, cfg, tree, vals, ordinal=d, seed=5)[0]
        assert planner._moment_prev is not None  # the history block still fading
        have = got.iloc[w * d : w * (d + 1)][list(tree.nodes)].to_numpy().T
        assert np.abs(have - want).max() <= 1e-9 * np.abs(want).max()
