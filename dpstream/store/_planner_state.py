"""The k="auto" planner's streaming state as bytes, for the release store (issue 22).

The in-stream planner keeps running sums (:class:`planner.StreamPlanner` with
:class:`postproc.PriorState`): the variogram's and the prior's, forgotten past the look-backs.
A planner rebuilt from the last ``max(LOOKBACK, PRIOR_DAYS)`` stored periods therefore differs
from the in-memory one once more periods than that were released (the older ones still weigh
in its sums). The store saves the state after each released period instead (one row,
replaced in the transaction that commits the period) and loads it before the next:
:func:`dumps` writes :meth:`planner.StreamPlanner.export`'s arrays and counters as one
``.npz`` (no pickles) with the ordinals of the held periods (the prior's last released
periods, weighed exactly at every plan), which are not saved again: the store already keeps
their measurements and plans, and :func:`loads` reads them back from there.

*Privacy*: the state is computed from released measurements and public history only
(post-processing, [FV19] Theorem 3); saving it adds nothing the store does not already hold.
"""

from __future__ import annotations

import io
import json

import numpy as np

__all__ = ["dumps", "held_count", "loads"]

_FORMAT = 1


def dumps(planner, held: list[int]) -> bytes:
    """``planner``'s state (:meth:`planner.StreamPlanner.export`) and the store ordinals of
    its held periods ``held`` (oldest first) as an ``.npz``."""
    arrays, scalars = planner.export()
    meta = {"format": _FORMAT, "held": [int(o) for o in held], "scalars": scalars}
    buf = io.BytesIO()
    np.savez(buf, **{f"a_{k}": v for k, v in arrays.items()}, meta=np.array(json.dumps(meta)))
    return buf.getvalue()


def held_count(planner) -> int:
    """Periods the planner's prior holds (0 without a prior)."""
    st = getattr(planner, "_state", None)
    return 0 if st is None else len(st._held)


