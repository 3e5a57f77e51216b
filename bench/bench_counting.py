"""Benchmark of the counting family (issue 14): each counter against the paper's binary tree.

Per counter and n (default 10⁵ and 10⁶; ``BENCH_COUNTING_N`` = comma-separated list, e.g.
``100000,1000000,25000000``; the empirical columns only up to ``BENCH_COUNTING_EMPIRICAL_MAX_N``,
default 10⁶):

* max and mean prefix-sum variance relative to the BT (exact: ``counter_variance``; empirical:
  ``BENCH_COUNTING_RUNS`` releases of a synthetic stream, squared error averaged over steps);
* streaming state (floats kept between pushes, noise buffer of 2¹⁶ draws aside) and time per
  push (2·10⁴ pushes);
* batch time as a ratio to one ``numpy.cumsum`` of the same stream in the same run;

then Mechanism 1's improvement factor over the paper's BT (⌊log₂ n⌋ + 1 levels, raw nodes,
ε = 1, no threshold) on the bundled household minutes (B = ``HOUSEHOLD_MINUTES_BOUND``,
ε = 1, δ = 2⁻²⁰, m = 50,000), per counter: predicted by ``plan_pak(counter=...)`` (α_BT / α)
and realised (RMS error of c(σ, n) of plain BT / of Mechanism 1 with the plan's parameters,
over ``BENCH_COUNTING_PAK_RUNS`` runs). The plans read the prefix (analysis only, §VI-B).
Run: ``python bench/bench_counting.py``; with ``BENCH_COUNTING_WRITE=1`` it also writes
``docs/results/counting.{md,csv}`` and ``counting_mechanism1.csv``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from _timing import best_of

from mechanisms import (
    BinaryTreeCounter,
    KaryTreeCounter,
    SmoothBinaryCounter,
    counter_variance,
    pak_release,
)
from mechanisms.core import bit_source
from mechanisms.counting import COUNTERS, counter_release

EPS, DELTA = 1.0, 2.0**-20
NS = [int(v) for v in os.environ.get("BENCH_COUNTING_N", "100000,1000000").split(",") if v]
RUNS = int(os.environ.get("BENCH_COUNTING_RUNS", "20"))
PAK_RUNS = int(os.environ.get("BENCH_COUNTING_PAK_RUNS", "20"))
#: Largest n with the empirical columns (20 releases of 2.5·10⁷ steps per counter: too slow).
EMPIRICAL_MAX_N = int(os.environ.get("BENCH_COUNTING_EMPIRICAL_MAX_N", "1000000"))


def _pipe_table(frame, digits: int = 4) -> str:
    """A pipe table (pandas' to_markdown needs tabulate, not a dependency)."""

    def cell(v):
        if isinstance(v, float):
            return "" if v != v else f"{v:.{digits}g}"
        return str(v)

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _state_floats(counter: str, n: int) -> int:
    levels = n.bit_length()
    if counter == "smooth_binary":
        c = SmoothBinaryCounter(n, epsilon=EPS, delta=DELTA, bound=1.0, seed=0)
        return len(c._end_sum) + len(c._node) + 3  # E[h], node[h], S, S_prev, last leaf
    if counter == "kary_tree":  # per level: the noise chunks kept (≤ 3 of 2⁸) and a digit
        c = KaryTreeCounter(n, epsilon=EPS, bound=1.0, seed=0)
        for v in np.zeros(min(n, 50_000)):
            c.push(v)
        return sum(len(ch) for level in c._chunks for ch in level.values()) + c.levels + 1
    if counter in ("binary_tree_consistent", "kary_tree_consistent"):
        return 2 * n  # batch only: the top-down pass needs every node (≈ 2n, ≈ n·k/(k − 1))
    return 6 * levels + 1  # BinaryTreeCounter: exact, node, z, z_left, slot per level


def _push_time(counter: str, x: np.ndarray) -> float:
    def run():
        if counter == "kary_tree":
            c = KaryTreeCounter(x.size, epsilon=EPS, bound=1.0, seed=1)
            for v in x:
                c.push(v)
        elif counter == "smooth_binary":
            c = SmoothBinaryCounter(x.size, epsilon=EPS, delta=DELTA, bound=1.0, seed=1)
            for v in x:
                c.push(v)
        else:
            c = BinaryTreeCounter(x.size, epsilon=EPS, bound=1.0, seed=1)
            online = counter == "binary_tree_online"
            for v in x:
                c.push(v)
                if online:
                    c.online_estimate()

    return best_of(run, 2) / x.size


def counters_table() -> list[dict]:
    print(
        "counter                    n        max/BT exact  mean/BT exact  max/BT emp  "
        "mean/BT emp  state floats  us/push  batch/cumsum"
    )
    rows = []
    for n in NS:
        x = np.random.default_rng(n).uniform(0.0, 1.0, n)
        truth = np.cumsum(x)
        t_cumsum = best_of(lambda x=x: np.cumsum(x), 5)
        ref = counter_variance("binary_tree", n, epsilon=EPS, bound=1.0)
        runs = RUNS if n <= EMPIRICAL_MAX_N else 0  # beyond: exact columns only (too slow)
        emp_ref = None
        for counter in COUNTERS:
            var = counter_variance(counter, n, epsilon=EPS, bound=1.0, delta=DELTA)
            bits = bit_source(7)
            sq = np.zeros(n) if runs else None
            for _ in range(runs):
                rel = counter_release(
                    x, counter=counter, epsilon=EPS, delta=DELTA, bound=1.0, bits=bits
                )
                sq += (rel.prefix_sums - truth) ** 2
                del rel
            if runs:
                sq /= runs
                if counter == "binary_tree":
                    emp_ref = sq
            t_batch = best_of(
                lambda c=counter, x=x: counter_release(
                    x, counter=c, epsilon=EPS, delta=DELTA, bound=1.0, bits=bit_source(3)
                ),
                2 if n <= EMPIRICAL_MAX_N else 1,
            )
            push = (
                _push_time(counter, x[:20000]) * 1e6
                if not counter.endswith("_consistent")
                else float("nan")
            )
            row = {
                "counter": counter,
                "n": n,
                "max_var_vs_bt_exact": float(var.max() / ref.max()),
                "mean_var_vs_bt_exact": float(var.mean() / ref.mean()),
                "max_var_vs_bt_empirical": float(sq.max() / emp_ref.max()) if runs else math.nan,
                "mean_var_vs_bt_empirical": (
                    float(sq.mean() / emp_ref.mean()) if runs else math.nan
                ),
                "empirical_runs": runs,
                "state_floats": _state_floats(counter, n),
                "us_per_push": push,
                "batch_over_cumsum": t_batch / t_cumsum,
            }
            rows.append(row)
            print(
                f"{counter:24s} {n:>9,d}  {row['max_var_vs_bt_exact']:12.3f}  "
                f"{row['mean_var_vs_bt_exact']:13.3f}  {row['max_var_vs_bt_empirical']:10.3f}  "
                f"{row['mean_var_vs_bt_empirical']:11.3f}  {row['state_floats']:12d}  "
                f"{push:7.2f}  {row['batch_over_cumsum']:12.1f}",
                flush=True,
            )
            del var, sq
        del emp_ref
    return rows


def mechanism1_table() -> list[dict]:
    from dpstream.datasets import HOUSEHOLD_MINUTES_BOUND, household_minutes_stream
    from planner import pak_defaults, plan_pak

    x = np.asarray(household_minutes_stream(), dtype=np.float64)
    bnd, m, n = float(HOUSEHOLD_MINUTES_BOUND), 50_000, x.size
    truth = float(x.sum())
    bt = [
        pak_release(
            x, bound=bnd, epsilon=EPS, delta=DELTA, time_lag=m, threshold=False, seed=1000 + r,
            counter="binary_tree",
        ).prefix_sums[-1]
        - truth
        for r in range(PAK_RUNS)
    ]  # fmt: skip
    bt_rms = float(np.sqrt(np.mean(np.square(bt))))
    print(
        f"\nMechanism 1 on household minutes (n = {n:,}, B = {bnd:g}, m = {m:,}); "
        f"paper's BT RMS error at n: {bt_rms:.1f}"
    )
    print(
        "counter                   parameters  predicted IF  realised IF  r      eps1/eps  "
        "RMS error"
    )
    rows = []
    for counter in (None, "auto", *COUNTERS):
        plan = plan_pak(x[:m], n=n, bound=bnd, epsilon=EPS, delta=DELTA, beta=0.02, counter=counter)
        settings = [("data plan", plan.release_parameters(), plan)]
        if counter is not None:  # the public defaults of this counter, predicted on the data
            d = pak_defaults(n=n, bound=bnd, epsilon=EPS, delta=DELTA, time_lag=m, counter=counter)
            settings.append(("public", d.release_parameters(), None))
        for label, params, pl in settings:
            err = [
                pak_release(
                    x, bound=bnd, epsilon=EPS, delta=DELTA, time_lag=m, seed=r, **params
                ).prefix_sums[-1]
                - truth
                for r in range(PAK_RUNS)
            ]
            rms = float(np.sqrt(np.mean(np.square(err))))
            name = "paper Eq.16 (tree bound)" if counter is None else params["counter"]
            if counter == "auto":
                name = f"auto = {params['counter']}"
            predicted = pl.improvement_factor if pl is not None else math.nan
            rows.append({
                "counter": name, "parameters": label, "predicted_IF": predicted,
                "realised_IF": bt_rms / rms, "r": params.get("r", 1.0),
                "eps1_share": params.get("eps1_share", 0.0), "rms_error": rms,
                "runs": PAK_RUNS,
            })  # fmt: skip
            print(
                f"{name:24s}  {label:10s}  {predicted:12.2f}  {bt_rms / rms:11.2f}  "
                f"{rows[-1]['r']:5.3f}  {rows[-1]['eps1_share']:8.3f}  {rms:9.1f}",
                flush=True,
            )
    return rows


def write_results(counters: list[dict], mech1: list[dict]) -> None:
    """docs/results/counting.{md,csv} and counting_mechanism1.csv (``BENCH_COUNTING_WRITE=1``)."""
    import pandas as pd

    out = Path(__file__).resolve().parents[1] / "docs" / "results"
    if counters:  # a run with BENCH_COUNTING_N=... (the table on disk is kept otherwise)
        pd.DataFrame(counters).to_csv(out / "counting.csv", index=False)
    if mech1:
        pd.DataFrame(mech1).to_csv(out / "counting_mechanism1.csv", index=False)
    frame = pd.read_csv(out / "counting.csv")
    ns = ",".join(str(v) for v in sorted(set(frame["n"])))
    lines = [
        "# Counting beyond the binary tree: the counters, and Mechanism 1 through them",
        "",
        f"Issue 14. Generated by `BENCH_COUNTING_N={ns} BENCH_COUNTING_RUNS={RUNS} "
        "BENCH_COUNTING_WRITE=1 python bench/bench_counting.py` on the project's 2-core "
        "machine (ratios within one run; timings shared with other jobs).",
        "",
        "## Per counter: variance relative to the paper's binary tree, memory, time",
        "",
        f"ε = {EPS:g} (δ = 2⁻²⁰ for the smooth binary mechanism), bound 1. Variance ratios: "
        "max and mean over the n prefix sums of the counter's variance over the binary "
        "tree's (`binary_tree`, ⌊log₂ n⌋ + 1 levels, raw nodes); exact = `counter_variance`; "
        f"empirical = squared errors of {RUNS} seeded releases of a uniform stream, averaged "
        f"per step (n ≤ {EMPIRICAL_MAX_N:,} only: at larger n the empirical columns are "
        "not run, empty, too slow on this machine). State floats: kept between pushes by the "
        "streaming counter (the `_consistent` estimates are batch only: ≈ every node). "
        "µs/push: 2·10⁴ pushes. Batch: one `counter_release` over one `np.cumsum` of the "
        "same stream.",
        "",
        _pipe_table(frame, 3),
        "",
    ]
    if (out / "counting_mechanism1.csv").exists():
        m1 = pd.read_csv(out / "counting_mechanism1.csv")
        lines += [
            "## Mechanism 1's improvement factor over the paper's BT, per counter",
            "",
            "Household minutes (n = 521,669, B = 36 kW), ε = 1, δ = 2⁻²⁰, β = 0.02, "
            "m = 50,000. Baseline: the paper's BT with B over the whole stream. `data plan`: "
            "`plan_pak(counter=...)` on the prefix (analysis, reads the data), predicted IF = "
            "α_BT/α of Eq. 16 with the counter's exact variance; `public`: "
            "`planner.pak_defaults(counter=...)` (public inputs only; no data-based "
            "prediction). Realised IF = RMS error of c(σ, n) of the paper's BT over that of "
            f"Mechanism 1, {int(m1['runs'].iloc[0])} seeded runs each. `auto` is the default "
            "counter.",
            "",
            _pipe_table(m1, 3),
            "",
        ]
    (out / "counting.md").write_text("\n".join(lines))


if __name__ == "__main__":
    counter_rows = counters_table() if NS else []  # BENCH_COUNTING_N= (empty): skip
    mech1_rows = mechanism1_table() if PAK_RUNS > 0 else []  # BENCH_COUNTING_PAK_RUNS=0: skip
    if os.environ.get("BENCH_COUNTING_WRITE") == "1":
        write_results(counter_rows, mech1_rows)
