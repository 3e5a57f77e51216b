"""The quantile-failure probability g of [PAK19] Eq. 5 and the private time-lag heuristics (§VI-B).

Everything here is a function of *public* inputs only (ε, δ, β, p_max, m): nothing reads data,
so the time lag it returns may be published and used to run Mechanism 1 without privacy cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special

from mechanisms import ParameterError, noise_quantile, pak_kappa
from mechanisms.core._validation import (
    check_choice,
    check_fraction,
    check_integer,
    check_positive,
    check_probability,
)

__all__ = [
    "TimeLag",
    "max_quantile_count",
    "quantile_count",
    "quantile_failure_probability",
    "time_lag_heuristic",
]

#: λ of criterion 1, "a reasonably conservative choice" ([PAK19] §VI-B a).
CRITERION1_LAMBDA = 0.5
#: The target scale of criterion 2, Eq. 17: the noise scale should be about B/10.
CRITERION2_FRACTION = 10.0


def quantile_count(m: int, q: float) -> int:
    """Return ⌊q·m⌋, the number of the m values at or above the empirical q-quantile.

    Computed exactly (``fractions.Fraction`` of the binary float q), the same arithmetic as
    :func:`mechanisms.quantile_rank` (P = ⌈(1 − q)m⌉ + 1 = m − ⌊qm⌋ + 1), so the planner's
    rank and the release's rank never differ by a rounding.
    """
    return math.floor(Fraction(q) * m)


def quantile_failure_probability(lam: float, p: float, m: int) -> float:
    """g(λ, p, m) of [PAK19] Eq. 5: a bound on Pr[x̂_λp < x_p] from m i.i.d. values.

    Parameters
    ----------
    lam
        λ in (0, 1].
    p
        Tail probability p in (0, 1).
    m
        The time lag (number of values the quantile is estimated from).

    Returns
    -------
    float
        Σ_{i=0}^{⌊λpm⌋} C(m, i) pⁱ(1 − p)^{m−i}, the binomial CDF (``scipy.stats``-exact
        ``special.bdtr``) at ⌊λpm⌋.

    Notes
    -----
    Eq. 5 sums up to λpm inclusive. With k = ⌊λpm⌋ values at or above x̂_λp (the rank
    convention of :func:`mechanisms.quantile_rank`), x̂_λp < x_p forces at most k − 1 values
    ≥ x_p, so the exact probability is the CDF at k − 1; we keep the paper's CDF at k, which
    is larger (conservative by one binomial term).
    """
    lam = check_probability(
        lam, "lam", "quantile_failure_probability", closed_low=False, closed_high=True
    )
    p = check_fraction(p, "p", "quantile_failure_probability")
    m = check_integer(m, "m", "quantile_failure_probability")
    return float(special.bdtr(quantile_count(m, lam * p), m, p))


def max_quantile_count(beta_qt: float | np.ndarray, m: int, p: float | np.ndarray):
    """The real k* with G(k*) = β_qt, G the continuous extension of the binomial CDF in k.

    ``special.bdtrik`` inverts I_{1−p}(m − k, k + 1) (the regularised incomplete beta function,
    equal to the binomial CDF at integer k and increasing in k). Any λ with ⌊λpm⌋ ≤ k* then
    satisfies g(λ, p, m) ≤ β_qt: this is how the planner eliminates the constraint of Eq. 5.
    Returns values clipped to [0, p·m] (λ ≤ 1); NaN inputs propagate.
    """
    k = special.bdtrik(beta_qt, m, p)
    k = np.where(np.isnan(k), 0.0, k)  # β_qt below (1 − p)^m: no positive count qualifies
    return np.clip(k, 0.0, np.asarray(p) * m)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeLag:
    """The time lag m chosen from public inputs only ([PAK19] §VI-B): private, publishable."""

    criterion1: int
    """Smallest m with g(0.5, p_max, m') < β for every m' ≥ m (criterion 1, Eq. 5)."""
    criterion2: int
    """Smallest integer m above the bound of criterion 2 (Eqs. 17–19)."""
    m: int
    """The time lag to use: max(criterion1, criterion2)."""
    criterion2_bound: float
    """The real right-hand side of criterion 2 (m must exceed it)."""
    kappa: float
    """κ of Eq. 11 used by criterion 2 (with β_lt := β and the §VI-B constants a, b)."""
    private: bool = True
    """Always True: only public inputs were used, so m may be published."""


def _criterion1(beta: float, p_max: float, lam: float = CRITERION1_LAMBDA) -> int:
    """Smallest m with g(λ, p_max, m') < β for all m' ≥ m.

    g is a saw-tooth in m: for fixed k = ⌊λ p m⌋ it decreases in m (more trials, same count)
    and jumps up where k increments. The peaks (the first m of each k) are scanned until
    they have fallen far below β; the last peak at or above β is followed by a dense scan.
    """
    q = lam * p_max

    def g(ms: np.ndarray) -> np.ndarray:
        counts = np.array([quantile_count(int(mm), q) for mm in ms], dtype=np.float64)
        return special.bdtr(counts, ms, p_max)

    n_peaks = 256
    while True:
        js = np.arange(n_peaks)
        peaks = np.unique(np.maximum(1, np.ceil(js / q).astype(np.int64)))
        # the first m of count j may be off by one through the float product; look at both
        peaks = np.unique(np.concatenate((peaks, peaks + 1)))
        gp = g(peaks)
        bad = np.nonzero(gp >= beta)[0]
        if bad.size == 0:
            return 1
        if bad[-1] < peaks.size * 3 // 4 and gp[-peaks.size // 4 :].max() < beta / 10:
            break
        n_peaks *= 2
        if n_peaks > 1 << 22:  # pragma: no cover - p_max below 1e-9 or so
            raise ParameterError(
                "The 'p_max' parameter of time_lag_heuristic is too small for criterion 1 "
                f"to converge. Got {p_max!r} instead."
            )
    start = int(peaks[bad[-1]])
    stop = int(peaks[min(bad[-1] + 1, peaks.size - 1)]) + 2
    ms = np.arange(start, max(stop, start + 2), dtype=np.int64)
    gm = g(ms)
    last_bad = np.nonzero(gm >= beta)[0][-1]
    return int(ms[last_bad] + 1)


def time_lag_heuristic(
    *, epsilon: float, delta: float, beta: float, p_max: float, noise: str = "laplace"
) -> TimeLag:
    """Choose the time lag m of Mechanism 1 from public inputs only ([PAK19] §VI-B).

    Parameters
    ----------
    epsilon
        The total privacy loss ε of Mechanism 1 (criterion 2 uses the whole ε, as §VI-B).
    delta
        δ in (0, 1).
    beta
        The overall failure probability β in (0, 1).
    p_max
        The largest tail probability p the data are assumed light-tailed beyond, in (0, 1).
    noise
        ``"laplace"`` (the paper's choice in §VI-B) or ``"gaussian"``: the noise whose
        quantile G_ns⁻¹(1 − β) enters criterion 2 and κ.

    Returns
    -------
    TimeLag
        ``criterion1``, ``criterion2`` and ``m`` = the larger of the two.

    Notes
    -----
    *Criterion 1* (§VI-B a): g(0.5, p_max, m) < β with g of Eq. 5. Because g is a saw-tooth
    in m, we return the smallest m from which it holds for *every* larger m (for the paper's
    β = 0.02, p_max = 0.005: g first drops below β at m = 2,684 but climbs back above it until
    m = 3,230, so criterion 1 is 3,231). **Discrepancy**: the paper's text says criterion 1
    gives "at least 20,000" for these inputs; the formula as written gives about 3,000 (no
    choice of ≤ vs <, of ⌊·⌋ or of the sum's upper limit moves it near 20,000). We implement
    the formula and report the discrepancy rather than fudge it. Criterion 2 dominates there.

    *Criterion 2* (Eqs. 17–19): with a = ε/√(−ln δ) and b = min(1, ε/(−2 ln δ)) (the
    constants §VI-B gives for Laplace noise; §IV-C gives a = ε/2 instead — we follow §VI-B here
    because the criterion is stated with them), κ of Eq. 11 with β_lt := β, G = G_ns⁻¹(1 − β):

        m > 20 κ (−ln δ)^{1.5} e⁻¹ G / (−ε² p_max ln p_max).

    For β = 0.02, δ = 2⁻²⁰, ε = 1, p_max = 0.005 (Laplace) the bound is 82,422.2, so
    ``criterion2`` = 82,423 (the paper rounds to "m > 80,000"). The derivation divides
    Eq. 17's B/10 by B: the bound is free of B. We evaluate it as 10κe⁻¹G/(a·b·(−p_max ln
    p_max)), which is the paper's closed form whenever b = ε/(−2 ln δ) < 1.

    *Privacy*: no data are read; publishing the returned m costs no privacy.
    """
    owner = "time_lag_heuristic"
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_fraction(delta, "delta", owner)
    beta = check_fraction(beta, "beta", owner)
    p_max = check_fraction(p_max, "p_max", owner)
    check_choice(noise, "noise", owner, ("laplace", "gaussian"))
    log_inv_delta = -math.log(delta)
    a = epsilon / math.sqrt(log_inv_delta)  # [PAK19 §VI-B]
    b = min(1.0, epsilon / (2.0 * log_inv_delta))  # [PAK19 §VI-B]
    kappa = pak_kappa(a=a, b=b, beta_lt=beta, noise=noise)  # [PAK19 Eq. 11]
    g_inv = noise_quantile(1.0 - beta, noise)
    # κ·SS·G/a = B/CRITERION2_FRACTION with SS < d e⁻¹/b, d = −m p_max ln p_max / B
    bound = (CRITERION2_FRACTION * kappa * math.exp(-1.0) * g_inv) / (  # [PAK19 Eqs. 17–19]
        a * b * (-p_max * math.log(p_max))
    )
    crit2 = math.floor(bound) + 1
    crit1 = _criterion1(beta, p_max)
    return TimeLag(
        criterion1=crit1,
        criterion2=crit2,
        m=max(crit1, crit2),
        criterion2_bound=bound,
        kappa=kappa,
    )
