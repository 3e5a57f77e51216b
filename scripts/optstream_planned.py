"""OptStream with k planned on the previous month, against Laplace and DFT: the 30-trial protocol.

For each month of [FV19]'s protocol (February, June, October 2016) and each α/ε, k is chosen by
:func:`planner.plan_optstream` on the PREVIOUS month (January, May, September: history the
operator already holds), then the month is released as the regional hierarchy (national -> 4
regions, ε/2 per level, w = 48) 30 times by OptStream with the plan, by Laplace and by DFT
(k = 10, [FV19] §6). Metric: mean L1 error per step, regions and national. ε = 1 and α varies
(only α/ε matters). Seeded runs: an experiment, not a release.

Run: ``python scripts/optstream_planned.py [--trials 30]``; writes
``docs/results/optstream_planned.csv`` and prints the ratios.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream
from planner import plan_optstream

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
MONTHS = {
    "Feb": ("2016-02", "2016-01"),
    "Jun": ("2016-06", "2016-05"),
    "Oct": ("2016-10", "2016-09"),
}
ALPHAS = (1.0, 10.0, 50.0, 100.0, 500.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    frame = dpstream.load_regional()
    hierarchy = dpstream.regional_hierarchy()
    regions = hierarchy["national"]
    rows, start = [], time.perf_counter()
    for month, (period, previous) in MONTHS.items():
        truth = frame.loc[period]
        leaves = truth[regions]
        for alpha in ALPHAS:
            plan = plan_optstream(
                frame.loc[previous].to_numpy(), epsilon=1.0, alpha=alpha, n_levels=2
            )
            common = {"epsilon": 1.0, "alpha": alpha, "hierarchy": hierarchy}
            methods = {
                "OptStream (planned k)": (
                    dpstream.release_optstream,
                    {**plan.release_parameters(), **common},
                ),
                "Laplace": (dpstream.release_laplace, common),
                "DFT": (dpstream.release_dft, common),
            }
            for i, (method, (release, kwargs)) in enumerate(methods.items()):
                errs = []
                for trial in range(args.trials):
                    out = release(leaves, seed=10_000 * i + 100 * trial + int(alpha), **kwargs)
                    err = (out - truth[out.columns]).abs().mean()
                    errs.append((float(err[regions].mean()), float(err["national"])))
                errs = np.array(errs)
                rows.append(
                    {
                        "month": month, "alpha/eps": alpha, "k": plan.k, "method": method,
                        "regional": errs[:, 0].mean(), "national": errs[:, 1].mean(),
                        "regional_sd": errs[:, 0].std(ddof=1), "trials": args.trials,
                        "predicted_all": float(plan.predicted[plan.candidates == plan.k][0]),
                    }
                )  # fmt: skip
        print(f"{month} done ({time.perf_counter() - start:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "optstream_planned.csv", index=False, float_format="%.6g")
    mean = table.groupby(["alpha/eps", "method"])[["regional", "national"]].mean().unstack("method")
    for level in ("regional", "national"):
        part = mean[level]
        print(f"\n{level}: mean L1 error (kW) and ratios, months averaged")
        print(
            pd.DataFrame(
                {
                    "k (Feb/Jun/Oct)": table[table.method == "Laplace"]
                    .groupby("alpha/eps")["k"]
                    .apply(lambda k: "/".join(map(str, k))),
                    "OptStream": part["OptStream (planned k)"].round(0),
                    "Laplace": part["Laplace"].round(0),
                    "DFT": part["DFT"].round(0),
                    "Laplace/OptStream": (part["Laplace"] / part["OptStream (planned k)"]).round(2),
                    "DFT/OptStream": (part["DFT"] / part["OptStream (planned k)"]).round(2),
                }
            ).to_string()
        )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
