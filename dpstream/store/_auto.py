"""k="auto" in the store: issue 13's in-stream planner and prior, reading the store.

``release_optstream(k="auto")`` plans every period from the *measurements* released before it
(the estimates of the private step, their noise variances and sampled masks) and the previous
period's plan (:func:`dpstream.pipelines._autoplan.plan_for_period`, which also builds the
profile prior, :func:`postproc.profile_prior`), measures it
(:func:`~dpstream.pipelines._period_steps.measure_period`, [FV19] Alg. 2) and post-processes it
(:func:`~dpstream.pipelines._period_steps.post_process_periods`, [FV19] Alg. 4 with the prior).
The store runs exactly those functions, one period at a time. The planner's streaming state
(running sums, forgotten past the look-backs) is saved after each period, in the transaction
that commits the period's values and its measurements (:func:`pack`), and loaded before the
next (:mod:`dpstream.store._planner_state`; the prior's held periods are read back from their
stored measurements). So a store filled one day per run plans as the in-memory pipeline over
the same days, however many (tested past the look-backs), and a backup continues it (a period
split into subtrees saves each part's state instead: :mod:`dpstream.engine._auto_split`). A
store without that state (older stores, a period released split into subtrees, or a past
period) rebuilds the planner from the measurements and plans of the last ``max(LOOKBACK,
PRIOR_DAYS)`` stored periods, in time order, through :meth:`planner.StreamPlanner.update`:
the in-memory planner while no more periods than that were released, an approximation after
(its sums forget older periods, the replay drops them). Its plans can be replayed from the
store alone (:func:`dpstream.pipelines._autoplan.replan` on the stored measurements).

``missing="unmeasured"``: a period's values hold NaN at its missing readings (the public mask,
``docs/privacy.md``); :func:`measure_task` measures them as the in-memory pipeline does
(:func:`~dpstream.pipelines._period_steps.measure_period` with ``observed``), stores NaN there,
and :func:`pack` keeps the mask in the period's record, so the store's planner (its saved
state, updated with the mask; the held periods and the replay read back from the records)
reads the same ``Measurement.observed`` as the in-memory one (tested, past the look-backs
too: ``tests/dpstream/test_store_unmeasured.py``). A release split into subtrees after such
periods is refused (:func:`refuse_split_after_gaps`).

Differences, on purpose:

* Bits: period ``o`` draws from :func:`~dpstream.pipelines._period.period_bits` (``seed`` and
  the ordinal), as every store period does, so a day's release does not depend on the run it
  was released in; ``release_optstream(k="auto", seed=s)`` draws all its periods from one
  stream ``bit_source(s)``. Seeded, the store equals the in-memory functions driven with
  per-period bits (tested), not ``release_optstream(seed=s)`` itself.
* Periods are planned in time order: a period can only be released after every stored one
  (the budget rule across a changed k reads the previous period's plan; a stored *later* period
  would need the next plan too). A gap (a day never released) starts the window rule afresh:
  no window of w steps straddles it.
* Sequential by nature across periods (each plan reads the previous period's measurement),
  parallel *inside* one: a Parquet or SQLite input with ``engine="dask"`` (or a ``cut``) and a
  hierarchy of more than 64 leaves is split into subtrees, each planning, measuring and
  post-processing its nodes on a worker (:mod:`dpstream.engine._auto_split`; its record is
  written by :func:`pack_parts`). Otherwise, with ``engine="dask"``, each period's private
  step and post-processing (:func:`measure_task`: read the values, draw, Alg. 4) run whole in
  a worker of one cluster kept for the call, one period after the other.

*Privacy*: as ``release_optstream(k="auto")``: plans and priors read public measurements only
(post-processing, [FV19] Theorem 3); each period is charged the store's (ε, δ) per window before
its draw, and ``planner.window_budget`` keeps every window within it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, fields

import numpy as np

__all__ = [
    "PART_KEYS",
    "AutoTask",
    "measure_task",
    "pack",
    "pack_parts",
    "plan_state",
    "prepare_history",
    "refuse_split_after_gaps",
    "release_auto_period",
    "unpack",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoTask:
    """One planned k="auto" period: what the private step needs (picklable, for Dask)."""

    cfg: object = field(hash=False)
    """The release's :class:`~dpstream.pipelines._period_steps.AutoConfig`."""
    plan: object = field(hash=False)
    """The period's :class:`planner._stream_plan.PeriodPlan`."""
    prior: object = field(hash=False)
    """Its :class:`postproc._prior.ProfilePrior`, or None."""
    hierarchy: object = field(hash=False)
    """The resolved hierarchy, or None."""
    values: object = field(hash=False)
    """The period's node values (N, w), or a callable reading them where the task runs."""
    seed: object = None
    """None: the secure source where the task runs; an int: the period's child seed."""
    ordinal: int = 0
    """The period's key (keys its bits)."""


