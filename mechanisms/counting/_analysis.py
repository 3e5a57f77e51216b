"""Analysis objects of streaming mechanisms: facts about the private input, never released.

A release object holds only released values and public parameters (issue 11 §2). What a
streaming mechanism knows about its input beyond that (how many values it had to clamp to the
declared bound) lives here, returned only when asked for (``counter.analysis()``), and is never
written by the CLI, the report or a privacy record.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StreamAnalysis"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamAnalysis:
    """What a streaming mechanism did to its (private) input. Data-dependent: never publish."""

    steps: int
    """Values consumed so far (public: the caller pushed them)."""
    clamped: int
    """Values that lay outside [0, B] and were clamped to it (private)."""
