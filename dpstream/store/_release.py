"""Release into a store: only the periods it does not hold, each committed with its charge."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import Budget, ParameterError
from mechanisms.core._validation import check_integer, check_positive
from mechanisms.optstream._estimates import OPTSTREAM_SAMPLINGS, optstream_split
from postproc import FeatureSet

from ..engine._run import ENGINES, PeriodTask, map_periods, run_period
from ..pipelines._frames import prepare_frame, to_periods, value_neighbours
from ..pipelines._optstream_pipeline import OPTSTREAM_WEIGHTS
from ..pipelines._period import PeriodSpec
from ._grid import Grid

__all__ = ["release_to_store"]

_OWNER = "ReleaseStore.release_optstream"
#: Released periods the in-stream planner reads (k="auto"): four weeks of days.
PLAN_HISTORY = 28


def _plan_k(store, cfg_k, *, eps, alpha, w, n_levels, n_nodes) -> dict:
    """The period's plan: k fixed, or planned on the store's released history (k="auto")."""
    plan = {"predicted_laplace": w * alpha * n_levels / eps}  # [FV19] Thm. 8, 13: Laplace MAE
    if cfg_k != "auto":
        return {"k": int(cfg_k), "planned_on": "fixed", **plan}
    keys = sorted(store.ordinals())[-PLAN_HISTORY:]
    if not keys:
        return {"k": min(10, w), "planned_on": "default (no released history yet)", **plan}
    from planner import plan_optstream  # released values are public: planning is free

    history = store.read(keys).to_numpy()
    p = plan_optstream(history, epsilon=eps, alpha=alpha, w=w, n_levels=n_levels)
    return {
        "k": p.k,
        "planned_on": f"{len(keys)} released period(s)",
        "predicted": float(p.predicted[p.candidates == p.k][0]),
        **plan,
    }


def release_to_store(
    store,
    frame,
    *,
    epsilon: float,
    w: int = 48,
    k: int | str = 10,
    sampling: str = "l1",
    theta: float | None = None,
    hierarchy: object = None,
    alpha: float | None = 1.0,
    bound: float | None = None,
    weights: str = "variance",
    shares=None,
    seed: object = None,
    engine: str = "local",
    scheduler: str | None = None,
    n_workers: int = 2,
    progress=None,
) -> pd.DataFrame:
    """Release ``frame``'s periods that ``store`` lacks with OptStream; return all of them.

    Parameters
    ----------
    store : ReleaseStore
    frame : pandas.DataFrame
        Wide, time-indexed leaf streams (as :func:`dpstream.release_optstream`), covering whole
        periods of ``w`` regular steps, starting on a period boundary of the store.
    epsilon, w, sampling, theta, hierarchy, alpha, weights, shares
        As :func:`dpstream.release_optstream`; with ``alpha=None``, plain w-event privacy on
        values in [0, ``bound``]. Fixed by the store's first release.
    k : int or "auto"
        Samples per period, or ``"auto"``: planned before the call on the store's last
        released periods (public; :func:`planner.plan_optstream`), recorded per period.
    seed : int, optional
        None (default): each period's bits from the operating system's secure source, drawn
        where the period runs. An int (experiments only, NOT for release): each period's bits
        from ``SeedSequence(seed, spawn_key=(ordinal,))``, the same on any number of workers.
    engine : {"local", "dask"}
        Run the periods here, or map them over a Dask cluster (``scheduler`` address, or a
        ``LocalCluster`` of ``n_workers`` made and closed here).
    progress : callable, optional
        Called with 1 after each committed period.

    Returns
    -------
    pandas.DataFrame
        One column per node, aligned to ``frame``'s index: stored periods exactly as stored,
        new ones as just released and committed.

    Notes
    -----
    Order of work: everything is validated (parameters, frame, hierarchy, configuration,
    grid, budget) before any charge or draw. Then, per new period, one committed transaction
    charges the store's ledger ε (ε/h per level, [FV19] Theorem 13) with the period's key,
    the period is released, and one committed transaction stores its values and plan. A run
    killed in between leaves a charged period without values; the next run releases it under
    that charge (the killed draws were never published) and charges nothing more. A period
    already stored is read back: nothing drawn, nothing charged.

    *Privacy*: as :func:`dpstream.release_optstream`, for the whole stored stream: every
    window of w steps costs at most ε ([FV19] §5.1), periods are never released twice.
    """
    eps = check_positive(epsilon, "epsilon", _OWNER)
    w = check_integer(w, "w", _OWNER)
    if k != "auto":
        k = check_integer(k, "k", _OWNER, minimum=1, maximum=w)
    for name, value, allowed in (
        ("sampling", sampling, OPTSTREAM_SAMPLINGS),
        ("weights", weights, OPTSTREAM_WEIGHTS),
        ("engine", engine, ENGINES),
    ):
        if value not in allowed:
            raise ParameterError(
                f"The {name!r} parameter of {_OWNER} must be one of {allowed}. Got {value!r} "
                "instead."
            )
    if theta is not None:
        theta = check_positive(theta, "theta", _OWNER, allow_zero=True)
    n_workers = check_integer(n_workers, "n_workers", _OWNER)
    if seed is not None and engine == "dask" and not isinstance(seed, int | np.integer):
        raise ParameterError(
            f"The 'seed' parameter of {_OWNER} must be None or an int with engine='dask'."
        )
    neighbours = value_neighbours(w=w, alpha=alpha, bound=bound, owner=_OWNER)
    fs = FeatureSet.default(w)
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy, bound=bound)
    h = sf.n_levels
    optstream_split(
        eps,
        sampling=sampling,
        n_levels=h,
        has_features=fs.n_features > 1,
        windows="any",
        shares=shares,
    )
    grid = Grid.from_index(sf.index, w, _OWNER)
    stored_cfg = store.config
    if stored_cfg is not None:
        origin = Grid.from_config(stored_cfg)
        if origin.same_spacing(grid):
            grid = origin
    tree = sf.hierarchy
    config = {
        "mechanism": "optstream",
        "unit": type(neighbours.unit).__name__,
        "epsilon": eps,
        "alpha": None if alpha is None else neighbours.delta,
        "bound": bound,
        "w": w,
        "k": k,
        "sampling": sampling,
        "theta": theta,
        "weights": weights,
        "shares": None if shares is None else [float(s) for s in shares],
        "nodes": list(sf.nodes),
        "hierarchy": None if tree is None else {p: list(c) for p, c in tree.children.items()},
        "grid": grid.to_config(),
    }
    cfg = store._fix_config(config)
    _, t = Grid.stamps(sf.index)
    first = grid.ordinal(int(t[0]), _OWNER)
    periods = to_periods(sf.values, w).full  # (P, N, w): whole periods only (checked above)
    ordinals = [first + i for i in range(periods.shape[0])]
    have = store.ordinals()
    new = [i for i, o in enumerate(ordinals) if o not in have]
    ledger = store.ledger
    cost = Budget(eps)
    fresh = [i for i in new if ledger.spent(ordinals[i]) < eps]  # others: charged, not stored
    for i in fresh:
        ledger.check(cost, "release_optstream", unit=neighbours.unit, period=ordinals[i])
    plan = _plan_k(
        store, cfg["k"], eps=eps, alpha=neighbours.delta, w=w, n_levels=h, n_nodes=sf.n_nodes
    )
    spec = PeriodSpec(
        epsilon=eps,
        w=w,
        k=plan["k"],
        alpha=neighbours.delta,
        sampling=sampling,
        theta=theta,
        hierarchy=tree,
        nodes=sf.nodes,
        features=fs,
        weights=weights,
        shares=shares,
    )
    plan.update(sampling=sampling, theta=theta, weights=weights, levels=h)
    label = f"release_optstream: {h} level(s), epsilon/{h} each"

    def charge(i: int) -> None:
        if ledger.spent(ordinals[i]) < eps:  # a killed run's charge is reused, never doubled
            ledger.charge(cost, label, unit=neighbours.unit, period=ordinals[i])

    def tasks():
        for i in new:
            if engine == "local":
                charge(i)  # committed right before this period's draw
            yield PeriodTask(spec=spec, ordinal=ordinals[i], values=periods[i], seed=seed)

    if engine == "dask":
        for i in new:
            charge(i)  # every charge committed before any task is sent
    results = map_periods(
        run_period, tasks(), engine=engine, scheduler=scheduler, n_workers=n_workers, owner=_OWNER
    )
    for ordinal, values in results:
        store._put(ordinal, grid.label(ordinal), values, plan, seeded=seed is not None)
        if progress is not None:
            progress(1)
    out = store.read(ordinals)
    out.index = sf.index.copy()
    return out
