"""``dpstream demo``: the main job on bundled real data.

For now (issue 2) it runs PAK's Mechanism 1 and the binary-tree (BT) baseline on the bundled
light-tailed real stream and prints their errors on the final sum c(σ, n) side by side, as PAK
§VII-A (Figs. 8 and 10) does. Later issues grow it into the whole pipeline.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import click
import numpy as np

from dpstream import datasets
from mechanisms import binary_tree_final_sums, bit_source, laplace_prefix_sums, pak_release
from planner import time_lag_heuristic

__all__ = ["DemoRow", "compare_final_sum_errors", "demo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoRow:
    """Error of one mechanism's final sum ĉ(σ, n) over repeated runs."""

    mechanism: str
    """Name of the mechanism."""
    mean_abs_error: float
    """Mean |ĉ(σ, n) − c(σ, n)| over the runs."""
    rmse: float
    """Root mean squared error over the runs."""
    q98_abs_error: float
    """98% quantile of the absolute error (PAK's β = 0.02)."""
    median_threshold: float
    """Median released τ (the bound B for mechanisms without a threshold)."""


def compare_final_sum_errors(
    values: np.ndarray,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    time_lag: int,
    runs: int,
    seed: int | None,
    progress: bool = False,
) -> list[DemoRow]:
    """Run Mechanism 1, BT with B and Laplace-per-value ``runs`` times; compare final-sum errors.

    Each run of Mechanism 1 is a full release (threshold, prefix sum, BT over the suffix); BT's
    final sums are drawn with :func:`~mechanisms.binary_tree_final_sums` (the same node noise as
    a full release, drawn only for the nodes of [1..n]).
    """
    truth = float(np.sum(values))
    source = bit_source(seed)
    pak_bits, bt_bits, lap_bits = source.spawn(3)
    pak_err = np.empty(runs)
    taus = np.empty(runs)
    with click.progressbar(
        range(runs), label="Mechanism 1 runs", hidden=not progress, file=None
    ) as bar:
        for k in bar:
            rel = pak_release(
                values,
                bound=bound,
                epsilon=epsilon,
                delta=delta,
                time_lag=time_lag,
                seed=pak_bits,
            )
            pak_err[k] = rel.prefix_sums[-1] - truth
            taus[k] = rel.threshold
    bt_err = (
        binary_tree_final_sums(values, epsilon=epsilon, bound=bound, repetitions=runs, seed=bt_bits)
        - truth
    )
    lap_runs = min(runs, 50)  # each Laplace run draws n values; its error is far larger anyway
    lap_err = np.array(
        [
            laplace_prefix_sums(values, epsilon=epsilon, bound=bound, seed=lap_bits).prefix_sums[-1]
            - truth
            for _ in range(lap_runs)
        ]
    )

    def row(name: str, err: np.ndarray, tau: float) -> DemoRow:
        return DemoRow(
            mechanism=name,
            mean_abs_error=float(np.mean(np.abs(err))),
            rmse=float(math.sqrt(np.mean(err**2))),
            q98_abs_error=float(np.quantile(np.abs(err), 0.98)),
            median_threshold=tau,
        )

    return [
        row("PAK Mechanism 1", pak_err, float(np.median(taus))),
        row("BT with B", bt_err, bound),
        row(f"Laplace per value ({lap_runs} runs)", lap_err, bound),
    ]


def _print_table(title: str, rows: list[DemoRow], truth: float) -> None:
    click.echo(f"\n{title}")
    click.echo(f"  true final sum c(σ, n) = {truth:,.1f}")
    header = (
        f"  {'mechanism':<30} {'mean |err|':>12} {'RMSE':>12} {'98% |err|':>12} "
        f"{'τ (median)':>11} {'IF':>7}"
    )
    click.echo(header)
    click.echo("  " + "-" * (len(header) - 2))
    bt = next(r for r in rows if r.mechanism.startswith("BT"))
    for r in rows:
        gain = bt.mean_abs_error / r.mean_abs_error
        click.echo(
            f"  {r.mechanism:<30} {r.mean_abs_error:>12,.1f} {r.rmse:>12,.1f} "
            f"{r.q98_abs_error:>12,.1f} {r.median_threshold:>11.3g} {gain:>7.2f}"
        )


@click.command()
@click.option(
    "--runs",
    default=1000,
    show_default=True,
    type=click.IntRange(1, None),
    help="Repetitions of each mechanism (PAK §VII-A uses 20,000).",
)
@click.option(
    "--epsilon", default=1.0, show_default=True, type=click.FloatRange(0, None, min_open=True)
)
@click.option(
    "--delta",
    default=2.0**-20,
    show_default="2^-20",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
)
@click.option(
    "--seed",
    default=None,
    type=int,
    help="Seed for a reproducible experiment. Seeded output is NOT a private release.",
)
@click.option("--quick", is_flag=True, help="100 runs instead of --runs.")
def demo(runs: int, epsilon: float, delta: float, seed: int | None, quick: bool) -> None:
    """Run PAK's Mechanism 1 against the binary tree on bundled real data.

    The stream is one household's per-minute active power in 2007 (UCI, CC BY 4.0; 521,669
    readings in kW, light-tailed), with the public bound B = 36 kW (the largest residential
    supply contract in France, where the house is). The time lag m is chosen privately by
    PAK §VI-B's heuristic (public inputs only). The retail invoice totals (not light-tailed)
    follow as a counter-example.

    \b
    Examples:
      dpstream demo
      dpstream demo --quick --seed 1
      dpstream demo --runs 20000 --epsilon 0.5
    """
    if quick:
        runs = 100
    if seed is not None:
        click.secho("Seeded run: an experiment, not a private release.", fg="yellow", err=True)
    lag = time_lag_heuristic(epsilon=epsilon, delta=delta, beta=0.02, p_max=0.005)
    streams = [
        (
            "household power per minute, 2007 (light-tailed)",
            datasets.household_minutes_stream(),
            datasets.HOUSEHOLD_MINUTES_BOUND,
        ),
        (
            "Online Retail II invoice totals (heavy-tailed; clipped to B)",
            datasets.retail_stream(clip_to=datasets.RETAIL_BOUND),
            datasets.RETAIL_BOUND,
        ),
    ]
    click.echo(
        f"ε = {epsilon:g}, δ = {delta:.3g}, {runs} runs; time lag m = {lag.m:,} "
        f"(PAK §VI-B: criterion 1 gives {lag.criterion1:,}, criterion 2 gives {lag.criterion2:,})"
    )
    for name, values, bound in streams:
        m = lag.m if lag.m < values.size // 2 else values.size // 4
        start = time.perf_counter()
        rows = compare_final_sum_errors(
            values,
            bound=bound,
            epsilon=epsilon,
            delta=delta,
            time_lag=m,
            runs=runs,
            seed=seed,
            progress=True,
        )
        title = f"{name}: n = {values.size:,}, B = {bound:g}, m = {m:,}"
        if m != lag.m:
            title += " (stream too short for the heuristic's m: n/4 used)"
        _print_table(title, rows, float(values.sum()))
        click.echo(f"  ({time.perf_counter() - start:.1f} s)")
    click.echo(
        "\nIF = mean |error| of BT with B / mean |error| of the row (PAK's improvement factor)."
    )
