"""The weighted least-squares problem of [FV19] Alg. 4 over a hierarchy (§5.2), per w-period.

Notation (shared by the two solvers). ``N`` nodes of the hierarchy, ``L`` of them leaves;
``P`` feature parts in total, ``w`` steps. ``A_H`` (N x L) and ``A_T`` (P x w) are the
aggregation matrices of the hierarchy and of the feature set. For one period, ``C`` (N x P) holds
the noisy estimates ``c̃`` and ``W`` (N x P) the weights. The paper's decision variables
``ẋ[a, s]`` for every node ``a`` and part ``s`` are, under the consistency constraints O2 (parts
sum their sub-parts) and the hierarchy constraints of §5.2 (parents sum their children), exactly
``Y = A_H X A_T^T`` for the leaf-step values ``X`` (L x w). Eliminating the equality constraints
this way, Algorithm 4 becomes the bound-constrained least squares

    minimise  f(X) = sum_{a,s} W[a,s] (Y[a,s] - C[a,s])^2   subject to  X >= 0,

since every ``Y[a, s]`` is a sum of leaf-steps, O3 on all variables is equivalent to ``X >= 0``.
Its KKT conditions are: ``G = A_H^T (W ∘ (Y - C)) A_T`` (half the gradient) vanishes where
``X > 0`` and is ``>= 0`` where ``X = 0`` (those entries are the bound multipliers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np
from scipy import sparse

from mechanisms import DomainError, ParameterError

from ._features import FeatureSet
from ._hierarchy import Hierarchy
from ._prior import merge_prior

__all__ = ["Problem", "build_problem"]


def _rows(m: sparse.spmatrix, x: np.ndarray) -> np.ndarray:
    """``m @ x[b]`` for every ``b`` of a stack (B, n, k) -> (B, m, k), ``m`` sparse."""
    b, n, k = x.shape
    out = m @ x.transpose(1, 0, 2).reshape(n, b * k)
    return np.ascontiguousarray(np.asarray(out).reshape(-1, b, k).transpose(1, 0, 2))


def _cols(x: np.ndarray, m: sparse.spmatrix) -> np.ndarray:
    """``x[b] @ m^T`` for every ``b`` of a stack (B, n, k) -> (B, n, m), ``m`` sparse."""
    b, n, k = x.shape
    if _identity(m, k):  # singleton parts only (k="auto"'s features): x itself, no transposes
        return np.array(x, dtype=np.float64, order="C")
    out = (m @ x.reshape(b * n, k).T).T
    return np.ascontiguousarray(np.asarray(out).reshape(b, n, -1))


def _identity(m: sparse.spmatrix, k: int) -> bool:
    """True if the sparse ``m`` is the (k, k) identity."""
    m = sparse.csr_matrix(m)
    return (
        m.shape == (k, k)
        and m.nnz == k
        and np.array_equal(m.indptr, np.arange(k + 1))
        and np.array_equal(m.indices, np.arange(k))
        and bool((m.data == 1).all())
    )


class Problem:
    """A validated batch of per-period problems (internal; built by :func:`build_problem`).

    Every product with ``A_H`` and ``A_T`` goes through their sparse forms, so evaluating the
    objective, the gradient or the KKT conditions is linear in the number of nodes.
    """

    __slots__ = (
        "hierarchy",
        "features",
        "estimates",
        "weights",
        "shared_weights",
        "a_t",
        "_groups",
        "_h_sparse",
        "_t_sparse",
    )

    def __init__(
        self, hierarchy: Hierarchy, features: FeatureSet, estimates: np.ndarray, weights: np.ndarray
    ) -> None:
        """``weights`` is (N, P) (shared by every period) or (B, N, P)."""
        self.hierarchy = hierarchy
        self.features = features
        self.estimates = estimates  # (B, N, P), read-only
        #: (N, P) weights shared by every period, or None when they vary by period.
        self.shared_weights = weights if weights.ndim == 2 else None
        #: (B, N, P) read-only (a broadcast view when shared).
        self.weights = np.broadcast_to(weights, estimates.shape)
        self.a_t = features.matrix
        self._groups: list[tuple[np.ndarray, np.ndarray]] | None = None
        self._h_sparse = hierarchy.sparse_matrix
        self._t_sparse = sparse.csr_matrix(features.matrix)

    @property
    def a_h(self) -> np.ndarray:
        """Dense ``A_H`` (N x L), built on first use (small hierarchies only)."""
        return self.hierarchy.matrix

    @property
    def n_periods(self) -> int:
        return self.estimates.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        """Shape (L, w) of the leaf-step variables of one period."""
        return (len(self.hierarchy.leaves), self.a_t.shape[1])

    def groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Periods grouped by their weight matrix: ``[(W (N, P), period indices), ...]``.

        Periods sharing weights share one factorisation (fast path) or one compiled problem
        (cvxpy path).
        """
        if self._groups is None:
            if self.shared_weights is not None:
                self._groups = [(self.shared_weights, np.arange(self.n_periods))]
            else:
                # One digest per period (linear; np.unique(axis=0) sorts whole rows).
                first: dict[bytes, list[int]] = {}
                for b in range(self.n_periods):
                    key = hashlib.blake2b(self.weights[b].tobytes(), digest_size=20).digest()
                    first.setdefault(key, []).append(b)
                self._groups = [
                    (self.weights[idx[0]], np.asarray(idx, dtype=np.int64))
                    for idx in first.values()
                ]
        return self._groups

    def aggregate(self, x: np.ndarray) -> np.ndarray:
        """``Y = A_H X A_T^T``: every (node, part) value from the leaf-steps (B, L, w)."""
        return _cols(self.steps(x), self._t_sparse)

    def steps(self, x: np.ndarray) -> np.ndarray:
        """``A_H X``: the per-step values of every node (B, N, w)."""
        return _rows(self._h_sparse, x)

    def objective(self, x: np.ndarray) -> np.ndarray:
        """The objective O1 of [FV19] Alg. 4 per period (B,)."""
        r = self.aggregate(x) - self.estimates
        return np.einsum("bnp,bnp->b", self.weights * r, r)

    def _back(self, r: np.ndarray) -> np.ndarray:
        """``A_H^T R A_T`` per period for R (B, N, P) -> (B, L, w)."""
        return _rows(self._h_sparse.T.tocsr(), _cols(r, self._t_sparse.T.tocsr()))

    def half_gradient(self, x: np.ndarray) -> np.ndarray:
        """``A_H^T (W ∘ (Y - C)) A_T`` per period (B, L, w): the bound multipliers at X = 0."""
        r = self.aggregate(x) - self.estimates
        return self._back(self.weights * r)

    def gradient_scale(self) -> np.ndarray:
        """A per-period scale for the gradient: ``max |A_H^T (W ∘ C) A_T|`` (or 1 if zero)."""
        b = np.abs(self._back(self.weights * self.estimates))
        scale = b.reshape(b.shape[0], -1).max(axis=1)
        return np.where(scale > 0, scale, 1.0)

    def kkt(self, x: np.ndarray, active_tol: float = 0.0) -> dict[str, float]:
        """Relative KKT violations of a candidate solution ``x`` (B, L, w).

        Returns the largest, over periods, of: ``stationarity`` (|G| where X > 0), ``dual``
        (-min G where X = 0, i.e. negative multipliers), ``primal`` (-min X, relative to max |X|),
        ``complementarity`` (max |X * G|, relative to max|X| * gradient scale). ``G`` is divided
        by :meth:`gradient_scale`. All four are 0 at the exact optimum. Entries with
        ``X <= active_tol * max|X|`` count as at the bound (an iterative solver's zeros are
        only zero to its tolerance).
        """
        g = self.half_gradient(x) / self.gradient_scale()[:, None, None]
        xs = np.abs(x).reshape(x.shape[0], -1).max(axis=1)
        xs = np.where(xs > 0, xs, 1.0)[:, None, None]
        free = x > active_tol * xs
        return {
            "stationarity": float(np.max(np.abs(np.where(free, g, 0.0)), initial=0.0)),
            "dual": float(max(0.0, -np.min(np.where(free, 0.0, g), initial=0.0))),
            "primal": float(max(0.0, -np.min(x / xs, initial=0.0))),
            "complementarity": float(np.max(np.abs(x / xs * g), initial=0.0)),
        }


