"""Planning one OptStream period from what is already public: k, noise, level shares, budget.

:func:`plan_period` chooses, for the next w-period of a stream (or hierarchy of streams), the
number k of equally spaced samples, the noise (Laplace under ε-DP, or the discrete Gaussian
under zCDP when the user gives a δ), the share of the period's budget each level of the
hierarchy gets, and it predicts the release's mean absolute error per value. It reads only

* a variogram of the stream (:mod:`planner._roughness`) estimated from periods *already
  released* (post-processing, [FV19] Theorem 3: free) or from history the user declares public;
* the plan of the previous period (public), which limits this period's budget (below).

The error model and the scoring of candidates are in :mod:`planner._candidate_scores`; the
candidates, level shares, window budget and first k in :mod:`planner._plan_choices` (both
re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError
from mechanisms.optstream._sampling import sample_equal
from mechanisms.wevent._gaussian import gaussian_rho

from ._candidate_scores import (  # noqa: F401  (re-exported: callers import them from here)
    _CHUNK_NUMBERS,
    _MAX_BLUE_LEAVES,
    _SQRT_2_PI,
    CandidateScores,
    _all_candidates,
    _interpolation,
    _leaf_mask,
    _leaf_rows,
    _level_sums,
    _mean_over_leaves,
    _merged,
    _node_errors,
    _prior_errors,
    _sample_variance,
    _uses_combination,
    score_candidates,
)
from ._plan_choices import (  # noqa: F401
    default_candidates,
    rule_k,
    share_grid,
    window_budget,
    within_budget,
)
from ._roughness import kriging_bias

__all__ = [
    "NOISES",
    "CandidateScores",
    "TARGETS",
    "PeriodPlan",
    "default_candidates",
    "finish_plan",
    "plan_period",
    "rule_k",
    "score_candidates",
    "share_grid",
    "window_budget",
    "within_budget",
]

NOISES = ("laplace", "gaussian")
TARGETS = ("leaves", "root", "all")


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodPlan:
    """The configuration of one period and its predicted error."""

    k: int
    """Equally spaced samples of the period (k = w: every value, Laplace/Gaussian per value)."""
    noise: str
    """``"laplace"`` (ε-DP) or ``"gaussian"`` (ρ-zCDP)."""
    shares: tuple[float, ...]
    """Share of the period's budget per level (root level first); sums to 1."""
    budget: float
    """Budget of the period, all levels: ε (Laplace) or ρ (Gaussian); at most the total."""
    predicted: float
    """Predicted mean absolute error per value over the target nodes (for the data-independent
    rule: the noise part only, the interpolation error being unknown; its record says None)."""
    predicted_nodes: np.ndarray = field(hash=False)
    """(N,) predicted mean absolute error per value of every node."""
    variances: np.ndarray = field(hash=False)
    """(N, r) predicted error variance of each node's estimate before Algorithm 4 (noise plus
    interpolation error; infinite for a level with share 0)."""
    sample_variance: np.ndarray = field(hash=False)
    """(N,) noise variance of one sample of each node (infinite for share 0)."""
    basis: str
    """``"rule"`` (nothing known yet), ``"released"`` or ``"history"``."""
    predicted_with_prior: float | None = None
    """Predicted mean absolute error per value over the target nodes after the prior is
    folded in (None without a prior); the prediction to compare with the realised error."""

    def positions(self, r: int) -> np.ndarray:
        """Sampled steps of a period of r steps."""
        return sample_equal(r, self.k)

    def record(self) -> dict:
        """The plan as plain values for ``DataFrame.attrs["plan"]``."""
        return {
            "k": self.k,
            "noise": self.noise,
            "shares": list(self.shares),
            "budget": self.budget,
            # planned blind (no roughness known): the interpolation error, most of the error at
            # low α/ε, is unknown, so there is no prediction to publish (it was 94x too low)
            "predicted": None if self.basis == "rule" else self.predicted,
            "basis": self.basis,
            "predicted_with_prior": self.predicted_with_prior,
        }


