"""Changed readings (issue 25 §3): a keyed digest of each released period's input.

A period is released once. When a later file re-supplies a period the store already released,
identical readings pass (the period is returned as stored), but a *changed* reading -- a meter
correction -- must not pass silently: the operator is told which series and time stamp changed
(never the value, never how many) and that a correction is a new, charged release
(``--correct PERIOD``).

What the store keeps, per released period and leaf series, is never the readings:

* a 16-byte keyed BLAKE2b digest of the series' readings in the period (certain detection of
  any change, 2⁻¹²⁸ collisions), and
* one byte per reading, the first byte of AES-128 of (reading, step, series) -- a keyed
  pseudo-random tag that only localises the first changed step (a changed reading keeps its
  tag with probability 1/256; the message then names the period's first stamp).

Why keyed, and why the key is not in the store. The store file is copied, backed up and read by
tools (``python -m dpstream.store``); an *unkeyed* hash of readings is a dictionary for them: an
adversary who knows all but one reading of a series-period (the differential-privacy adversary)
hashes the candidates of the last one and finds it, and a one-byte tag per reading would narrow
any reading to 1/256 of its range. A keyed digest (a pseudo-random function of the readings under
a 256-bit secret) reveals nothing but equality to someone without the key, so the key is kept
*outside* the store: ``$DPSTREAM_HOME/store-keys/STORE_ID.key`` (32 bytes from the operating
system's secure source, mode 0600), where the data sets' ledgers live. A store leaked alone then
leaks no function of its readings; a store moved without its key can no longer check re-supplied
periods (a notice says so; nothing is refused for it).

A Parquet INPUT (read period by period, :mod:`dpstream.store._source`) is checked and recorded
one period at a time (:func:`check_parquet_periods`, :func:`record_parquet_periods`): each
re-supplied or newly released period is read once more, alone, in the job's process.

Table ``input_digests(ordinal, series, digests, tags)`` in the store file: ``series`` the JSON
list of the series in the blobs' order, ``digests`` (n × 16 bytes), ``tags`` (n × steps bytes).
Nothing here is charged, drawn or written to an output.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import DomainError

from .._ledger import transaction
from ._grid import Grid

__all__ = [
    "ChangedReadingError",
    "check_changed_readings",
    "check_parquet_periods",
    "key_path",
    "record_input_digests",
    "record_parquet_periods",
]

_TABLE = (
    "CREATE TABLE IF NOT EXISTS input_digests (ordinal INTEGER PRIMARY KEY, series TEXT NOT "
    "NULL, digests BLOB NOT NULL, tags BLOB NOT NULL)"
)
_NAN = np.array([np.nan], dtype="<f8").view("<u8")[0]  # one bit pattern for every NaN


class ChangedReadingError(DomainError):
    """A re-supplied period's readings differ from those the store released it from."""


def key_path(store_id: str) -> Path:
    """``$DPSTREAM_HOME/store-keys/STORE_ID.key``: the store's digest key (never in the store)."""
    from dpstream._dataset import home

    return home() / "store-keys" / f"{store_id}.key"


def _store_id(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = 'id'").fetchone()
    return None if row is None else str(row[0])


def _key(con: sqlite3.Connection, *, create: bool) -> bytes | None:
    """The store's 32-byte key (created, mode 0600, when ``create`` and absent)."""
    sid = _store_id(con)
    if sid is None:
        return None
    path = key_path(sid)
    try:
        key = path.read_bytes()
        return key if len(key) == 32 else None
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another job created it first
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(32))  # the operating system's secure source
    return path.read_bytes()


def _leaves(config: dict) -> list[str]:
    tree = config.get("hierarchy") or {}
    return [str(n) for n in config["nodes"] if n not in tree]


def _bits(values: np.ndarray) -> np.ndarray:
    """(n, w) float64 -> uint64 bit patterns, one per value: -0.0 as 0.0, one NaN."""
    x = np.ascontiguousarray(values, dtype="<f8") + 0.0
    bits = x.view("<u8").copy()
    bits[np.isnan(x)] = _NAN
    return bits


