"""Long frames (``unique_id``, ``ds``, ``y``) <-> wide frames, from CSV, Parquet or a database.

A *long* frame has one row per series and time stamp, Nixtla's convention
(``hierarchicalforecast.utils.aggregate`` returns ``Y_df`` so): ``unique_id`` (str), ``ds``
(datetime or int), ``y`` (float). A *wide* frame is what the pipelines take: a time index and one
column per series. Every error is a typed :class:`~mechanisms.DomainError` or
:class:`~mechanisms.ParameterError` naming the argument, the rule and the first offending
(series, time stamp), never values or counts.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError

__all__ = ["is_long", "long_to_wide", "read_long", "read_table", "wide_to_long", "write_table"]

#: Nixtla's column names.
ID, DS, Y = "unique_id", "ds", "y"
_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def read_table(source: object, *, table: str | None = None, owner: str = "read_table"):
    """Read a CSV or Parquet file, or a table of an SQLite database, as a DataFrame.

    ``source`` is a path (``.csv``, ``.parquet``/``.pq``, or ``.db``/``.sqlite``/``.sqlite3``
    with ``table``), or an open DB-API connection (``sqlite3``, ``duckdb``) with ``table``.
    The table name must be a plain SQL identifier (it cannot be a parameter of the query).
    """
    if isinstance(source, str | Path):
        file = Path(source)
        suffix = file.suffix.lower()
        if suffix not in _TABLE_SUFFIXES + _DB_SUFFIXES:
            raise ParameterError(
                f"The 'source' argument of {owner} must be a .csv, .parquet or SQLite (.db) "
                f"file. Got {file.name!r}."
            )
        if not file.is_file():
            raise ParameterError(f"The 'source' argument of {owner}: no file {str(file)!r}.")
        if suffix in _DB_SUFFIXES:
            con = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
            try:
                return read_table(con, table=table, owner=owner)
            finally:
                con.close()
        try:
            return pd.read_csv(file) if suffix == ".csv" else pd.read_parquet(file)
        except (OSError, ValueError, ImportError) as exc:
            raise ParameterError(
                f"The file {file.name!r} given to {owner} could not be read ({type(exc).__name__})."
            ) from None
    if not hasattr(source, "cursor"):
        raise ParameterError(
            f"The 'source' argument of {owner} must be a file path or a DB-API connection. Got "
            f"{type(source).__name__} instead."
        )
    if table is None or not _IDENT.match(str(table)):
        raise ParameterError(
            f"The 'table' parameter of {owner} must name a table (letters, digits, _). Got "
            f"{table!r} instead."
        )
    cur = source.cursor()
    try:
        cur.execute(f'SELECT * FROM "{table}"')  # identifier checked above
    except Exception as exc:  # sqlite3/duckdb raise their own error classes
        raise ParameterError(
            f"The table {table!r} given to {owner} could not be read ({type(exc).__name__})."
        ) from None
    names = [d[0] for d in cur.description]
    return pd.DataFrame(cur.fetchall(), columns=names)


def is_long(frame: pd.DataFrame) -> bool:
    """True for a long frame: exactly the columns ``unique_id``, ``ds``, ``y`` (any order)."""
    return {str(c) for c in frame.reset_index(drop=frame.index.name is None).columns} == {
        ID,
        DS,
        Y,
    }


def _stamps(values: pd.Series, owner: str) -> pd.Series:
    if pd.api.types.is_integer_dtype(values.dtype) or pd.api.types.is_datetime64_any_dtype(
        values.dtype
    ):
        return values
    try:
        return pd.to_datetime(values)
    except (ValueError, TypeError):
        raise DomainError(
            f"The 'ds' column of {owner} must hold dates or integers; some entries could not "
            "be parsed."
        ) from None


def read_long(source: object, *, table: str | None = None, owner: str = "read_long"):
    """Read a long frame (``unique_id``, ``ds``, ``y``) from CSV, Parquet or a database table.

    Returns the frame with ``unique_id`` as str, ``ds`` parsed (datetime or int) and ``y`` float.
    """
    frame = read_table(source, table=table, owner=owner)
    return check_long(frame, owner)


def check_long(frame: pd.DataFrame, owner: str) -> pd.DataFrame:
    """Validate and normalise a long frame's columns (types only; values by the pipeline)."""
    if not isinstance(frame, pd.DataFrame):
        raise DomainError(
            f"The 'frame' argument of {owner} must be a pandas DataFrame. Got "
            f"{type(frame).__name__} instead."
        )
    if frame.index.name is not None:
        frame = frame.reset_index()
    missing = [c for c in (ID, DS, Y) if c not in frame.columns]
    if missing:
        raise DomainError(
            f"The long frame of {owner} must have columns 'unique_id', 'ds', 'y' (Nixtla's "
            f"convention); {missing} are missing. Columns: {[str(c) for c in frame.columns][:10]}."
        )
    y = pd.to_numeric(frame[Y], errors="coerce")
    text = y.isna().to_numpy() & frame[Y].notna().to_numpy()
    if text.any():  # the first, never how many (a count of private entries)
        i = int(np.argmax(text))
        raise DomainError(
            f"The 'y' column of {owner} must hold numbers only; the entry of series "
            f"{str(frame[ID].iloc[i])!r} at {frame[DS].iloc[i]} is not numeric."
        )
    return pd.DataFrame(
        {ID: frame[ID].astype(str), DS: _stamps(frame[DS], owner), Y: y.astype(np.float64)}
    )


