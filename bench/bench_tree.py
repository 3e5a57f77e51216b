"""Benchmark of the binary-tree (BT) counter at the scale of [PAK19] §VII-A (n = 25,000,000).

Prints, each against a numpy baseline measured in the same run:

1. one full BT release (all n prefix sums) vs ``numpy.cumsum`` of the same values;
2. 20,000 repetitions of the final sum c(σ, n) vs numpy drawing the same number of
   (insecure, float) Laplace variates. Trick: c(σ, n) only involves the popcount(n) nodes of
   [1..n], so R repetitions need R·popcount(n) noise draws, not R·(2n − popcount(n)) — see
   ``binary_tree_final_sums`` and its test against the full release;
3. the stated vs empirical variance of that final sum, and BT's gain over the Laplace baseline;
4. the variance gain of the online (bottom-up) and consistent (BLUE) estimates, exact at
   n = 25,000,000 and empirical over repeated runs at a smaller n.

The data are synthetic commute times (minutes, exponential with mean 30, clipped to
B = 1440 as in [PAK19]), not the paper's train-trips data set. Run: ``python bench/bench_tree.py``.
"""

from __future__ import annotations

import numpy as np
from _timing import timed

from mechanisms import (
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_release,
    laplace_prefix_sums,
)

N = 25_000_000
REPS = 20_000
BOUND = 1440.0
EPS = 1.0


def main() -> None:
    rng = np.random.default_rng(2019)
    values = np.minimum(np.round(rng.exponential(30.0, N)), BOUND)
    print(f"n = {N:,}, B = {BOUND:g}, epsilon = {EPS:g}, popcount(n) = {N.bit_count()}")

    # 1. full release vs numpy.cumsum
    t_cumsum, exact = timed(lambda: np.cumsum(values), repeat=3)
    t_bt, rel = timed(lambda: binary_tree_release(values, epsilon=EPS, bound=BOUND, seed=1))
    print(
        f"[1] BT release of all prefix sums: {t_bt:.2f} s; numpy.cumsum {t_cumsum:.3f} s; "
        f"ratio {t_bt / t_cumsum:.1f}x  (levels L = {rel.levels}, node scale {rel.scale:.1f})"
    )
    err = rel.prefix_sums - exact
    print(
        f"    max |error| / B over all i: {np.max(np.abs(err)) / BOUND:.2f}; "
        f"RMS error / sqrt(mean stated variance): "
        f"{np.sqrt(np.mean(err**2) / np.mean(rel.variance)):.3f}"
    )

    # 2. 20,000 final sums vs numpy Laplace draws of the same count
    t_fast, finals = timed(
        lambda: binary_tree_final_sums(values, epsilon=EPS, bound=BOUND, repetitions=REPS, seed=2)
    )
    noise = binary_tree_noise(N, epsilon=EPS, bound=BOUND)
    k = N.bit_count()
    t_np, _ = timed(
        lambda: values.sum() + rng.laplace(0.0, noise.scale, (REPS, k)).sum(axis=1), repeat=3
    )
    print(
        f"[2] {REPS:,} final sums c(σ, n): {t_fast:.2f} s (incl. one pass over the data); "
        f"numpy sum + laplace {t_np:.2f} s; ratio {t_fast / t_np:.2f}x"
    )

    # 3. stated vs empirical variance, and the gain over the Laplace baseline
    errors = finals - exact[-1]
    stated = k * noise.variance
    s2 = float(np.mean(errors**2))
    z = (s2 - stated) / (stated * np.sqrt((2.0 + 3.0 / k) / REPS))
    print(
        f"[3] final-sum variance: empirical/stated = {s2 / stated:.4f} (z = {z:+.2f}); "
        f"mean |error|/B = {np.mean(np.abs(errors)) / BOUND:.2f}"
    )
    lap = laplace_prefix_sums(values[:1000], epsilon=EPS, bound=BOUND, seed=3)
    lap_var_n = N * lap.noise.variance
    print(f"    Laplace baseline variance at n / BT variance at n = {lap_var_n / stated:,.0f}")

    # 4. variance reduction from the same nodes
    t_on, online = timed(rel.online_variance)
    t_cons, cons = timed(rel.consistent_prefix_sums)
    cons_var = rel.consistent_variance()
    print(
        f"[4] mean var. of prefix sums: BT / online = {rel.variance.mean() / online.mean():.3f}, "
        f"BT / consistent (BLUE) = {rel.variance.mean() / cons_var.mean():.3f} (exact, n = {N:,})"
    )
    print(
        f"    final sum: BT / consistent = {rel.variance[-1] / cons_var[-1]:.3f}; "
        f"consistent_prefix_sums {t_cons:.2f} s = {t_cons / t_cumsum:.1f}x numpy.cumsum"
    )
    cerr = cons - exact
    print(
        f"    empirical at n = {N:,} (one run, pooled over i): "
        f"mean sq. error BT / consistent = {np.mean(err**2) / np.mean(cerr**2):.3f}"
    )
    del rel, cons, cons_var, online, err, cerr

    small, runs = 1 << 16, 200
    xs = values[:small]
    truth = np.cumsum(xs)
    sq = np.zeros(3)
    for seed in np.random.SeedSequence(7).spawn(runs):
        r = binary_tree_release(xs, epsilon=EPS, bound=BOUND, seed=seed)
        sq += [
            np.mean((r.prefix_sums - truth) ** 2),
            np.mean((r.online_prefix_sums() - truth) ** 2),
            np.mean((r.consistent_prefix_sums() - truth) ** 2),
        ]
    print(
        f"    empirical over {runs} runs at n = {small:,}: BT / online = {sq[0] / sq[1]:.3f}, "
        f"BT / consistent = {sq[0] / sq[2]:.3f} (stated "
        f"{r.variance.mean() / r.online_variance().mean():.3f}, "
        f"{r.variance.mean() / r.consistent_variance().mean():.3f})"
    )


if __name__ == "__main__":
    main()
