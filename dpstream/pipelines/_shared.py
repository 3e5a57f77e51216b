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

__all__ = ["SharedArray", "SharedDict", "share"]


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
