"""The gap between the discrete Gaussian sampler and the exact distribution (docs/privacy.md).

``mechanisms.core._samplers.discrete_gaussian`` is [CKS20] Alg. 3 on the lattice Laplace of
``test_sampler_gap.py``: a proposal Y = G₁ − G₂ from the top 53 bits of two words, accepted when
a uniform V is below p̂(Y) = exp(c·(|Y| − μ)²), V's first 22 bits being the low 11 bits of each
word and, on a tie with ⌊p̂·2²²⌋, a fresh word's 53-bit uniform. The bound of the docs,

    τ_G <= (2·τ_L + η) / (A − 2·τ_L − η)   per draw,

rests on these facts, each checked here on the real code:

* the acceptance bits are independent of the proposal: the geometric ignores the low 11 bits of
  its word, and the prefix is exactly those bits of the two words;
* the lazy comparison decides V < p̂ exactly: for fixed y, enumerating all 2²² prefixes and
  bisecting the tie word gives P(accept | y) = ⌊P⌋/2²² + ⌈frac(P)·2⁵³⌉/2⁷⁵ (P = p̂·2²²);
* η: |P(accept | y) − p(y)| <= 2⁻⁵⁰ at every y of the support (small t) or at 2·10⁵ y (lattice
  t), p computed in extended precision;
* A >= 0.75, the exact acceptance rate of the exact algorithm, for t >= 2⁶;

and at t = 2⁶ and 2¹² the exact total variation of the sampler (from the sampled geometric's
tails, computed by bisection as in ``test_sampler_gap.py``, and the exact acceptance) is below
the bound.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from test_sampler_gap import _sampled_tail

from mechanisms.core._samplers import (
    _acceptance_prefix,
    _acceptance_scaled,
    _gaussian_accept,
    _geometric,
    discrete_gaussian,
)

#: The documented bounds: acceptance error η and the Laplace proposal's τ_L (docs/privacy.md).
ETA = 2.0**-50
TAU_L = 3.3e-13


def _constants(sigma: float) -> tuple[float, float, float]:
    t = math.floor(sigma) + 1.0
    return t, sigma * sigma / t, -0.5 / (sigma * sigma)


def _exact_p(y: np.ndarray, sigma: float) -> np.ndarray:
    """p(y) = exp(−(|y| − σ²/t)²/(2σ²)) in extended precision from the exact σ and t."""
    s = np.longdouble(sigma)
    t = np.longdouble(math.floor(sigma) + 1)
    d = np.abs(y.astype(np.longdouble)) - s * s / t
    return np.exp(-(d * d) / (2 * s * s))


def _accept_probability(y: np.ndarray, sigma: float) -> np.ndarray:
    """P(accept | y) of the real code's P = p̂·2²², in extended precision (checked by
    enumeration in ``test_lazy_comparison_is_exact``)."""
    _, mu, c = _constants(sigma)
    big = _acceptance_scaled(y.astype(np.float64), mu, c, np.empty(y.size))
    whole = np.floor(big)
    tie = np.ceil((big - whole) * 2.0**53)  # #{j < 2⁵³ : j < frac·2⁵³}, frac·2⁵³ exact
    return (whole.astype(np.longdouble) + tie / 2**53) / 2**22


class _Words:
    """A bit source that returns given words in order (and counts what was asked)."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = np.asarray(words, dtype=np.uint64)
        self.used = 0

    def random_raw(self, size: int) -> np.ndarray:
        out = self.words[self.used : self.used + size]
        assert out.size == size
        self.used += size
        return out.copy()


