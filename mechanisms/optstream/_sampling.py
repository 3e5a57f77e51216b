"""OptStream's Sample and Reconstruct steps ([FV19] §3.1, Algorithm 3, §3.3).

Arrays are batched over w-periods: a *level* of a hierarchy is an array ``(B, n, r)`` of ``B``
periods, ``n`` nodes (the nodes of one level, or one stream) and ``r <= w`` steps. Sample sets
are boolean masks ``(B, r)``: one sample set per period, *shared by every node of the level*
(see :func:`sample_l1` for why).

Indices are 0-based here; [FV19] numbers steps from 1.
"""

from __future__ import annotations

import math

import numpy as np

from ..core._noise import LaplaceNoise, lattice_granularity, snap_to_lattice
from ..core._random import BitSource

__all__ = [
    "interpolation_matrix",
    "interpolation_weights",
    "l1_score",
    "l1_sensitivity",
    "null_rate_threshold",
    "reconstruct",
    "reconstruct_observed",
    "sample_equal",
    "sample_equal_window",
    "sample_l1",
    "svt_noises",
]


def sample_equal(r: int, k: int) -> np.ndarray:
    """Equally spaced sample steps ([FV19] §3.1): ``round(linspace(0, r - 1, k))``.

    The first and last steps are always sampled (for ``k >= 2``); ``k >= r`` samples every
    step. Data-independent, so it costs no budget (ε_s = 0).
    """
    k = min(int(k), int(r))
    if k <= 1:
        return np.zeros(1, dtype=np.int64)
    return np.rint(np.linspace(0.0, r - 1.0, k)).astype(np.int64)


def sample_equal_window(r: int, k: int, window: int) -> np.ndarray:
    """Equally spaced samples of a period of ``r <= window`` steps: the full pattern's steps.

    ``sample_equal(window, k)`` restricted to ``[0, r)``: a short (last) period keeps the sample
    steps of a full period that fall inside it, never a denser pattern of its own. Step 0 is
    always among them.

    Notes
    -----
    *Why* (the tail leak, issue 11 §1): Perturb is calibrated for ``k`` samples per window
    (L1 sensitivity kα). With the same pattern ``p_1 < ... < p_k`` in every period, a window of
    ``w`` steps starting at offset ``s`` of a period holds the samples ``p_j >= s`` of that period
    and ``p_j < s`` of the next: exactly ``k``. Restricting the pattern to a last period of ``r``
    steps only removes samples, so every window, including one straddling the last full period
    and the tail, holds at most ``k``. The tail's own pattern ``sample_equal(r, k)`` (the old
    rule) puts up to ``#{p_j >= s} + #{tail samples < s} > k`` samples in such a window: for
    w = 4, k = 2, r = 2 the window [2, 6) holds steps 3, 4 and 5 and leaks 1.5ε.

    Examples
    --------
    >>> sample_equal_window(48, 10, 48).tolist() == sample_equal(48, 10).tolist()
    True
    >>> sample_equal_window(10, 10, 48).tolist()
    [0, 5]
    >>> sample_equal_window(2, 2, 4).tolist()
    [0]
    """
    r, window = int(r), int(window)
    if not 1 <= r <= window:
        raise ValueError(f"sample_equal_window needs 1 <= r <= window; got r={r}, w={window}.")
    steps = sample_equal(window, k)
    return steps[steps < r]


def l1_sensitivity(w: int, k: int, alpha: float) -> float:
    """ΔL = 2α(w − k) of [FV19] Theorem 6 and §5.1, checked (see Notes of :func:`sample_l1`)."""
    return 2.0 * alpha * (w - k)


