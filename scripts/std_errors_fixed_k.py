"""Int-k OptStream standard errors, calibrated (issue 30): ``docs/results/std_errors_fixed_k.md``.

The bundled regional hierarchy (4 regions and the national total, kW per half-hour), January
2016, 28 days, α = 50, ``k=10`` (the paper's setting) with the L1 sampler and with equally
spaced samples, ε = 1 and 0.1, ``--seeds`` seeded releases each: per node, pooled over steps
and releases, the empirical RMSE of the released values against the real loads beside the
stated one (root mean square of ``dpstream.std_errors``). Target: ratio within 0.8-1.25.
CPU seconds of the release and of ``std_errors`` (one process, same run) are printed too.
A decomposition follows: the error of Algorithm 4's *linear* estimate split exactly into its
noise part and its interpolation part (the truth interpolated through the published sample
sets), each against the part of the stated variance it corresponds to.

Seeded releases are experiments (not private). Run: ``python scripts/std_errors_fixed_k.py
[--seeds 20] [--bootstrap 100]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from std_errors_scope import SCOPE, markdown  # scripts/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "std_errors_fixed_k.md"


def table(epsilon: float, sampling: str, seeds: int, boot: int):
    import dpstream

    tree = dpstream.regional_hierarchy()
    leaves = tree["national"]
    frame = dpstream.load_regional()[leaves].iloc[: 48 * 28]
    truth = frame.assign(national=frame.sum(axis=1))
    err = stated = 0.0
    cpu_rel = cpu_se = 0.0
    for seed in range(seeds):
        t0 = time.process_time()
        out = dpstream.release_optstream(
            frame, epsilon=epsilon, alpha=50, k=10, sampling=sampling, hierarchy=tree,
            seed=seed, ledger=False,
        )  # fmt: skip
        t1 = time.process_time()
        se = dpstream.std_errors(out, hierarchy=tree, n_bootstrap=boot, seed=seed)
        t2 = time.process_time()
        cpu_rel, cpu_se = cpu_rel + t1 - t0, cpu_se + t2 - t1
        err = err + ((out - truth[out.columns]) ** 2).mean()
        stated = stated + (se**2).mean()
    rows = pd.DataFrame(
        {"empirical RMSE (kW)": np.sqrt(err / seeds), "stated (kW)": np.sqrt(stated / seeds)}
    )
    rows["ratio"] = rows.iloc[:, 0] / rows.iloc[:, 1]
    rows.index.name = "node"
    return rows, cpu_rel / seeds, cpu_se / seeds, se.attrs["method"]


def decompose(epsilon: float, sampling: str, seeds: int) -> pd.DataFrame:
    """Per node, the linear estimate's error split into noise and interpolation, empirical
    (seeded releases against the real loads) and stated (the model's ``diag(K Σ Kᵀ)`` with Σ
    its noise part, then the rest): which term of the stated figure is off."""
    import dpstream
    from dpstream._std_errors import _hierarchy
    from dpstream._std_errors_fixed import (
        _fixed_covariance,
        _gls_operator,
        _level_variograms,
        _root_correlation,
    )
    from mechanisms.optstream._sampling import interpolation_matrix

    spec = dpstream.regional_hierarchy()
    frame = dpstream.load_regional()[spec["national"]].iloc[: 48 * 28]
    truth = frame.assign(national=frame.sum(axis=1))
    acc = {}
    for seed in range(seeds):
        out = dpstream.release_optstream(
            frame, epsilon=epsilon, alpha=50, k=10, sampling=sampling, hierarchy=spec,
            seed=seed, ledger=False,
        )  # fmt: skip
        tree = _hierarchy(out, spec)
        nodes = list(tree.nodes)
        levels = [np.array([tree.index(c) for c in lv]) for lv in tree.levels]
        level_of = np.empty(len(nodes), dtype=np.int64)
        for li, idx in enumerate(levels):
            level_of[idx] = li
        under = np.asarray(tree.matrix, dtype=np.float64)
        x_all = truth[nodes].to_numpy().T
        published = out.attrs["estimates"]
        gamma = _level_variograms(published, levels, 48)
        rho = _root_correlation(gamma, tree)
        lo = 0
        for period in published:
            masks = np.asarray(period["samples"], dtype=bool)
            r = masks.shape[1]
            x = x_all[:, lo : lo + r]
            hf, cov = _fixed_covariance(period, gamma[:, :r], rho, tree, levels, len(nodes))
            _, cov_noise = _fixed_covariance(period, None, rho, tree, levels, len(nodes))
            k = _gls_operator(under, hf, np.asarray(period["variances"]).reshape(-1))
            est = np.asarray(period["estimates"], dtype=np.float64)
            e_all = est - x @ hf.T
            e_int = np.zeros_like(est)
            for a in range(len(nodes)):
                m = interpolation_matrix(masks[level_of[a]][None])[0]
                e_int[a, :r] = m @ x[a] - x[a]
            parts = {
                "noise": (k @ (e_all - e_int).reshape(-1)).reshape(-1, r),
                "interpolation": (k @ e_int.reshape(-1)).reshape(-1, r),
            }
            v_all = ((k @ cov) * k).sum(axis=1).reshape(-1, r)
            v_noise = ((k @ cov_noise) * k).sum(axis=1).reshape(-1, r)
            stated = {"noise": v_noise, "interpolation": v_all - v_noise}
            for part in parts:
                acc[("empirical", part)] = acc.get(("empirical", part), 0) + (
                    parts[part] ** 2
                ).mean(axis=1)
                acc[("stated", part)] = acc.get(("stated", part), 0) + stated[part].mean(axis=1)
            lo += r
    rows = pd.DataFrame(index=pd.Index(nodes, name="node"))
    for part in ("noise", "interpolation"):
        emp = np.sqrt(acc[("empirical", part)])
        st = np.sqrt(np.maximum(acc[("stated", part)], 0.0))
        rows[f"{part}: empirical"] = emp / np.sqrt(len(published) * seeds)
        rows[f"{part}: stated"] = st / np.sqrt(len(published) * seeds)
        rows[f"{part}: ratio"] = emp / np.where(st > 0, st, np.nan)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--bootstrap", type=int, default=100)
    args = parser.parse_args()
    lines = [
        "# Stated standard errors of int-k OptStream releases (issue 30)",
        "",
        f"Written by `python scripts/std_errors_fixed_k.py --seeds {args.seeds} --bootstrap "
        f"{args.bootstrap}`. Regional hierarchy, January 2016, 28 days x 48 half-hours, α = "
        f"50 kW, k = 10, {args.seeds} seeded releases per row (experiments, not private). "
        "Empirical RMSE against the real loads / stated RMSE, per node pooled over steps and "
        "releases; target 0.8-1.25.",
        "",
    ]
    ranges = {}
    for sampling in ("equal", "l1"):
        for eps in (1.0, 0.1):
            rows, cpu_rel, cpu_se, how = table(eps, sampling, args.seeds, args.bootstrap)
            print(sampling, eps, rows, cpu_rel, cpu_se, flush=True)
            ranges[sampling, eps] = f"{rows['ratio'].min():.2f}-{rows['ratio'].max():.2f}"
            lines += [
                f"## sampling = {sampling!r}, ε = {eps:g}",
                "",
                markdown(rows),
                "",
                f"CPU per release {cpu_rel:.2f} s, per `std_errors` {cpu_se:.2f} s "
                f"(ratio {cpu_se / cpu_rel:.1f}). Method (last release): {how}",
                "",
            ]
    lines += [
        "## Decomposition of the linear figure",
        "",
        "Algorithm 4's linear estimate (non-negativity not applied) has the error "
        "K(e_noise + e_interpolation) exactly: the interpolation part is the truth "
        "interpolated through each period's published sample sets minus the truth, the noise "
        "part the rest of the measurement's error. Per node, the RMSE of each part over the "
        "same seeded releases (kW) against the stated part (K Σ Kᵀ with Σ's noise part, and "
        "the rest).",
        "",
    ]
    for sampling in ("equal", "l1"):
        for eps in (1.0, 0.1):
            rows = decompose(eps, sampling, args.seeds)
            print("decomposition", sampling, eps, rows, flush=True)
            lines += [f"### sampling = {sampling!r}, ε = {eps:g}", "", markdown(rows), ""]
    lines += [
        "## Reading",
        "",
        f"Empirical / stated, with the bootstrap where non-negativity binds: equally spaced "
        f"samples {ranges['equal', 1.0]} at ε = 1 and {ranges['equal', 0.1]} at ε = 0.1; the "
        f"L1 sampler {ranges['l1', 1.0]} and {ranges['l1', 0.1]} (target 0.8-1.25). The "
        "decomposition shows where the L1 figures' former overstatement (0.77-0.84 at ε = 1, "
        "0.64-0.72 at ε = 0.1) came from. Measured the same way before the change (6 seeds), "
        "the noise part was right (ratios 0.92-1.02) and the interpolation part stated 1.5-4x "
        "(ε = 1) and 12-33x (ε = 0.1) its realised size: each node's variogram was estimated "
        "per lag from the published samples (noise variance subtracted) and, because the L1 "
        "sampler's sample sets move from day to day and resolve most lags, "
        "`planner.variogram` took its empirical branch: each lag from a few dozen pairs, "
        "clipped at 0, then a running maximum over the lags, which keeps the largest noise "
        "excursion (at ε = 0.1 each pair's noise variance is 10²-10³ times the variogram). "
        "Equally spaced samples resolve a few lags only and took the random-walk branch (one "
        "sill). Now every sampler uses one random-walk variogram per node, its sill the ratio "
        "of all long-lag pairs' noise-corrected squares to their number, clipped once "
        "(`dpstream._std_errors_fixed._pooled_variogram`). The interpolation part is then "
        "about right at ε = 1 and still stated 2-5.5x at ε = 0.1, where it is at most 4 % of "
        "the variance: the linear figure follows the noise part there. What kept the L1 "
        "sampler at ε = 0.1 below 0.8 for one node (commercial 0.749, the rest 0.85-0.92, "
        "10 seeds, before this table) was the bootstrap of the periods holding a 0 (all of "
        "them at ε = 0.1): its draws centred on the released period as the truth. There the "
        "noise (sd about 70,000 kW at a sample) dwarfs the loads (4,000-9,000 kW), so the "
        "released period is mostly 0 with spikes; around a spike the draws are never clipped "
        "and state the full noise, where the real release, around a small truth, is clipped "
        "about half the time. With the true loads as the stand-in (an experiment, 3 seeds, 14 "
        "days) the L1 figures were 0.94-1.0. The bootstrap now centres on each leaf's linear "
        "estimate (unbiased) shrunk towards the leaf's mean over all periods to the truth's "
        "spread, which the estimates' spread minus their stated variance gives (constrained "
        "Bayes; `_bootstrap_bases`), and draws the noise as the release does (Laplace at the "
        "samples, interpolated; `_laplace_noise`). Centring on the unclipped linear estimate "
        "itself or on each period's own mean had been tried and was worse (both too noisy at "
        "ε = 0.1). The L1 sampler's dependence of the sample steps on the data (the SVT "
        "chooses them where the series turns) is not modelled.",
        "",
    ] + SCOPE
    OUT.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
