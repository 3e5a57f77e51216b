"""Public entry point: consistent, non-negative post-processing of a hierarchy of streams."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from mechanisms import ParameterError
from mechanisms.core._results import summary_text, table_frame
from mechanisms.core._validation import check_integer

from ._cvx import solve_cvxpy
from ._fast import separable_factors, solve_fast
from ._features import FeatureSet
from ._hierarchy import Hierarchy
from ._nonneg import solve_tree
from ._problem import build_problem

__all__ = ["ConsistentRelease", "project_consistent"]

_METHODS = ("fast", "cvxpy", "dense")
_CVX_ACTIVE_TOL = 1e-8  # relative to max |X|: OSQP's values below it count as at the bound


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistentRelease:
    """Post-processed values of every node of a hierarchy, per w-period ([FV19] Alg. 4, §5.2).

    Consistent by construction: every value is a sum of non-negative leaf-step values, so
    children sum to their parent at every step and every feature part equals the sum of its
    steps.
    """

    hierarchy: Hierarchy
    """The hierarchy; row ``i`` of the arrays is node ``hierarchy.nodes[i]``."""
    features: FeatureSet
    """The feature set; column ``j`` of :attr:`parts` is its ``j``-th part (flat order)."""
    values: np.ndarray
    """Per-step values (n_periods, n_nodes, w): the released ``x̂`` of every node."""
    parts: np.ndarray
    """Value of every (node, feature part) (n_periods, n_nodes, n_parts): ``x*`` of Alg. 4."""
    method: str
    """``"fast"``, ``"cvxpy"`` or ``"dense"``."""
    objective: np.ndarray
    """Objective O1 (weighted squared distance to the estimates) per period."""
    n_active: np.ndarray
    """Number of leaf-steps held at the bound 0 (O3 active) per period."""
    iterations: np.ndarray
    """Active-set iterations (fast, dense; 1 if no bound is active) or OSQP iterations
    (cvxpy) per period."""
    separable: bool
    """Fast and dense paths: every weight matrix is ``u v^T`` (the dense path then uses its
    Kronecker closed form; the fast path solves any weights the same way)."""
    status: tuple[str, ...]
    """Solver status per period (``"optimal"``)."""
    polish: np.ndarray
    """OSQP polish status per period (1 succeeded, 0 not run, -1 failed); 0 for the fast path."""
    kkt: Mapping[str, float]
    """Largest relative KKT violations over periods, 0 at the exact optimum: ``stationarity``
    (gradient on free leaf-steps), ``dual`` (negative bound multipliers), ``primal`` (negative
    values), ``complementarity`` (value x multiplier); gradients relative to ``max|A^T W c̃|``."""
    seconds: float
    """Wall time of the solve."""

    def node(self, name: str) -> np.ndarray:
        """Per-step values of node ``name``, shape (n_periods, w)."""
        return self.values[:, self.hierarchy.index(name), :]

    def stream(self, name: str) -> np.ndarray:
        """Per-step values of node ``name`` as one stream of n_periods * w steps."""
        return self.node(name).reshape(-1)

    def to_frame(self, index: object = None):
        """A wide frame: one row per step (n_periods·w), one column per node; ``index`` is
        the input's index (default: a ``step`` RangeIndex)."""
        n_periods, n_nodes, w = self.values.shape
        data = {
            name: self.values[:, k, :].reshape(-1) for k, name in enumerate(self.hierarchy.nodes)
        }
        if index is not None and len(index) != n_periods * w:
            raise ParameterError(
                f"The 'index' parameter of ConsistentRelease.to_frame must have one label per "
                f"step ({n_periods * w}). Got {len(index)} labels instead."
            )
        return table_frame(data, index=index, index_name=None if index is not None else "step")

    def summary(self) -> str:
        """A short text table of the solve (post-processing: no privacy cost)."""
        n_periods, n_nodes, w = self.values.shape
        rows = [
            ("periods × nodes × w", f"{n_periods} × {n_nodes} × {w}"),
            ("feature parts", self.parts.shape[2]),
            ("method", self.method + (" (separable)" if self.separable else "")),
            ("status", ", ".join(sorted(set(self.status)))),
            ("largest relative KKT violation", max(self.kkt.values(), default=0.0)),
            ("leaf-steps at 0 (all periods)", int(np.sum(self.n_active))),
        ]
        return summary_text("Consistent release [FV19] Alg. 4", rows, result=self)


