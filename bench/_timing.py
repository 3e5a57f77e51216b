"""Best-of-N wall time, shared by the benchmarks (run as ``python bench/bench_*.py``).

Benchmarks print ratios against a baseline timed the same way in the same process; the best
of a few repeats is the least noisy estimate of a function's own cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    """The best wall time of ``repeat`` calls of ``fn`` (seconds) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def best_of(fn: Callable[[], object], repeat: int = 1) -> float:
    """The best wall time of ``repeat`` calls of ``fn``, in seconds."""
    return timed(fn, repeat)[0]
