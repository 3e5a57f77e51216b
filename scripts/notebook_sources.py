"""Cell sources of the notebooks (see ``build_notebooks.py``): (kind, text) pairs."""

from __future__ import annotations

QUICK_TOUR = [
    (
        "md",
        """
# dpstream in ten minutes

dpstream releases real-valued data streams under differential privacy. This tour runs each
of its three solvers once on the bundled real data:

1. **planner**: which privacy parameters, and what error they predict (PAK);
2. **postproc** via OptStream: a consistent release of a load hierarchy;
3. **forecasting**: day-ahead forecasts on the release.

Every cell runs in seconds. Seeds make the numbers reproducible; a seeded run is an
experiment, never a private release (leave `seed=None` for a release: noise then comes from
the operating system's secure source).
""",
    ),
    (
        "code",
        """
import numpy as np
import pandas as pd
import dpstream, mechanisms, planner, forecasting
from dpstream import datasets
""",
    ),
    (
        "md",
        """
## 1. An event stream and PAK's Mechanism 1

One household's per-minute power in 2007 (UCI, CC BY 4.0). The public bound is B = 36 kW;
the data are light-tailed, so a private threshold τ far below B pays off (PAK §V).
""",
    ),
    (
        "code",
        """
values = datasets.household_minutes_stream()
bound = datasets.HOUSEHOLD_MINUTES_BOUND
lag = planner.time_lag_heuristic(epsilon=1.0, delta=2**-20, beta=0.02, p_max=0.005)
plan = planner.plan_pak(values[: lag.m], n=values.size, bound=bound, epsilon=1.0,
                        delta=2**-20, beta=0.02)
print(f"time lag m = {lag.m:,}; predicted improvement over BT: {plan.improvement_factor:.2f}x")
release = mechanisms.pak_release(values, bound=bound, epsilon=1.0, delta=2**-20,
                                 time_lag=lag.m, seed=1, **plan.release_parameters())
print(f"threshold tau = {release.threshold:.2f} kW (B = {bound:g})")
print(f"year's total: {release.prefix_sums[-1]:,.0f} kW-min released, {values.sum():,.0f} true")
""",
    ),
    (
        "md",
        """
## 2. A consistent release of the regional → national hierarchy

SimBench 2016 (ODbL): four regions and their national total, half-hourly. OptStream samples,
perturbs, reconstructs and post-processes every day (w = 48) so that regions sum to the nation
and nothing is negative.
""",
    ),
    (
        "code",
        """
regional = datasets.load_regional()
hierarchy = datasets.regional_hierarchy()
week = regional.loc["2016-02-01":"2016-02-07"]
released = dpstream.release_optstream(week[hierarchy["national"]], epsilon=1.0,
                                      hierarchy=hierarchy, alpha=50.0, seed=2)
gap = (released["national"] - released[hierarchy["national"]].sum(axis=1)).abs().max()
print("max |national - sum of regions| =", gap)
print("mean L1 error per step (kW):")
print((released - week[released.columns]).abs().mean().round(0))
""",
    ),
    (
        "code",
        """
ax = week["national"].iloc[:144].plot(color="black", lw=2, label="real", figsize=(9, 3))
released["national"].iloc[:144].plot(ax=ax, label="OptStream, ε = 1, α = 50 kW")
ax.set_ylabel("kW"); ax.legend();
""",
    ),
    (
        "md",
        """
## 3. Forecasting on the release

A forecaster fits ARMA(1, 1) on four weeks of released national load and forecasts the next
day; the same forecast on real data is the reference (OptStream §6.1.3).
""",
    ),
    (
        "code",
        """
span = regional.loc["2016-02-01":"2016-03-01"]
plan = planner.plan_optstream(regional.loc["2016-01"].to_numpy(), epsilon=1.0, alpha=50.0,
                              n_levels=2)
release = dpstream.release_optstream(span[hierarchy["national"]], epsilon=1.0, alpha=50.0,
                                     hierarchy=hierarchy, seed=3, **plan.release_parameters())
on_release = forecasting.rolling_forecast(release["national"], days=1)
on_real = forecasting.rolling_forecast(span["national"], days=1)
errors = pd.concat({
    "released": forecasting.forecast_errors(on_release, regional["national"]),
    "real": forecasting.forecast_errors(on_real, regional["national"]),
})
errors[["origin", "l1", "mape"]]
""",
    ),
]

