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
or five, each evaluation one linear pass (``scipy.signal.lfilter`` once r_n has converged to 1,
a short Python loop before: r_n − 1 shrinks like θ^{2n}), gradients by finite differences.

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
#: r_n − 1 below this: the innovations filter has reached its steady state (k_n = θ).
_STEADY = 1e-15
#: A coarse grid over (tanh⁻¹ φ, tanh⁻¹ θ) guards against the local optima of the likelihood.
_GRID = np.array([-2.0, -0.8, 0.0, 0.8, 1.6, 2.4, 3.2])


def _gains(phi: float, theta: float, n: int) -> tuple[np.ndarray, int]:
    """r_0..r_{T−1} up to the steady state T (≤ n); r_n = 1 beyond it."""
    r = [(1.0 + 2.0 * phi * theta + theta * theta) / (1.0 - phi * phi)]
    t2 = theta * theta
    while len(r) < n and abs(r[-1] - 1.0) > _STEADY:
        r.append(1.0 + t2 - t2 / r[-1])
    return np.asarray(r), len(r)


def _whiten(z: np.ndarray, phi: float, theta: float) -> tuple[np.ndarray, float]:
    """Innovations e_n / √r_n of every row of ``z`` (k × n, one series per row), Σ log r_n."""
    n = z.shape[1]
    r, steady = _gains(phi, theta, n)
    w = np.empty_like(z)
    w[:, 0] = z[:, 0]
    np.subtract(z[:, 1:], phi * z[:, :-1], out=w[:, 1:])
    # Transient (time-varying gain θ / r_{t−1}) over the first `steady` steps: a loop on
    # Python floats, hand-written since no library filter takes a time-varying coefficient.
    gain = (theta / r[:-1]).tolist()
    head = w[:, :steady].tolist()
    for row in head:
        for t in range(1, steady):
            row[t] -= gain[t - 1] * row[t - 1]
    e = np.empty_like(z)
    e[:, :steady] = np.asarray(head) / np.sqrt(r)
    if steady < n:
        # Steady state (r_t = 1): e_t + θ e_{t−1} = w_t, continued from e_{steady−1}.
        zi = -theta * np.asarray([row[-1] for row in head])[:, None]
        e[:, steady:], _ = lfilter([1.0], [1.0, theta], w[:, steady:], axis=-1, zi=zi)
    return e, float(np.log(r).sum())


def profile_loglike(
    y: np.ndarray, exog: np.ndarray, phi: float, theta: float
) -> tuple[float, np.ndarray, float]:
    """Profile log-likelihood at (φ, θ): (log L, GLS β, σ²) with β and σ² at their optimum.

    ``exog`` is k × n (one regressor per row).
    """
    n = y.size
    e, logdet = _whiten(np.vstack([y, exog]), phi, theta)
    gram = e @ e.T  # [[ey·ey, ey·ex], [ex·ey, ex·ex]]
    beta = np.linalg.solve(gram[1:, 1:], gram[1:, 0])
    sigma2 = float(gram[0, 0] - gram[1:, 0] @ beta) / n
    if not sigma2 > 0.0:
        return -np.inf, beta, sigma2
    loglike = -0.5 * (n * (np.log(2.0 * np.pi * sigma2) + 1.0) + logdet)
    return float(loglike), beta, sigma2


def profile_fit(
    y: np.ndarray, exog: np.ndarray, starts: list[tuple[float, float]]
) -> tuple[np.ndarray, float, bool]:
    """Maximise the profile likelihood from ``starts`` (φ, θ) and the best point of a grid.

    Returns the statsmodels parameter vector ``[β..., φ, θ, σ²]`` of the best optimum found,
    its log-likelihood, and whether that optimisation reported convergence.
    """
    n = y.size
    scale = float(np.std(y)) or 1.0
    size = np.abs(exog).max(axis=1, keepdims=True)
    ys, xs = y / scale, exog / np.where(size > 0.0, size, 1.0)

    def objective(a: np.ndarray) -> float:
        value = profile_loglike(ys, xs, float(np.tanh(a[0])), float(np.tanh(a[1])))[0]
        return -value / n if np.isfinite(value) else 1e10

    grid = [(a, b) for a in _GRID for b in _GRID]
    best_grid = min(grid, key=lambda ab: objective(np.asarray(ab)))
    points = [np.asarray(best_grid)]
    for phi, theta in starts:
        clip = 1.0 - 1e-6
        points.append(np.arctanh(np.clip([phi, theta], -clip, clip)))
    best = None
    for x0 in points:
        res = minimize(
            objective,
            x0,
            method="L-BFGS-B",
            bounds=[(-_EDGE, _EDGE)] * 2,
            options={"ftol": 1e-14, "gtol": 1e-9, "maxiter": 200},
        )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    phi, theta = float(np.tanh(best.x[0])), float(np.tanh(best.x[1]))
    loglike, beta, sigma2 = profile_loglike(y, exog, phi, theta)
    params = np.r_[beta, phi, theta, sigma2]
    return params, loglike, bool(best.success)
