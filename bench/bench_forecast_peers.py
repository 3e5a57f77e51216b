"""Benchmark: next-day forecasts, ours against statsforecast's, origin by origin (issue 28).

Rolling next-day evaluation on eight weeks of two bundled data sets, each released by
``dpstream.release_optstream`` (the default release: ε = 1, w = 48, k = "auto") as a
hierarchy:

* ``regional``: the SimBench regions and their national sum (``dpstream.load_regional``),
  α = 50 kW; MAPE over the five nodes; ``regional-national``: the same releases, the national
  series alone (where the slow peers, AutoARIMA and AutoTheta, run at every origin);
* ``household``: the four sub-meters and the total of ``dpstream.load_household`` (2007),
  α = 10 Wh; MAPE of the total only (the sub-meters have zero half-hours, where MAPE is
  undefined).

At each of the last ``--origins`` day boundaries (28: the first one has four weeks of
history) every method is fitted on everything before the origin and forecasts the next 48
half-hours, scored against the *true* day: on the release (``--seeds`` release seeds) and on
the real data. Ours is ``forecasting.forecast(model="auto")``, given the release's stated
error variance per value (``dpstream.std_errors`` squared: public parameters and released
values only) so that its intervals are for the truth (the release's error added in
quadrature to the backtest's, ``noise="posterior"``: ``forecasting/_truth_band.py``); the
peers are statsforecast's ``MSTL(season_length=[48, 336])``,
``AutoARIMA(season_length=48)`` with statsforecast's search limits (``approximation=True,
stepwise=True``, p, q <= 2, P, Q <= 1, at most 20 models: its defaults did not finish one
fit in 30 minutes on the shared machine),
``AutoTheta(season_length=48)`` and ``SeasonalNaive(48)``, with 80 % and 95 % intervals
(statsforecast is in the ``bench`` extra, never a dependency). CPU seconds are
``time.process_time`` of the fits and forecasts only, warm (one fit of each method first, so
that numba's compilation is excluded), one BLAS thread. Every row records its process
(``run``), and the report's "CPU / MSTL, one process" compares only the (seed, origin) pairs
that one process timed for both, ours and MSTL interleaved at each origin (so they share the
machine's load): e.g. ``--peers MSTL --seeds 1 --csv F`` next to the cached peers.

Long runs on a shared machine: ``--only peers --cache FILE`` appends each peer's row as soon
as it is scored and skips the rows already there (a killed run resumes); ``--releases DIR``
keeps each seed's release so that the peers' processes and ours read the same one; ``--only
ours --csv F`` runs ours alone; ``--from-csv F1,F2,...`` writes the report from the rows.

Usage: ``python bench/bench_forecast_peers.py [--seeds 3] [--origins 28] [--peers MSTL ...]
[--datasets regional household] [--cache /tmp/peers.csv] [--releases /tmp/releases]
[--out docs/results/forecast_peers.md]``; ``--coherent`` for the reconciled forecasts;
``--start 2016-10-03`` for another (held-out) slice of eight weeks.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

import dpstream
from forecasting import forecast

P = 48
DAYS = 56
SETTINGS = {
    "regional": {"start": "2016-01-04", "alpha": 50.0, "scored": None},
    "household": {"start": "2007-01-08", "alpha": 10.0, "scored": ["total"]},
    # The same regional releases, the national series only (the slow peers run on it alone).
    "regional-national": {"start": "2016-01-04", "alpha": 50.0, "scored": ["national"]},
}
#: Series every method forecasts (all nodes are released; only the scored ones are fitted).
FITTED = {
    "regional": None,
    "household": ["total"],
    "regional-national": ["national"],
}


def load(name: str) -> tuple[pd.DataFrame, dict, list[str]]:
    """(eight weeks of every node, hierarchy, leaves)."""
    if name.startswith("regional"):
        frame, tree = dpstream.load_regional(), dpstream.regional_hierarchy()
    else:
        frame, tree = dpstream.load_household(2007), dpstream.household_hierarchy()
    start = pd.Timestamp(SETTINGS[name]["start"] if START is None else START)
    span = frame.loc[start : start + pd.Timedelta(days=DAYS) - pd.Timedelta("30min")]
    leaves = [c for kids in tree.values() for c in kids]
    return span, tree, leaves


#: Directory where releases are kept (``--releases``), so that every process of a split run
#: (the peers in the background, ours later) reads the very same release of each seed.
RELEASES: Path | None = None
#: Data the run covers (``--sources``): "real" and release seeds ("0", "1", ...), or "all".
SOURCES: tuple[str, ...] = ("all",)
#: First day of the eight weeks (``--start``: a held-out slice), or None (each data set's own).
START: str | None = None
#: Rows of the data sets this process has finished (its partial ``--csv`` keeps them).
_DONE: list[dict] = []
#: This process (a row's ``run``): CPU ratios compare rows of one process only.
RUN = f"{os.getpid()}@{time.strftime('%Y-%m-%dT%H:%M:%S')}"


def release(span: pd.DataFrame, tree: dict, leaves: list[str], alpha: float, seed: int):
    """(release, its stated error variances: ``dpstream.std_errors`` squared)."""
    tag = "" if START is None else f"_{START}"  # another slice: another release
    kept = None if RELEASES is None else RELEASES / f"{leaves[0]}_{alpha:g}_{seed}{tag}.pkl"
    if kept is not None and kept.exists():
        return pd.read_pickle(kept)
    out = dpstream.release_optstream(
        span[leaves], epsilon=1.0, hierarchy=tree, alpha=alpha, seed=seed
    )
    var = dpstream.std_errors(out, seed=seed) ** 2
    out, var = out[span.columns], var[span.columns]
    out.attrs, var.attrs = {}, {}
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        pd.to_pickle((out, var), kept)
    return out, var


def ours(history: pd.DataFrame, noise: pd.Series | None) -> tuple[np.ndarray, np.ndarray]:
    if noise is not None:
        noise = noise.iloc[: len(history)]
    fc = forecast(history, P, level=(0.8, 0.95), noise_variance=noise)
    bounds = [fc.interval(lv)[b].to_numpy() for lv in (0.95, 0.8) for b in ("lower", "upper")]
    return fc.mean.to_numpy(), np.stack(bounds)  # lo-95, hi-95, lo-80, hi-80


PEERS = ("MSTL", "AutoARIMA", "AutoTheta", "SeasonalNaive")
#: Peers too slow for every origin on the shared machine (minutes per fit for AutoARIMA).
SLOW = ("AutoARIMA", "AutoTheta")


def peer_models(names: list[str]):
    from statsforecast.models import MSTL, AutoARIMA, AutoTheta, SeasonalNaive

    make = {
        "MSTL": lambda: MSTL(season_length=[P, 7 * P]),
        # statsforecast's documented search limits (its defaults did not finish a fit in 30
        # min on the shared machine): approximation, stepwise, orders <= 2, <= 20 models.
        "AutoARIMA": lambda: AutoARIMA(
            season_length=P, approximation=True, stepwise=True, max_p=2, max_q=2, max_P=1,
            max_Q=1, nmodels=20,
        ),  # fmt: skip
        "AutoTheta": lambda: AutoTheta(season_length=P),
        "SeasonalNaive": lambda: SeasonalNaive(P),
    }
    return [(n, make[n]()) for n in names]


def peer(model, history: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    from statsforecast import StatsForecast

    long = (
        history.rename_axis("ds")
        .reset_index()
        .melt(id_vars="ds", var_name="unique_id", value_name="y")
    )
    sf = StatsForecast(models=[model], freq="30min", n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = sf.forecast(df=long, h=P, level=[80, 95])
    name = [c for c in fc.columns if c not in ("unique_id", "ds") and "-lo-" not in c
            and "-hi-" not in c][0]  # fmt: skip

    def wide(col):
        return fc.pivot(index="ds", columns="unique_id", values=col)[history.columns].to_numpy()

    bounds = [wide(f"{name}-{b}-{lv}") for lv in (95, 80) for b in ("lo", "hi")]
    return wide(name), np.stack(bounds)


def run(
    name: str,
    seeds: int,
    n_origins: int,
    slow_origins: int,
    names: list[str],
    csv=None,
    peer_seeds: int | None = None,
    cache: str | None = None,
    only: str = "all",
    slow_seeds: int | None = None,
) -> pd.DataFrame:
    """Per-origin rows of ours and the peers; peers' rows cached in ``cache`` (resumable)."""
    done = _cached(cache, name)
    slow_seeds = seeds if slow_seeds is None else slow_seeds
    span, tree, leaves = load(name)
    alpha = SETTINGS[name]["alpha"]
    fitted = FITTED[name] or list(span.columns)
    scored = SETTINGS[name]["scored"] or list(span.columns)
    cols = [fitted.index(c) for c in scored]
    truth = span[fitted].to_numpy(dtype=np.float64)
    origins = np.arange(DAYS - n_origins, DAYS) * P
    every = SOURCES == ("all",)
    sources = [("real", None, span[fitted], None)] if every or "real" in SOURCES else []
    for s in range(seeds):
        if not every and str(s) not in SOURCES:
            continue
        rel, noise = release(span, tree, leaves, alpha, seed=1000 + s)
        sources.append(("release", s, rel[fitted], noise[fitted]))
    peers = [] if only == "ours" else peer_models(
        [n for n in names if n not in SLOW or slow_origins > 0])  # fmt: skip
    rows = []
    with threadpool_limits(1, user_api="blas"):
        # Warm runs: numba compiles statsforecast's models on their first fit.
        first = span.iloc[: origins[0]]
        for _, model in peers:
            peer(model, first.iloc[-3 * P :, :1])  # compiles; the size does not matter
        ours(first.iloc[:, :1], None)
        for data, seed, frame, noise in sources:
            methods = [] if only == "peers" else [("ours", None)]
            if seed is None or peer_seeds is None or seed < peer_seeds:
                methods += [(n, m) for n, m in peers]
            for o_i, o in enumerate(origins):
                history = frame.iloc[:o]
                actual = truth[o : o + P][:, cols]
                for method, model in methods:
                    if method in SLOW and (o_i >= slow_origins or (seed or 0) >= slow_seeds):
                        continue
                    key = (data, -1 if seed is None else seed, str(span.index[o].date()), method)
                    if key in done:
                        continue
                    t0 = time.process_time()
                    if model is None:
                        mean, bounds = ours(history, noise)
                    else:
                        mean, bounds = peer(model, history)
                    cpu = time.process_time() - t0
                    mean, bounds = mean[:, cols], bounds[:, :, cols]
                    ape = np.abs(mean - actual) / np.abs(actual)
                    cover = (bounds[0] <= actual) & (actual <= bounds[1])
                    cover80 = (bounds[2] <= actual) & (actual <= bounds[3])
                    rows.append({
                        "dataset": name, "data": data, "seed": seed,
                        "origin": str(span.index[o].date()), "method": method,
                        "mape": 100.0 * float(ape.mean()), "coverage95": float(cover.mean()),
                        "cpu": cpu, "coverage80": float(cover80.mean()), "run": RUN,
                    })  # fmt: skip
                    if model is not None and cache:
                        _append(cache, rows[-1])
                print(f"{name} {data} {seed} origin {o_i + 1}/{len(origins)}", flush=True)
            if csv:  # partial results, one source at a time (long runs on a shared machine)
                pd.DataFrame(_DONE + rows).to_csv(csv, index=False)  # earlier data sets too
    _DONE.extend(rows)
    table = pd.DataFrame(rows)
    if cache and only != "peers":  # the peers' rows of earlier (or concurrent) runs
        old = _read_cache(cache)
        old = old[(old["dataset"] == name) & old["method"].isin(names)]
        table = pd.concat([table[table["method"] == "ours"], old], ignore_index=True)
    return table


