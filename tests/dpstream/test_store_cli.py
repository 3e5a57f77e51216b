"""``dpstream release optstream ... --store``: the daily job, one run per day."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from dpstream.cli import main
from dpstream.io import long_to_wide, wide_to_long


@pytest.fixture
def days(tmp_path):
    idx = pd.date_range("2016-06-01", periods=48 * 3, freq="30min", name="time")
    t = np.arange(idx.size)
    wide = pd.DataFrame(
        {"north": 500 + 50 * np.sin(t / 6), "south": 800 + 0 * t, "west": 100 + t % 9},
        index=idx,
    )
    paths = []
    for d in range(3):
        long = wide_to_long(wide.iloc[48 * d : 48 * (d + 1)])
        path = tmp_path / f"day{d + 1}.csv"
        long.to_csv(path, index=False)
        paths.append(path)
    edges = tmp_path / "edges.csv"
    pd.DataFrame({"child": ["north", "south", "west"], "parent": ["national"] * 3}).to_csv(
        edges, index=False
    )
    return wide, paths, edges


def _release(path, edges, store, out, *extra):
    args = ["release", "optstream", str(path), "--epsilon", "1", "--alpha", "20"]
    return main(
        [*args, "--hierarchy", str(edges), "--store", str(store), "--out", str(out), *extra]
    )


def test_three_days_one_run_each_then_a_day_again(days, tmp_path, capsys):
    wide, paths, edges = days
    store = tmp_path / "ops.db"
    outs = []
    for d, path in enumerate(paths):
        out = tmp_path / f"released{d + 1}.csv"
        assert _release(path, edges, store, out) == 0
        assert "Released 1 new period(s), returned 0" in capsys.readouterr().out
        outs.append(out)
    again = tmp_path / "again.csv"
    assert _release(paths[1], edges, store, again) == 0
    assert "Released 0 new period(s), returned 1" in capsys.readouterr().out
    assert again.read_bytes() == outs[1].read_bytes()  # exactly as stored
    record = json.loads((tmp_path / "again.csv.privacy.json").read_text())
    assert record["unit"] == "(w, alpha)" and record["epsilon"] == 1.0 and record["release"]
    # OUT in the input's (long) format, plus the wide twin
    long = pd.read_csv(outs[0])
    assert list(long.columns) == ["unique_id", "ds", "y"]
    assert set(long["unique_id"]) == {"national", "north", "south", "west"}
    twin = pd.read_csv(tmp_path / "released1.wide.csv", index_col=0, parse_dates=True)
    rebuilt = long_to_wide(long)
    np.testing.assert_allclose(twin[rebuilt.columns].to_numpy(), rebuilt.to_numpy())
    con = sqlite3.connect(store)
    assert con.execute("SELECT COUNT(*) FROM periods").fetchone()[0] == 3
    assert con.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == 3
    con.close()


def test_a_changed_configuration_exits_2(days, tmp_path, capsys):
    _, paths, edges = days
    store = tmp_path / "ops.db"
    assert _release(paths[0], edges, store, tmp_path / "a.csv") == 0
    args = ["release", "optstream", str(paths[1]), "--epsilon", "2", "--alpha", "20"]
    code = main([*args, "--hierarchy", str(edges), "--store", str(store), "--out", "b.csv"])
    assert code == 2
    assert "store's settings" in capsys.readouterr().err
    # a seeded run (an experiment) into a release store is a changed configuration too
    assert _release(paths[0], edges, store, tmp_path / "c.csv", "--seed", "1") == 2
    assert "seeded" in capsys.readouterr().err


def test_wide_input_parquet_out_and_engine_options(days, tmp_path, capsys):
    wide, _, _ = days
    src = tmp_path / "wide.csv"
    wide.to_csv(src)
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps({"national": ["north", "south", "west"]}))
    out = tmp_path / "out.parquet"
    assert _release(src, tree, tmp_path / "s.db", out, "--seed", "3") == 0
    got = pd.read_parquet(out)
    assert list(got.columns) == ["national", "north", "south", "west"] and len(got) == 144
    capsys.readouterr()
    base = ["release", "optstream", str(src), "--epsilon", "1", "--alpha", "50", "--out", str(out)]
    assert main([*base, "--engine", "dask"]) == 2  # needs --store
    assert "--store" in capsys.readouterr().err
    assert main([*base, "--store", str(tmp_path / "t.db"), "--scheduler", "tcp://x:1"]) == 2
    assert "--engine dask" in capsys.readouterr().err


def test_long_parquet_on_dask_streams_out_in_the_same_format(days, tmp_path, capsys):
    wide, _, edges = days
    src = tmp_path / "long.parquet"
    wide_to_long(wide).to_parquet(src, index=False)
    store, out = tmp_path / "ops.db", tmp_path / "out.parquet"
    assert _release(src, edges, store, out, "--engine", "dask", "--seed", "1") == 0
    assert "Released 3 new period(s)" in capsys.readouterr().out
    got = pd.read_parquet(out)
    assert list(got.columns) == ["unique_id", "ds", "y"] and len(got) == 4 * 144
    twin = pd.read_parquet(tmp_path / "out.wide.parquet").set_index("ds")
    rebuilt = long_to_wide(got)
    np.testing.assert_array_equal(twin[rebuilt.columns].to_numpy(), rebuilt.to_numpy())
    # the same input again, locally: nothing new, the stored values
    again = tmp_path / "again.parquet"
    assert _release(src, edges, store, again, "--seed", "1") == 0
    assert "Released 0 new period(s), returned 3" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_parquet(again), got)
