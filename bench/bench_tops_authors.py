"""Our ToPS against the authors' reference code on the bundled light-tailed stream (issue 23).

Data (``--stream``): the bundled household minutes (``dpstream.household_minutes_stream()``,
521,669 one-minute powers in kW, light-tailed, B = 36; r = n − m = 456,133 perturbed steps), or
``minutes``, 2^20 + m synthetic durations in whole minutes (⌊Exp(60)⌋ ≤ B = 1,440: the shape of
the flight durations of issue 23's "light-tailed flights" cell, which are not bundled). m =
65,536 prefix values for the threshold (the authors' default).

Methods, each run on the same stream with the same queries:

* ``ours``: :func:`mechanisms.tops_release` with its defaults (report-noisy-max θ on the
  grid B·j/1024 with ``threshold_score="auto"``: the paper's score on ``minutes``, the
  scale-free score with its guard on ``household``; θ lifted to the least predicted error,
  ``threshold_correction="mse"``; the shape rule, its statistic bought only when it resolves
  the error (session 9, issue 23 item 4); consistency, "recent" smoother, F = 16, c = 60);
* ``authors``: the authors' ToPS (``svt_hie`` of https://github.com/dp-cont/dp-cont, MIT,
  vendored verbatim in ``bench/peers/tops_authors``): ``NMMSE.obtain_ell`` (noisy max of
  m_θ-style counts minus their κθ on bins of width ``--step``; default B/1024, our grid's
  spacing; their own default ``s = 1`` is in their data's integer units) then
  ``GuessHierarchy.est_precise`` (their leaf size g from ``opt_g`` with their default
  r = 2^20 "max interested range", levels ⌊log_F(r/g)⌋ each at ε_r/levels, consistency, the
  "recent" smoother). Their noise is numpy's global legacy generator, seeded per run.

Metric (the authors' ``query_mse``): the mean squared error of range sums over ``--queries``
random ranges [i, j] of the perturbed steps per run (i ≤ j uniform, sorted), truth = the raw
values; the same ranges for both methods in a run. Ratio = our MSE / the authors' with a 95 %
bootstrap interval over runs (each run's query errors resampled as a block).

Run: ``python bench/bench_tops_authors.py [--runs 20] [--settings 1,1 0.05,0.05 ...]``;
prints the table and, with ``--out``, writes CSV and Markdown. Seeded: an experiment, not a
release.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import types
from pathlib import Path

import numpy as np

PEERS = Path(__file__).resolve().parent / "peers" / "tops_authors"
M = 65_536
SETTINGS = ((1.0, 1.0), (0.01, 0.05), (0.02, 0.05), (0.05, 0.05), (0.1, 0.05))


def _authors():
    if str(PEERS) not in sys.path:
        sys.path.insert(0, str(PEERS))
    from percentile_estimator.nm_mse import NMMSE
    from range_estimator.guess_hierarchy import GuessHierarchy
    from scipy import optimize

    class Guess(GuessHierarchy):
        def opt_g(self):
            # their SmoothHierarchy.opt_g, the same formula and solver, with two changes: x[0]
            # for x (the 1-element array scipy's fmin passes is no longer a scalar for
            # math.log under numpy 2), and +inf for x < 1 (at ε_r = 1 Nelder-Mead steps below
            # 0 from their start 256 and math.log raises: their code stops there)
            def f(x):
                x = float(np.asarray(x).ravel()[0])
                if x < 1.0:
                    return math.inf
                return (2 * (self.fanout - 1)
                        * (math.log(self.args.r / x) / math.log(self.fanout)) ** 3
                        / (self.args.range_epsilon**2) + x**2 / 36)  # fmt: skip

            g = int(optimize.fmin(f, 256, disp=False)[0])
            return self.fanout ** round(math.log(g, self.fanout))

    return NMMSE, Guess


def stream(name: str) -> tuple[np.ndarray, float, float]:
    """(values, B, the authors' step s): the bundled household minutes (kW, s = B/1024, our
    grid's spacing), or ``minutes``: m + 2^20 synthetic durations in whole minutes,
    ⌊Exp(mean 60)⌋ clipped to B = 1,440 (light-tailed, the shape of the flight durations the
    issue measured on; integer data, the authors' default s = 1 minute)."""
    if name == "minutes":
        rng = np.random.default_rng(2023)
        return np.minimum(np.floor(rng.exponential(60.0, M + (1 << 20))), 1440.0), 1440.0, 1.0
    import dpstream

    bound = float(dpstream.HOUSEHOLD_MINUTES_BOUND)
    return np.asarray(dpstream.household_minutes_stream(), dtype=np.float64), bound, bound / 1024


def authors_release(x, bound, eps_t, eps_r, step, seed):
    """The authors' ToPS on x (per-step estimates of the r perturbed steps, θ, g, levels)."""
    nmmse, guess = _authors()
    users = types.SimpleNamespace(data=np.asarray(x, dtype=np.float64), n=x.size, m=M,
                                  max_ell=bound)  # fmt: skip
    args = types.SimpleNamespace(
        epsilon=eps_t, range_epsilon=eps_r, m=M, s=step, g=0, r=1 << 20, hie_fanout=16,
        p=0.995,
    )  # fmt: skip
    np.random.seed(seed)  # noqa: NPY002 (their code draws from numpy's global generator)
    ell = nmmse(users, args).obtain_ell(args.p)
    hie = guess(users, args)
    est = np.zeros(x.size - M) if ell == 0 else hie.est_precise(ell)
    return np.asarray(est, dtype=np.float64), float(ell), int(hie.g), int(hie.num_levels)


def one_run(x, bound, eps_t, eps_r, step, queries, run):
    from mechanisms import tops_release

    r = x.size - M
    q = np.sort(np.random.default_rng([run, 23]).integers(0, r, size=(queries, 2)), axis=1)
    csum = np.concatenate(([0.0], np.cumsum(x[M:])))
    truth = csum[q[:, 1] + 1] - csum[q[:, 0]]
    ours = tops_release(x, bound=bound, epsilon_threshold=eps_t, epsilon_perturb=eps_r,
                        time_lag=M, seed=np.random.SeedSequence([run, 23, 1]))  # fmt: skip
    ans_ours = np.array([ours.range_sum(M + int(i), M + int(j)) for i, j in q])
    est, ell, g, levels = authors_release(x, bound, eps_t, eps_r, step, 10_000 + run)
    esum = np.concatenate(([0.0], np.cumsum(est)))
    ans_auth = esum[q[:, 1] + 1] - esum[q[:, 0]]
    return {
        "ours": (ans_ours - truth) ** 2,
        "authors": (ans_auth - truth) ** 2,
        "theta_ours": float(ours.threshold),
        "theta_authors": ell,
        "shape_ours": f"{ours.leaf_size}/{ours.levels}",
        "shape_authors": f"{g}/{levels}",
    }


def _interval(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[float, float]:
    """95 % bootstrap interval of mean(a)/mean(b), runs (rows) resampled as blocks."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.shape[0], (4000, a.shape[0]))
    ratio = a.mean(axis=1)[idx].mean(axis=1) / b.mean(axis=1)[idx].mean(axis=1)
    lo, hi = np.quantile(ratio, [0.025, 0.975])
    return float(lo), float(hi)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--step", type=float, default=None, help="the authors' s (B/1024)")
    parser.add_argument("--settings", nargs="*", default=None,
                        help="eps_theta,eps_r pairs (default: 1,1 and four more)")  # fmt: skip
    parser.add_argument("--out", default=None, help="stem of a CSV/Markdown to write")
    parser.add_argument("--stream", choices=("household", "minutes"), default="household")
    parser.add_argument("--update", action="store_true",
                        help="keep --out's rows of the settings not run (same runs)")  # fmt: skip
    args = parser.parse_args(argv)
    x, bound, default_step = stream(args.stream)
    step = args.step if args.step is not None else default_step
    settings = SETTINGS
    if args.settings:
        settings = tuple(tuple(float(v) for v in s.split(",")) for s in args.settings)
    print(f"n = {x.size:,}, m = {M:,}, r = {x.size - M:,}, B = {bound:g}, s = {step:.4g}, "
          f"runs = {args.runs}, queries = {args.queries}")  # fmt: skip
    rows = []
    kept = []
    if args.update and args.out and Path(args.out).with_suffix(".csv").exists():
        import pandas as pd

        old = pd.read_csv(Path(args.out).with_suffix(".csv")).to_dict("records")
        kept = [r for r in old if (r["eps_threshold"], r["eps_perturb"]) not in settings]
    start = time.perf_counter()
    for eps_t, eps_r in settings:
        runs = [one_run(x, bound, eps_t, eps_r, step, args.queries, k) for k in range(args.runs)]
        ours = np.array([r["ours"] for r in runs])
        auth = np.array([r["authors"] for r in runs])
        lo, hi = _interval(ours, auth, int(1000 * eps_t + eps_r))
        shapes = {}
        for r in runs:
            for key in ("shape_ours", "shape_authors"):
                shapes.setdefault(key, {}).setdefault(r[key], 0)
                shapes[key][r[key]] += 1
        rows.append({
            "eps_threshold": eps_t, "eps_perturb": eps_r, "runs": args.runs,
            "queries": args.queries, "mse_ours": float(ours.mean()),
            "mse_authors": float(auth.mean()), "ratio": float(ours.mean() / auth.mean()),
            "ratio_lo": lo, "ratio_hi": hi,
            "mean_theta_ours": float(np.mean([r["theta_ours"] for r in runs])),
            "mean_theta_authors": float(np.mean([r["theta_authors"] for r in runs])),
            "shapes_ours": ", ".join(f"{k}: {v}" for k, v in shapes["shape_ours"].items()),
            "shapes_authors": ", ".join(f"{k}: {v}" for k, v in shapes["shape_authors"].items()),
        })  # fmt: skip
        row = rows[-1]
        print(f"eps_theta={eps_t:g} eps_r={eps_r:g}: ours {row['mse_ours']:.4g}, authors "
              f"{row['mse_authors']:.4g}, ratio {row['ratio']:.3f} [{lo:.3f}, {hi:.3f}]; θ "
              f"{row['mean_theta_ours']:.3g} vs {row['mean_theta_authors']:.3g}; shapes "
              f"{row['shapes_ours']} vs {row['shapes_authors']} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
        if args.out:
            order = {s: i for i, s in enumerate((*SETTINGS, *settings))}
            merged = sorted(kept + rows, key=lambda r: order.get(
                (r["eps_threshold"], r["eps_perturb"]), len(order)))  # fmt: skip
            _write(merged, Path(args.out), args, step)
    return rows


def _write(rows: list[dict], stem: Path, args, step: float) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame.to_csv(stem.with_suffix(".csv"), index=False, float_format="%.6g")
    lines = [
        f"# Our ToPS against the authors' reference code, stream `{args.stream}` (issue 23)",
        "",
        f"`python bench/bench_tops_authors.py --stream {args.stream} --runs {args.runs} "
        f"--queries {args.queries}` (the authors' step s = {step:.4g}). m = 65,536; the "
        "authors' code is vendored verbatim from github.com/dp-cont/dp-cont (MIT) in "
        "`bench/peers/tops_authors`. MSE of range sums over random ranges, the same ranges "
        "for both in a run; ratio = ours/authors with a 95 % bootstrap interval over runs. "
        "Shapes are g/L (leaf size / levels): runs.",
        "",
        "| ε_θ | ε_r | MSE ours | MSE authors | ours/authors [95 % CI] | mean θ ours | mean θ "
        "authors | shapes ours | shapes authors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['eps_threshold']:g} | {r['eps_perturb']:g} | {r['mse_ours']:.4g} | "
            f"{r['mse_authors']:.4g} | {r['ratio']:.2f} [{r['ratio_lo']:.2f}, "
            f"{r['ratio_hi']:.2f}] | {r['mean_theta_ours']:.3g} | "
            f"{r['mean_theta_authors']:.3g} | {r['shapes_ours']} | {r['shapes_authors']} |"
        )
    lines.append("")
    stem.with_suffix(".md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
