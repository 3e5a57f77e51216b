"""Planning ToPS: the predicted range-query error of a threshold θ, and the leaf size g.

Predicted error ([ToPS21]'s metric: the mean squared error of a range query V(i, j) over the
r released steps, i and j uniform and sorted)
--------------------------------------------------------------------------------------------
    MSE(θ) = noise(θ) + partial(θ) + bias(θ)²

* **noise**: the exact noise variance of the canonical answer over the complete leaf blocks
  [a, b) of a query, averaged over a fixed public set of ``queries`` uniform random queries.
  With v the variance of one node's Laplace noise (sensitivity L·θ, ε_r; ``tops_noise``) and
  the consistent (BLUE) estimates, Var = v·Σₖ cₖ(Qₖ − Qₖ₊₁), cₖ = (F − 1)/(F^{k+1} − 1),
  Qₖ = Σ over level-k blocks β of |β ∩ [a, b)|²/Fᵏ (leaf units), Q_L = 0 (the inverse of
  AᵀA = Σₗ Fˡ Eₗ on the nested block averages Eₗ; cf. ``mechanisms.tops._tree``).
* **partial**: the error of the smoothed values inside the partial leaves at the two ends:
  2·D(g) for the signal, D(g) = E[H_k(p)²] the smoother's error over a partial leaf measured on
  the prefix clipped to θ (``mechanisms.tops._shape``; [ToPS21]'s pruning objective charges
  θ²g²/36 instead, which we keep only when the prefix holds fewer than two leaves), plus
  (5/3)·v_leaf for their noise (with the recent smoother the head of a query is eₖ − p·eₖ₋₁/g
  and its tail q·eₖ₋₁/g, p, q uniform in [0, g): (1 + 1/3) + 1/3 consistent leaf variances,
  covariances neglected). An approximation; the tests check it within a factor 1.5.
* **bias**: truncation. Clipping at θ removes μ_θ = mean over the prefix of (v − θ)⁺ per step
  on average (the stream is assumed stationary: the prefix stands for the future), so a query
  of length ℓ is biased by about −ℓ·μ_θ; its mean square is E[ℓ²]·μ_θ², with E[ℓ²] over the same
  queries.

Both the noise and partial terms scale with θ², the bias term falls with θ: the best θ trades
them. :func:`plan_tops` evaluates the prediction on the optimizer's candidate grid. It reads the
prefix: an analysis tool, not a private release (``private=False``), like ``plan_pak``.

The release's own rule (issue 23)
---------------------------------
:func:`~mechanisms.tops_release` does not use the θ of least predicted error: it selects θ
privately (report-noisy-max of [ToPS21]'s score or the scale-free one, the guard's count, the
overshoot correction, the "mse" lift) and then the shape (g, L) given θ, with the shape
statistic when it is bought. θ, g and L are random, and independent of the perturber's noise
on the later steps, so the release's expected range-query error is

    E[MSE] = E_{(θ, g, L) ~ rule}[ MSE(θ; g, L) ],

MSE(θ; g, L) the terms above at that shape. :func:`release_draws` samples the rule by running
the mechanism's own code (:class:`~mechanisms.ToPSStream` on the prefix, with the same public
arguments, ``draws`` times from one seeded bit source: a simulation on the prefix that
releases nothing) and :func:`plan_tops` reports the mean over the draws (``release_mse``) next
to the grid's least predicted error (``best``, the θ no rule can find without the data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms import (
    tops_candidates,
    tops_kappa,
    tops_leaf_size,
    tops_levels,
    tops_noise,
    tops_scores,
)
from mechanisms.core._errors import ParameterError
from mechanisms.core._results import summary_text, table_frame
from mechanisms.core._validation import check_integer, check_positive, check_stream
from mechanisms.tops._shape import DEFAULT_SHAPE_SHARE, partial_errors
from mechanisms.tops._tree import max_levels
from mechanisms.tops._variance import QUERIES, mean_query_units, public_queries, variance_units

__all__ = [
    "TopsError",
    "TopsPlan",
    "TopsRuleDraws",
    "TopsShapePlan",
    "plan_tops",
    "plan_tops_shape",
    "release_draws",
    "tops_range_error",
]

#: Number of public random queries the noise and length terms are averaged over.
DEFAULT_QUERIES = QUERIES
#: Simulated runs of the release's threshold and shape rule per plan (:func:`release_draws`).
DEFAULT_DRAWS = 32
#: Largest number of simulated runs accepted.
_MAX_DRAWS = 1 << 16
#: The release's rule options :func:`release_draws` passes on (never a ledger or a fixed θ).
_RULE_OPTIONS = (
    "threshold_score",
    "threshold_correction",
    "shape_rule",
    "shape_share",
    "threshold_method",
    "levels",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsError:
    """The predicted mean squared error of a random range query for one θ (module notes)."""

    threshold: float
    """θ."""
    leaf_size: int
    """g (the pruning rule unless given)."""
    levels: int
    """L, levels of the tree."""
    noise: float
    """Noise variance of the consistent hierarchy's answer (complete leaves)."""
    partial: float
    """Partial-leaf term 2·D(g) + (5/3)·v_leaf (θ²g²/36 for 2·D when the prefix is short)."""
    bias: float
    """Root mean square truncation bias √(E[ℓ²])·μ_θ (≥ 0; the answer is low by about this)."""
    mse: float
    """noise + partial + bias²."""


