"""Planning one OptStream period from what is already public: k, noise, level shares, budget.

:func:`plan_period` chooses, for the next w-period of a stream (or hierarchy of streams), the
number k of equally spaced samples, the noise (Laplace under ε-DP, or the discrete Gaussian
under zCDP when the user gives a δ), the share of the period's budget each level of the
hierarchy gets, and it predicts the release's mean absolute error per value. It reads only

* a variogram of the stream (:mod:`planner._roughness`) estimated from periods *already
  released* (post-processing, [FV19] Theorem 3: free) or from history the user declares public;
* the plan of the previous period (public), which limits this period's budget (below).

Error model (per node n and step t; [FV19] §4 splits the error the same way)::

    V[n, t] = s²_ℓ(n) · Σ_j M[t, j]²  +  B[n, t]

with ``M`` the interpolation operator of the k samples ([FV19] §3.3), ``s²`` the variance of
one sample's noise at level ℓ (Laplace: 2(kα/ε_ℓ)², [FV19] Theorem 8; Gaussian: α²k/(2ρ_ℓ),
:mod:`mechanisms.wevent._gaussian`) and ``B`` the interpolation error predicted from the
variogram (kriging identity). Algorithm 4 then combines the levels. Every level interpolates
the same sampled steps with the same operator, so the interpolation errors are consistent
across levels (an aggregate's is the sum of its leaves', correlated ones included) and no
combination removes them: the prediction combines only the noise, with Algorithm 4's weights
``W = 1/V`` (leaves' covariance ``(SᵀWS)⁻¹ SᵀW N W S (SᵀWS)⁻¹``, S the aggregation matrix,
N the noise; a level with share 0 contributes nothing) and adds each node's own ``B[n, t]``;
and a normal error: mean |error| = √(2/π)·√Var (13% high when the error is one Laplace
variable). Non-negativity is not modelled; the prior of :mod:`postproc._prior` is, in
``predicted_with_prior`` (each node's estimate merged with the forecast, then combined).

Budgets across periods
----------------------
Every window of w steps must cost at most the user's budget, including windows straddling two
periods planned differently. With equally spaced samples a sample of a period released with
budget E (ε, or ρ for the Gaussian; per level summed) and k samples costs E/k when it changes
(Laplace: L1 sensitivity kα, scale kα/E; Gaussian: ρ adds over samples). A window starting at
step s of period p holds the samples of p at steps >= s and those of p + 1 at steps < s, so
period p + 1 may spend at most

    E_{p+1} = min(E, min_s (E − E_p/k_p · #{j ∈ S_p : j >= s}) · k_{p+1} / #{j ∈ S_{p+1} : j < s}),

which is E when k does not change (every window then holds exactly k samples) and smaller for
the period after a change. :func:`window_budget` computes it; the planner predicts each
candidate with its own budget, so a change of k pays for itself or is not made.

The rule without data
---------------------
Before anything is released (and without ``history``) no roughness is known. The error model
then depends on the unknown roughness c (a random walk, γ(h) = c·h) and on α/ε only through
c/(α/ε)²: α/ε scales out, so a data-independent rule is a function of w (and h) alone.
:func:`rule_k` takes the k whose worst ratio to the best k is smallest over every roughness
between the largest at which k = 1 is the best and the smallest at which k = w (Laplace per
value) is: minimax regret over the range in which the choice of k matters. For w = 48 it is
k = 6, within a factor 2.6 of the best k over that whole range.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from mechanisms import ParameterError
from mechanisms.optstream._sampling import interpolation_matrix, sample_equal
from mechanisms.wevent._gaussian import gaussian_rho

from ._roughness import kriging_bias

__all__ = [
    "NOISES",
    "CandidateScores",
    "TARGETS",
    "PeriodPlan",
    "default_candidates",
    "plan_period",
    "rule_k",
    "share_grid",
    "window_budget",
    "within_budget",
]

NOISES = ("laplace", "gaussian")
TARGETS = ("leaves", "root", "all")
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_CHUNK_NUMBERS = 2**23  # candidate x node x step numbers scored at once (64 MB)
_MAX_BLUE_LEAVES = 64  # larger hierarchies: the prediction skips the cross-level combination


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


def default_candidates(w: int) -> tuple[int, ...]:
    """k = 1, 2, 3, 4, 6, 8, 12, 16, 24, 32 and w (those not above w)."""
    return tuple(sorted({k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, w) if k <= w}))


def within_budget(shares: tuple[float, ...]) -> tuple[float, ...]:
    """``shares`` with an exact sum of at most 1 (issue 24.4): the largest share lowered by
    the fewest ulps that make the floats' exact (rational) sum <= 1.

    Floats such as (0.1, 0.1, 0.8) or five times 0.2 sum to 1 in floating point but to
    1 + 2⁻⁵⁴ exactly; a window charged those shares would cost that much more than ε. The
    change is below the floats' own rounding (at most a few ulps of one share), never up.

    Examples
    --------
    >>> within_budget((0.1, 0.1, 0.8))
    (0.1, 0.1, 0.7999999999999999)
    """
    vals = [float(v) for v in shares]
    if not vals:
        return ()
    i = max(range(len(vals)), key=lambda j: vals[j])
    while sum((Fraction(v) for v in vals), Fraction(0)) > 1 and vals[i] > 0:
        vals[i] = math.nextafter(vals[i], 0.0)
    return tuple(vals)


def share_grid(n_levels: int, step: float = 0.1) -> list[tuple[float, ...]]:
    """Level shares on a simplex grid of ``step``, the leaf level (last) always > 0.

    Includes equal shares 1/h and bottom-up (everything on the leaves). Every candidate sums
    to at most 1 exactly (:func:`within_budget`).
    """
    if n_levels == 1:
        return [(1.0,)]
    m = round(1.0 / step)
    out = {tuple([1.0 / n_levels] * n_levels)}
    for combo in itertools.product(range(m + 1), repeat=n_levels - 1):
        rest = m - sum(combo)
        if rest > 0:
            out.add(tuple(c / m for c in combo) + (rest / m,))
    return sorted(within_budget(sh) for sh in out)


def window_budget(
    previous: tuple[np.ndarray, float] | None, positions: np.ndarray, total: float
) -> float:
    """The largest budget of the next period keeping every window within ``total`` (Notes).

    Parameters
    ----------
    previous
        (sampled steps of the previous period, its cost per sample E_p/k_p), or None. The
        cost may also be an array, one per sampled step: the samples of the last w steps
        before the period, possibly of several earlier periods (a short tail, another call),
        at steps counted from w steps before the period's start.
    positions
        Sampled steps of the next period.
    total
        The user's budget per window (ε, or ρ).
    """
    if previous is None:
        return total
    prev_pos, prev_cost = previous
    prev_pos = np.asarray(prev_pos)
    order = np.argsort(prev_pos, kind="stable")
    prev_pos = prev_pos[order]
    pos = np.sort(np.asarray(positions))
    k = pos.size
    horizon = max(int(prev_pos.max(initial=0)), int(pos.max(initial=0))) + 1
    s = np.arange(1, horizon + 1)
    head = np.searchsorted(pos, s, side="left")  # #{j in S_next: j < s}
    first = np.searchsorted(prev_pos, s, side="left")
    ok = head > 0
    if np.ndim(prev_cost) == 0:
        spent = prev_cost * (prev_pos.size - first)  # E_p/k_p · #{j in S_prev: j >= s}
    else:  # one cost per earlier sample (samples of several earlier periods)
        cost = np.asarray(prev_cost, dtype=np.float64)[order]
        suffix = np.concatenate([np.cumsum(cost[::-1])[::-1], [0.0]])
        spent = suffix[first]
    limits = (total - spent[ok]) * k / head[ok]
    best = min(total, float(limits.min(initial=total)))
    return max(best * (1.0 - 1e-12), 0.0)


def _sample_variance(noise: str, k: int, alpha: float, budget: float) -> float:
    if noise == "laplace":
        return 2.0 * (k * alpha / budget) ** 2  # [FV19 Thm. 8]: scale kα/ε
    return alpha * alpha * k / (2.0 * budget)  # zCDP: σ² = Δ₂²/(2ρ), Δ₂ = α√k


@lru_cache(maxsize=256)
def _interpolation(r: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sampled steps, interpolation operator M ([FV19] §3.3) and Σ_j M[t, j]² of (r, k)
    (data-independent, so cached across periods; read-only arrays)."""
    mask = np.zeros((1, r), dtype=bool)
    pos = sample_equal(r, k)
    mask[0, pos] = True
    m = interpolation_matrix(mask)[0]
    m2 = (m * m).sum(axis=1)
    for a in (pos, m, m2):
        a.setflags(write=False)
    return pos, m, m2


