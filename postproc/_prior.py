"""A prior from earlier releases: the mean daily profile, weighted by empirical Bayes.

At strong privacy every release of a period can be worse than repeating an average earlier day
(issue 13). This module forecasts each period from *earlier released measurements only* (or
from history the user declares public) and adds the forecast to Algorithm 4 as one more
weighted estimate of every step ([FV19] Alg. 4, O1)::

    minimise  Σ_{a,s} W[a,s] (ẋ[a,s] − c̃[a,s])²  +  Σ_{a,t} (ẋ[a,t] − f[a,t])² / τ²[a]

subject to the same consistency and non-negativity constraints. For a step ``t`` both terms
are quadratics in the same variable, so their sum is ``(W + 1/τ²)(ẋ − c̄)²`` plus a constant
with the precision-weighted mean ``c̄ = (W c̃ + f/τ²)/(W + 1/τ²)`` (:func:`merge_prior`):
the prior enters through the existing ``Problem`` (estimates and weights), so every solver
handles it and consistency and non-negativity still hold. The optimum is exactly that of the
problem with the extra term; only the reported objective differs by a constant.

Forecast and its error variance (:func:`profile_prior`)
-------------------------------------------------------
The forecast of a period is the mean of the last ``days`` measured periods (a mean daily
profile, as the issue's no-current-data reference uses). Its error variance ``τ²`` (per node)
is estimated from the measurements themselves, by the method of moments (empirical Bayes;
Efron and Morris 1973): for each of the last ``days`` measured periods q, the forecast made
from the periods before q is compared with q's *sampled* steps, which are unbiased with a
known noise variance ``s²_q``::

    E[(ỹ_q,t − f_q,t)²] = E[(x_q,t − f_q,t)²] + s²_q,t,      τ̂² = mean(r² − s²)  (>= a floor).

``f_q`` carries its own noise and interpolation error; both are part of the forecast's error,
as they should be. With no usable pair (fewer than two measured periods) there is no prior.

*Privacy*: the measurements are the outputs of the private mechanism of earlier periods (and
public history); everything here is post-processing ([FV19] Theorem 3) and spends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError

__all__ = ["ProfilePrior", "merge_prior", "profile_prior"]

_FLOOR = 1e-6  # τ̂² floor, relative to the mean noise variance of the periods compared


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilePrior:
    """A forecast of one period and its error variance."""

    mean: np.ndarray = field(hash=False)
    """(N, w) forecast f of every node and step."""
    variance: np.ndarray = field(hash=False)
    """(N, w) error variance τ² of the forecast (the same for every step of a node)."""
    n_periods: int
    """Measured periods averaged into the forecast."""
    n_pairs: int
    """(period, forecast) pairs behind τ̂²."""


def profile_prior(
    measurements: np.ndarray,
    noise: np.ndarray,
    sampled: np.ndarray,
    *,
    days: int = 28,
) -> ProfilePrior | None:
    """Forecast the next period by the mean profile of the last ``days`` measured periods.

    Parameters
    ----------
    measurements
        (P, N, w) measured periods, oldest first: released estimates before post-processing
        (or public history).
    noise
        (P, N, w) known noise variance of each measurement (0 for public history).
    sampled
        (P, N, w) True where the measurement is unbiased (a sampled step, or public history).
    days
        Periods averaged into a forecast.

    Returns
    -------
    ProfilePrior or None
        None with fewer than two measured periods.
    """
    x = np.asarray(measurements, dtype=np.float64)
    v = np.asarray(noise, dtype=np.float64)
    s = np.asarray(sampled, dtype=bool)
    if x.ndim != 3 or v.shape != x.shape or s.shape != x.shape:
        raise ParameterError(
            "The 'measurements', 'noise' and 'sampled' parameters of profile_prior must have "
            f"one shape (P, N, w). Got {x.shape}, {v.shape} and {s.shape}."
        )
    p = x.shape[0]
    if p < 2:
        return None
    num = np.zeros(x.shape[1])
    known = np.zeros(x.shape[1])
    den = np.zeros(x.shape[1])
    pairs = 0
    for q in range(max(1, p - days), p):
        f_q = x[max(0, q - days) : q].mean(axis=0)  # (N, w)
        r = x[q] - f_q
        num += np.where(s[q], r * r, 0.0).sum(axis=1)
        known += np.where(s[q], v[q], 0.0).sum(axis=1)
        den += s[q].sum(axis=1)
        pairs += 1
    den = np.maximum(den, 1.0)
    floor = _FLOOR * np.maximum(known / den, 1e-12)
    tau2 = np.maximum((num - known) / den, floor)
    recent = x[max(0, p - days) :]
    return ProfilePrior(
        mean=recent.mean(axis=0),
        variance=np.broadcast_to(tau2[:, None], x.shape[1:]).copy(),
        n_periods=int(recent.shape[0]),
        n_pairs=pairs,
    )


def merge_prior(
    estimates: np.ndarray, weights: np.ndarray, prior_mean: np.ndarray, prior_variances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Fold a prior on the singletons into the estimates and weights (module Notes).

    Parameters
    ----------
    estimates, weights
        (B, N, P) estimates ``c̃`` and weights ``W`` (the singletons are the first w parts).
    prior_mean, prior_variances
        (N, w) or (B, N, w): the forecast f and its error variance τ² (> 0).

    Returns
    -------
    (estimates, weights)
        The precision-weighted estimates and the summed weights, (B, N, P).

    Examples
    --------
    >>> c = np.array([[[10.0, 4.0]]]); wt = np.array([[[1.0, 1.0]]])
    >>> e, wgt = merge_prior(c, wt, np.array([[[20.0]]]), np.array([[[1.0]]]))
    >>> e.tolist(), wgt.tolist()   # the first part is a singleton of w = 1
    ([[[15.0, 4.0]]], [[[2.0, 1.0]]])
    """
    c = np.asarray(estimates, dtype=np.float64)
    wt = np.asarray(weights, dtype=np.float64)
    w = np.shape(prior_mean)[-1]
    f = np.broadcast_to(np.asarray(prior_mean, dtype=np.float64), c.shape[:2] + (w,))
    tau2 = np.broadcast_to(np.asarray(prior_variances, dtype=np.float64), f.shape)
    wp = 1.0 / tau2
    out_c = c.copy()
    out_w = np.array(np.broadcast_to(wt, c.shape), dtype=np.float64)
    total = out_w[:, :, :w] + wp
    out_c[:, :, :w] = (out_w[:, :, :w] * c[:, :, :w] + wp * f) / total
    out_w[:, :, :w] = total
    return out_c, out_w
