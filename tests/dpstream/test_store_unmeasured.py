"""``missing="unmeasured"`` with the default k="auto" through the store (issue 25).

The public mask of each period goes into its stored record, so the store's planner, rebuilt
from the stored periods, reads the same ``Measurement.observed`` as the in-memory planner of
``release_optstream(k="auto", missing="unmeasured")``: day by day through the store equals the
in-memory functions driven with per-period bits (as
``test_store_auto.py::test_day_by_day_through_the_store_equals_the_in_memory_planner`` does
without gaps).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _tree_helpers import feeder_tree

from dpstream import ReleaseStore
from dpstream.cli import main
from dpstream.pipelines import _autoplan
from dpstream.pipelines._autoplan import _config, _periods_of, run_periods
from dpstream.pipelines._frames import prepare_frame, to_periods
from dpstream.pipelines._period import period_bits
from dpstream.pipelines._period_steps import measure_period, post_process_periods
from dpstream.store._auto import pack, unpack

H = {"total": ["a", "b", "c"]}
KW = {"epsilon": 1.0, "alpha": 5.0, "hierarchy": H, "k": "auto", "seed": 7}
DAYS = 5


def holed(days: int) -> pd.DataFrame:
    """Three leaves, with gaps: scattered single readings, a leaf out for six hours on day 2,
    and day 3 complete (a period without a mask between periods with one)."""
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "a": 300 + 80 * np.sin(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "b": 200 + 40 * np.cos(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "c": 100 + rng.uniform(0, 20, t.size),
        },
        index=idx,
    )
    gaps = rng.random(frame.shape) < 0.08
    gaps[2 * 48 : 3 * 48] = False  # day 3 (ordinal 2): complete
    gaps[48 + 10 : 48 + 22, 1] = True  # leaf b out for six hours on day 2
    return frame.mask(gaps)


def in_memory(frame: pd.DataFrame, seed: int):
    """``release_auto``'s own functions over the whole frame, with per-period bits."""
    sf = prepare_frame(frame, owner="t", hierarchy=H, missing="unmeasured")
    cfg = _config(
        epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=True,
    )  # fmt: skip
    periods = to_periods(sf.values, 48)
    obs = _periods_of(sf.observed, 48)

    def measure(i, vals, plan):
        return measure_period(vals, plan, cfg, bits=period_bits(seed, i), observed=obs(i))

    measured, plans, priors = run_periods(
        periods.full, periods.tail, cfg, history=None, measure=measure
    )
    return sf, measured, plans, priors


def stored(store: ReleaseStore):
    rows = store._con.execute("SELECT measured FROM periods ORDER BY ordinal").fetchall()
    return [unpack(r[0]) for r in rows]


@pytest.mark.parametrize("memory", [None, (2, 4)], ids=["defaults", "short-look-backs"])
def test_day_by_day_through_the_store_equals_the_in_memory_planner(tmp_path, monkeypatch, memory):
    if memory is not None:  # past the look-backs: the saved planner state and held periods
        monkeypatch.setattr(_autoplan, "LOOKBACK", memory[0])
        monkeypatch.setattr(_autoplan, "PRIOR_DAYS", memory[1])
    frame = holed(DAYS)
    sf, measured, plans, priors = in_memory(frame, seed=7)
    assert sum(m.observed is not None for m in measured) == DAYS - 1  # the masks are in play
    with ReleaseStore(tmp_path / "daily.db") as daily:
        parts = [
            daily.release_optstream(frame.iloc[48 * d : 48 * (d + 1)], missing="unmeasured", **KW)
            for d in range(DAYS)
        ]
        rows = stored(daily)
        table = daily.periods()
    got = pd.concat(parts)
    for (m, plan), m_ref, plan_ref in zip(rows, measured, plans, strict=True):
        assert plan.k == plan_ref.k and plan.shares == plan_ref.shares
        np.testing.assert_array_equal(plan.variances, plan_ref.variances)
        np.testing.assert_array_equal(plan.predicted_nodes, plan_ref.predicted_nodes)
        np.testing.assert_array_equal(m.values, m_ref.values)
        np.testing.assert_array_equal(m.noise, m_ref.noise)
        np.testing.assert_array_equal(m.sampled, m_ref.sampled)
    # Algorithm 4 period by period, NaN where nothing was measured: the pipeline's
    one_by_one = np.concatenate(
        [
            np.maximum(post_process_periods([m], [p], [q], sf.hierarchy)[0], 0.0).T
            for m, p, q in zip(measured, plans, priors, strict=True)
        ]
    )
    want = np.where(sf.observed, one_by_one, np.nan)
    np.testing.assert_array_equal(got.to_numpy(), want)
    assert np.isnan(got.loc[frame["b"].isna(), "b"]).all()
    assert got["total"].notna().all() and got.notna().to_numpy().sum() == sf.observed.sum()
    np.testing.assert_allclose(
        got["total"], got[["a", "b", "c"]].fillna(0.0).sum(axis=1), rtol=1e-6, atol=1e-6
    )
    # the public mask, kept in the record (without it the rebuilt priors differ: up to
    # 100 kW apart in the values above, measured by dropping it from pack)
    for (m, _), m_ref in zip(rows, measured, strict=True):
        if m_ref.observed is None:
            assert m.observed is None
        else:  # the public mask, kept in the record
            np.testing.assert_array_equal(m.observed, m_ref.observed)
    assert table["prior_periods"].tolist()[2] == 2  # the in-stream planner really ran
    assert got.attrs["privacy"]["parameters"]["missing"] == "unmeasured"


