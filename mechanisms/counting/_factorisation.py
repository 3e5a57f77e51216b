"""The square-root matrix-factorisation counter with discrete Gaussian noise on a lattice.

[FHU23] Fichtenberger, Henzinger and Upadhyay, "Constant matters: fine-grained error bound on
differentially private continual observation", ICML 2023; [HUU23] Henzinger, Upadhyay and
Upadhyay, "Almost tight error bounds on differentially private continual counting", SODA 2023;
[BW18] Balle and Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018;
[CKS20] Canonne, Kamath and Steinke, "The discrete Gaussian for differential privacy", NeurIPS
2020; [Hig02] Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002.

The factorisation
-----------------
The prefix-sum matrix A (lower-triangular ones, n × n) is the square of the lower-triangular
Toeplitz matrix C with first column c_j = C(2j, j)/4ʲ, j = 0..n − 1 (the Taylor coefficients of
(1 − x)^(−1/2), whose square is (1 − x)^(−1)): A = C·C [FHU23 §3]. The mechanism releases
y = C·x + z with Gaussian z and publishes C·y = A·x + C·z (post-processing). Both factors are
lower triangular, so the prefix at t reads only steps ≤ t: a *continual* counter. One step of x
in [0, B] changes C·x by B times a column of C, the longest being the first, so the L2
sensitivity is B·‖c‖₂ (event level, one participation) and the variance of the released prefix
at t is σ²·Σ_{j<t} c_j² (largest at t = n: σ²·‖c‖₂²; ‖c‖₂² = Θ(log n), [FHU23] Thm. 1).

Floating-point safety (our construction; ``docs/privacy.md``, "the square-root counter")
----------------------------------------------------------------------------------------
C·x is real-valued, so it is computed on a public lattice before any noise is added:

1. u = clip(rint(x/γ), 0, ⌊B/γ⌋), integers (γ a power of two: exact).
2. v = fl(C·u) by FFT (batch) or by a direct dot product (streaming), then y = rint(v), integers.
   Both computations satisfy |v_t − (C·u)_t| ≤ η (the bound :func:`_rounding_slack` computes from
   public n and B/γ only: [Hig02] Thm. 24.2 for the FFT's normwise error, Eq. 3.5 for a dot
   product, each times 10). For neighbouring x, x' (one step moved within [0, B]):
   |y_t − y'_t| ≤ |(C(u − u'))_t| + 2η + 1, so ‖y − y'‖₂ ≤ (B/γ)·‖c‖₂ + √n·(2η + 1) =: Δ
   (units of γ): the sensitivity, inflated by the rounding, for which σ is calibrated.
3. z: n independent discrete Gaussians on ℤ ([CKS20] Alg. 3, :func:`discrete_gaussian`), with
   σ the analytic-Gaussian calibration for Δ at the target (ε, δ) ([BW18] Thm. 8, as
   :meth:`GaussianNoise.for_mechanism`). y + z are integers: the only values that read x,
   published exactly (γ·(y + z) is an exact double); everything after is post-processing.

*Privacy*: event level (ε, δ)-DP: the Gaussian mechanism on an integer vector of L2
sensitivity Δ ([BW18] Thm. 8; the discrete Gaussian's loss on a lattice shift at σ ≥ 2²⁴
lattice units matches the continuous one to a relative exp(−2π²·2⁴⁸), as documented for
:meth:`GaussianNoise.for_mechanism`). σ lies in [2²⁴, 2²⁵) units, the range in which the
sampler's floating-point gap is bounded (``docs/privacy.md``).

Noise is drawn in blocks of 2¹² steps in step order, by both the batch release and the
streaming :class:`SqrtFactorisationCounter`, so the same bits give the same noise; the released
sums agree to floating-point tolerance (the rounding of step 2 may differ by one γ where v falls
within a rounding error of a half-integer: both are covered by η).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._noise import LATTICE_BITS, GaussianNoise, _analytic_gaussian_factor
from ..core._random import BitSource, bit_source
from ..core._samplers import discrete_gaussian
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, check_positive, check_probability, check_stream

__all__ = [
    "SqrtFactorisationCounter",
    "SqrtFactorisationRelease",
    "sqrt_coefficients",
    "sqrt_factorisation_noise",
    "sqrt_factorisation_release",
    "sqrt_factorisation_variance",
]

_PROOF = (
    "[FHU23] square-root factorisation A = C·C: y = rint(C·u) on a public lattice, L2 "
    "sensitivity B·‖c‖₂ inflated by the rounding, discrete Gaussian noise calibrated by the "
    "analytic Gaussian mechanism ([BW18] Thm. 8); prefix sums C·(y + z) are post-processing"
)
#: Steps per block of noise draws (shared by the batch and the streaming paths).
_BLOCK = 1 << 12
#: Largest stream: integers of C·u stay below 2⁵⁰ (exact doubles), see _lattice.
_MAX_N = 1 << 26
_U = 2.0**-53  # unit roundoff of float64


def sqrt_coefficients(n: int) -> np.ndarray:
    """c_j = C(2j, j)/4ʲ, j = 0..n − 1 ([FHU23] §3), by the recurrence c_j = c_{j−1}(2j − 1)/(2j).

    The mechanism uses these floats as its C (public, fixed): the sensitivity is computed for
    them, so their own rounding (relative ≤ n·2⁻⁵³) costs no privacy; C·C equals A up to that.
    """
    n = check_integer(n, "n", "sqrt_coefficients")
    j = np.arange(1, n, dtype=np.float64)
    out = np.empty(n, dtype=np.float64)
    out[0] = 1.0
    out[1:] = np.cumprod((2.0 * j - 1.0) / (2.0 * j))
    return out


def _rounding_slack(n: int, units_bound: float, coef: np.ndarray) -> float:
    """η: a bound on |fl(C·u)_t − (C·u)_t| for every t and every u in [0, units_bound]ⁿ.

    The larger of (a) the FFT convolution's normwise bound ([Hig02] Thm. 24.2: each length-N
    radix-2 transform has relative 2-norm error ≤ log₂N·η₁/(1 − log₂N·η₁), η₁ = μ + γ₄(√2 + μ),
    μ ≤ 2u for accurate twiddles; three transforms and one product, ‖F(c)‖_∞ ≤ ‖c‖₁) and (b)
    the direct dot product ([Hig02] Eq. 3.5: γ_n·Σ|c_j||u_{t−j}|), each times a safety
    factor 10. Public inputs only.
    """
    size = 1 << max(1, (2 * n - 1).bit_length())
    logn = math.log2(size)
    gamma4 = 4 * _U / (1 - 4 * _U)
    eta1 = 2 * _U + gamma4 * (math.sqrt(2.0) + 2 * _U)
    rel = logn * eta1 / (1 - logn * eta1)
    l1 = float(coef.sum())
    u2 = units_bound * math.sqrt(n)
    fft = (3 * rel + _U) * l1 * u2
    gamma_n = n * _U / (1 - n * _U)
    direct = gamma_n * l1 * units_bound
    return 10.0 * max(fft, direct)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Calibration:
    granularity: float
    units_bound: float
    sensitivity_units: float
    sigma_units: float


def _place_on_lattice(
    n: int,
    epsilon: float,
    delta: float,
    bound: float,
    coef: np.ndarray | None,
    slack,
    *,
    norm: float | None = None,
) -> _Calibration:
    """γ, ⌊B/γ⌋, Δ (inflated, units) and σ (units, in [2²⁴, 2²⁵)) for the encoding C·u with
    first column ``coef`` (or its L2 ``norm``, given instead: the open BLT's infinite column)
    over n rounded coordinates and rounding slack ``slack(⌊B/γ⌋)`` (η): public inputs only.
    Shared by the square root and the BLT counters (:mod:`._blt`, :mod:`._open_blt`)."""
    if norm is None:
        norm = math.sqrt(float(np.dot(coef, coef)))
    factor = _analytic_gaussian_factor(epsilon, delta)  # σ/Δ [BW18 Alg. 1]
    # γ such that σ/γ ∈ [2²⁴, 2²⁵): σ ≈ factor·B·‖c‖₂ before the (small) inflation; the loop
    # re-derives γ from the inflated σ until it is stable (at most a step or two).
    gamma = math.ldexp(1.0, math.floor(math.log2(factor * bound * norm)) - LATTICE_BITS)
    for _ in range(8):
        units_bound = math.floor(bound / gamma)
        eta = slack(units_bound)
        sens = units_bound * norm + math.sqrt(n) * (2.0 * eta + 1.0)
        sens *= 1.0 + 1e-12  # round the float arithmetic of ‖c‖₂ and the sum upwards
        sigma = factor * sens
        if sigma < 2.0**LATTICE_BITS:
            gamma /= 2.0
        elif sigma >= 2.0 ** (LATTICE_BITS + 1):
            gamma *= 2.0
        else:
            return _Calibration(
                granularity=gamma,
                units_bound=float(units_bound),
                sensitivity_units=sens,
                sigma_units=sigma,
            )
    raise ParameterError(  # pragma: no cover - the loop converges in two steps
        "A factorisation counter could not place σ on its lattice; report this as a bug."
    )


@functools.lru_cache(maxsize=64)
def _calibrate(n: int, epsilon: float, delta: float, bound: float) -> _Calibration:
    """The square root's lattice calibration (:func:`_place_on_lattice`; memoised: a pure
    function of public floats, asked for once per release)."""
    coef = sqrt_coefficients(n)
    return _place_on_lattice(
        n, epsilon, delta, bound, coef, lambda units: _rounding_slack(n, units, coef)
    )


def _check(n, epsilon, delta, bound, owner) -> tuple[int, float, float, float]:
    n = check_integer(n, "n", owner, maximum=_MAX_N)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    return n, eps, dlt, bnd


def sqrt_factorisation_noise(
    n: int, *, epsilon: float, delta: float, bound: float
) -> GaussianNoise:
    """The noise of one coordinate of y = C·x + z, in the values' units (σ·γ, lattice γ)."""
    n, eps, dlt, bnd = _check(n, epsilon, delta, bound, "sqrt_factorisation_noise")
    cal = _calibrate(n, eps, dlt, bnd)
    return GaussianNoise(
        sigma=cal.sigma_units * cal.granularity,
        magnitude=0.0,
        granularity=cal.granularity,
    )


