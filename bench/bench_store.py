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

Scale mode (issue 15): ``python bench/bench_store.py --scale [--configs 1000x30 10000x30
100000x30 10000x365] [--out docs/results/store_scale.md] [--workdir DIR]``. For each
configuration (feeders x days) the synthetic feeders of ``bench_hierarchy.Feeders`` (SimBench
profiles, scaled, shifted, noisy; a fifth low-signal) under national -> 10 regions -> substations
of 100 -> feeders are written, day by day, to a *long* Parquet file (``unique_id``, ``ds``,
``y``; one row group per day), never a month in memory. Then two runs, each in its own fresh
process so that ``ru_maxrss`` is the run's own peak: ``release_parquet_to_store`` with
``engine="local"`` (one process reads, releases and commits each day in turn) and with
``engine="dask"`` on a ``LocalCluster`` of 2 single-threaded worker processes (each worker
reads its day from the Parquet file by a filter on ``ds``; the client never holds a day's
values). Reported per run: wall time of the release (the Dask cluster's start-up separately),
CPU seconds (user + system) the release took in every process (client, scheduler thread and
workers: ``resource.getrusage`` before and after, in the workers through ``Client.run``) --
the fair measure on a machine whose 2 cores are shared -- and the peak resident memory of the
client process and of each worker. k = 10 fixed ("l1" sampler, default "variance" weights):
the in-stream planner (k="auto") builds a dense (nodes x nodes) hierarchy matrix, so it does
not run at 10^4-10^5 nodes. Rows are appended to ``--out`` as each run finishes; the fitted
growth exponent of wall time in leaves (least squares on logs, the one-month rows) at the end.
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


# -- scale mode ------------------------------------------------------------------------------

W = 48
SCALE_KW = {"epsilon": 1.0, "alpha": 50.0, "k": 10, "seed": 1}


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _usage() -> tuple[float, float]:
    """(peak resident MiB, CPU seconds user + system) of the calling process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_maxrss / 1024, r.ru_utime + r.ru_stime


def scale_tree(n: int) -> dict[str, list[str]]:
    """national -> regions -> substations of 100 -> feeders (bench_hierarchy's shape)."""
    from bench_hierarchy import four_level_hierarchy

    h = four_level_hierarchy(n)
    return {parent: list(kids) for parent, kids in h.children.items()}


def write_feeders(n: int, days: int, path: str, seed: int = 0) -> None:
    """The synthetic feeders, day by day, as a long Parquet file (one row group per day)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_hierarchy import Feeders

    feeders = Feeders(np.random.default_rng(seed), n)
    names = pa.array([f"f{j}" for j in range(n)])
    ids = pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(n, dtype=np.int32), W)), names)
    start = np.datetime64("2016-01-01T00:00")
    schema = pa.schema([("unique_id", ids.type), ("ds", pa.timestamp("ns")), ("y", pa.float64())])
    with pq.ParquetWriter(path, schema) as writer:
        for d in range(days):
            stamps = start + (d * W + np.arange(W)) * np.timedelta64(30, "m")
            table = pa.table(
                {
                    "unique_id": ids,
                    "ds": pa.array(np.repeat(stamps.astype("datetime64[ns]"), n)),
                    "y": pa.array(feeders.day(d).T.ravel()),  # rows: time-major, then feeder
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=table.num_rows)


def run_scale(n: int, path: str, engine: str, store_path: str) -> dict:
    """One release of the Parquet file into a new store; wall time and peak memories."""
    from dpstream.store import release_parquet_to_store

    tree = scale_tree(n)
    out = {"engine": engine}
    client = cluster = None
    scheduler = None
    if engine == "dask":
        import logging

        import dask
        from distributed import Client, LocalCluster

        from dpstream.engine._run import worker_environ

        t0 = time.perf_counter()
        with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):
            cluster = LocalCluster(  # as dpstream's engine makes it (no MALLOC_TRIM_THRESHOLD_)
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
        client = Client(cluster)
        scheduler = cluster.scheduler_address
        out["startup_s"] = time.perf_counter() - t0
    try:
        before = {} if client is None else client.run(_usage)
        cpu0 = _usage()[1]
        with dpstream.ReleaseStore(store_path) as store:
            t0 = time.perf_counter()
            ords = release_parquet_to_store(
                store, path, hierarchy=tree, engine=engine, scheduler=scheduler, **SCALE_KW
            )
            out["wall_s"] = time.perf_counter() - t0
            out["periods"] = len(store.ordinals())
            assert out["periods"] == len(ords)
        if client is not None:
            after = client.run(_usage)
            out["worker_mib"] = sorted(u[0] for u in after.values())
            out["worker_cpu_s"] = [after[a][1] - before.get(a, (0, 0))[1] for a in after]
    finally:
        if client is not None:
            client.close()
            cluster.close()
    out["client_mib"], cpu1 = _usage()
    out["client_cpu_s"] = cpu1 - cpu0
    out["cpu_s"] = out["client_cpu_s"] + sum(out.get("worker_cpu_s", []))
    return out


def _child(args: list[str]) -> dict:
    """Run this script in a fresh process (its own ru_maxrss) and parse its JSON line."""
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scale(configs: list[str], out: str, workdir: str, engines=("local", "dask")) -> None:
    """The scale table (module notes), one row appended per finished run."""
    rows = []
    md = Path(out)
    with md.open("a") as f:
        f.write(
            f"\n## Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
            f"({os.cpu_count()} cores, shared)\n\n"
            "| feeders | nodes | days | engine | wall s | s/day | release CPU s, all processes | "
            "Dask start-up s | peak MiB client | peak MiB per worker | input MB |\n"
            "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
        )
    for cfg in configs:
        n, days = (int(x) for x in cfg.lower().split("x"))
        nodes = sum(len(v) for v in scale_tree(n).values()) + 1
        path = f"{workdir}/feeders_{n}x{days}.parquet"
        t0 = time.perf_counter()
        gen = _child(["--gen", str(n), str(days), path])
        print(f"{cfg}: input written in {time.perf_counter() - t0:.0f} s {gen}", flush=True)
        mb = Path(path).stat().st_size / 1e6 if Path(path).exists() else float("nan")
        for engine in engines:
            store = f"{workdir}/store_{n}x{days}_{engine}.db"
            Path(store).unlink(missing_ok=True)
            r = _child(["--run", str(n), path, engine, store])
            Path(store).unlink(missing_ok=True)
            r.update(feeders=n, days=days, nodes=nodes)
            rows.append(r)
            print(cfg, r, flush=True)
            if "error" in r:
                line = f"| {n:,} | {nodes:,} | {days} | {engine} | failed: {r['error']} ||||||\n"
            else:
                workers = " / ".join(f"{m:.0f}" for m in r.get("worker_mib", [])) or "-"
                line = (
                    f"| {n:,} | {nodes:,} | {days} | {engine} | {r['wall_s']:.1f} | "
                    f"{r['wall_s'] / days:.2f} | {r['cpu_s']:.0f} | "
                    f"{r.get('startup_s', float('nan')):.1f} | "
                    f"{r['client_mib']:.0f} | {workers} | {mb:.0f} |\n"
                )
            with md.open("a") as f:
                f.write(line)
        Path(path).unlink(missing_ok=True)
    ok = [r for r in rows if "error" not in r]
    lines = []
    for n, days in {(r["feeders"], r["days"]) for r in ok}:
        pair = {r["engine"]: r for r in ok if (r["feeders"], r["days"]) == (n, days)}
        if len(pair) == 2:
            lines.append(
                f"- {n:,} x {days} days: Dask x2 / single process: wall "
                f"{pair['dask']['wall_s'] / pair['local']['wall_s']:.2f}, CPU "
                f"{pair['dask']['cpu_s'] / pair['local']['cpu_s']:.2f}"
            )
    for engine in ("local", "dask"):
        month = [r for r in ok if r["engine"] == engine and r["days"] == 30]
        if len(month) >= 2:
            x = np.log([r["feeders"] for r in month])
            for key in ("wall_s", "cpu_s"):
                slope = np.polyfit(x, np.log([r[key] for r in month]), 1)[0]
                lines.append(
                    f"- fitted growth exponent of {key[:-2]} time in leaves ({engine}, one "
                    f"month, {len(month)} sizes): {slope:.2f}"
                )
    with md.open("a") as f:
        f.write("\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--feeders", type=int, default=60)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument(
        "--configs", nargs="*", default=["1000x30", "10000x30", "100000x30", "10000x365"]
    )
    parser.add_argument("--out", default="docs/results/store_scale.md")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--engines", nargs="*", default=["local", "dask"])
    parser.add_argument("--gen", nargs=3, default=None)
    parser.add_argument("--run", nargs=4, default=None)
    args = parser.parse_args()
    if args.gen:
        t0 = time.perf_counter()
        write_feeders(int(args.gen[0]), int(args.gen[1]), args.gen[2])
        print(json.dumps({"gen_s": time.perf_counter() - t0, "gen_mib": _usage()[0]}))
        return
    if args.run:
        print(json.dumps(run_scale(int(args.run[0]), args.run[1], args.run[2], args.run[3])))
        return
    if args.scale:
        with tempfile.TemporaryDirectory(dir=args.workdir) as d:
            scale(args.configs, args.out, d, tuple(args.engines))
        return
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
