"""Buffered linear Toeplitz (BLT) counters: the square root's error, a streaming push in O(d).

[DMRST24] Dvijotham, McMahan, Pillutla, Steinke and Thakurta, "Efficient and near-optimal noise
generation for streaming differential privacy", FOCS 2024; [McK24] McKenna, "Scaling up the
banded matrix factorization mechanism for differentially private ML", 2024; [FHU23] (the square
root, :mod:`._factorisation`); [Hig02] Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., SIAM 2002.

The strategy
------------
C is lower-triangular Toeplitz with c₀ = 1 and c_j = Σᵢ ωᵢ θᵢ^(j−1) (j ≥ 1), d buffers with
θᵢ ∈ (0, 1), ωᵢ > 0. In state-space form y_t = u_t + ω·s_t, s_{t+1} = Θ s_t + 1·u_t (Θ =
diag θ): C·u streams with d numbers of state. Its inverse is again a sum of powers: x_t =
y_t − ω·s_t, s_{t+1} = (Θ − 1ωᵀ) s_t + 1·y_t, so r_j = −ωᵀ M^(j−1) 1 with M = Θ − 1ωᵀ,
computed from M's eigen-decomposition (real: a rank-one update of a diagonal; checked). The
mechanism releases y + z (y = C·u on a lattice, z Gaussian) and publishes the prefix sums
A·C⁻¹·(y + z) = A·x + B·z, B = A·C⁻¹ with b_j = Σ_{k ≤ j} r_k. Worst-step variance σ²·Σ_{j<n}
b_j², sensitivity ‖c‖₂ (columns of a lower-triangular Toeplitz matrix are prefixes of c: the
first is the longest). (θ, ω) per horizon 2^k are fitted offline (``scripts/blt_constants.py``,
shipped in :mod:`._blt_constants`): the ``"max"`` family minimises the worst step (within 1% of
the square root's at every shipped horizon, ``bench/bench_factorisation.py``), the ``"mean"``
family the mean over the steps. A stream of n steps uses the strategy of horizon
2^⌈log₂ n⌉ truncated to n (its exact variance is stated for the truncation).

Floating-point safety: as :mod:`._factorisation` (``docs/privacy.md``). y = rint(v) with v =
fl(C·u) by FFT (batch) or by the buffers (streaming); η bounds |v_t − (Ĉ·u)_t| for both
(:func:`_rounding_slack`: the FFT's normwise bound, the buffers' error recursion, and the
coefficients' own rounding, times 10), and the L2 sensitivity is ⌊B/γ⌋·‖ĉ‖₂ + √n·(2η + 1).
Beyond n = 2²⁰ both bounds grow too fast (η ≈ 400 lattice units at 2²⁴: the worst step was
2.3× the square root's); there the batch release runs the streaming encoder too, with its
long-lived state in x87 extended precision (``np.longdouble``, u = 2⁻⁶⁴), and η falls by 2¹¹:
the *wide encoder* runs in sub-blocks of L = 256 steps, s(t₀ + r) = Θʳ·s(t₀) + w(r): the base
ŝ(t₀) in extended precision and the carry ω·Θʳŝ(t₀) once per sub-block, the L steps' buffers
w in doubles from zero (:func:`_block_slack`; the calibration pays the larger of that bound and
the whole encoder's in extended precision, :func:`_stream_slack`, so σ is the latter's).

The streaming counter (:class:`BLTCounter`, its push and ``push_many``) is in
:mod:`._blt_counter`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..core._budget import Budget
from ..core._errors import ParameterError
from ..core._noise import GaussianNoise
from ..core._random import BitSource, bit_source
from ..core._samplers import discrete_gaussian
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    check_integer,
    check_positive,
    check_probability,
    check_stream,
)
from ._factorisation import _BLOCK, _Calibration, _convolve, _place_on_lattice

__all__ = [
    "BLTRelease",
    "BLTStrategy",
    "blt_loss",
    "blt_release",
    "blt_strategy",
    "blt_variance",
]

_PROOF = (
    "[DMRST24] buffered linear Toeplitz factorisation A = (A·C⁻¹)·C: y = rint(C·u) on a public "
    "lattice, L2 sensitivity B·‖c‖₂ inflated by the rounding, discrete Gaussian noise "
    "calibrated by the analytic Gaussian mechanism ([BW18] Thm. 8); prefix sums are "
    "post-processing"
)
_U = 2.0**-53
#: Largest stream (the largest shipped horizon).
_MAX_N = 1 << 24
#: Longer streams encode in extended precision, batch and push alike (module notes).
_WIDE_FROM = 1 << 20
#: Unit roundoff of numpy's long double (2⁻⁶⁴ with x87 extended precision; 2⁻⁵³ where it is a
#: double: the calibration then pays the larger rounding, still private).
_EXTENDED_UNIT = float(np.finfo(np.longdouble).eps) / 2.0


def _powers(theta: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """out[0] = 1, out[j] = Σᵢ weightᵢ θᵢ^(j−1) for j = 1..n − 1 (θ may be negative)."""
    out = np.zeros(n, dtype=np.float64)
    out[0] = 1.0
    if n > 1:
        j = np.arange(n - 1, dtype=np.float64)
        for th, w in zip(theta, weight, strict=True):
            term = np.exp(j * math.log(abs(th))) * w
            if th < 0:
                term[1::2] *= -1.0
            out[1:] += term
    return out


def _inverse(theta: np.ndarray, omega: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(λ, w) with r_j = Σ_k w_k λ_k^(j−1) for j ≥ 1 (module notes); ParameterError if M has a
    complex or non-contracting eigenvalue (the inverse would not be a stable sum of powers)."""
    m = np.diag(theta) - np.outer(np.ones_like(theta), omega)
    lam, vec = np.linalg.eig(m)
    if np.any(np.abs(lam.imag) > 1e-12) or np.any(np.abs(lam) >= 1.0):
        raise ParameterError(
            "A BLT strategy must have an inverse with real eigenvalues in (−1, 1); these "
            "parameters do not. Use a shipped strategy (blt_strategy) or refit them."
        )
    lam, vec = lam.real, vec.real
    weight = -(omega @ vec) * np.linalg.solve(vec, np.ones_like(theta))
    return lam, weight


