"""Cost of issue 25's checks on large inputs, as ratios measured in one run.

1. The validation pass over a long Parquet file: read whole (:func:`dpstream.io.read_readings`)
   against in blocks (:func:`dpstream.io._parquet_pass.diagnose_parquet`, what ``--store`` runs
   on a large Parquet INPUT): wall time and peak resident memory above a process that only
   imports, each in its own process (Linux: ``VmHWM``).
2. The keyed digests of one released period (:mod:`dpstream.store._digest`: a BLAKE2b digest per
   series, an AES tag per reading) against validating the same period
   (:func:`dpstream.pipelines._frames.prepare_frame`), for N series x 48 steps.

Usage: ``python bench/bench_messy_inputs.py [--series 4000] [--days 14] [--block-cells 1048576]``.
Synthetic gamma loads (a simulation: nothing is released).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

_CHILD = r"""
import json, sys, time
mode, path, block = sys.argv[1], sys.argv[2], int(sys.argv[3])
from dpstream.io import read_readings
from dpstream.io import _parquet_pass as pp
t0 = time.perf_counter()
if mode == "whole":
    read_readings(path)
elif mode == "blocks":
    pp.WHOLE_CELLS, pp.BLOCK_CELLS = 0, block
    pp.diagnose_parquet(path)
t = time.perf_counter() - t0
# VmHWM: this process image's peak (ru_maxrss keeps the forking parent's across exec)
hwm = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
print(json.dumps({"s": t, "rss_kb": hwm}))
"""


def _child(mode: str, path: Path, block: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path), str(block)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_pass(series: int, days: int, block: int) -> dict:
    steps = days * 48
    idx = pd.date_range("2016-01-01", periods=steps, freq="30min")
    rng = np.random.default_rng(25)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.parquet"
        long = pd.DataFrame(
            {
                "unique_id": np.repeat([f"m{j:05d}" for j in range(series)], steps),
                "ds": np.tile(idx.to_numpy(), series),
                "y": rng.gamma(2.0, 0.5, size=series * steps).round(3),
            }
        )
        long.to_parquet(path, index=False, row_group_size=1 << 16)
        del long
        base = _child("import", path, block)
        whole = _child("whole", path, block)
        blocks = _child("blocks", path, block)
    mb = lambda r: (r["rss_kb"] - base["rss_kb"]) / 1024  # noqa: E731
    return {
        "rows": series * steps,
        "whole_s": whole["s"],
        "blocks_s": blocks["s"],
        "whole_mb": mb(whole),
        "blocks_mb": mb(blocks),
    }


def bench_digest(series: int) -> dict:
    import sqlite3

    from dpstream.pipelines._frames import prepare_frame
    from dpstream.store._digest import _fingerprints

    w = 48
    rng = np.random.default_rng(1)
    names = [f"m{j:06d}" for j in range(series)]
    frame = pd.DataFrame(
        rng.gamma(2.0, 0.5, size=(w, series)),
        columns=names,
        index=pd.date_range("2016-01-01", periods=w, freq="30min"),
    )
    key = bytes(range(32))
    t0 = time.perf_counter()
    prepare_frame(frame, owner="bench")
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    digests, tags = _fingerprints(key, 0, names, frame.to_numpy().T)
    t_digest = time.perf_counter() - t0
    del sqlite3
    return {
        "series": series,
        "prepare_s": t_check,
        "digest_s": t_digest,
        "bytes_per_period": len(digests) + len(tags),
        "values_bytes": frame.size * 8,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=4000)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--block-cells", type=int, default=1 << 20)
    args = parser.parse_args()
    p = bench_pass(args.series, args.days, args.block_cells)
    print(
        f"validation pass, long Parquet of {p['rows']:,} rows: blocks/whole time "
        f"{p['blocks_s'] / p['whole_s']:.2f} ({p['blocks_s']:.1f} s / {p['whole_s']:.1f} s), "
        f"peak memory above imports {p['blocks_mb']:.0f} MB in blocks vs {p['whole_mb']:.0f} MB "
        f"whole (ratio {p['blocks_mb'] / max(p['whole_mb'], 1e-9):.2f})"
    )
    for n in (10_000, 100_000):
        d = bench_digest(n)
        print(
            f"digests of one period, {n:,} series x 48: digest/validation time "
            f"{d['digest_s'] / d['prepare_s']:.2f} ({d['digest_s']:.2f} s / "
            f"{d['prepare_s']:.2f} s); stored {d['bytes_per_period'] / d['values_bytes']:.3f} "
            "bytes per byte of the period's readings"
        )


if __name__ == "__main__":
    main()
