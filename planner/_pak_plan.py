"""Choosing Mechanism 1's local parameters by minimising [PAK19] Eq. 16 (§VI-A).

This is the *analysis* path: the optimum depends on the prefix itself, so the plan is not a
private release (§VI-B). Use :func:`planner.time_lag_heuristic` for the private path.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from mechanisms import ParameterError, SolverError
from mechanisms.core._renamed import renamed_attribute
from mechanisms.core._results import summary_text, table_frame
from mechanisms.core._validation import (
    check_choice,
    check_fraction,
    check_integer,
    check_positive,
    check_stream,
)

from ._objective import BETA_KEYS, ErrorTerms, PakObjective

__all__ = ["METHODS", "PakPlan", "plan_pak", "solve_pak"]

#: scipy methods accepted by :func:`plan_pak` (all take bounds and our analytic gradient).
METHODS = ("TNC", "L-BFGS-B", "SLSQP")
#: The fixed multi-start grid: r, ε₁/ε and the β split (absolute shares, lap last-but-two).
_START_R = (1.2, 2.0)
_START_SHARE = (0.7, 0.9)
_START_SPLITS = (
    {"qt": 0.2, "lt": 0.2, "lap": 0.2, "out": 0.2, "rt": 0.2},
    {"qt": 0.125, "lt": 0.125, "lap": 0.5, "out": 0.125, "rt": 0.125},
)
_MAXFUN = 2000
ANALYSIS_NOTE = "analysis only: depends on the data (not a private choice, see [PAK19] §VI-B)"


@dataclass(frozen=True, slots=True, kw_only=True)
class PakPlan:
    """Parameters of Mechanism 1 chosen by minimising Eq. 16, with the error they predict."""

    r: float
    """Multiplier r ≥ 1 of the threshold (Eq. 15); 1 when the threshold does not pay."""
    lam: float
    """λ ∈ (0, 1]: the threshold estimates the λp-quantile; 1 when it does not pay."""
    p: float
    """Tail probability p ≤ p_max."""
    eps1_share: float
    """ε₁/ε, the share of ε spent on the threshold; 0 when it does not pay."""
    beta_shares: dict = field(hash=False)
    """β_x/β for x in ``qt``, ``lt``, ``lap``, ``out``, ``rt`` (sum 1)."""
    error_bound: float
    """Predicted error bound at step n, w.p. ≥ 1 − β: the paper's α (Eq. 16, or Eq. 3 when BT
    is better)."""
    baseline_error_bound: float
    """Error bound of plain BT, Eq. 3 with constant (B/ε)√(8 ln 1/β)(log₂ n)^1.5 (α_BT)."""
    improvement_factor: float
    """IF = baseline_error_bound / error_bound (1 when the threshold does not pay)."""
    use_threshold: bool
    """False when no setting beats BT: then release with plain BT (Table I, m = 40,000)."""
    time_lag: int
    """m, the prefix length the plan was computed from."""
    n: int
    """Stream length n."""
    bound: float
    """Public bound B."""
    epsilon: float
    """Total ε of Mechanism 1."""
    delta: float
    """δ of the threshold."""
    beta: float
    """Overall failure probability β."""
    p_max: float
    """Largest p allowed."""
    noise: str
    """Noise of the threshold (``"laplace"`` or ``"gaussian"``)."""
    terms: ErrorTerms | None
    """Eq. 16's ingredients at the best threshold setting (even if BT wins); None if none."""
    method: str
    """scipy method used."""
    n_starts: int
    """Number of starting points of the fixed grid."""
    nfev: int
    """Objective evaluations over all starts."""
    counter: str | None = None
    """The continual counter the plan assumes for the suffix (None: the paper's tree bound
    L³; a name: that counter's exact variance, modelling choice 9 of :mod:`._objective`)."""
    private: bool = False
    """Always False: the plan depends on the data and is not a private release."""
    note: str = ANALYSIS_NOTE
    """Why the plan is not private."""

    # old names (issue 12: α is the (w, α) unit's word), warn and point to the new ones
    alpha = renamed_attribute("alpha", "error_bound", "PakPlan")
    baseline_alpha = renamed_attribute("baseline_alpha", "baseline_error_bound", "PakPlan")

    @property
    def beta_values(self) -> dict:
        """The absolute failure probabilities β_x = share·β."""
        return {k: v * self.beta for k, v in self.beta_shares.items()}

    @property
    def epsilon_threshold(self) -> float:
        """ε₁ = eps1_share·ε."""
        return self.eps1_share * self.epsilon

    def release_parameters(self) -> dict:
        """Keyword arguments for :func:`mechanisms.pak_release` that realise this plan.

        Use as ``pak_release(values, bound=B, epsilon=ε, delta=δ, time_lag=m,
        **plan.release_parameters())``. With ``use_threshold=False`` it is plain BT.
        """
        # None planned with the paper's tree bound: release with the paper's BT
        extra = {"counter": "binary_tree" if self.counter is None else self.counter}
        if not self.use_threshold:
            return {"threshold": False, "noise": self.noise, **extra}
        return {
            "eps1_share": self.eps1_share,
            "lam": self.lam,
            "p": self.p,
            "beta_lt": self.beta_shares["lt"] * self.beta,
            "r": self.r,
            "noise": self.noise,
            "threshold": True,
            **extra,
        }

    def as_row(self) -> dict:
        """One row of a Table I/II-style table."""
        row = {
            "m": self.time_lag,
            "IF": self.improvement_factor,
            "r": self.r,
            "λ": self.lam,
            "p": self.p,
            "ε₁/ε": self.eps1_share,
        }
        row.update({f"β_{k}/β": self.beta_shares[k] for k in BETA_KEYS})
        row.update(
            {"error_bound": self.error_bound, "baseline_error_bound": self.baseline_error_bound}
        )
        return row

    def to_frame(self):
        """One row: :meth:`as_row` (the columns of a Table I/II row)."""
        return table_frame({k: [v] for k, v in self.as_row().items()})

    def summary(self) -> str:
        """A short text table: the chosen parameters and the errors they predict."""
        rows = [
            ("time lag m / stream length n", f"{self.time_lag:,} / {self.n:,}"),
            ("bound B", self.bound),
            ("epsilon, delta", f"{self.epsilon:g}, {self.delta:g}"),
            ("beta (failure probability)", self.beta),
            ("use the threshold", self.use_threshold),
            ("r, λ, p", f"{self.r:.4g}, {self.lam:.4g}, {self.p:.4g}"),
            ("ε₁/ε", self.eps1_share),
            ("error bound α (Eq. 16)", self.error_bound),
            ("baseline error bound α_BT (Eq. 3)", self.baseline_error_bound),
            ("improvement factor IF", self.improvement_factor),
            ("solver, starts, evaluations", f"{self.method}, {self.n_starts}, {self.nfev}"),
        ]
        return summary_text("PAK plan [PAK19] Eq. 16", rows, result=self)


