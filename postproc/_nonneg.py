"""The fast path: exact tree solves (:mod:`postproc._tree`) plus a sparse active set for X >= 0.

Per group of periods sharing a weight matrix, the unconstrained optimum of every period comes
from ONE factorisation (the up pass) and one batched down pass. A period whose optimum has a
negative leaf-step is then solved with X >= 0 in two stages.

1. *Primal-dual active set* (block principal pivoting; Júdice & Pires 1994, Hintermüller, Ito
   & Kunisch 2002): solve exactly with the set ``Z`` of leaf-steps held at 0, then move every
   free value below 0 into ``Z`` and every held one with a negative multiplier (half-gradient,
   :meth:`postproc._problem.Problem.half_gradient`) out of it. On the benchmark's feeders it
   ends in about five iterations whatever the size (``bench/bench_hierarchy.py``). It has no
   general convergence guarantee, so if the number of infeasible indices stops decreasing for
   ``_CHANCES`` rounds the loop switches to stage 2 (the previous fast path fell back to
   swapping one index at a time instead, cubic when many steps sit at 0).
2. *Projected Newton* (Bertsekas 1982, "Projected Newton methods for optimization problems
   with simple constraints", SIAM J. Control Optim. 20(2)): at a feasible ``x`` with
   half-gradient ``g``, the ε-active set ``A = {i : 0 <= x_i <= ε_k, g_i > 0}`` with
   ``ε_k = min(ε, ||x - [x - D g]^+||_∞)`` (``D`` the inverse diagonal of the normal matrix);
   the exact Newton step on the free set ``d_F = -M_FF^{-1} g_F`` (a tree solve with ``A``
   held) and ``d_A = -D_A g_A``; the step ``x(α) = [x + α d]^+``, ``α = 1, 1/2, ...``, by
   Armijo's rule along the projection arc,
   ``f(x) - f(x(α)) >= σ (-α g_F·d_F + g_A·(x_A - x_A(α)))``. Bertsekas proves convergence to
   the minimiser from any start for such problems and identification of the optimal active set
   after finitely many iterations (under strict complementarity), after which ``α = 1`` and the
   Newton step is the exact minimiser.

Both stop only when the KKT conditions hold to ``_TOL`` relative to the gradient scale. Between
iterations the factorisation is updated only for the leaves whose held set changed, their
parents and the parents' ancestors (:meth:`TreeFactor.update`): the active set stays sparse in
the work it causes.

Why hand-written rather than a library NNLS: scipy's ``nnls``/``lsq_linear`` need the matrix
``A = A_H ⊗ A_T`` (or its products) and cannot exploit the exact O(nodes) tree solves; block
principal pivoting (the previous fast path) has no global convergence guarantee and fell back
to single swaps, cubic with many zeros.
"""

from __future__ import annotations

import numpy as np

from mechanisms import SolverError

from ._fast import MAX_DENSE_SIZE, _KronFactor, _pivot, separable_factors
from ._problem import Problem
from ._tree import FeatureTree, HierarchyLayout, TreeFactor

__all__ = ["solve_tree"]

_TOL = 1e-11  # relative projected-gradient tolerance (to the problem's gradient scale)
_STALL_TOL = 1e-8  # accepted when the line search stalls at rounding level
_SIGMA = 1e-4  # Armijo's sufficient decrease
_EPS = 1e-3  # ε of the ε-active set, relative to max |x|
_CHANCES = 3  # rounds without fewer infeasible indices before the projected Newton fallback
_CHUNK = 2**22  # numbers (N x periods x w) solved at once in the batched down pass
_ZEROS = 256  # most variables held at 0 before a small problem's dense pivoting gives way


