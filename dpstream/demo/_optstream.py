"""Demo stage 2: release the regional → national load hierarchy with OptStream and baselines.

The operator's question: *how accurate is the daily release, and is it consistent?* The
bundled SimBench 2016 regions (four regions summing to a national total, half-hourly) are
released for one month under (w, α)-indistinguishability ([FV19] §5.1, w = 48: one day) with
OptStream (both samplers) and the Laplace, DFT and PeGaSus baselines, at the configured ε.
Errors are the mean L1 error per step and series ([FV19] §6), the figures are [FV19] Figs. 2,
3 and 4.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpstream import datasets  # noqa: E402
from dpstream.commands._plan_curve import hierarchy_curve_spec  # noqa: E402
from dpstream.demo._charts import chart_hierarchy_errors, chart_series  # noqa: E402
from dpstream.demo._config import DemoConfig, Progress  # noqa: E402
from dpstream.demo._report import ReportChart, ReportFigure, ReportSection, ReportTable  # noqa: E402
from dpstream.demo._report import format_number as fmt  # noqa: E402
from dpstream.demo._summary import ReleaseEntry  # noqa: E402
from dpstream.pipelines._optstream_pipeline import release_optstream  # noqa: E402
from dpstream.pipelines._wevent_pipeline import release_dft, release_laplace, release_pegasus  # noqa: E402
from planner import OptStreamPlan, plan_optstream  # noqa: E402

__all__ = ["METHODS", "release_hierarchy_methods", "run_optstream_stage"]

METHODS = ("OptStream (planned k)", "OptStream (L1 sampler, k = 10)", "Laplace", "DFT", "PeGaSus")
#: Column names of the error table in the page and its CSV (with their units).
_ERROR_COLUMNS = {
    "epsilon": "ε",
    "national": "national (kW)",
    "regions": "regions (kW)",
    "all series": "all series (kW)",
    "consistency_gap": "consistency gap (kW)",
    "negative_values": "negative values",
}
_COLORS = dict(zip(METHODS, ("C3", "C1", "C0", "C2", "C4"), strict=True))


def release_hierarchy_methods(
    leaves: pd.DataFrame, hierarchy: dict, *, epsilon: float, alpha: float, plan: OptStreamPlan,
    seed: int,
) -> dict[str, pd.DataFrame]:  # fmt: skip
    """One release of the hierarchy per method (same ε, w = 48, α); columns are the nodes."""
    common = {"epsilon": epsilon, "hierarchy": hierarchy, "alpha": alpha}
    planned = plan.release_parameters()
    return {
        METHODS[0]: release_optstream(leaves, seed=seed, **planned, **common),
        METHODS[1]: release_optstream(leaves, k=10, sampling="l1", seed=seed + 1, **common),
        METHODS[2]: release_laplace(leaves, seed=seed + 2, **common),
        METHODS[3]: release_dft(leaves, seed=seed + 3, **common),
        METHODS[4]: release_pegasus(leaves, seed=seed + 4, **common),
    }


#: The series chart's default release (k = "auto") drawn with its ± 1.96 standard-error band.
AUTO_METHOD = "OptStream (default, k auto) ± 1.96 SE"


def _default_bands(config, leaves, hierarchy, shown_releases) -> dict:
    """Add the default release (k = "auto") of each ε to the chart, with its 95 % band from
    :func:`dpstream.std_errors` (public attrs only; a seeded experiment like the others)."""
    from dpstream._std_errors import std_errors

    bands = {}
    for eps, by_method in shown_releases.items():
        auto = release_optstream(
            leaves, epsilon=eps, hierarchy=hierarchy, alpha=config.alpha,
            seed=config.experiment_seed(3),
        )  # fmt: skip
        se = std_errors(auto, hierarchy=hierarchy)["national"]
        by_method[AUTO_METHOD] = auto["national"]
        bands[eps] = (AUTO_METHOD, auto["national"] - 1.96 * se, auto["national"] + 1.96 * se)
    return bands


def _consistency_gap(frame: pd.DataFrame, hierarchy: dict) -> float:
    """Mean |parent − Σ children| over steps and parents (0 for a consistent release)."""
    gaps = [(frame[p] - frame[list(c)].sum(axis=1)).abs().mean() for p, c in hierarchy.items()]
    return float(np.mean(gaps))


def release_entries(
    stage: str, kept: dict[float, dict[str, pd.DataFrame]], count: int
) -> list[ReleaseEntry]:
    """The privacy record each release frame carries, in the operator's terms."""
    return [
        ReleaseEntry(
            stage=stage,
            label=f"{method}, ε = {eps:g}",
            record=frame.attrs["privacy"],
            count=count,
            value_unit="kW",
            step="half-hour",
            subject="one region's load",
            steps_per_day=48,
        )  # fmt: skip
        for eps, by_method in kept.items()
        for method, frame in by_method.items()
        if "privacy" in frame.attrs
    ]


