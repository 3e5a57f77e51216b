"""``dpstream release``: release load streams with OptStream or a w-event baseline, or one stream
with ToPS, ToPL, PAK or BT (writing a release that ``dpstream query`` answers range sums from)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click
import pandas as pd

from mechanisms import SMOOTHERS, DomainError, DPStreamError, ParameterError
from mechanisms.core._validation import check_integer, check_positive

__all__ = ["release"]

_METHODS = ("optstream", "laplace", "dft", "pegasus")
#: Single-stream methods: they write a values file + JSON sidecar (``dpstream query``).
_STREAM_METHODS = ("tops", "topl", "pak", "bt")
_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def _read_input(path: str, time_column: str | None) -> pd.DataFrame:
    """Read CSV or Parquet; the time column (given, or ``time``, or the first) becomes the index."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in _TABLE_SUFFIXES:
        raise ParameterError(
            f"The INPUT argument of dpstream release must be a .csv or .parquet file. Got "
            f"{file.name!r}."
        )
    try:
        frame = pd.read_parquet(file) if suffix != ".csv" else pd.read_csv(file)
    except (OSError, ValueError, ImportError) as exc:
        raise ParameterError(
            f"The INPUT file {file.name!r} of dpstream release could not be read "
            f"({type(exc).__name__})."
        ) from None
    if frame.index.name is not None:  # Parquet written from a time-indexed frame
        frame = frame.reset_index()
    if time_column is None:
        time_column = "time" if "time" in frame.columns else str(frame.columns[0])
    if time_column not in frame.columns:
        raise ParameterError(
            f"The '--time-column' option of dpstream release must name a column of INPUT. Got "
            f"{time_column!r}; columns are {[str(c) for c in frame.columns][:10]}."
        )
    stamps = frame.pop(time_column)
    if not pd.api.types.is_integer_dtype(stamps.dtype):
        try:
            stamps = pd.to_datetime(stamps)
        except (ValueError, TypeError):
            raise DomainError(
                f"The time column {time_column!r} of INPUT must hold dates or integers; some "
                "entries could not be parsed. Fix them or pass --time-column."
            ) from None
    frame.index = pd.Index(stamps, name=time_column)
    return frame


def _read_hierarchy(path: str | None) -> dict[str, list[str]] | None:
    if path is None:
        return None
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError:
        raise ParameterError(f"The '--hierarchy' option: no readable file {path!r}.") from None
    except json.JSONDecodeError as exc:
        raise ParameterError(
            f"The '--hierarchy' file {path!r} is not valid JSON (line {exc.lineno}). Expected "
            '{"parent": ["child", ...], ...}.'
        ) from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise ParameterError(
            f"The '--hierarchy' file {path!r} must hold one JSON object mapping each parent to "
            'a list of children, e.g. {"national": ["north", "south"]}.'
        )
    return raw