def _fingerprints(key: bytes, ordinal: int, names: list[str], values: np.ndarray):
    """(digests n × 16 bytes, tags n × w bytes) of one period's (n, w) readings."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    bits = _bits(values)
    n, w = bits.shape
    digests = bytearray()
    ids = np.empty(n, dtype="<u4")
    for j, name in enumerate(names):
        h = hashlib.blake2b(key=key, digest_size=16, person=b"dpstream-input")
        h.update(int(ordinal).to_bytes(8, "little", signed=True))
        h.update(name.encode("utf-8") + b"\0")
        h.update(bits[j].tobytes())
        digests += h.digest()
        ids[j] = int.from_bytes(hashlib.blake2b(name.encode(), key=key, digest_size=4).digest())
    blocks = np.empty((n, w, 4), dtype="<u4")  # (reading, step, series) per 16-byte block
    blocks[:, :, 0:2] = bits.view("<u4").reshape(n, w, 2)
    blocks[:, :, 2] = (int(ordinal) * w + np.arange(w, dtype=np.int64)) % 2**32
    blocks[:, :, 3] = ids[:, None]
    aes_key = hashlib.blake2b(key, digest_size=16, person=b"dpstream-tags").digest()
    enc = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()  # a PRP per block: ECB ok
    cipher = enc.update(blocks.tobytes()) + enc.finalize()
    tags = np.frombuffer(cipher, dtype=np.uint8).reshape(n, w, 16)[:, :, 0]
    return bytes(digests), np.ascontiguousarray(tags).tobytes()


def _periods(config: dict, frame: pd.DataFrame, observed: np.ndarray | None, ordinals):
    """(ordinal, names, (n, w) readings with NaN where missing) of each whole period of
    ``frame`` among ``ordinals``, its leaf columns in the store's order."""
    grid = Grid.from_config(config)
    _, t = Grid.stamps(frame.index)
    cols = {str(c): j for j, c in enumerate(frame.columns)}
    names = [s for s in _leaves(config) if s in cols]
    if not names or t.size == 0:
        return
    idx = [cols[s] for s in names]
    values = frame.to_numpy(dtype=np.float64)[:, idx]
    if observed is not None:
        values = np.where(np.asarray(observed)[:, idx], values, np.nan)
    span = grid.w * grid.step
    for o in sorted(int(x) for x in ordinals):
        start = grid.start(o)
        row = int(np.searchsorted(t, start))
        end = row + grid.w
        last = start + span - grid.step
        if row >= t.size or t[row] != start or end > t.size or t[end - 1] != last:
            continue  # not a whole period of this frame
        yield o, names, values[row:end].T


def record_input_digests(
    con: sqlite3.Connection,
    config: dict,
    ordinals: set[int],
    frame: pd.DataFrame,
    observed: np.ndarray | None,
) -> None:
    """Keep the keyed digests of the input of the newly released ``ordinals`` (module notes)."""
    if not ordinals or config is None:
        return
    key = _key(con, create=True)
    if key is None:
        return
    rows = [
        (o, json.dumps(names), *_fingerprints(key, o, names, vals))
        for o, names, vals in _periods(config, frame, observed, ordinals)
    ]
    if not rows:
        return
    with transaction(con):
        con.execute(_TABLE)
        con.executemany("INSERT OR IGNORE INTO input_digests VALUES (?, ?, ?, ?)", rows)


