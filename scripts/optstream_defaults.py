"""Issue 13's table: the self-planning default of ``release_optstream`` against the baselines.

For the bundled regional hierarchy (2016, national -> 4 regions, kW) and the household
(2007, total -> 4 sub-meters, Wh per half-hour), for February, June and October (each with the
previous month as "last month"), each α/ε in {1, 10, 50, 100, 500} (ε = 1) and ``--trials``
seeded trials, release the month with

* ``auto``: ``release_optstream`` defaults (k="auto": in-stream planning, prior, planned level
  shares; nothing public);
* ``auto, no prior``: the same without the prior, with the same seeds (paired: the same
  measurements, so the difference is the prior's alone);
* ``auto + history``: the default given last month as public ``history=``;
* ``paper (k=10, l1)``: [FV19]'s settings, ε/h per level;
* ``Laplace``, ``DFT``, ``PeGaSus``: the w-event baselines with their defaults;
* ``reference``: last month's mean daily profile (true values; uses no current data);
* ``released days so far (no current data)``: each day forecast by the mean of the ``auto``
  release's measurements of the earlier days (the same information as the release);
* ``true days so far (oracle)``: the same from the true earlier days.

Metric: mean L1 error per value of the leaves (``leaves``) and of the root (``root``); for the
auto variants also the planner's predicted mean absolute error per value over all nodes
(mean over periods of ``attrs["plan"][i]["predicted_with_prior"]``, or ``"predicted"``
without a prior) against the realised one over the same periods (the first period without
history is planned blind and has no prediction).

Level shares (``--shares``): regional data, ``auto + history`` with ``level_shares`` =
"equal" (ε/h), "bottom-up", and planned shares for ``target`` = "leaves", "root", "all".

Run: ``python scripts/optstream_defaults.py [--trials 30] [--datasets regional household]``;
writes ``docs/results/<stem>.csv`` and ``<stem>.md`` after every (month, α/ε) and
``<share-stem>.csv`` (``--stem``, default ``optstream_defaults``; ``--share-stem``, default
``optstream_level_shares``). ``--first-trial N`` runs trials N.. (other seeds),
``--merge STEM STEM --stem OUT`` averages runs of equal trial counts into one table.
Speed (cProfile of one (month, α/ε), all methods): ~80 % of the time is the planner
(``plan_period``: the hierarchy's combination per candidate, a batched 4x4 inverse per step and
share). Its interpolation operators are now cached per (r, k), the per-node variances built
without Python loops and the einsum path search (0.56 s of 3.0 s) replaced by matmuls; the
new sandwich covariance and the prior-combined prediction cost part of that back: one
``auto + history`` release of a month, min of 3, same loaded machine, 2.0-2.1 s → 1.8-1.9 s.
The remaining cost is intrinsic (29 periods x 11 k x the share grid); a run of 30 trials
takes ~8 min per dataset here with the machine otherwise idle (~1 h when it was loaded), so the
datasets run as separate processes. The share table alone (``--datasets`` with no names):
~8 min for 30 trials.
Seeded runs: an experiment, not a release.
"""

from __future__ import annotations

import argparse
import time
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
MONTHS = {"Feb": ("02", "01"), "Jun": ("06", "05"), "Oct": ("10", "09")}
ALPHAS = (1.0, 10.0, 50.0, 100.0, 500.0)
#: Methods of the main table to run (``--methods``; empty: all), each with its own seeds.
METHODS: tuple[str, ...] = ()
#: Level-share variants to run (``--variants``; empty: all), each with its own seeds.
VARIANTS: tuple[str, ...] = ()


def _data(name: str) -> tuple[pd.DataFrame, dict, str, list[str], str]:
    if name == "regional":
        frame, hierarchy, year = dpstream.load_regional(), dpstream.regional_hierarchy(), "2016"
    else:
        frame, hierarchy, year = dpstream.load_household(), dpstream.household_hierarchy(), "2007"
    root = next(iter(hierarchy))
    return frame, hierarchy, root, list(hierarchy[root]), year


def _profile(previous: pd.DataFrame, index: pd.DatetimeIndex, w: int = 48) -> pd.DataFrame:
    """Last month's mean daily profile repeated over ``index`` (no current data)."""
    prof = previous.groupby(np.arange(len(previous)) % w).mean()
    return pd.DataFrame(
        prof.to_numpy()[np.arange(len(index)) % w], index=index, columns=previous.columns
    )