def sqrt_factorisation_variance(
    n: int, *, epsilon: float, delta: float, bound: float
) -> np.ndarray:
    """Exact noise variance of every released prefix t = 1..n: σ²·Σ_{j<t} c_j² (module notes)."""
    noise = sqrt_factorisation_noise(n, epsilon=epsilon, delta=delta, bound=bound)
    coef = sqrt_coefficients(n)
    return np.cumsum(coef * coef) * noise.variance


def _convolve(coef: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(C·values)_t = Σ_{j ≤ t} c_j values_{t−j}, t = 0..n − 1, by real FFT (O(n log n))."""
    n = values.size
    size = 1 << max(1, (2 * n - 1).bit_length())
    out = np.fft.irfft(np.fft.rfft(coef, size) * np.fft.rfft(values, size), size)
    return out[:n]


@dataclass(frozen=True, slots=True, kw_only=True)
class SqrtFactorisationRelease:
    """Prefix sums released by the square-root factorisation counter (module notes)."""

    prefix_sums: np.ndarray
    """The estimate of c(σ, t) for t = 1..n (index t − 1): C·(y + z)·γ."""
    encoded: np.ndarray
    """The published noisy encoding γ·(y + z) (the only values that read the data)."""
    noise: GaussianNoise
    """One coordinate's noise (σ and the lattice γ, in the values' units)."""
    sensitivity: float
    """L2 sensitivity of y in the values' units, rounding included (Δ·γ)."""
    epsilon: float
    """Target ε."""
    delta: float
    """Target δ."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level (ε, δ)."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        self.prefix_sums.setflags(write=False)
        self.encoded.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of every prefix sum: σ²·Σ_{j<t} c_j²."""
        coef = sqrt_coefficients(self.n)
        out = np.cumsum(coef * coef) * self.noise.variance
        out.setflags(write=False)
        return out


