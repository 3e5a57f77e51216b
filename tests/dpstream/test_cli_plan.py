"""``dpstream plan pak``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpstream.cli import main


def run(capsys, *args):
    code = main(["plan", "pak", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def prefix_files(tmp_path_factory):
    rng = np.random.default_rng(3)
    values = np.minimum(rng.gamma(2.0, 15.0, size=50_000), 1440.0)
    folder = tmp_path_factory.mktemp("prefix")
    np.save(folder / "trips.npy", values)
    np.savetxt(folder / "trips.csv", values[:20_000], header="minutes", comments="")
    np.savetxt(folder / "small.csv", values[:4_000])
    np.savetxt(folder / "two.csv", np.c_[values[:10], values[:10]], delimiter=",")
    return folder


def test_without_prefix_prints_the_private_time_lag(capsys):
    code, out, _ = run(capsys, "--n", "25000000", "--bound", "1440", "--delta", str(2.0**-20))
    assert code == 0
    assert "82,423" in out and "3,231" in out and "§VI-B" in out


def test_without_prefix_json(capsys):
    code, out, _ = run(capsys, "--n", "25000000", "--bound", "1440", "--json")
    assert code == 0 and json.loads(out)["private"] is True


def test_prefix_table_and_json(capsys, prefix_files):
    npy = str(prefix_files / "trips.npy")
    code, out, _ = run(capsys, "--n", "25000000", "--bound", "1440", "--prefix", npy,
                       "--m", "10000,50000")  # fmt: skip
    assert code == 0 and "analysis only" in out and "ε₁/ε" in out
    code, out, _ = run(capsys, "--n", "25000000", "--bound", "1440", "--prefix",
                       str(prefix_files / "trips.csv"), "--json")  # fmt: skip
    record = json.loads(out)
    assert code == 0 and record["private"] is False
    assert record["plans"][0]["m"] == 20_000 and "beta_lap_share" in record["plans"][0]


def test_plot(capsys, prefix_files, tmp_path):
    out_png = tmp_path / "fig7.png"
    code, out, _ = run(capsys, "--n", "1000000", "--bound", "1440", "--prefix",
                       str(prefix_files / "small.csv"), "--plot", str(out_png))  # fmt: skip
    assert code == 0 and out_png.stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--p-max", "1"], "'--p-max'"),
        (["--beta", "1"], "beta"),
        (["--prefix", "missing.csv"], "no file"),
        (["--prefix", "TWO"], "one column"),
        (["--prefix", "NPY", "--m", "60000"], "'--time-lag'"),
        (["--prefix", "NPY", "--n", "1000"], "smaller than n"),
        (["--bound", "10", "--prefix", "NPY"], "outside"),
        (["--plot", "x.png"], "--prefix"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, prefix_files, args, needle):
    args = [
        str(prefix_files / "trips.npy") if a == "NPY" else str(prefix_files / "two.csv")
        if a == "TWO" else a
        for a in args
    ]  # fmt: skip
    base = ["--n", "25000000", "--bound", "1440"]
    code, out, err = run(capsys, *base, *args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("Error:") and needle in err


def test_help_has_examples():
    from click.testing import CliRunner

    from dpstream.cli import cli

    result = CliRunner().invoke(cli, ["plan", "pak", "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "--prefix" in result.output
