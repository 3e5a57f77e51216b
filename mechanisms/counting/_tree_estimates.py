"""Binary-tree estimates from the noisy nodes ([HRMS10] §4; Honaker 2015).

Variance reduction from the same noisy nodes (post-processing, free of privacy cost)
------------------------------------------------------------------------------------
With v the variance of one node's noise:

* *online* (bottom-up; [HRMS10] §4, first pass; Honaker 2015): z₀ = y₀ and, at level h ≥ 1,
  zₕ = (vₕ/v)·yₕ + (vₕ/(2vₕ₋₁))·(z_left + z_right), the inverse-variance combination of the
  node's own noisy sum and its children's estimates, with vₕ = 1/(1/v + 1/(2vₕ₋₁)), v₀ = v.
  zₕ only uses the node's subtree, so it is known the moment the node completes (streaming).
  The nodes of a prefix cover disjoint subtrees, so Var(c̃(i)) = Σ_{h ∈ bits(i)} vₕ exactly.
* *consistent* (BLUE; [HRMS10] §4, second pass, top-down):
  h̄ = z at the roots (nodes without a parent: one perfect tree per set bit of n), and
  h̄[child] = z[child] + (h̄[parent] − z[left] − z[right])/2. Children sum to parents and the
  leaves equal the least-squares estimate (AᵀA)⁻¹Aᵀy. Writing Eₘ for the projection onto
  vectors constant on the level-m blocks, AᵀA = Σₘ (2^{m+1} − 1)(Eₘ − Eₘ₊₁), hence
  (AᵀA)⁻¹ = Σₘ cₘEₘ with c₀ = 1, cₘ = 1/(2^{m+1} − 1) − 1/(2ᵐ − 1), and
  Var(c̄(i)) = v·Σₘ cₘ·Σ_{level-m blocks β} |β ∩ [1..i]|²/2ᵐ
           = v·Σₘ cₘ·[(i >> m)·2ᵐ + 1{(i >> m) < (n >> m)}·(i mod 2ᵐ)²/2ᵐ].
"""

from __future__ import annotations

import numpy as np


def _popcounts(n: int) -> np.ndarray:
    return np.bitwise_count(np.arange(1, n + 1, dtype=np.int64)).astype(np.float64)


def _online_level_variances(levels: int, v: float) -> np.ndarray:
    out = np.empty(levels, dtype=np.float64)
    out[0] = v
    for h in range(1, levels):
        out[h] = 1.0 / (1.0 / v + 1.0 / (2.0 * out[h - 1]))
    return out


def _online_nodes(nodes: tuple[np.ndarray, ...], v: float) -> tuple[np.ndarray, ...]:
    """Bottom-up inverse-variance combination ([HRMS10] §4, first pass)."""
    var = _online_level_variances(len(nodes), v)
    z = [np.array(nodes[0])]
    for h in range(1, len(nodes)):
        m = nodes[h].size
        children = z[h - 1][: 2 * m].reshape(m, 2).sum(axis=1)
        z.append((var[h] / v) * nodes[h] + (var[h] / (2.0 * var[h - 1])) * children)
    return tuple(z)


def _consistent_nodes(online: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Top-down pass of [HRMS10] §4 over the forest of perfect trees."""
    out = [np.array(z) for z in online]
    for h in reversed(range(len(out) - 1)):
        p = out[h + 1].size  # parents at level h + 1; children 0..2p−1 have one
        pairs = online[h][: 2 * p].reshape(p, 2)
        gap = 0.5 * (out[h + 1] - pairs.sum(axis=1))
        out[h][: 2 * p] = (pairs + gap[:, None]).ravel()
    return tuple(out)


def _consistent_variance_units(n: int, levels: int) -> np.ndarray:
    """Var(c̄(i))/v for i = 1..n (module notes), level by level on a (blocks, 2ᵐ) view: the
    steps i < (n >> m)·2ᵐ lie in complete level-m blocks, the tail only has the full part."""
    out = np.arange(n + 1, dtype=np.float64)  # m = 0: c₀·i
    for m in range(1, levels):
        c = 1.0 / (2 ** (m + 1) - 1) - 1.0 / (2**m - 1)
        size, rows = 1 << m, n >> m
        block = out[: rows * size].reshape(rows, size)
        block += (c * size * np.arange(rows, dtype=np.float64))[:, None]
        block += (c / size * np.arange(size, dtype=np.float64) ** 2)[None, :]
        out[rows * size :] += c * size * rows
    return out[1:]


def tree_range_variance(i: int, j: int, node_variance: float) -> float:
    """Noise variance of the BT range sum c(σ, j + 1) − c(σ, i) (steps i..j, 0-based).

    c(σ, a) sums the nodes (h, (a >> h) − 1) for the set bits h of a (:mod:`._tree`). The two
    covers share node (h, ·) exactly when bit h is set in both and a >> h = b >> h; shared
    nodes cancel, the others are independent: variance = |cover(i) Δ cover(j + 1)|·v.
    """
    a, b = int(i), int(j) + 1
    shared = sum(1 for h in range(b.bit_length()) if (a >> h) & 1 and (a >> h) == (b >> h))
    return (a.bit_count() + b.bit_count() - 2 * shared) * float(node_variance)
