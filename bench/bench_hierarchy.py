"""Benchmark: OptStream post-processing ([FV19] Alg. 4, §5.2) of a 4-level hierarchy at size.

national -> 10 regions -> substations (100 feeders each) -> feeders, one w = 48 period per day,
the default features of [FV19] §6. Feeders are synthetic, built from the bundled SimBench
profiles (``dpstream.datasets.load_simbench``): each feeder takes one of the 44 profiles, scaled
(log-normal, a fifth of them low-signal at 5-50 kW), shifted in time (0-3 half-hours) and in
level, with multiplicative noise. Estimates mimic OptStream's with the default ``"variance"``
weights: every node has its own sample set (k = 10 of 48 steps), sampled steps have the noise
variance σ², interpolated steps σ² (1 + distance to the nearest sample) plus a bias term,
feature parts the variance of a sum; noise is Gaussian with those variances (numpy: this
simulation releases nothing). The weights (inverse variances) differ per node, part and
period: they are NOT separable, the case the previous fast path factored densely.

Each period is post-processed by its own call (as the per-period engine does), so memory is
per period. Reported per configuration: wall time of the month (or year), peak traced memory
of one call (``tracemalloc``; OSQP's C allocations are not traced), active bounds; the
previous exact path (``method="dense"``: dense Kronecker factors + block principal pivoting,
separable weights only) and cvxpy + OSQP run on the same periods where they finish, as ratios
measured in this run; and the growth exponent of the time per period fitted in the number of
leaves (least squares on logs).

Usage: ``python bench/bench_hierarchy.py [--sizes 1000 10000 100000] [--days 30]
[--year-size 10000] [--year-days 365] [--compare-sizes 100 300 1000] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from dpstream.datasets import load_simbench
from postproc import FeatureSet, Hierarchy, project_consistent

W = 48
SIGMA = 30.0  # kW: noise standard deviation of a sampled step (every node, as in OptStream)
K = 10  # samples per period and node


def four_level_hierarchy(n_feeders: int, regions: int = 10, per_substation: int = 100):
    subs = max(1, n_feeders // per_substation)
    regions = min(regions, subs)
    children: dict[str, list[str]] = {"national": [f"r{r}" for r in range(regions)]}
    for s in range(subs):
        children.setdefault(f"r{s % regions}", []).append(f"s{s}")
    for f in range(n_feeders):
        children.setdefault(f"s{f % subs}", []).append(f"f{f}")
    return Hierarchy(children=children)


class Feeders:
    """Synthetic feeders from the SimBench profiles: scaled, shifted, noisy (module notes)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        frame = load_simbench()
        prof = frame.to_numpy(dtype=np.float64)
        self.prof = prof / prof.mean(axis=0)  # unit-mean profiles (17,568 x 44)
        self.col = rng.integers(0, prof.shape[1], n)
        self.scale = np.where(
            rng.random(n) < 0.2, rng.uniform(5, 50, n), rng.lognormal(np.log(150), 0.8, n)
        )
        self.shift = rng.integers(0, 4, n)
        self.offset = rng.uniform(-0.1, 0.1, n) * self.scale
        self.seed = int(rng.integers(2**31))  # the same days for every method

    def day(self, d: int) -> np.ndarray:
        t = (d * W + np.arange(W)[None, :] - self.shift[:, None]) % self.prof.shape[0]
        x = self.scale[:, None] * self.prof[t, self.col[:, None]] + self.offset[:, None]
        x *= np.random.default_rng([self.seed, d]).lognormal(0.0, 0.05, x.shape)
        return np.maximum(x, 0.0)  # (L, W)


