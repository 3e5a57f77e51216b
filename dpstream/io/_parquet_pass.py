"""The one validation pass over a Parquet file, in blocks (issue 25; the store's scale path).

A Parquet INPUT released into a store is read period by period where each period runs
(:mod:`dpstream.store._source`), so no process holds the file. Its diagnosis must not hold it
either, and must say what :func:`dpstream.io.read_readings` says of the same readings in a CSV
file: the same rule, the same first offending series and time stamp, no value and no count.

:func:`diagnose_parquet` reads a small file whole (:func:`read_readings`). A large one (more than
:data:`WHOLE_CELLS` cells) is read twice, never whole:

1. in record batches, in file order: the time stamps (a stamp that is not a date or an integer
   is named by its row), wide rows out of time order, text in the values, the series in
   first-seen order and, per distinct stamp, the first series seen at it; then the regular grid
   of the distinct stamps (:func:`dpstream.io._diagnose._grid`: a stamp off it, a skipped
   daylight-saving hour);
2. in blocks of whole time ranges (at most :data:`BLOCK_CELLS` (series, step) cells, a Parquet
   filter on the time column, so row groups outside the range are skipped by their statistics):
   duplicated (series, stamp) pairs, missing readings (no row, NaN), infinite and negative
   values.

Each check keeps its first offender in the order the whole-file pass uses (duplicates by series
then stamp; missing, infinite and negative readings by stamp then series), and the checks are
reported in the whole-file pass's order. Only ``missing="error"`` and UTC (or offset-aware)
stamps: a Parquet INPUT of the store is released as it is read, period by period.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError

from ._diagnose import (
    _duplicate_message,
    _first_duplicate,
    _grid,
    _infinite_message,
    _input,
    _label,
    _missing_message,
    _negative_message,
    _parse_stamps,
    _values,
)
from ._long import DS, ID, Y

__all__ = ["BLOCK_CELLS", "WHOLE_CELLS", "diagnose_parquet"]

#: A file of at most this many cells (rows x columns) is diagnosed whole (read_readings).
WHOLE_CELLS = 1 << 24
#: (series, step) cells per block of the blockwise pass (about 16 bytes each in memory).
BLOCK_CELLS = 1 << 22
_BATCH = 1 << 18


def diagnose_parquet(
    path: str | Path, *, time_column: str | None = None, owner: str = "diagnose_parquet"
) -> bool:
    """Diagnose a long or wide Parquet file without holding it: raise its first problem as
    :func:`dpstream.io.read_readings` would (``missing="error"``, no time zone).

    Returns whether the file is long. Raises :class:`~mechanisms.DomainError` (the problem,
    its first series and stamp) or :class:`~mechanisms.ParameterError` (columns, the file).
    """
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(str(path))
    except (OSError, ValueError) as exc:
        raise ParameterError(
            f"{_input(owner)} file {Path(path).name!r} could not be read as Parquet "
            f"({type(exc).__name__})."
        ) from None
    names = [n for n in file.schema_arrow.names if not n.startswith("__index_level_")]
    cells = file.metadata.num_rows * max(len(names), 1)
    long = {ID, DS, Y} == set(names)
    if cells <= WHOLE_CELLS:
        from ._diagnose import read_readings

        return read_readings(str(path), time_column=time_column, owner=owner)[1]
    if long:
        time = DS
    else:
        time = time_column or ("time" if "time" in names else names[0])
        if time not in names:
            raise ParameterError(
                f"The '--time-column' option of {owner} must name a column of INPUT. Got "
                f"{time!r}; columns are {names[:10]}."
            )
    kind_type = file.schema_arrow.field(time).type
    import pyarrow as pa

    if not (pa.types.is_timestamp(kind_type) or pa.types.is_integer(kind_type)):
        raise DomainError(
            f"The time column {time!r} of {_input(owner)} must hold Parquet timestamps or "
            "integers to be read in blocks (a large file). Write it with typed time stamps."
        )
    series = [n for n in names if n != time]
    scan = _first_pass(file, long=long, time=time, series=series, owner=owner)
    _second_pass(str(path), scan, long=long, time=time, tz=getattr(kind_type, "tz", None),
                 owner=owner)  # fmt: skip
    return long


class _Scan:
    """What the first pass keeps: no value, only the file's shape."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}  # series -> code, first-seen order
        self.first: dict[int, str] = {}  # distinct stamp -> first series seen at it
        self.kind = "int"
        self.text: str | None = None  # the first text message (file order)
        self.text_col: dict[int, str] = {}  # wide: column -> its first text message
        self.grid_error: DomainError | None = None
        self.grid: tuple[int, int, int] | None = None
        self.names: list[str] = []


