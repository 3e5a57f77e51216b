"""OptStream accuracy on the bundled regional hierarchy: the protocol of [FV19] Figs. 3, 4, 8, 10.

Data: ``dpstream.load_regional()`` as the hierarchy ``national -> 4 regions`` of
``dpstream.regional_hierarchy()`` ([FV19] §6.1.2: one problem per period over every node, ε/h
per level, h = 2), February, June and October 2016, w = 48. For each setting the mean L1 error
per value ``|x̂ − x|`` is averaged over the nodes of a level (``regional``: the 4 regions;
``national``) and over ``--trials`` independent trials (30 by default, as [FV19]):

* ε ∈ {1, 0.1, 0.01} at α = 1 kW (Figs. 3, 4, 8) and α ∈ {10, 50, 100} kW at ε = 1 (Fig. 10;
  k = 5 at α = 100 as [FV19] §6.3, else k = 10). Only α/ε matters: (ε, α) = (0.1, 1) and
  (1, 10) are the same experiment (different draws);
* ``LS`` / ``ES``: ``dpstream.release_optstream`` defaults (L1 sampler / equally spaced, k,
  equal budget shares, inverse-variance weights with the interpolation-bias term);
  ``LS-paper`` / ``ES-paper``: the paper's weights 1/m_i on the same draws; ``ES-noise``:
  inverse noise variances only; ``LS-aligned``: the paper's per-period split ε/3 each
  (covers only windows aligned with the periods); ``LS-raw`` / ``ES-raw``: the same draws
  before Algorithm 4 (interpolated samples truncated at 0);
* the ablation of §6.2 (L1 sampler as in Fig. 8, budget split equally among the active
  steps): ``P`` (Laplace on every value, no post-processing), ``P+O`` (and ``P+O-raw``, its
  own input), ``P+S``, ``P+S+O`` (= ``LS``);
* ``ES-tuned`` / ``LS-tuned``: k, the feature share o (and θ for LS) chosen per setting on
  *January* (held out; in a deployment: last year's public data), then run as above;
* the baselines ``Laplace``, ``DFT`` (k as OptStream) and ``PeGaSus`` of ``dpstream``
  (``release_*``, ε/h per level); ``floor``: equally spaced interpolation of the true values
  (no noise), the bias OptStream cannot go below with k samples.

Also measured on January: PeGaSus's sensitivity to its threshold and budget split.

Run (niced, one BLAS thread): ``python scripts/optstream_accuracy.py [--trials 30]``; writes
``docs/results/optstream_accuracy.csv``, ``optstream_tuning.csv``, ``optstream_accuracy.md``
and the figures ``optstream_fig3.png`` (ε), ``optstream_fig8.png`` (ablation),
``optstream_fig10.png`` (α).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # small dense solves: threads only contend

import argparse  # noqa: E402
import contextlib  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import dpstream  # noqa: E402
import mechanisms.optstream._estimates as mo  # noqa: E402
from dpstream.pipelines._optstream_pipeline import _post_process  # noqa: E402
from mechanisms import bit_source  # noqa: E402
from mechanisms.optstream._estimates import optstream_estimates  # noqa: E402
from mechanisms.optstream._sampling import (  # noqa: E402
    l1_score,
    sample_equal,  # noqa: E402
    svt_noises,
)
from postproc import FeatureSet, Hierarchy  # noqa: E402

W = 48
HIER = Hierarchy(children=dpstream.regional_hierarchy())
NODES = HIER.nodes
LEVELS = [[HIER.index(n) for n in level] for level in HIER.levels]
REGIONS = [n for n in NODES if n != "national"]
MONTHS = {"Feb": 2, "Jun": 6, "Oct": 10}
TUNE_MONTH = 1
SETTINGS = [(1.0, 1.0, 10), (0.1, 1.0, 10), (0.01, 1.0, 10), (1.0, 10.0, 10), (1.0, 50.0, 10)]
SETTINGS += [(1.0, 100.0, 5)]
FS = FeatureSet.default(W)
SINGLE = FeatureSet.from_breaks(W, [])
K_GRID = (4, 6, 8, 12, 16, 24, 32, 48)
O_GRID = (0.0, 0.25, 1.0)
THETA_GRID = (None, 3e3, 1e4, 3e4)


def month_periods(data: pd.DataFrame, month: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The leaves' frame of one month and every node's periods (B, N, W)."""
    rows = data[data.index.month == month]
    x = rows[list(NODES)].to_numpy()
    return rows[REGIONS], x.reshape(-1, W, len(NODES)).transpose(0, 2, 1)


