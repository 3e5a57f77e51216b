"""Would ToPS's perturber gain from a Gaussian counter at (ε, δ)? (issue 27 item 4)

ToPS answers range queries over leaves of g steps (a step moves one leaf by ≤ θ). At (ε_r, δ)
three perturbers are compared on ToPS's own error proxy, per θ² (the pruning objective of
[ToPS21] with the exact noise terms of ``mechanisms/tops/_variance.py``):

    mean over the public random queries of Var(range over complete leaves)
    + (5/3)·Var(one leaf) + g²/36 (the two partial leaves' smoothing error),

minimised over g ∈ {1, 2, 4, …} (and the levels L for the trees):

* ``laplace tree``: today's (F = 16, Laplace, sensitivity L·θ, pure ε_r);
* ``gaussian tree``: the same consistent F-ary tree (F ∈ {2, 4, 16}), discrete Gaussian noise by
  the analytic curve on L2 sensitivity √L·θ (``GaussianNoise.for_mechanism``);
* ``sqrt counter``: the square-root factorisation over the r/g leaves (``sqrt_factorisation``,
  lattice rounding paid), a range = difference of two released prefix sums, exact variance
  σ²·Σₖ (c_{b−1−k} − c_{a−1−k})² (B = C for the square root), one leaf σ²·Σ rⱼ² (C⁻¹).

Public inputs only; nothing is released. Run: ``python scripts/counting_tops_gaussian.py``.
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms import GaussianNoise
from mechanisms.counting._factorisation import sqrt_coefficients, sqrt_factorisation_noise
from mechanisms.tops._tree import tops_noise
from mechanisms.tops._variance import leaf_variance_units, public_queries, variance_units

DELTA = 1e-6


def _queries(r: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = public_queries(r)
    a = -(-i // g)
    b = np.maximum((j + 1) // g, a)
    return a, b


def _tree(r: int, g: int, eps: float, fanout: int, gaussian: bool) -> float:
    a, b = _queries(r, g)
    leaves = max(r // g, 1)
    best = math.inf
    for levels in range(1, max(2, math.ceil(math.log(leaves, fanout)) + 2)):
        if gaussian:
            v = GaussianNoise.for_mechanism(
                sensitivity=math.sqrt(levels), epsilon=eps, delta=DELTA
            ).variance
        else:
            v = tops_noise(threshold=1.0, epsilon=eps, levels=levels, tree_size=1).variance
        noise = v * float(variance_units(a, b, fanout, levels).mean())
        leaf = v * leaf_variance_units(levels, fanout)
        best = min(best, noise + 5.0 / 3.0 * leaf)
    return best + g * g / 36.0


def _sqrt(r: int, g: int, eps: float) -> float:
    n = max(r // g, 1)
    a, b = _queries(r, g)
    c = sqrt_coefficients(n)
    v = sqrt_factorisation_noise(n, epsilon=eps, delta=DELTA, bound=1.0).variance
    cc = np.cumsum(c * c)
    tot = []
    for lo, hi in zip(a.tolist(), b.tolist(), strict=True):
        if hi <= lo:
            tot.append(0.0)
            continue
        m, k = hi - 1, lo - 1  # P_m − P_k (P_{−1} = 0)
        s = cc[m]
        if k >= 0:
            s += cc[k] - 2.0 * float(c[m - k : m + 1] @ c[: k + 1])
        tot.append(s)
    inv = np.zeros(n)
    inv[0] = 1.0
    for t in range(1, n):  # r = C⁻¹'s coefficients: Σ_{j ≤ t} c_j r_{t−j} = 0
        inv[t] = -float(c[1 : t + 1] @ inv[t - 1 :: -1][:t])
        if t > 4096:
            break
    leaf = v * float(inv @ inv)
    return v * float(np.mean(tot)) + 5.0 / 3.0 * leaf + g * g / 36.0


def main() -> None:
    print(
        "| r | ε_r | laplace tree (F=16) | gaussian tree, best F | sqrt counter "
        "| best (laplace / best) |"
    )
    print("|---|---|---|---|---|---|")
    for r in (1 << 12, 1 << 16, 1 << 20):
        for eps in (0.1, 1.0):
            gs = [2**k for k in range(0, int(math.log2(r)) - 1)]
            lap = min(_tree(r, g, eps, 16, False) for g in gs)
            gau = min(_tree(r, g, eps, f, True) for g in gs for f in (2, 4, 16))
            sq = min(_sqrt(r, g, eps) for g in gs if r // g <= 1 << 14)
            best = min((lap, "laplace tree"), (gau, "gaussian tree"), (sq, "sqrt counter"))
            print(
                f"| 2^{int(math.log2(r))} | {eps} | {lap:,.0f} | {gau:,.0f} | {sq:,.0f} | "
                f"{best[1]} ({lap / best[0]:.2f}) |"
            )


if __name__ == "__main__":
    main()