PAK = [
    (
        "md",
        """
# PAK: private continual release of real-valued streams (Perrier, Asghar, Kaafar, NDSS 2019)

Reproduces, on bundled data and at small sizes, Table I (planned parameters per time lag),
Fig. 7 (improvement factor against ε and m), Figs. 8–11 (predicted against realised error, the
outlier error) and §IX's counter-example (a heavy-tailed stream where the threshold does not
help). Enlarge `RUNS` for the paper's 20,000 repetitions.
""",
    ),
    (
        "code",
        """
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from dpstream import datasets
import mechanisms, planner

RUNS = 50           # the paper uses 20,000
EPSILON, DELTA, BETA = 1.0, 2.0**-20, 0.02
values = datasets.household_minutes_stream()
bound = datasets.HOUSEHOLD_MINUTES_BOUND
print(f"n = {values.size:,}, B = {bound} kW, max = {values.max():.2f} kW")
print(datasets.light_tail_check(values))
""",
    ),
    ("md", "## The time lag from public inputs (§VI-B)"),
    (
        "code",
        """
lag = planner.time_lag_heuristic(epsilon=EPSILON, delta=DELTA, beta=BETA, p_max=0.005)
lag
""",
    ),
    ("md", "## Table I: planned parameters per time lag (Eq. 16 minimised with TNC)"),
    (
        "code",
        """
table = planner.pak_table(values, [10_000, 50_000, lag.m], n=values.size, bound=bound,
                          epsilon=EPSILON, delta=DELTA, beta=BETA)
table.round(3)
""",
    ),
    ("md", "## Fig. 7: improvement factor against ε and against m"),
    (
        "code",
        """
eps_sweep = planner.sweep_epsilon(values, [0.1, 0.3, 1.0, 3.0], time_lag=lag.m,
                                  n=values.size, bound=bound, delta=DELTA)
lag_sweep = planner.sweep_time_lag(values, [10_000, 50_000, lag.m, 150_000], n=values.size,
                                   bound=bound, epsilon=EPSILON, delta=DELTA)
planner.plot_sweeps(eps_sweep, lag_sweep, "pak_fig7.png", title="PAK Fig. 7")
from IPython.display import Image
Image("pak_fig7.png")
""",
    ),
    ("md", "## Figs. 8–11: predicted against realised error"),
    (
        "code",
        """
result = planner.predicted_vs_realised(values, bound=bound, epsilon=EPSILON, delta=DELTA,
                                       beta=BETA, time_lag=lag.m, runs=RUNS, seed=0)
planner.plot_predicted_vs_realised(result, "pak_fig8.png", title="PAK Figs. 8-11")
pd.Series(result.summary())
""",
    ),
    ("code", "Image('pak_fig8.png')"),
    (
        "md",
        """
## §IX: a heavy-tailed stream

Online Retail II invoice totals are not light-tailed (Def. 12 fails on most of the tail),
so the planner falls back on plain BT or predicts little gain.
""",
    ),
    (
        "code",
        """
retail = datasets.retail_stream(clip_to=datasets.RETAIL_BOUND)
print(datasets.light_tail_check(retail))
m = retail.size // 4
plan = planner.plan_pak(retail[:m], n=retail.size, bound=datasets.RETAIL_BOUND,
                        epsilon=EPSILON, delta=DELTA, beta=BETA)
print("use threshold:", plan.use_threshold, " predicted IF:", round(plan.improvement_factor, 3))
""",
    ),
]

