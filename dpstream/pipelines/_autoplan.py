"""OptStream releases that plan themselves: plan period t from what is public, release it.

``release_optstream(k="auto")`` (the default) runs, for every w-period in time order,

1. :func:`plan_for_period` — choose k, noise, level shares and the period's budget
   (:func:`planner.plan_period`) from the *measurements* already released in this call and the
   optional public ``history``: the variogram with the known noise taken out
   (:mod:`planner._roughness`), and a forecast with its empirical-Bayes error variance
   (:func:`postproc.profile_prior`);
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
at (ε, δ) through ρ-zCDP (Gaussian; Bun and Steinke 2016, Prop. 1.3). Per level and window a
sample costs (period budget)/k; levels compose sequentially ([FV19] Theorem 13) with the
planned shares, and :func:`planner.window_budget` keeps every window of w steps, including
those straddling two differently planned periods, within the total.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms import (
    Budget,
    BudgetLedger,
    ParameterError,
    WAlphaIndistinguishability,
    bit_source,
)
from mechanisms.core._validation import check_positive, check_probability
from mechanisms.wevent._gaussian import zcdp_to_dp
from planner._roughness import RoughnessStats, period_roughness, variogram
from planner._stream_plan import NOISES, TARGETS, PeriodPlan, plan_period, share_grid
from postproc import profile_prior
from postproc._prior import ProfilePrior

from ._period_steps import (
    AutoConfig,
    Measurement,
    as_measurement,
    history_measurements,
    measure_period,
    post_process_periods,
)
from ._privacy import attach_record, charge_release, release_record

__all__ = [
    "AUTO_NOISES",
    "Measurement",
    "PlanState",
    "measure_period",
    "plan_for_period",
    "post_process_periods",
    "release_auto",
    "replan",
]

#: ``noise=`` choices of ``release_optstream(k="auto")``.
AUTO_NOISES = ("laplace", "gaussian", "auto")
#: Measured periods the variogram and the prior look back on.
LOOKBACK = 28
#: Measured periods the prior weighs (by precision: noisy released days count less than public
#: ones, so a longer look-back only adds information; model assumption: the daily profile
#: drifts little over two months).
PRIOR_DAYS = 56


@dataclass(slots=True, kw_only=True)
class PlanState:
    """What the planner knows before a period: earlier measurements and the previous plan."""

    w: int
    measurements: list[Measurement] = field(default_factory=list)
    roughness: list[RoughnessStats] = field(default_factory=list)
    errors: list[np.ndarray] = field(default_factory=list)
    """(N, w) predicted error variance of each measurement (noise plus interpolation)."""
    independent: list[np.ndarray] = field(default_factory=list)
    """(N,) True where the node was measured in its own right (leaves always; aggregates
    when their level had a share; never for public history, whose aggregates are sums)."""
    previous: tuple[np.ndarray, float, str] | None = None
    noise: str | None = None
    from_history: int = 0
    cfg: AutoConfig | None = None

    def add(self, m: Measurement, plan: PeriodPlan | None = None) -> None:
        """Record a full period's measurement (and the plan that produced it)."""
        if m.values.shape[1] == self.w:  # the tail (last, shorter period) plans nothing after it
            self.measurements.append(m)
            self.roughness.append(period_roughness(m.values, m.noise, m.sampled))
            self.errors.append(m.noise if plan is None else _error_variance(m, plan, self.cfg))
            self.independent.append(_measured_nodes(m.values.shape[0], plan, self.cfg))
        if plan is not None:
            pos = plan.positions(m.values.shape[1])
            self.previous = (pos, plan.budget / pos.size, plan.noise)
            self.noise = plan.noise


def _measured_nodes(n: int, plan: PeriodPlan | None, cfg: AutoConfig | None) -> np.ndarray:
    """(N,) nodes whose estimate is their own measurement: the leaves, and the aggregates of
    levels with a share. An aggregate summed from its leaves (or from public history) holds
    no information its leaves' priors lack: a prior on it too would count the same days
    twice in Algorithm 4 (measured: regional α/ε = 10, leaves 412 -> 346 kW)."""
    if cfg is None:
        return np.ones(n, dtype=bool)
    own = np.zeros(n, dtype=bool)
    own[cfg.leaf_nodes] = True
    if plan is not None:
        for share, nodes in zip(plan.shares, cfg.levels, strict=True):
            if share > 0:
                own[nodes] = True
    return own