def measure_task(task: AutoTask):
    """The private step and Algorithm 4 of one planned period: ``(released (N, w),
    Measurement)`` -- :func:`measure_period` and :func:`post_process_periods`, as
    ``release_optstream(k="auto")`` runs them."""
    from ..pipelines._period import period_bits
    from ..pipelines._period_steps import measure_period, post_process_periods

    vals = task.values() if callable(task.values) else task.values
    vals = np.asarray(vals, dtype=np.float64)
    bits = period_bits(task.seed, task.ordinal)
    gaps = np.isnan(vals)  # missing="unmeasured": NaN marks the missing readings (public)
    observed = ~gaps if gaps.any() else None
    if observed is not None:
        vals = np.where(gaps, 0.0, vals)  # a constant in every neighbour, as prepare_frame
    m = measure_period(vals, task.plan, task.cfg, bits=bits, observed=observed)
    released = np.maximum(
        post_process_periods([m], [task.plan], [task.prior], task.hierarchy)[0], 0.0
    )
    if observed is not None:  # nothing is published for a missing reading
        released = np.where(observed, released, np.nan)
    return released, m


def pack(measurement, plan) -> bytes:
    """A period's measurement and plan as an ``.npz`` (arrays; scalars as one JSON text).
    A ``missing="unmeasured"`` period also keeps its public mask (``observed``, (N, w): False
    at a missing reading, ``docs/privacy.md``), so the planner rebuilt from the store skips
    those readings as the in-memory one does."""
    arrays = {
        "values": measurement.values,
        "noise": measurement.noise,
        "sampled": measurement.sampled,
    }
    if getattr(measurement, "observed", None) is not None:  # missing="unmeasured": public
        arrays["observed"] = np.asarray(measurement.observed, dtype=bool)
    scalars = {}
    for f in fields(plan):
        value = getattr(plan, f.name)
        if isinstance(value, np.ndarray):
            arrays[f"plan_{f.name}"] = value
        else:
            scalars[f.name] = list(value) if isinstance(value, tuple) else value
    arrays["plan_scalars"] = np.array(json.dumps(scalars))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


#: The per-node arrays of a split period's record, streamed part by part (:func:`pack_parts`).
PART_KEYS = ("values", "noise_node", "plan_predicted_nodes", "plan_variances",
             "plan_sample_variance")  # fmt: skip


