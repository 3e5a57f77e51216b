"""One shape for every result (issue 12): `range_sum` gives a RangeSum; `to_frame`, `summary`.

Every ``*Release``, ``*Plan`` and ``*Fit`` of the toolkit answers the same three calls; the
helpers here keep them alike instead of repeating them in every class.

Indexing rule (the one rule, see ``docs/indexing.md``)
------------------------------------------------------
A step index counts **input steps**, from 0: position k is the k-th value of the stream that
was released. ``range_sum(i, j)``, the rows of ``to_frame()``, the CLI's values file and
``dpstream query --range`` all use it. The first m = ``time_lag`` steps of a release with a
time lag are withheld (read by the threshold only): their rows are NaN and a range starting
inside them is an error that says where the released steps start. The only arrays over the
released steps alone are the raw mechanism outputs ``TopsRelease.values``,
``ToplRelease.values`` and the ToPS tree ``nodes``: element k is input step m + k.

Privacy: these helpers format released values and public parameters only; every caller passes
them explicitly (never "all fields", which could include analysis-only values).
"""

from __future__ import annotations

import math
import textwrap
from numbers import Integral

import numpy as np

from ._errors import ParameterError

__all__ = ["RangeSum", "check_range", "step_frame", "summary_text", "table_frame"]

_WIDTH = 64


class RangeSum(float):
    """A range-sum estimate that is a float, carrying its standard error.

    Arithmetic and comparisons use the estimate (``rel.range_sum(i, j) - truth`` works as
    before). ``std_error`` is the noise's standard deviation of the estimate where the release
    knows it in closed form (it excludes clipping/truncation bias), NaN where it does not.

    Examples
    --------
    >>> s = RangeSum(10.0, 2.0)
    >>> s + 1.0, s.estimate, s.std_error
    (11.0, 10.0, 2.0)
    """

    def __new__(cls, estimate: float, std_error: float = math.nan) -> RangeSum:
        out = super().__new__(cls, estimate)
        object.__setattr__(out, "std_error", float(std_error))
        return out

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RangeSum is immutable")

    @property
    def estimate(self) -> float:
        """The estimate as a plain float."""
        return float(self)

    @property
    def variance(self) -> float:
        """``std_error²`` (NaN where unknown)."""
        return self.std_error**2

    def __repr__(self) -> str:
        return f"RangeSum(estimate={float(self)!r}, std_error={self.std_error!r})"

    def __reduce__(self) -> tuple:
        return (RangeSum, (float(self), self.std_error))


def check_range(i: object, j: object, *, first: int, stop: int, owner: str) -> tuple[int, int]:
    """Validate input steps i ≤ j of a range inside the released steps [first, stop).

    ``first`` is the time lag m (0 without one). The message says that indices count input
    steps and where the released ones start (public facts only).
    """
    last = stop - 1
    note = (
        f" (input steps, 0-based; the first {first} steps are withheld by the time lag)"
        if first
        else " (input steps, 0-based)"
    )
    for name, value, low in (("i", i, first), ("j", j, None)):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ParameterError(
                f"The '{name}' parameter of {owner} must be an int. Got {value!r} instead."
            )
        lo = low if low is not None else max(int(i), first)
        if not lo <= int(value) <= last:
            raise ParameterError(
                f"The '{name}' parameter of {owner} must be an int in [{lo}, {last}]{note}. "
                f"Got {value!r} instead."
            )
    return int(i), int(j)


def _with_privacy(frame, result: object):
    """Carry the result's privacy record, when it has one, in ``frame.attrs["privacy"]``
    (DESIGN.md: every released output carries its record)."""
    to_dict = getattr(getattr(result, "privacy", None), "to_dict", None)
    if callable(to_dict):
        frame.attrs["privacy"] = to_dict()
    return frame


def step_frame(
    columns: dict[str, np.ndarray],
    *,
    n: int,
    time_lag: int,
    index: object,
    owner: str,
    result: object = None,
):
    """A frame with one row per input step (NaN for the ``time_lag`` withheld steps).

    Each column holds either ``n`` values (already aligned to the input) or ``n − time_lag``
    (the released steps; padded in front). ``index`` is the input's index (e.g. its
    ``DatetimeIndex``) or None for a ``RangeIndex`` named ``step``. The privacy record of
    ``result``, if any, goes to ``attrs["privacy"]``.
    """
    import pandas as pd

    if index is None:
        idx = pd.RangeIndex(n, name="step")
    else:
        idx = pd.Index(index)
        if len(idx) != n:
            raise ParameterError(
                f"The 'index' parameter of {owner} must have one label per input step ({n}). "
                f"Got {len(idx)} labels instead. Pass the index of the released stream."
            )
    data = {}
    for name, arr in columns.items():
        arr = np.asarray(arr, dtype=np.float64)
        if arr.size == n - time_lag and time_lag:
            arr = np.concatenate([np.full(time_lag, np.nan), arr])
        data[name] = arr
    return _with_privacy(pd.DataFrame(data, index=idx), result)


def table_frame(
    data: dict[str, object],
    *,
    index: object = None,
    index_name: str | None = None,
    result: object = None,
):
    """A pandas frame of public columns (one row per candidate, bin or parameter); pandas is
    imported here so that ``mechanisms`` itself imports numpy and scipy only. The privacy
    record of ``result``, if any, goes to ``attrs["privacy"]``."""
    import pandas as pd

    frame = pd.DataFrame(data, index=index)
    if index_name is not None:
        frame.index.name = index_name
    return _with_privacy(frame, result)


def _cell(value: object) -> str:
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return f"{int(value):,}"
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    return str(value)


def summary_text(title: str, rows: list[tuple[str, object]], *, result: object = None) -> str:
    """A short two-column text table, like statsmodels' ``results.summary()``.

    ``rows`` are (label, value) pairs of released values and public parameters. The privacy
    line comes from ``result.privacy`` when the result has one (its ``describe()``), else from
    ``result.guarantee``; plans that read data say they are not private (``result.private``).
    """
    lines = [title.center(_WIDTH), "=" * _WIDTH]
    for label, value in rows:
        text = _cell(value)
        if len(label) + len(text) + 2 > _WIDTH:
            lines.append(label)
            lines += textwrap.wrap(text, _WIDTH, initial_indent="  ", subsequent_indent="  ")
        else:
            lines.append(f"{label}{text:>{_WIDTH - len(label)}}")
    notes = []
    privacy = getattr(result, "privacy", None)
    guarantee = getattr(result, "guarantee", None)
    if privacy is not None:
        describe = getattr(privacy, "describe", None)
        notes.append("privacy: " + (describe() if callable(describe) else str(privacy)))
    elif guarantee is not None:
        notes.append(f"privacy: {guarantee}")
    if getattr(result, "private", None) is False:
        note = getattr(result, "note", "") or "reads the data it plans from"
        notes.append(f"not a private release: {note}")
    if notes:
        lines.append("-" * _WIDTH)
        for note in notes:
            lines += textwrap.wrap(note, _WIDTH, subsequent_indent="  ")
    lines.append("=" * _WIDTH)
    return "\n".join(lines)