def _error_variance(m: Measurement, plan: PeriodPlan, cfg: AutoConfig | None) -> np.ndarray:
    """Predicted error variance of a measurement: the plan's (noise plus interpolation), with
    share-0 aggregates given the sum of their leaves' (their estimate is that sum)."""
    v = np.array(plan.variances[:, : m.values.shape[1]], dtype=np.float64)
    bad = ~np.isfinite(v).all(axis=1)
    if bad.any() and cfg is not None:  # independence of the leaves' errors assumed
        v[bad] = cfg.matrix[bad] @ v[cfg.leaf_nodes]
    return np.where(np.isfinite(v), v, m.noise)


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
        n = len(nodes)
        matrix = np.eye(n)
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
        vals = tuple(float(s) for s in level_shares)  # type: ignore[union-attr]
        if len(vals) != h or min(vals) < 0 or abs(sum(vals) - 1) > 1e-9 or vals[-1] <= 0:
            raise ParameterError(
                f"The 'level_shares' parameter of {owner} must be None, 'equal', 'bottom-up' or "
                f"{h} non-negative floats summing to 1 with the leaf level > 0. "
                f"Got {level_shares!r} instead."
            )
        level_shares = vals
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


def _shares(cfg: AutoConfig) -> list[tuple[float, ...]] | None:
    h = len(cfg.levels)
    if cfg.level_shares is None:
        return share_grid(h)
    if cfg.level_shares == "equal":
        return [tuple([1.0 / h] * h)]
    if cfg.level_shares == "bottom-up":
        return [tuple([0.0] * (h - 1) + [1.0])]
    return [cfg.level_shares]


def plan_for_period(
    state: PlanState, cfg: AutoConfig, *, r: int, tail_of: PeriodPlan | None = None
) -> tuple[PeriodPlan, ProfilePrior | None]:
    """Plan one period of r steps from the state (public values only) and build its prior."""
    recent = state.roughness[-LOOKBACK:]
    gamma = None
    if recent:
        total = recent[0]
        for s in recent[1:]:
            total = total + s
        gamma = variogram(total)
    if state.noise is not None:
        noises: tuple[str, ...] = (state.noise,)
    elif cfg.noise == "auto":
        noises = NOISES if cfg.delta is not None else ("laplace",)
    else:
        noises = (cfg.noise,)
    basis = "history" if len(state.measurements) == state.from_history else "released"
    prior = None
    coherent = None
    if cfg.use_prior and len(state.measurements) >= 2:
        ms = state.measurements[-PRIOR_DAYS:]
        # lists of the periods' (N, r) arrays, not stacked: profile_prior reads them a block
        # of nodes at a time (stacked, each was 2 GB at 100,000 feeders x 56 periods)
        series = (
            [m.values[:, :r] for m in ms],
            [m.noise[:, :r] for m in ms],
            [m.sampled[:, :r] for m in ms],
        )
        error = [e[:, :r] for e in state.errors[-PRIOR_DAYS:]]
        prior = profile_prior(
            *series,
            days=PRIOR_DAYS,
            error=error,
            independent=np.stack(state.independent[-PRIOR_DAYS:]),
            period=cfg.w,
        )
        coherent = _coherent_variance(prior, series, error, cfg)
    plan = plan_period(
        gamma,
        matrix=cfg.matrix,
        levels=list(cfg.levels),
        epsilon=cfg.epsilon,
        alpha=cfg.alpha,
        w=cfg.w,
        r=r,
        delta=cfg.delta,
        noises=noises,
        target=cfg.target,
        previous=state.previous,
        candidates=None if tail_of is None else (min(tail_of.k, r),),
        shares=_shares(cfg) if tail_of is None else [tail_of.shares],
        basis=basis,
        prior_variance=None if prior is None else prior.variance,
        choose_with_prior=cfg.plan_with_prior,
        prior_coherent=coherent,
    )
    return plan, prior


def _coherent_variance(
    prior: ProfilePrior | None, series: tuple[list, ...], error: list, cfg: AutoConfig
) -> np.ndarray | None:
    """(N, r) error variance of each node's forecast as a whole, for the planner's prediction
    (``plan_period(prior_coherent=...)``): a leaf's is its prior's; an aggregate's comes from
    its whole series, the periods summed from its leaves included (what its released value,
    the sum of its leaves' merged estimates, inherits from their correlated forecasts)."""
    if prior is None:
        return None
    out = np.array(prior.variance, dtype=np.float64)
    agg = np.ones(out.shape[0], dtype=bool)
    agg[cfg.leaf_nodes] = False
    if agg.any():
        whole = profile_prior(
            *([a[agg] for a in x] for x in series),
            days=PRIOR_DAYS,
            error=[a[agg] for a in error],
            period=cfg.w,
        )
        if whole is not None:
            out[agg] = whole.variance
    return out


