"""A Gaussian counter for open streams: one time-invariant BLT, calibrated for a stated horizon.

[DMRST24] (buffered linear Toeplitz factorisations, :mod:`._blt`); [BW18] (analytic Gaussian).

The strategy
------------
C is the lower-triangular Toeplitz matrix of a BLT with d = 8 buffers whose (θ, ω) do **not**
depend on n: ``OPEN_THETA``/``OPEN_OMEGA``, fitted offline by ``scripts/counting_open_blt.py``
to minimise the largest ratio, over t = 2¹⁰ … 2²⁴ (4 points per octave), of

    ‖c‖₂² (the column of the infinite C) · Σ_{j<t} b_j²  /  (Σ_{j<t} c*_j²)²,

the variance at t over the worst-step variance of the square root sized for t (c* its
coefficients; the sized square root and the sized BLT agree within 0.34%). With θ_max < 1 the
infinite column's norm is finite, ‖c‖₂² = 1 + Σᵢₗ ωᵢωₗ/(1 − θᵢθₗ) (closed form), so no n enters
the data term of the sensitivity. The fit's largest ratio is 1.33 in real arithmetic
(``docs/results/counting_open_blt.md`` has the table and the ratios outside 2¹⁰ … 2²⁴: the
variance grows linearly once t ≫ 1/(1 − θ_max) ≈ 7.7·10⁶, so the ratio rises beyond 2²⁴).

The horizon
-----------
The lattice rounding is not summable (``docs/privacy.md``): every coordinate of y = rint(fl(C·u))
may differ between neighbours by one lattice step. The counter is therefore calibrated for a
stated public horizon H (default 2³², refused beyond 2⁴⁰), the most steps it will ever accept:
Δ = ⌊B/γ⌋·‖c‖₂ + √H·(2η + 1), η the buffers' rounding bound (streaming arithmetic only: pushes
and :meth:`~._blt_counter.BLTCounter.push_many`, bit-identical encodings: the wide encoder of
:mod:`._blt_counter`, state in extended precision once per 256 steps).
At H = 2³² the rounding adds about 1.6% to Δ; σ does not depend on how many steps are
actually pushed.

*Privacy*: event-level (ε, δ)-DP for every stream of at most H steps, by the analytic Gaussian
mechanism on the integer vector y (σ ∈ [2²⁴, 2²⁵) lattice units, as :mod:`._factorisation`);
the prefix sums are post-processing. Proof in ``docs/privacy.md`` ("Gaussian noise on an open
stream").
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..core._budget import Budget
from ..core._errors import ParameterError
from ..core._random import BitSource, bit_source
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, check_positive, check_probability, check_stream
from ._blt import BLTRelease, BLTStrategy, _inverse, _wide_slack
from ._blt_counter import BLTCounter
from ._factorisation import _Calibration, _place_on_lattice

__all__ = [
    "OPEN_OMEGA",
    "OPEN_THETA",
    "UnboundedBLTCounter",
    "unbounded_blt_range_variance",
    "unbounded_blt_release",
    "unbounded_blt_variance",
]

#: Buffer decays of the time-invariant BLT (``scripts/counting_open_blt.py``).
OPEN_THETA = (
    0.12096590090566554,
    0.6714616750969844,
    0.9201499440493224,
    0.9834789478738619,
    0.9985716448941447,
    0.9999422826802753,
    0.9999965513150576,
    0.9999998704948693,
)
#: Buffer weights of the time-invariant BLT.
OPEN_OMEGA = (
    0.05565112223610374,
    0.1973737915278416,
    0.12496843542295391,
    0.07291870700026622,
    0.04352865111258434,
    0.0045042687889811535,
    0.0010340817690310583,
    0.0002872574424814876,
)
#: Default and largest stated horizon H.
DEFAULT_HORIZON = 1 << 32
_MAX_HORIZON = 1 << 40
_PROOF = (
    "[DMRST24] time-invariant BLT C (no n): y = rint(C·u) on a public lattice, L2 sensitivity "
    "B·‖c‖₂ (the infinite column, closed form) plus √H·(2η + 1) for the stated horizon H, "
    "discrete Gaussian noise by the analytic Gaussian mechanism ([BW18] Thm. 8); prefix sums "
    "are post-processing"
)


@functools.cache
def open_strategy() -> BLTStrategy:
    """The shipped time-invariant BLT (module notes)."""
    return BLTStrategy(theta=OPEN_THETA, omega=OPEN_OMEGA)


def column_norm(strategy: BLTStrategy) -> float:
    """‖c‖₂ of the infinite first column: √(1 + Σᵢₗ ωᵢωₗ/(1 − θᵢθₗ)), rounded up."""
    th = np.array(strategy.theta)
    om = np.array(strategy.omega)
    sq = 1.0 + float(np.sum(np.outer(om, om) / (1.0 - np.outer(th, th))))
    return math.sqrt(sq) * (1.0 + 1e-12)


def prefix_units(strategy: BLTStrategy, t: np.ndarray) -> np.ndarray:
    """Σ_{j<t} b_j² for each t, in closed form (b = the coefficients of A·C⁻¹).

    b_j = β₀ + Σₘ βₘλₘʲ with (λ, w) the sums of powers of C⁻¹ (:func:`._blt._inverse`),
    β₀ = 1 + Σ wₘ/(1 − λₘ), βₘ = −wₘ/(1 − λₘ); the sum over j < t is then geometric.
    """
    lam, w = _inverse(np.array(strategy.theta), np.array(strategy.omega))
    beta0 = 1.0 + float(np.sum(w / (1.0 - lam)))
    beta = -w / (1.0 - lam)
    tt = np.asarray(t, dtype=np.float64)[:, None]
    out = beta0 * beta0 * tt[:, 0]
    out += 2.0 * beta0 * (beta * (1.0 - lam**tt) / (1.0 - lam)).sum(axis=1)
    prod = np.outer(lam, lam).ravel()
    pair = np.outer(beta, beta).ravel()
    out += (pair * (1.0 - prod[None, :] ** tt) / (1.0 - prod)).sum(axis=1)
    return out


@functools.lru_cache(maxsize=8)
def _prefix_array(n: int) -> np.ndarray:
    """Σ_{j<t} b_j² for t = 1..n by the coefficients (read-only; the closed form of
    :func:`prefix_units` for single steps and beyond 2²²)."""
    b = np.cumsum(open_strategy().inverse_coefficients(n))
    out = np.cumsum(b * b)
    out.setflags(write=False)
    return out


def _check(epsilon, delta, bound, horizon, owner) -> tuple[float, float, float, int]:
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    hor = check_integer(horizon, "horizon", owner, maximum=_MAX_HORIZON)
    return eps, dlt, bnd, hor


@functools.lru_cache(maxsize=32)
def _calibrate(epsilon: float, delta: float, bound: float, horizon: int) -> _Calibration:
    """γ, ⌊B/γ⌋, Δ and σ (units) for the open strategy: the infinite column's norm and the
    streaming rounding over H coordinates (module notes). Public inputs only."""
    strat = open_strategy()
    return _place_on_lattice(
        horizon,
        epsilon,
        delta,
        bound,
        None,
        lambda units: _wide_slack(strat, units),
        norm=column_norm(strat),
    )


def unbounded_blt_variance(
    t: object, *, epsilon: float, delta: float, bound: float, horizon: int = DEFAULT_HORIZON
) -> np.ndarray:
    """Exact noise variance of the released prefix sums at the steps ``t`` (1-based):
    σ²·Σ_{j<t} b_j² (σ depends on H, not on t)."""
    owner = "unbounded_blt_variance"
    eps, dlt, bnd, hor = _check(epsilon, delta, bound, horizon, owner)
    steps = np.atleast_1d(np.asarray(t, dtype=np.int64))
    if steps.ndim != 1 or np.any(steps < 1) or np.any(steps > hor):
        raise ParameterError(
            f"The 't' argument of {owner} must hold steps in [1, horizon = {hor}]."
        )
    cal = _calibrate(eps, dlt, bnd, hor)
    sig = cal.sigma_units * cal.granularity
    return prefix_units(open_strategy(), steps) * sig * sig


#: Largest step whose range variance is computed (from arrays of the coefficients).
_MAX_RANGE = 1 << 24


def unbounded_blt_range_variance(
    i: int,
    j: int,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    horizon: int = DEFAULT_HORIZON,
) -> float:
    """Exact noise variance of the released sum of steps i..j (1-based, inclusive), c̃(j) −
    c̃(i − 1): σ²·(Σ_{m ≤ j−i} b_m² + Σ_{m ≤ i−2} (b_{m+L} − b_m)²), L = j − i + 1.

    Public inputs only; j ≤ 2²⁴ (the coefficients are summed as arrays)."""
    owner = "unbounded_blt_range_variance"
    eps, dlt, bnd, hor = _check(epsilon, delta, bound, horizon, owner)
    lo = check_integer(i, "i", owner, maximum=_MAX_RANGE)
    hi = check_integer(j, "j", owner, maximum=min(_MAX_RANGE, hor))
    if lo > hi:
        raise ParameterError(f"The 'i' argument of {owner} must be at most 'j'. Got {i} > {j}.")
    b = np.cumsum(open_strategy().inverse_coefficients(hi))
    span = hi - lo + 1
    head = b[:span]
    gap = b[span : span + lo - 1] - b[: lo - 1]
    cal = _calibrate(eps, dlt, bnd, hor)
    sig = cal.sigma_units * cal.granularity
    return float(head @ head + gap @ gap) * sig * sig


class UnboundedBLTCounter(BLTCounter):
    """A Gaussian continual counter that needs no n: ``push``/``push_many`` up to H steps.

    The time-invariant BLT of the module notes; the same O(d) push and the same chunked
    :meth:`push_many` as :class:`BLTCounter` (whose state it uses), with its wide encoder (the
    long-lived state in extended precision, ``np.longdouble``: the rounding bound η is 2¹¹
    times smaller, which is what makes a horizon of 2³² affordable), σ fixed by (ε, δ, B, H).

    Examples
    --------
    >>> counter = UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> sums = counter.push_many([1.0, 0.0, 2.0, 1.0])
    >>> sums.shape, counter.horizon
    ((4,), 4294967296)
    """

    _wide = True

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        bound: float,
        horizon: int = DEFAULT_HORIZON,
        seed: object = None,
    ) -> None:
        eps, dlt, bnd, hor = _check(epsilon, delta, bound, horizon, "UnboundedBLTCounter")
        self._setup(hor, eps, dlt, bnd, open_strategy(), _calibrate(eps, dlt, bnd, hor), seed)
        self.horizon = hor

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """Event-level (ε, δ) of every stream of at most H steps."""
        return PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(self.epsilon, self.delta), proof=_PROOF
        )

    def variance(self, t: int | None = None) -> float:
        """Exact noise variance of c̃(t) (default: the last step pushed; closed form)."""
        t = self._t if t is None else check_integer(t, "t", "UnboundedBLTCounter.variance")
        if t == 0:
            return 0.0
        sig = self._cal.sigma_units * self._cal.granularity
        return float(prefix_units(self.strategy, np.array([t]))[0]) * sig * sig


def unbounded_blt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    horizon: int = DEFAULT_HORIZON,
    seed: object = None,
) -> BLTRelease:
    """Release every prefix sum of ``values`` with :class:`UnboundedBLTCounter`.

    With one seed, the sums of the first rows do not depend on the rows after them (the
    encoder is causal and the noise blocks are drawn in order); each call is a new release.

    Notes
    -----
    Var(c̃(t)) = σ²·Σ_{j<t} b_j² (closed form); σ = (analytic factor)·(B‖c‖₂ + √H(2η + 1)).
    *Privacy*: event-level (ε, δ)-DP for streams of at most H steps (module notes).

    Examples
    --------
    >>> rel = unbounded_blt_release([1.0, 0.0, 2.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=3)
    >>> rel.n, bool(rel.variance[0] < rel.variance[-1])
    (3, True)
    """
    return _unbounded_blt_release(
        values, epsilon=epsilon, delta=delta, bound=bound, horizon=horizon,
        bits=bit_source(seed),
    )  # fmt: skip


def _unbounded_blt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    bits: BitSource,
    horizon: int = DEFAULT_HORIZON,
    owner: str = "unbounded_blt_release",
) -> BLTRelease:
    """Validate everything, then release with noise from ``bits`` only (the counter keeps it:
    :func:`~mechanisms.core._random.bit_source` returns a bit source unchanged)."""
    eps, dlt, bnd, hor = _check(epsilon, delta, bound, horizon, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    if vals.size > hor:
        raise ParameterError(
            f"The 'values' argument of {owner} holds more steps than the stated horizon "
            f"({hor}). Calibrate for a longer horizon."
        )
    counter = UnboundedBLTCounter(epsilon=eps, delta=dlt, bound=bnd, horizon=hor, seed=bits)
    sums, encoded = counter._push_many(vals, owner)
    cal = counter._cal
    sig = cal.sigma_units * cal.granularity
    return BLTRelease(
        prefix_sums=sums,
        variance=(
            _prefix_array(vals.size)
            if vals.size <= 1 << 22
            else prefix_units(counter.strategy, np.arange(1, vals.size + 1))
        )
        * sig
        * sig,
        encoded=encoded,
        strategy=counter.strategy,
        noise=counter.noise,
        sensitivity=cal.sensitivity_units * cal.granularity,
        guarantee=counter.guarantee,
    )
