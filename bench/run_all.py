"""Run every ``bench/bench_*.py`` against one or more source trees and print a markdown table.

Each benchmark prints ratios against a baseline measured in its own process; this driver runs
the *same* benchmark scripts (those next to this file, or ``--scripts``) with
``PYTHONPATH=<tree>`` for every ``--tree``, script by script and tree after tree (so that every
tree sees the same machine load, and the load average is printed before each run), then
collects every printed ratio (a number followed by ``x``, or after the word ``ratio``) into one
table: one row per output line, one column per tree. A script that fails against a tree (it
imports a name the tree does not have) gives "n/a" with the last line of its error.

Usage::

    python bench/run_all.py --tree before=/work/wt/old --tree after=. [--full] [--only noise,tree]
        [--log-dir DIR] [--timeout 1200]

Sizes. By default the scripts whose default run takes minutes on the 2-core machine run at the
quick sizes of ``QUICK`` below (arguments and environment variables of each script's own CLI);
``--full`` runs every script at its defaults. The quick sizes keep every ratio's definition
(same baseline, same code path), only n or the number of repetitions is smaller.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Quick sizes: script stem -> (extra arguments, extra environment). Documented in the module
#: notes; scripts not listed run at their defaults (a few seconds to a minute each).
QUICK: dict[str, tuple[list[str], dict[str, str]]] = {
    # n = 2.5·10⁶ instead of 2.5·10⁷ (the headline size; ``--full`` runs it).
    "bench_tree": ([], {"BENCH_TREE_N": "2500000"}),
    # one repeat, parts 1-2 (part 3 starts busy processes to measure threads under load).
    "bench_forecast": (["--repeat", "1", "--parts", "12"], {}),
    # n = 10⁵ only, 5 runs per counter instead of 20.
    "bench_counting": (
        [],
        {"BENCH_COUNTING_N": "100000", "BENCH_COUNTING_RUNS": "5", "BENCH_COUNTING_PAK_RUNS": "5"},
    ),
    # sizes 10³ and 10⁴ leaves, a week; the year at 10³ leaves over 30 days.
    "bench_hierarchy": (
        [
            "--sizes",
            "1000",
            "10000",
            "--days",
            "7",
            "--year-size",
            "1000",
            "--year-days",
            "30",
            "--compare-days",
            "2",
        ],
        {},
    ),  # fmt: skip
    # 20 feeders over a week.
    "bench_store": (["--feeders", "20", "--days", "7"], {}),
}

_NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"
_RATIO = re.compile(rf"({_NUMBER})\s*x\b|\bratio[^\d\n]*?({_NUMBER})", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)


@dataclass
class Run:
    """One script run against one tree."""

    tree: str
    script: str
    load: tuple[float, float, float]
    seconds: float = 0.0
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    ratios: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str:
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1].strip() if lines else f"exit code {self.returncode}"


def ratios_of(text: str) -> dict[str, str]:
    """Every output line that carries a ratio: its label (numbers replaced by #) -> its ratios."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        values = [a or b for a, b in _RATIO.findall(line)]
        if not values:
            continue
        label = " ".join(_ANY_NUMBER.sub("#", line).split())
        key, i = label, 2
        while key in found:  # the same line printed twice (e.g. per size): keep both
            key, i = f"{label} ({i})", i + 1
        found[key] = " / ".join(f"{v}x" for v in values)
    return found


def run(tree: str, path: Path, script: Path, full: bool, timeout: float) -> Run:
    """Run ``script`` with ``PYTHONPATH=path`` (cwd ``path``), one BLAS thread."""
    args, extra_env = ([], {}) if full else QUICK.get(script.stem, ([], {}))
    env = dict(os.environ, PYTHONPATH=str(path), OPENBLAS_NUM_THREADS="1", **extra_env)
    result = Run(tree=tree, script=script.stem, load=os.getloadavg())
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(script), *args],
            cwd=path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        result.returncode, result.stdout, result.stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        result.returncode = -1
        result.stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        result.stderr = f"timed out after {timeout:.0f} s"
    result.seconds = time.perf_counter() - start
    if result.returncode == 0:
        result.ratios = ratios_of(result.stdout)
    return result


def table(runs: list[Run], trees: list[str], scripts: list[str], full: bool) -> str:
    """The markdown report: loads, then one table per script (rows = ratio lines)."""
    out = [
        f"Run on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}; trees: "
        + ", ".join(f"`{t}`" for t in trees)
        + (", every script at its defaults." if full else ", quick sizes (`QUICK` in run_all.py)."),
        "",
        "| script | " + " | ".join(f"{t}: load 1/5/15 min, wall" for t in trees) + " |",
        "|---|" + "---|" * len(trees),
    ]
    by = {(r.script, r.tree): r for r in runs}
    for s in scripts:
        cells = []
        for t in trees:
            r = by[(s, t)]
            state = "" if r.returncode == 0 else " (n/a)"
            cells.append(
                f"{r.load[0]:.2f}/{r.load[1]:.2f}/{r.load[2]:.2f}, {r.seconds:.0f} s{state}"
            )
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    for s in scripts:
        out += ["", f"### {s}", "", "| measurement | " + " | ".join(trees) + " |"]
        out.append("|---|" + "---|" * len(trees))
        labels: list[str] = []
        for t in trees:
            labels += [k for k in by[(s, t)].ratios if k not in labels]
        for label in labels:
            cells = [by[(s, t)].ratios.get(label, "n/a") for t in trees]
            out.append(f"| {label.replace('|', '/')} | " + " | ".join(cells) + " |")
        for t in trees:
            r = by[(s, t)]
            if r.returncode != 0:
                out.append(f"| *{t}: n/a* — {r.error.replace('|', '/')[:160]} | "
                           + " | ".join("" for _ in trees) + " |")  # fmt: skip
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--scripts", type=Path, default=HERE, help="folder of bench_*.py")
    parser.add_argument("--only", default="", help="comma-separated stems, e.g. noise,tree")
    parser.add_argument("--full", action="store_true", help="every script at its defaults")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    parser.add_argument("--log-dir", type=Path, help="write each run's stdout and stderr here")
    args = parser.parse_args()
    trees: dict[str, Path] = {}
    for spec in args.tree:
        name, _, path = spec.partition("=")
        trees[name if path else Path(name).name] = Path(path or name).resolve()
    only = {f"bench_{s.strip().removeprefix('bench_')}" for s in args.only.split(",") if s.strip()}
    scripts = sorted(p for p in args.scripts.glob("bench_*.py") if not only or p.stem in only)
    runs = []
    for script in scripts:
        for name, path in trees.items():
            load = " ".join(f"{v:.2f}" for v in os.getloadavg())
            print(
                f"[run_all] {script.stem} on {name} ({path}); load average {load}", file=sys.stderr
            )
            r = run(name, path, script, args.full, args.timeout)
            runs.append(r)
            print(
                f"[run_all]   {r.seconds:.0f} s, exit {r.returncode}", file=sys.stderr, flush=True
            )
            if args.log_dir:
                args.log_dir.mkdir(parents=True, exist_ok=True)
                log = args.log_dir / f"{script.stem}.{name}.log"
                log.write_text(f"# load {r.load}, {r.seconds:.1f} s, exit {r.returncode}\n"
                               + r.stdout + "\n# stderr\n" + r.stderr)  # fmt: skip
    print(table(runs, list(trees), [s.stem for s in scripts], args.full))


if __name__ == "__main__":
    main()