def loads(blob: bytes, planner, read) -> list[int] | None:
    """Restore ``blob`` (:func:`dumps`) into ``planner`` (new, of the same configuration);
    ``read(ordinals)`` returns the held periods' ``(Measurement, PeriodPlan)`` from the store.
    Returns the held ordinals, or None for a format this code does not read (then the
    caller rebuilds the planner by replaying the stored periods)."""
    with np.load(blob if isinstance(blob, str) else io.BytesIO(blob), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != _FORMAT:
            return None
        arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
    held = meta["held"]
    periods = read(held) if held else []
    if periods is None:  # a held period's measurements are missing
        return None
    planner.restore(arrays, meta["scalars"], periods, copy=False)  # (read for it alone)
    return held


def _held_ordinals(store, before: int, n: int, w: int) -> list[int]:
    """The last ``n`` stored full periods (w steps) with measurements before ``before``,
    oldest first: the periods a planner that read every stored period holds."""
    if n <= 0:
        return []
    rows = store._con.execute(
        "SELECT ordinal FROM periods WHERE ordinal < ? AND measured IS NOT NULL AND n_steps = ? "
        "ORDER BY ordinal DESC LIMIT ?",
        (int(before), int(w), int(n)),
    ).fetchall()
    return [int(r[0]) for r in reversed(rows)]


def saved_planner(store, ordinal: int, cfg, *, history=None):
    """The planner before period ``ordinal`` from the store's saved state, or None: none saved,
    or not that of the last stored period before ``ordinal`` (an older store, a period
    released without it, a past period), or public ``history`` given now that the saved
    planner never read (the caller then replays the stored periods, as before)."""
    from ..pipelines import _autoplan
    from ._auto import unpack

    if not _autoplan.STREAMING_STATE:
        return None
    row = store._con.execute(
        "SELECT MAX(ordinal) FROM periods WHERE ordinal < ? AND measured IS NOT NULL",
        (int(ordinal),),
    ).fetchone()
    last = None if row is None or row[0] is None else int(row[0])
    saved = None if last is None else store._planner_state(after=last)
    if saved is None:
        return None
    planner = _autoplan.new_planner(cfg)

    def read(ordinals):
        blobs = store._measured_at(ordinals)
        return [unpack(blobs[o]) for o in ordinals] if len(blobs) == len(ordinals) else None

    if loads(saved[1], planner, read) is None:
        return None
    if history is not None and not planner.from_history:
        return None
    if last != ordinal - 1:
        planner.previous = None  # a gap: no window of w steps straddles it
    return planner


def state_after(store, planner, ordinal: int, measurement, plan, cfg) -> bytes | None:
    """``planner`` (the one that planned period ``ordinal``) updated with the period's
    measurement, as bytes for :meth:`ReleaseStore._put`; None for a planner without a
    streaming state."""
    if not planner.streaming:
        return None
    held = _held_ordinals(store, ordinal, held_count(planner), cfg.w)
    planner.update(measurement, plan)
    if measurement.values.shape[1] == cfg.w:
        held.append(int(ordinal))
    n = held_count(planner)
    return dumps(planner, held[len(held) - n :] if n else [])


# -- a period released split into subtrees (dpstream.engine._auto_split) -------------------------
#
# Every part (each subtree, and the nodes above the cut) saves its own planner's state after
# each released period (:func:`dumps_part`; the store's ``split_state`` table, keyed by the
# cut and the part's root, written in the period's transaction), and loads it before the next
# run's first period where it runs (:func:`load_part`: a Dask worker opens the store file
# read-only, as it reads its leaves from the SQLite/Parquet source): nothing whole-tree crosses
# the client. A subtree's held periods (the prior's last released ones) are read back from the
# stored records, only the subtree's rows (:func:`record_rows`: a split record keeps each
# part's rows contiguous, so a worker decompresses up to its block and reads only that); the
# top's few nodes keep theirs in the state itself (``held_arrays``), since its plan's
# variances of a share-0 aggregate are the sums of leaves below the cut. All-zero arrays (the
# prior's sums before its first fold, public history's without history) are not saved and
# are restored as zeros not yet written (no resident memory). Any part missing or not of this
# cut and node set: the caller replays the stored periods, as before.


def dumps_part(
    planner, held: list[int], *, digest: str, held_arrays: list | None = None, file=None
):
    """A part's planner state as an ``.npz`` (:func:`dumps`, with the part's node ``digest``;
    all-zero arrays left out; ``held_arrays``: the held periods themselves, ``pack``'d, for
    the top). Returns a buffer view (no copy); given a binary ``file``, writes it there
    instead (an array at a time: no copy of the whole state in memory) and returns None."""
    arrays, scalars = planner.export()
    zeros = {k: list(v.shape) for k, v in arrays.items() if v.size > 64 and not v.any()}
    meta = {"format": _FORMAT, "held": [int(o) for o in held], "scalars": scalars,
            "digest": digest, "zeros": zeros, "n_held_arrays": len(held_arrays or ())}  # fmt: skip
    out = {f"a_{k}": v for k, v in arrays.items() if k not in zeros}
    for i, blob in enumerate(held_arrays or ()):
        out[f"h_{i}"] = np.frombuffer(blob, dtype=np.uint8)
    if file is not None:
        np.savez(file, **out, meta=np.array(json.dumps(meta)))
        return None
    buf = io.BytesIO()
    np.savez(buf, **out, meta=np.array(json.dumps(meta)))
    return buf.getbuffer()


class _Unreadable(Exception):
    """A held period's record could not be read (the caller replays)."""


def _handed_over(periods):
    """The held periods ``(Measurement, PeriodPlan)``, each given once and no longer kept
    here (a list is emptied as it is read; an item None: :class:`_Unreadable`)."""
    if isinstance(periods, list):
        periods.reverse()
        while periods:
            item = periods.pop()
            if item is None:
                raise _Unreadable
            yield item
            del item
        return
    for item in periods:
        if item is None:
            raise _Unreadable
        yield item
        del item


def load_part(blob, planner, read, *, digest: str):
    """Restore a part's state (:func:`dumps_part`: its bytes, or the path of a file holding
    them, :func:`part_state_file`) into the new ``planner``; ``read(ordinals)``
    gives the held periods' ``(Measurement, PeriodPlan)`` of the part's rows (None: not
    readable), as a list or an iterable read one period at a time (an item None: that
    period not readable). Returns ``(held ordinals, held pack'd arrays)`` or None (another
    format or node set, or a held period not readable: the caller replays, with a new
    planner).

    Memory: the running sums read back are the planner's own (no copy), and each held
    period's plan is dropped once its error variance is formed (a subtree's state at a
    million meters is ~38 arrays of 39 MB from the eighth day; the copies and the seven
    plans were ~19 more)."""
    from ._auto import unpack

    with np.load(blob if isinstance(blob, str) else io.BytesIO(blob), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != _FORMAT or meta.get("digest") != digest:
            return None
        arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
        packed = [z[f"h_{i}"].tobytes() for i in range(int(meta.get("n_held_arrays", 0)))]
    zeros = meta.get("zeros", {})
    arrays.update({k: np.zeros(tuple(shape)) for k, shape in zeros.items()})
    held = meta["held"]
    if packed:
        periods = [unpack(b) for b in packed] if len(packed) == len(held) else None
    else:
        periods = read(held) if held else []
    if periods is None:
        return None
    try:  # the arrays were read for this planner alone: restored without a copy
        planner.restore(arrays, meta["scalars"], _handed_over(periods), copy=False)
    except _Unreadable:
        return None
    del arrays, periods
    for key, st in (("prior_", planner._state), ("agg_", planner._agg_state)):
        for name, shape in zeros.items():  # zeros not yet written: no resident memory
            if st is not None and name.startswith(key):
                setattr(st, name[len(key) :], np.zeros(tuple(shape)))
    return held, packed


def open_readonly(path):
    """A read-only connection to the store file ``path`` (a worker's)."""
    import sqlite3
    from pathlib import Path

    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)


def part_state(con, cut: int, root: str, ordinal: int) -> bytes | None:
    """The part ``root``'s saved state after period ``ordinal`` at ``cut``, or None."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'split_state'").fetchone() is None:
        return None  # an older store
    rows = con.execute(
        "SELECT ordinal, data FROM split_state WHERE cut = ? AND root = ? ORDER BY part",
        (int(cut), str(root)),
    ).fetchall()
    if not rows or {int(o) for o, _ in rows} != {int(ordinal)}:
        return None
    return b"".join(d for _, d in rows)


def part_state_file(con, cut: int, root: str, ordinal: int, path: str) -> bool:
    """Write the part ``root``'s saved state after period ``ordinal`` at ``cut`` to the file
    ``path``, a stored part (row) at a time; False if none is saved (nothing written). A
    subtree's state at a million meters is about 1.5 GB from the eighth day: read whole
    (:func:`part_state`), its rows and their join would be held twice over."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'split_state'").fetchone() is None:
        return False  # an older store
    ordinals = con.execute(
        "SELECT DISTINCT ordinal FROM split_state WHERE cut = ? AND root = ?",
        (int(cut), str(root)),
    ).fetchall()
    if [int(o) for (o,) in ordinals] != [int(ordinal)]:
        return False
    rows = con.execute(
        "SELECT data FROM split_state WHERE cut = ? AND root = ? ORDER BY part",
        (int(cut), str(root)),
    )
    with open(path, "wb") as f:
        for (data,) in rows:
            f.write(data)
    return True


