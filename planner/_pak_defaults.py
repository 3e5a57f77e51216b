"""Mechanism 1's local parameters (r, λ, p, ε₁/ε, β_lt) from public inputs only (issue 14 item 3).

:func:`plan_pak` minimises [PAK19] Eq. 16 on the prefix itself: an analysis, not a private
choice (§VI-B). Here the same objective and the same solver (scipy TNC from the fixed grid of
:func:`solve_pak`) run on a *public model prefix* instead of the data: the m quantiles of the
light-tailed model of [PAK19] §V-B (Definition 12 with equality), an exponential tail
Pr[X > x] = p_max^{x/x_p} from 0 on, i.e. X ~ Exp(mean μ) with x_p = μ·ln(1/p_max). The model
prefix is yᵢ = −μ·ln(1 − i/(m + 1)), i = 1..m (its own quantiles, so its x̂_λp and SS_b are
those of an ideal sample), clipped to B.

Why the choice is public and why μ matters little: under the model every term of Eq. 16 and
of its mean-square form scales with μ (x̂_λp = μ·ln(1/(λp)), the gaps near the quantile, τ_max
of Eq. 13, the noise, the clipping loss n·μ·e^{−τ/μ}) as long as the clip of τ at B does not
bind and the smooth sensitivity's pairs reaching B are damped (e^{−b·λpm}·B small against the
gaps; with few values above the quantile, λpm·b ≲ 3, they are not and B matters, as it does
for the data). So the minimiser depends on the public inputs — n, m, B, ε, δ, β, p_max, the
threshold noise and the suffix counter's exact variance (modelling choice 9 of
:mod:`._objective`) — and hardly on the data's scale. We place the model well inside the bound,
μ = B/(4·ln(m + 1)) (its largest value is B/4, so r·τ ≤ 3B/4 < B on most of the r grid), the
regime where a threshold is worth using; a test checks that μ/8 gives the same Eq. 16 setting.
Whether the threshold pays at all depends on the data's scale (x_p/B), which the model cannot
know: that stays the analyst's choice (``threshold=True`` is Mechanism 1, ``False`` plain
counting), and the returned parameters are the best threshold setting.

Two objectives (``objective=``):

* ``"eq16"``: Eq. 16 itself, the 98% bound (every parameter from :func:`plan_pak`'s optimum on
  the model prefix);
* ``"mse"`` (default): λ, p and β_lt from that optimum (so Eq. 5's guarantee on the quantile
  and the β split stay), then r and ε₁/ε on a fixed grid (r = 1.00, 1.02, …, 3.00; ε₁/ε =
  0.30, 0.31, …, 0.99) minimising Eq. 16 *in mean square* under the model:
  E[(ĉ(σ, n) − c(σ, n))²] = E_Z[2τ²/ε₂² + τ²·v + b(τ)² + s²(τ)] with τ = min(max(r(τ' +
  S·Z), 0), B) the released threshold (τ', S and Z from :func:`mechanisms.pak_threshold_calibration`
  on the model prefix, Z ~ Laplace(1) or N(0, 1) integrated by 400 quantiles *given* Z >
  G⁻¹(β_lt), i.e. on the event τ ≥ r·x̂_λp that Eq. 16 also conditions on (probability 1 −
  β_lt); outside it a τ below x̂_λp clips values the model cannot price, a rare event Eq. 16
  leaves to β_lt; its worst part, r·τ ≤ 0, is run at B by ``pak_release``'s guard since
  issue 23, which this conditioning never meets, so the defaults did not change), 2τ²/ε₂² the
  Laplace release of c(σ, m), τ²·v the suffix counter's exact variance at step n − m
  (:func:`mechanisms.counter_variance` at bound 1), and b, s² the mean and variance of the
  clipping loss Σᵢ (σ(i) − τ)⁺ over the n values under the model (E(X − τ)⁺ = μe^{−τ/μ},
  E((X − τ)⁺)² = 2μ²e^{−τ/μ}). Why: Eq. 16 bounds the noise and the outlier terms at their
  98% quantiles, τ at τ_max (Eq. 13); minimising that bound buys threshold accuracy with ε₁
  (τ_max shrinks) although the released τ hardly moves, and starves c(σ, m) of ε₂. With a
  low-variance counter the Laplace term of c(σ, m) is then a large part of the error: on the
  bundled household minutes at ε = 1 the Eq. 16 choice (ε₁/ε ≈ 0.95) errs more than Table I's
  0.85 (``docs/results/pak_defaults.md``). The mean-square objective is what the realised
  errors measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms import ParameterError, counter_end_variance, pak_threshold_calibration
from mechanisms.core._validation import check_choice, check_integer, check_positive
from mechanisms.pak import mechanism_threshold

from ._pak_plan import PakPlan, _check_public, plan_pak

__all__ = [
    "OBJECTIVES",
    "PAPER_DEFAULTS",
    "PakDefaults",
    "R_GRID",
    "SHARE_GRID",
    "model_prefix",
    "pak_defaults",
    "pak_mean_square_error",
]

#: [PAK19] Table I / §VI-B choices, the defaults of :func:`mechanisms.pak_release`.
PAPER_DEFAULTS = {"r": 1.5, "lam": 0.85, "eps1_share": 0.85, "p": 0.005, "beta_lt": 0.004}
#: Objectives of :func:`pak_defaults` (module notes).
OBJECTIVES = ("mse", "eq16")
#: The documented grid of the ``"mse"`` objective.
R_GRID = np.round(np.arange(1.0, 3.0 + 1e-9, 0.02), 2)
SHARE_GRID = np.round(np.arange(0.30, 0.99 + 1e-9, 0.01), 2)
_QUADRATURE = 400
#: The threshold's verdict is taken only where the model's θ is B at least this often (module
#: notes, "When the threshold does not pay").
AT_BOUND = 0.99
#: (under, over): the clipping-loss term of a mean square predicted from the prefix (the one
#: term modelled) is taken to be between predicted/over and predicted·under where a plan
#: departs from Table I's setting (:func:`planner.plan_pak_mse`'s notes, "Robust against
#: Table I"). Measured: predicted/actual 0.93–4.7 over the 5 streams × 8 counters of
#: docs/results/planner_counters.md, plan and Table I settings (under-predicted by ≤ 1.075,
#: over-predicted by ≤ 4.7), rounded out.
LOSS_MODEL_FACTOR = (1.25, 5.0)
#: The public model's clipping loss (its scale is a guess, not the data's) is trusted to a
#: factor 5 when the verdict drops the threshold (module notes).
PUBLIC_LOSS_FACTOR = 5.0


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
    """μ of the public model prefix (B/(4 ln(m + 1)))."""
    model_plan: PakPlan
    """The plan on the model prefix (its ``terms`` hold Eq. 16 at the chosen setting, in the
    model's units: a prediction for data that follow the model, not for the data)."""
    noise: str
    """Threshold noise."""
    objective: str = "mse"
    """``"mse"`` or ``"eq16"`` (module notes)."""
    model_rmse: float = float("nan")
    """√E[error²] at step n predicted under the model (in the data's units for data that
    follow the model; NaN for ``"eq16"``)."""
    private: bool = True
    """Always True: no data were read."""
    threshold: bool = True
    """False: the threshold does not pay on public grounds (module notes, "When the threshold
    does not pay"): the release is the plain counter with bound B (ε₁ = 0), and
    ``release_parameters()`` says so. r, λ, p, ε₁/ε, β_lt stay the best threshold setting
    (``threshold_parameters()``)."""
    at_bound: float = float("nan")
    """Pr[θ = B] under the model (τ's whole guarded law at the chosen setting)."""
    threshold_rmse: float = float("nan")
    """√E[error²] of the chosen threshold setting under the model over τ's *whole* guarded law
    (``model_rmse`` conditions on Eq. 16's event)."""
    plain_rmse: float = float("nan")
    """√ of the plain counter's exact variance at step n with bound B (no model)."""

    def threshold_parameters(self) -> dict:
        """Keyword arguments of :func:`mechanisms.pak_release` for the threshold setting (with
        ``threshold=True``), whether or not it pays."""
        return {
            "eps1_share": self.eps1_share,
            "lam": self.lam,
            "p": self.p,
            "beta_lt": self.beta_lt,
            "r": self.r,
            "noise": self.noise,
            "counter": self.counter,
        }

    def release_parameters(self) -> dict:
        """Keyword arguments of :func:`mechanisms.pak_release`: the threshold setting, or
        ``threshold=False`` (the plain counter) where it does not pay (``threshold``)."""
        if not self.threshold:
            return {"threshold": False, "noise": self.noise, "counter": self.counter}
        return self.threshold_parameters()


def model_prefix(m: int, *, bound: float, mean: float) -> np.ndarray:
    """The m quantiles yᵢ = −μ·ln(1 − i/(m + 1)) of Exp(μ), clipped to [0, B] (public)."""
    u = np.arange(1, m + 1, dtype=np.float64) / (m + 1)
    return np.minimum(-mean * np.log1p(-u), bound)


def _noise_quantiles(noise: str, beta_lt: float = 0.0) -> np.ndarray:
    """Quantiles of Z given Z > G⁻¹(β_lt) (the event τ' + S·Z ≥ x̂_λp of Eq. 11)."""
    u = beta_lt + (1.0 - beta_lt) * (np.arange(_QUADRATURE) + 0.5) / _QUADRATURE
    return _quantile(noise, u)


def _quantile(noise: str, u: np.ndarray) -> np.ndarray:
    if noise == "laplace":
        return np.where(u < 0.5, np.log(2.0 * u), -np.log(2.0 * (1.0 - u)))
    from scipy import special

    return special.ndtri(u)


#: Probability of the lowest bin of :func:`_full_law`'s quadrature, [0, TAIL_FLOOR] of τ's law
#: (evaluated at its midpoint, where τ is clipped to 0 for any setting the grids reach): the
#: whole law is integrated, this only sets where the geometric refinement of the tail stops.
TAIL_FLOOR = 1e-15


def _full_law() -> tuple[np.ndarray, np.ndarray]:
    """(u, weight) of a quadrature over τ's *whole* law: the ``_QUADRATURE`` midpoints of
    [0, 1] with the two end bins split geometrically down to ``TAIL_FLOOR`` and a last bin
    [0, TAIL_FLOOR] (the low tail of τ, where a threshold near 0 clips everything, is rare and
    decisive for the mean square: a τ ≈ 0 with probability q adds q·(Σσ)² to it); the
    weights sum to 1."""
    step = 1.0 / _QUADRATURE
    low = np.geomspace(TAIL_FLOOR, step, 41)[:-1]
    edges = np.concatenate(([0.0], low, np.arange(1, _QUADRATURE) * step))
    edges = np.unique(np.concatenate((edges, 1.0 - edges[::-1])))
    weight = np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    return mid, weight / weight.sum()


def _cdf(noise: str, z: np.ndarray) -> np.ndarray:
    if noise == "laplace":
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.abs(z)))
    from scipy import special

    return special.ndtr(z)


