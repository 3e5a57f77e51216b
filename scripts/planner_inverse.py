"""Issue 23 item 2: inverse planning of OptStream validated on held-out periods.

Regional hierarchy (national -> 4 SimBench regions, kW, 2016), α = 50 kW, w = 48. For each
held-out month (February, June, October) the previous month is the public history. For each
level (root = national, leaves = the regions) and 3 targets of its relative error (MAE over
the mean load, per node, averaged over the level: see :mod:`planner._inverse`),
:func:`planner.plan_epsilon` returns ε from the history alone; the held-out month is then
released ``--trials`` times with ``release_optstream(epsilon=ε, alpha=50, history=<last
month>, prior=False, target=<the level's>)`` and its realised relative error of the level is
compared with the target (wanted: 0.7-1.2x).

Run: ``python scripts/planner_inverse.py [--trials 30]``; writes
``docs/results/planner_inverse.csv`` and ``.md`` after every cell. Seeded: an experiment.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream
from dpstream.pipelines._frames import prepare_frame
from planner import optstream_forward, plan_epsilon

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
ALPHA, W = 50.0, 48
MONTHS = {"Feb": ("2016-02", "2016-01"), "Jun": ("2016-06", "2016-05"),
          "Oct": ("2016-10", "2016-09")}  # fmt: skip
TARGETS = {"root": (0.02, 0.05, 0.10), "leaves": (0.05, 0.10, 0.20)}


def realised(out: pd.DataFrame, truth: pd.DataFrame, nodes: list[str]) -> float:
    err = (out[nodes] - truth[nodes]).abs().mean()
    return float((err / truth[nodes].abs().mean()).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--months", nargs="*", default=list(MONTHS))
    args = parser.parse_args()
    frame, hierarchy = dpstream.load_regional(), dpstream.regional_hierarchy()
    root = next(iter(hierarchy))
    level_nodes = {"root": [root], "leaves": list(hierarchy[root])}
    start = time.perf_counter()
    rows = []
    for month in args.months:
        held, past = MONTHS[month]
        history, data = frame.loc[past], frame.loc[held]
        sf = prepare_frame(history, owner="planner_inverse", hierarchy=hierarchy)
        truth = prepare_frame(data, owner="planner_inverse", hierarchy=hierarchy)
        truth = pd.DataFrame(truth.values, index=data.index, columns=list(truth.nodes))
        fwd = functools.partial(
            optstream_forward, sf.values, alpha=ALPHA, w=W, matrix=sf.hierarchy.matrix,
            depth=sf.level, node_names=sf.nodes,
        )  # fmt: skip
        for level, targets in TARGETS.items():
            for target in targets:
                plan = plan_epsilon(functools.partial(fwd, level=level), target=target)
                errs = []
                for trial in range(args.trials):
                    out = dpstream.release_optstream(
                        data, epsilon=plan.epsilon, alpha=ALPHA, w=W, hierarchy=hierarchy,
                        history=history, prior=False, target=level, seed=trial,
                    )  # fmt: skip
                    errs.append(realised(out, truth, level_nodes[level]))
                rows.append({
                    "month": month, "level": level, "target": target,
                    "epsilon": plan.epsilon, "predicted": plan.predicted, "k": plan.parameters["k"],
                    "root_share": plan.parameters["shares"]["root"],
                    "realised": float(np.mean(errs)), "realised_sd": float(np.std(errs)),
                    "realised_over_target": float(np.mean(errs)) / target, "trials": args.trials,
                })  # fmt: skip
                print(rows[-1], f"{time.perf_counter() - start:.0f}s", flush=True)
                table = pd.DataFrame(rows)
                OUT.mkdir(parents=True, exist_ok=True)
                table.to_csv(OUT / "planner_inverse.csv", index=False)
                (OUT / "planner_inverse.md").write_text(
                    _markdown(table, time.perf_counter() - start)
                )


def _markdown(table: pd.DataFrame, seconds: float) -> str:
    trials = int(table["trials"].iloc[0])
    lines = [
        "# Inverse planning of OptStream on held-out months (issue 23 item 2)",
        "",
        f"`python scripts/planner_inverse.py --trials {trials}` ({seconds / 60:.0f} min). "
        "Regional hierarchy (national -> 4 regions, kW, 2016), α = 50 kW, w = 48. Per held-out "
        "month, the previous month is the public history; `plan_epsilon` returns ε for a "
        "target relative error (MAE / mean load per node, averaged over the level) from the "
        f"history alone; the month is then released {trials} times at that ε "
        "(`release_optstream(history=last month, prior=False, target=level)`, seeds 0..). "
        "`realised/target` is wanted in 0.7-1.2.",
        "",
        "| month | level | target | ε | k | root share | predicted | realised (mean ± s.d.) "
        "| realised/target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.month} | {r.level} | {r.target:.0%} | {r.epsilon:.3g} | {r.k} | "
            f"{r.root_share:.1f} | {r.predicted:.2%} | {r.realised:.2%} ± {r.realised_sd:.2%} | "
            f"{r.realised_over_target:.2f} |"
        )
    ratio = table["realised_over_target"]
    inside = int(((ratio >= 0.7) & (ratio <= 1.2)).sum())
    lines += ["", f"realised/target {ratio.min():.2f}-{ratio.max():.2f}; {inside} of "
              f"{len(ratio)} cells inside 0.7-1.2.", ""]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