def saved_roots(con, cut: int, ordinal: int) -> set[str]:
    """The parts with a saved state after period ``ordinal`` at ``cut``."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'split_state'").fetchone() is None:
        return set()
    rows = con.execute(
        "SELECT DISTINCT root FROM split_state WHERE cut = ? AND ordinal = ?",
        (int(cut), int(ordinal)),
    ).fetchall()
    return {r[0] for r in rows}


class _BlobFile(io.RawIOBase):
    """The bytes of one or more SQLite blobs, joined, as a seekable read-only file."""

    def __init__(self, blobs: list) -> None:
        self._blobs = blobs
        self._sizes = [len(b) for b in blobs]
        self._starts = np.r_[0, np.cumsum(self._sizes)].astype(np.int64)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: int(self._starts[-1])}[whence]
        self._pos = max(base + int(offset), 0)
        return self._pos

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        n = 0
        while n < len(view) and self._pos < self._starts[-1]:
            i = int(np.searchsorted(self._starts, self._pos, side="right")) - 1
            blob = self._blobs[i]
            blob.seek(self._pos - int(self._starts[i]))
            got = blob.read(min(len(view) - n, self._sizes[i] - blob.tell()))
            view[n : n + len(got)] = got
            n += len(got)
            self._pos += len(got)
        return n

    def close(self) -> None:
        for b in self._blobs:
            b.close()
        super().close()


def _record_file(con, ordinal: int):
    """Period ``ordinal``'s record (``measured``, or its parts) as a file, or None."""
    row = con.execute(
        "SELECT length(measured) FROM periods WHERE ordinal = ? AND measured IS NOT NULL",
        (int(ordinal),),
    ).fetchone()
    if row is None:
        return None
    if row[0]:
        blobs = [con.blobopen("periods", "measured", int(ordinal), readonly=True)]
    else:
        ids = con.execute(
            "SELECT rowid FROM measured_parts WHERE ordinal = ? ORDER BY part", (int(ordinal),)
        ).fetchall()
        blobs = [con.blobopen("measured_parts", "data", int(i), readonly=True) for (i,) in ids]
    return io.BufferedReader(_BlobFile(blobs), buffer_size=1 << 20)