def _starts(obj: PakObjective) -> list[np.ndarray]:
    p0 = math.exp(obj.bounds[1][1])
    out = []
    for r, share, split in itertools.product(_START_R, _START_SHARE, _START_SPLITS):
        r = min(r, obj.bounds[0][1])
        out.append(obj.encode(r, p0, share, {k: v * obj.beta for k, v in split.items()}))
    return out


def solve_pak(obj: PakObjective, *, method: str = "TNC") -> tuple[np.ndarray, float, int]:
    """Minimise the relaxed Eq. 16 from every point of the fixed grid; return (z, α, nfev).

    Deterministic: fixed starts, no randomness; ties keep the first start. Raises
    :class:`~mechanisms.SolverError` if every start fails to produce a finite value.
    """
    check_choice(method, "method", "plan_pak", METHODS)
    best_z, best_f, nfev = None, math.inf, 0
    big = 1e6 * obj.baseline_error_bound
    for z0 in _starts(obj):
        z0 = np.clip(z0, [lo for lo, _ in obj.bounds], [hi for _, hi in obj.bounds])
        if obj.value(z0) >= big:
            nfev += 1
            continue
        opts = {"maxfun": _MAXFUN} if method == "TNC" else {"maxiter": _MAXFUN}
        res = optimize.minimize(
            obj.value_and_grad, z0, jac=True, method=method, bounds=obj.bounds, options=opts
        )
        nfev += int(res.nfev)
        if res.fun < best_f:
            best_z, best_f = np.asarray(res.x, dtype=np.float64), float(res.fun)
    if best_z is None:
        return np.empty(0), math.inf, nfev
    if not math.isfinite(best_f):  # pragma: no cover - defensive
        raise SolverError("plan_pak found no finite value of Eq. 16.", status="no finite value")
    return best_z, best_f, nfev


