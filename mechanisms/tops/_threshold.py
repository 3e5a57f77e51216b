"""ToPS threshold optimizer: a private θ from the first m values ([ToPS21] §4; tops-notes §1).

Score. Over a public grid of candidates θ₁ < … < θ_G the score of a candidate is

    q(θ) = −m_θ − κ·θ,     m_θ = #{ i ≤ m : vᵢ > θ },
    κ = (3m / (c·r·ε_r))·√(2·(F − 1)·h³),   h = ⌊log_F r⌋ + 1,

with r = n − m the steps the perturber will release, ε_r its budget, F its fan-out and c = 60
([ToPS21]'s constant). −m_θ stands for the truncation bias of θ and κθ for the noise θ brings to
the hierarchy, in "truncated values" units. θ is in the values' own units, as in the authors'
code: κθ is therefore not unit-free (c acts as the typical excess of a truncated value, in those
units); with other units pass a different ``c``. q depends on the data through m_θ only.

Candidate grid (public). ``candidates=G`` (an int, default 1024) gives θⱼ = B·j/G, j = 1..G;
``candidates=int(B)`` is the integer grid {1, …, B} for integer-valued data; an explicit
increasing array of values in (0, B] is also accepted. θ = 0 is never a candidate (a zero
threshold releases nothing but noise scale 0).

Selection.

* ``"laplace"`` (default): report-noisy-max, argmaxⱼ q(θⱼ) + Zⱼ with Zⱼ i.i.d. lattice Laplace of
  sensitivity 1 (scale (1 + γ)/ε) from :class:`~mechanisms.LaplaceNoise`;
* ``"exponential"``: the exponential mechanism, P(j) ∝ exp(ε·q(θⱼ)), sampled by inverting its
  CDF at one 53-bit uniform of the secure source (:func:`~mechanisms.uniform_open`); the
  probabilities are computed in double precision (relative error ≈ 2⁻⁵², which we document
  rather than hide, as for the noise module).

Why the selection drifts upwards, and the correction (issue 14)
----------------------------------------------------------------
Neither the grid nor tie-breaking is the cause (ties have probability ~0 under lattice noise
over G distinct scores; the grid only bounds the drift at B). The cause is the shape of q
around its peak θ*: below θ*, m_θ climbs into the bulk of the data and q falls by m·f(θ) − κ
per unit θ (hundreds per kW on the household minutes); above θ*, m_θ is nearly flat and q
falls by at most κ per unit θ (8.8 per kW at ε_r = 0.05, 0.44 at ε_r = 1). Against score noise
of scale 1/ε every candidate within ~1/(ε·κ) above θ* is about as likely as θ*, few below it
are: the selection is θ* plus a one-sided, roughly exponential overshoot of mean ≈ 1/(εκ)
(2.3 kW at ε = ε_r = 0.05; measured 2.0), truncated at B.

``correction="overshoot"`` (default) removes it by post-processing the released index: model
the selection given a peak θ_t as the exponential mechanism on q(θ) = q(θ_t) − κ(θ − θ_t) for
θ ≥ θ_t (the flat side; the steep side is ignored), whose mean is
μ(t) = Σ_{k ≥ t} θ_k e^{−εκθ_k} / Σ_{k ≥ t} e^{−εκθ_k} (public: grid, ε, κ), and release θ_t
with μ(t) nearest the selected θ (moment matching: the mean released θ then sits at θ*). Three
public guards, because the loss is not symmetric (a θ in the bulk of the data truncates every
value, a θ too high only adds noise ∝ θ²):

* identifiability: only when εκ·(θ_G − θ_t) ≥ ``GATE`` = 4 (the overshoot's tail fits below the
  largest candidate, so μ(t) − θ_t ≈ 1/(εκ) and μ is invertible with slope ≈ 1). Otherwise the
  selection is nearly uniform over [θ*, B] and moment matching would release thresholds near 0;
* spread: never below 2/(εκ) (the correction, and its spread 1/(εκ), stay within half of θ);
  a correction that would go below is stopped there;
* asymmetry (issue 23): only when ε·κ·c ≥ ``STEEP`` = 8. The overshoot model treats the side
  below θ* as a wall. Under the score's own model of the tail (κ is the data's density m·f(θ*)
  at the peak, c the typical excess of a truncated value, so m_θ ≈ κc·e^{−(θ−θ*)/c}) the score
  falls below θ* by κc(e^{d/c} − 1 − d/c) at a distance d, so against noise 1/ε the selection
  spreads *below* θ* by about c·√(2/(εκc)) as well: the wall holds only when εκc is large. When
  the selection's own budget is tiny that downward spread is a sizeable part of c, the scale on
  which the truncation bias grows e-fold below θ*, while a θ too high only adds noise ∝ θ²:
  the expected error over the selection's *distribution* then rises steeply if θ is moved
  down, and the selection is released as is. At εκc = 8 the downward spread is c/2. The
  guard is unit-free: κc = (3m/(r·ε_r))·√(2(F − 1)h³) does not depend on c, and under the same
  model it is m_θ*, the number of prefix values the score's peak truncates; so it reads "the
  score noise 1/ε is at most 1/8 of the count the peak truncates". Measured
  on whole-minute durations (c = 60 is their tail's scale) at ε_θ = 0.01, ε_r = 0.05 (εκc =
  2.3): the correction moved θ to 309 ± 43 min (q10 263) where the MSE-optimal θ is ≈ 406, and
  lost 3.3× to the authors' uncorrected code (``docs/results/tops_authors_minutes.md``).

Where none applies the selected θ is released as is and the drift stays: the score cannot
tell the candidates apart there, and only a larger ε_θ (or a steeper score) helps. Measured on
the household minutes (``docs/results/tops_rule.md``). ``correction="none"`` releases the
selection.

A scale-free score (issue 23; ``ToPSStream``'s default ``score="scale_free"``)
---------------------------------------------------------------------------------
c is in the values' units, so the paper's score depends on them: on whole-minute durations
(c = 60 min is their tail's scale) its peak truncates κc = K₀ values as designed, but on the
household minutes (kW, whose tail beyond 6 kW has a mean excess of 0.5–0.9 kW) c = 60 "kW"
makes the tilt κθ so shallow that at ε_θ ≤ 0.02 the selection is spread over [θ*, B]
(εκB = 3.2 at ε_θ = 0.01: θ ≈ 17 kW against 6.9 of least predicted error). K₀ = κc =
(3m/(r·ε_r))·√(2(F − 1)h³) itself is unit-free: under the score's exponential-tail model,
m_θ = m·e^{−θ/c}, the peak (count density m_θ/c = κ) is the point that truncates K₀ values,
θ* = c·ln(m/K₀), *whatever the scale c*. The scale an exponential tail peaking at θ would have
is therefore c(θ) = θ/ln(m/K₀), and the score with the paper's constant replaced by it,

    q_sf(θ) = −m_θ − K₀·ln(m/K₀)·ln θ      (its tilt's slope at θ is K₀/c(θ) = κ at c = c(θ)),

peaks, on every exponential tail, exactly where the paper's score with the *right* c peaks; it
does not change when the values are rescaled (ln θ moves by a constant). The tilt is public
(m, r, ε_r, F), so q_sf has sensitivity 1 and is monotone, as q: the same selection, the same
proof.

Where its model fails. ln θ has no floor: lowering θ from θ₁ to θ₁/2 costs as much tilt as from
B/2 to B, while the noise it saves is tiny, so with few values above the smallest candidates
the score can prefer a θ near 0 (a prefix of 200 values: the tilt's range K₀ln(m/K₀)·ln G
= 409 exceeds every count). So it is used only where that range is at most m/2, and K₀ < m
(public: m, r, ε_r, F, the grid); elsewhere the paper's score is (``score`` on the release
says which). A prefix mostly of zeros keeps that risk: the count that matters is then that
of the values above the smallest candidate θ₁, which is private (measured on the durations
with 90 % of the values set to 0: the scale-free peak is θ₁ = 1.4 min, 360× the paper's
predicted error). So the scale-free score buys that count first, with ``GUARD_SHARE`` = 1/10
of the selection's ε (Laplace, sensitivity 1), and is used only if the released count is at
least ``GUARD_RATIO`` = 2 times the tilt's range, so the positive values outweigh everything
the tilt can reward by going down (the paper's score with the remaining 9/10 otherwise). At
ε_θ = 0.01 the count's noise scale is 1,000 against ranges of 11,000–18,000 on the benchmark
streams (65,000 positive values; 6,500 with 90 % zeros). *Privacy*: sequential composition on
the prefix, ε/10 for the count and 9ε/10 for the selection given it: ε in all.
On the durations the two peaks coincide (θ* = 315); on the household minutes q_sf peaks at
≈ 6.5 kW, and its slope there (≈ 390 per kW at ε_r = 0.05) keeps the selection within a few
tenths of a kW of the peak even at ε_θ = 0.01. The overshoot correction models a linear tilt
and is not applied to it; the lift below is, with the local slope K₀·ln(m/K₀)/θ₁.

When each score is used (``ToPSStream``'s default ``threshold_score="auto"``). The scale-free
score assumes the tail is exponential *near its peak* (c(θ) = θ/ln(m/K₀)); on heavier tails
the mean excess above θ is larger (θ/(α − 1) for a Pareto tail) and it peaks too low: on a
lognormal(2, 1) prefix (B = 10³) its predicted error is 1.9× the paper's at ε = 1 and 1.8×
at ε = 0.05, on a Pareto(2.5) one 4.4× at ε = 1 (after the lift, 20 selections each). Where the
paper's c is in the values' units its score is the better default. Whether it is can be read
from public inputs: the paper's own model puts its peak at c·ln(m/K₀) (324 at m = 2¹⁶,
ε_r = 0.05, c = 60), which must lie below B. ``"auto"`` uses the paper's score when
c·ln(m/K₀) ≤ B, else the scale-free one (:func:`auto_score`). On the household minutes (B = 36
kW) c·ln(m/K₀) = 290 > B: scale-free. On the durations (B = 1,440 min), the lognormal and the
Pareto prefixes above: the paper's.

Lifting the peak to the least predicted error (issue 23; ``ToPSStream``'s default ``"mse"``)
---------------------------------------------------------------------------------------------
The score is [ToPS21]'s linearisation of its own error model: the authors' code
(``NMMSE.my_plot``) plots the root MSE √(Nθ² + (r/(3m)·Σ(v − θ)⁺)²) that q(θ) stands for, with
the truncation bias Σ(v − θ)⁺ ≈ c·m_θ and N = 2(F − 1)h³/ε_r², the noise of the unpruned
tree without consistency. Its peak θ* (count density κ) is therefore not the θ of least error:
(i) the sum a + b of the two roots replaces √(a² + b²), and (ii) the pruned, consistent tree
the perturber releases has far less noise per θ² than N (N is 55× the least public error of
the shapes per θ² at r = 2²⁰, ε_r = 0.05, m = 2¹⁶; 25× at ε_r = 1). Both push the peak below
the least error when the tail above it is long (whole-minute durations: θ* = 315, least
predicted error at θ ≈ 406 and 3× lower).

``mse_index`` post-processes the released index with the score's own model of the tail and
public inputs only:

* *tail scale*: the model is an exponential tail of scale c, m_θ = m·e^{−θ/c}, whose score
  peaks where its count density m_θ/c equals κ, at θ* = c·ln(m/(κc)). Solving that for c at
  the released θ₁ gives the scale the release implies (:func:`implied_scale`; unit-free:
  58 min at the durations' peak 315 (ε_r = 0.05) and 57 min at 477 (ε_r = 1), where the truth
  is 60; 0.7–1 kW at the household minutes' peak ≈ 8.7–9.3 kW);
* *error*: above θ₁ the model's tail is m_θ = κc·e^{−(θ−θ₁)/c} with mean excess c, so the
  predicted range-query error is MSE(θ) = n·θ² + E[ℓ²]·(c·m_θ/m)², n the least public error
  of the tree shapes per θ² (``mechanisms.tops._shape.public_error``, noise, partial noise and
  block 0 included) and E[ℓ²] the mean squared length of a uniform random range (the
  evaluation metric of [ToPS21]);
* *release*: the candidate ≥ θ₁ of least predicted MSE. Never below θ₁: below the peak the
  model says nothing about the bulk of the data, where the bias grows fastest (the asymmetry
  above); so θ only moves up, and only by what the model's noise cost n·θ² allows.

The default of :class:`~mechanisms.ToPSStream` applies it after the selection (``"mse"``;
after the overshoot correction) **where the paper's score was used**; :func:`tops_threshold`
alone does not know the tree and offers ``"overshoot"`` and ``"none"``. Measured in
``docs/results/tops_authors_minutes.md`` and ``tops_authors_household.md``.

Why not after the scale-free score. There the scale c is not known in the values' units but
read off θ₁ alone, c(θ₁) = θ₁/ln(m/K₀), and on the one real stream where ``"auto"`` picks that
score (the household minutes, kW) the tail above the peak is shorter than the model's: the lift
moved θ from 6.3–8.2 to 7.8–8.7 kW and the range-query MSE rose 1.14× (ε_θ = ε_r = 1), 1.38×
(ε_θ = 0.01, ε_r = 0.05), 1.37× (0.05, 0.05) and 1.18× (0.1, 0.05), against 0.70, 0.37, 0.38
and 0.40× on the durations, where the paper's score is used (30 runs each, the bench's seeds and
ranges; ``threshold_correction="none"`` as the reference, session 9). The scale-free score's
peak already sits where the exponential model's least error would put it on its own scale, so
its selection is released as is.

Heavy tails (issue 23, session 10). The lift's exponential model is right on exponential
tails (the implied c₁ is 58–61 min on ⌊Exp(60)⌋ durations) and too short on heavy ones: the
real mean excess above θ₁ is 2.1–2.5× c₁ on a lognormal(2, 1) prefix, 4.5–8.1× on a Pareto(2.5)
one and 4.5× on the bundled retail invoices (it grows with θ), and on the invoices at
ε_r = 0.05 θ₁ > m/(κe), where no exponential tail peaks (no lift). The release then stays
2–64× above the planner's least predicted error there. Lifts reading a released tail
statistic were simulated and not adopted (``docs/results/tops_heavy_tails.md``): power laws
fitted to noisy counts lose up to 15× on exponential tails; the measured mean excess above θ₁
is safe but resolvable only on the retail invoices (≈ 2.2×) and its budget share costs up to
4 % on exponential tails.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import ParameterError
from ..core._noise import LaplaceNoise
from ..core._random import BitSource, uniform_open
from ..core._record import PrivacyRecord
from ..core._results import summary_text, table_frame
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_choice,
    check_integer,
    check_ledger,
    check_noise_range,
    check_positive,
    check_seed,
    check_stream,
)

__all__ = [
    "CORRECTIONS",
    "GUARD_RATIO",
    "GUARD_SHARE",
    "SCORES",
    "auto_score",
    "THRESHOLD_METHODS",
    "TopsThresholdRelease",
    "mse_index",
    "tops_candidates",
    "tops_kappa",
    "tops_scores",
    "tops_threshold",
]

#: Selection mechanisms of the threshold optimizer.
THRESHOLD_METHODS = ("laplace", "exponential")
#: Post-processing of the selected index (module notes).
CORRECTIONS = ("overshoot", "none")
#: Scores of the selection: [ToPS21]'s −m_θ − κθ, and the scale-free −m_θ − K₀ln(m/K₀)ln θ.
SCORES = ("paper", "scale_free")
#: Share of the selection's ε the scale-free score's guard (a count) spends.
GUARD_SHARE = 0.1
#: The scale-free score needs at least this many times its tilt range of values above θ₁.
GUARD_RATIO = 2.0
#: Smallest εκ·(θ_G − θ_t) at which the overshoot correction is applied (module notes).
GATE = 4.0
#: Smallest ε·κ·c at which the overshoot correction is applied (module notes, asymmetry).
STEEP = 8.0
#: Default number of grid candidates B·j/G.
DEFAULT_GRID = 1024
#: [ToPS21]'s constant c in κ.
DEFAULT_C = 60.0
#: Largest grid accepted (scores and noise are O(G) per selection).
_MAX_GRID = 1 << 22
#: Largest time lag / horizon (steps stay exact in a double) and fan-out accepted.
_MAX_STEPS = 1 << 52
_MAX_FANOUT = 1 << 20
_PROOF = {
    "laplace": "[ToPS21] threshold optimizer; report-noisy-max with Laplace(1/ε) on monotone "
    "sensitivity-1 scores (Dwork & Roth 2014, Claim 3.9)",
    "exponential": "[ToPS21] threshold optimizer; exponential mechanism exp(ε·q) on monotone "
    "sensitivity-1 scores (McSherry & Talwar 2007, Thm. 6, monotone case)",
}


def _levels_of(r: int, fanout: int) -> int:
    """h = ⌊log_F r⌋ + 1, the number of base-F digits of r (exact integer arithmetic)."""
    h, x = 0, r
    while x:
        x //= fanout
        h += 1
    return h


def tops_kappa(
    *, time_lag: int, horizon: int, epsilon_perturb: float, fanout: int = 16, c: float = DEFAULT_C
) -> float:
    """κ = (3m/(c·r·ε_r))·√(2(F − 1)h³), h = ⌊log_F r⌋ + 1 (module notes; public inputs only)."""
    owner = "tops_kappa"
    m = check_integer(time_lag, "time_lag", owner, maximum=_MAX_STEPS)
    r = check_integer(horizon, "horizon", owner, maximum=_MAX_STEPS)
    eps = check_positive(epsilon_perturb, "epsilon_perturb", owner)
    f = check_integer(fanout, "fanout", owner, minimum=2, maximum=_MAX_FANOUT)
    cc = check_positive(c, "c", owner)
    h = _levels_of(r, f)
    return 3.0 * m / (cc * r * eps) * float(np.sqrt(2.0 * (f - 1) * h**3))


def tops_candidates(bound: float, candidates: object = None) -> np.ndarray:
    """The public candidate grid (module notes): B·j/G for an int G, or an explicit array."""
    owner = "tops_candidates"
    bnd = check_positive(bound, "bound", owner)
    if candidates is None:
        candidates = DEFAULT_GRID
    if isinstance(candidates, Integral) and not isinstance(candidates, bool):
        g = check_integer(candidates, "candidates", owner, maximum=_MAX_GRID)
        grid = bnd * np.arange(1, g + 1, dtype=np.float64) / g
        grid[-1] = bnd
    else:
        try:
            grid = np.array(candidates, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise ParameterError(
                f"The 'candidates' parameter of {owner} must be an int G (grid B·j/G) or an "
                f"increasing array of thresholds. Got {type(candidates).__name__} instead."
            ) from None
        if (
            grid.ndim != 1
            or not 1 <= grid.size <= _MAX_GRID
            or not np.all(np.isfinite(grid))
            or np.any(grid <= 0)
            or np.any(grid > bnd)
            or np.any(np.diff(grid) <= 0)
        ):
            raise ParameterError(
                f"The 'candidates' parameter of {owner} must be a strictly increasing 1-D "
                f"array of 1 to {_MAX_GRID} thresholds in (0, {bnd:g}]. Got an array of shape "
                f"{grid.shape} that breaks this rule."
            )
    grid.setflags(write=False)
    return grid


def scale_free_tilt(kappa: float, c: float, time_lag: int) -> float:
    """K₀·ln(m/K₀), K₀ = κc, the scale-free score's coefficient of ln θ (module notes); NaN
    when K₀ ≥ m (no exponential tail peaks there). Public inputs only."""
    k0 = float(kappa) * float(c)
    m = float(time_lag)
    return k0 * float(np.log(m / k0)) if 0.0 < k0 < m else float("nan")


def score_penalty(
    candidates: np.ndarray,
    kappa: float,
    *,
    score: str = "paper",
    c: float = DEFAULT_C,
    time_lag: int = 0,
) -> np.ndarray:
    """The public tilt of the score: κθ (``"paper"``) or K₀·ln(m/K₀)·ln θ (``"scale_free"``,
    module notes; m = ``time_lag``). Validated inputs; see :func:`_used_score`."""
    theta = np.asarray(candidates, dtype=np.float64)
    if score == "scale_free":
        return scale_free_tilt(kappa, c, time_lag) * np.log(theta)
    return kappa * theta


def tilt_range(kappa: float, c: float, time_lag: int, candidates) -> float:
    """K₀ln(m/K₀)·ln(θ_G/θ₁): what the scale-free tilt rewards from the largest candidate down
    to the smallest (module notes; NaN when K₀ ≥ m). Public inputs only."""
    grid = np.asarray(candidates, dtype=np.float64)
    return scale_free_tilt(kappa, c, time_lag) * float(np.log(grid[-1] / grid[0]))


def auto_score(*, kappa: float, c: float, time_lag: int, bound: float) -> str:
    """``"paper"`` when the paper's model fits under the public bound, c·ln(m/K₀) ≤ B (K₀ =
    κc), else ``"scale_free"`` (module notes; public inputs only)."""
    k0, m = float(kappa) * float(c), float(time_lag)
    if 0.0 < k0 < m and float(c) * float(np.log(m / k0)) > float(bound):
        return "scale_free"
    return "paper"


def _used_score(score: str, kappa: float, c: float, time_lag: int, candidates) -> str:
    """``score``, or ``"paper"`` when the scale-free tilt is undefined (K₀ ≥ m) or its range
    over the grid, K₀ln(m/K₀)·ln(θ_G/θ₁), exceeds m/2 (module notes). Public inputs only."""
    if score != "scale_free":
        return score
    tilt = scale_free_tilt(kappa, c, time_lag)
    grid = np.asarray(candidates, dtype=np.float64)
    if not np.isfinite(tilt) or tilt * float(np.log(grid[-1] / grid[0])) > 0.5 * time_lag:
        return "paper"
    return score


def tops_scores(
    prefix: object,
    candidates: np.ndarray,
    kappa: float,
    *,
    score: str = "paper",
    c: float = DEFAULT_C,
) -> np.ndarray:
    """q(θⱼ) = −m_θⱼ − κθⱼ (or the scale-free score, module notes) for every candidate
    (DATA-DEPENDENT: never release these)."""
    arr = np.sort(np.asarray(prefix, dtype=np.float64))
    above = arr.size - np.searchsorted(arr, candidates, side="right")  # m_θ
    sc = check_choice(score, "score", "tops_scores", SCORES)
    used = _used_score(sc, kappa, c, arr.size, candidates)
    tilt = score_penalty(candidates, kappa, score=used, c=c, time_lag=arr.size)
    return -above.astype(np.float64) - tilt


def local_slope(release: TopsThresholdRelease, c: float = DEFAULT_C) -> float:
    """The slope of the score's tilt at the released θ: κ, or K₀·ln(m/K₀)/θ (scale-free).
    Public (post-processing)."""
    if release.score == "scale_free":
        return scale_free_tilt(release.kappa, c, release.time_lag) / release.threshold
    return release.kappa


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsThresholdRelease:
    """The threshold θ chosen by the ToPS optimizer, with what it was chosen from."""

    threshold: float
    """θ, the released candidate (the selection after ``correction``)."""
    index: int
    """Position of θ in ``candidates``."""
    selected: int
    """Position of the candidate the private selection returned (before ``correction``)."""
    correction: str
    """``"overshoot"`` or ``"none"`` (module notes)."""
    candidates: np.ndarray
    """The public candidate grid (read-only)."""
    kappa: float
    """κ of the score (public)."""
    epsilon: float
    """Privacy loss ε of the selection."""
    method: str
    """``"laplace"`` (report-noisy-max) or ``"exponential"``."""
    noise: LaplaceNoise | None
    """The score noise of report-noisy-max (None for the exponential mechanism)."""
    time_lag: int
    """m, the number of values the scores were computed from."""
    guarantee: PrivacyGuarantee
    """Event-level ε-DP on the m values."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""
    score: str = "paper"
    """The score used: ``"paper"`` (−m_θ − κθ) or ``"scale_free"`` (module notes)."""
    positives: float | None = None
    """The scale-free score's guard: the released count of prefix values above θ₁ (None when
    the paper's score was asked for or the public checks already excluded the scale-free)."""

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, mechanism, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism=f"tops-threshold-{self.method}",
            parameters={
                "time_lag": self.time_lag,
                "candidates": int(self.candidates.size),
                "largest_candidate": float(self.candidates[-1]),
                "kappa": self.kappa,
                "correction": self.correction,
                "score": self.score,
            },
            seeded=self.seeded,
        )

    def to_frame(self):
        """One row per public candidate θ, with ``chosen`` marking the released one."""
        chosen = np.arange(self.candidates.size) == self.index
        return table_frame(
            {"threshold": self.candidates, "chosen": chosen}, index_name="candidate", result=self
        )

    def summary(self) -> str:
        """A short text table (released values and public parameters)."""
        rows = [
            ("threshold θ (released)", self.threshold),
            ("selected candidate θ", float(self.candidates[self.selected])),
            ("correction", self.correction),
            ("candidates", self.candidates.size),
            ("selection", self.method),
            ("kappa κ (public)", self.kappa),
            ("time lag m (values scored)", self.time_lag),
            ("epsilon", self.epsilon),
        ]
        return summary_text("ToPS threshold [ToPS21]", rows, result=self)


