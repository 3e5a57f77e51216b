"""Validation at the public boundary, with one message template.

The template follows scikit-learn's ``_param_validation``: "The 'epsilon' parameter of
plan_pak must be a float in (0, inf). Got -1 instead." Data checks say which rule the data
broke, never the values themselves nor how many entries broke it (a count of out-of-range
private values is itself data-dependent: it can reveal one individual's value).

Everything here runs before any noise is drawn or any budget charged: the bit source
(:func:`check_seed`) and the ledger (:func:`check_ledger`) are validated like any other argument,
and :func:`check_noise_range` refuses, up front, public parameters whose noise or lattice would
leave the range of exact doubles (e.g. ``bound=1e300``, which used to draw noise and then
overflow).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import TYPE_CHECKING

import numpy as np

from ._errors import DomainError, ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from ._budget import Budget, BudgetLedger
    from ._random import BitSource
    from ._units import PrivacyUnit

__all__ = [
    "NOISE_RANGE_BITS",
    "charge_ledger",
    "check_bool",
    "check_choice",
    "check_real_array",
    "check_fraction",
    "check_integer",
    "check_ledger",
    "check_noise_range",
    "check_positive",
    "check_probability",
    "check_seed",
    "check_stream",
    "clamp_stream",
]

#: Noise scales, bounds and released magnitudes must lie in [2**-400, 2**400]: there the
#: lattice spacing γ (≥ 2⁻²⁵ of the scale), γ², the noise variance and every lattice value are
#: normal doubles, far from overflow and underflow.
NOISE_RANGE_BITS = 400


def _shown(value: object) -> str:
    """A short repr of a *public* argument for a message (numpy scalars as plain numbers)."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # np.float64(1.0) -> 1.0: messages never show numpy reprs
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def _bad(name: str, owner: str, rule: str, value: object, hint: str = "") -> ParameterError:
    msg = f"The {name!r} parameter of {owner} must be {rule}. Got {_shown(value)} instead."
    if hint:
        msg += " " + hint
    return ParameterError(msg)


