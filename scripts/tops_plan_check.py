"""Issue 23: does ``plan_tops`` predict what ``tops_release`` does? Predicted vs realised MSE.

For each stream and (ε_θ, ε_r): :func:`planner.plan_tops` on the first m values with the
release's defaults (32 simulated runs of its threshold and shape rule, seed 0) predicts the
release's expected MSE of a uniform random range query over the r = n − m released steps
(``release_mse``); :func:`mechanisms.tops_release` with the same arguments is then run
``--runs`` times (seeds 0 … runs − 1) and its MSE measured over the planner's own public
queries (``mechanisms.tops._variance.public_queries(r)``), truth = the raw values.

Streams: the bundled household minutes (kW, B = 36, m = 65,536, light-tailed) and retail
invoice totals (GBP, B = 10,000, m = 8,192, heavy-tailed); synthetic, m = 65,536 and
r = 2¹⁸: ``minutes`` ⌊Exp(60)⌋ ≤ 1,440 (light, the bench's flights-like durations),
``lognormal`` lognormal(2, 1) ≤ 1,000 and ``pareto`` 10·Pareto(2.5) ≤ 10⁴ (heavy).

Columns: ``predicted`` (the plan's release_mse), ``realised`` (mean over runs) and its
standard error, their ratio, the same runs' predicted error with the released steps' own
statistics over realised (``suffix_predicted_over_realised``: an analysis of what the prefix
cannot know), the plan's ``best`` (the grid's least predicted MSE: an oracle)
and ``realised_over_best``, mean θ of the plan's runs and of the releases.

Run: ``nice -n 10 python scripts/tops_plan_check.py [--runs 30]``; writes
``docs/results/tops_plan_check.{csv,md}`` (the md's hand-written sections, from its first
``## `` heading, are kept). Seeded: an experiment, not a release.
"""

from __future__ import annotations

import argparse
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
from mechanisms import tops_release
from mechanisms.tops._variance import public_queries
from planner import plan_tops
from planner._tops_plan import DEFAULT_QUERIES, rule_errors

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
SETTINGS = ((1.0, 1.0), (0.05, 0.05), (0.01, 0.05))
R = 1 << 18


def streams() -> dict[str, tuple[np.ndarray, float, int, str]]:
    """name -> (values, B, m, tail)."""
    rng = np.random.default_rng(2023)
    m = 65_536
    return {
        "household": (
            np.asarray(household_minutes_stream(), dtype=np.float64),
            float(HOUSEHOLD_MINUTES_BOUND),
            m,
            "light (bundled)",
        ),
        "retail": (
            np.asarray(retail_stream(clip_to=RETAIL_BOUND), dtype=np.float64),
            float(RETAIL_BOUND),
            8192,
            "heavy (bundled)",
        ),
        "minutes": (
            np.minimum(np.floor(rng.exponential(60.0, m + R)), 1440.0),
            1440.0,
            m,
            "light",
        ),
        "lognormal": (np.minimum(rng.lognormal(2.0, 1.0, m + R), 1000.0), 1000.0, m, "heavy"),
        "pareto": (np.minimum(10.0 * (1.0 + rng.pareto(2.5, m + R)), 1e4), 1e4, m, "heavy"),
    }


def check(name, x, bound, m, tail, eps_t, eps_r, runs) -> dict:
    r = x.size - m
    plan = plan_tops(x[:m], bound=bound, horizon=r, epsilon_perturb=eps_r, epsilon_threshold=eps_t)
    i, j = public_queries(r)
    sums = np.concatenate(([0.0], np.cumsum(x[m:])))
    truth = sums[j + 1] - sums[i]
    mse, theta = [], []
    for seed in range(runs):
        rel = tops_release(
            x, bound=bound, epsilon_threshold=eps_t, epsilon_perturb=eps_r, time_lag=m, seed=seed
        )
        v = np.concatenate(([0.0], np.cumsum(np.asarray(rel.values, dtype=np.float64))))
        mse.append(float(np.mean((v[j + 1] - v[i] - truth) ** 2)))
        theta.append(rel.threshold)
    realised = float(np.mean(mse))
    # the same runs' errors with the released steps' own statistics (truncation, smoothing):
    # what is left of the gap is the prefix standing for the later steps
    suffix = float(
        np.mean([e.mse for e in rule_errors(plan.release, x[m:], r, eps_r, 16, DEFAULT_QUERIES)])
    )
    return {
        "stream": name, "tail": tail, "bound": bound, "m": m, "r": r,
        "eps_threshold": eps_t, "eps_perturb": eps_r,
        "score": ",".join(sorted(set(plan.release.scores))),
        "predicted": plan.release_mse, "realised": realised,
        "realised_se": float(np.std(mse, ddof=1) / np.sqrt(runs)),
        "predicted_over_realised": plan.release_mse / realised,
        "suffix_predicted_over_realised": suffix / realised,
        "best": plan.best.mse, "best_theta": plan.best.threshold,
        "realised_over_best": realised / plan.best.mse,
        "plan_mean_theta": float(plan.release.thresholds.mean()),
        "release_mean_theta": float(np.mean(theta)), "runs": runs,
    }  # fmt: skip


def _markdown(frame: pd.DataFrame, runs: int, seconds: float) -> str:
    show = frame.copy()
    for col in show.columns:
        if show[col].dtype.kind == "f":
            show[col] = show[col].map(lambda v: f"{v:.4g}")
    head = "| " + " | ".join(show.columns) + " |"
    rule = "|" + "---|" * len(show.columns)
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in show.to_numpy()]
    ratio = frame["predicted_over_realised"]
    return "\n".join(
        [
            "# ToPS: the planner's prediction of the release's own rule (issue 23)",
            "",
            f"Generated by `python scripts/tops_plan_check.py --runs {runs}` ({seconds:.0f} s; "
            "see its docstring). `predicted` is `plan_tops(...).release_mse` (32 simulated runs",
            "of the release's threshold and shape rule on the prefix); `realised` the mean MSE",
            f"of {runs} seeded `tops_release` runs with the same arguments over the planner's",
            "public queries; `best` the grid's least predicted MSE (an oracle).",
            "",
            head,
            rule,
            *body,
            "",
            f"predicted/realised: {ratio.min():.2f}–{ratio.max():.2f} over {len(frame)} cells.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--streams", nargs="*", default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for name, (x, bound, m, tail) in streams().items():
        if args.streams and name not in args.streams:
            continue
        for eps_t, eps_r in SETTINGS:
            row = check(name, x, bound, m, tail, eps_t, eps_r, args.runs)
            rows.append(row)
            print({k: row[k] for k in ("stream", "eps_threshold", "eps_perturb", "predicted",
                                       "realised", "predicted_over_realised",
                                       "realised_over_best")}, flush=True)  # fmt: skip
    frame = pd.DataFrame(rows)
    seconds = time.perf_counter() - start
    frame.to_csv(OUT / "tops_plan_check.csv", index=False)
    md = OUT / "tops_plan_check.md"
    old = md.read_text() if md.exists() else ""
    notes = old[old.index("\n## ") :] if "\n## " in old else ""  # hand-written sections
    md.write_text(_markdown(frame, args.runs, seconds) + notes)


if __name__ == "__main__":
    main()