def _running_mean(values: np.ndarray, first: np.ndarray, w: int = 48) -> np.ndarray:
    """Each day forecast by the mean of the earlier days of ``values`` (T, N) (at most
    ``PRIOR_DAYS``); the first day, with nothing earlier, takes ``first``'s values."""
    from dpstream.pipelines._autoplan import PRIOR_DAYS

    out = np.array(first, dtype=np.float64)
    days = values.shape[0] // w
    per_day = values[: days * w].reshape(days, w, -1)
    for d in range(1, days + 1):
        stop = min(d * w + w, values.shape[0])
        prof = per_day[max(0, d - PRIOR_DAYS) : d].mean(axis=0)
        out[d * w : stop] = np.maximum(prof[: stop - d * w], 0.0)
    return out


#: A seeded experiment charges no data set's ledger (where releases are charged to one).
_CHARGES_DATA_SETS = hasattr(import_module("dpstream._dataset"), "account_release")
_NO_LEDGER = {"ledger": False} if _CHARGES_DATA_SETS else {}


def _methods(alpha: float, hierarchy: dict, history: pd.DataFrame) -> dict:
    common = {"epsilon": 1.0, "alpha": alpha, "hierarchy": hierarchy, **_NO_LEDGER}
    opt = dpstream.release_optstream
    return {
        "auto": (opt, common),
        "auto, no prior": (opt, {**common, "prior": False}),
        "auto + history": (opt, {**common, "history": history}),
        "paper (k=10, l1)": (opt, {**common, "k": 10, "sampling": "l1"}),
        "Laplace": (dpstream.release_laplace, common),
        "DFT": (dpstream.release_dft, common),
        "PeGaSus": (dpstream.release_pegasus, common),
    }


def _predicted_and_realised(
    out: pd.DataFrame, truth: pd.DataFrame, plans: list[dict], prior: bool, w: int = 48
) -> tuple[float, float]:
    """Mean predicted and realised error per value (all nodes) over the periods with a
    prediction (the first period without history is planned blind and predicts nothing);
    the prediction after the prior where there is one."""
    err = (out[truth.columns] - truth).abs().to_numpy()
    pred, real = [], []
    for p in plans:
        value = p["predicted"]
        if prior and p.get("predicted_with_prior") is not None:
            value = p["predicted_with_prior"]
        if value is None:
            continue
        pred.append(value)
        real.append(err[p["period"] * w : (p["period"] + 1) * w].mean())
    return float(np.mean(pred)), float(np.mean(real))


def paired_against_exact(trials: pd.DataFrame, states) -> list[tuple[str, str, float, float, int]]:
    """Paired differences of per-trial errors (columns ``trial``, ``state``, ``leaves``,
    ``root``) against ``state == "exact"``, in % of the exact mean: ``(level, state, mean,
    standard error, pairs)`` for every state but ``exact`` (the diagnostics
    ``optstream_history_fade.py`` and ``optstream_prior_gap.py``)."""
    out = []
    for level in ("leaves", "root"):
        p = trials.pivot_table(index="trial", columns="state", values=level)
        for name in [s for s in states if s != "exact"]:
            diff = (p[name] - p["exact"]) / p["exact"].mean() * 100
            out.append((level, name, diff.mean(), diff.std(ddof=1) / np.sqrt(len(diff)), len(diff)))
    return out


def _errors(out: pd.DataFrame, truth: pd.DataFrame, leaves: list[str], root: str):
    err = (out[truth.columns] - truth).abs().mean()
    return float(err[leaves].mean()), float(err[root]), float(err.mean())


