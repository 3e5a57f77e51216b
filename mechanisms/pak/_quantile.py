"""The empirical λp-quantile and its smooth sensitivity ([PAK19] §IV-C, [NRS07] §3.1).

Two things live here:

* :func:`empirical_quantile` — the order statistic PAK uses as the threshold estimate x̂_λp,
  with its rank P (a public number: it depends on m and λp only);
* :func:`smooth_sensitivity_quantile` — the b-smooth sensitivity of an order statistic of
  fixed rank, computed exactly in O(m log m) (the definition is O(m²));
* :func:`smoothing_parameters` and :func:`noise_quantile` — the constants (a, b) of the noise
  that smooth sensitivity is released with, and the noise's quantile function G⁻¹.

Neither draws noise; the threshold mechanism that uses them is in ``_threshold.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

import numpy as np

from ..core._errors import ParameterError
from ..core._validation import check_fraction, check_integer, check_positive, check_stream

__all__ = [
    "NOISE_KINDS",
    "EmpiricalQuantile",
    "empirical_quantile",
    "laplace_dilation_delta",
    "noise_quantile",
    "quantile_rank",
    "smooth_sensitivity_quantile",
    "smoothing_parameters",
]

#: The noise distributions PAK allows for the threshold (§IV-C): Laplace(1) or N(0, 1).
NOISE_KINDS = ("laplace", "gaussian")


def _check_noise(noise: object, owner: str) -> str:
    if not isinstance(noise, str) or noise not in NOISE_KINDS:  # np.array(["laplace"]) is not
        raise ParameterError(
            f"The 'noise' parameter of {owner} must be one of {NOISE_KINDS}. Got {noise!r} instead."
        )
    return noise


@dataclass(frozen=True, slots=True, kw_only=True)
class EmpiricalQuantile:
    """An empirical q-quantile and its rank (data-dependent value: not for release)."""

    value: float
    """x̂_q, the order statistic of rank ``rank`` (private: it is a data value)."""
    rank: int
    """P, the 1-based rank of x̂_q among the sorted values (public: a function of m and q)."""


def quantile_rank(m: int, q: float) -> int:
    """Return the 1-based rank P of the empirical q-quantile of m values.

    PAK (§IV, after Def. 11) defines the q-quantile of m values as the smallest value with at
    least (1 − q)·m values below it. For distinct values the k-th smallest value has exactly
    k − 1 values below it, so that value is the order statistic of rank

        P = ⌈(1 − q)·m⌉ + 1,

    computed here exactly (``fractions.Fraction`` of the given binary float q), so that e.g.
    q·m = 5 never rounds to 5 + 2⁻⁵⁰.

    Raises
    ------
    ParameterError
        if q·m < 1 (then P > m: no value qualifies; PAK requires λ > 1/(p·m), Eq. 5's
        setting). Increase the time lag m or q.
    """
    m = check_integer(m, "m", "quantile_rank")
    q = check_fraction(q, "q", "quantile_rank")
    rank = math.ceil((1 - Fraction(q)) * m) + 1
    if rank > m:
        raise ParameterError(
            f"The 'q' parameter of quantile_rank must satisfy q·m >= 1 (PAK requires "
            f"λ > 1/(p·m)). Got q={q!r} with m={m} instead. Increase the time lag m or λp."
        )
    return rank


def empirical_quantile(values: object, q: float) -> EmpiricalQuantile:
    """Return the empirical q-quantile x̂_q of ``values`` and its rank ([PAK19] §IV).

    Parameters
    ----------
    values
        One-dimensional finite values (any order).
    q
        Tail probability in (0, 1) — PAK's λp. The result is close to the (1 − q) point of
        the distribution function (Def. 11: x_q = inf{x : F(x) ≥ 1 − q}).

    Notes
    -----
    *Rank convention.* PAK's definition — the smallest value with at least (1 − q)·m values
    strictly below it — is the order statistic x_(P), P = ⌈(1 − q)·m⌉ + 1, whenever the values
    are distinct (probability one for continuous data); see :func:`quantile_rank`. With ties
    PAK's minimum over values moves to a data-dependent rank, and the smooth-sensitivity bound
    of [NRS07] §3.1 is for an order statistic of *fixed* rank. We therefore always return
    x_(P) with the fixed rank P: identical to PAK on distinct values, and the function whose
    sensitivity :func:`smooth_sensitivity_quantile` bounds.

    Examples
    --------
    >>> empirical_quantile([5.0, 1.0, 4.0, 2.0, 3.0], 0.2)
    EmpiricalQuantile(value=5.0, rank=5)
    """
    arr = check_stream(values, "values", "empirical_quantile")
    rank = quantile_rank(arr.size, q)
    # np.partition: O(m) selection of the P-th smallest value.
    value = float(np.partition(arr, rank - 1)[rank - 1])
    return EmpiricalQuantile(value=value, rank=rank)


def _check_domain(lower: object, upper: object, owner: str) -> tuple[float, float]:
    ok = all(isinstance(v, Real) and not isinstance(v, bool) for v in (lower, upper))
    lo, hi = (float(lower), float(upper)) if ok else (math.nan, math.nan)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(
            f"The 'lower' and 'upper' parameters of {owner} must be finite floats with "
            f"lower < upper. Got lower={lower!r}, upper={upper!r} instead."
        )
    return lo, hi


def smooth_sensitivity_quantile(
    values: object, rank: int, smoothing: float, lower: float, upper: float
) -> float:
    """b-smooth sensitivity of the order statistic of rank P ([NRS07] §3.1, [PAK19] §IV-C).

    Parameters
    ----------
    values
        The m data values, unsorted, inside [``lower``, ``upper``].
    rank
        P, the 1-based rank of the order statistic (1 ≤ P ≤ m).
    smoothing
        The smoothing constant b > 0 (β of [NRS07]).
    lower, upper
        The public data domain; they pad the sorted values at positions 0 and m + 1.

    Returns
    -------
    float
        SS = max_{k=0..m+1} e^{−bk} max_{t=0..k+1} (x_{P+t} − x_{P+t−k−1}), with x_1 ≤ … ≤ x_m
        the sorted values, x_0 = ``lower``, x_{m+1} = ``upper`` and indices beyond the padding
        clamped to the bounds ([PAK19] §IV-C; [NRS07] Prop. 3.4 for the median).

    Notes
    -----
    *Algorithm* (exact, O(m log m) after the sort). Put i = P + t − k − 1 and j = P + t. The
    pairs (i, j) met by the definition are exactly those with i ≤ P ≤ j and j − i = k + 1 ≥ 1;
    an index below 0 (above m + 1) only repeats the value of index 0 (m + 1) with a larger k,
    so it never wins. Hence

        SS = max { F(i, j) : 0 ≤ i ≤ P ≤ j ≤ m + 1 },  F(i, j) = (x_j − x_i)·e^{−b(j−i−1)},

    where the extra pair i = j = P has F = 0 and changes nothing (SS ≥ 0). Let J(i) be the
    largest maximiser of row i. *Monotonicity*: for i₁ < i₂ and j₁ < j₂,
    F(i₁, j₂) ≥ F(i₁, j₁) implies F(i₂, j₂) ≥ F(i₂, j₁). Proof: with w_j = e^{−bj} (constant
    row factors e^{b(i+1)} > 0 divide out), u₁ = x_{i₁} ≤ u₂ = x_{i₂},

        (x_{j₂} − u₂)w_{j₂} − (x_{j₁} − u₂)w_{j₁}
            = [(x_{j₂} − u₁)w_{j₂} − (x_{j₁} − u₁)w_{j₁}] + (u₁ − u₂)(w_{j₂} − w_{j₁}) ≥ 0,

    as both terms are ≥ 0 (w decreases). Consequently every row i₂ > i has a maximiser
    ≥ J(i), and every row i₀ < i has all its maximisers ≤ J(i) (a j > J(i) beating J(i) in row
    i₀ would, by the implication, tie or beat it in row i, contradicting J(i) being the
    largest maximiser). So the divide and conquer of [NRS07] §3.1 is exact: find J(mid) for
    the middle row, then search rows below mid in columns [·, J(mid)] and rows above in
    [J(mid), ·]. Each level of the recursion scans O(m) cells; there are O(log m) levels.
    The levels are vectorised (one numpy pass per level, segment maxima by ``reduceat``).
    Rows are compared through log F (e^{−bk} underflows for bk > 745, and the false ties it
    would create break the monotone search; log 0 = −∞ is a true tie), and each row's winner
    is then evaluated as the definition does. Ties are broken towards the largest index
    consistently; a near-tie resolved by rounding loses at most a rounding error.
    """
    owner = "smooth_sensitivity_quantile"
    lo, hi = _check_domain(lower, upper, owner)
    arr = check_stream(values, "values", owner, bound=hi, lower=lo)
    rank = check_integer(rank, "rank", owner, minimum=1, maximum=arr.size)
    b = check_positive(smoothing, "smoothing", owner)
    return _smooth_sensitivity_sorted(np.sort(arr), rank, b, lo, hi)


def _smooth_sensitivity_sorted(
    xs: np.ndarray, rank: int, b: float, lower: float, upper: float
) -> float:
    """The algorithm of :func:`smooth_sensitivity_quantile` on already sorted, checked values."""
    m = xs.size
    x = np.empty(m + 2, dtype=np.float64)
    x[0], x[-1] = lower, upper
    x[1:-1] = xs
    # One segment per pending block of rows [ilo, ihi] with its column window [jlo, jhi].
    ilo = np.array([0], dtype=np.int64)
    ihi = np.array([rank], dtype=np.int64)
    jlo = np.array([rank], dtype=np.int64)
    jhi = np.array([m + 1], dtype=np.int64)
    best = 0.0
    while ilo.size:
        mid = (ilo + ihi) // 2
        lengths = jhi - jlo + 1
        ends = np.cumsum(lengths)
        starts = ends - lengths
        seg = np.repeat(np.arange(mid.size), lengths)
        j = np.arange(ends[-1], dtype=np.int64) - np.repeat(starts - jlo, lengths)
        i = mid[seg]
        # Compare in log space: e^{-bk} underflows to 0 for bk > 745, which would create
        # false ties and break the monotone search; log(0) = -inf is a true tie.
        with np.errstate(divide="ignore"):
            vals = np.log(x[j] - x[i]) - b * (j - i - 1).astype(np.float64)
        segmax = np.maximum.reduceat(vals, starts)
        jstar = np.maximum.reduceat(np.where(vals == segmax[seg], j, -1), starts)
        # The winners' values in linear space, as the definition computes them.
        win = (x[jstar] - x[mid]) * np.exp(-b * (jstar - mid - 1).astype(np.float64))
        best = max(best, float(win.max()))
        left = mid > ilo
        right = mid < ihi
        ilo, ihi, jlo, jhi = (
            np.concatenate((ilo[left], mid[right] + 1)),
            np.concatenate((mid[left] - 1, ihi[right])),
            np.concatenate((jlo[left], jstar[right])),
            np.concatenate((jstar[left], jhi[right])),
        )
    return best


def _smooth_sensitivity_quantile_reference(
    values: object, rank: int, smoothing: float, lower: float, upper: float
) -> float:
    """The O(m²) definition of [PAK19] §IV-C, literally; a test reference only."""
    xs = np.sort(np.asarray(values, dtype=np.float64))
    m = xs.size
    x = np.concatenate(([float(lower)], xs, [float(upper)]))
    best = 0.0
    for k in range(m + 2):
        t = np.arange(k + 2)
        hi_idx = np.clip(rank + t, 0, m + 1)
        lo_idx = np.clip(rank + t - k - 1, 0, m + 1)
        local = float(np.max(x[hi_idx] - x[lo_idx]))
        best = max(best, math.exp(-smoothing * k) * local)
    return best


def laplace_dilation_delta(epsilon: float, smoothing: float) -> float:
    """Exact δ of the dilation property of [NRS07] Def. 2.5 for the Laplace density at (ε, b).

    ``sup_{|λ| <= b} sup_S P[Z ∈ S] − e^{ε/2}·P[Z ∈ e^λ S]`` for Z with density ½e^{−|z|}.
    For λ > 0 the density ratio ``h(z)/(e^λ h(e^λ z)) = exp(|z|(e^λ − 1) − λ)`` exceeds e^{ε/2}
    exactly on ``|z| > z₀ = (ε/2 + λ)/(e^λ − 1)``, so the supremum over S is
    ``e^{−z₀} − e^{ε/2}·e^{−e^λ z₀}``, increasing in λ (taken at λ = b); for −ε/2 <= λ <= 0 the
    ratio is at most e^{−λ} <= e^{ε/2} and contributes 0 (b <= ε/2 is required).

    Examples
    --------
    Far inside the admissible range the dilation costs much less than δ/2:

    >>> laplace_dilation_delta(1.0, 1.0 / (2 * math.log(2 / 1e-6))) < 0.5e-6
    True
    """
    owner = "laplace_dilation_delta"
    eps = check_positive(epsilon, "epsilon", owner)
    lam = check_positive(smoothing, "smoothing", owner)
    if lam > eps / 2.0:
        raise ParameterError(
            f"The 'smoothing' parameter of {owner} must be at most epsilon/2 = {eps / 2.0:g} "
            f"(a contraction by e^-b then costs nothing). Got {lam!r} instead."
        )
    z0 = (eps / 2.0 + lam) / math.expm1(lam)
    return max(math.exp(-z0) - math.exp(eps / 2.0 - math.exp(lam) * z0), 0.0)


def _admissible_laplace_smoothing(eps: float, dlt: float) -> float:
    """The largest b <= min(ε/(2 ln(2/δ)), ε/2) whose dilation δ is at most δ/2 (see Notes of
    :func:`smoothing_parameters`); hand-written because it is a scalar root of a closed form."""
    b = min(eps / (2.0 * math.log(2.0 / dlt)), eps / 2.0)
    if laplace_dilation_delta(eps, b) <= dlt / 2.0:
        return b  # [NRS07] Lemma 2.9's constant, admissible here
    from scipy import optimize  # here, not at import: keeps the CLI's start-up light

    root = optimize.brentq(
        lambda x: laplace_dilation_delta(eps, x) - dlt / 2.0, b * 1e-6, b, xtol=1e-15, rtol=1e-12
    )
    b = root * (1.0 - 1e-9)
    while laplace_dilation_delta(eps, b) > dlt / 2.0:  # never trust the root's last ulp
        b *= 1.0 - 1e-9
    return b


def smoothing_parameters(
    epsilon: float, delta: float, noise: str = "laplace"
) -> tuple[float, float]:
    """Return (a, b): noise divisor and smoothing constant for (ε, δ)-DP smooth sensitivity.

    Parameters
    ----------
    epsilon, delta
        The threshold's privacy loss, ε > 0 and 0 < δ < 1 (smooth sensitivity needs δ > 0).
    noise
        ``"laplace"`` (density ½e^{−|z|}) or ``"gaussian"`` (standard normal).

    Returns
    -------
    a, b
        Release f(σ) + (S(σ)/a)·Z with S a b-smooth upper bound on the local sensitivity.

    Notes
    -----
    These are the (α, β)-admissibility constants of [NRS07] §2 (α = a, β = b), the ones with a
    privacy proof:

    * Laplace: a = ε/2, b = ε/(2 ln(2/δ)) ([NRS07] Lemma 2.9), recalibrated above ε's limit;
    * Gaussian: a = ε/(5·√(2 ln(2/δ))), b = ε/(4·(1 + ln(2/δ))).

    *Range of the Laplace constants* (issue 11 §3). [NRS07] Lemma 2.6 gives (ε, δ)-DP for
    ``f(x) + S(x)/a·Z`` when Z's density is (a, b)-admissible (Def. 2.5): the *sliding*
    property (shift by |Δ| <= a, here pure: e^{a} = e^{ε/2}) and the *dilation* property
    (scaling by e^λ, |λ| <= b) each hold with e^{ε/2} and δ/2. For Laplace the dilation's
    exact δ is :func:`laplace_dilation_delta`, and Lemma 2.9's b = ε/(2 ln(2/δ)) keeps it
    below δ/2 only while e^{b} − 1 stays close to b, i.e. for moderate ε: for δ = 9.5·10⁻⁷ up
    to ε ≈ 9.13 (at ε = 17 it is 4.7·10⁻⁶, and the mechanism's exact δ is 2.3·10⁻⁶ for a
    claimed 9.5·10⁻⁷). Beyond that edge b is recalibrated to the largest value whose
    dilation δ is δ/2 (a scalar root, :func:`scipy.optimize.brentq`), so the lemma holds for
    every ε; below it the constants are exactly Lemma 2.9's. b is also capped at ε/2 (δ > 2/e),
    where a contraction is free. Everything depends on (ε, δ) only.

    The Gaussian b is the smaller of the two values quoted for NRS07's Gaussian lemma in the
    literature we could check (ε/(2 ln(2/δ)) and ε/(4(1 + ln(2/δ)))): a smaller b gives a larger
    smooth bound, so it is the safe choice while the lemma is unverified here. Gaussian noise is
    of little use for PAK anyway: with these constants κ of Eq. 11 is only positive for tiny δ.

    PAK is inconsistent: §IV-C gives a = ε/2 and b ≤ ε/(−2 ln δ) for both noises (and
    a = ε/√(−ln δ) for Gaussian), §VI-B uses a = ε/√(−ln δ), b = min(1, ε/(−2 ln δ)) with
    Laplace noise. Neither cites a lemma that proves them for both noises, and b = ε/(−2 ln δ)
    exceeds NRS07's ε/(2 ln(2/δ)); we release with NRS07's. The planner can evaluate PAK's
    formulas with the §VI-B constants by passing a and b to :func:`pak_kappa` explicitly.

    Examples
    --------
    >>> a, b = smoothing_parameters(1.0, 2.0**-20)
    >>> a, round(b, 6)
    (0.5, 0.03435)
    """
    owner = "smoothing_parameters"
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_fraction(delta, "delta", owner)
    kind = _check_noise(noise, owner)
    log_term = math.log(2.0 / dlt)
    if kind == "laplace":
        return eps / 2.0, _admissible_laplace_smoothing(eps, dlt)
    return eps / (5.0 * math.sqrt(2.0 * log_term)), eps / (4.0 * (1.0 + log_term))


def noise_quantile(q: float, noise: str = "laplace") -> float:
    """G_ns⁻¹(q): the q-quantile of the standard noise (Laplace of scale 1, or N(0, 1))."""
    q = check_fraction(q, "q", "noise_quantile")
    kind = _check_noise(noise, "noise_quantile")
    from scipy import stats  # here, not at import: scipy.stats costs seconds at CLI start-up

    dist = stats.laplace if kind == "laplace" else stats.norm
    return float(dist.ppf(q))
