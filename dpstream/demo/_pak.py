"""Demo stage 1: choose PAK's parameters on the bundled event stream and check the prediction.

The analyst's question: *which parameters, and how large will the error be?* On one
household's per-minute power in 2007 (UCI, light-tailed, n = 521,669, public bound B = 36 kW)
the stage

1. picks the time lag m privately from public inputs ([PAK19] §VI-B),
2. plans Mechanism 1's local parameters by minimising Eq. 16 with TNC on the first m values
   (an analysis of the data, as in the paper's Table I; :func:`planner.plan_pak`),
3. sweeps ε and m for the improvement factor IF (Fig. 7), and
4. runs Mechanism 1 and plain BT repeatedly, comparing the realised final-sum errors with the
   predicted ones (Figs. 8 and 10) and the realised outlier error with its estimate (Fig. 9).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstream import datasets
from dpstream.demo._charts import chart_pak_sweeps
from dpstream.demo._config import DemoConfig, Progress
from dpstream.demo._report import (
    ReportChart,
    ReportFigure,
    ReportSection,
    ReportTable,
    format_number,
)
from dpstream.demo._summary import ReleaseEntry
from mechanisms import PrivacyRecord
from planner import (
    plot_predicted_vs_realised,
    plot_sweeps,
    predicted_vs_realised,
    sweep_epsilon,
    sweep_time_lag,
    time_lag_heuristic,
)

__all__ = ["run_pak_stage"]

DELTA = 2.0**-20
BETA = 0.02
#: The plan's columns in the reader's words (symbols explained in the report's list).
_PLAN_COLUMNS = {
    "IF": "IF (× better than BT)",
    "error_bound": "predicted 98% error (kW·min)",
    "baseline_error_bound": "BT's 98% error (kW·min)",
}


def _entries(config: DemoConfig, bound: float, m: int, counter: str) -> list[ReleaseEntry]:
    """Privacy records of the stage's releases, from its public parameters (the planner's
    runs return errors, not release objects)."""
    common = {"unit": "event", "epsilon": config.epsilon, "bound": bound, "seeded": True}
    records = (
        ("Mechanism 1", PrivacyRecord(
            delta=DELTA, mechanism="pak-mechanism-1",
            proof="[PAK19] §III-C (privacy of Mechanism 1)",
            parameters={"time_lag": m, "beta": BETA, "counter": counter}, **common)),
        ("BT (binary tree with B)", PrivacyRecord(
            delta=0.0, mechanism="binary-tree", proof="[CSS11] binary mechanism, [DNPR10]",
            **common)),
    )  # fmt: skip
    return [
        ReleaseEntry(
            stage="Which parameters?",
            label=label,
            record=rec.to_dict(),
            count=config.pak_runs,
            value_unit="kW",
            step="one-minute",
            subject="the household's power",
        )  # fmt: skip
        for label, rec in records
    ]


def run_pak_stage(
    config: DemoConfig, progress: Progress
) -> tuple[ReportSection, dict, list[ReleaseEntry]]:
    """Plan, sweep and run Mechanism 1 against BT; return the section, key numbers, releases."""
    values = datasets.household_minutes_stream()
    bound = datasets.HOUSEHOLD_MINUTES_BOUND
    eps = config.epsilon
    lag = time_lag_heuristic(epsilon=eps, delta=DELTA, beta=BETA, p_max=0.005)
    m = lag.m
    progress.step("PAK: planning Mechanism 1 (Eq. 16, TNC) and sweeping ε and m")
    eps_grid = [0.1, 1.0] if config.quick else [0.05, 0.1, 0.3, 1.0, 3.0]
    lag_grid = [20_000, m] if config.quick else [10_000, 20_000, 50_000, m, 150_000]
    sweep_e = sweep_epsilon(values, eps_grid, time_lag=m, n=values.size, bound=bound, delta=DELTA)
    sweep_m = sweep_time_lag(
        values, sorted(set(lag_grid)), n=values.size, bound=bound, epsilon=eps, delta=DELTA
    )
    plot_sweeps(sweep_e, sweep_m, str(config.out / "pak_sweeps.png"), title="PAK Fig. 7")

    progress.step(f"PAK: {config.pak_runs} runs of Mechanism 1 and BT on n = {values.size:,}")
    # The paper's protocol (Figs. 8-11: Mechanism 1 with its binary tree), whose final sums are
    # drawn vectorised (mechanisms.pak._final_sums): 1,000 runs in about a second. Through the
    # default counter each run is a whole release (~0.15 s); its gain is measured in
    # docs/results/counting.md and docs/results/pak_defaults.md.
    result = predicted_vs_realised(
        values, bound=bound, epsilon=eps, delta=DELTA, beta=BETA, time_lag=m,
        runs=config.pak_runs, seed=config.experiment_seed(1), counter="binary_tree",
    )  # fmt: skip
    plot_predicted_vs_realised(
        result, str(config.out / "pak_errors.png"), title="PAK Figs. 8–11 on household power"
    )
    summary = result.summary()
    plan = result.plan
    counter = plan.counter or "binary_tree"
    plan_table = pd.DataFrame([{"time lag m": m, **plan.as_row()}]).drop(columns=["m"])
    plan_table = plan_table.rename(columns=_PLAN_COLUMNS)
    total = float(values.sum())  # the true final sum, to state the errors as a share of it
    outcome = pd.DataFrame(
        [
            {"quantity": "error at the last step that 98% of runs stay below (kW·min), "
             "Mechanism 1",
             "predicted": plan.error_bound, "realised": result.realised_error_bound},
            {"quantity": "the same, as a share of the true total (%)",
             "predicted": 100 * plan.error_bound / total,
             "realised": 100 * result.realised_error_bound / total},
            {"quantity": "error at the last step that 98% of runs stay below (kW·min), BT with B",
             "predicted": plan.baseline_error_bound,
             "realised": result.realised_baseline_error_bound},
            {"quantity": "the same, as a share of the true total (%)",
             "predicted": 100 * plan.baseline_error_bound / total,
             "realised": 100 * result.realised_baseline_error_bound / total},
            {"quantity": "improvement factor IF (× smaller than BT, from the 98% errors)",
             "predicted": plan.improvement_factor, "realised": summary["realised_IF_quantile"]},
            {"quantity": "improvement factor (× smaller than BT, from the mean errors)",
             "predicted": np.nan, "realised": summary["realised_IF_mean"]},
            {"quantity": "share of runs within the predicted bound (≥ 98% promised)",
             "predicted": 1 - BETA, "realised": summary["coverage"]},
        ]
    )  # fmt: skip
    sweeps = pd.concat(
        [
            sweep_e[["epsilon", "m", "IF", "r", "λ", "p", "ε₁/ε"]],
            sweep_m[["epsilon", "m", "IF", "r", "λ", "p", "ε₁/ε"]],
        ],
        ignore_index=True,
    ).rename(columns={"epsilon": "ε", **_PLAN_COLUMNS})
    section = ReportSection(
        key="pak",
        title="Which parameters? PAK's Mechanism 1 on an event stream",
        paragraphs=(
            f"Stream: one household's active power per minute in 2007 (UCI, CC BY 4.0), "
            f"n = {values.size:,} readings in kW, public bound B = {bound:g} kW; light-tailed "
            f"beyond its 0.5% quantile (PAK Def. 12). ε = {eps:g}, δ = 2⁻²⁰, β = {BETA} "
            "(the error bounds hold in 98% of runs).",
            f"The time lag m = {m:,} is chosen from public inputs only (PAK §VI-B: criterion 1 "
            f"gives {lag.criterion1:,}, criterion 2 gives {lag.criterion2:,}). The local "
            "parameters are then planned by minimising PAK Eq. 16 with scipy's TNC on the first "
            "m values: like the paper's Table I this reads the data, so it is an analysis; a "
            "release would plan on public or already-released data. The steps after m are "
            f"counted with {counter.replace('_', ' ')}, the paper's counter (its Figs. 8–11; "
            "Eq. 16 uses its exact variance). dpstream's default counter for this budget is "
            "the k-ary tree with least squares: through it Mechanism 1 errs 2.7–3.4x less "
            "(docs/results/counting.md, pak_defaults.md).",
            f"Over {format_number(config.pak_runs)} run(s), Mechanism 1's error at the last "
            "step (the running total of all n readings, in kW·min) is compared with the plan's "
            "prediction, and with BT (the binary tree with B). Errors are also given as a share "
            f"of the true total ({format_number(total)} kW·min).",
        ),
        tables=(
            ReportTable(name="pak_plan", caption="The plan (PAK Table I row)", frame=plan_table),
            ReportTable(name="pak_outcome", caption="Predicted against realised", frame=outcome),
            ReportTable(
                name="pak_sweeps", caption="IF against ε and against m (PAK Fig. 7)", frame=sweeps
            ),
        ),  # fmt: skip
        charts=(
            ReportChart(
                name="pak_sweeps",
                spec=chart_pak_sweeps(sweep_e, sweep_m, m=m, epsilon=eps),
                png="pak_sweeps.png",
                caption="PAK Fig. 7: the planned improvement factor over BT against ε (left, at "
                "the heuristic's m) and against the time lag m (right, at the demo's ε); one "
                "point per planned value (hover for the numbers).",
            ),
        ),
        figures=(
            ReportFigure(
                file="pak_errors.png",
                caption="PAK Figs. 8–11: densities of |error| at step n (in units of B) for BT "
                "and Mechanism 1 with the predicted 98% bounds (dashed; PAK19 calls them α, not "
                "the α of the hierarchy release), and the realised outlier error over its "
                "estimate (right).",
            ),
        ),
    )
    key = {
        "pak_m": m,
        "pak_counter": counter,
        "pak_predicted_IF": plan.improvement_factor,
        "pak_realised_IF_mean": summary["realised_IF_mean"],
        "pak_coverage": summary["coverage"],
        "pak_threshold_median": float(result.runs["threshold"].median()),
        "pak_error_share_of_total": float(result.realised_error_bound / total),
    }
    return section, key, _entries(config, bound, m, counter)
