"""Benchmark: the release store and the Dask engine against the in-memory pipeline.

Synthetic feeders built from the bundled SimBench profiles (each a real feeder's year, scaled by
a random factor in [0.5, 2], shifted by a random number of days, plus 5 % noise), under one
national node, one month (or ``--days``) of half-hours. Four runs in the same process, same
seed, same data:

1. ``release_optstream(frame)`` in memory (the baseline);
2. ``ReleaseStore.release_optstream`` with ``engine="local"`` (store overhead: a charge and a
   committed period per day, per-period weights);
3. the same with ``engine="dask"`` on a ``LocalCluster`` of 2 single-threaded workers made and
   closed by the call (its start-up included);
4. the same input again into the filled store (nothing released: read back).

Prints wall times, the ratios to (1), and the peak resident memory of this process. Growth
with the number of feeders is h15a's benchmark (the post-processing must first be linear).

Usage: ``python bench/bench_store.py [--feeders 60] [--days 30]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import dpstream  # noqa: E402


def feeders(n: int, days: int, seed: int = 0) -> pd.DataFrame:
    base = dpstream.load_simbench()
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, base.shape[1], n)
    shift = rng.integers(0, 300, n) * 48
    steps = 48 * days
    out = np.empty((steps, n))
    for j in range(n):
        x = base.iloc[:, cols[j]].to_numpy()
        x = np.roll(x, -shift[j])[:steps] * rng.uniform(0.5, 2.0)
        out[:, j] = np.maximum(x * (1 + 0.05 * rng.standard_normal(steps)), 0.0)
    return pd.DataFrame(out, index=base.index[:steps], columns=[f"f{j}" for j in range(n)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--feeders", type=int, default=60)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    frame = feeders(args.feeders, args.days)
    tree = {"national": list(frame.columns)}
    kw = {"epsilon": 1.0, "alpha": 50.0, "hierarchy": tree, "seed": 1}
    times = {}
    t0 = time.perf_counter()
    dpstream.release_optstream(frame, **kw)
    times["in memory"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        for name, engine in (("store, local", "local"), ("store, dask x2", "dask")):
            with dpstream.ReleaseStore(f"{d}/{engine}.db") as store:
                t0 = time.perf_counter()
                store.release_optstream(frame, engine=engine, n_workers=2, **kw)
                times[name] = time.perf_counter() - t0
        with dpstream.ReleaseStore(f"{d}/local.db") as store:
            t0 = time.perf_counter()
            store.release_optstream(frame, **kw)
            times["store, again (read)"] = time.perf_counter() - t0
    base = times["in memory"]
    print(f"{args.feeders} feeders x {args.days} days ({frame.size:,} leaf values)")
    for name, sec in times.items():
        print(f"  {name:22s} {sec:8.2f} s   ratio to in-memory {sec / base:6.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak resident memory of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