def main_table(
    name: str,
    trials: int,
    rows: list[dict],
    start: float,
    first: int = 0,
    on_row=None,
    per_trial: list[dict] | None = None,
) -> None:
    frame, hierarchy, root, leaves, year = _data(name)
    for month, (cur, prev) in MONTHS.items():
        truth = frame.loc[f"{year}-{cur}"][[root, *leaves]]
        history = frame.loc[f"{year}-{prev}"][leaves]
        ref = _profile(frame.loc[f"{year}-{prev}"][[root, *leaves]], truth.index)
        r_leaf, r_root, r_all = _errors(ref, truth, leaves, root)
        for alpha in ALPHAS:
            rows.append(
                {"dataset": name, "month": month, "alpha/eps": alpha, "method": "reference",
                 "leaves": r_leaf, "root": r_root, "all": r_all, "trials": 1}
            )  # fmt: skip
            extra: dict[str, list] = {}
            for i, (method, (release, kwargs)) in enumerate(
                _methods(alpha, hierarchy, history).items()
            ):
                if METHODS and method not in METHODS:  # --methods: a part (the same seeds)
                    continue
                errs, pred, real, ks = [], [], [], []
                for trial in range(first, first + trials):
                    # "auto" and "auto, no prior" share seeds: the same measurements, so the
                    # difference is the prior's alone (paired)
                    seed = 100_000 * (0 if method == "auto, no prior" else i) + 100 * trial
                    out = release(truth[leaves], seed=seed + int(alpha), **kwargs)
                    errs.append(_errors(out, truth, leaves, root))
                    if per_trial is not None and "plan" in out.attrs:  # --per-trial: pairs
                        per_trial.append(
                            {"dataset": name, "month": month, "alpha/eps": alpha,
                             "method": method, "trial": trial, "seed": seed + int(alpha),
                             "leaves": errs[-1][0], "root": errs[-1][1], "all": errs[-1][2],
                             "mean_k": float(np.mean([p["k"] for p in out.attrs["plan"]]))}
                        )  # fmt: skip
                    if "plan" in out.attrs:
                        plans = out.attrs["plan"]
                        p_r = _predicted_and_realised(out, truth, plans, kwargs.get("prior", True))
                        pred.append(p_r[0])
                        real.append(p_r[1])
                        ks.append(float(np.median([p["k"] for p in plans])))
                    if method == "auto":  # no-current-data forecasts from the same information
                        cols = [root, *leaves]
                        rel = out[cols].to_numpy()
                        meas = out.attrs["measurements"]
                        same = _running_mean(meas, rel)
                        oracle = _running_mean(truth[cols].to_numpy(), rel)
                        extra.setdefault("released days so far (no current data)", []).append(
                            _errors(pd.DataFrame(same, truth.index, cols), truth, leaves, root)
                        )
                        extra.setdefault("true days so far (oracle)", []).append(
                            _errors(pd.DataFrame(oracle, truth.index, cols), truth, leaves, root)
                        )
                e = np.array(errs)
                rows.append(
                    {"dataset": name, "month": month, "alpha/eps": alpha, "method": method,
                     "leaves": e[:, 0].mean(), "root": e[:, 1].mean(), "all": e[:, 2].mean(),
                     "leaves_sd": e[:, 0].std(ddof=1) if trials > 1 else np.nan,
                     "predicted_all": np.mean(pred) if pred else np.nan,
                     "realised_planned": np.mean(real) if real else np.nan,
                     "median_k": np.mean(ks) if ks else np.nan, "trials": trials}
                )  # fmt: skip
            for method, errs in extra.items():
                e = np.array(errs)
                rows.append(
                    {"dataset": name, "month": month, "alpha/eps": alpha, "method": method,
                     "leaves": e[:, 0].mean(), "root": e[:, 1].mean(), "all": e[:, 2].mean(),
                     "leaves_sd": e[:, 0].std(ddof=1) if trials > 1 else np.nan,
                     "trials": trials}
                )  # fmt: skip
            if on_row is not None:
                on_row()
            print(f"{name} {month} α/ε={alpha:g} ({time.perf_counter() - start:.0f} s)", flush=True)


