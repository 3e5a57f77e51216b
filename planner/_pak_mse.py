"""Mechanism 1 planned by the mean-square form of [PAK19] Eq. 16 on the data (issue 23 item 1).

:func:`plan_pak` minimises Eq. 16, a 98 % *bound*, and decides whether the threshold pays by
comparing that bound with the plain counter's. The realised error analysts see is a mean (or
a root mean square) over releases, and the two sides of the decision must be predicted on the
same footing. :func:`plan_pak_mse` predicts, for the prefix actually at hand,

* with the threshold: E[(ĉ(σ, n) − c(σ, n))²] of Mechanism 1 by
  :func:`planner.pak_mean_square_error` with ``condition=False``: the released τ integrated
  over its *whole* law; the Laplace release of c(σ, m) at ε₂; the suffix counter's exact
  variance at step n − m, :func:`mechanisms.counter_end_variance`; the clipping loss
  Σᵢ(σ(i) − τ)⁺ over the n values with the prefix's empirical distribution standing for the
  stream (mean n·E(X − τ)⁺; variance (n − m)·Var (X − τ)⁺, the prefix's own part being
  known); with λ, p from :func:`plan_pak`'s Eq. 16 optimum (Eq. 5's guarantee on the quantile
  kept) or Table I's (λ = 0.85, p = 0.005), β_lt from Eq. 16's split, Table I's 0.004 or
  ``BETA_LT_GRID`` (10⁻³ … 10⁻⁶), and r, ε₁/ε on the grid of :func:`planner.pak_defaults`
  (Table I's r = 1.5, ε₁/ε = 0.85 on it);
* without it: the counter's exact variance at step n with bound B (no clipping, no prefix
  release): the plain release's mean square error *exactly*;

and keeps the smaller. Both are mean squares of the same released value, so "the threshold
pays" means it pays in the root mean square error over releases
(``docs/results/planner_counters.md`` checks every counter against simulation).

**Range sums** (``range_length=L``, issue 23). An analyst's target is often the error of a
range sum of L steps (a day's total), ĉ(a + L) − ĉ(a), over the ranges of the released
suffix (a ≥ m), not of one prefix sum. Its mean square, averaged over the public ranges of
:func:`planner._pak_range.range_starts`, is the same form ([PAK19] Eq. 16 in mean square)
with three changes: the Laplace noise of c(σ, m) (Eq. 16's 2τ²/ε₂² term) cancels in the
difference (dropped); the suffix counter's variance at step
n − m becomes its exact mean range variance over those ranges
(:func:`planner._pak_range.counter_range_variance`, at bound 1, × τ²); and the clipping loss
is that of L values, Σ_{range}(σ(i) − τ)⁺ (mean L·E(X − τ)⁺, variance L·Var (X − τ)⁺, none
of them known). The plain alternative is the counter over all n steps with bound B, on the
same ranges; ``"auto"`` picks the counter of least mean range variance among those with an
exact one (:data:`planner._pak_range.RANGE_COUNTERS`). With c(σ, m) out of the error, ε₁/ε
is free to rise: the grid's top (0.99) is usual, c(σ, m) is then released coarsely, and the
plan is for the ranges, not for the totals.

**Why the whole law, and why β_lt is planned.** τ = r·(τ' + S·Z) falls to or below 0 with
probability ≈ β_lt·e^{−x̂_λp/S} (τ' = x̂_λp + S·G⁻¹(1 − β_lt), Laplace Z). Under [PAK19]'s clip
every value was then clipped to ~0 and the error was the whole sum Σσ; Eq. 16 leaves that
event to β_lt, a mean square cannot. Where the data's top quantile is near B (the retail
invoices: x̂_λp = 6,250 of B = 10,000, τ' ≈ 4.5·B) the threshold sits at B except for that
event, whose (Σσ)² at Table I's β_lt = 0.004 was most of the mean square (Table I's expected
RMSE 1.7–4× the plain counter's), and the plan bought safety with β_lt = 10⁻⁶. Since issue 23
:func:`mechanisms.pak_release` guards that draw by default (a released r·τ ≤ 0 is certainly
below x̂_λp ≥ 0, Eq. 8's failure, and runs at B: :func:`mechanisms.pak.mechanism_threshold`),
so the law integrated here is the guarded one: the event costs the noise at bound B, not Σσ,
and β_lt is free to take Eq. 16's value again where that predicts less. What the whole law
still sees is a positive τ below x̂_λp (a clip the released value cannot reveal), whose
probability β_lt·(1 − e^{−x̂_λp/S}) is small exactly where S ≫ x̂_λp.

**Robust against Table I.** The nominal choice is the least predicted mean square over the
grid, on which [PAK19] Table I's setting with the same counter lies, so under the model the
plan is never worse than Table I. The model's terms are not equally sure. Given τ, the Laplace
release of c(σ, m) and the suffix counter's variance are exact, and τ's law is exact given the
prefix: where nothing is clipped (τ = B) the prediction *is* the expectation on the stream
(1.000 in ``docs/results/planner_counters.md``; the Laplace and counter parts checked against
300 releases in ``planner_inverse_pak_check.md``, variance ratios 0.988 and 1.026). The one
modelled term is the clipping loss, the prefix standing for the stream: its predicted part of
the mean square was 0.93–4.7× the stream's own over the five streams × eight counters of that
table, plan and Table I settings (4.7 on the household minutes, whose first 50,000 minutes have
a heavier top tail than the year). The first version used one factor 5 both ways; it kept
Table I in 11 of the 40 cells (household and light-tailed, where the loss is over-predicted
for both settings) at a cost of 12–19 % in expected RMSE. So the plan departs from Table I
only if its gain survives that term's measured error, (u, o) = ``LOSS_MODEL_FACTOR`` =
(1.25, 5): the loss term was under-predicted by at most 1.075 and over-predicted by at most
4.7, rounded out. With the mean square split into its exact part E and its loss part L,

    E_plan + u·L_plan < E_TableI + L_TableI/o,

else it keeps Table I's setting (``departs`` False), or the plain counter where that is exact
and below Table I's bound (the plain counter has no modelled term). A gain in the exact terms
(the slow test's stream, where τ = B: predicted 0.982× Table I, the same expected on the
stream) is kept whatever its size; the realised ratio there is that expectation within
sampling (``docs/results/planner_table_i_check.md``).

*Privacy*: none. Like :func:`plan_pak` it reads the prefix (an analysis, [PAK19] §VI-B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms import ParameterError, counter_end_variance

from ._pak_defaults import (
    LOSS_MODEL_FACTOR,
    PAPER_DEFAULTS,
    R_GRID,
    SHARE_GRID,
    _full_law,
    _threshold_law,
    pak_mean_square_error,
)
from ._pak_plan import ANALYSIS_NOTE, PakPlan, plan_pak
from ._pak_range import QUERIES, counter_range_variance, range_inputs

__all__ = [
    "BETA_LT_GRID",
    "LOSS_MODEL_FACTOR",
    "PakMsePlan",
    "empirical_loss",
    "pak_rmse_quantile",
    "plan_pak_mse",
]

#: β_lt values the plan tries besides Eq. 16's and Table I's (module notes).
BETA_LT_GRID = (1e-3, 1e-4, 1e-5, 1e-6)
_COARSE = 5
#: pak_rmse_quantile leaves τ's lowest (1 − q)/(_RARE·N) out of the moments (its notes).
_RARE = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PakMsePlan:
    """Mechanism 1's parameters of least predicted mean square error, or the plain counter."""

    use_threshold: bool
    """True: Mechanism 1 with the threshold; False: the plain counter with bound B."""
    r: float
    """Multiplier r of the threshold (1 without it)."""
    lam: float
    """λ (1 without the threshold)."""
    p: float
    """Tail probability p."""
    eps1_share: float
    """ε₁/ε (0 without the threshold)."""
    beta_lt: float
    """β_lt of the threshold's calibration."""
    counter: str
    """The continual counter (resolved name)."""
    rmse: float
    """Predicted root mean square error of ĉ(σ, n) (of the chosen option)."""
    threshold_rmse: float
    """Predicted RMSE with the best threshold setting (inf if none is admissible)."""
    plain_rmse: float
    """RMSE of the plain counter at step n: √(its exact variance)."""
    baseline_rmse: float
    """RMSE of the paper's BT with bound B at step n (its exact variance): the baseline of
    [PAK19]'s improvement factor, on the same footing as ``rmse``."""
    epsilon: float
    """Total ε."""
    delta: float
    """δ."""
    n: int
    """Stream length n."""
    time_lag: int
    """m, the prefix length."""
    bound: float
    """Public bound B."""
    noise: str
    """Noise of the threshold."""
    eq16: PakPlan
    """The Eq. 16 plan λ, p, β_lt come from."""
    private: bool = False
    """Always False: the plan reads the prefix."""
    note: str = ANALYSIS_NOTE
    """Why the plan is not private."""
    range_length: int | None = None
    """L: the plan is for range sums of L steps of the suffix (module notes); None: for c(σ, n)."""
    queries: int = QUERIES
    """How many public ranges of L steps the range error averages over."""
    table_i_rmse: float = math.inf
    """Predicted RMSE of [PAK19] Table I's setting with the same counter (r = 1.5, λ = 0.85,
    ε₁/ε = 0.85, p = min(0.005, p_max), β_lt = min(0.004, β/5)), by the same terms; inf where
    it is not admissible (κ ≤ 0, or m·p_max < 2)."""
    departs: bool = True
    """False: the plan *is* Table I's setting, kept because no other setting's predicted gain
    exceeded the model's error (module notes, "Robust against Table I")."""

    @property
    def quantity(self) -> str:
        """What ``rmse`` is of: ``"c(σ, n)"`` (n the number) or ``"range sum of L steps"``."""
        if self.range_length is None:
            return f"c(σ, {self.n})"
        return f"range sum of {self.range_length} steps"

    @property
    def improvement_factor(self) -> float:
        """Predicted IF in root mean square: ``baseline_rmse / rmse`` (the realised IF of
        :func:`planner.predicted_vs_realised` is a ratio of mean errors, which for a normal-like
        error is the same ratio)."""
        return self.baseline_rmse / self.rmse

    def release_parameters(self) -> dict:
        """Keyword arguments of :func:`mechanisms.pak_release` that realise this plan."""
        if not self.use_threshold:
            return {"threshold": False, "noise": self.noise, "counter": self.counter}
        return {
            "threshold": True,
            "r": self.r,
            "lam": self.lam,
            "p": self.p,
            "eps1_share": self.eps1_share,
            "beta_lt": self.beta_lt,
            "noise": self.noise,
            "counter": self.counter,
        }

    def parameters(self) -> dict:
        """The plan as plain values (JSON)."""
        return {
            "use_threshold": self.use_threshold,
            "r": self.r,
            "lam": self.lam,
            "p": self.p,
            "eps1_share": self.eps1_share,
            "beta_lt": self.beta_lt,
            "counter": self.counter,
            "time_lag": self.time_lag,
            "threshold_rmse": self.threshold_rmse,
            "plain_rmse": self.plain_rmse,
            "baseline_rmse": self.baseline_rmse,
            "improvement_factor": self.improvement_factor,
            "quantity": self.quantity,
            "range_length": self.n if self.range_length is None else self.range_length,
            "table_i_rmse": self.table_i_rmse,
            "departs_from_table_i": self.departs,
        }


