"""``dpstream release optstream INPUT ... --store STORE``: the daily job from the command line.

INPUT is wide (a time column and one column per leaf, as ``dpstream data export`` writes) or
long (``unique_id``, ``ds``, ``y``); the hierarchy is the JSON ``data export`` writes, a
(child, parent) CSV/Parquet table or an ``S_df``. OUT is written in INPUT's format; a long OUT
also gets its wide twin (``OUT_STEM.wide.SUFFIX``).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import click
import pandas as pd

from mechanisms import ParameterError

from ..commands._accounting import open_ledger, write_output_pair
from ..commands._checks import check_input_length, cli_terms
from ..commands._outputs import store_period_records
from ..commands._progress import progress_bar
from ..engine import ENGINES
from ..io import read_hierarchy, wide_to_long, write_table
from ..io._long import DS
from ._export import write_periods
from ._source import release_parquet_to_store, scan_parquet
from ._store import ReleaseStore

__all__ = ["release_with_store"]

_OWNER = "dpstream release optstream"


def _read(
    path: str, time_column: str | None, missing: str = "error", timezone: str | None = None
) -> tuple[pd.DataFrame, bool, str, object]:
    """(wide frame, input was long, time column name, observed mask or None): one validation
    pass (issue 25)."""
    from ..io._diagnose import read_readings

    readings, long = read_readings(
        path, time_column=time_column, missing=missing, timezone=timezone, owner=_OWNER
    )
    frame = readings.frame
    return frame, long, (DS if long else str(frame.index.name)), readings.observed


def _terms():
    """The store's Python errors in the CLI's terms (issue 30)."""
    return cli_terms(
        _OWNER,
        {"frame": "INPUT", "hierarchy": "The '--hierarchy' file", "path": "The '--store' file"},
        ("epsilon", "w", "k", "alpha", "bound", "theta", "lock_timeout", "cut"),
    )


@contextmanager
def _closing(ledger):
    try:
        yield
    finally:
        if ledger is not None:
            ledger.close()


@contextmanager
def _discard_if_unused(path, created: bool):
    """A store file this run created is removed again if the run fails before releasing
    anything into it (issue 30: a refused release leaves no file behind)."""
    try:
        yield
    except BaseException:
        if created:
            _remove_unused_store(Path(path))
        raise


def _remove_unused_store(path: Path) -> None:
    """Remove ``path`` and its SQLite sidecars if it holds no period and no charge, under
    the store's job lock (a job that holds it, e.g. another run that created the same file
    meanwhile, keeps the file)."""
    import sqlite3

    from ._store import idle_job_lock

    if not path.exists():
        return
    removed = False
    with idle_job_lock(path) as idle:
        if not idle:
            return  # another job holds the store: leave it
        try:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                used = sum(
                    con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                    for table in ("periods", "charges")
                )
            finally:
                con.close()
        except sqlite3.Error:
            return  # not a store this run could read: leave it as it is
        if not used:
            for suffix in ("", "-wal", "-shm", "-journal"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            removed = True
    if removed:
        for suffix in (".lock", ".lock-journal"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)


def _dataset_ledger(ledger_args: tuple, options: dict, ids, hierarchy):
    """The ``--ledger`` or ``--dataset`` ledger, opened (created with --budget-epsilon, else
    with the store's per-window budget); None: the store finds its data set's ledger."""
    ledger_path, budget_eps, budget_dlt, dataset, new_dataset = ledger_args
    if ledger_path is None and budget_eps is None and budget_dlt is None:
        return None  # the store resolves its data set (a --dataset name is passed to it)
    from mechanisms import Budget, WAlphaIndistinguishability, WEvent

    w, alpha = options["w"], options["alpha"]
    unit = WEvent(w=w) if alpha is None else WAlphaIndistinguishability(w=w, alpha=alpha)
    tree = None if hierarchy is None else _children(hierarchy)
    return open_ledger(
        ledger_path, budget_eps, budget_dlt, dataset, new_dataset,
        budget=Budget(options["epsilon"]), unit=unit, command=_OWNER,
        streams=list(map(str, ids)), hierarchy=tree, seeded=options.get("seed") is not None,
        check=False,
    )  # fmt: skip


def _children(hierarchy) -> dict:
    children = getattr(hierarchy, "children", hierarchy)
    return {str(k): [str(c) for c in v] for k, v in dict(children).items()}


def release_with_store(
    *,
    input_path: str,
    out_path: str,
    store_path: str,
    engine: str,
    scheduler: str | None,
    hierarchy_path: str | None,
    time_column: str | None,
    read_wide,
    options: dict,
    missing: str = "error",
    timezone: str | None = None,
    ledger_args: tuple = (None, None, None, None, False),
    std_errors: bool = False,
) -> None:
    """Validate, release the new periods into the store, write OUT, print one summary line.
    ``std_errors``: also the standard error of every value of OUT, period by period from what
    the store keeps (``OUT_STEM.std_error.SUFFIX``, or a ``std_error`` column of a long OUT).

    The store charges its data set's ledger (issue 24 §2): ``--ledger`` (created with
    ``--budget-epsilon``), ``--dataset``'s, or the one its streams are known by."""
    if engine not in ENGINES:
        raise ParameterError(
            f"The '--engine' option of {_OWNER} must be one of {ENGINES}. Got {engine!r}."
        )
    if scheduler is not None and engine != "dask":
        raise ParameterError(
            f"The '--scheduler' option of {_OWNER} needs --engine dask. Got --engine {engine}."
        )
    lazy = Path(input_path).suffix.lower() in (".parquet", ".pq")
    if lazy and missing != "error":
        raise ParameterError(
            f"The '--missing' option of {_OWNER} applies to a CSV or SQLite INPUT with --store "
            "(a Parquet INPUT is read period by period and must be complete). Convert it, or "
            "drop --missing."
        )
    if lazy and timezone is not None:
        raise ParameterError(
            f"The '--timezone' option of {_OWNER} applies to a CSV or SQLite INPUT with --store "
            "(a Parquet INPUT is read period by period on its own time stamps). Write them in "
            "UTC or with their offsets, or drop --timezone."
        )
    w = options["w"]
    if "cut" in options and not lazy:
        raise ParameterError(
            f"The '--cut' option of {_OWNER} splits the periods of a Parquet INPUT. Pass a "
            ".parquet INPUT (or drop --cut)."
        )
    if lazy:  # read period by period where each period runs
        from ..io._parquet_pass import diagnose_parquet

        diagnose_parquet(input_path, time_column=time_column, owner=_OWNER)  # in blocks
        scan = scan_parquet(input_path, time_column, _OWNER)
        long, time_name, ids = scan.long, scan.time, scan.leaves
        n_periods = max(len(scan.stamps) // w, 1)
    else:
        frame, long, time_name, observed = _read(input_path, time_column, missing, timezone)
        check_input_length(frame, w, _OWNER)  # before the hierarchy is matched to its ids
        ids, n_periods = frame.columns, max(len(frame) // w, 1)
    hierarchy = None
    if hierarchy_path is not None:
        hierarchy = read_hierarchy(hierarchy_path, ids=ids, owner=_OWNER)
    if not lazy:  # the store's grid rules, checked before the store file is created (issue 30)
        from ._grid import Grid

        with _terms():
            Grid.from_index(frame.index, w, "ReleaseStore.release_optstream")
    ledger = _dataset_ledger(ledger_args, options, ids, hierarchy)
    dataset, new_dataset = ledger_args[3], bool(ledger_args[4])
    created = not Path(store_path).exists()  # removed again if this run releases nothing
    try:
        store_cm = ReleaseStore(
            store_path, ledger=ledger, dataset=dataset, new_dataset=new_dataset,
            _terms={"dataset": "--dataset", "ledger": "--ledger", "new_dataset": "--new-dataset"},
        )  # fmt: skip
    except BaseException:
        if ledger is not None:
            ledger.close()
        if created:
            _remove_unused_store(Path(store_path))
        raise
    with _discard_if_unused(store_path, created), _terms(), _closing(ledger), store_cm as store:
        before = store.ordinals()
        if not lazy:  # a reading for a period the store released without it (issue 25 §3)
            from ._late import check_late_readings

            check_late_readings(store._con, store.config, before, frame, observed, _OWNER)
        else:  # a changed reading of a released period (issue 25 §3), period by period
            from ._digest import check_parquet_periods

            check_parquet_periods(store._con, store.config, before, scan, _OWNER)
        common = {"hierarchy": hierarchy, "engine": engine, "scheduler": scheduler, **options}
        desc = "Releasing (optstream, new periods)"
        with progress_bar(n_periods, unit="period", desc=desc) as bar:
            if lazy:
                ordinals = release_parquet_to_store(
                    store, input_path, scan=scan, progress=bar.update, **common
                )
            else:
                common.pop("cut", None)
                policy = {} if missing == "error" else {"missing": missing}
                given = frame if observed is None else frame.where(observed)  # the gaps as NaN
                result = store.release_optstream(given, progress=bar.update, **policy, **common)
        if not lazy and not store.readonly:  # remember what was missing (issue 25 §3)
            from ._late import record_missing_readings

            new = store.ordinals() - before
            record_missing_readings(store._con, store.config, new, frame, observed)
        elif not store.readonly:
            from ._digest import record_parquet_periods

            record_parquet_periods(store._con, store.config, store.ordinals() - before, scan)
        record = store.privacy_record()
        added = len(store.ordinals() - before)
        total = len(store.ordinals())
        out = Path(out_path)
        twin = out.with_name(f"{out.stem}.wide{out.suffix}")
        also = f" (and wide {twin.name})" if long else ""
        doc = record.to_dict()
        if missing != "error":  # the policy for missing readings (issue 25)
            doc["parameters"] = {**(doc.get("parameters") or {}), "missing": missing}
        table = store.periods()  # the record lists every period of OUT (issue 30)
        if lazy:
            table = table[table["ordinal"].isin([int(o) for o in ordinals])]
        else:
            starts = result.index[::w]
            if getattr(starts, "tz", None) is not None:  # the store's grid is naive UTC
                starts = starts.tz_convert("UTC").tz_localize(None)
            table = table[table["start"].isin({str(t) for t in starts})]
        sampler = (doc.get("parameters") or {}).get("sampling") or "equal"
        doc["periods"] = store_period_records(table, sampler)
        if lazy:  # streamed from the store, one period at a time

            def write_out(tmp: Path) -> None:
                write_periods(store, ordinals, tmp, long=long, time_name=time_name)

            def write_twin(tmp: Path) -> None:
                write_periods(store, ordinals, tmp, long=False, time_name=time_name)
        else:
            result.index.name = time_name

            def write_out(tmp: Path) -> None:
                if long:
                    write_table(wide_to_long(result), tmp, index=False)
                else:
                    write_table(result, tmp)

            def write_twin(tmp: Path) -> None:
                write_table(result, tmp)

        # OUT.privacy.json, as for every output (issue 30); the record renamed before the data
        # (issue 31 §3): no output without its complete record
        if long:
            write_output_pair(twin, write_twin, doc)
        side = write_output_pair(out, write_out, doc)
        if std_errors and not lazy:  # per period, from the store's measurements (issue 30)
            from .._std_errors import store_std_errors
            from ..commands._outputs import write_std_errors

            order = table.sort_values("start")["ordinal"].astype(int).tolist()
            errors = store_std_errors(store, order, result)
            errors.index = result.index
            errors_file = write_std_errors(
                result, out, hierarchy=None, command=_OWNER, long=long, errors=errors
            )
    label = " (seeded: NOT private)" if options.get("seed") is not None else ""
    click.echo(
        f"Released {added} new period(s), returned {n_periods - added} from the store, to "
        f"{out_path}{also} (record: {side.name}){label}. Store {Path(store_path).name}: "
        f"{total} period(s), each "
        f"charged once (epsilon={options['epsilon']:g} per window of w={w})."
    )
    if std_errors and not lazy:
        click.echo(f"Standard errors: {errors_file}.")