def share_table(
    trials: int,
    rows: list[dict],
    start: float,
    csv: Path | None = None,
    per_trial: list[dict] | None = None,
    trials_csv: Path | None = None,
) -> None:
    frame, hierarchy, root, leaves, year = _data("regional")
    variants = {
        "equal (ε/h)": {"level_shares": "equal"},
        "bottom-up": {"level_shares": "bottom-up"},
        "planned, target=leaves": {"target": "leaves"},
        "planned, target=root": {"target": "root"},
        "planned, target=all": {"target": "all"},
    }
    for month, (cur, prev) in MONTHS.items():
        truth = frame.loc[f"{year}-{cur}"][[root, *leaves]]
        history = frame.loc[f"{year}-{prev}"][leaves]
        for alpha in ALPHAS:
            for i, (variant, extra) in enumerate(variants.items()):
                if VARIANTS and variant not in VARIANTS:  # --variants: a part (the same seeds)
                    continue
                errs, pred, shares = [], [], []
                for trial in range(trials):
                    out = dpstream.release_optstream(
                        truth[leaves], epsilon=1.0, alpha=alpha, hierarchy=hierarchy,
                        history=history, prior=False, seed=7_000 * i + 100 * trial + int(alpha),
                        **extra, **_NO_LEDGER,
                    )  # fmt: skip
                    errs.append(_errors(out, truth, leaves, root))
                    plans = out.attrs["plan"]
                    if per_trial is not None:  # --per-trial: pairs
                        per_trial.append(
                            {"month": month, "alpha/eps": alpha, "variant": variant,
                             "trial": trial, "seed": 7_000 * i + 100 * trial + int(alpha),
                             "regional": errs[-1][0], "national": errs[-1][1],
                             "all": errs[-1][2],
                             "mean_k": float(np.mean([p["k"] for p in plans]))}
                        )  # fmt: skip
                    pred.append(float(np.mean([p["predicted"] for p in plans])))
                    shares.append(float(np.mean([p["shares"][0] for p in plans])))
                e = np.array(errs)
                rows.append(
                    {"month": month, "alpha/eps": alpha, "variant": variant,
                     "regional": e[:, 0].mean(), "national": e[:, 1].mean(), "all": e[:, 2].mean(),
                     "predicted_target": np.mean(pred), "root_share": np.mean(shares),
                     "trials": trials}
                )  # fmt: skip
            if csv is not None:
                pd.DataFrame(rows).to_csv(csv, index=False, float_format="%.6g")
            if trials_csv is not None and per_trial:
                pd.DataFrame(per_trial).to_csv(trials_csv, index=False, float_format="%.9g")
        print(f"shares {month} ({time.perf_counter() - start:.0f} s)", flush=True)


