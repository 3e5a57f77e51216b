"""The previous exact path (``method="dense"``): Kronecker/dense GLS plus block principal pivoting.

Superseded as the default by :mod:`postproc._tree` and :mod:`postproc._nonneg` (linear in the
number of nodes for any weights); kept as an independent exact reference and for the
benchmarks. Its costs: O(L²) memory for ``K_H`` even with separable weights, O((Lw)³) for other
weights, and pivoting cubic in the number of leaf-steps held at 0.

Notation of :mod:`postproc._problem`. Without the bounds the problem is a generalised least
squares with normal matrix ``M = A^T diag(W) A``, ``A = A_H ⊗ A_T``.

*Separable weights* (``W[a, s] = u[a] v[s]``, e.g. the paper's ``1/m_i`` of [FV19] Alg. 4, or
inverse variances ``σ_a² τ_s²`` of node-level times feature-level noise) make the normal matrix a
Kronecker product ``M = M_H ⊗ M_T`` with ``M_H = A_H^T D_u A_H`` (L x L) and
``M_T = A_T^T D_v A_T`` (w x w). The solution ``X0 = K_H A_H^T (u ∘ C ∘ v) A_T K_T`` with
``K = M^{-1}`` is the 1-D tree BLUE of [HRMS10] (with weights) applied along the time-feature
tree and then along the hierarchy; it costs two small matrix products per period, batched over
periods. *Other weights*: ``M`` is factored densely (Cholesky of an Lw x Lw matrix, once per
distinct weight matrix; columns of its inverse solved only where the bounds need them),
refused above :data:`MAX_DENSE_SIZE` unknowns.

*Non-negativity* (O3): block principal pivoting (Júdice & Pires 1994; Kim & Park 2011) on the
set ``Z`` of leaf-steps held at 0. For a given ``Z`` the equality-constrained optimum is, by a
Schur complement with ``S = K[Z, Z]``, ``X = X0 - K[:, Z] λ`` with ``λ = S^{-1} X0[Z]``, and the
bound multipliers are ``μ_Z = -λ``. With Kronecker weights ``K[(l,t),(l',t')] = K_H[l,l']
K_T[t,t']`` so nothing of size Lw x Lw is ever formed. The pivoting swaps every infeasible index
(negative free value, negative multiplier) while their number decreases and falls back to
swapping a single index otherwise, which guarantees termination; on exit the KKT conditions
hold to rounding.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from mechanisms import ParameterError, SolverError

from ._problem import Problem

__all__ = ["MAX_DENSE_SIZE", "solve_fast"]

#: Largest number of leaf-step unknowns (L * w) for which non-separable weights are factored
#: densely; beyond it use separable weights or ``method="cvxpy"``.
MAX_DENSE_SIZE = 4096
_REL_TOL = 1e-11  # relative tolerance of the pivoting's sign decisions
_EXPLICIT_PERIODS = 4  # dense weights shared by more periods: form K = M^{-1} once


def _inverse_spd(m: np.ndarray) -> np.ndarray:
    factor = linalg.cho_factor(m, lower=True)
    inv = linalg.cho_solve(factor, np.eye(m.shape[0]))
    return (inv + inv.T) / 2.0


def separable_factors(w: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Return ``(u, v)`` with ``W = u v^T`` (to 1e-12 relative), or None if W is not rank one."""
    u = w[:, 0].copy()
    v = w[0, :] / w[0, 0]
    if np.all(np.abs(np.outer(u, v) - w) <= 1e-12 * w):
        return u, v
    return None


