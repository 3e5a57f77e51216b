"""Benchmark of the counting family (issue 14): each counter against the paper's binary tree.

Per counter and n (default 10⁵ and 10⁶; ``BENCH_COUNTING_N`` = comma-separated list):

* max and mean prefix-sum variance relative to the BT (exact: ``counter_variance``; empirical:
  ``BENCH_COUNTING_RUNS`` releases of a synthetic stream, squared error averaged over steps);
* streaming state (floats kept between pushes, noise buffer of 2¹⁶ draws aside) and time per
  push (2·10⁴ pushes);
* batch time as a ratio to one ``numpy.cumsum`` of the same stream in the same run;

then Mechanism 1's improvement factor over the paper's BT (⌊log₂ n⌋ + 1 levels, raw nodes,
ε = 1, no threshold) on the bundled household minutes (B = ``HOUSEHOLD_MINUTES_BOUND``,
ε = 1, δ = 2⁻²⁰, m = 50,000), per counter: predicted by ``plan_pak(counter=...)`` (α_BT / α)
and realised (RMS error of c(σ, n) of plain BT / of Mechanism 1 with the plan's parameters,
over ``BENCH_COUNTING_PAK_RUNS`` runs). The plans read the prefix (analysis only, §VI-B).
Run: ``python bench/bench_counting.py``.
"""

from __future__ import annotations

import os

import numpy as np
from _timing import best_of

from mechanisms import (
    BinaryTreeCounter,
    KaryTreeCounter,
    SmoothBinaryCounter,
    counter_variance,
    pak_release,
)
from mechanisms.core import bit_source
from mechanisms.counting import COUNTERS, counter_release

EPS, DELTA = 1.0, 2.0**-20
NS = [int(v) for v in os.environ.get("BENCH_COUNTING_N", "100000,1000000").split(",")]
RUNS = int(os.environ.get("BENCH_COUNTING_RUNS", "20"))
PAK_RUNS = int(os.environ.get("BENCH_COUNTING_PAK_RUNS", "20"))


def _state_floats(counter: str, n: int) -> int:
    levels = n.bit_length()
    if counter == "smooth_binary":
        c = SmoothBinaryCounter(n, epsilon=EPS, delta=DELTA, bound=1.0, seed=0)
        return len(c._end_sum) + len(c._node) + 3  # E[h], node[h], S, S_prev, last leaf
    if counter == "kary_tree":  # per level: the noise chunks kept (≤ 3 of 2⁸) and a digit
        c = KaryTreeCounter(n, epsilon=EPS, bound=1.0, seed=0)
        for v in np.zeros(min(n, 50_000)):
            c.push(v)
        return sum(len(ch) for level in c._chunks for ch in level.values()) + c.levels + 1
    if counter in ("binary_tree_consistent", "kary_tree_consistent"):
        return 2 * n  # batch only: the top-down pass needs every node (≈ 2n, ≈ n·k/(k − 1))
    return 6 * levels + 1  # BinaryTreeCounter: exact, node, z, z_left, slot per level


def _push_time(counter: str, x: np.ndarray) -> float:
    def run():
        if counter == "kary_tree":
            c = KaryTreeCounter(x.size, epsilon=EPS, bound=1.0, seed=1)
            for v in x:
                c.push(v)
        elif counter == "smooth_binary":
            c = SmoothBinaryCounter(x.size, epsilon=EPS, delta=DELTA, bound=1.0, seed=1)
            for v in x:
                c.push(v)
        else:
            c = BinaryTreeCounter(x.size, epsilon=EPS, bound=1.0, seed=1)
            online = counter == "binary_tree_online"
            for v in x:
                c.push(v)
                if online:
                    c.online_estimate()

    return best_of(run, 2) / x.size


def counters_table() -> None:
    print(
        "counter                    n        max/BT exact  mean/BT exact  max/BT emp  "
        "mean/BT emp  state floats  us/push  batch/cumsum"
    )
    for n in NS:
        x = np.random.default_rng(n).uniform(0.0, 1.0, n)
        truth = np.cumsum(x)
        t_cumsum = best_of(lambda x=x: np.cumsum(x), 5)
        ref = counter_variance("binary_tree", n, epsilon=EPS, bound=1.0)
        emp_ref = None
        for counter in COUNTERS:
            var = counter_variance(counter, n, epsilon=EPS, bound=1.0, delta=DELTA)
            bits = bit_source(7)
            sq = np.zeros(n)
            for _ in range(RUNS):
                rel = counter_release(
                    x, counter=counter, epsilon=EPS, delta=DELTA, bound=1.0, bits=bits
                )
                sq += (rel.prefix_sums - truth) ** 2
            sq /= RUNS
            if counter == "binary_tree":
                emp_ref = sq
            t_batch = best_of(
                lambda c=counter, x=x: counter_release(
                    x, counter=c, epsilon=EPS, delta=DELTA, bound=1.0, bits=bit_source(3)
                ),
                2,
            )
            push = (
                _push_time(counter, x[:20000]) * 1e6
                if not counter.endswith("_consistent")
                else float("nan")
            )
            print(
                f"{counter:24s} {n:>9,d}  {var.max() / ref.max():12.3f}  "
                f"{var.mean() / ref.mean():13.3f}  {sq.max() / emp_ref.max():10.3f}  "
                f"{sq.mean() / emp_ref.mean():11.3f}  {_state_floats(counter, n):12d}  "
                f"{push:7.2f}  {t_batch / t_cumsum:12.1f}"
            )


def mechanism1_table() -> None:
    from dpstream.datasets import HOUSEHOLD_MINUTES_BOUND, household_minutes_stream
    from planner import plan_pak

    x = np.asarray(household_minutes_stream(), dtype=np.float64)
    bnd, m, n = float(HOUSEHOLD_MINUTES_BOUND), 50_000, x.size
    truth = float(x.sum())
    bt = [
        pak_release(
            x, bound=bnd, epsilon=EPS, delta=DELTA, time_lag=m, threshold=False, seed=1000 + r
        ).prefix_sums[-1]
        - truth
        for r in range(PAK_RUNS)
    ]
    bt_rms = float(np.sqrt(np.mean(np.square(bt))))
    print(
        f"\nMechanism 1 on household minutes (n = {n:,}, B = {bnd:g}, m = {m:,}); "
        f"paper's BT RMS error at n: {bt_rms:.1f}"
    )
    print("counter                   predicted IF  realised IF  r      eps1/eps  RMS error")
    for counter in (None, *COUNTERS):
        plan = plan_pak(x[:m], n=n, bound=bnd, epsilon=EPS, delta=DELTA, beta=0.02, counter=counter)
        params = plan.release_parameters()
        params.setdefault("counter", "binary_tree")
        err = [
            pak_release(
                x, bound=bnd, epsilon=EPS, delta=DELTA, time_lag=m, seed=r, **params
            ).prefix_sums[-1]
            - truth
            for r in range(PAK_RUNS)
        ]
        rms = float(np.sqrt(np.mean(np.square(err))))
        name = "paper Eq.16 (tree bound)" if counter is None else counter
        print(
            f"{name:24s}  {plan.improvement_factor:12.2f}  {bt_rms / rms:11.2f}  "
            f"{plan.r:5.3f}  {plan.eps1_share:8.3f}  {rms:9.1f}"
        )


if __name__ == "__main__":
    counters_table()
    if PAK_RUNS > 0:  # BENCH_COUNTING_PAK_RUNS=0 skips the Mechanism 1 table
        mechanism1_table()
