"""Benchmark: the daily job at the default over several days, split in one process vs whole.

``bench_scale.py`` measures the first day of a store (nothing released yet: the planner's rule).
Later days plan from the released ones (the variogram, every candidate scored on every
subtree, then the prior) and rebuild the planners from the store first. Here each day is one
call into one store, as the operator's daily job: ``split-1`` (``cut=1``: 10 region subtrees,
each with its own planner, in one process) and ``classic`` (no cut: one planner, the day
released whole), the default ``k="auto"``, seed 1, each mode in a fresh process. Printed per
day: CPU seconds of the call, its wall seconds, the planned k and basis, the process's peak
memory so far and the load average (the 2 cores are shared).

Usage: ``python bench/bench_scale_days.py [--feeders 100000] [--days 3] [--workdir DIR]
[--out FILE]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
W = 48


def write(workdir: Path, feeders: int, days: int, seed: int = 0) -> None:
    """One long Parquet file per day (``day{d}.parquet``) and the hierarchy."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_hierarchy import Feeders
    from bench_scale import tree

    ch = tree(feeders)
    gen = Feeders(np.random.default_rng(seed), feeders)
    index = {f"F{f:06d}": f for f in range(feeders)}
    leaves = sorted(x for r in ch["N"] for s in ch[r] for x in ch[s])
    order = [index[i[-7:]] for i in leaves]
    start = np.datetime64("2016-01-01T00:00")
    for d in range(days):
        stamps = (start + (d * W + np.arange(W)) * np.timedelta64(30, "m")).astype("<M8[ns]")
        table = pa.table(
            {
                "unique_id": pa.array(np.repeat(leaves, W)),
                "ds": pa.array(np.tile(stamps, len(leaves))),
                "y": pa.array(gen.day(d)[order].reshape(-1)),
            }
        )
        pq.write_table(table, workdir / f"day{d}.parquet")
    (workdir / "hierarchy.json").write_text(json.dumps(ch))


def run(workdir: Path, mode: str, days: int) -> list[dict]:
    """Release the days one call each into a fresh store (in this fresh process)."""
    from dpstream.store import ReleaseStore
    from dpstream.store._source import release_parquet_to_store

    ch = json.loads((workdir / "hierarchy.json").read_text())
    os.environ["DPSTREAM_HOME"] = str(workdir / f"home-{mode}-{time.time_ns()}")  # own ledgers
    for old in workdir.glob(f"{mode}.db*"):
        old.unlink()
    out = []
    with ReleaseStore(workdir / f"{mode}.db", dataset=f"days-{mode}-{time.time_ns()}") as st:
        for d in range(days):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            release_parquet_to_store(
                st, workdir / f"day{d}.parquet", epsilon=1.0, alpha=50.0, hierarchy=ch, seed=1,
                cut=1 if mode == "split-1" else None,
            )  # fmt: skip
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            plan = json.loads(
                st._con.execute("SELECT plan FROM periods ORDER BY ordinal DESC").fetchone()[0]
            )
            out.append(
                {
                    "run": mode,
                    "day": d,
                    "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1),
                    "wall_s": round(wall, 1),
                    "k": plan.get("k"),
                    "basis": plan.get("basis"),
                    "maxrss_gb": round(r1.ru_maxrss / 1e6, 2),
                    "load": round(os.getloadavg()[0], 1),
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--feeders", type=int, default=100_000)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_days_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.child:
        for row in run(workdir, args.child, args.days):
            print("RESULT " + json.dumps(row), flush=True)
        return
    stamp = workdir / "shape.json"
    if not stamp.exists() or json.loads(stamp.read_text()) != [args.feeders, args.days]:
        write(workdir, args.feeders, args.days)
        stamp.write_text(json.dumps([args.feeders, args.days]))
    rows = []
    for mode in ("split-1", "classic"):
        cmd = [sys.executable, __file__, "--child", mode, "--workdir", str(workdir)]
        proc = subprocess.run([*cmd, "--days", str(args.days)], capture_output=True, text=True)
        got = [json.loads(x[7:]) for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if not got:
            print(f"{mode}: failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}")
        rows += got
    by = {(r["run"], r["day"]): r for r in rows}
    for r in rows:
        base = by.get(("classic", r["day"]))
        if base is not None and base["cpu_s"] > 0:
            r["cpu_vs_classic"] = round(r["cpu_s"] / base["cpu_s"], 2)
        print(json.dumps(r))
    if args.out is not None:
        with args.out.open("a") as f:
            for r in rows:
                f.write(json.dumps({"feeders": args.feeders, **r}) + "\n")


if __name__ == "__main__":
    main()
