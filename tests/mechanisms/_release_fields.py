"""Walk the public fields of a release object; check that none is data-dependent (issue 11 §2).

A release object may hold released values (they depend on the noise) and public parameters
(identical for neighbouring inputs). Anything that is *deterministic given the data* but
*differs between neighbours* is a leak: the PAK threshold's noise scale (a function of the
smooth sensitivity) was one. :func:`assert_nothing_data_dependent` finds such fields without a
list of names: a field is noise-dependent if it changes with the seed on the same input;
every other field must be equal on a neighbouring input with the same seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

import numpy as np


def public_leaves(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) for every leaf reachable through public fields of ``obj``:
    dataclass fields (init=False ones included), tuples/lists, mappings, and the ``.privacy``
    record of objects that have one."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if not f.name.startswith("_"):
                yield from public_leaves(getattr(obj, f.name), f"{path}.{f.name}")
        if hasattr(type(obj), "privacy"):
            yield from public_leaves(obj.privacy.to_dict(), f"{path}.privacy")
    elif isinstance(obj, tuple | list):
        for i, item in enumerate(obj):
            yield from public_leaves(item, f"{path}[{i}]")
    elif isinstance(obj, dict | MappingProxyType):
        for key, item in obj.items():
            yield from public_leaves(item, f"{path}[{key!r}]")
    elif hasattr(obj, "__slots__") and type(obj).__module__.startswith("mechanisms"):
        # non-dataclass objects with slots, e.g. the privacy units
        for name in type(obj).__slots__:
            if not name.startswith("_"):
                yield from public_leaves(getattr(obj, name), f"{path}.{name}")
        yield path + ".<repr>", repr(obj)
    else:
        yield path, obj


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_nothing_data_dependent(
    release: Callable[[Any, Any], Any], data: Any, neighbour: Any, seeds: tuple = (0, 1, 2, 3)
) -> tuple[list[str], list[str]]:
    """Run ``release(values, seed)`` on ``data`` with several seeds and on ``neighbour`` with
    ``seeds[0]``; fail if a field that no seed changes differs on the neighbour.

    Returns (noise-dependent paths, public paths) so a test can also check that the released
    values are recognised as noise-dependent (the helper's power).
    """
    runs = [dict(public_leaves(release(data, s))) for s in seeds]
    other = dict(public_leaves(release(neighbour, seeds[0])))
    assert set(other) == set(runs[0]), "neighbours give objects of different shapes"
    noisy, public, leaks = [], [], []
    for path, value in runs[0].items():
        if any(not _same(value, run[path]) for run in runs[1:]):
            noisy.append(path)
        else:
            public.append(path)
            if not _same(value, other[path]):
                leaks.append(path)
    assert not leaks, f"data-dependent fields in the release object: {leaks}"
    return noisy, public
