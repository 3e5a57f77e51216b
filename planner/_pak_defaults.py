"""Mechanism 1's local parameters (r, λ, p, ε₁/ε, β_lt) from public inputs only (issue 14 item 3).

:func:`plan_pak` minimises [PAK19] Eq. 16 on the prefix itself: an analysis, not a private
choice (§VI-B). Here the same objective and the same solver (scipy TNC from the fixed grid of
:func:`solve_pak`) run on a *public model prefix* instead of the data: the m quantiles of the
light-tailed model of [PAK19] §V-B (Definition 12 with equality), an exponential tail
Pr[X > x] = p_max^{x/x_p} from 0 on, i.e. X ~ Exp(mean μ) with x_p = μ·ln(1/p_max). The model
prefix is yᵢ = −μ·ln(1 − i/(m + 1)), i = 1..m (its own quantiles, so its x̂_λp and SS_b are
those of an ideal sample), clipped to B.

Why the choice is public and why μ hardly matters: under the model every term of Eq. 16 scales
with μ (x̂_λp = μ·ln(1/(λp)), the gaps near the quantile and therefore SS_b, τ_max of Eq. 13,
the outlier term), except the e^{−bk}·(B − yᵢ) pairs of the smooth sensitivity, which are
negligible once λpm·b ≫ 1. So the minimiser over (r, λ, p, ε₁/ε, β split) depends on the public
inputs only — n, m, B, ε, δ, β, p_max, the threshold noise and the suffix counter's exact
variance (Eq. 16 with modelling choice 9 of :mod:`._objective`) — and not on the data's scale.
We take μ = B/ln n (the heaviest exponential tail with at most one value above B expected over
the stream); a test checks that μ/8 gives the same parameters. Whether the threshold pays at
all *does* depend on the scale (the model cannot know x_p/B): that stays the analyst's choice
(``threshold=True`` is Mechanism 1, ``False`` plain counting), and the returned parameters are
the best threshold setting either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms.core._validation import check_choice, check_integer, check_positive

from ._pak_plan import PakPlan, _check_public, plan_pak

__all__ = ["PAPER_DEFAULTS", "PakDefaults", "model_prefix", "pak_defaults"]

#: [PAK19] Table I / §VI-B choices, the defaults of :func:`mechanisms.pak_release`.
PAPER_DEFAULTS = {"r": 1.5, "lam": 0.85, "eps1_share": 0.85, "p": 0.005, "beta_lt": 0.004}


@dataclass(frozen=True, slots=True, kw_only=True)
class PakDefaults:
    """Mechanism 1's local parameters chosen from public inputs (private, publishable)."""

    r: float
    """Multiplier r ≥ 1 of the threshold (Eq. 15)."""
    lam: float
    """λ: the threshold estimates the λp-quantile (the quantile shrinkage)."""
    p: float
    """Tail probability p ≤ p_max."""
    eps1_share: float
    """ε₁/ε, the share of ε spent on the threshold (the ε split)."""
    beta_lt: float
    """β_lt, Pr[τ < x̂_λp] (absolute)."""
    counter: str
    """The suffix counter whose exact variance Eq. 16 used (resolved from ``"auto"``)."""
    model_mean: float
    """μ of the public model prefix (B/ln n)."""
    model_plan: PakPlan
    """The plan on the model prefix (its ``terms`` hold Eq. 16 at the chosen setting, in the
    model's units: a prediction for data that follow the model, not for the data)."""
    noise: str
    """Threshold noise."""
    private: bool = True
    """Always True: no data were read."""

    def release_parameters(self) -> dict:
        """Keyword arguments of :func:`mechanisms.pak_release` (with ``threshold=True``)."""
        return {
            "eps1_share": self.eps1_share,
            "lam": self.lam,
            "p": self.p,
            "beta_lt": self.beta_lt,
            "r": self.r,
            "noise": self.noise,
            "counter": self.counter,
        }


def model_prefix(m: int, *, bound: float, mean: float) -> np.ndarray:
    """The m quantiles yᵢ = −μ·ln(1 − i/(m + 1)) of Exp(μ), clipped to [0, B] (public)."""
    u = np.arange(1, m + 1, dtype=np.float64) / (m + 1)
    return np.minimum(-mean * np.log1p(-u), bound)


def pak_defaults(
    *,
    n: int,
    bound: float,
    epsilon: float,
    delta: float,
    time_lag: int,
    beta: float = 0.02,
    p_max: float = 0.005,
    noise: str = "laplace",
    counter: str | None = "auto",
    method: str = "TNC",
) -> PakDefaults:
    """Choose r, λ, p, ε₁/ε and β_lt by minimising [PAK19] Eq. 16 on a public model prefix.

    Parameters
    ----------
    n, bound, epsilon, delta
        Stream length, public bound B, Mechanism 1's total (ε, δ).
    time_lag
        m (e.g. :func:`time_lag_heuristic`'s), 2 ≤ m < n.
    beta, p_max, noise, method
        As for :func:`plan_pak`.
    counter
        The suffix counter (``"auto"``: the one :func:`mechanisms.pak_release` uses by
        default); Eq. 16 uses its exact variance. None: the paper's tree bound and BT.

    Returns
    -------
    PakDefaults
        ``release_parameters()`` feeds :func:`mechanisms.pak_release`.

    Notes
    -----
    The model and why the choice does not depend on the data's scale are in the module notes.
    Deterministic (fixed solver starts). *Privacy*: none spent; only public inputs are read,
    so the parameters may be published and used for a release.

    Examples
    --------
    >>> d = pak_defaults(n=500_000, bound=36.0, epsilon=1.0, delta=2.0**-20, time_lag=82_423)
    >>> 1.0 <= d.r <= 2.0 and 0.5 < d.lam <= 1.0 and 0.5 < d.eps1_share < 1.0
    True
    """
    owner = "pak_defaults"
    n, bound, epsilon, delta, beta, p_max = _check_public(
        owner, n, bound, epsilon, delta, beta, p_max
    )
    m = check_integer(time_lag, "time_lag", owner, minimum=2, maximum=n - 1)
    check_choice(noise, "noise", owner, ("laplace", "gaussian"))
    mean = check_positive(bound / math.log(n), "bound", owner)
    plan = plan_pak(
        model_prefix(m, bound=bound, mean=mean), n=n, bound=bound, epsilon=epsilon,
        delta=delta, beta=beta, p_max=p_max, noise=noise, method=method, counter=counter,
    )  # fmt: skip
    terms = plan.terms
    if terms is None:  # m·p_max < 2 or no finite setting: the paper's choices
        return PakDefaults(
            **{k: PAPER_DEFAULTS[k] for k in ("r", "lam", "eps1_share")},
            p=min(PAPER_DEFAULTS["p"], p_max),
            beta_lt=min(PAPER_DEFAULTS["beta_lt"], 0.2 * beta),
            counter=plan.counter or "binary_tree", model_mean=mean, model_plan=plan, noise=noise,
        )  # fmt: skip
    return PakDefaults(
        r=terms.r,
        lam=terms.lam,
        p=terms.p,
        eps1_share=terms.eps1_share,
        beta_lt=terms.beta_shares["lt"] * beta,
        counter=plan.counter or "binary_tree",
        model_mean=mean,
        model_plan=plan,
        noise=noise,
    )
