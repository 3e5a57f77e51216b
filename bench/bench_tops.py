"""Benchmark of ToPS ([ToPS21]) on 2^20 perturbed steps, against one ``numpy.cumsum`` pass.

Prints, each as a ratio to ``numpy.cumsum`` over the same values in the same run:

1. ``tops_release`` end to end: m = 65,536 prefix values for the threshold, then r = 2^20
   perturbed steps (noise of the whole tree drawn from the OS secure source and projected once,
   clipping, node sums, smoothing), at ε_r = 0.05 (g = 256) and ε_r = 1 (g = 16), and with the
   secure source vs a seed;
2. ``ToPSStream.extend`` in chunks of 4,096 steps (the online path), and 2^14 ``push`` calls
   (per-step latency);
3. 10,000 ``range_sum`` queries by the canonical decomposition.

Data: synthetic exponential values (mean 1, clipped to B = 36). Run: ``python bench/bench_tops.py``.
"""

from __future__ import annotations

import time

import numpy as np
from _timing import timed

from mechanisms import ToPSStream, tops_release

M = 65_536
R = 1 << 20
BOUND = 36.0


def main() -> None:
    values = np.random.default_rng(2021).exponential(1.0, M + R).clip(0, BOUND)
    t_cumsum, _ = timed(lambda: np.cumsum(values), repeat=5)
    print(f"m = {M:,}, r = {R:,} (n = {values.size:,}); numpy.cumsum: {t_cumsum * 1e3:.2f} ms")

    for eps_r in (0.05, 1.0):
        for seed, label in ((None, "OS secure source"), (1, "seeded")):
            t, rel = timed(
                lambda eps_r=eps_r, seed=seed: tops_release(
                    values,
                    bound=BOUND,
                    epsilon_threshold=0.1,
                    epsilon_perturb=eps_r,
                    time_lag=M,
                    seed=seed,
                ),
                repeat=3,
            )
            print(
                f"[1] tops_release eps_r={eps_r:g} ({label}): {t:.3f} s = "
                f"{t / t_cumsum:.1f}x cumsum  (g = {rel.leaf_size}, L = {rel.levels}, "
                f"theta = {rel.threshold:.3g})"
            )

    def chunks() -> ToPSStream:
        s = ToPSStream(
            bound=BOUND,
            epsilon_threshold=0.1,
            epsilon_perturb=0.05,
            time_lag=M,
            horizon=R,
            seed=None,
        )
        for k in range(0, values.size, 4096):
            s.extend(values[k : k + 4096])
        return s

    t_chunks, _ = timed(chunks, repeat=1)
    print(f"[2] ToPSStream.extend, chunks of 4,096: {t_chunks:.3f} s = {t_chunks / t_cumsum:.1f}x")
    s = ToPSStream(bound=BOUND, epsilon_threshold=0.1, epsilon_perturb=0.05, time_lag=M, horizon=R)
    s.extend(values[:M])
    pushes = 1 << 14
    start = time.perf_counter()
    for v in values[M : M + pushes].tolist():
        s.push(v)
    t_push = (time.perf_counter() - start) / pushes
    print(f"    ToPSStream.push: {t_push * 1e6:.1f} us per step")

    rel = tops_release(
        values, bound=BOUND, epsilon_threshold=0.1, epsilon_perturb=0.05, time_lag=M, seed=1
    )
    q = np.sort(np.random.default_rng(0).integers(0, R, size=(10_000, 2)), axis=1).tolist()
    start = time.perf_counter()
    for i, j in q:
        rel.range_sum(M + i, M + j)  # input steps
    t_q = (time.perf_counter() - start) / len(q)
    print(f"[3] range_sum: {t_q * 1e6:.1f} us per query (canonical decomposition)")


if __name__ == "__main__":
    main()
