"""Intervals for the truth from a forecast fitted on a release: which variances add.

A release is y = x + v: the truth x plus the release's error v, of stated variance R at each
step (e.g. ``dpstream.std_errors`` squared). The forecast ŷ of a future step is fitted on the
released past; its backtest inside the history measures d = ŷ − y, of variance D (per step
ahead, :mod:`forecasting._forecast`). The interval is for the truth, whose error is
e = ŷ − x = d + v, so

    Var(e) = D + R + 2 Cov(d, v).                                             (1)

The future v is not in the truth; what (1) needs is how it relates to the backtest error d.
Three cases (``noise=``):

* ``"white"`` (the *classical* error model: v independent of x and of the past, e.g. the
  w-event Laplace baselines): d = e − v with e independent of v, Cov(d, v) = −R, and
  Var(e) = D − R: the backtest's variance already contains R, which does not belong to the
  truth's error.
* ``"posterior"`` (the *Berkson* model, the default; [CRS06] §1.2): the release is an
  estimate whose error is orthogonal to what it is computed from. OptStream's release is
  Algorithm 4's generalised least squares with the error variances as weights ([FV19]
  Alg. 4; a Kalman smoother on the tree, ``dpstream.std_errors``), with an empirical-Bayes
  prior (the truth spread about the prior's mean with the prior's variance): that estimate is
  the posterior mean, and its error v is uncorrelated with every linear function of the data
  it used, which includes the released past the forecast is fitted on and the released value
  y itself (exactly for a linear forecast, to first order for the log model and the choice).
  Then Cov(d, v) = Cov(ŷ − y, v) = 0 and

      Var(e) = D + R,                                                         (2)

  the two add in quadrature; the truth is *more* variable than the release (Var x = Var y + R)
  and the backtest against the smooth release misses R.
* ``"correlated"``: nothing assumed. |Cov(d, v)| <= √(D R) gives Minkowski's bound
  sd(e) <= √D + √R, tight only when d and v are perfectly correlated (a release error that is
  the forecast's own error). Conservative otherwise: the previous default.

Measured on the benchmark's OptStream releases (``bench/bench_forecast_peers.py
--diagnose``: 3 seeds × 28 next-day origins, the truth read only to score;
``docs/results/forecast_peers.md``): corr(d, v) = −0.19 on the five regional nodes and −0.19
to +0.03 on three household slices, close to the 0 of (2) and far from the +1 at which
Minkowski's bound is tight. With the realised variance of v in place of R (an oracle, to
check (2), not a method) the 95 % band of (2) covers 0.953 of the regional truth and
0.943–0.955 of the household's, Minkowski's 0.983–0.990: (2) is the combination, and the
bands are then as good as R. The stated R of these releases was 2.9–5.3× short in variance
until ``dpstream.std_errors`` took the roughness by step of day into account (session 10);
now it is 0.69× the realised on the five regional nodes (conservative; the band covers
0.967). On the single household it was still 2.75× short (the band covered 0.865) until the
stated errors took a nugget between samples into account (session 11: realised / stated
0.85 on the scored days, the band covers 0.944). Pass ``noise="correlated"`` where R is
known to be short.

The band. With (2) the truth's error is x − ŷ = s·q + v', q a backtest score (the residual
actual − forecast over its step's RMS s, pooled over the steps ahead; their empirical law is
the split-conformal law of the model term, [AB23] §1) and v' ~ N(0, R) independent of it.
The band's ends are the quantiles of that sum: the root in t of
mean_i Φ((t − s·q_i) / √R) = p (a convolution of the scores' law with the Gaussian), found
by safeguarded Newton steps, at the finite-sample conformal probabilities of
:func:`forecasting._forecast.conformal_bounds`. With R = 0 they are the conformal bounds;
with Gaussian scores, ŷ ± z √(D + R).

References
----------
[FV19] Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[AB23] Angelopoulos, Bates. Conformal Prediction: A Gentle Introduction. Foundations and
       Trends in Machine Learning 16(4), 2023.
[CRS06] Carroll, Ruppert, Stefanski, Crainiceanu. Measurement Error in Nonlinear Models,
        2nd ed., 2006, §1.2 (classical and Berkson errors).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["NOISE_MODELS", "conformal_probabilities", "truth_bounds", "truth_std"]

#: ``noise=`` choices of :func:`forecasting.forecast` (module notes).
NOISE_MODELS = ("posterior", "correlated", "white")
#: Most steps of :func:`truth_bounds`'s root search (safeguarded Newton from a Gaussian start).
NEWTON_STEPS = 40
#: Its tolerance on the probability (the scores' own steps are 1 / N, about 1e-3).
TOLERANCE = 1e-6


def conformal_probabilities(n: int, level: float) -> tuple[float, float]:
    """Probabilities of the lower and upper split-conformal order statistics of ``n`` scores.

    ⌊(n + 1)·a⌋ / n and ⌈(n + 1)·(1 − a)⌉ / n, a = (1 − level) / 2 ([AB23] §1), clipped to
    [0, 1].
    """
    tail = (1.0 - level) / 2.0
    hi = min(1.0, float(np.ceil((n + 1) * (1.0 - tail))) / n)
    lo = max(0.0, float(np.floor((n + 1) * tail)) / n)
    return lo, hi


def truth_std(scale: np.ndarray, noise_sd: np.ndarray, noise: str) -> np.ndarray:
    """Standard deviation of the truth's forecast error: √(D + R), or √D + √R ("correlated")."""
    if noise == "correlated":
        return scale + noise_sd
    return np.hypot(scale, noise_sd)


