"""Sources of random bits for releases: the operating system's secure source, or a seed.

Every release draws its noise from a *bit source*: an object with ``random_raw(size)``
returning ``uint64`` words and ``spawn(n)`` returning independent children. Two exist:

* :class:`SecureBits` reads the operating system's CSPRNG (``os.urandom``, i.e. ``getrandom``
  on Linux). It is the default (``seed=None``) and the only source fit for a real release.
* a seeded ``numpy.random.PCG64`` (which has the same two methods), for tests and
  experiments only: its output is reproducible, so anyone who knows the seed can subtract the
  noise. Callers label seeded output as not for release.

There is no module-level generator and no global seed (SPEC 7).
"""

from __future__ import annotations

import os
from typing import Protocol

import numpy as np

__all__ = ["BitSource", "SecureBits", "bit_source", "uniform_open"]

_TWO_POW_MINUS_53 = 2.0**-53


class BitSource(Protocol):
    """Anything that yields uniformly random 64-bit words."""

    def random_raw(self, size: int) -> np.ndarray:  # pragma: no cover - protocol
        ...

    def spawn(self, n_children: int) -> list[BitSource]:  # pragma: no cover - protocol
        ...


class SecureBits:
    """Uniform 64-bit words from the operating system's secure random source.

    ``os.urandom`` is the interface Python documents as suitable for cryptographic use; it is
    read in one call per request, so a vector of 10⁷ words costs one system call's worth of
    ChaCha20 output (~80 MB), not 10⁷ Python calls.
    """

    __slots__ = ()

    def random_raw(self, size: int) -> np.ndarray:
        size = int(size)
        if size <= 0:
            return np.empty(0, dtype=np.uint64)
        return np.frombuffer(os.urandom(8 * size), dtype="<u8").astype(np.uint64, copy=False)

    def spawn(self, n_children: int) -> list[SecureBits]:
        # Every read of the OS source is independent: children need no state of their own.
        return [SecureBits() for _ in range(int(n_children))]

    def __repr__(self) -> str:
        return "SecureBits()"


def bit_source(seed: int | np.random.SeedSequence | BitSource | None = None) -> BitSource:
    """Return the bit source for ``seed``.

    Parameters
    ----------
    seed
        ``None`` (default): the operating system's secure source, for real releases. An int
        or ``numpy.random.SeedSequence``: a reproducible PCG64 stream, for tests and
        experiments only (not for release). An existing bit source is returned unchanged.
    """
    if seed is None:
        return SecureBits()
    if hasattr(seed, "random_raw") and hasattr(seed, "spawn"):
        return seed  # type: ignore[return-value]
    return np.random.PCG64(seed)


def uniform_open(bits: BitSource, size: int) -> np.ndarray:
    """Uniform floats in the open interval (0, 1) from 53 random bits each.

    ``(k + 0.5) / 2**53`` for a uniform integer k in [0, 2**53): never 0 (so ``log`` is finite)
    and never 1.
    """
    raw = bits.random_raw(int(size))
    return ((raw >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_POW_MINUS_53
