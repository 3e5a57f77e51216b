"""PAK Mechanism 1: threshold from a withheld prefix, then BT scaled to τ ([PAK19] §III-C).

Steps (Mechanism 1, with the threshold of §IV and r of §V-B):

1. withhold the first m = ``time_lag`` steps; release τ from them with (ε₁, δ)
   (:func:`~mechanisms.pak_threshold`, ×r, clipped to [0, B]);
2. release c(σ, m) = Σ_{i ≤ m} min(σ(i), τ) with Laplace noise of scale τ/ε₂;
3. for i = m+1..n clip σ(i) to τ and release the prefix sums with BT(ε, bound τ)
   (:func:`~mechanisms.binary_tree_release`), offset by the released c(σ, m).

Step 3's counter is the one with the smallest exact variance for the budget by default
(``counter="auto"``, issue 14: under pure ε the k-ary tree with negative digits and its
least-squares estimate); ``counter="binary_tree"`` is the paper's protocol. The open counters
``"unbounded"`` / ``"unbounded_blt"`` (issue 27 item 5) need no n: the released prefix sums
of a stream do not change when steps are appended (with the same bits), for streams whose
length is not fixed in advance. The local
parameters' defaults are the paper's Table I choices; :func:`planner.pak_defaults` chooses
them from public inputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ..core._budget import Budget, BudgetLedger, compose_parallel, compose_sequential
from ..core._errors import ParameterError
from ..core._noise import LaplaceNoise
from ..core._random import BitSource
from ..core._record import PrivacyRecord
from ..core._results import RangeSum, check_range, step_frame, summary_text
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_bool,
    check_fraction,
    check_integer,
    check_ledger,
    check_noise_range,
    check_positive,
    check_probability,
    check_seed,
    check_stream,
)
from ..counting._counters import (
    _APPROXIMATE,
    COUNTERS,
    OPEN_COUNTERS,
    CounterRelease,
    best_counter,
    check_counter,
    counter_release,
    tree_counter_release,
)
from ..counting._tree import TreeRelease, _check_tree_range, _tree_release, tree_range_variance
from ._calibration import _check_beta_lt, _check_r, pak_threshold_calibration
from ._quantile import _check_noise
from ._threshold import (
    MIN_THRESHOLD,
    ThresholdAnalysis,
    ThresholdRelease,
    _check_threshold_range,
    _release_threshold,
    mechanism_threshold,
    threshold_analysis,
)

__all__ = ["PakParameters", "PakRelease", "pak_release"]

#: τ is raised to at least B·2⁻³⁰ (public post-processing) so the noise scales stay positive.
_MIN_THRESHOLD = MIN_THRESHOLD
_PROOF = (
    "[PAK19] §III-C: sequential composition on σ(1..m) (threshold (ε₁, δ) + Laplace sum ε₂), "
    "BT ε on σ(m+1..n), parallel composition of the disjoint parts"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PakParameters:
    """The local parameters of Mechanism 1 (defaults from [PAK19] Tables I–II and §VI-B)."""

    eps1_share: float = 0.85
    """ε₁/ε, the threshold's share (§VI-B: 0.8 to 0.9); ε₂ = ε − ε₁ releases c(σ, m)."""
    lam: float = 0.85
    """λ: the threshold estimates the λp-quantile (Tables I–II: 0.81 to 0.87)."""
    p: float = 0.005
    """p ≤ p_max = 0.005 (§V-B)."""
    beta_lt: float = 0.004
    """β_lt: Pr[τ < x̂_λp] bound (Tables I–II: 0.1 to 0.3 of β = 0.02)."""
    r: float = 1.5
    """Multiplier r ≥ 1 of Eq. 15 (§VI-B: r between 1 and 2)."""
    noise: str = "laplace"
    """Threshold noise, ``"laplace"`` or ``"gaussian"``."""
    threshold: bool = True
    """False: no threshold, plain BT with B over the whole stream (nothing withheld)."""
    guard: bool = True
    """True: a released r·τ ≤ 0 is replaced by B (:func:`~mechanisms.pak.mechanism_threshold`,
    post-processing); False: [PAK19]'s clip to [B·2⁻³⁰, B]."""

    def __post_init__(self) -> None:
        owner = "pak_release"
        for name in ("threshold", "guard"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(
                    f"The {name!r} parameter of {owner} must be a bool. "
                    f"Got {getattr(self, name)!r}."
                )
        share = check_fraction(self.eps1_share, "eps1_share", owner)
        lam = check_probability(self.lam, "lam", owner, closed_low=False, closed_high=True)
        object.__setattr__(self, "eps1_share", share)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "p", check_fraction(self.p, "p", owner))
        object.__setattr__(self, "beta_lt", _check_beta_lt(self.beta_lt, "beta_lt", owner))
        object.__setattr__(self, "r", _check_r(self.r, owner))
        object.__setattr__(self, "noise", _check_noise(self.noise, owner))