def _merged(v: np.ndarray, tau2: np.ndarray) -> np.ndarray:
    """Error variance of an estimate merged with the forecast, ``1/(1/v + 1/τ²)``; τ² = ∞ is
    no prior (an unmeasured node without one stays at ∞)."""
    with np.errstate(divide="ignore"):
        return 1.0 / (1.0 / v + 1.0 / tau2)


def _prior_errors(
    v: np.ndarray,
    tau2: np.ndarray,
    matrix: object,
    bias: np.ndarray,
    coherent: np.ndarray | None,
    combine: bool | None = None,
) -> np.ndarray:
    """Predicted mean |error| per node (C, N) after the forecast is merged (``plan_period``'s
    ``prior_coherent``).

    Per node the merge gives ``w²τ² + (1 − w)²v`` with ``w = v/(v + τ²)`` the forecast's
    weight. Without ``coherent`` that whole variance is combined across levels as independent
    noise. With it, the forecast's part and the interpolation part ``(1 − w)² ι`` are shared
    between levels (consistent, untouched by Algorithm 4; an aggregate's is ``w̄² T + (1 −
    w̄)² ι``, w̄ the mean weight of its leaves) and only ``(1 − w)²`` of the noise is combined
    (:func:`_node_errors`).
    """
    merged = _merged(v, tau2)
    if coherent is None:
        return _node_errors(merged, matrix, combine=combine)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(np.isfinite(tau2), merged / tau2, 0.0)  # (C, N, r), 0 without prior
    weight = np.where(np.isfinite(merged), weight, 0.0)
    leaf = _leaf_rows(matrix)
    mean_w = _mean_over_leaves(weight[:, leaf], matrix)  # (C, N, r)
    w_eff = np.where(_leaf_mask(matrix)[None, :, None], weight, mean_w)
    shared = w_eff**2 * coherent[None] + (1.0 - w_eff) ** 2 * bias[None]
    return _node_errors(merged, matrix, shared, combine=combine)


