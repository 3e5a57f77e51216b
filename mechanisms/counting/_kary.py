"""The k-ary tree with negative digits, pure ε ([APT24]).

[APT24] Andersson, Pagh, Torkamani (and Steiner), "Count on your elders: Laplace vs Gaussian
noise" / "Improved counting under continual observation with pure differential privacy",
arXiv 2408.07021 (FORC 2025): a k-ary tree (k odd) whose prefix sums use the balanced digits
d ∈ {−(k−1)/2, ..., (k−1)/2}, so at most (k−1)/2 nodes per level, added *or subtracted*.

Construction and its proof (our derivation)
-------------------------------------------
Blocks: level h = 0..L−1 holds the aligned blocks (j·kʰ, (j+1)·kʰ], j ≥ 0, of the stream padded
with public zeros after step n. Every t ≥ 1 has one balanced base-k representation
t = Σₕ dₕkʰ with |dₕ| ≤ (k−1)/2, and L = the smallest L with (kᴸ − 1)/2 ≥ n levels suffice.
Reading the digits from the top, with pos = 0: a digit d > 0 adds the d blocks
(pos, pos + d·kʰ] and moves pos forward; d < 0 subtracts the |d| blocks (pos − |d|kʰ, pos] and
moves pos back. As indicator functions this is exactly [1..t] (every move is an aligned block
of its level, since pos is a multiple of kʰ when level h is read). So with R the matrix of all
block sums and L_t the signed ±1 row of t's blocks, c(σ, t) = L_t R σ.

* **Sensitivity.** A step lies in exactly one block per level: R has L1 column norm L, and
  changing one value in [0, B] moves L block sums by at most B each: Δ₁ = L·B; every block gets
  Laplace noise of scale (L·B + γ)/ε (:class:`LaplaceNoise`, on the lattice γℤ).
* **Release = post-processing.** The mechanism's outputs are o = L(Rσ + η): the ε-DP release
  of all (padded) block sums, post-processed by the public ±1 matrix L. Online, o_t = L_t Rσ +
  L_t η = c(σ, t) + L_t η: the exact lattice prefix sum plus the signed sum of the noises of
  t's blocks, some of which end after t. Those blocks' data are never needed (only their
  noise, drawn in advance), so the output at t depends on σ(1..t) only, and the whole output
  sequence is exactly L(Rσ + η): the privacy is that of releasing Rσ + η, ε-DP (Laplace
  mechanism, Δ₁ = L·B). All values are integers of γ: exact in floating point.
* **Variance.** The blocks of one t are distinct, so Var(o_t) = (Σₕ |dₕ(t)|)·v exactly, with v
  the variance of one block's noise; with balanced digits the mean of |d| is (k² − 1)/(4k)
  per level (against (k − 1)/2 with ordinary digits).
* **k.** Chosen (public) among odd k ∈ [3, 21] to minimise the mean variance
  L_k²·mean_t Σₕ|dₕ(t)| (evaluated on at most 2¹⁶ evenly spaced steps).

Draw order: level h draws its block noises from its own child bit source
(``bits.spawn(L)``), in chunks of 2⁸ consecutive block indices, chunk after chunk; the batch
:func:`kary_tree_release` and the streaming :class:`KaryTreeCounter` (at most 3 chunks of
2⁸ noises per level) therefore release identical values with one seed.

Least squares (batch, ``least_squares=True``): the same noisy blocks, read as the ε-DP
release Rσ + η of every block of the complete forest over the first M = k^{L−1}·⌈n/k^{L−1}⌉
leaves (padding leaves are treated as unknown: unbiased, slightly short of the constrained
optimum), give the best linear unbiased estimate of every leaf by the two passes of [HRMS10]
§4 with k children (bottom-up inverse-variance, top-down equal split of the surplus); its
prefix sums have the exact variance of :func:`kary_least_squares_units`. Post-processing of
the same release: no extra privacy cost.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError
from ..core._noise import LaplaceNoise
from ..core._random import BitSource, bit_source
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, check_positive, check_stream

__all__ = [
    "KaryTreeCounter",
    "KaryTreeRelease",
    "kary_levels",
    "kary_noise",
    "kary_tree_release",
    "kary_least_squares_units",
    "kary_variance_units",
]

_PROOF = (
    "[APT24] k-ary tree with negative digits: all block sums have L1 sensitivity L·B (Laplace "
    "mechanism); the prefix sums are the ±1 post-processing L(Rσ + η)"
)
_CHUNK = 1 << 8
_KS = tuple(range(3, 22, 2))


def kary_levels(n: int, k: int) -> int:
    """L: the smallest L with (kᴸ − 1)/2 ≥ n (balanced digits reach every t ≤ n)."""
    levels = 1
    while (k**levels - 1) // 2 < n:
        levels += 1
    return levels


def _digits(t: np.ndarray, k: int, levels: int) -> np.ndarray:
    """Balanced base-k digits of t, shape (levels, len(t)), level 0 first."""
    r = np.array(t, dtype=np.int64)
    half = (k - 1) // 2
    out = np.empty((levels, r.size), dtype=np.int64)
    for h in range(levels):
        d = (r + half) % k - half
        out[h] = d
        r = (r - d) // k
    return out


def kary_variance_units(n: int, k: int) -> np.ndarray:
    """Σₕ |dₕ(t)| for t = 1..n: Var(o_t) / v."""
    return np.abs(_digits(np.arange(1, n + 1), k, kary_levels(n, k))).sum(axis=0).astype(float)


@functools.lru_cache(maxsize=64)
def best_fanout(n: int) -> int:
    """The odd k ∈ [3, 21] with the smallest mean variance L_k²·mean Σ|dₕ| (module notes)."""
    step = max(1, n // (1 << 16))
    t = np.arange(1, n + 1, step)
    best, best_k = math.inf, 3
    for k in _KS:
        levels = kary_levels(n, k)
        value = levels**2 * float(np.abs(_digits(t, k, levels)).sum(axis=0).mean())
        if value < best:
            best, best_k = value, k
    return best_k


def kary_noise(n: int, *, epsilon: float, bound: float, fanout: int) -> LaplaceNoise:
    """The noise of every block: Laplace, sensitivity L·B (module notes)."""
    levels = kary_levels(n, fanout)
    return LaplaceNoise(sensitivity=levels * bound, epsilon=epsilon, magnitude=n * bound)


def _block_count(n: int, k: int, h: int, levels: int) -> int:
    """Blocks of level h any t ≤ n can use: positions stay ≤ n + (kᴸ − 1)/2."""
    return (n + (k**levels - 1) // 2) // k**h + 2


@dataclass(frozen=True, slots=True, kw_only=True)
class KaryTreeRelease:
    """A k-ary (negative digits) release: prefix sums, their exact variances, the parameters."""

    prefix_sums: np.ndarray
    """Noisy c(σ, i) for i = 1..n (index i − 1): the signed cover sums (exact multiples of
    γ), or the least-squares estimate (``estimate``)."""
    estimate: str
    """``"cover"`` (online, the signed blocks of t) or ``"least_squares"`` (batch, BLUE)."""
    fanout: int
    """k (odd)."""
    levels: int
    """L."""
    noise: LaplaceNoise
    """The noise of every block (sensitivity L·B)."""
    epsilon: float
    """Privacy loss ε."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level ε-DP."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        self.prefix_sums.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of each prefix sum: (Σₕ |dₕ(t)|)·v for the cover sums, the
        least-squares formula of :func:`kary_least_squares_units` otherwise."""
        units = (
            kary_variance_units(self.n, self.fanout)
            if self.estimate == "cover"
            else kary_least_squares_units(self.n, self.fanout)
        )
        out = units * self.noise.variance
        out.setflags(write=False)
        return out


def _level_noise(noise: LaplaceNoise, bits: BitSource, count: int) -> np.ndarray:
    """Block noises of one level in lattice units (int64), chunk after chunk."""
    chunks = math.ceil(count / _CHUNK)
    g = noise.granularity
    return np.concatenate(
        [np.rint(noise.sample(_CHUNK, bits) / g).astype(np.int64) for _ in range(chunks)]
    )


def _kary_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    bits: BitSource,
    fanout: int | None = None,
    owner: str = "kary_tree_release",
    least_squares: bool = False,
) -> KaryTreeRelease:
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = vals.size
    k = best_fanout(n) if fanout is None else fanout
    levels = kary_levels(n, k)
    noise = kary_noise(n, epsilon=eps, bound=bnd, fanout=k)
    g = noise.granularity
    units = np.rint(vals / g)
    np.clip(units, 0, math.floor(bnd / g), out=units)
    out = np.cumsum(units.astype(np.int64))  # exact c(σ, t) in units of γ
    children = bits.spawn(levels)
    digits = _digits(np.arange(1, n + 1), k, levels)
    pos = np.zeros(n, dtype=np.int64)
    etas: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * levels
    for h in reversed(range(levels)):
        eta = _level_noise(noise, children[h], _block_count(n, k, h, levels))
        etas[h] = eta
        cum = np.concatenate([[0], np.cumsum(eta)])
        d = digits[h]
        j = pos // k**h
        lo = np.where(d >= 0, j, j + d)  # first block index of the move
        signed = np.sign(d) * (cum[lo + np.abs(d)] - cum[lo])
        out += signed
        pos += d * k**h
    if least_squares:
        prefix = _least_squares_prefix(units, etas, k, levels) * g
    else:
        prefix = out.astype(np.float64) * g
    return KaryTreeRelease(
        prefix_sums=prefix,
        estimate="least_squares" if least_squares else "cover",
        fanout=k,
        levels=levels,
        noise=noise,
        epsilon=eps,
        bound=bnd,
        guarantee=PrivacyGuarantee(unit=EventLevel(), budget=Budget(eps), proof=_PROOF),
    )


def _least_squares_prefix(
    units: np.ndarray, etas: list[np.ndarray], k: int, levels: int
) -> np.ndarray:
    """BLUE prefix sums (in units of γ) from all noisy blocks of the complete forest over the
    first M = k^{L−1}·⌈n/k^{L−1}⌉ leaves (module notes; [HRMS10] §4 for k children)."""
    n = units.size
    top = k ** (levels - 1)
    m = top * math.ceil(n / top)
    data = np.zeros(m)
    data[:n] = units
    ys, var = [], [1.0]
    for h in range(levels):
        if h:
            data = data.reshape(-1, k).sum(axis=1)
        ys.append(data + etas[h][: data.size])
    z = [ys[0]]
    for h in range(1, levels):  # bottom-up: inverse-variance weights
        var.append(1.0 / (1.0 + 1.0 / (k * var[h - 1])))
        kids = z[h - 1].reshape(-1, k).sum(axis=1)
        z.append(var[h] * ys[h] + var[h] / (k * var[h - 1]) * kids)
    est = z[levels - 1]
    for h in reversed(range(levels - 1)):  # top-down: share the parent's surplus equally
        kids = z[h].reshape(-1, k)
        est = (kids + ((est - kids.sum(axis=1)) / k)[:, None]).ravel()
    return np.cumsum(est)[:n]


def kary_least_squares_units(n: int, k: int) -> np.ndarray:
    """Var / v of the least-squares prefix sums, t = 1..n.

    The design stacks the block indicators of every level: AᵀA = Σₕ kʰEₕ with Eₕ the
    projection onto vectors constant on level-h blocks (all blocks complete up to M). With
    Dₘ = Eₘ − Eₘ₊₁ (E_L = 0), AᵀA = Σₘ Dₘ(k^{m+1} − 1)/(k − 1), so (AᵀA)⁻¹ = Σₘ cₘEₘ with
    c₀ = 1, cₘ = (k − 1)/(k^{m+1} − 1) − (k − 1)/(kᵐ − 1), and for p = 1_{[1..t]}:
    Var = v·Σₘ cₘ·[(t // kᵐ)·kᵐ + (t mod kᵐ)²/kᵐ].
    """
    levels = kary_levels(n, k)
    t = np.arange(1, n + 1, dtype=np.float64)
    out = t.copy()  # m = 0
    for m in range(1, levels):
        size = float(k**m)
        c = (k - 1) / (k ** (m + 1) - 1) - (k - 1) / (k**m - 1)
        out += c * (np.floor(t / size) * size + np.mod(t, size) ** 2 / size)
    return out


def kary_tree_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    fanout: int | None = None,
    seed: object = None,
) -> KaryTreeRelease:
    """Release every prefix sum with the k-ary tree with negative digits ([APT24]).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``].
    epsilon
        Privacy loss ε > 0.
    bound
        Public bound B.
    fanout
        Odd k ≥ 3, or None for the best k (module notes; public).
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    *Privacy*: event-level ε-DP: the release is a ±1 post-processing of all block sums with
    Laplace noise of L1 sensitivity L·B (module notes).

    Examples
    --------
    >>> rel = kary_tree_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, bound=2.0, fanout=3, seed=7)
    >>> rel.levels, (rel.variance / rel.noise.variance).tolist()
    (2, [1.0, 2.0, 1.0, 2.0])
    """
    owner = "kary_tree_release"
    if fanout is not None:
        fanout = check_integer(fanout, "fanout", owner, minimum=3)
        if fanout % 2 == 0:
            from ..core._errors import ParameterError

            raise ParameterError(
                f"The 'fanout' parameter of {owner} must be an odd integer >= 3 (balanced "
                f"digits). Got {fanout!r} instead."
            )
    return _kary_release(values, epsilon=epsilon, bound=bound, bits=bit_source(seed), fanout=fanout)


class KaryTreeCounter:
    """Streaming k-ary (negative digits) counter: ``push`` a value, get c(σ, t).

    State: the exact prefix sum and, per level, the noise chunks in use (at most 3 of 2⁸).
    Same draws and integer arithmetic as :func:`kary_tree_release` (identical with one seed).

    Examples
    --------
    >>> counter = KaryTreeCounter(4, epsilon=1.0, bound=2.0, fanout=3, seed=7)
    >>> out = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> ref = kary_tree_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, bound=2.0, fanout=3, seed=7)
    >>> out == ref.prefix_sums.tolist()
    True
    """

    def __init__(
        self,
        n: int,
        *,
        epsilon: float,
        bound: float,
        fanout: int | None = None,
        seed: object = None,
    ) -> None:
        owner = "KaryTreeCounter"
        self.n = check_integer(n, "n", owner)
        self.epsilon = check_positive(epsilon, "epsilon", owner)
        self.bound = check_positive(bound, "bound", owner)
        self.fanout = (
            best_fanout(self.n)
            if fanout is None
            else check_integer(fanout, "fanout", owner, minimum=3)
        )
        self.levels = kary_levels(self.n, self.fanout)
        self.noise = kary_noise(self.n, epsilon=self.epsilon, bound=self.bound, fanout=self.fanout)
        self.guarantee = PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(self.epsilon), proof=_PROOF
        )
        self.steps = 0
        self._children = bit_source(seed).spawn(self.levels)
        self._g = self.noise.granularity
        self._top = math.floor(self.bound / self._g)
        self._s = 0
        self._chunks: list[dict[int, list[int]]] = [{} for _ in range(self.levels)]
        self._drawn = [0] * self.levels

    def _eta(self, h: int, j: int) -> int:
        c = j // _CHUNK
        chunks = self._chunks[h]
        while self._drawn[h] <= c:
            draw = np.rint(self.noise.sample(_CHUNK, self._children[h]) / self._g)
            chunks[self._drawn[h]] = draw.astype(np.int64).tolist()
            self._drawn[h] += 1
            for old in [key for key in chunks if key < self._drawn[h] - 3]:
                del chunks[old]  # positions only move forward by less than a chunk
        return chunks[c][j % _CHUNK]

    def push(self, x: float) -> float:
        """Add the next value (in [0, B]) and return the noisy prefix sum c(σ, t)."""
        kind = type(x)
        if kind is not float and (kind is bool or not isinstance(x, Real)):
            raise DomainError(
                "The 'x' argument of KaryTreeCounter.push must be a finite real number."
            )
        xf = float(x)
        if not 0.0 <= xf <= self.bound:
            raise DomainError(
                "The 'x' argument of KaryTreeCounter.push must be finite and lie in "
                f"[0, {self.bound:g}] (the declared bound). Clip the value or declare a "
                "larger bound."
            )
        if self.steps >= self.n:
            raise DomainError(
                f"KaryTreeCounter was built for n={self.n} values and all have been pushed. "
                "Build a new counter (with a new budget) for a longer stream."
            )
        self.steps += 1
        t = self.steps
        self._s += min(max(round(xf / self._g), 0), self._top)
        k, half = self.fanout, (self.fanout - 1) // 2
        digits = []
        r = t
        for _ in range(self.levels):
            d = (r + half) % k - half
            digits.append(d)
            r = (r - d) // k
        out = self._s
        pos = 0
        for h in reversed(range(self.levels)):
            d = digits[h]
            if d:
                size = k**h
                j = pos // size
                lo = j if d > 0 else j + d
                total = sum(self._eta(h, b) for b in range(lo, lo + abs(d)))
                out += total if d > 0 else -total
                pos += d * size
        return float(out) * self._g

    def variance(self, i: int | None = None) -> float:
        """Exact noise variance of c(σ, i) (default: the current step)."""
        i = (
            self.steps
            if i is None
            else check_integer(i, "i", "KaryTreeCounter.variance", maximum=self.n)
        )
        if i == 0:
            return 0.0
        return float(np.abs(_digits(np.array([i]), self.fanout, self.levels)).sum()) * (
            self.noise.variance
        )
