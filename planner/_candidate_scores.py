"""Scoring a period's candidate plans: the predicted error of every node for every
(noise, k, budget) and level share (:func:`score_candidates`, additive over nodes in
:class:`CandidateScores`), for :func:`planner.plan_period`.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mechanisms import ParameterError
from mechanisms.optstream._sampling import interpolation_matrix, sample_equal

from ._plan_choices import window_budget
from ._roughness import kriging_bias

__all__ = ["CandidateScores", "score_candidates"]

_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_CHUNK_NUMBERS = 2**23  # candidate x node x step numbers scored at once (64 MB)
_CACHE_NUMBERS = 2**16  # ... of which computed in one reused buffer (512 kB: in cache)
_OWN_ROWS = 4096  # nodes per block of the errors without the combination (per node: bitwise)
_MAX_BLUE_LEAVES = 64  # larger hierarchies: the prediction skips the cross-level combination


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
    combined = _uses_combination(matrix) if combine is None else combine
    if not combined:  # each node's own: a block of nodes at a time (no (C, N, r) temporaries)
        out = np.empty(v.shape[:2])
        for i in range(0, v.shape[1], _OWN_ROWS):
            rows = slice(i, i + _OWN_ROWS)
            out[:, rows] = _node_errors(_merged(v[:, rows], tau2[:, rows]), matrix, combine=False)
        return out
    merged = _merged(v, tau2)
    if coherent is None:
        # without the combination each node's error is its own merged variance's: the shared
        # parts below would only be thrown away (at 100,000 feeders, 38x the 10,000 cost)
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
        out = np.empty((c, n))  # each node's own: a block of nodes at a time (bitwise)
        for i in range(0, n, _OWN_ROWS):
            block = v[:, i : i + _OWN_ROWS]
            var = np.where(np.isfinite(block), block, np.nan)
            out[:, i : i + _OWN_ROWS] = _SQRT_2_PI * np.sqrt(var).mean(axis=2)
        return out
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
    for every finite sample variance ``svar`` (U,).

    Computed in cache-sized blocks of nodes (``_CACHE_NUMBERS`` numbers in one reused buffer:
    the fresh 64 MB temporaries of whole chunks cost more in page faults than the square
    roots), each node's mean kept, then summed over chunks of ``_CHUNK_NUMBERS`` numbers as
    before: bitwise the same sums as computing the chunks whole.
    """
    u, (n, r) = svar.size, bias.shape
    out = np.zeros(u)
    if n == 0 or u == 0:
        return out
    step = max(1, _CHUNK_NUMBERS // (u * r))
    sub = max(1, min(step, _CACHE_NUMBERS // (u * r)))
    scaled = svar[:, None, None] * m2[None, None, :]  # (U, 1, r)
    buf = np.empty((u, sub, r))
    means = np.empty((u, min(step, n)))
    for j in range(0, n, step):
        size = min(step, n - j)
        for i in range(0, size, sub):
            s = min(sub, size - i)
            v = np.add(scaled, bias[None, j + i : j + i + s], out=buf[:, :s])
            np.sqrt(v, out=v)
            v.mean(axis=2, out=means[:, i : i + s])
        block = means[:, :size]
        block *= _SQRT_2_PI
        out += block.sum(axis=1)
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