def _guarantee(epsilon: float, delta: float) -> PrivacyGuarantee:
    return PrivacyGuarantee(unit=EventLevel(), budget=Budget(epsilon, delta), proof=_PROOF)


def _sqrt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    bits: BitSource,
    owner: str = "sqrt_factorisation_release",
) -> SqrtFactorisationRelease:
    """Validate everything, then release with noise from ``bits`` (module notes)."""
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = check_integer(vals.size, "n", owner, maximum=_MAX_N)
    cal = _calibrate(n, eps, dlt, bnd)
    g = cal.granularity
    units = np.multiply(vals, 1.0 / g)  # exact: γ is a power of two
    np.rint(units, out=units)
    np.clip(units, 0.0, cal.units_bound, out=units)
    coef = sqrt_coefficients(n)
    y = np.rint(_convolve(coef, units))  # step 2: integers, |error| ≤ η before rounding
    z = np.concatenate(
        [discrete_gaussian(bits, min(_BLOCK, n - a), cal.sigma_units) for a in range(0, n, _BLOCK)]
    )
    noisy = y + z  # exact integers below 2⁵⁰
    prefix = _convolve(coef, noisy) * g  # post-processing
    return SqrtFactorisationRelease(
        prefix_sums=prefix,
        encoded=noisy * g,
        noise=GaussianNoise(sigma=cal.sigma_units * g, granularity=g),
        sensitivity=cal.sensitivity_units * g,
        epsilon=eps,
        delta=dlt,
        bound=bnd,
        guarantee=_guarantee(eps, dlt),
    )