@dataclass(frozen=True, slots=True, kw_only=True)
class BLTStrategy:
    """A BLT factorisation C (module notes): public constants, no data."""

    theta: tuple[float, ...]
    """Buffer decays θᵢ ∈ (0, 1)."""
    omega: tuple[float, ...]
    """Buffer weights ωᵢ > 0."""

    def __post_init__(self) -> None:
        th = np.asarray(self.theta, dtype=np.float64)
        om = np.asarray(self.omega, dtype=np.float64)
        if th.ndim != 1 or th.shape != om.shape or th.size == 0:
            raise ParameterError(
                "The 'theta' and 'omega' parameters of BLTStrategy must be non-empty sequences "
                f"of one length. Got {th.size} and {om.size}."
            )
        if not (np.all(th > 0.0) and np.all(th < 1.0) and np.all(om > 0.0)):
            raise ParameterError(
                "The 'theta' parameter of BLTStrategy must lie in (0, 1) and 'omega' be positive."
            )
        _inverse(th, om)  # raises if the inverse is not a stable sum of powers

    @property
    def buffers(self) -> int:
        """d: numbers of state per stream."""
        return len(self.theta)

    def coefficients(self, n: int) -> np.ndarray:
        """c_0..c_{n−1} of C."""
        return _powers(np.array(self.theta), np.array(self.omega), n)

    def inverse_coefficients(self, n: int) -> np.ndarray:
        """r_0..r_{n−1} of C⁻¹."""
        lam, weight = _inverse(np.array(self.theta), np.array(self.omega))
        return _powers(lam, weight, n)


def blt_loss(theta: object, omega: object, n: int, *, at: str = "max") -> float:
    """‖c‖₂²·Σ_{j<n} b_j² (``at="max"``: the worst step's variance per unit sensitivity², at
    σ = ‖c‖₂) or ‖c‖₂² × the mean over t of Σ_{j<t} b_j² (``at="mean"``); inf if C⁻¹ is not
    a stable sum of powers. What ``scripts/blt_constants.py`` minimises."""
    th = np.asarray(theta, dtype=np.float64)
    om = np.asarray(omega, dtype=np.float64)
    try:
        lam, weight = _inverse(th, om)
    except ParameterError:
        return math.inf
    c = _powers(th, om, n)
    b = np.cumsum(_powers(lam, weight, n))
    cum = np.cumsum(b * b)
    return float(c @ c) * float(cum[-1] if at == "max" else cum.mean())


