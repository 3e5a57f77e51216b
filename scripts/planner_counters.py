"""Issue 23 item 1: the mean-square PAK plan under every counter, predicted against realised.

For each stream (the bundled household minutes and retail invoices, a synthetic light-tailed
and a synthetic heavy-tailed stream) and each counter of :data:`mechanisms.COUNTERS`, plan
Mechanism 1 on the first m values with :func:`planner.plan_pak_mse` (threshold or plain
counter, r, λ, ε₁/ε by predicted mean square error), then release the whole stream ``--runs``
times with the plan and with Table I's parameters ([PAK19] §VI-B: r = 1.5, λ = 0.85,
ε₁/ε = 0.85, p = 0.005, β_lt = 0.004) through the same counter, and report the root mean
square error of ĉ(σ, n). ε = 1, δ = 2⁻²⁰, β = 0.02, p_max = 0.005; m = min(50,000, n/5).

Run: ``python scripts/planner_counters.py [--runs 100]``; writes
``docs/results/planner_counters.csv`` and ``.md``. ``--streams 0 --stem A`` runs some streams
only (to run them as separate processes), ``--merge A B`` joins their tables into ``--stem``.
Seeded runs: an experiment, not a release.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpstream.datasets import (
    HOUSEHOLD_MINUTES_BOUND,
    RETAIL_BOUND,
    household_minutes_stream,
    retail_stream,
)
from mechanisms import COUNTERS, pak_release
from mechanisms.core import bit_source
from planner import plan_pak_mse

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
EPS, DELTA = 1.0, 2.0**-20
TABLE_I = {"threshold": True, "r": 1.5, "lam": 0.85, "eps1_share": 0.85, "p": 0.005,
           "beta_lt": 0.004}  # fmt: skip


def streams() -> dict[str, tuple[np.ndarray, float]]:
    rng = np.random.default_rng(2023)
    n = 300_000
    light = np.minimum(rng.exponential(60.0, n), 1440.0)  # minutes, bound one day
    heavy = np.minimum(rng.lognormal(3.5, 1.3, n), 1440.0)  # heavy tail up to the bound
    return {
        "household minutes (kW)": (
            np.asarray(household_minutes_stream(), dtype=np.float64),
            float(HOUSEHOLD_MINUTES_BOUND),
        ),
        "retail invoices (GBP)": (
            np.asarray(retail_stream(clip_to=RETAIL_BOUND), dtype=np.float64),
            float(RETAIL_BOUND),
        ),
        "synthetic light-tailed (Exp(60), B = 1440)": (light, 1440.0),
        "synthetic heavy-tailed (lognormal(3.5, 1.3), B = 1440)": (heavy, 1440.0),
    }


def _rmse(x, bound, m, params, runs, seed) -> float:
    truth = math.fsum(x)
    bits = bit_source(seed)
    err = np.empty(runs)
    for i in range(runs):
        rel = pak_release(x, bound=bound, epsilon=EPS, delta=DELTA, time_lag=m, seed=bits, **params)
        err[i] = float(rel.prefix_sums[-1]) - truth
    return float(np.sqrt(np.mean(err**2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--streams", nargs="*", type=int, default=None,
                        help="indices of the streams to run (default all)")  # fmt: skip
    parser.add_argument("--stem", default="planner_counters")
    parser.add_argument("--merge", nargs="*", default=None,
                        help="CSV stems to merge into --stem's table (no runs)")  # fmt: skip
    args = parser.parse_args()
    start = time.perf_counter()
    if args.merge:
        frame = pd.concat([pd.read_csv(OUT / f"{s}.csv") for s in args.merge], ignore_index=True)
        order = {name: i for i, name in enumerate(streams())}
        frame = frame.sort_values("stream", key=lambda c: c.map(order), kind="stable")
        frame.to_csv(OUT / f"{args.stem}.csv", index=False)
        (OUT / f"{args.stem}.md").write_text(_markdown(frame, args.runs, math.nan))
        return
    rows = []
    for s, (name, (x, bound)) in enumerate(streams().items()):
        if args.streams is not None and s not in args.streams:
            continue
        m = min(50_000, x.size // 5)
        for c, counter in enumerate(COUNTERS):
            plan = plan_pak_mse(x[:m], n=x.size, bound=bound, epsilon=EPS, delta=DELTA,
                                counter=counter)  # fmt: skip
            seed = 1000 * s + 10 * c
            real = _rmse(x, bound, m, plan.release_parameters(), args.runs, seed)
            table = _rmse(x, bound, m, {**TABLE_I, "counter": counter}, args.runs, seed + 1)
            rows.append({
                "stream": name, "n": x.size, "m": m, "B": bound, "counter": counter,
                "threshold": plan.use_threshold, "r": plan.r, "eps1_share": plan.eps1_share,
                "predicted_rmse": plan.rmse, "realised_rmse": real,
                "realised_over_predicted": real / plan.rmse, "table_i_realised_rmse": table,
                "plan_over_table_i": real / table, "runs": args.runs,
            })  # fmt: skip
            print(rows[-1], f"{time.perf_counter() - start:.0f}s", flush=True)
            frame = pd.DataFrame(rows)
            OUT.mkdir(parents=True, exist_ok=True)
            frame.to_csv(OUT / f"{args.stem}.csv", index=False)
            (OUT / f"{args.stem}.md").write_text(
                _markdown(frame, args.runs, time.perf_counter() - start)
            )


def _markdown(frame: pd.DataFrame, runs: int, seconds: float) -> str:
    lines = [
        "# PAK planned by predicted mean square error, every counter (issue 23 item 1)",
        "",
        f"`python scripts/planner_counters.py --runs {runs}`"
        + (f" ({seconds / 60:.0f} min)" if math.isfinite(seconds) else "")
        + ". ε = 1, "
        "δ = 2⁻²⁰, β = 0.02, p_max = 0.005, m = min(50,000, n/5). Per stream and counter: "
        "`plan_pak_mse` on the first m values (threshold or the plain counter, r and ε₁/ε by "
        "predicted mean square error), its predicted RMSE of ĉ(σ, n), the realised RMSE over "
        f"{runs} seeded whole releases with the plan, and with Table I's parameters (r = 1.5, "
        "λ = 0.85, ε₁/ε = 0.85, p = 0.005, β_lt = 0.004) through the same counter. The RMSE of "
        f"{runs} runs has a sampling error of about {100 / math.sqrt(2 * runs):.0f} % (1 s.d.).",
        "",
        "| stream | counter | threshold | r | ε₁/ε | predicted | realised | realised/predicted "
        "| Table I realised | plan/Table I |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        lines.append(
            f"| {row.stream} | {row.counter} | {'yes' if row.threshold else 'no'} | "
            f"{row.r:.2f} | {row.eps1_share:.2f} | {row.predicted_rmse:,.4g} | "
            f"{row.realised_rmse:,.4g} | {row.realised_over_predicted:.2f} | "
            f"{row.table_i_realised_rmse:,.4g} | {row.plan_over_table_i:.2f} |"
        )
    ratio = frame["realised_over_predicted"]
    lines += [
        "",
        f"realised/predicted: {ratio.min():.2f}–{ratio.max():.2f}; plan/Table I: "
        f"{frame['plan_over_table_i'].min():.2f}–{frame['plan_over_table_i'].max():.2f}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
