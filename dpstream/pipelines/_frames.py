"""The input-frame layer shared by every release pipeline (OptStream and the w-event baselines).

A release pipeline receives a *frame*: a ``pandas.DataFrame`` with one column per leaf stream
(or a ``pandas.Series`` for one stream), indexed by time (a ``DatetimeIndex`` or an integer
index), and optionally a hierarchy mapping ``parent -> children`` whose leaves are the frame's
columns ([FV19] §5.2). This module

1. validates the frame (:func:`prepare_frame`): finite values, non-negative loads, values at
   most a declared public bound, at least ``min_length`` steps, strictly increasing time stamps;
   each failure is a :class:`~mechanisms.DomainError` naming the argument, the rule and how many
   entries broke it, never a value;
2. resolves the hierarchy (:func:`resolve_hierarchy`) into a :class:`postproc.Hierarchy`
   with clear errors for unknown names and missing leaves;
3. derives every aggregate from the leaves (node order = ``Hierarchy.nodes``, breadth-first);
4. reshapes node streams into ``(n_periods, n_nodes, w)`` arrays (:func:`to_periods`) and back
   into a frame aligned to the input index (:meth:`StreamFrame.to_frame`).

Parent columns in the input
---------------------------
A frame may carry a parent's column (``load_regional()`` carries ``national``). It is accepted
only if it equals the sum of its leaves (relative tolerance 1e-9 of the column's largest
magnitude, i.e. float round-off); the released aggregate is always derived from the leaves.
A parent column that disagrees with its leaves is a :class:`~mechanisms.DomainError` (the
first disagreeing step, no count): drop it, or fix the data.

Lengths not divisible by ``w``
------------------------------
The last, partial period (``r = T mod w`` steps) is released, not dropped or refused:
:func:`to_periods` returns the full periods and the partial tail separately
(:class:`Periods`). Pipelines release the tail as a shorter period with the *same* noise
calibration as a full period (the window ``w``, not ``r``). This is still w-event private:
periods are disjoint and every mechanism's loss bound holds for any change supported in a
period of length ``r <= w``, including a window straddling the boundary between the last full
period and the tail (see each mechanism's *Privacy* note).

Neighbours across columns (the one neighbour relation of every pipeline)
------------------------------------------------------------------------
Columns are disjoint populations (regions, feeders). Two frames are neighbours ([FV19] Def. 3,
§5.1; Def. 2 with Δ = B) when they differ only within one window of ``w`` consecutive steps
and, at each step of it, in *one individual's* value, by at most Δ (α, or the bound B). The
individual -- hence the leaf column that moves -- **may differ from step to step**: at each
step one leaf moves by at most Δ, and its ancestors with it, so each level of a hierarchy
moves by at most Δ per step in total, at most w·Δ over the window, spread over any of its
nodes. Every mechanism is calibrated to that: OptStream shares one sample set per level
(``mechanisms.optstream``), Laplace and PeGaSus have losses linear in the changes, and DFT
carries the factor of changes spread over the n nodes of a level
(``mechanisms.WEventDFT(streams=n)``). Levels compose sequentially, ε/h each ([FV19]
Theorem 13). Without a hierarchy every column is a leaf of one flat level that gets the whole ε
(the same per-level argument, not parallel composition).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms import DomainError, ParameterError, PrivacyUnit, WAlphaIndistinguishability, WEvent
from mechanisms.core._validation import check_integer, check_positive
from postproc import Hierarchy

__all__ = [
    "Periods",
    "StreamFrame",
    "ValueNeighbours",
    "from_periods",
    "prepare_frame",
    "resolve_hierarchy",
    "to_periods",
    "value_neighbours",
]

_PARENT_RTOL = 1e-9
#: Policies for missing readings (NaN): refuse, count as 0, leave unmeasured (public mask).
_MISSING = ("error", "zero", "unmeasured")


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamFrame:
    """A validated input frame: every node's stream as one array, plus how to rebuild a frame."""

    index: pd.Index
    """The input's time index (returned frames are aligned to it)."""
    nodes: tuple[str, ...]
    """Node names, column order of :attr:`values` (``Hierarchy.nodes`` or the input columns)."""
    leaves: tuple[str, ...]
    """The leaf streams (the input's data columns)."""
    values: np.ndarray
    """Read-only float64 array (n_steps, n_nodes): leaves as given, aggregates derived."""
    hierarchy: Hierarchy | None
    """The resolved hierarchy, or None for independent columns (one flat level)."""
    level: np.ndarray
    """Read-only int array (n_nodes,): depth of each node (0 = root; all 0 without hierarchy)."""
    series_name: object
    """Name of the input Series when the input was a Series (returned as a Series), else None."""
    is_series: bool
    """True when the input was a ``pandas.Series``."""
    observed: np.ndarray | None = None
    """Read-only bool array (n_steps, n_nodes), False where a leaf's reading is missing and
    left *unmeasured* (``missing="unmeasured"``; aggregates are sums over the observed leaves,
    always True); None when every reading is present."""

    @property
    def n_steps(self) -> int:
        """Number of time steps T."""
        return int(self.values.shape[0])

    @property
    def n_nodes(self) -> int:
        """Number of released streams (nodes)."""
        return len(self.nodes)

    @property
    def n_levels(self) -> int:
        """The ``h`` of [FV19] Theorem 13: levels of the hierarchy (1 without hierarchy)."""
        return 1 if self.hierarchy is None else self.hierarchy.n_levels

    def to_frame(self, values: np.ndarray) -> pd.DataFrame | pd.Series:
        """Wrap released values (n_steps, n_nodes) as a frame aligned to the input index.

        A Series input without hierarchy comes back as a Series with the input's name.
        """
        arr = np.asarray(values, dtype=np.float64)
        if arr.shape != (self.n_steps, self.n_nodes):
            raise ValueError(
                f"released values have shape {arr.shape}; expected {(self.n_steps, self.n_nodes)}"
            )
        if self.is_series and self.hierarchy is None:
            return pd.Series(arr[:, 0].copy(), index=self.index.copy(), name=self.series_name)
        # one copy, in pandas' own layout (pandas 3 copies an ndarray by default: two copies,
        # 1.16 GB each at 100,000 feeders x 30 days; issue 22)
        return pd.DataFrame(
            np.array(arr, order="F"), index=self.index.copy(), columns=list(self.nodes), copy=False
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Periods:
    """Node streams cut into w-periods: full periods plus the partial tail (if any)."""

    full: np.ndarray
    """Array (n_full, n_nodes, w): the complete w-periods, in time order."""
    tail: np.ndarray
    """Array (n_nodes, r) with ``0 <= r < w``: the last, partial period (r = 0: none)."""
    w: int
    """The period length."""

    @property
    def n_steps(self) -> int:
        """Total number of steps covered (``n_full * w + r``)."""
        return int(self.full.shape[0] * self.w + self.tail.shape[1])

    @property
    def n_periods(self) -> int:
        """Number of released periods, the tail counting as one."""
        return int(self.full.shape[0]) + (1 if self.tail.shape[1] else 0)


def to_periods(values: np.ndarray, w: int) -> Periods:
    """Cut node streams (n_steps, n_nodes) into w-periods (n_full, n_nodes, w) plus a tail.

    Examples
    --------
    >>> p = to_periods(np.arange(10.0).reshape(5, 2), 2)
    >>> p.full.shape, p.tail.shape, p.tail.tolist()
    ((2, 2, 2), (2, 1), [[8.0], [9.0]])
    """
    arr = np.asarray(values, dtype=np.float64)
    w = check_integer(w, "w", "to_periods")
    n_steps, n_nodes = arr.shape
    n_full = n_steps // w
    full = arr[: n_full * w].reshape(n_full, w, n_nodes).transpose(0, 2, 1)
    tail = arr[n_full * w :].T
    return Periods(full=_frozen(full), tail=_frozen(tail), w=w)


def from_periods(full: np.ndarray, tail: np.ndarray | None = None) -> np.ndarray:
    """Inverse of :func:`to_periods`: (n_full, n_nodes, w) [+ (n_nodes, r)] -> (T, n_nodes)."""
    full = np.asarray(full, dtype=np.float64)
    n_full, n_nodes, w = full.shape
    out = full.transpose(0, 2, 1).reshape(n_full * w, n_nodes)
    if tail is not None and np.asarray(tail).size:
        out = np.concatenate([out, np.asarray(tail, dtype=np.float64).T], axis=0)
    return out


def resolve_hierarchy(
    hierarchy: object, columns: Sequence[str], owner: str, name: str = "hierarchy"
) -> Hierarchy | None:
    """Turn a ``{parent: [children]}`` mapping (or a Hierarchy, or None) into a Hierarchy.

    The leaves must be exactly the frame's data columns; a column may also name a parent (it is
    then checked against its leaves by :func:`prepare_frame`). Errors (``ParameterError``) name
    the unknown or missing nodes.
    """
    if hierarchy is None:
        return None
    if isinstance(hierarchy, Hierarchy):
        tree = hierarchy
    elif isinstance(hierarchy, Mapping):
        try:
            tree = Hierarchy(children={k: list(v) for k, v in hierarchy.items()})
        except TypeError:
            raise ParameterError(
                f"The {name!r} parameter of {owner} must map parent names to lists of child "
                "names, e.g. {'national': ['north', 'south']}."
            ) from None
        except ParameterError as exc:
            raise ParameterError(
                f"The {name!r} parameter of {owner} is not a tree: {exc}"
            ) from None
    else:
        raise ParameterError(
            f"The {name!r} parameter of {owner} must be a mapping parent -> children, a "
            f"postproc.Hierarchy or None. Got {type(hierarchy).__name__} instead."
        )
    cols = [str(c) for c in columns]
    parents = set(tree.children)
    leaves = set(tree.leaves)
    col_set = set(cols)  # a set: 100,000 leaves against 100,000 columns in linear time
    missing = [leaf for leaf in tree.leaves if leaf not in col_set]
    if missing:
        raise ParameterError(
            f"The {name!r} parameter of {owner} has leaves that are not frame columns: "
            f"{missing[:5]}{' ...' if len(missing) > 5 else ''}. Leaves are the frame's columns; "
            "check the names, or list them as parents with their own children."
        )
    unknown = [c for c in cols if c not in leaves and c not in parents]
    if unknown:
        raise ParameterError(
            f"The {name!r} parameter of {owner} does not name the frame column(s) "
            f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}: every column must be a leaf of "
            "the hierarchy (or a parent, checked against its leaves). Add them to the hierarchy "
            "or drop them from the frame."
        )
    return tree