def truth_bounds(
    scores: np.ndarray, scale: np.ndarray, noise_sd: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (h, m) from the forecast of the ``level`` band for the truth, Eq. (2).

    The quantiles of s·q + N(0, R) (module notes): ``scores`` (N, m) the backtest scores q,
    ``scale`` (h, m) the model term's RMS s per step, ``noise_sd`` (h, m) √R. Where √R is 0
    the conformal order statistics of s·q.
    """
    lo_p, hi_p = conformal_probabilities(scores.shape[0], level)
    out = []
    for p in (lo_p, hi_p):
        q = np.quantile(scores, p, axis=0, method="inverted_cdf")  # (m,), the R = 0 answer
        ends = scale * q[None, :]
        noisy = noise_sd > 0
        if noisy.any() and 0.0 < p < 1.0:
            ends = np.where(noisy, _mixture_quantile(scores, scale, noise_sd, p), ends)
        elif noisy.any():  # p at 0 or 1 (too few scores): the extreme score, widened
            z = 8.0 if p == 1.0 else -8.0
            ends = np.where(noisy, scale * q[None, :] + z * noise_sd, ends)
        out.append(ends)
    return out[0], out[1]


def _mixture_quantile(
    scores: np.ndarray, scale: np.ndarray, noise_sd: np.ndarray, p: float
) -> np.ndarray:
    """Root t (h, m) of F(t) = mean_i Φ((t − s·q_i) / σ) = p: safeguarded Newton.

    F increases, so [lo, hi] with F(lo) < p <= F(hi) always holds the root; each step is
    Newton's from the current point when it stays inside the bracket, else the bracket's
    midpoint, and the bracket shrinks to the side of the root.
    """
    sd = np.where(noise_sd > 0, noise_sd, 1.0)
    centres = scale[None, :, :] * scores[:, None, :]  # (N, h, m)
    lo = centres.min(axis=0) - 9.0 * sd  # Φ(±9) is 1 − 1e-19: the root lies inside
    hi = centres.max(axis=0) + 9.0 * sd
    # start: the Gaussian with the mixture's mean and variance
    t = centres.mean(axis=0) + ndtri(p) * np.sqrt(centres.var(axis=0) + sd**2)
    for _ in range(NEWTON_STEPS):
        u = (t[None] - centres) / sd[None]
        gap = ndtr(u).mean(axis=0) - p
        if np.abs(gap).max() < TOLERANCE:
            break
        slope = np.exp(-0.5 * u**2).mean(axis=0) / (np.sqrt(2.0 * np.pi) * sd)
        lo = np.where(gap < 0, t, lo)
        hi = np.where(gap >= 0, t, hi)
        step = t - gap / np.maximum(slope, 1e-300)
        t = np.where((step > lo) & (step < hi), step, 0.5 * (lo + hi))
    return t
