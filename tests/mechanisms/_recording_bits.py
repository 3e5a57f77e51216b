"""A bit source for tests that proves whether (and how much) randomness was drawn."""

from __future__ import annotations

import numpy as np


class RecordingBits:
    """A seeded PCG64 bit source that counts the 64-bit words drawn.

    ``refuse=True`` raises on any draw (nothing may be drawn, e.g. before validation fails);
    ``spawn=False`` raises when a child source is requested (so that every draw is counted
    here); otherwise children are fresh recording sources seeded 0, 1, ... and ``spawned``
    counts them.
    """

    def __init__(self, seed: int = 0, *, refuse: bool = False, spawn: bool = True) -> None:
        self._inner = np.random.PCG64(seed)
        self.refuse = refuse
        self.allow_spawn = spawn
        self.words = 0
        self.spawned = 0

    def random_raw(self, size: int) -> np.ndarray:
        if self.refuse:
            raise AssertionError("bits were drawn")
        self.words += int(size)
        return self._inner.random_raw(size)

    def spawn(self, n_children: int) -> list:
        if not self.allow_spawn:
            raise AssertionError("spawn was called")
        self.spawned += int(n_children)
        return [RecordingBits(i) for i in range(n_children)]
