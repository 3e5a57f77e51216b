"""``dpstream demo``: the whole job on bundled real data, written up as a report."""

from __future__ import annotations

import math
from pathlib import Path

import click

from dpstream.demo._config import DemoConfig
from dpstream.demo._job import run_demo
from mechanisms import ParameterError

from ._accounting import check_folder

__all__ = ["demo"]


@click.command()
@click.option(
    "--out",
    default="dpstream-report",
    show_default=True,
    type=click.Path(file_okay=False, writable=True),
    help="Folder the report is written to (index.html, PNG figures, CSV and results.json).",
)
@click.option("--quick", is_flag=True, help="Small sizes: finishes in well under a minute.")
@click.option(
    "--seed",
    default=None,
    type=click.IntRange(0, None),
    help="Seed for a reproducible experiment (default: drawn from the OS).",
)
@click.option(
    "--epsilon",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0, 10, min_open=True),
    help="ε of the event-stream releases (PAK, ToPS), at most 10 (the range the planner's "
    "calibrations hold in, [PAK19] §VI).",
)
@click.option(
    "--runs",
    default=None,
    type=click.IntRange(2, None),
    help="Repetitions of Mechanism 1 and BT [default: 1000; 30 with --quick].",
)
@click.option(
    "--trials",
    default=None,
    type=click.IntRange(1, None),
    help="Trials per method and ε for the hierarchy [default: 10; 1 with --quick].",
)
@click.option("--quiet", is_flag=True, help="No progress display.")
def demo(
    out: str, quick: bool, seed: int | None, epsilon: float, runs: int | None,
    trials: int | None, quiet: bool,
) -> None:  # fmt: skip
    """Run the whole job on bundled real data and write a report.

    \b
    1. Which parameters? PAK's Mechanism 1 planned on a household's per-minute power (2007).
    2. How accurate is the release? The SimBench regional -> national load hierarchy
       released with OptStream, Laplace, DFT and PeGaSus.
    3. Event-stream range queries with ToPS against PAK.
    4. How good are forecasts on the release? ARMA(1,1) day-ahead forecasts.

    Every number is measured against the real data, so the demo is an experiment, not a
    private release.

    \b
    Examples:
      dpstream demo
      dpstream demo --quick --out /tmp/report
      dpstream demo --seed 1 --runs 1000
    """
    if not math.isfinite(epsilon):  # click's FloatRange lets NaN through
        raise ParameterError(
            f"The '--epsilon' option of dpstream demo must be a float in (0, 10]. Got {epsilon} "
            "instead."
        )
    check_folder(out, "--out", "dpstream demo")
    config = DemoConfig.create(
        out=Path(out), quick=quick, seed=seed, epsilon=epsilon, pak_runs=runs,
        optstream_trials=trials,
    )  # fmt: skip
    index, _ = run_demo(config, progress=not quiet)
    answers = index.parent / "results.json"
    click.echo(f"Report written to {index.parent.resolve()}")
    click.echo(f"  open {index.resolve()}")
    click.echo(f"  numbers: {answers.resolve()} and one CSV per table")