def _threshold_law(cal, rs: np.ndarray, bound: float, noise: str, guard: bool):
    """(θ, weight), one row per r: the clipping bound Mechanism 1 uses over τ's whole law.

    θ is constant outside r·τ ∈ (0, B): B above (the clip), and below B (``guard``) or B·2⁻³⁰.
    Those two parts are point masses with their exact probabilities G(−τ'/S) and
    1 − G((B/r − τ')/S); :func:`_full_law`'s nodes (geometrically refined at both ends) are put
    on the part in between, where θ moves. A fixed grid over the whole law would give that part,
    often narrow (S ≫ B: probability ~β_lt·B/S near u = β_lt), one bin or none.
    """
    mid, w = _full_law()
    u0 = _cdf(noise, np.full(rs.shape, -cal.tau_prime / cal.scale))  # r·τ ≤ 0
    u1 = _cdf(noise, (bound / rs - cal.tau_prime) / cal.scale)  # r·τ < B
    span = np.maximum(u1 - u0, 0.0)
    u = np.clip(u0 + span * mid[None, :], 1e-300, 1.0 - 2.0**-53)
    inner = mechanism_threshold(rs * (cal.tau_prime + cal.scale * _quantile(noise, u)), bound,
                                guard=guard)  # fmt: skip
    low = bound if guard else bound * 2.0**-30
    theta = np.concatenate((inner, np.full(rs.shape, low), np.full(rs.shape, bound)), axis=1)
    weight = np.concatenate((span * w[None, :], u0, 1.0 - u1), axis=1)
    return theta, weight