@dataclass(frozen=True, slots=True, kw_only=True)
class PakRelease:
    """The output of Mechanism 1: prefix sums after the time lag, the threshold, the budget."""

    prefix_sums: np.ndarray
    """Noisy c(σ, i) at index i − 1, i = 1..n; NaN for the withheld steps i < m."""
    variance: np.ndarray
    """Noise variance of each released prefix sum given τ (NaN where withheld); excludes the
    bias from clipping values above τ."""
    threshold: float
    """τ used to clip (released); B when no threshold was used."""
    threshold_release: ThresholdRelease | None
    """The threshold release (None when ``threshold=False``)."""
    time_lag: int
    """m, the number of withheld steps (the sum of steps 1..m is released at step m); 0 for
    plain BT."""
    tree: TreeRelease | None
    """BT release of the clipped suffix σ(m+1..n) (of the whole stream for plain BT); None when
    the counter is not a tree."""
    prefix_noise: LaplaceNoise | None
    """Noise of the released c(σ, m) (sensitivity τ, ε₂); None for plain BT."""
    parameters: PakParameters
    """The local parameters used."""
    epsilon: float
    """Total ε."""
    delta: float
    """Total δ (0 for plain BT)."""
    epsilon1: float
    """ε₁ of the threshold (0 for plain BT)."""
    epsilon2: float
    """ε₂ of the prefix sum (0 for plain BT)."""
    bound: float
    """The public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level (ε, δ)."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""
    counter: CounterRelease | None = None
    """The counter's release of the suffix (its name, estimates and exact variances)."""
    ledger: Mapping[str, Any] | None = None
    """The data set's ledger entry set by the application (``dpstream.release_pak``: which
    ledger and data set paid, or ``accounted`` False for ``ledger=False``); None for a seeded
    run or :func:`pak_release` called directly (its ``ledger`` is the caller's)."""
    threshold_fallback: bool = False
    """True when the released r·τ was ≤ 0 and the guard used B (released: a function of the
    released threshold, :func:`~mechanisms.pak.mechanism_threshold`)."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        if self.ledger is not None:  # read-only, as the rest of the release
            object.__setattr__(self, "ledger", MappingProxyType(dict(self.ledger)))
        self.prefix_sums.setflags(write=False)
        self.variance.setflags(write=False)

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, δ, B, mechanism and its parameters)."""
        params = self.parameters
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="pak-mechanism-1" if params.threshold else "binary-tree",
            parameters={
                "n": self.n,
                "time_lag": self.time_lag,
                "eps1_share": params.eps1_share,
                "lam": params.lam,
                "p": params.p,
                "beta_lt": params.beta_lt,
                "r": params.r,
                "noise": params.noise,
                "threshold": params.threshold,
                "guard": params.guard,
                "counter": "binary_tree" if self.counter is None else self.counter.counter,
            },
            bound=self.bound,
            seeded=self.seeded,
        )

    def range_sum(self, i: int, j: int) -> RangeSum:
        """Estimated sum of input steps i..j (0-based, inclusive), m ≤ i ≤ j < n.

        Indices count input steps, as ``prefix_sums`` does (the one rule of
        :mod:`mechanisms.core._results`); the first m = ``time_lag`` steps are withheld. The
        answer is c(σ, j + 1) − c(σ, i): the released c(σ, m) cancels, so it equals
        ``tree.range_sum(i − m, j − m)`` on the clipped suffix, and its ``std_error`` is that
        of the BT nodes left after cancelling (noise only, given τ; the clipping bias is not
        included).
        """
        m = self.time_lag
        i, j = check_range(i, j, first=m, stop=self.n, owner="PakRelease.range_sum")
        before = self.prefix_sums[i - 1] if i > 0 else 0.0
        if self.counter is not None and self.counter.counter != "binary_tree":
            var = self.counter.range_variance(i - m, j - m)
        else:
            var = tree_range_variance(i - m, j - m, self.tree.noise.variance)
        return RangeSum(float(self.prefix_sums[j] - before), math.sqrt(var))

    def to_frame(self, index: object = None):
        """One row per input step (NaN before the time lag): ``value`` (the released step,
        c(σ, k + 1) − c(σ, k) from step m on), ``prefix_sum`` c(σ, k + 1) (released from step
        m − 1 on: c(σ, m)) and its noise ``std_error``; ``index`` is the input's index."""
        m = self.time_lag
        value = np.diff(self.prefix_sums, prepend=0.0)
        value[:m] = np.nan  # withheld; value[m] = c(σ, m + 1) − c(σ, m)
        return step_frame(
            {"value": value, "prefix_sum": self.prefix_sums, "std_error": np.sqrt(self.variance)},
            n=self.n,
            time_lag=0,
            index=index,
            owner="PakRelease.to_frame",
            result=self,
        )

    def summary(self) -> str:
        """A short text table of the release (released values and public parameters)."""
        rows = [
            ("steps n", self.n),
            ("time lag m (withheld steps)", self.time_lag),
            ("bound B", self.bound),
            ("threshold τ (released)", self.threshold),
            ("released r·τ ≤ 0: B used (guard)", self.threshold_fallback),
            ("epsilon (ε₁ + ε₂ on the prefix, ε on the suffix)", self.epsilon),
            ("epsilon₁ (threshold)", self.epsilon1),
            ("epsilon₂ (c(σ, m))", self.epsilon2),
            ("delta", self.delta),
            ("released total c(σ, n)", float(self.prefix_sums[-1])),
            ("its std. error (noise, given τ)", math.sqrt(float(self.variance[-1]))),
        ]
        return summary_text("PAK Mechanism 1 release [PAK19] §III-C", rows, result=self)


