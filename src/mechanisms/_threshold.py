"""The PAK threshold τ: a private, offset λp-quantile of the first m values ([PAK19] §IV).

Pipeline (Eqs. 6, 7, 11, 12): x̂_λp and its smooth sensitivity SS on the prefix, the factor κ of
Eq. 11, S = max(κ·SS, F) + γ (κ·SS with a public floor F and the lattice spacing γ),
τ' = x̂_λp + (S/a)·G⁻¹(1 − β_lt) (Eq. 6), and the release τ = τ' + (S/a)·noise on a public
lattice γℤ (Eq. 12), then ×r (Eq. 15) and clipped to [0, B] (post-processing).

For auditors: :func:`pak_threshold_calibration` returns τ', the lattice point it snaps to and
the noise scale, without drawing anything; the released threshold before ×r and clipping is
``center + scale·Z`` on the lattice, Z the standard lattice noise of ``noise``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ._budget import Budget
from ._errors import ParameterError
from ._noise import LATTICE_BITS, GaussianNoise, LaplaceNoise, lattice_granularity
from ._quantile import (
    NOISE_KINDS,
    _check_noise,
    _smooth_sensitivity_sorted,
    noise_quantile,
    quantile_rank,
    smoothing_parameters,
)
from ._random import BitSource, bit_source
from ._units import EventLevel, PrivacyGuarantee
from ._validation import check_fraction, check_positive, check_probability, check_stream

__all__ = [
    "NOISE_KINDS",  # re-exported from _quantile
    "ThresholdCalibration",
    "ThresholdRelease",
    "noise_quantile",
    "pak_kappa",
    "pak_tau_max",
    "pak_threshold",
    "pak_threshold_calibration",
    "smoothing_parameters",
]

_TAIL_UNITS = 64.0  # noise draws beyond 64 scale units have probability < e^-64


def _check_beta_lt(value: object, name: str, owner: str) -> float:
    beta = check_fraction(value, name, owner)
    if beta > 0.5:
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a float in (0, 0.5]. Got {value!r} "
            "instead. It is a failure probability; above 0.5 the offset G⁻¹(1 − β) is negative."
        )
    return beta


def pak_kappa(*, a: float, b: float, beta_lt: float, noise: str = "laplace") -> float:
    """κ of [PAK19] Eq. 11: κ = (1 − (e^b − 1)·G⁻¹(1 − β_lt)/a)⁻¹.

    Raises
    ------
    ParameterError
        if the bracket is ≤ 0 (then no κ > 0 hides the offset: increase a (ε) or β_lt, or
        decrease b), or if a, b, β_lt are out of range (β_lt ∈ (0, 0.5]).

    Examples
    --------
    >>> round(pak_kappa(a=0.5, b=0.1, beta_lt=0.05), 4)
    1.9392
    """
    owner = "pak_kappa"
    a = check_positive(a, "a", owner)
    b = check_positive(b, "b", owner)
    beta_lt = _check_beta_lt(beta_lt, "beta_lt", owner)
    offset = noise_quantile(1.0 - beta_lt, _check_noise(noise, owner))
    bracket = 1.0 - math.expm1(b) * offset / a  # [PAK19 Eq. 11]
    if not bracket > 0.0:
        raise ParameterError(
            f"The parameters of pak_kappa give a bracket 1 − (e^b − 1)·G⁻¹(1 − β_lt)/a = "
            f"{bracket:.6g} <= 0 (a={a!r}, b={b!r}, beta_lt={beta_lt!r}): κ would not be "
            "positive. Increase epsilon or beta_lt, or decrease b."
        )
    return 1.0 / bracket


def pak_tau_max(
    *,
    quantile: float,
    smooth_sensitivity: float,
    a: float,
    kappa: float,
    beta_lt: float,
    beta_rt: float,
    noise: str = "laplace",
    r: float = 1.0,
) -> float:
    """τ_max of [PAK19] Eq. 13, times r (Eq. 15): the threshold exceeds it w.p. ≤ β_rt.

    r·(x̂_λp + (κ·SS/a)·(G⁻¹(1 − β_lt) + G⁻¹(1 − β_rt))). Data-dependent (x̂_λp, SS): for
    analysis and planning only, never for release.
    """
    owner = "pak_tau_max"
    if isinstance(quantile, bool) or not isinstance(quantile, Real) or not math.isfinite(quantile):
        raise ParameterError(
            f"The 'quantile' parameter of {owner} must be a finite float. Got {quantile!r} instead."
        )
    ss = check_positive(smooth_sensitivity, "smooth_sensitivity", owner, allow_zero=True)
    a = check_positive(a, "a", owner)
    kappa = check_positive(kappa, "kappa", owner)
    kind = _check_noise(noise, owner)
    lt = noise_quantile(1.0 - _check_beta_lt(beta_lt, "beta_lt", owner), kind)
    rt = noise_quantile(1.0 - _check_beta_lt(beta_rt, "beta_rt", owner), kind)
    r = _check_r(r, owner)
    return r * (float(quantile) + kappa * ss / a * (lt + rt))  # [PAK19 Eq. 13]


def _check_r(r: object, owner: str) -> float:
    value = check_positive(r, "r", owner)
    if value < 1.0:
        raise ParameterError(
            f"The 'r' parameter of {owner} must be a float in [1, inf). Got {r!r} instead."
        )
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdCalibration:
    """Everything the threshold release uses, before any noise (data-dependent: NOT public)."""

    tau_prime: float
    """τ' = x̂_λp + (S/a)·G⁻¹(1 − β_lt), Eq. 6 with κ·SS raised to S (private)."""
    center: float
    """τ' rounded to the lattice γℤ: the released value is ``center + noise`` (private)."""
    quantile: float
    """x̂_λp (private)."""
    smooth_sensitivity: float
    """SS_b(x̂_λp) (private)."""
    smooth_bound: float
    """max(κ·SS, floor) + γ: the b-smooth upper bound the noise is calibrated to (private)."""
    scale: float
    """Noise multiplier smooth_bound/a: Laplace scale, or Gaussian standard deviation."""
    granularity: float
    """γ, the public lattice spacing (a power of two, from B, κ, a only)."""
    floor: float
    """Public floor 2²⁴·γ of the smooth bound (keeps the lattice ≥ 2²⁴ times finer than the
    noise, so the discrete noise behaves like the continuous one in the dilation argument)."""
    magnitude: float
    """Public bound on the released magnitude used to keep the lattice exact."""
    kappa: float
    """κ of Eq. 11 (public)."""
    a: float
    """Noise divisor a (public)."""
    b: float
    """Smoothing constant b (public)."""
    offset: float
    """G⁻¹(1 − β_lt) (public)."""
    rank: int
    """P, the rank of x̂_λp in the prefix (public)."""
    time_lag: int
    """m, the number of prefix values (public)."""
    noise: str
    """``"laplace"`` or ``"gaussian"``."""
    r: float
    """Multiplier r ≥ 1 of Eq. 15 applied after the noise (public)."""
    bound: float
    """The public bound B."""
    epsilon: float
    """ε of the threshold."""
    delta: float
    """δ of the threshold."""