def _leaf_rows(matrix: object) -> np.ndarray:
    """Row of each leaf (column) of the aggregation matrix: the rows with one non-zero
    (sparse: at 100,000 feeders the dense matrix would be 80 GB)."""
    from scipy import sparse

    m = sparse.csr_matrix(matrix)
    single = np.flatnonzero(np.diff(m.indptr) == 1)
    rows = np.full(m.shape[1], -1)
    rows[m.indices[m.indptr[single]]] = single
    return rows


def _leaf_mask(matrix: object) -> np.ndarray:
    """(N,) True at the rows of the aggregation matrix that are leaves."""
    mask = np.zeros(matrix.shape[0], dtype=bool)
    mask[_leaf_rows(matrix)] = True
    return mask


def _mean_over_leaves(x: np.ndarray, matrix: object) -> np.ndarray:
    """(C, L, r) per leaf → (C, N, r) mean over each node's leaves."""
    count = np.asarray((matrix != 0).sum(axis=1)).reshape(-1)
    c, n_leaves, r = x.shape
    flat = x.transpose(1, 0, 2).reshape(n_leaves, c * r)
    summed = np.asarray(matrix @ flat).reshape(-1, c, r).transpose(1, 0, 2)
    return summed / np.maximum(count, 1.0)[None, :, None]


