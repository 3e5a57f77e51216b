"""dpstream data list|export: the bundled datasets as files the other commands read."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from dpstream import load_regional, regional_hierarchy
from dpstream.cli import cli, main


def test_list_names_every_dataset():
    result = CliRunner().invoke(cli, ["data", "list"])
    assert result.exit_code == 0
    for name in ("regional", "feeders", "household", "household-minutes"):
        assert name in result.output


def test_export_regional_round_trips_with_its_hierarchy(tmp_path):
    out = tmp_path / "regional.csv"
    result = CliRunner().invoke(cli, ["data", "export", "regional", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out, index_col="time", parse_dates=["time"])
    expected = load_regional()[regional_hierarchy()["national"]]
    pd.testing.assert_frame_equal(frame, expected, check_freq=False, check_names=False)
    assert json.loads((tmp_path / "regional.hierarchy.json").read_text()) == regional_hierarchy()


def test_exported_file_feeds_release(tmp_path):
    out = tmp_path / "regional.parquet"
    assert CliRunner().invoke(cli, ["data", "export", "regional", str(out)]).exit_code == 0
    released = tmp_path / "released.csv"
    result = CliRunner().invoke(
        cli,
        [
            "release", "laplace", str(out), "--epsilon", "1", "--alpha", "50", "--hierarchy",
            str(tmp_path / "regional.hierarchy.json"), "--out", str(released),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert list(pd.read_csv(released).columns)[1:] == [
        "national",
        *regional_hierarchy()["national"],
    ]


def test_bad_name_and_suffix_are_one_line_errors(tmp_path, capsys):
    assert main(["data", "export", "nope", str(tmp_path / "x.csv")]) == 2
    assert main(["data", "export", "regional", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "NAME" in err[0] and ".parquet" in err[1]


def test_export_long_writes_unique_id_ds_y_and_the_edges_table(tmp_path):
    out = tmp_path / "long.csv"
    result = CliRunner().invoke(cli, ["data", "export", "regional", str(out), "--long"])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out, parse_dates=["ds"])
    assert list(table.columns) == ["unique_id", "ds", "y"]
    wide = load_regional()[regional_hierarchy()["national"]]
    assert len(table) == wide.size
    back = table.pivot(index="ds", columns="unique_id", values="y")[list(wide.columns)]
    assert (back.to_numpy() == wide.to_numpy()).all()
    edges = pd.read_csv(tmp_path / "long.edges.csv")
    assert list(edges.columns) == ["child", "parent"]
    assert set(map(tuple, edges.to_numpy())) == {
        (leaf, "national") for leaf in regional_hierarchy()["national"]
    }
    assert not (tmp_path / "long.hierarchy.json").exists()
    # the pair is what the daily job reads: the edges table is a --hierarchy
    from dpstream.io import read_hierarchy

    tree = read_hierarchy(tmp_path / "long.edges.csv", ids=list(wide.columns), owner="t")
    assert tree == regional_hierarchy()