def _first_pass(file, *, long: bool, time: str, series: list[str], owner: str) -> _Scan:
    scan = _Scan()
    row0, last = 0, None
    columns = [ID, DS, Y] if long else [time, *series]
    for batch in file.iter_batches(batch_size=_BATCH, columns=columns):
        frame = batch.to_pandas()
        n = len(frame)
        if long:
            ids = frame[ID].astype(str)
            kind, t = _parse_stamps(frame[DS], ids, None, owner, row0)
            ids_arr = ids.to_numpy(dtype=object)
            new = [s for s in dict.fromkeys(ids_arr.tolist()) if s not in scan.ids]
            base = len(scan.ids)
            scan.ids.update((s, base + i) for i, s in enumerate(new))
            if scan.text is None:
                try:
                    _values(frame[Y], ids_arr, kind, t, owner)
                except DomainError as exc:
                    scan.text = str(exc)
            firsts = pd.Series(ids_arr).groupby(t, sort=False).first()
        else:
            kind, t = _parse_stamps(frame[time], None, None, owner, row0)
            prev = t if last is None else np.concatenate([[last], t])
            back = np.diff(prev) < 0
            if back.any():  # as diagnose_wide: after the stamps, before the values
                j = int(np.argmax(back)) + (0 if last is None else -1)
                scan.text = scan.text or (
                    f"{_input(owner)} must list its rows in time order; the row at "
                    f"{_label(kind, int(t[j + 1]))} comes after a later one. Sort the rows by "
                    "time."
                )
                scan.text_col.clear()
                scan.text_col[-1] = scan.text  # outranks text in any column
            if n:
                last = int(t[-1])
            for j, c in enumerate(series):
                col = frame[c]
                numeric = pd.api.types.is_numeric_dtype(col.dtype) and not (
                    pd.api.types.is_bool_dtype(col.dtype)
                )
                if numeric or j in scan.text_col or -1 in scan.text_col:
                    continue
                try:
                    _values(col, np.full(n, c, dtype=object), kind, t, owner)
                except DomainError as exc:
                    scan.text_col[j] = str(exc)
            firsts = (
                pd.Series(np.full(n, series[0] if series else "", dtype=object))
                .groupby(t, sort=False)
                .first()
            )
        scan.kind = kind
        for stamp, s in zip(firsts.index.to_numpy(dtype=np.int64), firsts.to_numpy(), strict=True):
            scan.first.setdefault(int(stamp), str(s))
        row0 += n
    if not long:
        scan.ids = {c: j for j, c in enumerate(series)}
        if scan.text_col:
            scan.text = scan.text_col[min(scan.text_col)]
    if scan.text is not None:
        raise DomainError(scan.text)
    scan.names = list(scan.ids)
    if scan.first:
        uniq = np.array(sorted(scan.first), dtype=np.int64)
        who = np.array([scan.first[int(x)] for x in uniq], dtype=object)
        try:
            scan.grid = _grid(scan.kind, uniq, who, owner, None)
        except DomainError as exc:
            scan.grid_error = exc
    return scan


def _bounds(stamps: np.ndarray, kind: str, tz) -> tuple[object, object]:
    """The Parquet filter values of the first and last stamp of a block."""
    lo, hi = int(stamps[0]), int(stamps[-1])
    if kind == "int":
        return lo, hi
    if tz is None:
        return pd.Timestamp(lo), pd.Timestamp(hi)
    return pd.Timestamp(lo, tz="UTC"), pd.Timestamp(hi, tz="UTC")


