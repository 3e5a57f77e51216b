"""Write stored periods to CSV or Parquet one period at a time (wide or long)."""

from __future__ import annotations

from pathlib import Path

from mechanisms import ParameterError

from ..io._long import wide_to_long

__all__ = ["write_periods"]


def write_periods(store, ordinals, path, *, long: bool, time_name: str) -> Path:
    """Stream the released ``ordinals`` of ``store`` to ``path`` (.csv or .parquet), period by
    period, never holding more than one period: wide (time column + one column per node) or
    long (``unique_id``, ``ds``, ``y``; rows by series then time within each period)."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ParameterError(
            f"The 'path' argument of write_periods must end in .csv or .parquet. Got {file.name!r}."
        )
    writer = None
    try:
        for n, ordinal in enumerate(sorted(ordinals)):
            frame = store.read([ordinal])
            frame.index.name = time_name
            table = wide_to_long(frame) if long else frame.reset_index()
            if suffix == ".csv":
                table.to_csv(file, mode="w" if n == 0 else "a", header=n == 0, index=False)
                continue
            import pyarrow as pa
            import pyarrow.parquet as pq

            arrow = pa.Table.from_pandas(table, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(str(file), arrow.schema)
            writer.write_table(arrow)
    finally:
        if writer is not None:
            writer.close()
    return file
