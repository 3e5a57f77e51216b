"""The general path: [FV19] Alg. 4 over a hierarchy as a QP solved by cvxpy + OSQP.

The problem of :mod:`postproc._problem` is whitened before it reaches the solver, so that
OSQP's absolute and relative tolerances mean the same thing whatever the units of the data:

- rows: each residual ``Y[a,s] - C[a,s]`` is multiplied by ``sqrt(W[a,s])``, so the objective
  is a plain sum of squares;
- columns: each leaf-step variable is scaled by the norm of its column (Jacobi scaling, the
  square root of the diagonal of the normal matrix), ``y = D x``;
- values: each period's whitened data are divided by their largest magnitude ``σ`` (1 if all
  are 0), so the solver sees numbers of order one; ``x = σ D^{-1} y`` afterwards.

One cvxpy problem is compiled per distinct weight matrix with the data as a ``Parameter``
(DPP), then re-solved per period with OSQP's warm start. Settings are explicit
(:data:`OSQP_SETTINGS`); cvxpy's own defaults (``eps = 1e-5``, and *no polishing* on warm
re-solves) are never relied upon. Anything but ``optimal`` raises :class:`SolverError`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
from scipy import sparse

from mechanisms import ParameterError, SolverError

from ._problem import Problem

__all__ = ["OSQP_SETTINGS", "solve_cvxpy"]

#: Settings passed to OSQP on every solve (whitened problem, data of order one):
#: absolute and relative tolerances 1e-9, at most 200,000 ADMM iterations, solution polishing on
#: (an exact solve on the active set OSQP identified). ``polishing`` is spelt ``polish`` for
#: OSQP < 1; the adapter translates.
OSQP_SETTINGS: Mapping[str, object] = MappingProxyType(
    {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iter": 200_000, "polishing": True}
)


def _osqp_options(overrides: Mapping[str, object] | None) -> dict[str, object]:
    import osqp

    opts = dict(OSQP_SETTINGS)
    if overrides is not None:
        if not isinstance(overrides, Mapping):
            raise ParameterError(
                "The 'osqp_settings' parameter of project_consistent must be a mapping of "
                f"OSQP setting names to values. Got {type(overrides).__name__} instead."
            )
        opts.update(overrides)
    if int(str(osqp.__version__).split(".")[0]) < 1 and "polishing" in opts:
        opts["polish"] = opts.pop("polishing")
    return opts


def _compile(problem: Problem, weights: np.ndarray):  # noqa: ANN202 - cvxpy objects
    import cvxpy as cp

    a = sparse.kron(sparse.csr_matrix(problem.a_h), sparse.csr_matrix(problem.a_t), format="csr")
    sqrt_w = np.sqrt(weights.reshape(-1))
    b = sparse.diags(sqrt_w) @ a
    col = np.sqrt(np.asarray(b.multiply(b).sum(axis=0)).reshape(-1))
    b = (b @ sparse.diags(1.0 / col)).tocsc()
    y = cp.Variable(b.shape[1], name="y")
    d = cp.Parameter(b.shape[0], name="d")
    qp = cp.Problem(cp.Minimize(cp.sum_squares(b @ y - d)), [y >= 0])
    return qp, y, d, sqrt_w, col


def solve_cvxpy(
    problem: Problem, *, osqp_settings: Mapping[str, object] | None = None
) -> dict[str, object]:
    """Solve every period with cvxpy + OSQP; returns leaf-step values and diagnostics.

    Keys: ``x`` (B, L, w), ``iterations`` (B,) OSQP iterations, ``status`` (tuple of cvxpy
    statuses), ``polish`` (B,) OSQP polish status (1 succeeded, 0 not run, -1 failed).

    Raises
    ------
    SolverError
        If OSQP does not report ``optimal`` for some period (the message gives the period and
        the status; ``optimal_inaccurate`` is an error, not a warning).
    """
    import cvxpy as cp

    opts = _osqp_options(osqp_settings)
    n_periods = problem.n_periods
    leaves, w = problem.shape
    x = np.empty((n_periods, leaves, w))
    iterations = np.zeros(n_periods, dtype=np.int64)
    polish = np.zeros(n_periods, dtype=np.int64)
    status: list[str] = [""] * n_periods
    for weights, periods in problem.groups():
        qp, y, d, sqrt_w, col = _compile(problem, weights)
        for period in periods:
            data = sqrt_w * problem.estimates[period].reshape(-1)
            sigma = float(np.max(np.abs(data)))
            sigma = sigma if sigma > 0 else 1.0
            d.value = data / sigma
            try:
                with warnings.catch_warnings():
                    # cvxpy warns on inaccurate solutions; the status check below decides.
                    warnings.simplefilter("ignore")
                    qp.solve(solver=cp.OSQP, warm_start=True, **opts)
            except cp.error.SolverError as exc:
                raise SolverError(
                    f"OSQP failed on period {period} of project_consistent: {exc}",
                    status="solver_error",
                ) from exc
            if qp.status != cp.OPTIMAL:
                raise SolverError(
                    f"OSQP did not solve period {period} of project_consistent to optimality. "
                    "Loosen or raise 'osqp_settings' (e.g. max_iter) or use method='fast'.",
                    status=str(qp.status),
                )
            info = getattr(qp.solver_stats.extra_stats, "info", None)
            iterations[period] = int(getattr(info, "iter", qp.solver_stats.num_iters or 0))
            polish[period] = int(getattr(info, "status_polish", 0))
            status[period] = str(qp.status)
            # Bounds hold to the solver tolerance; clip the rounding so O3 holds exactly.
            x[period] = (sigma * np.maximum(y.value, 0.0) / col).reshape(leaves, w)
    return {"x": x, "iterations": iterations, "status": tuple(status), "polish": polish}
