"""The one module every release draws its noise from: lattice-valued Laplace and Gaussian.

Floating-point safety
---------------------
Textbook Laplace noise in floating point leaks (Mironov, CCS 2012): the set of doubles that
``x + Lap(b)`` can produce depends on ``x``, so an output can rule out a neighbour outright.
Here every release lives on a lattice γℤ with γ a power of two fixed by *public* quantities
only (the noise scale and a public bound on the magnitude of the values):

1. the true value is rounded to the nearest lattice point, ``round(x/γ)·γ``; this moves it by at
   most γ/2, so the rounded query has sensitivity at most Δ + γ, and the scale is computed from
   Δ + γ (the rounding is *accounted in the sensitivity*);
2. an integer K is drawn from the discrete Laplace (or discrete Gaussian) distribution and the
   output is ``(round(x/γ) + K)·γ``, an exact double because γ is a power of two and the
   integer stays below 2⁵².

Outputs on neighbouring inputs therefore share one support (γℤ) and their probabilities differ
by at most exp(ε): the discrete Laplace ratio for a shift of at most (Δ + γ)/γ lattice steps is
exp((Δ + γ)/scale) = exp(ε).

The discrete Laplace integer is the difference of two geometric variables (exact identity),
each drawn by inverting its CDF from the 53-bit uniform in the top bits of one 64-bit word of
the secure source. The discrete
Gaussian uses the rejection sampler of Canonne, Kamath and Steinke (NeurIPS 2020, Algorithm 3)
on top of the same discrete Laplace. Acceptance tests and inversions use double precision;
the total variation this costs per draw is bounded in ``docs/privacy.md`` (Laplace ≤ 3.3·10⁻¹³,
Gaussian ≤ 8.9·10⁻¹³), a deviation we document rather than hide.
The samplers themselves live in :mod:`mechanisms.core._samplers`.

Why not a library: numpy's samplers are float-valued (the attack above) and seeded from a
non-cryptographic generator; OpenDP's exact samplers are scalar Python/Rust calls, orders of
magnitude too slow for 10⁷ draws. This module is vectorised over numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ._errors import ParameterError
from ._random import BitSource
from ._samplers import discrete_gaussian, discrete_laplace
from ._validation import check_positive

__all__ = [
    "GaussianNoise",
    "LaplaceNoise",
    "discrete_gaussian",
    "discrete_laplace",
    "lattice_granularity",
    "snap_to_lattice",
]

#: The lattice is at least 2**LATTICE_BITS times finer than the noise scale.
LATTICE_BITS = 24
#: Integers on the lattice stay below 2**_MAX_LATTICE_BITS so that k·γ is an exact double.
_MAX_LATTICE_BITS = 50


def lattice_granularity(scale: float, magnitude: float = 0.0) -> float:
    """Return the power of two γ used as the release lattice.

    γ = 2^(⌊log2 scale⌋ − 24), raised if needed so that ``magnitude / γ < 2⁵⁰`` (every lattice
    point a release can reach is then an exact double). Both arguments must be public.
    """
    scale = check_positive(scale, "scale", "lattice_granularity")
    magnitude = check_positive(magnitude, "magnitude", "lattice_granularity", allow_zero=True)
    exponent = math.floor(math.log2(scale)) - LATTICE_BITS
    if magnitude > 0:
        exponent = max(exponent, math.ceil(math.log2(magnitude)) - _MAX_LATTICE_BITS)
    return math.ldexp(1.0, exponent)


def _check_power_of_two(value: object, owner: str) -> float:
    gamma = check_positive(value, "granularity", owner)
    mantissa, _ = math.frexp(gamma)
    if mantissa != 0.5:
        raise ParameterError(
            f"The 'granularity' parameter of {owner} must be a power of two. Got {value!r} "
            "instead. Use lattice_granularity() to derive one."
        )
    return gamma


def snap_to_lattice(values: np.ndarray, granularity: float) -> np.ndarray:
    """Round ``values`` to the nearest multiple of ``granularity`` (ties to even)."""
    return np.rint(np.asarray(values, dtype=np.float64) / granularity) * granularity


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceNoise:
    """Lattice Laplace noise calibrated to a sensitivity and an ε.

    The released value is ``(round(x/γ) + K)·γ`` with K discrete Laplace of ratio
    exp(−γ/scale); see the module notes.

    Notes
    -----
    *Privacy*: for any query whose L1 sensitivity is at most ``sensitivity``, releasing it with
    this noise is ε-DP for the neighbour relation that defines the sensitivity (Dwork et al.
    2006, Laplace mechanism), with the lattice rounding included through
    ``scale = (sensitivity + γ)/ε``.
    """

    sensitivity: float
    """L1 sensitivity Δ of the query, in the query's units."""
    epsilon: float
    """Privacy loss ε of one release."""
    magnitude: float = 0.0
    """Public bound on |value| of the released quantities (keeps the lattice exact)."""
    granularity: float | None = None
    """Lattice spacing γ, a power of two. ``None`` derives it from Δ/ε and ``magnitude``; pass
    one explicitly (from public quantities only) when Δ itself is data-dependent, as with
    smooth sensitivity: a data-dependent lattice would leak through the output's support."""
    scale: float = field(init=False)
    """Laplace scale b = (Δ + γ)/ε actually used (not a standard deviation)."""

    def __post_init__(self) -> None:
        sens = check_positive(self.sensitivity, "sensitivity", "LaplaceNoise")
        eps = check_positive(self.epsilon, "epsilon", "LaplaceNoise")
        mag = check_positive(self.magnitude, "magnitude", "LaplaceNoise", allow_zero=True)
        gamma = (
            lattice_granularity(sens / eps, mag)
            if self.granularity is None
            else _check_power_of_two(self.granularity, "LaplaceNoise")
        )
        object.__setattr__(self, "granularity", gamma)
        object.__setattr__(self, "scale", (sens + gamma) / eps)

    @property
    def variance(self) -> float:
        """Exact variance of one noise draw: γ²·2q/(1 − q)², q = exp(−γ/scale)."""
        q = math.exp(-self.granularity / self.scale)
        return self.granularity**2 * 2.0 * q / (1.0 - q) ** 2

    def sample(self, size: int, bits: BitSource) -> np.ndarray:
        """Noise alone (lattice-valued), for adding to values already on the lattice."""
        return discrete_laplace(bits, int(size), self.scale / self.granularity) * self.granularity

    def release(self, values: np.ndarray, bits: BitSource) -> np.ndarray:
        """Snap ``values`` to the lattice and add one noise draw to each entry."""
        vals = np.asarray(values, dtype=np.float64)
        k = np.rint(vals / self.granularity)
        k = k + discrete_laplace(bits, k.size, self.scale / self.granularity).reshape(k.shape)
        return k * self.granularity