def l1_score(
    x: np.ndarray, tp: np.ndarray, i: int, observed: np.ndarray | None = None
) -> np.ndarray:
    """The L1 score L1^[tp, i] of [FV19] Eq. 3, summed over the nodes of a level.

    Parameters
    ----------
    x
        Level values ``(B, n, r)``.
    tp
        Last sampled step of each period ``(B,)``, every entry ``< i``.
    i
        Candidate step (the same for every period).
    observed
        Optional public mask ``(B, n, r)`` of observed readings (``missing="unmeasured"``). A
        node contributes only its observed interior steps, and only when both end points are
        observed for it; its unobserved entries never enter the score.

    Returns
    -------
    numpy.ndarray
        ``(B,)``: ``sum_nodes sum_{tp < j < i} |ξ^[tp,i](j) − x_j|`` (the end points contribute 0).

    Notes
    -----
    With ``observed``, the score is the same sum with some terms removed by a public gate
    (the mask and the earlier sampled step t_p, an output of the SVT): each kept term moves by
    at most what it moved before, so ΔL = 2α(w − k) still bounds it ([FV19] Theorem 6).
    """
    b, _, r = x.shape
    j = np.arange(r, dtype=np.float64)[None, :]
    tpf = tp.astype(np.float64)[:, None]
    lam = (j - tpf) / (i - tpf)  # (B, r)
    inside = (j > tpf) & (j < i)
    xa = np.take_along_axis(x, tp[:, None, None].repeat(x.shape[1], axis=1), axis=2)  # (B, n, 1)
    xb = x[:, :, i : i + 1]
    line = xa + lam[:, None, :] * (xb - xa)  # [FV19 §3.1, ξ^[a,b]]
    keep = np.broadcast_to(inside[:, None, :], x.shape)
    if observed is not None:
        obs = np.asarray(observed, dtype=bool)
        ends = np.take_along_axis(obs, tp[:, None, None].repeat(x.shape[1], axis=1), axis=2)
        keep = keep & obs & ends & obs[:, :, i : i + 1]  # public gate (mask, t_p, i)
    return np.where(keep, np.abs(line - x), 0.0).sum(axis=(1, 2))


def svt_noises(
    *, w: int, k: int, epsilon: float, alpha: float
) -> tuple[LaplaceNoise, LaplaceNoise]:
    """The threshold and query noises of Algorithm 3, on one shared lattice.

    ρ ~ Lap(2ΔL/ε_s) (line 2) and μ_i ~ Lap(4kΔL/ε_s) (line 4), i.e. the SVT of Lyu, Su and
    Li (2017, Alg. 1) with half the budget on the threshold and ``c = k`` positive answers.
    Both live on the lattice γℤ of the smaller scale; the scores and θ are snapped to it, so
    the sensitivity becomes ΔL + γ, which is what both scales use.
    """
    delta_l = l1_sensitivity(w, k, alpha)
    gamma = lattice_granularity(delta_l * 2.0 / epsilon)
    rho = LaplaceNoise(sensitivity=delta_l, epsilon=epsilon / 2.0, granularity=gamma)
    mu = LaplaceNoise(sensitivity=delta_l, epsilon=epsilon / (4.0 * k), granularity=gamma)
    return rho, mu


def null_rate_threshold(*, w: int, k: int, epsilon: float, alpha: float) -> float:
    """The public default θ of the L1 sampler: b_μ · ln(w / 2k), or 0 when w <= 2k.

    With no signal (scores far below the query-noise scale b_μ = 4k(ΔL + γ)/ε_s) a step is
    accepted with probability ``P[μ >= θ] = exp(−θ/b_μ)/2 = k/w``, the rate of equally spaced
    sampling; larger scores raise it. It depends on (w, k, α, ε_s) only, never on the data.
    """
    if w <= 2 * k:
        return 0.0
    _, mu = svt_noises(w=w, k=k, epsilon=epsilon, alpha=alpha)
    return mu.scale * math.log(w / (2.0 * k))


