"""Issue 23: is the plan's realised error within sampling of Table I's, cell by cell, many runs.

For each requested cell (stream × counter) the plan of :func:`planner.plan_pak_mse` and [PAK19]
Table I's setting with the same counter are released ``--runs`` times each (independent seeded
bit sources: the lattice samplers' rejection steps consume a variable number of bits, so one
seed does not pair the two releases' noise), and the script reports

* each setting's predicted RMSE (the plan's model; Table I's is scored by the same terms),
  its *expected* RMSE on the stream at hand (τ's law integrated, the stream's own clipping loss:
  :func:`planner_counters.expected_rmse`, no sampling) and the realised RMSE;
* the realised ratio plan/Table I with a 95 % bootstrap interval and its z-score against the
  expected ratio (the RMSE ratio's standard error by the delta method from the squared errors'
  variances: it is not assumed normal);
* the model's own terms at each setting, the exact ones (the Laplace release of c(σ, m), the
  suffix counter's variance, both given τ) and the modelled clipping loss, predicted from the
  prefix against the stream's.

Streams: ``slowtest`` (the stream of ``tests/planner/test_pak_mse.py::test_every_counter…``:
Exp(10) ≤ 1000, n = 30,000, m = 10,000) and the five of ``scripts/planner_counters.py`` by name
index. Seeded runs: an experiment, not a release.

Run: ``python scripts/planner_table_i_check.py --cells slowtest:binary_tree --runs 3000``;
appends one row per cell to ``docs/results/planner_table_i_check.csv`` and rewrites the ``.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner_counters import (  # noqa: E402
    DELTA,
    EPS,
    OUT,
    TABLE_I,
    _errors,
    _ratio_interval,
    expected_rmse,
    streams,
)

from planner import plan_pak_mse  # noqa: E402

STEM = "planner_table_i_check"


def _streams() -> dict[str, tuple[np.ndarray, float, int]]:
    out = {}
    x = np.minimum(np.random.default_rng(5).exponential(10.0, 30_000), 1000.0)
    out["slowtest"] = ("test stream (Exp(10) ≤ 1000, n = 30,000, m = 10,000)", x, 1000.0, 10_000)
    for i, (name, (v, bound)) in enumerate(streams().items()):
        out[str(i)] = (name, v, bound, min(50_000, v.size // 5))
    return out


def _ratio_z(a: np.ndarray, b: np.ndarray, expected: float) -> float:
    """(log realised ratio − log expected ratio) / its s.e. (delta method on the mean squares)."""
    ma, mb = np.mean(a**2), np.mean(b**2)
    se = 0.5 * math.sqrt(np.var(a**2) / (a.size * ma**2) + np.var(b**2) / (b.size * mb**2))
    return (0.5 * math.log(ma / mb) - math.log(expected)) / se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", nargs="+", required=True, help="stream:counter ...")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=500)
    args = parser.parse_args()
    cells = _streams()
    path = OUT / f"{STEM}.csv"
    frame = pd.read_csv(path) if path.exists() else pd.DataFrame()
    for k, cell in enumerate(args.cells):
        key, counter = cell.split(":")
        name, x, bound, m = cells[key]
        start = time.perf_counter()
        plan = plan_pak_mse(x[:m], n=x.size, bound=bound, epsilon=EPS, delta=DELTA,
                            counter=counter)  # fmt: skip
        params, table = plan.release_parameters(), {**TABLE_I, "counter": plan.counter}
        seed = args.seed + 10 * k
        err = _errors(x, bound, m, params, args.runs, seed)
        terr = _errors(x, bound, m, table, args.runs, seed + 1)
        real, treal = (float(np.sqrt(np.mean(e**2))) for e in (err, terr))
        exp, texp = expected_rmse(x, bound, m, params), expected_rmse(x, bound, m, table)
        lo, hi = _ratio_interval(err, terr, seed)
        row = {
            "stream": name, "counter": plan.counter, "runs": args.runs,
            "seeds": f"{seed}/{seed + 1}",
            "plan": "threshold" if plan.use_threshold else "plain",
            "departs": plan.departs, "r": plan.r, "eps1_share": plan.eps1_share,
            "beta_lt": plan.beta_lt,
            "predicted": plan.rmse, "expected": exp, "realised": real,
            "table_i_predicted": plan.table_i_rmse,
            "table_i_expected": texp, "table_i_realised": treal,
            "expected_ratio": exp / texp, "realised_ratio": real / treal,
            "ratio_lo": lo, "ratio_hi": hi, "z": _ratio_z(err, terr, exp / texp),
            "seconds": time.perf_counter() - start,
        }  # fmt: skip
        print(row, flush=True)
        frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
        frame.to_csv(path, index=False)
        (OUT / f"{STEM}.md").write_text(_markdown(frame))


def _markdown(frame: pd.DataFrame) -> str:
    lines = [
        "# The plan against Table I with many runs (issue 23 item 1)",
        "",
        "`python scripts/planner_table_i_check.py --cells STREAM:COUNTER ... --runs N` (script "
        "notes). Per cell: the plan (`plan_pak_mse`) and Table I's setting with the same counter, "
        "N independent seeded releases each; predicted (the plan's model, Table I scored by the "
        "same terms), expected on the stream (no sampling) and realised RMSE of ĉ(σ, n); the "
        "realised ratio plan/Table I with its 95 % bootstrap interval, and z, its distance from "
        "the expected ratio in standard errors (delta method on the squared errors).",
        "",
        "| stream | counter | runs | plan | predicted | expected | realised | Table I predicted "
        "| Table I expected | Table I realised | plan/Table I expected | realised [95 % CI] | z |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        lines.append(
            f"| {row.stream} | {row.counter} | {row.runs} | {row.plan} | "
            f"{row.predicted:,.4g} | {row.expected:,.4g} | {row.realised:,.4g} | "
            f"{row.table_i_predicted:,.4g} | {row.table_i_expected:,.4g} | "
            f"{row.table_i_realised:,.4g} | {row.expected_ratio:.3f} | "
            f"{row.realised_ratio:.3f} [{row.ratio_lo:.3f}, {row.ratio_hi:.3f}] | {row.z:+.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