@functools.cache
def _blas_controller() -> object:
    """threadpoolctl's view of the loaded BLAS libraries, built once: building it scans every
    loaded shared library (milliseconds), too slow to repeat for each of thousands of small
    projections; limiting threads through it afterwards is cheap."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def project_consistent(
    estimates: object,
    *,
    hierarchy: Hierarchy,
    features: FeatureSet | None = None,
    weights: object = None,
    variances: object = None,
    prior_mean: object = None,
    prior_variances: object = None,
    method: str = "fast",
    max_iter: int = 1000,
    osqp_settings: Mapping[str, object] | None = None,
) -> ConsistentRelease:
    """Post-process noisy estimates into consistent, non-negative streams ([FV19] Alg. 4, §5.2).

    Solves, independently for each w-period, ONE weighted least-squares problem over every
    node ``a`` of the hierarchy and every part ``s`` of every feature::

        minimise   sum_{a,s} W[a,s] (ẋ[a,s] - c̃[a,s])^2                    (O1)
        subject to ẋ[a,s] = sum of ẋ[a,s'] over the parts s' ⊂ s of the finer feature  (O2)
                   ẋ[a,s] = sum of ẋ[a',s] over the children a' of a              ([FV19] §5.2)
                   ẋ[a,s] >= 0                                                   (O3)

    Parameters
    ----------
    estimates
        Noisy estimates ``c̃``: an array (n_periods, n_nodes, n_parts) or (n_nodes, n_parts),
        nodes in ``hierarchy.nodes`` order and parts in ``features`` order (the singletons first:
        the reconstructed ``x̃`` of [FV19] Alg. 2, then the feature queries of Alg. 4 line 1);
        or a mapping node name -> array (n_periods, n_parts) or (n_parts,).
    hierarchy
        The aggregation tree ([FV19] §5.2); :meth:`Hierarchy.single` for one stream.
    features
        The feature chain ``F_1 ≺ ... ≺ F_p``; default :meth:`FeatureSet.default` (w = 48).
    weights, variances
        At most one. Weights ``W[a,s] > 0`` as an array (n_parts,), (n_nodes, n_parts) or
        (n_periods, n_nodes, n_parts), or variances (weights are ``1/variances``: the BLUE).
        Default: the paper's ``λ_i = 1/m_i`` with ``m_i`` the number of parts of feature
        ``F_i`` ([FV19] Alg. 4, O1), the same for every node.
    prior_mean, prior_variances
        Optional forecast ``f`` of every node's steps and its error variance ``τ²`` (> 0; ∞:
        no prior), each (n_nodes, w) or (n_periods, n_nodes, w): adds
        ``Σ_{a,t} (ẋ[a,t] − f[a,t])²/τ²`` to O1 (:mod:`postproc._prior`, e.g.
        :func:`postproc.profile_prior`). Reported objectives then include it up to a constant.
    method
        ``"fast"`` (exact two-pass tree solves + active set, linear in the number of nodes,
        see Notes), ``"cvxpy"`` (cvxpy + OSQP, the general reference path) or ``"dense"``
        (the previous exact path: dense Kronecker factors and block principal pivoting, kept
        as a second reference; non-separable weights limited to :data:`MAX_DENSE_SIZE`
        leaf-steps).
    max_iter
        Cap on the active-set iterations per period (fast and dense paths).
    osqp_settings
        Overrides of :data:`postproc.OSQP_SETTINGS` for ``method="cvxpy"`` (explicit only).

    Returns
    -------
    ConsistentRelease
        Per-step values of every node and per-part values, with diagnostics.

    Raises
    ------
    ParameterError
        Wrong types or shapes, unknown or missing node names, non-positive or non-finite
        weights, an unknown method, non-separable weights too large for ``method="dense"``.
    DomainError
        NaN or infinite estimates.
    SolverError
        OSQP did not reach ``optimal`` (its status is attached), or the active set did not
        converge within ``max_iter``.

    Notes
    -----
    The equality constraints are eliminated by writing every ``ẋ[a,s]`` as a sum of leaf-step
    values ``X[l,t]``; O3 then reduces to ``X >= 0``. The problem is strictly convex, so both
    methods return the same unique optimum (they agree to about 1e-9 relative in the tests).
    By Theorem 10 of [FV19] it is solvable in polynomial time; the fast path is exact and
    linear in the number of nodes for any weights (:mod:`postproc._tree`): the hierarchy is
    eliminated leaf to root with a w-vector per node (the two passes of the weighted tree BLUE
    of [HRMS10], each node's estimate combined with its children's sum by inverse covariance,
    then the discrepancy pushed down), each leaf's feature tree in closed form by
    Sherman-Morrison; O(L w² + I w³) time and O(N P + I w²) memory per period for L leaves and
    I internal nodes. Non-negativity: a primal-dual active set that re-factors only the
    leaves whose held steps changed and their ancestors, with Bertsekas' projected Newton
    method (globally convergent) as fallback (:mod:`postproc._nonneg`).
    By [FV19] Theorem 12, if the truth is consistent and non-negative,
    ``||x* - x||_W <= 2 ||c̃ - x||_W``; as a projection onto a convex set the factor 2 can in
    fact be 1, which is what the tests check.

    *Privacy*: pure post-processing of already private estimates ([FV19] Theorem 3); it
    spends no budget. The estimates' privacy comes from Alg. 2 and Alg. 4 line 1 (Theorem 9)
    and, for a hierarchy, Theorem 13.

    Examples
    --------
    >>> import numpy as np
    >>> h = Hierarchy(children={"total": ["a", "b"]})
    >>> fs = FeatureSet.from_breaks(2, [(0, 2)])  # steps {0}, {1}; whole period
    >>> c = np.array([[1.0, 1.0, 2.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    >>> r = project_consistent(c, hierarchy=h, features=fs, weights=np.ones(3))
    >>> np.round(r.node("total"), 6)
    array([[1., 1.]])
    """
    owner = "project_consistent"
    if method not in _METHODS:
        raise ParameterError(
            f"The 'method' parameter of {owner} must be one of {_METHODS}. Got {method!r} instead."
        )
    max_iter = check_integer(max_iter, "max_iter", owner, minimum=1)
    if features is None:
        features = FeatureSet.default(48)
    problem = build_problem(
        estimates,
        hierarchy=hierarchy,
        features=features,
        weights=weights,
        variances=variances,
        prior_mean=prior_mean,
        prior_variances=prior_variances,
        owner=owner,
    )
    start = time.perf_counter()
    # The solves are many small dense factorisations (w x w blocks): BLAS threads only
    # contend for them (1.8x slower idle, up to 25x under load, issue 16), so the library
    # itself limits BLAS to one thread here, whatever the environment says (threadpoolctl).
    with _blas_controller().limit(limits=1, user_api="blas"):
        if method == "fast":
            out = solve_tree(problem, max_iter=max_iter)
            status = ("optimal",) * problem.n_periods
            polish = np.zeros(problem.n_periods, dtype=np.int64)
            separable = all(separable_factors(w) is not None for w, _ in problem.groups())
        elif method == "dense":
            out = solve_fast(problem, max_iter=max_iter)
            status = ("optimal",) * problem.n_periods
            polish = np.zeros(problem.n_periods, dtype=np.int64)
            separable = bool(out["separable"])
        else:
            out = solve_cvxpy(problem, osqp_settings=osqp_settings)
            status = out["status"]
            polish = out["polish"]
            separable = False
    seconds = time.perf_counter() - start
    x = out["x"]
    # The fast path's bounds are exact zeros; OSQP's are zeros to its tolerance.
    active_tol = _CVX_ACTIVE_TOL if method == "cvxpy" else 0.0
    scale = np.abs(x).reshape(problem.n_periods, -1).max(axis=1)[:, None, None]
    at_bound = x <= active_tol * scale
    return ConsistentRelease(
        hierarchy=hierarchy,
        features=features,
        values=_frozen(problem.steps(x)),
        parts=_frozen(problem.aggregate(x)),
        method=method,
        objective=_frozen(problem.objective(x)),
        n_active=_frozen(at_bound.reshape(problem.n_periods, -1).sum(axis=1)),
        iterations=_frozen(out["iterations"]),
        separable=separable,
        status=tuple(status),
        polish=_frozen(polish),
        kkt=MappingProxyType(problem.kkt(x, active_tol)),
        seconds=seconds,
    )