def sample_l1(
    x: np.ndarray,
    *,
    k: int,
    epsilon: float,
    alpha: float,
    theta: float,
    bits: BitSource,
    window: int | None = None,
    observed: np.ndarray | None = None,
) -> np.ndarray:
    """The L1-based adaptive sampler ([FV19] Algorithm 3), one SVT per period and level.

    Parameters
    ----------
    x
        Level values ``(B, n, r)``; the score of a segment is summed over the ``n`` nodes.
    k
        Number of samples (``min(k, r)`` are taken).
    epsilon
        ε_s of one period.
    alpha
        Largest change of the level's values at one step, summed over its nodes (see Notes).
    theta
        Public threshold θ, in the units of the summed score.
    bits
        Bit source.
    window
        The w the noise is calibrated for (default ``r``); a short last period uses the full
        period's calibration.
    observed
        Optional public mask ``(B, n, r)`` of observed readings: the scores use only observed
        steps of a node (:func:`l1_score`); ΔL, the noises and θ are unchanged.

    Returns
    -------
    numpy.ndarray
        Boolean mask ``(B, r)`` with exactly ``min(k, r)`` sampled steps per period, step 0
        always among them.

    Notes
    -----
    Lines of Algorithm 3 (0-based): S = {0}, t_p = 0; ρ; for i = 1..r−1: accept i if
    ``L1^[t_p,i] + μ_i >= θ + ρ``; if ``r − 1 − i <= k − |S|`` add every later step; stop at
    ``|S| = k``. Steps after the last sample are reconstructed by holding its value.

    *Sensitivity* (checked, [FV19] Theorem 6): for an interior step j of [a, b], ξ(j) is a convex
    combination of x_a and x_b, so |Δξ(j)| <= α and ||ξ'(j) − x'_j| − |ξ(j) − x_j|| <= 2α; the
    end points contribute 0. Hence ΔL1^[a,b] <= 2α(b − a − 1). A query is only asked while
    ``i <= r − k + |S| − 1`` and ``t_p >= |S| − 1`` (0-based), so ``b − a <= r − k <= w − k`` and
    ``ΔL = 2α(w − k)`` is valid (tight up to the factor (w−k−1)/(w−k)).

    *Why one sample set per level*: [FV19] Def. 3 lets *different* individuals (hence different
    leaves) change at different steps of a window. Independent samplers per node would then
    not compose in parallel across the level (node a's sampler and perturbation can see the
    changes at a's sampled steps, node b's at b's: up to ``n·k`` sampled changes instead of
    ``k``). Summing the score over the level keeps ΔL: per step the level's values change by at
    most α in total, so the summed interior terms move by at most 2α per step. With a shared S,
    the perturbation of the level also keeps sensitivity kα. For one stream this is exactly
    Algorithm 3.

    *Privacy*: ε_s-DP for the period under (w, α) neighbours (SVT, Lyu et al. 2017 Thm. 2, with
    c = k >= the number of positive answers, and adaptively chosen queries of sensitivity ΔL).
    Noise is lattice Laplace; scores and θ are snapped to the lattice, the rounding is in ΔL + γ.
    """
    b, _, r = x.shape
    w_cal = r if window is None else int(window)
    k_eff = min(int(k), r)
    mask = np.zeros((b, r), dtype=bool)
    mask[:, 0] = True
    if k_eff >= r:
        mask[:] = True
        return mask
    if k_eff <= 1:
        return mask
    rho_noise, mu_noise = svt_noises(w=w_cal, k=k, epsilon=epsilon, alpha=alpha)
    gamma = rho_noise.granularity
    level = float(snap_to_lattice(theta, gamma)) + rho_noise.sample(b, bits)  # [FV19 Alg. 3 l. 2]
    tp = np.zeros(b, dtype=np.int64)
    count = np.ones(b, dtype=np.int64)
    active = np.ones(b, dtype=bool)
    for i in range(1, r):
        score = snap_to_lattice(l1_score(x, tp, i, observed), gamma)
        mu = mu_noise.sample(b, bits)  # [FV19 Alg. 3 l. 4]
        hit = active & (score + mu >= level)  # [FV19 Alg. 3 l. 5]
        mask[hit, i] = True
        tp[hit] = i
        count[hit] += 1
        forced = active & (r - 1 - i <= k_eff - count)  # [FV19 Alg. 3 l. 8-9]
        if forced.any():
            mask[forced, i + 1 :] = True
            count[forced] += r - 1 - i
        active &= ~forced & (count < k_eff)  # [FV19 Alg. 3 l. 10]
        if not active.any():
            break
    return mask


def interpolation_matrix(mask: np.ndarray) -> np.ndarray:
    """Linear-interpolation operator of each period's sample set ([FV19] §3.3, ξ^S).

    Parameters
    ----------
    mask
        Sample sets ``(B, r)``; step 0 must be sampled in every period.

    Returns
    -------
    numpy.ndarray
        ``(B, r, r)`` with ``x̃ = M @ y``: row ``t`` holds the weights of the sampled steps
        (columns of unsampled steps are 0) in the interpolated value at step ``t``; steps after
        the last sample hold it (weight 1 on the last sample).
    """
    m = np.asarray(mask, dtype=bool)
    b, r = m.shape
    steps = np.arange(r)
    left = np.maximum.accumulate(np.where(m, steps, -1), axis=1)  # last sample <= t
    right = np.minimum.accumulate(np.where(m, steps, r)[:, ::-1], axis=1)[:, ::-1]  # first >= t
    if (left < 0).any():
        raise ValueError("every sample set must contain step 0")
    hold = right >= r  # after the last sample: constant extension
    right = np.where(hold, left, right)
    span = np.maximum(right - left, 1)
    lam = np.where(hold, 0.0, (steps[None, :] - left) / span)
    out = np.zeros((b, r, r))
    rows = np.broadcast_to(steps, (b, r))
    bi = np.broadcast_to(np.arange(b)[:, None], (b, r))
    np.add.at(out, (bi, rows, left), 1.0 - lam)
    np.add.at(out, (bi, rows, right), lam)
    return out


