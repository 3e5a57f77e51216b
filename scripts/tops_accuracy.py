"""Accuracy of ToPS against PAK on a real light-tailed stream: the protocol of [ToPS21] §5.

Data: ``dpstream.household_minutes_stream()``, the 521,669 observed one-minute powers (kW) of
2007 of one household (light-tailed, [PAK19] Def. 12), public bound B = 36 kW
(``HOUSEHOLD_MINUTES_BOUND``). Only 2007 is bundled at minute resolution, so the perturbed part is
r = n − m = 456,133 steps (≈ 2^18.8), not the paper's 2^20; m = 65,536 as in the paper.

Metric: mean squared error of range sums V(i, j) over the released steps, i and j uniform on
[0, r) and sorted, 25 queries per run, the same queries for every method within a run; truth =
the raw (unclipped) values. Settings: ε_θ ∈ {0.01, 0.02, 0.05, 0.1} with ε_r = 0.05, and
ε_θ = ε_r = 1.

Methods (range sums answered over the same released steps m..n − 1):

* ``ToPS``: ``mechanisms.tops_release`` (F = 16, recent smoother, default grid and c = 60);
* ``PAK, tau clipped to B``: PAK's threshold ([PAK19] Eqs. 6–13, ×r = 1.5, λ = 0.85,
  p = 0.005, β_lt = 0.004, Laplace, δ = 2⁻²⁰) from the m prefix values with ε₁ = ε_θ, clipped
  to B, then BT with bound τ and ε_r on the clipped suffix. This is Mechanism 1 with ε_θ on the
  prefix and ε_r on the suffix (``pak_release`` ties both to one ε; the released c(σ, m) cancels
  in range sums over released steps, so it is not drawn);
* ``PAK, tau not clipped``: the same with τ not clipped to B (``pak_threshold(clip=False)``);
  BT with bound τ > B when τ exceeds B, as in the paper's PAK;
* ``ToPS theta + plain BT``: the θ ToPS chose in the same run, then BT (bound θ, ε_r) on the
  clipped suffix: no pruning, no consistency, no smoothing;
* ``all-zero``: answer 0.

Run: ``nice python scripts/tops_accuracy.py [--runs 20]``: prints the table and writes
``docs/results/tops_accuracy.csv`` and ``docs/results/tops_accuracy.png``. Seeded runs: an
experiment, not a release.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream
from mechanisms import binary_tree_release, pak_threshold, tops_release

M = 65_536
QUERIES = 25
SETTINGS = [(0.01, 0.05), (0.02, 0.05), (0.05, 0.05), (0.1, 0.05), (1.0, 1.0)]
PAK = {"delta": 2.0**-20, "lam": 0.85, "p": 0.005, "beta_lt": 0.004, "r": 1.5}
OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
METHODS = [
    "ToPS",
    "PAK, tau clipped to B",
    "PAK, tau not clipped",
    "ToPS theta + plain BT",
    "all-zero",
]


def _bt_answers(suffix, tau, eps, q, seed):
    rel = binary_tree_release(np.minimum(suffix, tau), epsilon=eps, bound=tau, seed=seed)
    return np.array([rel.range_sum(int(i), int(j)) for i, j in q])


def one_run(x, bound, eps_t, eps_r, run):
    prefix, suffix = x[:M], x[M:]
    r = suffix.size
    q = np.sort(np.random.default_rng([run, 7]).integers(0, r, size=(QUERIES, 2)), axis=1)
    csum = np.concatenate([[0.0], np.cumsum(suffix)])
    truth = csum[q[:, 1] + 1] - csum[q[:, 0]]
    seed = np.random.SeedSequence([run, int(eps_t * 1000), int(eps_r * 1000)])
    s_tops, s_pak, s_bt = (np.random.PCG64(s) for s in seed.spawn(3))
    tops = tops_release(
        x, bound=bound, epsilon_threshold=eps_t, epsilon_perturb=eps_r, time_lag=M, seed=s_tops
    )
    th = pak_threshold(prefix, bound=bound, epsilon=eps_t, clip=False, seed=s_pak, **PAK)
    tau_raw = th.unclipped
    tau_clip = min(tau_raw, bound)
    answers = {
        "ToPS": np.array([tops.range_sum(M + int(i), M + int(j)) for i, j in q]),
        "PAK, tau clipped to B": _bt_answers(suffix, tau_clip, eps_r, q, s_pak),
        "PAK, tau not clipped": _bt_answers(suffix, max(tau_raw, 1e-9), eps_r, q, s_pak),
        "ToPS theta + plain BT": _bt_answers(suffix, tops.threshold, eps_r, q, s_bt),
        "all-zero": np.zeros(QUERIES),
    }
    thresholds = {
        "ToPS": tops.threshold,
        "PAK, tau clipped to B": tau_clip,
        "PAK, tau not clipped": tau_raw,
        "ToPS theta + plain BT": tops.threshold,
        "all-zero": np.nan,
    }
    errors = {k: (v - truth) ** 2 for k, v in answers.items()}
    return errors, thresholds, (tops.leaf_size, tops.levels)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--plot-only", action="store_true", help="Re-plot the written CSV.")
    args = parser.parse_args(argv)
    if args.plot_only:
        table = pd.read_csv(OUT / "tops_accuracy.csv")
        _plot(table)
        return table
    x = dpstream.household_minutes_stream()
    bound = dpstream.HOUSEHOLD_MINUTES_BOUND
    print(f"n = {x.size}, m = {M}, r = {x.size - M}, B = {bound:g}, runs = {args.runs}")
    rows = []
    start = time.perf_counter()
    for eps_t, eps_r in SETTINGS:
        sq = {k: [] for k in METHODS}
        th = {k: [] for k in METHODS}
        shape = (0, 0)
        for run in range(args.runs):
            errs, ths, shape = one_run(x, bound, eps_t, eps_r, run)
            for k in METHODS:
                sq[k].append(errs[k])
                th[k].append(ths[k])
        tops_mse = float(np.mean(sq["ToPS"]))
        for k in METHODS:
            e = np.concatenate(sq[k])
            rows.append(
                {
                    "eps_threshold": eps_t,
                    "eps_perturb": eps_r,
                    "method": k,
                    "runs": args.runs,
                    "queries": e.size,
                    "mse": float(e.mean()),
                    "mse_se": float(e.std(ddof=1) / np.sqrt(e.size)),
                    "ratio_to_tops": float(e.mean()) / tops_mse,
                    "median_threshold": float(np.median(th[k])) if k != "all-zero" else np.nan,
                    "leaf_size": shape[0] if k == "ToPS" else np.nan,
                    "levels": shape[1] if k == "ToPS" else np.nan,
                }
            )
        print(f"  eps_theta={eps_t:g}, eps_r={eps_r:g} done ({time.perf_counter() - start:.0f} s)")
    table = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "tops_accuracy.csv", index=False, float_format="%.6g")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    _plot(table)
    return table


def _plot(table: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[2, 1])
    small = table[table.eps_perturb == 0.05]
    for k in METHODS:
        part = small[small.method == k]
        ax.plot(part.eps_threshold, part.mse, marker="o", label=k)
    ax.set(xscale="log", yscale="log", xlabel="threshold ε_θ (perturber ε_r = 0.05)")
    ax.set(ylabel="MSE of random range queries", title="household minutes 2007, m = 65,536")
    ax.legend(fontsize=8)
    one = table[table.eps_perturb == 1.0]
    short = {
        "ToPS": "ToPS",
        "PAK, tau clipped to B": "PAK\nτ ≤ B",
        "PAK, tau not clipped": "PAK\nτ raw",
        "ToPS theta + plain BT": "θ +\nBT",
        "all-zero": "zero",
    }
    bx.bar(range(len(one)), one.mse, color=[f"C{i}" for i in range(len(one))])
    bx.set_xticks(range(len(one)), [short[m] for m in one.method], fontsize=8)
    bx.set(yscale="log", title="ε_θ = ε_r = 1")
    fig.tight_layout()
    fig.savefig(OUT / "tops_accuracy.png", dpi=120)


if __name__ == "__main__":
    main()