def level_errors(out: np.ndarray, x: np.ndarray) -> dict[str, float]:
    """Mean |x̂ − x| per value over the regions and for the national node."""
    err = np.abs(np.asarray(out) - x).mean(axis=(0, 2))  # per node
    return {"regional": float(err[1:].mean()), "national": float(err[0])}


def optstream_runs(x, *, eps, alpha, k, sampling, shares, features, theta, windows, seed, ways):
    """One draw of the measurements; Algorithm 4 with each weighting in ``ways`` (+ raw)."""
    est = optstream_estimates(
        x,
        epsilon=eps,
        k=k,
        alpha=alpha,
        sampling=sampling,
        theta=theta,
        features=features.partitions,
        levels=LEVELS,
        window=W,
        windows=windows,
        shares=shares,
        seed=seed,
    )
    out = {"raw": np.maximum(est.estimates[:, :, :W], 0.0)}
    for way in ways:
        out[way] = _post_process(est, HIER, NODES, features, LEVELS, way)
    return out


@contextlib.contextmanager
def theorem_9_sensitivity():
    """Calibrate the feature queries with [FV19] Theorem 9's sensitivity α (NOT private:
    the correct one is wα). A diagnostic of how much of the paper's gain it explains."""
    original = mo.feature_noise
    mo.feature_noise = lambda *, window, alpha, epsilon, n_coords: original(
        window=1, alpha=alpha, epsilon=epsilon, n_coords=1
    )
    try:
        yield
    finally:
        mo.feature_noise = original


def floor(x: np.ndarray, k: int) -> np.ndarray:
    s, t = sample_equal(W, k), np.arange(W)
    return np.apply_along_axis(lambda row: np.interp(t, s, row[s]), 2, x)


def tune(x, eps, alpha, trials, base_seed):
    """Choose (k, o) for ES and (k, o, θ) for LS on the held-out month (mean regional+national)."""
    best = {}
    for sampling in ("equal", "l1"):
        grid = (
            itertools.product(K_GRID, O_GRID, [None])
            if sampling == "equal"
            else itertools.product((8, 12, 16, 24), (0.25, 1.0), THETA_GRID)
        )
        scores = []
        for k, o, theta in grid:
            feats = FS if o > 0 else SINGLE
            shares = (1.0 if sampling == "l1" else 0.0, 1.0, o)
            errs = []
            for t in range(trials):
                run = optstream_runs(
                    x, eps=eps, alpha=alpha, k=k, sampling=sampling, shares=shares,
                    features=feats, theta=theta, windows="any", seed=base_seed + t,
                    ways=("variance",),
                )  # fmt: skip
                e = level_errors(run["variance"], x)
                errs.append((e["regional"] + e["national"]) / 2)
            scores.append((float(np.mean(errs)), k, o, theta))
        best[sampling] = min(scores, key=lambda s: s[0])
    return best


def pegasus_sweep(frame, x, eps, alpha, seed):
    rows = []
    for share, mult in itertools.product((0.5, 0.8, 0.9), (1.0, 5.0, 25.0)):
        eps_g = (eps / 2) * (1 - share)
        out = dpstream.release_pegasus(
            frame, epsilon=eps, hierarchy=dpstream.regional_hierarchy(), alpha=alpha, seed=seed,
            perturb_share=share, threshold=mult * W * alpha / eps_g,
        )  # fmt: skip
        e = level_errors(out[list(NODES)].to_numpy().reshape(-1, W, 5).transpose(0, 2, 1), x)
        rows.append({"perturb_share": share, "theta_x_w_alpha_over_eps_g": mult, **e})
    return rows