def _read_cache(cache: str) -> pd.DataFrame:
    """Rows of every cache file (comma-separated paths; the first is the one written)."""
    paths = [c for c in cache.split(",") if Path(c).exists()]
    if not paths:
        return pd.DataFrame(columns=["dataset", "data", "seed", "origin", "method"])
    table = pd.concat([pd.read_csv(c) for c in paths], ignore_index=True)
    table["seed"] = table["seed"].astype("Int64")
    return table.drop_duplicates(["dataset", "data", "seed", "origin", "method"], keep="last")


def _cached(cache: str | None, name: str) -> set:
    """Keys (data, seed or -1, origin, method) of the peers' rows already in ``cache``."""
    if not cache:
        return set()
    table = _read_cache(cache)
    table = table[table["dataset"] == name]
    seeds = table["seed"].fillna(-1).astype(int)
    return set(zip(table["data"], seeds, table["origin"], table["method"], strict=True))


def _append(cache: str, row: dict) -> None:
    """One peer's row, appended at once (a killed run resumes where it stopped)."""
    path = Path(cache.split(",")[0])
    frame = pd.DataFrame([row])
    if path.exists():  # the file's own columns (caches written before a column was added)
        frame = frame.reindex(columns=pd.read_csv(path, nrows=0).columns)
    frame.to_csv(path, mode="a", header=not path.exists(), index=False)


