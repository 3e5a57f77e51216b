"""Tables I–II, the sweeps of Fig. 7, and predicted-vs-realised error (Figs. 8–11) of [PAK19].

All of these optimise on data: they are analysis tools (``private=False`` plans), not releases.
Plots use matplotlib's Agg backend and are written to files; data come back as DataFrames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mechanisms import ParameterError, binary_tree_final_sums
from mechanisms.core._renamed import renamed_attribute
from mechanisms.core._validation import check_integer, check_stream
from mechanisms.pak._final_sums import pak_final_sums

from ._pak_plan import PakPlan, plan_pak

__all__ = [
    "PredictedVsRealised",
    "pak_table",
    "plot_predicted_vs_realised",
    "plot_sweeps",
    "predicted_vs_realised",
    "sweep_epsilon",
    "sweep_time_lag",
]

TABLE_COLUMNS = [
    "m", "IF", "r", "λ", "p", "ε₁/ε", "β_qt/β", "β_lt/β", "β_lap/β", "β_out/β", "β_rt/β",
]  # fmt: skip


def _time_lags(stream: np.ndarray, time_lags: object, owner: str) -> list[int]:
    lags = [check_integer(m, "time_lags", owner, minimum=2) for m in np.atleast_1d(time_lags)]
    if not lags:
        raise ParameterError(f"The 'time_lags' parameter of {owner} must not be empty.")
    if max(lags) > stream.size:
        raise ParameterError(
            f"The 'time_lags' parameter of {owner} must not exceed the {stream.size} values "
            f"given. Got a time lag of {max(lags)} instead. Pass a longer prefix."
        )
    return lags


def pak_table(
    stream: object, time_lags: object, *, n: int, bound: float, epsilon: float = 1.0,
    delta: float = 2.0**-20, beta: float = 0.02, p_max: float = 0.005, method: str = "TNC",
    full: bool = False, counter: str | None = "auto",
) -> pd.DataFrame:  # fmt: skip
    """A Table I/II-style table ([PAK19] §VI-A): one optimised plan per time lag m.

    Parameters
    ----------
    stream
        At least max(time_lags) values in [0, bound]; the plan for m uses the first m.
    time_lags
        The time lags m (each < n).
    n, bound, epsilon, delta, beta, p_max, method, counter
        As for :func:`plan_pak` (defaults: the paper's ε = 1, δ = 2⁻²⁰, β = 0.02; the best
        counter; ``counter=None`` is the paper's tree bound, the protocol of Table I).
    full
        Also return α, α_BT and the predicted error terms.

    Returns
    -------
    pandas.DataFrame
        Columns m, IF, r, λ, p, ε₁/ε, β_qt/β, β_lt/β, β_lap/β, β_out/β, β_rt/β (Tables I–II).
    """
    owner = "pak_table"
    arr = check_stream(stream, "stream", owner, bound=bound)
    rows = []
    for m in _time_lags(arr, time_lags, owner):
        plan = plan_pak(
            arr[:m], n=n, bound=bound, epsilon=epsilon, delta=delta, beta=beta, p_max=p_max,
            method=method, counter=counter,
        )  # fmt: skip
        row = plan.as_row()
        if full and plan.terms is not None:
            row.update(
                laplace_error_bound=(
                    plan.terms.laplace_error_bound if plan.use_threshold else plan.error_bound
                ),
                outlier_error_bound=plan.terms.outlier_error_bound if plan.use_threshold else 0.0,
                tau_max=plan.terms.tau_max,
            )
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame if full else frame[TABLE_COLUMNS]


def sweep_epsilon(
    stream: object, epsilons: object, *, time_lag: int, n: int, bound: float,
    delta: float = 2.0**-20, beta: float = 0.02, p_max: float = 0.005,
    counter: str | None = "auto",
) -> pd.DataFrame:  # fmt: skip
    """IF against ε at a fixed time lag ([PAK19] Fig. 7 left: m = 50,000); ``counter`` as
    for :func:`plan_pak` (None: the paper's tree bound)."""
    owner = "sweep_epsilon"
    arr = check_stream(stream, "stream", owner, bound=bound)
    (m,) = _time_lags(arr, [time_lag], owner)
    rows = []
    for eps in np.atleast_1d(np.asarray(epsilons, dtype=np.float64)):
        plan = plan_pak(
            arr[:m],
            n=n,
            bound=bound,
            epsilon=float(eps),
            delta=delta,
            beta=beta,
            p_max=p_max,
            counter=counter,
        )
        rows.append({"epsilon": float(eps), **plan.as_row()})
    return pd.DataFrame(rows)


def sweep_time_lag(
    stream: object, time_lags: object, *, n: int, bound: float, epsilon: float = 1.0,
    delta: float = 2.0**-20, beta: float = 0.02, p_max: float = 0.005,
    counter: str | None = "auto",
) -> pd.DataFrame:  # fmt: skip
    """IF against the time lag m at a fixed ε ([PAK19] Fig. 7 right: ε = 1); ``counter`` as
    for :func:`plan_pak` (None: the paper's tree bound)."""
    frame = pak_table(
        stream, time_lags, n=n, bound=bound, epsilon=epsilon, delta=delta, beta=beta,
        p_max=p_max, full=True, counter=counter,
    )  # fmt: skip
    frame.insert(0, "epsilon", float(epsilon))
    return frame


def plot_sweeps(
    eps_sweep: pd.DataFrame | None, lag_sweep: pd.DataFrame | None, path: str, *, title: str = ""
) -> None:
    """Write Fig. 7 (IF against ε, and against m) to ``path`` (PNG/PDF/SVG by extension)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(d, x) for d, x in ((eps_sweep, "epsilon"), (lag_sweep, "m")) if d is not None]
    if not panels:
        raise ParameterError("plot_sweeps needs at least one sweep (eps_sweep or lag_sweep).")
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (frame, col) in zip(axes[0], panels, strict=True):
        ax.plot(frame[col], frame["IF"], marker="o")
        ax.set_xlabel("ε" if col == "epsilon" else "time lag m")
        ax.set_ylabel("improvement factor (IF)")
        if col == "epsilon":
            ax.set_xscale("log")
            ax.set_title(f"m = {int(frame['m'].iloc[0]):,}")
        else:
            ax.set_title(f"ε = {frame['epsilon'].iloc[0]:g}")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictedVsRealised:
    """Mechanism 1 run many times with planned parameters, against the plan's prediction."""

    plan: PakPlan
    """The plan (analysis only: computed on the same prefix)."""
    runs: pd.DataFrame = field(hash=False)
    """One row per run: error_pak, error_bt (|ĉ(n) − c(n)|), threshold, outlier_error."""
    quantile: float
    """1 − β, the level of the realised quantiles."""
    realised_error_bound: float
    """Realised (1 − β)-quantile of error_pak (to compare with ``plan.error_bound``)."""
    realised_baseline_error_bound: float
    """Realised (1 − β)-quantile of error_bt (to compare with ``plan.baseline_error_bound``)."""
    coverage: float
    """Fraction of runs with error_pak ≤ plan.error_bound (Eq. 16 promises ≥ 1 − β)."""
    predicted_outlier: float
    """Second summand of Eq. 16 (α_out) at the plan."""

    # old names (issue 12: α is the (w, α) unit's word), warn and point to the new ones
    realised_alpha = renamed_attribute(
        "realised_alpha", "realised_error_bound", "PredictedVsRealised"
    )
    realised_bt_alpha = renamed_attribute(
        "realised_bt_alpha", "realised_baseline_error_bound", "PredictedVsRealised"
    )

    @property
    def outlier_ratio(self) -> pd.Series:
        """Realised/estimated outlier error per run ([PAK19] Figs. 9 and 11)."""
        return self.runs["outlier_error"] / self.predicted_outlier

    @property
    def realised_improvement(self) -> float:
        """Mean |error| of BT over mean |error| of Mechanism 1 (the paper's 'on average')."""
        return float(self.runs["error_bt"].mean() / self.runs["error_pak"].mean())

    def summary(self) -> dict:
        """The figures worth printing."""
        return {
            "m": self.plan.time_lag,
            "n": self.plan.n,
            "epsilon": self.plan.epsilon,
            "use_threshold": self.plan.use_threshold,
            "predicted_error_bound": self.plan.error_bound,
            "realised_error_bound": self.realised_error_bound,
            "coverage": self.coverage,
            "predicted_baseline_error_bound": self.plan.baseline_error_bound,
            "realised_baseline_error_bound": self.realised_baseline_error_bound,
            "predicted_IF": self.plan.improvement_factor,
            "realised_IF_quantile": self.realised_baseline_error_bound / self.realised_error_bound,
            "realised_IF_mean": self.realised_improvement,
            "predicted_outlier": self.predicted_outlier,
            "outlier_ratio_median": float(self.outlier_ratio.median()),
            "outlier_ratio_max": float(self.outlier_ratio.max()),
        }


def predicted_vs_realised(
    stream: object, *, bound: float, epsilon: float, delta: float, beta: float, time_lag: int,
    p_max: float = 0.005, runs: int = 200, seed: int = 0, counter: str | None = "auto",
) -> PredictedVsRealised:  # fmt: skip
    """Plan on the first m values, run Mechanism 1 and plain BT ``runs`` times, compare.

    The realised error is |ĉ(σ, n) − c(σ, n)| at the last step (where the error is largest,
    §VII-A); its (1 − β)-quantile is compared with the predicted α of Eq. 16, and the realised
    outlier error Σ_i (σ(i) − min(σ(i), τ)) over the whole stream (prefix included, as the
    release clips it too) with the second summand α_out ([PAK19] Figs. 9 and 11). ``counter``
    is the suffix counter of the plan and of Mechanism 1 (as for :func:`plan_pak`; None: the
    paper's tree bound and BT); the baseline is always the paper's BT with B. Seeded runs
    (``seed``, ``seed + 1``, ...): an experiment, never a release.
    """
    owner = "predicted_vs_realised"
    arr = check_stream(stream, "stream", owner, bound=bound, min_length=3)
    runs = check_integer(runs, "runs", owner, minimum=2)
    seed = check_integer(seed, "seed", owner, minimum=0)
    m = check_integer(time_lag, "time_lag", owner, minimum=2, maximum=arr.size - 1)
    plan = plan_pak(
        arr[:m], n=arr.size, bound=bound, epsilon=epsilon, delta=delta, beta=beta, p_max=p_max,
        counter=counter,
    )  # fmt: skip
    truth = float(math.fsum(arr))
    params = plan.release_parameters()
    # Vectorised (the final sums only: popcount draws per run, not a whole tree), with the
    # distribution of pak_release(...).prefix_sums[-1] (mechanisms.pak._final_sums); other
    # counters run the whole release (seeded bits, one source for all runs).
    common = {"bound": bound, "epsilon": epsilon, "repetitions": runs}
    if params.get("counter") != "binary_tree":
        finals, taus = _released_final_sums(arr, plan, m, runs, 2 * seed)
    elif params.pop("threshold", True):
        params.pop("counter")
        finals, taus = pak_final_sums(
            arr, delta=delta, time_lag=m, seed=2 * seed, **common, **params
        )
    else:
        finals = binary_tree_final_sums(arr, seed=2 * seed, **common)
        taus = np.full(runs, float(bound))
    bt_finals = binary_tree_final_sums(arr, seed=2 * seed + 1, **common)
    ordered = np.sort(arr)
    above = np.concatenate([np.cumsum(ordered[::-1])[::-1], [0.0]])  # Σ of ordered[k:]
    cut = np.searchsorted(ordered, taus, side="right")
    rows = {
        "error_pak": np.abs(finals - truth),
        "error_bt": np.abs(bt_finals - truth),
        "threshold": taus,
        "outlier_error": np.maximum(above[cut] - taus * (arr.size - cut), 0.0),
    }
    frame = pd.DataFrame(rows)
    level = 1.0 - beta
    predicted_out = (
        plan.terms.outlier_error_bound if (plan.use_threshold and plan.terms) else math.nan
    )
    return PredictedVsRealised(
        plan=plan,
        runs=frame,
        quantile=level,
        realised_error_bound=float(frame["error_pak"].quantile(level)),
        realised_baseline_error_bound=float(frame["error_bt"].quantile(level)),
        coverage=float((frame["error_pak"] <= plan.error_bound).mean()),
        predicted_outlier=predicted_out,
    )


def _released_final_sums(
    arr: np.ndarray, plan: PakPlan, m: int, runs: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """c(σ, n) and τ of ``runs`` whole releases of Mechanism 1 with the plan's parameters."""
    from mechanisms import pak_release
    from mechanisms.core import bit_source

    bits = bit_source(seed)
    finals, taus = np.empty(runs), np.empty(runs)
    for i in range(runs):
        rel = pak_release(
            arr, bound=plan.bound, epsilon=plan.epsilon, delta=plan.delta, time_lag=m,
            seed=bits, **plan.release_parameters(),
        )  # fmt: skip
        finals[i], taus[i] = float(rel.prefix_sums[-1]), rel.threshold
    return finals, taus


def plot_predicted_vs_realised(result: PredictedVsRealised, path: str, *, title: str = "") -> None:
    """Write the error PDFs (Figs. 8/10) and the outlier-error ratio (Figs. 9/11) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan, runs = result.plan, result.runs
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    b = plan.bound
    ax1.hist(runs["error_bt"] / b, bins=40, density=True, alpha=0.5, label="BT")
    ax1.hist(runs["error_pak"] / b, bins=40, density=True, alpha=0.5, label="Mechanism 1")
    ax1.axvline(plan.error_bound / b, color="C1", ls="--", label="predicted α (Eq. 16)")
    ax1.axvline(plan.baseline_error_bound / b, color="C0", ls="--", label="predicted α_BT (Eq. 3)")
    ax1.set_xlabel("|error at step n| / B")
    ax1.set_ylabel("density")
    ax1.legend(fontsize=8)
    if math.isfinite(result.predicted_outlier):
        ax2.hist(result.outlier_ratio, bins=40)
        ax2.set_xlabel("realised / estimated outlier error")
    else:
        ax2.text(0.5, 0.5, "plan uses plain BT: no outlier error", ha="center")
    ax2.set_ylabel("runs")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
