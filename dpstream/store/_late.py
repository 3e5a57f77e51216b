"""Late readings (issue 25 §3): a reading for a period the store already released is refused.

A period is released once (:mod:`dpstream.store._ledger`): a reading that arrives after its
period was released -- a meter back online the next day, under ``--missing zero`` -- cannot
change what was published. The store remembers, per released period, which (series, step)
readings were *missing* when it released the period (the file's shape, never a value); a later
input that holds one of them is refused before anything is charged or drawn, naming the first
late reading, and the released period stands.

A *changed* value of a reading the store had (a meter correction) is refused too, by comparing
keyed digests of the released input (:mod:`dpstream.store._digest`: no value, and no function of
the values that can be read without a key kept outside the store), naming the first changed
series and stamp. Publishing a correction is a new release of that period, charged again to its
data set's budget ([FV19] Def. 2: a second release of the same period composes, 2ε for every
window that meets it).

The table ``missing_readings(ordinal, series, step)`` lives in the store file; stores without it
simply have no missing readings recorded.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from mechanisms import DomainError

from .._ledger import transaction
from ._digest import check_changed_readings, record_input_digests
from ._grid import Grid

__all__ = ["check_late_readings", "record_missing_readings"]

_TABLE = (
    "CREATE TABLE IF NOT EXISTS missing_readings (ordinal INTEGER NOT NULL, series TEXT NOT "
    "NULL, step INTEGER NOT NULL, PRIMARY KEY (ordinal, series, step))"
)


def _recorded(con: sqlite3.Connection, ordinals: set[int]) -> list[tuple[int, str, int]]:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "missing_readings" not in tables or not ordinals:
        return []
    rows = con.execute("SELECT ordinal, series, step FROM missing_readings ORDER BY 1, 3, 2")
    return [(int(o), str(s), int(k)) for o, s, k in rows if int(o) in ordinals]


def check_late_readings(
    con: sqlite3.Connection,
    config: dict | None,
    released: set[int],
    frame: pd.DataFrame,
    observed: np.ndarray | None,
    owner: str,
    subject: str = "INPUT",
) -> None:
    """Refuse ``frame`` if it holds a reading the store lacked when it released its period.

    ``observed`` (n_steps, n_series) marks the readings present in ``frame`` (None: all).
    Raises :class:`~mechanisms.DomainError` naming the first late (series, stamp) and its
    period, then (:func:`~dpstream.store._digest.check_changed_readings`) a
    :class:`~dpstream.store._digest.ChangedReadingError` naming the first changed one; reads
    the store only.
    """
    if config is None or not released:
        return
    _check_late(con, config, released, frame, observed, owner, subject)
    check_changed_readings(con, config, released, frame, observed, owner, subject)


def _check_late(con, config, released, frame, observed, owner, subject) -> None:
    grid = Grid.from_config(config)
    _, t = Grid.stamps(frame.index)
    cols = {str(c): j for j, c in enumerate(frame.columns)}
    for ordinal, series, step in _recorded(con, released):
        stamp = grid.start(ordinal) + step * grid.step
        row = int(np.searchsorted(t, stamp))
        if row >= t.size or t[row] != stamp or series not in cols:
            continue
        present = True if observed is None else bool(observed[row, cols[series]])
        if present:
            at = pd.Timestamp(stamp) if grid.kind == "datetime" else stamp
            raise DomainError(
                f"{subject} of {owner} has a late reading: series {series!r} at {at} belongs to "
                f"the period starting {grid.label(ordinal)}, which the store released without it. "
                "The released period stands (a period is released once): drop the reading to "
                "release the other periods. A correction is a new release of that period, "
                f"charged again to its data set's budget: --correct {grid.label(ordinal)!r} "
                "without --store."
            )


def record_missing_readings(
    con: sqlite3.Connection,
    config: dict,
    ordinals: set[int],
    frame: pd.DataFrame,
    observed: np.ndarray | None,
) -> None:
    """Remember the readings missing from ``frame`` in the newly released ``ordinals``, and
    the keyed digests of their input (:func:`~dpstream.store._digest.record_input_digests`)."""
    record_input_digests(con, config, ordinals, frame, observed)
    if observed is None or observed.all() or not ordinals:
        return
    grid = Grid.from_config(config)
    _, t = Grid.stamps(frame.index)
    rows, cols = np.nonzero(~observed)
    offset = (t[rows] - grid.origin) // grid.step
    period, step = offset // grid.w, offset % grid.w
    keep = np.isin(period, list(ordinals))
    data = [
        (int(o), str(frame.columns[c]), int(k))
        for o, c, k in zip(period[keep], cols[keep], step[keep], strict=True)
    ]
    if not data:
        return
    with transaction(con):
        con.execute(_TABLE)
        con.executemany("INSERT OR IGNORE INTO missing_readings VALUES (?, ?, ?)", data)
