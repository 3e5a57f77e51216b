"""ToPS perturber: a pruned F-ary hierarchy made consistent online ([ToPS21] §3; tops-notes §2).

Shape (fixed before the perturber reads any value)
--------------------------------------------------
Leaves are blocks of g consecutive (clipped) steps; a level-ℓ node covers g·Fˡ steps. By
default g and L are chosen by the predicted range-query MSE with the smoother's error
(``_shape.py``, from a private statistic of the prefix). [ToPS21]'s rule (``shape_rule="paper"``):
g is the power of F minimising the pruning objective (:func:`tops_leaf_size`)

    2·(F − 1)·(log_F(r/x))³/ε_r² + x²/36

(both terms scale with θ², which cancels): we evaluate it at every power Fᵏ ≤ r and keep the
smallest (the objective is unimodal in x, so this is its continuous minimiser rounded to the
better of the two neighbouring powers). A tree has L levels and covers T = g·F^{L−1} steps; when
a stream outgrows a tree, a new tree of the same shape starts (unbounded streams, and a forest of
⌈r/T⌉ trees over the horizon): each value lies in exactly one tree. L (:func:`tops_levels`) is
the number of levels, between 1 and the smallest count with one tree covering r, that minimises
the noise variance of a uniform random range query over the horizon, L²·E[Σₖ cₖ(Qₖ − Qₖ₊₁)]
(``_tops_variance.py``: exact for the consistent forest, averaged over 4096 public random
queries; the scale is ∝ L). [ToPS21]'s code takes ⌊log_F(r/g)⌋ levels and a one-tree cover
takes ⌈log_F(r/g)⌉ + 1; neither is best everywhere (at r = 2²⁰, g = 256 the one-tree cover has
1.5× the noise of L = 3).

Noise and privacy
-----------------
Values are clipped to θ and snapped to the lattice γℤ (as in the BT, ``_tree.py``), so node sums
are exact integers of γ. Each value lies in exactly one node per level, so the vector of the
tree's node sums has L1 sensitivity ≤ L·θ; every node gets :class:`~mechanisms.LaplaceNoise` with
``sensitivity=L·θ`` (scale (Lθ + γ)/ε_r: ε_r split evenly over the L levels) and the noisy tree
y = s + η is ε_r-DP (Laplace mechanism; trees cover disjoint steps: parallel composition).

Consistency, online ([HRMS10] §4; [ToPS21] §3)
--------------------------------------------
With equal node variances the weighted least-squares (BLUE) projection P of a complete F-ary
tree is two linear passes (:func:`consistent_tree`): up, zₗ = wₗ·yₗ + (1 − wₗ)·Σ z_children with
wₗ = F·Vₗ₋₁/(F·Vₗ₋₁ + 1), Vₗ = wₗ (variances in units of one node's, V₀ = 1); down,
h̄_child = z_child + (h̄_parent − Σ z_children)/F. Because the true tree s is consistent, P(s + η)
= s + P(η): the noise of the whole fixed-shape tree is drawn and projected once, when the tree
starts, and each node is released as s(node) + P(η)(node) the moment its interval completes,
which is exactly the offline consistent answer. Lattice: P(η) at the *leaves* is rounded to γℤ
and every node's noise is the sum of its leaves', so released nodes are exact lattice values and
children sum *exactly* to their parent. In exact arithmetic round_γ(P(y)) = s + round_γ(P(η)) is
a function of y (post-processing); we compute P(η) in double precision, whose relative error
≈ 2⁻⁵² can move a rounding by one lattice step with negligible probability (documented, as for
the noise module). Nodes of an unfinished tree are never released; its completed nodes are the
consistent estimates of the tree padded with zeros, so a stream may stop at any step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core._noise import LaplaceNoise
from ..core._random import BitSource
from ..core._record import PrivacyRecord
from ..core._results import RangeSum, check_range, step_frame, summary_text
from ..core._units import PrivacyGuarantee
from ..core._validation import check_integer, check_positive
from ._threshold import TopsThresholdRelease
from ._variance import leaf_variance_units, mean_query_units

__all__ = [
    "TopsRelease",
    "consistent_tree",
    "tops_leaf_size",
    "tops_levels",
    "tops_noise",
]


def _pruning_objective(x: float, r: int, epsilon: float, fanout: int) -> float:
    depth = math.log(r / x, fanout)
    return 2.0 * (fanout - 1) * depth**3 / epsilon**2 + x * x / 36.0


def tops_leaf_size(horizon: int, epsilon: float, fanout: int = 16) -> int:
    """Leaf size g: the power of F ≤ r minimising the pruning objective (module notes).

    Examples
    --------
    >>> tops_leaf_size(2**20, 0.05), tops_leaf_size(2**20, 1.0)
    (256, 16)
    """
    owner = "tops_leaf_size"
    r = check_integer(horizon, "horizon", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    f = check_integer(fanout, "fanout", owner, minimum=2)
    best, best_value, x = 1, math.inf, 1
    while x <= r:
        value = _pruning_objective(x, r, eps, f)
        if value < best_value:
            best, best_value = x, value
        x *= f
    return best


def _max_levels(r: int, g: int, f: int) -> int:
    levels, span = 1, g
    while span < r:
        span *= f
        levels += 1
    return levels


#: Largest number of leaves of one tree (its noise is drawn and projected at once).
MAX_TREE_LEAVES = 1 << 24


def max_levels(fanout: int) -> int:
    """Most levels a tree may have: F^{L−1} ≤ :data:`MAX_TREE_LEAVES`."""
    levels = 1
    while fanout**levels <= MAX_TREE_LEAVES:
        levels += 1
    return levels


def tops_levels(horizon: int, leaf_size: int, fanout: int = 16) -> int:
    """L minimising the noise of a random range query over the horizon (module notes).

    Examples
    --------
    >>> tops_levels(2**20, 256), tops_levels(2**20, 16), tops_levels(456_133, 256)
    (3, 4, 3)
    """
    owner = "tops_levels"
    r = check_integer(horizon, "horizon", owner)
    g = check_integer(leaf_size, "leaf_size", owner)
    f = check_integer(fanout, "fanout", owner, minimum=2)
    top = min(_max_levels(r, g, f), max_levels(f))
    cost = [h * h * mean_query_units(r, g, f, h) for h in range(1, top + 1)]
    return int(np.argmin(cost)) + 1


def tops_noise(*, threshold: float, epsilon: float, levels: int, tree_size: int) -> LaplaceNoise:
    """The noise of every node: sensitivity L·θ, budget ε_r (module notes)."""
    scale = levels * threshold / epsilon
    return LaplaceNoise(
        sensitivity=levels * threshold,
        epsilon=epsilon,
        magnitude=tree_size * (threshold + 64.0 * scale),
    )


def consistent_tree(nodes: Sequence[np.ndarray], fanout: int) -> tuple[np.ndarray, ...]:
    """BLUE of a complete F-ary tree with equal node variances ([HRMS10] §4, two passes).

    ``nodes[ℓ]`` holds the level-ℓ values (leaves first); ``nodes[ℓ].size`` must be
    ``F·nodes[ℓ + 1].size``. Returns consistent values (children sum to their parent) equal to
    the ordinary least-squares fit of leaf values to all nodes.
    """
    f = int(fanout)
    z = [np.array(nodes[0], dtype=np.float64)]
    var = 1.0
    for level in range(1, len(nodes)):
        kids = z[-1].reshape(-1, f).sum(axis=1)
        w = f * var / (f * var + 1.0)  # inverse-variance weight of the node's own value
        z.append(w * np.asarray(nodes[level], dtype=np.float64) + (1.0 - w) * kids)
        var = w
    out = [np.array(v) for v in z]
    for level in reversed(range(len(out) - 1)):
        kids = z[level].reshape(-1, f)
        gap = (out[level + 1] - kids.sum(axis=1)) / f
        out[level] = (kids + gap[:, None]).ravel()
    return tuple(out)


class Hierarchy:
    """The online perturber: fixed-shape trees, noise drawn and projected once per tree.

    Internal engine of :class:`~mechanisms.ToPSStream` (validated inputs only). ``extend``
    takes lattice units of clipped values and returns the consistent estimates of the leaves
    that completed and the newly released nodes.
    """

    def __init__(
        self,
        *,
        threshold: float,
        epsilon: float,
        fanout: int,
        leaf_size: int,
        levels: int,
        bits: BitSource,
    ) -> None:
        self.fanout, self.leaf_size, self.levels = fanout, leaf_size, levels
        self.tree_leaves = fanout ** (levels - 1)
        self.tree_size = leaf_size * self.tree_leaves
        self.noise = tops_noise(
            threshold=threshold, epsilon=epsilon, levels=levels, tree_size=self.tree_size
        )
        self.gamma = float(self.noise.granularity)
        self.top = math.floor(threshold / self.gamma)
        self.steps = 0
        self.trees = 0
        self._bits = bits
        self._open = 0
        self._noise_units: list[np.ndarray] = []
        self._truth: list[np.ndarray] = []

    def units(self, values: np.ndarray) -> np.ndarray:
        """Values (in [0, B]) clipped to θ, as int64 multiples of γ."""
        u = np.rint(np.asarray(values, dtype=np.float64) / self.gamma)
        np.clip(u, 0, self.top, out=u)
        return u.astype(np.int64)

    def _start_tree(self) -> None:
        f, levels = self.fanout, self.levels
        sizes = [f ** (levels - 1 - h) for h in range(levels)]
        draws = self.noise.sample(sum(sizes), self._bits)  # leaves first, then upwards
        cuts = np.cumsum([0, *sizes])
        noisy = [draws[cuts[h] : cuts[h + 1]] for h in range(levels)]
        leaves = np.rint(consistent_tree(noisy, f)[0] / self.gamma).astype(np.int64)
        units = [leaves]
        for _ in range(1, levels):
            units.append(units[-1].reshape(-1, f).sum(axis=1))
        self._noise_units = units
        self._truth = [np.zeros(s, dtype=np.int64) for s in sizes]
        self.trees += 1

    def extend(self, units: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
        """Consume clipped lattice units; return (new leaf estimates, new nodes).

        Each new node is ``(level, first global index, values)``: level-ℓ node k covers the
        released steps [k·g·Fˡ, (k + 1)·g·Fˡ).
        """
        g, f, size = self.leaf_size, self.fanout, self.tree_size
        leaves: list[np.ndarray] = []
        nodes: list[tuple[int, int, np.ndarray]] = []
        k, n = 0, units.size
        while k < n:
            pos = self.steps % size
            if pos == 0 and self.steps // size == self.trees:
                self._start_tree()
            take = min(n - k, size - pos)
            chunk = units[k : k + take]
            lo, hi = pos // g, (pos + take) // g  # leaves completing: [lo, hi)
            if hi > lo:
                cs = np.concatenate(([0], np.cumsum(chunk)))
                ends = np.arange(lo + 1, hi + 1, dtype=np.int64) * g - pos
                starts = np.concatenate(([0], ends[:-1]))
                sums = cs[ends] - cs[starts]
                sums[0] += self._open
                self._open = int(cs[take] - cs[ends[-1]])
                base = (self.trees - 1) * self.tree_leaves
                self._truth[0][lo:hi] = sums
                for h in range(self.levels):
                    a, b = lo // f**h, hi // f**h
                    if a == b:
                        break
                    if h:
                        kids = self._truth[h - 1][a * f : b * f]
                        self._truth[h][a:b] = kids.reshape(-1, f).sum(axis=1)
                    vals = (self._truth[h][a:b] + self._noise_units[h][a:b]) * self.gamma
                    nodes.append((h, base // f**h + a, vals))
                    if h == 0:
                        leaves.append(vals)
            else:
                self._open += int(chunk.sum())
            self.steps += take
            k += take
        est = np.concatenate(leaves) if leaves else np.empty(0)
        return est, nodes


def cover_sum(nodes: Sequence[np.ndarray], lo: int, hi: int, fanout: int) -> float:
    """Σ of the complete leaves [lo, hi) by the canonical decomposition: at most 2(F − 1)
    released nodes per level, never above the top level (trees are not merged)."""
    total = 0.0
    f = fanout
    for level, arr in enumerate(nodes):
        if lo >= hi:
            break
        if level == len(nodes) - 1:
            total += float(arr[lo:hi].sum())
            break
        up_lo, up_hi = -(-lo // f) * f, (hi // f) * f
        if up_lo >= up_hi:
            total += float(arr[lo:hi].sum())
            break
        total += float(arr[lo:up_lo].sum()) + float(arr[up_hi:hi].sum())
        lo, hi = up_lo // f, up_hi // f
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsRelease:
    """A ToPS release: θ, the consistent hierarchy and the smoothed per-step values."""

    values: np.ndarray
    """Smoothed value of every released step: ``values[k]`` is input step m + k (the raw
    output; :meth:`to_frame` aligns it to the input). Each complete leaf block sums to its
    consistent estimate."""
    nodes: tuple[np.ndarray, ...]
    """Consistent estimates of the complete nodes: ``nodes[ℓ][k]`` covers released steps
    [k·g·Fˡ, (k + 1)·g·Fˡ); children sum exactly to their parent (lattice values)."""
    threshold: float
    """θ every released value was clipped to."""
    threshold_release: TopsThresholdRelease | None
    """The optimizer's release (None when θ was given)."""
    time_lag: int
    """m, the values read by the threshold optimizer only."""
    leaf_size: int
    """g, steps per leaf block (a power of F)."""
    fanout: int
    """F."""
    levels: int
    """L, levels per tree (ε_r is split evenly over them)."""
    tree_size: int
    """T = g·F^{L−1}, steps per tree (a new tree starts every T steps)."""
    noise: LaplaceNoise
    """Noise of every node before consistency (sensitivity L·θ, ε_r)."""
    smoother: str
    """The smoother that produced ``values``."""
    epsilon_threshold: float
    """ε_θ of the threshold (0 when θ was given)."""
    epsilon_perturb: float
    """ε_r of the perturber."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level max(ε_θ, ε_r)."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""
    shape_release: object = None
    """The smoothing rule's :class:`~mechanisms.tops._shape.TopsShape` (None for another rule)."""
    shape_rule: str = "paper"
    """How g and L were chosen: ``"smoothing"``, ``"paper"`` or ``"given"``."""
    n: int = field(init=False)
    """Number of released steps (n − m)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.values.size))
        for arr in (self.values, *self.nodes):
            arr.setflags(write=False)

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, B, mechanism, seeded...)."""
        from ._stream import _record  # _stream imports this module

        return _record(self.guarantee, self, self.seeded)

    @property
    def shape_rule_used(self) -> str:
        """Alias of :attr:`shape_rule` (the stream's attribute name, read by the record)."""
        return self.shape_rule

    @property
    def blocks(self) -> np.ndarray:
        """Consistent estimates of the complete leaf blocks (``nodes[0]``)."""
        return self.nodes[0]

    @property
    def leaf_variance(self) -> float:
        """Noise variance of one consistent leaf estimate (closed form, ``_tops_tree.py``)."""
        return self.noise.variance * leaf_variance_units(self.levels, self.fanout)

    def range_sum(self, i: int, j: int) -> RangeSum:
        """Estimated sum of input steps i..j (0-based, inclusive), m ≤ i ≤ j < m + n.

        Indices count input steps (the one rule of :mod:`mechanisms.core._results`); the
        first m = ``time_lag`` are withheld. Complete leaf blocks inside the range are
        answered by the canonical decomposition of the consistent hierarchy (at most
        2(F − 1) nodes per level); the partial blocks at either end, and steps after the last
        complete block, by the smoothed values. ``std_error`` is NaN: the smoothed partial
        blocks have no closed-form variance (see ``planner.tops_range_error`` for the
        predicted error of a random range).
        """
        m = self.time_lag
        i, j = check_range(i, j, first=m, stop=m + self.n, owner="TopsRelease.range_sum")
        return RangeSum(self._released_range_sum(i - m, j - m))

    def to_frame(self, index: object = None):
        """One row per input step: ``value``, the smoothed release (NaN for the m withheld
        steps); ``index`` is the input's index (default: a ``step`` RangeIndex)."""
        return step_frame(
            {"value": self.values},
            n=self.time_lag + self.n,
            time_lag=self.time_lag,
            index=index,
            owner="TopsRelease.to_frame",
            result=self,
        )

    def summary(self) -> str:
        """A short text table of the release (released values and public parameters)."""
        rows = [
            ("steps (withheld + released)", self.time_lag + self.n),
            ("time lag m (withheld steps)", self.time_lag),
            ("bound B", self.bound),
            ("threshold θ (released)", self.threshold),
            ("epsilon θ (threshold)", self.epsilon_threshold),
            ("epsilon r (perturber)", self.epsilon_perturb),
            ("fan-out F, leaf size g, levels L", f"{self.fanout}, {self.leaf_size}, {self.levels}"),
            ("shape rule", self.shape_rule),
            ("Laplace scale b per node", self.noise.scale),
            ("smoother", self.smoother),
            ("released total", float(self.values.sum())),
        ]
        return summary_text("ToPS release [ToPS21]", rows, result=self)

    def _released_range_sum(self, i: int, j: int) -> float:
        """The sum over released steps i..j (positions in ``values``)."""
        g = self.leaf_size
        lo = -(-i // g)
        hi = min((j + 1) // g, self.nodes[0].size)
        if lo >= hi:
            return float(self.values[i : j + 1].sum())
        head = float(self.values[i : lo * g].sum())
        tail = float(self.values[hi * g : j + 1].sum())
        return head + cover_sum(self.nodes, lo, hi, self.fanout) + tail