def finish_plan(
    gamma: np.ndarray | None,
    scores: CandidateScores,
    choice: tuple[int, int],
    *,
    matrix: object,
    node_level: np.ndarray,
    target_mask: np.ndarray,
    alpha: float,
    r: int,
    basis: str,
    prior_variance: np.ndarray | None = None,
    prior_coherent: np.ndarray | None = None,
    combine: bool | None = None,
) -> PeriodPlan:
    """The :class:`PeriodPlan` of the candidate ``choice`` of ``scores`` for these nodes.

    ``predicted`` is the mean over every target node that ``scores`` summed (all subtrees,
    when they were added); ``predicted_nodes``, ``variances`` and ``sample_variance`` are
    this set of nodes'. ``predicted_with_prior`` is the mean over these nodes (with
    ``prior_coherent``, an aggregate's part uses the mean prior weight of its leaves in
    ``matrix``).
    """
    noise, k, budget = scores.blocks[choice[0]]
    share = np.array(scores.shares[choice[1]], dtype=np.float64)[node_level]  # (N,)
    _, m, m2 = _interpolation(r, k)
    n = node_level.size
    bias = np.zeros((n, r)) if gamma is None else kriging_bias(gamma[:, :r], m)
    with np.errstate(divide="ignore"):
        svar = np.where(share > 0, _sample_variance(noise, k, alpha, budget * share), np.inf)
    variances = svar[:, None] * m2[None, :] + bias
    err = _node_errors(variances[None], matrix, bias, combine=combine)[0]
    with_prior = None
    if scores.sums_prior is not None:
        with_prior = scores.predicted(choice, with_prior=True)
    elif prior_variance is not None:
        tau2 = np.asarray(prior_variance, dtype=np.float64)[None, :, :r]
        coherent = None if prior_coherent is None else prior_coherent[:, :r]
        err_p = _prior_errors(variances[None], tau2, matrix, bias, coherent, combine)[0]
        with_prior = float(err_p[target_mask].mean())
    return PeriodPlan(
        k=int(k),
        noise=noise,
        shares=scores.shares[choice[1]],
        budget=float(budget),
        predicted=scores.predicted(choice),
        predicted_nodes=err,
        variances=variances,
        sample_variance=svar,
        basis=basis,
        predicted_with_prior=with_prior,
    )