def pak_release(
    values: object,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    time_lag: int,
    seed: object = None,
    ledger: BudgetLedger | None = None,
    eps1_share: float = 0.85,
    lam: float = 0.85,
    p: float = 0.005,
    beta_lt: float = 0.004,
    r: float = 1.5,
    noise: str = "laplace",
    threshold: bool = True,
    analysis: bool = False,
    counter: str = "auto",
    guard: bool = True,
) -> PakRelease | tuple[PakRelease, ThresholdAnalysis | None]:
    """Release every prefix sum after the time lag with PAK's Mechanism 1 ([PAK19] §III-C).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, B]; finite.
    bound
        The public bound B.
    epsilon, delta
        Total privacy loss (ε, δ); 0 ≤ δ < 1, and δ > 0 when ``threshold`` (smooth sensitivity
        needs it).
    time_lag
        m, 1 ≤ m < n: steps withheld to estimate τ (λ·p·m ≥ 1 is required).
    seed
        None (OS secure source, for release), or an int / bit source (tests only).
    ledger
        Optional :class:`BudgetLedger` to charge (ε, δ) to (event-level unit). Charged after
        every argument is validated and before any draw.
    eps1_share, lam, p, beta_lt, r, noise, threshold
        Local parameters, see :class:`PakParameters`.
    analysis
        Also return the threshold's :class:`~mechanisms.pak.ThresholdAnalysis` (x̂_λp, SS,
        the noise scale; None for plain BT): private, for audits and experiments only.
    guard
        True (default): a released threshold r·τ ≤ 0, certainly below the data's quantile
        ([PAK19] Eq. 8's failure event), is replaced by B instead of clipping every suffix
        value to ~0 (:func:`~mechanisms.pak.mechanism_threshold`; post-processing, the privacy
        is unchanged). False: the paper's protocol.
    counter
        The continual counter of the suffix (:data:`mechanisms.counting.COUNTERS`):
        ``"auto"`` (default): the one with the smallest exact variance at step n − m for this
        (ε, δ) (:func:`~mechanisms.best_counter`, public inputs only; under pure ε it is the
        k-ary tree with negative digits and its least-squares estimate), or
        ``"binary_tree"`` (the paper's BT, [PAK19]'s protocol), ``"binary_tree_online"`` /
        ``"binary_tree_consistent"`` (the same noisy nodes, Honaker's / the least-squares
        estimate), ``"kary_tree"`` / ``"kary_tree_consistent"`` (k-ary tree with
        negative digits, its signed cover sums / least-squares estimate; pure ε),
        ``"smooth_binary"``, ``"sqrt_factorisation"``, ``"blt"`` (Gaussian noise calibrated
        at (ε, δ); need δ > 0; the last two are matrix factorisations, [FHU23], [DMRST24]).
        Under ``"auto"`` with δ > 0 the Gaussian counters compete too. For a stream whose
        length is not fixed in advance (:data:`~mechanisms.counting.OPEN_COUNTERS`, never
        chosen by ``"auto"``): ``"unbounded"`` ([CSS11] §4 epochs of k-ary trees, pure ε,
        :func:`~mechanisms.counting.unbounded_kary_release`) or ``"unbounded_blt"`` (a
        time-invariant BLT with Gaussian noise at (ε, δ), needs δ > 0, streams of at most 2³²
        suffix steps, :func:`~mechanisms.counting.unbounded_blt_release`). The record's
        ``parameters["counter"]`` names the counter used.

    Returns
    -------
    PakRelease
        Or ``(PakRelease, ThresholdAnalysis | None)`` when ``analysis=True``.

    Notes
    -----
    The prefix sum c(σ, m) is released as Σ_{i ≤ m} min(σ(i), τ) + Lap(τ/ε₂): clipping the
    prefix to τ is what makes the sensitivity τ (one value of [0, B] can move the raw sum by B;
    clipped to [0, τ] it moves it by at most τ). Values are put on the noise lattice (exact
    integer sums, as in the BT) so that bound is exact in floating point. Steps i > m get
    ĉ(σ, m) + BT prefix sums of min(σ(m+1..i), τ), BT run with bound τ and the whole ε.

    If τ ≥ B (after ×r the release is clipped to B) the mechanism still runs with τ = B:
    switching to BT over the whole stream after seeing τ would use the prefix twice and cost
    ε₁ more. With ``threshold=False`` (decided before seeing data) it is plain BT(ε, B) over
    the whole stream: nothing withheld, ``time_lag`` 0, δ unused. τ is raised to at least
    B·2⁻³⁰ (post-processing) so that the noise scales stay positive; with ``guard`` (the
    default) a released r·τ below that (r·τ ≤ 0: [PAK19] Eq. 8's failure event, certain since
    x̂_λp ≥ 0) runs with τ = B instead, as when r·τ ≥ B (post-processing of the released τ;
    ``threshold_fallback`` says so).

    *Privacy*: event-level (ε, δ)-DP ([PAK19] §III-C privacy paragraph). On the prefix
    σ(1..m), the threshold is (ε₁, δ)-DP (:func:`pak_threshold`) and c(σ, m) given τ is
    ε₂-DP (Laplace, sensitivity τ): sequential composition gives (ε₁ + ε₂, δ) = (ε, δ). The
    suffix σ(m+1..n) is read only by BT, ε-DP for any fixed τ. The parts are disjoint, and
    the suffix mechanism depends on the prefix only through the released τ: for neighbours
    differing in the prefix the BT output has the same distribution given τ (loss (ε, δ));
    differing in the suffix, the prefix outputs are identical in distribution and BT costs ε
    (parallel composition, adaptively). Overall (ε, δ). With a Gaussian counter
    (``"smooth_binary"``, ``"sqrt_factorisation"``, ``"blt"``, ``"unbounded_blt"``) the
    suffix is (ε, δ)-DP (analytic Gaussian calibration, [BW18]) instead of ε-DP; parallel
    composition of two (ε, δ) parts is still (ε, δ). The tree counters' estimates
    (online, consistent) are post-processing of the same BT nodes; ``"kary_tree"`` is ε-DP
    ([APT24], :mod:`mechanisms.counting._kary`); ``"unbounded"`` is ε-DP (k-ary trees on
    disjoint epochs, parallel composition, :mod:`mechanisms.counting._unbounded`).

    Examples
    --------
    >>> x = [1.0] * 600 + [2.0] * 400
    >>> rel = pak_release(x, bound=100.0, epsilon=1.0, delta=1e-6, time_lag=500, seed=3)
    >>> rel.time_lag, bool(np.isnan(rel.prefix_sums[498])), bool(np.isnan(rel.prefix_sums[499]))
    (500, True, False)
    """
    want_analysis = check_bool(analysis, "analysis", "pak_release")
    seeded = seed is not None
    bits, params, arr, bnd, eps, dlt, m = _validate(
        values,
        bound,
        epsilon,
        delta,
        time_lag,
        seed,
        ledger,
        eps1_share,
        lam,
        p,
        beta_lt,
        r,
        noise,
        threshold,
        guard=guard,
    )
    n = arr.size
    cdelta = dlt if counter in (*_APPROXIMATE, "auto") else 0.0  # the suffix counter's δ
    counter = check_counter(counter, "pak_release", delta=cdelta)
    if not params.threshold:
        if counter == "auto":  # public: n, ε, δ only
            counter = best_counter(n, epsilon=eps, bound=bnd, delta=cdelta)
        total = Budget(eps, cdelta if counter in _APPROXIMATE else 0.0)
        charge_ledger(ledger, total, "pak_release", EventLevel())
        crel = _suffix_release(arr, counter, eps, cdelta, bnd, bits)
        rel = PakRelease(
            prefix_sums=np.array(crel.prefix_sums),
            variance=np.array(crel.variance),
            threshold=bnd,
            threshold_release=None,
            time_lag=0,
            tree=None if crel.tree is None else _seeded(crel.tree, seeded),
            prefix_noise=None,
            parameters=params,
            epsilon=eps,
            delta=total.delta,
            epsilon1=0.0,
            epsilon2=0.0,
            bound=bnd,
            guarantee=PrivacyGuarantee(unit=EventLevel(), budget=total, proof=crel.guarantee.proof),
            seeded=seeded,
            counter=crel,
        )
        return (rel, None) if want_analysis else rel

    eps1 = eps * params.eps1_share
    eps2 = eps - eps1
    prefix, suffix = arr[:m], arr[m:]
    cal = pak_threshold_calibration(  # raises (κ ≤ 0, λpm < 1) before anything is drawn
        prefix,
        bound=bnd,
        epsilon=eps1,
        delta=dlt,
        lam=params.lam,
        p=params.p,
        beta_lt=params.beta_lt,
        r=params.r,
        noise=params.noise,
    )
    if counter == "auto":  # public: n, m, ε, δ only
        counter = best_counter(n - m, epsilon=eps, bound=1.0, delta=cdelta)
    suffix_budget = Budget(eps, dlt) if counter in _APPROXIMATE else Budget(eps)
    total = compose_parallel(compose_sequential(Budget(eps1, dlt), Budget(eps2)), suffix_budget)
    charge_ledger(ledger, total, "pak_release", EventLevel())

    th = _release_threshold(  # [PAK19 Mech. 1 step 1]
        cal, bits, clip=True, owner="pak_release", seeded=seeded
    )
    tau = float(mechanism_threshold(th.unclipped, bnd, guard=params.guard))  # post-processing
    prefix_noise = LaplaceNoise(sensitivity=tau, epsilon=eps2, magnitude=m * tau)
    c_m = _clipped_lattice_sum(prefix, tau, prefix_noise) + float(
        prefix_noise.sample(1, bits)[0]
    )  # [PAK19 Mech. 1 step 2]
    # [PAK19 Mech. 1 steps 3-6], BT or a better counter
    crel = _suffix_release(np.minimum(suffix, tau), counter, eps, cdelta, tau, bits)
    tree = None if crel.tree is None else _seeded(crel.tree, seeded)
    sums = np.full(n, np.nan)
    var = np.full(n, np.nan)
    sums[m - 1] = c_m
    var[m - 1] = prefix_noise.variance
    sums[m:] = c_m + crel.prefix_sums
    var[m:] = prefix_noise.variance + crel.variance
    rel = PakRelease(
        prefix_sums=sums,
        variance=var,
        threshold=tau,
        threshold_release=th,
        time_lag=m,
        tree=tree,
        prefix_noise=prefix_noise,
        parameters=params,
        epsilon=eps,
        delta=dlt,
        epsilon1=eps1,
        epsilon2=eps2,
        bound=bnd,
        guarantee=PrivacyGuarantee(
            unit=EventLevel(),
            budget=total,
            proof=_PROOF if crel.tree is not None else f"{_PROOF}; suffix: {crel.guarantee.proof}",
        ),
        seeded=seeded,
        counter=crel,
        threshold_fallback=params.guard and th.unclipped < bnd * _MIN_THRESHOLD,
    )
    return (rel, threshold_analysis(cal, None)) if want_analysis else rel