def _check_method(method: object, owner: str) -> str:
    return check_choice(method, "method", owner, THRESHOLD_METHODS)


def overshoot_index(
    grid: np.ndarray, kappa: float, epsilon: float, selected: int, *, c: float = DEFAULT_C
) -> int:
    """The released index of the overshoot correction (module notes; public inputs only).

    Moment matching: the t whose model mean μ(t) is nearest θ_selected, if εκ·(θ_G − θ_t) ≥
    :data:`GATE` and ε·κ·c ≥ :data:`STEEP` (``c`` the score's constant κ was computed with),
    else ``selected``; never below the first candidate ≥ 2/(εκ). Log-sums keep μ exact where
    e^{−εκθ} underflows.
    """
    theta = np.asarray(grid, dtype=np.float64)
    lam = epsilon * kappa
    if lam * c < STEEP:  # the selection spreads below θ* too: moving down is unsafe
        return selected
    a = -lam * theta
    log0 = np.logaddexp.accumulate(a[::-1])[::-1]
    log1 = np.logaddexp.accumulate((a + np.log(theta))[::-1])[::-1]
    mean = np.exp(log1 - log0)  # μ(t), non-decreasing in t
    t = int(np.argmin(np.abs(mean - theta[selected])))
    if t >= selected or lam * (theta[-1] - theta[t]) < GATE:
        return selected
    return min(max(t, int(np.searchsorted(theta, 2.0 / lam))), selected)


