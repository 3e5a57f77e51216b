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
the *wide encoder* runs in sub-blocks of L = 256 steps, s(t₀ + r) = Θʳ·s(t₀) + w(r), the base
ŝ(t₀) and the carry ω·Θʳŝ(t₀) in extended precision once per sub-block, the L steps' buffers w
in doubles from zero (:func:`_block_slack`; the calibration pays the larger of that bound and
the whole encoder's in extended precision, :func:`_stream_slack`, so σ is the latter's).

The push (issue 27): the noise blocks do not depend on the data and are drawn ahead, 4,096
steps at a time; a step is then the d = 8 buffers of the encoder and of the decoder unrolled in
plain doubles (:func:`_push_function`), rint by adding 2⁵², no allocation but the state's tuples: a
single push costs less than a binary-tree push (``bench/bench_factorisation.py``).

*Privacy*: event-level (ε, δ)-DP by the analytic Gaussian mechanism ([BW18] Thm. 8) on the
integer vector y, σ ∈ [2²⁴, 2²⁵) lattice units; the prefix sums are post-processing.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._noise import GaussianNoise
from ..core._random import BitSource, bit_source
from ..core._samplers import discrete_gaussian
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    _real_array,
    check_integer,
    check_positive,
    check_probability,
    check_stream,
)
from ._factorisation import _BLOCK, _Calibration, _convolve, _place_on_lattice

