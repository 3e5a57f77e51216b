"""``dpstream forecast``: the command, run with click's CliRunner and through ``main``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dpstream
from dpstream.cli import cli, main
from forecasting import forecast_errors, rolling_forecast

ARGS = ["--train", "96", "--days", "2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Four days of two load streams, their Laplace release, as CSV and Parquet."""
    folder = tmp_path_factory.mktemp("forecast")
    index = pd.date_range("2016-06-01", periods=4 * 48, freq="30min", name="time")
    t = np.arange(index.size)
    rng = np.random.default_rng(0)
    real = pd.DataFrame(
        {
            "north": 500 + 60 * np.sin(2 * np.pi * t / 48) + rng.normal(0, 5, t.size),
            "south": 800 + 30 * np.cos(2 * np.pi * t / 48) + rng.normal(0, 5, t.size),
        },
        index=index,
    )
    released = dpstream.release_laplace(real, epsilon=1.0, alpha=0.1, seed=1)
    real.to_csv(folder / "real.csv")
    released.to_csv(folder / "released.csv")
    released.to_parquet(folder / "released.parquet")
    return folder, real, released


def test_help_has_examples():
    result = CliRunner().invoke(cli, ["forecast", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and "dpstream forecast released.csv" in result.output


def test_forecasts_every_column_like_the_python_api(files, tmp_path):
    folder, real, released = files
    out = tmp_path / "fc.csv"
    result = CliRunner().invoke(
        cli, ["forecast", str(folder / "released.csv"), *ARGS, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    back = pd.read_csv(out, parse_dates=["origin", "time"])
    assert list(back.columns) == [
        "series", "origin", "step", "time", "forecast", "lower", "upper", "converged", "model"
    ]  # fmt: skip
    assert list(back["series"].unique()) == ["north", "south"] and len(back) == 2 * 2 * 48
    ref = rolling_forecast(released["south"], train=96, days=2, model="auto")  # --model default
    np.testing.assert_allclose(
        back[back["series"] == "south"]["forecast"], ref["forecast"], rtol=1e-9
    )
    assert not (tmp_path / "fc_errors.csv").exists()


def test_truth_gives_errors_and_the_ratio_to_real(files, tmp_path):
    folder, real, released = files
    out = tmp_path / "fc.parquet"
    args = ["forecast", str(folder / "released.parquet"), "--truth", str(folder / "real.csv")]
    result = CliRunner().invoke(
        cli, [*args, "--column", "north", "--vs-real", *ARGS, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert (
        "north: mean L1" in result.output
        and "x the error of forecasts from the real" in result.output
    )
    errors = pd.read_parquet(tmp_path / "fc_errors.parquet")
    assert list(errors["data"]) == ["released", "released", "real", "real"]
    assert {"l1", "mape", "rmse", "coverage"} <= set(errors.columns)
    ref = rolling_forecast(released["north"], train=96, days=2, model="auto")
    ref = forecast_errors(ref, real["north"])
    np.testing.assert_allclose(errors["l1"].iloc[:2], ref["l1"], rtol=1e-9)
    assert pd.read_parquet(out)["series"].unique().tolist() == ["north"]


def test_noise_variance_and_errors_out(files, tmp_path):
    folder, _, _ = files
    errs = tmp_path / "e.csv"
    code = main(
        [
            "forecast", str(folder / "released.csv"), "--truth", str(folder / "real.csv"),
            "--column", "south", "--order", "1", "0", "--noise-variance", "2000", *ARGS,
            "--out", str(tmp_path / "f.csv"), "--errors-out", str(errs),
        ]
    )  # fmt: skip
    assert code == 0
    table = pd.read_csv(errs)
    assert list(table.columns[:2]) == ["series", "origin"] and len(table) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "f.txt"], "'--out' option of dpstream forecast must end in .csv"),
        (["--vs-real", "--out", "f.csv"], "need --truth"),
        (["--column", "west", "--out", "f.csv"], "must name columns of RELEASED"),
        (["--order", "-1", "1", "--out", "f.csv"], "'--order' option"),
        (["--days", "9", "--out", "f.csv"], "asks for 9 origins"),
        (["--train", "5", "--out", "f.csv"], "'--train' option"),
        (["--level", "2", "--out", "f.csv"], "'--level' option"),
        (["--model", "ets", "--out", "f.csv"], "'--model' option of dpstream forecast"),
        (["--model", "profile", "--out", "f.csv"], "at least 384 steps for model='profile'"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(
    files, tmp_path, capsys, monkeypatch, extra, message
):
    folder, _, _ = files
    monkeypatch.chdir(tmp_path)
    code = main(["forecast", str(folder / "released.csv"), "--train", "96", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "f.csv").exists()


def test_model_option_runs_the_chosen_model(files, tmp_path):
    folder, _, released = files
    out = tmp_path / "hw.csv"
    args = ["forecast", str(folder / "released.csv"), "--column", "north", "--model"]
    assert main([*args, "holt-winters", *ARGS, "--out", str(out)]) == 0
    back = pd.read_csv(out)
    assert (back["model"] == "holt-winters").all()
    ref = rolling_forecast(released["north"], train=96, days=2, model="holt-winters")
    np.testing.assert_allclose(back["forecast"], ref["forecast"], rtol=1e-9)


def test_missing_files_and_truth_columns(files, tmp_path, capsys):
    folder, real, _ = files
    code = main(["forecast", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "f.csv")])
    assert code == 2 and "no file" in capsys.readouterr().err
    real[["north"]].to_csv(tmp_path / "north.csv")
    code = main(
        ["forecast", str(folder / "released.csv"), "--truth", str(tmp_path / "north.csv"), *ARGS,
         "--out", str(tmp_path / "f.csv")]
    )  # fmt: skip
    assert code == 2 and "must name columns of --truth" in capsys.readouterr().err


def test_reads_the_parquet_of_dpstream_release_and_a_time_column(files, tmp_path):
    """``dpstream release`` writes the time as the Parquet index; a time column works too."""
    folder, real, _ = files
    rel = tmp_path / "rel.parquet"
    args = ["release", "laplace", str(folder / "real.csv"), "--epsilon", "1", "--alpha", "1"]
    args += ["--seed", "2"]
    assert main([*args, "--out", str(rel)]) == 0
    out = tmp_path / "fc.csv"
    assert main(["forecast", str(rel), "--column", "north", *ARGS, "--out", str(out)]) == 0
    back = pd.read_csv(out, parse_dates=["time"])
    assert back["time"].iloc[0] == pd.Timestamp("2016-06-03")  # not a 1970 stamp from a value
    stamped = tmp_path / "stamped.parquet"
    pd.read_parquet(rel).reset_index().rename(columns={"time": "stamp"}).to_parquet(stamped)
    out2 = tmp_path / "fc2.csv"
    code = main(
        ["forecast", str(stamped), "--time-column", "stamp", "--column", "north", *ARGS,
         "--out", str(out2)]
    )  # fmt: skip
    assert code == 0
    np.testing.assert_array_equal(pd.read_csv(out2)["forecast"], back["forecast"])
