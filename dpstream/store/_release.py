"""Release into a store: only the periods it does not hold, each committed with its charge."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import Budget, ParameterError
from mechanisms.optstream._estimates import optstream_split

from .._ledger import calibrated
from ..engine._run import PeriodTask, map_periods, run_period
from ..pipelines._frames import prepare_frame, to_periods
from ..pipelines._period import PeriodSpec
from ._grid import Grid
from ._late import check_late_readings, record_missing_readings
from ._params import _OWNER, _config, _params

__all__ = ["release_to_store"]


def _fixed_plan(k: int, *, eps, alpha, w, n_levels) -> dict:
    """The record of a fixed-k period's plan."""
    mae = w * alpha * n_levels / eps  # [FV19] Thm. 8, 13: the Laplace part of the MAE
    return {"k": int(k), "planned_on": "fixed", "predicted_laplace_mae": mae}


def release_to_store(
    store,
    frame,
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
    progress=None,
    missing: str = "error",
) -> pd.DataFrame:
    """Release ``frame``'s periods that ``store`` lacks with OptStream; return all of them.

    Parameters
    ----------
    store : ReleaseStore
    frame : pandas.DataFrame
        Wide, time-indexed leaf streams (as :func:`dpstream.release_optstream`), covering whole
        periods of ``w`` regular steps, starting on a period boundary of the store.
    epsilon, w, sampling, theta, hierarchy, alpha, weights, shares
        As :func:`dpstream.release_optstream` with an int k (``sampling=None``: "l1"); with
        ``alpha=None``, plain w-event privacy on values in [0, ``bound``]. Fixed by the
        store's first release.
    k : int or "auto", default "auto"
        Samples per period, or ``"auto"`` (as :func:`dpstream.release_optstream`): the
        in-stream planner (:class:`planner.StreamPlanner`) and prior, period by
        period, reading the measurements and plans of the store's earlier periods
        (:mod:`dpstream.store._auto`); then ``delta``, ``noise``, ``target``,
        ``level_shares`` and ``prior`` are as in :func:`dpstream.release_optstream`, and
        ``sampling`` (None or "equal"), ``weights``, ``theta``, ``shares`` keep their defaults.
    history : pandas.DataFrame, optional
        k="auto" only: public history before the frame (as :func:`dpstream.release_optstream`);
        an earlier k="auto" release ending just before the store's first period also brings
        its last plan, so windows straddling the two respect ε (issue 24.1).
    seed : int, optional
        None (default): each period's bits from the operating system's secure source, drawn
        where the period runs. An int (experiments only, NOT for release): each period's bits
        from ``SeedSequence(seed, spawn_key=(ordinal,))``, the same on any number of workers.
    engine : {"local", "dask"}
        Run the periods here, or map them over a Dask cluster (``scheduler`` address, or a
        ``LocalCluster`` of ``n_workers`` made and closed here). k="auto": each period
        whole on a worker, in time order (a Parquet or SQLite input is split inside the
        period: :func:`~dpstream.store._source.release_parquet_to_store`).
    lock_timeout : float, default 0
        Seconds to wait for another job releasing into the same store; then (or at once)
        :class:`~dpstream.store.StoreBusyError`. Nothing is read, charged or drawn before.
    progress : callable, optional
        Called with 1 after each committed period.

    Returns
    -------
    pandas.DataFrame
        One column per node, aligned to ``frame``'s index: stored periods exactly as stored,
        new ones as just released and committed.

    missing : {"error", "zero", "unmeasured"}, default "error"
        As :func:`dpstream.release_optstream` (``"unmeasured"``: the stored period holds NaN
        at the missing readings, aggregates over the observed leaves; with k="auto" its
        record also keeps the public mask, so the store's planner skips those readings as
        ``release_optstream(k="auto", missing="unmeasured")`` does, :mod:`dpstream.store._auto`).

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
        auto={"delta": delta, "noise": noise, "target": target, "level_shares": level_shares,
              "prior": prior},
        lock_timeout=lock_timeout,
    )  # fmt: skip
    if missing not in ("error", "zero", "unmeasured") or (
        missing == "unmeasured" and weights == "paper"
    ):
        raise ParameterError(
            f"The 'missing' parameter of {_OWNER} must be 'error', 'zero' or (with weights "
            f"other than 'paper') 'unmeasured'. Got {missing!r} instead."
        )
    p["missing"] = missing
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy, bound=bound, missing=missing)
    from ._auto import prepare_history

    p["history"] = prepare_history(history, p, sf, hierarchy=hierarchy, owner=_OWNER)
    grid = Grid.from_index(sf.index, p["w"], _OWNER)
    _, t = Grid.stamps(sf.index)
    values = sf.values
    if sf.observed is not None:  # unmeasured: NaN marks the missing readings (PeriodSpec)
        values = np.where(sf.observed, values, np.nan)
    periods = to_periods(values, p["w"]).full  # (P, N, w): whole periods (grid checked)
    raw = frame.to_frame() if isinstance(frame, pd.Series) else frame
    seen = None if sf.observed is None and not raw.isna().to_numpy().any() else raw.notna()
    seen = None if seen is None else seen.to_numpy()
    before = store.ordinals()
    # A reading the store released its period without is refused (issue 25 §3, _late).
    check_late_readings(store._con, store.config, before, raw, seen, _OWNER, "The 'frame'")
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
    if not store.readonly:
        new = store.ordinals() - before
        record_missing_readings(store._con, store.config, new, raw, seen)
    out = store.read(ordinals)
    out.index = sf.index.copy()
    out.attrs["privacy"] = store.privacy_record().to_dict()
    if missing != "error":  # this call's policy for missing readings (issue 25)
        params = {**(out.attrs["privacy"].get("parameters") or {}), "missing": missing}
        out.attrs["privacy"]["parameters"] = params
    return out


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
    leaves_of=None,
    cut=None,
) -> list[int]:
    """The store's side of a release: configuration, budget, then per new period a committed
    charge, the per-period function (here or on Dask), a committed period. Returns the ordinals
    of the ``n_periods`` periods from stamp ``first``.

    ``values_of(i)`` gives period i's values (N, w), or a callable that reads them where the
    period runs; ``check(i)``, if given, is a callable validating period i where it runs, mapped
    over the new periods before anything is charged (inputs not validated in this process).
    Everything runs under the store's job lock (:meth:`ReleaseStore.job_lock`).
    """
    auto = None
    if p["auto"] is not None:  # validated (and its settings built) before the lock is taken
        from ..pipelines._autoplan import _config as auto_config

        auto = auto_config(
            epsilon=calibrated(p["epsilon"]),  # noise at most the decimal charged (issue 31 §5)
            alpha=p["neighbours"].delta,
            w=p["w"],
            nodes=nodes,
            hierarchy=tree,
            **{key: p["auto"].get(key) for key in ("noise", "target", "level_shares")},
            delta=None if p["auto"].get("delta") is None else calibrated(p["auto"]["delta"]),
            prior=p["auto"].get("prior", True),
        )
    with store.job_lock(p["lock_timeout"]):
        return _release_new(
            store,
            p,
            auto,
            nodes=nodes,
            tree=tree,
            grid=grid,
            first=first,
            n_periods=n_periods,
            values_of=values_of,
            check=check,
            scheduler=scheduler,
            progress=progress,
            leaves_of=leaves_of,
            cut=cut,
        )


def _release_new(
    store, p, auto, *, nodes, tree, grid, first, n_periods, values_of, check, scheduler, progress,
    leaves_of=None, cut=None,
) -> list[int]:  # fmt: skip
    eps, w, engine = calibrated(p["epsilon"]), p["w"], p["engine"]  # issue 31 §5
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
    if auto is not None and new and have and ordinals[new[0]] < max(have):
        raise ParameterError(
            f"The periods of this release start at ordinal {ordinals[new[0]]}, before the "
            f"store's last released period ({max(have)}); with k='auto' each period is planned "
            "from the ones before it, so periods are released in time order. Release the later "
            "days only, or use an int k."
        )
    split = False
    if (engine == "dask" or cut is not None) and leaves_of is not None and auto is None:
        from ..engine._subtree import split_applies

        split = split_applies(tree, p["sampling"], p["weights"], cut, p["n_workers"], p["seed"])
    elif (engine == "dask" or cut is not None) and leaves_of is not None:
        from ..engine._auto_split import auto_split_applies

        split = auto_split_applies(auto, tree, cut, p["n_workers"], p["seed"], _OWNER)
        if split and new:  # its subtree planners do not read the masks of unmeasured readings
            from ._auto import refuse_split_after_gaps

            refuse_split_after_gaps(store, ordinals[new[0]], _OWNER)
    if check is not None and new and not split:  # validation of data read in the workers
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
    cost = Budget(eps, 0.0 if auto is None or auto.delta is None else auto.delta)
    for i in new:
        if ledger.spent(ordinals[i]) < eps:  # others: charged by a killed run, not stored
            ledger.check(cost, "release_optstream", unit=unit, period=ordinals[i])
    if auto is not None and split:  # k="auto" inside each period: subtrees (issue 22.2)
        from ..engine._auto_split import release_auto_periods_split

        release_auto_periods_split(
            store, auto, tree, grid, [ordinals[i] for i in new], [leaves_of(i) for i in new],
            charge=lambda o: _charge_once(
                ledger, cost, eps, unit, o, "release_optstream: k=auto, planned"),
            seed=p["seed"], cut=cut, scheduler=scheduler, n_workers=p["n_workers"],
            history=p.get("history"), progress=progress, local=engine == "local",
        )  # fmt: skip
        return ordinals
    if auto is not None:
        from ..engine._run import period_runner
        from ._auto import release_auto_period

        with period_runner(engine=engine, scheduler=scheduler, n_workers=p["n_workers"]) as run:
            for i in new:
                release_auto_period(
                    store,
                    auto,
                    ordinal=ordinals[i],
                    label=grid.label(ordinals[i]),
                    values=values_of(i),
                    tree=tree,
                    seed=p["seed"],
                    charge=lambda i=i: _charge_once(
                        ledger, cost, eps, unit, ordinals[i], "release_optstream: k=auto, planned"
                    ),
                    run=run,
                    history=(p.get("history") or (None, None))[0],
                    carried=(p.get("history") or (None, None))[1],
                )
                if progress is not None:
                    progress(1)
        return ordinals
    plan = _fixed_plan(cfg["k"], eps=eps, alpha=p["neighbours"].delta, w=w, n_levels=h)
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
        missing=p.get("missing", "error"),
    )
    plan.update(sampling=p["sampling"], theta=p["theta"], weights=p["weights"], levels=h)
    label = f"release_optstream: {h} level(s), epsilon/{h} each"

    def charge(i: int) -> None:
        _charge_once(ledger, cost, eps, unit, ordinals[i], label)

    def tasks():
        for i in new:
            if engine == "local":
                charge(i)  # committed right before this period's draw
            yield PeriodTask(spec=spec, ordinal=ordinals[i], values=values_of(i), seed=p["seed"])

    if split:  # inside each period: subtrees on Dask, each validating its reads before a charge
        from ..engine._subtree import release_periods_split

        put = lambda o, v: store._put(o, grid.label(o), v, plan, seeded=p["seed"] is not None)  # noqa: E731
        release_periods_split(
            spec, [(ordinals[i], leaves_of(i), lambda i=i: charge(i)) for i in new],
            seed=p["seed"], cut=cut, scheduler=scheduler, n_workers=p["n_workers"],
            put=put, progress=progress, local=engine == "local",
        )  # fmt: skip
        return ordinals
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


def _charge_once(ledger, cost, eps, unit, ordinal, label) -> None:
    """Charge a period, unless a killed run already did (its charge is reused, never doubled:
    the killed run's draws were never published)."""
    if ledger.spent(ordinal) < eps:
        ledger.charge(cost, label, unit=unit, period=ordinal)


def _call(func):
    """Run a zero-argument task (a validation) where it is mapped."""
    return func()