def run_periods(
    full: np.ndarray,
    tail: np.ndarray,
    cfg: AutoConfig,
    *,
    history: np.ndarray | None,
    measure,
) -> tuple[list[Measurement], list[PeriodPlan], list[ProfilePrior | None]]:
    """Plan and measure every period in time order; ``measure(i, values, plan)`` is the private
    step (:func:`measure_period`), or a read of published measurements (:func:`replan`)."""
    state = PlanState(w=cfg.w, cfg=cfg)
    for m in history_measurements(history, cfg.w):
        state.add(m)
    state.from_history = len(state.measurements)
    measured, plans, priors = [], [], []
    n_full = full.shape[0]
    last: PeriodPlan | None = None
    for i in range(n_full + (1 if tail.shape[1] else 0)):
        vals = full[i] if i < n_full else tail
        r = vals.shape[1]
        plan, prior = plan_for_period(state, cfg, r=r, tail_of=last if r < cfg.w else None)
        m = measure(i, vals, plan)
        state.add(m, plan)
        measured.append(m)
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

    A Gaussian period's budget is ρ (zCDP); ``epsilon_dp`` is its (ε, δ) conversion
    (Bun and Steinke 2016, Prop. 1.3) at the user's δ.
    """
    out = []
    for i, (plan, prior) in enumerate(zip(plans, priors, strict=True)):
        rec = {"period": i, "start": str(starts[i]), **plan.record()}
        if plan.noise == "gaussian" and delta is not None:
            rec["epsilon_dp"] = zcdp_to_dp(plan.budget, delta)
        rec["prior_periods"] = 0 if prior is None else prior.n_periods
        rec["prior_sd"] = None if prior is None else float(np.sqrt(prior.variance[:, 0]).mean())
        out.append(rec)
    return out


def replan(
    measurements: np.ndarray,
    cfg: AutoConfig,
    *,
    history: np.ndarray | None = None,
) -> tuple[list[PeriodPlan], list[ProfilePrior | None]]:
    """Recompute every period's plan and prior from published measurements (T, N) alone.

    The privacy check of the pipeline: the plans depend on the data only through the
    measurements (and public history), so replaying them gives the same plans.
    """
    w = cfg.w
    t = measurements.shape[0]
    n_full = t // w
    full = measurements[: n_full * w].reshape(n_full, w, -1).transpose(0, 2, 1)
    tail = measurements[n_full * w :].T

    def read(i: int, vals: np.ndarray, plan: PeriodPlan) -> Measurement:
        return as_measurement(vals, plan, cfg)

    _, plans, priors = run_periods(full, tail, cfg, history=history, measure=read)
    return plans, priors


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
) -> object:
    """``release_optstream(k="auto")``: validate, charge, plan and release period by period.

    See :func:`dpstream.release_optstream` for the parameters; the module notes for the
    method. Returns the released frame with ``attrs["plan"]`` (one dict per period: k, noise,
    level shares, budget, predicted mean absolute error per value, what the plan was based on,
    the prior's size and standard deviation) and ``attrs["measurements"]`` (T, N): the
    estimates the private step released, from which :func:`replan` recomputes every plan.
    """
    from ._frames import from_periods, prepare_frame, to_periods

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
    sf = prepare_frame(frame, owner=owner, hierarchy=hierarchy)
    cfg = _config(
        epsilon=epsilon, alpha=alpha, w=w, delta=delta, noise=noise, target=target,
        level_shares=level_shares, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=prior,
    )  # fmt: skip
    hist = None
    if history is not None:
        hf = prepare_frame(history, owner=owner, hierarchy=hierarchy, name="history")
        if hf.nodes != sf.nodes:
            raise ParameterError(
                f"The 'history' parameter of {owner} must have the same columns as the frame. "
                f"Got nodes {list(hf.nodes)[:5]} instead of {list(sf.nodes)[:5]}."
            )
        hist = np.asarray(hf.values)
    periods = to_periods(sf.values, w)
    bits = bit_source(seed)  # validates the seed; draws nothing
    total = Budget(epsilon, 0.0 if delta is None else delta)
    unit = WAlphaIndistinguishability(w=w, alpha=alpha)
    # Every window of w steps costs at most `total` (window_budget): charged once, before any draw.
    charge_release(ledger, total, unit, owner)

    def draw(i: int, vals: np.ndarray, plan: PeriodPlan) -> Measurement:
        measured = measure_period(vals, plan, cfg, bits=bits)
        if progress is not None:
            progress(1)  # one period planned and measured
        return measured

    measured, plans, priors = run_periods(
        periods.full, periods.tail, cfg, history=hist, measure=draw
    )
    released = post_process_periods(measured, plans, priors, sf.hierarchy)
    n_full = periods.full.shape[0]
    full = np.stack(released[:n_full]) if n_full else np.empty((0, sf.n_nodes, w))
    tail = released[n_full] if len(released) > n_full else None
    out = sf.to_frame(np.maximum(from_periods(full, tail), 0.0))
    est_full = (
        np.stack([m.values for m in measured[:n_full]]) if n_full else np.empty((0, sf.n_nodes, w))
    )
    est_tail = measured[n_full].values if len(measured) > n_full else None
    starts = [sf.index[i * w] for i in range(len(plans))]
    out.attrs["plan"] = records(plans, priors, starts, delta)
    out.attrs["measurements"] = from_periods(est_full, est_tail)
    out.attrs["plan_config"] = {
        "epsilon": epsilon, "delta": delta, "alpha": alpha, "w": w, "noise": noise,
        "target": target, "prior": prior, "history": hist is not None,
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
    attach_record(out, record)
    return out
