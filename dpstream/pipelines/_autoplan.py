"""OptStream releases that plan themselves: plan period t from what is public, release it.

``release_optstream(k="auto")`` (the default) runs, for every w-period in time order,

1. ``planner.plan()`` of the call's :class:`planner.StreamPlanner` (:func:`new_planner`; its
   state, ``plan``, ``update``) — choose k, noise, level shares and the period's budget
   (:func:`planner.plan_period`) from the *measurements* already released in this call and the
   optional public ``history``: the variogram with the known noise taken out
   (:mod:`planner._roughness`), and a forecast with its empirical-Bayes error variance
   (:func:`postproc.profile_prior`); an earlier ``k="auto"`` release passed as ``history``
   brings the samples of its last w steps (its ``attrs["plan"]``), so windows straddling the
   two calls stay within the budget (issue 24.1);
2. :func:`measure_period` — the private step: equally spaced samples of every level with
   Laplace (or discrete Gaussian) noise, reconstructed by interpolation ([FV19] Alg. 2);
3. :func:`post_process_periods` — Algorithm 4 over the hierarchy with inverse predicted error
   variances and the prior as one more weighted term (free; can run once for all periods).

Only step 2 reads the period's private values; steps 1 and 3 read measurements (outputs of
step 2 for earlier periods), plans and public history, so the plans and priors are
post-processing ([FV19] Theorem 3). The measurements and the plans are published with the
release (``DataFrame.attrs["measurements"]`` and ``attrs["plan"]``), so anyone can recompute
every plan and prior from the release alone (:func:`replan`).

*Privacy*: (w, α)-indistinguishability ([FV19] Def. 3) at the user's ε (Laplace, pure DP), or
at (ε, δ) through ρ (Gaussian; composed Gaussians are one, tight curve: ``gaussian_rho``). Per
level and window a sample costs (period budget)/k; levels compose sequentially ([FV19]
Theorem 13) with the planned shares, and :func:`planner.window_budget` keeps every window of
w steps, including those straddling two differently planned periods, within the total.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from mechanisms import (
    Budget,
    BudgetLedger,
    ParameterError,
    WAlphaIndistinguishability,
    bit_source,
)
from mechanisms.core._validation import check_positive, check_probability
from mechanisms.wevent._gaussian import gaussian_epsilon, gaussian_rho
from planner._stream_plan import TARGETS, PeriodPlan, within_budget
from planner._stream_planner import LOOKBACK, PRIOR_DAYS, StreamPlanner, carried_previous
from postproc import profile_prior
from postproc._prior import PriorState, ProfilePrior

from ._period_steps import (
    AutoConfig,
    Measurement,
    as_measurement,
    history_measurements,
    measure_period,
    post_process_periods,
)
from ._privacy import attach_record, charge_release, release_record
from ._shared import KeptMeasurement, PeriodsView, SharedDict, share

__all__ = [
    "AUTO_NOISES",
    "LOOKBACK",
    "PRIOR_DAYS",
    "Measurement",
    "StreamPlanner",
    "new_planner",
    "measure_period",
    "plan_for_period",
    "post_process_periods",
    "release_auto",
    "replan",
]

#: ``noise=`` choices of ``release_optstream(k="auto")``.
AUTO_NOISES = ("laplace", "gaussian", "auto")


#: The planner keeps running sums (:class:`postproc.PriorState`, O(N w)); False: it holds the
#: last periods and reads them exactly (the golden tests' reference; 6.4 GB at 100,000 feeders).
STREAMING_STATE = True


def new_planner(cfg: AutoConfig) -> StreamPlanner:
    """The release's in-stream planner (:class:`planner.StreamPlanner`) with the profile prior
    (:func:`postproc.profile_prior`) when ``cfg.use_prior``, its state as running sums
    (:data:`STREAMING_STATE`)."""
    return StreamPlanner(
        cfg,
        prior_model=profile_prior if cfg.use_prior else None,
        prior_state=PriorState if STREAMING_STATE else None,
    )


def _config(
    *, epsilon, alpha, w, delta, noise, target, level_shares, hierarchy, nodes, prior
) -> AutoConfig:
    owner = "release_optstream"
    if noise not in AUTO_NOISES:
        raise ParameterError(
            f"The 'noise' parameter of {owner} must be one of {AUTO_NOISES}. Got {noise!r} instead."
        )
    if noise in ("gaussian", "auto") and delta is None and noise == "gaussian":
        raise ParameterError(
            f"The 'noise' parameter of {owner} is 'gaussian', which needs a 'delta' in (0, 1). "
            "Give delta=1e-6 (say), or use noise='laplace'."
        )
    if target not in TARGETS:
        raise ParameterError(
            f"The 'target' parameter of {owner} must be one of {TARGETS}. Got {target!r} instead."
        )
    if not isinstance(prior, bool):
        raise ParameterError(
            f"The 'prior' parameter of {owner} must be True or False. Got {prior!r}."
        )
    if hierarchy is None:
        from scipy import sparse

        n = len(nodes)
        matrix = sparse.identity(n, format="csr")  # never dense: 80 GB at 100,000 streams
        levels = (np.arange(n),)
        leaf_nodes = np.arange(n)
    else:
        # sparse (one non-zero per leaf and ancestor): the dense matrix is O(nodes x leaves),
        # 80 GB at 100,000 feeders; the planner densifies it only for small trees
        matrix = hierarchy.sparse_matrix
        levels = tuple(np.array([hierarchy.index(x) for x in lv]) for lv in hierarchy.levels)
        leaf_nodes = np.array([hierarchy.index(x) for x in hierarchy.leaves])
    h = len(levels)
    if level_shares not in (None, "equal", "bottom-up"):
        try:
            vals = tuple(float(s) for s in level_shares)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            vals = ()
        # at most 1 (issue 24.4): the correctly rounded sum, no slack (1 + 1e-9 let a window
        # cost 1.000000001 ε); then within_budget takes the sub-ulp excess of decimal shares
        # such as (0.1, 0.1, 0.8), whose exact sum is 1 + 2^-54, off the largest share
        if (
            len(vals) != h
            or not all(np.isfinite(vals))
            or min(vals) < 0
            or math.fsum(vals) > 1
            or vals[-1] <= 0
        ):
            raise ParameterError(
                f"The 'level_shares' parameter of {owner} must be None, 'equal', 'bottom-up' or "
                f"{h} non-negative floats summing to at most 1 exactly, the leaf level > 0. "
                f"Got {level_shares!r} instead."
            )
        level_shares = within_budget(vals)
    return AutoConfig(
        epsilon=epsilon,
        alpha=alpha,
        w=w,
        delta=delta,
        noise=noise,
        target=target,
        level_shares=level_shares,
        matrix=matrix,
        levels=levels,
        leaf_nodes=leaf_nodes,
        use_prior=prior,
    )


def plan_for_period(
    state: StreamPlanner, cfg: AutoConfig, *, r: int, tail_of: PeriodPlan | None = None
) -> tuple[PeriodPlan, ProfilePrior | None]:
    """Plan one period of r steps from the planner's state (public values only) and build its
    prior: :meth:`planner.StreamPlanner.plan`."""
    return state.plan(r, tail_of=tail_of)


def run_periods(
    full: np.ndarray,
    tail: np.ndarray,
    cfg: AutoConfig,
    *,
    history: np.ndarray | None,
    measure,
    carried: tuple | None = None,
    keep=None,
) -> tuple[list[Measurement], list[PeriodPlan], list[ProfilePrior | None]]:
    """Plan and measure every period in time order; ``measure(i, values, plan)`` is the private
    step (:func:`measure_period`), or a read of published measurements (:func:`replan`).
    ``carried``: the samples of an earlier release just before (:func:`carried_previous`).
    ``keep(i, measurement, plan)``: what the returned list holds of each measurement once the
    planner has read it (default: the measurement itself)."""
    planner = new_planner(cfg)
    planner.add_history(history_measurements(history, cfg.w))
    planner.carry(carried)
    measured, plans, priors = [], [], []
    n_full = full.shape[0]
    last: PeriodPlan | None = None
    for i in range(n_full + (1 if tail.shape[1] else 0)):
        vals = full[i] if i < n_full else tail
        r = vals.shape[1]
        plan, prior = planner.plan(r, tail_of=last if r < cfg.w else None)
        m = measure(i, vals, plan)
        planner.update(m, plan)
        measured.append(m if keep is None else keep(i, m, plan))
        del m
        plans.append(plan)
        priors.append(prior)
        last = plan
    return measured, plans, priors


def records(
    plans: list[PeriodPlan],
    priors: list[ProfilePrior | None],
    starts: list[object],
    delta: float | None = None,
) -> list[dict]:
    """``DataFrame.attrs["plan"]``: one dict per period.

    A Gaussian period's budget is ρ (zCDP); ``epsilon_dp`` is its tight (ε, δ) at the user's
    δ (composed Gaussians are one Gaussian: ``mechanisms.wevent.gaussian_epsilon``).
    """
    out = []
    for i, (plan, prior) in enumerate(zip(plans, priors, strict=True)):
        rec = {"period": i, "start": str(starts[i]), **plan.record()}
        if plan.noise == "gaussian" and delta is not None:
            rec["epsilon_dp"] = gaussian_epsilon(plan.budget, delta)
        rec["prior_periods"] = 0 if prior is None else prior.n_periods
        rec["prior_sd"] = None if prior is None else float(np.sqrt(prior.variance[:, 0]).mean())
        out.append(rec)
    return out


def _carried(history: object, hist_index, index, cfg: AutoConfig):
    """The samples of an earlier ``k="auto"`` release passed as ``history`` that windows
    reaching into this call's first period hold (issue 24.1; :func:`carried_previous`), or
    None (history without plans: public data, or more than w steps before the frame).

    The earlier release's periods start every w steps from its first stamp (its
    ``attrs["plan"]`` says where; checked), its last may be a shorter tail, and a gap of g
    steps before the frame moves them g steps further from it. Validated here, before any
    charge: an earlier release of another noise cannot be continued (one currency per
    window).
    """
    owner = "release_optstream"
    plans = getattr(history, "attrs", {}).get("plan")
    if not plans:
        return None
    w, t = cfg.w, len(hist_index)
    starts = [i * w for i in range(len(plans))]
    if starts[-1] >= t or any(
        str(p.get("start")) != str(hist_index[s]) for p, s in zip(plans, starts, strict=True)
    ):
        raise ParameterError(
            f"The 'history' parameter of {owner} carries the plans of an earlier k='auto' "
            "release (attrs['plan']) that do not match its index: pass that release unchanged "
            "(not a slice), or drop its attrs if it is public data."
        )
    step = index[1] - index[0] if len(index) > 1 else hist_index[-1] - hist_index[-2]
    gap = (index[0] - hist_index[-1]) / step - 1
    if gap < 0 or gap != int(gap):
        raise ParameterError(
            f"The 'history' parameter of {owner} is an earlier release that must end before "
            f"the frame starts, on its grid. Got history ending at {hist_index[-1]} and the "
            f"frame starting at {index[0]}."
        )
    if gap >= w:
        return None
    lengths = [min(s + w, t) - s for s in starts]
    carried = carried_previous(plans, lengths, w, gap=int(gap))
    if carried is not None:
        allowed = AUTO_NOISES[:2] if cfg.noise == "auto" else (cfg.noise,)
        if carried[2] not in allowed or (carried[2] == "gaussian" and cfg.delta is None):
            raise ParameterError(
                f"The 'noise' parameter of {owner} is {cfg.noise!r} (delta={cfg.delta}), but "
                f"the earlier release passed as 'history' ended with {carried[2]!r} noise: a "
                "window straddling both would mix currencies. Use its noise (and delta)."
            )
        total = cfg.epsilon if carried[2] == "laplace" else gaussian_rho(cfg.epsilon, cfg.delta)
        spent = float(carried[1][carried[0] >= 1].sum())  # the most any window s >= 1 holds
        if spent >= total:
            raise ParameterError(
                f"The 'epsilon' parameter of {owner} is {cfg.epsilon}, but the earlier release "
                "passed as 'history' spent at least that much in the windows reaching into this "
                "call's first period (its last w steps). Give an epsilon above it, or leave w "
                "steps between the two releases."
            )
    return carried


def _periods_of(observed: np.ndarray | None, w: int):
    """``i -> (N, r)`` mask of period i (None without a mask): ``missing="unmeasured"``."""
    if observed is None:
        return lambda i: None
    obs = np.asarray(observed, dtype=bool)
    n_full = obs.shape[0] // w
    return lambda i: obs[i * w : (i + 1) * w].T if i <= n_full else None


def replan(
    measurements: np.ndarray,
    cfg: AutoConfig,
    *,
    history: np.ndarray | None = None,
    carried: tuple | None = None,
    observed: np.ndarray | None = None,
) -> tuple[list[PeriodPlan], list[ProfilePrior | None]]:
    """Recompute every period's plan and prior from published measurements (T, N) alone
    (and the public mask ``observed`` (T, N) of a ``missing="unmeasured"`` release: False
    where the release is NaN).

    The privacy check of the pipeline: the plans depend on the data only through the
    measurements (and public history, and the carried plan of an earlier release:
    ``attrs["plan_config"]["carried"]``), so replaying them gives the same plans.
    """
    w = cfg.w
    t = measurements.shape[0]
    n_full = t // w
    full = measurements[: n_full * w].reshape(n_full, w, -1).transpose(0, 2, 1)
    tail = measurements[n_full * w :].T

    obs = _periods_of(observed, w)

    def read(i: int, vals: np.ndarray, plan: PeriodPlan) -> Measurement:
        return as_measurement(vals, plan, cfg, observed=obs(i))

    _, plans, priors = run_periods(full, tail, cfg, history=history, measure=read, carried=carried)
    return plans, priors


def _stacked(periods: list, n_steps: int, n_nodes: int) -> np.ndarray:
    """(T, N) of consecutive periods (N, r): ``from_periods`` of their stack, filled a period
    at a time; each period's array is dropped from ``periods`` once copied."""
    out = np.empty((n_steps, n_nodes))
    lo = 0
    for i, part in enumerate(periods):
        out[lo : lo + part.shape[1]] = part.T
        lo += part.shape[1]
        periods[i] = None
    return out


