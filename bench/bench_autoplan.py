"""Benchmark of ``release_optstream``'s default (``k="auto"``: in-stream planner and prior)
against a fixed k at 1,000 to 100,000 feeders: CPU seconds per day, growth exponents in the
number of nodes, peak memory per process (issue 22.1).

Each (size, k) runs in its own process (peak memory = that process's ``ru_maxrss``; BLAS held
to one thread so that CPU seconds are work, not spinning threads) on a synthetic feeders ->
substations (100 feeders each) -> national tree: daily profile x a per-feeder level plus a
random walk and noise (a benchmark: nothing is released, the runs are seeded).

    python bench/bench_autoplan.py [--sizes 1000 10000 100000] [--days 30 30 30] [--store]
    python bench/bench_autoplan.py --one 10000 3 auto     # one run, JSON on stdout
    python bench/bench_autoplan.py --rows a.json b.json   # the table of rows run apart

Each row also gives the in-memory planner's state after the last period (``state_gb``:
:attr:`planner.StreamPlanner.nbytes`, running sums and the last released periods it holds)
and what the release returns (``output_gb``: :func:`output_gb`), which grows with the days.

The table goes to ``docs/results/bench_autoplan.md`` (``--out``). The ratio default / fixed
is measured in the same run, sizes one after the other, on a machine shared with other jobs:
CPU seconds are what to compare, wall seconds only show the load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "bench_autoplan.md"
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def synthetic(n_feeders: int, days: int, *, seed: int = 0):
    """(frame of the feeders, hierarchy children): kW-like loads, 48 steps a day."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    per = 100 if n_feeders >= 100 else n_feeders
    n_sub = max(n_feeders // per, 1)
    names = [f"f{i}" for i in range(n_sub * per)]
    children = {"national": [f"s{i}" for i in range(n_sub)]}
    for i in range(n_sub):
        children[f"s{i}"] = names[i * per : (i + 1) * per]
    t = np.arange(48 * days)
    profile = 60 + 30 * np.sin(2 * np.pi * t / 48) + 10 * np.sin(2 * np.pi * t / 16)
    level = rng.uniform(0.5, 2.0, len(names)).astype(np.float32)
    values = np.empty((t.size, len(names)))
    block = 5_000
    for j in range(0, len(names), block):  # a block of feeders at a time (memory)
        cols = slice(j, j + block)
        walk = np.cumsum(rng.normal(0.0, 1.0, (t.size, len(names[cols]))), axis=0)
        values[:, cols] = profile[:, None] * level[None, cols] + walk
        values[:, cols] += rng.uniform(0.0, 5.0, values[:, cols].shape)
    np.clip(values, 0.0, None, out=values)
    idx = pd.date_range("2016-03-01", periods=t.size, freq="30min")
    return pd.DataFrame(values, index=idx, columns=names, copy=False), children


def one(n_feeders: int, days: int, k: str, store: bool) -> dict:
    """One release, timed (CPU of this process, after the data are built)."""
    import dpstream
    from dpstream.pipelines import _autoplan

    frame, children = synthetic(n_feeders, days)
    kk = "auto" if k == "auto" else int(k)
    planners = []  # the release's planner, to measure its state at the end
    make = _autoplan.new_planner
    _autoplan.new_planner = lambda cfg: planners.append(make(cfg)) or planners[-1]
    kw = dict(epsilon=1.0, alpha=5.0, hierarchy=children, k=kk, seed=1)
    load0 = os.getloadavg()[0]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    use0 = resource.getrusage(resource.RUSAGE_SELF)
    if store:
        import tempfile

        from dpstream.store import ReleaseStore

        with tempfile.TemporaryDirectory() as tmp, ReleaseStore(Path(tmp) / "s.db") as s:
            out = s.release_optstream(frame, **kw)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            plans = s.periods()[["k"]].to_dict("records")
    else:
        out = dpstream.release_optstream(frame, **kw)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        plans = out.attrs.get("plan") or []
    use = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "feeders": n_feeders,
        "nodes": int(out.shape[1]),
        "days": days,
        "k": k,
        "store": store,
        "cpu": cpu,
        "wall": wall,
        "cpu_per_day": cpu / days,
        # CPU = user + system; under memory pressure the kernel's page work (fresh pages of
        # large temporaries) is system time and can exceed the computation's user time
        "user": use.ru_utime - use0.ru_utime,
        "sys": use.ru_stime - use0.ru_stime,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "state_gb": planners[-1].nbytes / 1e9 if planners else None,
        "output_gb": None if store else output_gb(out),
        "ks": sorted({p["k"] for p in plans}) if plans else [kk],
        # 1-minute load average when the release started and when it ended (other jobs)
        "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "started": time.strftime("%H:%M:%S", time.gmtime(time.time() - wall)),
    }