def _per_step_excess(prefix: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    """μ_θ = mean (v − θ)⁺ over the prefix, for every θ (sorted prefix, suffix sums)."""
    srt = np.sort(prefix)
    tail = np.concatenate((np.cumsum(srt[::-1])[::-1], [0.0]))  # Σ_{k ≥ idx} srt[k]
    idx = np.searchsorted(srt, thetas, side="right")
    count = srt.size - idx
    return (tail[idx] - count * thetas) / srt.size


#: Largest horizon / leaf size (steps exact in a double), fan-out and number of queries.
_MAX_STEPS, _MAX_FANOUT, _MAX_QUERIES = 1 << 52, 1 << 20, 1 << 22


def _validate(
    prefix, horizon, epsilon_perturb, fanout, leaf_size, queries, owner, bound=None, levels=None
):
    r = check_integer(horizon, "horizon", owner, maximum=_MAX_STEPS)
    eps = check_positive(epsilon_perturb, "epsilon_perturb", owner)
    f = check_integer(fanout, "fanout", owner, minimum=2, maximum=_MAX_FANOUT)
    if leaf_size is not None:
        check_integer(leaf_size, "leaf_size", owner, maximum=_MAX_STEPS)
    if levels is not None:
        check_integer(levels, "levels", owner, maximum=max_levels(f))
    nq = check_integer(queries, "queries", owner, maximum=_MAX_QUERIES)
    arr = check_stream(prefix, "prefix", owner, bound=bound)
    g = tops_leaf_size(r, eps, f) if leaf_size is None else int(leaf_size)
    lv = tops_levels(r, g, f) if levels is None else int(levels)
    return arr, r, eps, f, g, lv, nq


def _smoothing_error(arr: np.ndarray, theta: float, g: int) -> float:
    """2·D(g) on the prefix clipped to θ (θ²g²/36 when it holds fewer than two leaves)."""
    d = float(partial_errors(np.minimum(arr, theta), np.array([g]))[1][0])
    return theta**2 * g**2 / 36.0 if np.isnan(d) else 2.0 * d


def _errors(thetas, arr, r, eps, f, g, levels, nq) -> list[TopsError]:
    units = mean_query_units(r, g, f, levels, nq)
    leaf = float(variance_units([0], [1], f, levels)[0])
    i, j = public_queries(r, nq)
    mean_len2 = float(((j - i + 1.0) ** 2).mean())
    mu = _per_step_excess(arr, thetas)
    out = []
    for theta, mu_t in zip(thetas.tolist(), mu.tolist(), strict=True):
        v = tops_noise(threshold=theta, epsilon=eps, levels=levels, tree_size=g * f ** (levels - 1))
        noise = v.variance * units
        partial = _smoothing_error(arr, theta, g) + 5.0 / 3.0 * v.variance * leaf
        bias = float(np.sqrt(mean_len2)) * mu_t
        out.append(
            TopsError(
                threshold=theta,
                leaf_size=g,
                levels=levels,
                noise=noise,
                partial=partial,
                bias=bias,
                mse=noise + partial + bias**2,
            )
        )
    return out


def tops_range_error(
    threshold: float,
    *,
    prefix: object,
    horizon: int,
    epsilon_perturb: float,
    fanout: int = 16,
    leaf_size: int | None = None,
    queries: int = DEFAULT_QUERIES,
    levels: int | None = None,
) -> TopsError:
    """Predicted MSE of a uniform random range query of ToPS with threshold θ (module notes).

    Parameters
    ----------
    threshold
        θ > 0.
    prefix
        Values standing for the stream's distribution (e.g. the first m values): they set the
        truncation bias. Reading them makes the prediction data-dependent (not private).
    horizon
        r, the number of released steps the queries range over.
    epsilon_perturb
        ε_r of the perturber.
    fanout, leaf_size, levels
        F, g (None: the pruning rule, ``mechanisms.tops_leaf_size``) and L (None:
        ``mechanisms.tops_levels``). Pass a release's ``leaf_size`` and ``levels`` to predict
        its error.
    queries
        Number of public random queries averaged over.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(1.0, 10_000)
    >>> e = tops_range_error(5.0, prefix=x, horizon=2**16, epsilon_perturb=1.0)
    >>> e.leaf_size, e.levels, e.mse > e.noise > 0
    (16, 3, True)
    """
    owner = "tops_range_error"
    theta = check_positive(threshold, "threshold", owner)
    args = _validate(
        prefix, horizon, epsilon_perturb, fanout, leaf_size, queries, owner, levels=levels
    )
    return _errors(np.array([theta]), *args)[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsRuleDraws:
    """(θ, g, L) of ``draws`` simulated runs of the release's rule on a prefix (module notes)."""

    thresholds: np.ndarray
    """θ of each run (after the corrections the release applies)."""
    leaf_sizes: np.ndarray
    """g of each run."""
    levels: np.ndarray
    """L of each run."""
    scores: tuple[str, ...]
    """The score each run used (``"paper"`` or ``"scale_free"``)."""
    epsilon_threshold: float
    """ε_θ the runs selected θ with."""

    def __post_init__(self) -> None:
        for arr in (self.thresholds, self.leaf_sizes, self.levels):
            arr.setflags(write=False)

    @property
    def shape(self) -> tuple[int, int]:
        """The most frequent (g, L) (the first one on ties)."""
        pairs = list(zip(self.leaf_sizes.tolist(), self.levels.tolist(), strict=True))
        return max(pairs, key=pairs.count)

    def quantiles(self, q: object = (0.1, 0.5, 0.9)) -> np.ndarray:
        """Quantiles of θ over the runs."""
        return np.quantile(self.thresholds, q)


def release_draws(
    prefix: np.ndarray,
    *,
    bound: float,
    horizon: int,
    epsilon_threshold: float,
    epsilon_perturb: float,
    fanout: int = 16,
    candidates: object = None,
    c: float = 60.0,
    leaf_size: int | None = None,
    draws: int = DEFAULT_DRAWS,
    seed: object = 0,
    _owner: str = "release_draws",
    **rule: object,
) -> TopsRuleDraws:
    """Run the release's threshold and shape rule ``draws`` times on ``prefix`` (module notes).

    Each run is a :class:`~mechanisms.ToPSStream` with the public arguments of
    :func:`~mechanisms.tops_release` (time lag m = the prefix's length, horizon r, and ``rule``:
    ``threshold_score``, ``threshold_correction``, ``shape_rule``, ``shape_share``,
    ``threshold_method``) fed the prefix only: it selects θ and the shape and stops before the
    perturber. The runs share one bit source seeded from ``seed`` (default 0: the plan is
    reproducible; None draws from the OS). A simulation: the prefix is data, nothing here is
    a release.
    """
    from mechanisms import ToPSStream
    from mechanisms.core import bit_source

    owner = _owner
    unknown = sorted(set(rule) - set(_RULE_OPTIONS))
    if unknown:
        raise ParameterError(
            f"The rule options of {owner} must be among {_RULE_OPTIONS} (the release's own "
            f"choices; its public arguments have their own keywords). Got {unknown!r}."
        )
    k = check_integer(draws, "draws", owner, maximum=_MAX_DRAWS)
    arr = check_stream(prefix, "prefix", owner, bound=check_positive(bound, "bound", owner))
    bits = bit_source(seed)
    out = []
    for _ in range(k):
        stream = ToPSStream(
            bound=bound,
            epsilon_threshold=epsilon_threshold,
            epsilon_perturb=epsilon_perturb,
            time_lag=int(arr.size),
            horizon=horizon,
            fanout=fanout,
            candidates=candidates,
            c=c,
            leaf_size=leaf_size,
            seed=bits,
            _owner=owner,
            **rule,
        )
        stream.extend(arr)
        out.append((stream.threshold, stream.leaf_size, stream.levels, stream.threshold_release))
    return TopsRuleDraws(
        thresholds=np.array([t for t, *_ in out], dtype=np.float64),
        leaf_sizes=np.array([g for _, g, _, _ in out], dtype=np.int64),
        levels=np.array([lv for *_, lv, _ in out], dtype=np.int64),
        scores=tuple(th.score for *_, th in out),
        epsilon_threshold=float(epsilon_threshold),
    )


def rule_errors(draws: TopsRuleDraws, arr, r, eps, f, nq) -> list[TopsError]:
    """MSE(θ; g, L) of every run (module notes; one evaluation per distinct run)."""
    seen: dict[tuple[float, int, int], TopsError] = {}
    out = []
    for key in zip(
        draws.thresholds.tolist(), draws.leaf_sizes.tolist(), draws.levels.tolist(), strict=True
    ):
        if key not in seen:
            theta, g, lv = key
            seen[key] = _errors(np.array([theta]), arr, r, eps, f, g, lv, nq)[0]
        out.append(seen[key])
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsPlan:
    """What the release's rule will do and its predicted error, and the predicted error of every
    candidate θ (an analysis: reads the prefix)."""

    candidates: np.ndarray
    """The candidate grid θⱼ."""
    mse: np.ndarray
    """Predicted MSE of each candidate (at the shape ``leaf_size``, ``levels``)."""
    best: TopsError
    """The candidate with the lowest predicted MSE, with its terms (the oracle: no rule that
    reads only released values can find it)."""
    release: TopsRuleDraws
    """θ, g and L of the simulated runs of the release's rule (:func:`release_draws`)."""
    release_mse: float
    """The release's expected MSE: the mean over the runs of MSE(θ; g, L) (module notes)."""
    release_terms: tuple[float, float, float]
    """Its noise, partial and bias² terms (means over the runs)."""
    optimizer_threshold: float
    """The θ the paper's score −m_θ − κθ peaks at (its noise-free choice)."""
    kappa: float
    """κ of the optimizer's score."""
    leaf_size: int
    """g of the candidate grid's errors (the given one, else the runs' most frequent)."""
    levels: int
    """L of the candidate grid's errors (as ``leaf_size``)."""
    private: bool = False
    """Always False: this plan reads the data (use it to choose public settings)."""
    note: str = "analysis only: reads the prefix (use it to choose public settings)"
    """Why the plan is not private."""

    def to_frame(self):
        """One row per candidate θ: its predicted MSE and how often the rule released it."""
        counts = np.array([np.count_nonzero(self.release.thresholds == t) for t in self.candidates])
        return table_frame(
            {
                "threshold": self.candidates,
                "mse": self.mse,
                "best": self.candidates == self.best.threshold,
                "released_share": counts / max(self.release.thresholds.size, 1),
            },
            index_name="candidate",
        )

    def summary(self) -> str:
        """A short text table: the release's θ and expected MSE, then the grid's best θ."""
        q10, q50, q90 = self.release.quantiles()
        noise, partial, bias2 = self.release_terms
        rows = [
            ("release: θ median [q10, q90]", f"{q50:.4g} [{q10:.4g}, {q90:.4g}]"),
            ("release: expected MSE", self.release_mse),
            ("  noise, partial, bias² terms", f"{noise:.4g}, {partial:.4g}, {bias2:.4g}"),
            ("release: runs simulated, ε_θ", f"{self.release.thresholds.size}, "
             f"{self.release.epsilon_threshold:g}"),
            ("release: score(s)", ", ".join(sorted(set(self.release.scores)))),
            ("best threshold θ (oracle)", self.best.threshold),
            ("its predicted MSE", self.best.mse),
            ("release MSE / best", self.release_mse / self.best.mse),
            ("paper score's noise-free θ", self.optimizer_threshold),
            ("kappa κ", self.kappa),
            ("leaf size g, levels L", f"{self.leaf_size}, {self.levels}"),
            ("candidates", self.candidates.size),
        ]  # fmt: skip
        return summary_text("ToPS plan [ToPS21]", rows, result=self)


def plan_tops(
    prefix: object,
    *,
    bound: float,
    horizon: int,
    epsilon_perturb: float,
    epsilon_threshold: float | None = None,
    fanout: int = 16,
    candidates: object = None,
    c: float = 60.0,
    leaf_size: int | None = None,
    queries: int = DEFAULT_QUERIES,
    draws: int = DEFAULT_DRAWS,
    seed: object = 0,
    threshold_score: str = "auto",
    threshold_correction: str = "mse",
    shape_rule: str = "smoothing",
    shape_share: float = DEFAULT_SHAPE_SHARE,
    threshold_method: str = "laplace",
) -> TopsPlan:
    """What :func:`~mechanisms.tops_release` with these arguments will do, and its error.

    Parameters
    ----------
    prefix
        The m values the release's threshold reads (**data**: the plan is an analysis); they
        also stand for the later steps' distribution (the truncation bias).
    bound, horizon, epsilon_perturb, fanout, candidates, c, leaf_size
        As for :func:`~mechanisms.tops_release` (``horizon`` = r = n − m).
    epsilon_threshold
        ε_θ of the release's threshold (None: ``epsilon_perturb``, the CLI's default; the
        release is max(ε_θ, ε_r)-DP).
    threshold_score, threshold_correction, shape_rule, shape_share, threshold_method
        The release's rule (its defaults).
    queries
        Number of public random queries the errors are averaged over.
    draws, seed
        Simulated runs of the rule (:func:`release_draws`); ``seed`` 0 by default, so the plan
        is reproducible.

    Returns
    -------
    TopsPlan
        ``release`` (θ, g, L of the runs) and ``release_mse`` (the release's expected MSE of a
        uniform random range query, module notes); ``mse`` of every candidate θ and ``best``,
        the least of them; ``optimizer_threshold``, the paper score's noise-free peak.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(1.0, 4_000).clip(0, 50)
    >>> plan = plan_tops(x, bound=50.0, horizon=2**14, epsilon_perturb=1.0, draws=8)
    >>> plan.release.thresholds.size, plan.release_mse >= plan.best.mse
    (8, True)
    """
    owner = "plan_tops"
    bnd = check_positive(bound, "bound", owner)
    grid = tops_candidates(bnd, candidates)
    check_positive(c, "c", owner)
    args = _validate(prefix, horizon, epsilon_perturb, fanout, leaf_size, queries, owner, bnd)
    arr, r, eps, f, _, _, nq = args
    eps_t = eps if epsilon_threshold is None else check_positive(
        epsilon_threshold, "epsilon_threshold", owner
    )  # fmt: skip
    check_integer(draws, "draws", owner, maximum=_MAX_DRAWS)
    rule = release_draws(
        arr, bound=bnd, horizon=r, epsilon_threshold=eps_t, epsilon_perturb=eps, fanout=f,
        candidates=candidates, c=c, leaf_size=leaf_size, draws=draws, seed=seed, _owner=owner,
        threshold_score=threshold_score, threshold_correction=threshold_correction,
        shape_rule=shape_rule, shape_share=shape_share, threshold_method=threshold_method,
    )  # fmt: skip
    runs = rule_errors(rule, arr, r, eps, f, nq)
    g, levels = rule.shape
    errs = _errors(grid, arr, r, eps, f, g, levels, nq)
    mse = np.array([e.mse for e in errs])
    mse.setflags(write=False)
    kappa = tops_kappa(time_lag=arr.size, horizon=r, epsilon_perturb=eps, fanout=f, c=c)
    peak = float(grid[int(np.argmax(tops_scores(arr, grid, kappa)))])
    return TopsPlan(
        candidates=grid,
        mse=mse,
        best=errs[int(np.argmin(mse))],
        release=rule,
        release_mse=float(np.mean([e.mse for e in runs])),
        release_terms=(
            float(np.mean([e.noise for e in runs])),
            float(np.mean([e.partial for e in runs])),
            float(np.mean([e.bias**2 for e in runs])),
        ),
        optimizer_threshold=peak,
        kappa=kappa,
        leaf_size=g,
        levels=levels,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsShapePlan:
    """Predicted MSE of every tree shape (g, F, L) at one θ (an analysis: reads the prefix)."""

    threshold: float
    """θ the shapes are evaluated at."""
    table: object
    """pandas DataFrame, one row per (leaf_size, fanout, levels): noise, partial_noise,
    smoothing (2·D(g) exact on the clipped prefix), bias² and mse, sorted by mse."""
    best: tuple[int, int, int]
    """(g, F, L) of the least predicted MSE."""
    private: bool = False
    """Always False: the smoothing term reads the prefix."""

    def summary(self) -> str:
        """The five best shapes."""
        head = self.table.head(5)
        rows = [
            (f"g={r.leaf_size}, F={r.fanout}, L={r.levels}", f"{r.mse:.4g}")
            for r in head.itertuples()
        ]
        return summary_text("ToPS shapes by predicted range-query MSE", rows, result=self)


def plan_tops_shape(
    prefix: object,
    *,
    threshold: float,
    horizon: int,
    epsilon_perturb: float,
    fanouts: tuple[int, ...] = (16,),
    leaf_sizes: object = None,
    queries: int = DEFAULT_QUERIES,
) -> TopsShapePlan:
    """Predicted range-query MSE of every (leaf size g, fan-out F, levels L) at θ.

    The terms of :func:`tops_range_error` with the smoother's D(g) measured exactly on the
    prefix clipped to θ (the non-private counterpart of the mechanism's smoothing rule,
    ``mechanisms.tops._shape``). ``leaf_sizes`` defaults to the powers of two up to 1/16 of the
    prefix
    and r (at least 16 blocks of the prefix each, as the mechanism); L runs from 1 to one
    tree covering r.
    """
    import pandas as pd

    from mechanisms.tops._shape import shape_errors

    owner = "plan_tops_shape"
    theta = check_positive(threshold, "threshold", owner)
    args = _validate(prefix, horizon, epsilon_perturb, 16, None, queries, owner)
    arr, r, eps = args[0], args[1], args[2]
    fans = [check_integer(f, "fanouts", owner, minimum=2, maximum=_MAX_FANOUT) for f in fanouts]
    if leaf_sizes is None:
        top = max(1, min(r, arr.size // 16))
        sizes = 2 ** np.arange(int(np.log2(top)) + 1, dtype=np.int64)
    else:
        sizes = np.array(
            [check_integer(g, "leaf_sizes", owner, maximum=_MAX_STEPS) for g in leaf_sizes]
        )
    d = partial_errors(np.minimum(arr, theta), sizes)[1]
    i, j = public_queries(r, queries)
    bias2 = float(((j - i + 1.0) ** 2).mean()) * float(
        _per_step_excess(arr, np.array([theta]))[0] ** 2
    )
    rows = []
    for f in fans:
        for e in shape_errors(
            horizon=r, epsilon=eps, threshold=theta, fanout=f, sizes=sizes, smoothing=d
        ):
            rows.append(
                {
                    "leaf_size": e.leaf_size,
                    "fanout": f,
                    "levels": e.levels,
                    "noise": e.noise,
                    "partial_noise": e.partial_noise,
                    "smoothing": e.smoothing,
                    "first_block": e.first_block,
                    "bias2": bias2,
                    "mse": e.mse + bias2,
                }
            )
    table = pd.DataFrame(rows).sort_values("mse", kind="stable").reset_index(drop=True)
    top_row = table.iloc[0]
    best = (int(top_row.leaf_size), int(top_row.fanout), int(top_row.levels))
    return TopsShapePlan(threshold=theta, table=table, best=best)
