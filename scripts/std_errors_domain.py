"""Where the stated OptStream errors hold (issue 30, item 4): ``docs/results/std_errors_domain.md``.

Issue 28's forecasting benchmark (``bench/bench_forecast_peers.py``) fed ``dpstream.std_errors``
squared to the forecaster and found it understating 2-4x. Its releases: eight weeks of the
bundled regional hierarchy (α = 50 kW) and of the household sub-meters (2007, α = 10 Wh), ε = 1,
``k="auto"``, with the benchmark's seeds. Per node, pooled over steps and seeds: empirical RMSE
against the truth / stated RMSE, for ``interpolation="planned"`` (the default) and ``"rough"``,
with and without the bootstrap where non-negativity binds; and the diagnosis: the measurements'
mean squared error against the truth over the planner's predicted variance (noise plus
interpolation), which only the truth can show (the samples sit at the same steps every day, so
the published values never see a lag shorter than the sample spacing).

Seeded releases are experiments (not private). Run: ``python scripts/std_errors_domain.py
[--seeds 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from std_errors_scope import SCOPE, markdown  # scripts/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "std_errors_domain.md"
sys.path.insert(0, str(ROOT / "bench"))


def measurement_factor(out: pd.DataFrame, truth: pd.DataFrame) -> np.ndarray:
    """Per node: Σ (measurement − truth)² / Σ planned variance, over measured steps."""
    planning = out.attrs["planning"]  # the release's own plans (dpstream.std_errors reads them)
    measured, plans = planning.measured, planning.plans
    w = out.attrs["privacy"]["w"]
    t = truth[list(out.columns)].to_numpy()
    num = np.zeros(t.shape[1])
    den = np.zeros(t.shape[1])
    for i, (m, p) in enumerate(zip(measured, plans, strict=True)):
        r = m.values.shape[1]
        v = np.asarray(p.variances[:, :r], dtype=np.float64)
        ok = np.isfinite(v)
        e2 = (m.values - t[i * w : i * w + r].T) ** 2
        num += np.where(ok, e2, 0.0).sum(axis=1)
        den += np.where(ok, v, 0.0).sum(axis=1)
    return num / den


def table(name: str, seeds: int) -> tuple[pd.DataFrame, float, float]:
    from bench_forecast_peers import SETTINGS, load

    import dpstream

    span, tree, leaves = load(name)
    alpha = SETTINGS[name]["alpha"]
    modes = {
        "planned": ("planned", 200),
        "planned, linear": ("planned", 0),
        "rough": ("rough", 200),
    }
    err = np.zeros(len(span.columns))
    stated = {m: np.zeros(len(span.columns)) for m in modes}
    factor = np.zeros(len(span.columns))
    cpu_rel = cpu_se = 0.0
    for seed in range(seeds):
        t0 = time.process_time()
        out = dpstream.release_optstream(
            span[leaves], epsilon=1.0, hierarchy=tree, alpha=alpha, seed=seed
        )
        cpu_rel += time.process_time() - t0
        cols = list(out.columns)
        err += ((out - span[cols]) ** 2).mean().to_numpy()
        factor += measurement_factor(out, span)
        for m, (interp, boot) in modes.items():
            t0 = time.process_time()
            se = dpstream.std_errors(out, seed=seed, n_bootstrap=boot, interpolation=interp)
            if m == "planned":
                cpu_se += time.process_time() - t0
            stated[m] += (se**2).mean().to_numpy()
    rows = pd.DataFrame(index=pd.Index(cols, name="node"))
    rows["empirical RMSE"] = np.sqrt(err / seeds)
    for m in modes:
        rows[f"ratio, {m}"] = rows["empirical RMSE"] / np.sqrt(stated[m] / seeds)
    rows["measurement MSE / planned variance"] = factor / seeds
    return rows, cpu_rel / seeds, cpu_se / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    lines = [
        "# Where the stated OptStream errors hold (issue 30, item 4)",
        "",
        f"Written by `python scripts/std_errors_domain.py --seeds {args.seeds}`. The releases of "
        'issue 28\'s forecasting benchmark (eight weeks, ε = 1, `k="auto"`, regional α = 50 kW, '
        "household sub-meters α = 10 Wh), seeds 0..{}. Ratio: empirical RMSE against the truth "
        "over the stated RMSE, per node pooled over steps and seeds (target 0.8-1.25). Seeded "
        "releases: experiments, not private.".format(args.seeds - 1),
        "",
    ]
    tables = {}
    for name in ("regional", "household"):
        rows, cpu_rel, cpu_se = table(name, args.seeds)
        tables[name] = rows
        print(name, rows, flush=True)
        lines += [f"## {name}", "", markdown(rows), "",
                  f"CPU per release {cpu_rel:.2f} s, per `std_errors` {cpu_se:.2f} s "
                  f"(ratio {cpu_se / cpu_rel:.2f}).", ""]  # fmt: skip

    def span(name, col, leaves_only=False):
        v = tables[name][col]
        v = v.iloc[1:] if leaves_only else v
        return f"{v.min():.2f}-{v.max():.2f}"

    planned_h, linear_h = (
        span("household", "ratio, planned"),
        span("household", "ratio, planned, linear"),
    )
    rough_h, rough_r = span("household", "ratio, rough"), span("regional", "ratio, rough")
    factor_h = span("household", "measurement MSE / planned variance", True)
    factor_r = span("regional", "measurement MSE / planned variance", True)
    lines += [
        "## Reading",
        "",
        "Two causes of issue 28's 2-4x. (1) Its benchmark called `std_errors(out)` without "
        "the hierarchy and the release carried none: every column was taken as an independent "
        'stream. Releases now carry `attrs["hierarchy"]` and a multi-level release without '
        "one is refused; the tables above are with the hierarchy. (2) The last column: "
        "between samples the planner predicts the interpolation error from the variogram of "
        "the released measurements, which only sees lags that are multiples of the sample "
        "spacing (the samples sit at the same steps every day); below it the variogram is "
        "extrapolated as a random walk (`planner.variogram`). The regions are about that "
        f"smooth (leaves {factor_r}; the national's column is not its error where the planner "
        "gave it no budget of its own) and their stated figures hold "
        f"({span('regional', 'ratio, planned')} here; `std_errors_calibration.md`); a "
        "household's sub-meters switch within a spacing (a kettle, a washing machine): their "
        f"measurements' error is {factor_h}x the plan's.",
        "",
        "The nugget (issue 30 follow-up): a household's load between samples is closer to "
        "white noise around the day's profile than to a random walk. With `V(h) = c + σ²h` "
        "linear interpolation misses `σ²(t − i)(j − t)/(j − i) + (c/2)(1 + (1 − λ)² + λ²)`, at "
        "mid-spacing `3c/4`, three times the Brownian bridge fitted to a pure nugget's "
        "increments. `c` is read from the published samples: consecutive increments are "
        "anti-correlated by `−c/2` whatever the spacing, measured within each sample position "
        "over the periods (the day's profile out: across positions a smooth peak sampled "
        "every 4.5 hours looks like a nugget too), noise taken out, shrunk by its sampling "
        "variance; the stated interpolation error is the larger of the bridge and the white "
        "noise, step by step (their sum stated the regional nodes 5-10 % wider). On the true "
        "household data the within-position share of the nugget at these sample positions is "
        "0.41-0.86, on the regional data 0.07-0.25. Two more changes went with it: the white "
        "noise is spread over the tree with a correlation of its own (appliances switch "
        "independently; one correlation for both overstated the total 1.6x), and where "
        "non-negativity binds the bootstrap is a factor on the linear figure at the steps "
        "holding a 0 (its own figure, with draws independent between nodes, understated the "
        "total 1.5x and the sub-meters 1.3-1.6x). Households now "
        f"{planned_h} with the bootstrap ({linear_h} linear), against 1.39-2.29 (0.82-1.54) "
        "before; the spikiest sub-meters (laundry, kitchen) are still understated. "
        '`interpolation="rough"` (the variogram at its sill from lag 1) gives the households '
        f"{rough_h} but the regional loads {rough_r} (overstated); it is not an upper bound.",
        "",
    ]
    lines += [
        "A per-node estimate of the roughness below the spacing from the published values "
        "was tried for issue 30: the noise-corrected variogram at the two shortest measured "
        "lags extrapolated linearly to lag 0 (a nugget), its missed interpolation error added "
        "by the kriging identity. It does not tell the two apart: on the regional releases it "
        "added 1.6-3.3x the planned variance as well (their shortest lags are pairs at fixed "
        "times of day, from plans of different k), so it was not adopted and the domain is "
        "stated instead (the section below).",
        "",
        "A second probe (session 9): the noise-corrected variogram at the shortest published "
        "lag over its sill, which a load that switches within a spacing has reached already "
        "(household sub-meters 0.7-1.3 at lag 9, ε = 1; the regional nodes 0.2 at lag 4, "
        "from days planned with k = 12). With two standard errors of margin it flagged 14 of "
        "the 15 household nodes over three seeds and none of the regional ones, but nothing at "
        "ε = 0.1 (the noise hides the variogram), and it flags a smooth load as well: a daily "
        "sinusoid sampled every 9 steps is at 0.59 of its sill at lag 9 (the regional nodes "
        "themselves reach 0.8 at lag 8). The samples cannot show what happens between them, "
        "so it was not adopted either.",
        "",
    ]
    lines += SCOPE
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