def test_acceptance_bits_are_the_proposal_words_unused_low_bits():
    rng = np.random.default_rng(0)
    w1, w2 = rng.integers(0, 2**64, 4096, dtype=np.uint64), rng.integers(0, 2**64, 4096, np.uint64)
    b = _acceptance_prefix(w1, w2, np.empty(w1.size))
    expected = [((int(a) & 0x7FF) << 11) | (int(c) & 0x7FF) for a, c in zip(w1, w2, strict=True)]
    assert b.tolist() == expected
    flipped = w1 ^ rng.integers(0, 2**11, w1.size, dtype=np.uint64)  # low 11 bits only
    for t in (2.0**6, 2.0**24 + 1.0):
        assert np.array_equal(
            _geometric(_Words(w1), w1.size, t), _geometric(_Words(flipped), w1.size, t)
        )


@pytest.mark.parametrize(
    ("sigma", "y"),
    [(2.0**24 + 0.5, 2.0**24), (2.0**24 + 0.5, 0.0), (2.0**24 + 0.5, -3.0e7), (64.3, 17.0),
     (64.3, -64.0), (4096.7, 9000.0), (2.0**24 + 0.5, 6.0e8)],
)  # fmt: skip
def test_lazy_comparison_is_exact(sigma, y):
    """All 2²² prefixes, and the tie word by bisection: P(accept | y) as documented."""
    _, mu, c = _constants(sigma)
    n = 1 << 22
    b = np.arange(n, dtype=np.float64)
    k = np.full(n, y)
    big = float(_acceptance_scaled(np.array([y]), mu, c, np.empty(1))[0])
    whole = math.floor(big)
    refill = _Words(np.zeros(1, dtype=np.uint64))  # j = 0: accepted iff frac > 0
    keep = _gaussian_accept(b, k, mu, c, refill, np.empty(n))
    assert refill.used == (1 if whole < n else 0)  # exactly one fresh word, on the tie only
    assert np.array_equal(keep[:whole], np.ones(whole, bool))  # b < ⌊P⌋: accepted
    assert not keep[whole + 1 :].any()  # b > ⌊P⌋: rejected
    if whole < n:  # the tie: accepted iff j < (P − ⌊P⌋)·2⁵³, j = the word's top 53 bits
        lo, hi = 0, 2**53  # accepted for j < hi, found by bisection
        for _ in range(54):
            mid = (lo + hi) // 2
            word = _Words(np.array([mid << 11], dtype=np.uint64))
            ok = _gaussian_accept(b[whole : whole + 1], k[:1], mu, c, word, np.empty(1))[0]
            lo, hi = (mid + 1, hi) if ok else (lo, mid)
        assert lo == hi == math.ceil(Fraction(big - whole) * 2**53)
        accepted = whole + lo / 2.0**53
    else:
        accepted = float(n)
    prob = np.longdouble(accepted) / 2.0**22
    assert prob == _accept_probability(np.array([y]), sigma)[0]
    assert abs(prob - _exact_p(np.array([y]), sigma)[0]) <= ETA


@pytest.mark.parametrize("sigma", [64.3, 4096.7, 2.0**24 + 0.5, 2.0**25 - 1.3, 2.0**25 + 777.0])
def test_acceptance_error_eta(sigma):
    t = math.floor(sigma) + 1.0
    g_max = math.floor(t * math.log(2.0**54))
    if g_max < 10**6:
        y = np.arange(-g_max, g_max + 1, dtype=np.float64)
    else:
        rng = np.random.default_rng(1)
        y = np.concatenate([
            rng.integers(-g_max, g_max + 1, 100_000).astype(np.float64),
            np.round(sigma * sigma / t) + np.arange(-50_000, 50_000, dtype=np.float64),
        ])  # fmt: skip
    err = np.abs(_accept_probability(y, sigma) - _exact_p(y, sigma))
    print(f"sigma={sigma:.6g}: max|P(accept|y) - p(y)| = {float(err.max()) / 2.0**-53:.2f}·2^-53")
    assert float(err.max()) <= ETA


