"""``dpstream release``: the command, run with click's CliRunner and through ``main``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dpstream
from dpstream.cli import cli, main


@pytest.fixture
def loads(tmp_path):
    index = pd.date_range("2016-06-01", periods=100, freq="30min", name="time")
    t = np.arange(100)
    f = pd.DataFrame({"north": 500 + 50 * np.sin(t / 6), "south": 800 + 0 * t}, index=index)
    path = tmp_path / "loads.csv"
    f.to_csv(path)
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps({"national": ["north", "south"]}))
    return path, tree, f


def test_help_has_examples():
    result = CliRunner().invoke(cli, ["release", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and "dpstream release laplace" in result.output


@pytest.mark.parametrize("method", ["laplace", "dft", "pegasus"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_release_writes_one_column_per_node(loads, tmp_path, method, suffix):
    path, tree, f = loads
    out = tmp_path / f"out{suffix}"
    args = [
        "release",
        method,
        str(path),
        "--epsilon",
        "1",
        "--alpha",
        "1",
        "--hierarchy",
        str(tree),
    ]
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "NOT" in result.output  # seeded runs are labelled
    back = pd.read_csv(out, index_col=0) if suffix == ".csv" else pd.read_parquet(out)
    assert list(back.columns) == ["national", "north", "south"]
    assert len(back) == 100 and (back.to_numpy() >= 0).all()
    ref = dpstream.release_laplace(
        f, alpha=1.0, epsilon=1.0, hierarchy={"national": ["north", "south"]}
    )
    assert ref.shape == back.shape


def test_parquet_input_and_time_column(tmp_path, loads):
    _, _, f = loads
    path = tmp_path / "in.parquet"
    f.reset_index().rename(columns={"time": "stamp"}).to_parquet(path)
    out = tmp_path / "o.csv"
    code = main(
        ["release", "dft", str(path), "--epsilon", "1", "--alpha", "1", "--time-column", "stamp"]
        + ["--out", str(out)]
    )
    assert code == 0 and pd.read_csv(out).shape == (100, 3)


def test_plain_w_event_with_bound(loads, tmp_path):
    path, _, _ = loads
    out = tmp_path / "o.csv"
    base = ["release", "laplace", str(path), "--epsilon", "1", "--alpha", "none"]
    assert main([*base, "--out", str(out)]) == 2  # needs --bound
    assert main([*base, "--bound", "2000", "--out", str(out)]) == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--k", "60"], "'--k' option"),
        (["--w", "0"], "'--w' option"),
        (["--epsilon", "0"], "'--epsilon' option"),
        (["--alpha", "abc"], "'--alpha'"),
    ],
)
def test_bad_options_exit_2_with_one_line(loads, tmp_path, capsys, extra, message):
    path, _, _ = loads
    args = ["release", "dft", str(path), "--epsilon", "1", "--out", str(tmp_path / "o.csv")]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()


def test_bad_data_and_hierarchies_exit_2(loads, tmp_path, capsys):
    path, _, f = loads
    out = tmp_path / "o.csv"
    bad = f.copy()
    bad.iloc[4, 0] = np.nan
    bad.to_csv(tmp_path / "nan.csv")
    assert (
        main(
            ["release", "laplace", str(tmp_path / "nan.csv"), "--epsilon", "1", "--alpha", "1"]
            + ["--out", str(out)]
        )
        == 2
    )
    assert "NaN" in capsys.readouterr().err
    (tmp_path / "unknown.json").write_text(json.dumps({"national": ["north", "east"]}))
    assert (
        main(
            [
                "release",
                "laplace",
                str(path),
                "--epsilon",
                "1",
                "--alpha",
                "1",
                "--hierarchy",
                str(tmp_path / "unknown.json"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "east" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{national: ")
    assert (
        main(
            [
                "release",
                "laplace",
                str(path),
                "--epsilon",
                "1",
                "--alpha",
                "1",
                "--hierarchy",
                str(tmp_path / "broken.json"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "not valid JSON" in capsys.readouterr().err
    assert (
        main(
            ["release", "laplace", str(tmp_path / "none.csv"), "--epsilon", "1", "--out", str(out)]
        )
        == 2
    )
    assert main(["release", "laplace", str(path), "--epsilon", "1", "--out", "x.txt"]) == 2
    assert not out.exists()


def test_optstream_is_wired_to_release_optstream(loads, tmp_path, monkeypatch):
    path, tree, _ = loads
    calls = {}

    def fake(
        frame,
        *,
        epsilon,
        w=48,
        k=10,
        sampling="l1",
        theta=None,
        hierarchy=None,
        alpha=1.0,
        seed=None,
        ledger=None,
        progress=None,
    ):
        calls.update(
            progress=callable(progress),
            epsilon=epsilon,
            w=w,
            k=k,
            theta=theta,
            hierarchy=hierarchy,
            alpha=alpha,
            seed=seed,
            columns=list(frame.columns),
        )
        out = frame.assign(national=frame.sum(axis=1))
        out.attrs["privacy"] = {"mechanism": "fake"}
        return out

    monkeypatch.setattr(dpstream, "release_optstream", fake, raising=False)
    out = tmp_path / "o.csv"
    code = main(
        [
            "release",
            "optstream",
            str(path),
            "--epsilon",
            "0.5",
            "--k",
            "8",
            "--theta",
            "100",
            "--alpha",
            "20",
            "--hierarchy",
            str(tree),
            "--seed",
            "4",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert calls == {
        "epsilon": 0.5,
        "w": 48,
        "k": 8,
        "theta": 100.0,
        "hierarchy": {"national": ["north", "south"]},
        "alpha": 20.0,
        "seed": 4,
        "columns": ["north", "south"],
        "progress": True,  # the CLI's progress bar listens per period (issue 17)
    }