def implied_scale(threshold: float, kappa: float, time_lag: int) -> float:
    """c with c·ln(m/(κc)) = θ₁: the tail scale the released peak implies (module notes).

    The left side grows with c up to c = m/(κe); NaN when θ₁ exceeds that maximum (no
    exponential tail peaks there) or κ ≤ 0. Public inputs only.
    """
    theta, m = float(threshold), float(time_lag)
    if not kappa > 0.0 or not theta > 0.0:
        return float("nan")
    top = m / (kappa * np.e)
    if theta > top:
        return float("nan")
    lo, hi = 0.0, top  # θ(c) increasing on (0, top]
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid * np.log(m / (kappa * mid)) < theta:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mean_square_length(horizon: int) -> float:
    """E[ℓ²] of a range [i, j] over r steps, i ≤ j the sorted pair of two uniform draws
    ([ToPS21]'s metric): ℓ = |a − b| + 1, E[ℓ²] = (r² − 1)/6 + 2(r² − 1)/(3r) + 1."""
    r = float(horizon)
    return (r * r - 1.0) / 6.0 + 2.0 * (r * r - 1.0) / (3.0 * r) + 1.0


def mse_index(
    grid: np.ndarray,
    kappa: float,
    selected: int,
    *,
    time_lag: int,
    noise: float,
    length2: float,
) -> int:
    """The least predicted MSE at or above θ_selected under the score's tail model (module
    notes): argmin_{j ≥ selected} n·θⱼ² + E[ℓ²]·(κc²·e^{−(θⱼ−θ₁)/c}/m)², c the implied scale.

    ``noise`` is n, the least public error per θ² of the tree shapes; ``length2`` is E[ℓ²].
    Public inputs only; ``selected`` when the model has no scale.
    """
    theta = np.asarray(grid, dtype=np.float64)
    t1 = float(theta[selected])
    c = implied_scale(t1, kappa, time_lag)
    if not np.isfinite(c) or not noise > 0.0:
        return selected
    up = theta[selected:]
    bias = kappa * c * c / float(time_lag) * np.exp(-(up - t1) / c)
    return selected + int(np.argmin(noise * up * up + length2 * bias * bias))