def test_the_stored_mask_reaches_the_planners_statistics():
    """The mask survives pack/unpack, and the planner's prior statistics read it (without it
    they would weigh an unmeasured reading as measured)."""
    frame = holed(3)
    _, measured, plans, _ = in_memory(frame, seed=7)
    m = measured[1]
    back, _ = unpack(pack(m, plans[1]))
    np.testing.assert_array_equal(back.observed, m.observed)
    from dataclasses import replace

    from planner._stream_planner import _unmeasured

    error = np.ones_like(m.noise)
    own = np.ones(m.values.shape[0], dtype=bool)
    with_mask, _ = _unmeasured(back, error, own)
    without, _ = _unmeasured(replace(back, observed=None), error, own)
    assert not np.array_equal(with_mask, without)


def test_a_store_release_with_gaps_charges_each_period_once(tmp_path):
    frame = holed(2)
    with ReleaseStore(tmp_path / "s.db") as store:
        first = store.release_optstream(frame, missing="unmeasured", **KW)
        again = store.release_optstream(frame, missing="unmeasured", **KW)  # returned, stored
        assert len(store.ledger.charges) == 2
    pd.testing.assert_frame_equal(first, again)


@pytest.fixture
def gap_csv(tmp_path):
    frame = holed(2)
    frame.index.name = "time"
    frame.to_csv(tmp_path / "gap.csv")
    (tmp_path / "h.json").write_text(json.dumps(H))
    return tmp_path


def test_cli_store_with_the_default_k_releases_the_gaps_empty(gap_csv, capsys):
    root = gap_csv
    args = ["release", "optstream", str(root / "gap.csv"), "--epsilon", "1", "--alpha", "5"]
    args += ["--hierarchy", str(root / "h.json"), "--out", str(root / "out.csv")]
    args += ["--store", str(root / "s.db"), "--missing", "unmeasured", "--seed", "3"]
    assert main(args) == 0, capsys.readouterr().err  # k: the default "auto"
    out = pd.read_csv(root / "out.csv", index_col=0, parse_dates=True)
    given = pd.read_csv(root / "gap.csv", index_col=0, parse_dates=True)
    pd.testing.assert_frame_equal(out[["a", "b", "c"]].isna(), given.isna())
    assert out["total"].notna().all()
    record = json.loads((root / "out.csv.privacy.json").read_text())
    assert record["parameters"]["missing"] == "unmeasured" and record["parameters"]["k"] == "auto"
    with ReleaseStore(root / "s.db") as store:
        assert store.config["k"] == "auto"
        assert all(m.observed is not None for m, _ in stored(store))
    # --std-errors with --store and unmeasured readings (issue 30): empty where OUT is empty
    again = [*args, "--std-errors"]
    again[again.index("--out") + 1] = str(root / "o2.csv")
    assert main(again) == 0, capsys.readouterr().err
    errors = pd.read_csv(root / "o2.std_error.csv", index_col=0, parse_dates=True)
    pd.testing.assert_frame_equal(errors.isna(), out.isna())


def test_a_split_release_after_unmeasured_periods_is_refused(tmp_path):
    """The split path (Parquet INPUT, a cut; > 64 leaves) rebuilds subtree planners without
    the masks: refused before anything is charged, after a stored period with gaps; a store
    whose look-back has none is split as before."""
    from dpstream.store._source import release_parquet_to_store
    from mechanisms import ParameterError

    tree = feeder_tree()  # 72 leaves
    leaves = [x for kids in tree.values() for x in kids if x not in tree]
    rng = np.random.default_rng(3)
    idx = pd.date_range("2024-01-01", periods=2 * 48, freq="30min")
    loads = rng.gamma(2.0, 1.0, (idx.size, len(leaves)))
    first = pd.DataFrame(loads[:48], index=idx[:48], columns=leaves)
    second = pd.DataFrame(
        {
            "unique_id": np.repeat(leaves, 48),
            "ds": np.tile(idx[48:], len(leaves)),
            "y": loads[48:].T.reshape(-1),
        }
    )
    second.to_parquet(tmp_path / "day2.parquet")
    kw = {"epsilon": 1.0, "alpha": 0.5, "hierarchy": tree, "seed": 11}
    with ReleaseStore(tmp_path / "holed.db") as store:
        store.release_optstream(
            first.mask(rng.random(first.shape) < 0.05), missing="unmeasured", **kw
        )
        assert store.periods()["unmeasured"].tolist() == [True]
        with pytest.raises(ParameterError, match="unmeasured readings"):
            release_parquet_to_store(store, tmp_path / "day2.parquet", cut=1, **kw)
        assert len(store.ledger.charges) == 1 and store.ordinals() == {0}
    with ReleaseStore(tmp_path / "complete.db") as store:
        store.release_optstream(first, missing="unmeasured", **kw)  # no gap: no mask
        assert "unmeasured" not in store.periods()
        assert release_parquet_to_store(store, tmp_path / "day2.parquet", cut=1, **kw) == [1]
