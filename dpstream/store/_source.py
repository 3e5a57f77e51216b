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
    "release_parquet_to_store",
    "scan_parquet",
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
        checks a frame: every (series, step) exactly once, finite, >= 0, at most the bound."""
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
        uniq, step = np.unique(stamps, return_inverse=True)
        if uniq.size != self.w:
            raise DomainError(
                f"The INPUT of {self.owner} must hold {self.w} distinct time stamps in every "
                f"period; one holds {uniq.size}."
            )
        cell = where.astype(np.int64) * self.w + step
        counts = np.bincount(cell, minlength=len(names) * self.w)
        if (counts > 1).any():
            raise DomainError(
                f"The INPUT of {self.owner} has a duplicated (unique_id, ds) row. Aggregate or "
                "drop the duplicates first."
            )
        if (counts == 0).any():
            raise DomainError(
                f"The INPUT of {self.owner} is ragged: some series have no row in a "
                "period. Every series must cover the same time stamps."
            )
        out = np.empty(len(names) * self.w)
        out[cell] = y
        del table, where, stamps, y, cell, counts
        pa.default_memory_pool().release_unused()  # the read's buffers back to the OS
        if not np.isfinite(out).all():
            raise DomainError(
                f"The INPUT of {self.owner} must hold finite numbers only (no missing reading, "
                "no infinity). Fill or fix them before releasing."
            )
        if (out < 0).any():
            raise DomainError(
                f"The INPUT of {self.owner} must hold non-negative loads. Fix the data (or "
                "shift it by a public offset) before releasing."
            )
        if self.bound is not None and (out > self.bound).any():
            raise DomainError(
                f"The INPUT of {self.owner} must lie in [0, {self.bound:g}] (the declared "
                "bound); some leaf entries lie above it. Clip the data or declare a larger "
                "public bound."
            )
        return out.reshape(len(names), self.w)


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
) -> list[int]:
    """:func:`release_to_store` for a Parquet file (wide or long) read lazily, period by period,
    in the process that releases the period; returns the ordinals of the file's periods (read
    them back with :meth:`ReleaseStore.read` or stream them with ``write_periods``).

    Nothing but the file's time stamps and series names is read here: every new period is
    first validated where it runs (a mapped pass), then charged, released and committed.

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
    scan = scan_parquet(path, time_column, _OWNER) if scan is None else scan
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

    def leaves(i: int) -> ParquetLeaves:
        return ParquetLeaves(
            scan=slim,
            start=scan.stamps[i * wp],
            stop=scan.stamps[(i + 1) * wp - 1],
            w=wp,
            bound=bound,
            owner=_OWNER,
        )

    _, t = Grid.stamps(scan.stamps)
    return release_new_periods(
        store,
        p,
        nodes=nodes,
        tree=tree,
        grid=grid,
        first=int(t[0]),
        n_periods=len(scan.stamps) // wp,
        values_of=period,
        check=lambda i: period(i).check,
        leaves_of=leaves,
        cut=cut,
        scheduler=scheduler,
        progress=progress,
    )