def check_changed_readings(
    con: sqlite3.Connection,
    config: dict | None,
    released: set[int],
    frame: pd.DataFrame,
    observed: np.ndarray | None,
    owner: str,
    subject: str = "INPUT",
) -> None:
    """Refuse ``frame`` if it re-supplies a released period with a changed reading.

    Raises :class:`ChangedReadingError` naming the first changed (series, stamp) in time
    order that the store's one-byte tags locate (a change leaves its tag unchanged 1 time in
    256: then an earlier change may go unnamed, and a series with none located is named
    without a stamp), no value and no count; reads the store (and the key file) only.
    """
    if config is None or not released:
        return
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "input_digests" not in tables:
        return
    stored = {
        int(o): (json.loads(s), d, t)
        for o, s, d, t in con.execute("SELECT ordinal, series, digests, tags FROM input_digests")
        if int(o) in released
    }
    if not stored:
        return
    key = _key(con, create=False)
    if key is None:
        warnings.warn(
            f"The store's digest key ({key_path(_store_id(con) or '?')}) is missing: periods "
            "it released cannot be checked for changed readings. Restore the key file to "
            "check them.",
            UserWarning,
            stacklevel=2,
        )
        return
    grid = Grid.from_config(config)
    for o, names, vals in _periods(config, frame, observed, set(stored)):
        s_names, s_digests, s_tags = stored[o]
        if names != s_names:
            continue  # other series than released (refused elsewhere, or a new layout)
        digests, tags = _fingerprints(key, o, names, vals)
        if digests == s_digests:
            continue
        d = np.frombuffer(digests, np.uint8).reshape(-1, 16)
        sd = np.frombuffer(s_digests, np.uint8).reshape(-1, 16)
        changed = np.flatnonzero((d != sd).any(axis=1))  # series whose readings changed
        tg = np.frombuffer(tags, np.uint8).reshape(len(names), -1)[changed]
        st = np.frombuffer(s_tags, np.uint8).reshape(len(names), -1)[changed]
        diff = tg != st
        # a changed reading whose one-byte tag is unchanged (1 in 256) cannot be located:
        # such a series sorts after every located one, and no step is named for it
        located = diff.any(axis=1)
        steps = np.where(located, np.argmax(diff, axis=1), diff.shape[1])
        first = int(np.lexsort((changed, steps))[0])  # earliest step, then the first series
        if located[first]:
            stamp = grid.start(o) + int(steps[first]) * grid.step
            at = f"at {pd.Timestamp(stamp) if grid.kind == 'datetime' else stamp}"
        else:
            at = "at a step the store cannot locate (it keeps one byte per reading)"
        raise ChangedReadingError(
            f"{subject} of {owner} has a changed reading: series {names[changed[first]]!r} "
            f"{at} differs from the reading the store released the period starting "
            f"{grid.label(o)} from (a meter correction?). The released period stands (a period "
            "is released once): supply the readings as released, or drop that period, to "
            "release the others. A correction is a new release of that period, charged again "
            f"to its data set's budget: --correct {grid.label(o)!r} without --store."
        )


def _parquet_period(scan, grid: Grid, ordinal: int, leaves: list[str]) -> pd.DataFrame | None:
    """Period ``ordinal`` of a Parquet INPUT (:class:`~dpstream.store._source.ParquetScan`) as a
    wide frame on the store's grid (None if the file does not hold it whole)."""
    from ..io._long import DS, ID, Y

    _, t = Grid.stamps(scan.stamps)
    start = grid.start(ordinal)
    stop = start + (grid.w - 1) * grid.step
    lo, hi = np.searchsorted(t, start), np.searchsorted(t, stop)
    if hi >= t.size or t[lo] != start or t[hi] != stop:
        return None
    filters = [(scan.time, ">=", scan.stamps[lo]), (scan.time, "<=", scan.stamps[hi])]
    if scan.long:
        rows = pd.read_parquet(scan.path, columns=[ID, DS, Y], filters=filters)
        rows[ID] = rows[ID].astype(str)
        frame = rows.pivot(index=DS, columns=ID, values=Y)
    else:
        frame = pd.read_parquet(scan.path, columns=[scan.time, *leaves], filters=filters)
        frame = frame.set_index(scan.time)
    frame = frame.reindex(columns=[c for c in leaves if c in frame.columns])
    _, stamps = Grid.stamps(
        pd.DatetimeIndex(frame.index) if grid.kind == "datetime" else frame.index
    )
    frame.index = (
        pd.DatetimeIndex(stamps.astype("datetime64[ns]")) if grid.kind == "datetime" else stamps
    )
    return frame.sort_index()


def check_parquet_periods(con, config: dict | None, released: set[int], scan, owner: str) -> None:
    """:func:`check_changed_readings` for a Parquet INPUT read period by period (the store's
    scale path): each re-supplied period that has digests is read once more, alone."""
    if config is None or not released:
        return
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "input_digests" not in tables:
        return
    have = {int(r[0]) for r in con.execute("SELECT ordinal FROM input_digests")} & set(released)
    grid, leaves = Grid.from_config(config), _leaves(config)
    for o in sorted(have):
        frame = _parquet_period(scan, grid, o, leaves)
        if frame is not None:
            check_changed_readings(con, config, {o}, frame, None, owner)


def record_parquet_periods(con, config: dict, ordinals: set[int], scan) -> None:
    """:func:`record_input_digests` for the newly released periods of a Parquet INPUT, one
    period in memory at a time."""
    if not ordinals or config is None:
        return
    grid, leaves = Grid.from_config(config), _leaves(config)
    for o in sorted(int(x) for x in ordinals):
        frame = _parquet_period(scan, grid, o, leaves)
        if frame is not None:
            record_input_digests(con, config, {o}, frame, None)