def _check_index(index: pd.Index, name: str, owner: str) -> None:
    if isinstance(index, pd.DatetimeIndex):
        if index.hasnans:
            raise DomainError(
                f"The {name!r} argument of {owner} has {int(index.isna().sum())} missing time "
                "stamp(s) (NaT). Drop or fill those rows."
            )
        stamps = index.asi8
    elif pd.api.types.is_integer_dtype(index.dtype):
        stamps = index.to_numpy()
    else:
        raise DomainError(
            f"The {name!r} argument of {owner} must be indexed by time: a DatetimeIndex or an "
            f"integer index. Got a {type(index).__name__} of dtype {index.dtype}. Set the time "
            "column as index (frame.set_index('time')) or parse it with pandas.to_datetime."
        )
    if stamps.size > 1:
        step = np.diff(stamps)
        back = step < 0
        if back.any():  # the first row out of order (a duplicate may be one symptom of it)
            at = index[int(np.argmax(back)) + 1]
            raise DomainError(
                f"The {name!r} argument of {owner} must have increasing time stamps; the row at "
                f"{at} goes backwards (after a later one). Sort it first (frame.sort_index())."
            )
        dup = step == 0
        if dup.any():
            raise DomainError(
                f"The {name!r} argument of {owner} has a duplicated time stamp (first "
                f"{index[int(np.argmax(dup)) + 1]}). Aggregate or drop the duplicates first."
            )


