"""Long format (unique_id, ds, y) and the hierarchy as data (dpstream.io)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from dpstream.io import (
    hierarchy_from_edges,
    hierarchy_from_s_df,
    is_long,
    long_to_wide,
    read_hierarchy,
    read_long,
    wide_to_long,
)
from mechanisms import DomainError, ParameterError


@pytest.fixture
def wide():
    idx = pd.date_range("2016-01-01", periods=6, freq="30min", name="ds")
    return pd.DataFrame({"b": np.arange(6.0), "a": np.arange(6.0) * 2}, index=idx)


def test_wide_long_round_trip_keeps_order_and_values(wide):
    long = wide_to_long(wide)
    assert list(long.columns) == ["unique_id", "ds", "y"] and is_long(long)
    assert long["unique_id"].tolist()[:6] == ["b"] * 6  # by series, then time (Nixtla)
    back = long_to_wide(long.sample(frac=1.0, random_state=0))  # any row order
    assert list(long_to_wide(long).columns) == ["b", "a"]  # first-seen order
    pd.testing.assert_frame_equal(back[wide.columns], wide, check_freq=False)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".db"])
def test_read_long_from_csv_parquet_and_a_database_table(tmp_path, wide, suffix):
    long = wide_to_long(wide)
    path = tmp_path / f"loads{suffix}"
    if suffix == ".csv":
        long.to_csv(path, index=False)
    elif suffix == ".parquet":
        long.to_parquet(path, index=False)
    else:
        con = sqlite3.connect(path)
        long.assign(ds=long["ds"].astype(str)).to_sql("meter", con, index=False)
        con.close()
    got = read_long(path, table="meter" if suffix == ".db" else None)
    pd.testing.assert_frame_equal(long_to_wide(got), wide, check_freq=False)


def test_read_long_refuses_a_bad_table_name(tmp_path):
    path = tmp_path / "x.db"
    sqlite3.connect(path).close()
    with pytest.raises(ParameterError, match="'table'"):
        read_long(path, table="x; DROP TABLE y")


def test_long_errors_are_typed_and_name_the_first_pair(wide):
    long = wide_to_long(wide)
    with pytest.raises(DomainError, match="duplicated.*first series 'b' at 2016-01-01 00:00"):
        long_to_wide(pd.concat([long, long.iloc[:2]]))
    with pytest.raises(DomainError, match="ragged: series 'b' has no row at 2016-01-01 00:00"):
        long_to_wide(long.iloc[1:])
    with pytest.raises(DomainError) as two:
        long_to_wide(long.iloc[[i for i in range(len(long)) if i not in (0, 3)]])
    assert "ragged: series 'b' has no row at 2016-01-01 00:00:00 " in str(two.value)  # no count
    with pytest.raises(DomainError, match="'y'"):
        long_to_wide(long.drop(columns="y"))
    with pytest.raises(DomainError, match="series 'b' at 2016-01-01 00:00:00 is not numeric"):
        long_to_wide(long.assign(y=["x"] + [1.0] * (len(long) - 1)))


EDGES = [("n1", "north"), ("n2", "north"), ("s1", "south"), ("north", "all"), ("south", "all")]


def test_edges_make_the_tree():
    tree = hierarchy_from_edges(EDGES, ids=["n1", "n2", "s1"])
    assert tree == {"north": ["n1", "n2"], "south": ["s1"], "all": ["north", "south"]}


@pytest.mark.parametrize(
    ("edges", "match"),
    [
        (EDGES + [("n1", "south")], "two parents"),
        (EDGES + [("all", "n1")], "cycle"),
        ([("a", "a"), ("b", "root")], "cycle"),
        (EDGES + [("x1", "island")], "2 roots"),
        ([], "no edge"),
    ],
)
def test_bad_hierarchies_are_refused(edges, match):
    with pytest.raises(ParameterError, match=match):
        hierarchy_from_edges(edges)


def test_ids_must_match_the_leaves():
    with pytest.raises(ParameterError, match=r"unknown ids\): \['s1'\]"):
        hierarchy_from_edges(EDGES, ids=["n1", "n2"])
    with pytest.raises(ParameterError, match=r"orphans.*|\['w9'\]"):
        hierarchy_from_edges(EDGES, ids=["n1", "n2", "s1", "w9"])
    # a parent's own series is allowed (the pipeline checks it against its leaves)
    assert hierarchy_from_edges(EDGES, ids=["n1", "n2", "s1", "north"])


def test_s_df_gives_the_same_tree():
    bottom = ["n1", "n2", "s1"]
    rows = {
        "all": [1, 1, 1],
        "north": [1, 1, 0],
        "south": [0, 0, 1],
        "n1": [1, 0, 0],
        "n2": [0, 1, 0],
        "s1": [0, 0, 1],
    }
    s_df = pd.DataFrame.from_dict(rows, orient="index", columns=bottom)
    s_df.index.name = "unique_id"
    tree = hierarchy_from_s_df(s_df, ids=bottom)
    # south and s1 have the same leaf set: s1's parent is south (the smallest strict superset)
    assert {k: sorted(v) for k, v in tree.items()} == {
        "all": ["north", "south"],
        "north": ["n1", "n2"],
        "south": ["s1"],
    }
    s_df.loc["other"] = [1, 1, 0]  # a second node over n1, n2: they get two parents
    with pytest.raises(ParameterError, match="two parents"):
        hierarchy_from_s_df(s_df)


def test_read_hierarchy_json_and_edge_table(tmp_path):
    js = tmp_path / "h.json"
    js.write_text(json.dumps({"all": ["north", "south"], "north": ["n1", "n2"], "south": ["s1"]}))
    csv = tmp_path / "h.csv"
    pd.DataFrame(EDGES, columns=["child", "parent"]).to_csv(csv, index=False)
    a = read_hierarchy(js, ids=["n1", "n2", "s1"])
    b = read_hierarchy(csv, ids=["n1", "n2", "s1"])
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"x": [1]}).to_csv(bad, index=False)
    with pytest.raises(ParameterError, match="child, parent"):
        read_hierarchy(bad)