def run_setting(frame, x, eps, alpha, k, tuned, trials, seed0):
    """Every method of one (month, ε, α): {method: [per-trial level errors]}."""
    res: dict[str, list[dict[str, float]]] = {}

    def add(name, out):
        res.setdefault(name, []).append(level_errors(out, x))

    hier = dpstream.regional_hierarchy()
    (_, k_es, o_es, _), (_, k_ls, o_ls, th_ls) = tuned["equal"], tuned["l1"]
    for t in range(trials):
        s = seed0 + t

        def run(sampling, kk, shares, feats, windows, ways, theta=None, seed=s):
            return optstream_runs(
                x, eps=eps, alpha=alpha, k=kk, sampling=sampling, shares=shares,
                features=feats, theta=theta, windows=windows, seed=seed, ways=ways,
            )  # fmt: skip

        ls = run("l1", k, None, FS, "any", ("variance", "paper"))
        add("LS", ls["variance"]), add("LS-paper", ls["paper"]), add("LS-raw", ls["raw"])
        add("P+S+O", ls["variance"])
        es = run("equal", k, None, FS, "any", ("variance", "paper", "noise"))
        add("ES", es["variance"]), add("ES-paper", es["paper"]), add("ES-noise", es["noise"])
        add("ES-raw", es["raw"])
        add("LS-aligned", run("l1", k, None, FS, "aligned", ("variance",))["variance"])
        add("P", run("equal", W, (0, 1, 0), SINGLE, "aligned", ())["raw"])
        po = run("equal", W, (0, 1, 1), FS, "aligned", ("variance",))
        add("P+O", po["variance"]), add("P+O-raw", po["raw"])
        add("P+S", run("l1", k, (1, 1, 0), SINGLE, "any", ())["raw"])
        feats = FS if o_es else SINGLE
        add("ES-tuned", run("equal", k_es, (0, 1, o_es), feats, "any", ("variance",))["variance"])
        lst = run("l1", k_ls, (1, 1, o_ls), FS, "any", ("variance",), theta=th_ls)
        add("LS-tuned", lst["variance"])
        with theorem_9_sensitivity():  # the paper as published: NOT private
            add("ES-thm9", run("equal", k, None, FS, "aligned", ("paper",))["paper"])
            add("LS-thm9", run("l1", k, None, FS, "aligned", ("paper",))["paper"])
        for name, fn, extra in (
            ("Laplace", dpstream.release_laplace, {}),
            ("DFT", dpstream.release_dft, {"k": k}),
            ("PeGaSus", dpstream.release_pegasus, {}),
        ):
            out = fn(frame, epsilon=eps, hierarchy=hier, alpha=alpha, seed=s, **extra)
            add(name, out[list(NODES)].to_numpy().reshape(-1, W, 5).transpose(0, 2, 1))
    res["floor"] = [level_errors(floor(x, k), x)]
    return res


def figure(table: pd.DataFrame, rows, methods, xcol, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), sharey="row")
    for i, level in enumerate(("regional", "national")):
        for j, month in enumerate(MONTHS):
            ax = axes[i, j]
            sub = table[(table.month == month) & (table.level == level)]
            for m, method in enumerate(methods):
                vals = [sub[(sub.method == method) & sub.setting.eq(r)].l1.mean() for r in rows]
                pos = np.arange(len(rows)) + (m - len(methods) / 2 + 0.5) * 0.8 / len(methods)
                ax.bar(pos, np.log10(vals), width=0.8 / len(methods), label=method)
            ax.set_xticks(np.arange(len(rows)), rows)
            ax.set_title(f"{month}, {level}")
            if j == 0:
                ax.set_ylabel("log10 mean L1 error (kW)")
            ax.set_xlabel(xcol)
    axes[0, 0].legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _segment_costs(xv: np.ndarray) -> np.ndarray:
    """L1 cost of interpolating every segment [a, b] of one period (n nodes summed)."""
    cost = np.zeros((W, W))
    for a in range(W - 1):
        for b in range(a + 1, W):
            lam = (np.arange(a, b + 1) - a) / (b - a)
            line = xv[:, a : a + 1] + lam * (xv[:, b : b + 1] - xv[:, a : a + 1])
            cost[a, b] = np.abs(line - xv[:, a : b + 1]).sum()
    return cost


