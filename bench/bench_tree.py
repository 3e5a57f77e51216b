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
B = 1440 as in [PAK19]), not the paper's train-trips data set. Run: ``python bench/bench_tree.py``
(``BENCH_TREE_N=2500000`` for a quick run).
"""

from __future__ import annotations

import os
import resource
import time
import tracemalloc

import numpy as np
from _timing import timed

from mechanisms import (
    BinaryTreeCounter,
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_release,
    laplace_prefix_sums,
)

#: n of [PAK19] §VII-A; ``BENCH_TREE_N`` sets a smaller one (``bench/run_all.py``'s quick size).
N = int(os.environ.get("BENCH_TREE_N", "25000000"))
REPS = 20_000
BOUND = 1440.0
EPS = 1.0


def main() -> None:
    rng = np.random.default_rng(2019)
    values = np.minimum(np.round(rng.exponential(30.0, N)), BOUND)
    print(f"n = {N:,}, B = {BOUND:g}, epsilon = {EPS:g}, popcount(n) = {N.bit_count()}")

    print(f"load average {os.getloadavg()[0]:.2f}")
    # 1. full release vs numpy.cumsum, and vs the floor: cumsum + one numpy Laplace per node
    t_cumsum, exact = timed(lambda: np.cumsum(values), repeat=3)
    n_nodes = 2 * N - N.bit_count()
    t_floor, _ = timed(lambda: (np.cumsum(values), rng.laplace(size=n_nodes)), repeat=3)
    t_bt, rel = timed(lambda: binary_tree_release(values, epsilon=EPS, bound=BOUND, seed=1))
    del rel
    tracemalloc.start()  # a second run for memory: tracing slows allocations down
    rel = binary_tree_release(values, epsilon=EPS, bound=BOUND, seed=1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"[1] BT release of all prefix sums: {t_bt:.2f} s; numpy.cumsum {t_cumsum:.3f} s "
        f"({t_bt / t_cumsum:.1f}x); cumsum + one numpy Laplace per node {t_floor:.2f} s "
        f"({t_bt / t_floor:.2f}x)  (levels L = {rel.levels}, node scale {rel.scale:.1f})"
    )
    print(
        f"    peak memory of the release {peak / 2**20:,.0f} MiB = {peak / values.nbytes:.2f}x "
        f"the input ({values.nbytes / 2**20:,.0f} MiB; tracemalloc, numpy buffers included); "
        f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:,.0f} MiB"
    )
    _streaming(values[: 1 << 20])
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


class MinimalCounter:
    """The floor for streaming: a textbook binary counter in pure Python (numpy noise drawn in
    blocks, no lattice, no validation) — what any streaming BT must at least do per push."""

    def __init__(self, n: int, scale: float, rng: np.random.Generator) -> None:
        self.levels, self.i, self.scale, self.rng = n.bit_length(), 0, scale, rng
        self.alpha = [0.0] * self.levels  # exact node sums
        self.noisy = [0.0] * self.levels
        self.buf, self.used = rng.laplace(0.0, scale, 1 << 16).tolist(), 0

    def push(self, x: float) -> float:
        self.i += 1
        i = self.i
        tz = (i & -i).bit_length() - 1
        s = x
        for h in range(tz):
            s += self.alpha[h]
        self.alpha[tz] = s
        if self.used + tz + 1 > len(self.buf):
            self.buf, self.used = self.rng.laplace(0.0, self.scale, 1 << 16).tolist(), 0
        self.noisy[tz] = s + self.buf[self.used]
        self.used += 1
        total = 0.0
        for h in range(self.levels):
            if (i >> h) & 1:
                total += self.noisy[h]
        return total


def _streaming(xs: np.ndarray) -> None:
    n = xs.size
    data = xs.tolist()
    best = {}
    for name, make in (
        ("minimal", lambda: MinimalCounter(n, 30.0, np.random.default_rng(0))),
        ("dpstream", lambda: BinaryTreeCounter(n, epsilon=EPS, bound=BOUND, seed=4)),
    ):
        times = []
        for _ in range(3):
            counter = make()
            start = time.perf_counter()
            for x in data:
                counter.push(x)
            times.append(time.perf_counter() - start)
        best[name] = min(times) / n * 1e6
    print(
        f"    streaming push over {n:,} values: dpstream {best['dpstream']:.2f} us, minimal "
        f"pure-Python counter {best['minimal']:.2f} us ({best['dpstream'] / best['minimal']:.2f}x)"
    )


if __name__ == "__main__":
    main()