def pak_threshold_calibration(
    prefix: object,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    lam: float,
    p: float,
    beta_lt: float,
    r: float = 1.0,
    noise: str = "laplace",
) -> ThresholdCalibration:
    """τ', its lattice point and the noise scale of :func:`pak_threshold`, drawing nothing.

    For privacy audits: on any prefix, the threshold released by :func:`pak_threshold` with
    the same arguments is ``min(max(r·(center + scale·Z), 0), B)`` (``clip=True``) where Z is
    the lattice noise of ``LaplaceNoise``/``GaussianNoise`` with these ``granularity`` and
    ``scale`` (Z ~ Laplace(1) or N(0, 1) on the lattice (γ/scale)ℤ). Arguments as for
    :func:`pak_threshold`. The result holds private values: never publish it.
    """
    owner = "pak_threshold"
    bnd = check_positive(bound, "bound", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_fraction(delta, "delta", owner)
    lam = check_probability(lam, "lam", owner, closed_low=False, closed_high=True)
    p = check_fraction(p, "p", owner)
    beta_lt = _check_beta_lt(beta_lt, "beta_lt", owner)
    r = _check_r(r, owner)
    kind = _check_noise(noise, owner)
    arr = check_stream(prefix, "prefix", owner, bound=bnd)
    rank = quantile_rank(arr.size, lam * p)
    a, b = smoothing_parameters(eps, dlt, kind)
    kappa = pak_kappa(a=a, b=b, beta_lt=beta_lt, noise=kind)
    offset = noise_quantile(1.0 - beta_lt, kind)

    # Public lattice: from B, κ, a only. SS ≤ B, so |τ'| ≤ B·(1 + κ·offset/a) and the noise
    # scale is ≤ (κ + 1)·B/a; draws beyond 64 scales have probability < e^-64.
    magnitude = bnd * (1.0 + (kappa + 1.0) * (offset + _TAIL_UNITS) / a)
    gamma = lattice_granularity(bnd * 2.0**-LATTICE_BITS, magnitude)
    floor = math.ldexp(gamma, LATTICE_BITS)

    xs = np.sort(arr)
    quantile = float(xs[rank - 1])
    ss = _smooth_sensitivity_sorted(xs, rank, b, 0.0, bnd)
    smooth_bound = max(kappa * ss, floor) + gamma  # [PAK19 Eq. 12], + floor and rounding
    tau_prime = quantile + smooth_bound / a * offset  # [PAK19 Eq. 6] with S ≥ κ·SS
    return ThresholdCalibration(
        tau_prime=tau_prime,
        center=float(np.rint(tau_prime / gamma) * gamma),
        quantile=quantile,
        smooth_sensitivity=ss,
        smooth_bound=smooth_bound,
        scale=smooth_bound / a,
        granularity=gamma,
        floor=floor,
        magnitude=magnitude,
        kappa=kappa,
        a=a,
        b=b,
        offset=offset,
        rank=rank,
        time_lag=int(arr.size),
        noise=kind,
        r=r,
        bound=bnd,
        epsilon=eps,
        delta=dlt,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdRelease:
    """A released PAK threshold and the public parameters that produced it."""

    threshold: float
    """τ used downstream: r·(noisy τ), clipped to [0, B] when ``clip`` (released)."""
    unclipped: float
    """r·(noisy τ) before clipping (released)."""
    rank: int
    """P, rank of x̂_λp among the m prefix values (public)."""
    time_lag: int
    """m, the prefix length."""
    kappa: float
    """κ of Eq. 11."""
    a: float
    """Noise divisor a."""
    b: float
    """Smoothing constant b."""
    scale: float
    """Noise multiplier S/a, S = max(κ·SS, F) + γ (data-dependent; kept for analysis)."""
    granularity: float
    """Public lattice spacing γ."""
    noise: str
    """``"laplace"`` or ``"gaussian"``."""
    r: float
    """Multiplier r of Eq. 15."""
    clipped: bool
    """Whether the threshold was clipped to [0, B]."""
    guarantee: PrivacyGuarantee
    """(ε, δ) event-level on the prefix."""
    tau_max: float | None = None
    """r·τ_max of Eq. 13 for the given β_rt, or None. Data-dependent: analysis only."""


def pak_threshold(
    prefix: object,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    lam: float,
    p: float,
    beta_lt: float,
    r: float = 1.0,
    noise: str = "laplace",
    clip: bool = True,
    beta_rt: float | None = None,
    seed: object = None,
) -> ThresholdRelease:
    """Release PAK's threshold τ from a prefix of m values ([PAK19] §IV-C, Eqs. 6–13, 15).

    Parameters
    ----------
    prefix
        The first m values of the stream, each in [0, B].
    bound
        The public bound B.
    epsilon, delta
        Privacy loss of the threshold (ε₁ and δ of Mechanism 1); 0 < δ < 1.
    lam, p
        The threshold estimates the λp-quantile; λ ∈ (0, 1], p ∈ (0, 1), λ·p·m ≥ 1.
    beta_lt
        β_lt ∈ (0, 0.5]: bound on Pr[τ < x̂_λp] (the offset G⁻¹(1 − β_lt) of Eq. 6).
    r
        Multiplier r ≥ 1 applied to the released τ (Eq. 15, post-processing).
    noise
        ``"laplace"`` (default) or ``"gaussian"``.
    clip
        Clip r·τ to [0, B] (post-processing; default True).
    beta_rt
        If given, also report r·τ_max of Eq. 13 (data-dependent, for analysis only).
    seed
        None (OS secure source, for release), or an int / bit source (tests only).

    Returns
    -------
    ThresholdRelease

    Notes
    -----
    τ = τ' + (S/a)·Z with τ' = x̂_λp + (S/a)·G⁻¹(1 − β_lt) (Eqs. 6, 12), a and b from
    :func:`smoothing_parameters` ([NRS07] constants), κ from :func:`pak_kappa`, and
    S = max(κ·SS, F) + γ the smooth bound κ·SS of Eq. 12 raised by a public floor F and the
    lattice spacing γ (below). Using the same S in the offset as in the noise makes
    Pr[τ < x̂_λp] = G(−G⁻¹(1 − β_lt)) = β_lt exactly (Eq. 8 with equality).

    *Why κ·SS is a b-smooth upper bound on the local sensitivity of τ'* (Eq. 12). κ·SS is
    b-smooth because SS is and κ is a public constant. For a neighbour σ', b-smoothness of SS
    gives |SS(σ) − SS(σ')| ≤ (e^b − 1)·SS(σ) (both SS(σ') ≤ e^b SS(σ) and
    SS(σ') ≥ e^{−b} SS(σ) ≥ (2 − e^b) SS(σ)). With c = G⁻¹(1 − β_lt) ≥ 0 (β_lt ≤ ½),

        |τ'(σ) − τ'(σ')| ≤ |x̂(σ) − x̂(σ')| + (κc/a)|SS(σ) − SS(σ')|
                        ≤ SS(σ) + (κc/a)(e^b − 1) SS(σ) = κ·SS(σ),

    since SS ≥ LS(x̂) and 1 + κc(e^b − 1)/a = κ exactly when κ solves Eq. 11. The same holds
    with κ·SS replaced by M = max(κ·SS, F) in the offset: M is b-smooth (below), so
    LS(τ') ≤ SS + (c/a)(e^b − 1)M ≤ M/κ + (c/a)(e^b − 1)M = M, as 1/κ = 1 − (e^b − 1)c/a.

    *Floating point.* τ' is rounded to a public lattice γℤ (γ a power of two from B, κ, a only;
    a lattice derived from SS would be data-dependent and leak through the support) and
    lattice noise is added (``LaplaceNoise``/``GaussianNoise`` with ``granularity=γ``). The
    rounding moves τ' by ≤ γ/2, so the rounded τ' has local sensitivity ≤ M + γ = S, with
    the public floor F = 2²⁴γ. A maximum with a constant and the addition of a constant
    preserve b-smoothness (max(κSS(σ), F) + γ ≤ e^b·max(κSS(σ'), F) + γ ≤
    e^b·(max(κSS(σ'), F) + γ) because e^b ≥ 1), so S is a b-smooth upper bound on the local
    sensitivity of the rounded τ'. The floor keeps the noise ≥ 2²⁴ lattice steps wide, where
    the discrete Laplace/Gaussian normalisers match the continuous ones to a relative 2⁻⁴⁸,
    so NRS07's sliding/dilation argument carries over up to that deviation.

    *Privacy*: (ε, δ)-DP, event-level on the prefix ([NRS07] §2: releasing f + (S/a)·Z with S
    a b-smooth upper bound on LS_f and (a, b)-admissible Z), with f = rounded τ' and S above.
    ×r and clipping are post-processing. ``scale`` and ``tau_max`` in the result are
    data-dependent and kept for analysis; only ``threshold``/``unclipped`` are the release.

    Examples
    --------
    >>> rel = pak_threshold([1.0] * 400, bound=10.0, epsilon=1.0, delta=1e-6, lam=0.9,
    ...                     p=0.01, beta_lt=0.01, seed=1)
    >>> 0.0 <= rel.threshold <= 10.0, rel.rank
    (True, 398)
    """
    if not isinstance(clip, bool):
        raise ParameterError(f"The 'clip' parameter of pak_threshold must be a bool. Got {clip!r}.")
    cal = pak_threshold_calibration(
        prefix,
        bound=bound,
        epsilon=epsilon,
        delta=delta,
        lam=lam,
        p=p,
        beta_lt=beta_lt,
        r=r,
        noise=noise,
    )
    if beta_rt is not None:
        _check_beta_lt(beta_rt, "beta_rt", "pak_threshold")
    return _release_threshold(cal, bit_source(seed), clip=clip, beta_rt=beta_rt)


def _release_threshold(
    cal: ThresholdCalibration, bits: BitSource, *, clip: bool, beta_rt: float | None = None
) -> ThresholdRelease:
    """Draw the noise for a validated calibration (internal; takes ``bits``)."""
    if cal.noise == "laplace":
        mech = LaplaceNoise(
            sensitivity=cal.smooth_bound - cal.granularity,
            epsilon=cal.a,
            magnitude=cal.magnitude,
            granularity=cal.granularity,
        )
    else:
        mech = GaussianNoise(sigma=cal.scale, magnitude=cal.magnitude, granularity=cal.granularity)
    noisy = float(mech.release(np.array([cal.tau_prime]), bits)[0])  # [PAK19 Eq. 12]
    unclipped = cal.r * noisy  # [PAK19 Eq. 15]
    threshold = min(max(unclipped, 0.0), cal.bound) if clip else unclipped
    tau_max = None
    if beta_rt is not None:
        rt = noise_quantile(1.0 - beta_rt, cal.noise)
        tau_max = cal.r * (cal.quantile + cal.scale * (cal.offset + rt))  # [PAK19 Eq. 13]
    return ThresholdRelease(
        threshold=threshold,
        unclipped=unclipped,
        rank=cal.rank,
        time_lag=cal.time_lag,
        kappa=cal.kappa,
        a=cal.a,
        b=cal.b,
        scale=cal.scale,
        granularity=cal.granularity,
        noise=cal.noise,
        r=cal.r,
        clipped=clip,
        guarantee=PrivacyGuarantee(
            unit=EventLevel(),
            budget=Budget(cal.epsilon, cal.delta),
            proof="[NRS07] §2 smooth sensitivity with admissible noise; [PAK19] Eqs. 6-12",
        ),
        tau_max=tau_max,
    )
