"""Accuracy of OptStream on the bundled regional data: the protocol of [FV19] Figs. 3, 8, 10.

For February, June and October 2016 (SimBench regions of ``dpstream.load_regional()``; each
region released as its own stream, one level, w = 48, k = 10), the mean L1 error per value
``|x̂ − x|`` averaged over the four regions and over trials, for

* ε ∈ {1, 0.1, 0.01} at α = 1 kW (Fig. 3, Fig. 8), and α ∈ {10, 50, 100} kW at ε = 1
  (Fig. 10; k = 5 for α = 100 as in §6.3);
* OptStream with the L1 sampler (``LS``) and equally spaced samples (``ES``), both through
  ``dpstream.release_optstream``; ``LS-aligned`` is the paper's per-period split (ε/3 each,
  only windows aligned with the periods are covered, see ``mechanisms._optstream``);
* the ablation of §6.2: P (Laplace on every value), P+O, P+S (L1 sampler, no post-processing),
  P+S+O (= LS), the budget split equally among the active steps;
* the baselines Laplace, DFT and PeGaSus of ``dpstream`` (helper pipelines, same unit);
* ``floor``: equally spaced k = 10 interpolation of the *true* values (no noise): the
  reconstruction bias OptStream cannot go below without more samples.

Run: ``python scripts/optstream_accuracy.py [--trials 5]``; prints a table and writes
``docs/results/optstream_accuracy.csv``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream
from mechanisms._optstream import optstream_estimates
from mechanisms._sampling import sample_equal
from postproc import FeatureSet, Hierarchy, project_consistent

REGIONS = ["rural", "semiurban", "urban", "commercial"]
MONTHS = {"Feb": 2, "Jun": 6, "Oct": 10}
SETTINGS = [(1.0, 1.0, 10), (0.1, 1.0, 10), (0.01, 1.0, 10), (1.0, 10.0, 10), (1.0, 50.0, 10)]
SETTINGS += [(1.0, 100.0, 5)]
W = 48


def _ablation(frame: pd.DataFrame, *, eps, alpha, k, steps, seed) -> pd.DataFrame:
    """P / P+O / P+S through the mechanism layer (one level, the regions)."""
    x = frame.to_numpy().reshape(-1, W, len(REGIONS)).transpose(0, 2, 1)
    fs = FeatureSet.default(W)
    sampling = "l1" if "S" in steps else "equal"
    kk = k if "S" in steps else W
    feats = fs.partitions if "O" in steps else [fs.partitions[0]]
    shares = (1.0 if "S" in steps else 0.0, 1.0, 1.0 if "O" in steps else 0.0)
    est = optstream_estimates(
        x,
        epsilon=eps,
        k=kk,
        alpha=alpha,
        sampling=sampling,
        features=feats,
        shares=shares,
        windows="aligned",
        seed=seed,
    )
    if "O" in steps:
        vals = np.stack(
            [
                project_consistent(
                    est.estimates[:, j : j + 1], hierarchy=Hierarchy.single(n), features=fs
                ).values[:, 0]
                for j, n in enumerate(REGIONS)
            ],
            axis=1,
        )
    else:
        vals = np.maximum(est.estimates[:, :, :W], 0.0)
    return pd.DataFrame(vals.transpose(0, 2, 1).reshape(-1, len(REGIONS)), columns=REGIONS)


def _floor(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    x = frame.to_numpy().reshape(-1, W, len(REGIONS))
    s = sample_equal(W, k)
    t = np.arange(W)
    rec = np.stack(
        [[np.interp(t, s, x[b, s, a]) for a in range(x.shape[2])] for b in range(x.shape[0])]
    )
    return pd.DataFrame(rec.transpose(0, 2, 1).reshape(-1, len(REGIONS)), columns=REGIONS)


def methods(eps, alpha, k):
    def opt(sampling):
        return lambda f, s: dpstream.release_optstream(
            f, epsilon=eps, k=k, alpha=alpha, sampling=sampling, seed=s
        )

    out = {
        "LS": opt("l1"),
        "ES": opt("equal"),
        "LS-aligned": lambda f, s: _ablation(f, eps=eps, alpha=alpha, k=k, steps="PSO", seed=s),
        "P": lambda f, s: _ablation(f, eps=eps, alpha=alpha, k=k, steps="P", seed=s),
        "P+O": lambda f, s: _ablation(f, eps=eps, alpha=alpha, k=k, steps="PO", seed=s),
        "P+S": lambda f, s: _ablation(f, eps=eps, alpha=alpha, k=k, steps="PS", seed=s),
        "floor": lambda f, s: _floor(f, k),
    }
    for name in ("laplace", "dft", "pegasus"):
        fn = getattr(dpstream, f"release_{name}", None)
        if fn is None:
            continue
        extra = {"k": k} if name == "dft" else {}
        out[name.capitalize() if name != "dft" else "DFT"] = lambda f, s, fn=fn, extra=extra: fn(
            f, epsilon=eps, alpha=alpha, seed=s, **extra
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", default="docs/results/optstream_accuracy.csv")
    args = parser.parse_args()
    data = dpstream.load_regional()[REGIONS]
    rows = []
    start = time.perf_counter()
    for month, m in MONTHS.items():
        frame = data[data.index.month == m]
        truth = frame.to_numpy()
        for eps, alpha, k in SETTINGS:
            for name, fn in methods(eps, alpha, k).items():
                trials = 1 if name == "floor" else args.trials
                errs = []
                for t in range(trials):
                    out = fn(frame, 1000 + t)
                    errs.append(np.abs(np.asarray(out[REGIONS], dtype=float) - truth).mean())
                rows.append(
                    {
                        "month": month,
                        "epsilon": eps,
                        "alpha": alpha,
                        "k": k,
                        "method": name,
                        "l1": float(np.mean(errs)),
                        "sd": float(np.std(errs)),
                        "trials": trials,
                    }
                )
    table = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    wide = table.pivot_table(index=["epsilon", "alpha", "month"], columns="method", values="l1")
    order = [
        c
        for c in ["LS", "ES", "LS-aligned", "P", "P+O", "P+S", "Laplace", "DFT", "Pegasus", "floor"]
        if c in wide.columns
    ]
    wide = wide[order]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(wide.round(1))
        best = wide[["LS", "ES"]].min(axis=1)
        ratio = pd.DataFrame({"Laplace/best-OptStream": wide["Laplace"] / best})
        if "DFT" in wide:
            ratio["DFT/best-OptStream"] = wide["DFT"] / best
        print(ratio.round(2))
    print(f"{args.trials} trials per cell, {time.perf_counter() - start:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
