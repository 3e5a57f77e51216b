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


def _plan_k(store, cfg_k, *, eps, alpha, w, n_levels) -> dict:
    """The period's plan: k fixed, or planned on the store's released history (k="auto")."""
    plan = {"predicted_laplace_mae": w * alpha * n_levels / eps}  # [FV19] Thm. 8, 13: Laplace MAE
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
    )
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy, bound=bound)
    grid = Grid.from_index(sf.index, p["w"], _OWNER)
    _, t = Grid.stamps(sf.index)
    periods = to_periods(sf.values, p["w"]).full  # (P, N, w): whole periods (grid checked)
    ordinals = release_new_periods(
        store,
        p,
        nodes=sf.nodes,
        tree=sf.hierarchy,
        grid=grid,
        first=int(t[0]),
        n_periods=periods.shape[0],
        values_of=lambda i: periods[i],
        scheduler=scheduler,
        progress=progress,
    )
    out = store.read(ordinals)
    out.index = sf.index.copy()
    out.attrs["privacy"] = store.privacy_record().to_dict()
    return out


def _params(
    *, epsilon, w, k, sampling, theta, alpha, bound, weights, shares, seed, engine, n_workers
) -> dict:
    """The release's public parameters, validated (nothing read, drawn or charged)."""
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
    return {
        "epsilon": eps,
        "w": w,
        "k": k,
        "sampling": sampling,
        "theta": theta,
        "alpha": alpha,
        "bound": bound,
        "weights": weights,
        "shares": shares,
        "seed": seed,
        "engine": engine,
        "n_workers": n_workers,
        "neighbours": neighbours,
        "features": FeatureSet.default(w),
    }


def _config(p: dict, nodes, tree, grid: Grid) -> dict:
    return {
        "mechanism": "optstream",
        "unit": type(p["neighbours"].unit).__name__,
        "epsilon": p["epsilon"],
        "alpha": None if p["alpha"] is None else p["neighbours"].delta,
        "bound": p["bound"],
        "w": p["w"],
        "k": p["k"],
        "sampling": p["sampling"],
        "theta": p["theta"],
        "weights": p["weights"],
        "shares": None if p["shares"] is None else [float(s) for s in p["shares"]],
        "nodes": list(nodes),
        "hierarchy": None if tree is None else {a: list(c) for a, c in tree.children.items()},
        "grid": grid.to_config(),
        # A store is an experiment (seeded, NOT private) or a release, never a mix of both.
        "seeded": p["seed"] is not None,
    }


def release_new_periods(
    store,
    p,
    *,
    nodes,
    tree,
    grid,
    first,
    n_periods,
    values_of,
    check=None,
    scheduler=None,
    progress=None,
) -> list[int]:
    """The store's side of a release: configuration, budget, then per new period a committed
    charge, the per-period function (here or on Dask), a committed period. Returns the ordinals
    of the ``n_periods`` periods from stamp ``first``.

    ``values_of(i)`` gives period i's values (N, w), or a callable that reads them where the
    period runs; ``check(i)``, if given, is a callable validating period i where it runs, mapped
    over the new periods before anything is charged (inputs not validated in this process).
    """
    eps, w, engine = p["epsilon"], p["w"], p["engine"]
    h = 1 if tree is None else tree.n_levels
    optstream_split(
        eps,
        sampling=p["sampling"],
        n_levels=h,
        has_features=p["features"].n_features > 1,
        windows="any",
        shares=p["shares"],
    )
    stored_cfg = store.config
    if stored_cfg is not None:
        origin = Grid.from_config(stored_cfg)
        if origin.same_spacing(grid):
            grid = origin
    config = _config(p, nodes, tree, grid)
    store._check_config(config)
    first_ordinal = grid.ordinal(int(first), _OWNER)
    ordinals = [first_ordinal + i for i in range(n_periods)]
    have = store.ordinals()
    new = [i for i, o in enumerate(ordinals) if o not in have]
    if check is not None and new:  # validation of data read in the workers: before any charge
        for _ in map_periods(
            _call,
            [check(i) for i in new],
            engine=engine,
            scheduler=scheduler,
            n_workers=p["n_workers"],
            owner=_OWNER,
        ):
            pass
    cfg = store._fix_config(config)
    unit = p["neighbours"].unit
    ledger = store.ledger
    cost = Budget(eps)
    for i in new:
        if ledger.spent(ordinals[i]) < eps:  # others: charged by a killed run, not stored
            ledger.check(cost, "release_optstream", unit=unit, period=ordinals[i])
    plan = _plan_k(store, cfg["k"], eps=eps, alpha=p["neighbours"].delta, w=w, n_levels=h)
    spec = PeriodSpec(
        epsilon=eps,
        w=w,
        k=plan["k"],
        alpha=p["neighbours"].delta,
        sampling=p["sampling"],
        theta=p["theta"],
        hierarchy=tree,
        nodes=tuple(nodes),
        features=p["features"],
        weights=p["weights"],
        shares=p["shares"],
    )
    plan.update(sampling=p["sampling"], theta=p["theta"], weights=p["weights"], levels=h)
    label = f"release_optstream: {h} level(s), epsilon/{h} each"

    def charge(i: int) -> None:
        if ledger.spent(ordinals[i]) < eps:  # a killed run's charge is reused, never doubled
            ledger.charge(cost, label, unit=unit, period=ordinals[i])

    def tasks():
        for i in new:
            if engine == "local":
                charge(i)  # committed right before this period's draw
            yield PeriodTask(spec=spec, ordinal=ordinals[i], values=values_of(i), seed=p["seed"])

    if engine == "dask":
        for i in new:
            charge(i)  # every charge committed before any task is sent
    results = map_periods(
        run_period,
        tasks(),
        engine=engine,
        scheduler=scheduler,
        n_workers=p["n_workers"],
        owner=_OWNER,
    )
    for ordinal, values in results:
        store._put(ordinal, grid.label(ordinal), values, plan, seeded=p["seed"] is not None)
        if progress is not None:
            progress(1)
    return ordinals


def _call(func):
    """Run a zero-argument task (a validation) where it is mapped."""
    return func()
