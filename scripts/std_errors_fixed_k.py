"""Int-k OptStream standard errors, calibrated (issue 30): ``docs/results/std_errors_fixed_k.md``.

The bundled regional hierarchy (4 regions and the national total, kW per half-hour), January
2016, 28 days, α = 50, ``k=10`` (the paper's setting) with the L1 sampler and with equally
spaced samples, ε = 1 and 0.1, ``--seeds`` seeded releases each: per node, pooled over steps
and releases, the empirical RMSE of the released values against the real loads beside the
stated one (root mean square of ``dpstream.std_errors``). Target: ratio within 0.8-1.25.
CPU seconds of the release and of ``std_errors`` (one process, same run) are printed too.

Seeded releases are experiments (not private). Run: ``python scripts/std_errors_fixed_k.py
[--seeds 20] [--bootstrap 100]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

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


def markdown(rows: pd.DataFrame) -> str:
    head = [rows.index.name or ""] + [str(c) for c in rows.columns]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in rows.iterrows():
        out.append("| " + " | ".join([str(idx)] + [f"{v:,.3f}" for v in row]) + " |")
    return "\n".join(out)


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
    for sampling in ("equal", "l1"):
        for eps in (1.0, 0.1):
            rows, cpu_rel, cpu_se, how = table(eps, sampling, args.seeds, args.bootstrap)
            print(sampling, eps, rows, cpu_rel, cpu_se, flush=True)
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
        "## Reading",
        "",
        "The stated figure is the error of Algorithm 4's linear estimate (features included) "
        "under the published noise and the interpolation error the samples' variogram "
        "predicts for the published sample steps, with a parametric bootstrap where "
        "non-negativity binds. With the L1 sampler the sample steps are chosen where the "
        "interpolation error would be large (the SVT), so the realised interpolation error is "
        "smaller than the variogram's for the same steps taken blindly: the figure is then an "
        "upper one (ratio below 1). At ε = 0.1 non-negativity binds in most periods (noise "
        "larger than the loads): there the bootstrap carries the figure; without it "
        "(`--bootstrap 0`, 20 seeds) the linear figure overstated 1.2-2x with equally spaced "
        "samples (ratios 0.51-0.85) and 1.9-2.8x with the L1 sampler (0.36-0.53), while at "
        "ε = 1 it gave 0.93-0.99 (equal) and 0.66-0.78 (L1).",
        "",
    ]
    OUT.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