def pack_parts(plan, order: np.ndarray, chunks: dict) -> memoryview:
    """A split period's record (as :func:`pack`, read back by :func:`unpack`) written one
    part at a time: for each key of :data:`PART_KEYS`, ``chunks[key]`` yields the parts' rows
    in the order ``order`` (N,) gives (row i of the concatenation is node ``order[i]``). The
    measurement's noise is kept as its node factor (``noise_node``; its step factor is the
    plan's interpolation diagonal) and the sampled steps as the plan's (one row for every
    node). No whole (N, w) array is formed here; the record is returned as a view of its
    buffer (no bytes copy: 0.8 GB at a million meters)."""
    import zipfile

    fmt = np.lib.format
    n = int(order.size)
    buf = io.BytesIO()
    # deflated (level 1): a store row is at most 1e9 bytes (SQLite's SQLITE_MAX_LENGTH), and
    # at a million meters the day's values (388 MB) and this record (0.8 GB raw) exceed it
    with zipfile.ZipFile(
        buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True
    ) as zf:
        for key in PART_KEYS:
            parts = iter(chunks[key])
            first = np.ascontiguousarray(next(parts))
            shape = (n, *first.shape[1:])
            with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
                header = {"descr": fmt.dtype_to_descr(first.dtype), "fortran_order": False,
                          "shape": shape}  # fmt: skip
                fmt.write_array_header_2_0(f, header)
                rows = 0
                for part in (first, *parts):
                    part = np.ascontiguousarray(part, dtype=first.dtype)
                    f.write(memoryview(part.reshape(-1)).cast("B"))
                    rows += part.shape[0]
                    del part
            if rows != n:
                raise RuntimeError(f"pack_parts: {key} has {rows} rows, not {n}")  # internal
        scalars = {}
        for fld in fields(plan):
            value = getattr(plan, fld.name)
            if not isinstance(value, np.ndarray):
                scalars[fld.name] = list(value) if isinstance(value, tuple) else value
        for key, arr in (("order", np.asarray(order, dtype=np.int64)),
                         ("plan_scalars", np.array(json.dumps(scalars)))):  # fmt: skip
            with zf.open(f"{key}.npy", "w") as f:
                fmt.write_array(f, arr, allow_pickle=False)
    return buf.getbuffer()


def unpack(blob: bytes):
    """Inverse of :func:`pack` and :func:`pack_parts`: ``(Measurement, PeriodPlan)`` (no
    pickles are read)."""
    from planner._stream_plan import PeriodPlan

    from ..pipelines._period_steps import Measurement

    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        scalars = json.loads(str(z["plan_scalars"]))
        if "order" not in z.files:
            observed = z["observed"] if "observed" in z.files else None
            m = Measurement(
                values=z["values"], noise=z["noise"], sampled=z["sampled"], observed=observed
            )
            kw = {k[5:]: z[k] for k in z.files if k.startswith("plan_") and k != "plan_scalars"}
        else:  # pack_parts: rows in part order
            order = z["order"]

            def whole(key: str) -> np.ndarray:
                part = z[key]
                out = np.empty_like(part)
                out[order] = part
                return out

            kw = {k[5:]: whole(k) for k in PART_KEYS if k.startswith("plan_")}
            values = whole("values")
            r = values.shape[1]
            pos = PeriodPlan(**kw, **{k: v for k, v in scalars.items()}).positions(r)
            from mechanisms.optstream._sampling import interpolation_matrix

            mask = np.zeros((1, r), dtype=bool)
            mask[0, pos] = True
            mi = interpolation_matrix(mask)[0]
            noise = whole("noise_node")[:, None] * np.diag(mi @ mi.T)[None, :]
            m = Measurement(
                values=values, noise=noise, sampled=np.broadcast_to(mask[0], values.shape)
            )
    kw.update({k: tuple(v) if isinstance(v, list) else v for k, v in scalars.items()})
    return m, PeriodPlan(**kw)


def prepare_history(history, p: dict, sf, *, hierarchy, owner: str) -> tuple | None:
    """``history=`` of a store release, validated before anything is charged: ``(values (T, N),
    carried)`` -- public periods for the planner (as ``release_optstream(history=...)``) and,
    when ``history`` is an earlier ``k="auto"`` release ending just before the frame, the
    samples its last w steps hold (issue 24.1: the window rule across calls), or None."""
    from mechanisms import ParameterError

    from ..pipelines._autoplan import _carried, _config
    from ..pipelines._frames import prepare_frame

    if history is None:
        return None
    if p["auto"] is None:
        raise ParameterError(
            f"The 'history' parameter of {owner} feeds the in-stream planner: it needs "
            "k='auto' (an int k plans nothing). Drop history, or use k='auto'."
        )
    hf = prepare_frame(history, owner=owner, hierarchy=hierarchy, name="history")
    if hf.nodes != sf.nodes:
        raise ParameterError(
            f"The 'history' parameter of {owner} must have the same columns as the frame. "
            f"Got nodes {list(hf.nodes)[:5]} instead of {list(sf.nodes)[:5]}."
        )
    a = p["auto"]
    cfg = _config(
        epsilon=p["epsilon"], alpha=p["neighbours"].delta, w=p["w"], delta=a.get("delta"),
        noise=a.get("noise", "laplace"), target=a.get("target", "all"),
        level_shares=a.get("level_shares"), hierarchy=sf.hierarchy, nodes=sf.nodes,
        prior=a.get("prior", True),
    )  # fmt: skip
    return np.asarray(hf.values), _carried(history, hf.index, sf.index, cfg)


