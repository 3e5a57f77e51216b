"""``dpstream forecast``: the steps after the end of a release (issue 28), or day-ahead
forecasts of each day of a release scored on the truth (``--truth``)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from dpstream.commands.release import _read_input
from mechanisms import ParameterError

from ._accounting import (
    check_writable,
    privacy_sidecar,
    refuse_overwriting_inputs,
    write_privacy,
)
from ._checks import cli_terms, option_float, option_int, option_probability
from ._progress import progress_bar

__all__ = ["forecast"]

_FUTURE_OPTIONS = ("horizon", "level", "model", "noise_variance", "exog", "future_exog")

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
@click.argument("input_path", metavar="RELEASED", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False),
    help="Forecast the steps after the last period of this release store (instead of RELEASED).",
)
@click.option(
    "--exog",
    "exog_path",
    type=click.Path(dir_okay=False),
    help="Regressors (CSV/Parquet, a time column and one column per regressor, e.g. temperature, "
    "working day) over the history AND the --horizon steps after it.",
)
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
    help="Forecaster. Past the end: harmonic (daily + weekly Fourier regression), "
    "log-harmonic, mstl, sarimax, holt-winters, profile, weekly-profile, mape-profile (the "
    "point of least percentage error, for spiky loads) or auto. With --truth: "
    "arma, sarima, holt-winters, profile or auto (chosen per day by a backtest inside the "
    "training window).",
)
@click.option(
    "--order", nargs=2, type=int, default=(1, 1), show_default=True, help="ARMA orders p q."
)
@click.option(
    "--train",
    type=int,
    help="Training steps per origin of the day-by-day forecasts (default 1344; selects them).",
)
@click.option("--horizon", type=int, default=48, show_default=True, help="Steps forecast.")
@click.option(
    "--days",
    type=int,
    help="Number of origins of the day-by-day forecasts (default: all; selects them).",
)
@click.option(
    "--noise-variance",
    type=float,
    help="Known noise variance of the release: fit ARMA + noise (intervals for the truth).",
)
@click.option(
    "--level",
    "levels",
    type=float,
    multiple=True,
    help="Interval coverage, repeatable (--level 0.8 --level 0.95; the default). With --truth: "
    "one level (default 0.95).",
)
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
    input_path: str | None,
    store_path: str | None,
    exog_path: str | None,
    truth_path: str | None,
    columns: tuple[str, ...],
    model: str,
    order: tuple[int, int],
    train: int | None,
    horizon: int,
    days: int | None,
    noise_variance: float | None,
    levels: tuple[float, ...],
    vs_real: bool,
    time_column: str | None,
    out_path: str,
    errors_out: str | None,
) -> None:
    """Forecast the --horizon steps after the end of RELEASED (or of --store), with intervals.

    RELEASED is a CSV or Parquet table, wide (a time column, one column per stream, e.g. the
    output of `dpstream release`) or long (unique_id, ds, y). Without --truth, every stream is
    forecast past its last time stamp (daily and weekly seasons; intervals from a backtest
    inside the history, for the true values when --noise-variance is given) and --out gets the
    long table unique_id, ds, mean, lo-80, hi-80, lo-95, hi-95 (statsforecast's names).

    With --truth (or --days or --train), each day of RELEASED is forecast instead: at every day
    boundary with --train steps before it, the --model is
    fitted to those steps and forecasts --horizon steps (OptStream §6.1.3 uses --model arma,
    an ARMA(p, q) with a constant; auto picks arma, sarima, holt-winters or profile per day by
    their errors on the last 7 days of the training window).
    With --truth, each forecast is scored against the real streams (mean L1 error, MAPE,
    RMSE, interval coverage).

    \b
    Examples:
      dpstream forecast released.csv --horizon 48 --out tomorrow.csv
      dpstream forecast --store ops.db --level 0.8 --level 0.95 --out tomorrow.parquet
      dpstream forecast released.csv --exog weather.csv --out tomorrow.csv
      dpstream forecast released.csv --truth real.csv --model arma --order 1 1 --out arma.csv
      dpstream forecast released.csv --truth real.csv --column rural --out fc.csv
      dpstream forecast released.parquet --truth real.csv --vs-real --days 7 --out fc.parquet
      dpstream forecast laplace.csv --truth real.csv --noise-variance 460814 --out fc.csv
    """

    out_file = _check_table_path(out_path, "--out")
    if (input_path is None) == (store_path is None):
        raise ParameterError(
            f"{_OWNER} needs exactly one source: RELEASED (a file) or --store. Got "
            f"{'both' if input_path else 'neither'}."
        )
    for value in levels:
        option_probability(value, "--level", _OWNER)
    if truth_path is None and days is None and train is None:
        _future(input_path, store_path, exog_path, columns, model, horizon, noise_variance,
                levels or (0.8, 0.95), time_column, out_file)  # fmt: skip
        return
    if store_path is not None or exog_path is not None:
        raise ParameterError(
            f"The '--store' and '--exog' options of {_OWNER} forecast past the end of a "
            "release; they do not go with --truth, --days or --train (the day-by-day "
            "forecasts). Drop those, or pass RELEASED."
        )
    train = 1344 if train is None else train
    if len(levels) > 1:
        raise ParameterError(
            f"The '--level' option of {_OWNER} takes one level with --truth (the evaluation "
            f"scores one interval). Got {len(levels)}."
        )
    level = levels[0] if levels else 0.95
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
    refuse_overwriting_inputs(  # the input is sacred (issue 31 §4)
        _OWNER, [input_path, truth_path], out_file, extra=(("--errors-out", err_file),)
    )
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


def _future(
    input_path, store_path, exog_path, columns, model, horizon, noise_variance, levels,
    time_column, out_file,
) -> None:  # fmt: skip
    """Forecast the ``horizon`` steps after the end of RELEASED or of ``--store``."""
    from forecasting import FORECAST_MODELS

    if model not in FORECAST_MODELS:
        raise ParameterError(
            f"The '--model' option of {_OWNER} must be one of {list(FORECAST_MODELS)} without "
            f"--truth. Got {model!r}."
        )
    option_int(horizon, "--horizon", _OWNER)
    option_float(noise_variance, "--noise-variance", _OWNER, allow_zero=True)
    check_writable(out_file, "--out", _OWNER)
    refuse_overwriting_inputs(_OWNER, [input_path, store_path, exog_path], out_file)
    inputs = [p for p in (input_path, store_path, exog_path) if p is not None]
    for path in inputs:
        if not Path(path).is_file():
            option = "RELEASED" if path == input_path else (
                "--store" if path == store_path else "--exog")  # fmt: skip
            raise ParameterError(f"The {option} argument of {_OWNER}: no file {path!r}.")
    if input_path is not None:
        _check_table_path(input_path, "RELEASED")
    if exog_path is not None:
        _check_table_path(exog_path, "--exog")
    from dpstream._files import refuse_inputs

    refuse_inputs([("--out", out_file), ("--out", privacy_sidecar(out_file))], inputs, _OWNER)
    if store_path is not None:
        from dpstream.store import ReleaseStore

        with ReleaseStore(store_path, readonly=True) as store:
            frame = store.read()
            record = store.privacy_record()
        if frame.empty:
            raise ParameterError(
                f"The '--store' option of {_OWNER} names a store with no released period yet."
            )
        record = {
            "release": True,
            "derived_from": Path(store_path).name,
            "records": [] if record is None else [record.to_dict()],
            "note": "Forecasts from the store's releases only: post-processing, no further "
            "privacy loss.",
        }
    else:
        frame = _read_table(input_path, time_column)
        record = _derived_record(input_path)
    if frame.index.name == "ds" and {"unique_id", "y"} <= {str(c) for c in frame.columns}:
        frame = frame.reset_index()  # a long table read with ds as its time column
    long = {"unique_id", "ds", "y"} <= {str(c) for c in frame.columns}
    if long:
        frame = frame.copy()
        frame.columns = [str(c) for c in frame.columns]
        if columns:
            frame = frame[frame["unique_id"].astype(str).isin(columns)]
    else:
        names = _columns(frame, columns, "RELEASED" if input_path else "--store")
        frame = frame[names]
    exog = future = None
    if exog_path is not None:
        exog, future = _split_exog(exog_path, frame, long, horizon, time_column)
    from forecasting import forecast as forecast_future

    with cli_terms(_OWNER, {"history": "RELEASED"}, _FUTURE_OPTIONS):
        fc = forecast_future(
            frame, horizon, model=model, level=levels, exog=exog, future_exog=future,
            noise_variance=noise_variance,
        )  # fmt: skip
    table = fc.to_frame()
    from dpstream.commands._accounting import write_output_pair

    write_output_pair(out_file, lambda tmp: _write(table, tmp), record)
    first, last = table["ds"].min(), table["ds"].max()
    click.echo(
        f"Wrote {horizon} steps ahead ({first} to {last}) of {table['unique_id'].nunique()} "
        f"series to {out_file} (levels {', '.join(f'{v:g}' for v in fc.levels)}; intervals for "
        f"{'the true values' if fc.target == 'truth' else 'the released values'})."
    )


def _split_exog(path, frame, long, horizon, time_column):
    """(regressors over the history, regressors over the horizon) from the --exog table."""
    table = _read_table(path, time_column)
    stamps = pd.Index(sorted(frame["ds"].unique())) if long else frame.index
    table = table.apply(pd.to_numeric, errors="coerce")
    try:
        index = pd.DatetimeIndex(table.index) if isinstance(stamps, pd.DatetimeIndex) else (
            table.index)  # fmt: skip
        table.index = index
        past = table.loc[stamps]
        after = table.loc[table.index > stamps[-1]].iloc[:horizon]
    except (KeyError, TypeError, ValueError):
        raise ParameterError(
            f"The '--exog' option of {_OWNER} must give the regressors at every time stamp of "
            f"the history and at the {horizon} steps after it (a time column, one column per "
            "regressor). Some stamps are missing."
        ) from None
    if len(after) < horizon:
        raise ParameterError(
            f"The '--exog' option of {_OWNER} must cover the {horizon} steps after the end of "
            f"the history (the forecast needs the future regressors). Got {len(after)}."
        )
    return past, after