__all__ = [
    "BLTCounter",
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
#: push_many pushes fewer steps than this one at a time (cheaper than its filters).
_FEW = 128


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
    base = ((g1 + unit) * top + in_block) / (1.0 - unit - th**big - g1)
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


@functools.lru_cache(maxsize=16)
def _carry_tables(strategy: BLTStrategy) -> tuple[np.ndarray, np.ndarray]:
    """(P, θᴸ): P[r, i] = ωᵢ·θᵢʳ for r < L by sequential products in extended precision (the
    γ_{r+1} of :func:`_block_slack`), rounded to doubles; θᵢᴸ the next power, in extended
    precision. Public constants, memoised."""
    th = np.array(strategy.theta, dtype=np.longdouble)
    steps = np.empty((_SUB + 1, th.size), dtype=np.longdouble)
    steps[0] = 1.0
    steps[1:] = th
    powers = np.cumprod(steps, axis=0)
    table = (powers[:_SUB] * np.array(strategy.omega, dtype=np.longdouble)).astype(np.float64)
    table.setflags(write=False)
    last = powers[_SUB].copy()
    last.setflags(write=False)
    return table, last


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
    if n > _WIDE_FROM:  # the streaming encoder in extended precision (module notes)
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


@functools.lru_cache(maxsize=16)
def _modes(strategy: BLTStrategy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(λ, V, V⁻¹1, ωV) of M = Θ − 1ωᵀ = VΛV⁻¹: the decoder in M's eigenbasis (real: checked
    by :class:`BLTStrategy`). Public constants, memoised."""
    th = np.array(strategy.theta)
    om = np.array(strategy.omega)
    lam, vec = np.linalg.eig(np.diag(th) - np.outer(np.ones_like(th), om))
    lam, vec = lam.real, vec.real
    return lam, vec, np.linalg.solve(vec, np.ones_like(th)), om @ vec


#: 2⁵²: for 0 ≤ v < 2⁵², (v + 2⁵²) − 2⁵² is v rounded to an integer, half to even (as rint).
_TWO52 = 4503599627370496.0


def _push_source(d: int, wide: bool) -> str:
    """Source of :func:`_push_function` for d buffers (the unrolled step, module notes)."""
    idx = range(d)

    def row(fmt: str, sep: str = ", ") -> str:
        return sep.join(fmt.format(i=i) for i in idx)

    carry = (
        """
            r = t & MASK
            if not r:
                counter._next_carry(t)
            start = u + counter._carry[r]"""
        if wide
        else """
            start = u"""
    )
    return f"""
def factory({row("a{i}")}, {row("w{i}")}):
    def bind(counter, bound, scale, top, g):
        def push(x):
            if type(x) is not float or not 0.0 <= x <= bound:
                x = counter._clamp(x)
            t = counter._t
            pos = t & BLOCK_MASK
            if not pos:
                counter._draw_block(t)
            try:
                z = counter._block[pos]
            except IndexError:  # past n in the last block
                counter._draw_block(t)
            u = (x * scale + TWO52) - TWO52
            if u > top:
                u = top{carry}
            {row("e{i}")}, = counter._enc
            {row("q{i}")}, = counter._dec
            last = counter._last
            {row("q{i} = a{i} * q{i} + last", "; ")}
            counter._dec = ({row("q{i}")},)
            acc = start + {row("w{i} * e{i}", " + ")}
            counter._enc = ({row("a{i} * e{i} + u")},)
            step = ((acc + TWO52) - TWO52) + z - ({row("w{i} * q{i}", " + ")})
            counter._last = step
            counter._t = t + 1
            total = counter._sum + step
            counter._sum = total
            return total * g
        return push
    return bind
"""


@functools.lru_cache(maxsize=64)
def _push_function(strategy: BLTStrategy, wide: bool):
    """``bind(counter, B, 1/γ, ⌊B/γ⌋, γ)`` → the push of a counter with ``strategy``: the d
    buffers of the encoder and the decoder unrolled, the constants in the closure
    (:meth:`BLTCounter.push`, module notes); ``wide`` adds the sub-block's carry.

    Generated once per strategy from :func:`_push_source` (as :mod:`dataclasses` generates
    ``__init__``): a loop over the buffers costs the interpreter about twice the work. Per
    step, in this order (the floating-point operations of ``push_many`` and of the rounding
    bounds): q_t = Θq_{t−1} + 1·x̂_{t−1} (the decoder, deferred by a step); y_t = rint(u_t
    (+ carry) + ω₀s₀ + … + ω_{d−1}s_{d−1}) summed left to right (0 ≤ y < 2⁵², so rint is
    adding and subtracting 2⁵², half to even); s_{t+1} = Θs_t + 1·u_t; x̂_t = y_t + z_t − ω·q_t;
    c̃(t) = c̃(t − 1) + x̂_t.
    """
    namespace = {"TWO52": _TWO52, "MASK": _SUB - 1, "BLOCK_MASK": _BLOCK - 1}
    exec(_push_source(strategy.buffers, wide), namespace)  # our own template, no input
    return namespace["factory"](*strategy.theta, *strategy.omega)


class BLTCounter:
    """Streaming BLT counter: ``push(x)`` returns the prefix sum so far in O(d) per step.

    Sized to n in advance (σ depends on ‖c‖₂ over n steps). Draws the same noise blocks as
    :func:`blt_release` from the same bits; the releases agree to floating point (the two
    encodings may round a coordinate of y differently by one lattice step, both within η).

    Examples
    --------
    >>> counter = BLTCounter(4, epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> sums = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> rel = blt_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> bool(np.allclose(sums, rel.prefix_sums, rtol=0, atol=1e-6))
    True
    """

    #: The wide encoder (module notes: sub-blocks, state in extended precision).
    _wide = False

    def __init__(
        self,
        n: int,
        *,
        epsilon: float,
        delta: float,
        bound: float,
        at: str = "max",
        seed: object = None,
    ) -> None:
        n, eps, dlt, bnd, strat = _check(n, epsilon, delta, bound, at, "BLTCounter")
        self._wide = n > _WIDE_FROM
        self._setup(n, eps, dlt, bnd, strat, _calibrate(n, eps, dlt, bnd, strat), seed)

    def _setup(self, n, eps, dlt, bnd, strat, cal, seed) -> None:
        """State of a counter of at most n steps with validated inputs and calibration."""
        self.n, self.epsilon, self.delta, self.bound, self.strategy = n, eps, dlt, bnd, strat
        self._cal = cal
        self._theta = list(strat.theta)
        self._omega = list(strat.omega)
        self._enc = (0.0,) * strat.buffers  # s (wide: the sub-block's part w of s)
        self._dec = (0.0,) * strat.buffers  # the decoder's buffers (same Θ, module notes)
        self._last = 0.0  # x̂ of the last step, not yet added to the decoder's buffers
        # wide encoder (module notes): ŝ at the sub-block's start (extended precision) and
        # the carry ω·Θʳŝ of its steps (doubles)
        self._base = np.zeros(strat.buffers, dtype=np.longdouble)
        self._carry: list[float] = []
        self._carry_array = np.zeros(0)
        th, om = np.array(strat.theta), np.array(strat.omega)
        reach = cal.units_bound * (1.0 + float(np.sum(om / (1.0 - th))))
        if not reach < 2.0**51:  # rint by adding 2⁵² needs 0 ≤ y < 2⁵² (public: never met)
            raise ParameterError(
                f"The 'bound' parameter of {type(self).__name__} is too large for its lattice."
            )
        self._bits = bit_source(seed)
        self._block: list[float] = []  # the current noise block (lattice units): step t
        self._block_array = np.zeros(0)  # draws its (t mod 4096)-th entry
        self._sum = 0.0
        self._t = 0
        self._bind()

    def _bind(self) -> None:
        """The instance's ``push``: the strategy's generated step bound to this counter's
        state and constants (:func:`_push_function`; 1/γ is exact, γ a power of two)."""
        cal = self._cal
        bind = _push_function(self.strategy, self._wide)
        self._step = bind(
            self, self.bound, 1.0 / cal.granularity, float(cal.units_bound), cal.granularity
        )
        self.push = self._step

    def __getstate__(self) -> dict:
        """State without the bound step (copies and pickles rebind their own)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("push", "_step")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()

    @property
    def noise(self) -> GaussianNoise:
        """One coordinate's noise (σ and the lattice γ, in the values' units)."""
        return GaussianNoise(
            sigma=self._cal.sigma_units * self._cal.granularity, granularity=self._cal.granularity
        )

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """Event-level (ε, δ) of the whole stream of n steps."""
        return PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(self.epsilon, self.delta), proof=_PROOF
        )

    def push(self, x: float) -> float:
        """Add step t's value and return the released prefix sum c̃(t).

        ``x`` is clamped to [0, B] (as :meth:`BinaryTreeCounter.push`: an error that depends
        on a private value would leak it); a non-number or NaN raises a typed error. O(d) in
        plain doubles: the encoder's and decoder's buffers, unrolled (module notes).
        """
        return self._step(x)

    def _clamp(self, x: object) -> float:
        """``x`` as a float in [0, B]: clamped (an error that depends on a private value would
        leak it), or a typed error for a non-number or NaN (nothing consumed)."""
        kind = type(x)
        if kind is not float and (kind is bool or kind is np.bool_ or not isinstance(x, Real)):
            raise DomainError(
                f"The 'x' argument of {type(self).__name__}.push must be a real number. Got "
                f"{kind.__name__}."
            )
        xf = float(x)
        if math.isnan(xf):
            raise DomainError(
                f"The 'x' argument of {type(self).__name__}.push must be a number, not NaN (a "
                "NaN cannot be clamped to the bound). Impute missing values before pushing."
            )
        return min(max(xf, 0.0), self.bound)

    def _draw_block(self, t: int) -> None:
        """Draw the noise block that starts at step t (t a multiple of the block size): the
        blocks of :func:`blt_release`, in its order, from the same bits. Refuses a step
        beyond n (nothing drawn)."""
        if t >= self.n:
            raise ParameterError(
                f"{type(self).__name__} was sized for n={self.n} steps; every step has been "
                "pushed. Size a new counter for the whole stream."
            )
        self._block_array = discrete_gaussian(
            self._bits, min(_BLOCK, self.n - t), self._cal.sigma_units
        )
        self._block = self._block_array.tolist()

    def _next_carry(self, t: int) -> None:
        """At a sub-block's first step t₀ (a multiple of L): ŝ(t₀) = fl(θᴸ·ŝ(t₀ − L)) + w in
        extended precision, w back to zero, and the carry ω·Θʳŝ(t₀) of its steps, in doubles
        (:func:`_block_slack`)."""
        table, last = _carry_tables(self.strategy)
        base = last * self._base + np.array(self._enc, dtype=np.longdouble)
        self._base = base
        self._enc = (0.0,) * base.size
        size = min(_SUB, self.n - t)
        self._carry_array = table[:size] @ base.astype(np.float64)
        self._carry = self._carry_array.tolist()

    def push_many(self, values: object) -> np.ndarray:
        """Push several steps at once and return their released prefix sums, one per step.

        The same release as calling :meth:`push` on each value (the same noise blocks from the
        same bits, the same encoding ŷ to the last bit: the encoder's buffers run as
        first-order filters, ``scipy.signal.lfilter``, whose two roundings per step are the
        push's); the decoder, post-processing of ŷ, runs in the eigenbasis of M = Θ − 1ωᵀ
        (module notes) and agrees with :meth:`push` to floating point (a chunk of fewer than
        128 steps is simply pushed step by step: cheaper than the filters). Steps may be mixed
        freely with :meth:`push`. Values are clamped to [0, B] as in :meth:`push`; a
        non-number or NaN raises a typed error before anything is consumed.

        Parameters
        ----------
        values
            The next steps' values (one-dimensional; may be empty).

        Returns
        -------
        numpy.ndarray
            c̃(t) for each pushed step.
        """
        return self._push_many(values, "BLTCounter.push_many", encoding=False)[0]

    def _push_many(
        self, values: object, owner: str, *, encoding: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`push_many`, also returning the published encoding γ·ŷ of the steps (unless
        ``encoding`` is false: then a chunk of fewer than 128 steps is pushed one step at a
        time, which costs less than the filters' set-up; the same encoder, bit for bit)."""
        from scipy.signal import lfilter

        arr = _real_array(values, "values", owner, True)
        if arr.ndim != 1:
            raise DomainError(
                f"The 'values' argument of {owner} must be one-dimensional. Got an array of "
                f"shape {arr.shape}. Pass one stream at a time."
            )
        if np.isnan(arr).any():
            raise DomainError(
                f"The 'values' argument of {owner} must hold numbers, not NaN (a NaN cannot be "
                "clamped to the bound). Impute missing values before pushing."
            )
        t, k, cal = self._t, arr.size, self._cal
        if t + k > self.n:
            raise ParameterError(
                f"{type(self).__name__} was sized for n={self.n} steps; {t} have been pushed, so "
                f"{self.n - t} remain and {k} were given. Size a new counter for the whole "
                "stream."
            )
        if k == 0:
            return np.zeros(0), np.zeros(0)
        if k < _FEW and not encoding:
            push = self._step
            return np.array([push(v) for v in arr.tolist()]), None
        units = np.clip(arr, 0.0, self.bound)
        units /= cal.granularity  # as push: x/γ, rounded half to even, clipped
        np.rint(units, out=units)
        np.clip(units, 0.0, cal.units_bound, out=units)
        if self._wide:  # sub-block by sub-block, each with its carry (module notes)
            acc = np.empty(k)
            done = 0
            while done < k:
                start = (t + done) % _SUB
                rows = min((k - done) // _SUB, 64) if start == 0 else 0
                if rows:  # whole sub-blocks, as rows
                    span = rows * _SUB
                    block = units[done : done + span].reshape(rows, _SUB)
                    acc[done : done + span] = self._encode_rows(block, t + done).ravel()
                    done += span
                    continue
                if start == 0:
                    self._next_carry(t + done)
                take = min(k - done, len(self._carry) - start)
                acc[done : done + take] = self._encode(
                    units[done : done + take], self._carry_array[start : start + take]
                )
                done += take
        else:
            acc = self._encode(units, None)
        noise = np.empty(k)
        done = 0
        while done < k:  # the noise blocks of push, drawn at the same steps
            start = (t + done) % _BLOCK
            if start == 0:
                self._draw_block(t + done)
            take = min(k - done, len(self._block) - start)
            noise[done : done + take] = self._block_array[start : start + take]
            done += take
        encoded = np.rint(acc).astype(np.float64) + noise  # ŷ (integers, exact)
        lam, vec, gain, out = _modes(self.strategy)
        dec = [a * q + self._last for a, q in zip(self._theta, self._dec, strict=True)]
        q = np.linalg.solve(vec, np.array(dec))  # decoder state q_t in M's eigenbasis
        back = np.zeros(k)
        for j in range(lam.size):  # q̃_{t+1} = Λ q̃_t + V⁻¹1·ŷ_t; ω·q_t = (ωV)·q̃_t
            q_j = lfilter([0.0, gain[j]], [1.0, -lam[j]], encoded, zi=[q[j]])[0]
            back += out[j] * q_j
            q[j] = q_j[-1]
        steps = encoded - back  # x̂_t = ŷ_t − ω·q_t
        self._dec = tuple((vec @ q).tolist())  # as push leaves it: the last q and x̂ (deferred)
        self._last = float(steps[-1])
        steps[0] += self._sum  # c̃ accumulated in the push's order
        sums = np.cumsum(steps)
        self._sum = float(sums[-1])
        self._t = t + k
        return sums * cal.granularity, encoded * cal.granularity

    def _encode(self, units: np.ndarray, carry: np.ndarray | None) -> np.ndarray:
        """u + (carry) + ω·s for consecutive steps, the buffers as first-order filters
        (``scipy.signal.lfilter``: the push's two roundings per step, so the same doubles),
        summed in the push's order; moves the encoder's buffers."""
        from scipy.signal import lfilter

        acc = units.copy() if carry is None else units + carry
        one = np.array([0.0, 1.0])
        enc = []
        for th, w, e in zip(self._theta, self._omega, self._enc, strict=True):
            s_i, zf = lfilter(one, np.array([1.0, -th]), units, zi=np.array([e]))
            acc += w * s_i  # the push's order: u (+ carry), then ω₀s₀, ω₁s₁, ...
            enc.append(float(zf[0]))
        self._enc = tuple(enc)
        return acc

    def _encode_rows(self, block: np.ndarray, t: int) -> np.ndarray:
        """:meth:`_encode` of whole sub-blocks (rows of ``block``, the first starting at step t,
        a multiple of L): each row's buffers from zero as 2-D filters, then the chain of bases
        and carries (:meth:`_next_carry`, row by row), then the sums in the push's order. The
        same doubles as the push (a row's filter is the push's recursion from zero)."""
        from scipy.signal import lfilter

        rows = block.shape[0]
        one, zero = np.array([0.0, 1.0]), np.zeros((rows, 1))
        dens = [np.array([1.0, -th]) for th in self._theta]
        ends = np.empty((rows, len(dens)))
        for i, den in enumerate(dens):
            ends[:, i] = lfilter(one, den, block, axis=1, zi=zero)[1][:, 0]
        acc = np.empty_like(block)
        for j in range(rows):
            self._next_carry(t + j * _SUB)
            acc[j] = block[j] + self._carry_array
            self._enc = tuple(ends[j].tolist())  # w at the row's end
        for w, den in zip(self._omega, dens, strict=True):
            acc += w * lfilter(one, den, block, axis=1, zi=zero)[0]
        return acc

    def variance(self, t: int | None = None) -> float:
        """Exact noise variance of c̃(t) (default: the last step pushed)."""
        t = self._t if t is None else check_integer(t, "t", "BLTCounter.variance")
        b = np.cumsum(self.strategy.inverse_coefficients(max(t, 1)))[:t]
        sig = self._cal.sigma_units * self._cal.granularity
        return float(b @ b) * sig * sig
