"""The gap between the discrete Laplace sampler and the exact distribution (docs/privacy.md).

``mechanisms.core._samplers`` draws G = ⌊−t·ln U⌋ from 53-bit uniforms U = (k + ½)/2⁵³ and
releases K = G₁ − G₂. These tests evaluate the *real* sampler on every k it can receive (by
bisection over k: G is non-increasing in k), so P̂(G ≥ g) is known exactly, and check the
facts the accounting in ``docs/privacy.md`` rests on, at scales small enough to enumerate:

* P̂(G ≥ 0) = 1 and |P̂(G ≥ g) − q^g| <= 2⁻⁵² for every g (q = e^{−1/t});
* the support ends at g_max = ⌊t·ln 2⁵⁴⌋: the max-divergence gap is infinite;
* TV(K̂, K) stays below the bound of the docs, 2⁻⁵²·(1 + (2g_max + 4)(1 − q)) + (2·TV_G)² + 2⁻⁵⁴.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms.core._samplers import _geometric

N = 2.0**53


class _Words:
    """A bit source that returns given 64-bit words (the sampler keeps their top 53 bits)."""

    def __init__(self, k: np.ndarray) -> None:
        self.raw = (k.astype(np.uint64) << np.uint64(11)).astype(np.uint64)

    def random_raw(self, size: int) -> np.ndarray:
        assert size == self.raw.size
        return self.raw


def _sampled_tail(t: float, g: np.ndarray) -> np.ndarray:
    """P̂(G >= g) of the real sampler: #{k : G(k) >= g}/2⁵³ (G non-increasing in k)."""
    lo = np.zeros(g.size, dtype=np.int64)  # G(lo) >= g for every g >= 0 (G(0) is the maximum)
    hi = np.full(g.size, 2**53, dtype=np.int64)  # first k with G(k) < g lies in (lo, hi]
    for _ in range(54):
        mid = (lo + hi) // 2
        ok = _geometric(_Words(mid), mid.size, t) >= g
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    top = _geometric(_Words(np.zeros(g.size, dtype=np.int64)), g.size, t) >= g
    return np.where(top, hi, 0).astype(np.float64) / N


def _k_gap(t: float, tail: np.ndarray) -> tuple[float, float]:
    """(TV_G, TV_K) of the sampled geometric and discrete Laplace against the exact ones.

    The errors e_g = P̂(G >= g) − q^g are formed in extended precision, and the difference of
    the two convolutions is convolved from them (p̂ ⊛ p̂ − p ⊛ p = ε ⊛ p̂ + p ⊛ ε with
    ε = p̂ − p), so the float64 rounding of the convolutions does not swamp a gap of 1e-15.
    """
    from scipy.signal import fftconvolve

    g = np.arange(tail.size, dtype=np.longdouble)
    exact = np.exp(-g / np.longdouble(t))
    e = tail.astype(np.longdouble) - exact
    eps = (e[:-1] - e[1:]).astype(np.float64)  # p̂(g) − p(g)
    q = math.exp(-1.0 / t)
    p = ((1 - q) * np.exp(-g[:-1] / np.longdouble(t))).astype(np.float64)
    p_hat = p + eps
    tv_g = 0.5 * (np.abs(eps).sum() + float(exact[-1]))
    diff = fftconvolve(eps, p_hat[::-1]) + fftconvolve(p, eps[::-1])
    return tv_g, 0.5 * float(np.abs(diff).sum())


@pytest.mark.parametrize("log2_t", [6, 12])
def test_geometric_sampler_gap_and_the_bound_on_k(log2_t):
    t = 2.0**log2_t
    q = math.exp(-1.0 / t)
    g_max = math.floor(t * math.log(2.0**54))
    g = np.arange(g_max + 3)
    tail = _sampled_tail(t, g)
    assert tail[0] == 1.0
    assert tail[g_max + 1] == 0.0 and tail[g_max] > 0.0  # finite support: infinite max-divergence
    e_max = float(np.abs(tail.astype(np.longdouble) - np.exp(-g / np.longdouble(t))).max())
    assert e_max <= 2.0**-52
    tv_g, tv_k = _k_gap(t, tail)
    bound = 2.0**-52 * (1 + (2 * g_max + 4) * (1 - q)) + (2 * tv_g) ** 2 + 2.0**-54
    print(f"t=2^{log2_t}: max|e_g|={e_max / 2.0**-52:.2f}·2^-52, TV_G={tv_g:.3e} "
          f"(TV_G/t={tv_g / t:.2e}), TV_K={tv_k:.2e} <= bound {bound:.2e}")  # fmt: skip
    assert tv_k <= bound
    assert tv_g <= (g_max + 2) * 2.0**-52  # the crude bound on one geometric
