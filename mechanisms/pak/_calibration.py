"""Calibration of the PAK threshold ([PAK19] Eqs. 6, 7, 11): κ, τ_max and the noise scale,
computed without drawing anything (auditors and the release share it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..core._errors import ParameterError
from ..core._noise import LATTICE_BITS, lattice_granularity
from ..core._validation import check_fraction, check_positive, check_probability, check_stream
from ._quantile import (
    _check_noise,
    _smooth_sensitivity_sorted,
    noise_quantile,
    quantile_rank,
    smoothing_parameters,
)

__all__ = ["ThresholdCalibration", "pak_kappa", "pak_tau_max", "pak_threshold_calibration"]

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
