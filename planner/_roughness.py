"""Roughness of a stream from released (noisy) periods: a variogram with the noise taken out.

OptStream's error has two parts ([FV19] §4): the noise of the k perturbed samples and the error
of linear interpolation between them. The second depends on the data. :mod:`planner._stream_plan`
predicts it from the *variogram* of the stream within a period,

    γ(h) = ½ E[(x_{t+h} − x_t)²],      h = 0 .. w − 1,

because the mean squared error of any interpolation ``x̂_t = Σ_i a_i x_i`` with ``Σ a_i = 1`` is
(ordinary-kriging identity for processes with stationary increments; Cressie 1993, §3.2)

    E[(x_t − Σ_i a_i x_i)²] = 2 Σ_i a_i γ(|i − t|) − Σ_ij a_i a_j γ(|i − j|).

The variogram is estimated from values the planner may read for free: periods *already
released* (post-processing, [FV19] Theorem 3) or a history the user declares public. Only
*measured* steps are used: the samples of a released period, whose noise is independent with a
variance ``s²`` known from the (public) plan, and every step of public history. A pair of them
at lag h gives

    E[(ỹ_j − ỹ_i)²] = 2γ(h) + s_i² + s_j²,

so the known noise part is subtracted (the released data's noise taken out of the roughness
estimate). Interpolated steps are smoother than the data at every lag and are left out.

A period released with k samples shows a few lags only, each from pairs at the same times of
day (a biased view of a daily cycle); :func:`variogram` then falls back to a random walk
reaching the measured long-lag level (the sill) at lag w/2: rougher at short lags than any
smooth curve (for which γ grows like h²), so an unmeasured scale is never assumed smooth and
the planner does not lock itself into few samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

__all__ = ["RoughnessStats", "kriging_bias", "period_roughness", "variogram"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoughnessStats:
    """Sufficient statistics of the variogram of one or more periods (sums, not means)."""

    squares: np.ndarray = field(hash=False)
    """(N, w): Σ over periods and t of (x̂_{t+h} − x̂_t)², per node and lag h."""
    noise: np.ndarray = field(hash=False)
    """(N, w): Σ of the known noise part of those squares."""
    counts: np.ndarray = field(hash=False)
    """(w,): number of (period, t) pairs summed at each lag (0 where no period resolves h);
    (N, w) once a period measured its nodes at different steps (unmeasured readings left out,
    ``missing="unmeasured"``): each node's own count."""

    def __add__(self, other: RoughnessStats) -> RoughnessStats:
        return RoughnessStats(
            squares=self.squares + other.squares,
            noise=self.noise + other.noise,
            counts=self.counts + other.counts,
        )

    def scaled(self, factor: float) -> RoughnessStats:
        """Every sum times ``factor`` (a look-back by forgetting: the planner's state without
        the periods themselves, :class:`planner.StreamPlanner`)."""
        return RoughnessStats(
            squares=self.squares * factor,
            noise=self.noise * factor,
            counts=self.counts * factor,
        )

    def __sub__(self, other: RoughnessStats) -> RoughnessStats:
        """Take a period out of the sums (a running look-back: equal to summing the rest,
        to rounding)."""
        return RoughnessStats(
            squares=self.squares - other.squares,
            noise=self.noise - other.noise,
            counts=self.counts - other.counts,
        )


def period_roughness(
    values: np.ndarray, noise: np.ndarray | None = None, sampled: np.ndarray | None = None
) -> RoughnessStats:
    """Variogram statistics of one released (or public) period, from its measured steps only.

    Parameters
    ----------
    values
        (N, w) released estimates of every node.
    noise
        (N, w) noise variance of each estimate (None: public, noise-free); the noise of
        distinct measured steps is independent.
    sampled
        (N, w) True at the steps actually measured (None: every step). Interpolated steps are
        smoother than the data and are left out: only pairs of measured steps count.
    """
    x = np.asarray(values, dtype=np.float64)
    n, w = x.shape
    s = np.ones((n, w), dtype=bool) if sampled is None else np.asarray(sampled, dtype=bool)
    v = np.zeros((n, w)) if noise is None else np.asarray(noise, dtype=np.float64)
    squares = np.zeros((n, w))
    noise_sum = np.zeros((n, w))
    counts = np.zeros(w)
    if n and (s == s[:1]).all():  # every node measured at the same steps: only their pairs
        cols = np.flatnonzero(s[0])
        i, j = np.triu_indices(cols.size, k=1)
        lag = cols[j] - cols[i]
        for h in np.unique(lag):
            a, b = cols[i[lag == h]], cols[j[lag == h]]
            d = x[:, b] - x[:, a]
            squares[:, h] = (d * d).sum(axis=1)
            noise_sum[:, h] = (v[:, b] + v[:, a]).sum(axis=1)
            counts[h] = a.size
        return RoughnessStats(squares=squares, noise=noise_sum, counts=counts)
    # Nodes measured at different steps (a sample at an unmeasured reading dropped): each
    # node's pairs of its own measured steps, and its own counts (N, w).
    counts = np.zeros((n, w))
    for h in range(1, w):
        both = s[:, h:] & s[:, :-h]  # (N, w - h)
        if not both.any():
            continue
        d = x[:, h:] - x[:, :-h]
        squares[:, h] = np.where(both, d * d, 0.0).sum(axis=1)
        noise_sum[:, h] = np.where(both, v[:, h:] + v[:, :-h], 0.0).sum(axis=1)
        counts[:, h] = both.sum(axis=1)
    return RoughnessStats(squares=squares, noise=noise_sum, counts=counts)


