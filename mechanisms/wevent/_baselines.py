"""The w-event baselines of [FV19] §6–7: Laplace on every value, DFT, and PeGaSus.

Each baseline releases one stream's w-periods independently. Inputs are arrays ``(..., L)``
holding periods of ``L <= w`` steps (``L < w`` only for the last, partial period of a
stream); the noise is always calibrated to the window ``w``. Values are in the stream's units;
``delta`` is the largest change of one value at one step under the neighbour relation:
α under (w, α)-indistinguishability ([FV19] §5.1), the public bound B under plain w-event
privacy on values in [0, B] ([FV19] Def. 2).

The neighbour relation (one definition for the whole package)
-------------------------------------------------------------
[FV19] Def. 3 ((w, α)-indistinguishability; Def. 2 with Δ = B for plain w-event privacy): two
stream prefixes are neighbours if they differ only within one window of ``w`` consecutive steps
and, at each step of it, in *one individual's* report, by at most Δ. The individual may differ
from step to step. A baseline applied to the ``n`` streams of one level of a hierarchy (or to
``n`` independent columns) therefore sees, at each step, a change of at most Δ in *one* of
the streams, possibly a different one at each step.

Windows straddling two periods, changes spread over streams
-----------------------------------------------------------
A neighbour's window ``t .. t + w - 1`` may straddle the boundary of two released periods
([FV19] Def. 2 allows any window, not only aligned ones), and its changes may fall in several
streams of a level. Every loss bound below is checked for a change split into *pieces*, one per
(stream, period) it touches, of ``m_1 + m_2 + ... <= w`` steps:

* Laplace and PeGaSus have losses *linear* in the changed values, so the pieces add up to at
  most the loss of one stream's period: straddling and spreading are free.
* DFT's bound goes through the L2 norm of each piece, and ``Σ_i sqrt(m_i) <= sqrt(P w)`` for
  ``P`` pieces: ``P <= 2`` for one stream (a factor √2 that [FV19] §6's ``√k Δ₂/ε`` omits),
  ``P <= min(2 n, w)`` for a level of ``n`` streams (:class:`WEventDFT` ``streams=n``).

References
----------
[FV19]   Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[RN10]   Rastogi, Nath. Differentially Private Aggregation of Distributed Time-Series with
         Transformation and Encryption. SIGMOD 2010 (the DFT / FPA_k mechanism).
[PGS17]  Chen, Machanavajjhala, Hay, Miklau. PeGaSus: Data-Adaptive Differentially Private
         Stream Processing. CCS 2017.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import ParameterError
from ..core._noise import LaplaceNoise, lattice_granularity
from ..core._random import BitSource
from ..core._units import PrivacyGuarantee, WAlphaIndistinguishability, WEvent
from ..core._validation import (
    charge_ledger,
    check_fraction,
    check_integer,
    check_ledger,
    check_positive,
)

__all__ = ["WEventDFT", "WEventLaplace", "WEventPegasus", "dft_coefficient_count"]

_SMOOTHERS = ("median", "mean")


def _unit(w: int, delta: float, alpha: bool) -> WEvent | WAlphaIndistinguishability:
    return WAlphaIndistinguishability(w=w, alpha=delta) if alpha else WEvent(w=w)


def _periods(values: np.ndarray, w: int, owner: str) -> tuple[np.ndarray, tuple[int, ...]]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] == 0 or arr.shape[-1] > w:
        raise ParameterError(
            f"The 'periods' argument of {owner} must be an array (..., L) with 1 <= L <= w = {w}. "
            f"Got shape {arr.shape}."
        )
    return arr.reshape(-1, arr.shape[-1]), arr.shape


def _charge(ledger: BudgetLedger | None, guarantee: PrivacyGuarantee, owner: str) -> None:
    """Charge a validated release's guarantee before its first draw."""
    charge_ledger(ledger, guarantee.budget, owner, guarantee.unit)


