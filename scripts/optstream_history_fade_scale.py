"""Issue 22.1 diagnostic at many nodes: the history fade from rank-r factors (``"lowrank"``)
against the (L, N) shares (``"periods"``), where r is far below the number of nodes.

The diagnostic cells of ``scripts/optstream_history_fade.py`` have 5 nodes: any r ≥ 5 holds
their shares exactly. Here the synthetic feeders of ``bench/bench_hierarchy.Feeders``
(SimBench's 44 profiles, scaled, shifted, 5 % noise per reading) in the tree of
``bench/bench_scale.tree`` (national → 10 regions → substations of 100 → feeders), a history
of L = 28 days (days 0 .. 27 of the profiles), then:

1. ``fade``: the history block's part of every node's variogram sums after n = 1 .. L − 1
   released periods (:meth:`planner._stream_planner._HistoryMoments.part`), relative to
   ``"periods"``: the median, the 99th percentile and the largest |part / part_periods − 1|
   over nodes, lags ≥ 1 and n, for each rank (0: the mean rate, session 11's fade);
2. ``release``: ``release_optstream(k="auto", history=...)`` of ``--days`` days of the
   feeders, mean absolute error of the leaves and of the national total, paired difference
   against ``"periods"`` (% of its mean) over ``--trials`` seeds.

Run: ``python scripts/optstream_history_fade_scale.py --feeders 2000 --days 8 --trials 3
--ranks 0 2 4 8``. Seeded runs: an experiment.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import planner._stream_planner as sp
from planner._roughness import period_roughness

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
_SPEC = importlib.util.spec_from_file_location("bench_scale", BENCH / "bench_scale.py")
bs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bs)
W = 48
L = sp.LOOKBACK


def _data(feeders: int, days: int):
    from bench_hierarchy import Feeders

    from postproc import Hierarchy

    ch = bs.tree(feeders)
    tree = Hierarchy(children=ch)
    gen = Feeders(np.random.default_rng(0), feeders)
    col = {name: int(name[-6:]) for name in tree.leaves}
    order = np.array([col[x] for x in tree.leaves])
    values = np.concatenate([gen.day(d)[order] for d in range(L + days)], axis=1)  # (leaves, T)
    idx = pd.date_range("2016-01-01", periods=values.shape[1], freq="30min")
    frame = pd.DataFrame(values.T, index=idx, columns=list(tree.leaves))
    return ch, tree, frame


def fade(tree, history: pd.DataFrame, ranks: list[int]) -> list[dict]:
    """Part 1: the faded history block per rank against the shares."""
    full = np.asarray(tree.sparse_matrix @ history.to_numpy().T)  # (N, L w)
    n_nodes = full.shape[0]
    moments = {r: sp._HistoryMoments.empty("lowrank", n_nodes, W) for r in ranks}
    periods = sp._HistoryMoments.empty("periods", n_nodes, W)
    s0 = None
    for i in range(L):
        v = full[:, i * W : (i + 1) * W]
        r = period_roughness(v, np.zeros_like(v), np.ones(v.shape, dtype=bool))
        s0 = r if s0 is None else s0 + r
        periods = periods.add(r, i)
        moments = {k: mo.add(r, i) for k, mo in moments.items()}
    moments = {k: mo.complete(k) for k, mo in moments.items()}
    rows = []
    for k, mo in moments.items():
        errs = []
        for n in range(1, L):
            want = periods.part(s0, n).squares[:, 1:]
            got = mo.part(s0, n).squares[:, 1:]
            ok = want > 0
            errs.append(np.abs(got[ok] / want[ok] - 1))
        e = np.concatenate(errs)
        rows.append({"rank": k, "median": np.median(e), "p99": np.quantile(e, 0.99),
                     "max": e.max(), "bytes_per_node": k * 8})  # fmt: skip
    return rows


def release(ch, tree, frame, days: int, trials: int, ranks: list[int]) -> pd.DataFrame:
    """Part 2: the default release with history, each rank and the shares, paired seeds."""
    import dpstream

    history, current = frame.iloc[: L * W], frame.iloc[L * W : (L + days) * W]
    root = next(iter(ch))
    truth_root = current.sum(axis=1)
    states = ["periods", *[f"rank{r}" for r in ranks]]
    rows = []
    for trial in range(trials):
        for name in states:
            sp.HISTORY_FADE = "periods" if name == "periods" else "lowrank"
            if name != "periods":
                sp.HISTORY_RANK = int(name[4:])
            out = dpstream.release_optstream(
                current, epsilon=1.0, alpha=50.0, hierarchy=ch, history=history,
                seed=1000 + trial, ledger=False,
            )  # fmt: skip
            leaves = float((out[current.columns] - current).abs().mean().mean())
            top = float((out[root] - truth_root).abs().mean())
            rows.append({"trial": trial, "state": name, "leaves": leaves, "root": top})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeders", type=int, default=2000)
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--ranks", nargs="+", type=int, default=[0, 2, 4, 8])
    parser.add_argument("--parts", nargs="+", choices=["fade", "release"],
                        default=["fade", "release"])  # fmt: skip
    parser.add_argument("--csv", default=None, help="write the per-trial errors here")
    args = parser.parse_args()
    ch, tree, frame = _data(args.feeders, args.days)
    print(f"{len(tree.nodes)} nodes, {args.feeders} feeders, history {L} days")
    default = (sp.HISTORY_FADE, sp.HISTORY_RANK)
    if "fade" in args.parts:
        for row in fade(tree, frame.iloc[: L * W], args.ranks):
            print("fade rank {rank}: |part/part_periods - 1| median {median:.2e}, 99 % "
                  "{p99:.2e}, max {max:.2e} ({bytes_per_node} bytes per node; periods: "
                  f"{L * 8})".format(**row))  # fmt: skip
    if "release" in args.parts:
        d = release(ch, tree, frame, args.days, args.trials, args.ranks)
        sp.HISTORY_FADE, sp.HISTORY_RANK = default
        if args.csv:
            d.to_csv(args.csv, index=False)
        for level in ("leaves", "root"):
            p = d.pivot_table(index="trial", columns="state", values=level)
            for name in [s for s in p.columns if s != "periods"]:
                diff = (p[name] - p["periods"]) / p["periods"].mean() * 100
                se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
                print(f"release {level:6s} {name} - periods: {diff.mean():+.3f} ± {se:.3f} % "
                      f"({len(diff)} pairs)")  # fmt: skip


if __name__ == "__main__":
    main()