def run_optstream_stage(
    config: DemoConfig, progress: Progress
) -> tuple[ReportSection, dict, dict[float, dict[str, pd.DataFrame]], pd.DataFrame]:
    """Release, score and plot; also return one release per ε and method, and the truth.

    The key numbers include ``"_entries"``: the releases' privacy records
    (:class:`dpstream.demo._summary.ReleaseEntry`), popped by the caller."""
    frame = datasets.load_regional()
    hierarchy = datasets.regional_hierarchy()
    month = frame.loc[config.month]
    if config.days is not None:
        month = month.iloc[: 48 * config.days]
    leaves = month[hierarchy["national"]]
    history = frame.loc[_previous_month(config.month)].to_numpy()
    plans = {
        eps: plan_optstream(history, epsilon=eps, alpha=config.alpha, n_levels=2)
        for eps in config.optstream_epsilons
    }
    progress.step(
        f"OptStream: releasing {len(month) // 48} days of the regional hierarchy with 5 methods, "
        f"ε ∈ {list(config.optstream_epsilons)}, {config.optstream_trials} trial(s) each"
    )
    rows, kept = [], {}
    mean_load = month.mean()  # per series, to state the errors as a share of the load
    seed = config.experiment_seed(2)
    n_releases = len(config.optstream_epsilons) * config.optstream_trials * len(METHODS)
    bar = progress.bar(n_releases, unit="release", desc="Hierarchy releases")
    for eps in config.optstream_epsilons:
        for trial in range(config.optstream_trials):
            releases = release_hierarchy_methods(
                leaves, hierarchy, epsilon=eps, alpha=config.alpha, plan=plans[eps],
                seed=seed + 10 * trial,
            )  # fmt: skip
            bar.update(len(releases))
            seed += 1000
            if trial == 0:
                kept[eps] = releases
            for method, released in releases.items():
                err = (released - month[released.columns]).abs().mean()
                share = err / mean_load[released.columns]
                rows.append(
                    {
                        "epsilon": eps, "method": method, "trial": trial,
                        "national": err["national"],
                        "national, % of mean load": 100 * share["national"],
                        "regions": float(err[hierarchy["national"]].mean()),
                        "regions, % of mean load": 100 * float(share[hierarchy["national"]].mean()),
                        "all series": float(err.mean()),
                        "consistency_gap": _consistency_gap(released, hierarchy),
                        "negative_values": int((released < 0).to_numpy().sum()),
                    }
                )  # fmt: skip
    bar.close()
    runs = pd.DataFrame(rows)
    table = runs.groupby(["epsilon", "method"], sort=False).mean(numeric_only=True).reset_index()
    table = table.drop(columns="trial")
    lap = table[table["method"] == "Laplace"].set_index("epsilon")["regions"]
    table["regions / Laplace"] = table["regions"] / table["epsilon"].map(lap)
    plan_table = pd.DataFrame(
        [
            {
                "epsilon": eps, "k": int(k), "predicted error": pred, "noise part": noise,
                "interpolation part": bias, "chosen": "◀" if k == plan.k else "",
            }
            for eps, plan in plans.items()
            for k, pred, noise, bias in zip(
                plan.candidates, plan.predicted, plan.noise, plan.bias, strict=True
            )
        ]
    )  # fmt: skip
    planned = table[table["method"] == METHODS[0]].set_index("epsilon")
    laplace = table[table["method"] == "Laplace"].set_index("epsilon")
    check = pd.DataFrame(
        [
            {
                "epsilon": eps, "planned k": plan.k,
                "predicted error (all series)": float(plan.predicted[plan.candidates == plan.k][0]),
                "predicted Laplace error": plan.predicted_laplace,
                "realised error (all series)": float(planned.loc[eps, "all series"]),
                "realised Laplace error": float(laplace.loc[eps, "all series"]),
            }
            for eps, plan in plans.items()
        ]
    )  # fmt: skip
    clip = _plot_series(config, month, kept)
    _plot_errors(config, table)
    shown = month["national"].iloc[: min(len(month), 3 * 48)]
    shown_releases = {e: {m: f["national"] for m, f in r.items()} for e, r in kept.items()}
    bands = _default_bands(config, leaves, hierarchy, shown_releases)  # issue 30
    series_chart = chart_series(shown, shown_releases, unit="kW", clip=clip, bands=bands)
    long = pd.concat(
        [
            table[["epsilon", "method"]].assign(
                level=level, error=table[level], share=table[f"{level}, % of mean load"] / 100
            )
            for level in ("national", "regions")
        ],
        ignore_index=True,
    )
    _plot_consistency(config, kept, hierarchy)
    best = table[table["method"] == METHODS[0]].set_index("epsilon")
    section = ReportSection(
        key="optstream",
        title="How accurate is the release? The regional → national hierarchy",
        paragraphs=(
            f"Data: SimBench 2016 (ODbL), four regions (sums of 44 feeders) and their national "
            f"total, half-hourly, {config.month}, {len(month) // 48} days. Privacy unit: "
            f"(w, α)-indistinguishability with w = 48 steps (one day) and α = {config.alpha:g} kW "
            "(any change of the load by up to α within a day is hidden); every level of the "
            "hierarchy gets ε/2 (FV19 Theorem 13).",
            f"Planning: the number of samples per day k is chosen for each ε by predicting the "
            f"error of every candidate k on the previous month ({_previous_month(config.month)}, "
            "treated as public history): the noise of the k samples plus the error of "
            "interpolating between them (planner.plan_optstream). The planned release puts the "
            "whole budget on equally spaced samples; the L1-sampler row is the paper's setting "
            "(k = 10, adaptive samples, feature queries).",
            "Columns: mean absolute error per half-hour (kW) for the national series and "
            "averaged over the regions, each also as a share of that series' mean load "
            f"(national mean load {fmt(float(mean_load['national']))} kW); consistency gap = mean "
            "|national − Σ regions| of the released values (0 means the release adds up); "
            "negative values released; regions / Laplace = the error relative to Laplace's.",
        ),
        tables=(
            ReportTable(
                name="optstream_plan_check",
                caption="The planned k: predicted against realised mean absolute error (kW per "
                "half-hour)",
                frame=check.rename(columns={"epsilon": "ε"}),
            ),
            ReportTable(
                name="optstream_plan",
                caption="Predicted mean absolute error (kW per half-hour) of every candidate k "
                "(planner.plan_optstream)",
                frame=plan_table.rename(columns={"epsilon": "ε"}),
            ),
            ReportTable(
                name="optstream_errors",
                caption="Mean absolute error per half-hour (kW), average of "
                + (
                    f"{config.optstream_trials} trials"
                    if config.optstream_trials > 1
                    else "one trial"
                ),
                frame=table.rename(columns=_ERROR_COLUMNS),
            ),
        ),
        charts=(
            ReportChart(
                name="optstream_series",
                spec=series_chart,
                png="optstream_series.png",
                caption="FV19 Fig. 2: the national load (black) and its releases over the first "
                f"three days, one panel per ε. The load axis stops at {fmt(clip)} kW (twice the "
                "real peak) so noise spikes do not flatten the real curve; hover a line for the "
                "value, scroll to zoom, drag to pan, double-click to reset.",
            ),
            ReportChart(  # issue 23: the ε–error curve per level, planned on last month
                name="optstream_epsilon_curve",
                spec=hierarchy_curve_spec(
                    frame.loc[_previous_month(config.month)][hierarchy["national"]], hierarchy,
                    alpha=config.alpha, epsilons=list(config.optstream_epsilons),
                    names={"root": "national", "leaves": "regions"},
                ),  # fmt: skip
                caption="Planning: the predicted error of the in-stream planner (best k and "
                "level shares per ε, planner.optstream_forward) as a share of the mean load, per "
                f"level, against ε, from {_previous_month(config.month)} alone; `dpstream plan "
                "optstream --target-mape P` returns the ε of a target. Hover for the values.",
            ),
            ReportChart(
                name="optstream_errors",
                spec=chart_hierarchy_errors(long, unit="kW"),
                png="optstream_errors.png",
                caption="FV19 Figs. 3/8/10: mean absolute error per half-hour by method and ε "
                "(log scale), national and regions; hover a bar for the error in kW and as a "
                "share of the mean load.",
            ),
        ),
        figures=(
            ReportFigure(
                file="optstream_consistency.png",
                caption="FV19 Fig. 4: released national minus the sum of the released regions, "
                "per step, at the smallest ε. OptStream's line is flat at zero.",
            ),
        ),
    )
    ours = table[table["method"].str.startswith("OptStream")]
    consistent = bool(
        (ours["consistency_gap"] < 1e-6).all() and (ours["negative_values"] == 0).all()
    )
    key = {f"optstream_regions_l1_eps{e:g}": float(best.loc[e, "regions"]) for e in best.index} | {
        f"optstream_vs_laplace_eps{e:g}": float(best.loc[e, "regions / Laplace"])
        for e in best.index
    }
    key |= {
        f"optstream_national_share_eps{e:g}": float(best.loc[e, "national, % of mean load"]) / 100
        for e in best.index
    } | {
        f"optstream_regions_share_eps{e:g}": float(best.loc[e, "regions, % of mean load"]) / 100
        for e in best.index
    }
    key["optstream_consistent"] = consistent
    key["_entries"] = release_entries("How accurate is the release?", kept, config.optstream_trials)
    return section, key, kept, month


