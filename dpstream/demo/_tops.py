"""Demo stage 3: range queries on the event stream with ToPS, PAK and ToPL.

The analyst's second question on the event stream: *how accurate are range sums V(i, j)?*
On the household's per-minute power (n = 521,669, B = 36 kW), the first m = 65,536 values
choose the threshold and the rest are released ([ToPS21] protocol, at the configured ε):

* ToPS: report-noisy-max threshold, pruned consistent hierarchy, "recent" smoother
  (:func:`mechanisms.tops_release`);
* PAK's Mechanism 1 with the same time lag, τ clipped to B (:func:`mechanisms.pak_release`);
* ToPL, the local-DP variant (:func:`mechanisms.topl_release`).

The error is the mean squared error of 25 uniform random range sums per run; the planner's
predicted MSE of ToPS at the released θ (:func:`planner.tops_range_error`) is shown beside it.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpstream import datasets  # noqa: E402
from dpstream.demo._config import DemoConfig, Progress  # noqa: E402
from dpstream.demo._report import ReportFigure, ReportSection, ReportTable  # noqa: E402
from dpstream.demo._report import format_number as fmt  # noqa: E402
from dpstream.demo._summary import ReleaseEntry  # noqa: E402
from mechanisms import PrivacyRecord, pak_release, topl_release, tops_release  # noqa: E402
from planner import tops_range_error  # noqa: E402

__all__ = ["run_tops_stage"]

TIME_LAG = 65_536
QUERIES = 25
_METHODS = ("ToPS", "PAK Mechanism 1 (τ ≤ B)", "ToPL (local DP)", "all-zero answer")


def _queries(rng: np.random.Generator, r: int) -> np.ndarray:
    ends = np.sort(rng.integers(0, r, size=(QUERIES, 2)), axis=1)
    return ends


def _entries(config: DemoConfig, bound: float) -> list[ReleaseEntry]:
    """Privacy records of the three releases, from the stage's public parameters."""
    eps, common = config.epsilon, {"bound": bound, "seeded": True, "epsilon": config.epsilon}
    records = (
        ("ToPS", PrivacyRecord(
            unit="event", delta=0.0, mechanism="tops",
            proof="[ToPS21]: threshold on the first m values (ε) and tree on the rest (ε), "
            "disjoint: event-level max(ε, ε)",
            parameters={"time_lag": TIME_LAG, "epsilon_threshold": eps, "epsilon_perturb": eps},
            **common)),
        (_METHODS[1], PrivacyRecord(
            unit="event", delta=2.0**-20, mechanism="pak-mechanism-1",
            proof="[PAK19] §III-C (privacy of Mechanism 1)", parameters={"time_lag": TIME_LAG},
            **common)),
        (_METHODS[2], PrivacyRecord(
            unit="local", delta=0.0, mechanism="topl", proof="[ToPS21] ToPL: ε-LDP per reading",
            parameters={"time_lag": TIME_LAG}, **common)),
    )  # fmt: skip
    return [
        ReleaseEntry(
            stage="Range sums",
            label=label,
            record=rec.to_dict(),
            count=config.tops_runs,
            value_unit="kW",
            step="one-minute",
            subject="the household's power",
        )  # fmt: skip
        for label, rec in records
    ]


