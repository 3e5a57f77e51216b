"""``dpstream release``: release load streams with OptStream or a w-event baseline, or one stream
with ToPS, ToPL, PAK or BT (writing a release that ``dpstream query`` answers range sums from)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import pandas as pd

from mechanisms import (
    COUNTERS,
    SMOOTHERS,
    Budget,
    DomainError,
    DPStreamError,
    ParameterError,
    PrivacyGuarantee,
    PrivacyRecord,
    WAlphaIndistinguishability,
    WEvent,
)

from ._accounting import (
    check_no_ledger,
    check_writable,
    ledger_options,
    open_ledger,
    refuse_overwriting_inputs,
    show_guarantee,
    write_output_pair,
)
from ._checks import check_input_length, cli_terms, option_float, option_int
from ._outputs import period_record, std_error_path, write_std_errors
from ._progress import progress_bar

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
    "--k",
    "k",
    default="auto",
    show_default=True,
    help="OptStream samples per period, or 'auto': planned per period from the periods already "
    "released (the default; --k 10 with --sampling l1 is the paper's setting). DFT: terms "
    "('auto' = 10).",
)
@click.option(
    "--hierarchy",
    "hierarchy_path",
    type=click.Path(dir_okay=False),
    help='JSON file {"parent": ["child", ...]}; leaves are the INPUT columns.',
)
@click.option(
    "--alpha",
    default=None,
    help="Largest protected change of one value, in the data's units (required: it defines "
    "the privacy unit); 'none' = w-event on [0, --bound] (laplace/dft/pegasus).",
)
@click.option("--bound", type=float, help="Public bound on leaf values (needed with --alpha none).")
@click.option("--theta", type=float, help="OptStream's L1-sampler threshold θ.")
@click.option("--time-column", help="Name of INPUT's time column (default: 'time' or the first).")
@click.option(
    "--missing",
    type=click.Choice(("error", "zero", "unmeasured")),
    default="error",
    show_default=True,
    help="A missing reading (no row, or an empty value): refuse, count it as 0, or leave it "
    "unmeasured (optstream: released as empty, aggregates over the observed leaves; the "
    "missingness pattern is taken as public, see docs/privacy.md). With --store: a CSV or "
    "SQLite INPUT.",
)
@click.option(
    "--correct",
    "correct",
    metavar="PERIOD",
    help="Publish a correction of the period starting at PERIOD (its first time stamp): a new "
    "release of INPUT's rows of that period only, charged again to the data set's budget "
    "(without --store; a stored period stands).",
)
@click.option(
    "--timezone",
    help="IANA time zone INPUT's naive time stamps were written in (e.g. Europe/Paris); the "
    "release is on a UTC grid. Default: stamps are UTC.",
)
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
@click.option(
    "--counter",
    type=click.Choice(("auto", *COUNTERS, "unbounded", "unbounded_blt")),
    default="auto",
    show_default=True,
    help="pak/bt: continual counter of the released sums; auto = the smallest exact variance "
    "for the budget (public; a counter sized to the file's length, the best when the length is "
    "known), binary_tree = the paper's BT; for a stream whose length is not fixed in advance: "
    "unbounded = a counter sized for no stream length (epochs of k-ary trees, pure ε; rows "
    "appended later leave the released prefix unchanged for the same seed, for pak with "
    "--parameters paper (planned parameters depend on the number of rows); each run is a new "
    "release, charged), unbounded_blt = its Gaussian twin at (--epsilon, --delta) (a "
    "time-invariant BLT, calibrated for streams of up to 2^32 rows; pak: the suffix after "
    "--time-lag).",
)
@click.option(
    "--parameters",
    "pak_parameters",
    type=click.Choice(("planned", "paper")),
    default="planned",
    show_default=True,
    help="pak: r, λ, p, ε₁/ε, β_lt planned from public inputs (planner.pak_defaults) or the "
    "paper's Table I choices (r = 1.5, λ = 0.85, ε₁/ε = 0.85).",
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
    "--workers",
    type=int,
    default=2,
    show_default=True,
    help="With --engine dask (no --scheduler): worker processes of the local cluster. With a "
    "hierarchy and a Parquet INPUT each period is split inside into subtrees.",
)
@click.option(
    "--cut",
    type=int,
    help="With --store and a Parquet INPUT: split each period into the subtrees rooted at "
    "this depth of the hierarchy (default with --engine dask: chosen for --workers; --k auto "
    "needs more than 64 leaves).",
)
@click.option(
    "--lock-timeout",
    type=float,
    default=0.0,
    show_default=True,
    help="With --store: seconds to wait for another job on the same store to finish "
    "(0: fail at once, naming the store).",
)
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Output file: .csv or .parquet (by extension); its record goes to OUT.privacy.json.",
)
@click.option(
    "--std-errors",
    "std_errors",
    is_flag=True,
    help="optstream: also write the standard error of every released value "
    "(dpstream.std_errors): a 'std_error' column in long format, OUT_STEM.std_error.SUFFIX "
    "beside a wide file; with --store (k auto), every period of OUT from the store; "
    "empty where OUT is empty (--missing unmeasured).",
)
@ledger_options
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
    missing: str,
    correct: str | None,
    timezone: str | None,
    time_lag: int | None,
    epsilon_threshold: float | None,
    delta: float,
    fanout: int,
    smoother: str,
    counter: str,
    pak_parameters: str,
    column: str | None,
    seed: int | None,
    store_path: str | None,
    engine: str,
    scheduler: str | None,
    workers: int,
    cut: int | None,
    lock_timeout: float,
    out_path: str,
    std_errors: bool,
    ledger_path: str | None,
    budget_epsilon: float | None,
    budget_delta: float | None,
    dataset: str | None,
    new_dataset: bool,
    no_ledger: bool,
) -> None:
    """Release every stream of INPUT privately with METHOD and write the result to --out.

    INPUT is a CSV or Parquet table: a time column and one column per leaf stream. With
    --hierarchy, aggregates are derived from the leaves and released too (ε/h per level,
    OptStream Theorem 13); the output has one column per node. Negative values are not
    released (truncated to 0). A trailing partial period is released as a shorter period.

    tops, topl, pak and bt release ONE stream (a single value column, or --column; values in
    [0, --bound]) at event level (topl: local DP). tops, topl and pak read the first
    --time-lag values for their threshold and release the later steps; bt releases all, and
    so does pak where its planned default is the plain counter (no threshold). The
    output has one row per input step, indexed like INPUT (the withheld rows empty), columns
    'value' and 'cumulative', and a sidecar OUT.json; answer range sums over input steps with
    'dpstream query OUT --range I J'.

    \b
    Examples:
      dpstream release laplace loads.csv --epsilon 1 --alpha 50 --out laplace.csv
      dpstream release dft loads.parquet --epsilon 0.1 --alpha 50 --k 10 --out dft.parquet
      dpstream release optstream meters.csv --epsilon 1 --alpha 50 --k 10 \\
          --missing unmeasured --timezone Europe/Paris --out os.csv   # gaps, local times
      dpstream release optstream fixed.csv --epsilon 1 --alpha 50 --ledger budget.db \\
          --correct 2016-10-29 --out correction.csv   # a new, charged release of that day
      dpstream release pegasus loads.csv --epsilon 1 --alpha 50 --out pegasus.csv
      dpstream release optstream loads.csv --epsilon 1 --alpha 50 --hierarchy tree.json \\
          --out os.csv
      dpstream release optstream long.csv --epsilon 1 --alpha 50 --hierarchy edges.csv \\
          --store ops.db --out released.csv      # the daily job: only new days are released
      dpstream release laplace loads.csv --epsilon 1 --alpha none --bound 20000 --out l.csv
      dpstream release tops power.csv --bound 36 --epsilon 0.05 --epsilon-threshold 0.1 \\
          --time-lag 65536 --out tops.csv
      dpstream release pak power.parquet --bound 36 --epsilon 1 --time-lag 65536 --out pak.csv
      dpstream release bt power.csv --bound 36 --epsilon 1 --out bt.parquet
      dpstream release laplace loads.csv --epsilon 0.5 --alpha 50 --ledger budget.db \\
          --budget-epsilon 1 --out first.csv       # creates the ledger, spends 0.5 of 1
      dpstream release dft loads.csv --epsilon 0.5 --alpha 50 --ledger budget.db --out b.csv
      dpstream release optstream day.csv --epsilon 1 --alpha 50 --dataset meters \
          --store ops.db --out r.csv    # the data set's budget, whatever file or store

    With --ledger, every release is charged to the file before any noise is drawn and
    refused (before any work) once the file's total would be exceeded; the file is created
    by the first run, with --budget-epsilon/--budget-delta and the run's privacy unit. A data
    set has one budget: --dataset NAME keeps it in $DPSTREAM_HOME/ledgers/NAME.db, and a
    release of a known data set (same streams and hierarchy) charges its ledger by default;
    a store always does ('dpstream ledger show'). --out, --store and --ledger never name an
    input file.
    """
    method = method.lower()
    command = f"dpstream release {method}"
    out_suffix = Path(out_path).suffix.lower()
    if out_suffix not in _TABLE_SUFFIXES:
        raise ParameterError(
            f"The '--out' option of {command} must end in .csv or .parquet. Got "
            f"{Path(out_path).name!r}."
        )
    check_writable(out_path, "--out", command)
    if not Path(input_path).is_file():
        raise ParameterError(f"The INPUT argument of {command}: no file {input_path!r}.")
    refuse_overwriting_inputs(  # the input is sacred (issue 31 §4)
        command, [input_path, hierarchy_path], out_path, store_path=store_path,
        ledger_path=ledger_path,
    )  # fmt: skip
    ledger_args = (ledger_path, budget_epsilon, budget_delta, dataset, new_dataset)
    no_ledger = check_no_ledger(no_ledger, ledger_args, command, store=store_path is not None)
    if correct is not None and (store_path is not None or method in _STREAM_METHODS):
        raise ParameterError(
            f"The '--correct' option of {command} publishes a correction beside the store (a "
            "stored period stands, never silently re-released): drop --store. It applies to "
            "optstream, laplace, dft and pegasus."
        )
    if method in _STREAM_METHODS:
        if hierarchy_path is not None:
            raise ParameterError(
                f"The '--hierarchy' option of {command} does not apply to {method} "
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
            "counter": counter,
            "pak_parameters": pak_parameters,
            "seed": seed,
            "no_ledger": no_ledger,
        }
        from ._stream import release_stream

        release_stream(method, input_path, time_column, column, options, out_path, ledger_args)
        return
    epsilon = option_float(epsilon, "--epsilon", command)
    w = option_int(w, "--w", command)
    if k == "auto":
        k = "auto" if method == "optstream" else 10
    else:
        try:
            k = int(k)
        except ValueError:
            raise ParameterError(
                f"The '--k' option of {command} must be an int in [1, {w}] or 'auto'. "
                f"Got {k!r} instead."
            ) from None
        k = option_int(k, "--k", command, maximum=w)
    if alpha is None:
        raise ParameterError(
            f"The '--alpha' option of {command} is required: the largest change of one value "
            "the release hides, in the data's units (e.g. --alpha 50 for loads in kW)"
            + ("." if method == "optstream" else ", or 'none' with --bound (plain w-event).")
        )
    alpha_value = _alpha(alpha)
    if alpha_value is not None:
        alpha_value = option_float(alpha_value, "--alpha", command)
    elif method == "optstream":
        raise ParameterError(
            f"The '--alpha' option of {command} must be a float in (0, inf); optstream has no "
            "plain w-event mode. Got 'none' instead."
        )
    bound = option_float(bound, "--bound", command)
    if alpha_value is None and bound is None:
        raise ParameterError(
            f"The '--bound' option of {command} is required with --alpha none (plain w-event "
            "privacy needs a public bound on every value)."
        )
    theta = option_float(theta, "--theta", command, allow_zero=True)
    if alpha_value is None:
        unit = WEvent(w=w)
    else:
        unit = WAlphaIndistinguishability(w=w, alpha=alpha_value)
    budget = Budget(epsilon)
    preview = PrivacyRecord.from_guarantee(
        PrivacyGuarantee(unit=unit, budget=budget, proof=""),
        mechanism=method,
        bound=bound if alpha_value is None else None,
        seeded=seed is not None,
    )
    if not (lock_timeout >= 0 and math.isfinite(lock_timeout)):
        raise ParameterError(
            f"The '--lock-timeout' option of {command} must be a number of seconds in [0, inf). "
            f"Got {lock_timeout!r} instead."
        )
    if missing == "unmeasured" and method != "optstream":
        raise ParameterError(
            f"The '--missing' option of {command} is 'unmeasured', which is optstream's policy. "
            "Use dpstream release optstream, or --missing zero."
        )
    if std_errors and (method != "optstream" or (store_path is not None and k != "auto")):
        raise ParameterError(
            f"The '--std-errors' option of {command} applies to optstream, with --store to "
            "--k auto (a store keeps the measurements of k auto periods only). Drop it, or "
            "release with optstream (--k auto with --store)."
        )
    if std_errors and k != "auto" and missing == "unmeasured":
        raise ParameterError(
            f"The '--std-errors' option of {command} with an int --k needs complete readings "
            "(--missing unmeasured is not covered). Drop one of them, or use --k auto."
        )
    parquet_in = str(input_path).lower().endswith((".parquet", ".pq"))
    if std_errors and store_path is not None and parquet_in:
        raise ParameterError(
            f"The '--std-errors' option of {command} with --store needs a CSV or SQLite INPUT "
            "(a Parquet INPUT is streamed period by period). Convert it, or drop --std-errors."
        )
    if std_errors:
        check_writable(std_error_path(out_path), "--out", command)
    workers = option_int(workers, "--workers", command)
    cut = option_int(cut, "--cut", command)
    store_only = cut is not None or workers != 2 or scheduler is not None or lock_timeout
    if store_path is not None or engine != "local" or store_only:
        if method != "optstream" or store_path is None:
            raise ParameterError(
                "The '--store', '--engine', '--scheduler', '--workers', '--cut' and "
                "'--lock-timeout' options of dpstream release apply to optstream with --store. "
                "Add --store STORE (or drop them)."
            )
        from dpstream.store._cli import release_with_store

        options = {"epsilon": epsilon, "w": w, "k": k, "alpha": alpha_value, "bound": bound}
        options.update(theta=theta, seed=seed, lock_timeout=lock_timeout, n_workers=workers)
        if cut is not None:
            options["cut"] = cut
        release_with_store(
            missing=missing,
            timezone=timezone,
            input_path=input_path,
            out_path=out_path,
            store_path=store_path,
            engine=engine,
            scheduler=scheduler,
            hierarchy_path=hierarchy_path,
            time_column=time_column,
            read_wide=_read_input,
            options=options,
            ledger_args=ledger_args,
            std_errors=std_errors,
        )
        show_guarantee(preview)  # after the release succeeded (issue 30)
        if seed is not None:
            click.secho("Seeded run: an experiment, NOT a private release.", fg="yellow", err=True)
        return
    hierarchy = _read_hierarchy(hierarchy_path)
    # One validation pass over INPUT before the ledger is opened (issue 25).
    from dpstream.io._diagnose import read_readings

    readings, _ = read_readings(
        input_path, time_column=time_column, missing=missing, timezone=timezone, owner=command
    )
    frame = readings.frame
    if correct is not None:  # issue 25 §3: a correction is a new, charged release
        frame = _period_rows(frame, correct, w, command)
    _check_frame(frame, command, w=w, hierarchy=hierarchy, bound=bound, missing=missing)
    from dpstream._ledger import calibrated

    epsilon = calibrated(epsilon)  # noise at most the decimal charged (issue 31 §5)
    budget = Budget(epsilon)
    leaves = [str(c) for c in frame.columns if hierarchy is None or c not in hierarchy]
    ledger = None if no_ledger else open_ledger(
        *ledger_args, budget=budget, unit=unit, command=command, streams=leaves,
        hierarchy=hierarchy, seeded=seed is not None,
    )  # fmt: skip
    try:
        result = _release_frame(
            method, frame, missing, False if no_ledger else ledger,
            epsilon=epsilon, w=w, k=k, hierarchy=hierarchy, alpha=alpha_value, bound=bound,
            theta=theta, seed=seed, preview=preview, command=command,
        )  # fmt: skip
    finally:
        if ledger is not None:
            ledger.close()
    record = period_record(result)
    if correct is not None:
        params = {**(record.get("parameters") or {}), "correction_of": str(frame.index[0])}
        record["parameters"] = params
    side = write_output_pair(out_path, lambda tmp: _write_output(result, tmp), record)
    if std_errors:
        errors_file = write_std_errors(result, out_path, hierarchy=hierarchy, command=command)
    show_guarantee(preview)  # after the release succeeded (issue 30)
    label = " (seeded: NOT private)" if seed is not None else ""
    columns = result.shape[1] if result.ndim == 2 else 1
    spent = "" if ledger is None else f"; ledger {ledger.path}: {ledger.remaining_text} left"
    click.echo(
        f"Released {len(result)} steps x {columns} stream(s) with {method}, epsilon={epsilon:g}, "
        f"w={w} to {out_path} (record: {side.name}){spent}{label}."
    )
    if std_errors:
        click.echo(f"Standard errors: {errors_file}.")


def _period_rows(frame, correct: str, w: int, command: str):
    """INPUT's w rows of the period starting at ``--correct PERIOD``."""
    try:
        if isinstance(frame.index, pd.DatetimeIndex):
            start = pd.Timestamp(correct)
            if start.tzinfo is not None:
                start = start.tz_convert("UTC").tz_localize(None)
        else:
            start = int(correct)
    except (ValueError, TypeError):
        start = None
    pos = frame.index.get_indexer([start])[0] if start is not None else -1
    if pos < 0 or pos % w or pos + w > len(frame):  # periods count from INPUT's first step
        raise ParameterError(
            f"The '--correct' option of {command} must be the first time stamp of a whole "
            f"period of INPUT (w = {w} steps from it). Got {correct!r} instead."
        )
    return frame.iloc[pos : pos + w]


