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
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != _FORMAT:
            return None
        arrays = {k[2:]: z[k] for k in z.files if k.startswith("a_")}
    held = meta["held"]
    periods = read(held) if held else []
    if periods is None:  # a held period's measurements are missing
        return None
    planner.restore(arrays, meta["scalars"], periods)
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