def _blocks(scan: _Scan) -> list[np.ndarray]:
    """Stamps of each block: whole runs of the grid (every step, present or not) when the
    grid holds, else of the distinct stamps (the duplicate check only)."""
    n_ids = max(len(scan.names), 1)
    per = max(BLOCK_CELLS // n_ids, 1)
    if scan.grid is not None:
        origin, step, n = scan.grid
        stamps = origin + step * np.arange(n, dtype=np.int64)
    else:
        stamps = np.array(sorted(scan.first), dtype=np.int64)
    return [stamps[i : i + per] for i in range(0, stamps.size, per)]


def _read_block(path: str, columns: list[str], time: str, lo, hi) -> pd.DataFrame:
    """The rows of ``lo <= time <= hi``, streamed in record batches and filtered batch by
    batch (row groups outside the range skipped by their statistics; one batch and the
    block's rows in memory, whatever the file's row order)."""
    import pyarrow as pa
    import pyarrow.dataset as pds

    field = pds.field(time)
    scanner = pds.dataset(path, format="parquet").scanner(
        columns=columns,
        filter=(field >= pa.scalar(lo)) & (field <= pa.scalar(hi)),
        batch_size=_BATCH,
        batch_readahead=1,  # 0 hangs (pyarrow 26): one batch ahead
        fragment_readahead=1,
    )
    return scanner.to_table().to_pandas()


def _second_pass(path: str, scan: _Scan, *, long: bool, time: str, tz, owner: str) -> None:
    names, kind = scan.names, scan.kind
    codes_of = scan.ids
    n_ids = len(names)
    dup = None  # (code, stamp, equal, hint), the smallest (code, stamp)
    firsts: dict[str, str] = {}  # missing / infinite / negative: the first, by stamp then series
    for stamps in _blocks(scan):
        lo, hi = _bounds(stamps, kind, tz)
        frame = _read_block(path, [ID, DS, Y] if long else [time, *names], time, lo, hi)
        if long:
            codes = frame[ID].astype(str).map(codes_of).to_numpy(dtype=np.int64)
            _, t = _parse_stamps(frame[DS], None, None, owner)
            y = pd.to_numeric(frame[Y], errors="coerce").to_numpy(dtype=np.float64)
        else:
            _, tt = _parse_stamps(frame[time], None, None, owner)
            block = frame[names].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
            codes = np.tile(np.arange(n_ids, dtype=np.int64), len(frame))
            t = np.repeat(tt, n_ids)
            y = block.reshape(-1)
        del frame
        found = _first_duplicate(t, codes, y, n_ids, kind, None) if t.size else None
        if found is not None and (dup is None or (found[0], found[1]) < (dup[0], dup[1])):
            dup = found
        if scan.grid is None or dup is not None or len(firsts) == 3:
            continue  # nothing below can outrank a duplicate (or a stamp off the grid)
        origin, step, _ = scan.grid
        pos = (t - int(stamps[0])) // step
        values = np.full((stamps.size, n_ids), np.nan)
        values[pos, codes] = y
        observed = ~np.isnan(values)
        checks = {
            "missing": ~observed,
            "infinite": observed & ~np.isfinite(values),
            "negative": observed & (values < 0),
        }
        for what, bad in checks.items():
            if what not in firsts and bad.any():
                i, c = np.argwhere(bad)[0]
                firsts[what] = (names[c], _label(kind, int(stamps[i])))
    if dup is not None:
        code, stamp, equal, hint = dup
        raise DomainError(_duplicate_message(owner, equal, names[code], _label(kind, stamp), hint))
    if scan.grid_error is not None:
        raise scan.grid_error
    if "missing" in firsts:
        raise DomainError(_missing_message(owner, owner, *firsts["missing"]))
    if "infinite" in firsts:
        raise DomainError(_infinite_message(owner, *firsts["infinite"]))
    if "negative" in firsts:
        raise DomainError(_negative_message(owner, *firsts["negative"]))
