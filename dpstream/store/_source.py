"""Periods read lazily from a Parquet file, where they run (the scale path of the store).

The process that plans a release reads only what fixes the periods -- the file's schema, the
distinct time stamps and (long files) the distinct series ids, streamed in record batches -- and
hands each worker a :class:`ParquetPeriod`: the file, the period's time range and the names.
The worker reads that range (a Parquet filter on the time column, row groups skipped by their
statistics), validates it exactly as :func:`dpstream.pipelines._frames.prepare_frame` does and
returns the period's node values. No process holds the whole input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError

from ..io._long import DS, ID, Y, long_to_wide
from ..pipelines._frames import prepare_frame, resolve_hierarchy
from ._grid import Grid
from ._release import _OWNER, _params, release_new_periods

__all__ = [
    "ParquetLeaves",
    "ParquetPeriod",
    "ParquetScan",
    "SQLiteLeaves",
    "SQLiteScan",
    "release_parquet_to_store",
    "scan_parquet",
    "scan_sqlite",
]

_BATCH = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class ParquetScan:
    """What the planning process knows of a Parquet input (no values)."""

    path: str
    long: bool
    time: str
    stamps: pd.Index
    leaves: tuple[str, ...]


def scan_parquet(path: str | Path, time_column: str | None, owner: str) -> ParquetScan:
    """Schema, distinct time stamps and series of a wide or long Parquet file, streamed."""
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(str(path))
    except (OSError, ValueError) as exc:
        raise ParameterError(
            f"The INPUT file {Path(path).name!r} of {owner} could not be read as Parquet "
            f"({type(exc).__name__})."
        ) from None
    names = list(file.schema_arrow.names)
    long = {ID, DS, Y} <= set(names) and len(names) <= 4  # + a pandas index column at most
    time = DS if long else (time_column or ("time" if "time" in names else names[0]))
    if time not in names:
        raise ParameterError(
            f"The '--time-column' option of {owner} must name a column of INPUT. Got "
            f"{time!r}; columns are {names[:10]}."
        )
    stamps, ids = pd.Index([]), {}
    for batch in file.iter_batches(batch_size=_BATCH, columns=[time, ID] if long else [time]):
        part = pd.Index(batch.column(0).to_pandas().unique())
        stamps = part if stamps.empty else stamps.append(part).unique()
        if long:
            ids.update(dict.fromkeys(batch.column(1).to_pandas().unique().tolist()))
    index = stamps.sort_values()
    if not (pd.api.types.is_integer_dtype(index.dtype) or isinstance(index, pd.DatetimeIndex)):
        raise DomainError(
            f"The time column {time!r} of INPUT must hold dates or integers (Parquet "
            "timestamps or ints)."
        )
    if long:
        leaves = tuple(str(i) for i in ids)
    else:
        leaves = tuple(n for n in names if n != time and not n.startswith("__index_level_"))
    return ParquetScan(path=str(path), long=long, time=time, stamps=index, leaves=leaves)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParquetPeriod:
    """One period of a Parquet input, read and validated where it is called (picklable)."""

    scan: ParquetScan
    """The input (path, format, names; ``stamps`` left empty: not needed by a worker)."""
    start: object
    """First time stamp of the period (inclusive)."""
    stop: object
    """Last time stamp of the period (inclusive)."""
    w: int
    """Steps the period must hold."""
    hierarchy: object
    """The ``{parent: [children]}`` mapping (or None)."""
    bound: float | None
    """Public bound on leaf values, if declared."""
    owner: str
    """The public function's name, for messages."""

    def __call__(self) -> np.ndarray:
        """The period's node values (N, w), validated (``DomainError`` as prepare_frame)."""
        scan = self.scan
        filters = [(scan.time, ">=", self.start), (scan.time, "<=", self.stop)]
        frame = pd.read_parquet(scan.path, filters=filters)
        if scan.long:
            wide = long_to_wide(frame, owner=self.owner)
            missing = [leaf for leaf in scan.leaves if leaf not in wide.columns]
            if missing:
                raise DomainError(
                    f"The INPUT of {self.owner} is ragged: {len(missing)} series have no row in "
                    "a period. Every series must cover the same time stamps."
                )
            wide = wide[list(scan.leaves)]
        else:
            wide = frame.reset_index(drop=frame.index.name is None)
            wide = wide.set_index(scan.time)[list(scan.leaves)]
        if len(wide) != self.w:
            raise DomainError(
                f"The INPUT of {self.owner} must hold {self.w} distinct time stamps in every "
                f"period; one holds {len(wide)}."
            )
        sf = prepare_frame(wide, owner=self.owner, hierarchy=self.hierarchy, bound=self.bound)
        return np.ascontiguousarray(sf.values.T)

    def check(self) -> None:
        """Validate the period (what a mapped validation pass runs)."""
        self()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParquetLeaves:
    """Some leaves of one period of a Parquet input, read where they are called (picklable).

    What a subtree of a split period reads (:mod:`dpstream.engine._subtree`): the period's
    time range and, in a long file, only the rows of the given series (a Parquet filter on
    ``unique_id``; row groups skipped by their statistics when the file is sorted by it).
    Validated as :func:`dpstream.pipelines._frames.prepare_frame` does (finite, >= 0, at most
    the bound), with a ``DomainError`` that never quotes a value.
    """

    scan: ParquetScan
    start: object
    stop: object
    w: int
    bound: float | None
    owner: str

    def __call__(self, leaves) -> np.ndarray:
        """Values (len(leaves), w) of ``leaves`` over the period."""
        scan, names = self.scan, [str(n) for n in leaves]
        filters = [(scan.time, ">=", self.start), (scan.time, "<=", self.stop)]
        if scan.long:
            return self._long(names, filters)
        else:
            frame = pd.read_parquet(scan.path, columns=[scan.time, *names], filters=filters)
            wide = frame.set_index(scan.time)[names]
        if len(wide) != self.w:
            raise DomainError(
                f"The INPUT of {self.owner} must hold {self.w} distinct time stamps in every "
                f"period; one holds {len(wide)}."
            )
        sf = prepare_frame(wide, owner=self.owner, hierarchy=None, bound=self.bound)
        return np.ascontiguousarray(sf.values.T)

    def _long(self, names: list[str], filters: list) -> np.ndarray:
        """A long file's rows of ``names`` placed in an (L, w) array with pyarrow and numpy
        (no Python object per row: a region's 5 million rows), checked as prepare_frame
        checks a frame (:func:`_place`)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        ids = [(ID, ">=", min(names)), (ID, "<=", max(names)), (ID, "in", names)]
        table = pq.read_table(self.scan.path, columns=[ID, DS, Y], filters=[*filters, *ids])
        where = pc.index_in(table.column(ID), value_set=pa.array(names)).to_numpy(
            zero_copy_only=False
        )
        stamps = table.column(DS).to_numpy()
        y = table.column(Y).cast(pa.float64()).to_numpy(zero_copy_only=False)
        del table
        pa.default_memory_pool().release_unused()  # the read's buffers back to the OS
        return _place(where, stamps, y, n=len(names), w=self.w, bound=self.bound, owner=self.owner)


def _place(where, stamps, y, *, n: int, w: int, bound: float | None, owner: str) -> np.ndarray:
    """Long rows (series index ``where``, time stamp, value) of one period placed in an
    (n, w) array and checked as prepare_frame checks a frame: every (series, step) exactly
    once, finite, >= 0, at most the bound (messages never quote a value)."""
    uniq, step = np.unique(stamps, return_inverse=True)
    if uniq.size != w:
        raise DomainError(
            f"The INPUT of {owner} must hold {w} distinct time stamps in every period; one "
            f"holds {uniq.size}."
        )
    cell = np.asarray(where, dtype=np.int64) * w + step
    counts = np.bincount(cell, minlength=n * w)
    if (counts > 1).any():
        raise DomainError(
            f"The INPUT of {owner} has a duplicated (unique_id, ds) row. Aggregate or drop the "
            "duplicates first."
        )
    if (counts == 0).any():
        raise DomainError(
            f"The INPUT of {owner} is ragged: some series have no row in a period. Every "
            "series must cover the same time stamps."
        )
    out = np.empty(n * w)
    out[cell] = y
    del cell, counts
    if not np.isfinite(out).all():
        raise DomainError(
            f"The INPUT of {owner} must hold finite numbers only (no missing reading, no "
            "infinity). Fill or fix them before releasing."
        )
    if (out < 0).any():
        raise DomainError(
            f"The INPUT of {owner} must hold non-negative loads. Fix the data (or shift it by "
            "a public offset) before releasing."
        )
    if bound is not None and (out > bound).any():
        raise DomainError(
            f"The INPUT of {owner} must lie in [0, {bound:g}] (the declared bound); some leaf "
            "entries lie above it. Clip the data or declare a larger public bound."
        )
    return out.reshape(n, w)


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLiteScan:
    """What the planning process knows of a long SQLite table (no values)."""

    path: str
    table: str
    stamps: pd.Index
    """The distinct time stamps, parsed (dates or ints), sorted."""
    raw: tuple
    """The same stamps as stored (the workers' range bounds), in the same order."""
    leaves: tuple[str, ...]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def scan_sqlite(path: str | Path, table: str | None, owner: str) -> SQLiteScan:
    """Distinct time stamps and series of a long table (``unique_id``, ``ds``, ``y``) of an
    SQLite file (its only table when ``table`` is None), read with SQL (no values)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            if table is None and len(names) == 1:
                table = names[0]
            if table not in names:
                raise ParameterError(
                    f"The INPUT of {owner} is an SQLite file: name one of its tables "
                    f"{names[:5]} (got {table!r})."
                )
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({_quote(table)})")]
            if not {ID, DS, Y} <= set(cols):
                raise ParameterError(
                    f"The SQLite table {table!r} of {owner} must be long: columns {ID!r}, "
                    f"{DS!r}, {Y!r}. Got {cols[:10]}."
                )
            raw = [r[0] for r in con.execute(f"SELECT DISTINCT {DS} FROM {_quote(table)}")]
            ids = [r[0] for r in con.execute(f"SELECT DISTINCT {ID} FROM {_quote(table)}")]
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise ParameterError(
            f"The INPUT file {Path(path).name!r} of {owner} could not be read as SQLite "
            f"({type(exc).__name__})."
        ) from None
    parsed = pd.Index(raw)
    if not pd.api.types.is_integer_dtype(parsed.dtype):
        parsed = pd.DatetimeIndex(pd.to_datetime(parsed))
    order = np.argsort(parsed.to_numpy(), kind="stable")
    return SQLiteScan(
        path=str(path), table=table, stamps=parsed[order], raw=tuple(raw[i] for i in order),
        leaves=tuple(str(i) for i in dict.fromkeys(ids)),
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLiteLeaves:
    """Some leaves of one period of a long SQLite table, read where they are called
    (picklable): the SQLite twin of :class:`ParquetLeaves` (stdlib ``sqlite3``, read-only).

    The leaves are matched through a temporary table (any number of them) and the period by
    the stored stamps' range; validated as :func:`_place` (prepare_frame's rules)."""

    path: str
    table: str
    start: object
    """First stored stamp of the period (inclusive)."""
    stop: object
    """Last stored stamp of the period (inclusive)."""
    w: int
    bound: float | None
    owner: str

    def __call__(self, leaves) -> np.ndarray:
        """Values (len(leaves), w) of ``leaves`` over the period."""
        import sqlite3

        names = [str(n) for n in leaves]
        con = sqlite3.connect(f"file:{Path(self.path)}?mode=ro", uri=True)
        try:
            con.execute("CREATE TEMP TABLE want (id TEXT PRIMARY KEY, pos INTEGER)")
            con.executemany("INSERT INTO want VALUES (?, ?)", ((x, i) for i, x in enumerate(names)))
            rows = con.execute(
                f"SELECT want.pos, t.{DS}, t.{Y} FROM {_quote(self.table)} AS t JOIN want ON "
                f"CAST(t.{ID} AS TEXT) = want.id WHERE t.{DS} >= ? AND t.{DS} <= ?",
                (self.start, self.stop),
            ).fetchall()
        finally:
            con.close()
        if rows:
            where, stamps, y = (np.array(c) for c in zip(*rows, strict=True))
        else:
            where, stamps, y = np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise DomainError(
                f"The INPUT of {self.owner} must hold numbers in column {Y!r} (no text)."
            ) from None
        return _place(where, stamps, y, n=len(names), w=self.w, bound=self.bound, owner=self.owner)


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLitePeriod:
    """One whole period of a long SQLite table (every node's values, (N, w)), read and
    validated where it is called: the SQLite twin of :class:`ParquetPeriod`."""

    leaves: SQLiteLeaves
    names: tuple[str, ...]
    hierarchy: object
    bound: float | None
    owner: str

    def __call__(self) -> np.ndarray:
        x = self.leaves(self.names)
        frame = pd.DataFrame(x.T, columns=list(self.names))
        sf = prepare_frame(frame, owner=self.owner, hierarchy=self.hierarchy, bound=self.bound)
        return np.ascontiguousarray(sf.values.T)

    def check(self) -> None:
        """Validate the period (what a mapped validation pass runs)."""
        self()


_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def release_parquet_to_store(
    store,
    path,
    *,
    epsilon: float,
    w: int = 48,
    k: int | str = "auto",
    sampling: str | None = None,
    theta: float | None = None,
    hierarchy: object = None,
    alpha: float | None,
    bound: float | None = None,
    weights: str = "variance",
    shares=None,
    delta: float | None = None,
    noise: str = "laplace",
    target: str = "all",
    level_shares: object = None,
    prior: bool = True,
    history: object = None,
    seed: object = None,
    engine: str = "local",
    scheduler: str | None = None,
    n_workers: int = 2,
    lock_timeout: float = 0.0,
    time_column: str | None = None,
    progress=None,
    scan=None,
    cut: int | None = None,
    table: str | None = None,
) -> list[int]:
    """:func:`release_to_store` for a Parquet file (wide or long) read lazily, period by period,
    in the process that releases the period; returns the ordinals of the file's periods (read
    them back with :meth:`ReleaseStore.read` or stream them with ``write_periods``).

    Nothing but the file's time stamps and series names is read here: every new period is
    first validated where it runs (a mapped pass), then charged, released and committed.

    ``path`` may also be an SQLite file (``.db``, ``.sqlite``, ``.sqlite3``) holding a long
    table (``unique_id``, ``ds``, ``y``; ``table``: its name, default its only table): the
    periods and the subtrees' leaves are then read with SQL where they run
    (:class:`SQLiteLeaves`), as from Parquet.

    ``k`` defaults to ``"auto"`` (as :func:`release_to_store` and the in-memory release), with
    ``history`` as there (public history, or an earlier k="auto" release just before).

    With ``engine="dask"`` (or a ``cut`` given) and a hierarchy with a level below the root
    whose nodes all have children, each period is split *inside*: subtrees rooted at depth
    ``cut`` (None: chosen for ``n_workers``) are Dask actors (``engine="local"``: objects of
    this process) that read their own leaves from the file (:class:`ParquetLeaves`), validate
    them, measure them and take part in the distributed elimination. A fixed k
    (``sampling="equal"`` or ``"l1"``): :func:`dpstream.engine._subtree.release_split`. The
    default k="auto" (a hierarchy of more than 64 leaves): every subtree also holds its own
    in-stream planner across the call's periods
    (:class:`dpstream.engine._auto_split.AutoSplit`); a smaller tree is planned whole, so
    ``engine="dask"`` then runs each whole period on a worker and a ``cut`` is refused. The
    output does not depend on the cut or the engine (seeded: equal to rounding). Each period
    is then validated right before its own charge (no pass over every period first).
    Otherwise periods are mapped whole over the workers.
    """
    p = _params(
        epsilon=epsilon,
        w=w,
        k=k,
        sampling=sampling,
        theta=theta,
        alpha=alpha,
        bound=bound,
        weights=weights,
        shares=shares,
        seed=seed,
        engine=engine,
        n_workers=n_workers,
        auto={"delta": delta, "noise": noise, "target": target, "level_shares": level_shares,
              "prior": prior},
        lock_timeout=lock_timeout,
    )  # fmt: skip
    sqlite = Path(path).suffix.lower() in _DB_SUFFIXES
    if scan is None:
        scan = (
            scan_sqlite(path, table, _OWNER) if sqlite else scan_parquet(path, time_column, _OWNER)
        )
    tree = resolve_hierarchy(hierarchy, scan.leaves, _OWNER)
    grid = Grid.from_index(scan.stamps, p["w"], _OWNER)
    if tree is None:
        nodes = scan.leaves
    else:
        nodes = tree.nodes
        hierarchy = {a: list(c) for a, c in tree.children.items()}
    if history is not None:  # validated before anything is charged (as release_to_store)
        from types import SimpleNamespace

        from ._auto import prepare_history

        frame = SimpleNamespace(nodes=tuple(nodes), hierarchy=tree, index=scan.stamps)
        p["history"] = prepare_history(history, p, frame, hierarchy=hierarchy, owner=_OWNER)
    wp = p["w"]
    if sqlite:  # workers read their leaves with SQL (issue 22.3)

        def leaves(i: int) -> SQLiteLeaves:
            return SQLiteLeaves(
                path=scan.path, table=scan.table, start=scan.raw[i * wp],
                stop=scan.raw[(i + 1) * wp - 1], w=wp, bound=bound, owner=_OWNER,
            )  # fmt: skip

        def period(i: int) -> SQLitePeriod:
            return SQLitePeriod(
                leaves=leaves(i), names=scan.leaves, hierarchy=hierarchy, bound=bound,
                owner=_OWNER,
            )  # fmt: skip

        return _release_lazily(store, p, scan, tree, grid, nodes, period, leaves, cut,
                               scheduler, progress)  # fmt: skip
    slim = ParquetScan(
        path=scan.path, long=scan.long, time=scan.time, stamps=pd.Index([]), leaves=scan.leaves
    )  # what a worker needs: no stamps

    def period(i: int) -> ParquetPeriod:
        return ParquetPeriod(
            scan=slim,
            start=scan.stamps[i * wp],
            stop=scan.stamps[(i + 1) * wp - 1],
            w=wp,
            hierarchy=hierarchy,
            bound=bound,
            owner=_OWNER,
        )

    # a subtree reads the names it is given: no list of every series in its source (17 MB
    # pickled at a million meters, sent to every subtree each period)
    bare = ParquetScan(path=scan.path, long=scan.long, time=scan.time, stamps=pd.Index([]),
                       leaves=())  # fmt: skip

    def leaves(i: int) -> ParquetLeaves:
        return ParquetLeaves(
            scan=bare,
            start=scan.stamps[i * wp],
            stop=scan.stamps[(i + 1) * wp - 1],
            w=wp,
            bound=bound,
            owner=_OWNER,
        )

    return _release_lazily(store, p, scan, tree, grid, nodes, period, leaves, cut, scheduler,
                           progress)  # fmt: skip


def _release_lazily(store, p, scan, tree, grid, nodes, period, leaves, cut, scheduler, progress):
    _, t = Grid.stamps(scan.stamps)
    return release_new_periods(
        store,
        p,
        nodes=nodes,
        tree=tree,
        grid=grid,
        first=int(t[0]),
        n_periods=len(scan.stamps) // p["w"],
        values_of=period,
        check=lambda i: period(i).check,
        leaves_of=leaves,
        cut=cut,
        scheduler=scheduler,
        progress=progress,
    )