def run_tops_stage(
    config: DemoConfig, progress: Progress
) -> tuple[ReportSection, dict, list[ReleaseEntry]]:
    """Run ToPS, PAK and ToPL ``tops_runs`` times each; MSE of random range sums."""
    values = datasets.household_minutes_stream()
    bound = datasets.HOUSEHOLD_MINUTES_BOUND
    eps = config.epsilon
    r = values.size - TIME_LAG
    progress.step(
        f"ToPS: {config.tops_runs} run{'s' if config.tops_runs != 1 else ''} each of ToPS, "
        f"PAK and ToPL, {QUERIES} range queries per run over {r:,} released steps"
    )
    cumulative = np.concatenate([[0.0], np.cumsum(values[TIME_LAG:])])
    seed = config.experiment_seed(3)
    rng = np.random.default_rng(seed)  # public query positions, not noise
    errors: dict[str, list[float]] = {m: [] for m in _METHODS}
    sizes: list[float] = []  # |true range sum|, to state the RMSE as a share of it
    predicted, thetas, kept = [], [], None
    bar = progress.bar(config.tops_runs, unit="run", desc="Range-query runs")
    for run in range(config.tops_runs):
        base = seed + 100 * run
        tops = tops_release(
            values, bound=bound, epsilon_threshold=eps, epsilon_perturb=eps, time_lag=TIME_LAG,
            seed=base + 1,
        )  # fmt: skip
        pak = pak_release(
            values, bound=bound, epsilon=eps, delta=2.0**-20, time_lag=TIME_LAG, seed=base + 2
        )
        topl = topl_release(values, bound=bound, epsilon=eps, time_lag=TIME_LAG, seed=base + 3)
        if kept is None:
            kept = tops
        thetas.append(tops.threshold)
        predicted.append(
            tops_range_error(
                tops.threshold,
                prefix=values[:TIME_LAG],
                horizon=r,
                epsilon_perturb=eps,
                leaf_size=tops.leaf_size,
                levels=tops.levels,
            ).mse
        )
        for i, j in _queries(rng, r):  # released steps i..j = input steps m + i..m + j
            truth = cumulative[j + 1] - cumulative[i]
            first, last = TIME_LAG + int(i), TIME_LAG + int(j)
            for method, release in zip(_METHODS[:3], (tops, pak, topl), strict=True):
                errors[method].append((release.range_sum(first, last) - truth) ** 2)
            errors[_METHODS[3]].append(truth**2)
            sizes.append(abs(truth))
        bar.update(1)
    bar.close()
    mse = {m: float(np.mean(e)) for m, e in errors.items()}
    table = pd.DataFrame(
        [
            {
                "method": m,
                "range-sum MSE ((kW·min)²)": mse[m],
                "MSE / ToPS": mse[m] / mse["ToPS"],
                "RMSE (kW·min)": float(np.sqrt(mse[m])),
                "RMSE / mean true range sum (%)": 100 * float(np.sqrt(mse[m]) / np.mean(sizes)),
            }
            for m in _METHODS
        ]
    )
    table["planner's predicted MSE ((kW·min)²)"] = [float(np.mean(predicted))] + [np.nan] * 3
    _plot(config, table, values, kept)
    section = ReportSection(
        key="tops",
        title="How accurate are range sums? ToPS, PAK and ToPL on the event stream",
        paragraphs=(
            f"Stream: the household's power per minute (n = {values.size:,}, B = {bound:g} kW). "
            f"The first m = {TIME_LAG:,} values choose the threshold; the other {r:,} are "
            f"released at ε = {eps:g} (event level; ToPL: each reading private on its own, local "
            f"DP). {fmt(config.tops_runs)} run{'s' if config.tops_runs != 1 else ''} × "
            f"{QUERIES} uniform random range sums V(i, j) "
            "(the sum of the readings from minute i to minute j, in kW·min); the RMSE is also "
            "given as a share of the mean size of the true sums.",
            f"ToPS chose the threshold θ = {fmt(float(np.median(thetas)))} kW (median over runs; "
            "readings above θ are clipped to it); the planner's prediction of ToPS's MSE at "
            "that θ reads the data (an analysis, not a release).",
        ),
        tables=(ReportTable(name="tops_range_queries", caption="Range-sum errors", frame=table),),
        figures=(
            ReportFigure(
                file="tops_range_mse.png",
                caption="ToPS paper's metric: mean squared error of uniform random range sums by "
                "method (log scale), and a week of ToPS's release as hourly means (sums over 60 "
                "steps) against the real readings.",
            ),
        ),
    )
    share = 100 * float(np.sqrt(mse["ToPS"]) / np.mean(sizes))
    answer = (
        f"Range sums on the event stream (ε = {eps:g}): ToPS's typical error (RMSE) is "
        f"{fmt(share)}% of the size of a range sum; its mean squared error is "
        f"{fmt(mse['PAK Mechanism 1 (τ ≤ B)'] / mse['ToPS'])} times lower than PAK's and "
        f"{fmt(mse['ToPL (local DP)'] / mse['ToPS'])} times lower than local-DP ToPL's."
    )
    key = {
        "tops_mse": mse["ToPS"],
        "tops_vs_pak": mse["PAK Mechanism 1 (τ ≤ B)"] / mse["ToPS"],
        "tops_threshold_median": float(np.median(thetas)),
        "tops_rmse_share": share / 100,
        "tops_answer": answer,
    }
    return section, key, _entries(config, bound)


def _plot(config: DemoConfig, table: pd.DataFrame, values: np.ndarray, tops) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8), width_ratios=(1, 1.6))
    mse_column = "range-sum MSE ((kW·min)²)"
    ax1.barh(table["method"], table[mse_column], color=["C3", "C0", "C2", "grey"])
    ax1.set_xscale("log")
    ax1.invert_yaxis()
    ax1.set_xlabel("MSE of range sums ((kW·min)²)")
    ax1.grid(alpha=0.3, axis="x")
    hours = 7 * 24  # one week of hourly means: range sums over 60 steps / 60
    real = values[TIME_LAG:][: hours * 60].reshape(hours, 60).mean(axis=1)
    released = tops.values[: hours * 60].reshape(hours, 60).mean(axis=1)
    steps = np.arange(hours) / 24.0
    ax2.plot(steps, real, color="black", lw=1.0, label="real")
    ax2.plot(steps, released, color="C3", lw=1.0, label="ToPS (hourly means of the release)")
    ax2.axhline(tops.threshold, color="C3", ls="--", lw=0.8, label=f"θ = {tops.threshold:.1f} kW")
    ax2.set_xlabel("day of the released week")
    ax2.set_ylabel("hourly mean power (kW)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(config.out / "tops_range_mse.png", dpi=110)
    plt.close(fig)
