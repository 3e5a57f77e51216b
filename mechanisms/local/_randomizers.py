"""Shared pieces of the local-DP mechanisms (Square Wave, Piecewise, Duchi, Hybrid; ToPL).

* :func:`check_local_epsilon`: ε of one local report, in (0, 50] (``exp(ε)`` must stay far from
  overflow; ε > 50 protects nothing anyway).
* :func:`uniform_ints`: exact uniform integers in [0, M) from the bit source's 64-bit words
  (rejection of the top ``2⁶⁴ mod M`` words, so no modulo bias; a shift when M is a power of
  two).
* :func:`bernoulli`: ``uniform_open(bits) < p``; the comparison of a 53-bit uniform with a double
  makes every such probability exact up to 2⁻⁵³, the deviation the noise module documents.

The release paths of the local mechanisms draw only through these and
:func:`~mechanisms.uniform_open` (never numpy's samplers).
"""

from __future__ import annotations

import numpy as np

from ..core._errors import ParameterError
from ..core._random import BitSource, uniform_open
from ..core._validation import check_positive

__all__ = ["MAX_LOCAL_EPSILON", "bernoulli", "check_local_epsilon", "uniform_ints"]

#: Largest ε accepted by the local mechanisms.
MAX_LOCAL_EPSILON = 50.0

_TWO_POW_64 = 1 << 64


def check_local_epsilon(value: object, owner: str) -> float:
    """Return ε as a float if it lies in (0, 50]."""
    eps = check_positive(value, "epsilon", owner)
    if eps > MAX_LOCAL_EPSILON:
        raise ParameterError(
            f"The 'epsilon' parameter of {owner} must be a float in (0, "
            f"{MAX_LOCAL_EPSILON:g}]. Got {eps!r} instead. A local report with ε > "
            f"{MAX_LOCAL_EPSILON:g} is essentially the raw value."
        )
    return eps


def uniform_ints(bits: BitSource, size: int, m: int) -> np.ndarray:
    """Exactly uniform integers in [0, m) (int64), from 64-bit words of ``bits``.

    Power of two m = 2ᵏ: the top k bits of a word. Otherwise a word w is accepted when
    w < ⌊2⁶⁴/m⌋·m and mapped to w mod m (every residue has the same number of preimages);
    rejected entries (probability < m/2⁶⁴) are redrawn.
    """
    size, m = int(size), int(m)
    if m < 1 or m >= 1 << 62:
        raise ValueError("uniform_ints needs 1 <= m < 2**62.")
    if m == 1 or size == 0:
        return np.zeros(size, dtype=np.int64)
    if m & (m - 1) == 0:
        shift = np.uint64(64 - (m.bit_length() - 1))
        return (bits.random_raw(size) >> shift).astype(np.int64)
    limit = np.uint64((_TWO_POW_64 // m) * m)
    mod = np.uint64(m)
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        raw = bits.random_raw(todo.size)
        ok = raw < limit
        out[todo[ok]] = (raw[ok] % mod).astype(np.int64)
        todo = todo[~ok]
    return out


def bernoulli(bits: BitSource, size: int, p: float) -> np.ndarray:
    """Booleans that are True with probability ``p`` (up to 2⁻⁵³), one 64-bit word each."""
    return uniform_open(bits, int(size)) < p
