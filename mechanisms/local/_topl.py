"""ToPL: continuous release of a stream under local DP ([ToPS21] ToPL; tops-notes §4).

Every step's value belongs to its own user, who reports it once with ε-LDP; the server never
sees a raw value.

1. The first m = ``time_lag`` users scale their value by the public bound B and send a
   :class:`~mechanisms.SquareWave` report ([SW20]). The server recovers the distribution f of
   v/B by EMS (:func:`~mechanisms.square_wave_distribution`) and picks the threshold θ that
   minimises the predicted range-query error below (:func:`plan_topl_threshold`).
2. Every later user clips the value to [0, θ], maps it to t = 2·min(v, θ)/θ − 1 ∈ [−1, 1] and
   sends a :class:`~mechanisms.HybridMechanism` report t* ([HM19]). The server's estimate of
   the step is x̂ = θ(t* + 1)/2, unbiased for min(v, θ); a range sum is the sum of the x̂.

Predicted error of a threshold (our exact formula)
--------------------------------------------------
Queries V(i, j) over the r = n − m released steps with i, j independent and uniform on
{0, …, r − 1} (then ordered), as in the evaluation protocol: the range length ℓ = |i − j| + 1
has E[ℓ] = 1 + (r² − 1)/(3r) ≈ r/3 (:func:`range_length_moments`). The error of a range sum is
Σ(x̂ₖ − min(vₖ, θ)) − Σ(vₖ − θ)₊, and we predict

    MSE(θ) = E[ℓ]·(E_f[Var x̂] + Var_f[(v − θ)₊]) + w·r²·(E_f[(v − θ)₊])²,
    Var x̂ = θ²/4 · Var_HM(t(v)),   Var_HM(t) = α·Var_PM(t) + (1 − α)·Var_Duchi(t),

with the mass of each bin of the fit spread uniformly inside the bin (exact first and second
moments per bin), and w = 1/24 by default: the notes' weights (noise × r/3, squared bias ×
r²/24). For i.i.d. values the exact weight of the squared bias would be E[ℓ²]/r² ≈ 1/6
(``bias_weight=1/6``). We keep 1/24 deliberately: the bias E_f[(v − θ)₊] is read off the EMS
fit, whose non-negative bins absorb the reports' noise as spurious tail mass, so it is biased
upwards, and with w = 1/6 the spurious tail pushes θ further above the data (on the
household stream, m = 65,536 reports at ε = 1 and 2, the fit puts 0.6–0.9 % of the mass above
the true maximum). Measured with ``scripts/topl_accuracy.py`` (20 runs, ε = 0.2..2): the
expected range-query MSE given the chosen θ is 1.7–2.0× larger with w = 1/6 than with 1/24,
and still 5.5–8.3× above that of the best θ in hindsight (``docs/results/topl_accuracy.csv``).
Candidates are the right edges θ = B·k/d, k = 1..d, of the fit's bins; the smallest
minimiser wins. Choosing θ is post-processing of the Square Wave reports.

*Privacy* (the whole release): ε-LDP for every user. A user's value enters exactly one report
(Square Wave for steps 1..m, Hybrid for the later steps), each ε-LDP; θ is a function of the
other users' reports only, so the later reports are ε-LDP for every θ. In the central view this
is parallel composition over disjoint steps: event-level ε for the whole stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import ParameterError
from ..core._record import PrivacyRecord
from ..core._results import RangeSum, check_range, step_frame, summary_text, table_frame
from ..core._units import LocalDP, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_bool,
    check_integer,
    check_ledger,
    check_noise_range,
    check_positive,
    check_seed,
    check_stream,
)
from ._hybrid import HybridMechanism
from ._randomizers import check_local_epsilon
from ._square_wave import DistributionFit, SquareWave, square_wave_distribution

__all__ = [
    "ToplRelease",
    "ToplThresholdPlan",
    "plan_topl_threshold",
    "range_length_moments",
    "topl_release",
]

_PROOF = (
    "[SW20] Square Wave and [HM19] Hybrid reports are each ε-LDP; every value is reported "
    "once and θ depends only on other users' reports (parallel composition over steps)"
)


def range_length_moments(steps: int) -> tuple[float, float]:
    """E[ℓ] and E[ℓ²] of the length ℓ = |i − j| + 1 of a range with i, j i.i.d. uniform on
    {0, …, steps − 1}."""
    r = check_integer(steps, "steps", "range_length_moments")
    mean_abs = (r * r - 1.0) / (3.0 * r)
    mean_sq = (r * r - 1.0) / 6.0
    return 1.0 + mean_abs, 1.0 + 2.0 * mean_abs + mean_sq


@dataclass(frozen=True, slots=True, kw_only=True)
class ToplThresholdPlan:
    """The threshold ToPL picks from a recovered distribution, and the error curve behind it."""

    threshold: float
    """θ, the candidate with the smallest predicted error (values' units)."""
    candidates: np.ndarray
    """Candidate thresholds B·k/d, k = 1..d."""
    predicted_error: np.ndarray
    """Predicted MSE of a uniform random range query for each candidate (module notes)."""
    noise_variance: np.ndarray
    """E_f[Var x̂]: expected per-step noise variance of the Hybrid estimates, per candidate."""
    bias: np.ndarray
    """E_f[(v − θ)₊]: per-step truncation bias, per candidate (values' units)."""
    steps: int
    """r, the number of released steps the queries range over."""
    epsilon: float
    """ε of the Hybrid reports."""
    bias_weight: float
    """w, the weight of the squared bias in units of r²."""

    def __post_init__(self) -> None:
        for arr in (self.candidates, self.predicted_error, self.noise_variance, self.bias):
            arr.setflags(write=False)

    def to_frame(self):
        """One row per candidate θ: its predicted error, noise variance and bias."""
        return table_frame(
            {
                "threshold": self.candidates,
                "predicted_error": self.predicted_error,
                "noise_variance": self.noise_variance,
                "bias": self.bias,
                "chosen": self.candidates == self.threshold,
            },
            index_name="candidate",
        )

    def summary(self) -> str:
        """A short text table (post-processing of the locally private reports)."""
        best = int(np.argmin(self.predicted_error))
        rows = [
            ("threshold θ", self.threshold),
            ("candidates", self.candidates.size),
            ("predicted error at θ", float(self.predicted_error[best])),
            ("released steps r", self.steps),
            ("epsilon (Hybrid reports)", self.epsilon),
            ("bias weight w", self.bias_weight),
        ]
        return summary_text("ToPL threshold plan [ToPS21]", rows, result=self)


def plan_topl_threshold(
    fit: DistributionFit,
    *,
    bound: float,
    epsilon: float,
    steps: int,
    bias_weight: float = 1.0 / 24.0,
) -> ToplThresholdPlan:
    """Choose θ minimising the predicted range-query error of the Hybrid perturber.

    Parameters
    ----------
    fit
        Distribution of v/B on [0, 1] (e.g. :func:`square_wave_distribution`).
    bound
        The public bound B (the fit is on v/B).
    epsilon
        ε of each later user's Hybrid report.
    steps
        r, the number of released (perturbed) steps.
    bias_weight
        w, the weight of the squared bias in units of r² (default 1/24, the notes'; 1/6 is the
        exact E[ℓ²]/r² for i.i.d. values, module notes).

    Returns
    -------
    ToplThresholdPlan

    Notes
    -----
    MSE(θ) = E[ℓ]·(E_f[θ²/4·Var_HM(t)] + Var_f[(v − θ)₊]) + w·r²·E_f[(v − θ)₊]² (module
    notes), computed for every bin edge at once from cumulative bin moments.
    *Privacy*: a function of the fit only (post-processing).
    """
    owner = "plan_topl_threshold"
    if not isinstance(fit, DistributionFit):
        raise ParameterError(
            f"The 'fit' parameter of {owner} must be a DistributionFit. Got {fit!r} instead."
        )
    bnd = check_positive(bound, "bound", owner)
    eps = check_local_epsilon(epsilon, owner)
    r = check_integer(steps, "steps", owner)
    weight = check_positive(bias_weight, "bias_weight", owner)
    hm = HybridMechanism(epsilon=eps)
    var0 = float(hm.variance(0.0))
    slope = float(hm.variance(1.0)) - var0  # Var_HM(t) = var0 + slope·t²

    p = np.asarray(fit.probabilities, dtype=np.float64)
    lo, hi = fit.edges[:-1], fit.edges[1:]
    mid, width = 0.5 * (lo + hi), hi - lo
    m1, m2 = p * mid, p * (mid * mid + width * width / 12.0)
    # Moments of the bins 0..k below the candidate θ = hi[k] (bins above it are clipped).
    a0, a1, a2 = np.cumsum(p), np.cumsum(m1), np.cumsum(m2)
    a0[-1] = 1.0
    t1, t2 = a1[-1], a2[-1]
    theta = hi  # unit candidates
    e_t2 = 4.0 * a2 / theta**2 - 4.0 * a1 / theta + 1.0  # E_f[t²], t = 2·min(v, θ)/θ − 1
    noise = (theta * bnd) ** 2 / 4.0 * (var0 + slope * e_t2)
    above = np.clip(1.0 - a0, 0.0, None)
    bias_u = np.clip((t1 - a1) - theta * above, 0.0, None)
    second_u = np.clip((t2 - a2) - 2.0 * theta * (t1 - a1) + theta**2 * above, 0.0, None)
    var_trunc = bnd**2 * np.clip(second_u - bias_u**2, 0.0, None)
    e_len, _ = range_length_moments(r)
    error = e_len * (noise + var_trunc) + weight * float(r) ** 2 * (bnd * bias_u) ** 2
    best = int(np.argmin(error))
    return ToplThresholdPlan(
        threshold=float(theta[best] * bnd),
        candidates=theta * bnd,
        predicted_error=error,
        noise_variance=noise,
        bias=bias_u * bnd,
        steps=r,
        epsilon=eps,
        bias_weight=weight,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToplRelease:
    """The server's view after ToPL: θ and an unbiased estimate of every released step."""

    values: np.ndarray
    """x̂ for the steps after the time lag (length n − m; ``values[k]`` is input step m + k,
    :meth:`to_frame` aligns it to the input): unbiased for min(v, θ), not clipped (single
    estimates can be negative or above θ)."""
    threshold: float
    """θ chosen from the Square Wave reports."""
    variance: float
    """Variance of one step's estimate, θ²/4·max_t Var_HM(t): exact for ε > 0.61 (where
    Var_HM is constant), the worst case over inputs (at t = 0, Duchi) otherwise; excludes
    the truncation bias."""
    time_lag: int
    """m, the number of users who reported with Square Wave (their steps are not released)."""
    fit: DistributionFit
    """EMS recovery of the distribution of v/B from the m Square Wave reports."""
    plan: ToplThresholdPlan
    """The predicted error of every candidate θ and the choice."""
    epsilon: float
    """ε of every user's report."""
    bound: float
    """The public bound B."""
    guarantee: PrivacyGuarantee
    """Local ε-DP for every user."""
    n: int
    """Stream length (released steps: n − m)."""
    seeded: bool = False
    """True when a seed drove the reports' randomness: an experiment, not a release."""
    _cumsum: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.values.setflags(write=False)
        cum = np.concatenate([[0.0], np.cumsum(self.values)])
        cum.setflags(write=False)
        object.__setattr__(self, "_cumsum", cum)

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (local unit, ε, B, mechanism, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="topl",
            parameters={
                "n": self.n,
                "time_lag": self.time_lag,
                "bins": int(self.fit.probabilities.size),
                "bias_weight": self.plan.bias_weight,
            },
            bound=self.bound,
            seeded=self.seeded,
        )

    def _check_range(self, i: int, j: int, owner: str) -> tuple[int, int]:
        """Input steps i ≤ j inside the released steps [m, n); returned as positions of
        ``values`` (i − m, j − m)."""
        m = self.time_lag
        i, j = check_range(i, j, first=m, stop=m + self.values.size, owner=owner)
        return i - m, j - m

    def range_sum(self, i: int, j: int) -> RangeSum:
        """Estimated sum of input steps i..j (0-based, inclusive, m ≤ i ≤ j < n): the sum of
        the unbiased per-step estimates, with the noise ``std_error`` √(:meth:`range_variance`)
        (the truncation bias above θ is not included)."""
        a, b = self._check_range(i, j, "ToplRelease.range_sum")
        std = math.sqrt((b - a + 1) * self.variance)
        return RangeSum(float(self._cumsum[b + 1] - self._cumsum[a]), std)

    def range_variance(self, i: int, j: int) -> float:
        """Variance of :meth:`range_sum` (i, j) (input steps) from the noise alone:
        (j − i + 1)·variance."""
        a, b = self._check_range(i, j, "ToplRelease.range_variance")
        return (b - a + 1) * self.variance

    def to_frame(self, index: object = None):
        """One row per input step: ``value`` (x̂, NaN for the m withheld steps) and its noise
        ``std_error``; ``index`` is the input's index (default: a ``step`` RangeIndex)."""
        m, r = self.time_lag, self.values.size
        return step_frame(
            {"value": self.values, "std_error": np.full(r, math.sqrt(self.variance))},
            n=m + r,
            time_lag=m,
            index=index,
            owner="ToplRelease.to_frame",
            result=self,
        )

    def summary(self) -> str:
        """A short text table of the release (released values and public parameters)."""
        rows = [
            ("steps (withheld + released)", self.time_lag + self.values.size),
            ("time lag m (Square Wave reporters)", self.time_lag),
            ("bound B", self.bound),
            ("threshold θ (from the reports)", self.threshold),
            ("epsilon (every user's report)", self.epsilon),
            ("std. error of one step (noise)", math.sqrt(self.variance)),
            ("released total", float(self._cumsum[-1])),
        ]
        return summary_text("ToPL release (local DP) [ToPS21]", rows, result=self)

    def smoothed(self, window: int) -> np.ndarray:
        """Block-mean smoothing (post-processing): every step of each block of ``window``
        released steps (the last block may be shorter) gets the block's mean estimate.

        Sums over whole blocks are unchanged (so is every range sum aligned to blocks); the
        per-step variance drops by the block length at the price of the within-block
        variation of the true values.
        """
        w = check_integer(window, "window", "ToplRelease.smoothed")
        r = self.values.size
        starts = np.arange(0, r, w)
        sums = np.add.reduceat(self.values, starts)
        lengths = np.diff(np.append(starts, r))
        return np.repeat(sums / lengths, lengths)


def topl_release(
    values: object,
    *,
    bound: float,
    epsilon: float,
    time_lag: int,
    seed: object = None,
    bins: int = 1024,
    smoothing: bool = True,
    bias_weight: float = 1.0 / 24.0,
    ledger: BudgetLedger | None = None,
) -> ToplRelease:
    """Release a stream under local DP with ToPL ([ToPS21]; module notes).

    Parameters
    ----------
    values
        The stream v₁..vₙ, every value in [0, B]; finite; n ≥ 2.
    bound
        The public bound B.
    epsilon
        ε of every user's (single) report, in (0, 50].
    time_lag
        m, 1 ≤ m < n: the users who report with Square Wave to set the threshold.
    seed
        None (OS secure source, for release), or an int / bit source (tests only).
    bins
        d, bins of the EMS recovery and of the threshold grid, 2 ≤ d ≤ 4096.
    smoothing
        EMS (True, [SW20]'s smoothing) or plain EM (False).
    bias_weight
        Weight of the squared truncation bias in the predicted error, in units of r²
        (:func:`plan_topl_threshold`; default 1/24, the notes').
    ledger
        Optional :class:`BudgetLedger` charged ε (per user: the local unit) after validation,
        before any draw.

    Returns
    -------
    ToplRelease

    Notes
    -----
    *Privacy*: ε-LDP for every user ([SW20], [HM19]; module notes): each value enters one
    report; θ depends only on the first m users' reports.

    Examples
    --------
    >>> x = [1.0] * 3000 + [2.0] * 1000
    >>> rel = topl_release(x, bound=10.0, epsilon=1.0, time_lag=2000, bins=64, seed=3)
    >>> rel.values.shape, 0.0 < rel.threshold <= 10.0
    ((2000,), True)
    """
    owner = "topl_release"
    bnd = check_positive(bound, "bound", owner)
    eps = check_local_epsilon(epsilon, owner)
    check_noise_range(owner, "'bound' and 'epsilon'", bound=bnd, noise_scale=bnd / eps)
    check_noise_range(owner, "'epsilon'", report_spread=1.0 / eps)
    d = check_integer(bins, "bins", owner, minimum=2, maximum=4096)
    smoothing = check_bool(smoothing, "smoothing", owner)
    weight = check_positive(bias_weight, "bias_weight", owner)
    bits = check_seed(seed, owner)
    ledger = check_ledger(ledger, owner)
    if not isinstance(time_lag, int | np.integer) or isinstance(time_lag, bool):
        check_integer(time_lag, "time_lag", owner)  # type errors before reading the data
    arr = check_stream(values, "values", owner, bound=bnd, min_length=2)
    m = check_integer(time_lag, "time_lag", owner, minimum=1, maximum=arr.size - 1)
    budget = Budget(eps)
    charge_ledger(ledger, budget, owner, LocalDP())

    sw = SquareWave(epsilon=eps)
    reports = sw.report(arr[:m] / bnd, bits)  # users 1..m  [SW20]
    fit = square_wave_distribution(reports, mechanism=sw, bins=d, smoothing=smoothing)
    plan = plan_topl_threshold(fit, bound=bnd, epsilon=eps, steps=arr.size - m, bias_weight=weight)
    theta = plan.threshold

    hm = HybridMechanism(epsilon=eps)
    t = 2.0 * np.minimum(arr[m:], theta) / theta - 1.0  # users m+1..n  [HM19]
    t_star = hm.report(np.clip(t, -1.0, 1.0), bits)
    estimates = theta * (t_star + 1.0) / 2.0
    return ToplRelease(
        values=estimates,
        threshold=theta,
        variance=theta**2 / 4.0 * hm.max_variance,
        time_lag=m,
        fit=fit,
        plan=plan,
        epsilon=eps,
        bound=bnd,
        guarantee=PrivacyGuarantee(unit=LocalDP(), budget=budget, proof=_PROOF),
        n=int(arr.size),
        seeded=seed is not None,
    )