def _node_errors(
    v: np.ndarray,
    matrix: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    combine: bool | None = None,
) -> np.ndarray:
    """Predicted mean |error| per node (C, N) from pre-projection variances v (C, N, r).

    With ``bias`` (N, r) or (C, N, r), the interpolation part of ``v``: every level interpolates
    the same sampled steps with the same operator, so a node's interpolation error is the sum of its
    leaves' (the estimates are ``S(z + ι) + noise``): consistent across levels, untouched by
    Algorithm 4, and *not* independent between nodes. Then only the noise ``v − bias`` is
    combined across levels (with Algorithm 4's weights ``1/v``: the sandwich
    ``(SᵀWS)⁻¹ SᵀW N W S (SᵀWS)⁻¹``) and each node keeps its own interpolation error
    ``bias[n]`` (from its own variogram, which holds the children's correlation). Without
    ``bias`` all of ``v`` is treated as independent noise (the model before issue 13's item 3,
    which put the root's prediction far below its realised error at α/ε >= 50).
    """
    c, n, r = v.shape
    n_leaves = matrix.shape[1]
    if not (_uses_combination(matrix) if combine is None else combine):
        var = np.where(np.isfinite(v), v, np.nan)
        return _SQRT_2_PI * np.sqrt(var).mean(axis=2)
    if not isinstance(matrix, np.ndarray):  # scipy.sparse (large trees arrive sparse)
        matrix = matrix.toarray()
    prec = np.where(np.isfinite(v), 1.0 / np.maximum(v, 1e-300), 0.0)  # (C, N, r)
    # P = Sᵀ diag(prec) S per candidate and step, as one matmul with the rows' outer products
    # (einsum with optimize=True spent most of the planner's time finding its path).
    outer = (matrix[:, :, None] * matrix[:, None, :]).reshape(n, n_leaves * n_leaves)
    p = (prec.transpose(0, 2, 1) @ outer).reshape(c, r, n_leaves, n_leaves)
    lam = 1e-12 * np.trace(p, axis1=2, axis2=3)[..., None, None]
    cov = np.linalg.inv(p + lam * np.eye(n_leaves))
    if bias is not None:
        bias = bias if bias.ndim == 3 else bias[None]  # (C, N, r) or shared by the candidates
        noise = np.where(np.isfinite(v), np.maximum(v - bias, 0.0), 0.0)
        q = ((prec * prec * noise).transpose(0, 2, 1) @ outer).reshape(p.shape)
        # + λ·cov²: ~0 where the leaves are identified, ~1/λ (unmeasured: huge) where not
        cov = cov @ q @ cov + lam * (cov @ cov)
    var = (cov.reshape(c, r, n_leaves * n_leaves) @ outer.T).transpose(0, 2, 1)  # (C, N, r)
    if bias is not None:
        var = var + bias
    return _SQRT_2_PI * np.sqrt(np.maximum(var, 0.0)).mean(axis=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateScores:
    """Every candidate's predicted error summed over a set of nodes (:func:`score_candidates`).

    Additive over disjoint sets of nodes (``a + b``) when each node's error is its own, i.e.
    without the cross-level combination of small trees (``_MAX_BLUE_LEAVES``): subtrees of a
    large hierarchy are scored where they live and their scores added at the top, which then
    chooses (:meth:`choose`) exactly as if the whole tree had been scored at once.
    """

    blocks: tuple[tuple[str, int, float], ...]
    """(noise, k, budget) of each block of candidates, in the order they are tried."""
    shares: tuple[tuple[float, ...], ...]
    """The level shares of each candidate of a block."""
    sums: np.ndarray = field(hash=False)
    """(G, C) Σ over the target nodes of the predicted mean |error| per value (NaN where a
    target node has no estimate: share 0 without the combination)."""
    count: int
    """Target nodes summed."""
    sums_prior: np.ndarray | None = field(default=None, hash=False)
    """(G, C) the same after the prior is merged (``choose_with_prior`` only), or None."""

    def __add__(self, other: CandidateScores) -> CandidateScores:
        if self.blocks != other.blocks or self.shares != other.shares:
            raise ParameterError(
                "CandidateScores of different candidates cannot be added: score every subtree "
                "with the same previous plan, candidates and shares."
            )
        both = self.sums_prior is not None and other.sums_prior is not None
        return CandidateScores(
            blocks=self.blocks,
            shares=self.shares,
            sums=self.sums + other.sums,
            count=self.count + other.count,
            sums_prior=self.sums_prior + other.sums_prior if both else None,
        )

    def choose(self, *, with_prior: bool = False) -> tuple[int, int] | None:
        """(block, candidate) of the lowest mean error (the first on ties), or None."""
        sums = self.sums_prior if with_prior and self.sums_prior is not None else self.sums
        best, best_rank = None, np.inf
        count = max(self.count, 1)
        for g in range(len(self.blocks)):
            rank = sums[g] / count
            if np.isnan(rank).all():
                continue
            i = int(np.nanargmin(rank))
            if best is None or rank[i] < best_rank:
                best, best_rank = (g, i), float(rank[i])
        return best

    def predicted(self, choice: tuple[int, int], *, with_prior: bool = False) -> float:
        """Mean predicted error per value over the target nodes of the candidate ``choice``."""
        sums = self.sums_prior if with_prior else self.sums
        return float(sums[choice] / max(self.count, 1))


def _uses_combination(matrix: object) -> bool:
    """True for small trees, whose prediction combines the levels (:func:`_node_errors`)."""
    n, n_leaves = matrix.shape
    return not (n == n_leaves or n_leaves > _MAX_BLUE_LEAVES)


def _level_sums(svar: np.ndarray, m2: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(U,) Σ over the nodes of ``bias`` (n, r) of √(2/π)·mean_t √(svar[u]·m2[t] + bias[n, t])
    for every finite sample variance ``svar`` (U,), in blocks of nodes (no (U, n, r) array
    larger than ``_CHUNK_NUMBERS``)."""
    u, (n, r) = svar.size, bias.shape
    out = np.zeros(u)
    if n == 0 or u == 0:
        return out
    step = max(1, _CHUNK_NUMBERS // (u * r))
    for j in range(0, n, step):
        v = svar[:, None, None] * m2[None, None, :]
        v = np.add(v, bias[None, j : j + step], out=np.empty((u, min(step, n - j), r)))
        np.sqrt(v, out=v)
        out += (_SQRT_2_PI * v.mean(axis=2)).sum(axis=1)
    return out


def score_candidates(
    gamma: np.ndarray | None,
    *,
    matrix: object,
    node_level: np.ndarray,
    target_mask: np.ndarray,
    alpha: float,
    r: int,
    totals: dict[str, float],
    noises: tuple[str, ...],
    ks: tuple[int, ...],
    shares: list[tuple[float, ...]],
    previous: tuple[np.ndarray, float, str] | None,
    prior_variance: np.ndarray | None = None,
    prior_coherent: np.ndarray | None = None,
    combine: bool | None = None,
) -> CandidateScores:
    """Predicted error of every candidate (noise, k, level shares), summed over the nodes.

    Without the cross-level combination (independent streams, or trees of more than
    ``_MAX_BLUE_LEAVES`` leaves) a node's predicted error depends on the candidate only
    through its level's share, so each node is scored once per *distinct* share of its level
    (at most 12 on the default grid) instead of once per candidate (66 for three levels, 286
    for four), and a candidate's score is the sum of its levels' sums: no (candidates x nodes x
    steps) array. The same numbers as scoring every candidate, summed in another order.
    Small trees combine the levels per candidate (:func:`_node_errors`).

    ``prior_variance`` (given only to choose with the prior) adds ``sums_prior``.
    """
    n = node_level.size
    combine = _uses_combination(matrix) if combine is None else combine
    share_arr = np.array(shares, dtype=np.float64).reshape(len(shares), -1)  # (C, h)
    blocks, rows, rows_p = [], [], []
    prev = None if previous is None else (previous[0], previous[1])
    for noise in noises:
        if previous is not None and previous[2] != noise:
            continue  # the noise is fixed for the whole call (accounting in one currency)
        total = totals[noise]
        for k in ks:
            pos, m, m2 = _interpolation(r, k)
            budget = window_budget(prev, pos, total)
            if budget <= 0:
                continue
            bias = np.zeros((n, r)) if gamma is None else kriging_bias(gamma[:, :r], m)
            if combine or prior_variance is not None:
                svar, err = _all_candidates(noise, k, alpha, budget, share_arr[:, node_level],
                                            m2, bias, matrix, combine)  # fmt: skip
                sums = err[:, target_mask].sum(axis=1)
                if prior_variance is not None:
                    tau2 = np.asarray(prior_variance, dtype=np.float64)[None, :, :r]
                    coherent = None if prior_coherent is None else prior_coherent[:, :r]
                    v = svar[:, :, None] * m2[None, None, :] + bias[None]
                    err_p = _prior_errors(v, tau2, matrix, bias, coherent, combine)
                    rows_p.append(err_p[:, target_mask].sum(axis=1))
            else:
                sums = np.zeros(share_arr.shape[0])
                for li in range(share_arr.shape[1]):
                    nodes = np.flatnonzero((node_level == li) & target_mask)
                    uniq, inv = np.unique(share_arr[:, li], return_inverse=True)
                    level = np.full(uniq.size, np.nan if nodes.size else 0.0)
                    live = uniq > 0
                    svar = _sample_variance(noise, k, alpha, budget * uniq[live])
                    level[live] = _level_sums(np.atleast_1d(svar), m2, bias[nodes])
                    sums = sums + level[inv.reshape(-1)]
            blocks.append((noise, int(k), float(budget)))
            rows.append(sums)
    c = share_arr.shape[0]
    return CandidateScores(
        blocks=tuple(blocks),
        shares=tuple(tuple(float(x) for x in sh) for sh in shares),
        sums=np.array(rows).reshape(len(rows), c),
        count=int(np.count_nonzero(target_mask)),
        sums_prior=np.array(rows_p).reshape(len(rows), c) if prior_variance is not None else None,
    )


def _all_candidates(noise, k, alpha, budget, share_nodes, m2, bias, matrix, combine):
    """(svar (C, N), err (C, N)) of every candidate with Algorithm 4's combination."""
    with np.errstate(divide="ignore"):
        svar = np.where(
            share_nodes > 0, _sample_variance(noise, k, alpha, budget * share_nodes), np.inf
        )  # (C, N)
    n, r = bias.shape
    step = max(1, _CHUNK_NUMBERS // (n * r))  # (C, N, r) at once is gigabytes at 100,000 nodes
    err = np.concatenate(
        [
            _node_errors(
                svar[j : j + step, :, None] * m2[None, None, :] + bias[None],
                matrix,
                bias,
                combine=combine,
            )
            for j in range(0, svar.shape[0], step)
        ]
    )
    return svar, err


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


@lru_cache(maxsize=64)
def rule_k(w: int, n_levels: int = 1) -> int:
    """The data-independent k of the first period (module Notes: minimax regret).

    Examples
    --------
    >>> rule_k(48)
    6
    """
    ks = default_candidates(w)
    noise = []
    bias = []
    lag = np.arange(w, dtype=np.float64)
    for k in ks:
        mask = np.zeros((1, w), dtype=bool)
        mask[0, sample_equal(w, k)] = True
        m = interpolation_matrix(mask)[0]
        noise.append(2.0 * (k * n_levels) ** 2 * (m * m).sum(axis=1))  # α/ε = 1
        bias.append(kriging_bias(lag[None, :], m)[0])  # random walk, c = 1
    noise_a, bias_a = np.array(noise), np.array(bias)  # (K, w)
    cs = np.logspace(-6, 8, 800)
    err = np.sqrt(noise_a[None] + cs[:, None, None] * bias_a[None]).mean(axis=2)  # (C, K)
    best = err.min(axis=1)
    choice = err.argmin(axis=1)
    fewest = np.flatnonzero(choice == 0)
    every = np.flatnonzero(choice == len(ks) - 1)
    lo = int(fewest[-1]) if fewest.size else 0
    hi = int(every[0]) + 1 if every.size else len(cs)
    regret = (err[lo:hi] / best[lo:hi, None]).max(axis=0)
    return int(ks[int(np.argmin(regret))])
