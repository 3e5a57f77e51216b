"""k="auto" in the store: issue 13's in-stream planner and prior, reading the store's history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import plan_in_memory

import planner._stream_planner as sp
from dpstream import ReleaseStore
from dpstream.pipelines import _autoplan
from dpstream.pipelines._autoplan import _config, replan
from dpstream.pipelines._frames import prepare_frame
from dpstream.pipelines._period_steps import post_process_periods
from dpstream.store._auto import unpack
from mechanisms import ParameterError

H = {"total": ["a", "b", "c"]}
KW = {"epsilon": 1.0, "alpha": 5.0, "hierarchy": H, "k": "auto", "seed": 7}
DAYS = 5


def loads(days: int) -> pd.DataFrame:
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "a": 300 + 80 * np.sin(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "b": 200 + 40 * np.cos(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "c": 100 + rng.uniform(0, 20, t.size),
        },
        index=idx,
    )


def in_memory(frame: pd.DataFrame, seed: int):
    """The in-memory pipeline's own functions over the whole frame, with per-period bits."""
    cfg, sf, measured, plans, priors = plan_in_memory(frame, H, seed)
    released = post_process_periods(measured, plans, priors, sf.hierarchy)  # one call, all days
    return cfg, sf, measured, plans, priors, released


def stored(store: ReleaseStore):
    rows = store._con.execute("SELECT measured FROM periods ORDER BY ordinal").fetchall()
    return [unpack(r[0]) for r in rows]


def assert_same_plan(a, b) -> None:
    assert (a.k, a.noise, a.shares, a.basis) == (b.k, b.noise, b.shares, b.basis)
    assert a.budget == b.budget and a.predicted == b.predicted
    np.testing.assert_array_equal(a.variances, b.variances)
    np.testing.assert_array_equal(a.sample_variance, b.sample_variance)


@pytest.mark.parametrize("memory", [None, (2, 4)], ids=["defaults", "short-look-backs"])
def test_day_by_day_through_the_store_equals_the_in_memory_planner(tmp_path, monkeypatch, memory):
    if memory is not None:  # the store must read back every period the planner uses (both)
        for mod in (sp, _autoplan):  # the planner's look-backs and the store's replay's
            monkeypatch.setattr(mod, "LOOKBACK", memory[0])
            monkeypatch.setattr(mod, "PRIOR_DAYS", memory[1])
    frame = loads(DAYS)
    cfg, sf, measured, plans, priors, released = in_memory(frame, seed=7)
    with ReleaseStore(tmp_path / "daily.db") as daily, ReleaseStore(tmp_path / "one.db") as one:
        parts = [  # one run per day
            daily.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], **KW) for d in range(DAYS)
        ]
        whole = one.release_optstream(frame, **KW)
        got = pd.concat(parts)
        rows = stored(daily)
        table = daily.periods()
    pd.testing.assert_frame_equal(got, whole)
    assert [p.k for _, p in rows] == [p.k for p in plans]
    for (m, plan), m_ref, plan_ref in zip(rows, measured, plans, strict=True):
        assert_same_plan(plan, plan_ref)
        np.testing.assert_array_equal(m.values, m_ref.values)
        np.testing.assert_array_equal(m.noise, m_ref.noise)
        np.testing.assert_array_equal(m.sampled, m_ref.sampled)
    # Algorithm 4 period by period (the store) is the pipeline's, exactly ...
    one_by_one = [
        post_process_periods([m], [p], [q], sf.hierarchy)[0]
        for m, p, q in zip(measured, plans, priors, strict=True)
    ]
    np.testing.assert_array_equal(got.to_numpy(), np.concatenate([r.T for r in one_by_one]))
    # ... and release_optstream's one call over all days agrees to the solver's tolerance
    want = np.concatenate([r.T for r in released])  # (T, N)
    np.testing.assert_allclose(got.to_numpy(), np.maximum(want, 0.0), rtol=1e-7, atol=1e-7)
    # the in-stream planner really ran: a prior from the third day on, plans from released days
    assert table["prior_periods"].tolist()[:3] == [0, 0, 2]
    assert table["basis"].tolist()[1:] == ["released"] * (DAYS - 1)
    assert table["planned_on"].tolist()[-1] == f"{DAYS - 1} stored period(s)"


def test_the_stored_measurements_replay_the_stored_plans(tmp_path):
    """Planning is post-processing: the store's measurements alone give back its plans."""
    frame = loads(4)
    with ReleaseStore(tmp_path / "s.db") as store:
        store.release_optstream(frame.iloc[:96], **{**KW, "seed": None})
        store.release_optstream(frame, **{**KW, "seed": None})
        rows = stored(store)
    sf = prepare_frame(frame, owner="t", hierarchy=H)
    cfg = _config(
        epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=True,
    )  # fmt: skip
    measurements = np.concatenate([m.values.T for m, _ in rows])
    plans, _ = replan(measurements, cfg)
    for (_, plan), again in zip(rows, plans, strict=True):
        assert_same_plan(plan, again)