def coherent(seeds: int, n_origins: int) -> str:
    """Ours on the regional releases, each node alone and reconciled (``hierarchy=``)."""
    span, tree, leaves = load("regional")
    truth = span.to_numpy(dtype=np.float64)
    origins = np.arange(DAYS - n_origins, DAYS) * P
    rows = []
    with threadpool_limits(1, user_api="blas"):
        for s in range(seeds):
            rel, noise = release(span, tree, leaves, SETTINGS["regional"]["alpha"], 1000 + s)
            for o in origins:
                actual = truth[o : o + P]
                for label, h in (("incoherent", None), ("coherent", tree)):
                    t0 = time.process_time()
                    fc = forecast(rel.iloc[:o], P, noise_variance=noise.iloc[:o], hierarchy=h,
                                  seed=s)  # fmt: skip
                    cpu = time.process_time() - t0
                    mean = fc.mean[span.columns].to_numpy()
                    iv = fc.interval(0.95)
                    lo = iv["lower"][span.columns].to_numpy()
                    hi = iv["upper"][span.columns].to_numpy()
                    gap = np.abs(mean[:, -1] - mean[:, :-1].sum(axis=1)).max()
                    ape = np.abs(mean - actual) / actual
                    inside = (lo <= actual) & (actual <= hi)
                    for j, node in enumerate(span.columns):
                        rows.append({
                            "forecasts": label, "node": node, "cpu": cpu / len(span.columns),
                            "mape": 100 * ape[:, j].mean(), "coverage95": inside[:, j].mean(),
                            "gap": gap,
                        })  # fmt: skip
    table = pd.DataFrame(rows)
    mape = table.pivot_table(index="node", columns="forecasts", values="mape")
    cover = table.pivot_table(index="node", columns="forecasts", values="coverage95")
    gaps = table.groupby("forecasts")["gap"].max()
    lines = [
        "## Coherent forecasts (regional release)",
        "",
        f"`--coherent`: {seeds} release seed(s) × {n_origins} origins; every node forecast "
        "alone (incoherent) and reconciled to the hierarchy (`forecast(..., hierarchy=...)`: "
        "postproc's weighted least squares with the forecast variances, non-negative, bands "
        "by simulation). Largest |national − Σ regions| over all forecast steps: incoherent "
        f"{gaps['incoherent']:.1f} kW, coherent {gaps['coherent']:.2e} kW.",
        "",
        "| node | MAPE % incoherent | MAPE % coherent | 95 % coverage incoherent | coherent |",
        "|---|---|---|---|---|",
    ]
    for node in span.columns:
        lines.append(f"| {node} | {mape.loc[node, 'incoherent']:.2f} | "
                     f"{mape.loc[node, 'coherent']:.2f} | {cover.loc[node, 'incoherent']:.3f} | "
                     f"{cover.loc[node, 'coherent']:.3f} |")  # fmt: skip
    lines.append(
        f"| all | {mape['incoherent'].mean():.2f} | {mape['coherent'].mean():.2f} | "
        f"{cover['incoherent'].mean():.3f} | {cover['coherent'].mean():.3f} |"
    )
    return "\n".join(lines) + "\n"


