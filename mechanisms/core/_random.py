"""Sources of random bits for releases: the operating system's secure source, or a seed.

Every release draws its noise from a *bit source*: an object with ``random_raw(size)``
returning ``uint64`` words and ``spawn(n)`` returning independent children. Two exist:

* :class:`SecureBits`: a ChaCha20 keystream keyed from the operating system's CSPRNG
  (``os.urandom``, i.e. ``getrandom`` on Linux) and re-keyed on a fixed schedule. It is the
  default (``seed=None``) and the only source fit for a real release.
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

#: Forks seen by this process's children: bumped in every child right after ``os.fork``
#: (``os.register_at_fork``), so a :class:`SecureBits` made before a fork re-keys in the child.
_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class BitSource(Protocol):
    """Anything that yields uniformly random 64-bit words."""

    def random_raw(self, size: int) -> np.ndarray:  # pragma: no cover - protocol
        ...

    def spawn(self, n_children: int) -> list[BitSource]:  # pragma: no cover - protocol
        ...


class SecureBits:
    """Uniform 64-bit words from a user-space ChaCha20 keystream keyed from the OS source.

    The key (256 bits) and nonce come from ``os.urandom`` (``getrandom`` on Linux) when the
    first word is asked for; words are the ChaCha20 keystream (RFC 8439, through the
    ``cryptography`` library's OpenSSL binding), produced in 1 MiB chunks straight into the
    output array. This is what OpenSSL's RAND and the Linux kernel's own ``getrandom`` do: a
    stream cipher keyed from a seed of full entropy. It removes the system-call and copy cost
    of reading every byte from the kernel (3-4x faster for 10^7 Laplace draws here).

    Re-keying schedule (documented in ``docs/privacy.md``): a fresh key and nonce from
    ``os.urandom`` after every 2^30 bytes (1 GiB) of keystream, in every new process (a fork
    hook, ``os.register_at_fork``, marks every existing source stale in the child, and the
    process id is checked at each request as well, for forks that bypass Python's hooks), for every
    :meth:`spawn` child, and on unpickling (a copy sent to a Dask worker draws its own key, it
    never replays the sender's stream). Every release gets a new ``SecureBits`` (``seed=None``
    in :func:`bit_source`), hence its own key.

    Why not a library generator: numpy's bit generators are not cryptographic, and
    ``secrets``/``os.urandom`` alone cost one kernel copy per byte; ``cryptography`` supplies
    the cipher, this class only schedules keys and fills arrays.
    """

    __slots__ = ("_cipher", "_generation", "_pid", "_left")

    #: Bytes of keystream per key before a fresh key is drawn from the OS.
    REKEY_BYTES = 1 << 30
    #: Keystream is produced in chunks of this many bytes.
    _CHUNK = 1 << 20
    #: The plaintext the keystream is XORed into: one immutable block of zeros, shared, never
    #: written (allocating and faulting in fresh zeros per call cost 2-3x the cipher itself on
    #: the 512 KiB requests of the Gaussian sampler's passes).
    _ZEROS = memoryview(bytes(_CHUNK))

    def __init__(self) -> None:
        self._cipher = None
        self._generation = -1
        self._pid = -1
        self._left = 0

    def _rekey(self) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        key, nonce = os.urandom(32), os.urandom(16)
        self._cipher = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
        self._generation = _fork_generation
        self._pid = os.getpid()
        self._left = self.REKEY_BYTES

    def random_raw(self, size: int) -> np.ndarray:
        size = int(size)
        if size <= 0:
            return np.empty(0, dtype=np.uint64)
        out = np.empty(size, dtype="<u8")
        view = memoryview(out).cast("B")
        zeros = self._ZEROS
        done, total = 0, 8 * size
        while done < total:
            if self._generation != _fork_generation or self._pid != os.getpid() or self._left <= 0:
                self._rekey()
            n = min(len(zeros), total - done, self._left)
            self._cipher.update_into(zeros[:n], view[done : done + n])  # type: ignore[union-attr]
            self._left -= n
            done += n
        return out.view(np.uint64)

    def spawn(self, n_children: int) -> list[SecureBits]:
        # Each child keys itself from the OS on first use: no state is shared.
        return [SecureBits() for _ in range(int(n_children))]

    def __reduce__(self) -> tuple[type[SecureBits], tuple[()]]:
        # A pickled copy (e.g. sent to a Dask worker) starts with no key: it never replays
        # this object's keystream.
        return (SecureBits, ())

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
    """Uniform floats in (0, 1] from 53 random bits each: never 0, 1.0 with probability 2⁻⁵³.

    ``(k + 0.5) / 2**53`` for a uniform integer k in [0, 2**53): never 0 (so ``log`` is finite).
    For the largest k, ``k + 0.5`` needs 54 bits and rounds up to 2**53, so the result is
    exactly 1.0 with probability 2⁻⁵³; the callers only compare with it (``u < p``) or scale it
    inside a guarded search, where that changes a probability by at most 2⁻⁵³. Do not take
    ``log(1 − u)`` of it.
    """
    raw = bits.random_raw(int(size))
    return ((raw >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_POW_MINUS_53