def plan_period(
    gamma: np.ndarray | None,
    *,
    matrix: np.ndarray,
    levels: list[np.ndarray],
    epsilon: float,
    alpha: float,
    w: int,
    r: int | None = None,
    delta: float | None = None,
    noises: tuple[str, ...] = ("laplace",),
    target: str = "all",
    previous: tuple[np.ndarray, float, str] | None = None,
    candidates: tuple[int, ...] | None = None,
    shares: list[tuple[float, ...]] | None = None,
    basis: str = "released",
    prior_variance: np.ndarray | None = None,
    choose_with_prior: bool = False,
    prior_coherent: np.ndarray | None = None,
    scores: CandidateScores | None = None,
    scores_only: bool = False,
    combine: bool | None = None,
) -> PeriodPlan | CandidateScores:
    """Choose k, noise and level shares of one period by their predicted error (module Notes).

    Parameters
    ----------
    gamma
        Variogram (N, w) of every node (:func:`planner._roughness.variogram`), or None before
        anything is known: then :func:`rule_k` and equal shares.
    matrix
        Aggregation matrix (N, L) of the hierarchy, dense or scipy.sparse
        (``postproc.Hierarchy.matrix`` / ``sparse_matrix``; identity
        for independent streams).
    levels
        Node indices of each level, root level first, leaves last.
    epsilon, alpha, w
        The user's ε per window, α of the (w, α) unit, the period length.
    r
        Steps of this period (< w for the tail); default w.
    delta
        δ of the user's (ε, δ); required for the Gaussian.
    noises
        Noises the planner may choose from (a subset of :data:`NOISES`).
    target
        ``"leaves"``, ``"root"`` (the top level) or ``"all"``: the nodes whose mean error is
        minimised.
    previous
        (sampled steps, cost per sample, noise) of the previous period, or None.
    candidates, shares
        Candidate k (default :func:`default_candidates`) and level shares (default
        :func:`share_grid`).
    basis
        Label for the record (``"released"`` or ``"history"``).
    prior_variance
        (N, r) error variance τ² of the forecast that Algorithm 4 will fold in
        (:func:`postproc.profile_prior`), or None. Given, each candidate is scored by the
        error of its estimate *combined* with the forecast, per node and step
        ``1 / (1/V + 1/τ²)`` (the precision-weighted merge of :func:`postproc.merge_prior`),
        reported as ``predicted_with_prior``.
    prior_coherent
        (N, r) error variance of each node's forecast as a whole (an aggregate's from its own
        series, summed leaves included), or None. Given, the forecast errors are taken as
        shared between levels, like the interpolation error (a day unlike the profile is
        unlike it in every region: the regional leaves' forecast errors are nearly perfectly
        correlated, so the national error is their sum, not their root-sum-square), and each
        aggregate keeps its own share ``w̄² T`` (w̄ the mean prior weight of its leaves).
        Without it, the forecasts' errors are independent between nodes.
    choose_with_prior
        Choose by that combined error (a good forecast then moves the choice to the
        configuration that complements it best, typically fewer samples) instead of the
        release's own. Off by default: the measured periods are also what later priors are
        built from, which the score does not value, and fewer samples made the later priors
        worse on the regional data (``docs/results/optstream_defaults_findings.md``).
    scores, scores_only
        For a hierarchy scored in parts (subtrees, :class:`planner.StreamPlanner`):
        ``scores_only=True`` returns these nodes' :class:`CandidateScores` without choosing;
        ``scores`` (the parts' scores added) chooses from them instead of scoring.
    combine
        Combine the levels in the prediction (Algorithm 4's sandwich); default: for trees
        of at most ``_MAX_BLUE_LEAVES`` leaves. False for a part of a larger tree.

    Returns
    -------
    PeriodPlan
        (or :class:`CandidateScores` with ``scores_only``)

    Notes
    -----
    *Privacy*: the plan reads only public values (released periods, declared-public history,
    earlier plans); it is post-processing and spends nothing.
    """
    owner = "plan_period"
    if target not in TARGETS:
        raise ParameterError(
            f"The 'target' parameter of {owner} must be one of {TARGETS}. Got {target!r} instead."
        )
    r = w if r is None else r
    n = matrix.shape[0]
    node_level = np.empty(n, dtype=np.int64)
    for li, nodes in enumerate(levels):
        node_level[nodes] = li
    h = len(levels)
    if target == "leaves":
        tmask = node_level == h - 1
    elif target == "root":
        tmask = node_level == 0
    else:
        tmask = np.ones(n, dtype=bool)
    totals = {"laplace": epsilon}
    if "gaussian" in noises:
        if delta is None:
            raise ParameterError(f"The Gaussian noise of {owner} needs a 'delta' in (0, 1).")
        totals["gaussian"] = gaussian_rho(epsilon, delta)
    if gamma is None:
        ks = (min(rule_k(w, h), r),) if candidates is None else tuple(candidates)
        share_list = list(shares) if shares and len(shares) == 1 else [tuple([1.0 / h] * h)]
        basis = "rule"
    else:
        ks = tuple(k for k in (candidates or default_candidates(w)) if k <= r)
        share_list = shares or share_grid(h)
    if scores is None:
        scores = score_candidates(
            gamma, matrix=matrix, node_level=node_level, target_mask=tmask, alpha=alpha, r=r,
            totals=totals, noises=noises, ks=ks, shares=share_list, previous=previous,
            prior_variance=prior_variance if choose_with_prior else None,
            prior_coherent=prior_coherent, combine=combine,
        )  # fmt: skip
    if scores_only:
        return scores
    best: PeriodPlan | None = None
    choice = scores.choose(with_prior=choose_with_prior and prior_variance is not None)
    if choice is not None:
        best = finish_plan(
            gamma, scores, choice, matrix=matrix, node_level=node_level, target_mask=tmask,
            alpha=alpha, r=r, basis=basis, prior_variance=prior_variance,
            prior_coherent=prior_coherent, combine=combine,
        )  # fmt: skip
    if best is None:
        raise ParameterError(f"No candidate of {owner} fits the budget; widen 'candidates'.")
    return best
