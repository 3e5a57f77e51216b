"""A million meters: one day of a 5-level synthetic hierarchy released through the store.

national -> 10 regions -> 1,000 substations -> 10,000 feeders -> 1,000,000 meters (defaults;
``--regions/--subs/--feeders/--meters`` are the fan-outs). Each meter is the bundled
household's year (``dpstream.datasets.load_household``, column ``total``, Wh per half-hour)
shifted by a random number of days, scaled by a random factor in [0.5, 2], plus 5 % Gaussian
noise, clipped at 0. The input is written to a *long* Parquet file (``unique_id``, ``ds``,
``y``), one row group per substation, never more than one substation in memory; the hierarchy
to a JSON file.

Then one release of the day through :func:`dpstream.store._source.release_parquet_to_store`
with the default ``k="auto"`` (the in-stream planner and prior; ``--k 10``: a fixed k with
equally spaced samples and the default "variance" weights), in a fresh process so that its
peak memory is its own: ``--engine dask --workers 2`` splits the day into subtrees on a
``LocalCluster`` of single-threaded worker processes (each reads its own meters from the
file); ``--engine local --cut C`` runs the same subtrees in one process. A sampler thread
records the resident memory of the whole process tree (client + workers) every 0.5 s; CPU
seconds of the client and of the workers (``RUSAGE_CHILDREN``, counted once the cluster is
closed) and the load average before and after are reported (the 2 cores are shared).

Usage::

    python scripts/million_meters.py --workdir /tmp/mm [--meters 100] [--engine dask]
        [--workers 2] [--cut C] [--k auto] [--out docs/results/scale_million.md]

The daily job (one fresh process a day into one kept store; ``--workdir`` still names where
the generated hierarchy is): ``--day-file DAY.parquet --store STORE.db``.

The steady state in one command: ``--days N --store STORE.db [--first-day A --last-day B]
[--timeline FILE]`` writes ``day1.parquet`` ... ``dayN.parquet`` into ``--workdir`` (one file a
day, the same meters every day: :func:`generate_days`, the draws of ``generate(days=N)``; reused
when they are there), then runs the daily job for days A..B (default 1..N), each in a fresh
process into the one store, one result line a day (``--out``). ``--timeline FILE``: the
resident memory of every process of the job (the release, then each process under it: the
Dask nannies and workers) once a second, one file a day (``FILE`` with ``.dayK`` before its
suffix), and the moment of the largest sum reported in the day's result (``timeline_peak``).
Run it at high priority in a lock for big-memory runs, e.g. ``flock /tmp/bigrun.lock nice -n
-15 python scripts/million_meters.py --workdir W --days 11 --store W/store.db --timeline
W/timeline.txt --out W/result.jsonl``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

W = 48
DAY = "2007-06-14"  # the released day (a Thursday)


def names(regions: int, subs: int, feeders: int, meters: int) -> dict[str, list[str]]:
    """The hierarchy ``{parent: children}``; zero-padded names sort in writing order."""
    ch: dict[str, list[str]] = {"N": [f"R{r:02d}" for r in range(regions)]}
    for r in ch["N"]:
        ch[r] = [f"{r}S{s:03d}" for s in range(subs)]
        for s in ch[r]:
            ch[s] = [f"{s}F{f:02d}" for f in range(feeders)]
            for f in ch[s]:
                ch[f] = [f"{f}M{m:03d}" for m in range(meters)]
    return ch


def _meter_blocks(regions: int, subs: int, feeders: int, meters: int, seed: int, days: int):
    """The hierarchy, the time stamps, then per substation its meters' names and their
    (n, 48 days) values: the generator's draws, in writing order."""
    import pandas as pd

    from dpstream.datasets import load_household

    year = load_household(2007)["total"].to_numpy()
    stamps = pd.date_range(DAY, periods=W * days, freq="30min")
    day0 = int((stamps[0] - pd.Timestamp("2007-01-01")) / pd.Timedelta("30min"))
    ch = names(regions, subs, feeders, meters)
    rng = np.random.default_rng(seed)
    yield ch, stamps

    for r in ch["N"]:
        for s in ch[r]:
            ids = [m for f in ch[s] for m in ch[f]]
            n = len(ids)
            shift = rng.integers(0, 365, n) * W
            idx = (day0 + shift[:, None] + np.arange(W * days)[None, :]) % year.size
            y = year[idx] * rng.uniform(0.5, 2.0, n)[:, None]
            y = np.maximum(y * (1.0 + 0.05 * rng.standard_normal(y.shape)), 0.0)
            yield ids, y


