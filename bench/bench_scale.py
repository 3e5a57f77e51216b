"""Benchmark: ONE day of 100,000 feeders, split inside the day on Dask x2 vs one process.

The daily job releases one period, so only parallelism *inside* the period helps it
(``dpstream.engine._subtree``). Input: national -> 10 regions -> 1,000 substations -> 100,000
feeders (``--feeders``), the synthetic feeders of ``bench_hierarchy.Feeders`` (SimBench
profiles, scaled, shifted, noisy), one day, written to a long Parquet file sorted by feeder
(one row group per substation, names sorting in hierarchy order). The default release
(``k="auto"``: the in-stream planner and prior; ``--k 10``: a fixed k with equally spaced
samples and "variance" weights), seed 1 (the runs must agree), each run in a fresh process:

1. ``classic``: ``release_parquet_to_store(engine="local")`` without a cut: the period read
   whole (wide), planned by one planner and released in one piece (k="auto":
   ``dpstream.store._auto``; fixed k: ``release_period``) -- the one-process path; its seeded
   noise is drawn differently, so its output is not compared;
2. ``split-1``: ``engine="local", cut=1``: the split release in one process (the subtrees
   are objects of this process);
3. ``dask-2``: ``engine="dask", n_workers=2``: the same subtrees as Dask actors on a
   ``LocalCluster`` of 2 single-threaded worker processes (made and closed by the call, its
   start-up included in the wall time), each reading its feeders from the file (k="auto":
   each subtree planning its own nodes, ``dpstream.engine._auto_split``).

Printed per run: wall seconds, CPU seconds of the client and of the workers (``RUSAGE_CHILDREN``
once the cluster is closed), peak resident memory of the process tree (sampled every 0.5 s)
and of each process (the client's, the largest worker's: ``ru_maxrss``),
the load average before the run (the 2 cores are shared), and for ``dask-2`` the largest
difference from ``split-1`` (must be rounding). Ratios are against ``split-1``.

Usage: ``python bench/bench_scale.py [--feeders 100000] [--k auto] [--workdir DIR]
[--out FILE]``. The million-meter day is ``scripts/million_meters.py`` (results in
docs/results/scale_million.md).
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
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
W = 48
KW = {"epsilon": 1.0, "alpha": 50.0, "seed": 1}


def tree(feeders: int, regions: int = 10, per_sub: int = 100) -> dict[str, list[str]]:
    """national -> regions -> substations of ``per_sub`` feeders; names sort in tree order."""
    subs = max(1, feeders // per_sub)
    ch: dict[str, list[str]] = {"N": [f"R{r:02d}" for r in range(regions)]}
    for s in range(subs):
        ch.setdefault(f"R{s % regions:02d}", []).append(f"R{s % regions:02d}S{s:04d}")
    for f in range(feeders):
        sub = ch[f"R{(f % subs) % regions:02d}"][(f % subs) // regions]
        ch.setdefault(sub, []).append(f"{sub}F{f:06d}")
    return ch


def write(workdir: Path, feeders: int, seed: int = 0) -> None:
    """One day of the synthetic feeders as a long Parquet file, one row group per substation."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_hierarchy import Feeders

    ch = tree(feeders)
    values = Feeders(np.random.default_rng(seed), feeders).day(0)  # (L, W)
    index = {f"F{f:06d}": f for f in range(feeders)}
    stamps = np.datetime64("2016-01-01T00:00") + np.arange(W) * np.timedelta64(30, "m")
    ds = stamps.astype("datetime64[ns]")
    schema = pa.schema(
        [("unique_id", pa.string()), ("ds", pa.timestamp("ns")), ("y", pa.float64())]
    )
    subs = sorted(s for r in ch["N"] for s in ch[r])
    with pq.ParquetWriter(workdir / "feeders.parquet", schema) as writer:
        for s in subs:
            ids = sorted(ch[s])
            rows = values[[index[i[-7:]] for i in ids]]
            table = pa.table(
                {
                    "unique_id": pa.array(np.repeat(ids, W)),
                    "ds": pa.array(np.tile(ds, len(ids))),
                    "y": pa.array(rows.reshape(-1)),
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=table.num_rows)
    (workdir / "hierarchy.json").write_text(json.dumps(ch))


def _tree_rss() -> int:
    import psutil

    total = 0
    proc = psutil.Process()
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run(workdir: Path, name: str, k: int | str = "auto") -> dict:
    """One release into a fresh store (in a fresh process); the store's values saved."""
    from dpstream.store import ReleaseStore
    from dpstream.store._source import release_parquet_to_store

    engine, cut = {"classic": ("local", None), "split-1": ("local", 1), "dask-2": ("dask", None)}[
        name
    ]
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss())
            time.sleep(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    os.environ["DPSTREAM_HOME"] = str(workdir / f"home-{name}-{time.time_ns()}")  # own ledgers
    ch = json.loads((workdir / "hierarchy.json").read_text())
    for old in workdir.glob(f"{name}.db*"):
        old.unlink()
    load = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with ReleaseStore(workdir / f"{name}.db", dataset=f"bench-{name}-{time.time_ns()}") as st:
        release_parquet_to_store(
            st,
            workdir / "feeders.parquet",
            hierarchy=ch,
            engine=engine,
            n_workers=2,
            cut=cut,
            **KW,
            **({} if k == "auto" else {"k": k, "sampling": "equal"}),
        )
        wall = time.perf_counter() - t0
        values = st.read(st.ordinals()).to_numpy()
    done.set()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    np.save(workdir / f"{name}.npy", values)
    return {
        "run": name,
        "k": k,
        "wall_s": round(wall, 1),
        "client_cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1),
        "workers_cpu_s": round(kids.ru_utime + kids.ru_stime, 1),
        "peak_gb": round(peak[0] / 1e9, 2),
        "client_maxrss_gb": round(r1.ru_maxrss / 1e6, 2),
        "worker_maxrss_gb": round(kids.ru_maxrss / 1e6, 2),  # the largest worker's
        "load": round(load, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--feeders", type=int, default=100_000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--runs", nargs="+", default=["split-1", "dask-2", "classic"])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--k", default="auto", help="'auto' (the default release) or an int")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    k = args.k if args.k == "auto" else int(args.k)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_scale_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.child:
        print("RESULT " + json.dumps(run(workdir, args.child, k)), flush=True)
        return
    stamp = workdir / "feeders.json"
    if not stamp.exists() or json.loads(stamp.read_text()) != args.feeders:
        write(workdir, args.feeders)
        stamp.write_text(json.dumps(args.feeders))
    rows = []
    for name in args.runs:
        cmd = [sys.executable, __file__, "--child", name, "--workdir", str(workdir), "--k", str(k)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if not lines:
            print(f"{name}: failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}")
            continue
        res = json.loads(lines[-1][7:])
        rows.append(res)
        print(json.dumps(res), flush=True)
    by = {r["run"]: r for r in rows}
    if "split-1" in by and "dask-2" in by:
        a, b = np.load(workdir / "split-1.npy"), np.load(workdir / "dask-2.npy")
        by["dask-2"]["max_diff_vs_split_1"] = float(np.abs(a - b).max() / np.abs(a).max())
        base = by["split-1"]
        for r in rows:
            cpu = r["client_cpu_s"] + r["workers_cpu_s"]
            base_cpu = base["client_cpu_s"] + base["workers_cpu_s"]
            r["wall_ratio"] = round(r["wall_s"] / base["wall_s"], 2)
            r["cpu_ratio"] = round(cpu / base_cpu, 2)
    print(f"{args.feeders:,} feeders, one day (ratios against split-1, the one-process split):")
    for r in rows:
        print("  " + json.dumps(r))
    if args.out is not None:
        with args.out.open("a") as f:
            for r in rows:
                f.write(json.dumps({"feeders": args.feeders, **r}) + "\n")


if __name__ == "__main__":
    main()
