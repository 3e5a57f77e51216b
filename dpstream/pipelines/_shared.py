"""Read-only arrays that a release's ``DataFrame.attrs`` share with every frame derived from it.

pandas deep-copies ``attrs`` into every object derived from a frame: a column (``out[c]``,
``.items()``), a slice, a ``concat``. A national ``k="auto"`` release keeps its measurements
(T, N) there, and an integer-k release its per-period estimates (issue 30): at 100,000 feeders
over a month that is gigabytes copied for each column read. These arrays are never written
after the release, so a read-only view that :func:`copy.deepcopy` returns as itself is shared
safely instead (as :class:`dpstream._std_errors.PlanningRecord` already is).

Hand-written because neither numpy nor pandas offers a copy-on-write array for ``attrs``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KeptMeasurement", "PeriodsView", "SharedArray", "SharedDict", "share"]


class SharedArray(np.ndarray):
    """A read-only ndarray that ``copy.deepcopy`` (pandas' copy of ``attrs``) shares.

    Views of it stay shared and read-only; anything computed from it (a ufunc, arithmetic)
    is a plain ndarray.
    """

    def __deepcopy__(self, memo: dict) -> SharedArray:
        return self

    def __copy__(self) -> SharedArray:
        return self

    def __array_wrap__(self, array, context=None, return_scalar=False):
        out = np.asarray(array).view(np.ndarray)
        return out[()] if return_scalar else out


class SharedDict(dict):
    """A read-only dict (the release's hierarchy, ``{parent: [children]}``) that
    ``copy.deepcopy`` shares: at 100,000 feeders copying it cost 15 ms per column read.
    Its keys cannot be set or removed; its lists are not to be changed either."""

    def __deepcopy__(self, memo: dict) -> SharedDict:
        return self

    def __copy__(self) -> SharedDict:
        return self

    def _read_only(self, *args, **kwargs):
        raise TypeError("A release's attrs['hierarchy'] is read-only; copy it with dict(...).")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):
        return (SharedDict, (dict(self),))


def share(values: object) -> SharedArray | None:
    """``values`` as a read-only :class:`SharedArray` view (None stays None)."""
    if values is None:
        return None
    view = np.asarray(values).view(SharedArray)
    view.flags.writeable = False
    return view


class PeriodsView:
    """``to_periods(values, w).full`` without its stacked copy (issue 22): ``view[i]`` is period
    i, (N, w), the same C-contiguous array :func:`~dpstream.pipelines._frames.to_periods` holds,
    copied only when asked for (a month at 100,000 feeders is 1.16 GB a copy)."""

    __slots__ = ("_values", "_w", "shape")

    def __init__(self, values: np.ndarray, w: int) -> None:
        self._values, self._w = values, w
        self.shape = (values.shape[0] // w, values.shape[1], w)

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < self.shape[0]:
            raise IndexError(f"period {i} of {self.shape[0]}")
        return np.ascontiguousarray(self._values[i * self._w : (i + 1) * self._w].T)


class KeptMeasurement:
    """A period's :class:`planner.Measurement` as ``attrs["planning"]`` keeps it: no arrays of
    its own (issue 22: at 100,000 feeders x 30 days the kept values and noise were 2.3 GB).

    ``values`` are the period's rows of the release's ``attrs["measurements"]`` (T, N), the
    same numbers as the measurement's, transposed back to (N, r) on access; ``noise`` and
    ``sampled`` are rebuilt from the public plan and the mask by ``rebuild`` (the release's
    :func:`~dpstream.pipelines._period_steps.as_measurement`, which is how the private step
    made them): the same arrays, bit for bit, computed when read.
    """

    __slots__ = ("_measurements", "_lo", "_r", "_rebuild", "observed")

    def __init__(self, measurements, lo: int, r: int, rebuild, observed=None) -> None:
        self._measurements, self._lo, self._r = measurements, lo, r
        self._rebuild = rebuild  # (values (N, r), observed) -> the Measurement of this period
        self.observed = observed

    @property
    def values(self) -> np.ndarray:
        """(N, r) the period's measurements (a fresh C-contiguous copy)."""
        return np.ascontiguousarray(self._measurements[self._lo : self._lo + self._r].T)

    def _rebuilt(self):
        shape = (self._measurements.shape[1], self._r)  # the values do not enter noise, sampled
        return self._rebuild(np.broadcast_to(0.0, shape), self.observed)

    @property
    def noise(self) -> np.ndarray:
        """(N, r) noise variance of each measurement."""
        return self._rebuilt().noise

    @property
    def sampled(self) -> np.ndarray:
        """(N, r) True at the sampled (and observed) steps."""
        return self._rebuilt().sampled