def _gaussian_delta(epsilon: float, factor: float) -> float:
    """δ(ε) of N(0, (factor·Δ)²) noise on a query of L2 sensitivity Δ ([BW18] Thm. 8)."""
    from scipy.special import log_ndtr, ndtr

    u = float(factor)
    hi = ndtr(0.5 / u - epsilon * u)
    lo = math.exp(epsilon + log_ndtr(-0.5 / u - epsilon * u))  # e^ε·Φ(·) without overflow
    return float(hi - lo)


def _analytic_gaussian_factor(epsilon: float, delta: float) -> float:
    """The smallest u = σ/Δ with ``_gaussian_delta(ε, u) <= δ`` ([BW18] Alg. 1, by brentq).

    Hand-written around :func:`scipy.optimize.brentq`: the root of a scalar closed form, with a
    final upward nudge so that the returned u satisfies the condition in floating point.
    """
    from scipy.optimize import brentq

    lo, hi = 1e-3, 1.0
    while _gaussian_delta(epsilon, lo) <= delta:
        lo /= 2.0
    while _gaussian_delta(epsilon, hi) > delta:
        hi *= 2.0
    u = brentq(lambda x: _gaussian_delta(epsilon, x) - delta, lo, hi, xtol=1e-15, rtol=1e-12)
    u *= 1.0 + 1e-9
    while _gaussian_delta(epsilon, u) > delta:
        u *= 1.0 + 1e-9
    return u


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianNoise:
    """Lattice Gaussian noise with a given standard deviation σ (in the values' units).

    Calibration is the caller's (Gaussian mechanism, or smooth sensitivity / a as in PAK
    §IV-C); callers add the lattice spacing γ to the shift they calibrate for. Use
    :meth:`for_mechanism` for the (ε, δ) Gaussian mechanism (analytic calibration, [BW18]).
    """

    sigma: float
    """Standard deviation of the noise (not a Laplace scale)."""
    magnitude: float = 0.0
    """Public bound on |value| of the released quantities (keeps the lattice exact)."""
    granularity: float | None = None
    """Lattice spacing γ, a power of two. ``None`` derives it from σ and ``magnitude`` (σ must
    then be public); pass one derived from public quantities when σ is data-dependent."""

    def __post_init__(self) -> None:
        sigma = check_positive(self.sigma, "sigma", "GaussianNoise")
        mag = check_positive(self.magnitude, "magnitude", "GaussianNoise", allow_zero=True)
        gamma = (
            lattice_granularity(sigma, mag)
            if self.granularity is None
            else _check_power_of_two(self.granularity, "GaussianNoise")
        )
        object.__setattr__(self, "granularity", gamma)

    @classmethod
    def for_mechanism(
        cls, *, sensitivity: float, epsilon: float, delta: float, magnitude: float = 0.0
    ) -> GaussianNoise:
        """The smallest σ of the analytic Gaussian mechanism (Balle and Wang, ICML 2018,
        Thm. 8 and Alg. 1), valid for every ε > 0, with the lattice rounding added to Δ.

        Notes
        -----
        N(0, σ²) noise on a query of L2 sensitivity Δ is (ε, δ)-DP if and only if
        ``Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) <= δ`` [BW18, Thm. 8]. The left side falls
        as σ grows, so the smallest σ is a root, found with :func:`scipy.optimize.brentq` on
        u = σ/Δ and then raised until the condition holds in floating point. σ scales with
        Δ + γ (γ = the lattice spacing, at least 2²⁴ times smaller than σ). The classical
        σ = Δ√(2 ln(1.25/δ))/ε (Dwork and Roth 2014, Thm. A.1) is only proven for ε < 1 and is
        larger than this one wherever it holds.

        The noise drawn is the discrete Gaussian on γℤ: its exact δ (Canonne, Kamath and
        Steinke 2020, Thm. 7) is the same expression with discrete tails, which differ from
        the continuous ones by a relative ≈ exp(−2π²σ²/γ²) at σ >= 2²⁴γ (Poisson summation):
        far below any δ we accept, and documented rather than added.
        """
        owner = "GaussianNoise.for_mechanism"
        sens = check_positive(sensitivity, "sensitivity", owner)
        eps = check_positive(epsilon, "epsilon", owner)
        dlt = check_positive(delta, "delta", owner)
        if dlt >= 1.0:
            raise ParameterError(
                f"The 'delta' parameter of {owner} must be a float in (0, 1). Got {delta!r} "
                "instead."
            )
        factor = _analytic_gaussian_factor(eps, dlt)
        gamma = lattice_granularity(sens * factor, magnitude)
        return cls(sigma=(sens + gamma) * factor, magnitude=magnitude)

    @property
    def variance(self) -> float:
        """Variance of one draw (σ² up to a relative 2⁻⁴⁰ for σ ≥ 2²⁴γ)."""
        return self.sigma**2

    def sample(self, size: int, bits: BitSource) -> np.ndarray:
        """Noise alone (lattice-valued)."""
        return discrete_gaussian(bits, int(size), self.sigma / self.granularity) * self.granularity

    def release(self, values: np.ndarray, bits: BitSource) -> np.ndarray:
        """Snap ``values`` to the lattice and add one noise draw to each entry."""
        vals = np.asarray(values, dtype=np.float64)
        k = np.rint(vals / self.granularity)
        k = k + discrete_gaussian(bits, k.size, self.sigma / self.granularity).reshape(k.shape)
        return k * self.granularity
