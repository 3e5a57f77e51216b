"""Run every ``bench/bench_*.py`` against one or more source trees and print a markdown table.

Each benchmark prints ratios against a baseline measured in its own process; this driver runs
the *same* benchmark scripts (those next to this file, or ``--scripts``) with the tree's code
on PYTHONPATH (``<tree>/src`` for a src layout, as before issue 16; checked by importing
``mechanisms`` first) for every ``--tree``, script by script and tree after tree (so that every
tree sees the same machine load, and the load average is printed before each run), then
collects every printed ratio (a number followed by ``x``, or after the word ``ratio``) into one
table: one row per output line, one column per tree. A script that fails against a tree (it
imports a name the tree does not have) is replaced by the tree's own version of it if the tree
has one (its rows then carry that version's labels, marked "own script"), else gives "n/a"
with the last line of its error. The editable install's import hooks are removed in each run,
so a module the tree lacks fails instead of being taken from the installed checkout.

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
    # 10,000 leaves instead of 100,000 (``--full`` runs the 100,000).
    "bench_autoplan": (["--leaves", "10000"], {}),
    # n = 2.5·10⁶ instead of 2.5·10⁷ (the headline size; ``--full`` runs it).
    "bench_tree": ([], {"BENCH_TREE_N": "2500000"}),
    # one repeat, parts 1-2 (part 3 starts busy processes to measure threads under load).
    "bench_forecast": (["--repeat", "1", "--parts", "12"], {}),
    # n = 10⁵ only, 5 runs per counter instead of 20.
    "bench_counting": (
        [],
        {"BENCH_COUNTING_N": "100000", "BENCH_COUNTING_RUNS": "5", "BENCH_COUNTING_PAK_RUNS": "5"},
    ),
    # sizes 10³ and 10⁴ leaves, a week; the year at 10³ leaves over 30 days; the comparison with
    # the old dense path at its default sizes, over 2 days.
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
_ANY_NUMBER = re.compile(rf"{_NUMBER}|\bnan\b")


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
    own_script: str = ""

    @property
    def error(self) -> str:
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1].strip() if lines else f"exit code {self.returncode}"


def ratios_of(text: str) -> dict[str, str]:
    """The ratios a benchmark printed, by output line.

    A line with ``<number>x`` or ``ratio ... <number>`` gives its ratios; a row of a printed
    table whose header names a ratio column (a ``/`` in the header, e.g. ``batch/cumsum``)
    gives its other cells, labelled by its first cell, under the header. Other labels are the
    line with its numbers replaced by ``#`` (a script prints the same labels on every tree).
    """
    found: dict[str, str] = {}

    def put(label: str, value: str) -> None:
        key, i = label, 2
        while key in found:  # the same label twice (e.g. per size): keep both, in order
            key, i = f"{label} ({i})", i + 1
        found[key] = value

    header = ""
    for line in text.splitlines():
        if not line.strip():
            header = ""
            continue
        values = [a or b for a, b in _RATIO.findall(line)]
        label = " ".join(_ANY_NUMBER.sub("#", line).split())
        if values:
            put(label, " / ".join(f"{v}x" for v in values))
        elif not _ANY_NUMBER.search(line):
            header = line if "/" in line else ""
            if header:
                put(" ".join(header.split()), "(columns)")
        elif header:
            cells, numbers = line.split(), _ANY_NUMBER.findall(line)
            if 2 * len(numbers) >= len(cells):  # a table row: labelled by its first cell
                first = header.split()[0]
                tail = numbers[1:] if _ANY_NUMBER.fullmatch(cells[0]) else numbers
                put(f"{first} = {cells[0]}", " · ".join(tail))
            else:  # a sentence after the table
                put(label, " · ".join(numbers))
    return found


def code_path(path: Path) -> Path:
    """The folder to put on PYTHONPATH: ``path/src`` for a src layout (the tree before issue 16
    kept its packages there), else ``path``. PYTHONPATH pointing at a src-layout root would
    silently import the editable install instead."""
    return path / "src" if (path / "src" / "mechanisms").is_dir() else path


def check_imports(path: Path) -> str:
    """Fail loudly unless ``mechanisms`` is imported from ``path`` under its environment."""
    code = code_path(path)
    env = dict(os.environ, PYTHONPATH=str(code))
    where = subprocess.run(
        [sys.executable, "-c", "import mechanisms; print(mechanisms.__file__)"],
        cwd=path, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"run_all: with PYTHONPATH={code}, mechanisms comes from {where}")
    return where


#: Runs a script as ``__main__`` with the editable install's finders removed: a module the
#: tree lacks must fail to import, not be taken silently from the installed checkout.
_RUNNER = (
    "import runpy, sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in str(f)]\n"
    "sys.path_hooks[:] = [h for h in sys.path_hooks if 'Editable' not in repr(h)]\n"
    "sys.path_importer_cache.clear()\n"
    "script = sys.argv[1]; sys.argv = sys.argv[1:]\n"
    "sys.path.insert(0, script.rsplit('/', 1)[0])\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


def run(tree: str, path: Path, script: Path, full: bool, timeout: float) -> Run:
    """Run ``script`` with the tree's code on PYTHONPATH (cwd ``path``), one BLAS thread.

    If it fails against the tree and the tree has its own, different version of the script
    (an API it measured has changed since), that version runs instead, at its own defaults;
    its rows then carry that version's labels and the report says so.
    """
    args, extra_env = ([], {}) if full else QUICK.get(script.stem, ([], {}))
    env = dict(os.environ, PYTHONPATH=str(code_path(path)), OPENBLAS_NUM_THREADS="1", **extra_env)
    result = Run(tree=tree, script=script.stem, load=os.getloadavg())
    start = time.perf_counter()
    _execute(result, [sys.executable, "-c", _RUNNER, str(script), *args], path, env, timeout)
    own = path / "bench" / script.name
    if result.returncode != 0 and own.is_file() and own.read_bytes() != script.read_bytes():
        first_error = result.error
        _execute(result, [sys.executable, "-c", _RUNNER, str(own)], path, env, timeout)
        result.own_script = f"this script failed ({first_error[:100]}); the tree's own ran"
    result.seconds = time.perf_counter() - start
    if result.returncode == 0:
        result.ratios = ratios_of(result.stdout)
    return result


def _execute(result: Run, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> None:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        result.returncode, result.stdout, result.stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        result.returncode = -1
        result.stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        result.stderr = f"timed out after {timeout:.0f} s"


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
            state = " (n/a)" if r.returncode else " (own script)" if r.own_script else ""
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
            if r.own_script:
                out.append(
                    f"| *{t}: {r.own_script.replace('|', '/')}* | "
                    + " | ".join("" for _ in trees)
                    + " |"
                )
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
    for name, path in trees.items():
        print(f"[run_all] {name}: mechanisms from {check_imports(path)}", file=sys.stderr)
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