def output_gb(out) -> float:
    """GB of what the release returns: its values, ``attrs["measurements"]``, the int-k
    release's ``attrs["estimates"]`` (every period's measurements, noise and weights) and, for
    the default, ``attrs["planning"]`` (every period's plan and prior, kept for
    ``dpstream.std_errors``; its measurements are rows of ``attrs["measurements"]`` and their
    noise is rebuilt when read): what grows with the days by design. Each array is counted
    once, through the array that owns its memory (views share)."""
    arrays = [b.values for b in out._mgr.blocks]  # not memory_usage(): it copies attrs
    arrays.append(out.attrs.get("measurements"))
    for period in out.attrs.get("estimates") or []:
        arrays += [period.get(key) for key in ("estimates", "noise", "variances", "samples")]
    planning = out.attrs.get("planning")
    if planning is not None and not isinstance(planning, dict | list):
        for m in planning.measured:
            if hasattr(m, "__dataclass_fields__"):  # a planner.Measurement: its own arrays
                arrays += [m.values, m.noise, m.sampled]
            arrays.append(m.observed)  # KeptMeasurement: only the mask of missing readings
        for p in planning.plans:
            arrays += [p.variances, p.predicted_nodes, p.sample_variance]
        for pr in planning.priors:
            arrays += [] if pr is None else [pr.mean, pr.variance]
    owners: dict[int, int] = {}
    for a in arrays:
        if not isinstance(a, np.ndarray):
            continue
        while isinstance(a.base, np.ndarray):
            a = a.base
        owners[id(a)] = a.nbytes
    return sum(owners.values()) / 1e9


def run(n: int, days: int, k: str, store: bool) -> dict:
    env = {**os.environ, **{v: "1" for v in THREADS}}
    cmd = [sys.executable, __file__, "--one", str(n), str(days), k] + (["--store"] if store else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _gb(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def exponent(rows: list[dict]) -> float:
    """Least-squares slope of log(CPU per day) on log(nodes)."""
    x = np.log([r["nodes"] for r in rows])
    y = np.log([r["cpu_per_day"] for r in rows])
    return float(np.polyfit(x, y, 1)[0]) if len(rows) > 1 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--days", type=int, nargs="+", default=[30, 30, 30])
    parser.add_argument("--fixed-k", default="10")
    parser.add_argument("--store", action="store_true", help="release through a ReleaseStore")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--one", nargs=3, metavar=("FEEDERS", "DAYS", "K"))
    parser.add_argument("--rows", type=Path, nargs="+", help="JSON rows of --one runs")
    args = parser.parse_args()
    if args.one:
        n, days, k = args.one
        print(json.dumps(one(int(n), int(days), k, args.store)))
        return
    days = dict(zip(args.sizes, args.days + args.days[-1:] * len(args.sizes), strict=False))
    rows = []
    if args.rows:  # rows run apart (in parallel, or a size at a time): fixed and auto pairs
        for path in args.rows:
            rows += [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]
        rows.sort(key=lambda r: (r["feeders"], r["k"] == "auto"))
        args.sizes = sorted({r["feeders"] for r in rows})
        days = {r["feeders"]: r["days"] for r in rows}
    for n in [] if args.rows else args.sizes:
        for k in (args.fixed_k, "auto"):
            r = run(n, days[n], k, args.store)
            print(json.dumps(r), flush=True)
            rows.append(r)
    fixed = [r for r in rows if r["k"] != "auto"]
    auto = [r for r in rows if r["k"] == "auto"]
    where = "through a ReleaseStore" if args.store else "in memory (release_optstream)"
    lines = [
        "# k=auto (default) against a fixed k: CPU per day at scale (issue 22.1)",
        "",
        f"`python bench/bench_autoplan.py --sizes {' '.join(map(str, args.sizes))} --days "
        f"{' '.join(str(days[n]) for n in args.sizes)}{' --store' if args.store else ''}`, "
        f"{where}; feeders -> substations (100 each) -> national, ε = 1, α = 5, seeded "
        "synthetic loads; one process per row, BLAS on one thread; this 2-core machine shared "
        f"with other jobs (load average {os.getloadavg()[0]:.0f} at the end).",
        "",
        "| feeders | nodes | days | k | CPU s | CPU s / day | default / fixed | peak GB | "
        "output GB | planner state GB | k chosen |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f, a in zip(fixed, auto, strict=True):
        for r in (f, a):
            ratio = a["cpu_per_day"] / f["cpu_per_day"] if r is a else 1.0
            lines.append(
                f"| {r['feeders']:,} | {r['nodes']:,} | {r['days']} | {r['k']} | {r['cpu']:.1f} "
                f"| {r['cpu_per_day']:.2f} | {ratio:.2f} | {r['peak_gb']:.2f} | "
                f"{_gb(r.get('output_gb'))} | {_gb(r.get('state_gb'))} | "
                f"{', '.join(map(str, r['ks']))} |"
            )
    lines.append("")
    if len(fixed) > 1:
        lines += [
            f"Growth exponent of CPU per day in nodes (log-log slope): fixed k "
            f"{exponent(fixed):.2f}, default {exponent(auto):.2f}.",
            "",
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