def prepare_frame(
    frame: object,
    *,
    owner: str,
    hierarchy: object = None,
    bound: float | None = None,
    min_length: int = 1,
    name: str = "frame",
    missing: str = "error",
) -> StreamFrame:
    """Validate a time-indexed frame and derive every node's stream (no noise, no budget).

    Parameters
    ----------
    frame : pandas.DataFrame or pandas.Series
        One column per leaf stream, a DatetimeIndex or integer index, numeric values.
    owner : str
        The public function's name, used in error messages.
    hierarchy : mapping parent -> children, postproc.Hierarchy or None
        Leaves are the frame's columns. None: every column is its own stream.
    bound : float, optional
        Declared public bound B on every *leaf* value: values must lie in [0, B]. Without it,
        values must be finite and non-negative (loads).
    min_length : int, default 1
        Fewest time steps accepted.
    name : str, default "frame"
        The argument's name in error messages.
    missing : {"error", "zero", "unmeasured"}, default "error"
        What a NaN (a missing reading) means: refused; counted as 0; or left *unmeasured*:
        the leaf's value is 0 in every aggregate (aggregates are sums over the observed
        leaves) and :attr:`StreamFrame.observed` marks it, a public mask (``docs/privacy.md``,
        "Missing readings"). ±inf is refused under every policy.

    Returns
    -------
    StreamFrame
        ``values`` (n_steps, n_nodes) in node order, aggregates derived from the leaves.

    Raises
    ------
    DomainError
        Not a frame, non-numeric or empty columns, too few rows, NaN/±inf, negative values,
        values above ``bound``, unsorted/duplicated/missing time stamps, a parent column that
        disagrees with its leaves. Messages give counts, never values.
    ParameterError
        A hierarchy that is not a tree, names unknown columns, or misses leaves.
    """
    is_series = isinstance(frame, pd.Series)
    if is_series:
        series_name = frame.name
        col = "stream" if frame.name is None else str(frame.name)
        frame = frame.to_frame(name=col)
    elif isinstance(frame, pd.DataFrame):
        series_name = None
    else:
        raise DomainError(
            f"The {name!r} argument of {owner} must be a pandas DataFrame (one column per leaf "
            f"stream) or Series. Got {type(frame).__name__} instead."
        )
    if frame.shape[1] == 0:
        raise DomainError(f"The {name!r} argument of {owner} has no columns (no stream).")
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise DomainError(
            f"The {name!r} argument of {owner} has duplicated column names. Rename them."
        )
    min_length = check_integer(min_length, "min_length", owner)
    if bound is not None:
        bound = check_positive(bound, "bound", owner)
    if frame.shape[0] < min_length:
        raise DomainError(
            f"The {name!r} argument of {owner} must hold at least {min_length} time step(s). "
            f"Got {frame.shape[0]}."
        )
    _check_index(frame.index, name, owner)
    non_numeric = [c for c, dt in zip(columns, frame.dtypes, strict=True) if not _numeric(dt)]
    if non_numeric:
        raise DomainError(
            f"The {name!r} argument of {owner} must hold numbers only; column(s) "
            f"{non_numeric[:5]} are not numeric. Convert or drop them."
        )
    if missing not in _MISSING:
        raise ParameterError(
            f"The 'missing' parameter of {owner} must be one of {_MISSING}. Got {missing!r} "
            "instead."
        )
    data = frame.to_numpy(dtype=np.float64, copy=True)
    tree = resolve_hierarchy(hierarchy, columns, owner)
    gaps = np.isnan(data)
    # Messages name the rule and the first offending (column, stamp), never a value or how
    # many private values break it (a count leaks).
    if missing == "error" and gaps.any():
        raise DomainError(
            f"The {name!r} argument of {owner} must hold finite numbers only; first NaN (a "
            f"missing reading) {_where(frame, gaps)}. Fill it, or pass missing='zero' or "
            "missing='unmeasured'."
        )
    data[gaps] = 0.0  # "zero", and "unmeasured": a constant in every neighbour (public mask)
    if not np.isfinite(data).all():
        raise DomainError(
            f"The {name!r} argument of {owner} must hold finite numbers only; first infinite "
            f"entry {_where(frame, ~np.isfinite(data))}. Remove or fix it before releasing."
        )
    if (data < 0).any():
        raise DomainError(
            f"The {name!r} argument of {owner} must hold non-negative loads; first negative "
            f"entry {_where(frame, data < 0)}. Fix the data (or shift it by a public offset) "
            "before releasing."
        )
    if tree is None:
        nodes = tuple(columns)
        leaves = nodes
        values = data
        level = np.zeros(len(nodes), dtype=np.int64)
    else:
        pos = {c: j for j, c in enumerate(columns)}
        leaf_values = data[:, [pos[leaf] for leaf in tree.leaves]]
        # aggregates derived from the leaves (sparse: the dense matrix is nodes x leaves)
        values = np.asarray((tree.sparse_matrix @ leaf_values.T).T)
        for parent in (c for c in columns if c in tree.children):
            given = data[:, pos[parent]]
            derived = values[:, tree.index(parent)]
            tol = _PARENT_RTOL * max(float(np.abs(derived).max(initial=0.0)), 1.0)
            off = np.abs(given - derived) > tol
            if off.any():  # the first step, never how many (a count of private values)
                raise DomainError(
                    f"The {name!r} argument of {owner} has a column {parent!r} that the "
                    "hierarchy lists as a parent, and it differs from the sum of its leaves "
                    f"(first at time stamp {frame.index[int(np.argmax(off))]}). Aggregates are "
                    "derived from the leaves: drop the column or fix the data."
                )
        nodes = tree.nodes
        leaves = tree.leaves
        level = np.array([tree.depth[n] for n in nodes], dtype=np.int64)
        data = leaf_values
    if bound is not None:
        if (data > bound).any():
            raise DomainError(
                f"The {name!r} argument of {owner} must lie in [0, {bound:g}] (the declared "
                "bound); some leaf entries lie above it. Clip the data to the bound or "
                "declare a larger public bound."
            )
    observed = None
    if missing == "unmeasured" and gaps.any():
        observed = np.ones((frame.shape[0], len(nodes)), dtype=bool)
        leaf_gaps = gaps if tree is None else gaps[:, [pos[leaf] for leaf in tree.leaves]]
        cols_of = (
            np.arange(len(nodes)) if tree is None else [tree.index(leaf) for leaf in tree.leaves]
        )
        observed[:, cols_of] = ~leaf_gaps
        observed = _frozen(observed)
    return StreamFrame(
        observed=observed,
        index=frame.index.copy(),
        nodes=tuple(nodes),
        leaves=tuple(leaves),
        values=_frozen(np.asarray(values, dtype=np.float64)),
        hierarchy=tree,
        level=_frozen(level),
        series_name=series_name,
        is_series=is_series,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueNeighbours:
    """The neighbour relation of a release, reduced to what calibrates noise."""

    delta: float
    """Largest change of one value at one step, the same for every node of a hierarchy."""
    unit: PrivacyUnit
    """``WAlphaIndistinguishability(w, alpha)`` or ``WEvent(w)`` (values in [0, bound])."""


def value_neighbours(
    *, w: int, alpha: float | None, bound: float | None, owner: str
) -> ValueNeighbours:
    """Resolve ``alpha`` / ``bound`` into the per-value change Δ that calibrates every noise.

    * ``alpha`` a float > 0 (default of the pipelines, 1.0): (w, α)-indistinguishability
      ([FV19] Def. 3, §5.1): within ``w`` consecutive steps, at each step one leaf's value
      (possibly a different leaf at each step) moves by at most α, so Δ = α (α = 1 is w-event
      privacy for counts, as [FV19] §5.1 notes).
    * ``alpha=None`` (or ``inf``): plain w-event privacy ([FV19] Def. 2) on values in the
      declared public range [0, bound]: within ``w`` steps, at each step one leaf's value may
      be replaced by anything in range, so Δ = bound, and ``bound`` is required.

    The moving leaf's ancestors move with it: each level moves by at most Δ per step in
    total (module Notes, [FV19] Theorem 13).
    """
    w = check_integer(w, "w", owner)
    plain = alpha is None or (isinstance(alpha, float) and alpha == math.inf)
    if not plain:
        alpha = check_positive(alpha, "alpha", owner)
        if bound is not None:
            check_positive(bound, "bound", owner)
        return ValueNeighbours(delta=alpha, unit=WAlphaIndistinguishability(w=w, alpha=alpha))
    if bound is None:
        raise ParameterError(
            f"The 'bound' parameter of {owner} must be a float in (0, inf) when alpha is None "
            "(plain w-event privacy needs a public bound on the values). Got None instead. "
            "Declare a public bound, or give alpha (the largest protected change of one value)."
        )
    bound = check_positive(bound, "bound", owner)
    return ValueNeighbours(delta=bound, unit=WEvent(w=w))


def _where(frame: pd.DataFrame, bad: np.ndarray) -> str:
    """``at column 'c', time stamp t``: the first offending entry (shape only, no value)."""
    step, col = np.argwhere(bad)[0]
    return f"at column {str(frame.columns[col])!r}, time stamp {frame.index[step]}"


def _numeric(dtype: object) -> bool:
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