def _check_frame(frame, command, *, w, hierarchy, bound, missing) -> None:
    """Everything about INPUT the release would refuse, before the ledger is opened (a ledger
    records the streams' fingerprint on first use: nothing may touch it for a bad INPUT)."""
    check_input_length(frame, w, command)
    from dpstream.pipelines._frames import prepare_frame

    terms = {"frame": "INPUT", "hierarchy": "The '--hierarchy' file"}
    with cli_terms(command, terms, ("bound",)):
        prepare_frame(frame, owner=command, hierarchy=hierarchy, bound=bound, missing=missing)


def _release_frame(
    method, frame, missing, ledger, *, epsilon, w, k, hierarchy, alpha, bound, theta,
    seed, preview, command,
) -> pd.DataFrame | pd.Series:  # fmt: skip
    """Check the diagnosed INPUT against the options, print the guarantee and release it."""
    check_input_length(frame, w, command)
    if seed is not None:
        click.secho("Seeded run: an experiment, NOT a private release.", fg="yellow", err=True)
    n_periods = math.ceil(len(frame) / w)
    common = {"epsilon": epsilon, "w": w, "hierarchy": hierarchy, "alpha": alpha}
    terms = cli_terms(
        command,
        {"frame": "INPUT", "hierarchy": "The '--hierarchy' file"},
        ("epsilon", "w", "k", "alpha", "bound", "theta"),
    )
    with (
        terms,
        progress_bar(  # silent when stderr is not a terminal: one-line errors
            n_periods, unit="period", desc=f"Releasing ({method}, w = {w} steps per period)"
        ) as bar,
    ):
        if method == "optstream":
            import dpstream  # lazily: the OptStream pipeline lives in its own module

            release_optstream = getattr(dpstream, "release_optstream", None)
            if release_optstream is None:
                raise DPStreamError(
                    "The optstream method is not available in this installation "
                    "(dpstream.release_optstream is missing). Use laplace, dft or pegasus."
                )
            policy = {} if missing == "error" else {"missing": missing}
            result = release_optstream(
                frame, k=k, theta=theta, seed=seed, ledger=ledger, progress=bar.update,
                **policy, **common,
            )  # fmt: skip
        else:
            from dpstream.pipelines._wevent_pipeline import (
                release_dft,
                release_laplace,
                release_pegasus,
            )

            extra = {"seed": seed, "bound": bound, "progress": bar.update, "ledger": ledger}
            if missing == "zero":  # already filled by the validation pass; for the record
                extra["missing"] = "zero"
            if method == "laplace":
                result = release_laplace(frame, **common, **extra)
            elif method == "dft":
                result = release_dft(frame, k=k, **common, **extra)
            else:
                result = release_pegasus(frame, **common, **extra)
    return result
