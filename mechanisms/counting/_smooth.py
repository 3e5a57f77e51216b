"""The smooth binary mechanism with discrete Gaussian noise at a target (ε, δ) ([AP23]).

[AP23] Andersson and Pagh, "A smooth binary mechanism for efficient private continual
observation", NeurIPS 2023; [CKS20] Canonne, Kamath, Steinke, "The discrete Gaussian for
differential privacy", NeurIPS 2020, Thm. 4; [BS16] Bun and Steinke, "Concentrated differential
privacy", TCC 2016, Prop. 1.3 and Lemma 2.3; [BW18] Balle and Wang, "Improving the Gaussian
mechanism for differential privacy", ICML 2018, Thm. 8.

Construction (our derivation, in the BT conventions of :mod:`._tree`)
--------------------------------------------------------------------
A binary tree over the leaves q = 1..2ᴴ − 1: node (h, j) covers the leaves ((j − 1)·2ʰ, j·2ʰ],
and the prefix [1..q] is the disjoint union of the nodes (h, q >> h) over the set bits h of q
(as in the BT: popcount(q) nodes, all ending at or before q). Step t of the stream is put on
the leaf p_t, the t-th smallest integer in [1, 2ᴴ) with **exactly k bits set**; every other
leaf holds 0 (public). Then every released prefix c(σ, t) is the sum of exactly k noisy nodes
(the "smooth" property of [AP23]: the same error at every step), and the true part of that sum
is exactly c(σ, t) because the other leaves are zero.

* **Choice of (H, k).** ρ-zCDP noise must cover the L2 sensitivity, and every leaf lies in one
  node per level h = 0..H − 1: Δ₂ = B·√H (node sums are exact integers of the lattice γ, so a
  change of one value in [0, B] moves H node sums by at most B each). Each prefix sums k
  independent node noises of variance σ² = Δ₂²/(2ρ), so **Var(c(σ, t)) = k·H·B²/(2ρ) for
  every t**. We take the (H, k) minimising k·H subject to C(H, k) ≥ n (enough leaves with k
  bits), H ≤ 62. [AP23] take k = ⌈H/2⌉; the minimum of k·H is never worse. For n = 10⁶ it is
  (H, k) = (28, 7): k·H = 196 against ⌊log₂ n⌋ + 1 = 20 levels × 19 nodes = 380 for the
  largest BT prefix with Gaussian noise.
* **Node sums.** Node (h, j) used at step t (bit h of p_t set, j = p_t >> h) ends at
  e = j·2ʰ ≤ p_t, so it is complete; its true sum is S(rank(e)) − S(rank(e − 2ʰ)) with
  S the exact lattice prefix sums of the real steps and rank(q) = #{t' : p_{t'} ≤ q}. The
  start e − 2ʰ = p_t with its bits ≤ h cleared is the end of the node of the next set bit
  above h (or 0), so streaming keeps one value per level: E[h] = S(rank(end of the current
  node of level h)), recorded when the node first appears (rank is t if p_t = e, else t − 1).
* **Noise and draw order.** A node is *new* at step t if bit h of p_t is set and p_{t−1} >> h
  differs (the steps using node (h, j) are contiguous). Each new node gets one discrete
  Gaussian draw on γℤ ([CKS20]); draws are made per block of 2¹⁶ steps, in the order (step,
  level ascending), by both the batch :func:`smooth_binary_release` and the streaming
  :class:`SmoothBinaryCounter`, which therefore release identical values with one seed.
  Memory when streaming: O(H) values plus the block's buffers.

Privacy: the vector of all node sums has L2 sensitivity B·√H on the lattice (above; σ is set
for B√H + γ, a conservative slack). Independent Gaussian noise of one σ on a vector query of L2
sensitivity Δ₂ is (ε, δ)-DP exactly when Φ(Δ₂/(2σ) − εσ/Δ₂) − e^ε Φ(−Δ₂/(2σ) − εσ/Δ₂) ≤ δ
([BW18] Thm. 8; rotation invariance reduces the vector to one coordinate along the shift), and
σ is the smallest such (issue 27: the zCDP route of [BS16] Prop. 1.3 needed σ²/Δ₂² = 28.6 at
(1, 10⁻⁶), the analytic curve 17.8). The noise drawn is the discrete Gaussian on γℤ with
σ/γ ≥ 2²⁴: on a lattice shift its privacy loss matches the continuous one up to a relative
exp(−2π²σ²/γ²) (Poisson summation; as documented for :meth:`GaussianNoise.for_mechanism`).
The noise also gives ρ-zCDP with ρ = Δ₂²/(2σ²) ([CKS20] Thm. 4), kept in ``rho`` for zCDP
composition. Prefix sums are post-processing. Every released value is an exact integer
multiple of γ (no floating-point leak).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._noise import GaussianNoise, _analytic_gaussian_factor, lattice_granularity
from ..core._random import BitSource, bit_source
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, check_positive, check_probability, check_stream

__all__ = [
    "SmoothBinaryCounter",
    "SmoothBinaryRelease",
    "smooth_binary_noise",
    "smooth_binary_release",
    "smooth_binary_shape",
    "zcdp_rho",
    "zcdp_to_epsilon",
]

_PROOF = (
    "[AP23] smooth binary mechanism: node sums with L2 sensitivity B·√H; discrete Gaussian "
    "noise calibrated by the analytic Gaussian mechanism ([BW18] Thm. 8) at (ε, δ)"
)
#: Steps per block of noise draws (shared by the batch and the streaming paths).
_BLOCK = 1 << 16
_MAX_H = 62


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ whose conversion ρ + 2√(ρ ln 1/δ) ([BS16] Prop. 1.3) is at most ε."""
    ln = math.log(1.0 / delta)
    root = math.sqrt(ln + epsilon) - math.sqrt(ln)
    rho = root * root
    while zcdp_to_epsilon(rho, delta) > epsilon:  # floating point: stay on the safe side
        rho *= 1.0 - 1e-12
    return rho


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """ε = ρ + 2√(ρ ln(1/δ)) of a ρ-zCDP mechanism at δ ([BS16] Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def smooth_binary_shape(n: int) -> tuple[int, int]:
    """(H, k) minimising k·H subject to C(H, k) ≥ n (ties: the smaller H); module notes."""
    n = check_integer(n, "n", "smooth_binary_shape")
    best = None
    for h in range(1, _MAX_H + 1):
        for k in range(1, h + 1):
            if math.comb(h, k) >= n:
                if best is None or k * h < best[0] * best[1]:
                    best = (k, h)
                break  # larger k only costs more at this H
    if best is None:  # pragma: no cover - n < 2⁶² always fits
        raise ParameterError(f"The 'n' parameter of smooth_binary_shape is too large. Got {n}.")
    k, h = best
    return h, k


def _binomials(h: int) -> np.ndarray:
    table = np.zeros((h + 1, h + 1), dtype=np.int64)
    for a in range(h + 1):
        for b in range(a + 1):
            table[a, b] = math.comb(a, b)
    return table


def leaves(ranks: np.ndarray, h: int, k: int) -> np.ndarray:
    """p for each 0-based rank r: the (r + 1)-th smallest integer in [1, 2ᴴ) with k bits set
    (combinatorial unranking, vectorised: at bit b, C(b, k') numbers leave it unset)."""
    table = _binomials(h)
    r = np.array(ranks, dtype=np.int64)
    left = np.full(r.shape, k, dtype=np.int64)
    out = np.zeros(r.shape, dtype=np.int64)
    for b in reversed(range(h)):
        below = table[b, np.minimum(left, b)] * (left <= b)  # C(b, k'), 0 when k' > b
        take = (r >= below) & (left > 0)
        out |= take.astype(np.int64) << b
        r -= np.where(take, below, 0)
        left -= take
    return out


def smooth_binary_noise(
    n: int, *, epsilon: float, delta: float, bound: float
) -> tuple[GaussianNoise, float, float, int, int]:
    """(noise of every node, L2 sensitivity used, ρ, H, k) for streams of length ``n``."""
    owner = "smooth_binary_noise"
    n = check_integer(n, "n", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    h, k = smooth_binary_shape(n)
    sens = bnd * math.sqrt(h)
    factor = _analytic_gaussian_factor(eps, dlt)  # σ/Δ₂ of the analytic Gaussian [BW18 Alg. 1]
    gamma = lattice_granularity(sens * factor, n * bnd)
    sigma = (sens + gamma) * factor  # Δ₂ + γ: conservative lattice slack
    noise = GaussianNoise(sigma=sigma, magnitude=n * bnd + 64.0 * k * sigma, granularity=gamma)
    rho = (sens + gamma) ** 2 / (2.0 * sigma * sigma)  # the zCDP it also gives ([CKS20] Thm. 4)
    return noise, sens + gamma, rho, h, k


def _block_events(p: np.ndarray, prev: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """New nodes of a block of leaves ``p`` (``prev`` = the leaf before the block, 0 at the
    start): (step offsets, levels), in the draw order (step, level ascending)."""
    before = np.concatenate([[prev], p[:-1]])
    steps, levels = [], []
    for lev in range(h):
        new = ((p >> lev) & 1).astype(bool) & ((p >> lev) != (before >> lev))
        idx = np.flatnonzero(new)
        steps.append(idx)
        levels.append(np.full(idx.size, lev, dtype=np.int64))
    s, lv = np.concatenate(steps), np.concatenate(levels)
    order = np.lexsort((lv, s))
    return s[order], lv[order]


@dataclass(frozen=True, slots=True, kw_only=True)
class SmoothBinaryRelease:
    """A smooth-binary release: prefix sums, their (constant) variance, the noisy nodes."""

    prefix_sums: np.ndarray
    """Noisy c(σ, i) for i = 1..n (index i − 1), exact multiples of γ."""
    node_levels: np.ndarray
    """Level h of every released node, in draw order."""
    node_ends: np.ndarray
    """Index j of every released node (it covers the leaves ((j − 1)·2ʰ, j·2ʰ])."""
    node_values: np.ndarray
    """Noisy sum of every released node."""
    leaves: np.ndarray
    """p_t: the leaf of step t (index t − 1)."""
    noise: GaussianNoise
    """The noise of every node (σ = its standard deviation)."""
    sensitivity: float
    """L2 sensitivity B√H + γ of the node vector used for σ."""
    height: int
    """H: leaves 1..2ᴴ − 1."""
    bits: int
    """k: every leaf used has k bits set, every prefix sums k nodes."""
    rho: float
    """ρ = Δ₂²/(2σ²): the ρ-zCDP the noise also gives ([CKS20] Thm. 4), for zCDP composition."""
    epsilon: float
    """ε of the (ε, δ) guarantee."""
    delta: float
    """δ of the guarantee."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level (ε, δ) (analytic Gaussian calibration)."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        for arr in (self.prefix_sums, self.node_levels, self.node_ends, self.node_values):
            arr.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of every prefix sum: k·σ² (the same at every step)."""
        out = np.full(self.n, self.bits * self.noise.variance)
        out.setflags(write=False)
        return out


def _guarantee(epsilon: float, delta: float, rho: float, h: int, k: int) -> PrivacyGuarantee:
    """Event-level (ε, δ) of the analytic calibration; the proof names ρ, H and k."""
    return PrivacyGuarantee(
        unit=EventLevel(),
        budget=Budget(epsilon, delta),
        proof=f"{_PROOF}; rho={rho:.6g}, H={h}, k={k}",
    )


def _check_common(epsilon, delta, bound, owner) -> tuple[float, float, float]:
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    return eps, dlt, bnd


def _smooth_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    bits: BitSource,
    owner: str = "smooth_binary_release",
) -> SmoothBinaryRelease:
    """Validate everything, then release with noise from ``bits`` (module notes)."""
    eps, dlt, bnd = _check_common(epsilon, delta, bound, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = vals.size
    noise, sens, rho, h, k = smooth_binary_noise(n, epsilon=eps, delta=dlt, bound=bnd)
    g = noise.granularity
    units = np.multiply(vals, 1.0 / g)  # exact: γ is a power of two
    np.rint(units, out=units)
    np.clip(units, 0, math.floor(bnd / g), out=units)
    s = np.concatenate([[0.0], np.cumsum(units)])  # exact integers below 2⁵⁰
    p = leaves(np.arange(n), h, k)
    ev_steps, ev_levels, draws = [], [], []
    for a in range(0, n, _BLOCK):
        b = min(a + _BLOCK, n)
        st, lv = _block_events(p[a:b], int(p[a - 1]) if a else 0, h)
        ev_steps.append(st + a)
        ev_levels.append(lv)
        draws.append(noise.sample(st.size, bits) * (1.0 / g))
    steps = np.concatenate(ev_steps)  # 0-based step t − 1 at which each node appears
    levels = np.concatenate(ev_levels)
    noise_units = np.concatenate(draws)
    ends_j = p[steps] >> levels
    end = ends_j << levels
    start = end - (np.int64(1) << levels)
    rank_end = np.searchsorted(p, end, side="right")
    rank_start = np.searchsorted(p, start, side="right")
    node_units = s[rank_end] - s[rank_start] + noise_units  # exact integers
    prefix = np.zeros(n, dtype=np.float64)
    before = np.concatenate([[0], p[:-1]])
    for lev in range(h):
        values_lev = node_units[levels == lev]  # in order of appearance (step ascending)
        if values_lev.size == 0:
            continue
        shifted = p >> lev
        active = (shifted & 1).astype(bool)
        new = active & (shifted != (before >> lev))
        # the node of level `lev` in use at step t: the last one that appeared at or before t
        which = np.cumsum(new) - 1
        prefix[active] += values_lev[which[active]]
    prefix *= g
    return SmoothBinaryRelease(
        prefix_sums=prefix,
        node_levels=levels,
        node_ends=ends_j,
        node_values=node_units * g,
        leaves=p,
        noise=noise,
        sensitivity=sens,
        height=h,
        bits=k,
        rho=rho,
        epsilon=eps,
        delta=dlt,
        bound=bnd,
        guarantee=_guarantee(eps, dlt, rho, h, k),
    )


def smooth_binary_release(
    values: object, *, epsilon: float, delta: float, bound: float, seed: object = None
) -> SmoothBinaryRelease:
    """Release every prefix sum with the smooth binary mechanism ([AP23]; module notes).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``].
    epsilon, delta
        Target (ε, δ), δ ∈ (0, 1), met by the analytic Gaussian calibration ([BW18]).
    bound
        Public bound B.
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    Every prefix sums exactly k noisy nodes: Var = k·σ², σ = u(ε, δ)·(B√H + γ) with u the
    analytic Gaussian factor (module notes).
    *Privacy*: event-level (ε, δ)-DP ([BW18] Thm. 8 on the node vector; [CKS20]).

    Examples
    --------
    >>> rel = smooth_binary_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0,
    ...                             seed=7)
    >>> rel.height, rel.bits, bool(np.all(rel.variance == rel.variance[0]))
    (4, 1, True)
    """
    return _smooth_release(values, epsilon=epsilon, delta=delta, bound=bound, bits=bit_source(seed))


class SmoothBinaryCounter:
    """Streaming smooth binary counter: ``push`` one value, get c(σ, t); O(H) state.

    Same blocks of draws and the same integer arithmetic as :func:`smooth_binary_release`, so
    one seed gives identical outputs.

    Examples
    --------
    >>> counter = SmoothBinaryCounter(4, epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> out = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> ref = smooth_binary_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0,
    ...                             seed=7)
    >>> out == ref.prefix_sums.tolist()
    True
    """

    def __init__(
        self, n: int, *, epsilon: float, delta: float, bound: float, seed: object = None
    ) -> None:
        owner = "SmoothBinaryCounter"
        self.n = check_integer(n, "n", owner)
        self.epsilon, self.delta, self.bound = _check_common(epsilon, delta, bound, owner)
        self.noise, self.sensitivity, self.rho, self.height, self.bits = smooth_binary_noise(
            self.n, epsilon=self.epsilon, delta=self.delta, bound=self.bound
        )
        self.guarantee = _guarantee(self.epsilon, self.delta, self.rho, self.height, self.bits)
        self.steps = 0
        self._bits = bit_source(seed)
        self._g = self.noise.granularity
        self._top = math.floor(self.bound / self._g)
        self._s = 0.0  # exact lattice units of c(σ, t)
        self._s_prev = 0.0
        self._end_sum = [0.0] * self.height  # E[h]: S at the end of the current node
        self._node = [0.0] * self.height  # noisy units of the current node per level
        self._prev_leaf = 0
        self._p: list[int] = []
        self._draws: list[float] = []
        self._new: list[list[int]] = []

    def _next_block(self, a: int) -> None:
        b = min(a + _BLOCK, self.n)
        p = leaves(np.arange(a, b), self.height, self.bits)
        st, lv = _block_events(p, self._prev_leaf, self.height)
        self._draws = (self.noise.sample(st.size, self._bits) * (1.0 / self._g)).tolist()
        self._p = p.tolist()
        self._new = [[] for _ in range(b - a)]
        for pos, (i, lev) in enumerate(zip(st.tolist(), lv.tolist(), strict=True)):
            self._new[i].append((lev, pos))

    def push(self, x: float) -> float:
        """Add the next value (in [0, B]) and return the noisy prefix sum c(σ, t)."""
        kind = type(x)
        if kind is not float and (kind is bool or not isinstance(x, Real)):
            raise DomainError(
                "The 'x' argument of SmoothBinaryCounter.push must be a finite real number."
            )
        xf = float(x)
        if not 0.0 <= xf <= self.bound:
            raise DomainError(
                "The 'x' argument of SmoothBinaryCounter.push must be finite and lie in "
                f"[0, {self.bound:g}] (the declared bound). Clip the value or declare a larger "
                "bound."
            )
        i = self.steps
        if i >= self.n:
            raise DomainError(
                f"SmoothBinaryCounter was built for n={self.n} values and all have been "
                "pushed. Build a new counter (with a new budget) for a longer stream."
            )
        if i % _BLOCK == 0:
            self._next_block(i)
        r = i % _BLOCK
        p = self._p[r]
        self._s_prev = self._s
        self._s += min(max(round(xf / self._g), 0), self._top)
        for lev, _pos in self._new[r]:  # ascending levels
            end = (p >> lev) << lev
            self._end_sum[lev] = self._s if end == p else self._s_prev
        total = 0.0
        above = 0.0  # E of the next set bit above (0 at the top)
        for lev in reversed(range(self.height)):
            if (p >> lev) & 1:
                above_now = self._end_sum[lev]
                for lv, pos in self._new[r]:
                    if lv == lev:
                        self._node[lev] = above_now - above + self._draws[pos]
                total += self._node[lev]
                above = above_now
        self._prev_leaf = p
        self.steps = i + 1
        return total * self._g

    def variance(self, i: int | None = None) -> float:
        """Exact noise variance of c(σ, i): k·σ² at every step ≥ 1."""
        i = (
            self.steps
            if i is None
            else check_integer(i, "i", "SmoothBinaryCounter.variance", maximum=self.n)
        )
        return self.bits * self.noise.variance if i else 0.0
