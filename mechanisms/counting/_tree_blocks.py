"""The BT release computed block by block of steps, in cache (the batch path of ``_tree``).

Why by hand: the release is one pass of pairwise sums, a gather of noise and a prefix
recursion; done level by level over the whole stream each pass streams the arrays through
memory (≈6x one ``numpy.cumsum`` at n = 2.5·10⁷). Done over blocks of S = 2¹⁶ steps every pass
stays in a core's cache, and only the O(log n) levels above the block need state. No library
offers a binary-tree counter with this noise order (OpenDP's is scalar).

Draw order (shared with :class:`~mechanisms.counting.BinaryTreeCounter`): the steps are cut
into blocks (a, b] of S = 2ˢ steps (a a multiple of S, the last block shorter); at the start of
each block one call draws the noise of every node completing in it. The number of nodes ending
at or before e is D(e) = 2e − popcount(e), so a block draws D(b) − D(a) values, *level-major*:
first the m = b − a leaves, then the m >> 1 nodes of level 1, ..., then the m >> s nodes of
level s (offset off_h = Σ_{h' < h} (m >> h')), then for a full block the nodes of the levels
s + 1..tz(b) that end at b, one each. The noise is i.i.d., so the order is free; level-major
makes each level's noise one contiguous slice (no gather).

Exactness: values are lattice units (integers below 2⁵⁰, exact in float64), so every node sum
is exact whatever the order of additions; prefix sums use the recursion
c(i) = c(i − 2^{tz(i)}) + node(tz(i)) of the level-by-level form, so the result is the same
double for double.
"""

from __future__ import annotations

import numpy as np

from ..core._noise import LaplaceNoise
from ..core._random import BitSource

__all__ = ["block_levels", "completed_before", "level_offsets", "tree_in_blocks"]

#: log₂ of the steps per block (2¹⁶ steps: the block's arrays fit in a core's L2 cache).
_BLOCK_BITS = 16


def block_levels(levels: int) -> int:
    """s = log₂ S for a tree of ``levels`` levels (S ≤ 2^(levels − 1) ≤ n)."""
    return min(_BLOCK_BITS, levels - 1)


def completed_before(e: int) -> int:
    """D(e) = 2e − popcount(e): the number of complete nodes ending at or before step e."""
    return 2 * e - e.bit_count()


def level_offsets(m: int, s: int) -> list[int]:
    """off_h for h = 0..s + 1: where level h's noise starts in a block of m steps."""
    out = [0]
    for h in range(s + 1):
        out.append(out[-1] + (m >> h))
    return out


def tree_in_blocks(
    values: np.ndarray, noise: LaplaceNoise, top: float, levels: int, bits: BitSource
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Noisy nodes (level by level) and noisy prefix sums c(1..n) of ``values``.

    Each block's values are snapped to lattice units of γ (exact integers in float64) and
    clipped to [0, ``top``] = [0, ⌊B/γ⌋] on the way in. Noise comes from ``noise.sample`` in
    the draw order of the module notes.
    """
    n = values.size
    g = noise.granularity
    inv = 1.0 / g  # exact: γ is a power of two
    s = block_levels(levels)
    size = 1 << s
    nodes = tuple(np.empty(n >> h, dtype=np.float64) for h in range(levels))
    prefix = np.empty(n + 1, dtype=np.float64)
    prefix[0] = 0.0
    last_exact = [0.0] * (levels + 1)  # unit sum of the last completed node, levels ≥ s
    slot = [0.0] * (levels + 1)  # c(e − 2^h) for the block ends e with tz(e) = h
    scratch = np.empty(min(size, n), dtype=np.float64)
    for a in range(0, n, size):
        b = min(a + size, n)
        m = b - a
        draws = noise.sample(completed_before(b) - completed_before(a), bits)
        cur = np.multiply(values[a:b], inv, out=scratch[:m])
        np.rint(cur, out=cur)
        np.clip(cur, 0.0, top, out=cur)
        highest = min(s, m.bit_length() - 1)  # the highest level ending in the block
        off = level_offsets(m, s)
        for h in range(highest + 1):
            if h:
                k = cur.size >> 1
                cur = cur[0 : 2 * k : 2] + cur[1 : 2 * k : 2]
            cnt = m >> h
            lo = a >> h
            target = nodes[h][lo : lo + cnt]
            np.multiply(cur[:cnt], g, out=target)
            target += draws[off[h] : off[h] + cnt]
        # Prefix sums inside the block (levels below s), from the base c(a) at relative step 0.
        out = prefix[a : b + 1]
        for h in reversed(range(min(s, highest + 1))):
            step = 1 << h
            dst = out[step : m + 1 : 2 * step]
            lo = a >> h
            dst[:] = out[0 : m + 1 : 2 * step][: dst.size] + nodes[h][lo : lo + 2 * dst.size : 2]
        if m == size:  # a full block: its end b completes the levels s..tz(b)
            tz = (b & -b).bit_length() - 1
            exact = [0.0] * (tz + 1)
            exact[s] = float(cur[0])  # unit sum of the level-s node (b − S, b]
            for h in range(s + 1, tz + 1):
                # node(h) ending at b = node(h − 1) ending at b ∪ the previous node(h − 1)
                exact[h] = exact[h - 1] + last_exact[h - 1]
                nodes[h][(b >> h) - 1] = exact[h] * g + draws[off[s + 1] + (h - s - 1)]
            last_exact[s : tz + 1] = exact[s : tz + 1]
            prefix[b] = slot[tz] + nodes[tz][(b >> tz) - 1]
            slot[:tz] = [prefix[b]] * tz
    return nodes, prefix[1:]