def sqrt_factorisation_release(
    values: object, *, epsilon: float, delta: float, bound: float, seed: object = None
) -> SqrtFactorisationRelease:
    """Release every prefix sum with the square-root factorisation counter ([FHU23]).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``].
    epsilon, delta
        Target (ε, δ), δ ∈ (0, 1), met by the analytic Gaussian calibration ([BW18]).
    bound
        Public bound B.
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    Var(c̃(t)) = σ²·Σ_{j<t} c_j², σ = (analytic factor)·(B‖c‖₂ + rounding) (module notes).
    *Privacy*: event-level (ε, δ)-DP, the Gaussian mechanism on C·x on a lattice ([BW18]
    Thm. 8, [FHU23]); the prefix sums are post-processing.

    Examples
    --------
    >>> rel = sqrt_factorisation_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6,
    ...                                  bound=2.0, seed=7)
    >>> rel.n, bool(np.all(np.diff(rel.variance) > 0))
    (4, True)
    """
    return _sqrt_release(values, epsilon=epsilon, delta=delta, bound=bound, bits=bit_source(seed))


class SqrtFactorisationCounter:
    """Streaming square-root counter: ``push(x)`` returns the prefix sum so far, O(t) per step.

    Sized to n in advance (its σ depends on ‖c‖₂ over n steps). Draws the same noise blocks as
    :func:`sqrt_factorisation_release` from the same bits; releases agree to floating point.

    Examples
    --------
    >>> counter = SqrtFactorisationCounter(4, epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> sums = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> rel = sqrt_factorisation_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6,
    ...                                  bound=2.0, seed=7)
    >>> bool(np.allclose(sums, rel.prefix_sums, rtol=0, atol=1e-9 * 2.0 * 4))
    True
    """

    def __init__(
        self, n: int, *, epsilon: float, delta: float, bound: float, seed: object = None
    ) -> None:
        n, eps, dlt, bnd = _check(n, epsilon, delta, bound, "SqrtFactorisationCounter")
        self.n, self.epsilon, self.delta, self.bound = n, eps, dlt, bnd
        self._cal = _calibrate(n, eps, dlt, bnd)
        self._coef = sqrt_coefficients(n)
        self._bits = bit_source(seed)
        self._units = np.zeros(n, dtype=np.float64)
        self._noisy = np.zeros(n, dtype=np.float64)
        self._block = np.empty(0)
        self._t = 0

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """Event-level (ε, δ) of the whole stream of n steps."""
        return _guarantee(self.epsilon, self.delta)

    def push(self, x: float) -> float:
        """Add step t's value and return the released prefix sum c̃(t).

        ``x`` is clamped to [0, B] (as :meth:`BinaryTreeCounter.push`: an error that depends
        on a private value would leak it); a non-number or NaN raises a typed error.
        """
        kind = type(x)
        if kind is not float and (kind is bool or kind is np.bool_ or not isinstance(x, Real)):
            raise DomainError(
                "The 'x' argument of SqrtFactorisationCounter.push must be a real number. Got "
                f"{kind.__name__}."
            )
        val = float(x)
        if math.isnan(val):
            raise DomainError(
                "The 'x' argument of SqrtFactorisationCounter.push must be a number, not NaN (a "
                "NaN cannot be clamped to the bound). Impute missing values before pushing."
            )
        if self._t >= self.n:
            raise ParameterError(
                f"SqrtFactorisationCounter was sized for n={self.n} steps; every step has been "
                "pushed. Size a new counter for the whole stream."
            )
        t, g = self._t, self._cal.granularity
        val = min(max(val, 0.0), self.bound)
        self._units[t] = min(max(round(val / g), 0.0), self._cal.units_bound)
        if t % _BLOCK == 0:
            self._block = discrete_gaussian(
                self._bits, min(_BLOCK, self.n - t), self._cal.sigma_units
            )
        rev = self._coef[t::-1]  # c_t .. c_0 against u_0 .. u_t
        y = float(np.rint(np.dot(rev, self._units[: t + 1])))
        self._noisy[t] = y + self._block[t % _BLOCK]
        self._t = t + 1
        return float(np.dot(rev, self._noisy[: t + 1])) * g

    def variance(self, t: int | None = None) -> float:
        """Exact noise variance of c̃(t) (default: the last step pushed)."""
        t = self._t if t is None else check_integer(t, "t", "SqrtFactorisationCounter.variance")
        sig = self._cal.sigma_units * self._cal.granularity
        return float(np.dot(self._coef[:t], self._coef[:t])) * sig * sig
