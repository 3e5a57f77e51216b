"""``dpstream forecast``: day-ahead forecasts from released streams, scored on the truth."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from dpstream.commands.release import _read_input
from mechanisms import ParameterError

from ._accounting import check_writable, privacy_sidecar, write_privacy
from ._checks import cli_terms, option_float, option_int, option_probability
from ._progress import progress_bar

__all__ = ["forecast"]

_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
_OWNER = "dpstream forecast"


def _check_table_path(path: str, option: str) -> Path:
    file = Path(path)
    if file.suffix.lower() not in _TABLE_SUFFIXES:
        what = f"The {option} argument" if option.isupper() else f"The {option!r} option"
        raise ParameterError(f"{what} of {_OWNER} must end in .csv or .parquet. Got {file.name!r}.")
    return file


def _write(frame: pd.DataFrame, file: Path) -> None:
    frame = frame.copy()
    frame.attrs = {}
    if file.suffix.lower() == ".csv":
        frame.to_csv(file, index=False)
    else:
        frame.to_parquet(file, index=False)


def _read_table(path: str, time_column: str | None) -> pd.DataFrame:
    """``release._read_input``, plus Parquet files whose time stamps are the index.

    ``dpstream release --out x.parquet`` stores the time as the Parquet index, which
    ``_read_input`` would skip (it takes the first *column* as the time): keep such an index.
    """
    if Path(path).suffix.lower() != ".csv":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, ImportError):
            frame = None  # let _read_input report it
        if frame is not None and not isinstance(frame.index, pd.RangeIndex):
            if time_column is None or time_column == frame.index.name:
                return frame
    return _read_input(path, time_column)


def _columns(frame: pd.DataFrame, wanted: tuple[str, ...], what: str) -> list[str]:
    names = [str(c) for c in frame.columns]
    frame.columns = names
    if not wanted:
        return names
    missing = [c for c in wanted if c not in names]
    if missing:
        raise ParameterError(
            f"The '--column' option of {_OWNER} must name columns of {what}. Got {missing}; "
            f"columns are {names[:10]}."
        )
    return list(wanted)


def _derived_record(input_path: str) -> dict:
    """The privacy sidecar of the forecasts: post-processing of RELEASED, whose record (its
    ``.privacy.json``, when present) they inherit ([FV19] Theorem 3)."""
    side = privacy_sidecar(input_path)
    try:
        source = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        source = None
    note = "Forecasts from RELEASED only: post-processing, no further privacy loss."
    records = [] if source is None else (source if isinstance(source, list) else [source])
    return {
        "release": bool(records) and all(isinstance(r, dict) and r.get("release") for r in records),
        "derived_from": Path(input_path).name,
        "records": records,
        "note": note if source is not None else "RELEASED has no privacy record.",
    }


@click.command(name="forecast")
@click.argument("input_path", metavar="RELEASED", type=click.Path(dir_okay=False))
@click.option(
    "--truth",
    "truth_path",
    type=click.Path(dir_okay=False),
    help="The real streams (same columns and time stamps) to score the forecasts against.",
)
@click.option("--column", "columns", multiple=True, help="Stream(s) to forecast (default: all).")
@click.option(
    "--model",
    default="auto",
    show_default=True,
    help="Forecaster: arma, sarima, holt-winters, profile (mean of the last 7 days), or auto "
    "(chosen per day by a backtest inside the training window).",
)
@click.option(
    "--order", nargs=2, type=int, default=(1, 1), show_default=True, help="ARMA orders p q."
)
@click.option(
    "--train", type=int, default=1344, show_default=True, help="Training steps per origin."
)
@click.option("--horizon", type=int, default=48, show_default=True, help="Steps forecast.")
@click.option("--days", type=int, help="Number of forecast origins (default: all).")
@click.option(
    "--noise-variance",
    type=float,
    help="Known noise variance of the release: fit ARMA + noise (intervals for the truth).",
)
@click.option("--level", type=float, default=0.95, show_default=True, help="Interval coverage.")
@click.option(
    "--vs-real",
    is_flag=True,
    help="Also forecast from --truth and report each error as a ratio to the real-data error.",
)
@click.option("--time-column", help="Name of the time column (default: 'time' or the first).")
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Forecasts file: .csv or .parquet (one row per series, origin and step).",
)
@click.option(
    "--errors-out",
    type=click.Path(dir_okay=False),
    help="Errors file (one row per series and origin); default: --out with '_errors' added.",
)
def forecast(
    input_path: str,
    truth_path: str | None,
    columns: tuple[str, ...],
    model: str,
    order: tuple[int, int],
    train: int,
    horizon: int,
    days: int | None,
    noise_variance: float | None,
    level: float,
    vs_real: bool,
    time_column: str | None,
    out_path: str,
    errors_out: str | None,
) -> None:
    """Forecast each day of RELEASED, with a model trained on the previous four weeks.

    RELEASED is a CSV or Parquet table (a time column, one column per stream), e.g. the output
    of `dpstream release`. At every day boundary with --train steps before it, the --model is
    fitted to those steps and forecasts --horizon steps (OptStream §6.1.3 uses --model arma,
    an ARMA(p, q) with a constant; auto picks arma, sarima, holt-winters or profile per day by
    their errors on the last 7 days of the training window).
    With --truth, each forecast is scored against the real streams (mean L1 error, MAPE,
    RMSE, interval coverage).

    \b
    Examples:
      dpstream forecast released.csv --out forecasts.csv
      dpstream forecast released.csv --model arma --order 1 1 --out arma.csv
      dpstream forecast released.csv --truth real.csv --column rural --out fc.csv
      dpstream forecast released.parquet --truth real.csv --vs-real --days 7 --out fc.parquet
      dpstream forecast laplace.csv --truth real.csv --noise-variance 460814 --out fc.csv
    """

    out_file = _check_table_path(out_path, "--out")
    err_file = None
    if truth_path is not None:
        default = out_file.with_name(f"{out_file.stem}_errors{out_file.suffix}")
        err_file = _check_table_path(errors_out, "--errors-out") if errors_out else default
    elif errors_out or vs_real:
        raise ParameterError(
            f"The '--errors-out' and '--vs-real' options of {_OWNER} need --truth."
        )
    check_writable(out_file, "--out", _OWNER)
    if err_file is not None:
        check_writable(err_file, "--errors-out", _OWNER)
    for path, what in ((input_path, "RELEASED"), (truth_path, "--truth")):
        if path is not None and not Path(path).is_file():
            raise ParameterError(f"The {what} argument of {_OWNER}: no file {path!r}.")
    _check_table_path(input_path, "RELEASED")
    if truth_path is not None:
        _check_table_path(truth_path, "--truth")
    from forecasting import MODELS

    if model not in MODELS:
        raise ParameterError(
            f"The '--model' option of {_OWNER} must be one of {list(MODELS)}. Got {model!r}."
        )
    p, q = (option_int(v, "--order", _OWNER, minimum=0) for v in order)
    option_int(train, "--train", _OWNER)
    option_int(horizon, "--horizon", _OWNER)
    option_int(days, "--days", _OWNER)
    option_probability(level, "--level", _OWNER)
    option_float(noise_variance, "--noise-variance", _OWNER, allow_zero=True)
    options = {
        "model": model, "order": (p, 0, q), "train": train, "horizon": horizon, "days": days
    }  # fmt: skip
    names = ("train", "horizon", "days", "order", "level", "noise_variance")
    with cli_terms(_OWNER, {"series": "RELEASED"}, names):
        _run_forecasts(
            input_path, truth_path, columns, options, noise_variance, level, vs_real,
            time_column, out_file, err_file,
        )  # fmt: skip


def _run_forecasts(
    input_path, truth_path, columns, options, noise_variance, level, vs_real, time_column,
    out_file, err_file,
) -> None:  # fmt: skip
    from forecasting import error_ratio, forecast_errors, forecast_origins, rolling_forecast

    train, horizon, days = options["train"], options["horizon"], options["days"]
    frame = _read_table(input_path, time_column)
    names = _columns(frame, columns, "RELEASED")
    truth = None
    if truth_path is not None:
        truth = _read_table(truth_path, time_column)
        _columns(truth, tuple(names), "--truth")
        if not frame.index.isin(truth.index).all():
            raise ParameterError(
                f"The '--truth' option of {_OWNER} must cover every time stamp of RELEASED "
                "(the forecasts are scored against it); some are missing. Pass the real "
                "streams the release was made from."
            )
    # Validates every series (and train/horizon/days) before the first fit.
    count = sum(
        len(forecast_origins(frame[c], train=train, horizon=horizon, days=days)) for c in names
    )
    runs = [("released", frame, noise_variance)] + ([("real", truth, None)] if vs_real else [])
    forecasts, errors = [], []
    with progress_bar(count * len(runs), unit="origin", desc="Forecasting") as bar:
        for name in names:
            for kind, source, nv in runs:
                out = rolling_forecast(
                    source[name], noise_variance=nv, level=level, progress=bar.update, **options
                )
                out.insert(0, "series", name)
                if kind == "released":
                    forecasts.append(out)
                if truth is not None:
                    err = forecast_errors(out, truth[name])
                    err.insert(0, "series", name)
                    err.insert(1, "data", kind)
                    errors.append(err)
    table = pd.concat(forecasts, ignore_index=True)
    _write(table, out_file)
    write_privacy(out_file, _derived_record(input_path))
    click.echo(f"Wrote {len(table)} forecasts ({len(names)} series) to {out_file}.")
    if truth is None:
        return
    scores = pd.concat(errors, ignore_index=True)
    if not vs_real:
        scores = scores.drop(columns="data")
    _write(scores, err_file)
    write_privacy(
        err_file,
        {"release": False, "note": "Scores against the real data (--truth): not private."},
    )
    click.echo(f"Wrote errors per origin to {err_file}.")
    for name in names:
        mine = scores[scores["series"] == name]
        rel = mine[mine["data"] == "released"] if vs_real else mine
        line = f"  {name}: mean L1 {rel['l1'].mean():.4g}, MAPE {rel['mape'].mean():.3g} %"
        if vs_real:
            ratio = error_ratio(rel, mine[mine["data"] == "real"])
            line += f", {ratio:.3g} x the error of forecasts from the real data"
        click.echo(line)