def reconstruct(mask: np.ndarray, noisy: np.ndarray) -> np.ndarray:
    """Linear interpolation through the noisy samples ([FV19] §3.3, ξ^S).

    Parameters
    ----------
    mask
        Sample sets ``(B, r)``.
    noisy
        Noisy sampled values ``(B, n, k)``, in step order of each period's sample set.

    Returns
    -------
    numpy.ndarray
        ``(B, n, r)``; values after the last sample hold it (constant extension).
    """
    m = np.asarray(mask, dtype=bool)
    b, r = m.shape
    full = np.zeros((b, noisy.shape[1], r))
    full.transpose(0, 2, 1)[m] = (
        np.asarray(noisy, dtype=np.float64).transpose(0, 2, 1).reshape(-1, noisy.shape[1])
    )
    return np.einsum("btj,bnj->bnt", interpolation_matrix(m), full)


def interpolation_weights(mask: np.ndarray) -> np.ndarray:
    """Sum of squared interpolation weights per step ``(B, r)``: Var(x̃_t) / Var(noise)."""
    return (interpolation_matrix(mask) ** 2).sum(axis=2)


def reconstruct_observed(
    mask: np.ndarray, noisy: np.ndarray, observed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per-node interpolation through the noisy samples a node *observed* (``unmeasured``).

    Parameters
    ----------
    mask
        Sample sets ``(B, r)`` (shared by the level's nodes).
    noisy
        Noisy sampled values ``(B, n, k)``, in step order of each period's sample set.
    observed
        Public mask ``(B, n, r)`` of observed readings.

    Returns
    -------
    estimates, weights : numpy.ndarray
        ``(B, n, r)`` each: node ``j``'s line through its samples at observed steps only
        ([FV19] §3.3, ξ^S with S the node's observed samples; before its first one and after
        its last one the nearest is held), and the sum of squared interpolation weights per
        step (the variance over the noise variance; ``inf`` for a node without any observed
        sample in the period, whose estimate is 0). A sample at an unobserved step measured a
        public constant plus noise and is dropped. Pure post-processing of the noisy samples
        with a public mask.
    """
    m = np.asarray(mask, dtype=bool)
    obs = np.asarray(observed, dtype=bool)
    b, n, r = obs.shape
    full = np.zeros((b, n, r))
    full.transpose(0, 2, 1)[m] = (
        np.asarray(noisy, dtype=np.float64).transpose(0, 2, 1).reshape(-1, n)
    )
    own = (m[:, None, :] & obs).reshape(b * n, r)  # each node's usable samples
    vals = full.reshape(b * n, r)
    steps = np.arange(r)
    left = np.maximum.accumulate(np.where(own, steps, -1), axis=1)
    right = np.minimum.accumulate(np.where(own, steps, r)[:, ::-1], axis=1)[:, ::-1]
    none = left[:, -1] < 0  # no usable sample in the period
    left = np.where(left < 0, right, left)  # before the first sample: hold it
    right = np.where(right >= r, left, right)  # after the last: hold it
    left = np.clip(left, 0, r - 1)
    right = np.clip(right, 0, r - 1)
    span = np.maximum(right - left, 1)
    lam = np.where(right > left, (steps[None, :] - left) / span, 0.0)
    rows = np.arange(b * n)[:, None]
    est = (1.0 - lam) * vals[rows, left] + lam * vals[rows, right]
    wts = np.where(right > left, (1.0 - lam) ** 2 + lam**2, 1.0)
    est[none] = 0.0
    wts[none] = np.inf
    return est.reshape(b, n, r), wts.reshape(b, n, r)