def estimates(rng: np.random.Generator, h: Hierarchy, fs: FeatureSet, x: np.ndarray):
    """Noisy estimates and their variances for one period (N, P): module notes."""
    n = len(h.nodes)
    steps = h.sparse_matrix @ x  # (N, W)
    truth = steps @ fs.matrix.T
    offset = rng.integers(0, W // K, n)
    sampled = np.zeros((n, W), dtype=bool)
    sampled[np.arange(n)[:, None], offset[:, None] + (np.arange(K) * (W // K))[None, :]] = True
    idx = np.arange(W)
    pos = np.where(sampled, idx[None, :], -(10**6))
    last = np.maximum.accumulate(pos, axis=1)
    nxt = np.flip(np.minimum.accumulate(np.flip(np.where(sampled, idx, 10**6), 1), axis=1), 1)
    dist = np.minimum(idx[None, :] - last, nxt - idx[None, :]).astype(np.float64)
    var_steps = SIGMA**2 * (1.0 + dist) + (0.1 * SIGMA) ** 2 * dist
    var_parts = SIGMA**2 * fs.matrix[W:].sum(axis=1) / 4.0
    var = np.concatenate([var_steps, np.broadcast_to(var_parts, (n, var_parts.size))], axis=1)
    return truth + rng.normal(0.0, np.sqrt(var)), var


def run(h: Hierarchy, fs: FeatureSet, feeders: Feeders, days: int, method: str, weights: str):
    """Post-process ``days`` periods one call each; returns (seconds, peak bytes, active)."""
    rng = np.random.default_rng(1)  # same estimates for every method
    seconds, peak, active, kkt = 0.0, 0, 0, 0.0
    for d in range(days):
        c, var = estimates(rng, h, fs, feeders.day(d))
        kw = {"variances": var} if weights == "variance" else {}
        tracemalloc.start()
        start = time.perf_counter()
        r = project_consistent(c, hierarchy=h, features=fs, method=method, **kw)
        seconds += time.perf_counter() - start
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        active += int(r.n_active.sum())
        kkt = max(kkt, r.kkt["stationarity"], r.kkt["dual"])
    return seconds, peak, active, kkt, r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--year-size", type=int, default=10000)
    parser.add_argument("--year-days", type=int, default=365)
    parser.add_argument("--compare-sizes", type=int, nargs="*", default=[100, 300, 1000])
    parser.add_argument("--compare-days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    fs = FeatureSet.default(W)
    rng = np.random.default_rng(args.seed)

    print("== comparison on the same periods (paper weights 1/m_i: the old path's best case)")
    print(
        f"{'leaves':>7} {'periods':>7} {'new s':>8} {'old s':>8} {'cvxpy s':>8} "
        f"{'old/new':>8} {'cvx/new':>8} {'new MB':>7} {'old MB':>7} {'max |diff|/max':>14}"
    )
    for n in args.compare_sizes:
        h = four_level_hierarchy(n)
        feeders = Feeders(rng, n)
        days = args.compare_days if n < 1000 else 1
        new = run(h, fs, feeders, days, "fast", "paper")
        old = run(h, fs, feeders, days, "dense", "paper")
        cvx = run(h, fs, feeders, days, "cvxpy", "paper") if n <= 100 else None
        diff = np.abs(new[4].values - old[4].values).max() / np.abs(old[4].values).max()
        print(
            f"{n:>7} {days:>7} {new[0]:>8.3f} {old[0]:>8.3f} "
            f"{cvx[0] if cvx else float('nan'):>8.3f} {old[0] / new[0]:>8.1f} "
            f"{(cvx[0] / new[0]) if cvx else float('nan'):>8.1f} {new[1] / 2**20:>7.1f} "
            f"{old[1] / 2**20:>7.1f} {diff:>14.1e}"
        )
    h = four_level_hierarchy(100)
    feeders = Feeders(rng, 100)
    new = run(h, fs, feeders, args.compare_days, "fast", "variance")
    cvx = run(h, fs, feeders, args.compare_days, "cvxpy", "variance")
    diff = np.abs(new[4].values - cvx[4].values).max() / np.abs(cvx[4].values).max()
    print(
        f"default 'variance' weights, 100 leaves x {args.compare_days} periods: new "
        f"{new[0]:.3f} s, cvxpy + OSQP {cvx[0]:.3f} s (ratio {cvx[0] / new[0]:.1f}x), "
        f"old path: refused (4800 leaf-steps > 4096), max |diff|/max {diff:.1e}"
    )

    print("\n== the new fast path at size, default-like weights (per node, part and period)")
    print(
        f"{'leaves':>7} {'nodes':>7} {'periods':>7} {'total s':>9} {'s/period':>9} "
        f"{'peak MB':>8} {'active %':>8} {'max KKT':>8}"
    )
    sizes, per_period = [], []
    configs = [(n, args.days) for n in args.sizes]
    if args.year_size:
        configs.append((args.year_size, args.year_days))
    for n, days in configs:
        h = four_level_hierarchy(n)
        feeders = Feeders(rng, n)
        sec, peak, active, kkt, _ = run(h, fs, feeders, days, "fast", "variance")
        print(
            f"{n:>7} {len(h.nodes):>7} {days:>7} {sec:>9.2f} {sec / days:>9.3f} "
            f"{peak / 2**20:>8.1f} {100 * active / (days * n * W):>8.1f} {kkt:>8.1e}",
            flush=True,
        )
        if days == args.days:
            sizes.append(n)
            per_period.append(sec / days)
    if len(sizes) >= 2:
        slope = np.polyfit(np.log(sizes), np.log(per_period), 1)[0]
        print(f"fitted growth exponent of time per period in leaves: {slope:.2f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"process peak resident memory (ru_maxrss): {rss:.0f} MB")


if __name__ == "__main__":
    main()
