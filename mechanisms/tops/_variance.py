"""Noise variance of range sums over a consistent ToPS forest (``_tops_tree.py``).

With A mapping the leaves of one tree of L levels to its nodes (equal node variances v), the
consistent (BLUE) leaves have covariance v·(AᵀA)⁻¹, and AᵀA = Σₗ Fˡ Eₗ with Eₗ the average over
aligned blocks of Fˡ leaves. The Eₗ are nested projections, so (AᵀA)⁻¹ = Σₖ cₖ(Eₖ − Eₖ₊₁),
cₖ = (F − 1)/(F^{k+1} − 1), E_L = 0; over a forest of aligned trees AᵀA is block diagonal and the
same formula holds. Hence Var(Σ_{leaves [a, b)}) = v·Σₖ cₖ(Qₖ − Qₖ₊₁), Qₖ = Σ_β |β ∩ [a, b)|²/Fᵏ.
These functions read public inputs only (shape and a fixed public set of random queries).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["QUERIES", "leaf_variance_units", "mean_query_units", "public_queries", "variance_units"]


#: Number of public random queries averaged over by :func:`mean_query_units`.
QUERIES = 4096


def public_queries(r: int, count: int = QUERIES) -> tuple[np.ndarray, np.ndarray]:
    """A fixed public set of uniform random queries (i ≤ j) over r steps (a simulation on public
    inputs: no data, nothing released)."""
    pairs = np.sort(np.random.default_rng(20210).integers(0, r, size=(count, 2)), axis=1)
    return pairs[:, 0], pairs[:, 1]


def _q_terms(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    """Σ over aligned blocks of ``size`` leaves of |β ∩ [a, b)|²/size, per range."""
    first, last = a // size, (np.maximum(b, a + 1) - 1) // size  # blocks of a and of b − 1
    left = ((first + 1) * size - a).astype(np.float64)
    right = (b - last * size).astype(np.float64)
    split = (left**2 + right**2) / size + (last - first - 1) * size
    out = np.where(first == last, (b - a) ** 2 / size, split)
    return np.where(b > a, out, 0.0).astype(np.float64)


def variance_units(a: object, b: object, fanout: int, levels: int) -> np.ndarray:
    """Noise variance of the consistent sum of leaves [a, b), in units of one node's variance.

    (AᵀA)⁻¹ = Σₖ cₖ(Eₖ − Eₖ₊₁), cₖ = (F − 1)/(F^{k+1} − 1), Eₖ the average over aligned
    blocks of Fᵏ leaves, E_L = 0 (block diagonal over the trees of a forest), so the variance
    is Σₖ cₖ(Qₖ − Qₖ₊₁) with Qₖ = Σ_β |β ∩ [a, b)|²/Fᵏ. Vectorised over ranges.
    """
    lo = np.asarray(a, dtype=np.int64)
    hi = np.asarray(b, dtype=np.int64)
    q = [_q_terms(lo, hi, fanout**k) for k in range(levels)] + [np.zeros(lo.shape)]
    total = np.zeros(lo.shape)
    for k in range(levels):
        total += (fanout - 1) / (fanout ** (k + 1) - 1) * (q[k] - q[k + 1])
    return total


def mean_query_units(
    horizon: int, leaf_size: int, fanout: int, levels: int, queries: int = QUERIES
) -> float:
    """Mean :func:`variance_units` of the complete leaves of the public random queries.

    A pure function of public integers, cached: the shape rule scores the same shapes for
    every release (and the planner for every simulated one).
    """
    return _mean_query_units(int(horizon), int(leaf_size), int(fanout), int(levels), int(queries))


@lru_cache(maxsize=4096)
def _mean_query_units(
    horizon: int, leaf_size: int, fanout: int, levels: int, queries: int
) -> float:
    i, j = public_queries(horizon, queries)
    a = -(-i // leaf_size)
    b = np.maximum((j + 1) // leaf_size, a)
    return float(variance_units(a, b, fanout, levels).mean())


def leaf_variance_units(levels: int, fanout: int) -> float:
    """Var of one consistent leaf, in units of one node's noise variance: Σₖ cₖ(F⁻ᵏ − F^{−k−1})
    (:func:`variance_units` of one leaf; F^{−L} read as 0). Cached (public integers)."""
    return _leaf_variance_units(int(levels), int(fanout))


@lru_cache(maxsize=1024)
def _leaf_variance_units(levels: int, fanout: int) -> float:
    return float(variance_units([0], [1], fanout, levels)[0])
