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

from dataclasses import dataclass

import numpy as np

from ..core._budget import Budget
from ..core._errors import ParameterError
from ..core._noise import GaussianNoise, LaplaceNoise
from ..core._random import BitSource, bit_source
from ..core._results import summary_text, table_frame
from ..core._units import EventLevel, PrivacyGuarantee
from ._calibration import (
    ThresholdCalibration,
    _check_beta_lt,
    pak_kappa,
    pak_tau_max,
    pak_threshold_calibration,
)
from ._quantile import (
    NOISE_KINDS,
    noise_quantile,
    smoothing_parameters,
)

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