def pak_mean_square_error(
    prefix: object,
    *,
    n: int,
    bound: float,
    epsilon: float,
    delta: float,
    r: object,
    eps1_share: float,
    lam: float,
    p: float,
    beta_lt: float,
    counter: str,
    loss: object,
    noise: str = "laplace",
    condition: bool = True,
    counter_variance: float | None = None,
    prefix_noise: bool = True,
    guard: bool = True,
) -> np.ndarray:
    """E[(ĉ(σ, n) − c(σ, n))²] of Mechanism 1 for each r (Eq. 16 in mean square, module notes).

    ``prefix`` (the m values the threshold reads: the model prefix for a public choice, the
    data for an analysis), ``loss(τ)`` → (mean, variance) of the clipping loss Σᵢ(σ(i) − τ)⁺
    over the n values for an array of τ. ``r`` may be an array (one result per r). The
    expectation is over τ's law on Eq. 16's event τ ≥ r·x̂_λp (probability 1 − β_lt), or with
    ``condition=False`` over its whole law (the mean square of the release: the rare τ near 0
    that clips everything weighs by its probability; :func:`planner.plan_pak_mse`). τ is
    the clipping bound :func:`mechanisms.pak_release` uses,
    :func:`mechanisms.pak.mechanism_threshold` (``guard``: a released r·τ ≤ 0 becomes B, as
    ``pak_release``'s default; False: floored at B·2⁻³⁰, the paper's protocol). Reads
    ``prefix``: private when it is the data.

    The same form serves a range sum of the suffix (:func:`planner.plan_pak_mse` with
    ``range_length``): ``counter_variance`` is then the suffix counter's noise variance at
    bound 1 of the queried quantity (default: at step n − m, c(σ, n)'s), ``prefix_noise=False``
    drops the Laplace noise of c(σ, m), which cancels in ĉ(a + L) − ĉ(a) for a ≥ m, and
    ``loss`` is that of the range's L values.
    """
    m = int(np.asarray(prefix).size)
    cal = pak_threshold_calibration(
        prefix, bound=bound, epsilon=eps1_share * epsilon, delta=delta, lam=lam, p=p,
        beta_lt=beta_lt, noise=noise,
    )  # fmt: skip
    if counter_variance is None:
        v = counter_end_variance(counter, n - m, epsilon=epsilon, bound=1.0, delta=delta)
    else:
        v = float(counter_variance)
    rs = np.atleast_1d(np.asarray(r, dtype=np.float64))[:, None]
    if condition:
        z = _noise_quantiles(noise, beta_lt)  # on Eq. 16's event: the threshold is ≥ x̂_λp
        weight = np.full(z.size, 1.0 / z.size)
        tau = mechanism_threshold(rs * (cal.tau_prime + cal.scale * z)[None, :], bound,
                                  guard=guard)  # fmt: skip
    else:  # the whole law, nodes where θ moves (_threshold_law)
        tau, weight = _threshold_law(cal, rs, bound, noise, guard)
    eps2 = (1.0 - eps1_share) * epsilon
    mean, var = loss(tau)
    lap = 2.0 * (tau / eps2) ** 2 if prefix_noise else 0.0  # c(σ, m)'s Laplace, at ε₂
    terms = lap + tau**2 * v + mean**2 + var
    if condition:  # the same sum, in the same order, as before the whole-law nodes
        return terms @ weight
    return np.sum(terms * weight, axis=1)