def _member_rows(zf, name: str, positions: np.ndarray) -> np.ndarray:
    """Rows ``positions`` of the ``.npy`` member ``name``: a contiguous block is read alone
    (the stream decompressed up to it), other rows from the whole array."""
    fmt = np.lib.format
    with zf.open(name + ".npy") as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        n = positions.size
        a = int(positions[0]) if n else 0
        if not fortran and n and np.array_equal(positions, np.arange(a, a + n)):
            row = int(dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64)))
            f.seek(f.tell() + a * row)
            data = f.read(n * row)
            return np.frombuffer(data, dtype=dtype).reshape((n, *shape[1:])).copy()
    with zf.open(name + ".npy") as f:
        return fmt.read_array(f, allow_pickle=False)[positions]


def record_rows(con, ordinal: int, rows: np.ndarray):
    """``(Measurement, PeriodPlan)`` of the nodes ``rows`` (in that order) of period
    ``ordinal``'s stored record (as :func:`dpstream.store._auto.unpack`, then restricted to
    ``rows``), reading only those rows where the record keeps them together; None if the
    period has no record or its readings were partly unmeasured."""
    import zipfile

    from mechanisms.optstream._sampling import interpolation_matrix
    from planner._stream_plan import PeriodPlan

    from ..pipelines._period_steps import Measurement

    f = _record_file(con, ordinal)
    if f is None:
        return None
    rows = np.asarray(rows, dtype=np.int64)
    with f, zipfile.ZipFile(f) as zf:
        names = {x[:-4] for x in zf.namelist()}
        if "observed" in names:
            return None
        with zf.open("plan_scalars.npy") as g:
            scalars = json.loads(str(np.lib.format.read_array(g, allow_pickle=False)))
        if "order" in names:  # pack_parts: rows in part order
            with zf.open("order.npy") as g:
                order = np.lib.format.read_array(g, allow_pickle=False)
            inv = np.empty_like(order)
            inv[order] = np.arange(order.size)
            pos = inv[rows]
            kw = {k[5:]: _member_rows(zf, k, pos) for k in names if k.startswith("plan_")
                  and k != "plan_scalars"}  # fmt: skip
            values = _member_rows(zf, "values", pos)
            r = values.shape[1]
            plan = PeriodPlan(**kw, **{k: tuple(v) if isinstance(v, list) else v
                                       for k, v in scalars.items()})  # fmt: skip
            mask = np.zeros((1, r), dtype=bool)
            mask[0, plan.positions(r)] = True
            mi = interpolation_matrix(mask)[0]
            noise = _member_rows(zf, "noise_node", pos)[:, None] * np.diag(mi @ mi.T)[None, :]
            sampled = np.broadcast_to(mask[0], values.shape)
        else:  # a whole period's record (pack)
            kw = {k[5:]: _member_rows(zf, k, rows) for k in names if k.startswith("plan_")
                  and k != "plan_scalars"}  # fmt: skip
            plan = PeriodPlan(**kw, **{k: tuple(v) if isinstance(v, list) else v
                                       for k, v in scalars.items()})  # fmt: skip
            values = _member_rows(zf, "values", rows)
            noise = _member_rows(zf, "noise", rows)
            sampled = _member_rows(zf, "sampled", rows)
    return Measurement(values=values, noise=noise, sampled=sampled), plan