def _as_real(value: object, name: str, owner: str, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _bad(name, owner, rule, value)
    out = float(value)
    if not math.isfinite(out):
        raise _bad(name, owner, rule, value)
    return out


def check_positive(value: object, name: str, owner: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    rule = "a float in [0, inf)" if allow_zero else "a float in (0, inf)"
    out = _as_real(value, name, owner, rule)
    if out < 0 or (out == 0 and not allow_zero):
        raise _bad(name, owner, rule, value)
    return out


def check_probability(
    value: object, name: str, owner: str, *, closed_low: bool = True, closed_high: bool = False
) -> float:
    """Return ``value`` if it lies in the interval [0, 1) (ends configurable)."""
    lo = "[" if closed_low else "("
    hi = "]" if closed_high else ")"
    rule = f"a float in {lo}0, 1{hi}"
    out = _as_real(value, name, owner, rule)
    ok_low = out >= 0 if closed_low else out > 0
    ok_high = out <= 1 if closed_high else out < 1
    if not (ok_low and ok_high):
        raise _bad(name, owner, rule, value)
    return out


def check_fraction(value: object, name: str, owner: str) -> float:
    """Return ``value`` if it lies in the open interval (0, 1)."""
    return check_probability(value, name, owner, closed_low=False, closed_high=False)


def check_integer(
    value: object, name: str, owner: str, *, minimum: int = 1, maximum: int | None = None
) -> int:
    """Return ``value`` as an int if it is an integer in [minimum, maximum]."""
    upper = "inf" if maximum is None else str(maximum)
    rule = f"an int in [{minimum}, {upper}]"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise _bad(name, owner, rule, value)
    out = int(value)
    if out < minimum or (maximum is not None and out > maximum):
        raise _bad(name, owner, rule, value)
    return out


def check_bool(value: object, name: str, owner: str) -> bool:
    """Return ``value`` if it is a bool (``numpy.bool_`` included)."""
    if not isinstance(value, bool | np.bool_):
        raise _bad(name, owner, "a bool", value)
    return bool(value)


def check_choice(value: object, name: str, owner: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of the strings ``choices`` (a numpy array or a list holding
    a valid name is refused: ``x in choices`` would accept ``np.array(["laplace"])``)."""
    if not isinstance(value, str) or value not in choices:
        raise _bad(name, owner, f"one of {choices}", value)
    return value


def check_real_array(values: object, name: str, owner: str) -> np.ndarray:
    """``values`` as a float64 array of any shape, or a typed :class:`DomainError` for strings,
    mappings, complex numbers, None and ragged sequences (no check of finiteness or shape)."""
    return _real_array(values, name, owner)


def _real_array(values: object, name: str, owner: str, copy: bool = True) -> np.ndarray:
    """``values`` as a float64 copy (with ``copy=False``: the array itself when it already is
    float64), or a typed error for strings, mappings, complex numbers, None and other
    non-numbers (numpy's own ValueError/TypeError/ComplexWarning otherwise)."""
    rule = (
        f"The {name!r} argument of {owner} must be a one-dimensional sequence or array of "
        "real numbers"
    )
    if values is None or isinstance(values, str | bytes | dict | set | frozenset):
        raise DomainError(f"{rule}. Got {type(values).__name__} instead.")
    if hasattr(values, "keys") and not hasattr(values, "dtype"):  # other mappings
        raise DomainError(f"{rule}. Got {type(values).__name__} instead.")
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError):  # ragged nested sequences
        raise DomainError(f"{rule}. Got a ragged or mixed {type(values).__name__}.") from None
    if raw.dtype.kind == "O":  # e.g. Fractions or Decimals: convert, or refuse with a type
        if any(isinstance(v, complex | str | bytes) for v in raw.ravel()):
            raise DomainError(f"{rule}. Got complex numbers or strings.")
        try:
            return np.array(raw, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise DomainError(f"{rule}. Got non-numeric entries.") from None
    if raw.dtype.kind not in "biuf":
        kind = {"c": "complex numbers", "U": "strings", "S": "bytes", "M": "datetimes"}
        raise DomainError(f"{rule}. Got {kind.get(raw.dtype.kind, 'non-numeric entries')}.")
    return np.array(raw, dtype=np.float64, copy=True if copy else None)


def check_stream(
    values: object,
    name: str,
    owner: str,
    *,
    bound: float | None = None,
    lower: float = 0.0,
    min_length: int = 1,
    copy: bool = True,
) -> np.ndarray:
    """Return ``values`` as a read-only 1-D float64 copy after checking its domain
    (``copy=False``: the caller's float64 array itself, unchanged, for callers that only read
    it and keep nothing of it, e.g. the batch BT release at n = 2.5·10⁷).

    Rules: real numbers (no strings, mappings, complex), one-dimensional, at least
    ``min_length`` entries, every entry finite and, when ``bound`` is given, inside
    ``[lower, bound]``. The error names the rule only: never the offending values nor how many
    there are (both depend on private data).
    """
    arr = _real_array(values, name, owner, copy)
    if arr.ndim != 1:
        raise DomainError(
            f"The {name!r} argument of {owner} must be one-dimensional. Got an array of "
            f"shape {arr.shape}. Pass one stream at a time."
        )
    if arr.size < min_length:
        raise DomainError(
            f"The {name!r} argument of {owner} must hold at least {min_length} value(s). "
            f"Got {arr.size}."
        )
    if not np.isfinite(arr).all():
        raise DomainError(
            f"The {name!r} argument of {owner} must hold finite numbers only (no NaN or "
            "infinity). Remove or impute them before releasing."
        )
    if bound is not None and ((arr < lower) | (arr > bound)).any():
        raise DomainError(
            f"The {name!r} argument of {owner} must lie in [{lower:g}, {bound:g}] (the "
            "declared bound); values outside it are refused. Clip the data to the bound or "
            "declare a larger public bound."
        )
    if copy:  # ours: read-only; without a copy the caller's array is left as it was
        arr.setflags(write=False)
    return arr


def clamp_stream(
    values: object, name: str, owner: str, *, bound: float, min_length: int = 0
) -> tuple[np.ndarray, int]:
    """Values of a *streaming* input clamped to [0, bound], and how many were clamped.

    A streaming mechanism has already released earlier steps: raising on a value above the
    bound would reveal that event (OpenDP pads rather than raising for the same reason), so
    out-of-range values, ±inf included, are clamped to [0, B], as the lattice code clips them
    anyway. The count is for an analysis object only, never for a message or a release. What
    cannot be clamped (non-numbers, NaN, the wrong shape) is refused with a typed error before
    the batch is consumed.
    """
    arr = _real_array(values, name, owner)
    if arr.ndim != 1 or arr.size < min_length:
        raise DomainError(
            f"The {name!r} argument of {owner} must be one-dimensional with at least "
            f"{min_length} value(s). Got an array of shape {arr.shape}."
        )
    if np.isnan(arr).any():
        raise DomainError(
            f"The {name!r} argument of {owner} must hold numbers, not NaN (a NaN cannot be "
            f"clamped to [0, {bound:g}]). Impute missing values before pushing them."
        )
    outside = (arr < 0.0) | (arr > bound)
    clamped = int(outside.sum())
    if clamped:
        np.clip(arr, 0.0, bound, out=arr)
    arr.setflags(write=False)
    return arr, clamped


def check_seed(seed: object, owner: str) -> BitSource:
    """The bit source for ``seed`` (see :func:`~mechanisms.bit_source`), or a typed error.

    Accepted: None (the operating system's secure source), a non-negative int, a
    ``numpy.random.SeedSequence``, or an object with ``random_raw`` and ``spawn``.
    """
    from ._random import bit_source

    if seed is None or (hasattr(seed, "random_raw") and hasattr(seed, "spawn")):
        return bit_source(seed)
    if isinstance(seed, np.random.SeedSequence):
        return bit_source(seed)
    if isinstance(seed, Integral) and not isinstance(seed, bool | np.bool_) and int(seed) >= 0:
        return bit_source(int(seed))
    raise _bad(
        "seed",
        owner,
        "None (secure source, for releases), a non-negative int, a numpy SeedSequence or a "
        "bit source",
        seed,
    )


def check_ledger(ledger: object, owner: str) -> BudgetLedger | None:
    """Return ``ledger`` if it is None or a :class:`~mechanisms.BudgetLedger`."""
    from ._budget import BudgetLedger

    if ledger is not None and not isinstance(ledger, BudgetLedger):
        raise _bad("ledger", owner, "a BudgetLedger or None", ledger)
    return ledger


def charge_ledger(
    ledger: BudgetLedger | None, budget: Budget, owner: str, unit: PrivacyUnit
) -> None:
    """Charge ``budget`` for a release of unit ``unit`` (call after validation, before any draw).

    Without a ledger nothing is recorded: the caller accepts the release's own cost.
    """
    if ledger is not None:
        ledger.charge(budget, owner, unit=unit)


def check_noise_range(owner: str, names: str, **quantities: float) -> None:
    """Refuse public quantities (noise scales, bounds, magnitudes) outside
    [2⁻⁴⁰⁰, 2⁴⁰⁰] (:data:`NOISE_RANGE_BITS`), before any work.

    ``names`` lists the arguments the quantities derive from, for the message, e.g.
    ``check_noise_range("binary_tree_release", "'bound' and 'epsilon'", scale=L * B / eps)``.
    """
    lo, hi = math.ldexp(1.0, -NOISE_RANGE_BITS), math.ldexp(1.0, NOISE_RANGE_BITS)
    for what, value in quantities.items():
        if not (lo <= value <= hi):  # also catches NaN and inf
            raise ParameterError(
                f"The {names} parameters of {owner} give a {what.replace('_', ' ')} of "
                f"{value:.3g}, outside [2^-{NOISE_RANGE_BITS}, 2^{NOISE_RANGE_BITS}] where the "
                "noise lattice stays exact in floating point. Express the data in units closer "
                "to 1 or choose an epsilon closer to 1."
            )