def _alpha(text: str) -> float | None:
    if text.strip().lower() in ("none", "inf", "infinity"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(
            f"The '--alpha' option of dpstream release must be a float in (0, inf) or 'none'. "
            f"Got {text!r} instead."
        ) from None
    return None if math.isinf(value) and value > 0 else value


def _write_output(frame: pd.DataFrame | pd.Series, path: str) -> None:
    file = Path(path)
    suffix = file.suffix.lower()
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    if suffix == ".csv":
        frame.to_csv(file)
    else:
        frame.attrs = {}
        frame.to_parquet(file)


@click.command(name="release")
@click.argument("method", type=click.Choice(_METHODS + _STREAM_METHODS, case_sensitive=False))
@click.argument("input_path", metavar="INPUT", type=click.Path(dir_okay=False))
@click.option(
    "--epsilon",
    type=float,
    required=True,
    help="Privacy loss per window of w steps; for tops the perturber's ε_r, for topl each "
    "report's ε, for pak/bt the whole release's ε.",
)
@click.option("--w", "w", type=int, default=48, show_default=True, help="Window (period) length.")
@click.option(
    "--k", "k", type=int, default=10, show_default=True, help="Samples (OptStream) / DFT terms."
)
@click.option(
    "--hierarchy",
    "hierarchy_path",
    type=click.Path(dir_okay=False),
    help='JSON file {"parent": ["child", ...]}; leaves are the INPUT columns.',
)
@click.option(
    "--alpha",
    default="1.0",
    show_default=True,
    help="Largest protected change of one value; 'none' = w-event on [0, --bound].",
)
@click.option("--bound", type=float, help="Public bound on leaf values (needed with --alpha none).")
@click.option("--theta", type=float, help="OptStream's L1-sampler threshold θ.")
@click.option("--time-column", help="Name of INPUT's time column (default: 'time' or the first).")
@click.option("--time-lag", type=int, help="tops/topl/pak: m, the values used for the threshold.")
@click.option(
    "--epsilon-threshold", type=float, help="tops: ε of the threshold (default --epsilon)."
)
@click.option(
    "--delta", type=float, default=2.0**-20, show_default=True, help="pak: δ of the threshold."
)
@click.option("--fanout", type=int, default=16, show_default=True, help="tops: fan-out F.")
@click.option(
    "--smoother",
    type=click.Choice(SMOOTHERS),
    default="recent",
    show_default=True,
    help="tops: smoother of the per-step values.",
)
@click.option("--column", help="tops/topl/pak/bt: INPUT's value column (default: the only one).")
@click.option("--seed", type=int, help="Seed for experiments. Seeded output is NOT private.")
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False),
    help="optstream: release store (SQLite file, created on first use); periods already in it "
    "are returned as stored, only new ones are released.",
)
@click.option(
    "--engine",
    type=click.Choice(("local", "dask")),
    default="local",
    show_default=True,
    help="With --store: run periods here or on Dask (a LocalCluster unless --scheduler).",
)
@click.option("--scheduler", help="With --engine dask: address of a running Dask scheduler.")
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Output file: .csv or .parquet (by extension).",
)
def release(
    method: str,
    input_path: str,
    epsilon: float,
    w: int,
    k: int,
    hierarchy_path: str | None,
    alpha: str,
    bound: float | None,
    theta: float | None,
    time_column: str | None,
    time_lag: int | None,
    epsilon_threshold: float | None,
    delta: float,
    fanout: int,
    smoother: str,
    column: str | None,
    seed: int | None,
    store_path: str | None,
    engine: str,
    scheduler: str | None,
    out_path: str,
) -> None:
    """Release every stream of INPUT privately with METHOD and write the result to --out.

    INPUT is a CSV or Parquet table: a time column and one column per leaf stream. With
    --hierarchy, aggregates are derived from the leaves and released too (ε/h per level,
    OptStream Theorem 13); the output has one column per node. Negative values are not
    released (truncated to 0). A trailing partial period is released as a shorter period.

    tops, topl, pak and bt release ONE stream (a single value column, or --column; values in
    [0, --bound]) at event level (topl: local DP). tops, topl and pak read the first
    --time-lag values for their threshold and release the later steps; bt releases all. The
    output has columns 'value' and 'cumulative' plus a sidecar OUT.json; answer range sums with
    'dpstream query OUT --range I J'.

    \b
    Examples:
      dpstream release laplace loads.csv --epsilon 1 --out laplace.csv
      dpstream release dft loads.parquet --epsilon 0.1 --k 10 --out dft.parquet
      dpstream release pegasus loads.csv --epsilon 1 --alpha 50 --out pegasus.csv
      dpstream release optstream loads.csv --epsilon 1 --hierarchy tree.json --out os.csv
      dpstream release optstream long.csv --epsilon 1 --alpha 50 --hierarchy edges.csv \\
          --store ops.db --out released.csv      # the daily job: only new days are released
      dpstream release laplace loads.csv --epsilon 1 --alpha none --bound 20000 --out l.csv
      dpstream release tops power.csv --bound 36 --epsilon 0.05 --epsilon-threshold 0.1 \\
          --time-lag 65536 --out tops.csv
      dpstream release pak power.parquet --bound 36 --epsilon 1 --time-lag 65536 --out pak.csv
      dpstream release bt power.csv --bound 36 --epsilon 1 --out bt.parquet
    """
    method = method.lower()
    out_suffix = Path(out_path).suffix.lower()
    if out_suffix not in _TABLE_SUFFIXES:
        raise ParameterError(
            f"The '--out' option of dpstream release must end in .csv or .parquet. Got "
            f"{Path(out_path).name!r}."
        )
    if not Path(input_path).is_file():
        raise ParameterError(f"The INPUT argument of dpstream release: no file {input_path!r}.")
    if method in _STREAM_METHODS:
        if hierarchy_path is not None:
            raise ParameterError(
                f"The '--hierarchy' option of dpstream release does not apply to {method} "
                "(one stream). Drop it, or use optstream/laplace/dft/pegasus."
            )
        options = {
            "epsilon": epsilon,
            "bound": bound,
            "time_lag": time_lag,
            "epsilon_threshold": epsilon_threshold,
            "delta": delta,
            "fanout": fanout,
            "smoother": smoother,
            "seed": seed,
        }
        from ._stream import release_stream

        release_stream(method, input_path, time_column, column, options, out_path)
        return
    check_positive(epsilon, "epsilon", "dpstream release")
    check_integer(w, "w", "dpstream release")
    check_integer(k, "k", "dpstream release", maximum=w)
    alpha_value = _alpha(alpha)
    if store_path is not None or engine != "local" or scheduler is not None:
        if method != "optstream" or store_path is None:
            raise ParameterError(
                "The '--store', '--engine' and '--scheduler' options of dpstream release apply "
                "to optstream with --store. Add --store STORE (or drop them)."
            )
        from dpstream.store._cli import release_with_store

        if seed is not None:
            click.secho("Seeded run: an experiment, NOT a private release.", fg="yellow", err=True)
        options = {"epsilon": epsilon, "w": w, "k": k, "alpha": alpha_value, "bound": bound}
        options.update(theta=theta, seed=seed)
        release_with_store(
            input_path=input_path,
            out_path=out_path,
            store_path=store_path,
            engine=engine,
            scheduler=scheduler,
            hierarchy_path=hierarchy_path,
            time_column=time_column,
            read_wide=_read_input,
            options=options,
        )
        return
    hierarchy = _read_hierarchy(hierarchy_path)
    frame = _read_input(input_path, time_column)
    if seed is not None:
        click.secho("Seeded run: an experiment, NOT a private release.", fg="yellow", err=True)
    n_periods = math.ceil(len(frame) / w)
    common = {"epsilon": epsilon, "w": w, "hierarchy": hierarchy, "alpha": alpha_value}
    with click.progressbar(
        length=max(n_periods, 1),
        label=f"Releasing ({method})",
        file=sys.stderr,
    ) as bar:
        if method == "optstream":
            import dpstream  # lazily: the OptStream pipeline lives in its own module

            release_optstream = getattr(dpstream, "release_optstream", None)
            if release_optstream is None:
                raise DPStreamError(
                    "The optstream method is not available in this installation "
                    "(dpstream.release_optstream is missing). Use laplace, dft or pegasus."
                )
            result = release_optstream(frame, k=k, theta=theta, seed=seed, **common)
            bar.update(n_periods)
        else:
            from dpstream.pipelines._wevent_pipeline import (
                release_dft,
                release_laplace,
                release_pegasus,
            )

            extra = {"seed": seed, "bound": bound, "progress": bar.update}
            if method == "laplace":
                result = release_laplace(frame, **common, **extra)
            elif method == "dft":
                result = release_dft(frame, k=k, **common, **extra)
            else:
                result = release_pegasus(frame, **common, **extra)
    _write_output(result, out_path)
    label = " (seeded: NOT private)" if seed is not None else ""
    columns = result.shape[1] if result.ndim == 2 else 1
    click.echo(
        f"Released {len(result)} steps x {columns} stream(s) with {method}, epsilon={epsilon:g}, "
        f"w={w} to {out_path}{label}."
    )