def _md(frame: pd.DataFrame) -> str:
    """A pipe table (pandas' to_markdown needs tabulate, not a dependency)."""
    frame = frame.reset_index()
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join(f"{v:,.6g}" if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def _markdown(table: pd.DataFrame, shares: pd.DataFrame | None, trials: int) -> str:
    months = "/".join(dict.fromkeys(table["month"])) if "month" in table and len(table) else ""
    lines = [
        "# Self-planning OptStream (issue 13): defaults against the baselines",
        "",
        f"`python scripts/optstream_defaults.py --trials {trials}`; mean L1 error per value, "
        f"months {months or 'Feb/Jun/Oct'} averaged, ε = 1 (only α/ε matters). `reference` = "
        "last month's mean daily profile (true values, no current data); `released days so far` "
        "= the mean of the auto release's measurements of the earlier days of the month (the "
        "same information as the release, no current data); `true days so far (oracle)` = the "
        "same with the true values (the first day of both takes the release).",
        "",
    ]
    order = [
        "auto", "auto, no prior", "auto + history", "auto + history, Gaussian",
        "paper (k=10, l1)", "Laplace", "DFT", "PeGaSus", "reference",
        "released days so far (no current data)", "true days so far (oracle)",
    ]  # fmt: skip
    for name, part in table.groupby("dataset"):
        for level in ("leaves", "root"):
            piv = part.groupby(["alpha/eps", "method"])[level].mean().unstack("method")
            piv = piv[[m for m in order if m in piv.columns]].round(0)
            unit = "kW" if name == "regional" else "Wh per half-hour"
            lines += [f"## {name}: {level} ({unit})", "", _md(piv), ""]
        auto = part[part.method.str.startswith("auto") & part["predicted_all"].notna()]
        cols = ["predicted_all", "realised_planned" if "realised_planned" in auto else "all"]
        pv = auto.groupby(["alpha/eps", "method"])[cols].mean()
        pv["realised/predicted"] = pv[cols[1]] / pv["predicted_all"]
        lines += [
            f"## {name}: the planner's prediction against the realised error (all nodes)",
            "",
            "Over the periods with a prediction (not the first period without history, "
            "planned blind); the prediction after the prior where there is one.",
            "",
            _md(pv.round(2)),
            "",
        ]
    if shares is not None:
        piv = shares.groupby(["alpha/eps", "variant"])[
            ["regional", "national", "root_share", "predicted_target"]
        ].mean()
        lines += [
            "## Level shares (regional, last month as history, no prior)",
            "",
            _md(piv.round(2)),
            "",
        ]
    return "\n".join(lines)


def _share_markdown(shares: pd.DataFrame, command: str) -> str:
    """``optstream_level_shares_30.md``: months averaged, the predicted error of each variant's
    target against the realised one over the same nodes (all nodes for the fixed shares)."""
    trials = int(shares["trials"].max())
    names = {"Feb": "February", "Jun": "June", "Oct": "October"}
    months = [names.get(m, m) for m in dict.fromkeys(shares["month"])]
    months_text = ", ".join(months[:-1]) + " and " + months[-1] if len(months) > 1 else months[0]
    target = {"planned, target=leaves": "regional", "planned, target=root": "national"}
    realised = [row[target.get(row["variant"], "all")] for _, row in shares.iterrows()]
    piv = (
        shares.assign(realised_target=realised)
        .groupby(["alpha/eps", "variant"], sort=False)[
            ["regional", "national", "root_share", "predicted_target", "realised_target"]
        ]
        .mean()
    )
    lines = [
        f"# Level shares (issue 13, item 3): national and regional errors against ε/h, {trials} "
        "trials",
        "",
        f"`{command}` (the share table only). Regional hierarchy (national -> 4 SimBench "
        f"regions, kW), {months_text} 2016 (months averaged), last month as public "
        "`history=`, no prior (so the shares alone differ), ε = 1, w = 48, "
        f"{trials} seeded trials per cell. Mean L1 error per value of the 4 regions "
        "(`regional`) and of the national node; `root_share` = mean share of the period's "
        "budget on the national level; `predicted_target` = the planner's predicted mean "
        "absolute error over the nodes of the variant's target (all nodes for the fixed "
        "shares), `realised_target` the realised one over the same nodes.",
        "",
        "| α/ε | variant | regional | national | root share | predicted (target) "
        "| realised (target) | realised/predicted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (alpha, variant), r in piv.iterrows():
        lines.append(
            f"| {alpha:g} | {variant} | {r.regional:,.0f} | {r.national:,.0f} | "
            f"{r.root_share:.2f} | {r.predicted_target:,.0f} | {r.realised_target:,.0f} | "
            f"{r.realised_target / r.predicted_target:.2f} |"
        )
    return "\n".join(lines)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Parts of one table (``--concat``) as one, a later part's rows replacing an earlier
    part's rows of the same cell (and trial): e.g. a table's ``auto + history`` cells re-run
    on newer code, or the ``reference`` rows every part of a month repeats. Sorted by month,
    α/ε and the table's order of methods (variants)."""
    table = pd.concat(parts, ignore_index=True)
    cell = "method" if "method" in table else "variant"
    keys = [k for k in ("dataset", "month", "alpha/eps", cell, "trial") if k in table]
    table = table.drop_duplicates(subset=keys, keep="last")
    order = {
        "method": ["auto", "auto, no prior", "auto + history", "paper (k=10, l1)", "Laplace",
                   "DFT", "PeGaSus", "reference", "released days so far (no current data)",
                   "true days so far (oracle)"],
        "variant": ["equal (ε/h)", "bottom-up", "planned, target=leaves",
                    "planned, target=root", "planned, target=all"],
    }[cell]  # fmt: skip
    rank = {
        "month": {m: i for i, m in enumerate(("Feb", "Jun", "Oct"))},
        cell: {m: i for i, m in enumerate(order)},
    }
    return table.sort_values(
        keys, key=lambda c: c.map(rank[c.name]) if c.name in rank else c, kind="stable"
    ).reset_index(drop=True)


def main() -> None:
    global MONTHS, ALPHAS, METHODS, VARIANTS  # --months/--alphas/--methods/--variants: a part
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--datasets", nargs="*", default=["regional", "household"])
    parser.add_argument("--no-shares", action="store_true")
    parser.add_argument("--stem", default="optstream_defaults", help="output file name stem")
    parser.add_argument("--share-stem", default="optstream_level_shares")
    parser.add_argument("--first-trial", type=int, default=0, help="index of the first trial")
    parser.add_argument("--months", nargs="+", default=list(MONTHS), choices=list(MONTHS))
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    parser.add_argument("--methods", nargs="+", default=[], help="main-table methods to run")
    parser.add_argument("--variants", nargs="+", default=[], help="level-share variants to run")
    parser.add_argument(
        "--state",
        choices=["default", "exact", "forgetting"],
        default="default",
        help="the planner's state: the default, the exact periods state "
        "(STREAMING_STATE = False, the issue's reference) or session 7's forgetting "
        "variogram (VARIOGRAM_WINDOW = 'forgetting')",
    )
    parser.add_argument(
        "--per-trial",
        action="store_true",
        help="also write each planned release's errors to <stem>_trials.csv and "
        "<share-stem>_trials.csv (paired comparisons across code versions)",
    )
    parser.add_argument(
        "--concat",
        nargs="*",
        default=None,
        help="concatenate these stems' CSVs (parts of one table: other months, data sets or "
        "methods) into --stem (and their _trials.csv), a later part's rows replacing an "
        "earlier part's of the same cell",
    )
    parser.add_argument(
        "--merge", nargs="*", default=None, help="average these stems' CSVs (equal trials)"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.state == "exact":
        import_module("dpstream.pipelines._autoplan").STREAMING_STATE = False
    elif args.state == "forgetting":
        import_module("planner._stream_planner").VARIOGRAM_WINDOW = "forgetting"
    MONTHS = {m: MONTHS[m] for m in args.months}
    ALPHAS = tuple(args.alphas)
    METHODS = tuple(args.methods)
    VARIANTS = tuple(args.variants)
    if args.concat:
        parts = [pd.read_csv(OUT / f"{stem}.csv") for stem in args.concat]
        table = _concat(parts)
        trials = [OUT / f"{stem}_trials.csv" for stem in args.concat]
        if all(t.exists() for t in trials):
            per = _concat([pd.read_csv(t) for t in trials])
            per.to_csv(OUT / f"{args.stem}_trials.csv", index=False, float_format="%.9g")
        table.to_csv(OUT / f"{args.stem}.csv", index=False, float_format="%.6g")
        if "variant" in table:  # share parts
            command = (
                f"python scripts/optstream_defaults.py --trials {int(table['trials'].max())} "
                "--datasets --months M [--alphas A] --share-stem S --per-trial"
            )
            text = _share_markdown(table, command)
        else:
            text = _markdown(table, None, int(table["trials"].max()))
        (OUT / f"{args.stem}.md").write_text(text + "\n")
        print(text)
        return
    if args.merge:
        parts = [pd.read_csv(OUT / f"{stem}.csv") for stem in args.merge]
        keys = ["dataset", "month", "alpha/eps", "method"]
        merged = pd.concat(parts).groupby(keys, sort=False).mean(numeric_only=True).reset_index()
        merged["trials"] = sum(p.set_index(keys)["trials"] for p in parts).to_numpy()
        merged.to_csv(OUT / f"{args.stem}.csv", index=False, float_format="%.6g")
        text = _markdown(merged, None, int(merged["trials"].max()))
        (OUT / f"{args.stem}.md").write_text(text + "\n")
        print(text)
        return
    rows: list[dict] = []
    trial_rows: list[dict] | None = [] if args.per_trial else None
    OUT.mkdir(parents=True, exist_ok=True)

    def flush() -> None:  # results as they finish (a long run can be stopped at any time)
        part = pd.DataFrame(rows)
        part.to_csv(OUT / f"{args.stem}.csv", index=False, float_format="%.6g")
        (OUT / f"{args.stem}.md").write_text(_markdown(part, None, args.trials) + "\n")
        if trial_rows:
            pd.DataFrame(trial_rows).to_csv(
                OUT / f"{args.stem}_trials.csv", index=False, float_format="%.9g"
            )

    for name in args.datasets:
        main_table(
            name, args.trials, rows, start, args.first_trial, on_row=flush, per_trial=trial_rows
        )
    table = pd.DataFrame(rows, columns=["dataset", "method"] if not rows else None)
    if rows:
        table.to_csv(OUT / f"{args.stem}.csv", index=False, float_format="%.6g")
    shares = None
    if not args.no_shares:
        srows: list[dict] = []
        share_rows: list[dict] | None = [] if args.per_trial else None
        share_table(
            args.trials,
            srows,
            start,
            csv=OUT / f"{args.share_stem}.csv",
            per_trial=share_rows,
            trials_csv=OUT / f"{args.share_stem}_trials.csv",
        )
        shares = pd.DataFrame(srows)
        shares.to_csv(OUT / f"{args.share_stem}.csv", index=False, float_format="%.6g")
    text = _markdown(table, shares, args.trials)
    (OUT / f"{args.stem}.md").write_text(text + "\n")
    print(text)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