def test_auto_periods_are_released_in_time_order(tmp_path):
    frame = loads(3)
    with ReleaseStore(tmp_path / "s.db") as store:
        store.release_optstream(frame.iloc[48:], **KW)
        with pytest.raises(ParameterError, match="time order"):
            store.release_optstream(frame, **KW)
        assert len(store.ledger.charges) == 2 and sorted(store.ordinals()) == [0, 1]
        again = store.release_optstream(frame.iloc[48:], **KW)  # stored days: returned
        assert len(again) == 96


def test_auto_refuses_what_it_does_not_plan(tmp_path):
    with ReleaseStore(tmp_path / "s.db") as store:
        for bad in ({"sampling": "l1"}, {"weights": "paper"}, {"alpha": None, "bound": 500.0}):
            with pytest.raises(ParameterError, match="'k' parameter"):
                store.release_optstream(loads(1), **{**KW, **bad})
        assert store.config is None


def test_auto_on_dask_equals_auto_here(tmp_path):
    frame = loads(3)
    with ReleaseStore(tmp_path / "here.db") as here, ReleaseStore(tmp_path / "dask.db") as dask:
        want = here.release_optstream(frame, **KW)
        got = dask.release_optstream(frame, engine="dask", n_workers=1, **KW)
        assert len(dask.ledger.charges) == 3
    pd.testing.assert_frame_equal(got, want)


def test_the_store_continues_an_earlier_release_within_the_window(tmp_path):
    """history= of an earlier k="auto" release (issue 24.1): its last plan bounds the store's
    first period, so no window of w steps straddling the two costs more than ε; without the
    carried plan one does."""
    import dpstream
    from mechanisms.optstream._sampling import sample_equal

    frame = loads(5)
    earlier = dpstream.release_optstream(
        frame.iloc[: 48 * 3], epsilon=5.0, alpha=1.0, hierarchy=H, seed=3
    )
    worst = {}
    for carry in (True, False):
        history = earlier.copy()
        if not carry:
            history.attrs.clear()  # today's behaviour: the earlier plans unread
        with ReleaseStore(tmp_path / f"{carry}.db") as store:
            store.release_optstream(
                frame.iloc[48 * 3 :], history=history, **{**KW, "epsilon": 5.0, "alpha": 1.0}
            )
            plans = store.periods().sort_values("ordinal")[["k", "budget"]].to_dict("records")
        costs = np.concatenate(
            [np.where(np.isin(np.arange(48), sample_equal(48, p["k"])), p["budget"] / p["k"], 0.0)
             for p in earlier.attrs["plan"] + plans]
        )  # fmt: skip
        worst[carry] = max(costs[s : s + 48].sum() for s in range(costs.size - 47))
    # carried: k stays 16; without it k 16 -> 12 at the full ε, a straddling window 5.31
    assert worst[True] <= 5.0 * (1 + 1e-9) < worst[False]


def test_store_history_needs_auto_and_is_checked_before_any_charge(tmp_path):
    frame = loads(2)
    with ReleaseStore(tmp_path / "s.db") as store:
        with pytest.raises(ParameterError, match="'history'.*k='auto'"):
            store.release_optstream(frame.iloc[48:], history=frame.iloc[:48], **{**KW, "k": 10})
        assert store.config is None


def test_measurements_above_sqlites_row_limit_are_stored_in_parts(tmp_path, monkeypatch):
    """A day's record larger than MEASURED_PART_BYTES is written in parts (a million nodes'
    record exceeds SQLite's 10⁹-byte row); read back whole, the next days plan as with one row,
    and the parts survive a backup."""
    from dpstream.store import _store

    frame = loads(3)
    with ReleaseStore(tmp_path / "rows.db") as rows:
        want = pd.concat([rows.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], **KW)
                          for d in range(3)])  # fmt: skip
        want_blobs = [b for _, _, b in rows._measured(3, 3)]
    monkeypatch.setattr(_store, "MEASURED_PART_BYTES", 1000)
    with ReleaseStore(tmp_path / "parts.db") as parts:
        got = pd.concat([parts.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], **KW)
                         for d in range(3)])  # fmt: skip
        n_parts = parts._con.execute("SELECT count(*) FROM measured_parts").fetchone()[0]
        in_rows = parts._con.execute(
            "SELECT max(length(measured)) FROM periods"
        ).fetchone()[0]
        got_blobs = [b for _, _, b in parts._measured(3, 3)]
        parts.backup(tmp_path / "copy.db")
    assert in_rows == 0 and n_parts >= 3 * 2  # every record really went in parts
    assert got_blobs == want_blobs
    pd.testing.assert_frame_equal(got, want)
    with ReleaseStore(tmp_path / "copy.db", readonly=True) as copy:
        assert [b for _, _, b in copy._measured(3, 3)] == want_blobs
