"""Forecasting on released data: the protocol of [FV19] §6.1.3 (Figs. 5 and 6) on bundled data.

For February, June and October 2016 and each of the four SimBench regions of
``dpstream.load_regional()`` (each region released as its own stream, w = 48, α = 1 kW, the
settings of ``scripts/optstream_accuracy.py``):

* release the month plus the four weeks before it with OptStream (L1 sampler, the default),
  Laplace, DFT (k = 10) and PeGaSus at ε = 1 and ε = 0.1 (``--trials`` seeds each);
* at every day of the month fit ARMA(1, 1) + constant to the previous 1,344 half-hours of the
  released series and forecast the 48 half-hours of that day (``forecasting.rolling_forecast``),
  and score them against the real day (mean L1 error, MAPE, 95 % interval coverage);
* the same on the real series (``Real``: the error privacy is measured against);
* beyond the paper, on the first ``--na-trials`` releases: the noise-aware fit (ARMA + white
  noise of the release's known variance; Laplace: exact, the others: measured on a public
  constant stream of 5,000 kW with ``forecasting.estimate_noise_variance``).

Writes ``docs/results/forecast_accuracy.csv`` (one row per month, ε, method and model: mean L1
over regions, days and trials, its ratio to ``Real``, ...), ``fig5_forecast.png`` (the
forecast of 2 February 2016, rural region, ε = 0.1) and ``fig6_forecast_errors.png``.

Part "models" (issue 13, item 5): every forecaster of ``rolling_forecast(model=...)`` (ARMA,
SARIMA, Holt-Winters, the 7-day profile and auto) on the real data and on each release of the
bundled regional hierarchy (4 regions released with ``hierarchy=dpstream.regional_hierarchy()``,
so the national series is the consistent sum) at ε = 1 and α ∈ {1, 50} kW (w = 48, seeded:
an experiment), day-ahead from every day of the month(s). Writes ``forecast_models.csv`` (mean
L1 error in kW, MAPE in %, 95 % interval coverage per month, source, α, model and series) and
``forecast_models.md`` (averaged over the 5 series).

Run (niced, one BLAS thread): ``nice python scripts/forecast_accuracy.py [--trials 2]
[--part paper|models|all]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # tiny Kalman-filter solves: BLAS threads only contend

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import dpstream  # noqa: E402
from forecasting import (  # noqa: E402
    estimate_noise_variance,
    forecast_errors,
    laplace_noise_variance,
    plot_forecast,
    plot_forecast_errors,
    rolling_forecast,
)

REGIONS = ["rural", "semiurban", "urban", "commercial"]
MONTHS = {"Feb": 2, "Jun": 6, "Oct": 10}
EPSILONS = (1.0, 0.1)
TRAIN_DAYS = 28
PUBLIC_LEVEL = 5000.0  # kW: the public order of magnitude of a region's load
FIG5 = {"month": "Feb", "epsilon": 0.1, "region": "rural", "day": pd.Timestamp("2016-02-02")}


def releases(eps: float) -> dict[str, object]:
    return {
        "OptStream": lambda f, s: dpstream.release_optstream(f, alpha=1.0, epsilon=eps, seed=s),
        "Laplace": lambda f, s: dpstream.release_laplace(f, alpha=1.0, epsilon=eps, seed=s),
        "DFT": lambda f, s: dpstream.release_dft(f, alpha=1.0, epsilon=eps, k=10, seed=s),
        "PeGaSus": lambda f, s: dpstream.release_pegasus(f, alpha=1.0, epsilon=eps, seed=s),
    }


def noise_variances() -> dict[tuple[str, float], float]:
    out = {}
    for eps in EPSILONS:
        for name, fn in releases(eps).items():
            if name == "Laplace":
                out[name, eps] = laplace_noise_variance(eps, w=48, alpha=1.0)
            else:
                out[name, eps] = estimate_noise_variance(
                    lambda s, fn=fn: fn(s.to_frame(), 99), level=PUBLIC_LEVEL
                )
    return out


def month_slice(data: pd.DataFrame, month: int) -> pd.DataFrame:
    first = pd.Timestamp(2016, month, 1)
    last = first + pd.offsets.MonthEnd(0) + pd.Timedelta(hours=23, minutes=30)
    return data.loc[first - pd.Timedelta(days=TRAIN_DAYS) : last]


def score(series: pd.Series, truth: pd.Series, **kwargs) -> tuple[pd.DataFrame, pd.DataFrame]:
    fc = rolling_forecast(series, **kwargs)
    return fc, forecast_errors(fc, truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2, help="releases per method and ε")
    parser.add_argument("--na-trials", type=int, default=1, help="of which noise-aware fits")
    parser.add_argument("--out", default="docs/results/forecast_accuracy.csv")
    parser.add_argument("--months", nargs="+", default=list(MONTHS), choices=list(MONTHS))
    parser.add_argument("--regions", nargs="+", default=REGIONS, choices=REGIONS)
    parser.add_argument("--part", default="all", choices=["paper", "models", "all"])
    parser.add_argument(
        "--model-months", nargs="+", default=["Feb"], choices=list(MONTHS), help="part models"
    )
    parser.add_argument("--sources", nargs="+", help="part models: e.g. Real OptStream@1")
    parser.add_argument("--part-out", help="part models: write these sources' rows here")
    parser.add_argument("--merge", nargs="+", help="part models: merge --part-out files")
    args = parser.parse_args()
    if args.part in ("models", "all"):
        models_part(args)
    if args.part == "models":
        return
    months = {k: v for k, v in MONTHS.items() if k in args.months}
    start = time.perf_counter()
    data = dpstream.load_regional()[REGIONS]
    variances = noise_variances()
    rows, panels = [], {}
    for month, m in months.items():
        frame = month_slice(data, m)
        for region in args.regions:
            fc, err = score(frame[region], data[region])
            real = {"month": month, "method": "Real", "model": "ARMA", "trial": 0}
            rows.append(err.assign(region=region, **real))
            if (month, region) == (FIG5["month"], FIG5["region"]):
                panels["Real"] = (frame[region], fc)
        for eps in EPSILONS:
            for trial in range(args.trials):
                for name, fn in releases(eps).items():
                    released = fn(frame, 1000 + trial)
                    for region in args.regions:
                        meta = {"month": month, "epsilon": eps, "method": name, "trial": trial}
                        fc, err = score(released[region], data[region])
                        rows.append(err.assign(model="ARMA", region=region, **meta))
                        show = (month, eps, region, trial) == (
                            FIG5["month"], FIG5["epsilon"], FIG5["region"], 0
                        )  # fmt: skip
                        if show:
                            panels[name] = (released[region], fc)
                        if trial < args.na_trials:
                            nv = variances[name, eps]
                            fc, err = score(released[region], data[region], noise_variance=nv)
                            rows.append(err.assign(model="ARMA+noise", region=region, **meta))
                            if show and name == "OptStream":
                                panels["OptStream, noise-aware"] = (released[region], fc)
                print(
                    f"{month} ε={eps:g} trial {trial}: {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
    per_origin = pd.concat(rows, ignore_index=True)
    table = summarize(per_origin, variances, months)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    folder = Path(args.out).parent
    fig5(data[FIG5["region"]], panels).savefig(folder / "fig5_forecast.png", dpi=120)
    fig6(table).savefig(folder / "fig6_forecast_errors.png", dpi=120)
    report(table)
    print(
        f"{args.trials} release trials per method and ε ({args.na_trials} with the noise-aware "
        f"fit), {len(per_origin)} scored forecasts, {time.perf_counter() - start:.0f} s; wrote "
        f"{args.out} and the figures."
    )


def summarize(per_origin: pd.DataFrame, variances: dict, months: dict) -> pd.DataFrame:
    real = per_origin[per_origin["method"] == "Real"]
    rows = []
    for eps in EPSILONS:
        for month in months:
            base = real[real["month"] == month]
            ref = base["l1"].mean()
            rows.append(_row(base, month, eps, "Real", "ARMA", ref, np.nan))
            sub = per_origin[(per_origin["month"] == month) & (per_origin["epsilon"] == eps)]
            for (name, model), part in sub.groupby(["method", "model"], sort=False):
                rows.append(_row(part, month, eps, name, model, ref, variances[name, eps]))
    return pd.DataFrame(rows)


def _row(part, month, eps, method, model, ref, nv) -> dict:
    by_trial = part.groupby("trial")["l1"].mean()
    return {
        "month": month,
        "epsilon": eps,
        "method": method,
        "model": model,
        "l1": part["l1"].mean(),
        "l1_sd_trials": by_trial.std(ddof=1) if by_trial.size > 1 else np.nan,
        "ratio_to_real": part["l1"].mean() / ref,
        "mape": part["mape"].mean(),
        "coverage95": part["coverage"].mean(),
        "trials": by_trial.size,
        "forecasts": len(part),
        "noise_variance": nv,
    }


def fig5(truth: pd.Series, panels: dict) -> Figure:
    fig = Figure(figsize=(13, 6.5), layout="constrained")
    axes = fig.subplots(2, 3, sharey=True)
    for ax, (name, (series, fc)) in zip(axes.flat, panels.items(), strict=False):
        released = None if name == "Real" else series
        plot_forecast(truth, fc, released=released, origin=FIG5["day"], ax=ax, title=name)
    fig.suptitle(
        f"ARMA(1,1) forecast of {FIG5['day']:%d %B %Y}, {FIG5['region']} region, "
        f"ε = {FIG5['epsilon']:g} ([FV19] Fig. 5)"
    )
    return fig


def fig6(table: pd.DataFrame) -> Figure:
    """Mean L1 error per method (top) and its ratio to the real-data error (bottom)."""
    fig = Figure(figsize=(12, 7), layout="constrained")
    axes = fig.subplots(2, len(EPSILONS), sharey="row")
    for col, eps in enumerate(EPSILONS):
        part = table[table["epsilon"] == eps].copy()
        part["label"] = part["method"].where(part["model"] == "ARMA", part["method"] + "+NA")
        common = {"method": "label", "log": False}
        plot_forecast_errors(
            part, ax=axes[0, col], title=f"ε = {eps:g}", ylabel="mean L1 error (kW)", **common
        )
        plot_forecast_errors(
            part, value="ratio_to_real", ax=axes[1, col], ylabel="ratio to Real", **common
        )
        axes[1, col].axhline(1.0, color="black", lw=0.8)
        axes[1, col].set_ylim(0.9, max(1.2, part["ratio_to_real"].max() * 1.02))
    fig.suptitle(
        "Day-ahead ARMA(1,1) forecasts from released data, 4 regions ([FV19] Fig. 6; "
        "+NA: noise-aware fit)"
    )
    return fig


def report(table: pd.DataFrame) -> None:
    label = table["method"].where(table["model"] == "ARMA", table["method"] + "+NA")
    wide = table.assign(label=label).pivot_table(
        index=["epsilon", "month"], columns="label", values="l1", sort=False
    )
    ratio = table.assign(label=label).pivot_table(
        index=["epsilon", "month"], columns="label", values="ratio_to_real", sort=False
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print("mean L1 error (kW):")
        print(wide.round(1))
        print("ratio to the error of forecasts from the real data:")
        print(ratio.round(3))


MODEL_ALPHAS = (1.0, 50.0)
MODEL_EPSILON = 1.0


def models_part(args: argparse.Namespace) -> None:
    """Every model on the real series and on each release (see the module notes).

    ``--sources`` picks a subset (e.g. ``Real Laplace@50``) and ``--part-out`` writes its rows
    only, so that sources can run in separate processes; ``--merge`` then reads those files
    and writes the table.
    """
    folder = Path(args.out).parent
    if args.merge:
        table = pd.concat([pd.read_csv(f) for f in args.merge], ignore_index=True)
        folder.mkdir(parents=True, exist_ok=True)
        table.to_csv(folder / "forecast_models.csv", index=False)
        text = models_markdown(table, args)
        (folder / "forecast_models.md").write_text(text, encoding="utf-8")
        print(text)
        return
    start = time.perf_counter()
    data = dpstream.load_regional()
    hierarchy = dpstream.regional_hierarchy()
    leaves = hierarchy["national"]
    names = [*leaves, "national"]
    wanted = args.sources or ["Real"] + [f"{m}@{a:g}" for a in MODEL_ALPHAS for m in MODEL_RELEASES]
    rows = []
    for month in args.model_months:
        frame = month_slice(data, MONTHS[month])
        for source in wanted:
            method, _, alpha_text = source.partition("@")
            for trial in range(1 if method == "Real" else args.trials):
                if method == "Real":
                    alpha, released = np.nan, frame[names]
                else:
                    alpha = float(alpha_text)
                    common = {"epsilon": MODEL_EPSILON, "alpha": alpha, "hierarchy": hierarchy}
                    released = MODEL_RELEASES[method](frame[leaves], 2000 + trial, common)
                for name in names:
                    for model in MODEL_NAMES:
                        fc = rolling_forecast(released[name], model=model)
                        rows.append(
                            _model_row(fc, data[name], month, method, alpha, trial, name, model)
                        )
                print(
                    f"models: {month} {method} α={alpha:g} trial {trial}: "
                    f"{time.perf_counter() - start:.0f} s",
                    flush=True,
                )
                if args.part_out:
                    pd.DataFrame(rows).to_csv(args.part_out, index=False)  # after each source
    if not args.part_out:
        args.merge = None
        table = pd.DataFrame(rows)
        folder.mkdir(parents=True, exist_ok=True)
        table.to_csv(folder / "forecast_models.csv", index=False)
        text = models_markdown(table, args)
        (folder / "forecast_models.md").write_text(text, encoding="utf-8")
        print(text)


def _model_row(fc, truth, month, method, alpha, trial, name, model) -> dict:
    err = forecast_errors(fc, truth)
    chosen = fc.groupby("origin")["model"].first().value_counts()
    return {
        "month": month,
        "source": method,
        "alpha": alpha,
        "trial": trial,
        "series": name,
        "model": model,
        "l1": err["l1"].mean(),
        "mape": err["mape"].mean(),
        "coverage95": err["coverage"].mean(),
        "days": len(err),
        "chosen": ", ".join(f"{m} {c}" for m, c in chosen.items()),
    }


MODEL_NAMES = ("arma", "sarima", "holt-winters", "profile", "auto")
MODEL_RELEASES = {
    "OptStream": lambda f, s, c: dpstream.release_optstream(f, seed=s, **c),
    "Laplace": lambda f, s, c: dpstream.release_laplace(f, seed=s, **c),
    "DFT": lambda f, s, c: dpstream.release_dft(f, k=10, seed=s, **c),
    "PeGaSus": lambda f, s, c: dpstream.release_pegasus(f, seed=s, **c),
}


def _markdown(frame: pd.DataFrame, digits: int) -> str:
    """A pipe table (pandas' to_markdown needs tabulate, not a dependency)."""
    head = ["", *map(str, frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in frame.iterrows():
        cells = [f"{v:,.{digits}f}" for v in row]
        lines.append("| " + " | ".join([str(name), *cells]) + " |")
    return "\n".join(lines)


def models_markdown(table: pd.DataFrame, args: argparse.Namespace) -> str:
    label = table["source"].where(
        table["source"] == "Real", table["source"] + ", α = " + table["alpha"].map("{:g}".format)
    )
    table = table.assign(label=label)
    order = list(dict.fromkeys(label))
    parts = [
        "# Day-ahead forecast errors of every model (issue 13, item 5)",
        "",
        f"`python scripts/forecast_accuracy.py --part models --trials {args.trials} "
        f"--model-months {' '.join(args.model_months)}`: the 4 SimBench regions and their "
        f"national sum of `dpstream.load_regional()`, released as a hierarchy at ε = "
        f"{MODEL_EPSILON:g} (w = 48) and α ∈ {{1, 50}} kW, seeds 2000+; at every day of the "
        "month each model is refitted on the previous 28 days of the series (real or "
        "released) and forecasts the next 48 half-hours, scored against the real day. Means "
        f"over the 5 series, the days of {table['month'].nunique()} month(s) "
        f"({table.drop_duplicates('month')['days'].sum()} days) and {args.trials} trial(s).",
        "",
    ]
    for metric, caption in (("l1", "Mean L1 error (kW)"), ("mape", "MAPE (%)")):
        wide = table.pivot_table(index="label", columns="model", values=metric, sort=False)
        wide = wide.loc[order, list(MODEL_NAMES)]
        parts += [f"## {caption}", "", _markdown(wide, 1 if metric == "l1" else 2), ""]
    auto = (
        table[table["model"] == "auto"]
        .groupby("label", sort=False)["chosen"]
        .agg(lambda c: "; ".join(c))
    )
    parts += ["## Models chosen by auto (days per series, in order: regions then national)", ""]
    parts += [f"- {k}: {v}" for k, v in auto.items()] + [""]
    return "\n".join(parts)


if __name__ == "__main__":
    main()
