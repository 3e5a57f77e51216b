"""Renamed public names (issue 12, one vocabulary): the old name still works, with a warning.

Two helpers serve every rename of the toolkit, so the message is the same everywhere:

* :func:`renamed_keyword` resolves a function's old keyword (e.g. ``alpha`` of
  :func:`mechanisms.tops_release`, now ``smoothing``) against the new one;
* :func:`renamed_attribute` is a read-only property under the old attribute name (e.g.
  ``PakPlan.alpha``, now ``PakPlan.error_bound``).

Both raise :class:`DeprecationWarning` naming the new name, which the tests check with
``pytest.warns``. Passing both the old and the new keyword is a :class:`ParameterError`.
"""

from __future__ import annotations

import warnings

from ._errors import ParameterError

__all__ = ["UNSET", "renamed_attribute", "renamed_keyword"]


class _Unset:
    """Default of a renamed keyword: tells "not passed" apart from every real value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


UNSET = _Unset()


def _message(kind: str, old: str, new: str, owner: str) -> str:
    return (
        f"The '{old}' {kind} of {owner} is renamed '{new}' (issue 12: one meaning per word); "
        f"'{old}' will be removed. Use {new} instead."
    )


def renamed_keyword(
    new_value: object,
    old_value: object,
    *,
    new: str,
    old: str,
    owner: str,
    default: object,
    stacklevel: int = 3,
) -> object:
    """The value of keyword ``new`` given the deprecated keyword ``old`` (both may be unset).

    Warns (``DeprecationWarning``; ``stacklevel`` 3 points at the caller of the public
    function that calls this) when ``old`` is passed; raises :class:`ParameterError` when both
    are.
    """
    if old_value is UNSET:
        return default if new_value is UNSET else new_value
    if new_value is not UNSET:
        raise ParameterError(
            f"The '{old}' parameter of {owner} is the old name of '{new}': pass '{new}' only. "
            f"Got both {old}={old_value!r} and {new}={new_value!r}."
        )
    warnings.warn(_message("parameter", old, new, owner), DeprecationWarning, stacklevel=stacklevel)
    return old_value


def renamed_attribute(old: str, new: str, owner: str) -> property:
    """A read-only property ``old`` returning attribute ``new``, with a ``DeprecationWarning``."""

    def getter(self: object) -> object:
        warnings.warn(_message("attribute", old, new, owner), DeprecationWarning, stacklevel=2)
        return getattr(self, new)

    return property(getter, doc=f"Deprecated name of :attr:`{new}` (issue 12).")