class _Period:
    """Objective, half-gradient and Newton right-hand sides of one period, in O(N P)."""

    def __init__(self, lay: HierarchyLayout, ft: FeatureTree, w: np.ndarray, c: np.ndarray):
        self.lay, self.ft, self.w, self.c = lay, ft, w, c
        self.a_t = ft.a_t.toarray()  # small (P, w): dense BLAS products on the feature side
        self._diag: np.ndarray | None = None

    @property
    def diag(self) -> np.ndarray:
        """Diagonal of ``M = A^T diag(W) A`` (L, w), built on first use (projected Newton)."""
        if self._diag is None:
            self._diag = self.lay.a_h_t @ (self.w @ self.a_t)
        return self._diag

    def residual(self, x: np.ndarray) -> np.ndarray:
        return (self.lay.a_h @ x) @ self.a_t.T - self.c  # (N, P)

    def objective(self, x: np.ndarray) -> float:
        r = self.residual(x)
        return float(np.einsum("np,np->", self.w * r, r))

    def gradient(self, x: np.ndarray) -> np.ndarray:
        r = self.w * self.residual(x)
        return self.lay.a_h_t @ (r @ self.a_t)  # A_H^T (W ∘ R) A_T (L, w)

    def leaf_rhs(self, r: np.ndarray) -> np.ndarray:
        b = np.zeros((self.lay.n, 1, self.ft.w))
        b[self.lay.leaf_rows, 0] = r
        return b