def variogram(stats: RoughnessStats) -> np.ndarray | None:
    """γ(h) (N, w) from :func:`period_roughness` statistics; None if no lag is measured.

    With most lags up to w/2 measured (public history, or periods with many samples), the
    empirical variogram, interpolated linearly over unmeasured lags. Otherwise (few samples:
    only a handful of lags, each from pairs at fixed times of day) a one-parameter model: a
    random walk reaching the *sill* at lag w/2, ``γ(h) = sill·min(2h/w, 1)``, with the sill the
    mean measured γ at lags >= w/4 (every lag if none is that long).
    """
    if np.ndim(stats.counts) == 2:
        return _variogram_per_node(stats)
    resolved = np.flatnonzero(stats.counts > 0)
    if resolved.size == 0:
        return None
    n, w = stats.squares.shape
    c = stats.counts[resolved]
    known = np.maximum(0.5 * (stats.squares[:, resolved] - stats.noise[:, resolved]) / c, 0.0)
    lags = np.arange(w, dtype=np.float64)
    half = max(w // 2, 1)
    if np.count_nonzero((resolved >= 1) & (resolved <= half)) >= half // 2:
        gamma = np.empty((n, w))
        for i in range(n):
            gamma[i] = np.interp(lags, resolved.astype(np.float64), known[i])
        h0 = int(resolved[0])
        small = lags < h0
        gamma[:, small] = known[:, :1] * lags[small] / h0  # random-walk extrapolation
        return np.maximum.accumulate(gamma, axis=1)
    long = resolved >= w / 4
    weights = c * long if long.any() else c
    sill = (known * weights).sum(axis=1) / weights.sum()
    return sill[:, None] * np.minimum(2.0 * lags / w, 1.0)[None, :]


def _variogram_per_node(stats: RoughnessStats) -> np.ndarray | None:
    """:func:`variogram` with per-node counts (N, w): each node from its own measured pairs
    (the same two branches, chosen once from the lags any node resolves); a node without a
    pair at some lag is interpolated over the lags it has, a node without any pair gets the
    mean variogram of the others."""
    counts = np.asarray(stats.counts, dtype=np.float64)
    resolved = np.flatnonzero((counts > 0).any(axis=0))
    if resolved.size == 0:
        return None
    n, w = stats.squares.shape
    c = counts[:, resolved]
    have = c > 0
    diff = stats.squares[:, resolved] - stats.noise[:, resolved]
    known = np.maximum(0.5 * np.divide(diff, c, out=np.zeros_like(diff), where=have), 0.0)
    lags = np.arange(w, dtype=np.float64)
    half = max(w // 2, 1)
    gamma = np.full((n, w), np.nan)
    if np.count_nonzero((resolved >= 1) & (resolved <= half)) >= half // 2:
        for i in range(n):
            ok = have[i]
            if not ok.any():
                continue
            r_i, k_i = resolved[ok].astype(np.float64), known[i, ok]
            gamma[i] = np.interp(lags, r_i, k_i)
            small = lags < r_i[0]
            gamma[i, small] = k_i[0] * lags[small] / r_i[0]  # random-walk extrapolation
    else:
        long = resolved >= w / 4
        weights = c * long if long.any() else c
        total = weights.sum(axis=1)
        sill = np.divide((known * weights).sum(axis=1), total, out=np.zeros(n), where=total > 0)
        gamma = sill[:, None] * np.minimum(2.0 * lags / w, 1.0)[None, :]
        gamma[total <= 0] = np.nan
    none = np.isnan(gamma).any(axis=1)
    if none.all():
        return None
    if none.any():
        gamma[none] = gamma[~none].mean(axis=0)
    return np.maximum.accumulate(gamma, axis=1)


def kriging_bias(gamma: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Mean squared interpolation error per node and step, (N, w), for weights ``m`` (w, w).

    ``m[t]`` are the interpolation weights of step t (rows sum to 1); the module's kriging
    identity with the variogram ``gamma`` (N, w).
    """
    # The identity is linear in γ: bias = γ @ K with K[h, t] = 2 Σ_j m[t,j]·[|t−j| = h] −
    # Σ_{i,j} m[t,i] m[t,j]·[|i−j| = h], one (w x w) kernel for every node. Per node the
    # direct form built an (N, w, w) lag matrix: 9 s per candidate k at 100,000 feeders,
    # against 0.1 s for the one matmul.
    m = np.ascontiguousarray(m, dtype=np.float64)
    return np.maximum(gamma @ _bias_kernel(m.shape, m.tobytes()), 0.0)


@lru_cache(maxsize=256)
def _bias_kernel(shape: tuple[int, int], data: bytes) -> np.ndarray:
    """K (w, w) of :func:`kriging_bias`: lag h x step t (cached by the weights: the planner
    asks for the same few operators every period; read-only)."""
    m = np.frombuffer(data, dtype=np.float64).reshape(shape)
    w = m.shape[0]
    lag = np.abs(np.arange(w)[:, None] - np.arange(w)[None, :])
    onehot = (lag[None, :, :] == np.arange(w)[:, None, None]).astype(np.float64)  # (h, i, j)
    first = 2.0 * np.einsum("tj,htj->ht", m, onehot)
    second = np.einsum("ti,hij,tj->ht", m, onehot, m, optimize=True)
    out = first - second
    out.setflags(write=False)
    return out