def _seeded(tree: TreeRelease, seeded: bool) -> TreeRelease:
    """The inner BT release, marked seeded like the outer release."""
    return dataclasses.replace(tree, seeded=True) if seeded and not tree.seeded else tree


def _validate(
    values,
    bound,
    epsilon,
    delta,
    time_lag,
    seed,
    ledger,
    eps1_share,
    lam,
    p,
    beta_lt,
    r,
    noise,
    threshold,
    *,
    guard=True,
) -> tuple[BitSource, PakParameters, np.ndarray, float, float, float, int]:
    """Check every argument (no draws, no charges); return them normalised."""
    owner = "pak_release"
    bnd = check_positive(bound, "bound", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dlt = check_probability(delta, "delta", owner)
    params = PakParameters(
        eps1_share=eps1_share,
        lam=lam,
        p=p,
        beta_lt=beta_lt,
        r=r,
        noise=noise,
        threshold=threshold,
        guard=guard,
    )
    if params.threshold and dlt == 0.0:
        raise ParameterError(
            f"The 'delta' parameter of {owner} must be a float in (0, 1) when threshold=True "
            "(smooth sensitivity gives (ε, δ)-DP with δ > 0). Got 0.0 instead. Pass a δ such "
            "as 1/n², or threshold=False for plain BT."
        )
    bits = check_seed(seed, owner)
    check_ledger(ledger, owner)
    if params.threshold:
        _check_threshold_range(
            bnd, eps * params.eps1_share, dlt, params.beta_lt, params.noise, owner
        )
    if not isinstance(time_lag, int | np.integer) or isinstance(time_lag, bool):
        check_integer(time_lag, "time_lag", owner)  # type errors before reading the data
    arr = check_stream(values, "values", owner, bound=bnd, min_length=2)
    m = check_integer(time_lag, "time_lag", owner, minimum=1, maximum=arr.size - 1)
    _check_tree_range(arr.size, eps, bnd, owner)
    if params.threshold:  # τ ∈ [B·2⁻³⁰, B] scales the BT on the suffix and c(σ, m) (ε₂)
        eps2 = eps * (1.0 - params.eps1_share)
        check_noise_range(
            owner,
            "'bound', 'epsilon' and 'eps1_share'",
            smallest_noise_scale=bnd * _MIN_THRESHOLD / eps,
            prefix_noise_scale=bnd / eps2,
            smallest_prefix_noise_scale=bnd * _MIN_THRESHOLD / eps2,
        )
    return bits, params, arr, bnd, eps, dlt, m


def _suffix_release(
    values: np.ndarray, counter: str, eps: float, delta: float, bound: float, bits: BitSource
) -> CounterRelease:
    """The counter's release (tree counters: the BT nodes of ``_tree_release``, then the
    counter's estimate from them; post-processing); the open counters
    (:data:`OPEN_COUNTERS`) through their bits-taking releases. Every draw comes from ``bits``.
    Any other name is a typed error before anything is drawn."""
    if counter in _TREE_COUNTERS:
        tree = _tree_release(values, epsilon=eps, bound=bound, bits=bits, owner="pak_release")
        return tree_counter_release(tree, counter)
    if counter in COUNTERS or counter in OPEN_COUNTERS:
        return counter_release(
            values,
            counter=counter,
            epsilon=eps,
            delta=delta,
            bound=bound,
            bits=bits,
            owner="pak_release",
        )
    raise ParameterError(
        f"The 'counter' parameter of pak_release must be one of {(*COUNTERS, *OPEN_COUNTERS)}. "
        f"Got {counter!r} instead."
    )


#: The counters estimated from the binary tree's nodes (``_tree_release``).
_TREE_COUNTERS = ("binary_tree", "binary_tree_online", "binary_tree_consistent")


def _clipped_lattice_sum(values: np.ndarray, tau: float, noise: LaplaceNoise) -> float:
    """Σ min(x, τ) with every term snapped to γℤ inside [0, τ]: an exact sum (sensitivity τ)."""
    gamma = noise.granularity
    units = np.clip(np.rint(values / gamma), 0, math.floor(tau / gamma)).astype(np.int64)
    return float(units.sum()) * gamma