def _exact_rate(sigma: float) -> float:
    """A = Σ_y DLap_t(y)·p(y), in extended precision, over |y| <= 60σ (the rest is < e⁻⁶⁰)."""
    t = math.floor(sigma) + 1.0
    y = np.arange(0, math.ceil(60 * t) + 1, dtype=np.longdouble)
    q = np.exp(-1 / np.longdouble(t))
    lap = (1 - q) / (1 + q) * np.exp(-y / np.longdouble(t)) * np.where(y > 0, 2, 1)
    return float((lap * _exact_p(y, sigma)).sum())


@pytest.mark.parametrize("sigma", [64.3, 4096.7, 2.0**17 + 0.5])
def test_acceptance_rate_is_at_least_three_quarters(sigma):
    rate = _exact_rate(sigma)
    assert 0.75 <= rate <= math.exp(-0.5) * math.sqrt(math.pi / 2)  # → 0.7602 as σ → ∞
    bound = (2 * TAU_L + ETA) / (0.75 - 2 * TAU_L - ETA)
    assert bound <= 8.9e-13


@pytest.mark.parametrize("log2_t", [6, 12])
def test_gaussian_sampler_total_variation(log2_t):
    """The exact TV of the real sampler at t = 2^log2_t against the discrete Gaussian."""
    from scipy.signal import fftconvolve

    sigma = 2.0**log2_t - 0.25  # t = ⌊σ⌋ + 1 = 2^log2_t
    t = math.floor(sigma) + 1.0
    g_max = math.floor(t * math.log(2.0**54))
    g = np.arange(g_max + 3)
    tail = _sampled_tail(t, g)
    gl = g.astype(np.longdouble)
    e = tail.astype(np.longdouble) - np.exp(-gl / np.longdouble(t))
    eps = (e[:-1] - e[1:]).astype(np.float64)  # p̂_G − p_G
    qq = math.exp(-1.0 / t)
    p_g = ((1 - qq) * np.exp(-gl[:-1] / np.longdouble(t))).astype(np.float64)
    d = fftconvolve(eps, (p_g + eps)[::-1]) + fftconvolve(p_g, eps[::-1])  # q̂ − q, y = −n..n
    n = g_max + 1
    y = np.arange(-n, n + 1, dtype=np.float64)
    lap = ((1 - qq) / (1 + qq) * np.exp(-np.abs(y) / t)).astype(np.longdouble)
    p = _exact_p(y, sigma)
    a_hat = _accept_probability(y, sigma)
    u = d.astype(np.longdouble) * a_hat + lap * (a_hat - p)  # q̂·â − q·p without cancellation
    rate = (lap * p).sum()
    rate_hat = rate + u.sum()
    tv = 0.5 * float(np.abs(u / rate_hat - lap * p * (u.sum() / (rate * rate_hat))).sum())
    bound = (2 * float(0.5 * np.abs(d).sum()) + ETA) / (float(rate) - float(np.abs(d).sum()) - ETA)
    tv_k = 0.5 * float(np.abs(d).sum())
    print(f"t=2^{log2_t}: TV(K_hat, K) = {tv_k:.2e}, A = {float(rate):.4f}, "
          f"TV of the Gaussian sampler = {tv:.2e} <= {bound:.2e}")  # fmt: skip
    assert tv <= bound <= 8.9e-13


def test_sampler_uses_two_words_per_candidate_and_refills_exactly():
    """Sizes across several passes: as many outputs as asked, a fixed function of the bits."""
    from mechanisms import bit_source

    for size in (1, 7, 40_000, 100_003):
        a = discrete_gaussian(bit_source(5), size, 2.0**24 + 0.5)
        b = discrete_gaussian(bit_source(5), size, 2.0**24 + 0.5)
        assert a.shape == (size,) and np.array_equal(a, b)
    words = np.random.default_rng(3).integers(0, 2**64, 1 << 20, dtype=np.uint64)
    src = _Words(words)
    out = discrete_gaussian(src, 100_000, 3000.5)
    assert out.size == 100_000
    # about 1/A = 1.32 candidates per output, two words each, plus the last pass's slack
    assert 2 * 100_000 / 0.78 < src.used < 2 * 100_000 / 0.70
