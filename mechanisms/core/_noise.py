"""The one module every release draws its noise from: lattice-valued Laplace and Gaussian.

Floating-point safety
---------------------
Textbook Laplace noise in floating point leaks (Mironov, CCS 2012): the set of doubles that
``x + Lap(b)`` can produce depends on ``x``, so an output can rule out a neighbour outright.
Here every release lives on a lattice γℤ with γ a power of two fixed by *public* quantities
only (the noise scale and a public bound on the magnitude of the values):

1. the true value is rounded to the nearest lattice point, ``round(x/γ)·γ``; this moves it by at
   most γ/2, so the rounded query has sensitivity at most Δ + γ, and the scale is computed from
   Δ + γ (the rounding is *accounted in the sensitivity*);
2. an integer K is drawn from the discrete Laplace (or discrete Gaussian) distribution and the
   output is ``(round(x/γ) + K)·γ``, an exact double because γ is a power of two and the
   integer stays below 2⁵².

Outputs on neighbouring inputs therefore share one support (γℤ) and their probabilities differ
by at most exp(ε): the discrete Laplace ratio for a shift of at most (Δ + γ)/γ lattice steps is
exp((Δ + γ)/scale) = exp(ε).

The discrete Laplace integer is the difference of two geometric variables (exact identity),
each drawn by inverting its CDF from the 53-bit uniform in the top bits of one 64-bit word of
the secure source. The discrete
Gaussian uses the rejection sampler of Canonne, Kamath and Steinke (NeurIPS 2020, Algorithm 3)
on top of the same discrete Laplace. Acceptance tests and inversions use double precision;
the total variation this costs per draw is bounded in ``docs/privacy.md`` (Laplace ≤ 3.3·10⁻¹³,
Gaussian ≤ 8.9·10⁻¹³), a deviation we document rather than hide.

Why not a library: numpy's samplers are float-valued (the attack above) and seeded from a
non-cryptographic generator; OpenDP's exact samplers are scalar Python/Rust calls, orders of
magnitude too slow for 10⁷ draws. This module is vectorised over numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ._errors import ParameterError
from ._random import _TWO_POW_MINUS_53, BitSource
from ._validation import check_positive

__all__ = [
    "GaussianNoise",
    "LaplaceNoise",
    "discrete_gaussian",
    "discrete_laplace",
    "lattice_granularity",
    "snap_to_lattice",
]

#: The lattice is at least 2**LATTICE_BITS times finer than the noise scale.
LATTICE_BITS = 24
#: Integers on the lattice stay below 2**_MAX_LATTICE_BITS so that k·γ is an exact double.
_MAX_LATTICE_BITS = 50
#: Words processed per pass of the vectorised samplers (fits in a core's L2 cache).
_CHUNK = 1 << 15


def lattice_granularity(scale: float, magnitude: float = 0.0) -> float:
    """Return the power of two γ used as the release lattice.

    γ = 2^(⌊log2 scale⌋ − 24), raised if needed so that ``magnitude / γ < 2⁵⁰`` (every lattice
    point a release can reach is then an exact double). Both arguments must be public.
    """
    scale = check_positive(scale, "scale", "lattice_granularity")
    magnitude = check_positive(magnitude, "magnitude", "lattice_granularity", allow_zero=True)
    exponent = math.floor(math.log2(scale)) - LATTICE_BITS
    if magnitude > 0:
        exponent = max(exponent, math.ceil(math.log2(magnitude)) - _MAX_LATTICE_BITS)
    return math.ldexp(1.0, exponent)


def _check_power_of_two(value: object, owner: str) -> float:
    gamma = check_positive(value, "granularity", owner)
    mantissa, _ = math.frexp(gamma)
    if mantissa != 0.5:
        raise ParameterError(
            f"The 'granularity' parameter of {owner} must be a power of two. Got {value!r} "
            "instead. Use lattice_granularity() to derive one."
        )
    return gamma


def snap_to_lattice(values: np.ndarray, granularity: float) -> np.ndarray:
    """Round ``values`` to the nearest multiple of ``granularity`` (ties to even)."""
    return np.rint(np.asarray(values, dtype=np.float64) / granularity) * granularity


def _geometric_into(words: np.ndarray, t: float, out: np.ndarray) -> np.ndarray:
    """G = ⌊−t·ln U⌋ into ``out``, U = (⌊w/2¹¹⌋ + ½)·2⁻⁵³ the 53-bit uniform of each word's top
    bits (as :func:`~mechanisms.core._random.uniform_open`): P(G ≥ g) = q^g, q = exp(−1/t), by
    CDF inversion. The words are consumed in place."""
    np.right_shift(words, np.uint64(11), out=words)
    # k + ½ for the 53-bit integer k: exact below 2⁵², rounded to even above (U's grid is then
    # 2⁻⁵² on [½, 1], and U = 1 for the last k: G = 0); test_sampler_gap.py measures the real
    # map. Read as int64: the same values, converted to float64 about 1.5x faster than uint64.
    np.add(words.view(np.int64), 0.5, out=out)
    out *= _TWO_POW_MINUS_53  # exact: a power of two
    np.log(out, out=out)
    out *= -t
    np.floor(out, out=out)
    return out


def _geometric(bits: BitSource, size: int, t: float) -> np.ndarray:
    """``size`` geometric integers with P(G = k) = (1 − q) q^k, q = exp(−1/t) (one word each)."""
    size = int(size)
    return _geometric_into(bits.random_raw(size), t, np.empty(size, dtype=np.float64))


def _laplace_chunks(
    raw: np.ndarray, size: int, t: float, gauss: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """K = G₁ − G₂ for ``size`` draws from ``raw`` (G₁ from words [0, size), G₂ from
    [size, 2·size)), and, with ``gauss = (μ, c)``, the Bernoulli acceptance of the discrete
    Gaussian: keep K when the uniform of word 2·size + i is below exp(c·(|K| − μ)²).

    Hand-fused in cache-sized chunks: the dozen numpy passes over 2¹⁵ words stay in a core's
    cache instead of streaming whole arrays through memory once per pass (about 2x faster for
    10⁷ draws). The arithmetic is that of two :func:`_geometric` calls, value for value.
    """
    out = np.empty(size, dtype=np.float64)
    keep = None if gauss is None else np.empty(size, dtype=bool)
    chunk = min(size, _CHUNK)
    second = np.empty(chunk, dtype=np.float64)
    for i in range(0, size, chunk):
        m = min(chunk, size - i)
        k = _geometric_into(raw[i : i + m], t, out[i : i + m])
        k -= _geometric_into(raw[size + i : size + i + m], t, second[:m])
        if gauss is not None:
            mu, c = gauss
            x = np.abs(k, out=second[:m])
            x -= mu
            x *= x
            x *= c
            np.exp(x, out=x)
            u = raw[2 * size + i : 2 * size + i + m]
            np.right_shift(u, np.uint64(11), out=u)
            uf = np.add(u, 0.5)
            uf *= _TWO_POW_MINUS_53
            np.less(uf, x, out=keep[i : i + m])  # type: ignore[index]
    return out, keep


def discrete_laplace(bits: BitSource, size: int, t: float) -> np.ndarray:
    """Integers K with P(K = k) ∝ exp(−|k| / t), as float64 (exact integers below 2⁵³).

    The difference of two i.i.d. geometric variables with ratio exp(−1/t) is discrete Laplace
    with the same ratio (Inusah and Kozubowski 2006, Prop. 2.1). Two words per draw: G₁ from
    the first ``size`` words, G₂ from the next ``size`` (the exactness analysis of
    ``docs/privacy.md`` is for this construction: the two geometrics' rounding errors average
    out in the difference).
    """
    size = int(size)
    out, _ = _laplace_chunks(bits.random_raw(2 * size), size, t)
    return out


#: Bits of the acceptance uniform's prefix, taken from the low bits of the two proposal words.
_PREFIX_BITS = 22
_LOW_MASK = np.uint64((1 << (_PREFIX_BITS // 2)) - 1)
#: Candidates per pass of the Gaussian sampler (two words each: 512 KiB of words per pass).
_GAUSS_CHUNK = 1 << 15
#: Lower bounds on CKS Alg. 3's acceptance rate with t = ⌊σ⌋ + 1, for σ < 4 and σ >= 4 (about
#: 0.54 at σ = 1, tending to e^{−1/2}·√(π/2) = 0.760): they size the last pass.
_RATE_SMALL, _RATE_LARGE = 0.5, 0.74


def _acceptance_prefix(w1: np.ndarray, w2: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The acceptance uniform's first 22 bits, b = (w₁ mod 2¹¹)·2¹¹ + (w₂ mod 2¹¹), as float64
    into ``out``: the low bits of the proposal's two words, which the geometric inversion
    (top 53 bits only) never reads, so b is uniform and independent of the proposal."""
    lo = np.bitwise_and(w1, _LOW_MASK)
    lo <<= np.uint64(_PREFIX_BITS // 2)
    lo |= np.bitwise_and(w2, _LOW_MASK)
    out[...] = lo.view(np.int64)  # exact: below 2²²
    return out


def _acceptance_scaled(k: np.ndarray, mu: float, c: float, out: np.ndarray) -> np.ndarray:
    """P = p̂·2²² into ``out``, p̂ = exp(c·(|k| − μ)²) the float acceptance probability of
    [CKS20] Alg. 3 (c = −1/(2σ²), μ = σ²/t); the ×2²² is exact (a power of two)."""
    x = np.abs(k, out=out)
    x -= mu
    x *= x
    x *= c
    np.exp(x, out=x)  # p̂, in (0, 1]
    x *= float(1 << _PREFIX_BITS)
    return x


def _gaussian_accept(
    b: np.ndarray, k: np.ndarray, mu: float, c: float, bits: BitSource, work: np.ndarray
) -> np.ndarray:
    """CKS Alg. 3's Bernoulli(exp(−(|k| − μ)²/(2σ²))) test for each proposal k, as a mask.

    The acceptance uniform V is compared lazily with p̂ = exp(c·(|k| − μ)²) (c = −1/(2σ²)):
    its first 22 bits are ``b`` (:func:`_acceptance_prefix`); with P = p̂·2²², V < p̂ is
    decided by b < ⌊P⌋ (accept) or b > ⌊P⌋ (reject), and only on a tie (probability 2⁻²² per
    candidate) by a fresh word's top 53 bits against P − ⌊P⌋. The test is then exact for the
    float p̂ up to 2⁻⁷⁵ (docs/privacy.md) and costs no word beyond the proposal's two.
    ``work`` (same size as ``k``) receives P.
    """
    x = _acceptance_scaled(k, mu, c, work)
    whole = np.floor(x)
    keep = b < whole
    tie = np.flatnonzero(b == whole)
    if tie.size:  # rare: V's next 53 bits from one fresh word per tie, in order
        frac = x[tie] - whole[tie]  # exact (Sterbenz, or ⌊P⌋ = 0)
        j = bits.random_raw(tie.size) >> np.uint64(11)
        # j < frac·2⁵³ compares integers below 2⁵³ with an exact product: P(accept | tie) =
        # ⌈frac·2⁵³⌉/2⁵³, no rounding (unlike (j + ½)·2⁻⁵³, which rounds to even above 2⁵²)
        keep[tie] = j.view(np.int64) < frac * 2.0**53
    return keep


def discrete_gaussian(bits: BitSource, size: int, sigma: float) -> np.ndarray:
    """Integers K with P(K = k) ∝ exp(−k² / (2σ²)), as float64.

    Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (2020),
    Algorithm 3: draw Y from the discrete Laplace with t = ⌊σ⌋ + 1 and accept it with
    probability exp(−(|Y| − σ²/t)² / (2σ²)). Vectorised in passes of 2¹⁵ candidates, each
    drawing its own two words per candidate (G₁ from the first half, G₂ from the second, as
    :func:`discrete_laplace`), the acceptance uniform's first 22 bits from the words' unused low
    bits (:func:`_gaussian_accept`), the accepted values kept in draw order until ``size`` are
    filled (a fixed function of the bits; every accepted value is an independent draw, so
    stopping at a count keeps them i.i.d.). Working per pass keeps words, proposals and masks in
    a core's cache. The total-variation gap of the float arithmetic is bounded in
    ``docs/privacy.md`` (≤ 8.9·10⁻¹³ per draw for t ≤ 2²⁵).
    """
    t = math.floor(sigma) + 1.0  # [CKS20 Alg. 3 step 1]
    size = int(size)
    mu = sigma * sigma / t
    c = -0.5 / (sigma * sigma)
    rate = _RATE_SMALL if sigma < 4.0 else _RATE_LARGE
    out = np.empty(size, dtype=np.float64)
    chunk = min(_GAUSS_CHUNK, math.ceil(size / rate) + 16)
    k, second, b = (np.empty(chunk, dtype=np.float64) for _ in range(3))
    filled = 0
    while filled < size:
        m = min(chunk, math.ceil((size - filled) / rate) + 16)
        raw = bits.random_raw(2 * m)
        _acceptance_prefix(raw[:m], raw[m:], b[:m])
        y = _geometric_into(raw[:m], t, k[:m])
        y -= _geometric_into(raw[m:], t, second[:m])  # Y ~ DLap(t) [CKS20 Alg. 3 step 2]
        keep = _gaussian_accept(b[:m], y, mu, c, bits, second[:m])  # [CKS20 Alg. 3 3-4]
        acc = np.compress(keep, y)
        n = min(acc.size, size - filled)
        out[filled : filled + n] = acc[:n]
        filled += n
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceNoise:
    """Lattice Laplace noise calibrated to a sensitivity and an ε.

    The released value is ``(round(x/γ) + K)·γ`` with K discrete Laplace of ratio
    exp(−γ/scale); see the module notes.

    Notes
    -----
    *Privacy*: for any query whose L1 sensitivity is at most ``sensitivity``, releasing it with
    this noise is ε-DP for the neighbour relation that defines the sensitivity (Dwork et al.
    2006, Laplace mechanism), with the lattice rounding included through
    ``scale = (sensitivity + γ)/ε``.
    """

    sensitivity: float
    """L1 sensitivity Δ of the query, in the query's units."""
    epsilon: float
    """Privacy loss ε of one release."""
    magnitude: float = 0.0
    """Public bound on |value| of the released quantities (keeps the lattice exact)."""
    granularity: float | None = None
    """Lattice spacing γ, a power of two. ``None`` derives it from Δ/ε and ``magnitude``; pass
    one explicitly (from public quantities only) when Δ itself is data-dependent, as with
    smooth sensitivity: a data-dependent lattice would leak through the output's support."""
    scale: float = field(init=False)
    """Laplace scale b = (Δ + γ)/ε actually used (not a standard deviation)."""

    def __post_init__(self) -> None:
        sens = check_positive(self.sensitivity, "sensitivity", "LaplaceNoise")
        eps = check_positive(self.epsilon, "epsilon", "LaplaceNoise")
        mag = check_positive(self.magnitude, "magnitude", "LaplaceNoise", allow_zero=True)
        gamma = (
            lattice_granularity(sens / eps, mag)
            if self.granularity is None
            else _check_power_of_two(self.granularity, "LaplaceNoise")
        )
        object.__setattr__(self, "granularity", gamma)
        object.__setattr__(self, "scale", (sens + gamma) / eps)

    @property
    def variance(self) -> float:
        """Exact variance of one noise draw: γ²·2q/(1 − q)², q = exp(−γ/scale)."""
        q = math.exp(-self.granularity / self.scale)
        return self.granularity**2 * 2.0 * q / (1.0 - q) ** 2

    def sample(self, size: int, bits: BitSource) -> np.ndarray:
        """Noise alone (lattice-valued), for adding to values already on the lattice."""
        return discrete_laplace(bits, int(size), self.scale / self.granularity) * self.granularity

    def release(self, values: np.ndarray, bits: BitSource) -> np.ndarray:
        """Snap ``values`` to the lattice and add one noise draw to each entry."""
        vals = np.asarray(values, dtype=np.float64)
        k = np.rint(vals / self.granularity)
        k = k + discrete_laplace(bits, k.size, self.scale / self.granularity).reshape(k.shape)
        return k * self.granularity


def _gaussian_delta(epsilon: float, factor: float) -> float:
    """δ(ε) of N(0, (factor·Δ)²) noise on a query of L2 sensitivity Δ ([BW18] Thm. 8)."""
    from scipy.special import log_ndtr, ndtr

    u = float(factor)
    hi = ndtr(0.5 / u - epsilon * u)
    lo = math.exp(epsilon + log_ndtr(-0.5 / u - epsilon * u))  # e^ε·Φ(·) without overflow
    return float(hi - lo)


def _analytic_gaussian_factor(epsilon: float, delta: float) -> float:
    """The smallest u = σ/Δ with ``_gaussian_delta(ε, u) <= δ`` ([BW18] Alg. 1, by brentq).

    Hand-written around :func:`scipy.optimize.brentq`: the root of a scalar closed form, with a
    final upward nudge so that the returned u satisfies the condition in floating point.
    """
    from scipy.optimize import brentq

    lo, hi = 1e-3, 1.0
    while _gaussian_delta(epsilon, lo) <= delta:
        lo /= 2.0
    while _gaussian_delta(epsilon, hi) > delta:
        hi *= 2.0
    u = brentq(lambda x: _gaussian_delta(epsilon, x) - delta, lo, hi, xtol=1e-15, rtol=1e-12)
    u *= 1.0 + 1e-9
    while _gaussian_delta(epsilon, u) > delta:
        u *= 1.0 + 1e-9
    return u


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianNoise:
    """Lattice Gaussian noise with a given standard deviation σ (in the values' units).

    Calibration is the caller's (Gaussian mechanism, or smooth sensitivity / a as in PAK
    §IV-C); callers add the lattice spacing γ to the shift they calibrate for. Use
    :meth:`for_mechanism` for the (ε, δ) Gaussian mechanism (analytic calibration, [BW18]).
    """

    sigma: float
    """Standard deviation of the noise (not a Laplace scale)."""
    magnitude: float = 0.0
    """Public bound on |value| of the released quantities (keeps the lattice exact)."""
    granularity: float | None = None
    """Lattice spacing γ, a power of two. ``None`` derives it from σ and ``magnitude`` (σ must
    then be public); pass one derived from public quantities when σ is data-dependent."""

    def __post_init__(self) -> None:
        sigma = check_positive(self.sigma, "sigma", "GaussianNoise")
        mag = check_positive(self.magnitude, "magnitude", "GaussianNoise", allow_zero=True)
        gamma = (
            lattice_granularity(sigma, mag)
            if self.granularity is None
            else _check_power_of_two(self.granularity, "GaussianNoise")
        )
        object.__setattr__(self, "granularity", gamma)

    @classmethod
    def for_mechanism(
        cls, *, sensitivity: float, epsilon: float, delta: float, magnitude: float = 0.0
    ) -> GaussianNoise:
        """The smallest σ of the analytic Gaussian mechanism (Balle and Wang, ICML 2018,
        Thm. 8 and Alg. 1), valid for every ε > 0, with the lattice rounding added to Δ.

        Notes
        -----
        N(0, σ²) noise on a query of L2 sensitivity Δ is (ε, δ)-DP if and only if
        ``Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) <= δ`` [BW18, Thm. 8]. The left side falls
        as σ grows, so the smallest σ is a root, found with :func:`scipy.optimize.brentq` on
        u = σ/Δ and then raised until the condition holds in floating point. σ scales with
        Δ + γ (γ = the lattice spacing, at least 2²⁴ times smaller than σ). The classical
        σ = Δ√(2 ln(1.25/δ))/ε (Dwork and Roth 2014, Thm. A.1) is only proven for ε < 1 and is
        larger than this one wherever it holds.

        The noise drawn is the discrete Gaussian on γℤ: its exact δ (Canonne, Kamath and
        Steinke 2020, Thm. 7) is the same expression with discrete tails, which differ from
        the continuous ones by a relative ≈ exp(−2π²σ²/γ²) at σ >= 2²⁴γ (Poisson summation):
        far below any δ we accept, and documented rather than added.
        """
        owner = "GaussianNoise.for_mechanism"
        sens = check_positive(sensitivity, "sensitivity", owner)
        eps = check_positive(epsilon, "epsilon", owner)
        dlt = check_positive(delta, "delta", owner)
        if dlt >= 1.0:
            raise ParameterError(
                f"The 'delta' parameter of {owner} must be a float in (0, 1). Got {delta!r} "
                "instead."
            )
        factor = _analytic_gaussian_factor(eps, dlt)
        gamma = lattice_granularity(sens * factor, magnitude)
        return cls(sigma=(sens + gamma) * factor, magnitude=magnitude)

    @property
    def variance(self) -> float:
        """Variance of one draw (σ² up to a relative 2⁻⁴⁰ for σ ≥ 2²⁴γ)."""
        return self.sigma**2

    def sample(self, size: int, bits: BitSource) -> np.ndarray:
        """Noise alone (lattice-valued)."""
        return discrete_gaussian(bits, int(size), self.sigma / self.granularity) * self.granularity

    def release(self, values: np.ndarray, bits: BitSource) -> np.ndarray:
        """Snap ``values`` to the lattice and add one noise draw to each entry."""
        vals = np.asarray(values, dtype=np.float64)
        k = np.rint(vals / self.granularity)
        k = k + discrete_gaussian(bits, k.size, self.sigma / self.granularity).reshape(k.shape)
        return k * self.granularity
