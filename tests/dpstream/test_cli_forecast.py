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


# -- issue 28: forecasts past the end of RELEASED or of --store ------------------------------


@pytest.fixture(scope="module")
def long_files(tmp_path_factory):
    """Three weeks of two streams with a weekly season, wide and long, and a regressor."""
    folder = tmp_path_factory.mktemp("future")
    index = pd.date_range("2016-05-02", periods=21 * 48, freq="30min", name="time")
    t = np.arange(index.size)
    rng = np.random.default_rng(3)
    weekend = (index.day_of_week >= 5).astype(float)
    frame = pd.DataFrame(
        {
            "north": 500 + 60 * np.sin(2 * np.pi * t / 48) - 80 * weekend
            + rng.normal(0, 5, t.size),
            "south": 800 + 30 * np.cos(2 * np.pi * t / 48) + rng.normal(0, 5, t.size),
        },
        index=index,
    )  # fmt: skip
    frame.to_csv(folder / "wide.csv")
    long = frame.rename_axis("ds").reset_index().melt("ds", var_name="unique_id", value_name="y")
    long.to_csv(folder / "long.csv", index=False)
    stamps = pd.date_range(index[0], periods=index.size + 48, freq="30min", name="time")
    exog = pd.DataFrame({"temp": np.sin(np.arange(stamps.size) / 200.0)}, index=stamps)
    exog.to_csv(folder / "exog.csv")
    exog.iloc[: index.size + 10].to_csv(folder / "short_exog.csv")
    return folder, frame


def test_without_truth_forecasts_the_day_after_the_end(long_files, tmp_path):
    folder, frame = long_files
    out = tmp_path / "tomorrow.csv"
    result = CliRunner().invoke(
        cli, ["forecast", str(folder / "wide.csv"), "--horizon", "48", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "2016-05-23 00:00:00 to 2016-05-23 23:30:00" in result.output
    back = pd.read_csv(out, parse_dates=["ds"])
    assert list(back.columns) == ["unique_id", "ds", "mean", "lo-80", "hi-80", "lo-95", "hi-95"]
    assert back.groupby("unique_id").size().to_dict() == {"north": 48, "south": 48}
    assert back["ds"].min() == pd.Timestamp("2016-05-23")  # the Monday after the history
    from forecasting import forecast as python_forecast

    ref = python_forecast(frame, 48).to_frame()
    np.testing.assert_allclose(back["mean"], ref["mean"], rtol=1e-9)
    side = (tmp_path / "tomorrow.csv.privacy.json").read_text()
    assert "derived_from" in side


def test_long_input_levels_and_exog(long_files, tmp_path):
    folder, frame = long_files
    out = tmp_path / "f.parquet"
    args = ["forecast", str(folder / "long.csv"), "--level", "0.5", "--level", "0.9"]
    assert main([*args, "--horizon", "24", "--out", str(out)]) == 0
    back = pd.read_parquet(out)
    assert {"lo-50", "hi-50", "lo-90", "hi-90"} <= set(back.columns) and len(back) == 48
    assert (back["lo-90"] <= back["lo-50"]).all() and (back["hi-50"] <= back["hi-90"]).all()
    out2 = tmp_path / "g.csv"
    args = ["forecast", str(folder / "wide.csv"), "--exog", str(folder / "exog.csv")]
    assert main([*args, "--column", "north", "--out", str(out2)]) == 0
    assert set(pd.read_csv(out2)["unique_id"]) == {"north"}


def test_forecasts_after_the_last_period_of_a_store(long_files, tmp_path):
    from dpstream.store import ReleaseStore

    folder, frame = long_files
    db = tmp_path / "ops.db"
    with ReleaseStore(db) as store:
        released = store.release_optstream(frame, epsilon=1.0, alpha=5.0, seed=4)
    out = tmp_path / "s.csv"
    assert main(["forecast", "--store", str(db), "--noise-variance", "25", "--out", str(out)]) == 0
    back = pd.read_csv(out, parse_dates=["ds"])
    assert back["ds"].min() == released.index[-1] + pd.Timedelta("30min")
    record = (tmp_path / "s.csv.privacy.json").read_text()
    assert '"release": true' in record and "ops.db" in record


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--store", "x.db"], "exactly one source"),
        (["--model", "arma"], "without --truth"),
        (["--exog", "SHORT"], "must cover the 48 steps"),
        (["--level", "1.5"], "'--level'"),
        (["--horizon", "0"], "'--horizon'"),
        (["--truth", "WIDE", "--level", "0.8", "--level", "0.9"], "one level with --truth"),
        (["--truth", "WIDE", "--exog", "SHORT"], "do not go with --truth"),
    ],
)
def test_future_user_errors_exit_2(long_files, tmp_path, capsys, extra, message):
    folder, _ = long_files
    subst = {"SHORT": str(folder / "short_exog.csv"), "WIDE": str(folder / "wide.csv")}
    extra = [subst.get(a, a) for a in extra]
    code = main(["forecast", str(folder / "wide.csv"), *extra, "--out", str(tmp_path / "f.csv")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "f.csv").exists()


def test_a_history_too_short_says_so_in_cli_terms(files, tmp_path, capsys):
    folder, _, _ = files  # four days: too few for the weekly models
    code = main(["forecast", str(folder / "released.csv"), "--out", str(tmp_path / "f.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "RELEASED of dpstream forecast" in err and "at least" in err
