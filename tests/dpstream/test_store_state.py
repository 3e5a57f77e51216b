"""The store saves the k="auto" planner's streaming state (issue 22): day by day through the
store equals the in-memory release past the look-backs, and a copy of the store continues it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import plan_in_memory

import planner._stream_planner as sp
from dpstream import ReleaseStore
from dpstream.pipelines import _autoplan
from dpstream.store import _planner_state

H = {"total": ["a", "b", "c"]}
KW = {"epsilon": 1.0, "alpha": 5.0, "hierarchy": H, "k": "auto", "seed": 7}
DAYS = 8


def loads(days: int) -> pd.DataFrame:
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    rng = np.random.default_rng(5)
    level = 1.0 + 0.3 * (t // 48 % 3)  # days differ: the prior's weights matter
    return pd.DataFrame(
        {
            "a": level * (300 + 80 * np.sin(2 * np.pi * t / 48)) + rng.uniform(0, 20, t.size),
            "b": 200 + 40 * np.cos(2 * np.pi * t / 48) + rng.uniform(0, 40, t.size),
            "c": level * 100 + rng.uniform(0, 20, t.size),
        },
        index=idx,
    )


@pytest.fixture(params=[7, 1], ids=["recent-7", "recent-1"])
def short_look_backs(request, monkeypatch):
    """Variogram look-back 2, prior 4 (in the planner and in the store's replay); the prior
    holds its last 7 (default) or 1 released periods: 8 days go past every look-back."""
    for mod in (sp, _autoplan):
        monkeypatch.setattr(mod, "LOOKBACK", 2)
        monkeypatch.setattr(mod, "PRIOR_DAYS", 4)
    from postproc._prior import PriorState

    init = PriorState.__init__

    def recent(self, *a, **kw):
        init(self, *a, **{**kw, "recent": request.param})

    monkeypatch.setattr(PriorState, "__init__", recent)


def in_memory(frame: pd.DataFrame, seed: int, history: pd.DataFrame | None = None) -> np.ndarray:
    """``release_optstream(k="auto")``'s own functions over every day (one planner), with the
    store's per-period bits: (T, N) released."""
    from dpstream.pipelines._period_steps import post_process_periods

    _, sf, measured, plans, priors = plan_in_memory(frame, H, seed, history)
    out = [post_process_periods([m], [p], [q], sf.hierarchy)[0]
           for m, p, q in zip(measured, plans, priors, strict=True)]  # fmt: skip
    return np.maximum(np.concatenate([r.T for r in out]), 0.0)


def _daily(path, frame, days, **kw) -> list[pd.DataFrame]:
    out = []
    for d in range(days):
        with ReleaseStore(path) as store:  # one run (one opening) per day
            out.append(store.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], **KW, **kw))
    return out


def test_day_by_day_through_the_store_equals_in_memory_past_the_look_back(
    tmp_path, short_look_backs
):
    frame = loads(DAYS)
    want = in_memory(frame, seed=7)
    got = pd.concat(_daily(tmp_path / "daily.db", frame, DAYS))
    np.testing.assert_allclose(got.to_numpy(), want, rtol=0, atol=1e-9)
    with ReleaseStore(tmp_path / "daily.db") as store:
        plans = store.periods()
        assert store._planner_state()[0] == DAYS - 1
    assert plans["planned_on"].tolist()[-1] == f"{DAYS - 1} stored period(s)"


def test_without_the_saved_state_the_store_drifts(tmp_path, short_look_backs, monkeypatch):
    # the guard above can fail: replaying the last 4 stored periods into a new planner (an
    # older store, no saved state) is not the in-memory planner after 8 days
    frame = loads(DAYS)
    monkeypatch.setattr(_planner_state, "saved_planner", lambda *a, **k: None)
    got = pd.concat(_daily(tmp_path / "daily.db", frame, DAYS))
    assert np.abs(got.to_numpy() - in_memory(frame, seed=7)).max() > 1e-6


def test_a_backup_continues_identically(tmp_path, short_look_backs):
    frame = loads(DAYS)
    first = _daily(tmp_path / "daily.db", frame.iloc[: 48 * 6], 6)
    with ReleaseStore(tmp_path / "daily.db") as store:
        store.backup(tmp_path / "copy.db")
    outs = {}
    for name in ("daily.db", "copy.db"):
        with ReleaseStore(tmp_path / name) as store:
            assert store._planner_state()[0] == 5
            outs[name] = [
                store.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], **KW) for d in (6, 7)
            ]
    for a, b in zip(outs["daily.db"], outs["copy.db"], strict=True):
        pd.testing.assert_frame_equal(a, b)
    got = pd.concat([*first, *outs["copy.db"]])
    np.testing.assert_allclose(got.to_numpy(), in_memory(frame, seed=7), rtol=0, atol=1e-9)


def test_the_state_in_parts_equals_one_row(tmp_path, short_look_backs, monkeypatch):
    from dpstream.store import _store

    frame = loads(6)
    ref = pd.concat(_daily(tmp_path / "a.db", frame, 6))
    monkeypatch.setattr(_store, "MEASURED_PART_BYTES", 4096)  # state and records in parts
    got = pd.concat(_daily(tmp_path / "b.db", frame, 6))
    with ReleaseStore(tmp_path / "b.db") as store:
        n_parts = store._con.execute("SELECT COUNT(*) FROM planner_state").fetchone()[0]
    assert n_parts > 1
    pd.testing.assert_frame_equal(got, ref)


def test_public_history_given_every_day_is_read_once_as_in_memory(tmp_path, short_look_backs):
    # history= with every daily run: the saved planner read it on day 1 and forgets it as the
    # in-memory planner does (the replay added it afresh every day)
    frame = loads(DAYS + 2)
    history, days = frame.iloc[:96], frame.iloc[96:]
    got = pd.concat(_daily(tmp_path / "daily.db", days, DAYS, history=history))
    want = in_memory(days, seed=7, history=history)
    np.testing.assert_allclose(got.to_numpy(), want, rtol=0, atol=1e-9)