def blt_strategy(n: int, *, at: str = "max") -> BLTStrategy:
    """The shipped strategy for n steps: horizon 2^⌈log₂ n⌉ (at least 2⁴), worst-step
    (``"max"``) or mean (``"mean"``) optimised."""
    n = check_integer(n, "n", "blt_strategy", maximum=_MAX_N)
    if at not in ("max", "mean"):
        raise ParameterError(
            f"The 'at' parameter of blt_strategy must be 'max' or 'mean'. Got {at!r} instead."
        )
    return _shipped(max(4, (n - 1).bit_length()), at)


@functools.lru_cache(maxsize=64)
def _shipped(k: int, at: str) -> BLTStrategy:
    from ._blt_constants import MAX, MEAN

    theta, omega = (MAX if at == "max" else MEAN)[k]
    return BLTStrategy(theta=tuple(theta), omega=tuple(omega))


@functools.lru_cache(maxsize=16)
def _coefficient_pair(strategy: BLTStrategy, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(c, r) of ``strategy`` over n steps, read-only (memoised: public, asked per release)."""
    coef, inv = strategy.coefficients(n), strategy.inverse_coefficients(n)
    coef.setflags(write=False)
    inv.setflags(write=False)
    return coef, inv


def _rounding_slack(strategy: BLTStrategy, n: int, units_bound: float, coef: np.ndarray) -> float:
    """η ≥ |v_t − (Ĉ·u)_t| for the FFT and the buffers, every t and u ∈ [0, M]ⁿ (module notes).

    * FFT: [Hig02] Thm. 24.2 as in :func:`._factorisation._rounding_slack`.
    * Buffers: sᵢ(t) ≤ Sᵢ = M/(1 − θᵢ); each step rounds a product and a sum, so the error of
      sᵢ obeys eᵢ(t) ≤ θᵢ eᵢ(t − 1) + 2u(Sᵢ + eᵢ) and eᵢ ≤ 2u·Sᵢ/(1 − θᵢ − 2u); the output
      u_t + ω·s adds Σ ωᵢ eᵢ and the dot product's γ_{d+1}·(M + Σ ωᵢ(Sᵢ + eᵢ)) ([Hig02] Eq. 3.5).
    * Coefficients: ĉ_j = Σ ωᵢ fl(θᵢ^(j−1)) by exp/log has relative error ≤ (4 + j|ln θᵢ|)·u
      per term, so Σ_j |ĉ_j − c_j|·M ≤ M·Σᵢ ωᵢ·u·(4/(1 − θᵢ) + θᵢ|ln θᵢ|/(1 − θᵢ)²).
    The sum of the three, times a safety factor 10. Public inputs only.
    """
    from ._factorisation import _rounding_slack as fft_slack

    fft = fft_slack(n, float(units_bound), coef) / 10.0
    return 10.0 * fft + _stream_slack(strategy, units_bound)


def _stream_slack(strategy: BLTStrategy, units_bound: float, unit: float = _U) -> float:
    """10·(the buffers' bound + the coefficients' bound) of :func:`_rounding_slack`: η for
    the streaming arithmetic alone (``push``/``push_many``), whatever the stream's length;
    ``unit`` is the unit roundoff of the encoder's arithmetic (2⁻⁵³ in doubles, 2⁻⁶⁴ in the
    x87 extended precision of :class:`._open_blt.UnboundedBLTCounter`)."""
    th = np.array(strategy.theta)
    om = np.array(strategy.omega)
    m = float(units_bound)
    s = m / (1.0 - th)
    e = 2.0 * unit * s / (1.0 - th - 2.0 * unit)
    d = th.size
    gamma = (d + 1) * unit / (1.0 - (d + 1) * unit)
    stream = float(om @ e) + gamma * (m + float(om @ (s + e)))
    coef_err = m * _U * float(om @ (4.0 / (1.0 - th) + th * np.abs(np.log(th)) / (1.0 - th) ** 2))
    return 10.0 * (stream + coef_err)


#: Steps per sub-block of the wide encoder (module notes): 16 per noise block.
_SUB = 256


def _gamma(k: int, unit: float) -> float:
    """γ_k = k·u/(1 − k·u) ([Hig02] Lemma 3.1)."""
    return k * unit / (1.0 - k * unit)


def _block_slack(strategy: BLTStrategy, units_bound: float, unit: float = _EXTENDED_UNIT) -> float:
    """η of the wide encoder ([Hig02] §3; public inputs only): ŝ(t₀) at each sub-block start
    in extended precision (unit ``unit``), the L = 256 steps inside it in doubles from zero.

    * In-block buffers: exact wᵢ ≤ Wᵢ = M(1 − θᵢᴸ)/(1 − θᵢ); e(r) ≤ (θᵢ + 2u)e(r − 1) + 2uWᵢ,
      so e ≤ E_wᵢ = 2u·Wᵢ·Σ_{j<L}(θᵢ + 2u)ʲ (u = 2⁻⁵³).
    * Base: ŝ' = fl(fl(θ̂ᴸ ŝ) + w), θ̂ᴸ by L products (γ_L): the error obeys E' ≤ [(θᴸ +
      γ_{L+1})E + (γ_{L+1} + u_e)Sᵢ + E_wᵢ]/(1 − u_e), Sᵢ = M/(1 − θᵢ), bounded by its fixed
      point E_sᵢ (it starts at 0 and the map is increasing and contracting).
    * Carry ω·Θʳŝ in doubles (P's entries and ŝ each rounded once to a double, then a dot
      product of d terms in any order, [Hig02] Eq. 3.5): E_c ≤ Σ ωᵢE_sᵢ + (γ_{L+1}(u_e) +
      γ_{d+4}(u))·Σ ωᵢ(Sᵢ + E_sᵢ).
    * The step's sum (u + carry) + Σ ωᵢwᵢ in doubles: γ_{d+2}·(M + Σ ωᵢ(Sᵢ + E_sᵢ + E_wᵢ))
      (the 1 + 10⁻⁹ covers the (1 + γ) factors of the carry's magnitude).
    Plus the coefficients' own rounding (as :func:`_stream_slack`); all times 10.
    """
    th = np.array(strategy.theta)
    om = np.array(strategy.omega)
    d, m, big = th.size, float(units_bound), _SUB
    top = m / (1.0 - th)
    width = m * (1.0 - th**big) / (1.0 - th)
    grow = th + 2.0 * _U
    in_block = 2.0 * _U * width * (1.0 - grow**big) / (1.0 - grow)
    g1 = _gamma(big + 1, unit)
    room = 1.0 - unit - th**big - g1
    if np.any(room <= 0.0):  # no contracting fixed point, no bound (not for shipped constants)
        return math.inf
    base = ((g1 + unit) * top + in_block) / room
    carry = float(om @ base) + (_gamma(big + 1, unit) + _gamma(d + 4, _U)) * float(
        om @ (top + base)
    )
    step = _gamma(d + 2, _U) * (m + (1.0 + 1e-9) * float(om @ (top + base + in_block)))
    coef_err = m * _U * float(om @ (4.0 / (1.0 - th) + th * np.abs(np.log(th)) / (1.0 - th) ** 2))
    return 10.0 * (carry + float(om @ in_block) + step + coef_err)


def _wide_slack(strategy: BLTStrategy, units_bound: float) -> float:
    """η paid by the wide encoder: the larger of :func:`_block_slack` and the bound of a whole
    encoder in extended precision (:func:`_stream_slack`, the calibration before the
    sub-blocks; the larger where x87 precision is available, so σ did not change)."""
    return max(
        _stream_slack(strategy, units_bound, unit=_EXTENDED_UNIT),
        _block_slack(strategy, units_bound),
    )


@functools.lru_cache(maxsize=64)
def _calibrate(
    n: int, epsilon: float, delta: float, bound: float, strategy: BLTStrategy
) -> _Calibration:
    """γ, ⌊B/γ⌋, Δ (inflated, units) and σ (units, in [2²⁴, 2²⁵)), as the square root's
    (:func:`._factorisation._place_on_lattice`) with the BLT's slack: public inputs only."""
    coef = strategy.coefficients(n)
    if n > _WIDE_FROM:  # the buffers alone, in extended precision: no FFT touches y
        return _place_on_lattice(
            n,
            epsilon,
            delta,
            bound,
            coef,
            lambda units: _wide_slack(strategy, units),
        )
    return _place_on_lattice(
        n, epsilon, delta, bound, coef, lambda units: _rounding_slack(strategy, n, units, coef)
    )


def _check(n, epsilon, delta, bound, at, owner) -> tuple[int, float, float, float, BLTStrategy]:
    n = check_integer(n, "n", owner, maximum=_MAX_N)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    return n, eps, dlt, bnd, blt_strategy(n, at=at)


def blt_variance(
    n: int, *, epsilon: float, delta: float, bound: float, at: str = "max"
) -> np.ndarray:
    """Exact noise variance of every released prefix t = 1..n: σ²·Σ_{j<t} b_j²."""
    n, eps, dlt, bnd, strat = _check(n, epsilon, delta, bound, at, "blt_variance")
    cal = _calibrate(n, eps, dlt, bnd, strat)
    b = np.cumsum(strat.inverse_coefficients(n))
    sig = cal.sigma_units * cal.granularity
    return np.cumsum(b * b) * sig * sig


@dataclass(frozen=True, slots=True, kw_only=True)
class BLTRelease:
    """Prefix sums released by a BLT counter (module notes)."""

    prefix_sums: np.ndarray
    """The estimate of c(σ, t) for t = 1..n (index t − 1)."""
    variance: np.ndarray
    """Exact noise variance of each prefix sum."""
    encoded: np.ndarray
    """The published noisy encoding γ·(y + z) (the only values that read the data)."""
    strategy: BLTStrategy
    """The factorisation used."""
    noise: GaussianNoise
    """One coordinate's noise (σ and the lattice γ, in the values' units)."""
    sensitivity: float
    """L2 sensitivity of y in the values' units, rounding included."""
    guarantee: PrivacyGuarantee
    """Event-level (ε, δ)."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        for arr in (self.prefix_sums, self.variance, self.encoded):
            arr.setflags(write=False)


def _blt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    bits: BitSource,
    at: str = "max",
    owner: str = "blt_release",
) -> BLTRelease:
    """Validate everything, then release with noise from ``bits`` (module notes)."""
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n, eps, dlt, bnd, strat = _check(vals.size, eps, dlt, bnd, at, owner)
    cal = _calibrate(n, eps, dlt, bnd, strat)
    g = cal.granularity
    coef, inv = _coefficient_pair(strat, n)
    if n > _WIDE_FROM:  # the wide streaming encoder (module notes)
        from ._blt_counter import BLTCounter

        counter = BLTCounter(n, epsilon=eps, delta=dlt, bound=bnd, at=at, seed=bits)
        prefix, encoded = counter._push_many(vals, owner)
    else:
        units = np.multiply(vals, 1.0 / g)
        np.rint(units, out=units)
        np.clip(units, 0.0, cal.units_bound, out=units)
        y = np.rint(_convolve(coef, units))
        z = np.concatenate(
            [
                discrete_gaussian(bits, min(_BLOCK, n - a), cal.sigma_units)
                for a in range(0, n, _BLOCK)
            ]
        )
        noisy = y + z
        prefix = np.cumsum(_convolve(inv, noisy)) * g  # post-processing
        encoded = noisy * g
    b = np.cumsum(inv)
    sig = cal.sigma_units * g
    return BLTRelease(
        prefix_sums=prefix,
        variance=np.cumsum(b * b) * sig * sig,
        encoded=encoded,
        strategy=strat,
        noise=GaussianNoise(sigma=sig, granularity=g),
        sensitivity=cal.sensitivity_units * g,
        guarantee=PrivacyGuarantee(unit=EventLevel(), budget=Budget(eps, dlt), proof=_PROOF),
    )


def blt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    at: str = "max",
    seed: object = None,
) -> BLTRelease:
    """Release every prefix sum with a BLT counter ([DMRST24]; module notes).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``], n ≤ 2²⁴.
    epsilon, delta
        Target (ε, δ), δ ∈ (0, 1) (analytic Gaussian calibration, [BW18]).
    bound
        Public bound B.
    at
        ``"max"`` (worst-step optimised, the default) or ``"mean"``.
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    Var(c̃(t)) = σ²·Σ_{j<t} b_j²; σ = (analytic factor)·(B‖c‖₂ + rounding).
    *Privacy*: event-level (ε, δ)-DP ([BW18] Thm. 8 on y, [DMRST24]); post-processing after.

    Examples
    --------
    >>> rel = blt_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> rel.n, rel.strategy.buffers
    (4, 8)
    """
    return _blt_release(
        values, epsilon=epsilon, delta=delta, bound=bound, bits=bit_source(seed), at=at
    )


def __getattr__(name: str) -> object:
    """``BLTCounter`` lives in :mod:`._blt_counter` (the streaming counter); it is importable
    from here too, lazily (that module imports this one)."""
    if name == "BLTCounter":
        from ._blt_counter import BLTCounter

        return BLTCounter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