def diagnose(name: str, seeds: int, n_origins: int) -> str:
    """Which release term the truth's error needs (``forecasting/_truth_band.py``), one row.

    Ours on each release seed and origin; the truth is read only to score. corr(d, v) of the
    forecast's error against the release, d = ŷ − y, and the release's error v = y − x; the
    realised over the stated variance of v; the 95 % coverage of the same forecasts' bands
    with Minkowski's term and with the posterior term (Eq. 2), each with the stated R and with
    R scaled per series to its realised mean square (an oracle: a check, not a method).
    """
    from forecasting._forecast import conformal_bounds
    from forecasting._truth_band import truth_bounds

    span, tree, leaves = load(name)
    fitted = FITTED[name] or list(span.columns)
    scored = [fitted.index(c) for c in (SETTINGS[name]["scored"] or fitted)]
    truth = span[fitted].to_numpy(dtype=np.float64)
    origins = np.arange(DAYS - n_origins, DAYS) * P
    parts = []
    with threadpool_limits(1, user_api="blas"):
        for s in range(seeds):
            rel, noise = release(span, tree, leaves, SETTINGS[name]["alpha"], seed=1000 + s)
            rel, noise = rel[fitted], noise[fitted]
            for o in origins:
                fc = forecast(rel.iloc[:o], P, level=0.95, noise_variance=noise.iloc[:o])
                y = rel.to_numpy()[o : o + P]
                parts.append((fc, y, truth[o : o + P], noise.to_numpy()[o : o + P]))
    v_all = np.concatenate([y - x for _, y, x, _ in parts])
    ratio = (v_all**2).mean(axis=0) / np.concatenate([r for *_, r in parts]).mean(axis=0)
    z = 1.959963984540054
    cover = {}
    for label, k in (("stated", np.ones_like(ratio)), ("realised", ratio)):
        for band in ("minkowski", "posterior"):
            hits = []
            for fc, _, x, _ in parts:
                m, sd = fc.mean.to_numpy().reshape(P, -1), fc.noise_sd * np.sqrt(k)
                if band == "posterior":
                    lo, hi = truth_bounds(fc.scores, fc.scale, sd, 0.95)
                else:
                    q_lo, q_hi = conformal_bounds(fc.scores, 0.95)
                    lo, hi = fc.scale * q_lo - z * sd, fc.scale * q_hi + z * sd
                hits.append(((m + lo <= x) & (x <= m + hi))[:, scored])
            cover[band, label] = float(np.mean(np.concatenate(hits)))
    d = np.concatenate([(fc.mean.to_numpy().reshape(P, -1) - y) for fc, y, _, _ in parts])
    d = d[:, scored]
    v = v_all[:, scored]
    corr = float(np.mean(d * v) / np.sqrt(np.mean(d**2) * np.mean(v**2)))
    stated = np.concatenate([r[:, scored] for *_, r in parts]).mean()
    return (
        f"| {name} {START or SETTINGS[name]['start']} | {corr:+.2f} | "
        f"{float(np.mean(v**2) / stated):.2f} | {cover['minkowski', 'stated']:.3f} | "
        f"{cover['posterior', 'stated']:.3f} | {cover['posterior', 'realised']:.3f} | "
        f"{cover['minkowski', 'realised']:.3f} |"
    )


