"""Benchmark: how fast the ``dpstream`` command answers, as a ratio to ``python -c pass``.

Runs each command line several times in fresh processes (median wall time) and prints the ratio
to an empty interpreter start measured in the same run, then the ten slowest imports of
``dpstream --help`` from ``python -X importtime``. Usage: ``python bench/bench_cli_startup.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "dpstream --help": [sys.executable, "-m", "dpstream.cli", "--help"],
    "dpstream --version": [sys.executable, "-m", "dpstream.cli", "--version"],
    "dpstream data list": [sys.executable, "-m", "dpstream.cli", "data", "list"],
    "dpstream release --help": [sys.executable, "-m", "dpstream.cli", "release", "--help"],
}


def wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    repeat = 7
    print(f"load average {os.getloadavg()[0]:.2f}; median of {repeat} fresh processes")
    base = wall(COMMANDS["python -c pass"], repeat)
    for name, cmd in COMMANDS.items():
        t = wall(cmd, repeat)
        print(f"  {name:<26} {t:6.3f} s   {t / base:5.1f}x python -c pass")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dpstream.cli", "--help"],
        check=True,
        capture_output=True,
        text=True,
    ).stderr.splitlines()
    rows = []
    for line in out:
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("  slowest cumulative imports of `dpstream --help` (microseconds):")
    for us, name in sorted(rows, reverse=True)[:10]:
        print(f"    {us:>9,} {name}")


if __name__ == "__main__":
    main()