def _check_public(owner: str, n, bound, epsilon, delta, beta, p_max) -> tuple:
    n = check_integer(n, "n", owner, minimum=2, maximum=1 << 52)
    bound = check_positive(bound, "bound", owner)
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_fraction(delta, "delta", owner)
    beta = check_fraction(beta, "beta", owner)
    if beta > 0.5:
        raise ParameterError(
            f"The 'beta' parameter of {owner} must be a float in (0, 0.5]. Got {beta!r} "
            "instead. It is the probability that the error exceeds α; use e.g. 0.02."
        )
    p_max = check_fraction(p_max, "p_max", owner)
    return n, bound, epsilon, delta, beta, p_max


def plan_pak(
    prefix: object,
    *,
    n: int,
    bound: float,
    epsilon: float,
    delta: float,
    beta: float,
    p_max: float = 0.005,
    noise: str = "laplace",
    method: str = "TNC",
    counter: str | None = "auto",
) -> PakPlan:
    """Choose r, λ, p, ε₁/ε and the split of β by minimising [PAK19] Eq. 16 on a prefix.

    Parameters
    ----------
    prefix
        The first m values of the stream (m = time lag), each in [0, bound]. **Private data**:
        the returned plan depends on them (see Notes).
    n
        Stream length n > m.
    bound
        Public bound B on every value.
    epsilon
        Total privacy loss ε of Mechanism 1 (ε₁ for the threshold, ε₂ = ε − ε₁ for c(σ, m),
        the whole ε for the BT on the suffix).
    delta
        δ of the threshold, in (0, 1).
    beta
        Overall failure probability β ∈ (0, 0.5], split into β_qt + β_lt + β_Lap + β_out + β_rt.
    p_max
        Largest tail probability the data are assumed light-tailed beyond (§V-B), in (0, 1).
    noise
        Noise of the threshold: ``"laplace"`` (default) or ``"gaussian"``.
    method
        ``"TNC"`` (the paper's, default), ``"L-BFGS-B"`` or ``"SLSQP"``.
    counter
        ``"auto"`` (default: the smallest exact variance at step n − m for this ε, δ, the
        counter :func:`mechanisms.pak_release` uses by default) or a counter name
        (:data:`mechanisms.COUNTERS`): Eq. 16 uses that counter's exact variance, so the plan
        and its improvement factor over the paper's BT follow the counter (modelling choice
        9). None: the paper's tree bound (Eq. 16 as printed, the protocol of Tables I–II).

    Returns
    -------
    PakPlan
        With ``private=False`` and ``note`` saying so. When the best threshold setting does not
        beat plain BT, ``use_threshold`` is False, IF = 1 and the parameters are those of
        Table I's first row (r = λ = 1, p = p_max, ε₁/ε = 0, β_Lap/β = 1); ``terms`` still holds
        the best threshold setting found.

    Raises
    ------
    ParameterError
        for bad public inputs (p_max ≥ 1, β ≥ 1 or > 0.5, m ≥ n, ...).
    DomainError
        if the prefix has NaN/inf or values outside [0, bound] (the message gives counts only).

    Notes
    -----
    The objective and every modelling choice are in :mod:`planner._objective` (which ε the
    threshold uses, the prefix release in the first summand, τ ≤ τ_max of Eq. 13, the
    elimination of Eq. 5's constraint, the smoothing constants of
    :func:`mechanisms.smoothing_parameters` — [NRS07]'s a = ε₁/2, b = ε₁/(2 ln(2/δ)) for
    Laplace — and the constant of Eq. 3). The solver is ``scipy.optimize.minimize`` with
    bounds and the analytic gradient from 8 fixed starting points (a grid over r, ε₁/ε and
    two β splits, p = p_max); the best local optimum is then re-evaluated exactly at the
    integer rank the release uses. Deterministic: same inputs, same plan.

    *Privacy*: none. Optimising on the data is an analysis tool ([PAK19] §VI-B): publishing
    the plan, or running Mechanism 1 with it, leaks information about the prefix beyond
    (ε, δ). For a private choice use :func:`time_lag_heuristic` and the §VI-B defaults.

    See also :func:`planner.plan_pak_mse`: the same parameters, and the choice between the
    threshold and the plain counter, by predicted *mean square* error (what realised errors
    measure; issue 23), checked against simulation for every counter.
    """
    owner = "plan_pak"
    n, bound, epsilon, delta, beta, p_max = _check_public(
        owner, n, bound, epsilon, delta, beta, p_max
    )
    check_choice(noise, "noise", owner, ("laplace", "gaussian"))
    check_choice(method, "method", owner, METHODS)
    values = check_stream(prefix, "prefix", owner, bound=bound, min_length=2)
    m = values.size
    if m >= n:
        raise ParameterError(
            f"The time lag m (length of 'prefix') of {owner} must be smaller than n. Got "
            f"m={m} with n={n} instead. Pass only the first m < n values."
        )
    if counter is not None:
        from mechanisms import best_counter
        from mechanisms.counting._counters import check_counter

        counter = check_counter(counter, owner, delta=delta)
        if counter == "auto":
            counter = best_counter(n - m, epsilon=epsilon, bound=1.0, delta=delta)
    obj = PakObjective(
        np.sort(values),
        n=n,
        bound=bound,
        epsilon=epsilon,
        delta=delta,
        beta=beta,
        p_max=p_max,
        noise=noise,
        counter=counter,
    )
    terms, nfev = None, 0
    if m * p_max >= 2.0:
        z, _, nfev = solve_pak(obj, method=method)
        if z.size:
            r, p, share, betas = obj.decode(z)
            terms = obj.exact(r=r, lam=obj.lam_from(z), p=p, share=share, betas=betas)
    base = obj.baseline_error_bound
    common = dict(
        baseline_error_bound=base,
        time_lag=m,
        n=n,
        bound=bound,
        epsilon=epsilon,
        delta=delta,
        beta=beta,
        p_max=p_max,
        noise=noise,
        terms=terms,
        method=method,
        n_starts=len(_START_R) * len(_START_SHARE) * len(_START_SPLITS),
        nfev=nfev,
        counter=counter,
    )
    plain = base
    if counter is not None:  # plain release of the whole stream with the counter
        from mechanisms import counter_end_variance

        var = counter_end_variance(counter, n, epsilon=epsilon, bound=bound, delta=delta)
        plain = math.sqrt(8.0 * math.log(1.0 / beta) * var / 2.0)
    if terms is not None and terms.error_bound < plain:
        return PakPlan(
            r=terms.r,
            lam=terms.lam,
            p=terms.p,
            eps1_share=terms.eps1_share,
            beta_shares=dict(terms.beta_shares),
            error_bound=terms.error_bound,
            improvement_factor=base / terms.error_bound,
            use_threshold=True,
            **common,
        )
    shares = dict.fromkeys(BETA_KEYS, 0.0)
    shares["lap"] = 1.0
    return PakPlan(
        r=1.0,
        lam=1.0,
        p=p_max,
        eps1_share=0.0,
        beta_shares=shares,
        error_bound=plain,
        improvement_factor=base / plain,
        use_threshold=False,
        **common,
    )