def _check_tree_inputs(hierarchy: object, features: object, owner: str) -> None:
    if not isinstance(hierarchy, Hierarchy):
        raise ParameterError(
            f"The 'hierarchy' parameter of {owner} must be a Hierarchy. Got "
            f"{type(hierarchy).__name__} instead. Build one with Hierarchy(children=...) or "
            "Hierarchy.single(name)."
        )
    if not isinstance(features, FeatureSet):
        raise ParameterError(
            f"The 'features' parameter of {owner} must be a FeatureSet. Got "
            f"{type(features).__name__} instead."
        )


def _as_estimates(
    estimates: object, hierarchy: Hierarchy, features: FeatureSet, owner: str
) -> np.ndarray:
    n, p = len(hierarchy.nodes), features.n_parts
    if isinstance(estimates, Mapping):
        unknown = [k for k in estimates if k not in hierarchy.nodes]
        if unknown:
            raise ParameterError(
                f"The 'estimates' parameter of {owner} names {len(unknown)} node(s) that are "
                f"not in the hierarchy, e.g. {unknown[0]!r}. Known nodes: "
                f"{list(hierarchy.nodes)[:10]}."
            )
        missing = [k for k in hierarchy.nodes if k not in estimates]
        if missing:
            raise ParameterError(
                f"The 'estimates' parameter of {owner} must give every node of the hierarchy "
                f"(leaves and aggregates); {len(missing)} are missing, e.g. {missing[0]!r}."
            )
        try:
            rows = [np.asarray(estimates[k], dtype=np.float64) for k in hierarchy.nodes]
        except (TypeError, ValueError):
            raise ParameterError(
                f"The 'estimates' parameter of {owner} must map node names to numeric arrays."
            ) from None
        shapes = {r.shape for r in rows}
        if len(shapes) != 1:
            raise ParameterError(
                f"The 'estimates' parameter of {owner} must map every node to an array of the "
                f"same shape, (n_periods, {p}) or ({p},). Got shapes {sorted(shapes)}."
            )
        arr = np.stack(rows, axis=-2)  # (..., N, P)
    else:
        try:
            arr = np.array(estimates, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise ParameterError(
                f"The 'estimates' parameter of {owner} must be a numeric array or a mapping "
                f"node -> array. Got {type(estimates).__name__} instead."
            ) from None
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (n, p) or arr.shape[0] == 0:
        raise ParameterError(
            f"The 'estimates' parameter of {owner} must have shape (n_periods, n_nodes, "
            f"n_parts) = (B, {n}, {p}) with B >= 1 (nodes in Hierarchy.nodes order, parts in "
            f"FeatureSet order, singletons first). Got shape {arr.shape} instead."
        )
    finite = np.isfinite(arr)
    if not finite.all():
        raise DomainError(
            f"The 'estimates' argument of {owner} must hold finite numbers only; "
            f"{int((~finite).sum())} entries are NaN or infinite."
        )
    arr = np.ascontiguousarray(arr)
    arr.setflags(write=False)
    return arr


def _as_weights(
    weights: object,
    variances: object,
    n_periods: int,
    hierarchy: Hierarchy,
    features: FeatureSet,
    owner: str,
) -> np.ndarray:
    n, p = len(hierarchy.nodes), features.n_parts
    if weights is not None and variances is not None:
        raise ParameterError(
            f"Give at most one of the 'weights' and 'variances' parameters of {owner} "
            "(weights are inverse variances)."
        )
    name, given = ("variances", variances) if variances is not None else ("weights", weights)
    if given is None:
        arr = np.broadcast_to(features.paper_weights(), (n, p))
    else:
        try:
            arr = np.array(given, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise ParameterError(
                f"The {name!r} parameter of {owner} must be a numeric array. Got "
                f"{type(given).__name__} instead."
            ) from None
        shapes = [(p,), (n, p), (n_periods, n, p)]
        if arr.shape not in shapes:
            raise ParameterError(
                f"The {name!r} parameter of {owner} must have one of the shapes {shapes} "
                f"(per part, per (node, part), or per (period, node, part)). Got {arr.shape}."
            )
        bad = int((~(np.isfinite(arr) & (arr > 0))).sum())
        if bad:
            raise ParameterError(
                f"The {name!r} parameter of {owner} must hold finite floats in (0, inf). "
                f"{bad} entries are not. Drop an estimate you do not have by giving it a "
                "large variance rather than a zero weight."
            )
        if name == "variances":
            arr = 1.0 / arr
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (n, p))
    arr = np.array(arr, dtype=np.float64)  # own, contiguous copy
    arr.setflags(write=False)
    return arr


def build_problem(
    estimates: object,
    *,
    hierarchy: object,
    features: object,
    weights: object = None,
    variances: object = None,
    prior_mean: object = None,
    prior_variances: object = None,
    owner: str = "project_consistent",
) -> Problem:
    """Validate every input and return the batch of per-period problems.

    A prior on the singletons (``prior_mean``, ``prior_variances``, both (N, w) or (B, N, w))
    is folded into the estimates and weights (:func:`postproc._prior.merge_prior`): one more
    weighted term of O1, the same optimum.
    """
    _check_tree_inputs(hierarchy, features, owner)
    assert isinstance(hierarchy, Hierarchy) and isinstance(features, FeatureSet)
    est = _as_estimates(estimates, hierarchy, features, owner)
    wts = _as_weights(weights, variances, est.shape[0], hierarchy, features, owner)
    if prior_mean is None and prior_variances is None:
        return Problem(hierarchy, features, est, wts)
    mean, var = _as_prior(prior_mean, prior_variances, est.shape[0], hierarchy, features, owner)
    est2, wts2 = merge_prior(est, wts, mean, var)
    est2.setflags(write=False)
    wts2.setflags(write=False)
    return Problem(hierarchy, features, est2, wts2)


def _as_prior(
    prior_mean: object,
    prior_variances: object,
    n_periods: int,
    hierarchy: Hierarchy,
    features: FeatureSet,
    owner: str,
) -> tuple[np.ndarray, np.ndarray]:
    if prior_mean is None or prior_variances is None:
        raise ParameterError(
            f"Give both or neither of the 'prior_mean' and 'prior_variances' parameters of {owner}."
        )
    n, w = len(hierarchy.nodes), features.w
    out = []
    for name, given in (("prior_mean", prior_mean), ("prior_variances", prior_variances)):
        try:
            arr = np.array(given, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise ParameterError(
                f"The {name!r} parameter of {owner} must be a numeric array."
            ) from None
        if arr.shape not in ((n, w), (n_periods, n, w)):
            raise ParameterError(
                f"The {name!r} parameter of {owner} must have shape (n_nodes, w) = ({n}, {w}) "
                f"or (n_periods, n_nodes, w). Got {arr.shape} instead."
            )
        # a variance of inf is "no prior on this step" (weight 0)
        variances = name == "prior_variances"
        ok = (arr > 0) & ~np.isnan(arr) if variances else np.isfinite(arr)
        if not ok.all():
            rule = "floats in (0, inf] (inf: no prior)" if variances else "finite numbers"
            raise ParameterError(
                f"The {name!r} parameter of {owner} must hold {rule}; "
                f"{int((~ok).sum())} entries are not."
            )
        out.append(arr)
    return out[0], out[1]