def _measurement_of(values, observed, *, plan: PeriodPlan, cfg: AutoConfig) -> Measurement:
    """A period's :func:`as_measurement` under its plan (:class:`KeptMeasurement`'s rebuild;
    a module-level function, so that a release still pickles)."""
    return as_measurement(values, plan, cfg, observed=observed)


def release_auto(
    frame: object,
    *,
    epsilon: float,
    alpha: float,
    w: int,
    sampling: str | None,
    theta: float | None,
    weights: str,
    features: object,
    shares: object,
    delta: float | None,
    noise: str,
    target: str,
    level_shares: object,
    prior: bool,
    history: object,
    hierarchy: object,
    seed: object,
    ledger: BudgetLedger | None = None,
    progress: object = None,
    missing: str = "error",
) -> object:
    """``release_optstream(k="auto")``: validate, charge, plan and release period by period.

    ``missing="unmeasured"``: NaN in ``frame`` are missing readings, a public mask
    (``docs/privacy.md``, "Missing readings"): measured as the constant 0 and dropped from
    their node's reconstruction, skipped by the planner's variogram and prior, pinned to 0 in
    Algorithm 4 (aggregates are sums over the observed leaves) and published as NaN.

    See :func:`dpstream.release_optstream` for the parameters; the module notes for the
    method. Returns the released frame with ``attrs["plan"]`` (one dict per period: k, noise,
    level shares, budget, predicted mean absolute error per value, what the plan was based on,
    the prior's size and standard deviation) and ``attrs["measurements"]`` (T, N): the
    estimates the private step released, from which :func:`replan` recomputes every plan.
    """
    from ._frames import prepare_frame

    owner = "release_optstream"
    fixed = {"features": features, "shares": shares, "theta": theta}
    bad = [name for name, val in fixed.items() if val is not None]
    if sampling not in (None, "equal") or weights != "variance" or bad:
        raise ParameterError(
            f"The 'k' parameter of {owner} is 'auto', which plans equally spaced samples "
            "without feature queries and its own weights; 'sampling' (other than 'equal'), "
            f"'weights', 'features', 'shares' and 'theta' need an int k. "
            f"Got {bad or ['sampling/weights']}."
        )
    alpha = check_positive(alpha, "alpha", owner)
    if delta is not None:
        delta = check_probability(delta, "delta", owner, closed_low=False)
    unmeasured = {"missing": "unmeasured"} if missing == "unmeasured" else {}
    sf = prepare_frame(frame, owner=owner, hierarchy=hierarchy, **unmeasured)
    cfg = _config(
        epsilon=epsilon, alpha=alpha, w=w, delta=delta, noise=noise, target=target,
        level_shares=level_shares, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=prior,
    )  # fmt: skip
    hist = carried = None
    if history is not None:
        hf = prepare_frame(history, owner=owner, hierarchy=hierarchy, name="history")
        if hf.nodes != sf.nodes:
            raise ParameterError(
                f"The 'history' parameter of {owner} must have the same columns as the frame. "
                f"Got nodes {list(hf.nodes)[:5]} instead of {list(sf.nodes)[:5]}."
            )
        hist = np.asarray(hf.values)
        carried = _carried(history, hf.index, sf.index, cfg)
    full = PeriodsView(sf.values, w)  # each period copied when measured, not all at once
    tail = np.ascontiguousarray(sf.values[full.shape[0] * w :].T)  # to_periods' tail
    bits = bit_source(seed)  # validates the seed; draws nothing
    total = Budget(epsilon, 0.0 if delta is None else delta)
    unit = WAlphaIndistinguishability(w=w, alpha=alpha)
    # Every window of w steps costs at most `total` (window_budget): charged once, before any draw.
    paid = charge_release(ledger, total, unit, owner, frame=sf, seeded=seed is not None)

    obs = _periods_of(sf.observed, w)

    def draw(i: int, vals: np.ndarray, plan: PeriodPlan) -> Measurement:
        measured = measure_period(vals, plan, cfg, bits=bits, observed=obs(i))
        if progress is not None:
            progress(1)  # one period planned and measured
        return measured

    # Memory (issue 22): the measurements go straight into one (T, N) array as they are made
    # (the planner keeps what it needs of the last periods), and the output is filled a period
    # at a time, so the measurements, the output and the planning record exist once each (a
    # month at 100,000 feeders: 1.16 GB an array).
    meas = np.empty((sf.n_steps, sf.n_nodes))
    shared = share(meas)  # attrs["measurements"]: a read-only view, not copied per column

    def keep(i: int, m: Measurement, plan: PeriodPlan) -> KeptMeasurement:
        r = m.values.shape[1]
        meas[i * w : i * w + r] = m.values.T  # from_periods of their stack
        # the record's measurement: its rows of `shared`, its noise rebuilt from the plan
        rebuild = partial(_measurement_of, plan=plan, cfg=cfg)
        return KeptMeasurement(shared, i * w, r, rebuild, m.observed)

    kept, plans, priors = run_periods(
        full, tail, cfg, history=hist, measure=draw, carried=carried, keep=keep
    )
    del full, tail
    meas.setflags(write=False)
    released = post_process_periods(kept, plans, priors, sf.hierarchy)
    values = _stacked(released, sf.n_steps, sf.n_nodes)
    del released
    np.maximum(values, 0.0, out=values)
    if sf.observed is not None:  # nothing is published for a missing reading
        values = np.where(sf.observed, values, np.nan)
    out = sf.to_frame(values)
    del values
    starts = [sf.index[i * w] for i in range(len(plans))]
    out.attrs["plan"] = records(plans, priors, starts, delta)
    out.attrs["measurements"] = shared
    from dpstream._std_errors import PlanningRecord  # public by-products: no replay (issue 30)

    out.attrs["planning"] = PlanningRecord(kept, plans, priors, out.attrs["measurements"])
    out.attrs["hierarchy"] = None if sf.hierarchy is None else SharedDict({  # public: std_errors
        str(a): [str(c) for c in kids] for a, kids in sf.hierarchy.children.items()
    })
    out.attrs["plan_config"] = {
        "epsilon": epsilon, "delta": delta, "alpha": alpha, "w": w, "noise": noise,
        "target": target, "prior": prior, "history": hist is not None,
        "carried": None if carried is None else {
            "steps": carried[0].tolist(), "cost": carried[1].tolist(), "noise": carried[2]},
    }  # fmt: skip
    record = release_record(
        unit=unit,
        budget=total,
        proof="[FV19] Theorems 8 and 13 per period; k and level shares planned from released "
        "periods only (post-processing); every window of w steps within the budget",
        mechanism="optstream",
        parameters={
            "k": "auto",
            "sampling": "equal",
            "noise": noise,
            "target": target,
            "level_shares": level_shares
            if isinstance(level_shares, str | None)
            else list(level_shares),
            "prior": prior,
            "history": hist is not None,
            "levels": sf.n_levels,
        },
        bound=None,
        seeded=seed is not None,
    )
    attach_record(out, record, paid)
    return out