def long_to_wide(frame: pd.DataFrame, *, owner: str = "long_to_wide") -> pd.DataFrame:
    """Pivot a long frame into a wide one: index ``ds`` (sorted), one column per ``unique_id``.

    Raises
    ------
    DomainError
        Missing columns, duplicated (unique_id, ds) rows, or a series without a value at a
        time stamp another series has (a ragged panel): the first offending pair, no count.
    """
    long = check_long(frame, owner)
    # Hand-written with factorize + bincount instead of DataFrame.pivot: one pass over the rows
    # (a day of 100,000 feeders is 4.8 million rows; pivot and duplicated hash them twice more).
    id_codes, ids = pd.factorize(long[ID], sort=False)  # first-seen order
    ds_codes, stamps = pd.factorize(long[DS], sort=True)
    n_ids, n_ds = len(ids), len(stamps)
    key = ds_codes.astype(np.int64) * n_ids + id_codes
    counts = np.bincount(key, minlength=n_ids * n_ds)
    # Messages name the first offending pair (series, time stamp), never how many (issue 25).
    if (counts > 1).any():
        j = int(np.argmax(counts > 1))
        raise DomainError(
            f"The long frame of {owner} has a duplicated (unique_id, ds) pair: first series "
            f"{str(ids[j % n_ids])!r} at {stamps[j // n_ids]}. Keep one reading per series and "
            "step."
        )
    if (counts == 0).any():
        j = int(np.argmax(counts == 0))
        raise DomainError(
            f"The long frame of {owner} is ragged: series {str(ids[j % n_ids])!r} has no row at "
            f"{stamps[j // n_ids]} (a missing reading; the first). Every series must cover the "
            "same time stamps: fill it, or read the file with dpstream.io.read_readings("
            "missing=...)."
        )
    values = np.empty(n_ids * n_ds, dtype=np.float64)
    values[key] = long[Y].to_numpy(dtype=np.float64)
    index = pd.Index(stamps, name=DS)
    return pd.DataFrame(
        values.reshape(n_ds, n_ids), index=index, columns=pd.Index(list(ids), name=None)
    )


def wide_to_long(frame: pd.DataFrame | pd.Series) -> pd.DataFrame:
    """Melt a wide frame (time index, one column per series) into ``unique_id``, ``ds``, ``y``.

    Rows are ordered by series (column order), then time, as Nixtla's ``aggregate`` does.
    """
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    values = frame.to_numpy(dtype=np.float64)
    n_t, n_s = values.shape
    return pd.DataFrame(
        {
            ID: np.repeat(np.array([str(c) for c in frame.columns], dtype=object), n_t),
            DS: np.tile(frame.index.to_numpy(), n_s),
            Y: values.T.reshape(-1),
        }
    )


def write_table(frame: pd.DataFrame, path: str | Path, *, index: bool = True) -> Path:
    """Write a frame to ``path`` as CSV or Parquet (by extension); returns the path."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in _TABLE_SUFFIXES:
        raise ParameterError(
            f"The 'path' argument of write_table must end in .csv or .parquet. Got {file.name!r}."
        )
    frame = frame.copy()
    frame.attrs = {}
    if suffix == ".csv":
        frame.to_csv(file, index=index)
    else:
        frame.to_parquet(file, index=index)
    return file
