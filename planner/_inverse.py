"""Inverse planning: the ε that meets an error target, and the ε–error curve (issue 23).

Analysts start from an error they can live with ("3 % at the regional level", "±5 kWh on a
day's total") and need ε, or from a budget and need the error each level gets. Every planner
of this package predicts the error of a release *forward*, from ε and public (or declared
public) inputs; this module inverts those predictions:

* :func:`solve_epsilon` — the root of ``log predicted(ε) = log target`` in log ε
  (:func:`scipy.optimize.brentq`), bracketed in [``epsilon_min``, ``epsilon_max``]. Every
  forward prediction used here is non-increasing in ε (a minimum over candidate settings of
  errors that fall with ε: the noise falls, the interpolation, smoothing and clipping errors
  do not grow), so the root is unique up to flat stretches and brentq finds it.
* **Unreachable targets.** When even ``epsilon_max`` predicts more than the target the plan
  says so: ``reachable=False``, ``epsilon = epsilon_max`` and ``predicted`` the best error
  achievable there (the CLI prints it and exits with status 2; with ``--json`` the object is
  printed first with ``"reachable": false``). When ``epsilon_min`` already meets the target,
  ``epsilon = epsilon_min`` (``reachable=True``, the target is met with room to spare).
* Forward predictions per method:

  - OptStream (:func:`optstream_forward`): :func:`planner.plan_period` on the variogram of the
    history (the in-stream planner's own error model, [FV19] §4), which predicts the mean
    absolute error of every node for the best (k, level shares) at ε; per level we report
    the mean absolute error and the *relative* error MAE/mean|x| of each node (mean absolute
    error divided by the node's mean load on the history, i.e. a weighted MAPE, Σ|e|/Σ|x|:
    the per-step |e_t|/x_t of the textbook MAPE is unbounded at the near-zero loads of the
    bundled data), averaged over the level's nodes.
  - PAK (:func:`pak_forward`): the mean-square form of [PAK19] Eq. 16 on the prefix
    (:func:`planner.plan_pak_mse`). With the stream length n (``horizon``) and L ≤ n − m: the
    root mean square error of a range sum of L steps, ĉ(a + L) − ĉ(a), averaged over public
    ranges of the released suffix (a ≥ m; the counters' exact mean range variance, the
    ranges' clipping loss; c(σ, m)'s noise cancels), the quantity ToPS' target is of. The
    ranges of L > n − m steps the release answers start at the first step: the prefix sum
    c(σ, L), one query per release (also without ``horizon``, L then being the stream's
    length: the released total c(σ, n), Eq. 16's own quantity).
  - ToPS (:func:`tops_forward`): the release's own rule at ε_r = ε (ε_θ = ε unless given):
    its θ, g and L simulated on the prefix (:func:`planner.plan_tops`'s runs), and the mean
    over the runs of the mean square error of a range sum of exactly L steps (the terms of
    :func:`planner.tops_range_error` over public ranges of length L: noise of the complete
    leaves, partial leaves, clipping bias L·μ_θ).

*Privacy*: none of these functions releases anything. They read their ``history`` or
``prefix`` argument: pass public data (an earlier, released or declared public period), never
the data to be released (the returned ε would then depend on it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError
from mechanisms.core._results import summary_text, table_frame
from mechanisms.core._validation import check_integer, check_positive, check_real_array

__all__ = [
    "EpsilonPlan",
    "epsilon_curve",
    "level_names",
    "optstream_forward",
    "pak_forward",
    "plan_epsilon",
    "solve_epsilon",
    "tops_forward",
]

#: The default search interval of ε (both ends are public choices of the analyst).
EPSILON_RANGE = (1e-3, 1e3)
_NOTE = (
    "Planned on history/prefix: an analysis of the data passed in, which must not be the data "
    "to be released."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsilonPlan:
    """The ε that meets an error target (or the error predicted at a given ε), per level."""

    method: str
    """``"optstream"``, ``"pak"`` or ``"tops"``."""
    epsilon: float
    """ε of the release: the solution (inverse), the given ε (forward), or ``epsilon_max``
    when the target is unreachable."""
    metric: str
    """``"mape"`` (relative: MAE/mean load, a fraction), ``"mae"`` or ``"rmse"``."""
    level: str
    """The level (or node) the target is set on."""
    target: float | None
    """The target error in ``metric`` (None: forward planning)."""
    predicted: float
    """Predicted ``metric`` of ``level`` at ``epsilon``."""
    reachable: bool
    """False when even ``epsilon_max`` predicts more than the target."""
    errors: dict = field(hash=False)
    """Predicted errors at ``epsilon``: ``{level: {metric: value}}``."""
    parameters: dict = field(hash=False)
    """The release settings the prediction assumes (k, level shares, threshold, ...)."""
    epsilon_range: tuple[float, float]
    """The interval ε was searched in."""
    evaluations: int = 0
    """Forward predictions made."""
    private: bool = False
    """Always False: the plan reads the history or prefix."""
    note: str = _NOTE
    """What the plan may be used for."""

    def as_dict(self) -> dict:
        """Plain values (the CLI's JSON object)."""
        out = {
            "method": self.method,
            "epsilon": self.epsilon,
            "metric": self.metric,
            "level": self.level,
            "target": self.target,
            f"predicted_{self.metric}": self.predicted,
            "reachable": self.reachable,
            "errors": self.errors,
            "epsilon_range": list(self.epsilon_range),
            "private": self.private,
            "note": self.note,
        }
        out.update(self.parameters)
        return out

    def to_frame(self):
        """One row per level: its predicted errors."""
        names = list(self.errors)
        metrics = sorted({m for v in self.errors.values() for m in v})
        return table_frame(
            {m: [self.errors[n].get(m, math.nan) for n in names] for m in metrics},
            index=names,
            index_name="level",
        )

    def summary(self) -> str:
        """A short text table."""
        rows = [("epsilon", self.epsilon)]
        if self.target is not None:
            rows.append((f"target {self.metric} ({self.level})", self.target))
            rows.append(("reachable", self.reachable))
        rows.append((f"predicted {self.metric} ({self.level})", self.predicted))
        for name, errs in self.errors.items():
            rows.append((f"  {name}", ", ".join(f"{k} {v:.4g}" for k, v in errs.items())))
        for key, value in self.parameters.items():
            rows.append((key, value))
        return summary_text(f"{self.method} ε plan (issue 23)", rows, result=self)


def solve_epsilon(
    predict: Callable[[float], float],
    target: float,
    *,
    epsilon_min: float = EPSILON_RANGE[0],
    epsilon_max: float = EPSILON_RANGE[1],
    rtol: float = 1e-4,
) -> tuple[float, float, bool, int]:
    """The ε in [epsilon_min, epsilon_max] at which ``predict(ε) = target`` (module notes).

    Returns (ε, predict(ε), reachable, evaluations). ``predict`` must be non-increasing in ε
    and positive. Unreachable (``predict(epsilon_max) > target``): (epsilon_max, its
    prediction, False, ·). Met at ``epsilon_min`` already: (epsilon_min, its prediction,
    True, ·).
    """
    from scipy.optimize import brentq

    owner = "solve_epsilon"
    target = check_positive(target, "target", owner)
    lo = check_positive(epsilon_min, "epsilon_min", owner)
    hi = check_positive(epsilon_max, "epsilon_max", owner)
    if not lo < hi:
        raise ParameterError(
            f"The 'epsilon_min' parameter of {owner} must be smaller than 'epsilon_max'. Got "
            f"{lo!r} and {hi!r} instead."
        )
    cache: dict[float, float] = {}

    def f(log_eps: float) -> float:
        if log_eps not in cache:
            cache[log_eps] = float(predict(math.exp(log_eps)))
        return math.log(cache[log_eps]) - math.log(target)

    top, bottom = math.log(hi), math.log(lo)
    if f(top) > 0:
        return hi, cache[top], False, len(cache)
    if f(bottom) <= 0:
        return lo, cache[bottom], True, len(cache)
    root = brentq(f, bottom, top, xtol=1e-12, rtol=rtol)
    # brentq's root may sit a hair on the wrong side of a step of the prediction (the best
    # candidate changes with ε): nudge up until the target is met
    for _ in range(60):
        if f(root) <= 1e-9:
            break
        root = min(top, root + max(abs(root), 1.0) * 4 * rtol)
    return math.exp(root), cache[root], True, len(cache)


# -- OptStream --------------------------------------------------------------------------------


def level_names(depth: np.ndarray) -> list[str]:
    """Names of the levels of a hierarchy by depth: ``root`` (depth 0), ``leaves`` (deepest),
    ``level d`` between; one flat level is ``all``."""
    top = int(np.max(depth)) if np.size(depth) else 0
    if top == 0:
        return ["all"]
    return ["root" if d == 0 else "leaves" if d == top else f"level {d}" for d in range(top + 1)]


def _history_gamma(values: np.ndarray, w: int) -> np.ndarray:
    from ._roughness import period_roughness, variogram

    periods = values.shape[0] // w
    total = None
    for p in range(periods):
        stats = period_roughness(values[p * w : (p + 1) * w].T)
        total = stats if total is None else total + stats
    gamma = variogram(total)
    if gamma is None:  # pragma: no cover - a whole public period resolves every lag
        raise ParameterError("The history of optstream_forward resolves no lag of the variogram.")
    return gamma


@dataclass(frozen=True, slots=True)
class _OptStreamInputs:
    gamma: np.ndarray
    matrix: object
    levels: list
    names: list
    scale: np.ndarray  # (N,) mean |x| per node on the history
    node_names: tuple


def _optstream_inputs(history, w, matrix, depth, node_names, owner) -> _OptStreamInputs:
    x = check_real_array(history, "history", owner)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < w:
        raise ParameterError(
            f"The 'history' argument of {owner} must be a (T,) or (T, N) array with T >= w = "
            f"{w} (one whole period at least). Got shape {np.shape(history)}."
        )
    if not np.isfinite(x).all():
        raise ParameterError(f"The 'history' argument of {owner} must be finite (no NaN/inf).")
    n = x.shape[1]
    if matrix is None:
        matrix = np.eye(n)
    if depth is None:
        depth = np.zeros(n, dtype=np.int64)
    depth = np.asarray(depth, dtype=np.int64)
    if matrix.shape[0] != n or depth.shape != (n,):
        raise ParameterError(
            f"The 'matrix' and 'depth' arguments of {owner} must describe the N = {n} columns "
            f"of 'history' (all nodes, aggregates included). Got {matrix.shape} and "
            f"{depth.shape}."
        )
    names = level_names(depth)
    levels = [np.flatnonzero(depth == d) for d in range(len(names))]
    scale = np.abs(x[: (x.shape[0] // w) * w]).mean(axis=0)
    nodes = tuple(node_names) if node_names is not None else tuple(str(i) for i in range(n))
    return _OptStreamInputs(_history_gamma(x, w), matrix, levels, names, scale, nodes)


def _target_of(level: str, names: list[str]) -> str:
    if len(names) == 1:
        return "all"
    return "root" if level == names[0] else "leaves" if level == names[-1] else "all"


def _optstream_errors(inp: _OptStreamInputs, *, epsilon, alpha, w, target, level, candidates):
    from ._stream_plan import plan_period

    plan = plan_period(
        inp.gamma, matrix=inp.matrix, levels=inp.levels, epsilon=epsilon, alpha=alpha, w=w,
        target=target, basis="history", candidates=candidates,
    )  # fmt: skip
    mae = np.asarray(plan.predicted_nodes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(inp.scale > 0, mae / inp.scale, np.inf)
    errors = {}
    for name, nodes in zip(inp.names, inp.levels, strict=True):
        errors[name] = {"mae": float(mae[nodes].mean()), "mape": float(rel[nodes].mean())}
    if level not in errors:  # a node
        i = inp.node_names.index(level)
        errors[level] = {"mae": float(mae[i]), "mape": float(rel[i])}
    params = {
        "k": int(plan.k),
        "shares": {n: float(s) for n, s in zip(inp.names, plan.shares, strict=True)},
        "target_nodes": target,
    }
    return errors, params


def optstream_forward(
    history: object,
    *,
    epsilon: float,
    alpha: float,
    w: int = 48,
    matrix: object = None,
    depth: object = None,
    node_names: Sequence[str] | None = None,
    level: str | None = None,
    candidates: Sequence[int] | None = None,
) -> EpsilonPlan:
    """Predicted error per level of an OptStream release at ε (forward planning).

    Parameters
    ----------
    history
        (T, N) public history of every node (aggregates included, in the order of ``matrix``'s
        rows), T ≥ w; e.g. last month. **Read as data** (module notes).
    epsilon, alpha, w
        ε per window, α of the (w, α) unit (data units), period length.
    matrix, depth
        Aggregation matrix (N, L) and depth of each node (0 = root); None: independent
        streams (identity, one level).
    node_names
        Names of the N nodes (to set ``level`` on one node).
    level
        Level name (:func:`level_names`: ``root``, ``leaves``, ``level d``, or ``all``) or node
        name whose error is reported as ``predicted``; default the leaves. The level shares
        are planned for it (``target="root"``/``"leaves"`` of :func:`plan_period`).
    candidates
        Candidate k (default :func:`planner._stream_plan.default_candidates`).

    Returns
    -------
    EpsilonPlan
        ``metric="mape"`` (MAE/mean load, module notes), ``errors`` per level with both.
    """
    owner = "optstream_forward"
    eps = check_positive(epsilon, "epsilon", owner)
    a = check_positive(alpha, "alpha", owner)
    w = check_integer(w, "w", owner, minimum=2)
    inp = _optstream_inputs(history, w, matrix, depth, node_names, owner)
    lvl = _check_level(level, inp, owner)
    errors, params = _optstream_errors(
        inp, epsilon=eps, alpha=a, w=w, target=_target_of(lvl, inp.names), level=lvl,
        candidates=candidates,
    )  # fmt: skip
    return EpsilonPlan(
        method="optstream", epsilon=eps, metric="mape", level=lvl, target=None,
        predicted=errors[lvl]["mape"], reachable=True, errors=errors,
        parameters={**params, "alpha": a, "w": w}, epsilon_range=(eps, eps), evaluations=1,
    )  # fmt: skip


def _check_level(level, inp: _OptStreamInputs, owner: str) -> str:
    if level is None:
        return inp.names[-1]
    if level in inp.names or level in inp.node_names:
        return str(level)
    raise ParameterError(
        f"The 'level' parameter of {owner} must be one of the levels {inp.names} or a node "
        f"name. Got {level!r} instead."
    )


# -- PAK and ToPS -----------------------------------------------------------------------------


def pak_forward(
    prefix: object,
    *,
    epsilon: float,
    range_length: int,
    bound: float,
    delta: float,
    counter: str = "auto",
    beta: float = 0.02,
    p_max: float = 0.005,
    releases: int | None = None,
    confidence: float = 0.9,
    horizon: int | None = None,
    queries: int = 2000,
) -> EpsilonPlan:
    """Predicted RMSE of PAK's released range sums of L steps at ε (forward; module notes).

    ``prefix`` is the m values the threshold reads (**data**). With ``horizon`` = n (the
    stream's length) and L = ``range_length`` ≤ n − m the prediction is the RMSE of a range
    sum of L steps of the suffix, averaged over ``queries`` public ranges
    (:func:`planner.plan_pak_mse` with ``range_length``). Otherwise (no ``horizon``, or
    L > n − m) it is that of the prefix sum c(σ, L), L > m, one query per release.

    By default the prediction is the plan's expected RMSE. For c(σ, L), with ``releases`` = N
    it is instead the ``confidence`` quantile of the RMSE of N releases
    (:func:`planner.pak_rmse_quantile`; the plan's ``metric`` is then ``"rmse_quantile"``), so
    that :func:`plan_epsilon` answers "at most the target over N releases with probability
    ``confidence``". ``errors["range"]`` carries both. A range-sum RMSE averages over the
    ranges of each release already: ``releases`` does not apply to it.
    """
    from ._pak_mse import pak_rmse_quantile, plan_pak_mse

    owner = "pak_forward"
    length = check_integer(range_length, "range_length", owner)
    m = int(np.asarray(prefix).size)
    ranges = None
    if horizon is not None:
        n = check_integer(horizon, "horizon", owner, minimum=3)
        if length > n:
            raise ParameterError(
                f"The 'range_length' parameter of {owner} must be at most the stream length "
                f"horizon = {n:,}. Got {length:,} instead."
            )
        ranges = length if length <= n - m else None
    if ranges is not None and releases is not None:
        raise ParameterError(
            f"The 'releases' parameter of {owner} applies to one query per release (the prefix "
            f"sum c(σ, L), L > n − m); a range sum of L = {length:,} steps averages over "
            f"{queries} public ranges of each release. Got releases={releases!r}."
        )
    plan = plan_pak_mse(
        prefix, n=length if ranges is None else horizon, bound=bound, epsilon=epsilon,
        delta=delta, beta=beta, p_max=p_max, counter=counter, range_length=ranges,
        queries=queries,
    )  # fmt: skip
    errors = {"range": {"rmse": plan.rmse}}
    predicted = plan.rmse
    if releases is not None:
        _, predicted = pak_rmse_quantile(prefix, plan, releases=releases, confidence=confidence)
        errors["range"].update(
            rmse_quantile=predicted, releases=int(releases), confidence=float(confidence)
        )
    return EpsilonPlan(
        method="pak", epsilon=plan.epsilon,
        metric="rmse" if releases is None else "rmse_quantile", level="range", target=None,
        predicted=predicted, reachable=True, errors=errors, parameters=plan.parameters(),
        epsilon_range=(plan.epsilon, plan.epsilon), evaluations=1,
    )  # fmt: skip


def tops_length_errors(
    prefix: np.ndarray, *, thresholds: np.ndarray, horizon: int, range_length: int,
    epsilon: float, fanout: int = 16, queries: int = 2000, leaf_size: int | None = None,
    levels: int | None = None,
) -> list[tuple[float, dict]]:  # fmt: skip
    """(MSE, terms) of a ToPS range sum of exactly L steps at each θ (module notes).

    Internal (validated inputs). The noise over the complete leaves is averaged over public
    ranges of L steps starting at ``queries`` equally spaced steps of [0, r − L]; the partial
    leaves and the smoothing error are those of :func:`planner.tops_range_error`; the clipping
    bias of a range of L steps is L·μ_θ. The tree's g and L: ``leaf_size`` and ``levels``
    (a release's), else [ToPS21]'s pruning rule.
    """
    from mechanisms import tops_leaf_size, tops_levels, tops_noise
    from mechanisms.tops._variance import leaf_variance_units, variance_units

    from ._pak_range import range_starts
    from ._tops_plan import _per_step_excess, _smoothing_error

    r, length = int(horizon), int(range_length)
    g = tops_leaf_size(r, epsilon, fanout) if leaf_size is None else int(leaf_size)
    lv = tops_levels(r, g, fanout) if levels is None else int(levels)
    starts = range_starts(0, r, length, queries)  # the public ranges PAK's plan averages over too
    ends = starts + length - 1
    a = -(-starts // g)
    b = np.maximum((ends + 1) // g, a)
    units = float(variance_units(a, b, fanout, lv).mean())
    leaf = leaf_variance_units(lv, fanout)
    excess = _per_step_excess(prefix, np.asarray(thresholds, dtype=np.float64))
    out = []
    for theta, mu in zip(np.asarray(thresholds).tolist(), excess.tolist(), strict=True):
        v = tops_noise(
            threshold=theta, epsilon=epsilon, levels=lv, tree_size=g * fanout ** (lv - 1)
        ).variance
        noise = v * units
        partial = _smoothing_error(prefix, theta, g) + 5.0 / 3.0 * v * leaf if g > 1 else 0.0
        bias = length * mu
        terms = {"noise": noise, "partial": partial, "bias": bias, "leaf_size": g, "levels": lv}
        out.append((noise + partial + bias**2, terms))
    return out


#: At most this many θ candidates are scored per ε (evenly spaced in the optimizer's grid).
_TOPS_THRESHOLDS = 256


def tops_forward(
    prefix: object,
    *,
    epsilon: float,
    range_length: int,
    horizon: int,
    bound: float,
    fanout: int = 16,
    epsilon_threshold: float | None = None,
    draws: int | None = None,
    seed: object = 0,
) -> EpsilonPlan:
    """Predicted RMSE of a ToPS range sum of L steps at ε_r = ε (forward; module notes).

    The prediction is that of the release :func:`mechanisms.tops_release` makes with its
    defaults, ε_r = ε and ε_θ = ``epsilon_threshold`` (None: ε, the CLI's default) on a stream
    whose first m values are ``prefix`` (**data**, standing for the stream's distribution):
    its threshold and shape rule is run ``draws`` times on the prefix
    (:func:`planner._tops_plan.release_draws`, seeded with ``seed``: the same draws at every ε)
    and the MSE of a range of L steps at each run's (θ, g, L) is averaged; the RMSE is the
    root of that mean. ``parameters`` also carry the oracle: the candidate of the optimizer's
    grid with the least predicted error at the rule's most frequent shape (``best_threshold``,
    ``best_rmse``; candidates above the prefix's maximum are dominated and only the first of
    them is scored).
    """
    from mechanisms import tops_candidates
    from mechanisms.core._validation import check_stream

    from ._tops_plan import DEFAULT_DRAWS, release_draws

    owner = "tops_forward"
    eps = check_positive(epsilon, "epsilon", owner)
    r = check_integer(horizon, "horizon", owner, minimum=2, maximum=1 << 52)
    length = check_integer(range_length, "range_length", owner, maximum=r)
    bnd = check_positive(bound, "bound", owner)
    f = check_integer(fanout, "fanout", owner, minimum=2, maximum=1 << 20)
    eps_t = eps if epsilon_threshold is None else check_positive(
        epsilon_threshold, "epsilon_threshold", owner
    )  # fmt: skip
    k = DEFAULT_DRAWS if draws is None else check_integer(draws, "draws", owner)
    arr = check_stream(prefix, "prefix", owner, bound=bnd, min_length=2)
    rule = release_draws(
        arr, bound=bnd, horizon=r, epsilon_threshold=eps_t, epsilon_perturb=eps, fanout=f,
        draws=k, seed=seed, _owner=owner,
    )  # fmt: skip
    runs: dict[tuple[float, int, int], tuple[float, dict]] = {}
    keys = list(zip(rule.thresholds.tolist(), rule.leaf_sizes.tolist(), rule.levels.tolist(),
                    strict=True))  # fmt: skip
    for theta, g, lv in set(keys):
        runs[(theta, g, lv)] = tops_length_errors(
            arr, thresholds=np.array([theta]), horizon=r, range_length=length, epsilon=eps,
            fanout=f, leaf_size=g, levels=lv,
        )[0]  # fmt: skip
    scored = [runs[key] for key in keys]
    mse = float(np.mean([m for m, _ in scored]))
    rmse = math.sqrt(mse)
    g, lv = rule.shape
    grid = np.asarray(tops_candidates(bnd, None), dtype=np.float64)
    top = int(np.searchsorted(grid, arr.max(), side="left"))
    grid = grid[: min(top + 1, grid.size)]
    if grid.size > _TOPS_THRESHOLDS:
        grid = grid[np.unique(np.linspace(0, grid.size - 1, _TOPS_THRESHOLDS).astype(int))]
    oracle = tops_length_errors(
        arr, thresholds=grid, horizon=r, range_length=length, epsilon=eps, fanout=f,
        leaf_size=g, levels=lv,
    )  # fmt: skip
    i = int(np.argmin([m for m, _ in oracle]))
    q10, q50, q90 = rule.quantiles()
    terms = {name: float(np.mean([t[name] for _, t in scored])) for name in ("noise", "partial")}
    terms["bias"] = math.sqrt(float(np.mean([t["bias"] ** 2 for _, t in scored])))
    params = {
        "threshold": float(q50), "threshold_q10": float(q10), "threshold_q90": float(q90),
        "mean_threshold": float(rule.thresholds.mean()), "epsilon_threshold": eps_t,
        "range_length": length, "horizon": r, **terms, "leaf_size": g, "levels": lv,
        "draws": k, "score": ",".join(sorted(set(rule.scores))),
        "best_threshold": float(grid[i]), "best_rmse": math.sqrt(oracle[i][0]),
    }  # fmt: skip
    return EpsilonPlan(
        method="tops", epsilon=eps, metric="rmse", level="range", target=None, predicted=rmse,
        reachable=True, errors={"range": {"rmse": rmse}}, parameters=params,
        epsilon_range=(eps, eps), evaluations=1,
    )  # fmt: skip


# -- the inverse and the curve ----------------------------------------------------------------


def plan_epsilon(
    forward: Callable[[float], EpsilonPlan],
    *,
    target: float,
    metric: str | None = None,
    level: str | None = None,
    epsilon_min: float = EPSILON_RANGE[0],
    epsilon_max: float = EPSILON_RANGE[1],
) -> EpsilonPlan:
    """The ε whose forward prediction of ``level``'s ``metric`` meets ``target`` (inverse).

    ``forward(epsilon=ε)`` is one of :func:`optstream_forward`, :func:`pak_forward`,
    :func:`tops_forward` with everything but ε bound (e.g. a ``functools.partial``). Unreachable
    targets: module notes.

    Examples
    --------
    >>> import functools, numpy as np
    >>> t = np.arange(48 * 14)
    >>> history = 1000 + 300 * np.sin(2 * np.pi * t / 48)
    >>> fwd = functools.partial(optstream_forward, history, alpha=50.0)
    >>> plan = plan_epsilon(fwd, target=0.05)
    >>> plan.reachable and abs(plan.predicted - 0.05) < 1e-3
    True
    """
    owner = "plan_epsilon"
    target = check_positive(target, "target", owner)
    last: dict[float, EpsilonPlan] = {}

    def value(eps: float) -> float:
        plan = forward(epsilon=eps)
        last[eps] = plan
        lvl = plan.level if level is None else level
        met = plan.metric if metric is None else metric
        if lvl not in plan.errors or met not in plan.errors[lvl]:
            raise ParameterError(
                f"The 'level'/'metric' of {owner} must name a predicted error; got "
                f"{lvl!r}/{met!r}, predicted are {sorted(plan.errors)}."
            )
        return plan.errors[lvl][met]

    eps, predicted, reachable, count = solve_epsilon(
        value, target, epsilon_min=epsilon_min, epsilon_max=epsilon_max
    )
    plan = last[eps] if eps in last else forward(epsilon=eps)
    return EpsilonPlan(
        method=plan.method,
        epsilon=eps,
        metric=plan.metric if metric is None else metric,
        level=plan.level if level is None else level,
        target=target,
        predicted=predicted,
        reachable=reachable,
        errors=plan.errors,
        parameters=plan.parameters,
        epsilon_range=(epsilon_min, epsilon_max),
        evaluations=count,
    )


def epsilon_curve(
    forward: Callable[[float], EpsilonPlan], epsilons: Sequence[float]
):  # -> pandas.DataFrame
    """Predicted error of every level and metric at each ε: a long frame with columns
    ``epsilon``, ``level``, ``metric``, ``predicted`` (for :func:`plan_epsilon`'s chart)."""
    import pandas as pd

    rows = []
    for eps in epsilons:
        plan = forward(epsilon=float(check_positive(eps, "epsilons", "epsilon_curve")))
        for lvl, errs in plan.errors.items():
            for met, val in errs.items():
                rows.append({"epsilon": float(eps), "level": lvl, "metric": met, "predicted": val})
    return pd.DataFrame(rows)