def _laplace(sensitivity: float, epsilon: float, coords: int, magnitude: float) -> LaplaceNoise:
    """Lattice Laplace for a vector query of L1 sensitivity Δ where ``coords`` rounded
    coordinates may differ: rounding moves each by ≤ γ/2, so the rounded query's sensitivity is
    Δ + coords·γ, which is what the scale is calibrated to."""
    gamma = lattice_granularity(sensitivity / epsilon, magnitude)
    return LaplaceNoise(
        sensitivity=sensitivity + (coords - 1) * gamma,
        epsilon=epsilon,
        magnitude=magnitude,
        granularity=gamma,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WEventLaplace:
    """Laplace noise on every value of every w-period ([FV19] §2.3 and §6, "Laplace").

    Notes
    -----
    Each value gets Lap(w·Δ/ε) (lattice Laplace, rounding included): the L1 sensitivity of a
    whole period under w-event neighbours is w·Δ, since all w values may change, each by at
    most Δ (Δ = α, or the bound B).

    *Privacy*: ε-w-event private (or (w, α)-indistinguishable when ``alpha_unit``): a
    neighbour changes at most w values by at most Δ each, wherever the window falls and in
    whichever of the streams it is applied to (one stream per step, module Notes), and the
    loss of independent Laplace noise is ‖Δx‖₁/scale ≤ w·Δ/(w·Δ/ε) = ε ([FV19] §2.3).
    """

    epsilon: float
    """Privacy loss ε per window of w steps."""
    w: int
    """Window (period) length."""
    delta: float
    """Largest change of one value (α, or the public bound B)."""
    alpha_unit: bool = True
    """True: the unit is (w, α)-indistinguishability with α = delta; False: w-event on [0, B]."""
    magnitude: float = 0.0
    """Public bound on |value| (keeps the lattice exact); 0 when none is known."""
    noise: LaplaceNoise = field(init=False)
    """The per-value noise (scale = w·(Δ + γ)/ε)."""

    def __post_init__(self) -> None:
        owner = "WEventLaplace"
        eps = check_positive(self.epsilon, "epsilon", owner)
        w = check_integer(self.w, "w", owner)
        dlt = check_positive(self.delta, "delta", owner)
        mag = check_positive(self.magnitude, "magnitude", owner, allow_zero=True)
        object.__setattr__(self, "noise", _laplace(w * dlt, eps, w, mag))

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """ε per window of w steps, by the Laplace mechanism with sensitivity w·Δ."""
        return PrivacyGuarantee(
            unit=_unit(self.w, self.delta, self.alpha_unit),
            budget=Budget(epsilon=self.epsilon),
            proof="[FV19] §2.3: Laplace with sensitivity w·Δ on every value",
        )

    def release(
        self, periods: np.ndarray, bits: BitSource, *, ledger: BudgetLedger | None = None
    ) -> np.ndarray:
        """Noisy copy of ``periods`` (..., L), L ≤ w (may be negative: clip downstream).

        ``ledger`` (optional) is charged :attr:`guarantee` once, after validation and before
        any draw: one call releases every period of the streams it is given.
        """
        owner = "WEventLaplace.release"
        ledger = check_ledger(ledger, owner)
        arr, shape = _periods(periods, self.w, owner)
        _charge(ledger, self.guarantee, owner)
        return self.noise.release(arr, bits).reshape(shape)


def dft_coefficient_count(k: int, length: int) -> int:
    """Number of complex rfft coefficients kept for a period of ``length`` steps: min(k, L//2+1)."""
    return min(int(k), int(length) // 2 + 1)


def _pack(coef: np.ndarray, length: int) -> np.ndarray:
    """Real coordinates of the kept coefficients: Re F0, (Re, Im) F_j, Re F_{L/2} (no Im)."""
    kk = coef.shape[1]
    parts = [coef.real]
    nyquist = length % 2 == 0 and kk - 1 == length // 2
    im = coef.imag[:, 1 : kk - 1 if nyquist else kk]
    return np.concatenate(parts + [im], axis=1)


def _unpack(vec: np.ndarray, kk: int, length: int) -> np.ndarray:
    nyquist = length % 2 == 0 and kk - 1 == length // 2
    coef = vec[:, :kk].astype(np.complex128)
    n_im = kk - 2 if nyquist else kk - 1
    coef[:, 1 : 1 + n_im] += 1j * vec[:, kk : kk + n_im]
    return coef


@dataclass(frozen=True, slots=True, kw_only=True)
class WEventDFT:
    """DFT baseline: perturb the k lowest Fourier coefficients of each period ([FV19] §6, [RN10]).

    For a period ``x`` of L steps: orthonormal real DFT ``F = rfft(x)/√L``, keep the
    ``k' = min(k, L//2 + 1)`` lowest frequencies, add Laplace noise to the ``2k' − 1`` real
    coordinates (Re F0; Re and Im of F1..F_{k'−1}; no Im for a kept Nyquist term), pad with
    zeros, invert with ``irfft`` (a real signal: each kept frequency with its conjugate mirror).

    Notes
    -----
    Sensitivity. By Parseval, |ΔF0|² + 2 Σ_{0<j<L/2} |ΔF_j|² (+ |ΔF_{L/2}|²) ≤ ‖Δx‖₂², and
    |Re| + |Im| ≤ √2 |·|, so by Cauchy–Schwarz the L1 change of the released coordinates of one
    period of one stream is at most √k'·‖Δx‖₂. A neighbour's change splits into pieces, one per
    (stream, period) it touches, of m_i steps with Σ m_i ≤ w (one stream changes per step, see
    the module Notes), and the losses of the pieces add: √k'·Δ·Σ √m_i ≤ √k'·Δ·√(P·w) for P
    pieces. One stream: P ≤ 2 (aligned or straddling window); a level of ``streams`` = n
    streams: P ≤ min(2n, w). The noise scale is therefore b = √(k'·w·min(2n, w))·Δ/ε, i.e.
    √(2k'w)·Δ/ε for one stream (plus the lattice rounding of 2(2k' − 1) coordinates per piece).
    [FV19] §6 states √k·Δ₂/ε, which covers one stream and aligned windows only.

    *Privacy*: ε-w-event private (or (w, α)-indistinguishable) for any window of w steps,
    aligned or straddling two periods, with the changes in any of the ``streams`` streams the
    mechanism is applied to, by the Laplace mechanism on the coefficient vectors; the inverse
    DFT is post-processing. ``tests/privacy/test_wevent_baselines_audit.py`` shows the
    one-stream calibration failing when the change is spread over 8 streams.
    """

    epsilon: float
    """Privacy loss ε per window of w steps."""
    w: int
    """Window (period) length."""
    k: int
    """Number of lowest-frequency complex coefficients kept, 1 ≤ k ≤ w (clipped to L//2 + 1)."""
    delta: float
    """Largest change of one value (α, or the public bound B)."""
    alpha_unit: bool = True
    """True: (w, α)-indistinguishability with α = delta; False: w-event on [0, B]."""
    magnitude: float = 0.0
    """Public bound on |value| of a step (keeps the lattice exact); 0 when none is known."""
    streams: int = 1
    """Number n of streams (one level's nodes) released with this mechanism whose changes may
    be spread over them, one stream per step ([FV19] Def. 3); 1 for a single stream."""
    noise: LaplaceNoise = field(init=False)
    """Noise of each real coefficient coordinate (scale √(k'w·min(2n, w))·(Δ + O(γ))/ε)."""

    def __post_init__(self) -> None:
        owner = "WEventDFT"
        eps = check_positive(self.epsilon, "epsilon", owner)
        w = check_integer(self.w, "w", owner)
        k = check_integer(self.k, "k", owner, maximum=w)
        dlt = check_positive(self.delta, "delta", owner)
        mag = check_positive(self.magnitude, "magnitude", owner, allow_zero=True)
        n = check_integer(self.streams, "streams", owner)
        kk = dft_coefficient_count(k, w)
        pieces = min(2 * n, w)  # (stream, period) pieces of one neighbour's change
        sens = math.sqrt(kk * w * pieces) * dlt  # √k'·Δ·Σ √m_i <= √k'·Δ·√(P w)
        coords = pieces * (2 * kk - 1)
        object.__setattr__(self, "noise", _laplace(sens, eps, coords, mag * math.sqrt(w)))

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """ε per window of w steps (Laplace on k coefficients, L1 sensitivity √(k'wP)·Δ)."""
        return PrivacyGuarantee(
            unit=_unit(self.w, self.delta, self.alpha_unit),
            budget=Budget(epsilon=self.epsilon),
            proof=(
                "[FV19] §6 DFT with sensitivity √(k'·w·P)·Δ, P = min(2n, w) pieces (Parseval; "
                "straddling windows, changes spread over n streams)"
            ),
        )

    def release(
        self, periods: np.ndarray, bits: BitSource, *, ledger: BudgetLedger | None = None
    ) -> np.ndarray:
        """Reconstruction from noisy low frequencies of each period (..., L), L ≤ w.

        ``L < w`` is the last, partial period of each stream: at most ``streams`` rows. Its
        k'' = min(k, L//2 + 1) <= k' coefficients keep the full period's noise, and a window
        straddling the last full period and it is two pieces of one stream (Parseval on each).
        ``ledger`` (optional) is charged :attr:`guarantee` once, after validation and before
        any draw.
        """
        owner = "WEventDFT.release"
        ledger = check_ledger(ledger, owner)
        arr, shape = _periods(periods, self.w, owner)
        length = arr.shape[1]
        if length < self.w and arr.shape[0] > self.streams:
            # Short periods are the last period of a stream: one per stream. Consecutive short
            # periods of one stream would put more than two pieces in a window (P <= 2 per
            # stream in the calibration; w pieces of one step each for L = 1).
            raise ParameterError(
                f"The 'periods' argument of WEventDFT.release may hold a short period "
                f"(L = {length} < w = {self.w}) only as the last period of each of its "
                f"streams = {self.streams} streams. Got {arr.shape[0]} short periods."
            )
        _charge(ledger, self.guarantee, owner)
        kk = dft_coefficient_count(self.k, length)
        coef = np.fft.rfft(arr, axis=1, norm="ortho")[:, :kk]
        noisy = self.noise.release(_pack(coef, length), bits)
        full = np.zeros((arr.shape[0], length // 2 + 1), dtype=np.complex128)
        full[:, :kk] = _unpack(noisy, kk, length)
        return np.fft.irfft(full, n=length, axis=1, norm="ortho").reshape(shape)


@dataclass(frozen=True, slots=True, kw_only=True)
class WEventPegasus:
    """PeGaSus (perturb, group, smooth; [PGS17]) adapted to w-events as in [FV19] §7.

    Per period: the *perturber* adds Lap(w·Δ/ε_p) to every value; the *grouper* (the
    deviation-based grouper of [PGS17] Alg. 2) reads the true values and grows a group of
    consecutive steps while its noisy deviation ``dev(G) = Σ|x_i − mean(G)|`` stays below a
    noisy threshold, closing it (with the current step) at the first step above; the
    *smoother* releases, at each step, the median (or mean) of the perturbed values of its
    group up to that step (online, as in [PGS17]). Groups never cross a period boundary.

    Notes
    -----
    [FV19] §7 divides the budget equally over the w steps of a period: each step gets the
    event-level PeGaSus with ε/w. Here: ε_p = ``perturb_share``·ε, ε_g = ε − ε_p; one changed
    value moves ``dev`` by < 2Δ, so a w-event change moves the deviations of all groups
    together by at most D = 2wΔ. Each group is one AboveThreshold run with threshold noise
    Lap(2D/ε_g) and query noise Lap(4D/ε_g) ([PGS17] Alg. 2 with Δ_dev = 2 at ε_g/w per
    step). The default threshold θ = 5·w·Δ/ε_g is [PGS17]'s θ = 5/ε_g for unit counts at the
    per-step budget ε_g/w.

    *Defaults, checked as far as possible*: [FV19] §7 only says it uses "the values of the
    meta-parameters indicated in the original paper". The split 0.8/0.2 and θ = 5/ε_g are
    [PGS17] §6's settings as we remember them; the PeGaSus paper is not among the shared
    papers and the stored public copies we could search hold its abstract only, so they are
    unverified. Measured sensitivity (``docs/results/optstream_accuracy.md``, January, α/ε =
    50, regional hierarchy): over shares {0.5, 0.8, 0.9} x θ x {1/5, 1, 5}, the defaults'
    error is within 36% of the best cell on the regions and 9% on the national node, and no
    cell changes PeGaSus's rank against OptStream or Laplace.

    *Privacy*: ε-w-event private (or (w, α)-indistinguishable): the perturber's loss is
    ‖Δx‖₁/(wΔ/ε_p) ≤ ε_p; each value lies in exactly one group, and an AboveThreshold run
    whose queries move by D_j loses at most ε_g·D_j/D, so all groups together lose at most
    ε_g, for aligned and straddling windows alike and for changes spread over several streams
    of a level (both losses are linear in the changes, which total at most w·Δ over all
    streams, module Notes); smoothing is post-processing. Lattice rounding is added to every
    sensitivity.
    """

    epsilon: float
    """Privacy loss ε per window of w steps."""
    w: int
    """Window (period) length."""
    delta: float
    """Largest change of one value (α, or the public bound B)."""
    alpha_unit: bool = True
    """True: (w, α)-indistinguishability with α = delta; False: w-event on [0, B]."""
    perturb_share: float = 0.8
    """Share of ε given to the perturber (the rest goes to the grouper), in (0, 1)."""
    threshold: float | None = None
    """Grouper threshold θ on the deviation (values' units); None: 5·w·Δ/ε_g."""
    smoother: str = "median"
    """``"median"`` or ``"mean"`` of the perturbed values of the group so far."""
    magnitude: float = 0.0
    """Public bound on |value| (keeps the lattice exact); 0 when none is known."""
    perturber: LaplaceNoise = field(init=False)
    """Per-value noise of the perturber (scale w·(Δ + γ)/ε_p)."""
    threshold_noise: LaplaceNoise = field(init=False)
    """Noise of each group's threshold (scale 2(D + wγ)/ε_g)."""
    query_noise: LaplaceNoise = field(init=False)
    """Noise of each deviation query (scale 4(D + wγ)/ε_g)."""

    def __post_init__(self) -> None:
        owner = "WEventPegasus"
        eps = check_positive(self.epsilon, "epsilon", owner)
        w = check_integer(self.w, "w", owner)
        dlt = check_positive(self.delta, "delta", owner)
        share = check_fraction(self.perturb_share, "perturb_share", owner)
        mag = check_positive(self.magnitude, "magnitude", owner, allow_zero=True)
        if self.smoother not in _SMOOTHERS:
            raise ParameterError(
                f"The 'smoother' parameter of {owner} must be one of {list(_SMOOTHERS)}. "
                f"Got {self.smoother!r} instead."
            )
        eps_p, eps_g = eps * share, eps * (1.0 - share)
        if self.threshold is None:
            object.__setattr__(self, "threshold", 5.0 * w * dlt / eps_g)
        else:
            object.__setattr__(
                self, "threshold", check_positive(self.threshold, "threshold", owner)
            )
        object.__setattr__(self, "perturber", _laplace(w * dlt, eps_p, w, mag))
        dev = 2.0 * w * dlt  # D: a w-event change moves all deviations together by < 2wΔ
        gamma = lattice_granularity(2.0 * dev / eps_g, 2.0 * w * mag)
        shift = dev + w * gamma  # rounding of each group's comparison, one per changed value
        thr = LaplaceNoise(
            sensitivity=2 * shift - gamma, epsilon=eps_g, magnitude=2 * w * mag, granularity=gamma
        )
        qry = LaplaceNoise(
            sensitivity=4 * shift - gamma, epsilon=eps_g, magnitude=2 * w * mag, granularity=gamma
        )
        object.__setattr__(self, "threshold_noise", thr)
        object.__setattr__(self, "query_noise", qry)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """ε_p + ε_g = ε per window of w steps."""
        return PrivacyGuarantee(
            unit=_unit(self.w, self.delta, self.alpha_unit),
            budget=Budget(epsilon=self.epsilon),
            proof="[PGS17] Thm. (perturber + grouper) at ε/w per step, [FV19] §7",
        )

    def groups(self, periods: np.ndarray, bits: BitSource) -> np.ndarray:
        """Grouper alone: start index of each step's group, int array shaped like ``periods``."""
        arr, shape = _periods(periods, self.w, "WEventPegasus.groups")
        return self._group(arr, bits).reshape(shape)

    def _group(self, x: np.ndarray, bits: BitSource) -> np.ndarray:
        rows, length = x.shape
        rho = self.threshold_noise.sample(rows * length, bits).reshape(rows, length)
        nu = self.query_noise.sample(rows * length, bits).reshape(rows, length)
        start = np.zeros(rows, dtype=np.int64)
        limit = self.threshold + rho[:, 0]
        closed = np.zeros(rows, dtype=bool)
        out = np.zeros((rows, length), dtype=np.int64)
        cols = np.arange(length)
        csum = np.concatenate([np.zeros((rows, 1)), np.cumsum(x, axis=1)], axis=1)
        for t in range(1, length):
            # [PGS17] Alg. 2: a closed group is followed by a new group {t} with a new threshold
            start = np.where(closed, t, start)
            limit = np.where(closed, self.threshold + rho[:, t], limit)
            grow = ~closed
            mean = (csum[:, t + 1] - csum[np.arange(rows), start]) / (t + 1 - start)
            inside = (cols[None, : t + 1] >= start[:, None]).astype(np.float64)
            dev = np.sum(np.abs(x[:, : t + 1] - mean[:, None]) * inside, axis=1)
            closed = grow & (dev + nu[:, t] > limit)  # group closes with t in it
            out[:, t] = start
        return out

    def release(
        self, periods: np.ndarray, bits: BitSource, *, ledger: BudgetLedger | None = None
    ) -> np.ndarray:
        """Smoothed perturbed values of each period (..., L), L ≤ w.

        ``ledger`` (optional) is charged :attr:`guarantee` once, after validation and before
        any draw.
        """
        owner = "WEventPegasus.release"
        ledger = check_ledger(ledger, owner)
        arr, shape = _periods(periods, self.w, owner)
        _charge(ledger, self.guarantee, owner)
        noisy = self.perturber.release(arr, bits)
        start = self._group(arr, bits)
        rows, length = arr.shape
        cols = np.arange(length)
        out = np.empty_like(noisy)
        if self.smoother == "mean":
            csum = np.concatenate([np.zeros((rows, 1)), np.cumsum(noisy, axis=1)], axis=1)
            idx = np.arange(rows)
            for t in range(length):
                s = start[:, t]
                out[:, t] = (csum[:, t + 1] - csum[idx, s]) / (t + 1 - s)
        else:
            for t in range(length):
                keep = cols[None, : t + 1] >= start[:, t : t + 1]
                window = np.where(keep, noisy[:, : t + 1], np.nan)
                out[:, t] = np.nanmedian(window, axis=1)
        return out.reshape(shape)