def report(table: pd.DataFrame, args) -> str:
    """Markdown: per data set, every method on the (seed, origin) pairs that all ran."""
    lines = [
        "# Next-day forecasts: ours against statsforecast (issue 28)",
        "",
        "MAPE in %, against the true day; coverage of the truth by the 80 % and 95 % "
        "intervals; CPU seconds of one run of 28 origins (mean over the runs), warm. Every "
        "method is scored on the same (seed, origin) pairs: those where all of them ran. "
        "`ours / it` = our MAPE over the method's; `won` = share of the pairs where our MAPE "
        "is below the method's.",
        "",
    ]
    table = table.assign(seed=table["seed"].astype("Int64").fillna(-1).astype(int))
    if "coverage80" not in table:
        table["coverage80"] = np.nan
    for (dataset, data), raw in table.groupby(["dataset", "data"], sort=False):
        every = raw.drop_duplicates(["seed", "origin", "method"], keep="last")
        wide = every.pivot(index=["seed", "origin"], columns="method", values="mape")
        if "ours" not in wide:
            continue
        wide = wide.dropna()
        keys = set(wide.index)
        part = every[[k in keys for k in zip(every["seed"], every["origin"], strict=True)]]
        agg = part.groupby("method").agg(
            mape=("mape", "mean"), cov95=("coverage95", "mean"),
            # rows cached before the 80 % bands were recorded have none: no partial mean
            cov80=("coverage80", lambda x: x.mean() if x.notna().all() else np.nan),
        )  # fmt: skip
        runs = part.groupby(["method", "seed"])["cpu"].sum().groupby("method").mean()
        agg["cpu"] = runs * 28 / part.groupby(["method", "seed"]).size().groupby("method").mean()
        agg["vs_mstl"], pairs_cpu = _cpu_vs_mstl(raw[raw["method"].isin(agg.index)])
        seeds = sorted(s for s in part["seed"].unique() if s >= 0)
        lines += [
            f"## {dataset}, {'the release' if data == 'release' else 'the real data'}",
            "",
            f"{len(wide)} (seed, origin) pairs"
            + (f" (release seeds {', '.join(map(str, seeds))})" if seeds else "")
            + f", {len(wide.columns)} methods.",
            "",
            "| method | MAPE % | ours / it | won | 80 % cov. | 95 % cov. | CPU s | "
            "CPU / MSTL, one process |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for method, row in agg.sort_values("mape").iterrows():
            ratio = agg.loc["ours", "mape"] / row["mape"]
            won = float((wide["ours"] < wide[method]).mean()) if method != "ours" else np.nan
            cov80 = "–" if np.isnan(row["cov80"]) else f"{row['cov80']:.3f}"
            lines.append(
                f"| {method} | {row['mape']:.2f} | {ratio:.3f} | "
                + ("" if np.isnan(won) else f"{won:.2f}")
                + f" | {cov80} | {row['cov95']:.3f} | {row['cpu']:.1f} | "
                + ("–" if np.isnan(row["vs_mstl"]) else f"{row['vs_mstl']:.3f}")
                + " |"
            )
        peers = agg.drop(index="ours")
        if len(peers):
            best = peers["mape"].idxmin()
            per_origin = wide["ours"] / wide[peers.index].min(axis=1)
            vs_best = agg.loc["ours", "mape"] / peers["mape"].min()
            lines += [
                "",
                f"ours / best peer ({best}): **{vs_best:.3f}**; "
                f"origin by origin, ours below every peer at {float((per_origin < 1).mean()):.2f} "
                f"of the pairs, median ratio to the best peer of the pair "
                f"{float(per_origin.median()):.3f}; CPU ours / MSTL in one process "
                + (
                    "not measured (no run timed both)"
                    if np.isnan(agg.loc["ours", "vs_mstl"])
                    else f"{agg.loc['ours', 'vs_mstl']:.3f} ({pairs_cpu} (seed, origin) pairs, "
                    "interleaved at each origin, warm)"
                )
                + ".",
            ]
        lines.append("")
    return "\n".join(lines) + "\n"


def _cpu_vs_mstl(rows: pd.DataFrame) -> tuple[pd.Series, int]:
    """(CPU of each method over MSTL's, pairs): sums over the (seed, origin) pairs that one
    process (``run``) timed for both, interleaved at each origin, so that the load is shared."""
    if "run" not in rows or "MSTL" not in set(rows["method"]):
        return pd.Series(np.nan, index=rows["method"].unique()), 0
    timed = rows.dropna(subset=["run"]).drop_duplicates(["run", "seed", "origin", "method"])
    wide = timed.pivot(index=["run", "seed", "origin"], columns="method", values="cpu")
    out, pairs = {}, 0
    for method in rows["method"].unique():
        timed_both = method in wide and "MSTL" in wide
        both = wide[list({method, "MSTL"})].dropna() if timed_both else wide.iloc[:0]
        out[method] = float(both[method].sum() / both["MSTL"].sum()) if len(both) else np.nan
        if method == "ours":
            pairs = len(both)
    return pd.Series(out), pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--origins", type=int, default=28)
    parser.add_argument(
        "--slow-origins",
        type=int,
        default=28,
        help="Origins of AutoARIMA and AutoTheta (the first ones; 0: skip; default all 28).",
    )
    parser.add_argument(
        "--slow-seeds", type=int, default=None,
        help="Release seeds of AutoARIMA and AutoTheta (the first ones; default all).",
    )  # fmt: skip
    parser.add_argument(
        "--cache", default=None,
        help="CSV of the peers' per-origin rows: appended as they finish, read back, and "
        "skipped on a restart (e.g. /tmp/forecast_peers_cache.csv).",
    )  # fmt: skip
    parser.add_argument(
        "--only", choices=("all", "ours", "peers"), default="all",
        help="Run only ours (peers read from --cache) or only the peers (into --cache).",
    )  # fmt: skip
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    parser.add_argument("--datasets", nargs="+", default=["regional", "household"])
    parser.add_argument("--out", default=None, help="Markdown report (default: print only).")
    parser.add_argument("--csv", default=None, help="Per-origin table.")
    parser.add_argument(
        "--peer-seeds", type=int, default=None,
        help="Run the peers on the first N release seeds only (ours on all; default all).",
    )  # fmt: skip
    parser.add_argument("--coherent", action="store_true", help="Only the coherent part.")
    parser.add_argument(
        "--diagnose", action="store_true",
        help="Only the release-term check (corr(d, v), realised / stated R, coverage of the "
        "Minkowski and posterior bands), one row per data set.",
    )  # fmt: skip
    parser.add_argument("--from-csv", default=None, help="Only report this per-origin table.")
    parser.add_argument(
        "--releases", default=None,
        help="Directory keeping each seed's release (written once, then read back).",
    )  # fmt: skip
    parser.add_argument(
        "--sources", nargs="+", default=["all"],
        help="Only these data: real and/or release seeds (0 1 ...); default all (split runs).",
    )  # fmt: skip
    parser.add_argument(
        "--start", default=None,
        help="First day of the eight weeks (a held-out slice, e.g. 2016-05-02; default each "
        "data set's own). Its releases are kept apart in --releases.",
    )  # fmt: skip
    args = parser.parse_args()
    global RELEASES, SOURCES, START
    START = args.start
    RELEASES = None if args.releases is None else Path(args.releases)
    SOURCES = tuple(args.sources)
    if args.diagnose:
        for d in args.datasets:
            print(diagnose(d, args.seeds, args.origins), flush=True)
        return
    if args.coherent:
        text = coherent(args.seeds, args.origins)
        print(text)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        return
    if args.from_csv:
        tables = [pd.read_csv(f) for f in args.from_csv.split(",")]
        table = pd.concat(tables, ignore_index=True)
        table["seed"] = table["seed"].astype("Int64")
        text = report(table, args)
        print(text)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        return
    table = pd.concat(
        [
            run(
                d,
                args.seeds,
                args.origins,
                args.slow_origins,
                args.peers,
                args.csv,
                args.peer_seeds,
                args.cache,
                args.only,
                args.slow_seeds,
            )  # fmt: skip
            for d in args.datasets
        ],
        ignore_index=True,
    )
    if args.only == "peers":
        print(f"peers' rows in {args.cache}")
        return
    text = report(table, args)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