def plan_state(store, ordinal: int, cfg, *, history=None, carried=None):
    """The planner (:class:`planner.StreamPlanner`) before period ``ordinal``: the state the
    store saved after the period before it (:mod:`dpstream.store._planner_state`), or rebuilt
    from the store's measurements (stores without it) after the public ``history`` (T, N) if
    given; ``carried``: the samples of an earlier release just before the store's first
    period (used only when the store holds no period before ``ordinal``)."""
    from ..pipelines import _autoplan
    from ..pipelines._period_steps import history_measurements
    from ._planner_state import saved_planner

    saved = saved_planner(store, ordinal, cfg, history=history)  # the state the store saved
    if saved is not None:
        return saved
    planner = _autoplan.new_planner(cfg)
    planner.add_history(history_measurements(history, cfg.w))
    # every period the planner reads: the variogram's and the prior's look-backs
    rows = store._measured(ordinal, max(_autoplan.LOOKBACK, _autoplan.PRIOR_DAYS))
    if not rows:
        planner.carry(carried)
    planner.extend([unpack(blob) for _, _, blob in rows])
    if rows and rows[-1][0] != ordinal - 1:
        planner.previous = None  # a gap: no window of w steps straddles it
    return planner


def refuse_split_after_gaps(store, first: int, owner: str) -> None:
    """A split release (:mod:`dpstream.engine._auto_split`) rebuilds its subtree planners
    without the masks of ``missing="unmeasured"`` periods: refused (:class:`ParameterError`,
    nothing read, charged or drawn) when a stored period its planners would read (the last
    ``max(LOOKBACK, PRIOR_DAYS)`` before ``first``) had missing readings."""
    from mechanisms import ParameterError

    from ..pipelines import _autoplan

    rows = store._con.execute(
        "SELECT ordinal, plan FROM periods WHERE ordinal < ? AND measured IS NOT NULL "
        "ORDER BY ordinal DESC LIMIT ?",
        (int(first), max(_autoplan.LOOKBACK, _autoplan.PRIOR_DAYS)),
    ).fetchall()
    holed = [int(o) for o, plan in rows if json.loads(plan).get("unmeasured")]
    if holed:
        raise ParameterError(
            f"The store of {owner} holds period {min(holed)} with unmeasured readings "
            "(missing='unmeasured'), which the planner of a release split into subtrees "
            "(engine='dask' or a cut, over 64 leaves) does not read yet. Release these "
            "periods whole (engine='local', no cut, or a CSV/SQLite INPUT)."
        )


def release_auto_period(
    store, cfg, *, ordinal, label, values, tree, seed, charge, run, history=None, carried=None
):
    """Plan (from the store), charge, measure and post-process (``run(measure_task, task)``:
    here or in a Dask worker), then commit one period with its measurement (one transaction)."""
    from ..pipelines._autoplan import records

    state = plan_state(store, ordinal, cfg, history=history, carried=carried)
    plan, prior = state.plan(cfg.w)
    charge()  # committed before the draw
    task = AutoTask(
        cfg=cfg, plan=plan, prior=prior, hierarchy=tree, values=values, seed=seed, ordinal=ordinal
    )
    released, m = run(measure_task, task)
    rec = records([plan], [prior], [label], cfg.delta)[0]
    rec.update(period=int(ordinal), planned_on=f"{state.n_measured} stored period(s)")
    if m.observed is not None:  # missing readings (public): their mask is in the record
        rec["unmeasured"] = True
    from ._planner_state import state_after  # the planner after this period, saved with it

    saved = state_after(store, state, ordinal, m, plan, cfg)
    store._put(
        ordinal, label, released, rec, seeded=seed is not None, measured=pack(m, plan), state=saved
    )
