"""Fast exact maximum likelihood of a regression with ARMA(1, 1) errors (profile likelihood).

The model is statsmodels' ``ARIMA(y, exog=X, order=(1, 0, 1), trend="c")``:

    y_t = X_t β + u_t,   u_t − φ u_{t−1} = β_t + θ β_{t−1},   β_t ~ N(0, σ²),

with u stationary from the start (|φ| < 1) and invertible (|θ| < 1); X holds the constant (the
paper's ARMA(1, 1) with a mean, [FV19] §6.1.3) and, for the seasonal model, the value one
season earlier. Its exact Gaussian likelihood is computed here without a Kalman filter, by the
innovations algorithm for ARMA(1, 1) ([BD91] §5.3, recursive prediction of an ARMA
process; §8.7 for the likelihood):

    r_0 = (1 + 2φθ + θ²) / (1 − φ²),   r_n = 1 + θ² − θ² / r_{n−1}        (data free)
    e_0 = u_0,   e_n = u_n − φ u_{n−1} − (θ / r_{n−1}) e_{n−1}                (one pass)
    log L = −½ Σ_n [log(2π σ² r_n) + e_n² / (σ² r_n)].

The innovations are linear in u, hence in (y, X): one pass over the columns [y, X] gives the
whitened data, β is their generalised least squares fit and σ² their mean square, both in
closed form ([BD91] §8.7: σ² concentrated; the regression coefficients by GLS). What is left to
maximise is the *profile* log-likelihood of (φ, θ): two parameters instead of statsmodels' four
or five, each evaluation one linear pass: r_n has a closed form (its Riccati recursion is a
Möbius map with eigenvalues 1 and θ², see :func:`_prefix`), which turns the time-varying
innovations recursion into one constant-coefficient ``scipy.signal.lfilter``; gradients by
finite differences.

Why hand-written: statsmodels maximises the full likelihood (β, φ, θ, σ² all numerical, the
Kalman filter per evaluation, ~50 L-BFGS iterations with complex-step gradients); nothing in
statsmodels, scipy or statsforecast profiles the regression coefficients and σ² out of an
exact ARMA likelihood. The result is checked against statsmodels' own likelihood: the caller
evaluates ``model.filter(params).llf`` at the optimum found here (the same function statsmodels
maximises) and keeps the best of several starts, among them statsmodels' own start values
(``tests/forecasting/test_forecast_fast_fit.py`` pins llf >= statsmodels' default fit).

References
----------
[BD91] Brockwell, Davis. Time Series: Theory and Methods, 2nd ed., 1991.
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.signal import lfilter

__all__ = ["profile_fit", "profile_loglike"]

#: |φ|, |θ| are kept below this bound (statsmodels enforces stationarity and invertibility).
_EDGE = 8.0  # bound on the unconstrained tanh⁻¹ parameters: tanh(8) = 1 − 2.3e-7
#: A coarse grid over (tanh⁻¹ φ, tanh⁻¹ θ) guards against the local optima of the likelihood.
_GRID_PHI = (-1.0, 0.0, 1.0, 2.0, 3.0)  # φ = tanh(·): −0.76 ... 0.995
_GRID_THETA = (-2.0, -0.8, 0.0, 0.8, 2.0)  # θ = tanh(·): −0.96 ... 0.96


def _prefix(phi: float, theta: float, n: int) -> np.ndarray:
    """p_{−1..n−1}: p_{−1} = 1, p_t = r_0 r_1 ... r_t (so r_t = p_t / p_{t−1}).

    p solves p_t = (1 + θ²) p_{t−1} − θ² p_{t−2} (the recursion of r_t written for its
    numerator), whose roots are 1 and θ²: p_t = r_0 + (r_0 − 1) θ² (1 − θ^{2t}) / (1 − θ²),
    a sum of non-negative terms (no cancellation; r_0 >= 1).
    """
    r0 = (1.0 + 2.0 * phi * theta + theta * theta) / (1.0 - phi * phi)
    p = np.empty(n + 1)
    p[0] = 1.0
    if theta == 0.0:
        p[1:] = r0
    else:
        t = np.arange(n, dtype=np.float64)
        frac = -np.expm1(t * np.log(theta * theta)) / (1.0 - theta * theta)  # Σ_{j<t} θ^{2j}
        p[1:] = r0 + (r0 - 1.0) * theta * theta * frac
    return p


def _whiten(z: np.ndarray, phi: float, theta: float) -> tuple[np.ndarray, float]:
    """Innovations e_t / √r_t of every row of ``z`` (k × n, one series per row), Σ log r_t.

    With f_t = e_t p_{t−1} the time-varying recursion e_t = w_t − (θ / r_{t−1}) e_{t−1}
    becomes f_t = w_t p_{t−1} − θ f_{t−1}, a constant-coefficient filter (lfilter), and
    e_t / √r_t = f_t / √(p_t p_{t−1}); Σ log r_t = log p_{n−1}.
    """
    n = z.shape[1]
    p = _prefix(phi, theta, n)
    w = np.empty_like(z)
    w[:, 0] = z[:, 0]
    np.subtract(z[:, 1:], phi * z[:, :-1], out=w[:, 1:])  # w_t = u_t − φ u_{t−1}
    f = lfilter([1.0], [1.0, theta], w * p[:-1], axis=-1)
    return f / np.sqrt(p[1:] * p[:-1]), float(np.log(p[-1]))


def profile_loglike(
    y: np.ndarray, exog: np.ndarray, phi: float, theta: float
) -> tuple[float, np.ndarray, float]:
    """Profile log-likelihood at (φ, θ): (log L, GLS β, σ²) with β and σ² at their optimum.

    ``exog`` is k × n (one regressor per row).
    """
    n = y.size
    e, logdet = _whiten(np.vstack([y, exog]), phi, theta)
    ey, ex = e[0], e[1:]
    beta = np.linalg.solve(ex @ ex.T, ex @ ey)
    resid = ey - beta @ ex  # not ey·ey − (ex·ey)β: that cancels when the mean is large
    sigma2 = float(resid @ resid) / n
    if not sigma2 > 0.0:
        return -np.inf, beta, sigma2
    loglike = -0.5 * (n * (np.log(2.0 * np.pi * sigma2) + 1.0) + logdet)
    return float(loglike), beta, sigma2


def profile_fit(
    y: np.ndarray, exog: np.ndarray, starts: list[tuple[float, float]]
) -> tuple[np.ndarray, float, bool]:
    """Maximise the profile likelihood from ``starts`` (φ, θ), and from the best point of a
    coarse grid when that point beats every optimum reached from ``starts``.

    Returns the statsmodels parameter vector ``[β..., φ, θ, σ²]`` of the best optimum found,
    its log-likelihood, and whether that optimisation reported convergence.
    """
    n = y.size
    # Centred and scaled copies (the optimum in (φ, θ) is the same: the constant regressor
    # absorbs the centring; scaling shifts log L by a constant).
    scale = float(np.std(y)) or 1.0
    size = np.abs(exog).max(axis=1, keepdims=True)
    ys, xs = (y - y.mean()) / scale, exog / np.where(size > 0.0, size, 1.0)

    def objective(a: np.ndarray) -> float:
        value = profile_loglike(ys, xs, float(np.tanh(a[0])), float(np.tanh(a[1])))[0]
        return -value / n if np.isfinite(value) else 1e10

    def run(x0: np.ndarray) -> object:
        return minimize(
            objective,
            x0,
            method="L-BFGS-B",
            bounds=[(-_EDGE, _EDGE)] * 2,
            options={"ftol": 1e-14, "gtol": 1e-9, "maxiter": 200},
        )

    best = None
    clip = 1.0 - 1e-6
    for phi, theta in starts:
        res = run(np.arctanh(np.clip([phi, theta], -clip, clip)))
        if best is None or res.fun < best.fun:
            best = res
    # A point of the grid better than every optimum found lies in another basin: climb it.
    grid = [np.array([a, b]) for a in _GRID_PHI for b in _GRID_THETA]
    values = [objective(x) for x in grid]
    if best is None or min(values) < best.fun:
        res = run(grid[int(np.argmin(values))])
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None  # starts is never empty (statsmodels' start values)
    phi, theta = float(np.tanh(best.x[0])), float(np.tanh(best.x[1]))
    loglike, beta, sigma2 = profile_loglike(y, exog, phi, theta)
    params = np.r_[beta, phi, theta, sigma2]
    return params, loglike, bool(best.success) or _stationary(objective, best.x)


def _stationary(objective, x: np.ndarray, h: float = 1e-6, tol: float = 1e-6) -> bool:
    """Whether ``x`` is a stationary point: central-difference projected gradient < ``tol``.

    L-BFGS-B with finite-difference gradients often stops with "ABNORMAL_TERMINATION_IN_LNSRCH"
    at an optimum (its gtol is below the gradient's precision); this tells such a stop from a
    real failure. Per-observation objective: |g| < 1e-6 is far inside the optimum's basin.
    """
    grad = np.empty(2)
    for i in range(2):
        e = np.zeros(2)
        e[i] = h
        grad[i] = (objective(x + e) - objective(x - e)) / (2.0 * h)
    at_upper, at_lower = x >= _EDGE - h, x <= -_EDGE + h
    grad[(at_upper & (grad < 0)) | (at_lower & (grad > 0))] = 0.0  # pushing out of the box
    return bool(np.all(np.abs(grad) < tol))