def _zero_loss(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    zero = np.zeros(np.shape(tau))
    return zero, zero


def _model_loss(n: int, mean: float):
    def loss(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = np.exp(-tau / mean)
        return n * mean * e, n * mean**2 * (2.0 * e - e * e)

    return loss


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
    objective: str = "mse",
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
    objective
        ``"mse"`` (default): λ, p, β_lt from Eq. 16, then r and ε₁/ε minimising its mean-square
        form on the documented grid; ``"eq16"``: everything from Eq. 16 (module notes).
    counter
        The suffix counter (``"auto"``: the one :func:`mechanisms.pak_release` uses by
        default); Eq. 16 uses its exact variance at step n − m (also for the open counters
        ``"unbounded"`` / ``"unbounded_blt"``, whose variance has a closed form with no n).
        None: the paper's tree bound and BT.

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
    check_choice(objective, "objective", owner, OBJECTIVES)
    mean = check_positive(bound / (4.0 * math.log(m + 1.0)), "bound", owner)
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
            objective=objective,
        )  # fmt: skip
    chosen = {
        "r": terms.r,
        "lam": terms.lam,
        "p": terms.p,
        "eps1_share": terms.eps1_share,
        "beta_lt": terms.beta_shares["lt"] * beta,
    }
    counter_name = plan.counter or "binary_tree"
    rmse = math.nan
    verdict: dict = {}
    if objective == "mse":
        prefix, loss = model_prefix(m, bound=bound, mean=mean), _model_loss(n, mean)
        best = (math.inf, chosen["r"], chosen["eps1_share"])
        for share in SHARE_GRID:
            try:
                mse = pak_mean_square_error(
                    prefix, n=n, bound=bound, epsilon=epsilon, delta=delta, r=R_GRID,
                    eps1_share=float(share), lam=chosen["lam"], p=chosen["p"],
                    beta_lt=chosen["beta_lt"], counter=counter_name, loss=loss, noise=noise,
                )  # fmt: skip
            except ParameterError:  # κ ≤ 0 at this ε₁ (Eq. 11): the share is not admissible
                continue
            i = int(np.argmin(mse))
            if mse[i] < best[0]:
                best = (float(mse[i]), float(R_GRID[i]), float(share))
        if math.isfinite(best[0]):
            rmse, chosen["r"], chosen["eps1_share"] = math.sqrt(best[0]), best[1], best[2]
            verdict = _threshold_verdict(prefix, loss, n, bound, epsilon, delta, chosen,
                                         counter_name, noise)  # fmt: skip
    return PakDefaults(
        **chosen,
        counter=counter_name,
        model_mean=mean,
        model_plan=plan,
        noise=noise,
        objective=objective,
        model_rmse=rmse,
        **verdict,
    )


def _threshold_verdict(prefix, loss, n, bound, epsilon, delta, chosen, counter, noise) -> dict:
    """Whether the threshold pays, on public grounds (module notes): its mean square over τ's
    whole guarded law under the model against the plain counter's exact one, decided only
    where the model's threshold is B with probability ≥ ``AT_BOUND`` (then the comparison
    hardly depends on the model's scale: θ = B whatever the data's quantile)."""
    rs = np.array([[chosen["r"]]])
    cal = pak_threshold_calibration(
        prefix, bound=bound, epsilon=chosen["eps1_share"] * epsilon, delta=delta,
        lam=chosen["lam"], p=chosen["p"], beta_lt=chosen["beta_lt"], noise=noise,
    )  # fmt: skip
    theta, weight = _threshold_law(cal, rs, bound, noise, True)
    at_bound = float(weight[0][theta[0] >= bound].sum())
    common = dict(n=n, bound=bound, epsilon=epsilon, delta=delta, r=rs[0], counter=counter,
                  noise=noise, condition=False,
                  **{k: chosen[k] for k in ("eps1_share", "lam", "p", "beta_lt")})  # fmt: skip
    whole = float(pak_mean_square_error(prefix, loss=loss, **common)[0])
    exact = float(pak_mean_square_error(prefix, loss=_zero_loss, **common)[0])
    plain = counter_end_variance(counter, n, epsilon=epsilon, bound=bound, delta=delta)
    # the model's clipping loss (where θ < B) trusted to a factor PUBLIC_LOSS_FACTOR
    robust = exact + PUBLIC_LOSS_FACTOR * max(whole - exact, 0.0)
    pays = not (at_bound >= AT_BOUND and robust >= plain)
    return {
        "threshold": pays,
        "at_bound": at_bound,
        "threshold_rmse": math.sqrt(whole),
        "plain_rmse": math.sqrt(plain),
    }
