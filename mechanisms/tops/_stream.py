"""Streaming ToPS: threshold optimizer → online consistent hierarchy → smoother ([ToPS21]).

The first m = ``time_lag`` values are read by the threshold optimizer only
(:func:`~mechanisms.tops_threshold`, ε_θ); nothing else about them is released. Every later value
is clipped to θ and fed to the online consistent F-ary hierarchy (``_tops_tree.py``, ε_r), whose
leaf estimates the smoother turns into one final value per step as the steps arrive
(``_smoothers.py``). Steps are indexed after the time lag: released step i is absolute step m + i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Real

import numpy as np

from ..core._budget import Budget, BudgetLedger, compose_parallel
from ..core._errors import DomainError, ParameterError
from ..core._noise import LaplaceNoise
from ..core._record import PrivacyRecord
from ..core._renamed import UNSET, renamed_attribute, renamed_keyword
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_choice,
    check_integer,
    check_ledger,
    check_noise_range,
    check_positive,
    check_probability,
    check_seed,
    clamp_stream,
)
from ..counting._analysis import StreamAnalysis
from ._shape import (
    DEFAULT_SHAPE_SHARE,
    RESOLUTION,
    SHAPE_RULES,
    TopsShape,
    choose_shape,
    initial_shape,
    leaf_candidates,
    public_error,
    shape_resolution,
)
from ._smoothers import DEFAULT_SMOOTHING, Smoother, _check_smoother, block_values
from ._threshold import (
    CORRECTIONS,
    DEFAULT_C,
    SCORES,
    TopsThresholdRelease,
    _check_method,
    _select,
    auto_score,
    local_slope,
    mean_square_length,
    mse_index,
    tops_candidates,
    tops_kappa,
)
from ._tree import Hierarchy, TopsRelease, max_levels

__all__ = ["STREAM_CORRECTIONS", "ToPSStream", "TopsUpdate"]

#: The stream's threshold corrections: ``"mse"`` (default: the overshoot correction, then the
#: lift to the least predicted error, ``mechanisms.tops._threshold``), ``"overshoot"``,
#: ``"none"``.
STREAM_CORRECTIONS = ("mse", *CORRECTIONS)

_PROOF = (
    "[ToPS21]: threshold (report-noisy-max, ε_θ) on steps 1..m, Laplace hierarchy (sensitivity "
    "L·θ, ε_r) on the later steps; parallel composition of the disjoint parts"
)
_PROOF_PERTURB = "[ToPS21] perturber: Laplace mechanism on the F-ary tree (L1 sensitivity L·θ)"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsUpdate:
    """What became final during one ``push``/``extend`` call."""

    start: int
    """Released-step index of ``values[0]`` (released step i is absolute step m + i)."""
    values: np.ndarray
    """The new final smoothed per-step values (one per pushed step after the time lag)."""
    node_levels: np.ndarray
    """Level ℓ of each newly released consistent node."""
    node_indices: np.ndarray
    """Index k of each new node: it covers released steps [k·g·Fˡ, (k + 1)·g·Fˡ)."""
    node_values: np.ndarray
    """Consistent estimate of each new node."""
    threshold: float | None = None
    """θ if it was chosen during this call, else None."""

    def __post_init__(self) -> None:
        for arr in (self.values, self.node_levels, self.node_indices, self.node_values):
            arr.setflags(write=False)


def _empty_update(start: int, threshold: float | None = None) -> TopsUpdate:
    return TopsUpdate(
        start=start,
        values=np.empty(0),
        node_levels=np.empty(0, dtype=np.int64),
        node_indices=np.empty(0, dtype=np.int64),
        node_values=np.empty(0),
        threshold=threshold,
    )


class ToPSStream:
    """Streaming ToPS: push values one at a time or in batches, get releases as they are final.

    Parameters
    ----------
    bound
        Public bound B on every value.
    epsilon_threshold, epsilon_perturb
        ε_θ of the threshold optimizer (on the first m values) and ε_r of the perturber.
    time_lag
        m ≥ 1, the values read by the threshold optimizer.
    horizon
        Planned number r of released steps (public): sets κ, the leaf size g and the levels L
        (hence the tree size T = g·F^{L−1}). The stream may run longer or stop earlier: a new
        tree starts every T steps.
    fanout
        F ≥ 2 (16: [ToPS21], after Qardaji et al. 2013).
    smoother
        ``"recent"`` (the paper's), ``"mean"``, ``"median"`` or ``"exponential"``.
    threshold, leaf_size, levels
        Public overrides: a fixed θ in (0, B] (then ``time_lag`` may be 0 and ε_θ is unused),
        a leaf size g and a number of levels L; None uses the optimizer and ``shape_rule``.
    shape_rule
        How g and L are chosen when ``leaf_size`` is None. ``"smoothing"`` (default): the
        shape of least predicted range-query MSE, the smoother's error included, from a
        private statistic of the prefix that costs ``shape_share``·ε_θ
        (:mod:`mechanisms.tops._shape`); it needs θ from the optimizer and at least 32 prefix
        values, otherwise the paper's rule applies. When that statistic's noise floor is too
        coarse to help (ρ > ``RESOLUTION``, public inputs only) it is not bought: θ gets all
        of ε_θ and the shape is the least public error at θ. ``"paper"``: [ToPS21]'s pruning rule
        (:func:`tops_leaf_size`) and :func:`tops_levels`, no budget spent.
    shape_share
        Share of ε_θ spent on the shape by the smoothing rule (the threshold gets the rest).
    threshold_correction
        ``"mse"`` (default): the optimizer's overshoot correction, then θ lifted to the least
        predicted range-query error under the score's own tail model (post-processing,
        ``mechanisms.tops._threshold`` module notes), where the paper's score was used (after
        the scale-free score the selection is released as is); ``"overshoot"`` or ``"none"``: the
        optimizer's drift correction only, or none (:func:`tops_threshold`).
    threshold_score
        ``"auto"`` (default): [ToPS21]'s score −m_θ − κθ when an exponential tail of its scale c
        peaking where it says, c·ln(m/(κc)), fits under B, else the scale-free score
        −m_θ − K₀ln(m/K₀)ln θ, which needs no c (public inputs only); ``"paper"`` or
        ``"scale_free"`` force one (:func:`tops_threshold`, module notes of
        ``mechanisms.tops._threshold``).
    candidates, c, threshold_method
        The optimizer's grid, constant c and selection (:func:`tops_threshold`).
    smoothing
        Smoothing factor s ∈ (0, 1] of the exponential smoother (default 0.25); ``alpha`` is
        its deprecated name.
    seed
        None (OS secure source), or an int / bit source (tests and experiments only).
    ledger
        Optional :class:`BudgetLedger`, charged once here (event-level unit), after
        validation and before any draw.

    Notes
    -----
    Values outside [0, B] (±inf included) are clamped to [0, B], never refused: earlier steps
    have been released, and an exception would reveal the event. Only :meth:`analysis` counts
    the clamps (private). Non-numbers and NaN are refused before the batch is consumed.

    After the time lag each ``push`` returns the step's smoothed value, final at once: steps
    of a leaf block other than its last carry the prediction from the blocks already released,
    the last step makes the block sum to its consistent estimate (``_smoothers.py``). Nodes are
    released, consistent, when their interval completes (``_tops_tree.py``).

    *Privacy*: event-level max(ε_θ, ε_r)-DP for a stream fixed in advance, of any length. The
    threshold reads steps 1..m (ε_θ-DP, :func:`tops_threshold`; with the smoothing shape rule
    it gets (1 − s)·ε_θ and the shape statistic, given θ, s·ε_θ: sequential composition on the
    prefix, ε_θ in all; when the statistic is not bought, decided from public inputs before
    any value is read, θ gets ε_θ and the shape is post-processing of θ; the "mse" lift of θ is
    post-processing of the released index and public inputs); the trees read disjoint later
    steps, each an ε_r-DP Laplace mechanism given θ and the shape (L1 sensitivity L·θ); a
    replaced value lies in one part only and the later parts depend on the earlier ones only
    through the released θ, g and L (parallel composition, as in [PAK19] Mechanism 1).
    Smoothing and range sums are post-processing. The analysis is for a stream fixed in
    advance (non-adaptive), as in [ToPS21]: a node released early carries projected noise that
    mixes in the noise of nodes that complete later.

    Examples
    --------
    >>> s = ToPSStream(bound=10.0, epsilon_threshold=1.0, epsilon_perturb=1.0, time_lag=100,
    ...                horizon=256, seed=5)
    >>> _ = s.extend([1.0] * 100)
    >>> s.threshold is not None, s.push(2.0).values.size
    (True, 1)
    """

    alpha = renamed_attribute("alpha", "smoothing", "ToPSStream")

    def __init__(
        self,
        *,
        bound: float,
        epsilon_threshold: float,
        epsilon_perturb: float,
        time_lag: int,
        horizon: int,
        fanout: int = 16,
        smoother: str = "recent",
        threshold: float | None = None,
        leaf_size: int | None = None,
        levels: int | None = None,
        candidates: object = None,
        c: float = DEFAULT_C,
        threshold_method: str = "laplace",
        smoothing: float = UNSET,
        shape_rule: str = "smoothing",
        shape_share: float = DEFAULT_SHAPE_SHARE,
        threshold_correction: str = "mse",
        threshold_score: str = "auto",
        seed: object = None,
        ledger: BudgetLedger | None = None,
        alpha: float = UNSET,
        _owner: str = "ToPSStream",
    ) -> None:
        owner = _owner
        smoothing = renamed_keyword(
            smoothing, alpha, new="smoothing", old="alpha", owner=owner, default=DEFAULT_SMOOTHING
        )
        self.bound = check_positive(bound, "bound", owner)
        self.epsilon_perturb = check_positive(epsilon_perturb, "epsilon_perturb", owner)
        self._bits = check_seed(seed, owner)
        ledger = check_ledger(ledger, owner)
        self.seeded = seed is not None
        check_noise_range(
            owner,
            "'bound' and 'epsilon_perturb'",
            noise_scale=max(self.bound, 1.0) / self.epsilon_perturb,
            bound=self.bound,
        )
        self.fanout = check_integer(fanout, "fanout", owner, minimum=2, maximum=1 << 20)
        self.horizon = check_integer(horizon, "horizon", owner, maximum=1 << 52)
        self.smoother_name = _check_smoother(smoother, owner)
        self.smoothing = check_probability(
            smoothing, "smoothing", owner, closed_low=False, closed_high=True
        )
        if threshold is None:
            self.time_lag = check_integer(time_lag, "time_lag", owner, maximum=1 << 52)
            self.epsilon_threshold = check_positive(epsilon_threshold, "epsilon_threshold", owner)
            check_noise_range(
                owner, "'epsilon_threshold'", score_noise_scale=1.0 / self.epsilon_threshold
            )
            self.method = _check_method(threshold_method, owner)
            self.correction = check_choice(
                threshold_correction, "threshold_correction", owner, STREAM_CORRECTIONS
            )
            self.score = check_choice(threshold_score, "threshold_score", owner, ("auto", *SCORES))
            self.kappa = tops_kappa(
                time_lag=self.time_lag,
                horizon=self.horizon,
                epsilon_perturb=self.epsilon_perturb,
                fanout=self.fanout,
                c=c,
            )
            self._c = float(c)  # validated by tops_kappa
            if self.score == "auto":  # public: does the paper's c fit under B?
                self.score = auto_score(
                    kappa=self.kappa, c=self._c, time_lag=self.time_lag, bound=self.bound
                )
            self.candidates = tops_candidates(self.bound, candidates)
            budget = compose_parallel(Budget(self.epsilon_threshold), Budget(self.epsilon_perturb))
        else:
            theta = check_positive(threshold, "threshold", owner)
            if theta > self.bound:
                raise ParameterError(
                    f"The 'threshold' parameter of {owner} must be a float in (0, bound="
                    f"{self.bound:g}]. Got {threshold!r} instead."
                )
            self.time_lag = check_integer(time_lag, "time_lag", owner, minimum=0, maximum=1 << 52)
            self.epsilon_threshold, self.method, self.kappa = 0.0, "fixed", math.nan
            self.candidates = np.array([theta])
            budget = Budget(self.epsilon_perturb)
        self.shape_rule = check_choice(shape_rule, "shape_rule", owner, SHAPE_RULES)
        share = check_probability(
            shape_share, "shape_share", owner, closed_low=False, closed_high=False
        )
        if leaf_size is not None:
            check_integer(leaf_size, "leaf_size", owner, maximum=1 << 52)
        if levels is not None:
            check_integer(levels, "levels", owner, maximum=max_levels(self.fanout))
        sizes = leaf_candidates(self.time_lag, self.horizon)
        #: True when g and L wait for θ and the prefix (the smoothing rule).
        self._deferred = (
            threshold is None
            and leaf_size is None
            and self.shape_rule == "smoothing"
            and sizes.size >= 2
        )
        self.shape_release: TopsShape | None = None
        #: How g and L were (or will be) chosen: "smoothing", "paper" or "given".
        self.shape_rule_used = (
            "smoothing" if self._deferred else ("given" if leaf_size is not None else "paper")
        )
        #: ρ of the shape statistic at share·ε_θ (public; ``mechanisms.tops._shape``): above
        #: RESOLUTION the statistic is not bought and θ gets all of ε_θ.
        self.shape_resolution = (
            shape_resolution(
                time_lag=self.time_lag,
                horizon=self.horizon,
                epsilon_perturb=self.epsilon_perturb,
                fanout=self.fanout,
                epsilon=share * self.epsilon_threshold,
                levels=levels,
            )
            if self._deferred
            else math.nan
        )
        buy = self._deferred and self.shape_resolution <= RESOLUTION
        self.epsilon_shape = share * self.epsilon_threshold if buy else 0.0
        self.leaf_size, self.levels, most_levels, tree_size = initial_shape(
            deferred=self._deferred,
            horizon=self.horizon,
            epsilon_perturb=self.epsilon_perturb,
            fanout=self.fanout,
            sizes=sizes,
            leaf_size=leaf_size,
            levels=levels,
        )
        #: n, the least public error per θ² of the shapes the rule may take (the "mse"
        #: correction's noise cost; public inputs only).
        self._mse_noise = math.nan
        if threshold is None and self.correction == "mse":
            self._mse_noise = public_error(
                horizon=self.horizon,
                epsilon_perturb=self.epsilon_perturb,
                fanout=self.fanout,
                sizes=sizes if self._deferred else np.array([self.leaf_size]),
                levels=levels if self._deferred else self.levels,
            )
        theta_min = float(self.candidates[0])
        check_noise_range(
            owner,
            "'bound', 'epsilon_perturb' and the tree shape",
            noise_scale=most_levels * self.bound / self.epsilon_perturb,
            smallest_noise_scale=most_levels * theta_min / self.epsilon_perturb,
            released_magnitude=tree_size
            * self.bound
            * (1.0 + 64.0 * most_levels / self.epsilon_perturb),
        )
        if self.epsilon_shape:
            check_noise_range(
                owner,
                "'epsilon_threshold' and 'shape_share'",
                shape_noise_scale=1.0 / self.epsilon_shape,
            )
        self.guarantee = PrivacyGuarantee(
            unit=EventLevel(), budget=budget, proof=_PROOF if threshold is None else _PROOF_PERTURB
        )
        charge_ledger(ledger, budget, owner, self.guarantee.unit)
        self._clamped = 0
        self.threshold_release: TopsThresholdRelease | None = None
        self.threshold: float | None = None if threshold is None else theta
        self._prefix: list[np.ndarray] = []
        self._seen = 0
        self._hier: Hierarchy | None = None
        self._smoother: Smoother | None = None
        self._values: list[np.ndarray] = []
        self._nodes: list[list[np.ndarray]] = []
        if self.threshold is not None:
            self._start_perturber()

    # -- state ---------------------------------------------------------------------------
    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of the stream's release (unit, ε, B, mechanism, seeded...)."""
        return _record(self.guarantee, self, self.seeded)

    def analysis(self) -> StreamAnalysis:
        """How many values were clamped to [0, B] (private: never publish it)."""
        return StreamAnalysis(steps=self._seen, clamped=self._clamped)

    @property
    def released(self) -> int:
        """Number of released steps so far (steps after the time lag)."""
        return max(self._seen - self.time_lag, 0)

    @property
    def noise(self) -> LaplaceNoise | None:
        """The noise of every node (None before θ is known)."""
        return None if self._hier is None else self._hier.noise

    @property
    def prediction(self) -> float | None:
        """Per-step smoothed prediction for the open block (None before θ is known)."""
        return None if self._smoother is None else self._smoother.prediction

    def _start_perturber(self) -> None:
        self._nodes = [[] for _ in range(self.levels)]
        self._hier = Hierarchy(
            threshold=self.threshold,
            epsilon=self.epsilon_perturb,
            fanout=self.fanout,
            leaf_size=self.leaf_size,
            levels=self.levels,
            bits=self._bits,
        )
        self._smoother = Smoother(
            self.smoother_name,
            block=self.leaf_size,
            prior=self.threshold / 2.0,
            smoothing=self.smoothing,
        )

    # -- input ---------------------------------------------------------------------------
    def push(self, value: float) -> TopsUpdate:
        """Add the next value (clamped to [0, B]); return what became final."""
        if isinstance(value, bool | np.bool_) or not isinstance(value, Real):
            raise DomainError("The 'value' argument of ToPSStream.push must be a real number.")
        return self.extend(np.array([float(value)]))

    def extend(self, values: object) -> TopsUpdate:
        """Add values in order (each clamped to [0, B]); return what became final, as one
        update.

        The whole batch is validated before anything is consumed or drawn.
        """
        arr, clamped = clamp_stream(values, "values", "ToPSStream.extend", bound=self.bound)
        self._clamped += clamped
        start, chosen = self.released, None
        if self.threshold is None:
            need = self.time_lag - self._seen
            self._prefix.append(arr[:need])
            self._seen += min(need, arr.size)
            arr = arr[need:]
            if self._seen < self.time_lag:
                return _empty_update(start)
            prefix = np.concatenate(self._prefix)
            self._prefix = []
            self.threshold_release = _select(
                prefix,
                self.candidates,
                self.kappa,
                self.epsilon_threshold - self.epsilon_shape,
                self.method,
                self._bits,
                seeded=self.seeded,
                correction="overshoot" if self.correction == "mse" else self.correction,
                c=self._c,
                score=self.score,
            )
            # post-processing of the released index, after the paper's score only (module
            # notes of mechanisms.tops._threshold: after the scale-free score it costs)
            if self.correction == "mse" and self.threshold_release.score == "paper":
                index = mse_index(
                    self.candidates,
                    local_slope(self.threshold_release, self._c),
                    self.threshold_release.index,
                    time_lag=self.time_lag,
                    noise=self._mse_noise,
                    length2=mean_square_length(self.horizon),
                )
                self.threshold_release = replace(
                    self.threshold_release,
                    threshold=float(self.candidates[index]),
                    index=index,
                    correction="mse",
                )
            self.threshold = chosen = self.threshold_release.threshold
            if self._deferred:  # sequential on the prefix: θ, then the shape given θ
                self.shape_release = choose_shape(
                    prefix,
                    threshold=self.threshold,
                    horizon=self.horizon,
                    epsilon_perturb=self.epsilon_perturb,
                    fanout=self.fanout,
                    epsilon=self.epsilon_shape,
                    bits=self._bits,
                    levels=self.levels,
                    resolution=self.shape_resolution,
                )
                self.leaf_size = self.shape_release.leaf_size
                self.levels = self.shape_release.levels
            self._start_perturber()
        if arr.size == 0:
            return _empty_update(start, chosen)
        return self._perturb(arr, start, chosen)

    def _perturb(self, arr: np.ndarray, start: int, chosen: float | None) -> TopsUpdate:
        hier, sm, g = self._hier, self._smoother, self.leaf_size
        first = hier.steps
        estimates, nodes = hier.extend(hier.units(arr))
        preds = np.concatenate(([sm.prediction], sm.feed(estimates)))
        values = block_values(preds, estimates, g, first, arr.size)
        self._seen += arr.size
        self._values.append(values)
        for level, _index, vals in nodes:
            self._nodes[level].append(vals)
        levels = [np.full(v.size, h, dtype=np.int64) for h, _, v in nodes]
        indices = [k + np.arange(v.size, dtype=np.int64) for _, k, v in nodes]
        return TopsUpdate(
            start=start,
            values=values,
            node_levels=np.concatenate(levels) if nodes else np.empty(0, dtype=np.int64),
            node_indices=np.concatenate(indices) if nodes else np.empty(0, dtype=np.int64),
            node_values=np.concatenate([v for *_, v in nodes]) if nodes else np.empty(0),
            threshold=chosen,
        )

    # -- output --------------------------------------------------------------------------
    def release(self) -> TopsRelease:
        """Everything released so far, as a :class:`TopsRelease` (the stream may continue)."""
        if self._hier is None:
            raise DomainError(
                "ToPSStream.release needs the threshold: push at least time_lag values first."
            )
        values = np.concatenate(self._values) if self._values else np.empty(0)
        self._values = [values]
        nodes = []
        for h in range(self.levels):
            nodes.append(np.concatenate(self._nodes[h]) if self._nodes[h] else np.empty(0))
            self._nodes[h] = [nodes[-1]]
        hier = self._hier
        return TopsRelease(
            values=values.copy(),
            nodes=tuple(a.copy() for a in nodes),
            threshold=float(self.threshold),
            threshold_release=self.threshold_release,
            shape_release=self.shape_release,
            shape_rule=self.shape_rule_used,
            time_lag=self.time_lag,
            leaf_size=self.leaf_size,
            fanout=self.fanout,
            levels=self.levels,
            tree_size=hier.tree_size,
            noise=hier.noise,
            smoother=self.smoother_name,
            epsilon_threshold=self.epsilon_threshold,
            epsilon_perturb=self.epsilon_perturb,
            bound=self.bound,
            guarantee=self.guarantee,
            seeded=self.seeded,
        )


def _record(guarantee: PrivacyGuarantee, src: object, seeded: bool) -> PrivacyRecord:
    """The privacy record of a ToPS stream or release (public parameters only)."""
    return PrivacyRecord.from_guarantee(
        guarantee,
        mechanism="tops" if src.epsilon_threshold else "tops-perturb",
        parameters={
            "time_lag": src.time_lag,
            "fanout": src.fanout,
            "leaf_size": src.leaf_size,
            "levels": src.levels,
            "shape_rule": src.shape_rule_used,
            "epsilon_threshold": src.epsilon_threshold,
            "epsilon_perturb": src.epsilon_perturb,
        },
        bound=src.bound,
        seeded=seeded,
    )