def empirical_loss(values: np.ndarray, n: int, *, known: int = 0):
    """``loss(τ)`` → (mean, variance) of Σᵢ(σ(i) − τ)⁺ over n values drawn like ``values``.

    ``known``: how many of the n values are ``values`` themselves (the prefix the plan reads,
    clipped by the release too): their part of the loss is known, so only the other n − known
    values add variance. The mean is n·E(X − τ)⁺ either way.
    """
    srt = np.sort(np.asarray(values, dtype=np.float64))
    s1 = np.concatenate((np.cumsum(srt[::-1])[::-1], [0.0]))
    s2 = np.concatenate((np.cumsum((srt * srt)[::-1])[::-1], [0.0]))
    size = srt.size
    free = n - known

    def loss(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = np.asarray(tau, dtype=np.float64)
        idx = np.searchsorted(srt, t, side="right")
        count = size - idx
        e1 = (s1[idx] - count * t) / size  # E(X − τ)⁺
        e2 = (s2[idx] - 2.0 * t * s1[idx] + count * t * t) / size  # E((X − τ)⁺)²
        return n * e1, free * np.maximum(e2 - e1 * e1, 0.0)

    return loss


def _robust_choice(
    chosen: tuple[float, float],
    table: tuple[float, float],
    plain: float,
    factor: tuple[float, float],
) -> str:
    """``"chosen"``, ``"plain"`` or ``"table"`` (module notes, "Robust against Table I").

    ``chosen`` and ``table`` are (exact, loss) parts of the predicted mean square of the
    nominal plan and of Table I's setting (the plain counter's is (plain, 0): no modelled
    term); ``factor`` = (under, over), how far the loss term may be under- and over-predicted.
    The chosen setting is kept if its mean square with its loss term ×under is below Table I's
    with its loss term ÷over; else the plain counter if it is below that, else Table I's.
    """
    under, over = factor
    floor = table[0] + table[1] / over  # Table I's least mean square under the loss's error
    if chosen[0] + under * chosen[1] < floor:
        return "chosen"
    return "plain" if plain < floor else "table"


def _no_loss(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A clipping loss of 0 (the exact part of the mean square, :func:`plan_pak_mse`)."""
    zero = np.zeros(np.shape(tau))
    return zero, zero


def plan_pak_mse(
    prefix: object,
    *,
    n: int,
    bound: float,
    epsilon: float,
    delta: float,
    beta: float = 0.02,
    p_max: float = 0.005,
    noise: str = "laplace",
    counter: str = "auto",
    range_length: int | None = None,
    queries: int = QUERIES,
) -> PakMsePlan:
    """Choose Mechanism 1's parameters, or the plain counter, by predicted mean square error.

    Parameters
    ----------
    prefix
        The first m values (**private data**: the plan depends on them).
    n, bound, epsilon, delta, beta, p_max, noise
        As for :func:`plan_pak` (β and p_max only shape Eq. 16's λ, p, β_lt).
    counter
        A name of :data:`mechanisms.COUNTERS` or ``"auto"`` (the smallest exact variance at
        step n − m, as :func:`plan_pak`); the same counter serves the plain alternative.
    range_length, queries
        None (default): the error of c(σ, n). L: the root mean square error of a range sum of
        L steps of the suffix, ĉ(a + L) − ĉ(a), over ``queries`` public ranges with a ≥ m
        (module notes; 1 ≤ L ≤ n − m, and ``counter`` one of
        :data:`planner._pak_range.RANGE_COUNTERS` or ``"auto"``).

    Returns
    -------
    PakMsePlan

    Notes
    -----
    Module notes. The grid of r and ε₁/ε is that of :func:`planner.pak_defaults`
    (``R_GRID``, ``SHARE_GRID``); shares at which κ ≤ 0 (Eq. 11) are skipped.
    """
    if counter is None:
        raise ParameterError(
            "The 'counter' parameter of plan_pak_mse must name a counter or be 'auto'. Got "
            "None instead (the paper's tree bound has no exact variance)."
        )
    values = np.asarray(prefix, dtype=np.float64).ravel()
    m = values.size
    span = None
    if range_length is not None:
        span = range_inputs(counter, n, m, range_length, queries, epsilon, delta)
        counter = span["counter"]
    eq16 = plan_pak(
        prefix, n=n, bound=bound, epsilon=epsilon, delta=delta, beta=beta, p_max=p_max,
        noise=noise, counter=counter,
    )  # fmt: skip
    name = eq16.counter
    if span is None:
        plain = counter_end_variance(name, n, epsilon=epsilon, bound=bound, delta=delta)
        baseline = counter_end_variance("binary_tree", n, epsilon=epsilon, bound=bound,
                                        delta=delta)  # fmt: skip
        query = {}
        loss = empirical_loss(values, n, known=m)
    else:  # ranges of L steps of the suffix, on the same public ranges for both options

        def ranges(c: str, steps: int, first: int, b: float) -> float:
            return counter_range_variance(
                c, steps, span["L"], epsilon=epsilon, bound=b, delta=delta, first=first,
                queries=span["Q"],
            )  # fmt: skip

        plain, baseline = ranges(name, n, m, bound), ranges("binary_tree", n, m, bound)
        query = {"counter_variance": ranges(name, n - m, 0, 1.0), "prefix_noise": False}
        loss = empirical_loss(values, span["L"])
    best = (math.inf, 1.0, 0.0)
    terms = eq16.terms
    lam = p = beta_lt = math.nan
    # (λ, p) from Eq. 16's optimum and Table I's; β_lt from Eq. 16's split, Table I's and
    # BETA_LT_GRID (module notes: the mean square over τ's whole law, where β_lt is the
    # probability of the rare τ near 0, chooses it), so that under its own model the plan is
    # never worse than Table I's setting with the same counter
    table = (PAPER_DEFAULTS["lam"], min(PAPER_DEFAULTS["p"], p_max))
    pairs = [table] if terms is None else [(terms.lam, terms.p), table]
    betas = [min(PAPER_DEFAULTS["beta_lt"], 0.2 * beta), *BETA_LT_GRID]
    if terms is not None:
        betas.insert(0, terms.beta_shares["lt"] * beta)
    settings = [(lam_, p_, b_) for lam_, p_ in pairs for b_ in dict.fromkeys(betas)]

    def search(setting: tuple[float, float, float], shares: np.ndarray) -> None:
        nonlocal best, lam, p, beta_lt
        for share in shares:
            try:
                mse = pak_mean_square_error(
                    values, n=n, bound=bound, epsilon=epsilon, delta=delta, r=R_GRID,
                    eps1_share=float(share), lam=setting[0], p=setting[1],
                    beta_lt=setting[2], counter=name, loss=loss, noise=noise, condition=False,
                    **query,
                )  # fmt: skip
            except ParameterError:  # κ ≤ 0 at this ε₁ (Eq. 11), or no admissible rank
                continue
            i = int(np.argmin(mse))
            if mse[i] < best[0]:
                best = (float(mse[i]), float(R_GRID[i]), float(share))
                lam, p, beta_lt = setting

    # every setting on every 5th share of SHARE_GRID, then the best one's neighbourhood on the
    # whole grid (the mean square is smooth in ε₁/ε; this keeps a plan to ~2 s at m = 50,000)
    for setting in settings if m * p_max >= 2.0 else []:
        search(setting, SHARE_GRID[::_COARSE])
    if math.isfinite(best[0]):
        near = np.abs(SHARE_GRID - best[2]) < _COARSE * 0.01 - 1e-9
        search((lam, p, beta_lt), SHARE_GRID[near])
    use = best[0] < plain
    threshold_rmse = math.sqrt(best[0])

    def parts(setting: tuple[float, float, float, float, float]) -> tuple[float, float]:
        """(exact, loss): the predicted mean square at (r, ε₁/ε, λ, p, β_lt) without the
        clipping loss (τ's law, c(σ, m)'s Laplace and the counter, exact given τ) and the
        clipping loss's part (the one term modelled from the prefix)."""
        keys = dict(zip(("r", "eps1_share", "lam", "p", "beta_lt"), setting, strict=True))
        common = dict(n=n, bound=bound, epsilon=epsilon, delta=delta, counter=name,
                      noise=noise, condition=False, **keys, **query)  # fmt: skip
        total = float(pak_mean_square_error(values, loss=loss, **common)[0])
        exact = float(pak_mean_square_error(values, loss=_no_loss, **common)[0])
        return exact, max(total - exact, 0.0)

    # Robust against Table I (module notes): its setting with the same counter, scored by the
    # same terms, is kept unless the plan's gain survives the loss term's measured error
    table_setting = (PAPER_DEFAULTS["r"], PAPER_DEFAULTS["eps1_share"], *table,
                     min(PAPER_DEFAULTS["beta_lt"], 0.2 * beta))  # fmt: skip
    table_parts = (math.inf, 0.0)
    if m * p_max >= 2.0:
        try:
            table_parts = parts(table_setting)
        except ParameterError:  # κ ≤ 0 at Table I's ε₁ (Eq. 11): not a candidate
            pass
    table_mse = sum(table_parts)
    departs = True
    if math.isfinite(table_mse):
        chosen = (best[1], best[2], lam, p, beta_lt)
        if use and np.allclose(chosen, table_setting, rtol=1e-12, atol=0.0):
            departs = False
        else:
            which = _robust_choice(
                parts(chosen) if use else (plain, 0.0), table_parts, plain, LOSS_MODEL_FACTOR
            )
            if which == "plain":
                use = False
            elif which == "table":
                departs, use = False, True
                best = (table_mse, table_setting[0], table_setting[1])
                lam, p, beta_lt = table_setting[2:]
    common = dict(
        counter=name, threshold_rmse=threshold_rmse, plain_rmse=math.sqrt(plain),
        baseline_rmse=math.sqrt(baseline),
        epsilon=float(epsilon), delta=float(delta), n=int(n), time_lag=m, bound=float(bound),
        noise=noise, eq16=eq16, range_length=None if span is None else span["L"],
        queries=QUERIES if span is None else span["Q"], table_i_rmse=math.sqrt(table_mse),
        departs=departs,
    )  # fmt: skip
    if use:
        return PakMsePlan(
            use_threshold=True, r=best[1], lam=lam, p=p, eps1_share=best[2], beta_lt=beta_lt,
            rmse=math.sqrt(best[0]), **common,
        )  # fmt: skip
    return PakMsePlan(
        use_threshold=False, r=1.0, lam=1.0, p=p_max, eps1_share=0.0,
        beta_lt=beta_lt if math.isfinite(beta_lt) else 0.0, rmse=math.sqrt(plain), **common,
    )  # fmt: skip


def pak_rmse_quantile(
    prefix: object, plan: PakMsePlan, *, releases: int, confidence: float
) -> tuple[float, float]:
    """(RMSE, its ``confidence`` quantile over ``releases`` releases) of ``plan`` on its model.

    The root mean square error of N independent releases of ĉ(σ, n), √(Σₖ eₖ²/N), is itself
    random. With the plan's model, given τ the error is e = −L(τ) + Λ + G. L(τ) is the clipping
    loss: its mean is ``empirical_loss``'s and its variance joins G. Λ is the Laplace noise of
    c(σ, m), with variance 2τ²/ε₂² and fourth moment 6·Var². G is the suffix counter's noise
    plus the loss's variance, taken as normal (fourth moment 3·Var²). So E[e²] and E[e⁴] are
    exact given τ, and integrated over τ's whole law as :func:`plan_pak_mse` does. The mean of
    N squared errors is then approximated by a scaled χ² with the same two moments
    (Satterthwaite: M₂·χ²_k/k, k = 2N·M₂²/Var(e²)). The plain counter's error is normal with
    mean 0, so k = N. The rare τ near 0 (probability p_t) would dominate E[e⁴] without being
    seen in N releases. So the lowest (1 − q)/(10·N) of τ's law is taken out of the moments
    and counted as an exceedance: the quantile is that of the rest at q/(1 − p_t)^N (the whole
    law's χ² if that is ≥ 1). The first value returned is √M₂ over the whole law, the plan's
    predicted RMSE. ``prefix`` is the plan's prefix (**data** when the plan read data).
    """
    from scipy.stats import chi2

    from mechanisms import pak_threshold_calibration

    owner = "pak_rmse_quantile"
    if plan.range_length is not None:
        raise ParameterError(
            f"The 'plan' argument of {owner} must be a plan for c(σ, n) (range_length=None): "
            "the quantile is that of one query per release; a range-sum plan already averages "
            f"over {plan.queries} ranges per release. Got range_length={plan.range_length}."
        )
    if isinstance(releases, bool) or not isinstance(releases, int | np.integer) or releases < 1:
        raise ParameterError(
            f"The 'releases' parameter of {owner} must be an int >= 1. Got {releases!r} instead."
        )
    q = float(confidence)
    if not 0.0 < q < 1.0:
        raise ParameterError(
            f"The 'confidence' parameter of {owner} must be a float in (0, 1). Got "
            f"{confidence!r} instead."
        )
    n, eps, bound = plan.n, plan.epsilon, plan.bound
    if not plan.use_threshold:
        m2 = plan.plain_rmse**2
        k = float(releases)  # e ~ N(0, var): the mean of N squares is var·χ²_N/N
    else:
        values = np.asarray(prefix, dtype=np.float64).ravel()
        cal = pak_threshold_calibration(
            values, bound=bound, epsilon=plan.eps1_share * eps, delta=plan.delta, lam=plan.lam,
            p=plan.p, beta_lt=plan.beta_lt, noise=plan.noise,
        )  # fmt: skip
        theta, weight = _threshold_law(cal, np.array([[plan.r]]), bound, plan.noise, True)
        tau, w = theta[0], weight[0]  # the guarded law of plan_pak_mse, θ = B at its two ends
        v = counter_end_variance(plan.counter, n - plan.time_lag, epsilon=eps, bound=1.0,
                                 delta=plan.delta)  # fmt: skip
        mean, lvar = empirical_loss(values, n, known=values.size)(tau)
        lap = 2.0 * (tau / ((1.0 - plan.eps1_share) * eps)) ** 2
        gauss = tau**2 * v + lvar
        var = lap + gauss
        e2 = mean**2 + var
        e4 = mean**4 + 6.0 * mean**2 * var + 6.0 * lap**2 + 6.0 * lap * gauss + 3.0 * gauss**2
        rmse = math.sqrt(float(e2 @ w))
        # the lowest tail of the part where θ moves (its nodes come first, u ascending, θ too);
        # the two point masses at θ = B (r·τ ≤ 0, guarded, and r·τ ≥ B) are never rare
        u_mid, _ = _full_law()
        inner = np.concatenate((u_mid * weight[0, :-2].sum(), [np.inf, np.inf]))
        rare = inner < (1.0 - q) / (_RARE * releases)
        p_t = float(w[rare].sum())
        q_bulk = q / (1.0 - p_t) ** releases
        if q_bulk < 1.0:
            w = np.where(rare, 0.0, w) / (1.0 - p_t)
            q = q_bulk
        m2, m4 = float(e2 @ w), float(e4 @ w)
        k = 2.0 * releases * m2**2 / max(m4 - m2**2, 1e-300 * m2**2)
        return rmse, math.sqrt(m2 * float(chi2.ppf(q, k)) / k)
    return math.sqrt(m2), math.sqrt(m2 * float(chi2.ppf(q, k)) / k)