def _select(
    prefix: np.ndarray,
    grid: np.ndarray,
    kappa: float,
    epsilon: float,
    method: str,
    bits: BitSource,
    seeded: bool = False,
    correction: str = "overshoot",
    c: float = DEFAULT_C,
    score: str = "paper",
) -> TopsThresholdRelease:
    """Run the selection on validated inputs (draws from ``bits``), then the correction
    (``c``: the score's constant κ was computed with). The overshoot correction models the
    paper's linear tilt: with the scale-free score the selection is released as is."""
    used = _used_score(score, kappa, c, int(prefix.size), grid)
    positives, eps = None, epsilon
    if used == "scale_free":  # the guard: a Laplace count first, sequential on the prefix
        eps = (1.0 - GUARD_SHARE) * epsilon
        guard = LaplaceNoise(sensitivity=1.0, epsilon=GUARD_SHARE * epsilon)
        count = float(np.count_nonzero(prefix > grid[0]))
        positives = float(guard.release(np.array([count]), bits)[0])
        if positives < GUARD_RATIO * tilt_range(kappa, c, int(prefix.size), grid):
            used = "paper"
    scores = tops_scores(prefix, grid, kappa, score=used, c=c)
    noise = None
    if method == "laplace":
        noise = LaplaceNoise(sensitivity=1.0, epsilon=eps)
        index = int(np.argmax(scores + noise.sample(grid.size, bits)))  # report-noisy-max
    else:
        weights = np.exp(eps * (scores - scores.max()))  # exponential mechanism
        cdf = np.cumsum(weights)
        u = float(uniform_open(bits, 1)[0]) * cdf[-1]
        index = min(int(np.searchsorted(cdf, u, side="right")), grid.size - 1)
    released = index
    if correction == "overshoot" and used == "paper":
        released = overshoot_index(grid, kappa, eps, index, c=c)
    return TopsThresholdRelease(
        threshold=float(grid[released]),
        index=released,
        selected=index,
        correction=correction,
        candidates=grid,
        kappa=kappa,
        epsilon=epsilon,
        method=method,
        noise=noise,
        time_lag=int(prefix.size),
        guarantee=PrivacyGuarantee(unit=EventLevel(), budget=Budget(epsilon), proof=_PROOF[method]),
        seeded=seeded,
        score=used,
        positives=positives,
    )


