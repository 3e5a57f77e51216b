"""Feature sets: partitions of a w-period with a sub-partition order ([FV19] §3.4).

A *feature* is a partition of the w-period ``{0, ..., w-1}``; its *size* ``m`` is the number of
parts. ``F' ≺ F`` (``F'`` is a sub-feature of ``F``) when ``F'`` is obtained by sub-partitioning
``F``. A :class:`FeatureSet` is a chain ``F_1 ≺ F_2 ≺ ... ≺ F_p`` whose first feature is the
singletons (the convention of [FV19] §3.4, "we assume that the first feature always partitions
the data stream w-period into singletons"). Because each feature refines the next, the parts of
all features form a forest (a laminar family), which is what the exact fast path relies on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError
from mechanisms.core._validation import check_integer

__all__ = ["FeatureSet"]

_OWNER = "FeatureSet"

#: Part boundaries of the day-part feature F2 of [FV19] §6 for w = 48 half-hours:
#: [0am-7am), [7am-12pm), [12pm-6pm), [6pm-0am).
_OPTSTREAM_DAY_PARTS = (0, 14, 24, 36, 48)


def _normalise_partition(raw: object, index: int, w: int) -> tuple[tuple[int, ...], ...]:
    """Return one feature as a tuple of sorted parts, checking it partitions ``range(w)``."""
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence) or len(raw) == 0:
        raise ParameterError(
            f"The 'partitions' parameter of {_OWNER} must be a sequence of partitions, each a "
            f"non-empty sequence of parts. Got {type(raw).__name__} for feature {index} instead."
        )
    parts: list[tuple[int, ...]] = []
    seen = np.zeros(w, dtype=np.int64)
    for part in raw:
        if isinstance(part, str | bytes) or not isinstance(part, Sequence | range) or not part:
            raise ParameterError(
                f"The 'partitions' parameter of {_OWNER} must hold non-empty sequences of time "
                f"steps as parts. Feature {index} has a part of type {type(part).__name__} "
                "or an empty part."
            )
        steps = []
        for step in part:
            if isinstance(step, bool) or not isinstance(step, int | np.integer):
                raise ParameterError(
                    f"The 'partitions' parameter of {_OWNER} must hold integer time steps. "
                    f"Feature {index} holds {type(step).__name__} instead."
                )
            if not 0 <= int(step) < w:
                raise ParameterError(
                    f"The 'partitions' parameter of {_OWNER} must hold time steps in [0, {w}). "
                    f"Feature {index} holds {int(step)}."
                )
            steps.append(int(step))
            seen[int(step)] += 1
        parts.append(tuple(sorted(steps)))
    if (seen != 1).any():
        missing = int((seen == 0).sum())
        repeated = int((seen > 1).sum())
        raise ParameterError(
            f"The 'partitions' parameter of {_OWNER} must hold partitions of the w-period "
            f"[0, {w}): every step in exactly one part. Feature {index} misses {missing} "
            f"step(s) and repeats {repeated} step(s)."
        )
    return tuple(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSet:
    """A chain of features ``F_1 ≺ ... ≺ F_p`` over a w-period ([FV19] §3.4, Alg. 4).

    Parameters
    ----------
    w
        Length of the w-period (number of time steps).
    partitions
        The features, finest first. Each is a sequence of parts, each part a sequence of time
        steps in ``[0, w)``. The first feature must be the singletons; every feature must be a
        sub-partition of the next one (``F_i ≺ F_{i+1}``).

    Raises
    ------
    ParameterError
        If a feature is not a partition of ``[0, w)``, the first is not the singletons, or the
        features are not ordered by sub-partitioning.

    Examples
    --------
    >>> fs = FeatureSet.default(48)
    >>> fs.sizes
    (48, 4, 1)
    >>> FeatureSet.from_breaks(6, [(0, 2, 6), (0, 6)]).sizes
    (6, 2, 1)
    """

    w: int
    """Length of the w-period."""
    partitions: tuple[tuple[tuple[int, ...], ...], ...]
    """The features, finest (the singletons) first; each a tuple of parts (sorted steps)."""
    _matrix: np.ndarray = field(init=False, repr=False, compare=False)
    _parent: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        w = check_integer(self.w, "w", _OWNER, minimum=1)
        raw = self.partitions
        if isinstance(raw, str | bytes) or not isinstance(raw, Sequence) or len(raw) == 0:
            raise ParameterError(
                f"The 'partitions' parameter of {_OWNER} must be a non-empty sequence of "
                f"partitions. Got {type(raw).__name__} instead."
            )
        parts = tuple(_normalise_partition(p, i, w) for i, p in enumerate(raw))
        if len(parts[0]) != w:
            raise ParameterError(
                f"The 'partitions' parameter of {_OWNER} must start with the singletons "
                f"(feature F_1 of [FV19] §3.4, {w} parts). Got a first feature with "
                f"{len(parts[0])} parts. Put the singleton partition first."
            )
        # Sub-partition order: each part of F_i lies inside exactly one part of F_{i+1}.
        owner = []
        for feature in parts:
            label = np.empty(w, dtype=np.int64)
            for j, part in enumerate(feature):
                label[list(part)] = j
            owner.append(label)
        for i in range(len(parts) - 1):
            for part in parts[i]:
                if len(set(owner[i + 1][list(part)].tolist())) != 1:
                    raise ParameterError(
                        f"The 'partitions' parameter of {_OWNER} must be ordered by "
                        f"sub-partitioning (F_{i + 1} ≺ F_{i + 2}, [FV19] §3.4): every part of "
                        f"feature {i} must lie inside one part of feature {i + 1}. Sort the "
                        "features finest first and drop features that cross each other."
                    )
        object.__setattr__(self, "w", w)
        object.__setattr__(self, "partitions", parts)
        # Aggregation matrix A_T (n_parts x w) and the parent of each part in the next feature.
        n_parts = sum(len(f) for f in parts)
        matrix = np.zeros((n_parts, w))
        parent = np.full(n_parts, -1, dtype=np.int64)
        row = 0
        offsets = np.cumsum([0] + [len(f) for f in parts])
        for i, feature in enumerate(parts):
            for part in feature:
                matrix[row, list(part)] = 1.0
                if i + 1 < len(parts):
                    parent[row] = offsets[i + 1] + owner[i + 1][part[0]]
                row += 1
        matrix.setflags(write=False)
        parent.setflags(write=False)
        object.__setattr__(self, "_matrix", matrix)
        object.__setattr__(self, "_parent", parent)

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def from_breaks(cls, w: int, breaks: Sequence[Sequence[int]]) -> FeatureSet:
        """Build singletons plus contiguous-interval features from their break points.

        Parameters
        ----------
        w
            Length of the w-period.
        breaks
            One sequence of increasing break points per extra feature, finest first, each
            starting at 0 and ending at ``w``; ``(0, 14, 24, 36, 48)`` is the day-part feature
            ``[0,14), [14,24), [24,36), [36,48)`` of [FV19] §6.
        """
        w = check_integer(w, "w", "FeatureSet.from_breaks", minimum=1)
        partitions: list[list[range]] = [[range(t, t + 1) for t in range(w)]]
        for k, cut in enumerate(breaks):
            cut = [int(c) for c in cut]
            if len(cut) < 2 or cut[0] != 0 or cut[-1] != w or np.any(np.diff(cut) <= 0):
                raise ParameterError(
                    "The 'breaks' parameter of FeatureSet.from_breaks must hold strictly "
                    f"increasing break points from 0 to {w}. Feature {k} is not of that form."
                )
            partitions.append([range(a, b) for a, b in zip(cut[:-1], cut[1:], strict=True)])
        return cls(w=w, partitions=partitions)

    @classmethod
    def default(cls, w: int = 48) -> FeatureSet:
        """The feature set of [FV19] §6: ``F_1 ≺ F_2 ≺ F_3``.

        For ``w = 48`` (a day of half-hours): the singletons; the day parts ``[0,14), [14,24),
        [24,36), [36,48)``; the whole period. For any other ``w`` the day parts have no meaning
        and the default is the singletons and the whole period.
        """
        w = check_integer(w, "w", "FeatureSet.default", minimum=1)
        if w == 48:
            return cls.from_breaks(48, [_OPTSTREAM_DAY_PARTS, (0, 48)])
        if w == 1:
            return cls.from_breaks(1, [])
        return cls.from_breaks(w, [(0, w)])

    # -- derived quantities -------------------------------------------------------------

    @property
    def n_features(self) -> int:
        """Number of features p."""
        return len(self.partitions)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Size ``m_i`` (number of parts) of each feature, finest first."""
        return tuple(len(f) for f in self.partitions)

    @property
    def n_parts(self) -> int:
        """Total number of parts over all features (``sum_i m_i``)."""
        return int(sum(self.sizes))

    @property
    def part_feature(self) -> np.ndarray:
        """Index of the feature each part belongs to, in the flat part order."""
        return np.repeat(np.arange(self.n_features), self.sizes)

    @property
    def matrix(self) -> np.ndarray:
        """Aggregation matrix ``A_T`` (n_parts x w): row j sums the steps of part j."""
        return self._matrix

    @property
    def parent(self) -> np.ndarray:
        """Flat index of the part of the next feature containing each part (-1 for the last)."""
        return self._parent

    def paper_weights(self) -> np.ndarray:
        """The weights ``λ_i = 1/m_i`` of [FV19] Alg. 4 (O1), one per part (flat order).

        ``m_i`` is the size of feature ``F_i``, i.e. its number of parts (``m_1 = w`` for the
        singletons, ``m = 1`` for the whole period), not the size of a part.
        """
        return 1.0 / np.repeat(np.asarray(self.sizes, dtype=np.float64), self.sizes)
