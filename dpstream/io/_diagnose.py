"""One validation pass over meter readings: diagnose, then say what to fix (issue 25).

Real meter files have holes, readings sent twice, days of 46 or 50 half-hours in local time,
stray text. :func:`diagnose_long` and :func:`diagnose_wide` read the file's *shape* once and name
the first problem found with the first offending series and time stamp, so an operator knows
what to fix; they return a wide frame on a regular UTC grid (one column per series) with the
policy for missing readings applied. They run before any ledger is opened, any budget is
charged, any noise is drawn or any file is written. A Parquet file too large to hold is
diagnosed in blocks with the same messages (:mod:`dpstream.io._parquet_pass`).

Order of the checks (the first failure is raised, a :class:`~mechanisms.DomainError`):

1. columns and time stamps: unparseable stamps, time-zone handling (see below);
2. text in the values (a value that is not a number);
3. duplicated (series, stamp) pairs, with the same or with different values;
4. the grid: the step is the most common spacing of the distinct stamps; a stamp off that
   grid ("a step other than the grid's") is refused;
5. missing (series, step) pairs on the grid, and NaN values (a missing reading): refused with
   ``missing="error"``, filled with 0 by ``"zero"``, kept as *unmeasured* by ``"unmeasured"``
   (a public mask, see ``docs/privacy.md``, "Missing readings");
6. infinite and negative values.

What a message shows
--------------------
Series names and time stamps are the file's shape, which the operator holds; values are not.
A message names the rule, the first offending (series, stamp) and the fix, and never a value
or a count of offending values (how many readings are negative is a statistic of private
data). Nothing of the diagnosis enters an output or a privacy record except the policy name.

Time zones
----------
Stamps written with an offset (``2016-03-27T01:30:00+01:00``) are converted to UTC. Naive
stamps are read as UTC unless ``timezone`` names the zone they were written in: then they are
localised (the repeated hour of a DST autumn day is resolved by order, the skipped spring hour
simply has no rows) and converted to UTC. A file of naive stamps that looks like local time
(every series repeats the same stamps, or a whole hour is absent on a DST day) is refused
with a hint to pass ``--timezone``: the release is always on a UTC grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError

__all__ = ["MISSING_POLICIES", "Readings", "diagnose_long", "diagnose_wide", "read_readings"]

#: Policies for missing readings: refuse, count as 0, or leave unmeasured (public mask).
MISSING_POLICIES = ("error", "zero", "unmeasured")
ID, DS, Y = "unique_id", "ds", "y"


@dataclass(frozen=True, slots=True, kw_only=True)
class Readings:
    """A diagnosed input: a wide frame on a regular grid and which readings were observed."""

    frame: pd.DataFrame
    """Wide frame (one column per series, first-seen order), index on the regular grid (UTC,
    tz-naive, or integers); NaN where a reading is missing, except with ``missing="zero"``."""
    observed: np.ndarray | None
    """Boolean (n_steps, n_series), False where a reading is missing (public operational data
    under ``missing="unmeasured"``; with ``"zero"`` the frame holds 0 there, and the store
    remembers those readings to refuse them when they arrive late); None when every reading is
    present."""
    missing: str
    """The policy applied: ``"error"``, ``"zero"`` or ``"unmeasured"``."""


def _cli(owner: str) -> bool:
    return owner.startswith("dpstream ")


def _subject(owner: str) -> str:
    """``in INPUT of dpstream release optstream`` (CLI terms) or ``of read_readings``."""
    return f"in INPUT of {owner}" if _cli(owner) else f"of {owner}"


def _input(owner: str) -> str:
    return f"INPUT of {owner}" if _cli(owner) else f"The input of {owner}"


def _opt(name: str, owner: str) -> str:
    if _cli(owner):
        return f"The '--{name.replace('_', '-')}' option of {owner}"
    return f"The {name!r} parameter of {owner}"


def _at(series: object, stamp: object) -> str:
    return f"series {str(series)!r} at {stamp}"


def _fix_missing(command: str) -> str:
    return (
        "Fill it, or choose a policy: --missing zero (a missing reading counts as 0) or "
        "--missing unmeasured (released without it; see docs/privacy.md)"
        if _cli(command)
        else "Fill it, or pass missing='zero' or missing='unmeasured'"
    )


def _check_timezone(timezone: str | None, owner: str) -> str | None:
    """An IANA zone name, checked before anything is read."""
    if timezone is None:
        return None
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(str(timezone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ParameterError(
            f"{_opt('timezone', owner)} must name an IANA time zone (e.g. Europe/Paris). Got "
            f"{timezone!r} instead."
        ) from None
    return str(timezone)


def _check_policy(missing: str, owner: str) -> str:
    if missing not in MISSING_POLICIES:
        raise ParameterError(
            f"The 'missing' parameter of {owner} must be one of {MISSING_POLICIES}. Got "
            f"{missing!r} instead."
        )
    return missing


def _parse_stamps(
    raw: pd.Series, ids: pd.Series | None, timezone: str | None, owner: str, row0: int = 0
):
    """Parse stamps to int64 (ns since epoch, UTC) or keep integers; returns (kind, int64).
    ``row0``: rows of the file before ``raw`` (a block of a file read in blocks)."""
    if pd.api.types.is_integer_dtype(raw.dtype):
        if timezone is not None:
            raise ParameterError(
                f"{_opt('timezone', owner)} applies to dates; the time stamps are "
                "integers. Drop it."
            )
        return "int", raw.to_numpy(dtype=np.int64)
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        stamps = raw
    else:
        text = raw.astype(str)
        try:
            stamps = pd.to_datetime(text, errors="coerce", utc=False, format="mixed")
        except ValueError:  # several UTC offsets (a DST change written with offsets)
            stamps = pd.to_datetime(text, errors="coerce", utc=True, format="mixed")
        bad = stamps.isna().to_numpy() & raw.notna().to_numpy()
        bad |= raw.isna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            where = f"row {row0 + i + 2}"
            if ids is not None:
                where = f"series {str(ids.iloc[i])!r}, {where}"
            raise DomainError(
                f"The time column {_subject(owner)} must hold dates or integers; {where} holds "
                "one that "
                "is not (text or empty). Fix or drop that row."
            )
        if stamps.dtype == object:  # mixed offsets in older pandas
            stamps = pd.to_datetime(text, errors="coerce", utc=True, format="mixed")
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    elif timezone is not None:
        try:
            if ids is None:
                local = stamps.dt.tz_localize(timezone, ambiguous="infer", nonexistent="raise")
            else:  # the repeated autumn hour is resolved within each series, by order
                local = stamps.groupby(ids.to_numpy(), sort=False).transform(
                    lambda s: s.dt.tz_localize(timezone, ambiguous="infer", nonexistent="raise")
                )
        except (ValueError, TypeError) as exc:  # pytz/zoneinfo errors subclass these
            raise DomainError(
                f"The time stamps {_subject(owner)} cannot be read in the time zone {timezone!r} "
                f"({type(exc).__name__}: a stamp that does not exist there, or a repeated hour "
                "out of order). Check --timezone, or write the stamps in UTC."
            ) from None
        stamps = pd.to_datetime(local, utc=True).dt.tz_localize(None)
    return "datetime", stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)


def _sunday(t: int) -> bool:
    return pd.Timestamp(t).day_of_week == 6


def _label(kind: str, t: int) -> str:
    return str(pd.Timestamp(t)) if kind == "datetime" else str(t)


def _values(raw: pd.Series, ids: np.ndarray, kind: str, t: np.ndarray, owner: str) -> np.ndarray:
    y = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    text = np.isnan(y) & raw.notna().to_numpy()
    if text.any():
        i = int(np.argmax(text))
        raise DomainError(
            f"The readings {_subject(owner)} must be numbers; "
            f"{_at(ids[i], _label(kind, int(t[i])))} "
            "holds text. Fix it, or delete the value (an empty cell is a missing reading)."
        )
    return y


def _grid(kind: str, t: np.ndarray, ids: np.ndarray, owner: str, timezone: str | None):
    """Regular grid (origin, step, n) of the distinct stamps; refuses a stamp off the grid."""
    uniq = np.unique(t)
    if uniq.size == 1:
        return int(uniq[0]), 1, 1
    gaps = np.diff(uniq)
    vals, counts = np.unique(gaps, return_counts=True)
    step = int(vals[np.argmax(counts)])
    off = (uniq - uniq[0]) % step != 0
    if off.any():
        bad = int(uniq[np.argmax(off)])
        s = ids[np.argmax(t == bad)]
        unit = (
            pd.tseries.frequencies.to_offset(pd.Timedelta(step, "ns")).freqstr
            if kind == "datetime"
            else f"{step}"
        )
        raise DomainError(
            f"The time stamps {_subject(owner)} must lie on one regular grid (a step of "
            f"{unit}, the file's most common spacing); {_at(s, _label(kind, bad))} is off it. "
            "Resample or drop the readings between steps."
        )
    n = int((uniq[-1] - uniq[0]) // step) + 1
    if kind == "datetime" and timezone is None and uniq.size < n:
        # A whole hour absent for every series on one day only: local time, spring forward?
        absent = np.setdiff1d(uniq[0] + step * np.arange(n, dtype=np.int64), uniq)
        hour = 3_600_000_000_000
        if (
            absent.size
            and absent.size * step == hour
            and (absent[-1] - absent[0]) < hour
            and _sunday(int(absent[0]))  # DST changes (EU, North America) fall on Sundays
        ):
            raise DomainError(
                f"The time stamps {_subject(owner)} skip one hour for every series at "
                f"{_label(kind, int(absent[0]))}: local time on a daylight-saving day? Pass "
                "--timezone ZONE (e.g. Europe/Paris) to read them as local times (the release "
                "is on a UTC grid), or write the stamps in UTC."
            )
    return int(uniq[0]), step, n


def _duplicate_message(owner, equal, series, label, hint: bool) -> str:
    tip = (
        " Every series repeats this stamp: local time on a daylight-saving day? Pass "
        "--timezone ZONE to read local times (released on a UTC grid)."
        if hint
        else ""
    )
    return (
        f"The readings {_subject(owner)} have a duplicated (series, time stamp) pair, "
        f"{'with the same value' if equal else 'with different values'}: first "
        f"{_at(series, label)}. Keep one reading per series and step.{tip}"
    )


def _missing_message(owner, command, series, label) -> str:
    return (
        f"The readings {_subject(owner)} have a missing reading: first "
        f"{_at(series, label)} (no row, an empty value or NaN). {_fix_missing(command)}."
    )


def _infinite_message(owner, series, label) -> str:
    return (
        f"The readings {_subject(owner)} must be finite; {_at(series, label)} is infinite. Fix it."
    )


def _negative_message(owner, series, label) -> str:
    return (
        f"The readings {_subject(owner)} must be non-negative loads; first negative "
        f"{_at(series, label)}. Fix the data (or shift it by a public offset)."
    )


def _first_duplicate(t, codes, y, n_ids, kind, timezone):
    """(code, stamp, equal, hint) of the first duplicated (series, stamp) pair in (series,
    stamp) order, or None."""
    order = np.lexsort((t, codes))
    ts, cs = t[order], codes[order]
    same = (np.diff(ts) == 0) & (np.diff(cs) == 0)
    if not same.any():
        return None
    j = int(np.argmax(same))
    a, b = y[order[j]], y[order[j + 1]]
    equal = bool((a == b) or (np.isnan(a) and np.isnan(b)))
    stamp = int(ts[j])
    everyone = all(((t == stamp) & (codes == c)).sum() > 1 for c in range(min(n_ids, 50)))
    hint = everyone and kind == "datetime" and timezone is None and _sunday(stamp)
    return int(cs[j]), stamp, equal, hint


def _assemble(
    kind: str,
    t: np.ndarray,
    ids: np.ndarray,
    y: np.ndarray,
    *,
    missing: str,
    timezone: str | None,
    owner: str,
    command: str,
) -> Readings:
    id_codes, names = pd.factorize(ids, sort=False)
    n_ids = len(names)
    if t.size == 0:  # no rows: the caller's length checks name what is needed
        empty = np.empty(0, dtype="datetime64[ns]" if kind == "datetime" else np.int64)
        frame = pd.DataFrame(
            np.empty((0, n_ids)), index=pd.Index(empty, name=DS), columns=list(map(str, names))
        )
        return Readings(frame=frame, observed=None, missing=missing)
    # Duplicated (series, stamp) pairs, before the grid (a DST repeat shows up here).
    dup = _first_duplicate(t, id_codes, y, n_ids, kind, timezone)
    if dup is not None:
        code, stamp, equal, hint = dup
        raise DomainError(_duplicate_message(owner, equal, names[code], _label(kind, stamp), hint))
    origin, step, n = _grid(kind, t, ids, owner, timezone)
    pos = ((t - origin) // step).astype(np.int64)
    values = np.full((n, n_ids), np.nan)
    values[pos, id_codes] = y
    observed = ~np.isnan(values)
    if not observed.all():
        if missing == "error":
            step_i, col = np.argwhere(~observed)[0]
            label = _label(kind, origin + int(step_i) * step)
            raise DomainError(_missing_message(owner, command, names[col], label))
    finite = np.isfinite(values) | ~observed
    if not finite.all():
        step_i, col = np.argwhere(~finite)[0]
        label = _label(kind, origin + int(step_i) * step)
        raise DomainError(_infinite_message(owner, names[col], label))
    neg = observed & (values < 0)
    if neg.any():
        step_i, col = np.argwhere(neg)[0]
        label = _label(kind, origin + int(step_i) * step)
        raise DomainError(_negative_message(owner, names[col], label))
    stamps = origin + step * np.arange(n, dtype=np.int64)
    index = (
        pd.DatetimeIndex(stamps.astype("datetime64[ns]"), name=DS)
        if kind == "datetime"
        else pd.Index(stamps, name=DS)
    )
    frame = pd.DataFrame(values, index=index, columns=[str(c) for c in names])
    mask = None if observed.all() else observed
    if missing == "zero":
        frame = frame.fillna(0.0)  # the mask still says which readings were missing
    return Readings(frame=frame, observed=mask, missing=missing)


def diagnose_long(
    frame: pd.DataFrame,
    *,
    missing: str = "error",
    timezone: str | None = None,
    owner: str = "diagnose_long",
) -> Readings:
    """Diagnose a long frame (``unique_id``, ``ds``, ``y``, any row order) in one pass.

    Parameters
    ----------
    frame : pandas.DataFrame
        As read from CSV, Parquet or a database table (:func:`dpstream.io.read_table`).
    missing : {"error", "zero", "unmeasured"}, default "error"
        What a missing (series, step) pair or a NaN reading means (module Notes).
    timezone : str, optional
        The IANA zone naive stamps were written in (e.g. ``"Europe/Paris"``); default UTC.
    owner : str
        The command or function named in messages.

    Returns
    -------
    Readings

    Raises
    ------
    DomainError
        The first problem found, with its first offending series and time stamp, no value.
    ParameterError
        An unknown policy, missing columns.
    """
    missing = _check_policy(missing, owner)
    timezone = _check_timezone(timezone, owner)
    if frame.index.name is not None:
        frame = frame.reset_index()
    absent = [c for c in (ID, DS, Y) if c not in frame.columns]
    if absent:
        raise ParameterError(
            f"{_input(owner)} (long) must have columns 'unique_id', 'ds', 'y'; {absent} "
            f"are missing. Columns: {[str(c) for c in frame.columns][:10]}."
        )
    ids = frame[ID].astype(str)
    kind, t = _parse_stamps(frame[DS], ids, timezone, owner)
    ids_arr = ids.to_numpy(dtype=object)
    y = _values(frame[Y], ids_arr, kind, t, owner)
    return _assemble(
        kind, t, ids_arr, y, missing=missing, timezone=timezone, owner=owner, command=owner
    )


def diagnose_wide(
    frame: pd.DataFrame,
    *,
    missing: str = "error",
    timezone: str | None = None,
    owner: str = "diagnose_wide",
) -> Readings:
    """Diagnose a wide frame (time index or ``time`` column, one column per series).

    The index (or, for a frame with a plain range index, its first column) holds the stamps,
    in time order (a row earlier than the one before it is refused, naming it). Checks, result
    and errors as :func:`diagnose_long`.
    """
    missing = _check_policy(missing, owner)
    timezone = _check_timezone(timezone, owner)
    if not isinstance(frame, pd.DataFrame):
        raise DomainError(
            f"{_input(owner)} must be a pandas DataFrame. Got {type(frame).__name__}."
        )
    if frame.index.name is None and isinstance(frame.index, pd.RangeIndex):
        frame = frame.set_index(frame.columns[0])
    if frame.shape[1] == 0:
        raise DomainError(f"{_input(owner)} has no series columns.")
    cols = [str(c) for c in frame.columns]
    if len(set(cols)) != len(cols):
        raise DomainError(f"{_input(owner)} has duplicated column names. Rename them.")
    n_t, n_s = frame.shape
    kind, t = _parse_stamps(pd.Series(frame.index), None, timezone, owner)
    back = np.diff(t) < 0
    if back.any():  # a wide table is read in time order (a long one in any order)
        raise DomainError(
            f"{_input(owner)} must list its rows in time order; the row at "
            f"{_label(kind, int(t[int(np.argmax(back)) + 1]))} comes after a later one. Sort "
            "the rows by time."
        )
    ids = np.repeat(np.array(cols, dtype=object)[None, :], n_t, axis=0).reshape(-1)
    tt = np.repeat(t, n_s)
    numeric = [
        pd.api.types.is_numeric_dtype(dt) and not pd.api.types.is_bool_dtype(dt)
        for dt in frame.dtypes
    ]
    values = np.empty((n_t, n_s))
    if any(numeric):  # one conversion for every numeric column (100,000 feeders)
        values[:, numeric] = frame.loc[:, numeric].to_numpy(dtype=np.float64)
    for j in np.flatnonzero(~np.asarray(numeric, dtype=bool)):  # text columns, one by one
        c = cols[j]
        values[:, j] = _values(frame.iloc[:, j], np.full(n_t, c, dtype=object), kind, t, owner)
    y = values.reshape(-1)
    return _assemble(
        kind, tt, ids, y, missing=missing, timezone=timezone, owner=owner, command=owner
    )


def _only_table(file: Path, owner: str) -> str | None:
    """The one table of an SQLite file given without a table name (else None: read_table's
    own message names the rule)."""
    if file.suffix.lower() not in (".db", ".sqlite", ".sqlite3") or not file.is_file():
        return None
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        finally:
            con.close()
    except sqlite3.Error:
        return None
    if len(names) > 1:
        raise ParameterError(
            f"{_input(owner)} is an SQLite file with several tables {names[:5]}; name the one "
            "that holds the readings (Python: table=...)."
        )
    return names[0] if names else None


def read_readings(
    source: object,
    *,
    table: str | None = None,
    time_column: str | None = None,
    missing: str = "error",
    timezone: str | None = None,
    owner: str = "read_readings",
) -> tuple[Readings, bool]:
    """Read meter readings (CSV, Parquet, SQLite; long or wide) and diagnose them in one pass.

    An SQLite file given without ``table`` is read from its only table. A table with exactly
    the columns ``unique_id``, ``ds``, ``y`` is long; any other is wide,
    its time column ``time_column`` (default: ``time``, else the first column). Returns the
    :class:`Readings` and whether the input was long. Nothing but the file is read.
    """
    from ._long import is_long, read_table

    missing = _check_policy(missing, owner)
    timezone = _check_timezone(timezone, owner)
    if table is None and isinstance(source, str | Path):
        table = _only_table(Path(source), owner)
    try:
        raw = read_table(source, table=table, owner=owner)
    except ParameterError as exc:
        if not _cli(owner):
            raise
        text = str(exc).replace("The 'source' argument of", "The INPUT argument of")
        raise ParameterError(text.replace("The file ", "The INPUT file ")) from None
    if is_long(raw):
        return diagnose_long(raw, missing=missing, timezone=timezone, owner=owner), True
    if raw.index.name is not None:  # Parquet written from a time-indexed frame
        raw = raw.reset_index()
    if raw.shape[1] < 2:
        raise DomainError(
            f"{_input(owner)} must be long (unique_id, ds, y) or wide (a time column and "
            f"one column per series). Columns: {[str(c) for c in raw.columns][:10]}."
        )
    if time_column is None:
        time_column = "time" if "time" in raw.columns else str(raw.columns[0])
    if time_column not in raw.columns:
        raise ParameterError(
            f"{_opt('time_column', owner)} must name a column of the input. Got "
            f"{time_column!r}; columns are {[str(c) for c in raw.columns][:10]}."
        )
    wide = raw.set_index(time_column)
    readings = diagnose_wide(wide, missing=missing, timezone=timezone, owner=owner)
    readings.frame.index.name = time_column
    return readings, False