def _active_set(
    period: _Period,
    factor: TreeFactor,
    x_free: np.ndarray,
    g_scale: float,
    max_iter: int,
    b: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Primal-dual active set (block principal pivoting) with a convergent fallback.

    Each iteration solves exactly with the leaf-steps ``Z`` held at 0 (one tree solve) and
    swaps every infeasible index: a free value below 0 enters ``Z``, a held one with a negative
    multiplier (half-gradient) leaves it (Júdice & Pires 1994; Hintermüller, Ito & Kunisch
    2002). It usually ends in a handful of iterations; if the number of infeasible indices
    stops decreasing for ``_CHANCES`` rounds it finishes with :func:`_project`, which
    converges from any start.
    """
    zero = x_free < 0
    x_tol = 1e-11 * max(float(np.abs(x_free).max()), np.finfo(float).tiny)
    g_tol = _TOL * g_scale
    best, chances = np.inf, _CHANCES
    for it in range(1, max_iter + 1):
        factor.update(~zero)
        x = factor.solve(b, refine=0)[:, 0, :]
        g = period.gradient(x)
        if np.abs(np.where(zero, 0.0, g)).max() > g_tol:
            # one step of iterative refinement (see TreeFactor.solve), reusing the gradient
            x += factor.solve(period.leaf_rhs(np.where(zero, 0.0, -g)), refine=0)[:, 0, :]
            g = period.gradient(x)
        infeasible = (~zero & (x < -x_tol)) | (zero & (g < -g_tol))
        count = int(infeasible.sum())
        if count == 0:
            return np.maximum(x, 0.0), it
        if count < best:
            best, chances = count, _CHANCES
        elif chances > 0:
            chances -= 1
        else:
            x, its = _project(period, factor, x, g_scale, max_iter - it)
            return x, it + its
        zero ^= infeasible
    raise SolverError(
        f"The active-set loop of the fast path did not converge in {max_iter} iterations. "
        "Raise 'max_iter' or use method='cvxpy'.",
        status="max_iter",
    )


def _project(
    period: _Period, factor: TreeFactor, x_free: np.ndarray, g_scale: float, max_iter: int
) -> tuple[np.ndarray, int]:
    """Projected Newton (module notes) from the clipped unconstrained optimum."""
    x = np.maximum(x_free, 0.0)
    eps = _EPS * max(float(np.abs(x_free).max()), np.finfo(float).tiny)
    f = period.objective(x)
    tol = _TOL * g_scale
    for it in range(1, max_iter + 1):
        g = period.gradient(x)
        projected = np.where(x > 0, g, np.minimum(g, 0.0))
        err = float(np.abs(projected).max())
        if err <= tol:
            return x, it
        step = x - np.maximum(x - g / period.diag, 0.0)
        eps_k = min(eps, float(np.abs(step).max()))
        active = (g > 0) & (x <= eps_k)
        free = ~active
        factor.update(free)
        d = factor.solve(period.leaf_rhs(np.where(free, -g, 0.0)))[:, 0, :]
        d = np.where(active, -g / period.diag, d)
        slope = float(np.sum(np.where(free, g * d, 0.0)))  # <= 0
        alpha = 1.0
        while True:
            xn = np.maximum(x + alpha * d, 0.0)
            fn = period.objective(xn)
            need = _SIGMA * (-alpha * slope + float(np.sum(np.where(active, g * (x - xn), 0.0))))
            if f - fn >= need - 8 * np.finfo(float).eps * abs(f):
                break
            alpha /= 2.0
            if alpha < 1e-10:  # no decrease left: at the optimum up to rounding
                if err <= _STALL_TOL * g_scale:
                    return x, it
                raise SolverError(
                    "The projected Newton line search of the fast path stalled before the "
                    "optimality conditions held. Use method='cvxpy'.",
                    status="stalled",
                )
        x, f = xn, fn
    raise SolverError(
        f"The active-set (projected Newton) loop of the fast path did not converge in "
        f"{max_iter} iterations. Raise 'max_iter' or use method='cvxpy'.",
        status="max_iter",
    )


def _small_kron_factor(problem: Problem, weights: np.ndarray) -> _KronFactor | None:
    """The dense Kronecker factor of a small problem with separable weights, else None.

    For a few dozen leaves, [FV19]'s block principal pivoting on the dense factor (``_fast``)
    handles a small active set faster than the tree's projected Newton steps (the
    Python-level work per iteration dominates there: 7x on 30 leaves, issue 16's bench); its
    cost is cubic in the variables held at 0, so it is tried only on problems of at most
    ``MAX_DENSE_SIZE`` leaf-step unknowns and abandoned beyond ``_ZEROS`` of them (zero-heavy
    leaves), where the tree's active set takes over. Both are exact: the answer is the same.
    """
    leaves, w = problem.shape
    if leaves * w > MAX_DENSE_SIZE:
        return None
    uv = separable_factors(weights)
    return None if uv is None else _KronFactor(problem.a_h, problem.a_t, *uv)


def solve_tree(
    problem: Problem, *, max_iter: int = 1000, dense_small: bool = True
) -> dict[str, object]:
    """Solve every period exactly in time linear in the number of nodes.

    ``dense_small=False`` keeps small separable problems on the tree's active set too (tests
    of that path; :func:`_small_kron_factor` says why small ones pivot densely by default).
    Keys: ``x`` (B, L, w), ``iterations`` (B,) (1 where the unconstrained optimum is already
    non-negative, else projected Newton iterations).
    """
    n_periods = problem.n_periods
    leaves, w = problem.shape
    lay = HierarchyLayout(problem.hierarchy)
    ft = FeatureTree(problem.features)
    x = np.empty((n_periods, leaves, w))
    iterations = np.ones(n_periods, dtype=np.int64)
    g_scale = problem.gradient_scale()
    a_t = problem.a_t
    free = np.ones((leaves, w), dtype=bool)
    for weights, periods in problem.groups():
        base = TreeFactor(lay, ft, weights, free)
        kron = _small_kron_factor(problem, weights) if dense_small else None
        chunk = max(1, _CHUNK // (lay.n * w))
        for start in range(0, len(periods), chunk):
            part = periods[start : start + chunk]
            c = problem.estimates[part]  # (R, N, P)
            wc = (weights * c).reshape(-1, a_t.shape[0])
            b = (wc @ a_t).reshape(len(part), lay.n, w).transpose(1, 0, 2)  # A_T^T (W ∘ C)
            x0 = base.solve(b)  # (L, R, w), the unconstrained optimum
            for r, period in enumerate(part):
                xr = x0[:, r, :]
                tol = 1e-11 * max(float(np.abs(xr).max()), np.finfo(float).tiny)
                if (xr >= -tol).all():
                    x[period] = np.maximum(xr, 0.0)
                    continue
                if kron is not None:
                    done = _pivot(kron, xr.reshape(-1), float(g_scale[period]), max_iter, _ZEROS)
                    if done is not None:
                        x[period] = np.maximum(done[0], 0.0).reshape(leaves, w)
                        iterations[period] = done[1]
                        continue
                ops = _Period(lay, ft, weights, c[r])
                x[period], iterations[period] = _active_set(
                    ops, base.copy(), xr, float(g_scale[period]), max_iter, b[:, r : r + 1]
                )
    return {"x": x, "iterations": iterations}