def _schema():
    import pyarrow as pa

    return pa.schema([("unique_id", pa.string()), ("ds", pa.timestamp("ns")), ("y", pa.float64())])


def generate(
    workdir: Path, regions: int, subs: int, feeders: int, meters: int, seed: int, days: int = 1
):
    """Write ``meters.parquet`` (one row group per substation; ``days`` days from ``DAY``) and
    ``hierarchy.json``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blocks = _meter_blocks(regions, subs, feeders, meters, seed, days)
    ch, stamps = next(blocks)
    schema = _schema()
    ds = pa.array(np.tile(stamps.to_numpy(), feeders * meters))
    with pq.ParquetWriter(workdir / "meters.parquet", schema) as writer:
        for ids, y in blocks:
            n = len(ids)
            table = pa.table(
                {"unique_id": pa.array(np.repeat(ids, W * days)), "ds": ds, "y": y.reshape(-1)},
                schema=schema,
            )
            writer.write_table(table, row_group_size=n * W * days)
    (workdir / "hierarchy.json").write_text(json.dumps(ch))


def generate_days(
    workdir: Path, regions: int, subs: int, feeders: int, meters: int, seed: int, days: int
) -> list[Path]:
    """Write ``day1.parquet`` ... ``day{days}.parquet`` (one row group per substation each) and
    ``hierarchy.json``: the draws of :func:`generate` with ``days`` (the same meters every day,
    each day's 48 steps in its own file). Returns the files' paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blocks = _meter_blocks(regions, subs, feeders, meters, seed, days)
    ch, stamps = next(blocks)
    schema = _schema()
    paths = [workdir / f"day{d + 1}.parquet" for d in range(days)]
    writers = [pq.ParquetWriter(path, schema) for path in paths]
    try:
        for ids, y in blocks:
            n = len(ids)
            uid = pa.array(np.repeat(ids, W))
            for d in range(days):
                ds = pa.array(np.tile(stamps[d * W : (d + 1) * W].to_numpy(), n))
                t = pa.table(
                    {"unique_id": uid, "ds": ds, "y": y[:, d * W : (d + 1) * W].reshape(-1)},
                    schema=schema,
                )
                writers[d].write_table(t, row_group_size=n * W)
    finally:
        for writer in writers:
            writer.close()
    (workdir / "hierarchy.json").write_text(json.dumps(ch))
    return paths


class Timeline:
    """Resident memory of a process and every process under it, once a second, to ``path``:
    one line ``t  own  others (largest first) ... sum S`` in GB; :attr:`peak` is the line of
    the largest sum (``{"t_s", "sum_gb", "gb"}``, the release's own first)."""

    def __init__(self, pid: int, path: Path, every: float = 1.0) -> None:
        self.pid, self.path, self.every = pid, path, every
        self.peak: dict | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        t0 = time.time()
        with open(self.path, "w") as out:
            while not self._done.is_set():
                try:
                    proc = psutil.Process(self.pid)
                    own = proc.memory_info().rss
                    kids = []
                    for c in proc.children(recursive=True):
                        try:
                            kids.append(c.memory_info().rss)
                        except psutil.Error:
                            pass
                except psutil.Error:
                    break
                rows = [own, *sorted(kids, reverse=True)]
                t, total = time.time() - t0, sum(rows)
                gb = [round(r / 1e9, 2) for r in rows]
                out.write(f"{t:.0f} " + " ".join(f"{g:.2f}" for g in gb)
                          + f" sum {total / 1e9:.2f}\n")  # fmt: skip
                out.flush()
                if self.peak is None or total / 1e9 > self.peak["sum_gb"]:
                    self.peak = {"t_s": round(t), "sum_gb": round(total / 1e9, 2), "gb": gb}
                self._done.wait(self.every)

    def stop(self) -> dict | None:
        self._done.set()
        self._thread.join()
        return self.peak


def _day_timeline(path: Path, day: int) -> Path:
    return path.with_name(f"{path.stem}.day{day}{path.suffix}")


def _tree_rss(pid: int) -> int:
    import psutil

    total = 0
    try:
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def release(
    workdir: Path,
    engine: str,
    workers: int,
    cut: int | None,
    k: int | str,
    day_file: Path | None = None,
    store: Path | None = None,
) -> dict:
    """One release of the day into a fresh store (run in its own process); with ``day_file``
    and ``store``: that file into that store, kept (the daily job: one run a day)."""
    from dpstream.store import ReleaseStore
    from dpstream.store._source import release_parquet_to_store

    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(os.getpid()))
            time.sleep(0.5)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    load0 = os.getloadavg()
    ch = json.loads((workdir / "hierarchy.json").read_text())
    if store is None:
        store_path = workdir / f"store_{engine}_{cut}.db"
        for f in workdir.glob(store_path.name + "*"):
            f.unlink()
        os.environ["DPSTREAM_HOME"] = str(workdir / f"home-{time.time_ns()}")  # own ledgers
        dataset = f"million-{engine}-{cut}-{time.time_ns()}"  # each run its own data set
    else:  # the daily job: one store, one ledger, one data set over the days
        store_path = store
        os.environ["DPSTREAM_HOME"] = str(store.parent / f"{store.name}-home")
        dataset = f"million-daily-{store.stem}"
    from dpstream.engine._auto_split import AutoSplit

    replayed = [0]  # stored periods replayed into the split's planners (none if loaded)
    rebuild = AutoSplit.rebuild

    def counting(self, history, items, *a, **kw):
        def each():
            for item in items:
                replayed[0] += 1
                yield item

        return rebuild(self, history, each(), *a, **kw)

    AutoSplit.rebuild = counting
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with ReleaseStore(store_path, dataset=dataset) as store:
        released = release_parquet_to_store(
            store,
            day_file or workdir / "meters.parquet",
            epsilon=1.0,
            alpha=500.0,
            k=k,
            sampling="equal",
            hierarchy=ch,
            engine=engine,
            n_workers=workers,
            cut=cut,
        )
        wall = time.perf_counter() - t0
        n_nodes = len(store.config["nodes"])
        n_periods = len(store.periods())
        saved = store._con.execute("SELECT COUNT(DISTINCT root) FROM split_state").fetchone()[0]
    done.set()
    thread.join()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "engine": engine,
        "workers": workers if engine == "dask" else 1,
        "cut": cut,
        "k": k,
        "nodes": n_nodes,
        "released": released,
        "periods_in_store": n_periods,
        "saved_part_states": saved,
        "replayed_periods": replayed[0],
        "wall_s": round(wall, 1),
        "client_cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1),
        "workers_cpu_s": round(kids.ru_utime + kids.ru_stime, 1),
        "peak_tree_gb": round(peak[0] / 1e9, 2),
        "client_maxrss_gb": round(r1.ru_maxrss / 1e6, 2),
        "worker_maxrss_gb": round(kids.ru_maxrss / 1e6, 2),  # the largest worker's
        # blocks written to disk (512 B each; the spill files and the store), as the kernel
        # accounts them: a file deleted before its write-back may not count
        "client_written_gb": round((r1.ru_oublock - r0.ru_oublock) * 512 / 1e9, 2),
        "workers_written_gb": round(kids.ru_oublock * 512 / 1e9, 2),
        "load_before": [round(x, 1) for x in load0],
        "load_after": [round(x, 1) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--regions", type=int, default=10)
    ap.add_argument("--subs", type=int, default=100)
    ap.add_argument("--feeders", type=int, default=10)
    ap.add_argument("--meters", type=int, default=100)
    ap.add_argument("--engine", default="dask", choices=["dask", "local"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cut", type=int, default=None)
    ap.add_argument("--k", default="auto", help="'auto' (the default release) or an int")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--days",
        type=int,
        default=1,
        help="days written and released (one call); with --store and no --day-file: one file "
        "a day, the daily job over them (--first-day/--last-day)",
    )
    ap.add_argument("--first-day", type=int, default=1, help="the daily job's first day (--days)")
    ap.add_argument("--last-day", type=int, default=None, help="its last day (default --days)")
    ap.add_argument(
        "--timeline",
        type=Path,
        default=None,
        help="each process's resident memory once a second to this file (one a day, .dayK)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--day-file",
        type=Path,
        default=None,
        help="release this Parquet file (one day) instead of the generated one",
    )
    ap.add_argument(
        "--store",
        type=Path,
        default=None,
        help="into this store, kept between runs (the daily job; with --day-file)",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    k = args.k if args.k == "auto" else int(args.k)
    daily = args.store is not None and args.day_file is None
    if args.day_file is not None and args.store is None:
        ap.error("--day-file goes with --store")
    last = args.days if args.last_day is None else args.last_day
    if daily and not 1 <= args.first_day <= last <= args.days:
        ap.error("--first-day and --last-day must satisfy 1 <= first <= last <= --days")
    if args.child:
        res = release(args.workdir, args.engine, args.workers, args.cut, k, args.day_file,
                      args.store)  # fmt: skip
        print("RESULT " + json.dumps(res), flush=True)
        return
    shape = (args.regions, args.subs, args.feeders, args.meters)
    if daily:
        _daily(args, shape, last)
        return
    stamp = args.workdir / "shape.json"
    fresh = not stamp.exists() or json.loads(stamp.read_text()) != [*shape, args.days]
    if args.day_file is None and fresh:
        t0 = time.perf_counter()
        generate(args.workdir, *shape, seed=args.seed, days=args.days)
        stamp.write_text(json.dumps([*shape, args.days]))
        print(f"generated {np.prod(shape):,} meters in {time.perf_counter() - t0:.0f} s")
    res = _run_child(args, args.day_file, args.timeline)
    if args.day_file is None:
        res["meters"] = int(np.prod(shape))
    _report(args, res)


def _run_child(args, day_file: Path | None, timeline: Path | None) -> dict:
    """One release in a fresh process (``--child``); its result line (with the timeline's
    peak moment when ``timeline`` is given)."""
    cmd = [sys.executable, __file__, "--child", "--workdir", str(args.workdir)]
    cmd += ["--engine", args.engine, "--workers", str(args.workers), "--k", str(args.k)]
    if args.cut is not None:
        cmd += ["--cut", str(args.cut)]
    if day_file is not None:
        cmd += ["--day-file", str(day_file), "--store", str(args.store)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = None if timeline is None else Timeline(proc.pid, timeline)
    stdout, stderr = proc.communicate()
    peak = None if sampler is None else sampler.stop()
    lines = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    if not lines:
        sys.stderr.write(stderr[-4000:])
        raise SystemExit("the release failed")
    res = json.loads(lines[-1][7:])
    if sampler is not None:
        res["timeline"] = str(timeline)
        res["timeline_peak"] = peak
    return res


def _report(args, res: dict) -> None:
    print(json.dumps(res), flush=True)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(json.dumps(res) + "\n")


def _daily(args, shape: tuple[int, ...], last: int) -> None:
    """``--days N --store S``: the day files (written unless there), then the daily job over
    days ``--first-day`` .. ``last``, a fresh process a day into the one store."""
    files = [args.workdir / f"day{d}.parquet" for d in range(1, args.days + 1)]
    stamp = args.workdir / "days.json"
    want = [*shape, args.days, args.seed]
    have = json.loads(stamp.read_text()) if stamp.exists() else None
    there = all(f.exists() for f in files) and (args.workdir / "hierarchy.json").exists()
    if not there or (have is not None and have != want):
        t0 = time.perf_counter()
        generate_days(args.workdir, *shape, seed=args.seed, days=args.days)
        stamp.write_text(json.dumps(want))
        print(f"wrote {args.days} day files of {np.prod(shape):,} meters in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    for d in range(args.first_day, last + 1):
        load = [round(x, 1) for x in os.getloadavg()]
        print(f"day {d} start {time.strftime('%H:%M:%S', time.gmtime())} load {load}", flush=True)
        timeline = None if args.timeline is None else _day_timeline(args.timeline, d)
        res = {"day": d, **_run_child(args, files[d - 1], timeline)}
        _report(args, res)


if __name__ == "__main__":
    main()