def _best_placement(xv: np.ndarray, k: int) -> float:
    """Smallest L1 interpolation error with k samples, first and last step sampled ([FV19]
    Eq. 4 solved exactly by dynamic programming, noise-free)."""
    cost = _segment_costs(xv)
    best = np.full((k + 1, W), np.inf)
    best[1, 0] = 0.0
    for j in range(2, k + 1):
        for b in range(1, W):
            best[j, b] = np.min(best[j - 1, :b] + cost[:b, b])
    return float(best[k, W - 1])


def diagnostics(x: np.ndarray, k: int = 10) -> pd.DataFrame:
    """Why the L1 sampler loses (February, k = 10): noise-free placements and SVT noise."""
    rows = []
    for level, nodes in (("regional", LEVELS[1]), ("national", LEVELS[0])):
        xl, n = x[:, nodes], len(nodes) * W
        equal = np.abs(floor(xl, k) - xl).sum(axis=(1, 2)).mean() / n
        oracle = np.mean([_best_placement(p, k) for p in xl]) / n
        greedy = {}
        for theta in (1e3, 3e3, 1e4, 3e4, 1e5):  # Algorithm 3 without noise (α/ε -> 0)
            mask = mo.sample_l1(xl, k=k, epsilon=1e9, alpha=1e-9, theta=theta,
                                bits=bit_source(0), window=W)  # fmt: skip
            rec = mo.reconstruct(mask, xl.transpose(0, 2, 1)[mask].reshape(len(xl), -1,
                                 len(nodes)).transpose(0, 2, 1))  # fmt: skip
            greedy[theta] = np.abs(rec - xl).mean()
        theta, g = min(greedy.items(), key=lambda kv: kv[1])
        tp = np.zeros(len(xl), dtype=np.int64)
        score = float(np.median(l1_score(xl, tp, W // k)))  # a segment of w/k steps
        row = {"level": level, "equal k=10": equal, "best placement (Eq. 4)": oracle,
               "Alg. 3 noise-free, best θ": g, "its θ": theta,
               "median score of a w/k segment": score}  # fmt: skip
        for ae in (1.0, 10.0, 100.0):  # LS default split: ε_s = ε/(6h), h = 2
            _, mu = svt_noises(w=W, k=k, epsilon=1.0 / 12, alpha=ae)
            row[f"SVT query noise b_μ, α/ε={ae:g}"] = mu.scale
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame, index: bool = True) -> str:
    """A pipe table (no tabulate dependency)."""
    frame = df.reset_index() if index else df
    head = [str(c) for c in frame.columns]
    body = [["" if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v) for v in row]
            for row in frame.itertuples(index=False)]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def report(table, tuning, pegasus, diag, path, trials, secs):
    mean = table.pivot_table(index=["alpha/eps", "k", "level"], columns="method", values="l1")
    lines = [
        "# OptStream accuracy on the regional hierarchy (generated by "
        "`scripts/optstream_accuracy.py`)",
        "",
        f"{trials} trials per cell, months Feb/Jun/Oct 2016 averaged, national -> 4 regions, "
        f"ε/2 per level, w = 48; {secs / 60:.1f} min. Mean L1 error per value (kW).",
        "",
    ]
    cols = ["LS", "ES", "ES-tuned", "LS-tuned", "Laplace", "DFT", "PeGaSus", "floor"]
    lines.append(markdown(mean[cols].round(0)))
    lines += ["", "## Ratios (baseline error / OptStream error; > 1: OptStream better)", ""]
    rat = pd.DataFrame(index=mean.index)
    for opt in ("LS", "ES", "ES-tuned"):
        for base in ("Laplace", "DFT", "PeGaSus"):
            rat[f"{base}/{opt}"] = mean[base] / mean[opt]
    lines.append(markdown(rat.round(2)))
    lines += ["", "## Ablation ([FV19] Fig. 8) and weights", ""]
    abl = ["P", "P+O-raw", "P+O", "P+S", "P+S+O", "LS-raw", "LS-paper", "LS-aligned"]
    abl += ["ES-raw", "ES-noise", "ES-paper", "ES", "ES-thm9", "LS-thm9"]
    lines.append(markdown(mean[abl].round(0)))
    lines += ["", "## Parameters tuned on January (held out)", "", markdown(tuning, index=False)]
    lines += ["", "## PeGaSus: threshold and split (January, α/ε = 50)", ""]
    lines.append(markdown(pegasus.round({"regional": 0, "national": 0}), index=False))
    lines += ["", "## The L1 sampler (February, k = 10, kW per value; scores in kW·steps)", ""]
    lines.append(markdown(diag.round(1).set_index("level").T))
    Path(path).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--tune-trials", type=int, default=3)
    parser.add_argument("--out-dir", default="docs/results")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = dpstream.load_regional()
    start = time.perf_counter()
    jan_frame, jan = month_periods(data, TUNE_MONTH)
    tuned, tune_rows = {}, []
    for i, (eps, alpha, _k) in enumerate(SETTINGS):
        tuned[(eps, alpha)] = tune(jan, eps, alpha, args.tune_trials, 10_000 + 100 * i)
        for sampling, (score, k, o, theta) in tuned[(eps, alpha)].items():
            tune_rows.append(
                {
                    "epsilon": eps,
                    "alpha": alpha,
                    "sampling": sampling,
                    "k": k,
                    "o_share": o,
                    "theta": theta,
                    "jan_l1": round(score, 1),
                }  # fmt: skip
            )
        print(f"tuned ε={eps} α={alpha}: {tuned[(eps, alpha)]}", flush=True)
    tuning = pd.DataFrame(tune_rows)
    pegasus = pd.DataFrame(pegasus_sweep(jan_frame, jan, 1.0, 50.0, 7))
    rows = []
    for mi, (month, m) in enumerate(MONTHS.items()):
        frame, x = month_periods(data, m)
        for si, (eps, alpha, k) in enumerate(SETTINGS):
            seed0 = 1_000_000 * (mi + 1) + 1_000 * si
            res = run_setting(frame, x, eps, alpha, k, tuned[(eps, alpha)], args.trials, seed0)
            for method, trials in res.items():
                for level in ("regional", "national"):
                    vals = [t[level] for t in trials]
                    rows.append(
                        {
                            "month": month,
                            "epsilon": eps,
                            "alpha": alpha,
                            "k": k,
                            "method": method,
                            "level": level,
                            "l1": float(np.mean(vals)),
                            "sd": float(np.std(vals)),
                            "trials": len(vals),
                        }  # fmt: skip
                    )
            print(f"{month} ε={eps} α={alpha}: {time.perf_counter() - start:.0f} s", flush=True)
    table = pd.DataFrame(rows)
    table["alpha/eps"] = table.alpha / table.epsilon
    table.to_csv(out_dir / "optstream_accuracy.csv", index=False)
    table["setting"] = [f"ε={e:g}" if a == 1 else f"α={a:g}" for e, a in
                        zip(table.epsilon, table.alpha, strict=True)]  # fmt: skip
    tuning.to_csv(out_dir / "optstream_tuning.csv", index=False)
    secs = time.perf_counter() - start
    diag = diagnostics(month_periods(data, 2)[1])
    report(table, tuning, pegasus, diag, out_dir / "optstream_accuracy.md", args.trials, secs)
    eps_rows = ["ε=1", "ε=0.1", "ε=0.01"]
    main_methods = ["Laplace", "DFT", "PeGaSus", "ES", "LS", "ES-tuned"]
    figure(table, eps_rows, main_methods, "ε (α = 1 kW)", out_dir / "optstream_fig3.png",
           "[FV19] Figs. 3/4 on SimBench regions: mean L1 error")  # fmt: skip
    figure(table, eps_rows, ["P", "P+O", "P+S", "P+S+O"], "ε (α = 1 kW)",
           out_dir / "optstream_fig8.png", "[FV19] Fig. 8: ablation (L1 sampler)")  # fmt: skip
    alpha_rows = ["α=10", "α=50", "α=100"]
    figure(table, alpha_rows, main_methods, "α (ε = 1)", out_dir / "optstream_fig10.png",
           "[FV19] Fig. 10: α levels")  # fmt: skip
    print((out_dir / "optstream_accuracy.md").read_text())
    print(f"{args.trials} trials per cell, {secs:.0f} s; wrote {out_dir}")


if __name__ == "__main__":
    main()
