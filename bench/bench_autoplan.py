"""Benchmark of ``release_optstream(k="auto")``'s planning step at scale: one period planned from
56 earlier periods (the prior's look-back) of a feeders -> regions -> nation tree.

Prints the time of one ``plan_for_period`` (candidate k, level shares, the prior and its
aggregates), the process's peak memory before and after it, and the time as a ratio to the
physical floor of reading the planner's state once (one pass summing every stored period's
values, noise and error arrays, same run).

    python bench/bench_autoplan.py [--leaves 100000] [--periods 56]

Measured on this machine (2 cores, 24 GB), 100,000 leaves x 56 periods: 166 s and 23.3 GB peak
before the prior read its periods a block of nodes at a time and ``kriging_bias`` became one
kernel for every node; 57 s and 11.6 GB after (the state alone: 10.7 GB).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from dpstream.pipelines import _autoplan as ap
from dpstream.pipelines._period_steps import Measurement
from planner._roughness import period_roughness
from postproc import Hierarchy


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=100_000)
    parser.add_argument("--periods", type=int, default=ap.PRIOR_DAYS)
    parser.add_argument("--regions", type=int, default=100)
    args = parser.parse_args()
    w = 48
    per_region = max(args.leaves // args.regions, 1)
    children = {"nation": [f"r{i}" for i in range(args.regions)]}
    for i in range(args.regions):
        children[f"r{i}"] = [f"f{i}_{j}" for j in range(per_region)]
    tree = Hierarchy(children=children)
    cfg = ap._config(
        epsilon=1.0, alpha=50.0, w=w, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=tree, nodes=list(tree.nodes), prior=True,
    )  # fmt: skip
    n = len(tree.nodes)
    rng = np.random.default_rng(0)  # synthetic measurements: a benchmark, nothing is released
    sampled = np.zeros((n, w), dtype=bool)
    sampled[:, ::8] = True
    own = np.zeros(n, dtype=bool)
    own[cfg.leaf_nodes] = True
    state = ap.PlanState(w=w, cfg=cfg)
    for _ in range(args.periods):
        m = Measurement(values=rng.normal(100.0, 10.0, (n, w)), noise=np.full((n, w), 25.0),
                        sampled=sampled)  # fmt: skip
        state.measurements.append(m)
        state.roughness.append(period_roughness(m.values, m.noise, m.sampled))
        state.errors.append(np.full((n, w), 30.0))
        state.independent.append(own)
    before = _peak_gb()
    t0 = time.perf_counter()
    total = 0.0
    for m, e in zip(state.measurements, state.errors, strict=True):
        total += float(m.values.sum() + m.noise.sum() + e.sum())
    floor = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan, prior = ap.plan_for_period(state, cfg, r=w)
    took = time.perf_counter() - t0
    print(
        f"{args.leaves:,} leaves ({n:,} nodes) x {args.periods} periods: plan_for_period "
        f"{took:.1f} s (k = {plan.k}, prior over {prior.n_periods} periods) = "
        f"{took / floor:.0f}x one pass over the state ({floor:.2f} s); peak memory "
        f"{before:.1f} GB with the state, {_peak_gb():.1f} GB after planning"
    )


if __name__ == "__main__":
    main()
