"""The vectorised integer samplers behind the lattice noise: discrete Laplace and Gaussian.

Both read 64-bit words from a bit source (:mod:`mechanisms.core._random`) and return exact
integers as float64. The discrete Laplace is the difference of two geometric variables, each
by CDF inversion of the 53-bit uniform in the top bits of one word; the discrete Gaussian is
Canonne, Kamath and Steinke's rejection sampler ([CKS20] Alg. 3) on top of it, its acceptance
test reading the proposal words' unused low bits. Their gaps from the exact distributions are
bounded in ``docs/privacy.md`` (total variation per draw ≤ 3.3·10⁻¹³ and ≤ 8.9·10⁻¹³).

Hand-written rather than a library: see :mod:`mechanisms.core._noise` (numpy's samplers are
float-valued and not cryptographic; exact scalar samplers are orders of magnitude too slow).
Kept apart from the noise classes so that each module holds one idea.
"""

from __future__ import annotations

import math

import numpy as np

from ._random import _TWO_POW_MINUS_53, BitSource

__all__ = ["discrete_gaussian", "discrete_laplace"]

#: Words processed per pass of the vectorised samplers (fits in a core's L2 cache).
_CHUNK = 1 << 15


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


def _laplace_chunks(raw: np.ndarray, size: int, t: float) -> np.ndarray:
    """K = G₁ − G₂ for ``size`` draws from ``raw`` (G₁ from words [0, size), G₂ from
    [size, 2·size)).

    Hand-fused in cache-sized chunks: the dozen numpy passes over 2¹⁵ words stay in a core's
    cache instead of streaming whole arrays through memory once per pass (about 2x faster for
    10⁷ draws). The arithmetic is that of two :func:`_geometric` calls, value for value.
    """
    out = np.empty(size, dtype=np.float64)
    chunk = max(1, min(size, _CHUNK))
    second = np.empty(chunk, dtype=np.float64)
    for i in range(0, size, chunk):
        m = min(chunk, size - i)
        k = _geometric_into(raw[i : i + m], t, out[i : i + m])
        k -= _geometric_into(raw[size + i : size + i + m], t, second[:m])
    return out


def discrete_laplace(bits: BitSource, size: int, t: float) -> np.ndarray:
    """Integers K with P(K = k) ∝ exp(−|k| / t), as float64 (exact integers below 2⁵³).

    The difference of two i.i.d. geometric variables with ratio exp(−1/t) is discrete Laplace
    with the same ratio (Inusah and Kozubowski 2006, Prop. 2.1). Two words per draw: G₁ from
    the first ``size`` words, G₂ from the next ``size`` (the exactness analysis of
    ``docs/privacy.md`` is for this construction: the two geometrics' rounding errors average
    out in the difference).
    """
    size = int(size)
    return _laplace_chunks(bits.random_raw(2 * size), size, t)


#: Bits of the acceptance uniform's prefix, taken from the low bits of the two proposal words.
_PREFIX_BITS = 22
_LOW_MASK = np.uint64((1 << (_PREFIX_BITS // 2)) - 1)
#: Candidates per pass of the Gaussian sampler (two words each: 512 KiB of words per pass).
_GAUSS_CHUNK = 1 << 15
#: Guesses of CKS Alg. 3's acceptance rate with t = ⌊σ⌋ + 1, for σ < 4 and σ >= 4 (about
#: 0.54 at σ = 1, tending to e^{−1/2}·√(π/2) = 0.760): they size the last pass. 0.5 is not a
#: lower bound for σ in about (0.05, 0.6) (minimum 0.445 at σ ≈ 0.30, test_lattice_rule.py):
#: there the last pass may come short and one more runs. The values never depend on it being
#: a bound; changing it would change every seeded output below σ = 4.
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