def tops_threshold(
    prefix: object,
    *,
    bound: float,
    epsilon: float,
    horizon: int,
    epsilon_perturb: float,
    fanout: int = 16,
    c: float = DEFAULT_C,
    candidates: object = None,
    method: str = "laplace",
    seed: object = None,
    ledger: BudgetLedger | None = None,
    correction: str = "overshoot",
    score: str = "paper",
) -> TopsThresholdRelease:
    """Choose the clipping threshold θ privately from the first m values ([ToPS21] §4).

    Parameters
    ----------
    prefix
        The m values v₁ … v_m the threshold is learnt from, each in [0, ``bound``].
    bound
        Public bound B on every value.
    epsilon
        Privacy loss ε of the selection.
    horizon
        r = n − m, the number of steps the perturber will release (public; sets κ).
    epsilon_perturb
        ε_r of the perturber (public; sets κ).
    fanout
        Fan-out F of the perturber's hierarchy.
    c
        [ToPS21]'s constant in κ (60).
    candidates
        The public grid: an int G (θⱼ = B·j/G, default 1024) or an increasing array.
    method
        ``"laplace"`` (report-noisy-max) or ``"exponential"``.
    seed
        None (OS secure source) or an int / bit source (tests and experiments only).
    ledger
        Optional :class:`BudgetLedger` charged ε (event-level unit) after validation, before
        any draw.
    correction
        ``"overshoot"`` (default): remove the selection's upward drift when it is
        identifiable; ``"none"``: release the selection (module notes).
    score
        ``"paper"`` (default): [ToPS21]'s −m_θ − κθ; ``"scale_free"``: −m_θ − K₀ln(m/K₀)ln θ,
        K₀ = κc, which does not depend on the values' units (module notes; the overshoot
        correction is not applied to it).

    Returns
    -------
    TopsThresholdRelease

    Notes
    -----
    Maximises q(θ) = −m_θ − κθ over the grid with noise (module notes), then corrects the
    overshoot (post-processing of the released index and public inputs).

    *Privacy*: event-level ε-DP on the prefix. Replacing one value v by v' changes m_θ by
    1{v' > θ} − 1{v > θ}: by at most 1, and with the same sign for every θ (if v' > v every m_θ
    with θ ∈ [v, v') grows by one, the others stay). κθ (or K₀ln(m/K₀)ln θ) is public. So the
    score vector has sensitivity 1 and is *monotone*: report-noisy-max with Laplace(1/ε) noise
    is ε-DP (Dwork & Roth 2014, Claim 3.9, whose proof only uses c ≤ c' ≤ c + 1 componentwise;
    with lattice noise of scale (1 + γ)/ε on γℤ ∋ 1 the step "rⱼ ≥ r* + 1" keeps its
    probability ratio ≥ e^{−ε/(1+γ)}), and the exponential mechanism with exp(ε·q) is ε-DP (the
    monotone case of McSherry & Talwar 2007, where the normaliser moves with the numerator).
    The candidates depend on public B and G only.

    Examples
    --------
    >>> x = [1.0] * 990 + [5.0] * 10
    >>> th = tops_threshold(x, bound=10.0, epsilon=1.0, horizon=10**5, epsilon_perturb=1.0,
    ...                     candidates=10, seed=1)
    >>> th.candidates.tolist()[:3], th.threshold in th.candidates, th.threshold >= 5.0
    ([1.0, 2.0, 3.0], True, True)
    """
    owner = "tops_threshold"
    bnd = check_positive(bound, "bound", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    meth = _check_method(method, owner)
    corr = check_choice(correction, "correction", owner, CORRECTIONS)
    sc = check_choice(score, "score", owner, SCORES)
    bits = check_seed(seed, owner)
    ledger = check_ledger(ledger, owner)
    check_noise_range(owner, "'bound' and 'epsilon'", score_noise_scale=1.0 / eps, bound=bnd)
    grid = tops_candidates(bnd, candidates)
    tops_kappa(time_lag=1, horizon=horizon, epsilon_perturb=epsilon_perturb, fanout=fanout, c=c)
    arr = check_stream(prefix, "prefix", owner, bound=bnd)
    kappa = tops_kappa(
        time_lag=arr.size, horizon=horizon, epsilon_perturb=epsilon_perturb, fanout=fanout, c=c
    )
    charge_ledger(ledger, Budget(eps), owner, EventLevel())
    return _select(
        arr,
        grid,
        kappa,
        eps,
        meth,
        bits,
        seeded=seed is not None,
        correction=corr,
        c=float(c),
        score=sc,
    )