def _previous_month(month: str) -> str:
    """'2016-02' -> '2016-01' (the history the plan reads)."""
    return str(pd.Period(month, freq="M") - 1)


def _plot_series(config: DemoConfig, truth: pd.DataFrame, kept: dict) -> float:
    """FV19 Fig. 2 as a PNG; returns the top of the load axis (twice the real peak)."""
    steps = slice(0, min(len(truth), 3 * 48))
    clip = 2.0 * float(truth["national"].iloc[steps].max())
    fig, axes = plt.subplots(len(kept), 1, figsize=(11, 3.2 * len(kept)), squeeze=False)
    for ax, (eps, releases) in zip(axes[:, 0], kept.items(), strict=True):
        ax.plot(
            truth.index[steps], truth["national"].iloc[steps], color="black", lw=2, label="real"
        )
        for method, released in releases.items():
            ax.plot(released.index[steps], released["national"].iloc[steps], lw=1,
                    color=_COLORS[method], label=method)  # fmt: skip
        ax.set_title(
            f"national load, ε = {eps:g}, α = {config.alpha:g} kW "
            f"(axis clipped at {fmt(clip)} kW: twice the real peak)"
        )
        ax.set_ylim(0, clip)
        ax.set_ylabel("load (kW)")
        ax.set_xlabel("time (half-hour steps)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(config.out / "optstream_series.png", dpi=110)
    plt.close(fig)
    return clip


def _plot_errors(config: DemoConfig, table: pd.DataFrame) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    epsilons = list(dict.fromkeys(table["epsilon"]))
    width = 0.8 / len(METHODS)
    for ax, column in zip(axes, ("regions", "national"), strict=True):
        for i, method in enumerate(METHODS):
            part = table[table["method"] == method].set_index("epsilon").reindex(epsilons)
            ax.bar(np.arange(len(epsilons)) + i * width, part[column], width,
                   color=_COLORS[method], label=method)  # fmt: skip
        ax.set_xticks(np.arange(len(epsilons)) + 0.4 - width / 2)
        ax.set_xticklabels([f"ε = {e:g}" for e in epsilons])
        ax.set_yscale("log")
        ax.set_ylabel("mean absolute error per half-hour (kW)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.set_title(column)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(config.out / "optstream_errors.png", dpi=110)
    plt.close(fig)


def _plot_consistency(config: DemoConfig, kept: dict, hierarchy: dict) -> None:
    eps = min(kept)
    fig, ax = plt.subplots(figsize=(11, 3.4))
    for method, released in kept[eps].items():
        gap = released["national"] - released[hierarchy["national"]].sum(axis=1)
        ax.plot(released.index, gap, lw=0.8, color=_COLORS[method], label=method)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel("national − Σ regions (kW)")
    ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel("time (half-hour steps)")
    ax.set_title(f"hierarchical consistency of the releases, ε = {eps:g}")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(config.out / "optstream_consistency.png", dpi=110)
    plt.close(fig)