class _KronFactor:
    """``K = K_H ⊗ K_T`` for separable weights ``W = u v^T``."""

    def __init__(self, a_h: np.ndarray, a_t: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
        self.k_h = _inverse_spd(a_h.T @ (u[:, None] * a_h))
        self.k_t = _inverse_spd(a_t.T @ (v[:, None] * a_t))
        self.g_h = self.k_h @ (a_h.T * u)  # (L, N): the hierarchy BLUE [HRMS10]
        self.g_t = self.k_t @ (a_t.T * v)  # (w, P): the time-feature BLUE [HRMS10]
        self.w = a_t.shape[1]

    def unconstrained(self, c: np.ndarray) -> np.ndarray:
        return self.g_h @ c @ self.g_t.T  # (b, L, w)

    def columns(self, idx: np.ndarray) -> np.ndarray:
        li, ti = np.divmod(idx, self.w)
        return (self.k_h[:, None, li] * self.k_t[None, :, ti]).reshape(-1, idx.size)

    def block(self, idx: np.ndarray) -> np.ndarray:
        li, ti = np.divmod(idx, self.w)
        return self.k_h[np.ix_(li, li)] * self.k_t[np.ix_(ti, ti)]


class _DenseFactor:
    """``K = M^{-1}`` for weights that are not separable, through a Cholesky factor of ``M``.

    Shared by many periods (``explicit``), ``K`` is formed once. For a weight matrix of one or
    a few periods it is not: the unconstrained optimum is one solve, and the pivoting asks for
    the columns ``K[:, Z]`` of the (usually few) bound indices only, solved on demand.
    """

    def __init__(
        self, a_h: np.ndarray, a_t: np.ndarray, weights: np.ndarray, explicit: bool = False
    ) -> None:
        a = np.kron(a_h, a_t)  # (N P, L w)
        self.wa = weights.reshape(-1)[:, None] * a
        self.factor = linalg.cho_factor(a.T @ self.wa, lower=True)
        self.shape = (a_h.shape[1], a_t.shape[1])
        self._cached: tuple[bytes, np.ndarray] | None = None
        self.k = None
        if explicit:
            inv = linalg.cho_solve(self.factor, np.eye(self.wa.shape[1]))
            self.k = (inv + inv.T) / 2.0

    def unconstrained(self, c: np.ndarray) -> np.ndarray:
        rhs = self.wa.T @ c.reshape(c.shape[0], -1).T  # (L w, b)
        flat = linalg.cho_solve(self.factor, rhs).T
        return flat.reshape((c.shape[0], *self.shape))

    def columns(self, idx: np.ndarray) -> np.ndarray:
        if self.k is not None:
            return self.k[:, idx]
        key = idx.tobytes()
        if self._cached is None or self._cached[0] != key:
            eye = np.zeros((self.wa.shape[1], idx.size))
            eye[idx, np.arange(idx.size)] = 1.0
            self._cached = (key, linalg.cho_solve(self.factor, eye))
        return self._cached[1]

    def block(self, idx: np.ndarray) -> np.ndarray:
        cols = self.columns(idx)[idx]
        return (cols + cols.T) / 2.0


def _pivot(
    factor: _KronFactor | _DenseFactor,
    x0: np.ndarray,
    g_scale: float,
    max_iter: int,
    max_zero: int | None = None,
) -> tuple[np.ndarray, int] | None:
    """Block principal pivoting for one period; ``x0`` is the flat unconstrained optimum.

    Each iteration factors the block of the variables held at 0, a cost cubic in their number:
    with ``max_zero``, None is returned as soon as more than ``max_zero`` are held (the caller
    then solves the period another way).
    """
    x_tol = _REL_TOL * max(float(np.max(np.abs(x0))), np.finfo(float).tiny)
    mu_tol = _REL_TOL * g_scale
    zero = x0 < -x_tol
    best, chances = np.inf, 3
    x = x0
    for it in range(1, max_iter + 1):
        idx = np.flatnonzero(zero)
        if max_zero is not None and idx.size > max_zero:
            return None
        mu = np.zeros(0)
        if idx.size:
            s = factor.block(idx)
            try:
                lam = linalg.cho_solve(linalg.cho_factor(s, lower=True), x0[idx])
            except linalg.LinAlgError:  # pragma: no cover - K is SPD, so is S
                lam = linalg.lstsq(s, x0[idx])[0]
            x = x0 - factor.columns(idx) @ lam
            x[idx] = 0.0
            mu = -lam
        else:
            x = x0.copy()
        infeasible = (~zero) & (x < -x_tol)
        if idx.size:
            infeasible[idx[mu < -mu_tol]] = True
        count = int(infeasible.sum())
        if count == 0:
            return np.maximum(x, 0.0), it
        if count < best:
            best, chances = count, 3
            zero ^= infeasible
        elif chances > 0:
            chances -= 1
            zero ^= infeasible
        else:  # backup rule: swap the last infeasible index only (finite termination)
            j = np.flatnonzero(infeasible)[-1]
            zero[j] = not zero[j]
    raise SolverError(
        f"The active-set (block principal pivoting) loop of the fast path did not converge in "
        f"{max_iter} iterations. Raise 'max_iter' or use method='cvxpy'.",
        status="max_iter",
    )


def solve_fast(problem: Problem, *, max_iter: int = 1000) -> dict[str, object]:
    """Solve every period exactly; returns leaf-step values and diagnostics.

    Keys: ``x`` (B, L, w), ``iterations`` (B,), ``separable`` (bool: every weight group used
    the Kronecker factorisation).
    """
    n_periods = problem.n_periods
    leaves, w = problem.shape
    x = np.empty((n_periods, leaves, w))
    iterations = np.ones(n_periods, dtype=np.int64)
    all_separable = True
    g_scale = problem.gradient_scale()
    for weights, periods in problem.groups():
        uv = separable_factors(weights)
        if uv is None:
            all_separable = False
            if leaves * w > MAX_DENSE_SIZE:
                raise ParameterError(
                    f"The 'weights' parameter of project_consistent is not separable "
                    f"(W[node, part] != u[node] * v[part]) and the problem has {leaves * w} "
                    f"leaf-step unknowns, more than the {MAX_DENSE_SIZE} the fast path factors "
                    "densely. Use separable weights or method='cvxpy'."
                )
            factor: _KronFactor | _DenseFactor = _DenseFactor(
                problem.a_h, problem.a_t, weights, explicit=len(periods) > _EXPLICIT_PERIODS
            )
        else:
            factor = _KronFactor(problem.a_h, problem.a_t, *uv)
        x0 = factor.unconstrained(problem.estimates[periods])  # [HRMS10] closed form
        x[periods] = x0
        tol = _REL_TOL * np.abs(x0).reshape(len(periods), -1).max(axis=1)
        negative = (x0.reshape(len(periods), -1) < -tol[:, None]).any(axis=1)
        for b in np.flatnonzero(negative):
            period = periods[b]
            flat, its = _pivot(  # type: ignore[misc]  (no max_zero: never None)
                factor, x0[b].reshape(-1), float(g_scale[period]), max_iter
            )
            x[period] = flat.reshape(leaves, w)
            iterations[period] = its
    # Entries of X0 within rounding of 0 from below are set to 0 (consistency is unaffected:
    # every released value is recomputed from X).
    np.maximum(x, 0.0, out=x)
    return {"x": x, "iterations": iterations, "separable": all_separable}
