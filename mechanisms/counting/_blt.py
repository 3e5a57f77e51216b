"""Buffered linear Toeplitz (BLT) continual counting with discrete Gaussian noise, ρ-zCDP.

References: [DMPRT24] Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
noise generation for streaming differential privacy" (FOCS 2024), §3 (BLT matrices);
[MPDT24] McMahan, Pillutla, Dvijotham, Thakurta, "Don't use tree aggregation, use BLTs" (2024);
[CKS20] Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy", Thm. 4;
[BS16] Bun, Steinke, "Concentrated differential privacy", Prop. 1.3 and Lemma 2.8.

The factorisation (our derivation)
----------------------------------
The prefix sums are s = A x with A the n×n lower-triangular all-ones matrix, A(z) = 1/(1 − z) as
a generating function of its first column (every lower-triangular Toeplitz matrix is its first
column's power series; products of such matrices are products of series). A BLT with d buffers
is the lower-triangular Toeplitz *decoder* L with

    L(z) = 1 + Σᵢ ωᵢ z/(1 − λᵢ z) = N(z)/D(z),   D(z) = Πᵢ (1 − λᵢ z),
    N(z) = D(z) + Σᵢ ωᵢ z Π_{j≠i} (1 − λⱼ z),

(decays λᵢ ∈ (0, 1), weights ωᵢ), and the *encoder* C = L⁻¹A, C(z) = D(z)/((1 − z) N(z)), also
lower-triangular Toeplitz. We release ŝ = L(Cx + w) = s + Lw with w i.i.d. noise of variance σ²:

* **sensitivity.** Event level: x and x' differ in one step k by at most B, so
  C(x − x') = (x_k − x'_k)·C e_k and ‖C e_k‖₂² = Σ_{j < n−k+1} c_j² ≤ Σ_{j < n} c_j² (the first
  column is the longest). So Δ₂ = B·‖c‖₂ with c the first n coefficients of C(z).
* **variance.** (Lw)_t = Σ_{s ≤ t} l_{t−s} w_s, so Var(ŝ_t) = σ²·Σ_{j < t} l_j² exactly, with l
  the coefficients of L(z); it grows with t, the largest is at t = n.
* **streaming.** L(z) and C(z) are rational of degree d + 1, so both products are IIR filters
  with d + 1 state values ([DMPRT24] Alg. 1 keeps d buffers): O(d) memory and time per step.
  The batch path uses :func:`scipy.signal.lfilter` (direct form II transposed); the streaming
  :class:`BltCounter` runs the same recursion in the same order of operations.

Lattice (floating-point safety): y = round(Cx/γ) + K, K discrete Gaussian on ℤ of scale σ/γ
([CKS20]), γ a power of two ≥ 2²⁴ times smaller than σ, then ŝ = L(yγ) (post-processing). For
neighbours the integer vectors round(Cx/γ) differ by at most Δ₂/γ + 2√n in L2 (each
coordinate's rounding moves it by < 1, and we allow one more lattice step per coordinate for the
floating-point error of the filter, which is ≪ γ for the magnitudes of :func:`_magnitude`), so
σ is calibrated to Δ₂ + 2γ√n.

Privacy: the discrete Gaussian with shift d on ℤⁿ has Rényi divergence α‖d‖²/(2σ'²) ([CKS20]
Thm. 4 per coordinate, additive over independent coordinates), i.e. ρ-zCDP with
ρ = (Δ₂ + 2γ√n)²/(2σ²); ρ-zCDP implies (ρ + 2√(ρ ln(1/δ)), δ)-DP ([BS16] Prop. 1.3). Given a
target (ε, δ) we take the largest ρ with ρ + 2√(ρ ln 1/δ) = ε:
√ρ = √(ln(1/δ) + ε) − √(ln(1/δ)). The decoder L is public post-processing.

Known issue (open, issue 14): at n = 10⁶ with non-zero data the empirical error of the batch
release is several times the stated variance (on an all-zero stream it matches), so the
signal path L·round(Cx/γ) loses accuracy in floating point for long streams (the encoder has a
pole at z = 1). Privacy is unaffected (the noise and its calibration are as stated); accuracy
claims beyond n ≈ 10⁵ must wait for the fix (e.g. release s + Lw from the exact running sum).

The parameters (λ, ω) are public and chosen before any data: by minimising
‖c‖₂²·Σ_{j<n'} l_j² (sensitivity² × the variance at the last step, i.e. the largest variance)
with :func:`scipy.optimize.minimize` at n' = min(n, 2¹⁶) ([MPDT24] §4 optimise the same kind of
objective). Whatever the optimiser returns, the sensitivity and variances used are computed
exactly for the full n, so a poor optimum costs accuracy, never privacy.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._noise import GaussianNoise, lattice_granularity
from ..core._random import BitSource, bit_source
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, check_positive, check_probability, check_stream

__all__ = [
    "BltCounter",
    "BltFactorization",
    "BltRelease",
    "blt_factorization",
    "blt_noise",
    "blt_release",
    "zcdp_rho",
    "zcdp_to_epsilon",
]

_PROOF = (
    "[DMPRT24] BLT factorisation A = L·C; discrete Gaussian on C·x ([CKS20] Thm. 4): "
    "ρ-zCDP with ρ = Δ₂²/(2σ²), converted by [BS16] Prop. 1.3"
)
#: Steps per block of noise draws (the streaming counter draws the same blocks).
_BLOCK = 1 << 16
#: The optimisation horizon n' = min(n, 2¹⁶) of the public parameter choice.
_OPT_HORIZON = 1 << 16


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ whose [BS16] Prop. 1.3 conversion ρ + 2√(ρ ln 1/δ) is at most ε."""
    ln = math.log(1.0 / delta)
    root = math.sqrt(ln + epsilon) - math.sqrt(ln)
    rho = root * root
    while zcdp_to_epsilon(rho, delta) > epsilon:  # floating point: stay on the safe side
        rho *= 1.0 - 1e-12
    return rho


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """ε = ρ + 2√(ρ ln(1/δ)) of a ρ-zCDP mechanism at δ ([BS16] Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _poly_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.convolve(p, q)


@dataclass(frozen=True, slots=True, kw_only=True)
class BltFactorization:
    """A BLT decoder L(z) = 1 + Σᵢ ωᵢ z/(1 − λᵢ z) and its encoder C = L⁻¹A (module notes)."""

    decays: tuple[float, ...]
    """λᵢ ∈ (0, 1), one per buffer."""
    weights: tuple[float, ...]
    """ωᵢ, one per buffer."""

    def __post_init__(self) -> None:
        if len(self.decays) != len(self.weights) or not self.decays:
            raise ParameterError(
                "The 'decays' and 'weights' parameters of BltFactorization must be non-empty "
                f"and of equal length. Got {len(self.decays)} and {len(self.weights)} instead."
            )
        for lam in self.decays:
            if not 0.0 < float(lam) < 1.0:
                raise ParameterError(
                    "The 'decays' parameter of BltFactorization must hold floats in (0, 1). "
                    f"Got {lam!r} instead."
                )
        object.__setattr__(self, "decays", tuple(float(v) for v in self.decays))
        object.__setattr__(self, "weights", tuple(float(v) for v in self.weights))

    def decoder_filter(self) -> tuple[np.ndarray, np.ndarray]:
        """(N, D): L(z) = N(z)/D(z), ascending powers of z (``lfilter``'s b, a)."""
        den = np.ones(1)
        for lam in self.decays:
            den = _poly_mul(den, np.array([1.0, -lam]))
        num = np.concatenate([den, [0.0]])
        for i, w in enumerate(self.weights):
            part = np.ones(1)
            for j, lam in enumerate(self.decays):
                if j != i:
                    part = _poly_mul(part, np.array([1.0, -lam]))
            num[1 : 1 + part.size] += w * part
        return num[: den.size], den

    def encoder_filter(self) -> tuple[np.ndarray, np.ndarray]:
        """(D, (1 − z)N): C(z) = D(z)/((1 − z)N(z))."""
        num, den = self.decoder_filter()
        return den, _poly_mul(num, np.array([1.0, -1.0]))

    def coefficients(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The first n coefficients (c, l) of C(z) and L(z)."""
        from scipy.signal import lfilter

        impulse = np.zeros(int(n))
        impulse[0] = 1.0
        bc, ac = self.encoder_filter()
        bl, al = self.decoder_filter()
        return lfilter(bc, ac, impulse), lfilter(bl, al, impulse)

    def sensitivity_units(self, n: int) -> float:
        """‖c‖₂ over the first n coefficients: Δ₂ per unit of the bound B."""
        c, _ = self.coefficients(n)
        return float(math.sqrt(float(np.dot(c, c))))

    def variance_units(self, n: int) -> np.ndarray:
        """Σ_{j<t} l_j² for t = 1..n: Var(ŝ_t)/σ²."""
        _, ell = self.coefficients(n)
        return np.cumsum(ell * ell)


def _objective(theta: np.ndarray, d: int, n: int) -> float:
    decays = 1.0 / (1.0 + np.exp(-theta[:d]))
    if not np.all((decays > 0.0) & (decays < 1.0)):
        return 1e300
    fact = BltFactorization(decays=tuple(decays), weights=tuple(theta[d:]))
    with np.errstate(all="ignore"):
        c, ell = fact.coefficients(n)
        val = float(np.dot(c, c)) * float(np.dot(ell, ell))
    return math.log(val) if math.isfinite(val) and val > 0 else 1e300


@functools.lru_cache(maxsize=32)
def _optimised(horizon: int, buffers: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    from scipy.optimize import minimize

    best, best_x = math.inf, None
    for spread in (1.0, 0.5):
        # start: decays 1 − horizon^(−spread·i/d), small positive weights (≈ 1/√(1 − z))
        lam0 = [1.0 - horizon ** (-spread * (i + 1) / buffers) for i in range(buffers)]
        lam0 = [min(max(v, 1e-3), 1.0 - 1e-9) for v in lam0]
        theta0 = np.array([math.log(v / (1.0 - v)) for v in lam0] + [0.3 / buffers] * buffers)
        res = minimize(
            _objective,
            theta0,
            args=(buffers, horizon),
            method="Nelder-Mead",
            options={"maxiter": 400 * buffers, "xatol": 1e-6, "fatol": 1e-9},
        )
        if res.fun < best:
            best, best_x = float(res.fun), np.asarray(res.x)
    decays = 1.0 / (1.0 + np.exp(-best_x[:buffers]))
    return tuple(float(v) for v in decays), tuple(float(v) for v in best_x[buffers:])


def blt_factorization(n: int, *, buffers: int = 3) -> BltFactorization:
    """The public BLT parameters for streams of length ``n`` (module notes; deterministic)."""
    n = check_integer(n, "n", "blt_factorization")
    buffers = check_integer(buffers, "buffers", "blt_factorization", maximum=8)
    decays, weights = _optimised(min(n, _OPT_HORIZON), buffers)
    return BltFactorization(decays=decays, weights=weights)


def _magnitude(bound: float, c: np.ndarray, sigma: float) -> float:
    """Public bound on |(Cx)_t| + noise: B·Σ|c_j| + 64σ."""
    return bound * float(np.abs(c).sum()) + 64.0 * sigma


def blt_noise(
    n: int, *, epsilon: float, delta: float, bound: float, factorization: BltFactorization
) -> tuple[GaussianNoise, float, float]:
    """(noise of every coordinate of Cx, L2 sensitivity Δ₂ + 2γ√n used, ρ) (module notes)."""
    owner = "blt_noise"
    rho = zcdp_rho(epsilon, delta)
    c, _ = factorization.coefficients(n)
    sens = bound * math.sqrt(float(np.dot(c, c)))
    sigma0 = sens / math.sqrt(2.0 * rho)
    gamma = lattice_granularity(sigma0, _magnitude(bound, c, 2.0 * sigma0))
    sens_lattice = sens + 2.0 * gamma * math.sqrt(n)
    sigma = sens_lattice / math.sqrt(2.0 * rho)
    if not math.isfinite(sigma):  # pragma: no cover - defensive
        raise ParameterError(f"The BLT parameters of {owner} give a non-finite noise scale.")
    noise = GaussianNoise(sigma=sigma, magnitude=_magnitude(bound, c, sigma), granularity=gamma)
    return noise, sens_lattice, rho


@dataclass(frozen=True, slots=True, kw_only=True)
class BltRelease:
    """A BLT release: noisy prefix sums ŝ = L(round(Cx/γ)γ + w) and their exact variances."""

    prefix_sums: np.ndarray
    """Noisy c(σ, i) for i = 1..n (index i − 1)."""
    factorization: BltFactorization
    """The public decoder/encoder."""
    noise: GaussianNoise
    """The noise of each coordinate of Cx (σ = its standard deviation)."""
    sensitivity: float
    """L2 sensitivity of round(Cx/γ)γ used for σ (B‖c‖₂ + 2γ√n)."""
    rho: float
    """ρ of the ρ-zCDP guarantee."""
    epsilon: float
    """ε of the (ε, δ) conversion ([BS16] Prop. 1.3)."""
    delta: float
    """δ of the conversion."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level (ε, δ), from ρ-zCDP."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        self.prefix_sums.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of each prefix sum: σ²·Σ_{j<t} l_j²."""
        out = self.factorization.variance_units(self.n) * self.noise.variance
        out.setflags(write=False)
        return out


def _check_common(epsilon, delta, bound, owner) -> tuple[float, float, float]:
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner, closed_low=False)
    bnd = check_positive(bound, "bound", owner)
    return eps, dlt, bnd


def _blt_release(
    values: object,
    *,
    epsilon: float,
    delta: float,
    bound: float,
    bits: BitSource,
    factorization: BltFactorization | None = None,
    owner: str = "blt_release",
) -> BltRelease:
    """Validate everything, then release with noise from ``bits`` (module notes)."""
    from scipy.signal import lfilter

    eps, dlt, bnd = _check_common(epsilon, delta, bound, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = vals.size
    fact = blt_factorization(n) if factorization is None else factorization
    noise, sens, rho = blt_noise(n, epsilon=eps, delta=dlt, bound=bnd, factorization=fact)
    g = noise.granularity
    bc, ac = fact.encoder_filter()
    y = lfilter(bc, ac, vals)  # C x
    y *= 1.0 / g  # exact: γ is a power of two
    np.rint(y, out=y)
    for a in range(0, n, _BLOCK):  # noise in blocks of 2¹⁶ steps (the streaming draw order)
        b = min(a + _BLOCK, n)
        y[a:b] += noise.sample(b - a, bits) * (1.0 / g)
    y *= g
    bl, al = fact.decoder_filter()
    prefix = lfilter(bl, al, y)
    return BltRelease(
        prefix_sums=prefix,
        factorization=fact,
        noise=noise,
        sensitivity=sens,
        rho=rho,
        epsilon=eps,
        delta=dlt,
        bound=bnd,
        guarantee=PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(zcdp_to_epsilon(rho, dlt), dlt), proof=_PROOF
        ),
    )


def blt_release(
    values: object, *, epsilon: float, delta: float, bound: float, seed: object = None
) -> BltRelease:
    """Release every prefix sum with a 3-buffer BLT and discrete Gaussian noise.

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``].
    epsilon, delta
        Target (ε, δ), δ ∈ (0, 1); the mechanism is ρ-zCDP with the largest ρ that converts to
        it ([BS16] Prop. 1.3).
    bound
        Public bound B.
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    See the module notes for the factorisation, the L2 sensitivity B‖c‖₂ and the exact variance
    σ²Σ_{j<t} l_j². *Privacy*: event-level ρ-zCDP, hence (ε, δ)-DP.

    Examples
    --------
    >>> rel = blt_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> rel.prefix_sums.shape, bool(rel.variance[0] <= rel.variance[3])
    ((4,), True)
    """
    return _blt_release(values, epsilon=epsilon, delta=delta, bound=bound, bits=bit_source(seed))


class BltCounter:
    """Streaming BLT counter: ``push`` one value, get ŝ_t; O(buffers) state (module notes).

    Same draws (blocks of 2¹⁶ steps) and the same filter recursion as :func:`blt_release`, so
    with one seed both give the same values (up to the last bits of the filter arithmetic).

    Examples
    --------
    >>> counter = BltCounter(4, epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> out = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> ref = blt_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> bool(np.allclose(out, ref.prefix_sums))
    True
    """

    def __init__(
        self, n: int, *, epsilon: float, delta: float, bound: float, seed: object = None
    ) -> None:
        owner = "BltCounter"
        self.n = check_integer(n, "n", owner)
        self.epsilon, self.delta, self.bound = _check_common(epsilon, delta, bound, owner)
        self.factorization = blt_factorization(self.n)
        self.noise, self.sensitivity, self.rho = blt_noise(
            self.n,
            epsilon=self.epsilon,
            delta=self.delta,
            bound=self.bound,
            factorization=self.factorization,
        )
        self.guarantee = PrivacyGuarantee(
            unit=EventLevel(),
            budget=Budget(zcdp_to_epsilon(self.rho, self.delta), self.delta),
            proof=_PROOF,
        )
        self.steps = 0
        self._bits = bit_source(seed)
        self._buffer: list[float] = []
        self._g = self.noise.granularity
        bc, ac = self.factorization.encoder_filter()
        bl, al = self.factorization.decoder_filter()
        self._enc = (bc.tolist(), ac.tolist(), [0.0] * (max(bc.size, ac.size) - 1))
        self._dec = (bl.tolist(), al.tolist(), [0.0] * (max(bl.size, al.size) - 1))
        self._var_units = 0.0
        self._ell = None

    @staticmethod
    def _step(filt, x: float) -> float:
        """One step of direct form II transposed, in ``scipy.signal.lfilter``'s order."""
        b, a, z = filt
        p = len(z)
        b = b + [0.0] * (p + 1 - len(b))
        a = a + [0.0] * (p + 1 - len(a))
        y = z[0] + b[0] * x
        for k in range(p - 1):
            z[k] = z[k + 1] + x * b[k + 1] - y * a[k + 1]
        z[p - 1] = x * b[p] - y * a[p]
        return y

    def push(self, x: float) -> float:
        """Add the next value (in [0, B]) and return the noisy prefix sum ŝ_t."""
        kind = type(x)
        if kind is not float and (kind is bool or not isinstance(x, Real)):
            raise DomainError("The 'x' argument of BltCounter.push must be a finite real number.")
        xf = float(x)
        if not 0.0 <= xf <= self.bound:
            raise DomainError(
                f"The 'x' argument of BltCounter.push must be finite and lie in [0, "
                f"{self.bound:g}] (the declared bound). Clip the value or declare a larger bound."
            )
        i = self.steps
        if i >= self.n:
            raise DomainError(
                f"BltCounter was built for n={self.n} values and all have been pushed. Build a "
                "new counter (with a new budget) for a longer stream."
            )
        if i % _BLOCK == 0:
            self._buffer = (
                self.noise.sample(min(_BLOCK, self.n - i), self._bits) * (1.0 / self._g)
            ).tolist()
        g = self._g
        y = self._step(self._enc, xf)
        y = (round(y * (1.0 / g)) + self._buffer[i % _BLOCK]) * g
        self.steps = i + 1
        return self._step(self._dec, y)

    def variance(self, i: int | None = None) -> float:
        """Exact noise variance of ŝ_i (default: the current step)."""
        i = (
            self.steps
            if i is None
            else check_integer(i, "i", "BltCounter.variance", maximum=self.n)
        )
        if i == 0:
            return 0.0
        return float(self.factorization.variance_units(i)[-1]) * self.noise.variance
