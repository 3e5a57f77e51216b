"""Dynamic harmonic regression with daily and weekly seasons, vectorised over many series.

The default model of :func:`forecasting.forecast` (issue 28). A load y_t is written as

    y_t = Σ_j β_j f_j(t) + Σ_k γ_k z_{k,t} + u_t,   u_t = φ u_{t−1} + η_t,

with f_j the intercept, the daily harmonics sin/cos(2π j t / s), j = 1..J, and the weekly
harmonics sin/cos(2π j t / 7s) of the frequencies that are not daily ones (j not a multiple
of 7), z the exogenous regressors (temperature, a working-day flag, ...) and u an AR(1)
remainder: the dynamic harmonic regression of [HA21] §12.1 (Fourier terms for long and
multiple seasons, ARIMA errors), with the weekly harmonics playing the role of the weekday
profiles of an MSTL decomposition ([BHK21] Eq. 1). The coefficients are weighted least squares
with exponentially decaying weights (half-life :data:`HALF_LIFE_DAYS` days), so the seasons'
shape follows the time of year (the level moves faster: below); every series of a frame shares
the design matrix, so one factorisation serves them all (many right-hand sides), except with
a noise variance per step (one weighted fit per series, below).

The remainder's AR(1) coefficient is the moment estimator φ = γ̂(1) / (γ̂(0) − R): a release
y_t = x_t + v_t with white noise v_t of known variance R ([FV19] §6) inflates γ̂(0) by R and
leaves γ̂(1) alone, so subtracting R is the noise-aware fit ([GM76]); the last remainder is
then filtered with the steady-state Kalman gain of u_t + v_t ([DK12] §2.11, a scalar
Riccati equation) instead of being read off the noisy observation. Without noise (R = 0) the
gain is 1 and this is the plain AR(1) forecast φ^h u_n.

The level follows the recent days ([HA21] §8.1, simple exponential smoothing; the level of
the trend that MSTL's forecast carries from its last value, [BHK21] §3): the daily means d_k of
the regression's residuals are smoothed, ℓ_k = ℓ_{k−1} + a (d_k − ℓ_{k−1}), with a per series
from a grid on [0, 1] chosen by the one-day-ahead squared error Σ_k (d_k − ℓ_{k−1})² inside the
history (after :data:`LEVEL_WARMUP` days), and the forecast adds the last level ℓ. The
regression's seasons can then use a long half-life (:data:`HALF_LIFE_DAYS`): the shape of the
day and week changes slowly, the level fast. With a release's noise, d_k carries the day's mean
noise, independent of ℓ_{k−1}, which adds the same constant to every a's error: the choice of a
is unbiased for the truth's ([GM76]).

With the noise variance of every step, R_t (``noise_steps``: OptStream's steps between samples
carry an interpolation error, the samples only the noise, and k="auto" changes R by period),
the regression is generalised least squares ([HA21] §7.9 weighted regression; [DK12] §4.13):
the weights are the decay over V_t, the variance of step t's error *as it acts on the seasons*,
which are estimated over many days. OptStream's released value is the generalised
least-squares combination of the day's measurement z_t (noise and interpolation error,
variance v_t) with its prior m_t, a profile of the earlier days of variance τ² ([FV19]
Alg. 4; ``dpstream.std_errors``): y_t = λ_t z_t + (1 − λ_t) m_t with R_t = λ_t v_t =
(1 − λ_t) τ², so the prior's share of the value is 1 − λ_t = R_t / τ². Its error has two
parts that act differently on a fit over days:

* the day's own error, new every day, averages over the D effective days of the fit
  (:func:`effective_days`, Kish's (Σ w)² / Σ w² of the decay): variance (σ² + R_t) / D,
  σ² the remainder's variance without the noise;
* the prior's error against the truth is the same on consecutive days (a profile of the
  earlier days carried forward, its interpolation between the same sample times included),
  so it does not average; it enters with the prior's share, as (R_t / τ²)² times the prior's
  error variance, τ² for an empirical-Bayes prior that holds: R_t² / τ².

So V_t = R_t² / τ² + (σ² + R_t) / D (:func:`step_variance`), with τ² the largest R_t of the
step's day (where the measurement carries nothing the posterior variance is the prior's). A
constant R_t leaves the weights flat (no reweighting); for white noise without a prior the
weights are sharper than the 1 / (σ² + R_t) that case asks for (the noisiest steps count for
less than they could; still far better than no weights: ``tests/forecasting``). The previous
weights 1 / (σ² + R_t) treated the whole error as new every day: on the national release
(3 seeds × 28 origins) the harmonic regression's MAPE against the truth is 10.67 % with them,
10.35 % with V_t, 10.90 % unweighted (``docs/results/forecast_peers.md``, session 11).

References
----------
[HA21]  Hyndman, Athanasopoulos. Forecasting: Principles and Practice, 3rd ed., 2021.
[BHK21] Bandara, Hyndman, Bergmeir. MSTL: A Seasonal-Trend Decomposition Algorithm for Time
        Series with Multiple Seasonal Patterns, 2021.
[DK12]  Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
[GM76]  Granger, Morris. Time Series Modelling and Interpretation. JRSS A 139(2), 1976.
[FV19]  Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = [
    "DAILY_HARMONICS", "HALF_LIFE_DAYS", "LEVEL_ALPHAS", "LEVEL_WARMUP", "WEEKLY_HARMONICS",
    "daily_level", "effective_days", "harmonic", "min_history", "step_variance",
]  # fmt: skip

#: Daily harmonics J (sin and cos of 2π j t / s, j = 1..J).
DAILY_HARMONICS = 12
#: Weekly harmonics: frequencies j / 7s, j = 1..WEEKLY_HARMONICS, j not a multiple of 7.
WEEKLY_HARMONICS = 24
#: Half-life of the exponentially decaying weights of the regression (days). The seasons'
#: shape changes slowly; the level follows the recent days through :func:`daily_level`.
HALF_LIFE_DAYS = 56.0
#: Smoothing constants a of the daily level the backtest chooses from (0: no level step).
LEVEL_ALPHAS = np.linspace(0.0, 1.0, 21)
#: Days before the level's one-day-ahead errors count (the smoothing's start-up).
LEVEL_WARMUP = 7
#: Days of history at most (twelve weeks; older ones add little to the seasons' shape).
MAX_DAYS = 84
#: Largest AR(1) coefficient of the remainder (stationary forecasts).
MAX_PHI = 0.995
#: Smallest share of the residual variance taken as the remainder's own (GLS weights).
MIN_SIGNAL = 0.05


def min_history(period: int) -> int:
    """Fewest training steps: two weeks (each weekly harmonic then has two cycles)."""
    return 14 * period


def design(
    t: np.ndarray, period: int, *, daily: int = DAILY_HARMONICS, weekly: int = WEEKLY_HARMONICS
) -> np.ndarray:
    """Columns: 1, daily sin/cos j = 1..daily, weekly sin/cos (j <= weekly, not 7 | j)."""
    cols = [np.ones(t.size)]
    for j in range(1, min(daily, period // 2) + 1):
        arg = 2.0 * np.pi * j * t / period
        cols += [np.sin(arg), np.cos(arg)]
    if weekly:
        for j in range(1, weekly + 1):
            if j % 7:
                arg = 2.0 * np.pi * j * t / (7 * period)
                cols += [np.sin(arg), np.cos(arg)]
    return np.column_stack(cols)


def harmonic(
    values: np.ndarray,
    horizon: int,
    period: int,
    *,
    noise_variance: np.ndarray | None = None,
    noise_steps: np.ndarray | None = None,
    exog: np.ndarray | None = None,
    future_exog: np.ndarray | None = None,
    daily: int = DAILY_HARMONICS,
    weekly: int = WEEKLY_HARMONICS,
    half_life: float = HALF_LIFE_DAYS,
    level: bool = True,
) -> np.ndarray:
    """Point forecasts of ``horizon`` steps after ``values`` (n, m): an (horizon, m) array.

    ``noise_variance`` holds the release noise variance R of each series (m,) (None: 0), for
    the AR(1) remainder; ``noise_steps`` (n, m), optional, R of every step, for the generalised
    least squares (module notes); ``exog`` (n, k) and ``future_exog`` (horizon, k) the
    regressors shared by the series; ``level``: add the smoothed daily level (module notes).
    """
    n, m = values.shape
    keep = min(n, MAX_DAYS * period)
    y = values[n - keep :]
    t = np.arange(n - keep, n + horizon, dtype=np.float64)
    x = design(t, period, daily=daily, weekly=weekly)
    if exog is not None:
        z = np.vstack([exog[n - keep :], future_exog])
        scale = z[:keep].std(axis=0)
        scale[scale == 0] = 1.0
        x = np.hstack([x, (z - z[:keep].mean(axis=0)) / scale])
    x_fit, x_new = x[:keep], x[keep:]
    age_days = (keep - 1 - np.arange(keep)) / period
    wts = 0.5 ** (age_days / half_life)
    xw = x_fit * wts[:, None]
    gram = xw.T @ x_fit
    gram[np.diag_indices_from(gram)] += 1e-8 * np.trace(gram) / gram.shape[0]  # tiny ridge
    coef = scipy.linalg.solve(gram, xw.T @ y, assume_a="pos")  # weighted normal equations
    resid = y - x_fit @ coef  # (keep, m)
    if noise_steps is not None:  # GLS: weights decay / V_t, one series at a time (notes)
        r_t = np.asarray(noise_steps, dtype=np.float64)[n - keep :]
        total = np.mean(resid * resid, axis=0)
        signal = np.maximum(total - r_t.mean(axis=0), MIN_SIGNAL * total)
        days_eff = effective_days(wts, period)
        for j in np.flatnonzero(r_t.max(axis=0) > 0):
            v_t = step_variance(r_t[:, j], t[:keep], period, signal[j], days_eff)
            xw_j = x_fit * (wts / v_t)[:, None]
            gram_j = xw_j.T @ x_fit
            gram_j[np.diag_indices_from(gram_j)] += 1e-8 * np.trace(gram_j) / gram_j.shape[0]
            coef[:, j] = scipy.linalg.solve(gram_j, xw_j.T @ y[:, j], assume_a="pos")
        resid = y - x_fit @ coef
    mean = x_new @ coef
    r = np.zeros(m) if noise_variance is None else np.asarray(noise_variance, dtype=np.float64)
    if level:
        last = daily_level(resid, period)
        mean = mean + last
        resid = resid - last
    return mean + _ar1_remainder(resid, horizon, r)


def effective_days(weights: np.ndarray, period: int) -> float:
    """Kish's effective number of days, (Σ w)² / Σ w² / s, of the regression's step weights."""
    return float(weights.sum() ** 2 / np.sum(weights * weights) / period)


def step_variance(
    r_t: np.ndarray, t: np.ndarray, period: int, signal: float, days_eff: float
) -> np.ndarray:
    """Variance V_t of step t's error in the seasons' fit: R_t² / τ²_d + (σ² + R_t) / D (notes).

    ``r_t`` the release's stated error variance of each step, ``t`` the steps' positions
    (days are ``t // period``), ``signal`` σ², ``days_eff`` D (:func:`effective_days`); τ²_d
    is the largest R_t of the step's day, the posterior variance where the prior stands alone.
    """
    day = (t // period).astype(np.intp)
    day -= day[0]
    prior = np.zeros(int(day[-1]) + 1)
    np.maximum.at(prior, day, r_t)
    tau2 = prior[day]
    shared = np.divide(r_t * r_t, tau2, out=np.zeros_like(r_t), where=tau2 > 0)
    return shared + (signal + r_t) / days_eff  # [prior's share², day's own error / D]


def daily_level(resid: np.ndarray, period: int) -> np.ndarray:
    """Last level ℓ (m,) of the daily means of ``resid`` (n, m), smoothed (module notes).

    Simple exponential smoothing ([HA21] §8.1) of the whole days' means, the smoothing
    constant per series the one of :data:`LEVEL_ALPHAS` with the least one-day-ahead squared
    error after :data:`LEVEL_WARMUP` days (0, no level, when nothing beats it).
    """
    n, m = resid.shape
    days = n // period
    if days <= LEVEL_WARMUP:
        return np.zeros(m)
    means = resid[n - days * period :].reshape(days, period, m).mean(axis=1)
    alphas = LEVEL_ALPHAS[:, None]
    lvl = np.zeros((LEVEL_ALPHAS.size, m))
    err = np.zeros((LEVEL_ALPHAS.size, m))
    for k in range(days):
        if k >= LEVEL_WARMUP:
            err += (means[k] - lvl) ** 2
        lvl += alphas * (means[k] - lvl)
    best = np.argmin(err, axis=0)
    return lvl[best, np.arange(m)]


def _ar1_remainder(resid: np.ndarray, horizon: int, noise: np.ndarray) -> np.ndarray:
    """AR(1) forecasts of the remainder, noise-aware (module notes): (horizon, m)."""
    g0 = np.mean(resid * resid, axis=0)
    g1 = np.mean(resid[1:] * resid[:-1], axis=0)
    signal = np.maximum(g0 - noise, 1e-12 * np.maximum(g0, 1e-300))  # var(u) = γ(0) − R
    phi = np.clip(g1 / signal, 0.0, MAX_PHI)
    q = np.maximum(signal * (1.0 - phi**2), 1e-300)  # var(η) of a stationary AR(1)
    # Steady-state predicted variance P of u_t given y_{<t}: P = φ² P R / (P + R) + q.
    p = _riccati(phi, q, noise)
    gain = np.where(noise > 0, p / (p + noise), 1.0)
    state = np.zeros(resid.shape[1])
    # Filter the last days only: the gain's memory is short (|φ(1 − K)| < 1).
    for e in resid[-min(resid.shape[0], 4 * 48) :]:
        pred = phi * state
        state = pred + gain * (e - pred)
    steps = np.arange(1, horizon + 1)[:, None]
    return state[None, :] * phi[None, :] ** steps


def _riccati(phi: np.ndarray, q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Positive root of P = φ² P R / (P + R) + q (the scalar steady-state Riccati equation)."""
    # P² + P (R − φ² R − q) − q R = 0
    b = r * (1.0 - phi**2) - q
    return 0.5 * (-b + np.sqrt(b * b + 4.0 * q * r))
