"""The PAK threshold τ: a private, offset λp-quantile of the first m values ([PAK19] §IV).

Pipeline (Eqs. 6, 7, 11, 12): x̂_λp and its smooth sensitivity SS on the prefix, the factor κ of
Eq. 11, S = max(κ·SS, F) + γ (κ·SS with a public floor F and the lattice spacing γ),
τ' = x̂_λp + (S/a)·G⁻¹(1 − β_lt) (Eq. 6), and the release τ = τ' + (S/a)·noise on a public
lattice γℤ (Eq. 12), then ×r (Eq. 15) and clipped to [0, B] (post-processing).

For auditors: :func:`pak_threshold_calibration` returns τ', the lattice point it snaps to and
the noise scale, without drawing anything; the released threshold before ×r and clipping is
``center + scale·Z`` on the lattice, Z the standard lattice noise of ``noise``.

Release and analysis (issue 11 §2). The noise scale S/a is a function of the smooth sensitivity
SS: identical across runs and different between neighbours, so it would reveal SS exactly, and
τ_max of Eq. 13 reveals x̂_λp. A :class:`ThresholdRelease` therefore holds only the released τ
and public parameters; S/a, x̂_λp, SS and τ_max live in a :class:`ThresholdAnalysis` that a
caller must ask for (``analysis=True``) and must never publish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import ParameterError
from ..core._noise import LATTICE_BITS, GaussianNoise, LaplaceNoise
from ..core._random import BitSource
from ..core._record import PrivacyRecord
from ..core._results import summary_text, table_frame
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_bool,
    check_fraction,
    check_ledger,
    check_noise_range,
    check_positive,
    check_seed,
)
from ._calibration import (
    _TAIL_UNITS,
    ThresholdCalibration,
    _check_beta_lt,
    _check_r,
    pak_kappa,
    pak_tau_max,
    pak_threshold_calibration,
)
from ._quantile import (
    NOISE_KINDS,
    _check_noise,
    noise_quantile,
    smoothing_parameters,
)

__all__ = [
    "NOISE_KINDS",  # re-exported from _quantile
    "ThresholdAnalysis",
    "ThresholdCalibration",
    "ThresholdRelease",
    "MIN_THRESHOLD",
    "mechanism_threshold",
    "noise_quantile",
    "pak_kappa",
    "pak_tau_max",
    "pak_threshold",
    "pak_threshold_calibration",
    "smoothing_parameters",
]


#: Mechanism 1 raises θ to at least B·2⁻³⁰ (public post-processing) so the noise scales stay
#: positive; :func:`mechanism_threshold`'s guard takes over below it.
MIN_THRESHOLD = 2.0**-30


def mechanism_threshold(unclipped: object, bound: float, *, guard: bool = True) -> np.ndarray:
    """The clipping bound θ Mechanism 1 uses, from the released r·τ (post-processing only).

    Parameters
    ----------
    unclipped
        The released r·τ before clipping (``ThresholdRelease.unclipped``): a float or an array
        (the planners integrate over τ's law with arrays).
    bound
        The public bound B.
    guard
        True (default): where r·τ < B·2⁻³⁰ (in practice r·τ ≤ 0), θ = B. False: [PAK19]'s
        protocol, θ = min(max(r·τ, B·2⁻³⁰), B), a release at or below 0 becoming B·2⁻³⁰.

    Returns
    -------
    numpy.ndarray
        θ, of the shape of ``unclipped`` (a 0-d array for a float).

    Notes
    -----
    *Why the guard* (issue 23). The threshold is τ = τ' + (S/a)·Z with τ' = x̂_λp +
    (S/a)·G⁻¹(1 − β_lt) (Eqs. 6, 12), so Pr[τ < x̂_λp] = β_lt (Eq. 8) is the failure PAK
    accepts. Where the smooth sensitivity is of the order of B (few prefix values above the
    quantile, the padding x_{m+1} = B within 1/b ranks of it), S/a is many times B: τ' lies far
    above B, the clip returns B almost always, and the failure event is almost all of it below
    0, with probability ≈ β_lt·e^{−x̂_λp·a/S}. Clipped to 0 (raised to B·2⁻³⁰), θ then clips
    *every* suffix value away and the error is the whole sum (on the household minutes at
    ε = 1, seed 25 of the CLI's release: −2,331 kW·min on a day's sum of 2,331).

    The data's quantile lies in the public domain [0, B], so a released r·τ ≤ 0 is *certainly*
    in Eq. 8's failure event (τ < x̂_λp) whatever the data, and it says nothing about where
    x̂_λp is; the one bound known to be ≥ x̂_λp is B. The guard uses B there, exactly as the
    mechanism already runs with τ = B when r·τ ≥ B (no clipping bias; the counter's noise at
    bound B). A released r·τ in (0, x̂_λp) is a failure too but cannot be told from a good
    release without the data, and is rarer by a factor ≈ x̂_λp·a/S where S/a ≫ x̂_λp; it is left
    as [PAK19] has it.

    *Privacy*: θ is a function of the released r·τ and the public B only, so it is
    post-processing of the (ε₁, δ)-DP threshold ([DR14] Prop. 2.1); Mechanism 1's proof
    ([PAK19] §III-C) needs only that the later steps read the prefix through the released
    threshold, which they still do.

    Examples
    --------
    >>> mechanism_threshold([-410.7, 0.0, 3.5, 711.3], 36.0).tolist()
    [36.0, 36.0, 3.5, 36.0]
    >>> float(mechanism_threshold(-410.7, 36.0, guard=False)) == 36.0 * 2.0**-30
    True
    """
    owner = "mechanism_threshold"
    guard = check_bool(guard, "guard", owner)
    bnd = check_positive(bound, "bound", owner)
    value = np.asarray(unclipped, dtype=np.float64)
    if not np.all(np.isfinite(value)):
        raise ParameterError(
            f"The 'unclipped' parameter of {owner} must hold finite floats (released "
            "thresholds). Got a value that is NaN or infinite instead."
        )
    floor = bnd * MIN_THRESHOLD
    theta = np.clip(value, floor, bnd)
    if guard:
        theta = np.where(value < floor, bnd, theta)  # [PAK19 Eq. 8]'s failure, certain
    return theta


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdRelease:
    """A released PAK threshold and the public parameters that produced it.

    Holds nothing computed from the data but the released τ (issue 11 §2): the noise scale
    S/a and τ_max, which reveal SS and x̂_λp, are in :class:`ThresholdAnalysis`.
    """

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
    granularity: float
    """Public lattice spacing γ."""
    noise: str
    """``"laplace"`` or ``"gaussian"``."""
    r: float
    """Multiplier r of Eq. 15."""
    clipped: bool
    """Whether the threshold was clipped to [0, B]."""
    bound: float
    """The public bound B."""
    guarantee: PrivacyGuarantee
    """(ε, δ) event-level on the prefix."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, δ, B, mechanism, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="pak-threshold",
            parameters={
                "time_lag": self.time_lag,
                "rank": self.rank,
                "r": self.r,
                "noise": self.noise,
                "clip": self.clipped,
            },
            bound=self.bound,
            seeded=self.seeded,
        )

    def _public_rows(self) -> list[tuple[str, object]]:
        # released values and public parameters only: not scale, kappa·SS or tau_max
        budget = self.guarantee.budget
        return [
            ("threshold τ (released)", self.threshold),
            ("before clipping (released)", self.unclipped),
            ("clipped to [0, B]", self.clipped),
            ("time lag m (prefix length)", self.time_lag),
            ("multiplier r (Eq. 15)", self.r),
            ("noise", self.noise),
            ("epsilon", budget.epsilon),
            ("delta", budget.delta),
        ]

    def to_frame(self):
        """One row: the released threshold and the public parameters (no analysis-only
        values: ``scale`` and ``tau_max`` depend on the data)."""
        return table_frame({k: [v] for k, v in self._public_rows()}, result=self)

    def summary(self) -> str:
        """A short text table (released values and public parameters)."""
        return summary_text("PAK threshold [PAK19] §IV-C", self._public_rows(), result=self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdAnalysis:
    """What the threshold release computed from the data: **private, never publish it**.

    For audits, planning and experiments only (``pak_threshold(..., analysis=True)``); the CLI,
    the report and the privacy record never write it.
    """

    calibration: ThresholdCalibration
    """τ', x̂_λp, SS, the smooth bound S and the noise scale S/a (all data-dependent)."""
    tau_max: float | None = None
    """r·τ_max of Eq. 13 for the given β_rt (exceeded with probability ≤ β_rt), or None."""

    @property
    def scale(self) -> float:
        """Noise multiplier S/a, S = max(κ·SS, F) + γ (data-dependent)."""
        return self.calibration.scale


def _check_threshold_range(
    bound: float, epsilon: float, delta: float, beta_lt: float, noise: str, owner: str
) -> None:
    """Refuse, before any work, a B and ε whose threshold noise or lattice leave exact doubles.

    Uses the public bounds of :func:`pak_threshold_calibration`: scale ≤ (κ + 1)·B/a, released
    magnitude ≤ B·(1 + (κ + 1)(G⁻¹(1 − β_lt) + 64)/a), lattice γ ≥ B·2⁻²⁴.
    """
    names = "'bound' and 'epsilon'"
    try:
        a, b = smoothing_parameters(epsilon, delta, noise)
        kappa = pak_kappa(a=a, b=b, beta_lt=beta_lt, noise=noise)
        offset = noise_quantile(1.0 - beta_lt, noise)
        scale = (kappa + 1.0) * bound / a
        magnitude = bound * (1.0 + (kappa + 1.0) * (offset + _TAIL_UNITS) / a)
    except OverflowError:
        raise ParameterError(
            f"The 'epsilon' parameter of {owner} is too large for the smooth-sensitivity "
            f"calibration ([NRS07] constants overflow). Got {epsilon!r}; use a smaller epsilon."
        ) from None
    check_noise_range(
        owner,
        names,
        noise_scale=scale,
        released_magnitude=magnitude,
        lattice_spacing=math.ldexp(bound, -LATTICE_BITS),
    )


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
    ledger: BudgetLedger | None = None,
    analysis: bool = False,
) -> ThresholdRelease | tuple[ThresholdRelease, ThresholdAnalysis]:
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
        With ``analysis=True`` only: also compute r·τ_max of Eq. 13 (data-dependent).
    seed
        None (OS secure source, for release), or an int / bit source (tests only).
    ledger
        Optional :class:`~mechanisms.BudgetLedger`, charged (ε, δ) (event-level unit) after
        every argument is validated and before any draw.
    analysis
        Also return a :class:`ThresholdAnalysis` (the noise scale S/a, x̂_λp, SS, τ_max):
        private values for audits and experiments, never to be published.

    Returns
    -------
    ThresholdRelease
        Or ``(ThresholdRelease, ThresholdAnalysis)`` when ``analysis=True``.

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
    ×r and clipping are post-processing. The noise scale and τ_max are data-dependent: they
    are only in the analysis object; ``threshold``/``unclipped`` are the release.

    Examples
    --------
    >>> rel = pak_threshold([1.0] * 400, bound=10.0, epsilon=1.0, delta=1e-6, lam=0.9,
    ...                     p=0.01, beta_lt=0.01, seed=1)
    >>> 0.0 <= rel.threshold <= 10.0, rel.rank
    (True, 398)
    """
    owner = "pak_threshold"
    clip = check_bool(clip, "clip", owner)
    analysis = check_bool(analysis, "analysis", owner)
    bits = check_seed(seed, owner)
    ledger = check_ledger(ledger, owner)
    if beta_rt is not None:
        _check_beta_lt(beta_rt, "beta_rt", owner)
        if not analysis:
            raise ParameterError(
                f"The 'beta_rt' parameter of {owner} needs analysis=True: τ_max of Eq. 13 is "
                "computed from the data and only goes into the analysis object. Got "
                f"beta_rt={beta_rt!r} with analysis=False."
            )
    bnd = check_positive(bound, "bound", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_fraction(delta, "delta", owner)
    lt = _check_beta_lt(beta_lt, "beta_lt", owner)
    kind = _check_noise(noise, owner)
    _check_r(r, owner)
    _check_threshold_range(bnd, eps, dlt, lt, kind, owner)
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
    release = _release_threshold(
        cal, bits, clip=clip, ledger=ledger, owner=owner, seeded=seed is not None
    )
    if not analysis:
        return release
    return release, threshold_analysis(cal, beta_rt)


def threshold_analysis(cal: ThresholdCalibration, beta_rt: float | None) -> ThresholdAnalysis:
    """The private analysis of a calibration: its scale and, for β_rt, r·τ_max (Eq. 13)."""
    tau_max = None
    if beta_rt is not None:
        rt = noise_quantile(1.0 - beta_rt, cal.noise)
        tau_max = cal.r * (cal.quantile + cal.scale * (cal.offset + rt))  # [PAK19 Eq. 13]
    return ThresholdAnalysis(calibration=cal, tau_max=tau_max)


def _release_threshold(
    cal: ThresholdCalibration,
    bits: BitSource,
    *,
    clip: bool,
    ledger: BudgetLedger | None = None,
    owner: str = "pak_threshold",
    seeded: bool = False,
) -> ThresholdRelease:
    """Charge ``ledger`` (if any), then draw the noise for a validated calibration (internal;
    takes ``bits``)."""
    guarantee = PrivacyGuarantee(
        unit=EventLevel(),
        budget=Budget(cal.epsilon, cal.delta),
        proof="[NRS07] §2 smooth sensitivity with admissible noise; [PAK19] Eqs. 6-12",
    )
    charge_ledger(ledger, guarantee.budget, owner, guarantee.unit)
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
    return ThresholdRelease(
        threshold=threshold,
        unclipped=unclipped,
        rank=cal.rank,
        time_lag=cal.time_lag,
        kappa=cal.kappa,
        a=cal.a,
        b=cal.b,
        granularity=cal.granularity,
        noise=cal.noise,
        r=cal.r,
        clipped=clip,
        bound=cal.bound,
        guarantee=guarantee,
        seeded=seeded,
    )