OPTSTREAM = [
    (
        "md",
        """
# OptStream: releasing time series privately (Fioretto & Van Hentenryck, JAIR 2019)

On the bundled SimBench 2016 regions (four regions summing to a national total, half-hourly):
the release itself (Fig. 2), its hierarchical consistency (Fig. 4), errors by method and ε
(Figs. 3/8), by α (Fig. 10), the planner's choice of k, and the 30-trial protocol's results
(`scripts/optstream_accuracy.py`, written to `docs/results/`). Sizes are small: one week, few
trials.
""",
    ),
    (
        "code",
        """
from pathlib import Path
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
import dpstream, planner
from dpstream import datasets

TRIALS = 2
regional = datasets.load_regional()
hierarchy = datasets.regional_hierarchy()
week = regional.loc["2016-02-01":"2016-02-07"]
leaves = week[hierarchy["national"]]
history = regional.loc["2016-01"].to_numpy()     # January, treated as public history
regional.describe().T[["mean", "std", "min", "max"]].round(0)
""",
    ),
    (
        "md",
        """
## Fig. 2: real and released national load (ε = 1, α = 50 kW)

(w, α)-indistinguishability: any change of a load by up to α within a day (w = 48) is hidden.
The planner picks k from January; the paper's setting is the L1 sampler with k = 10.
""",
    ),
    (
        "code",
        """
plan = planner.plan_optstream(history, epsilon=1.0, alpha=50.0, n_levels=2)
print("planned k =", plan.k, "; predicted gain over Laplace:", round(plan.predicted_gain, 2))
common = dict(epsilon=1.0, alpha=50.0, hierarchy=hierarchy)
releases = {
    "OptStream (planned k)": dpstream.release_optstream(leaves, seed=1, **plan.release_parameters(),
                                                        **common),
    "OptStream (L1, k = 10)": dpstream.release_optstream(leaves, k=10, seed=2, **common),
    "Laplace": dpstream.release_laplace(leaves, seed=3, **common),
    "DFT": dpstream.release_dft(leaves, seed=4, **common),
    "PeGaSus": dpstream.release_pegasus(leaves, seed=5, **common),
}
fig, axes = plt.subplots(len(releases), 1, figsize=(10, 9), sharex=True)
for ax, (name, out) in zip(axes, releases.items()):
    ax.plot(week.index, week["national"], color="black", lw=1.5)
    ax.plot(out.index, out["national"], lw=0.9)
    ax.set_title(name, fontsize=9)
fig.tight_layout()
""",
    ),
    ("md", "## Fig. 4: consistency — national minus the sum of the released regions"),
    (
        "code",
        """
pd.DataFrame({
    name: {"max |national − Σ regions| (kW)":
           (out["national"] - out[hierarchy["national"]].sum(axis=1)).abs().max(),
           "negative values": int((out < 0).to_numpy().sum())}
    for name, out in releases.items()
}).T
""",
    ),
    ("md", "## Figs. 3 and 10: mean L1 error per step by method, ε and α"),
    (
        "code",
        """
rows = []
for eps, alpha in [(1.0, 10.0), (1.0, 50.0), (1.0, 100.0), (0.1, 50.0)]:
    plan = planner.plan_optstream(history, epsilon=eps, alpha=alpha, n_levels=2)
    common = dict(epsilon=eps, alpha=alpha, hierarchy=hierarchy)
    for trial in range(TRIALS):
        outs = {
            "OptStream (planned k)": dpstream.release_optstream(
                leaves, seed=trial, **plan.release_parameters(), **common),
            "Laplace": dpstream.release_laplace(leaves, seed=100 + trial, **common),
            "DFT": dpstream.release_dft(leaves, seed=200 + trial, **common),
        }
        for name, out in outs.items():
            err = (out - week[out.columns]).abs().mean()
            rows.append({"ε": eps, "α": alpha, "method": name,
                         "regions": err[hierarchy["national"]].mean(), "national": err["national"]})
errors = pd.DataFrame(rows).groupby(["ε", "α", "method"]).mean().round(0)
errors.unstack("method")["regions"]
""",
    ),
    (
        "md",
        """
## The 30-trial protocol (precomputed)

`scripts/optstream_accuracy.py` runs February, June and October, 30 trials, ε ∈ {1, 0.1, 0.01}
and α ∈ {10, 50, 100}, with the ablation (P / P+O / P+S / P+S+O) and every variant; the
findings, including why we fall short of the paper's 10×, are in
`docs/results/optstream_findings.md`.
""",
    ),
    (
        "code",
        """
results = Path(dpstream.__file__).resolve().parents[1] / "docs" / "results"
table = pd.read_csv(results / "optstream_accuracy.csv")
main = table[(table.level == "regional") & table.method.isin(
    ["LS", "ES", "ES-tuned", "Laplace", "DFT", "PeGaSus", "P", "P+O", "P+S", "P+S+O"])]
main.pivot_table(index="alpha/eps", columns="method", values="l1").round(0)
""",
    ),
]

