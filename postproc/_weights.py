"""Weights of Algorithm 4 for OptStream's estimates: the error variance of each estimate.

[FV19] Alg. 4 weighs the squared residuals of feature ``F_i`` by ``λ_i = 1/m_i``. Those weights
ignore how noisy each estimate is: once the feature queries carry their correct sensitivity w·α
(not 1, see ``mechanisms.optstream``) a part of F2 or F3 is about as noisy as the sum
of the interpolated values it covers, yet ``1/m_i`` trusts the whole-period total 48 times
more than a step. The best linear unbiased choice is the inverse of each estimate's error variance
(:func:`postproc.project_consistent` ``variances=``). The release knows the noise part:

* a feature part: the Laplace variance of its query;
* an interpolated step ``x̃_t = Σ_j M[t, j] y_j`` (``y`` the noisy samples): ``σ_p² Σ_j M[t,j]²``.

An interpolated step also carries the *interpolation bias* ``ξ^S(t) − x_t`` (0 at the sampled
steps), which is not noise and which the noise variance ignores: with inverse noise variances
the steps between samples look precise and the feature queries can no longer correct them.
:func:`bias_aware_variances` adds to every unsampled step an estimate ``τ̂²`` of the bias
variance, by the method of moments on the residuals of the feature parts, which are private
already (post-processing, [FV19] Theorem 3: no budget)::

    r_P = c̃_P − Σ_{t∈P} x̃_t,   E[r_P²] = Var(c̃_P) + σ_p² ‖1_P^T M‖² + n_P τ²,

with ``n_P`` the unsampled steps of part P, modelling the biases as independent with variance
τ² per node. ``τ̂²`` pools every period and part of a node (clipped at 0). The model is an
approximation (interpolation biases are correlated within a segment); only the weights depend
on it, never privacy or consistency.
"""

from __future__ import annotations

import numpy as np

from mechanisms import ParameterError
from mechanisms.optstream._sampling import interpolation_matrix

from ._features import FeatureSet

__all__ = ["bias_aware_variances", "interpolation_bias_variance"]


def _check(
    estimates: object, variances: object, samples: object, levels: object, features: FeatureSet
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    owner = "bias_aware_variances"
    c = np.asarray(estimates, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    s = np.asarray(samples, dtype=bool)
    if not isinstance(features, FeatureSet):
        raise ParameterError(f"The 'features' parameter of {owner} must be a FeatureSet.")
    lv = [np.asarray(list(level), dtype=np.int64) for level in levels]  # type: ignore[union-attr]
    if c.ndim != 3 or c.shape[2] != features.n_parts or v.shape != c.shape:
        raise ParameterError(
            f"The 'estimates' and 'variances' parameters of {owner} must both have shape "
            f"(B, N, {features.n_parts}). Got {c.shape} and {v.shape}."
        )
    if s.shape != (c.shape[0], len(lv), features.w) or not s[:, :, 0].all():
        raise ParameterError(
            f"The 'samples' parameter of {owner} must have shape (B, n_levels, w) = "
            f"({c.shape[0]}, {len(lv)}, {features.w}) with step 0 sampled. Got {s.shape}."
        )
    flat = np.sort(np.concatenate(lv)) if lv else np.empty(0, dtype=np.int64)
    if not np.array_equal(flat, np.arange(c.shape[1])):
        raise ParameterError(
            f"The 'levels' parameter of {owner} must partition the node indices 0..N-1."
        )
    return c, v, s, lv


def interpolation_bias_variance(
    estimates: object,
    variances: object,
    samples: object,
    *,
    levels: object,
    features: FeatureSet,
) -> np.ndarray:
    """Method-of-moments estimate ``τ̂²`` (N,) of each node's per-step interpolation bias.

    Parameters
    ----------
    estimates, variances
        ``c̃`` and its noise variances (B, N, P) as ``mechanisms.OptStreamEstimates``: the
        interpolated singletons first (their variance at the always-sampled step 0 is the
        sample noise variance σ_p²), then the feature parts.
    samples
        Sample sets (B, h, w) of each period and level.
    levels
        Node indices of each level (h sequences partitioning 0..N−1).
    features
        The feature set of the estimates.

    Returns
    -------
    numpy.ndarray
        τ̂² >= 0 per node (0 without feature queries or without unsampled steps).
    """
    c, v, s, lv = _check(estimates, variances, samples, levels, features)
    w = features.w
    part_rows = features.matrix[w:]  # (Pf, w) indicators of the feature parts
    tau2 = np.zeros(c.shape[1])
    if part_rows.shape[0] == 0:
        return tau2
    for li, nodes in enumerate(lv):
        mask = s[:, li]
        sums = part_rows @ interpolation_matrix(mask)  # (B, Pf, w): Σ_{t∈P} M[t, :]
        sigma_p2 = v[:, nodes, 0]  # (B, n): weight 1 at the sampled step 0
        resid = c[:, nodes, w:] - c[:, nodes, :w] @ part_rows.T  # (B, n, Pf)
        known = v[:, nodes, w:] + sigma_p2[:, :, None] * (sums**2).sum(axis=2)[:, None, :]
        unsampled = (~mask).astype(np.float64) @ part_rows.T  # (B, Pf)
        num = (resid**2 - known).sum(axis=(0, 2))  # (n,)
        den = float(unsampled.sum())
        if den > 0:
            tau2[nodes] = np.maximum(num / den, 0.0)
    return tau2


def bias_aware_variances(
    estimates: object,
    variances: object,
    samples: object,
    *,
    levels: object,
    features: FeatureSet,
) -> np.ndarray:
    """Error variances of OptStream's estimates: noise plus estimated interpolation bias.

    Returns ``variances`` (B, N, P) with ``τ̂²`` (:func:`interpolation_bias_variance`) added
    to every unsampled step of every node; pass it to :func:`postproc.project_consistent` as
    ``variances=``. Pure post-processing of private estimates (module Notes).

    Examples
    --------
    >>> import numpy as np
    >>> fs = FeatureSet.from_breaks(4, [(0, 4)])  # singletons + the whole period
    >>> c = np.array([[[1.0, 2.0, 3.0, 4.0, 14.0]]])  # steps 0, 3 sampled; total 14 vs 10
    >>> v = np.array([[[1.0, 5 / 9, 5 / 9, 1.0, 2.0]]])
    >>> mask = np.array([[[True, False, False, True]]])
    >>> out = bias_aware_variances(c, v, mask, levels=[[0]], features=fs)
    >>> np.round(out[0, 0], 3).tolist()  # r² = 16, known = 2 + 1·(2² + 2²): τ̂² = 6/2 = 3
    [1.0, 3.556, 3.556, 1.0, 2.0]
    """
    c, v, s, lv = _check(estimates, variances, samples, levels, features)
    tau2 = interpolation_bias_variance(c, v, s, levels=lv, features=features)
    out = v.copy()
    w = features.w
    for li, nodes in enumerate(lv):
        gap = ~s[:, li]  # (B, w)
        out[:, nodes, :w] += gap[:, None, :] * tau2[nodes][None, :, None]
    return out