TOPS = [
    (
        "md",
        """
# ToPS and ToPL: continuous release under central and local DP (Wang et al., CCS 2021)

Reproduces at small sizes the paper's comparison (MSE of uniform random range sums; m = 65,536
values choose the threshold, the rest are perturbed) on the bundled light-tailed stream, and
shows each stage: the private threshold, the consistent hierarchy, the smoothers, ToPL.
`scripts/tops_accuracy.py` and `scripts/topl_accuracy.py` run the full protocol
(results in `docs/results/`).
""",
    ),
    (
        "code",
        """
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from dpstream import datasets
import mechanisms, planner

RUNS, QUERIES, M = 3, 25, 65_536          # the full protocol: 40 runs
values = datasets.household_minutes_stream()
bound = datasets.HOUSEHOLD_MINUTES_BOUND
prefix, suffix = values[:M], values[M:]
r = suffix.size
cumulative = np.concatenate([[0.0], np.cumsum(suffix)])
print(f"n = {values.size:,}, m = {M:,}, r = {r:,}, B = {bound} kW")
""",
    ),
    (
        "md",
        """
## 1. The threshold optimizer

Score q(θ) = −m_θ − κθ over a public grid (m_θ: prefix values above θ; κ from the perturber's
settings), selected by report-noisy-max. As ε grows θ concentrates on the best candidate.
""",
    ),
    (
        "code",
        """
rows = []
for eps in [0.01, 0.1, 1.0]:
    picks = [mechanisms.tops_threshold(prefix, bound=bound, epsilon=eps, horizon=r,
                                       epsilon_perturb=0.05, seed=s).threshold for s in range(20)]
    rows.append({"epsilon": eps, "median θ": np.median(picks), "min θ": min(picks),
                 "max θ": max(picks)})
print("prefix maximum:", prefix.max().round(2), "kW")
pd.DataFrame(rows)
""",
    ),
    (
        "md",
        """
## 2. The perturber: an online, consistent F-ary hierarchy

The whole tree's noise is drawn and projected once; each node is released, already consistent,
when its interval completes. Streaming and batch give identical numbers.
""",
    ),
    (
        "code",
        """
rel = mechanisms.tops_release(values, bound=bound, epsilon_threshold=1.0, epsilon_perturb=1.0,
                              time_lag=M, seed=1)
print(f"θ = {rel.threshold:.2f} kW, leaf size g = {rel.leaf_size}, levels = {rel.levels}")
leaves, parents = rel.nodes[0], rel.nodes[1]
full = parents.size * rel.fanout
print("max |parent − Σ children|:",
      np.abs(parents - leaves[:full].reshape(-1, rel.fanout).sum(axis=1)).max())
stream = mechanisms.ToPSStream(bound=bound, epsilon_threshold=1.0, epsilon_perturb=1.0,
                               time_lag=M, horizon=r, seed=1)
update = stream.extend(values)
print("streaming == batch:", np.array_equal(np.asarray(update.values), rel.values))
""",
    ),
    ("md", "## 3. Smoothers: every block sums to its consistent estimate"),
    (
        "code",
        """
hours = 24 * 3
fig, ax = plt.subplots(figsize=(10, 3))
ax.plot(suffix[: hours * 60].reshape(hours, 60).mean(axis=1), color="black", label="real")
for smoother in mechanisms.SMOOTHERS:
    rel_s = mechanisms.tops_release(values, bound=bound, epsilon_threshold=1.0,
                                    epsilon_perturb=1.0, time_lag=M, seed=1, smoother=smoother)
    ax.plot(rel_s.values[: hours * 60].reshape(hours, 60).mean(axis=1), lw=0.9, label=smoother)
ax.set(xlabel="hour", ylabel="kW (hourly mean)"); ax.legend(fontsize=8);
""",
    ),
    (
        "md",
        """
## 4. The paper's comparison (small): ToPS against PAK and the all-zero answer

PAK here is Mechanism 1 with the same time lag, its threshold τ clipped to B (free
post-processing) or not (as in the paper's PAK), the suffix released by BT with bound τ.
""",
    ),
    (
        "code",
        """
def pak_answers(eps_t, eps_r, q, seed, clip):
    th = mechanisms.pak_threshold(prefix, bound=bound, epsilon=eps_t, clip=False, seed=seed,
                                  delta=2.0**-20, lam=0.85, p=0.005, beta_lt=0.004, r=1.5)
    tau = min(th.unclipped, bound) if clip else th.unclipped
    bt = mechanisms.binary_tree_release(np.minimum(suffix, tau), epsilon=eps_r, bound=tau,
                                        seed=seed + 1)
    return np.array([bt.range_sum(int(i), int(j)) for i, j in q])

rows = []
for eps_t, eps_r in [(0.01, 0.05), (0.1, 0.05), (1.0, 1.0)]:
    errors = {"ToPS": [], "PAK, τ clipped to B": [], "PAK, τ not clipped": [], "all-zero": []}
    for run in range(RUNS):
        q = np.sort(np.random.default_rng(run).integers(0, r, size=(QUERIES, 2)), axis=1)
        truth = cumulative[q[:, 1] + 1] - cumulative[q[:, 0]]
        tops = mechanisms.tops_release(values, bound=bound, epsilon_threshold=eps_t,
                                       epsilon_perturb=eps_r, time_lag=M, seed=100 + run)
        answers = {
            "ToPS": np.array([tops.range_sum(M + int(i), M + int(j)) for i, j in q]),
            "PAK, τ clipped to B": pak_answers(eps_t, eps_r, q, 200 + 2 * run, True),
            "PAK, τ not clipped": pak_answers(eps_t, eps_r, q, 200 + 2 * run, False),
            "all-zero": np.zeros(QUERIES),
        }
        for k, a in answers.items():
            errors[k].extend((a - truth) ** 2)
    base = np.mean(errors["ToPS"])
    rows += [{"ε_θ": eps_t, "ε_r": eps_r, "method": k, "MSE": np.mean(e),
              "MSE / ToPS": np.mean(e) / base} for k, e in errors.items()]
table = pd.DataFrame(rows)
table.pivot(index="method", columns=["ε_θ", "ε_r"], values="MSE / ToPS")
""",
    ),
    (
        "md",
        """
## 5. ToPL: local DP

The first m users report with Square Wave; the server recovers their distribution by EMS and
picks θ; later users report min(v, θ) with the Hybrid Mechanism.
""",
    ),
    (
        "code",
        """
rows = []
q = np.sort(np.random.default_rng(0).integers(0, r, size=(QUERIES, 2)), axis=1)
truth = cumulative[q[:, 1] + 1] - cumulative[q[:, 0]]
for eps in [0.5, 2.0]:
    topl = mechanisms.topl_release(values, bound=bound, epsilon=eps, time_lag=M, seed=7)
    answers = np.array([topl.range_sum(M + int(i), M + int(j)) for i, j in q])
    rows.append({"ε": eps, "θ (kW)": topl.threshold, "MSE": np.mean((answers - truth) ** 2),
                 "all-zero MSE": np.mean(truth**2)})
pd.DataFrame(rows)
""",
    ),
]

NOTEBOOKS = {
    "00_quick_tour.ipynb": QUICK_TOUR,
    "01_pak.ipynb": PAK,
    "02_optstream.ipynb": OPTSTREAM,
    "03_tops_topl.ipynb": TOPS,
}
